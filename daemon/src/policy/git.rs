//! git: its global options, the settings that run shell code or change what a push
//! does, aliases defined in the same command, and the two built-in git rules.

use super::paths::{self, Places, Target};
use super::scope::Scope;
use super::words::{has_glob, live_globs, plain, to_shell};
use super::wrappers::{Next, Step};

/// One `git` invocation, past its global options.
pub struct Git<'a> {
    /// `-c key=value` settings: keys lowercased, values plain.
    pub settings: Vec<(String, String)>,
    /// The global options, as given.
    pub globals: &'a [String],
    pub sub: String,
    pub args: &'a [String],
}

/// Splits git's global options (`-C dir`, `-c k=v`, `--git-dir=...`) from the
/// subcommand. `None` when there is no subcommand.
pub fn parse(args: &[String]) -> Option<Git<'_>> {
    let mut settings = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = plain(&args[i]);
        match arg.as_ref() {
            "-c" => {
                if let Some(setting) = args.get(i + 1).and_then(|s| setting(&plain(s))) {
                    settings.push(setting);
                }
                i += 2;
            }
            "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
            | "--super-prefix" | "--exec-path" | "--list-cmds" => i += 2,
            _ if arg.starts_with('-') => i += 1,
            _ => {
                return Some(Git {
                    settings,
                    globals: &args[..i],
                    sub: arg.into_owned(),
                    args: &args[i + 1..],
                });
            }
        }
    }
    None
}

/// `key=value` (a key alone is `true`), the key lowercased as git compares it. The
/// subsection of a three-part key keeps its case, but lowercasing it too only merges
/// names git keeps apart, which errs toward checking more.
fn setting(text: &str) -> Option<(String, String)> {
    let (key, value) = text.split_once('=').unwrap_or((text, "true"));
    (!key.is_empty()).then(|| (key.to_ascii_lowercase(), value.to_owned()))
}

/// `git config [options] KEY VALUE` or `git config set KEY VALUE`: the setting made.
pub fn config_setting(args: &[String]) -> Option<(String, String)> {
    let git = parse(args)?;
    if git.sub != "config" {
        return None;
    }
    let mut words = Vec::new();
    let mut i = 0;
    while i < git.args.len() {
        let arg = plain(&git.args[i]);
        match arg.as_ref() {
            "--file" | "-f" | "--blob" | "--type" | "--default" | "--comment" | "--value" => {
                i += 2;
                continue;
            }
            _ if arg.starts_with('-') => {}
            _ => words.push(arg.into_owned()),
        }
        i += 1;
    }
    let words = match words.first().map(String::as_str) {
        Some("set") => &words[1..],
        _ => &words[..],
    };
    match words {
        [key, value, ..] => Some((key.to_ascii_lowercase(), value.clone())),
        _ => None,
    }
}

/// The shell code a setting makes git run, if it is one that does.
fn code_of(key: &str, value: &str) -> Option<String> {
    let last = key.rsplit('.').next().unwrap_or(key);
    let is_bool = matches!(
        value,
        "true" | "false" | "yes" | "no" | "on" | "off" | "0" | "1" | ""
    );
    let runs = match key.split('.').next().unwrap_or(key) {
        "alias" | "credential" => return value.strip_prefix('!').map(str::to_owned),
        "core" => matches!(last, "pager" | "editor" | "sshcommand" | "fsmonitor") && !is_bool,
        "sequence" => last == "editor",
        "pager" => !is_bool,
        "diff" => matches!(last, "external" | "textconv" | "command"),
        "filter" => matches!(last, "clean" | "smudge" | "process"),
        "merge" => last == "driver",
        _ => false,
    };
    runs.then(|| value.to_owned())
}

/// What a git command runs besides git: shell code from `-c` settings (`core.pager`,
/// `!` aliases, ...) and from a `git config` that sets them, and the command an alias
/// defined in this command stands for.
pub fn step<'a>(args: &'a [String], scope: &Scope<'_>) -> Step<'a> {
    let Some(git) = parse(args) else {
        return Step::Final;
    };
    let mut next = Vec::new();
    for (key, value) in &git.settings {
        if let Some(code) = code_of(key, value) {
            next.push(Next::code(code));
        }
    }
    if let Some((key, value)) = config_setting(args)
        && let Some(code) = code_of(&key, &value)
    {
        next.push(Next::code(code));
    }
    let alias_key = format!("alias.{}", git.sub.to_ascii_lowercase());
    let config = scope.all_git_config();
    let aliases = git
        .settings
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(config)
        .filter(|(key, _)| *key == alias_key);
    for (_, value) in aliases {
        if let Some(code) = value.strip_prefix('!') {
            // git runs `sh -c 'CODE "$@"' CODE ARGS`.
            let args: Vec<String> = git.args.iter().map(|a| to_shell(a)).collect();
            next.push(Next::code(format!("{code} {}", args.join(" "))));
        } else {
            let mut argv = vec!["git".to_owned()];
            argv.extend(git.globals.iter().cloned());
            argv.extend(value.split_whitespace().map(str::to_owned));
            argv.extend(git.args.iter().cloned());
            next.push(Next::Argv(argv));
        }
    }
    if next.is_empty() {
        Step::Final
    } else {
        Step::Many(next)
    }
}

/// Long options of `git add`, to read the unique prefixes git accepts (`--al`).
const ADD_OPTIONS: &[&str] = &[
    "all",
    "no-all",
    "ignore-removal",
    "no-ignore-removal",
    "dry-run",
    "no-dry-run",
    "verbose",
    "no-verbose",
    "force",
    "no-force",
    "interactive",
    "patch",
    "edit",
    "update",
    "intent-to-add",
    "refresh",
    "ignore-errors",
    "ignore-missing",
    "renormalize",
    "chmod",
    "pathspec-from-file",
    "pathspec-file-nul",
    "sparse",
    "no-warn-embedded-repo",
];

/// Long options of `git push`.
const PUSH_OPTIONS: &[&str] = &[
    "all",
    "branches",
    "mirror",
    "delete",
    "tags",
    "follow-tags",
    "no-follow-tags",
    "dry-run",
    "porcelain",
    "force",
    "force-with-lease",
    "no-force-with-lease",
    "force-if-includes",
    "no-force-if-includes",
    "repo",
    "set-upstream",
    "thin",
    "no-thin",
    "quiet",
    "verbose",
    "progress",
    "no-progress",
    "prune",
    "no-prune",
    "recurse-submodules",
    "no-recurse-submodules",
    "verify",
    "no-verify",
    "signed",
    "no-signed",
    "atomic",
    "no-atomic",
    "push-option",
    "ipv4",
    "ipv6",
    "receive-pack",
    "exec",
];

/// A long option as git reads it: exact, or a unique prefix of one it knows.
fn long_option<'o>(arg: &str, known: &[&'o str]) -> Option<&'o str> {
    let name = arg.strip_prefix("--")?.split('=').next()?;
    if let Some(exact) = known.iter().find(|k| **k == name) {
        return Some(exact);
    }
    let mut matches = known.iter().filter(|k| k.starts_with(name));
    match (matches.next(), matches.next()) {
        (Some(only), None) if !name.is_empty() => Some(only),
        _ => None,
    }
}

/// Options and operands of a git subcommand, `--` ending the options.
struct Split<'a> {
    /// Long options resolved to their full names.
    long: Vec<&'static str>,
    /// Every short option letter.
    short: String,
    operands: Vec<&'a String>,
}

fn split<'a>(
    args: &'a [String],
    known: &[&'static str],
    takes_value: &[&str],
    short_values: &str,
) -> Split<'a> {
    let mut out = Split {
        long: Vec::new(),
        short: String::new(),
        operands: Vec::new(),
    };
    let mut i = 0;
    while i < args.len() {
        let arg = plain(&args[i]);
        if arg == "--" {
            out.operands.extend(&args[i + 1..]);
            break;
        }
        if arg.starts_with("--") {
            if let Some(option) = long_option(&arg, known) {
                out.long.push(option);
                if takes_value.contains(&option) && !arg.contains('=') {
                    i += 1;
                }
            }
        } else if arg.len() > 1 && arg.starts_with('-') {
            for (at, c) in arg[1..].char_indices() {
                out.short.push(c);
                if short_values.contains(c) {
                    if at + c.len_utf8() == arg.len() - 1 {
                        i += 1;
                    }
                    break;
                }
            }
        } else {
            out.operands.push(&args[i]);
        }
        i += 1;
    }
    out
}

/// `git add` (or `stage`) that takes in the whole tree: `-A`/`--all` (or
/// `--no-ignore-removal`) without a pathspec, a pathspec naming the working directory
/// or one above it (`.`, `..`, `$PWD`, `:/`, `:(top)`, or a glob that can match every
/// path there, as `*`, `**` and `[a-z]*` can), only excluding
/// pathspecs, or pathspecs read from a file. Dry runs are allowed.
pub fn add_blind(args: &[String], places: &Places, cwds: &[Target]) -> bool {
    let Some(git) = parse(args) else { return false };
    if git.sub != "add" && git.sub != "stage" {
        return false;
    }
    let split = split(git.args, ADD_OPTIONS, &["chmod", "pathspec-from-file"], "");
    if split.short.contains('n') || split.long.contains(&"dry-run") {
        return false;
    }
    if split.long.contains(&"pathspec-from-file") {
        return true;
    }
    if split.operands.is_empty() {
        return split.short.contains('A')
            || split.long.contains(&"all")
            || split.long.contains(&"no-ignore-removal");
    }
    let mut positive = false;
    for operand in &split.operands {
        match pathspec(operand) {
            Pathspec::Exclude => {}
            Pathspec::Top(rest) => {
                positive = true;
                if whole_tree(&rest, places, &[]) {
                    return true;
                }
            }
            Pathspec::Here(rest) => {
                positive = true;
                if whole_tree(&rest, places, cwds) {
                    return true;
                }
            }
        }
    }
    !positive
}

enum Pathspec {
    /// `:!x`, `:^x`, `:(exclude)x`: takes nothing in by itself.
    Exclude,
    /// `:/x`, `:(top)x`: from the top of the tree.
    Top(String),
    /// From the working directory.
    Here(String),
}

/// A pathspec's magic and its path, as a pattern whose globs git will expand.
fn pathspec(operand: &str) -> Pathspec {
    let path = live_globs(operand);
    let Some(magic) = path.strip_prefix(':') else {
        return Pathspec::Here(path);
    };
    let (words, rest): (Vec<&str>, &str) = if let Some(long) = magic.strip_prefix('(') {
        let (inside, rest) = long.split_once(')').unwrap_or((long, ""));
        (inside.split(',').collect(), rest)
    } else {
        let end = magic
            .find(|c: char| !matches!(c, '/' | '!' | '^'))
            .unwrap_or(magic.len());
        let rest = &magic[end..];
        let words = magic[..end]
            .chars()
            .map(|c| match c {
                '/' => "top",
                _ => "exclude",
            })
            .collect();
        (words, rest.strip_prefix(':').unwrap_or(rest))
    };
    if words.iter().any(|w| w.starts_with("exclude")) {
        Pathspec::Exclude
    } else if words.contains(&"top") {
        Pathspec::Top(rest.to_owned())
    } else {
        Pathspec::Here(rest.to_owned())
    }
}

/// Whether a path, with trailing globs that can match everything ([`broad_glob`]) left off,
/// names the working directory or one above it. With no `cwds`, it is read from the
/// top of the tree, where only an empty path is the whole.
fn whole_tree(path: &str, places: &Places, cwds: &[Target]) -> bool {
    let mut path = path.trim_end_matches('/');
    while let Some(last) = path.rsplit('/').next().filter(|l| broad_glob(l)) {
        path = path[..path.len() - last.len()].trim_end_matches('/');
    }
    if path.is_empty() {
        return true;
    }
    if cwds.is_empty() {
        return path.split('/').all(|part| matches!(part, "" | "."));
    }
    paths::is_workdir_or_above(path, places, cwds)
}

/// Whether a glob component of a pathspec can match every path below it: nothing but
/// wildcards, bracket expressions and dots (`*`, `**`, `?*`, `[a-z]*`, `[!.]*`, `.*`).
/// git's wildcards match across `/` (a pathspec is not a shell glob), so `[a-z]*`
/// takes in every path that starts with a lowercase letter, `src/` and all, which in
/// most trees is all of them; a literal name or extension (`*.rs`, `test_*`) scopes it.
fn broad_glob(component: &str) -> bool {
    if !has_glob(component) {
        return false;
    }
    let mut chars = component.chars();
    while let Some(c) = chars.next() {
        match c {
            // `]` too: the end of a class inside a bracket (`[[:alpha:]]`) is met here.
            '*' | '?' | '.' | ']' => {}
            // A bracket expression is one wildcard character; `]` first (after `!` or
            // `^`) is a member. Unclosed, the rest is taken as one (closed: broad).
            '[' => {
                let (mut at_start, mut negated) = (true, false);
                for inside in chars.by_ref() {
                    if inside == ']' && !at_start {
                        break;
                    }
                    if at_start && !negated && matches!(inside, '!' | '^') {
                        negated = true;
                        continue;
                    }
                    at_start = false;
                }
            }
            _ => return false,
        }
    }
    true
}

/// `git push` that force-updates the remote: `--force`/`-f`, `--mirror`, a `+refspec`,
/// or a `remote.*.push` of `+...` or `remote.*.mirror` set with `-c` or by a
/// `git config` in the same command. `--force-with-lease` alone is the safe form.
pub fn push_forced(args: &[String], scope: &Scope<'_>) -> bool {
    let Some(git) = parse(args) else { return false };
    if git.sub != "push" {
        return false;
    }
    let split = split(
        git.args,
        PUSH_OPTIONS,
        &["repo", "push-option", "receive-pack", "exec"],
        "o",
    );
    if split.short.contains('n') || split.long.contains(&"dry-run") {
        return false;
    }
    if split.short.contains('f') || split.long.contains(&"force") || split.long.contains(&"mirror")
    {
        return true;
    }
    let plus_refspec = split
        .operands
        .iter()
        .skip(1)
        .any(|a| plain(a).starts_with('+'));
    let config = scope.all_git_config();
    let forced_setting = git
        .settings
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .chain(config)
        .any(|(key, value)| {
            key.starts_with("remote.")
                && ((key.ends_with(".push") && value.starts_with('+'))
                    || (key.ends_with(".mirror") && !matches!(value, "false" | "no" | "off" | "0")))
        });
    plus_refspec || forced_setting
}

//! What each wrapper runs, and the built-in rules.

/// What to do with one simple command.
pub enum Step<'a> {
    /// A wrapper: check the command it runs.
    Run(&'a [String]),
    /// A shell string (`bash -c`, `eval`, `env -S`): parse it and check that.
    Source(String),
    /// Commands it runs besides itself (`find -exec`).
    Commands(Vec<&'a [String]>),
    /// No wrapper: apply the rules.
    Final,
}

const SHELLS: &[&str] = &["bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "busybox"];

pub fn step<'a>(name: &str, args: &'a [String]) -> Step<'a> {
    match name {
        "sudo" | "doas" => run_after_options(
            args,
            &[
                "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "-R",
            ],
            true,
        ),
        "env" => env(args),
        "command" => {
            // `command -v NAME` only looks NAME up.
            if args
                .iter()
                .take_while(|a| a.starts_with('-'))
                .any(|a| a.contains('v') || a.contains('V'))
            {
                return Step::Final;
            }
            run_after_options(args, &[], false)
        }
        "builtin" | "nohup" | "time" | "nocorrect" | "setsid" | "chronic" => {
            run_after_options(args, &[], false)
        }
        "exec" => run_after_options(args, &["-a"], false),
        "nice" => run_after_options(args, &["-n"], false),
        "ionice" => run_after_options(args, &["-c", "-n", "-p", "-P", "-u"], false),
        "stdbuf" => run_after_options(args, &["-i", "-o", "-e"], false),
        "timeout" => {
            let rest = skip_options(args, &["-s", "-k"], false);
            // The first word after the options is the duration.
            Step::Run(rest.get(1..).unwrap_or(&[]))
        }
        "xargs" => run_after_options(
            args,
            &[
                "-I",
                "-L",
                "-n",
                "-P",
                "-s",
                "-d",
                "-E",
                "-a",
                "--delimiter",
                "--arg-file",
            ],
            false,
        ),
        "eval" => Step::Source(args.join(" ")),
        "find" => find_exec(args),
        shell if SHELLS.contains(&shell) => shell_string(args),
        _ => Step::Final,
    }
}

/// The words after a wrapper's options. `takes_value` lists the options whose value is
/// the next word; `assignments` skips `NAME=value` words too (sudo, env).
fn skip_options<'a>(args: &'a [String], takes_value: &[&str], assignments: bool) -> &'a [String] {
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if arg == "--" {
            return &args[i + 1..];
        }
        if arg.starts_with('-') && arg.len() > 1 {
            let option = arg.split('=').next().unwrap_or(arg);
            i += if takes_value.contains(&option) && !arg.contains('=') {
                2
            } else {
                1
            };
        } else if (assignments && is_assignment(arg)) || arg == "-" {
            // `env -` is `env -i`.
            i += 1;
        } else {
            return &args[i..];
        }
    }
    &[]
}

fn run_after_options<'a>(args: &'a [String], takes_value: &[&str], assignments: bool) -> Step<'a> {
    Step::Run(skip_options(args, takes_value, assignments))
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                && !name.as_bytes()[0].is_ascii_digit()
        }
        None => false,
    }
}

/// `env [-i] [-u NAME] [-C DIR] [NAME=value]... COMMAND`, and `env -S 'STRING'`.
fn env(args: &[String]) -> Step<'_> {
    for (i, arg) in args.iter().enumerate() {
        if !arg.starts_with('-') {
            break;
        }
        if let Some(string) = arg.strip_prefix("--split-string=") {
            return Step::Source(string.to_owned());
        }
        if arg == "-S" || arg == "--split-string" {
            return Step::Source(args[i + 1..].join(" "));
        }
        if let Some(string) = arg.strip_prefix("-S") {
            return Step::Source(
                [string.to_owned()]
                    .into_iter()
                    .chain(args[i + 1..].iter().cloned())
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
    }
    run_after_options(args, &["-u", "-C", "--unset", "--chdir"], true)
}

/// `bash [options] -c STRING`: the string is the first word after the options. Without
/// `-c` the shell runs a script file or reads stdin, which cannot be checked here.
fn shell_string(args: &[String]) -> Step<'_> {
    let mut has_c = false;
    for (i, arg) in args.iter().enumerate() {
        if arg == "--" || !arg.starts_with('-') && !arg.starts_with('+') {
            return match (has_c, args.get(i + usize::from(arg == "--"))) {
                (true, Some(string)) => Step::Source(string.clone()),
                _ => Step::Final,
            };
        }
        if arg == "-o" || arg == "+o" || arg == "-O" || arg == "+O" || arg == "--rcfile" {
            // These take a value; skipping it keeps the loop on options.
            continue;
        }
        if !arg.starts_with("--") && arg[1..].contains('c') {
            has_c = true;
        }
    }
    Step::Final
}

/// `find ... -exec CMD ARGS ;` (and `-execdir`, `-ok`, `-okdir`).
fn find_exec(args: &[String]) -> Step<'_> {
    let mut commands = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if matches!(args[i].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let end = args[start..]
                .iter()
                .position(|a| a == ";" || a == "+")
                .map_or(args.len(), |p| start + p);
            commands.push(&args[start..end]);
            i = end;
        }
        i += 1;
    }
    if commands.is_empty() {
        Step::Final
    } else {
        Step::Commands(commands)
    }
}

/// A built-in rule: an id, a test on the command name and its arguments (wrappers
/// already removed), and what to do instead.
pub struct BuiltinRule {
    pub id: &'static str,
    pub matches: fn(&str, &[String]) -> bool,
    pub message: &'static str,
}

pub const BUILTIN_RULES: &[BuiltinRule] = &[
    BuiltinRule {
        id: "git-add-blind",
        matches: git_add_blind,
        message: "`git add -A`, `git add .`, `--all` and `*` stage every change in the tree, \
                  including files that were never meant to be committed. Stage the files you \
                  changed by name: git add path/to/file (git status shows them).",
    },
    BuiltinRule {
        id: "git-push-force",
        matches: git_push_force,
        message: "a force push (--force, -f, +refspec) overwrites the remote branch and can \
                  destroy others' commits. Use git push --force-with-lease, which refuses when \
                  the remote has moved.",
    },
    BuiltinRule {
        id: "rm-dangerous",
        matches: rm_dangerous,
        message: "a recursive rm of /, a top-level system directory, ~, $HOME, .git or * \
                  would destroy far more than intended. Remove the specific paths you mean, \
                  e.g. rm -rf ./build.",
    },
];

/// Git's subcommand and its arguments, past git's own options (`-C dir`, `-c k=v`, ...).
fn git_subcommand(args: &[String]) -> Option<(&str, &[String])> {
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        match arg {
            "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
            | "--super-prefix" => i += 2,
            _ if arg.starts_with('-') => i += 1,
            _ => return Some((arg, &args[i + 1..])),
        }
    }
    None
}

/// Arguments before `--` that are options: long ones whole, short clusters split.
fn has_flag(args: &[String], short: char, long: &str) -> bool {
    args.iter().take_while(|a| a.as_str() != "--").any(|a| {
        a == long || (a.starts_with('-') && !a.starts_with("--") && a[1..].contains(short))
    })
}

fn git_add_blind(name: &str, args: &[String]) -> bool {
    let Some((sub, args)) = git_subcommand(args).filter(|_| name == "git") else {
        return false;
    };
    if sub != "add" && sub != "stage" {
        return false;
    }
    let mut after_dashes = false;
    args.iter().any(|a| {
        if a == "--" {
            after_dashes = true;
            return false;
        }
        let option = !after_dashes && a.starts_with('-');
        (option && (a == "--all" || (!a.starts_with("--") && a[1..].contains('A'))))
            || (!option && matches!(a.as_str(), "." | "./" | "*" | ":/" | ":/*"))
    })
}

fn git_push_force(name: &str, args: &[String]) -> bool {
    let Some((sub, args)) = git_subcommand(args).filter(|_| name == "git") else {
        return false;
    };
    if sub != "push" {
        return false;
    }
    let options = args.iter().take_while(|a| a.as_str() != "--");
    let forced = options.clone().any(|a| {
        a == "--force" || (a.starts_with('-') && !a.starts_with("--") && a[1..].contains('f'))
    });
    let plus_refspec = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .skip(1) // the remote
        .any(|a| a.starts_with('+'));
    forced || plus_refspec
}

/// Top-level directories whose recursive removal breaks the machine.
const SYSTEM_DIRS: &[&str] = &[
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "opt", "proc", "root", "run",
    "sbin", "srv", "sys", "usr", "var",
];

fn rm_dangerous(name: &str, args: &[String]) -> bool {
    if name != "rm" {
        return false;
    }
    if args.iter().any(|a| a == "--no-preserve-root") {
        return true;
    }
    let recursive = has_flag(args, 'r', "--recursive") || has_flag(args, 'R', "--recursive");
    if !recursive {
        return false;
    }
    let mut after_dashes = false;
    args.iter().any(|a| {
        if a == "--" && !after_dashes {
            after_dashes = true;
            return false;
        }
        (after_dashes || !a.starts_with('-')) && dangerous_target(a)
    })
}

fn dangerous_target(path: &str) -> bool {
    let trimmed = path.trim_end_matches('/');
    let path = if trimmed.is_empty() && !path.is_empty() {
        "/"
    } else {
        trimmed
    };
    let path = path.strip_suffix("/.").unwrap_or(path);
    if matches!(
        path,
        "/" | "/*" | "~" | "~/*" | "$HOME" | "$HOME/*" | ".git" | "./.git" | "*" | "./*" | "/."
    ) {
        return true;
    }
    match path.strip_prefix('/') {
        Some(dir) => SYSTEM_DIRS.contains(&dir.trim_end_matches("/*")),
        None => false,
    }
}

/// A rule from the config's `[[policy.deny]]`: the command name, and patterns that
/// must each match one of its arguments (`*` any run of characters, `?` one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomRule {
    pub id: String,
    pub command: String,
    pub args: Vec<String>,
    pub message: String,
}

impl CustomRule {
    pub fn matches(&self, name: &str, args: &[String]) -> bool {
        name == self.command
            && self.args.iter().all(|pattern| {
                args.iter()
                    .any(|arg| glob(pattern.as_bytes(), arg.as_bytes()))
            })
    }
}

/// Shell-style wildcard match, iterative so a long pattern cannot blow the stack.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_like_a_shell() {
        assert!(glob(b"publish", b"publish"));
        assert!(glob(b"pub*", b"publish"));
        assert!(glob(b"*lish", b"publish"));
        assert!(glob(b"p?blish", b"publish"));
        assert!(!glob(b"pub", b"publish"));
        assert!(glob(b"*", b""));
    }
}

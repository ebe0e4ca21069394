//! The built-in rules and the config's custom ones. A rule sees one simple command at
//! a time, wrappers already seen through, as a [`Call`]: its name, its arguments as
//! patterns (`words.rs`), and where it runs.

use super::git;
use super::paths::{self, Places, Target};
use super::scope::Scope;
use super::words::{braces, glob, plain};

/// At most this many words from one argument's braces; more is refused, not checked.
pub const MAX_BRACE_WORDS: usize = 4096;

/// One command as a rule sees it.
pub struct Call<'a> {
    /// The command's name without its directory; `None` when it is an expansion
    /// bashd could not resolve (`$c`, `$(...)`).
    pub name: Option<&'a str>,
    /// The arguments, as patterns.
    pub args: &'a [String],
    pub places: &'a Places,
    /// The directories relative paths are taken from (see `paths::cwds`).
    pub cwds: &'a [Target],
    pub scope: &'a Scope<'a>,
}

/// A built-in rule: an id, a test, and what to do instead.
pub struct BuiltinRule {
    pub id: &'static str,
    pub matches: fn(&Call<'_>) -> bool,
    pub message: &'static str,
}

/// Their ids are also `bashd_protocol::config::BUILTIN_RULE_IDS`, what the config
/// file's `[policy] disable` may name (a test keeps the two alike).
pub const BUILTIN_RULES: &[BuiltinRule] = &[
    BuiltinRule {
        id: "git-add-blind",
        matches: git_add_blind,
        message: "`git add -A`, `git add .`, `--all`, `*`, `:/` and any pathspec naming the \
                  working directory or one above it stage every change in the tree, \
                  including files that were never meant to be committed. Stage the files \
                  you changed by name: git add path/to/file (git status shows them), or \
                  preview with git add --dry-run.",
    },
    BuiltinRule {
        id: "git-push-force",
        matches: git_push_force,
        message: "a force push (--force, -f, --mirror, +refspec, a remote.*.push of +refs) \
                  overwrites the remote branch and can destroy others' commits. Use git \
                  push --force-with-lease, which refuses when the remote has moved.",
    },
    BuiltinRule {
        id: "rm-dangerous",
        matches: rm_dangerous,
        message: "a recursive rm of /, a top-level system directory, a home, the working \
                  directory or one above it, a .git, or everything in one of those (*) \
                  would destroy far more than intended. Remove the specific paths you \
                  mean, e.g. rm -rf ./build.",
    },
    BuiltinRule {
        id: "dynamic-command",
        matches: dynamic_rm,
        message: "the command's name is an expansion bashd cannot resolve ($cmd, $(...)), \
                  and its arguments would make rm destroy a protected path (a recursive \
                  flag and /, ~, .git, * or the like). Spell the command out, e.g. rm -rf \
                  ./build.",
    },
];

fn git_add_blind(call: &Call<'_>) -> bool {
    call.name == Some("git") && git::add_blind(call.args, call.places, call.cwds)
}

fn git_push_force(call: &Call<'_>) -> bool {
    call.name == Some("git") && git::push_forced(call.args, call.scope)
}

fn rm_dangerous(call: &Call<'_>) -> bool {
    call.name == Some("rm") && rm_destroys(call)
}

fn dynamic_rm(call: &Call<'_>) -> bool {
    call.name.is_none() && rm_destroys(call)
}

/// Long options of rm, to read the unique prefixes it accepts (`--rec`).
const RM_OPTIONS: &[&str] = &[
    "force",
    "interactive",
    "one-file-system",
    "no-preserve-root",
    "preserve-root",
    "recursive",
    "dir",
    "verbose",
    "help",
    "version",
];

/// Whether rm with these arguments removes something protected: `--no-preserve-root`,
/// or a recursive removal of a protected target. (A brace expansion too large to check
/// is refused before the rules run.)
fn rm_destroys(call: &Call<'_>) -> bool {
    let mut recursive = false;
    let mut targets = Vec::new();
    let mut options_done = false;
    for arg in call.args {
        let text = plain(arg);
        if options_done || !text.starts_with('-') || text == "-" {
            targets.push(arg);
        } else if text == "--" {
            options_done = true;
        } else if let Some(long) = text.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or(long);
            let mut known = RM_OPTIONS.iter().filter(|o| o.starts_with(name));
            let option = match (known.next(), known.next()) {
                (Some(only), None) => Some(*only),
                _ => RM_OPTIONS.iter().find(|o| **o == name).copied(),
            };
            match option {
                Some("no-preserve-root") => return true,
                Some("recursive") => recursive = true,
                _ => {}
            }
        } else if text.contains(['r', 'R']) {
            recursive = true;
        }
    }
    recursive
        && targets
            .iter()
            .any(|target| match braces(target, MAX_BRACE_WORDS) {
                Some(words) => words
                    .iter()
                    .any(|word| paths::is_protected(word, call.places, call.cwds)),
                None => false,
            })
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
    /// Whether the rule matches; arguments are compared as the program receives them.
    pub fn matches(&self, name: &str, args: &[String]) -> bool {
        name == self.command
            && self
                .args
                .iter()
                .all(|pattern| args.iter().any(|arg| glob(pattern, &plain(arg))))
    }
}

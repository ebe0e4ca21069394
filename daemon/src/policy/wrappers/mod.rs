//! What a command runs besides itself: the command a wrapper runs (`sudo`, `nice`,
//! `timeout`, ...), the code a shell or `eval` or `trap` runs, the commands `xargs`,
//! `find -exec` and `parallel` build. Wrappers are read with their options, and an
//! option a wrapper's table does not know is read both ways (a flag, or one that takes
//! the next word), so an unknown option never makes the policy stop seeing through.

mod builders;
mod options;
mod shells;

use super::git;
use super::scope::Scope;
use super::words::plain;
use options::*;

/// What to do with one simple command.
pub enum Step<'a> {
    /// A wrapper: check the command it runs, with the same stdin.
    Run(&'a [String]),
    /// Several things it runs (candidates of an ambiguous wrapper, `find -exec`, ...).
    Many(Vec<Next>),
    /// It runs nothing else.
    Final,
}

/// One thing a command runs.
pub enum Next {
    Argv(Vec<String>),
    /// Shell code, with the positional parameters it is given (`sh -c CODE $0 ARGS`).
    Code {
        code: String,
        args: Option<Vec<String>>,
        /// Whether the code's commands read the runner's stdin; not when the code *is*
        /// that stdin (`bash <<EOF`), which the shell reads up.
        shares_stdin: bool,
    },
}

impl Next {
    pub fn code(code: String) -> Next {
        Next::Code {
            code,
            args: None,
            shares_stdin: true,
        }
    }

    fn code_with(code: String, args: Vec<String>, shares_stdin: bool) -> Next {
        Next::Code {
            code,
            args: Some(args),
            shares_stdin,
        }
    }
}

/// What the command `name` runs, given its arguments and the literal text on its stdin.
pub fn step<'a>(
    name: &str,
    args: &'a [String],
    stdin: Option<&str>,
    scope: &Scope<'_>,
) -> Step<'a> {
    match name {
        "sudo" | "doas" | "run0" | "pkexec" => {
            if first_options(args).any(|o| matches!(o.as_str(), "-e" | "--edit" | "-l" | "--list"))
            {
                return Step::Final;
            }
            wrapped(args, &SUDO)
        }
        "env" => env(args),
        "command" => {
            // `command -v NAME` only looks NAME up.
            if first_options(args)
                .any(|o| !o.starts_with("--") && (o.contains('v') || o.contains('V')))
            {
                return Step::Final;
            }
            wrapped(
                args,
                &Options {
                    short_flags: "p",
                    ..NO_OPTIONS
                },
            )
        }
        "builtin" | "nohup" | "nocorrect" | "noglob" | "catchsegv" | "caffeinate" => {
            wrapped(args, &NO_OPTIONS)
        }
        "exec" => wrapped(args, &EXEC),
        "time" => wrapped(args, &TIME),
        "setsid" => wrapped(args, &SETSID),
        "chronic" => wrapped(args, &CHRONIC),
        "nice" => wrapped(args, &NICE),
        "ionice" => wrapped(args, &IONICE),
        "stdbuf" => wrapped(args, &STDBUF),
        "timeout" => wrapped(args, &TIMEOUT),
        "chrt" | "taskset" => {
            // With -p they change a running process; -m lists priorities.
            if first_options(args)
                .any(|o| !o.starts_with("--") && (o.contains('p') || o.contains('m')))
                || first_options(args).any(|o| o == "--pid" || o == "--max")
            {
                return Step::Final;
            }
            wrapped(args, if name == "chrt" { &CHRT } else { &TASKSET })
        }
        "unshare" => wrapped(args, &UNSHARE),
        "nsenter" => wrapped(args, &NSENTER),
        "setpriv" => wrapped(args, &SETPRIV),
        "prlimit" => wrapped(args, &PRLIMIT),
        "strace" | "ltrace" => wrapped(args, &STRACE),
        "cgexec" => wrapped(args, &CGEXEC),
        "firejail" | "valgrind" => wrapped(args, &FIREJAIL),
        "fakeroot" | "fakeroot-ng" => wrapped(args, &FAKEROOT),
        "chroot" => wrapped(args, &CHROOT),
        "dumb-init" | "tini" => wrapped(args, &INIT),
        "proxychains" | "proxychains4" | "torsocks" | "tsocks" => wrapped(args, &PROXY),
        "systemd-run" => {
            if first_options(args).any(|o| o == "-S" || o == "--shell") {
                return Step::Final;
            }
            wrapped(args, &SYSTEMD_RUN)
        }
        // `busybox rm ...` runs the applet `rm`.
        "busybox" | "toybox" => Step::Run(args),
        "coproc" => coproc(args),
        "flock" => shells::flock(args),
        "watch" => shells::watch(args),
        "script" => shells::script(args),
        "su" | "runuser" => shells::su(name, args),
        "sg" => shells::sg(args),
        "entr" => shells::entr(args),
        "xargs" => builders::xargs(args, stdin),
        "find" => builders::find(args),
        "parallel" => builders::parallel(args, stdin),
        "eval" => Step::Many(vec![Next::code(join(args))]),
        "trap" => shells::trap(args),
        "source" | "." => shells::source(args, stdin),
        "git" => git::step(args, scope),
        shell if SHELLS.contains(&shell) => shells::shell_step(args, stdin),
        _ => Step::Final,
    }
}

/// What a shell given these arguments runs: for a command that may be one.
pub fn shell_step<'a>(args: &'a [String], stdin: Option<&str>) -> Step<'a> {
    shells::shell_step(args, stdin)
}

/// The words before the first that is not an option, as plain text.
fn first_options(args: &[String]) -> impl Iterator<Item = String> + '_ {
    args.iter()
        .map(|a| plain(a).into_owned())
        .take_while(|a| a.starts_with('-') && a != "--")
}

fn join(args: &[String]) -> String {
    let words: Vec<std::borrow::Cow<'_, str>> = args.iter().map(|a| plain(a)).collect();
    words.join(" ")
}

fn wrapped<'a>(args: &'a [String], options: &Options) -> Step<'a> {
    let starts = command_starts(args, options);
    match starts.as_slice() {
        [] => Step::Final,
        [only] => Step::Run(&args[*only..]),
        many => Step::Many(
            many.iter()
                .map(|&at| Next::Argv(args[at..].to_vec()))
                .collect(),
        ),
    }
}

/// Where the wrapped command can start: one place when every option is known, more
/// when an unknown option may or may not take the next word as its value.
fn command_starts(args: &[String], options: &Options) -> Vec<usize> {
    let n = args.len();
    let mut seen = vec![false; n + 1];
    let mut todo = vec![0];
    let mut found = Vec::new();
    while let Some(i) = todo.pop() {
        if i >= n || seen[i] {
            continue;
        }
        seen[i] = true;
        let arg = plain(&args[i]);
        if arg == "--" {
            found.push(i + 1);
        } else if options.assignments && is_assignment(&arg) {
            todo.push(i + 1);
        } else if let Some(long) = arg.strip_prefix("--").filter(|l| !l.is_empty()) {
            let name = long.split('=').next().unwrap_or(long);
            if long.contains('=') || options.long_all_flags || options.long_flags.contains(&name) {
                todo.push(i + 1);
            } else if options.long_values.contains(&name) {
                todo.push(i + 2);
            } else {
                todo.extend([i + 1, i + 2]);
            }
        } else if arg.len() > 1 && arg.starts_with('-') {
            let cluster: Vec<char> = arg[1..].chars().collect();
            for (at, &c) in cluster.iter().enumerate() {
                let last = at + 1 == cluster.len();
                if options.short_values.contains(c) {
                    todo.push(if last { i + 2 } else { i + 1 });
                    break;
                }
                if options.short_optional.contains(c) {
                    todo.push(i + 1);
                    break;
                }
                if last {
                    todo.push(i + 1);
                    if !options.short_flags.contains(c) {
                        todo.push(i + 2);
                    }
                }
            }
        } else {
            found.push(i);
        }
    }
    let mut starts: Vec<usize> = found
        .into_iter()
        .map(|at| at + options.positionals)
        .filter(|&at| at < n)
        .collect();
    starts.sort_unstable();
    starts.dedup();
    starts
}

pub fn is_assignment(word: &str) -> bool {
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
        let arg = plain(arg);
        if !arg.starts_with('-') || arg == "--" {
            break;
        }
        if let Some(string) = arg.strip_prefix("--split-string=") {
            return Step::Many(vec![Next::code(format!(
                "{string} {}",
                join(&args[i + 1..])
            ))]);
        }
        if arg == "-S" || arg == "--split-string" {
            return Step::Many(vec![Next::code(join(&args[i + 1..]))]);
        }
        if let Some(at) = arg.find('S').filter(|_| !arg.starts_with("--")) {
            let string = &arg[at + 1..];
            return Step::Many(vec![Next::code(format!(
                "{string} {}",
                join(&args[i + 1..])
            ))]);
        }
    }
    // `env -` is `env -i`.
    let skip = args.iter().take_while(|a| a.as_str() == "-").count();
    wrapped(&args[skip..], &ENV)
}

/// `coproc [NAME] { ...; }` or `coproc COMMAND`. tree-sitter reads the braced form as
/// a command named `coproc`; the commands after the brace are parsed on their own.
fn coproc(args: &[String]) -> Step<'_> {
    match args {
        [brace, rest @ ..] if brace == "{" => Step::Run(rest),
        [_, brace, rest @ ..] if brace == "{" => Step::Run(rest),
        _ => Step::Run(args),
    }
}

//! Commands that hand shell code to a shell: the shells themselves, `source`, `trap`,
//! `su -c`, `script -c`, `flock -c`, `watch`, `sg`, `entr -s`.

use super::options::{ENTR, FLOCK, RUNUSER, WATCH};
use super::{Next, Step, command_starts, first_options, join, wrapped};
use crate::policy::words::{FILE_TEXT, plain, with_unknown_zero};

/// `flock [options] FILE COMMAND...` or `flock [options] FILE -c STRING`.
pub(super) fn flock(args: &[String]) -> Step<'_> {
    if let [at] = command_starts(args, &FLOCK)[..] {
        let rest = &args[at + 1..];
        if !matches!(
            rest.first().map(|a| plain(a)).as_deref(),
            Some("-c" | "--command")
        ) {
            return Step::Run(rest);
        }
    }
    let mut next = Vec::new();
    for at in command_starts(args, &FLOCK) {
        let rest = &args[at + 1..];
        match rest.first().map(|a| plain(a)) {
            Some(c) if c == "-c" || c == "--command" => {
                if let Some(code) = rest.get(1) {
                    next.push(Next::code(plain(code).into_owned()));
                }
            }
            Some(_) => next.push(Next::Argv(rest.to_vec())),
            None => {}
        }
    }
    Step::Many(next)
}

/// `watch CMD...` runs `sh -c` of its words joined; `watch -x` runs them directly.
pub(super) fn watch(args: &[String]) -> Step<'_> {
    if first_options(args).any(|o| o == "--exec" || (!o.starts_with("--") && o.contains('x'))) {
        return wrapped(args, &WATCH);
    }
    let next = command_starts(args, &WATCH)
        .into_iter()
        .map(|at| Next::code(join(&args[at..])))
        .collect();
    Step::Many(next)
}

/// The value of the option that takes shell code: `-c CODE`, `-cCODE`, `-qc CODE`,
/// `--command CODE`, `--command=CODE`; options may come in any order.
fn code_option(args: &[String], short: char, long: &[&str]) -> Option<String> {
    let mut i = 0;
    while i < args.len() {
        let arg = plain(&args[i]);
        if arg == "--" {
            return None;
        }
        if let Some(rest) = arg.strip_prefix("--") {
            let (name, value) = rest
                .split_once('=')
                .map_or((rest, None), |(n, v)| (n, Some(v)));
            if long.contains(&name) {
                return value
                    .map(str::to_owned)
                    .or_else(|| args.get(i + 1).map(|a| plain(a).into_owned()));
            }
        } else if arg.len() > 1
            && arg.starts_with('-')
            && let Some(at) = arg[1..].find(short)
        {
            let attached = &arg[at + 2..];
            return if attached.is_empty() {
                args.get(i + 1).map(|a| plain(a).into_owned())
            } else {
                Some(attached.to_owned())
            };
        }
        i += 1;
    }
    None
}

/// `script [options] -c COMMAND [file]`.
pub(super) fn script(args: &[String]) -> Step<'_> {
    match code_option(args, 'c', &["command"]) {
        Some(code) => Step::Many(vec![Next::code(code)]),
        None => Step::Final,
    }
}

/// `su [options] [-] [USER] -c COMMAND`; `runuser -u USER -- COMMAND...`.
pub(super) fn su<'a>(name: &str, args: &'a [String]) -> Step<'a> {
    if let Some(code) = code_option(args, 'c', &["command", "session-command"]) {
        return Step::Many(vec![Next::code(code)]);
    }
    let by_user = first_options(args).any(|o| o == "-u" || o.starts_with("--user"));
    if name == "runuser" && by_user {
        return wrapped(args, &RUNUSER);
    }
    Step::Final
}

/// `sg [-] GROUP [-c] COMMAND`.
pub(super) fn sg(args: &[String]) -> Step<'_> {
    let rest = match args.first() {
        Some(dash) if dash == "-" => &args[1..],
        _ => args,
    };
    let code = match rest.get(1).map(|a| plain(a)) {
        Some(c) if c == "-c" => rest.get(2),
        _ => rest.get(1),
    };
    match code {
        Some(code) => Step::Many(vec![Next::code(plain(code).into_owned())]),
        None => Step::Final,
    }
}

/// `entr [-s] UTILITY [ARGS]`: with `-s`, the utility is shell code.
pub(super) fn entr(args: &[String]) -> Step<'_> {
    let shell = first_options(args).any(|o| !o.starts_with("--") && o.contains('s'));
    match command_starts(args, &ENTR).first() {
        Some(&at) if shell => Step::Many(vec![Next::code(plain(&args[at]).into_owned())]),
        Some(&at) => Step::Run(&args[at..]),
        None => Step::Final,
    }
}

/// `trap [--] HANDLER SIGNAL...`: the handler is code the shell runs later.
pub(super) fn trap(args: &[String]) -> Step<'_> {
    let rest: Vec<&String> = args
        .iter()
        .skip_while(|a| matches!(a.as_str(), "-p" | "-l" | "-P"))
        .skip_while(|a| a.as_str() == "--")
        .collect();
    match rest.as_slice() {
        [handler, _, ..] if handler.as_str() != "-" => {
            Step::Many(vec![Next::code(plain(handler).into_owned())])
        }
        _ => Step::Final,
    }
}

/// `source FILE ARGS` and `. FILE ARGS`: the file is checked when its text is literal
/// (`<(echo ...)`), or is stdin and stdin is literal.
pub(super) fn source<'a>(args: &'a [String], stdin: Option<&str>) -> Step<'a> {
    let args = match args.first() {
        Some(dashes) if dashes == "--" => &args[1..],
        _ => args,
    };
    let Some((file, rest)) = args.split_first() else {
        return Step::Final;
    };
    let code = if let Some(text) = file.strip_prefix(FILE_TEXT) {
        Some(text.to_owned())
    } else if matches!(
        plain(file).as_ref(),
        "/dev/stdin" | "/proc/self/fd/0" | "/dev/fd/0"
    ) {
        stdin.map(str::to_owned)
    } else {
        None
    };
    match code {
        Some(code) => {
            let from_stdin = !file.starts_with(FILE_TEXT);
            Step::Many(vec![Next::code_with(
                code,
                with_unknown_zero(rest),
                !from_stdin,
            )])
        }
        None => Step::Final,
    }
}

/// A shell: `-c CODE [NAME ARGS...]` runs CODE; a script operand is read when its text
/// is literal (`bash <(echo ...)`); no operand, `-s` or `/dev/stdin` reads stdin, which
/// is checked when it is literal (a heredoc, a here-string, `echo ... |`). A script
/// file is not read: what it holds is not the command's to say.
pub(super) fn shell_step<'a>(args: &'a [String], stdin: Option<&str>) -> Step<'a> {
    let mut has_c = false;
    let mut reads_stdin = false;
    let mut operands: &[String] = &[];
    let mut codes = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = plain(&args[i]);
        if arg == "--" || arg == "-" {
            operands = &args[i + 1..];
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = long
                .split_once('=')
                .map_or((long, None), |(n, v)| (n, Some(v)));
            match name {
                // fish's spellings of -c and -C.
                "command" | "init-command" => match value {
                    Some(code) => codes.push(code.to_owned()),
                    None => {
                        if let Some(code) = args.get(i + 1) {
                            codes.push(plain(code).into_owned());
                        }
                        i += 1;
                    }
                },
                "rcfile" | "init-file" if value.is_none() => i += 1,
                _ => {}
            }
        } else if arg.len() > 1 && (arg.starts_with('-') || arg.starts_with('+')) {
            let cluster = &arg[1..];
            for (at, c) in cluster.char_indices() {
                let last = at + c.len_utf8() == cluster.len();
                match c {
                    'c' => has_c = true,
                    's' => reads_stdin = true,
                    // These take the next word (`-o pipefail`, fish's `-C CODE`).
                    'o' | 'O' | 'C' if last => {
                        if c == 'C'
                            && let Some(code) = args.get(i + 1)
                        {
                            codes.push(plain(code).into_owned());
                        }
                        i += 1;
                    }
                    _ => {}
                }
            }
        } else {
            operands = &args[i..];
            break;
        }
        i += 1;
    }
    let mut next: Vec<Next> = codes.into_iter().map(Next::code).collect();
    if has_c {
        if let Some((code, rest)) = operands.split_first() {
            // `sh -c CODE NAME ARGS`: NAME is $0, ARGS are $1...
            let positional = if rest.is_empty() {
                with_unknown_zero(&[])
            } else {
                rest.to_vec()
            };
            next.push(Next::code_with(plain(code).into_owned(), positional, true));
        }
    } else {
        match operands.split_first() {
            Some((script, rest)) if !reads_stdin => {
                if let Some(text) = script.strip_prefix(FILE_TEXT) {
                    next.push(Next::code_with(
                        text.to_owned(),
                        with_unknown_zero(rest),
                        true,
                    ));
                } else if matches!(plain(script).as_ref(), "/dev/stdin" | "/dev/fd/0")
                    && let Some(text) = stdin
                {
                    let args = with_unknown_zero(rest);
                    next.push(Next::code_with(text.to_owned(), args, false));
                }
            }
            _ => {
                if let Some(text) = stdin {
                    let args = with_unknown_zero(operands);
                    next.push(Next::code_with(text.to_owned(), args, false));
                }
            }
        }
    }
    if next.is_empty() {
        Step::Final
    } else {
        Step::Many(next)
    }
}

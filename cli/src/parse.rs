//! The command line, parsed. `bashc exec`, the call an agent makes for each command, is
//! parsed against the global arguments and `exec`'s alone: building the whole `Cli`
//! first (twenty subcommands and their texts, the global arguments copied into each)
//! was about a sixth of the CPU time of a `bashc exec -- true` (issue 31). Every other
//! command line, and one this parse refuses (a usage error, `--help`, `--version`),
//! goes through the whole `Cli`, which says what clap says; so a line this parse takes
//! is one the whole `Cli` takes the same way (the tests below hold it to that).

use std::ffi::OsString;

use clap::{Args, Command, FromArgMatches, Parser};

use crate::deferred::Deferred;
use crate::{Cli, ExecArgs, Global};

/// The command line of this process.
pub fn parse() -> Cli {
    let args: Vec<OsString> = std::env::args_os().collect();
    exec_only(&args).unwrap_or_else(|| Cli::parse_from(args))
}

/// `args` as the whole `Cli` would take them, if they are a `bashc exec` this parse
/// can read; `None` for anything else.
fn exec_only(args: &[OsString]) -> Option<Cli> {
    if args.get(1)? != "exec" {
        return None;
    }
    let command = Global::augment_args(Command::new("bashc"))
        .subcommand(Deferred::<ExecArgs>::augment_args(Command::new("exec")))
        .subcommand_required(true);
    let mut matches = command.try_get_matches_from(args).ok()?;
    Cli::from_arg_matches_mut(&mut matches).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(line: &[&str]) -> (Option<String>, Result<String, clap::error::ErrorKind>) {
        let args: Vec<OsString> = std::iter::once("bashc")
            .chain(line.iter().copied())
            .map(OsString::from)
            .collect();
        let fast = exec_only(&args).map(|cli| format!("{cli:?}"));
        let whole = Cli::try_parse_from(&args)
            .map(|cli| format!("{cli:?}"))
            .map_err(|e| e.kind());
        (fast, whole)
    }

    #[test]
    fn an_exec_line_parses_as_the_whole_cli_parses_it() {
        let lines: &[&[&str]] = &[
            &["exec", "--", "true"],
            &["exec", "echo", "hi", "--json"],
            &["exec", "--json", "--timeout", "5", "--", "sleep", "1"],
            &[
                "exec",
                "--runtime-dir",
                "/tmp/x",
                "--host",
                "a",
                "--",
                "true",
            ],
            &["exec", "--mode", "background", "--stdin", "pipe", "cat"],
            &[
                "exec",
                "--pty",
                "--size",
                "80x24",
                "--session",
                "s",
                "--owner-pid",
                "7",
                "vim",
            ],
            &[
                "exec",
                "--sandbox",
                "read-only",
                "--net",
                "off",
                "--memory",
                "1G",
                "make",
            ],
            &["exec", "-", "--notify", "ready", "--notify-idle", "30"],
        ];
        for line in lines {
            let (fast, whole) = both(line);
            let fast = fast.unwrap_or_else(|| panic!("{line:?} falls back to the whole Cli"));
            assert_eq!(Ok(fast), whole, "{line:?}");
        }
    }

    #[test]
    fn what_it_does_not_take_is_left_to_the_whole_cli() {
        let lines: &[&[&str]] = &[
            &["exec"],
            &["exec", "--"],
            &["exec", "--help"],
            &["exec", "-h"],
            &["exec", "--version"],
            &["exec", "--timeout", "0", "true"],
            &["exec", "--size", "80x24", "true"],
            &["exec", "--nope", "true"],
            &["exec", "--notify-idle", "0", "true"],
            &["--runtime-dir", "/tmp/x", "exec", "true"],
            &["jobs"],
            &["status", "--json"],
            &["--version"],
        ];
        for line in lines {
            let (fast, _) = both(line);
            assert_eq!(fast, None, "{line:?}");
        }
        // The first of them is a usage error there, as before.
        assert_eq!(
            both(&["exec"]).1,
            Err(clap::error::ErrorKind::MissingRequiredArgument)
        );
    }
}

//! A cut stream says how to see the rest (issue 24): the note under it gives the exact
//! `bashc output` command for the lines it leaves out, whichever way it was cut, and
//! that command prints exactly those lines. And a failing `cargo build` shows its first
//! error.

use std::process::Output;

use bashd_tests::Daemon;
use bashd_tests::output::numbered;

use crate::{show, stdout};

/// The command the note under `stream` names for the rest, as words.
fn rest_command(out: &Output, stream: &str) -> Vec<String> {
    let printed = stdout(out);
    let note = printed
        .lines()
        .find(|line| line.starts_with(&format!("[{stream}: showing ")))
        .unwrap_or_else(|| panic!("no note under {stream}:\n{}", show(out)));
    let rest = note
        .split(". The rest: ")
        .nth(1)
        .unwrap_or_else(|| panic!("the note names no command: {note}"));
    let command = rest.split(". Full output: ").next().unwrap();
    let command = command.strip_suffix(']').unwrap_or(command);
    command.split(' ').map(str::to_owned).collect()
}

/// Issue 24.
#[test]
fn every_cut_names_the_command_that_prints_exactly_what_it_left_out() {
    let daemon = Daemon::start();
    let cases: &[(&[&str], &str, &str, String)] = &[
        (&[], "seq 1 3000", "stdout", numbered(1..=1000)),
        (
            &["--direction", "head"],
            "seq 1 3000",
            "stdout",
            numbered(2001..=3000),
        ),
        (
            &["--direction", "head_tail"],
            "seq 1 3000",
            "stdout",
            numbered(1001..=2000),
        ),
        (&["--head", "3"], "seq 1 100", "stdout", numbered(4..=100)),
        (&["--tail", "3"], "seq 1 100", "stdout", numbered(1..=97)),
        (
            &["--head", "2", "--tail", "2"],
            "seq 1 100",
            "stdout",
            numbered(3..=98),
        ),
        (
            &["--max-lines", "10"],
            "seq 1 25 >&2",
            "stderr",
            numbered(1..=15),
        ),
    ];
    for (flags, command, stream, unseen) in cases {
        let mut args = vec!["exec"];
        args.extend_from_slice(flags);
        args.extend(["--", command]);
        let out = daemon.run_bashc(&args);
        let rest = rest_command(&out, stream);
        assert_eq!(rest[..2], ["bashc", "output"], "{}", show(&out));
        assert_eq!(
            rest.contains(&"--stream".to_owned()),
            *stream == "stderr",
            "{}",
            show(&out)
        );
        let words: Vec<&str> = rest[1..].iter().map(String::as_str).collect();
        let page = daemon.run_bashc(&words);
        assert_eq!(
            stdout(&page),
            *unseen,
            "{flags:?} {command}: {}",
            show(&page)
        );
    }

    // One line longer than max_bytes: the page shows it whole.
    let out = daemon.run_bashc(&["exec", "--max-bytes", "100", "--", "printf '%0300d\\n' 7"]);
    let rest = rest_command(&out, "stdout");
    let words: Vec<&str> = rest[1..].iter().map(String::as_str).collect();
    assert_eq!(stdout(&daemon.run_bashc(&words)), format!("{:0300}\n", 7));
}

/// Issue 24.
#[test]
fn a_failing_cargo_build_shows_its_first_error() {
    let daemon = Daemon::start();
    let krate = daemon.scratch().join("three");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"three\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        krate.join("src/main.rs"),
        "fn main() {\n    let first: u32 = \"one\";\n    let second: u32 = \"two\";\n    let third: u32 = \"three\";\n}\n",
    )
    .unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let target = daemon.scratch().join("target");
    let out = daemon
        .bashc()
        .args(["exec", "--mode", "slow", "--workdir"])
        .arg(&krate)
        .arg("--")
        .arg(format!("{cargo} build --offline"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    let printed = stdout(&out);
    assert_eq!(out.status.code(), Some(101), "{}", show(&out));
    let first_error = "let first: u32 = \"one\";";
    let shown = printed.contains(first_error);
    let reachable = printed
        .lines()
        .find(|line| line.starts_with("[stderr: showing "))
        .is_some_and(|_| {
            let rest = rest_command(&out, "stderr");
            let words: Vec<&str> = rest[1..].iter().map(String::as_str).collect();
            stdout(&daemon.run_bashc(&words)).contains(first_error)
        });
    assert!(shown || reachable, "{}", show(&out));
    assert!(
        printed.contains("could not compile `three`") && printed.contains("3 previous errors"),
        "{}",
        show(&out)
    );
}

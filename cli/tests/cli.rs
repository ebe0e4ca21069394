//! The `bashc` binary's argument handling, without a daemon. (Because this package has
//! an integration test, `cargo test --workspace` builds the `bashc` binary that the
//! e2e tests run.)

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// `--stream` was refused before issue 16 built it; now it reaches for the daemon.
#[test]
fn stream_is_built_and_reaches_for_the_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime_dir = tmp.path().join("run");
    let cases: &[&[&str]] = &[&["--stream"], &["--stream", "--stdin", "pipe"]];
    for flags in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_bashc"))
            .arg("exec")
            .args(*flags)
            .args(["--", "true"])
            .env("BASHD_RUNTIME_DIR", &runtime_dir)
            // Should a flag slip through, bashc must fail without leaving a daemon behind.
            .env("BASHD_NO_AUTOSTART", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(255), "{flags:?}: {stderr}");
        assert!(
            stderr.starts_with("bashc: ") && stderr.contains("bashd is not running"),
            "{flags:?}: {stderr}"
        );
    }
}

#[test]
fn a_job_is_named_by_id_or_by_pid_never_both_or_neither() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime_dir = tmp.path().join("run");
    for args in [
        &["check"][..],
        &["kill", "j1", "--pid", "5"],
        &["wait", "--pid", "x"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_bashc"))
            .args(args)
            .env("BASHD_RUNTIME_DIR", &runtime_dir)
            .env("BASHD_NO_AUTOSTART", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!runtime_dir.exists(), "{args:?} reached for a daemon");
    }
}

#[test]
fn output_offsets_count_from_one() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime_dir = tmp.path().join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_bashc"))
        .args(["output", "j1", "--offset", "0"])
        .env("BASHD_RUNTIME_DIR", &runtime_dir)
        .env("BASHD_NO_AUTOSTART", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--offset"), "{stderr}");
    assert!(!runtime_dir.exists(), "a bad offset reached for a daemon");
}

/// The CLI reference, whose usage must agree with `--help` (issue 24; it moved out of
/// the README in issue 46).
const README: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/CLI.md"));

/// Flags the README documents once for many commands, and which commands take them.
const SHARED_FLAGS: &[(&str, &str, &[&str])] = &[
    (
        "--session",
        "`--session S`",
        &[
            "exec", "jobs", "check", "wait", "follow", "send", "kill", "output", "screen",
            "resize", "mcp",
        ],
    ),
    (
        "--owner-pid",
        "`--owner-pid P`",
        &[
            "exec", "jobs", "check", "wait", "follow", "send", "kill", "output", "screen",
            "resize", "mcp",
        ],
    ),
    (
        "--pid",
        "`--pid N`",
        &[
            "check", "wait", "follow", "send", "kill", "output", "screen",
        ],
    ),
];

/// Flags every command takes: clap's own and the global `--runtime-dir`.
const EVERY_COMMAND: &[&str] = &["--help", "--version", "--runtime-dir", "--host"];

/// Flags the README names that belong to other programs (bashd, git, cargo, systemctl,
/// claude, rm).
const OTHER_PROGRAMS: &[&str] = &[
    // cargo test's, in the README's line that runs the agents' tests.
    "--test",
    "--nocapture",
    "--test-threads",
    "--config",
    "--test",
    "--nocapture",
    "--test-threads",
    "--check-config",
    "--all",
    "--force",
    "--force-with-lease",
    "--force-if-includes",
    "--no-preserve-root",
    "--path",
    "--locked",
    // cargo build's, for the musl target.
    "--target",
    "--release",
    "--scope",
    "--user",
    "--now",
    "--release",
    "--workspace",
    // Not a flag at all: the README's example of a mistyped one.
    "--tiemout",
];

/// What `bashc ARGS --help` prints.
fn help(path: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bashc"))
        .args(path)
        .arg("--help")
        .env("BASHD_NO_AUTOSTART", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{path:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The long flags a help lists, one per option line (`-h, --help`, `--mode <MODE>`).
fn help_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .map(str::trim_start)
        .filter(|line| line.starts_with('-'))
        .filter_map(|line| {
            line.split([' ', ',', '='])
                .find(|word| word.starts_with("--") && word.len() > 2)
                .map(str::to_owned)
        })
        .collect()
}

/// The commands a help lists under `Commands:`, but `help`.
fn help_commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// Every command bashc has, as the words that name it (`["session", "close"]`), with
/// its help.
fn commands() -> Vec<(Vec<String>, String)> {
    let mut found = Vec::new();
    let mut todo = vec![Vec::new()];
    while let Some(path) = todo.pop() {
        let text = help(&path);
        let children = help_commands(&text);
        for child in &children {
            let mut child_path = path.clone();
            child_path.push(child.clone());
            todo.push(child_path);
        }
        if children.is_empty() {
            found.push((path, text));
        }
    }
    found.sort();
    found
}

/// `--long-flags` in a text.
fn flags_in(text: &str) -> Vec<String> {
    let mut flags = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let tail = &rest[at + 2..];
        let name: String = tail
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '-')
            .collect();
        if name.starts_with(|c: char| c.is_ascii_lowercase()) {
            flags.push(format!("--{}", name.trim_end_matches('-')));
        }
        rest = &tail[name.len()..];
    }
    flags
}

/// The README's usage block: each command (`"session close"`) with the flags its
/// lines name.
fn readme_usage() -> BTreeMap<String, BTreeSet<String>> {
    let section = README
        .split("\n## Commands\n")
        .nth(1)
        .expect("docs/CLI.md has a `Commands` section");
    let mut usage: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current = None;
    for line in section.lines().skip_while(|line| line.is_empty()) {
        if !line.starts_with("    ") {
            break;
        }
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("bashc ") {
            let words: Vec<&str> = rest
                .split(' ')
                .take_while(|word| !word.is_empty() && word.bytes().all(|b| b.is_ascii_lowercase()))
                .collect();
            current = Some(words.join(" "));
        }
        let command = current
            .clone()
            .expect("the usage block starts with `bashc`");
        let code = line.split(" # ").next().unwrap();
        usage.entry(command).or_default().extend(flags_in(code));
    }
    usage
}

/// Issue 24: docs that cannot drift from `--help`.
#[test]
fn the_readme_and_help_name_the_same_flags() {
    let usage = readme_usage();
    let commands = commands();
    for (_, phrase, _) in SHARED_FLAGS {
        assert!(README.contains(phrase), "the README does not say {phrase}");
    }
    assert!(README.contains("`--runtime-dir DIR`"));
    let names: BTreeSet<String> = commands.iter().map(|(path, _)| path.join(" ")).collect();
    let documented: BTreeSet<String> = usage.keys().cloned().collect();
    assert_eq!(
        names, documented,
        "commands of `bashc --help` against the README's usage"
    );

    for (path, text) in &commands {
        let name = path.join(" ");
        let in_help = help_flags(text);
        let in_readme = &usage[&name];
        for flag in in_readme {
            assert!(
                in_help.contains(flag),
                "the README gives `bashc {name}` {flag}, which its --help lacks"
            );
        }
        for flag in &in_help {
            let shared = SHARED_FLAGS
                .iter()
                .any(|(shared, _, takers)| shared == flag && takers.contains(&name.as_str()));
            assert!(
                in_readme.contains(flag) || shared || EVERY_COMMAND.contains(&flag.as_str()),
                "`bashc {name}` takes {flag}, which the README does not document"
            );
        }
        // A command may take a flag of the same name with a meaning of its own, which
        // its usage line then gives (`bashc allow HOST --session S`).
        for (shared, _, takers) in SHARED_FLAGS {
            assert_eq!(
                in_help.contains(*shared),
                takers.contains(&name.as_str()) || in_readme.contains(*shared),
                "the README says which commands take {shared}; `bashc {name}` disagrees"
            );
        }
    }

    let every_flag: BTreeSet<String> = commands
        .iter()
        .flat_map(|(_, text)| help_flags(text))
        .collect();
    for flag in flags_in(README) {
        assert!(
            every_flag.contains(&flag) || OTHER_PROGRAMS.contains(&flag.as_str()),
            "the README names {flag}, which no bashc command takes"
        );
    }
    assert!(help(&[]).contains("bashc help <command>"));
}

/// Each command's help page opens with what the command does: the line `bashc --help`
/// lists for it, never a note for the program's developers (issue 45).
#[test]
fn every_help_page_opens_with_what_its_command_does() {
    let bashc = || Command::new(env!("CARGO_BIN_EXE_bashc"));
    let listing = bashc().arg("--help").output().unwrap();
    let listing = String::from_utf8(listing.stdout).unwrap();
    let commands: Vec<(String, String)> = listing
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| {
            let (name, about) = line.trim().split_once(' ')?;
            Some((name.to_owned(), about.trim().to_owned()))
        })
        .filter(|(name, _)| name != "help")
        .collect();
    assert!(commands.len() >= 15, "{listing}");
    for (name, about) in &commands {
        let page = bashc().args([name.as_str(), "--help"]).output().unwrap();
        let page = String::from_utf8(page.stdout).unwrap();
        // The listing drops the sentence's final period.
        let first = page.lines().next().unwrap_or_default();
        assert_eq!(
            first.trim_end_matches('.'),
            about,
            "bashc {name} --help opens with:\n{page}"
        );
    }
}

/// An owner that is init, or no process at all, would make a session that never ends
/// or ends at once: a usage error, with nothing sent (issue 45).
#[test]
fn an_owner_pid_of_init_or_of_no_process_is_a_usage_error() {
    for pid in ["0", "1", "2147483646", "x"] {
        for command in [&["jobs"][..], &["mcp"]] {
            let out = Command::new(env!("CARGO_BIN_EXE_bashc"))
                .args(command)
                .args(["--owner-pid", pid])
                .env("BASHD_RUNTIME_DIR", "/nonexistent/bashd-test")
                .env("BASHD_NO_AUTOSTART", "1")
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{command:?} {pid}: {stderr}");
            assert!(
                stderr.contains("--owner-pid"),
                "{command:?} {pid}: {stderr}"
            );
        }
    }
    // Positive control: a live process is taken (and the call goes on to find no
    // daemon).
    let me = std::process::id().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_bashc"))
        .args(["jobs", "--owner-pid", &me])
        .env("BASHD_RUNTIME_DIR", "/nonexistent/bashd-test")
        .env("BASHD_NO_AUTOSTART", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(255), "{out:?}");
}

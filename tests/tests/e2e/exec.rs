//! `bashc exec` in the foreground: output sections, exit statuses, workdir,
//! environment, stdin, timeouts and the death of the client.

use std::process::Stdio;
use std::time::Duration;

use bashd_tests::{Daemon, alive, pids_running, wait_for_running, wait_until};

use crate::{json, show, stderr, stdout};

#[test]
fn exec_prints_both_streams_and_exits_with_the_commands_status() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&["exec", "--", "echo hi; echo err >&2; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", show(&out));
    assert_eq!(
        stdout(&out),
        "stdout:\nhi\n\nstderr:\nerr\n\nexit code: 3\n",
        "{}",
        show(&out)
    );

    let out = daemon.run_bashc(&["exec", "--json", "--", "echo hi; echo err >&2; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", show(&out));
    let result = json(&out);
    for key in [
        "job",
        "session",
        "pid",
        "state",
        "exit_code",
        "signal",
        "duration_ms",
        "backgrounded",
        "description",
        "workdir",
        "stdout",
        "stderr",
        "notice",
    ] {
        assert!(result.get(key).is_some(), "missing {key}: {result}");
    }
    for key in [
        "text",
        "truncated",
        "truncated_by",
        "direction",
        "total_lines",
        "total_bytes",
        "shown_lines",
        "shown_bytes",
        "partial",
        "full_output",
    ] {
        assert!(
            result["stdout"].get(key).is_some(),
            "missing stdout.{key}: {result}"
        );
        assert!(
            result["stderr"].get(key).is_some(),
            "missing stderr.{key}: {result}"
        );
    }
    assert_eq!(result["state"], "exited");
    assert_eq!(result["exit_code"], 3);
    assert_eq!(result["stdout"]["text"], "hi\n");
    assert_eq!(result["stderr"]["text"], "err\n");
    assert_eq!(result["session"], "test");
    assert!(result["job"].as_str().unwrap().starts_with('j'));
}

#[test]
fn words_are_joined_and_a_dash_reads_the_command_from_stdin() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&["exec", "echo", "a", "b"]);
    assert!(stdout(&out).starts_with("stdout:\na b\n"), "{}", show(&out));

    let mut child = daemon
        .bashc()
        .args(["exec", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"echo from stdin\nexit 4\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    assert!(stdout(&out).contains("from stdin"), "{}", show(&out));
}

#[test]
fn a_missing_or_non_directory_workdir_is_refused_with_its_path() {
    let daemon = Daemon::start();
    let missing = daemon.scratch().join("nope");
    let out = daemon.run_bashc(&["exec", "--workdir", missing.to_str().unwrap(), "--", "true"]);
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        stderr(&out).contains(&format!(
            "Working directory does not exist: {}",
            missing.display()
        )),
        "{}",
        show(&out)
    );

    let file = daemon.scratch().join("file");
    std::fs::write(&file, "").unwrap();
    let out = daemon.run_bashc(&["exec", "--workdir", file.to_str().unwrap(), "--", "true"]);
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        stderr(&out).contains(&format!(
            "Working directory is not a directory: {}",
            file.display()
        )),
        "{}",
        show(&out)
    );
}

#[test]
fn the_clients_cwd_is_the_default_workdir_and_workdir_overrides_it() {
    let daemon = Daemon::start();
    let here = daemon.scratch().join("here");
    let there = daemon.scratch().join("there");
    std::fs::create_dir(&here).unwrap();
    std::fs::create_dir(&there).unwrap();
    let out = daemon
        .bashc()
        .args(["exec", "--json", "pwd"])
        .current_dir(&here)
        .output()
        .unwrap();
    assert_eq!(
        json(&out)["stdout"]["text"],
        format!("{}\n", here.display())
    );
    let out = daemon
        .bashc()
        .args(["exec", "--json", "--workdir", "../there", "pwd"])
        .current_dir(&here)
        .output()
        .unwrap();
    let pwd = json(&out)["stdout"]["text"]
        .as_str()
        .unwrap()
        .trim()
        .to_owned();
    assert_eq!(
        std::fs::canonicalize(pwd).unwrap(),
        std::fs::canonicalize(&there).unwrap()
    );
}

#[test]
fn the_clients_environment_arrives_and_the_hardening_set_wins() {
    let daemon = Daemon::start();
    let out = daemon
        .bashc()
        .args(["exec", "--json", "--", "env"])
        .env("FROM_CLIENT", "yes")
        .env("PAGER", "less")
        .env("GIT_EDITOR", "vim")
        .output()
        .unwrap();
    let env = json(&out)["stdout"]["text"].as_str().unwrap().to_owned();
    let has = |line: &str| env.lines().any(|l| l == line);
    for line in [
        "FROM_CLIENT=yes",
        "PAGER=cat",
        "GIT_PAGER=cat",
        "GIT_EDITOR=true",
        "EDITOR=true",
        "GIT_TERMINAL_PROMPT=0",
        "DEBIAN_FRONTEND=noninteractive",
        "TERM=dumb",
        "NO_COLOR=1",
        "BASHD_SESSION=test",
    ] {
        assert!(
            has(line),
            "{line} missing from the job's environment:\n{env}"
        );
    }
    assert!(env.lines().any(|l| l.starts_with("BASHD_JOB=")), "{env}");
    assert!(!has("PAGER=less"), "{env}");
}

#[test]
fn stdin_is_dev_null_even_when_the_clients_stdin_stays_open() {
    let daemon = Daemon::start();
    // The client's own stdin is a pipe nobody writes to or closes.
    let child = daemon
        .bashc()
        .args(["exec", "--timeout", "20", "--", "cat; read x; echo done"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(stdout(&out).contains("done"), "{}", show(&out));
}

#[test]
fn a_timeout_with_kill_ends_the_whole_process_group() {
    crate::assert_timeout_kills(
        "sleep 300.101 & bash -c 'sleep 301.101' & (sleep 302.101); wait",
        &["sleep 300.101", "sleep 301.101", "sleep 302.101"],
    );
}

#[test]
fn a_client_killed_mid_command_takes_its_job_with_it() {
    let daemon = Daemon::start();
    let mut client = daemon
        .bashc()
        .args([
            "exec",
            "--timeout",
            "600",
            "--",
            "sleep 303.202; echo never",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let sleeps = wait_for_running("sleep 303.202");
    client.kill().unwrap();
    client.wait().unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || sleeps.iter().all(|&p| !alive(p))),
        "the job of a SIGKILLed client is still alive: {sleeps:?}"
    );
}

#[test]
fn a_command_killed_by_a_signal_exits_128_plus_n() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&["exec", "--json", "--", "kill -TERM $$"]);
    assert_eq!(out.status.code(), Some(143), "{}", show(&out));
    let result = json(&out);
    assert_eq!(result["state"], "signaled");
    assert_eq!(result["signal"], 15);
    let out = daemon.run_bashc(&["exec", "--", "kill -TERM $$"]);
    assert!(
        stdout(&out).contains("exit code: 143 (signaled, SIGTERM)"),
        "{}",
        show(&out)
    );
}

#[test]
fn forty_concurrent_clients_each_get_their_own_answer() {
    let daemon = Daemon::start();
    let children: Vec<_> = (0..40)
        .map(|i| {
            daemon
                .bashc()
                .args([
                    "exec",
                    "--json",
                    "--",
                    &format!("echo answer-{i}; exit {}", i % 7),
                ])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some((i % 7) as i32), "{}", show(&out));
        assert_eq!(json(&out)["stdout"]["text"], format!("answer-{i}\n"));
    }
}

#[test]
fn output_beyond_the_limits_is_cut_to_the_last_whole_lines() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&["exec", "--json", "--", "seq 1 10000"]);
    let result = json(&out);
    let stdout = &result["stdout"];
    assert_eq!(stdout["truncated"], true, "{result}");
    assert_eq!(stdout["truncated_by"], "lines");
    assert_eq!(stdout["total_lines"], 10000);
    assert_eq!(stdout["shown_lines"], 2000);
    let expected: String = (8001..=10000).map(|i| format!("{i}\n")).collect();
    assert_eq!(stdout["text"], expected);
}

#[test]
fn with_on_straggler_kill_processes_left_behind_by_the_shell_are_killed_and_named() {
    let daemon = Daemon::start_with_config("[sessions]\non_straggler = \"kill\"\n");
    let out = daemon.run_bashc(&[
        "exec",
        "--json",
        "--",
        "sleep 304.303 >/dev/null 2>&1 & echo started",
    ]);
    let result = json(&out);
    assert_eq!(result["stdout"]["text"], "started\n");
    assert_eq!(result["state"], "exited", "{result}");
    assert!(
        result["notice"]
            .as_str()
            .unwrap_or_default()
            .contains("were killed"),
        "{result}"
    );
    assert!(
        wait_until(Duration::from_secs(5), || pids_running("sleep 304.303")
            .is_empty()),
        "the straggler is alive"
    );
}

/// Issue 15: a timeout outside 1 s .. 24 h, or limits that would show nothing, are
/// refused with what to do instead; nothing runs.
#[test]
fn a_timeout_out_of_range_or_a_zero_limit_is_refused_not_clamped() {
    let daemon = Daemon::start();
    // A timeout out of range is bashc's usage error since issue 33 (exit 2, nothing
    // sent); the daemon's own refusal is what a library or MCP client gets.
    for (args, said, code) in [
        (vec!["--timeout", "0"], "0 s is outside 1 s .. 24 h", 2),
        (
            vec!["--timeout", "86401"],
            "86401 s is outside 1 s .. 24 h",
            2,
        ),
        (
            vec!["--max-lines", "0"],
            // Issue 31: named as the CLI's flag, not the protocol's field.
            "--max-lines: 0 would show nothing",
            2,
        ),
        (
            vec!["--max-bytes", "0"],
            "--max-bytes: 0 would show nothing",
            2,
        ),
    ] {
        let mut all = vec!["exec"];
        all.extend(&args);
        all.extend(["--", "touch ran-i15"]);
        let out = daemon.run_bashc(&all);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", show(&out));
        assert!(stderr(&out).contains(said), "{args:?}: {}", show(&out));
    }
    assert!(
        !daemon.scratch().join("ran-i15").exists(),
        "a refused command ran"
    );
    let out = daemon.run_bashc(&["exec", "--timeout", "86400", "--", "echo fine"]);
    assert_eq!(
        stdout(&out),
        "stdout:\nfine\n\nexit code: 0\n",
        "{}",
        show(&out)
    );
}

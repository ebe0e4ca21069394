//! What a newcomer found at the edges (issue 33): `output --grep` that finds nothing
//! exits 1 as grep does, an out-of-range `--timeout` is a usage error, one killed job
//! shows one status in `kill`, `jobs`, `check` and `wait`, and `bashc stop` stops the
//! daemon.

use std::time::Duration;

use bashd_tests::{alive, wait_until};

use crate::{json, show, stderr, stdout};
use bashd_tests::Daemon;

/// Issue 33.
#[test]
fn output_grep_exits_1_when_no_line_matches_as_grep() {
    let daemon = Daemon::start();
    let result = json(&daemon.run_bashc(&["exec", "--json", "--", "printf 'one\\ntwo\\n'"]));
    let job = result["job"].as_str().unwrap();

    let out = daemon.run_bashc(&["output", job, "--grep", "^two$"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(stdout(&out), "2:two\n", "{}", show(&out));

    for json_flag in [&[][..], &["--json"][..]] {
        let mut args = vec!["output", job, "--grep", "three"];
        args.extend_from_slice(json_flag);
        let out = daemon.run_bashc(&args);
        assert_eq!(out.status.code(), Some(1), "{}", show(&out));
        assert_eq!(stderr(&out), "", "{}", show(&out));
    }
    // Without --grep, an empty page is no failure.
    let out = daemon.run_bashc(&["output", job, "--offset", "9"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));

    let help = daemon.run_bashc(&["output", "--help"]);
    assert!(stdout(&help).contains("1 when none did"), "{}", show(&help));
}

/// Issue 33.
#[test]
fn a_timeout_out_of_range_is_a_usage_error_and_nothing_runs() {
    let daemon = Daemon::start();
    let marker = daemon.scratch().join("ran");
    let command = format!("touch {}", marker.display());
    for timeout in ["0", "86401", "-1", "soon"] {
        let flag = format!("--timeout={timeout}");
        let out = daemon.run_bashc(&["exec", &flag, "--", &command]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "--timeout {timeout}: {}",
            show(&out)
        );
        assert!(stderr(&out).contains("--timeout"), "{}", show(&out));
    }
    // So are the times of wait and kill: seconds, 0 or more.
    for args in [
        &["wait", "j1", "--timeout=-1"][..],
        &["wait", "j1", "--idle", "soon"][..],
        &["kill", "j1", "--grace=-2"][..],
    ] {
        let out = daemon.run_bashc(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", show(&out));
        assert!(
            stderr(&out).contains("a time in seconds must be 0 or more"),
            "{}",
            show(&out)
        );
    }
    let out = daemon.run_bashc(&["exec", "--timeout", "0", "--", "true"]);
    assert!(
        stderr(&out).contains("0 s is outside 1 s .. 24 h"),
        "{}",
        show(&out)
    );
    assert!(!marker.exists(), "a command with a bad timeout ran");
    let out = daemon.run_bashc(&["jobs", "--json"]);
    assert_eq!(json(&out), serde_json::json!([]), "a job was started");
    // The bounds themselves are taken.
    let out = daemon.run_bashc(&["exec", "--timeout", "1", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

/// The status each view gives a job: `kill`'s exit status and its `exit code:` line,
/// `check`'s and `wait`'s, and the EXIT column of `jobs`.
/// (Issue 33.)
#[test]
fn a_killed_job_has_one_status_in_kill_jobs_check_and_wait() {
    let daemon = Daemon::start();
    let started =
        json(&daemon.run_bashc(&["exec", "--mode", "background", "--json", "--", "sleep 600"]));
    let job = started["job"].as_str().unwrap().to_owned();
    let killed = daemon.run_bashc(&["kill", &job]);
    assert_eq!(killed.status.code(), Some(143), "{}", show(&killed));
    assert!(
        stdout(&killed).contains("exit code: 143 (killed, SIGTERM)"),
        "{}",
        show(&killed)
    );
    for view in ["check", "wait"] {
        let out = daemon.run_bashc(&[view, &job]);
        assert_eq!(out.status.code(), Some(143), "{view}: {}", show(&out));
        assert!(
            stdout(&out).contains("exit code: 143 (killed, SIGTERM)"),
            "{view}: {}",
            show(&out)
        );
    }
    let listed = daemon.run_bashc(&["jobs"]);
    assert_eq!(
        exit_column(&stdout(&listed), &job),
        "143",
        "{}",
        show(&listed)
    );
    let listed = json(&daemon.run_bashc(&["jobs", "--json"]));
    assert_eq!(listed[0]["state"], "killed", "{listed}");
    assert_eq!(listed[0]["signal"], 15, "{listed}");

    // A signal nobody in bashd sent: the same 128+N everywhere.
    let started = json(&daemon.run_bashc(&[
        "exec",
        "--mode",
        "background",
        "--json",
        "--",
        "kill -INT $$; sleep 5",
    ]));
    let job = started["job"].as_str().unwrap().to_owned();
    let waited = daemon.run_bashc(&["wait", &job, "--timeout", "30"]);
    assert_eq!(waited.status.code(), Some(130), "{}", show(&waited));
    let listed = daemon.run_bashc(&["jobs"]);
    assert_eq!(
        exit_column(&stdout(&listed), &job),
        "130",
        "{}",
        show(&listed)
    );
    // A running job has no status yet.
    let started =
        json(&daemon.run_bashc(&["exec", "--mode", "background", "--json", "--", "sleep 600"]));
    let running = started["job"].as_str().unwrap().to_owned();
    let listed = daemon.run_bashc(&["jobs"]);
    assert_eq!(
        exit_column(&stdout(&listed), &running),
        "-",
        "{}",
        show(&listed)
    );
    daemon.run_bashc(&["kill", &running]);
}

/// The EXIT cell of `job`'s row in `bashc jobs`.
fn exit_column(table: &str, job: &str) -> String {
    let mut lines = table.lines();
    let header = lines.next().expect("a header line");
    let names: Vec<&str> = header.split_whitespace().collect();
    let column = names
        .iter()
        .position(|name| *name == "EXIT")
        .expect("an EXIT column");
    let row = lines
        .find(|line| line.split_whitespace().next() == Some(job))
        .unwrap_or_else(|| panic!("no row of {job} in:\n{table}"));
    // The cells before EXIT hold no spaces: JOB, SESSION, STATE.
    row.split_whitespace().nth(column).unwrap().to_owned()
}

/// Issue 33.
#[test]
fn bashc_stop_stops_the_daemon_and_its_jobs() {
    let mut daemon = Daemon::start();
    let started =
        json(&daemon.run_bashc(&["exec", "--mode", "background", "--json", "--", "sleep 600"]));
    let shell = started["pid"].as_u64().unwrap() as u32;
    assert!(alive(shell));
    let daemon_pid = daemon.pid();

    let out = daemon.run_bashc(&["stop"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(
        stdout(&out),
        format!("stopping bashd (pid {daemon_pid}): ending 1 running job\nbashd stopped\n"),
        "{}",
        show(&out)
    );
    // It exited as on SIGTERM: status 0, no socket left, no job left.
    let status = daemon.child_mut().wait().unwrap();
    assert_eq!(status.code(), Some(0), "{}", daemon.log());
    assert!(!daemon.socket_path().exists());
    assert!(
        wait_until(Duration::from_secs(10), || !alive(shell)),
        "the job outlived the daemon"
    );
    // The daemon logs the request, not a front end's command for it (issue 31).
    assert!(
        daemon.log().contains("a client asked bashd to stop"),
        "{}",
        daemon.log()
    );

    // Nothing to stop, and no daemon started to stop it.
    let out = daemon
        .bashc()
        .env_remove("BASHD_NO_AUTOSTART")
        .arg("stop")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        stderr(&out).contains("bashd is not running at"),
        "{}",
        show(&out)
    );
    assert!(
        !daemon.socket_path().exists(),
        "bashc stop started a daemon"
    );
}

/// Issue 33.
#[test]
fn a_sandboxed_job_cannot_stop_bashd() {
    let daemon = Daemon::start();
    let bashc = bashd_tests::bin_path("bashc");
    // Control: a bashc inside the same sandbox reaches the daemon, so a refusal below
    // is the rule's and not a socket out of reach.
    let status = format!("{} status", bashc.display());
    let out = daemon.run_bashc(&["exec", "--sandbox", "read-only", "--", &status]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the control failed: {}",
        show(&out)
    );
    assert!(
        stdout(&out).contains(&format!("pid {}", daemon.pid())),
        "{}",
        show(&out)
    );

    let stop = format!("{} stop", bashc.display());
    let out = daemon.run_bashc(&["exec", "--sandbox", "read-only", "--", &stop]);
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    assert!(
        stdout(&out).contains("a command in a sandboxed job cannot stop bashd"),
        "{}",
        show(&out)
    );
    let out = daemon.run_bashc(&["status"]);
    assert_eq!(out.status.code(), Some(0), "bashd stopped: {}", show(&out));
}

//! Jobs and process ownership (issue 5): background jobs, stragglers, escapees, the job
//! commands, sessions, owners and linger. Which processes live is read from /proc.

use std::process::Stdio;
use std::time::{Duration, Instant};

use bashd_tests::{Daemon, KillOnDrop, alive, pids_running, wait_for_running, wait_until};

use crate::{json, show, stderr, stdout};

const GONE_WITHIN: Duration = Duration::from_secs(10);

fn gone(command_line: &str) -> bool {
    wait_until(GONE_WITHIN, || pids_running(command_line).is_empty())
}

/// The job id a result names.
fn job_of(result: &serde_json::Value) -> String {
    result["job"]
        .as_str()
        .expect("a result names its job")
        .to_owned()
}

#[test]
fn a_timeout_with_on_timeout_kill_kills_escapees_too() {
    crate::assert_timeout_kills(
        "setsid sleep 301.1 & (nohup sleep 301.2 >/dev/null 2>&1 &); sleep 301.3",
        &["sleep 301.1", "sleep 301.2", "sleep 301.3"],
    );
}

#[test]
fn a_timeout_moves_the_job_to_the_background_and_wait_and_output_see_all_of_it() {
    let daemon = Daemon::start();
    let started = Instant::now();
    let out = daemon.run_bashc(&[
        "exec",
        "--json",
        "--timeout",
        "1",
        "--",
        "echo start; sleep 3; echo end",
    ]);
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let result = json(&out);
    assert_eq!(result["backgrounded"], true, "{result}");
    assert_eq!(result["state"], "running");
    assert_eq!(result["stdout"]["text"], "start\n");
    let job = job_of(&result);
    assert!(
        result["notice"]
            .as_str()
            .unwrap()
            .contains(&format!("bashc wait {job}")),
        "{result}"
    );

    let out = daemon.run_bashc(&["wait", &job, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let result = json(&out);
    assert_eq!(result["state"], "exited");
    assert_eq!(result["stdout"]["text"], "start\nend\n");
    let out = daemon.run_bashc(&["output", &job]);
    assert_eq!(stdout(&out), "start\nend\n", "{}", show(&out));
}

#[test]
fn a_server_left_running_returns_at_once_and_stays_a_job_until_killed() {
    let daemon = Daemon::start();
    let started = Instant::now();
    let out = daemon.run_bashc(&["exec", "--json", "--", "sleep 600.5 & echo started"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let result = json(&out);
    assert_eq!(result["stdout"]["text"], "started\n");
    assert_eq!(
        (&result["state"], &result["backgrounded"]),
        (&"running".into(), &true.into())
    );
    assert_eq!(result["exit_code"], 0, "the shell's own status: {result}");
    let job = job_of(&result);
    let sleeps = pids_running("sleep 600.5");
    assert_eq!(sleeps.len(), 1, "the server is not alive");

    let jobs = json(&daemon.run_bashc(&["jobs", "--json"]));
    let listed = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == job.as_str())
        .unwrap_or_else(|| panic!("{job} not listed: {jobs}"));
    assert_eq!(listed["state"], "running", "{listed}");
    assert_eq!(listed["mode"], "background");
    assert_eq!(listed["command"], "sleep 600.5 & echo started");

    let out = daemon.run_bashc(&["kill", &job, "--json"]);
    assert_eq!(json(&out)["state"], "killed", "{}", show(&out));
    assert!(gone("sleep 600.5"));
    assert!(!alive(sleeps[0]));
}

#[test]
fn two_checks_show_every_line_once_and_output_pages_by_line() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&[
        "exec",
        "--json",
        "--mode",
        "background",
        "--",
        "for i in 1 2 3 4 5; do echo line$i; sleep 0.4; done",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let result = json(&out);
    assert_eq!(
        (&result["state"], &result["backgrounded"]),
        (&"running".into(), &true.into())
    );
    let job = job_of(&result);

    // `output` reads without moving the check cursor.
    let two_lines = wait_until(Duration::from_secs(10), || {
        json(&daemon.run_bashc(&["output", &job, "--json"]))["total_lines"]
            .as_u64()
            .is_some_and(|n| n >= 2)
    });
    assert!(two_lines, "the job wrote nothing");
    let first = json(&daemon.run_bashc(&["check", &job, "--json"]));
    assert_eq!(first["state"], "running", "{first}");
    let first_text = first["stdout"]["text"].as_str().unwrap().to_owned();
    assert!(first_text.starts_with("line1\nline2\n"), "{first}");

    daemon.run_bashc(&["wait", &job]);
    let second = json(&daemon.run_bashc(&["check", &job, "--json"]));
    assert_eq!(second["state"], "exited", "{second}");
    let second_text = second["stdout"]["text"].as_str().unwrap();
    assert!(!second_text.is_empty(), "{second}");
    assert_eq!(
        format!("{first_text}{second_text}"),
        "line1\nline2\nline3\nline4\nline5\n"
    );
    let third = daemon.run_bashc(&["check", &job]);
    assert!(stdout(&third).contains("No new output"), "{}", show(&third));

    let out = daemon.run_bashc(&["output", &job, "--offset", "2", "--limit", "2"]);
    assert_eq!(stdout(&out), "line2\nline3\n", "{}", show(&out));
}

#[test]
fn kill_ends_a_background_job_with_its_escapee_and_by_pid() {
    let daemon = Daemon::start();
    let run = |session: &str, command: &str| daemon.background_answer(session, &[], command);
    let escaping = run("a", "setsid sleep 302.1 & sleep 302.2");
    wait_for_running("sleep 302.1");
    wait_for_running("sleep 302.2");
    // The job is session a's: from another session it takes saying so.
    let out = daemon.run_bashc(&["kill", &job_of(&escaping), "--any-session", "--json"]);
    assert_eq!(json(&out)["state"], "killed", "{}", show(&out));
    assert!(gone("sleep 302.1"), "the setsid child survived");
    assert!(gone("sleep 302.2"));

    let by_pid = run("a", "sleep 302.3");
    wait_for_running("sleep 302.3");
    let pid = by_pid["pid"].as_u64().unwrap().to_string();
    let out = daemon.run_bashc(&[
        "kill",
        "--pid",
        &pid,
        "--session",
        "a",
        "--signal",
        "INT",
        "--json",
    ]);
    let result = json(&out);
    assert_eq!(result["job"], by_pid["job"], "{result}");
    assert_eq!(result["state"], "killed");
    assert_eq!(result["signal"], 2, "{result}");
    assert_eq!(out.status.code(), Some(130));
    assert!(gone("sleep 302.3"));
}

#[test]
fn sessions_scope_jobs_and_closing_one_kills_its_jobs_and_removes_its_dir() {
    let daemon = Daemon::start();
    let run = |session: &str, command: &str| daemon.background_answer(session, &[], command);
    let a = run("a", "echo hi; sleep 302.4");
    let b = run("b", "sleep 302.5");
    wait_for_running("sleep 302.4");
    wait_for_running("sleep 302.5");

    let listed = |args: &[&str]| -> Vec<String> {
        let out = daemon.run_bashc(&[&["jobs", "--json"], args].concat());
        json(&out)
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["job"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(listed(&["--session", "b"]), vec![job_of(&b)]);
    assert_eq!(listed(&["--session", "a"]), vec![job_of(&a)]);
    assert_eq!(listed(&["--all"]).len(), 2);
    let sessions = json(&daemon.run_bashc(&["sessions", "--json"]));
    let names: Vec<&str> = sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"], "{sessions}");

    let dir = daemon.runtime_dir().join("sessions/a");
    assert!(
        dir.is_dir(),
        "a background job's output goes to its session dir"
    );
    let out = daemon.run_bashc(&["session", "close", "a"]);
    assert!(
        stdout(&out).contains("1 running job killed"),
        "{}",
        show(&out)
    );
    assert!(
        pids_running("sleep 302.4").is_empty(),
        "close returned before the job died"
    );
    assert!(!dir.exists(), "the session dir is still there");
    assert!(
        !pids_running("sleep 302.5").is_empty(),
        "session b's job died too"
    );

    // A closed session has no jobs: an empty list, not an error (issue 24).
    let out = daemon.run_bashc(&["jobs", "--session", "a"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(stdout(&out), "no jobs\n", "{}", show(&out));
    let out = daemon.run_bashc(&["jobs"]);
    assert_eq!(
        stdout(&out),
        "no jobs\n",
        "its own session, not started yet, is empty"
    );
}

#[test]
fn a_dead_owners_background_job_lives_through_the_linger_then_dies() {
    let daemon = Daemon::start_with_config("[sessions]\nlinger_secs = 3\n");
    let mut owner = KillOnDrop::sleeper();
    daemon.background_answer(
        "own1",
        &["--owner-pid", &owner.pid().to_string()],
        "echo hi; sleep 303.1",
    );
    let sleep = wait_for_running("sleep 303.1")[0];
    let dir = daemon.runtime_dir().join("sessions/own1");
    assert!(dir.is_dir());

    // Taken before the kill: the daemon may see the owner die before kill() returns.
    let killed_at = Instant::now();
    owner.kill();
    // The daemon has seen the owner die: the session lingers, and its job lives on.
    let mut sessions = serde_json::Value::Null;
    let lingering = wait_until(GONE_WITHIN, || {
        sessions = json(&daemon.run_bashc(&["sessions", "--json"]));
        sessions[0]["state"] == "lingering"
    });
    assert!(lingering, "the owner's death was never seen: {sessions}");
    assert!(
        alive(sleep),
        "the job died with its owner, before its session's linger ended"
    );

    assert!(
        wait_until(GONE_WITHIN, || !alive(sleep)),
        "the job outlived the linger"
    );
    assert!(killed_at.elapsed() >= Duration::from_secs(3));
    assert!(
        wait_until(GONE_WITHIN, || !dir.exists()),
        "the session dir was kept"
    );
}

#[test]
fn a_session_named_again_within_its_linger_is_adopted_and_kept() {
    let daemon = Daemon::start_with_config("[sessions]\nlinger_secs = 2\n");
    let mut owner = KillOnDrop::sleeper();
    let heir = KillOnDrop::sleeper();
    daemon.background_answer(
        "own2",
        &["--owner-pid", &owner.pid().to_string()],
        "sleep 303.2",
    );
    let sleep = wait_for_running("sleep 303.2")[0];
    daemon.background_answer(
        "own2-heirless",
        &["--owner-pid", &owner.pid().to_string()],
        "sleep 303.25",
    );
    let orphan = wait_for_running("sleep 303.25")[0];
    owner.kill();
    // Acting for the session adopts it; looking (`jobs --session`) would not.
    let out = daemon.run_bashc(&[
        "exec",
        "--session",
        "own2",
        "--owner-pid",
        &heir.pid().to_string(),
        "--",
        "echo heir-here",
    ]);
    assert!(stdout(&out).contains("heir-here"), "{}", show(&out));
    // Past the linger the job must still be alive: the heir owns the session now. The
    // control, a session the same owner left without an heir, ends when the linger does.
    assert!(
        wait_until(GONE_WITHIN, || !alive(orphan)),
        "the heirless session's job outlived the linger: the setup is broken"
    );
    assert!(alive(sleep), "the adopted session's job was killed");
    let sessions = json(&daemon.run_bashc(&["sessions", "--json"]));
    let adopted = sessions
        .as_array()
        .and_then(|all| all.iter().find(|s| s["session"] == "own2"))
        .unwrap_or_else(|| panic!("no session own2: {sessions}"));
    assert_eq!(adopted["state"], "active", "{sessions}");
    assert_eq!(adopted["owners"][0], heir.pid(), "{sessions}");
}

#[test]
fn an_owners_death_kills_its_foreground_job_at_once() {
    let daemon = Daemon::start();
    let mut owner = KillOnDrop::sleeper();
    let client = daemon
        .bashc()
        .args([
            "exec",
            "--json",
            "--session",
            "own3",
            "--owner-pid",
            &owner.pid().to_string(),
            "--",
            "sleep 303.3",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_running("sleep 303.3");
    owner.kill();
    assert!(gone("sleep 303.3"), "the foreground job outlived its owner");
    // The client ends with the daemon should this fail: its connection closes.
    let out = client.wait_with_output().unwrap();
    let result = json(&out);
    assert_eq!(result["state"], "killed", "{}", show(&out));
    assert!(
        result["notice"]
            .as_str()
            .unwrap_or_default()
            .contains("own3"),
        "{result}"
    );
}

#[test]
fn an_unknown_job_is_named_by_every_job_command() {
    let daemon = Daemon::start();
    for command in ["kill", "check", "output", "wait"] {
        let out = daemon.run_bashc(&[command, "j999"]);
        assert_ne!(out.status.code(), Some(0), "{command}: {}", show(&out));
        // Well formed: told there is no such job, not how ids look (issue 45).
        assert!(
            stderr(&out).contains(
                "no job j999: bashd has started no job yet: `bashc jobs` lists this session's jobs"
            ),
            "{command}: {}",
            show(&out)
        );
    }
    let out = daemon.run_bashc(&["check", "job12"]);
    assert!(
        stderr(&out).contains("job ids look like j12"),
        "{}",
        show(&out)
    );
    let out = daemon.run_bashc(&["kill", "--pid", "999999"]);
    assert!(
        stderr(&out).contains("no job has pid 999999"),
        "{}",
        show(&out)
    );
}

#[test]
fn an_agent_keeps_one_session_and_a_bashc_inside_a_job_joins_the_jobs_session() {
    let daemon = Daemon::start();
    // Without BASHD_SESSION, the session is that of the nearest ancestor that is not a
    // shell: this test process, through any number of `sh -c`.
    let session_of = |out: std::process::Output| json(&out)["session"].clone();
    let bashc = bashd_tests::bin_path("bashc");
    let direct = daemon
        .bashc()
        .env_remove("BASHD_SESSION")
        .args(["exec", "--json", "--", "true"])
        .output()
        .unwrap();
    let agent = format!("agent-{}", std::process::id());
    assert_eq!(session_of(direct), agent.as_str());
    let out = std::process::Command::new("sh")
        .args(["-c", "sh -c '\"$BASHC\" exec --json -- true'"])
        .env("BASHC", &bashc)
        .env("BASHD_RUNTIME_DIR", daemon.runtime_dir())
        .env("BASHD_NO_AUTOSTART", "1")
        .env_remove("BASHD_SESSION")
        .output()
        .unwrap();
    assert_eq!(session_of(out), agent.as_str());

    let out = daemon.run_bashc(&[
        "exec",
        "--json",
        "--session",
        "outer",
        "--",
        &format!("{} jobs --json", bashc.display()),
    ]);
    let result = json(&out);
    let inner: serde_json::Value =
        serde_json::from_str(result["stdout"]["text"].as_str().unwrap()).unwrap();
    assert_eq!(inner[0]["session"], "outer", "{result}");
    assert_eq!(
        inner[0]["state"], "running",
        "the job lists itself: {result}"
    );
}

#[test]
fn a_background_job_keeps_its_own_timeout() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&[
        "exec",
        "--json",
        "--mode",
        "background",
        "--timeout",
        "1",
        "--",
        "sleep 305.1",
    ]);
    let started = json(&out);
    wait_for_running("sleep 305.1");
    let out = daemon.run_bashc(&["wait", &job_of(&started), "--json", "--timeout", "30"]);
    assert_eq!(out.status.code(), Some(124), "{}", show(&out));
    assert_eq!(json(&out)["state"], "timed_out");
    assert!(gone("sleep 305.1"));
}

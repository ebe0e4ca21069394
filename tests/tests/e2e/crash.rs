//! Crash safety (issue 6): what a daemon that was SIGKILLed leaves is ended by the next
//! one, the runtime dir is cleaned without leaving it, the journal survives damage,
//! and the config reloads on SIGHUP. Which processes live is read from /proc.

use std::fs;
use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};

use bashc::protocol::runtime;
use bashd_tests::{Daemon, alive, pids_running, wait_for_running, wait_until};
use rustix::process::{Pid, Signal};

use crate::{json, show};

const GONE_WITHIN: Duration = Duration::from_secs(10);

/// The number of a job id: `j12` is 12.
fn job_number(result: &serde_json::Value) -> u64 {
    result["job"].as_str().unwrap()[1..].parse().unwrap()
}

fn signal(pid: u32, signal: Signal) {
    rustix::process::kill_process(Pid::from_raw(pid as i32).unwrap(), signal).unwrap();
}

/// On the scan path, where nothing ends a job when its daemon dies, the next daemon's
/// recovery does. (A job's resident ends it at once: `contain.rs`.)
#[test]
fn the_next_start_ends_what_a_sigkilled_daemon_left_and_ids_go_on() {
    let mut daemon = Daemon::start_with_config("[containment]\nmechanism = \"scan\"\n");
    let first = daemon.exec_json(&[
        "--session",
        "crash-a",
        "--mode",
        "background",
        "--",
        "setsid sleep 306.101 & sleep 306.102",
    ]);
    let second = daemon.exec_json(&[
        "--session",
        "crash-b",
        "--mode",
        "background",
        "--",
        "sleep 306.103",
    ]);
    let last = daemon.exec_json(&["--session", "crash-b", "--", "true"]);
    let mut pids = Vec::new();
    for command in ["sleep 306.101", "sleep 306.102", "sleep 306.103"] {
        pids.extend(wait_for_running(command));
    }
    assert_eq!(daemon.session_dirs(), ["crash-a", "crash-b"]);

    daemon.kill_daemon();
    // Without a daemon the jobs are orphans, not dead.
    assert!(pids.iter().all(|&pid| alive(pid)), "{pids:?}");

    let restarted = Instant::now();
    daemon.restart();
    // A killed process leaves the environ scan when its memory goes, and stays alive
    // in /proc until it has exited whole: both are waited for.
    assert!(
        wait_until(GONE_WITHIN, || daemon.job_processes().is_empty()
            && pids.iter().all(|&pid| !alive(pid))),
        "job processes alive {:?} ({pids:?}) after the restart",
        daemon.job_processes()
    );
    assert!(
        restarted.elapsed() < GONE_WITHIN,
        "took {:?}",
        restarted.elapsed()
    );
    // An answer means the cleanup is over: it runs before the first one.
    let next = daemon.exec_json(&["--session", "crash-c", "--", "true"]);
    // Issue 18: the sessions of the lost jobs keep their dirs, with their output.
    assert_eq!(daemon.session_dirs(), ["crash-a", "crash-b"]);
    let log = daemon.log();
    assert!(
        log.contains("cleaned up after a bashd that did not stop")
            && log.contains("2 unfinished job(s)")
            && log.contains("kept as lost"),
        "{log}"
    );

    let highest = [&first, &second, &last].map(job_number).into_iter().max();
    assert!(
        Some(job_number(&next)) > highest,
        "new job {} after {highest:?}",
        next["job"]
    );
}

#[test]
fn cleanup_removes_stale_session_dirs_and_nothing_outside_the_runtime_dir() {
    let daemon = Daemon::unstarted();
    let dir = daemon.make_runtime_dir();
    let sessions = runtime::sessions_dir(&dir);
    let stale = sessions.join("stale-session");
    fs::create_dir_all(&stale).unwrap();
    fs::write(stale.join("j3.stdout"), "old output").unwrap();
    let outside = daemon.scratch().join("outside");
    fs::create_dir_all(outside.join("inner")).unwrap();
    fs::write(outside.join("keep.txt"), "precious").unwrap();
    fs::write(outside.join("inner/keep.txt"), "precious").unwrap();
    symlink(&outside, stale.join("link-inside")).unwrap();
    symlink(&outside, sessions.join("link-in-sessions")).unwrap();
    fs::write(dir.join("notes.txt"), "not bashd's").unwrap();
    // A socket file whose daemon is gone.
    drop(std::os::unix::net::UnixListener::bind(runtime::socket_path(&dir)).unwrap());

    let daemon = daemon.spawn_and_wait();
    let out = daemon.run_bashc(&["exec", "--", "echo serving"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));

    assert!(!stale.exists(), "the stale session dir is left");
    for file in ["keep.txt", "inner/keep.txt"] {
        assert_eq!(
            fs::read_to_string(outside.join(file)).unwrap(),
            "precious",
            "{file} outside the runtime dir was touched"
        );
    }
    let link = sessions.join("link-in-sessions");
    assert!(
        fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()),
        "the symlink bashd did not make was removed"
    );
    assert_eq!(
        fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "not bashd's"
    );
    let log = daemon.log();
    for left in [
        link.display().to_string(),
        dir.join("notes.txt").display().to_string(),
    ] {
        assert!(
            log.contains(&format!("left alone {left}")),
            "{left}:\n{log}"
        );
    }
}

#[test]
fn a_journal_with_a_torn_line_and_garbage_is_survived_and_reported() {
    let daemon = Daemon::unstarted();
    let dir = daemon.make_runtime_dir();
    fs::write(
        dir.join("journal"),
        b"bashd-journal 1\njob 41 abc-def s1\n\xde\xad garbage \x01\nend 41\njob 57 abc-def s1\npid 57 12",
    )
    .unwrap();
    let daemon = daemon.spawn_and_wait();
    let result = daemon.exec_json(&["--", "echo fine"]);
    assert_eq!(result["stdout"]["text"], "fine\n");
    assert!(job_number(&result) > 57, "{}", result["job"]);
    let log = daemon.log();
    assert!(
        log.contains("2 line(s) could not be read")
            && log.contains("line 3: not a journal record")
            && log.contains("line 6: torn last line"),
        "{log}"
    );
    // Compacted: the damage is gone, the counter kept.
    let journal = fs::read_to_string(dir.join("journal")).unwrap();
    assert!(
        journal.starts_with("bashd-journal 1\nnext 58\n"),
        "{journal}"
    );
}

#[test]
fn sighup_reloads_the_config_and_keeps_the_old_one_when_the_new_is_broken() {
    let mut daemon = Daemon::start_with_config("[limits]\nmax_lines = 50\n");
    let shown = |daemon: &Daemon| {
        let result = daemon.exec_json(&["--", "seq 1 20"]);
        result["stdout"]["shown_lines"].as_u64().unwrap()
    };
    assert_eq!(shown(&daemon), 20);

    daemon.write_config("[limits]\nmax_lines = 5\nmax_lnes = 4\n");
    signal(daemon.pid(), Signal::HUP);
    assert!(
        daemon.wait_for_log("config not reloaded", GONE_WITHIN),
        "{}",
        daemon.log()
    );
    assert!(
        daemon.log().contains("unknown key limits.max_lnes"),
        "{}",
        daemon.log()
    );
    assert_eq!(shown(&daemon), 20, "the broken config was applied");

    daemon.write_config(
        "[limits]\nmax_lines = 5\n\n[[policy.deny]]\nid = \"no-publish\"\ncommand = \"npm\"\nargs = [\"publish\"]\nmessage = \"CI releases\"\n",
    );
    signal(daemon.pid(), Signal::HUP);
    assert!(
        daemon.wait_for_log("reloaded config", GONE_WITHIN),
        "{}",
        daemon.log()
    );
    assert_eq!(shown(&daemon), 5, "the new config was not applied");
    // The policy is part of it.
    let out = daemon.run_bashc(&["exec", "--json", "--", "npm publish"]);
    assert_eq!(json(&out)["state"], "denied", "{}", show(&out));
    assert!(
        json(&out)["notice"]
            .as_str()
            .unwrap()
            .contains("no-publish"),
        "{}",
        show(&out)
    );
    assert!(
        daemon.child_mut().try_wait().unwrap().is_none(),
        "bashd exited"
    );
}

#[test]
fn sigterm_ends_background_jobs_and_escapees_within_the_grace() {
    let mut daemon = Daemon::start();
    daemon.exec_json(&[
        "--mode",
        "background",
        "--",
        "setsid sleep 306.201 & sleep 306.202",
    ]);
    wait_for_running("sleep 306.201");
    wait_for_running("sleep 306.202");
    let sent = Instant::now();
    signal(daemon.pid(), Signal::TERM);
    let status = daemon.child_mut().wait().unwrap();
    assert_eq!(status.code(), Some(0));
    // The default grace is 2 s and sleep dies on SIGTERM; generous for a loaded CI.
    assert!(
        sent.elapsed() < Duration::from_secs(8),
        "{:?}",
        sent.elapsed()
    );
    assert!(
        daemon.job_processes().is_empty(),
        "{:?}",
        daemon.job_processes()
    );
    assert!(pids_running("sleep 306.201").is_empty());
    assert!(!daemon.socket_path().exists());
    assert!(
        daemon.session_dirs().is_empty(),
        "{:?}",
        daemon.session_dirs()
    );
}

/// The journal keeps the counter across a clean stop too.
#[test]
fn job_ids_are_not_reused_after_a_clean_stop() {
    let mut daemon = Daemon::start();
    let before = daemon.exec_json(&["--", "true"]);
    signal(daemon.pid(), Signal::TERM);
    assert_eq!(daemon.child_mut().wait().unwrap().code(), Some(0));
    daemon.restart();
    let after = daemon.exec_json(&["--", "true"]);
    assert!(job_number(&after) > job_number(&before));
}

#[test]
fn a_sessions_dir_that_is_a_symlink_stops_the_daemon_with_the_fix() {
    let daemon = Daemon::unstarted();
    let dir = daemon.make_runtime_dir();
    let outside = daemon.scratch().join("elsewhere");
    fs::create_dir_all(outside.join("agent-1")).unwrap();
    symlink(&outside, runtime::sessions_dir(&dir)).unwrap();

    let out = daemon.bashd_command().output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let sessions = runtime::sessions_dir(&dir);
    assert!(
        crate::stderr(&out).contains(&format!(
            "{} is not a directory bashd made",
            sessions.display()
        )) && crate::stderr(&out).contains("remove it"),
        "{}",
        show(&out)
    );
    assert!(outside.join("agent-1").is_dir(), "followed the symlink");
}

/// Every page of `job`'s stdout, from the first line to the last.
fn all_output(daemon: &Daemon, job: &str) -> Vec<u8> {
    let mut text = Vec::new();
    let mut offset = 1u64;
    loop {
        let out = daemon.run_bashc(&[
            "output",
            job,
            "--json",
            "--offset",
            &offset.to_string(),
            // Whole pages under the 1 MiB page cap: lines of at most 8 bytes.
            "--limit",
            "100000",
            "--max-bytes",
            "1048576",
            // The job is another session's (the test's job ran in its own).
            "--any-session",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        let page = json(&out);
        text.extend_from_slice(page["text"].as_str().unwrap().as_bytes());
        match page["next_offset"].as_u64() {
            Some(next) => offset = next,
            None => return text,
        }
    }
}

/// Issue 18: a daemon SIGKILLed while a background job has spilled 15 MB; after the
/// restart the job is listed `lost` and its output comes back byte for byte. On both
/// containment paths: the resident ends the job when the daemon dies, the scan path's
/// recovery ends it at the restart.
#[test]
fn the_output_of_a_job_whose_daemon_died_is_kept_and_listed_lost() {
    for config in ["", "[containment]\nmechanism = \"scan\"\n"] {
        let mut daemon = Daemon::start_with_config(config);
        let started = daemon.exec_json(&[
            "--session",
            "i18-lost",
            "--mode",
            "background",
            "--description",
            "counts then sleeps",
            "--",
            "seq 1 2000000; echo to-stderr-i18 >&2; sleep 18002",
        ]);
        let job = started["job"].as_str().unwrap().to_owned();
        let expected: Vec<u8> = (1..=2_000_000u32)
            .flat_map(|n| format!("{n}\n").into_bytes())
            .collect();
        assert!(expected.len() > 14_000_000);
        let session = runtime::sessions_dir(daemon.runtime_dir()).join("i18-lost");
        let spill = session.join(format!("{job}.stdout"));
        assert!(
            wait_until(Duration::from_secs(60), || fs::metadata(&spill)
                .is_ok_and(|m| m.len() == expected.len() as u64)
                && !pids_running("sleep 18002").is_empty()),
            "the job did not spill its output"
        );
        // The sanitizer holds nothing back: the line ended.
        daemon.kill_daemon();
        daemon.restart();

        let out = daemon.run_bashc(&["jobs", "--json", "--session", "i18-lost"]);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        let listed = json(&out);
        let entry = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job"] == job.as_str())
            .unwrap_or_else(|| panic!("{job} not listed: {listed}"));
        assert_eq!(entry["state"], "lost", "{entry}");
        assert_eq!(entry["description"], "counts then sleeps");
        assert!(
            entry["command"]
                .as_str()
                .unwrap()
                .starts_with("seq 1 2000000"),
            "{entry}"
        );
        let got = all_output(&daemon, &job);
        let differs = got.iter().zip(&expected).position(|(a, b)| a != b);
        assert!(
            got == expected,
            "the output differs: {} bytes, expected {}, first difference at {differs:?}",
            got.len(),
            expected.len()
        );
        let stderr = daemon.run_bashc(&["output", &job, "--stream", "stderr", "--any-session"]);
        assert_eq!(
            crate::stdout(&stderr),
            "to-stderr-i18\n",
            "{}",
            show(&stderr)
        );

        let check = daemon.run_bashc(&["check", &job, "--session", "i18-lost", "--json"]);
        let check = json(&check);
        assert_eq!(check["state"], "lost", "{check}");
        let notice = check["notice"].as_str().unwrap_or_default();
        assert!(
            notice.contains(&format!("bashd stopped while {job} ran")),
            "{notice}"
        );
        assert!(
            wait_until(GONE_WITHIN, || pids_running("sleep 18002").is_empty()),
            "the lost job's process lives on"
        );
        // Closing the session forgets them, and their files.
        let closed = daemon.run_bashc(&["session", "close", "i18-lost"]);
        assert_eq!(closed.status.code(), Some(0), "{}", show(&closed));
        assert!(!session.exists());
        let gone = daemon.run_bashc(&["output", &job]);
        assert_ne!(gone.status.code(), Some(0), "{}", show(&gone));
    }
}

/// Issue 18: a foreground `bashc exec` whose daemon dies says so with the job id and
/// where its output will be, instead of "closed the connection before answering";
/// after the restart the job is lost, and what it held in memory only is said lost.
#[test]
fn a_client_whose_daemon_dies_mid_request_names_the_job() {
    let mut daemon = Daemon::start();
    let client = daemon
        .bashc()
        .args([
            "exec",
            "--session",
            "i18-died",
            "--",
            "echo i18-before; sleep 18003",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A job's process runs only once its client was sent the job's id.
    wait_for_running("sleep 18003");
    daemon.kill_daemon();
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    let stderr = crate::stderr(&out);
    let job = stderr
        .split_whitespace()
        .find(|w| w.starts_with('j') && w[1..].parse::<u64>().is_ok())
        .unwrap_or_else(|| panic!("no job id in {stderr:?}"))
        .to_owned();
    assert_eq!(
        stderr.trim_end(),
        format!(
            "bashc: bashd stopped while {job} ran; bashc output {job} has what it printed once bashd is back"
        )
    );
    daemon.restart();
    let check = daemon.run_bashc(&["check", &job, "--session", "i18-died", "--json"]);
    let check = json(&check);
    assert_eq!(check["state"], "lost", "{check}");
    let notice = check["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains(
            "stdout: what it printed before bashd stopped was held in memory only and is lost"
        ),
        "{notice}"
    );
}

/// A `wait` whose daemon dies names the job it waited for and what to run once bashd
/// is back, instead of "closed the connection before answering" (the CLI prints this
/// error's words with the commands to run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_whose_daemon_dies_names_the_job() {
    use bashc::protocol::{Caller, JobRef, WaitConditions, WaitRequest};
    let mut daemon = Daemon::start();
    let started = daemon.run_bashc(&[
        "exec",
        "--session",
        "i16-died",
        "--mode",
        "background",
        "--json",
        "--",
        "sleep 1604",
    ]);
    let job = json(&started)["job"].as_str().unwrap().to_owned();
    // Connected and greeted: the daemon can only die after the wait was sent.
    let client = bashc::Client::connect(&daemon.socket_path()).await.unwrap();
    let waiting = tokio::spawn({
        let job = job.clone();
        async move {
            client
                .wait(WaitRequest {
                    caller: Caller {
                        session: "i16-died".into(),
                        owner: None,
                    },
                    job: JobRef::Id(job),
                    timeout_ms: Some(120_000),
                    conditions: WaitConditions::default(),
                    any_session: false,
                    mcp_call: false,
                })
                .await
        }
    });
    wait_for_running("sleep 1604");
    daemon.kill_daemon();
    let error = waiting.await.unwrap().unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "bashd stopped while waiting for {job}; its output so far is kept for when bashd is back"
        )
    );
    daemon.restart();
    let check = daemon.run_bashc(&["check", &job, "--session", "i16-died", "--json"]);
    assert_eq!(json(&check)["state"], "lost", "{}", show(&check));
}

/// A daemon that dies before it has read a waiting client's request (stopped, then
/// SIGKILLed: the kernel resets the unaccepted connection) is told as a daemon that
/// stopped while waiting for the job, with the job's id, never as a bad frame
/// (issue 45).
#[test]
fn a_wait_whose_stopped_daemon_is_killed_names_the_job() {
    let mut daemon = Daemon::start();
    let job = daemon.background_in("i45-reset", &[], "sleep 1605");
    wait_for_running("sleep 1605");
    signal(daemon.pid(), Signal::STOP);
    let waiting = daemon
        .bashc_in("i45-reset")
        .args(["wait", &job, "--timeout", "120"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("cannot run bashc wait");
    // Connected, its request written, and waiting for the answer: the daemon,
    // stopped, cannot have accepted it.
    let pid = waiting.id();
    assert!(
        wait_until(GONE_WITHIN, || bashd_tests::procs::has_socket(pid)
            && fs::read_to_string(format!("/proc/{pid}/wchan"))
                .is_ok_and(|wchan| wchan == "do_epoll_wait")),
        "bashc wait never waited on its connection"
    );
    daemon.kill_daemon();
    let out = waiting.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("bashd stopped while waiting for {job}")),
        "{}",
        show(&out)
    );
    assert!(!said.contains("bad frame"), "{}", show(&out));
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
}

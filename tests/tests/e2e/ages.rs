//! Issue 45, item 13: every age a job is given (by `wait`, `check`, `jobs`) is its
//! age since its start, or its duration once it ended, so that they agree.

use std::time::Duration;

use bashd_tests::{Daemon, pids_running, wait_until};

use crate::{json, show};

const GONE_WITHIN: Duration = Duration::from_secs(10);

fn duration_ms(value: &serde_json::Value) -> u64 {
    value["duration_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("no duration_ms in {value}"))
}

/// A `wait --timeout 3` that gives up says the job's age then, not its age when the
/// wait began, and a `check` right after says at least as much. A job that ended
/// keeps its duration (the positive control).
#[test]
fn a_wait_that_gives_up_says_the_jobs_age_as_check_does() {
    let daemon = Daemon::start();
    let job = daemon.background_in("ages", &[], "sleep 18031");
    let waited = daemon.run_bashc_in("ages", &["wait", &job, "--timeout", "3", "--json"]);
    let waited = json(&waited);
    assert_eq!(waited["state"], "running", "{waited}");
    assert!(
        duration_ms(&waited) >= 3000,
        "a wait of 3 s on a new job says it is younger: {waited}"
    );
    let checked = daemon.run_bashc_in("ages", &["check", &job, "--json"]);
    let checked = json(&checked);
    assert!(duration_ms(&checked) >= duration_ms(&waited), "{checked}");
    let text = daemon.run_bashc_in("ages", &["wait", &job, "--timeout", "1"]);
    let text = crate::stdout(&text);
    let said: u64 = text
        .split("s so far")
        .next()
        .and_then(|head| head.rsplit(", ").next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no age in {text:?}"));
    assert!(said >= 4, "{text}");

    // `kill` exits as the job did.
    let killed = daemon.run_bashc_in("ages", &["kill", &job]);
    assert_eq!(killed.status.code(), Some(143), "{}", show(&killed));
    let ended = json(&daemon.run_bashc_in("ages", &["check", &job, "--json"]));
    let first = duration_ms(&ended);
    assert!(first >= 4000, "{ended}");
    let again = json(&daemon.run_bashc_in("ages", &["jobs", "--json"]));
    let listed = again
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == job.as_str())
        .unwrap_or_else(|| panic!("{job} not listed: {again}"))
        .clone();
    assert_eq!(
        duration_ms(&listed),
        first,
        "an ended job's duration moves on"
    );
}

/// A job whose daemon died is listed with its age when the next daemon found it,
/// not with when it last printed: one that printed at once and then slept says it
/// ran for the seconds it slept.
#[test]
fn a_lost_job_is_as_old_as_it_ran_not_as_its_last_line() {
    let mut daemon = Daemon::start();
    let job = daemon.background_in("ages-lost", &[], "echo at-once; sleep 18032");
    assert!(
        wait_until(Duration::from_secs(20), || {
            let out = daemon.run_bashc_in("ages-lost", &["check", &job, "--json"]);
            duration_ms(&json(&out)) >= 3000
        }),
        "{job} did not get 3 s old"
    );
    daemon.kill_daemon();
    daemon.restart();
    let listed = daemon.run_bashc_in("ages-lost", &["jobs", "--json"]);
    assert_eq!(listed.status.code(), Some(0), "{}", show(&listed));
    let listed = json(&listed);
    let entry = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job"] == job.as_str())
        .unwrap_or_else(|| panic!("{job} not listed: {listed}"));
    assert_eq!(entry["state"], "lost", "{entry}");
    assert!(
        duration_ms(entry) >= 3000,
        "the lost job is as old as its last line: {entry}"
    );
    assert!(
        wait_until(GONE_WITHIN, || pids_running("sleep 18032").is_empty()),
        "the lost job's process lives on"
    );
}

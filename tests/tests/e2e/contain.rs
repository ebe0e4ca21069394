//! Containment that a job cannot shed (issue 14): processes that leave the job's
//! process group and clear their environment (so they carry no cookie) are still the
//! job's, keep it running, and die with it, however it is ended.
//!
//! Escapees carry neither the cookie nor the runtime dir that the harness sweeps by, so
//! each test names its sleeps by a duration no other test uses, and [`Escapees`] kills
//! them by command line when the test ends, whatever happened.

use std::time::Duration;

use bashd_tests::{Daemon, alive, pids_running, wait_for_running, wait_until};
use rustix::process::{Pid, Signal};

use crate::{json, show};

/// How long an ended job's processes may take to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// The escapes of issue 14, each ending in a `sleep` of its own duration.
struct Escapees {
    command: String,
    sleeps: Vec<String>,
}

impl Escapees {
    /// Five ways out of a job, with sleeps of `base`, `base + 1`, ... seconds.
    fn new(base: u32) -> Escapees {
        let n: Vec<u32> = (base..base + 5).collect();
        let command = format!(
            "env -i setsid sleep {} & \
             env -i setsid -f sleep {}; \
             env -u BASHD_JOB setsid -f sleep {}; \
             (exec -c setsid -f sleep {}); \
             python3 -c 'import os,sys; os.environ.clear(); os.fork() and sys.exit(); os.setsid(); os.fork() and os._exit(0); os.execve(\"/bin/sleep\", [\"sleep\",\"{}\"], {{}})'",
            n[0], n[1], n[2], n[3], n[4]
        );
        let sleeps = n.iter().map(|n| format!("sleep {n}")).collect();
        Escapees { command, sleeps }
    }

    /// Waits until every escapee runs.
    fn wait_running(&self) {
        for sleep in &self.sleeps {
            wait_for_running(sleep);
        }
    }

    fn alive(&self) -> Vec<&str> {
        self.sleeps
            .iter()
            .filter(|sleep| !pids_running(sleep).is_empty())
            .map(String::as_str)
            .collect()
    }

    fn assert_gone(&self, after: &str) {
        let mut left = Vec::new();
        let gone = wait_until(GONE_WITHIN, || {
            left = self.alive().into_iter().map(str::to_owned).collect();
            left.is_empty()
        });
        assert!(gone, "{left:?} outlived {after}");
    }
}

impl Drop for Escapees {
    fn drop(&mut self) {
        for sleep in &self.sleeps {
            for pid in pids_running(sleep) {
                if let Some(pid) = Pid::from_raw(pid as i32) {
                    let _ = rustix::process::kill_process(pid, Signal::KILL);
                }
            }
        }
    }
}

/// Starts the escapes as a background job and waits until its shell has exited and
/// every escapee runs; the job's id and the `bashc jobs` entry for it.
fn start(daemon: &Daemon, escapees: &Escapees) -> (String, serde_json::Value) {
    let out = daemon.run_bashc(&[
        "exec",
        "--json",
        "--mode",
        "background",
        "--",
        &escapees.command,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let result = json(&out);
    let job = result["job"].as_str().unwrap().to_owned();
    let shell = result["pid"].as_u64().unwrap() as u32;
    escapees.wait_running();
    assert!(
        wait_until(GONE_WITHIN, || !alive(shell)),
        "the job's shell {shell} did not exit"
    );
    let listed = listed(daemon, &job);
    (job, listed)
}

/// `bashc jobs --json`'s entry for `job`.
fn listed(daemon: &Daemon, job: &str) -> serde_json::Value {
    let out = daemon.run_bashc(&["jobs", "--json"]);
    json(&out)
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["job"] == job)
        .unwrap_or_else(|| panic!("{job} is not listed:\n{}", show(&out)))
        .clone()
}

#[test]
fn escapees_keep_their_job_running_and_die_with_its_kill() {
    let daemon = Daemon::start();
    let escapees = Escapees::new(9101);
    let (job, listed) = start(&daemon, &escapees);
    assert_eq!(
        listed["state"], "running",
        "the job ended while its escapees run: {listed}"
    );
    let out = daemon.run_bashc(&["kill", "--json", &job]);
    assert_eq!(json(&out)["state"], "killed", "{}", show(&out));
    escapees.assert_gone("bashc kill");
}

#[test]
fn escapees_die_when_their_session_is_closed() {
    let daemon = Daemon::start();
    let escapees = Escapees::new(9111);
    start(&daemon, &escapees);
    let out = daemon.run_bashc(&["session", "close", "test"]);
    assert!(out.status.success(), "{}", show(&out));
    escapees.assert_gone("bashc session close");
}

#[test]
fn escapees_die_when_the_daemon_is_stopped() {
    let mut daemon = Daemon::start();
    let escapees = Escapees::new(9121);
    start(&daemon, &escapees);
    rustix::process::kill_process(
        Pid::from_raw(daemon.pid() as i32).unwrap(),
        Signal::TERM,
    )
    .unwrap();
    let status = daemon.child_mut().wait().unwrap();
    assert_eq!(status.code(), Some(0), "bashd did not stop cleanly");
    escapees.assert_gone("SIGTERM to the daemon");
}

#[test]
fn escapees_die_when_the_daemon_is_sigkilled_and_restarted() {
    let mut daemon = Daemon::start();
    let escapees = Escapees::new(9131);
    start(&daemon, &escapees);
    daemon.kill_daemon();
    daemon.restart();
    escapees.assert_gone("a SIGKILLed daemon and its restart");
}

//! The zygote's spare resident (issue 31): a resident forked and set up ahead, which
//! the zygote hands the next job. A spare that is killed or stopped costs a job
//! nothing but the fork it saved, a spare never outlives its zygote, and the shell it
//! starts is reported with its start time (the journal's guard against pid reuse).

use std::time::{Duration, Instant};

use bashd_protocol::ProcStat;
use bashd_tests::{Daemon, alive, wait_for_running, wait_until};
use rustix::process::{Pid, Signal};

use crate::contain::{GONE_WITHIN, children_named};
use crate::{show, stdout};

/// The daemon's one zygote.
fn the_zygote(daemon: &Daemon) -> u32 {
    let mut zygotes = Vec::new();
    assert!(
        wait_until(GONE_WITHIN, || {
            zygotes = children_named(daemon.pid(), "bashd-zygote");
            zygotes.len() == 1
        }),
        "not one zygote: {zygotes:?}"
    );
    zygotes[0]
}

/// The spare beside the zygote, once there is exactly one, other than `not`.
pub(crate) fn a_spare_of(zygote: u32, not: Option<u32>) -> Option<u32> {
    let mut spares = Vec::new();
    wait_until(GONE_WITHIN, || {
        spares = children_named(zygote, "bashd-spare");
        spares.len() == 1 && Some(spares[0]) != not
    })
    .then(|| spares[0])
}

fn kill(pid: u32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// A process the test stopped or must not leave behind: killed when the test ends,
/// through a pidfd, so that a pid reused meanwhile is never hit.
struct Held(Option<std::os::fd::OwnedFd>);

impl Held {
    fn new(pid: u32) -> Held {
        Held(Pid::from_raw(pid as i32).and_then(|pid| {
            rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
        }))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(pidfd) = &self.0 {
            let _ = rustix::process::pidfd_send_signal(pidfd, Signal::KILL);
        }
    }
}

fn run_echo(daemon: &Daemon, text: &str) {
    let out = daemon.run_bashc(&["exec", "--", &format!("echo {text}")]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(stdout(&out).contains(text), "{}", show(&out));
}

/// A spare killed by someone (a job of the same user may) costs the next job nothing
/// but the fork it saved: the job runs, and a new spare waits beside the zygote.
/// (Issue 31.)
#[test]
fn a_job_after_the_spare_is_killed_runs_and_a_new_spare_appears() {
    let daemon = Daemon::start();
    run_echo(&daemon, "first");
    let zygote = the_zygote(&daemon);
    let killed = a_spare_of(zygote, None).expect("a spare beside the zygote");
    kill(killed, Signal::KILL);
    assert!(wait_until(GONE_WITHIN, || !alive(killed)));

    run_echo(&daemon, "after the spare was killed");
    run_echo(&daemon, "and again");
    assert_eq!(the_zygote(&daemon), zygote, "the zygote was replaced");
    let new = a_spare_of(zygote, Some(killed));
    assert!(new.is_some(), "no new spare beside the zygote");
}

/// A spare waits for the zygote's next job and nothing else: when the zygote dies,
/// its spare goes too, and no idle resident is left behind.
/// (Issue 31.)
#[test]
fn the_spare_exits_with_its_zygote() {
    let daemon = Daemon::start();
    run_echo(&daemon, "first");
    let zygote = the_zygote(&daemon);
    let spare = a_spare_of(zygote, None).expect("a spare beside the zygote");
    let _held = Held::new(spare);
    kill(zygote, Signal::KILL);
    assert!(
        wait_until(GONE_WITHIN, || !alive(spare)),
        "the spare {spare} outlived its zygote {zygote}"
    );
    // The daemon starts another zygote, with its own spare, for the next job.
    run_echo(&daemon, "after the zygote was killed");
    let replaced = the_zygote(&daemon);
    assert_ne!(replaced, zygote);
    assert!(
        a_spare_of(replaced, None).is_some(),
        "no spare beside the new zygote"
    );
}

/// Field 22 of `/proc/PID/stat`.
fn start_time(pid: u32) -> u64 {
    ProcStat::read(pid)
        .unwrap_or_else(|| panic!("no process {pid}"))
        .starttime
}

/// The start time the journal holds for job `job` (`pid N PID PGID START`).
fn journaled_start(daemon: &Daemon, job: &str) -> Option<u64> {
    let n = job.strip_prefix('j')?;
    let journal = std::fs::read_to_string(daemon.runtime_dir().join("journal")).ok()?;
    journal.lines().find_map(|line| {
        let words: Vec<&str> = line.split(' ').collect();
        match words[..] {
            ["pid", m, _, _, start] if m == n => start.parse().ok(),
            _ => None,
        }
    })
}

/// The journal records each job's shell with its start time, which, with the pid,
/// tells the shell from a process that reused its pid when a restarted daemon ends
/// what a dead one left (DESIGN §6): the shell's, as /proc gives it.
/// (Issue 31.)
#[test]
fn the_journal_has_a_running_shells_start_time() {
    let daemon = Daemon::start();
    let result = daemon.background_answer("test", &[], "exec sleep 9521");
    let job = result["job"].as_str().unwrap().to_owned();
    let shell = result["pid"].as_u64().unwrap() as u32;
    wait_for_running("sleep 9521");
    let expected = start_time(shell);
    let mut journaled = None;
    wait_until(GONE_WITHIN, || {
        journaled = journaled_start(&daemon, &job);
        journaled.is_some()
    });
    let out = daemon.run_bashc(&["kill", &job]);
    assert_eq!(out.status.code(), Some(143), "{}", show(&out));
    assert_eq!(journaled, Some(expected), "job {job}, shell {shell}");
}

/// A spare that was stopped (a job of the same user may stop it) cannot hold up the
/// zygote, and with it every job after: the zygote's send of a spawn larger than the
/// socket's buffer (here a job's environment) to a spare that reads none of it times
/// out, the spare is killed, and the job gets a resident forked for it at once, by the
/// same zygote. Without the timeout the zygote waited on the stopped spare, and the
/// daemon gave the job up after 10 s.
/// (Issue 31.)
#[test]
fn a_stopped_spare_does_not_hold_up_a_large_spawn() {
    let daemon = Daemon::start();
    run_echo(&daemon, "first");
    let zygote = the_zygote(&daemon);
    let spare = a_spare_of(zygote, None).expect("a spare beside the zygote");
    let _held = Held::new(spare);
    // Positive control: the spare takes a spawn of that size when it runs.
    let buffer: usize = std::fs::read_to_string("/proc/sys/net/core/wmem_default")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(212_992);
    // No one environment entry may pass 128 KiB (execve's MAX_ARG_STRLEN).
    let entries = 2 * buffer / 100_000 + 1;
    let big = "x".repeat(100_000);
    let large = |text: &str| {
        let mut command = daemon.bashc();
        for n in 0..entries {
            command.env(format!("BIG_{n}"), &big);
        }
        let started = Instant::now();
        let out = command
            .args([
                "exec",
                "--",
                &format!("echo {text} ${{#BIG_0}} ${{#BIG_{}}}", entries - 1),
            ])
            .output()
            .expect("cannot run bashc");
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        assert!(
            stdout(&out).contains(&format!("{text} 100000 100000")),
            "{}",
            show(&out)
        );
        started.elapsed()
    };
    large("taken");
    let spare = a_spare_of(zygote, Some(spare)).expect("a spare after the large job");
    let _held_too = Held::new(spare);

    kill(spare, Signal::STOP);
    let took = large("stopped");
    assert_eq!(the_zygote(&daemon), zygote, "the zygote was given up");
    assert!(
        wait_until(GONE_WITHIN, || !alive(spare)),
        "the stopped spare {spare} was left"
    );
    // Far under the daemon's own limits (5 s to send to the zygote, 10 s to start).
    assert!(took < Duration::from_secs(4), "the job took {took:?}");
    run_echo(&daemon, "after");
    assert!(a_spare_of(zygote, Some(spare)).is_some(), "no spare after");
}

/// Issue 45: `bashc stop` reaps the zygote and its spare before bashd exits: neither is
/// there, not even as a zombie for init to reap, once bashd has exited. A job run
/// before the stop still ran (the control).
#[test]
fn a_stopped_daemon_reaps_its_zygote_and_spare_before_it_exits() {
    let mut daemon = Daemon::start();
    let ran = daemon.run_bashc(&["exec", "--", "echo before-stop"]);
    assert!(stdout(&ran).contains("before-stop\n"), "{}", show(&ran));
    let zygote = the_zygote(&daemon);
    let spare = a_spare_of(zygote, None).expect("no spare beside the zygote");
    let out = daemon.run_bashc(&["stop"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let status = daemon.child_mut().wait().unwrap();
    assert_eq!(status.code(), Some(0), "bashd did not stop cleanly");
    let left: Vec<String> = [("zygote", zygote), ("spare", spare)]
        .into_iter()
        .filter_map(|(name, pid)| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some(format!("{name} {pid}: {stat}"))
        })
        .collect();
    assert!(
        left.is_empty(),
        "left behind by bashd's exit: {left:?}\n{}",
        daemon.log()
    );
}

//! Finding and ending every process of a job (DESIGN §4): its process group, and every
//! process of the daemon's uid whose environment carries the job's cookie, which finds
//! the ones that left the group (`setsid`, double forks). Each is signalled through a
//! pidfd opened before its identity is checked again, so a pid reused since the scan
//! is never hit.
//!
//! The supervisor of the job is the only caller. Scans read `/proc` and so run on a
//! blocking thread.

use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use rustix::process::{Pid, PidfdFlags, Signal};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// How a job's processes are recognised.
#[derive(Debug, Clone)]
pub struct Mark {
    /// The leader's pid, which is the group id of every process that stayed in it.
    pub pgid: Pid,
    /// `BASHD_JOB=<instance>/<job>`, exactly as it sits in the environment.
    pub cookie: Vec<u8>,
}

/// A live process of a job, held by a pidfd.
#[derive(Debug)]
pub struct Member {
    pidfd: OwnedFd,
}

/// Rounds of SIGKILL before giving up on a job whose processes keep forking.
const KILL_ROUNDS: usize = 20;
/// How long one round waits for the processes it signalled to go.
const KILL_ROUND_WAIT: Duration = Duration::from_secs(1);

impl Mark {
    /// Every live process of the job, right now. `by_group` also counts processes in
    /// the job's process group that lost the cookie; only while the leader is
    /// unreaped, since after that its group id can be reused by a stranger once the
    /// group is empty. Blocking.
    pub fn scan(&self, by_group: bool) -> Vec<Member> {
        let uid = rustix::process::geteuid().as_raw();
        let me = std::process::id() as i32;
        let Ok(entries) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|&pid| pid != me)
            .filter(|&pid| fs::metadata(format!("/proc/{pid}")).is_ok_and(|meta| meta.uid() == uid))
            .filter(|&pid| self.owns(pid, by_group))
            .filter_map(|pid| {
                let pidfd =
                    rustix::process::pidfd_open(Pid::from_raw(pid)?, PidfdFlags::empty()).ok()?;
                // The pid may have been reused between the check and the open: only a
                // pidfd whose process still matches is kept.
                self.owns(pid, by_group).then_some(Member { pidfd })
            })
            .collect()
    }

    /// Whether the live process `pid` belongs to the job.
    fn owns(&self, pid: i32, by_group: bool) -> bool {
        match read_stat(pid) {
            Some(stat) if stat.state != 'Z' && stat.state != 'X' => {
                (by_group && stat.pgid == self.pgid.as_raw_nonzero().get()) || self.in_environ(pid)
            }
            _ => false,
        }
    }

    fn in_environ(&self, pid: i32) -> bool {
        fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|env| env.split(|&b| b == 0).any(|var| var == self.cookie))
    }

    /// Whether any of `pids`, the daemon's orphaned children, belongs to the job: where
    /// every escapee of a job whose group is gone ends up, the daemon being a
    /// subreaper. Blocking.
    pub fn owns_any(&self, pids: &[i32]) -> bool {
        pids.iter().any(|&pid| self.owns(pid, false))
    }
}

impl Member {
    fn signal(&self, signal: Signal) {
        // ESRCH: it has just exited, which is what was wanted.
        let _ = rustix::process::pidfd_send_signal(self.pidfd.as_fd(), signal);
    }
}

/// Waits until every one of `members` has exited.
pub async fn all_exited(members: Vec<Member>) {
    for member in members {
        exited(member.pidfd).await;
    }
}

/// Waits until the process of `pidfd` has exited: a pidfd turns readable then.
pub async fn exited(pidfd: OwnedFd) {
    // SAFETY: the AsyncFd owns the pidfd and drops it last.
    match unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) } {
        Ok(fd) => {
            let _ = fd.readable().await;
        }
        // Not pollable: nothing to wait on, so never report an exit that did not happen.
        Err(_) => std::future::pending().await,
    }
}

/// Scans on a blocking thread.
pub async fn scan(mark: &Mark, by_group: bool) -> Vec<Member> {
    let mark = mark.clone();
    tokio::task::spawn_blocking(move || mark.scan(by_group))
        .await
        .unwrap_or_default()
}

/// Whether any of `orphans` belongs to the job, read on a blocking thread.
pub async fn owns_any(mark: &Mark, orphans: Vec<i32>) -> bool {
    if orphans.is_empty() {
        return false;
    }
    let mark = mark.clone();
    tokio::task::spawn_blocking(move || mark.owns_any(&orphans))
        .await
        .unwrap_or(false)
}

/// Ends every process of the job: `first` to each, then SIGKILL to whatever is left
/// after `grace`, in rounds until a scan finds nothing. `leader_alive` says the
/// leader is not reaped yet, so its group id cannot have been reused: the whole group
/// is signalled at once, catching processes forked since the scan, and the scans count
/// group members that lost the cookie.
pub async fn terminate(mark: &Mark, first: Signal, grace: Duration, leader_alive: bool) {
    if leader_alive {
        let _ = rustix::process::kill_process_group(mark.pgid, first);
    }
    let members = scan(mark, leader_alive).await;
    for member in &members {
        member.signal(first);
    }
    if first != Signal::KILL {
        let _ = tokio::time::timeout(grace, all_exited(members)).await;
    }
    // Each round's scan also catches what was forked since the last one.
    for _ in 0..KILL_ROUNDS {
        let members = scan(mark, leader_alive).await;
        if members.is_empty() {
            return;
        }
        for member in &members {
            member.signal(Signal::KILL);
        }
        let _ = tokio::time::timeout(KILL_ROUND_WAIT, all_exited(members)).await;
    }
    tracing::warn!(
        pgid = mark.pgid.as_raw_nonzero().get(),
        "processes of a job survived {KILL_ROUNDS} rounds of SIGKILL"
    );
}

struct Stat {
    state: char,
    pgid: i32,
}

/// State and process group of a process, from `/proc/<pid>/stat`.
fn read_stat(pid: i32) -> Option<Stat> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name is in parentheses and may itself hold spaces or parentheses.
    let mut fields = stat.get(stat.rfind(')')? + 2..)?.split(' ');
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgid = fields.next()?.parse().ok()?;
    Some(Stat { state, pgid })
}

/// Raises the daemon's open-file limit to its hard limit: a job holds two pipes, and
/// a thousand background jobs pass the usual soft limit of 1024. Returns the limit the
/// daemon started with, for jobs to get back, when it was raised.
pub fn raise_open_files_limit() -> io::Result<Option<rustix::process::Rlimit>> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let original = getrlimit(Resource::Nofile);
    if original.current == original.maximum {
        return Ok(None);
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: original.maximum,
            maximum: original.maximum,
        },
    )?;
    Ok(Some(original))
}

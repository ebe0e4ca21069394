//! Finding and ending every process of a job (DESIGN §4): its process group, and every
//! process of the daemon's uid whose environment carries the job's cookie, which finds
//! the ones that left the group (`setsid`, double forks). Each is signalled through a
//! pidfd opened before its identity is checked again, so a pid reused since the scan
//! is never hit.
//!
//! Callers: the supervisor of a job, for that job; crash recovery, for the jobs of a
//! daemon that died. Scans read `/proc` and so run on a blocking thread.

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

/// What a scan looks for: the processes of one job, or of every job a dead daemon
/// left behind (crash recovery).
pub trait Matcher: Clone + Send + Sync + 'static {
    /// Whether the live process `pid` is one of ours. Blocking: reads `/proc`.
    fn belongs(&self, pid: i32) -> bool;
    /// Signals the process groups that may be signalled whole, if any: a group whose
    /// leader is known to be the job's, so its id cannot have been reused.
    fn signal_groups(&self, signal: Signal);
}

/// One job's processes; `by_group` also counts processes in the job's process group
/// that lost the cookie: only while the leader is unreaped, since after that its group
/// id can be reused by a stranger once the group is empty.
#[derive(Debug, Clone)]
pub struct JobMatch {
    pub mark: Mark,
    pub by_group: bool,
}

impl Matcher for JobMatch {
    fn belongs(&self, pid: i32) -> bool {
        match read_stat(pid) {
            Some(stat) if stat.alive() => {
                (self.by_group && stat.pgid == self.mark.pgid.as_raw_nonzero().get())
                    || environ_has(pid, |var| var == self.mark.cookie)
            }
            _ => false,
        }
    }

    fn signal_groups(&self, signal: Signal) {
        if self.by_group {
            let _ = rustix::process::kill_process_group(self.mark.pgid, signal);
        }
    }
}

impl Mark {
    pub fn matching(&self, by_group: bool) -> JobMatch {
        JobMatch {
            mark: self.clone(),
            by_group,
        }
    }

    /// Whether any of `pids`, the daemon's orphaned children, belongs to the job: where
    /// every escapee of a job whose group is gone ends up, the daemon being a
    /// subreaper. Blocking.
    pub fn owns_any(&self, pids: &[i32]) -> bool {
        let by_cookie = self.matching(false);
        pids.iter().any(|&pid| by_cookie.belongs(pid))
    }
}

/// Every live process of the daemon's uid that `matcher` claims, right now, each held
/// by a pidfd. Blocking.
pub fn scan_blocking(matcher: &impl Matcher) -> Vec<Member> {
    let uid = rustix::process::geteuid().as_raw();
    let me = std::process::id() as i32;
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| fs::metadata(format!("/proc/{pid}")).is_ok_and(|meta| meta.uid() == uid))
        .filter(|&pid| matcher.belongs(pid))
        .filter_map(|pid| {
            let pidfd =
                rustix::process::pidfd_open(Pid::from_raw(pid)?, PidfdFlags::empty()).ok()?;
            // The pid may have been reused between the check and the open: only a
            // pidfd whose process still matches is kept.
            matcher.belongs(pid).then_some(Member { pidfd })
        })
        .collect()
}

/// Whether the environment of `pid` holds a `NAME=value` entry for which `wanted` holds.
pub fn environ_has(pid: i32, mut wanted: impl FnMut(&[u8]) -> bool) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|&b| b == 0).any(&mut wanted))
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
pub async fn scan(matcher: &impl Matcher) -> Vec<Member> {
    let matcher = matcher.clone();
    tokio::task::spawn_blocking(move || scan_blocking(&matcher))
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

/// Ends every process `matcher` claims: `first` to each (and to the groups it may
/// signal whole, which catches processes forked since the scan), then SIGKILL to
/// whatever is left after `grace`, in rounds until a scan finds nothing. Returns how
/// many processes the first scan found.
pub async fn terminate(matcher: &impl Matcher, first: Signal, grace: Duration) -> usize {
    let members = scan(matcher).await;
    let found = members.len();
    matcher.signal_groups(first);
    for member in &members {
        member.signal(first);
    }
    if first != Signal::KILL {
        let _ = tokio::time::timeout(grace, all_exited(members)).await;
    }
    // Each round's scan also catches what was forked since the last one.
    for _ in 0..KILL_ROUNDS {
        let members = scan(matcher).await;
        if members.is_empty() {
            return found;
        }
        matcher.signal_groups(Signal::KILL);
        for member in &members {
            member.signal(Signal::KILL);
        }
        let _ = tokio::time::timeout(KILL_ROUND_WAIT, all_exited(members)).await;
    }
    tracing::warn!("processes of a job survived {KILL_ROUNDS} rounds of SIGKILL");
    found
}

pub struct Stat {
    pub state: char,
    pub pgid: i32,
}

impl Stat {
    pub fn alive(&self) -> bool {
        self.state != 'Z' && self.state != 'X'
    }
}

/// State and process group of a process, from `/proc/<pid>/stat`.
pub fn read_stat(pid: i32) -> Option<Stat> {
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

//! Finding and ending every process of a job (DESIGN §4): its process group, and every
//! process of the daemon's uid whose environment carries the job's cookie, which finds
//! the ones that left the group (`setsid`, double forks). Each is signalled through a
//! pidfd opened before its identity is checked again, so a pid reused since the scan
//! is never hit.
//!
//! Callers: the supervisor of a job, for that job; crash recovery, for the jobs of a
//! daemon that died. Scans share their reads of `/proc` (`Scanner`), which run on a
//! blocking thread.

use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::Duration;

use rustix::process::{Pid, PidfdFlags, Signal};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, oneshot};

use crate::journal::COOKIE_VAR;

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

/// How many milliseconds a read waits for a process to finish an exec.
const EXEC_WAIT_TRIES: usize = 100;

/// One live process of the daemon's uid, as a scan saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub pid: i32,
    pub pgid: i32,
    /// Its `BASHD_JOB=` entries, exactly as they sit in its environment.
    pub cookies: Vec<Vec<u8>>,
}

impl Seen {
    /// `pid` as it is now; `None` when it is gone, a zombie, or another user's.
    /// Blocking: reads `/proc`.
    pub fn read(pid: i32) -> Option<Seen> {
        let uid = rustix::process::geteuid().as_raw();
        if fs::metadata(format!("/proc/{pid}")).ok()?.uid() != uid {
            return None;
        }
        let stat = read_stat(pid).filter(Stat::alive)?;
        let environ = || fs::read(format!("/proc/{pid}/environ"));
        let mut env = environ();
        // Read empty, it may be caught in an exec and would pass for a stranger: wait
        // the exec out (microseconds), then read again. Not when unreadable (a process
        // that made itself undumpable): its stat shows env_end 0 whatever it does.
        if env.as_ref().is_ok_and(Vec::is_empty) {
            for _ in 0..EXEC_WAIT_TRIES {
                match read_stat(pid) {
                    Some(stat) if stat.alive() && stat.in_exec => {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    _ => break,
                }
            }
            env = environ();
        }
        let env = env.unwrap_or_default();
        let cookies = env
            .split(|&b| b == 0)
            .filter(|var| {
                var.strip_prefix(COOKIE_VAR.as_bytes())
                    .is_some_and(|rest| rest.starts_with(b"="))
            })
            .map(<[u8]>::to_vec)
            .collect();
        Some(Seen {
            pid,
            pgid: stat.pgid,
            cookies,
        })
    }

    pub fn has_cookie(&self, cookie: &[u8]) -> bool {
        self.cookies.iter().any(|c| c == cookie)
    }
}

/// What a scan looks for: the processes of one job, or of every job a dead daemon
/// left behind (crash recovery).
pub trait Matcher: Clone + Send + Sync + 'static {
    /// Whether `seen` is one of ours. May read `/proc`, so called on a blocking thread.
    fn claims(&self, seen: &Seen) -> bool;
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
    fn claims(&self, seen: &Seen) -> bool {
        (self.by_group && seen.pgid == self.mark.pgid.as_raw_nonzero().get())
            || seen.has_cookie(&self.mark.cookie)
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
        pids.iter()
            .filter_map(|&pid| Seen::read(pid))
            .any(|seen| by_cookie.claims(&seen))
    }
}

/// Every live process of the daemon's uid but the daemon itself. Blocking.
fn read_all() -> Vec<Seen> {
    let me = std::process::id() as i32;
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter_map(Seen::read)
        .collect()
}

/// What one read of `/proc` saw, shared by every scan that waited for it.
pub type Snapshot = Arc<Vec<Seen>>;

/// Reads `/proc` for every scan at once. A thousand jobs stopping together (a
/// shutdown) would otherwise read the whole process table a thousand times; here a
/// read serves every scan asked for before it began, and a scan asked for during a
/// read waits for the next one, so it never misses a process forked before it asked.
#[derive(Debug, Clone)]
pub struct Scanner {
    requests: mpsc::UnboundedSender<oneshot::Sender<Snapshot>>,
}

impl Scanner {
    /// Starts the task that reads; it ends when the last handle is dropped.
    pub fn start() -> Scanner {
        let (requests, mut waiting) = mpsc::unbounded_channel::<oneshot::Sender<Snapshot>>();
        tokio::spawn(async move {
            while let Some(first) = waiting.recv().await {
                let mut waiters = vec![first];
                while let Ok(next) = waiting.try_recv() {
                    waiters.push(next);
                }
                let snapshot = Arc::new(
                    tokio::task::spawn_blocking(read_all)
                        .await
                        .unwrap_or_default(),
                );
                for waiter in waiters {
                    let _ = waiter.send(Arc::clone(&snapshot));
                }
            }
        });
        Scanner { requests }
    }

    /// A read of `/proc` begun after this call.
    async fn snapshot(&self) -> Snapshot {
        let (reply, answer) = oneshot::channel();
        if self.requests.send(reply).is_ok()
            && let Ok(snapshot) = answer.await
        {
            return snapshot;
        }
        // The task is gone (the runtime is shutting down): read alone.
        Arc::new(
            tokio::task::spawn_blocking(read_all)
                .await
                .unwrap_or_default(),
        )
    }

    /// Every live process of the daemon's uid that `matcher` claims, each held by a
    /// pidfd.
    pub async fn scan(&self, matcher: &impl Matcher) -> Vec<Member> {
        let snapshot = self.snapshot().await;
        let matcher = matcher.clone();
        tokio::task::spawn_blocking(move || claimed(&snapshot, &matcher))
            .await
            .unwrap_or_default()
    }
}

/// The processes of `snapshot` that `matcher` claims, each held by a pidfd opened
/// before it is read and claimed again: a pid reused since the snapshot is never
/// kept. Blocking.
fn claimed(snapshot: &[Seen], matcher: &impl Matcher) -> Vec<Member> {
    snapshot
        .iter()
        .filter(|seen| matcher.claims(seen))
        .filter_map(|seen| {
            let pidfd =
                rustix::process::pidfd_open(Pid::from_raw(seen.pid)?, PidfdFlags::empty()).ok()?;
            let now = Seen::read(seen.pid)?;
            matcher.claims(&now).then_some(Member { pidfd })
        })
        .collect()
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
pub async fn terminate(
    scanner: &Scanner,
    matcher: &impl Matcher,
    first: Signal,
    grace: Duration,
) -> usize {
    let members = scanner.scan(matcher).await;
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
        let members = scanner.scan(matcher).await;
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
    /// Between an exec's switch to the new program's memory and the setting up of its
    /// environment, a few microseconds in which `/proc/<pid>/environ` reads empty.
    pub in_exec: bool,
}

/// `PF_KTHREAD` in the flags of `/proc/<pid>/stat`: a kernel thread has no memory of
/// its own, so no environment, and is never in an exec.
const PF_KTHREAD: u64 = 0x0020_0000;

impl Stat {
    pub fn alive(&self) -> bool {
        self.state != 'Z' && self.state != 'X'
    }
}

/// State and process group of a process, from `/proc/<pid>/stat`.
pub fn read_stat(pid: i32) -> Option<Stat> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name is in parentheses and may itself hold spaces or parentheses. Field N
    // of proc(5) is at N - 3 after it.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    let state = fields.first()?.chars().next()?;
    let pgid = fields.get(2)?.parse().ok()?;
    let flags: u64 = fields.get(6)?.parse().ok()?;
    // env_end (field 51) is 0 until the new program's environment is in place.
    let env_end = fields.get(48).and_then(|f| f.parse::<u64>().ok());
    Some(Stat {
        state,
        pgid,
        in_exec: flags & PF_KTHREAD == 0 && env_end == Some(0),
    })
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

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Child, Command};

    use bashd_protocol::JobId;

    use super::*;
    use crate::journal::cookie;

    struct Killed(Child);

    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// A process carrying a cookie no other test's has: tests run side by side.
    fn job(test: &str, n: usize) -> (Killed, JobMatch) {
        let instance = format!("{}-{test}", std::process::id());
        let job = JobId(n as u64);
        let child = Command::new("sleep")
            .arg("60")
            .env(COOKIE_VAR, format!("{instance}/{job}"))
            .spawn()
            .unwrap();
        let mark = Mark {
            // Not the child's group: only the cookie may find it.
            pgid: rustix::process::getpid(),
            cookie: cookie(&instance, job),
        };
        (Killed(child), mark.matching(false))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_scans_each_find_their_own_job() {
        let scanner = Scanner::start();
        let jobs: Vec<_> = (0..3).map(|n| job("concurrent", n)).collect();
        let mut scans = tokio::task::JoinSet::new();
        for (n, (child, matcher)) in jobs.iter().enumerate() {
            for _ in 0..10 {
                let (scanner, matcher, pid) = (scanner.clone(), matcher.clone(), child.0.id());
                scans.spawn(async move { (n, pid, scanner.scan(&matcher).await.len()) });
            }
        }
        while let Some(scan) = scans.join_next().await {
            let (n, pid, found) = scan.unwrap();
            assert_eq!(found, 1, "job {n} (pid {pid})");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_scan_sees_a_process_started_before_it_was_asked_for() {
        let scanner = Scanner::start();
        // Keep reads in flight, so that some scans are asked for in the middle of one.
        let busy = {
            let scanner = scanner.clone();
            let (_, nobody) = job("before", usize::MAX);
            tokio::spawn(async move {
                loop {
                    scanner.scan(&nobody).await;
                }
            })
        };
        for n in 0..30 {
            let (child, matcher) = job("before", n);
            assert_eq!(scanner.scan(&matcher).await.len(), 1, "round {n}");
            drop(child);
        }
        busy.abort();
    }

    #[test]
    fn a_running_program_and_a_kernel_thread_are_not_in_an_exec() {
        let me = read_stat(std::process::id() as i32).unwrap();
        assert!(me.alive() && !me.in_exec);
        // kthreadd: no memory of its own, so env_end 0, and still not in an exec.
        if let Some(kthreadd) = read_stat(2) {
            assert!(!kthreadd.in_exec);
        }
    }

    #[tokio::test]
    async fn terminate_ends_its_job_and_nothing_else() {
        let scanner = Scanner::start();
        let (mut mine, matcher) = job("terminate", 0);
        let (mut other, _) = job("terminate", 1);
        let found = terminate(&scanner, &matcher, Signal::TERM, Duration::from_secs(5)).await;
        assert_eq!(found, 1);
        assert!(mine.0.wait().unwrap().signal().is_some());
        assert!(
            other.0.try_wait().unwrap().is_none(),
            "another job's process was hit"
        );
    }
}

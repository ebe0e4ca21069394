//! Reading `/proc` for the processes of the daemon's uid, and holding the ones a scan
//! claims through pidfds. [`Scanner`] shares its reads: one read of the process table
//! serves every scan asked for before it began, which a thousand jobs stopping together
//! (a shutdown) need. Reads run on a blocking thread.
//!
//! Used by the scan mechanism (`scan.rs`), for a running job and for the jobs of a
//! daemon that died.

use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::Duration;

use bashd_protocol::ProcStat;
use rustix::process::{Pid, PidfdFlags, Signal};
use tokio::sync::{mpsc, oneshot};

use crate::journal::COOKIE_VAR;

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
        let stat = ProcStat::read(pid as u32).filter(ProcStat::alive)?;
        let environ = || fs::read(format!("/proc/{pid}/environ"));
        let mut env = environ();
        // Read empty, it may be caught in an exec and would pass for a stranger: wait
        // the exec out (microseconds), then read again. Not when unreadable (a process
        // that made itself undumpable): its stat shows env_end 0 whatever it does.
        if env.as_ref().is_ok_and(Vec::is_empty) {
            for _ in 0..EXEC_WAIT_TRIES {
                match ProcStat::read(pid as u32) {
                    Some(stat) if stat.alive() && in_exec(&stat) => {
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
            pgid: stat.pgrp as i32,
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

/// A live process of a job, held by a pidfd.
#[derive(Debug)]
pub struct Member {
    pidfd: OwnedFd,
}

impl Member {
    pub fn signal(&self, signal: Signal) {
        // ESRCH: it has just exited, which is what was wanted.
        let _ = rustix::process::pidfd_send_signal(self.pidfd.as_fd(), signal);
    }

    /// Resolves when the process has exited.
    pub async fn exited(self) {
        crate::jobs::os::reaper::exited(self.pidfd).await;
    }
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

/// Waits until every one of `members` has exited.
pub async fn all_exited(members: Vec<Member>) {
    for member in members {
        member.exited().await;
    }
}

/// Whether `stat`'s process is in the middle of an exec: between the switch to the new
/// program's memory and the setting up of its environment, a few microseconds in which
/// `/proc/<pid>/environ` reads empty. Its env_end is 0 until the environment is in
/// place; a kernel thread, which has no memory of its own, shows 0 always.
fn in_exec(stat: &ProcStat) -> bool {
    !stat.is_kernel_thread() && stat.env_end == Some(0)
}

#[cfg(test)]
pub(super) mod tests {
    use std::process::{Child, Command};

    use bashd_protocol::JobId;

    use super::*;
    use crate::journal::cookie;

    /// Claims the processes that carry one cookie.
    #[derive(Debug, Clone)]
    pub struct ByCookie(pub Vec<u8>);

    impl Matcher for ByCookie {
        fn claims(&self, seen: &Seen) -> bool {
            seen.has_cookie(&self.0)
        }

        fn signal_groups(&self, _: Signal) {}
    }

    pub struct Killed(pub Child);

    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// A `sleep` carrying a cookie no other test's has (tests run side by side), and
    /// the cookie.
    pub fn job(test: &str, n: usize) -> (Killed, Vec<u8>) {
        let instance = format!("{}-{test}", std::process::id());
        let job = JobId(n as u64);
        let child = Command::new("sleep")
            .arg("60")
            .env(COOKIE_VAR, format!("{instance}/{job}"))
            .spawn()
            .unwrap();
        (Killed(child), cookie(&instance, job))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_scans_each_find_their_own_job() {
        let scanner = Scanner::start();
        let jobs: Vec<_> = (0..3).map(|n| job("concurrent", n)).collect();
        let mut scans = tokio::task::JoinSet::new();
        for (n, (child, cookie)) in jobs.iter().enumerate() {
            for _ in 0..10 {
                let (scanner, matcher, pid) =
                    (scanner.clone(), ByCookie(cookie.clone()), child.0.id());
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
                    scanner.scan(&ByCookie(nobody.clone())).await;
                }
            })
        };
        for n in 0..30 {
            let (child, cookie) = job("before", n);
            assert_eq!(scanner.scan(&ByCookie(cookie)).await.len(), 1, "round {n}");
            drop(child);
        }
        busy.abort();
    }

    /// A job's process can name itself with bytes that are not UTF-8 (the name is the
    /// basename of what it executed); the scan must find it all the same, or it
    /// outlives its job. Issue 31: the stat was read as a string, which failed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_scan_finds_a_process_whose_name_is_not_utf8() {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::process::CommandExt;

        let sleep = ["/usr/bin/sleep", "/bin/sleep"]
            .into_iter()
            .find(|path| std::path::Path::new(path).exists())
            .expect("sleep is installed in /usr/bin or /bin");
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join(std::ffi::OsStr::from_bytes(b"\xff) \xfe"));
        std::os::unix::fs::symlink(sleep, &odd).unwrap();
        let instance = format!("{}-odd-name", std::process::id());
        let cookie_value = format!("{instance}/{}", JobId(1));
        let child = Killed(
            Command::new(&odd)
                .arg0("sleep")
                .arg("60")
                .env(COOKIE_VAR, cookie_value)
                .spawn()
                .unwrap(),
        );
        let pid = child.0.id();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        // Its name read apart from the stat, which is what is tested.
        while fs::read(format!("/proc/{pid}/comm")).ok().as_deref() != Some(b"\xff) \xfe\n") {
            assert!(
                std::time::Instant::now() < deadline,
                "{pid} never ran as {odd:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let found = Scanner::start()
            .scan(&ByCookie(cookie(&instance, JobId(1))))
            .await;
        assert_eq!(found.len(), 1, "the scan missed {pid}");
    }

    #[test]
    fn a_running_program_and_a_kernel_thread_are_not_in_an_exec() {
        let me = ProcStat::read(std::process::id()).unwrap();
        assert!(me.alive() && !in_exec(&me));
        // kthreadd: no memory of its own, so env_end 0, and still not in an exec.
        if let Some(kthreadd) = ProcStat::read(2) {
            assert!(!in_exec(&kthreadd));
        }
    }
}

//! Spawning and reaping the daemon's children, and waiting for a process through its
//! pidfd.
//!
//! [`Reaper`] is the only code in the daemon that calls `wait*`. It also forks every
//! child of the daemon ([`ReaperHandle::spawn`]: the zygote, and a job's shell on the
//! scan path), so a child is registered before the reaper can next look for exits: no
//! exit status is ever reaped before someone is waiting for it. Exits of processes it
//! did not spawn (descendants of jobs reparented to the daemon, which is a child
//! subreaper) are reaped and dropped. What is spawned is built elsewhere (`spawn/`,
//! `contain/zygote.rs`); which processes belong to a job, and signalling them, is
//! `contain/`'s.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::process::Command;

use rustix::process::{Pid, WaitOptions, WaitStatus};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot};

/// How a child ended, as the reaper collected it: a job's leader, mostly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderExit {
    /// It exited with this code.
    Code(i32),
    /// A signal of this number ended it.
    Signal(i32),
}

impl LeaderExit {
    fn from_wait(status: WaitStatus) -> LeaderExit {
        match (status.terminating_signal(), status.exit_status()) {
            (Some(signal), _) => LeaderExit::Signal(signal),
            (None, Some(code)) => LeaderExit::Code(code),
            // `wait` without WUNTRACED or WCONTINUED reports only exits and deaths by
            // signal; this is never taken.
            (None, None) => LeaderExit::Code(-1),
        }
    }

    pub fn code(self) -> Option<i32> {
        match self {
            LeaderExit::Code(code) => Some(code),
            LeaderExit::Signal(_) => None,
        }
    }

    pub fn signal(self) -> Option<i32> {
        match self {
            LeaderExit::Code(_) => None,
            LeaderExit::Signal(signal) => Some(signal),
        }
    }
}

/// How long a stopping daemon waits for its children to exit, to reap them.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(3);
/// How often it looks for them meanwhile.
const DRAIN_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// A child the reaper has just forked.
#[derive(Debug)]
pub struct Child {
    pub pid: Pid,
    /// Field 22 of its `/proc/<pid>/stat`; 0 if it could not be read.
    pub start_time: u64,
    /// Resolves once, when the reaper has collected it. Dropping it is fine: the
    /// child is still reaped, and never counted among the orphans.
    pub exit: oneshot::Receiver<LeaderExit>,
}

/// Asks the reaper task to spawn; cheap to clone.
#[derive(Debug, Clone)]
pub struct ReaperHandle {
    requests: mpsc::Sender<ReaperRequest>,
}

#[derive(Debug)]
enum ReaperRequest {
    Spawn {
        // Boxed: a command is far larger than the other request.
        command: Box<Command>,
        reply: oneshot::Sender<io::Result<Child>>,
    },
    /// The daemon's children that it did not spawn: descendants of jobs whose parents
    /// died, handed to the daemon because it is a subreaper.
    Orphans { reply: oneshot::Sender<Vec<i32>> },
}

impl ReaperHandle {
    /// Forks `command` as the daemon's child, and drops it once forked, which closes
    /// the daemon's copies of the descriptors it gives the child.
    pub async fn spawn(&self, command: Command) -> io::Result<Child> {
        let (reply, answer) = oneshot::channel();
        let gone = || io::Error::other("the daemon's reaper has stopped");
        let request = ReaperRequest::Spawn {
            command: Box::new(command),
            reply,
        };
        self.requests.send(request).await.map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    /// The pids of the daemon's orphaned children; empty if the reaper is gone.
    pub async fn orphans(&self) -> Vec<i32> {
        let (reply, answer) = oneshot::channel();
        if self
            .requests
            .send(ReaperRequest::Orphans { reply })
            .await
            .is_err()
        {
            return Vec::new();
        }
        answer.await.unwrap_or_default()
    }
}

/// The task that owns every child of the daemon.
pub struct Reaper {
    requests: mpsc::Receiver<ReaperRequest>,
    /// Every child the reaper forked that it has not yet reaped.
    waiting: HashMap<i32, oneshot::Sender<LeaderExit>>,
}

impl Reaper {
    pub fn new() -> (Reaper, ReaperHandle) {
        let (tx, rx) = mpsc::channel(64);
        let reaper = Reaper {
            requests: rx,
            waiting: HashMap::new(),
        };
        (reaper, ReaperHandle { requests: tx })
    }

    /// Runs until every handle is dropped, and then until the children still there
    /// have exited ([`Reaper::drain`]). The SIGCHLD stream is created before the first
    /// spawn, so no exit can go unnoticed.
    pub async fn run(mut self) -> io::Result<()> {
        let mut sigchld = signal(SignalKind::child())?;
        loop {
            // Cancelling either branch loses nothing: a pending SIGCHLD stays pending,
            // and a spawn request stays queued in the channel.
            tokio::select! {
                _ = sigchld.recv() => {
                    self.reap_all();
                }
                request = self.requests.recv() => match request {
                    Some(ReaperRequest::Spawn { command, reply }) => {
                        let _ = reply.send(self.spawn(*command));
                    }
                    Some(ReaperRequest::Orphans { reply }) => {
                        let _ = reply.send(self.orphans());
                    }
                    None => {
                        self.drain(&mut sigchld).await;
                        return Ok(());
                    }
                },
            }
        }
    }

    /// Reaps the daemon's children until it has none, for at most [`DRAIN`]: once the
    /// last handle is gone the daemon is stopping, and the zygote and its spare leave
    /// as they see the daemon's sockets close. Reaped here, they are not left behind
    /// as zombies for init, which may never reap them (issue 45). Looks again every
    /// [`DRAIN_POLL`] too, as a zombie handed over to the daemon as subreaper may come
    /// without a SIGCHLD of its own.
    async fn drain(&mut self, sigchld: &mut tokio::signal::unix::Signal) {
        let deadline = tokio::time::Instant::now() + DRAIN;
        loop {
            if !self.reap_all() {
                return;
            }
            let next = (tokio::time::Instant::now() + DRAIN_POLL).min(deadline);
            if tokio::time::timeout_at(next, sigchld.recv()).await.is_err()
                && tokio::time::Instant::now() >= deadline
            {
                let left = self.waiting.keys().collect::<Vec<_>>();
                tracing::warn!("children still running as bashd stops: {left:?}");
                return;
            }
        }
    }

    fn spawn(&mut self, mut command: Command) -> io::Result<Child> {
        // The std Child is dropped without a wait: the reaper collects it by pid.
        let child = command.spawn()?;
        let pid = Pid::from_raw(child.id() as i32).expect("a spawned child has a positive pid");
        // Read before the reaper looks for exits again: until it does, the child is at
        // worst a zombie, whose stat is still there.
        let start_time = bashd_protocol::process_start_time(child.id()).unwrap_or(0);
        let (exit_tx, exit) = oneshot::channel();
        self.waiting.insert(pid.as_raw_nonzero().get(), exit_tx);
        Ok(Child {
            pid,
            start_time,
            exit,
        })
    }

    /// Children of any of the daemon's threads that the reaper did not fork. Reads a
    /// few small files in /proc, one per thread of the daemon.
    fn orphans(&self) -> Vec<i32> {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return Vec::new();
        };
        tasks
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok())
            .flat_map(|children| {
                children
                    .split_ascii_whitespace()
                    .filter_map(|pid| pid.parse::<i32>().ok())
                    .collect::<Vec<_>>()
            })
            .filter(|pid| !self.waiting.contains_key(pid))
            .collect()
    }

    /// Reaps every child that has exited; whether the daemon has children left.
    fn reap_all(&mut self) -> bool {
        loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => {
                    if let Some(waiter) = self.waiting.remove(&pid.as_raw_nonzero().get()) {
                        let _ = waiter.send(LeaderExit::from_wait(status));
                    }
                }
                // No child has exited yet.
                Ok(None) => return true,
                // No children at all (ECHILD).
                Err(_) => return false,
            }
        }
    }
}

/// Makes orphaned descendants of jobs children of the daemon, so they are reaped here
/// and never escape to init.
pub fn become_subreaper() -> io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    Ok(())
}

/// Waits until the process of `pidfd` has exited: a pidfd turns readable then. It
/// reaps nothing: the reaper does.
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

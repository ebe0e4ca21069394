//! One session of the job table (DESIGN §3): its jobs, its owners and their watchers,
//! and whether it lingers or is closing. The actor owns every `Session`; the watcher
//! tasks only send it messages.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use bashd_protocol::{ErrorReply, Owner, SessionClosed, SessionInfo};
use rustix::process::{Pid, PidfdFlags};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use std::sync::Arc;

use crate::jobs::os::reaper;
use crate::sandbox::network::SessionNetwork;

/// What the watchers of sessions tell the actor.
#[derive(Debug)]
pub enum SessionEvent {
    OwnerExited { session: String, pid: u32 },
    LingerEnded { session: String, generation: u64 },
}

pub type CloseReply = oneshot::Sender<Result<SessionClosed, ErrorReply>>;

#[derive(Debug, Default)]
pub struct Session {
    /// Live owners, each with the task that waits for its exit.
    owners: HashMap<u32, AbortHandle>,
    /// When the linger ends, while every owner is gone.
    linger_until: Option<Instant>,
    /// Tells a linger timer that fired from one that was cancelled since.
    generation: u64,
    /// Every job of the session the table holds, running or finished.
    pub jobs: BTreeSet<u64>,
    /// The finished ones, oldest first, for `keep_finished`.
    pub finished: VecDeque<u64>,
    pub running: usize,
    /// Set once the session is ending: who waits for that, and how many jobs were
    /// still running.
    pub closing: Option<Closing>,
    /// The session's networks, one per confined network setting (`off`,
    /// `allow-list`), shared by its jobs of that setting and dropped with the session,
    /// which ends their holders (`sandbox/network.rs`).
    pub networks: HashMap<bashd_protocol::Network, Arc<SessionNetwork>>,
}

#[derive(Debug, Default)]
pub struct Closing {
    pub waiters: Vec<CloseReply>,
    pub killed_jobs: u32,
}

impl Drop for Session {
    fn drop(&mut self) {
        for watcher in self.owners.values() {
            watcher.abort();
        }
    }
}

impl Session {
    pub fn has_owners(&self) -> bool {
        !self.owners.is_empty()
    }

    pub fn is_lingering(&self) -> bool {
        self.linger_until.is_some()
    }

    /// Adds `owner` if it is alive and really the process the client meant; a living
    /// owner ends any linger. Returns whether the session has an owner afterwards.
    pub fn adopt(
        &mut self,
        name: &str,
        owner: Option<Owner>,
        events: &mpsc::UnboundedSender<SessionEvent>,
    ) -> bool {
        if let Some(owner) = owner
            && !self.owners.contains_key(&owner.pid)
            && let Some(watcher) = watch(name, owner, events)
        {
            self.owners.insert(owner.pid, watcher);
        }
        if self.has_owners() {
            self.linger_until = None;
            self.generation += 1;
        }
        self.has_owners()
    }

    /// Forgets an owner that exited. Returns whether that was the last one.
    pub fn owner_exited(&mut self, pid: u32) -> bool {
        self.owners.remove(&pid).is_some() && self.owners.is_empty()
    }

    /// Starts the linger; the session ends when `events` gets the `LingerEnded` with
    /// this generation, unless an owner came back first.
    pub fn linger(
        &mut self,
        name: &str,
        linger: Duration,
        events: &mpsc::UnboundedSender<SessionEvent>,
    ) {
        self.generation += 1;
        self.linger_until = Some(Instant::now() + linger);
        let (session, generation, events) = (name.to_owned(), self.generation, events.clone());
        tokio::spawn(async move {
            tokio::time::sleep(linger).await;
            let _ = events.send(SessionEvent::LingerEnded {
                session,
                generation,
            });
        });
    }

    /// Whether a linger timer that fired with `generation` still counts.
    pub fn linger_ended(&self, generation: u64) -> bool {
        self.is_lingering() && generation == self.generation && self.closing.is_none()
    }

    pub fn info(&self, name: &str, dir: String) -> SessionInfo {
        let state = if self.closing.is_some() {
            "closing"
        } else if self.is_lingering() {
            "lingering"
        } else {
            "active"
        };
        let mut owners: Vec<u32> = self.owners.keys().copied().collect();
        owners.sort_unstable();
        SessionInfo {
            session: name.to_owned(),
            owners,
            state: state.to_owned(),
            linger_left_secs: self
                .linger_until
                .map(|until| until.saturating_duration_since(Instant::now()).as_secs()),
            running_jobs: self.running as u32,
            finished_jobs: self.finished.len() as u32,
            dir,
        }
    }
}

/// Opens a pidfd on `owner` and starts a task that reports its exit. `None` when the
/// process is gone, is the daemon itself or init, or is not the one the client saw.
fn watch(
    session: &str,
    owner: Owner,
    events: &mpsc::UnboundedSender<SessionEvent>,
) -> Option<AbortHandle> {
    if owner.pid <= 1 || owner.pid == std::process::id() {
        return None;
    }
    let pid = Pid::from_raw(i32::try_from(owner.pid).ok()?)?;
    let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty()).ok()?;
    // Checked after the open: if it still matches, the pidfd holds that process.
    if let Some(expected) = owner.start_time
        && bashd_protocol::process_start_time(owner.pid) != Some(expected)
    {
        return None;
    }
    let (session, events) = (session.to_owned(), events.clone());
    let task = tokio::spawn(async move {
        reaper::exited(pidfd).await;
        let _ = events.send(SessionEvent::OwnerExited {
            session,
            pid: owner.pid,
        });
    });
    Some(task.abort_handle())
}

//! The cloneable way to talk to the job table: each call sends one command to the
//! actor and, where it answers, waits on a oneshot. Whatever takes time (reading
//! output files, waiting for a job) happens here, in the caller's task, never in the
//! actor.

use std::sync::Arc;

use bashd_protocol::{Caller, ErrorKind, ErrorReply, ExecResult, JobInfo, JobRef};
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::Config;
use crate::jobs::job::supervisor::{Control, Streams, Subscribed};
use crate::jobs::table::JobsActor;
use crate::sandbox::channel::Origin;
use crate::sandbox::roots::CallerDir;

/// A command for the actor.
pub enum Cmd {
    /// A request's message with its handler, run on the actor's task; built by
    /// [`JobsHandle::call`] or [`JobsHandle::tell`] from a [`ToActor`].
    Call(Box<dyn Message>),
    /// Stop every job and end the actor; the reply comes when all jobs are gone.
    Shutdown { reply: oneshot::Sender<()> },
}

impl Cmd {
    /// The actor has stopped before it handled this command: its request is told so.
    pub(in crate::jobs) fn refuse(self) {
        match self {
            Cmd::Call(message) => message.refuse(),
            Cmd::Shutdown { reply } => {
                let _ = reply.send(());
            }
        }
    }
}

impl std::fmt::Debug for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cmd::Call(_) => f.write_str("Call"),
            Cmd::Shutdown { .. } => f.write_str("Shutdown"),
        }
    }
}

/// A request's message to the actor, and the actor's handler for it. Each request
/// that needs the table has one in its file under `requests/` (pueue's
/// `message_handler`, mini-redis's `cmd::Get::apply`): the handler runs on the
/// actor's task, so it may read and change the table, and it must not wait.
pub trait ToActor: Send + 'static {
    type Reply: Send + 'static;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply;

    /// The actor has stopped, and will never handle it. A message whose request
    /// waits for its reply needs nothing here (the dropped reply says so); one whose
    /// request is answered on a channel of its own (`exec`) says so there.
    fn refuse(self)
    where
        Self: Sized,
    {
    }
}

/// A [`ToActor`] on its way, with where its reply goes.
pub trait Message: Send {
    fn handle(self: Box<Self>, actor: &mut JobsActor);
    fn refuse(self: Box<Self>);
}

/// A message whose reply is awaited ([`JobsHandle::call`]).
struct Asked<M: ToActor> {
    message: M,
    reply: oneshot::Sender<M::Reply>,
}

impl<M: ToActor> Message for Asked<M> {
    fn handle(self: Box<Self>, actor: &mut JobsActor) {
        let _ = self.reply.send(self.message.handle(actor));
    }

    fn refuse(self: Box<Self>) {
        self.message.refuse();
    }
}

/// A message whose reply is nothing ([`JobsHandle::tell`]).
struct Told<M: ToActor<Reply = ()>>(M);

impl<M: ToActor<Reply = ()>> Message for Told<M> {
    fn handle(self: Box<Self>, actor: &mut JobsActor) {
        self.0.handle(actor);
    }

    fn refuse(self: Box<Self>) {
        self.0.refuse();
    }
}

/// What the actor answers a live reader.
#[derive(Debug)]
pub enum Watching {
    /// The job has ended: its result and its whole output.
    Ended {
        result: Box<ExecResult>,
        streams: Box<Streams>,
    },
    /// It runs: its supervisor answers the reader with the output so far, and `result`
    /// with its result when it ends.
    Running {
        summary: Box<ExecResult>,
        /// When the job started, for its age when the watch ends (`age_ms`).
        started: std::time::Instant,
        subscribed: oneshot::Receiver<Subscribed>,
        result: oneshot::Receiver<ExecResult>,
        /// Lines of each stream the caller's session has checked.
        cursor: [u64; 2],
        /// The session network the job is in, whose published ports a wait on a port
        /// names (`sandbox/network.rs`).
        network: Option<std::sync::Arc<crate::sandbox::network::SessionNetwork>>,
    },
}

/// What `jobs` lists, and how to look at the running jobs among them.
#[derive(Debug)]
pub struct Listing {
    pub jobs: Vec<JobInfo>,
    pub live: Vec<LiveJob>,
}

/// A running job of a listing.
#[derive(Debug)]
pub struct LiveJob {
    /// Its place in the listing.
    pub index: usize,
    /// Its first process: it and its descendants are its processes.
    pub root: u32,
    /// Its supervisor, when it has a stdin pipe and so may wait for input.
    pub probe: Option<mpsc::UnboundedSender<Control>>,
    /// Its supervisor, for a snapshot of its output (`bashc top`'s last line).
    pub control: mpsc::UnboundedSender<Control>,
    /// For a job in a session network: its TCP ports published on the host, and the
    /// host's port of each (`sandbox/network.rs`).
    pub published: std::collections::HashMap<u16, u16>,
}

/// A job as the actor saw it, and its output.
#[derive(Debug)]
pub struct Lookup {
    /// The job's result as it stands, with empty streams.
    pub summary: ExecResult,
    /// Lines of each stream the caller's session has checked.
    pub cursor: [u64; 2],
    pub page_lines: u64,
    pub max_bytes: usize,
    pub streams: StreamsAt,
    /// The supervisor of a running job with a stdin pipe, to ask whether it waits for
    /// input.
    pub probe: Option<mpsc::UnboundedSender<Control>>,
}

#[derive(Debug)]
pub enum StreamsAt {
    Ready(Box<Streams>),
    /// The job's supervisor answers.
    Pending(oneshot::Receiver<Streams>),
    /// The supervisor is gone: the job has just ended.
    Closed,
}

/// The answer to `wait` and `kill`.
#[derive(Debug)]
pub enum Waiting {
    Ended(ExecResult),
    Pending {
        summary: ExecResult,
        /// When the job started, for its age when the wait gives up (`age_ms`).
        started: std::time::Instant,
        result: oneshot::Receiver<ExecResult>,
    },
}

/// Who asks, in a request that names a job: every such request goes through the
/// actor's one rule (`table/reach.rs`) with it.
#[derive(Debug, Clone)]
pub struct Asker {
    /// The session it acts for, and its owner.
    pub caller: Caller,
    /// It asked to reach a job of another session too (`--any-session`).
    pub any_session: bool,
    /// The sandboxed job it comes from, when it came through that job's channel.
    pub origin: Option<Arc<Origin>>,
}

#[derive(Debug, Clone)]
pub struct JobsHandle {
    pub(in crate::jobs) cmds: mpsc::Sender<Cmd>,
    /// The config in force, replaced whole on a reload; the policy is part of it.
    pub(in crate::jobs) config: watch::Receiver<Arc<Config>>,
    /// The sandboxed job whose channel this handle's connection came through; `None`
    /// for a connection on the daemon's socket.
    pub(in crate::jobs) origin: Option<Arc<Origin>>,
    /// The directory the client of this handle's connection runs in, read when the
    /// connection was accepted (`server.rs`): the writable root of the jobs it starts
    /// (`sandbox/roots.rs`). Unknown for a handle of no connection.
    pub(in crate::jobs) caller_dir: Arc<CallerDir>,
    /// The process that opened this handle's connection on the socket, by its
    /// credentials: `bashc allow` is refused to one inside a job (issue 44).
    pub(in crate::jobs) peer_pid: Option<u32>,
    /// Cancelled by a `Shutdown` request (`bashc stop`); `bashd::run` then stops as
    /// on SIGTERM. A token rather than a signal to itself, so that a daemon run by a
    /// test with its own shutdown trigger stops the same way.
    pub(in crate::jobs) stop: tokio_util::sync::CancellationToken,
    /// How many sessions have an inbox to take; written only by the actor.
    pub(in crate::jobs) inbox_pending: Arc<std::sync::atomic::AtomicUsize>,
}

impl JobsHandle {
    /// This handle, for a connection that came through the channel of job `origin`:
    /// every request it makes is that job's.
    pub fn from_job(&self, origin: Option<Arc<Origin>>) -> JobsHandle {
        JobsHandle {
            origin,
            ..self.clone()
        }
    }

    /// This handle, for a connection on the daemon's socket whose client runs in
    /// `dir`: where the confined jobs it starts may write.
    pub fn from_caller(&self, dir: CallerDir, peer_pid: Option<u32>) -> JobsHandle {
        JobsHandle {
            caller_dir: Arc::new(dir),
            peer_pid,
            ..self.clone()
        }
    }

    /// The sandboxed job whose channel this handle's connection came through.
    pub fn origin(&self) -> Option<&Origin> {
        self.origin.as_deref()
    }

    /// Who asks, for a request of this handle's connection.
    pub(in crate::jobs) fn asker(&self, caller: Caller, any_session: bool) -> Asker {
        Asker {
            caller,
            any_session,
            origin: self.origin.clone(),
        }
    }

    /// What a cancelled MCP call does to its job, by the config in force.
    pub fn mcp_on_cancel(&self) -> crate::config::OnCancel {
        self.config.borrow().mcp.on_cancel
    }

    /// The frame limit of the config in force, for a new connection.
    pub fn max_frame_bytes(&self) -> usize {
        self.config.borrow().limits.max_frame_bytes
    }

    /// The connection cap of the config in force, for the accept loop.
    pub fn max_connections(&self) -> usize {
        self.config.borrow().limits.max_connections
    }

    /// Sends `message` to the actor and waits for its handler's answer.
    pub(in crate::jobs) async fn call<M: ToActor>(
        &self,
        message: M,
    ) -> Result<M::Reply, ErrorReply> {
        let (reply, answer) = oneshot::channel();
        self.post(Box::new(Asked { message, reply })).await;
        answer.await.map_err(|_| shutting_down())
    }

    /// Sends `message` to the actor without waiting for it to be handled.
    pub(in crate::jobs) async fn tell<M: ToActor<Reply = ()>>(&self, message: M) {
        self.post(Box::new(Told(message))).await;
    }

    /// Sends `message` to the actor; one the actor will never handle is refused.
    async fn post(&self, message: Box<dyn Message>) {
        if let Err(unsent) = self.cmds.send(Cmd::Call(message)).await {
            unsent.0.refuse();
        }
    }

    pub(in crate::jobs) async fn lookup(
        &self,
        asker: Asker,
        job: JobRef,
    ) -> Result<(Lookup, Streams), ErrorReply> {
        let mut lookup = self
            .call(super::queries::LookupJob { asker, job })
            .await??;
        let streams = match std::mem::replace(&mut lookup.streams, StreamsAt::Closed) {
            StreamsAt::Ready(streams) => *streams,
            StreamsAt::Pending(answer) => answer.await.map_err(|_| {
                ErrorReply::new(
                    ErrorKind::Internal,
                    format!(
                        "{} ended while its output was being read; ask again",
                        lookup.summary.job
                    ),
                )
            })?,
            StreamsAt::Closed => return Err(shutting_down()),
        };
        Ok((lookup, streams))
    }

    /// Asks `bashd::run` to stop the daemon, as SIGTERM does.
    pub fn request_stop(&self) {
        self.stop.cancel();
    }

    /// Cancelled once a client asked the daemon to stop.
    pub fn stop_requested(&self) -> tokio_util::sync::CancellationToken {
        self.stop.clone()
    }

    /// Stops every job; returns when they are gone (or the actor already ended).
    pub async fn shutdown(&self) {
        let (reply, answer) = oneshot::channel();
        if self.cmds.send(Cmd::Shutdown { reply }).await.is_ok() {
            let _ = answer.await;
        }
    }
}

/// Runs `work` on a blocking thread.
pub(in crate::jobs) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ErrorReply> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ErrorReply::new(ErrorKind::Internal, format!("reading output failed: {e}")))
}

pub fn shutting_down() -> ErrorReply {
    ErrorReply::new(
        ErrorKind::ShuttingDown,
        "bashd is shutting down and takes no new commands",
    )
}

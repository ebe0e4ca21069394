//! The cloneable way to talk to the job table: each call sends one command to the
//! actor and, where it answers, waits on a oneshot. Whatever takes time (reading
//! output files, waiting for a job) happens here, in the caller's task, never in the
//! actor.

use std::sync::Arc;
use std::time::Duration;

use bashd_protocol::{
    Caller, ErrorKind, ErrorReply, ExecParams, ExecResult, JobId, JobInfo, JobRef, JobRequest,
    JobsRequest, KillRequest, Notice, OutputPage, OutputRequest, Response, SessionClosed,
    SessionInfo, StatusInfo, StreamName, WaitRequest, limits,
};
use tokio::sync::{mpsc, oneshot, watch};

use crate::config::Config;
use crate::jobs::job::stdin::StdinHandle;
use crate::jobs::job::supervisor::{self, Control, Streams, Subscribed};
use crate::jobs::requests::check;
use crate::jobs::table::session::CloseReply;
use crate::output;
use crate::policy::Denial;
use crate::sandbox::channel::Origin;

/// Commands longer than this are checked on a blocking thread: parsing them takes long
/// enough to hold up other requests on the same worker.
const CHECK_INLINE_BYTES: usize = 16 * 1024;

/// A command for the actor.
#[derive(Debug)]
pub enum Cmd {
    /// Start a job; every response for the request goes to `events`, ending with
    /// `Finished` or `Error`. Dropping the receiver of `events` stops a foreground job.
    Exec {
        params: Box<ExecParams>,
        /// The policy's refusal, checked before the actor sees the request.
        denial: Option<Denial>,
        events: mpsc::Sender<Response>,
        /// The sandboxed job the request came from, through its channel: it bounds
        /// what the request may start.
        origin: Option<Arc<Origin>>,
    },
    /// A job's state and a snapshot of its output, for `output` and `check`.
    Lookup {
        asker: Asker,
        job: JobRef,
        reply: oneshot::Sender<Result<Lookup, ErrorReply>>,
    },
    /// Answer the job's request now and move it to the background (a cancelled MCP
    /// call under `[mcp] on_cancel = "background"`).
    Detach {
        job: JobId,
    },
    /// A `check` of `session` has shown these many lines of each stream of `job`.
    Advance {
        job: JobId,
        session: String,
        seen: [u64; 2],
    },
    Wait {
        asker: Asker,
        job: JobRef,
        reply: oneshot::Sender<Result<Waiting, ErrorReply>>,
    },
    Kill {
        asker: Asker,
        job: JobRef,
        signal: Option<String>,
        grace_ms: Option<u64>,
        reply: oneshot::Sender<Result<Waiting, ErrorReply>>,
    },
    Jobs {
        request: JobsRequest,
        origin: Option<Arc<Origin>>,
        reply: oneshot::Sender<Result<Listing, ErrorReply>>,
    },
    Sessions {
        origin: Option<Arc<Origin>>,
        reply: oneshot::Sender<Vec<SessionInfo>>,
    },
    CloseSession {
        session: String,
        origin: Option<Arc<Origin>>,
        reply: CloseReply,
    },
    Status {
        reply: oneshot::Sender<StatusInfo>,
    },
    /// Stop every job and end the actor; the reply comes when all jobs are gone.
    Shutdown {
        reply: oneshot::Sender<()>,
    },
    /// A live reader of a job's output (`follow`, `wait` with conditions).
    Subscribe {
        asker: Asker,
        job: JobRef,
        /// `None`: both streams.
        stream: Option<StreamName>,
        sink: mpsc::Sender<Response>,
        reply: oneshot::Sender<Result<Watching, ErrorReply>>,
    },
    /// A running job's stdin pipe, for `send`.
    Stdin {
        asker: Asker,
        job: JobRef,
        reply: oneshot::Sender<Result<(JobId, StdinHandle), ErrorReply>>,
    },
    /// `send --eof` closed the job's stdin.
    StdinClosed {
        job: JobId,
    },
    /// Takes a session's inbox (issue 32); events about `about` are dropped.
    TakeInbox {
        session: String,
        about: Vec<JobId>,
        reply: oneshot::Sender<Option<bashd_protocol::Inbox>>,
    },
    /// A running job's supervisor, for `screen` and `resize`.
    Control {
        asker: Asker,
        job: JobRef,
        /// It changes the job (`resize`), so its caller's session is adopted.
        acting: bool,
        reply: oneshot::Sender<Result<(JobId, mpsc::UnboundedSender<Control>), ErrorReply>>,
    },
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
        subscribed: oneshot::Receiver<Subscribed>,
        result: oneshot::Receiver<ExecResult>,
        /// Lines of each stream the caller's session has checked.
        cursor: [u64; 2],
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
        result: oneshot::Receiver<ExecResult>,
    },
}

/// Who asks, in a request that names a job: every such request goes through the
/// actor's one rule (`actor/reach.rs`) with it.
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

    /// Starts a job. Its responses arrive on the returned receiver; dropping it before
    /// `Finished` stops a foreground job.
    pub async fn exec(&self, params: ExecParams) -> mpsc::Receiver<Response> {
        let (events, rx) = mpsc::channel(64);
        // The job's workdir, so that `$PWD`, `$(pwd)` and relative targets are judged
        // as where they will run.
        let denial = self
            .policy_verdict(params.command.clone(), Some(params.workdir.clone()))
            .await
            .err();
        let cmd = Cmd::Exec {
            params: Box::new(params),
            denial,
            events: events.clone(),
            origin: self.origin.clone(),
        };
        if self.cmds.send(cmd).await.is_err() {
            let _ = events.send(Response::Error(shutting_down())).await;
        }
        rx
    }

    /// What a cancelled MCP call does to its job, by the config in force.
    pub fn mcp_on_cancel(&self) -> crate::config::OnCancel {
        self.config.borrow().mcp.on_cancel
    }

    /// Asks a job to answer its request now and go on in the background.
    pub async fn detach(&self, job: JobId) {
        let _ = self.cmds.send(Cmd::Detach { job }).await;
    }

    /// The frame limit of the config in force, for a new connection.
    pub fn max_frame_bytes(&self) -> usize {
        self.config.borrow().limits.max_frame_bytes
    }

    /// The connection cap of the config in force, for the accept loop.
    pub fn max_connections(&self) -> usize {
        self.config.borrow().limits.max_connections
    }

    /// Checks a command against the policy, as run in `workdir` when one is known,
    /// off the async workers when it is long.
    pub async fn policy_verdict(
        &self,
        command: String,
        workdir: Option<String>,
    ) -> Result<(), Denial> {
        let config = Arc::clone(&self.config.borrow());
        if command.len() <= CHECK_INLINE_BYTES {
            return config.policy.check_in(&command, workdir.as_deref());
        }
        tokio::task::spawn_blocking(move || config.policy.check_in(&command, workdir.as_deref()))
            .await
            .unwrap_or_else(|_| {
                Err(Denial {
                    rule: "unparsable".into(),
                    message: "permission denied: unparsable: checking the command failed inside bashd; put it in a script file".into(),
                })
            })
    }

    /// Sends `cmd`, made around a reply channel, and waits for the answer.
    pub(in crate::jobs) async fn ask<T>(
        &self,
        cmd: impl FnOnce(oneshot::Sender<T>) -> Cmd,
    ) -> Result<T, ErrorReply> {
        let (reply, answer) = oneshot::channel();
        self.cmds
            .send(cmd(reply))
            .await
            .map_err(|_| shutting_down())?;
        answer.await.map_err(|_| shutting_down())
    }

    pub(in crate::jobs) async fn lookup(
        &self,
        asker: Asker,
        job: JobRef,
    ) -> Result<(Lookup, Streams), ErrorReply> {
        let mut lookup = self
            .ask(|reply| Cmd::Lookup { asker, job, reply })
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

    /// A page of a job's output. The file is read on a blocking thread, never on the
    /// actor or the job's supervisor.
    pub async fn output(&self, request: OutputRequest) -> Result<OutputPage, ErrorReply> {
        let asker = self.asker(request.caller, request.any_session);
        let (lookup, streams) = self.lookup(asker, request.job).await?;
        let job = lookup.summary.job;
        let source = match (request.stream, streams.stderr) {
            (StreamName::Stdout, _) => streams.stdout,
            (StreamName::Stderr, Some(stderr)) => stderr,
            (StreamName::Stderr, None) => return Err(supervisor::merged_stderr(job)),
        };
        let limit = request.limit.unwrap_or(lookup.page_lines);
        let offset = match request.from_end {
            // Line `offset` from the end; a page that starts before line 1 starts there.
            true => (source.total_lines + 1)
                .saturating_sub(request.offset)
                .max(1),
            false => request.offset,
        };
        // By default a page is as big as a result shows: the configured limit, or the
        // job's own when it asked for more.
        let default_bytes =
            (lookup.max_bytes as u64).max(self.config.borrow().limits.max_bytes.into());
        let max_bytes = request
            .max_bytes
            .unwrap_or(default_bytes)
            .clamp(1, limits::MAX_PAGE_BYTES);
        let ask = output::Ask {
            job,
            stream: request.stream,
            offset,
            limit,
            max_bytes,
        };
        let mut page = blocking(move || output::page(source, ask)).await??;
        if page.lines == 0 {
            // A job that never ran has nothing to page: say why.
            page.notices.extend(lookup.summary.notices);
        }
        Ok(page)
    }

    /// The job's state and the output its caller's session has not seen yet.
    pub async fn new_output(&self, request: JobRequest) -> Result<ExecResult, ErrorReply> {
        let session = request.caller.session.clone();
        let asker = self.asker(request.caller, request.any_session);
        let (lookup, streams) = self.lookup(asker.clone(), request.job).await?;
        let Lookup {
            summary,
            cursor,
            page_lines,
            max_bytes,
            probe,
            ..
        } = lookup;
        let (mut result, seen) =
            blocking(move || check::since_cursor(summary, streams, cursor, page_lines, max_bytes))
                .await??;
        if let Some((idle_secs, prompt)) =
            crate::jobs::requests::follow::waiting_for_input(probe.as_ref()).await
        {
            result.notices.push(Notice::WaitingForInput {
                job: result.job,
                idle_secs,
                prompt,
            });
        }
        let job = result.job;
        let _ = self.cmds.send(Cmd::Advance { job, session, seen }).await;
        Ok(self.with_screen(asker, result).await)
    }

    /// The job's result when it ends, or after `timeout_ms` its state as it stands; with
    /// conditions, earlier when one of them is met (`jobs/live.rs`).
    pub async fn wait(&self, request: WaitRequest) -> Result<ExecResult, ErrorReply> {
        let asker = self.asker(request.caller.clone(), request.any_session);
        let result = self.wait_as_asked(request).await?;
        Ok(self.with_screen(asker, result).await)
    }

    async fn wait_as_asked(&self, request: WaitRequest) -> Result<ExecResult, ErrorReply> {
        if request.conditions.any() {
            return self.wait_for(request).await;
        }
        let mut timeout = request.timeout_ms.map(Duration::from_millis);
        if request.mcp_call {
            // An MCP call returns by its budget, with the job still running.
            let budget = self.config.borrow().mcp.max_call;
            timeout = Some(timeout.map_or(budget, |t| t.min(budget)));
        }
        let asker = self.asker(request.caller, request.any_session);
        let job = request.job;
        match self.ask(|reply| Cmd::Wait { asker, job, reply }).await?? {
            Waiting::Ended(result) => Ok(result),
            Waiting::Pending { summary, result } => {
                let ended = match timeout {
                    Some(timeout) => tokio::time::timeout(timeout, result).await.ok(),
                    None => Some(result.await),
                };
                match ended {
                    Some(result) => result.map_err(|_| shutting_down()),
                    None => Ok(still_running(summary, timeout.unwrap_or_default())),
                }
            }
        }
    }

    /// Stops a job and answers its result once every process of it is gone.
    pub async fn kill(&self, request: KillRequest) -> Result<ExecResult, ErrorReply> {
        let asker = self.asker(request.caller, request.any_session);
        let cmd = |reply| Cmd::Kill {
            asker,
            job: request.job,
            signal: request.signal,
            grace_ms: request.grace_ms,
            reply,
        };
        match self.ask(cmd).await?? {
            Waiting::Ended(result) => Ok(result),
            Waiting::Pending { result, .. } => result.await.map_err(|_| shutting_down()),
        }
    }

    /// The jobs asked for, with the ports the running ones listen on and whether they
    /// wait for input, read from /proc now on a blocking thread.
    pub async fn jobs(&self, request: JobsRequest) -> Result<Vec<JobInfo>, ErrorReply> {
        let origin = self.origin.clone();
        let Listing { mut jobs, live } = self
            .ask(|reply| Cmd::Jobs {
                request,
                origin,
                reply,
            })
            .await??;
        crate::jobs::requests::follow::look_at(&mut jobs, live).await;
        Ok(jobs)
    }

    pub async fn sessions(&self) -> Result<Vec<SessionInfo>, ErrorReply> {
        let origin = self.origin.clone();
        self.ask(|reply| Cmd::Sessions { origin, reply }).await
    }

    pub async fn close_session(&self, session: String) -> Result<SessionClosed, ErrorReply> {
        let origin = self.origin.clone();
        self.ask(|reply| Cmd::CloseSession {
            session,
            origin,
            reply,
        })
        .await?
    }

    /// The daemon's status. Its open files are counted here, not in the actor: a daemon
    /// with a thousand jobs holds thousands, and listing them takes milliseconds, so
    /// the count is taken at most once a second and shared by the calls meanwhile.
    pub async fn status(&self) -> Option<StatusInfo> {
        let mut status = self.ask(|reply| Cmd::Status { reply }).await.ok()?;
        status.open_files = open_files().await;
        Some(status)
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
        let _ = self.ask(|reply| Cmd::Shutdown { reply }).await;
    }
}

/// A `wait` that timed out: the job as it stands.
pub(in crate::jobs) fn still_running(mut summary: ExecResult, waited: Duration) -> ExecResult {
    summary.notices = vec![Notice::StillRunning {
        job: summary.job,
        waited_ms: waited.as_millis() as u64,
    }];
    summary
}

/// How long a count of the daemon's open files is shown before it is taken again.
const OPEN_FILES_FRESH: Duration = Duration::from_secs(1);

/// The daemon's open files, counted on a blocking thread at most once a second.
async fn open_files() -> u64 {
    // A std mutex: held only to read or replace two numbers, never across an await.
    static LAST: std::sync::Mutex<Option<(std::time::Instant, u64)>> = std::sync::Mutex::new(None);
    let cached = *LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, count)) = cached.filter(|(at, _)| at.elapsed() < OPEN_FILES_FRESH) {
        return count;
    }
    let count = blocking(|| std::fs::read_dir("/proc/self/fd").map_or(0, |fds| fds.count() as u64))
        .await
        .unwrap_or(0);
    *LAST.lock().unwrap_or_else(|e| e.into_inner()) = Some((std::time::Instant::now(), count));
    count
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

//! One task per running job: it reads the job's pipes, enforces its timeout, stops it
//! on request, and turns the leader's exit into the job's result. It owns the job's
//! process group; nothing else signals it.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bashd_protocol::{ErrorKind, ErrorReply, ExecResult, JobState, Response, StreamName};
use rustix::process::{Signal, WaitStatus};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

use super::process::{self, Spawned};
use crate::output::{self, OutputSource, Shape, StreamCapture};

/// How long output is still read after the shell exits, for processes that inherited
/// its pipes and are about to close them.
const STRAGGLER_DRAIN: Duration = Duration::from_millis(100);
const READ_CHUNK: usize = 256 * 1024;

/// What the job table knows of a job when it starts.
#[derive(Debug, Clone)]
pub struct JobMeta {
    pub job: String,
    pub session: String,
    pub description: Option<String>,
    pub workdir: String,
    pub started: Instant,
}

/// Everything the supervisor of one job needs.
#[derive(Debug)]
pub struct JobRun {
    pub meta: JobMeta,
    pub spawned: Spawned,
    pub timeout: Duration,
    pub kill_grace: Duration,
    pub limits: output::Limits,
    pub shape: Shape,
    /// The session's directory, where spill files go.
    pub session_dir: PathBuf,
}

/// What is left of a job when it ends: its result, and its output to page through.
#[derive(Debug)]
pub struct Ended {
    pub result: ExecResult,
    pub stdout: OutputSource,
    /// `None` when stderr was merged into stdout.
    pub stderr: Option<OutputSource>,
}

/// The answer to a request for a stream's output: a snapshot, and how many lines a page
/// has when the request names no limit.
pub type SourceReply = oneshot::Sender<Result<(OutputSource, u64), ErrorReply>>;

/// Why bashd stops a job before it ends on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Timeout,
    /// The request that started a foreground job went away.
    Abandoned,
    Shutdown,
}

#[derive(Debug)]
pub enum Control {
    Stop(StopReason),
    /// A snapshot of one stream, for `bashc output` while the job runs.
    Snapshot {
        stream: StreamName,
        limit: u64,
        reply: SourceReply,
    },
}

/// Runs the job to its end and returns its result. `requester` is the channel of the
/// request that started it: when that closes, the job is stopped.
pub async fn supervise(
    run: JobRun,
    mut control: mpsc::Receiver<Control>,
    requester: mpsc::Sender<Response>,
) -> Ended {
    let JobRun {
        meta,
        spawned,
        timeout,
        kill_grace,
        limits,
        shape,
        session_dir,
    } = run;
    let Spawned {
        pid: pgid,
        stdout,
        stderr,
        mut exit,
    } = spawned;
    let merged = stderr.is_none();
    let capture = |stream: &str| {
        let path = session_dir.join(format!("{}.{stream}", meta.job));
        StreamCapture::new(limits, path, false)
    };
    let mut out = PipeReader::new(stdout, capture("stdout"));
    let mut err = PipeReader::new_optional(stderr, capture("stderr"));
    let mut control_open = true;

    let mut leader: Option<WaitStatus> = None;
    let mut stop: Option<StopReason> = None;
    let timeout_at = meta.started + timeout;
    let mut sigkill_at: Option<Instant> = None;
    let mut drain_until: Option<Instant> = None;

    while leader.is_none() || !out.is_done() || !err.is_done() {
        let stopping = stop.is_some() || leader.is_some();
        // Cancelling any branch loses nothing: a pipe read that did not complete has
        // consumed no bytes, and the exit status stays in its channel.
        tokio::select! {
            status = &mut exit, if leader.is_none() => match status {
                Ok(status) => {
                    leader = Some(status);
                    drain_until = Some(Instant::now() + STRAGGLER_DRAIN);
                }
                // The reaper is gone, so the daemon is going down: stop waiting.
                Err(_) => break,
            },
            () = out.read_some(), if !out.is_done() => {}
            () = err.read_some(), if !err.is_done() => {}
            () = tokio::time::sleep_until(timeout_at.into()), if !stopping => {
                stop = Some(StopReason::Timeout);
            }
            () = requester.closed(), if !stopping => stop = Some(StopReason::Abandoned),
            msg = control.recv(), if control_open => match msg {
                Some(Control::Stop(reason)) => {
                    if !stopping {
                        stop = Some(reason);
                    }
                }
                Some(Control::Snapshot { stream, limit, reply }) => {
                    let source = match (stream, merged) {
                        (StreamName::Stdout, _) => Ok(out.capture.source()),
                        (StreamName::Stderr, false) => Ok(err.capture.source()),
                        (StreamName::Stderr, true) => Err(merged_stderr(&meta.job)),
                    };
                    let _ = reply.send(source.map(|s| (s, limit)));
                }
                None => control_open = false,
            },
            () = sleep_until_some(sigkill_at) => {
                process::signal_group(pgid, Signal::KILL);
                sigkill_at = None;
            }
            () = sleep_until_some(drain_until) => break,
        }
        if !stopping && stop.is_some() {
            process::signal_group(pgid, Signal::TERM);
            sigkill_at = Some(Instant::now() + kill_grace);
        }
    }

    // The shell is gone; whatever of its group is still alive has nobody to wait for it.
    let stragglers_killed = process::terminate_group(pgid, kill_grace).await;
    // What the stragglers wrote on their way out is still worth showing.
    let tail_deadline = Instant::now() + STRAGGLER_DRAIN;
    while !out.is_done() || !err.is_done() {
        tokio::select! {
            () = out.read_some(), if !out.is_done() => {}
            () = err.read_some(), if !err.is_done() => {}
            () = tokio::time::sleep_until(tail_deadline.into()) => break,
        }
    }

    let (state, exit_code, signal) = match (stop, leader) {
        (Some(StopReason::Timeout), status) => (JobState::TimedOut, code(status), sig(status)),
        (Some(_), status) => (JobState::Killed, code(status), sig(status)),
        (None, Some(status)) if status.terminating_signal().is_some() => {
            (JobState::Signaled, None, status.terminating_signal())
        }
        (None, Some(status)) => (JobState::Exited, status.exit_status(), None),
        (None, None) => (JobState::Killed, None, None),
    };
    out.capture.finish();
    err.capture.finish();
    let mut notices = Vec::new();
    match stop {
        Some(StopReason::Timeout) => notices.push(format!(
            "Command timed out after {} s and was killed with its whole process group. Use --mode slow or --timeout SECS for longer commands.",
            timeout.as_secs()
        )),
        Some(StopReason::Shutdown) => {
            notices.push("bashd is shutting down; the command was killed.".to_owned())
        }
        Some(StopReason::Abandoned) | None => {}
    }
    if stragglers_killed && stop.is_none() {
        notices.push(
            "The command's shell exited while processes it started were still running; they were killed."
                .to_owned(),
        );
    }

    notices.extend(out.capture.notice("stdout"));
    if !merged {
        notices.extend(err.capture.notice("stderr"));
    }
    let result = ExecResult {
        job: meta.job,
        session: meta.session,
        pid: Some(pgid.as_raw_nonzero().get() as u32),
        state,
        exit_code,
        signal,
        duration_ms: meta.started.elapsed().as_millis() as u64,
        backgrounded: false,
        description: meta.description,
        workdir: meta.workdir,
        stdout: out.capture.result(shape),
        stderr: (!merged).then(|| err.capture.result(shape)),
        notice: (!notices.is_empty()).then(|| notices.join("\n")),
    };
    Ended {
        result,
        stdout: out.capture.source(),
        stderr: (!merged).then(|| err.capture.source()),
    }
}

pub fn merged_stderr(job: &str) -> ErrorReply {
    ErrorReply::new(
        ErrorKind::InvalidRequest,
        format!("{job} ran with --merge-stderr: its stderr is in its stdout"),
    )
}

fn code(status: Option<WaitStatus>) -> Option<i32> {
    status.and_then(|s| s.exit_status())
}

fn sig(status: Option<WaitStatus>) -> Option<i32> {
    status.and_then(|s| s.terminating_signal())
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

/// One pipe of a job and what was read from it.
struct PipeReader {
    pipe: Option<pipe::Receiver>,
    buf: Vec<u8>,
    capture: StreamCapture,
}

impl PipeReader {
    fn new(fd: OwnedFd, capture: StreamCapture) -> PipeReader {
        Self::new_optional(Some(fd), capture)
    }

    fn new_optional(fd: Option<OwnedFd>, capture: StreamCapture) -> PipeReader {
        let pipe = fd.and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok());
        PipeReader {
            pipe,
            buf: vec![0; READ_CHUNK],
            capture,
        }
    }

    fn is_done(&self) -> bool {
        self.pipe.is_none()
    }

    /// Reads one chunk into the capture; EOF or an error closes the pipe. Cancel-safe.
    async fn read_some(&mut self) {
        let Some(pipe) = self.pipe.as_mut() else {
            return;
        };
        match pipe.read(&mut self.buf).await {
            Ok(0) | Err(_) => self.pipe = None,
            Ok(n) => self.capture.push(&self.buf[..n]),
        }
    }
}

//! One task per running job: it reads the job's pipes, enforces its timeout, answers
//! the request that started it, moves the job to the background (mode `background`, a
//! timeout with `on_timeout = background`, or processes the shell left running), stops
//! it on request, and turns the end of its last process into the job's result. It owns
//! the job's processes; nothing else signals them.
//!
//! A job goes through these phases, each a loop in [`Supervisor`]:
//! 1. the leader (`bash -c`) runs;
//! 2. the leader has exited: the pipes get a moment to close, then the job's group and
//!    the daemon's orphans are looked at for processes left behind;
//! 3. stragglers live on: the job runs in the background until the last one exits;
//!
//! and at any point a stop (timeout, `kill`, owner gone, shutdown) ends all of them.

use std::future::Future;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bashd_protocol::{
    BackgroundWhy, ErrorKind, ErrorReply, ExecResult, JobId, JobState, Notice, OnTimeout, Response,
    StreamName,
};
use rustix::process::{Signal, WaitStatus};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

use super::contain::{Contained, JobProcesses, Leader};
use super::process::Spawned;
use crate::config::OnStraggler;
use crate::output::{self, OutputSource, Shape, StreamCapture};

/// How long output is still read after the shell exits, for processes that inherited
/// its pipes and are about to close them.
const STRAGGLER_DRAIN: Duration = Duration::from_millis(100);
/// How long a stopped job's leader has to be reaped after its processes were killed.
const LEADER_REAP_WAIT: Duration = Duration::from_secs(2);
/// A pipe read starts with this buffer and grows it while reads fill it, so a quiet
/// background job holds little memory and a loud one reads in large chunks.
const FIRST_READ_CHUNK: usize = 8 * 1024;
const READ_CHUNK: usize = 256 * 1024;
/// A pipe that a read found full is enlarged to this, once: fewer wake-ups for a fast
/// writer. Pipes start at the kernel's default, since pipe memory is a per-user quota
/// that a thousand quiet jobs must not spend.
const BIG_PIPE_BYTES: usize = 1024 * 1024;

/// What the job table knows of a job when it starts.
#[derive(Debug, Clone)]
pub struct JobMeta {
    pub job: JobId,
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
    /// Every process of the job, as containment knows them.
    pub processes: Contained,
    /// From the start; past it, a foreground job goes by `on_timeout`.
    pub timeout: Duration,
    pub on_timeout: OnTimeout,
    /// From the start; past it, a job in the background is killed.
    pub background_timeout: Duration,
    pub on_straggler: OnStraggler,
    pub kill_grace: Duration,
    pub limits: output::Limits,
    pub shape: Shape,
    /// The session's directory, where spill files go.
    pub session_dir: PathBuf,
    /// Mode `background`: the request is answered as soon as the job starts.
    pub detached: bool,
}

/// What is left of a job when it ends: its result, and its output to page through.
#[derive(Debug)]
pub struct Ended {
    pub result: ExecResult,
    pub streams: Streams,
}

/// A snapshot of a job's output.
#[derive(Debug, Clone)]
pub struct Streams {
    pub stdout: OutputSource,
    /// `None` when stderr was merged into stdout.
    pub stderr: Option<OutputSource>,
}

/// What a supervisor tells the job table.
#[derive(Debug)]
pub enum Report {
    /// The request was answered and the job runs on in the background. `seen` is how
    /// many lines of each stream that answer covered, so `check` starts after them.
    Backgrounded {
        job: JobId,
        seen: [u64; 2],
    },
    Ended(Box<Ended>),
}

/// Why bashd stops a job before it ends on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Timeout,
    /// The request that started a foreground job went away.
    Abandoned,
    Shutdown,
    /// `bashc kill`.
    Killed,
    /// Every owner of the session exited while the job ran in the foreground.
    OwnersGone,
    /// The session was closed, or its linger time ran out.
    SessionEnded,
    /// The shell exited and `sessions.on_straggler = "kill"`.
    Stragglers,
}

/// How to stop a job: `signal` to every process, then SIGKILL after `grace`.
#[derive(Debug, Clone, Copy)]
pub struct Stop {
    pub reason: StopReason,
    pub signal: Signal,
    pub grace: Duration,
}

impl Stop {
    pub fn term(reason: StopReason, grace: Duration) -> Stop {
        Stop {
            reason,
            signal: Signal::TERM,
            grace,
        }
    }
}

#[derive(Debug)]
pub enum Control {
    Stop(Stop),
    /// A snapshot of the output so far, for `output` and `check` while the job runs.
    Snapshot(oneshot::Sender<Streams>),
}

/// Runs the job to its end and returns its result. `requester` is the channel of the
/// request that started it: it gets `Finished` once, when the job ends or moves to the
/// background, and a foreground job is stopped if it closes first.
pub async fn supervise(
    run: JobRun,
    control: mpsc::UnboundedReceiver<Control>,
    requester: mpsc::Sender<Response>,
    reports: mpsc::UnboundedSender<Report>,
) -> Ended {
    let JobRun {
        meta,
        spawned,
        processes,
        timeout,
        on_timeout,
        background_timeout,
        on_straggler,
        kill_grace,
        limits,
        shape,
        session_dir,
        detached,
    } = run;
    let Spawned {
        pid,
        stdout,
        stderr,
        exit,
    } = spawned;
    let merged = stderr.is_none();
    let capture = |stream: &str| {
        let path = session_dir.join(format!("{}.{stream}", meta.job));
        StreamCapture::new(limits, path, detached)
    };
    let mut job = Supervisor {
        out: PipeReader::new(Some(stdout), capture("stdout")),
        err: PipeReader::new(stderr, capture("stderr")),
        merged,
        control,
        control_open: true,
        exit: Some(exit),
        leader: None,
        requester: Some(requester),
        reports,
        deadline: meta.started + timeout,
        timeout,
        on_timeout,
        background_timeout,
        on_straggler,
        kill_grace,
        shape,
        stop: None,
        moved: None,
        stragglers_killed: false,
        pid: pid.as_raw_nonzero().get() as u32,
        processes,
        meta,
    };
    if detached {
        job.detach(BackgroundWhy::Requested).await;
    }
    job.leader_runs().await;
    if job.stop.is_none() && job.leader.is_some() {
        job.leader_exited().await;
    }
    if let Some(stop) = job.stop {
        job.terminate(stop).await;
    }
    job.last_output().await;
    job.end()
}

struct Supervisor {
    meta: JobMeta,
    /// The leader's pid, which results show.
    pid: u32,
    processes: Contained,
    out: PipeReader,
    err: PipeReader,
    merged: bool,
    control: mpsc::UnboundedReceiver<Control>,
    control_open: bool,
    /// Until the reaper has collected the leader.
    exit: Option<oneshot::Receiver<WaitStatus>>,
    leader: Option<WaitStatus>,
    /// Until the request is answered.
    requester: Option<mpsc::Sender<Response>>,
    reports: mpsc::UnboundedSender<Report>,
    deadline: Instant,
    timeout: Duration,
    on_timeout: OnTimeout,
    background_timeout: Duration,
    on_straggler: OnStraggler,
    kill_grace: Duration,
    shape: Shape,
    stop: Option<Stop>,
    moved: Option<BackgroundWhy>,
    stragglers_killed: bool,
}

/// What woke a supervisor up.
enum Wake<T> {
    /// Output was read, or a snapshot answered.
    Busy,
    LeaderExited,
    Stop(Stop),
    /// The phase's own event.
    Phase(T),
}

/// Phase 1's own events.
enum LeaderEvent {
    Deadline,
    Abandoned,
}

/// Phase 3's own events.
enum StragglerEvent {
    AllExited,
    Deadline,
}

impl Supervisor {
    /// Waits for one thing to happen: output, the leader's exit, a control message, or
    /// `phase`. Cancelling any branch loses nothing: a pipe read that did not complete
    /// consumed no bytes, the exit status and control messages stay in their channels,
    /// and `phase` is re-created or pinned by the caller.
    async fn wake<T>(&mut self, phase: impl Future<Output = T>) -> Wake<T> {
        enum Got<T> {
            Exit(Result<WaitStatus, oneshot::error::RecvError>),
            Read,
            Control(Option<Control>),
            Phase(T),
        }
        let got = tokio::select! {
            status = recv_exit(&mut self.exit) => Got::Exit(status),
            () = self.out.read_some(), if !self.out.is_done() => Got::Read,
            () = self.err.read_some(), if !self.err.is_done() => Got::Read,
            msg = self.control.recv(), if self.control_open => Got::Control(msg),
            value = phase => Got::Phase(value),
        };
        match got {
            Got::Exit(status) => {
                self.exit = None;
                // An error means the reaper is gone: the daemon is going down.
                self.leader = status.ok();
                Wake::LeaderExited
            }
            Got::Read => Wake::Busy,
            Got::Control(Some(Control::Stop(stop))) => Wake::Stop(stop),
            Got::Control(Some(Control::Snapshot(reply))) => {
                let _ = reply.send(self.streams());
                Wake::Busy
            }
            Got::Control(None) => {
                self.control_open = false;
                Wake::Busy
            }
            Got::Phase(value) => Wake::Phase(value),
        }
    }

    fn streams(&self) -> Streams {
        Streams {
            stdout: self.out.capture.source(),
            stderr: (!self.merged).then(|| self.err.capture.source()),
        }
    }

    /// Phase 1: until the leader exits or the job is to stop.
    async fn leader_runs(&mut self) {
        while self.exit.is_some() && self.stop.is_none() {
            let deadline = self.deadline;
            let requester = self.requester.clone();
            let phase = async move {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline.into()) => LeaderEvent::Deadline,
                    () = closed(requester) => LeaderEvent::Abandoned,
                }
            };
            match self.wake(phase).await {
                Wake::Stop(stop) => self.stop = Some(stop),
                Wake::Phase(LeaderEvent::Abandoned) => {
                    self.stop = Some(Stop::term(StopReason::Abandoned, self.kill_grace));
                }
                Wake::Phase(LeaderEvent::Deadline) => {
                    let move_on = self.requester.is_some()
                        && self.on_timeout == OnTimeout::Background
                        && self.background_timeout > self.timeout;
                    if move_on {
                        self.deadline = self.meta.started + self.background_timeout;
                        self.detach(BackgroundWhy::Timeout).await;
                    } else {
                        self.stop = Some(Stop::term(StopReason::Timeout, self.kill_grace));
                    }
                }
                Wake::Busy | Wake::LeaderExited => {}
            }
        }
    }

    /// Phases 2 and 3: the leader has exited; processes it started may live on.
    async fn leader_exited(&mut self) {
        let drain_until = Instant::now() + STRAGGLER_DRAIN;
        while !(self.out.is_done() && self.err.is_done()) && self.stop.is_none() {
            match self
                .wake(tokio::time::sleep_until(drain_until.into()))
                .await
            {
                Wake::Phase(()) => break,
                Wake::Stop(stop) => self.stop = Some(stop),
                Wake::Busy | Wake::LeaderExited => {}
            }
        }
        if self.stop.is_some() || !self.processes.outlived_leader().await {
            return;
        }
        if self.on_straggler == OnStraggler::Kill {
            self.stragglers_killed = true;
            self.stop = Some(Stop::term(StopReason::Stragglers, self.kill_grace));
            return;
        }
        self.detach(BackgroundWhy::Stragglers).await;
        let processes = self.processes.clone();
        let mut all_exited = Box::pin(async move { processes.all_exited().await });
        loop {
            let deadline = self.deadline;
            let phase = async {
                tokio::select! {
                    () = &mut all_exited => StragglerEvent::AllExited,
                    () = tokio::time::sleep_until(deadline.into()) => StragglerEvent::Deadline,
                }
            };
            match self.wake(phase).await {
                Wake::Phase(StragglerEvent::AllExited) => return,
                Wake::Phase(StragglerEvent::Deadline) => {
                    self.stop = Some(Stop::term(StopReason::Timeout, self.kill_grace));
                    return;
                }
                Wake::Stop(stop) => {
                    self.stop = Some(stop);
                    return;
                }
                Wake::Busy | Wake::LeaderExited => {}
            }
        }
    }

    /// Signals every process of the job and waits until none is left.
    async fn terminate(&mut self, stop: Stop) {
        let leader = if self.exit.is_some() {
            Leader::Unreaped
        } else {
            Leader::Reaped
        };
        let processes = self.processes.clone();
        let mut terminated =
            Box::pin(async move { processes.terminate(stop.signal, stop.grace, leader).await });
        // Output read meanwhile is kept; a second stop changes nothing.
        while !matches!(self.wake(&mut terminated).await, Wake::Phase(_)) {}
        let reaped_by = Instant::now() + LEADER_REAP_WAIT;
        while self.exit.is_some() {
            if let Wake::Phase(()) = self.wake(tokio::time::sleep_until(reaped_by.into())).await {
                break;
            }
        }
    }

    /// What the last processes wrote on their way out is still worth showing.
    async fn last_output(&mut self) {
        let until = Instant::now() + STRAGGLER_DRAIN;
        while !(self.out.is_done() && self.err.is_done()) {
            if let Wake::Phase(()) = self.wake(tokio::time::sleep_until(until.into())).await {
                break;
            }
        }
    }

    /// Answers the request now; the job runs on in the background.
    async fn detach(&mut self, why: BackgroundWhy) {
        let Some(requester) = self.requester.take() else {
            return;
        };
        self.moved = Some(why);
        let notice = Notice::Background {
            job: self.meta.job,
            pid: self.pid,
            why,
            timeout_secs: (why == BackgroundWhy::Timeout).then_some(self.timeout.as_secs()),
        };
        let seen = match why {
            BackgroundWhy::Requested => [0, 0],
            BackgroundWhy::Timeout | BackgroundWhy::Stragglers => [
                self.out.capture.complete_lines(),
                self.err.capture.complete_lines(),
            ],
        };
        let result = self.result(JobState::Running, vec![notice]);
        // Before the answer, so that a check sent on seeing it starts after `seen`.
        let _ = self.reports.send(Report::Backgrounded {
            job: self.meta.job,
            seen,
        });
        let _ = requester.send(Response::Finished(Box::new(result))).await;
    }

    fn result(&self, state: JobState, notices: Vec<Notice>) -> ExecResult {
        let status = self.leader;
        ExecResult {
            job: self.meta.job,
            session: self.meta.session.clone(),
            pid: Some(self.pid),
            state,
            exit_code: status.and_then(|s| s.exit_status()),
            signal: status.and_then(|s| s.terminating_signal()),
            duration_ms: self.meta.started.elapsed().as_millis() as u64,
            backgrounded: self.moved.is_some(),
            description: self.meta.description.clone(),
            workdir: self.meta.workdir.clone(),
            stdout: self.out.capture.result(self.shape),
            stderr: (!self.merged).then(|| self.err.capture.result(self.shape)),
            notices,
        }
    }

    fn end(mut self) -> Ended {
        self.out.capture.finish();
        self.err.capture.finish();
        let state = match (self.stop.map(|s| s.reason), self.leader) {
            (Some(StopReason::Timeout), _) => JobState::TimedOut,
            (Some(StopReason::Stragglers), Some(status))
                if status.terminating_signal().is_none() =>
            {
                JobState::Exited
            }
            (Some(_), _) | (None, None) => JobState::Killed,
            (None, Some(status)) if status.terminating_signal().is_some() => JobState::Signaled,
            (None, Some(_)) => JobState::Exited,
        };
        let mut notices = Vec::new();
        let limit = if self.moved.is_some() {
            self.background_timeout
        } else {
            self.timeout
        };
        let session = || self.meta.session.clone();
        match self.stop.map(|s| s.reason) {
            Some(StopReason::Timeout) => notices.push(Notice::TimedOut {
                after_secs: limit.as_secs(),
            }),
            Some(StopReason::Shutdown) => notices.push(Notice::Shutdown {}),
            Some(StopReason::OwnersGone) => notices.push(Notice::OwnersGone { session: session() }),
            Some(StopReason::SessionEnded) => {
                notices.push(Notice::SessionEnded { session: session() })
            }
            Some(StopReason::Killed | StopReason::Abandoned | StopReason::Stragglers) | None => {}
        }
        if self.stragglers_killed {
            notices.push(Notice::StragglersKilled {});
        }
        notices.extend(self.out.capture.notice(StreamName::Stdout));
        if !self.merged {
            notices.extend(self.err.capture.notice(StreamName::Stderr));
        }
        let result = self.result(state, notices);
        Ended {
            result,
            streams: self.streams(),
        }
    }
}

pub fn merged_stderr(job: JobId) -> ErrorReply {
    ErrorReply::new(
        ErrorKind::InvalidRequest,
        format!("{job} ran with --merge-stderr: its stderr is in its stdout"),
    )
}

async fn recv_exit(
    exit: &mut Option<oneshot::Receiver<WaitStatus>>,
) -> Result<WaitStatus, oneshot::error::RecvError> {
    match exit {
        Some(exit) => exit.await,
        None => std::future::pending().await,
    }
}

async fn closed(requester: Option<mpsc::Sender<Response>>) {
    match requester {
        Some(requester) => requester.closed().await,
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
    fn new(fd: Option<OwnedFd>, capture: StreamCapture) -> PipeReader {
        let pipe = fd.and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok());
        PipeReader {
            pipe,
            buf: Vec::new(),
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
        if self.buf.is_empty() {
            self.buf = vec![0; FIRST_READ_CHUNK];
        }
        match pipe.read(&mut self.buf).await {
            Ok(0) | Err(_) => {
                self.pipe = None;
                self.buf = Vec::new();
            }
            Ok(n) => {
                self.capture.push(&self.buf[..n]);
                if n == self.buf.len() && n < READ_CHUNK {
                    if n >= FIRST_READ_CHUNK * 8 {
                        // Above /proc/sys/fs/pipe-max-size or the user's pipe quota
                        // this fails, and the pipe keeps its size.
                        let _ = rustix::pipe::fcntl_setpipe_size(pipe.as_fd(), BIG_PIPE_BYTES);
                    }
                    self.buf = vec![0; n * 2];
                }
            }
        }
    }
}

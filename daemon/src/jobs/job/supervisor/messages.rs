//! What a supervisor is given and what it says: the job it runs (`JobRun`, `JobMeta`,
//! `Settings`), the actor's control messages (`Control`, `Stop`), its reports to the
//! table (`Report`, `Ended`), and the snapshots and looks it answers with (`Streams`,
//! `Subscribed`, `Probe`). Kept apart from the state machine in `mod.rs`.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bashd_protocol::{
    BackgroundWhy, ErrorKind, ErrorReply, ExecResult, JobId, Killer, OnTimeout, StreamName,
};
use rustix::process::Signal;
use tokio::sync::oneshot;

use super::Subscriber;
use crate::config::OnStraggler;
use crate::jobs::os::spawn::Spawned;
use crate::output::{self, OutputSource, Shape};

/// What the job table knows of a job when it starts.
#[derive(Debug, Clone)]
pub struct JobMeta {
    pub job: JobId,
    pub session: String,
    pub description: Option<String>,
    pub workdir: String,
    pub started: Instant,
}

/// How a job is to run, settled before it is spawned.
#[derive(Debug, Clone)]
pub struct Settings {
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
    /// Where its spill files are charged against the disk budgets.
    pub spill_budget: Option<output::Charge>,
    /// The sandbox it runs in, when it is confined; named in its results.
    pub sandbox: Option<bashd_protocol::SandboxInForce>,
    /// The paths hidden from it (`[sandbox] deny_read`, when confined): a failure
    /// that names one is a refused read, whose fix is not a looser profile.
    pub deny_read: Vec<PathBuf>,
    /// What its start has to say in each of its results: a `workspace-write` job that
    /// runs `read-only`, and why (`sandbox/roots.rs`).
    pub start_notices: Vec<bashd_protocol::Notice>,
    /// From the start; past it, a request still waiting is answered and the job moves
    /// to the background (an MCP call's budget). Its timeout still holds.
    pub answer_by: Option<Duration>,
}

/// Everything the supervisor of one job needs. `P` is the job's processes: its
/// containment in the daemon, a fake in tests.
#[derive(Debug)]
pub struct JobRun<P> {
    pub meta: JobMeta,
    pub spawned: Spawned,
    pub processes: P,
    pub settings: Settings,
    /// A reader of the output from its first line (`exec --stream`).
    pub subscriber: Option<Subscriber>,
    /// For a job with a stdin pipe: where to look for it waiting for input.
    pub watch: Option<InputWatch>,
    /// The job's first process (its resident, or its shell on the scan path): it and
    /// its descendants are the job's processes.
    pub root: u32,
    /// Counts the reads that brought output (`Inputs::activity`).
    pub activity: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// Where to look for a job with a stdin pipe waiting for input, and the last look.
#[derive(Debug, Clone)]
pub struct InputWatch {
    /// The job's first process (its resident, or its shell on the scan path).
    pub root: u32,
    /// The inode of the job's stdin pipe.
    pub stdin_inode: u64,
    /// A terminal job's terminal, `/dev/pts/N`: its stdin in place of the pipe.
    pub tty: Option<String>,
    /// When the job's CPU time was last read, and what it was.
    pub sample: Option<(std::time::Instant, u64)>,
}

/// What a new live reader starts from: the output up to the first line it will get.
#[derive(Debug)]
pub struct Subscribed {
    pub streams: Streams,
    /// The job's first process.
    pub root: u32,
}

/// What a look at a running job found.
#[derive(Debug, Clone, Default)]
pub struct Probe {
    /// Seconds it has waited for input, when it does.
    pub waiting_for_input: Option<u64>,
    /// What it asks, when it waits: the line it left unended.
    pub prompt: Option<String>,
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
    /// The stream that printed last: a dev server's request log on stderr after its
    /// banner on stdout is what `bashc top`'s LAST LINE shows (issue 45).
    pub printed_last: StreamName,
}

impl Streams {
    /// The stream that printed last, for the last line a person watching the job sees.
    pub fn printed_last(self) -> OutputSource {
        match (self.printed_last, self.stderr) {
            (StreamName::Stderr, Some(stderr)) => stderr,
            _ => self.stdout,
        }
    }

    /// The stream `name` of job `job`, or why it has none (`output`, `grep`).
    pub fn take(self, name: StreamName, job: JobId) -> Result<OutputSource, ErrorReply> {
        match (name, self.stderr) {
            (StreamName::Stdout, _) => Ok(self.stdout),
            (StreamName::Stderr, Some(stderr)) => Ok(stderr),
            (StreamName::Stderr, None) => Err(ErrorReply::new(
                ErrorKind::InvalidRequest,
                // Front-end neutral: `--merge-stderr` on the CLI is `merge_stderr` in MCP.
                format!("{job} ran with stderr merged into stdout: its stderr is in its stdout"),
            )),
        }
    }
}

/// What a job's tasks tell the job table: its supervisor, and before that the task
/// that waits for the reaper to spawn its shell.
#[derive(Debug)]
pub enum Report {
    /// The reaper's answer to the spawn of the job's shell.
    Spawned {
        job: JobId,
        spawned: io::Result<Spawned>,
    },
    /// The request was answered and the job runs on in the background. `seen` is how
    /// many lines of each stream that answer covered, so `check` starts after them.
    Backgrounded {
        job: JobId,
        seen: [u64; 2],
    },
    Ended(Box<Ended>),
    /// Something for a session's inbox, from a job's teller (`job/teller.rs`).
    Tell {
        session: String,
        event: bashd_protocol::InboxEvent,
    },
    /// Ask `0` has waited its `[sandbox] ask_secs` (issue 44), from its timer.
    AskExpired(bashd_protocol::AskId),
}

/// Why bashd stops a job before it ends on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Timeout,
    /// The request that started a foreground job went away.
    Abandoned,
    Shutdown,
    /// A `kill` request, from the job's own session or another.
    Killed(Killer),
    /// Every owner of the session exited while the job ran in the foreground.
    OwnersGone,
    /// The session was closed, or its linger time ran out.
    SessionEnded,
    /// The shell exited and `sessions.on_straggler = "kill"`.
    Stragglers,
}

/// How to stop a job: `signal` to every process, then SIGKILL after `grace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// A new live reader of the output, from the next line on; the reply has what came
    /// before.
    Subscribe {
        subscriber: Subscriber,
        reply: oneshot::Sender<Subscribed>,
    },
    /// Whether the job waits for input, for `check` and `jobs`.
    Probe(oneshot::Sender<Probe>),
    /// Answer the request now and go on in the background (a cancelled MCP call, with
    /// `[mcp] on_cancel = "background"`). Nothing happens once it is answered.
    Detach(BackgroundWhy),
    /// The screen of a terminal job (`bashc screen`), and whether its cursor keys are
    /// in application mode; `None` for a job on pipes.
    Screen {
        job: JobId,
        reply: oneshot::Sender<Option<(bashd_protocol::ScreenInfo, bool)>>,
    },
    /// A new size for a terminal job's terminal (`bashc resize`).
    Resize {
        size: bashd_protocol::PtySize,
        reply: oneshot::Sender<std::io::Result<()>>,
    },
}

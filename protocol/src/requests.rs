//! The payload of each request but `exec` (the job and session requests), and each one's
//! answer (DESIGN §7). Field names here are the JSON keys that `bashc --json` prints.

use serde::{Deserialize, Serialize};

use crate::exec::{ExecResult, ExitRecord, JobState, PtySize, ScreenInfo, StreamName};
use crate::message::{Caller, JobRef};
use crate::notice::{JobId, Notice};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobsRequest {
    pub caller: Caller,
    /// `None`: every session's jobs.
    pub session: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRequest {
    pub caller: Caller,
    pub job: JobRef,
    /// Reach a job of another session too (`--any-session`); otherwise such a job is
    /// refused, naming its session.
    pub any_session: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitRequest {
    pub caller: Caller,
    pub job: JobRef,
    /// `None`: wait as long as the job runs.
    pub timeout_ms: Option<u64>,
    /// Return earlier, when one of these is met (`bashc wait --until/--port/--idle`).
    pub conditions: WaitConditions,
    /// Reach a job of another session too (`--any-session`).
    pub any_session: bool,
    /// The wait is an MCP tool call: it ends by the daemon's `[mcp] max_call_secs`.
    pub mcp_call: bool,
}

/// `bashc wait J1 J2 ... --any|--all`: every wait's caller is the request's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitManyRequest {
    /// One wait per job, each with its own conditions; their `timeout_ms` is ignored.
    pub waits: Vec<WaitRequest>,
    /// Answer once every job is done; otherwise once the first is.
    pub all: bool,
    /// `None`: wait as long as it takes.
    pub timeout_ms: Option<u64>,
}

/// The answer to `WaitMany`: a result per job, in the order asked, and which jobs
/// were done (ended, or met their conditions) in the order they were.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitedMany {
    pub results: Vec<ExecResult>,
    pub done: Vec<JobId>,
}

/// What a `wait` may return on before the job ends; any combination, whichever comes
/// first. None set: wait for the end.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WaitConditions {
    /// A regex a new whole line must match.
    pub until: Option<String>,
    /// The stream `until` watches; `None`: both.
    pub until_stream: Option<StreamName>,
    /// A TCP port some process of the job listens on.
    pub port: Option<u16>,
    /// No output on either stream for this long.
    pub idle_ms: Option<u64>,
}

impl WaitConditions {
    pub fn any(&self) -> bool {
        self.until.is_some() || self.port.is_some() || self.idle_ms.is_some()
    }
}

/// Which part of a job's output `follow` shows before the lines to come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FollowFrom {
    /// Every line from the first.
    Start,
    /// The last N lines of each stream.
    Last(u64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FollowRequest {
    pub caller: Caller,
    pub job: JobRef,
    /// `None`: both streams.
    pub stream: Option<StreamName>,
    pub from: FollowFrom,
    /// Reach a job of another session too (`--any-session`).
    pub any_session: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendRequest {
    pub caller: Caller,
    pub job: JobRef,
    /// One length and the bytes, not a sequence of numbers (`serde_bytes`).
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
    /// Close the job's stdin after writing: it reads end-of-file.
    pub eof: bool,
    /// Key names as `tmux send-keys` takes them (`Enter`, `C-c`, `Up`), each sent after
    /// `bytes`; a word that names no key is sent as text.
    pub keys: Vec<String>,
    /// Send every word of `keys` as text, naming no key.
    pub literal: bool,
    /// Answer with the screen of a terminal job once its output has been quiet this
    /// many milliseconds (or after a few seconds at most).
    pub screen_settle_ms: Option<u64>,
    /// Reach a job of another session too (`--any-session`).
    pub any_session: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResizeRequest {
    pub caller: Caller,
    pub job: JobRef,
    pub size: PtySize,
    /// Reach a job of another session too (`--any-session`).
    pub any_session: bool,
}

/// What a daemon asked to stop is about to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopping {
    pub daemon_pid: u32,
    /// Jobs running, of every session, that it stops (TERM, grace, KILL) before it exits.
    pub running_jobs: u32,
}

/// What `send` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendReply {
    pub job: JobId,
    /// Bytes written into the job's stdin pipe.
    pub written: u64,
    /// The job's stdin is closed now (by `eof`, or earlier).
    pub closed: bool,
    /// With `screen_settle_ms`: the screen once the output settled.
    pub screen: Option<ScreenInfo>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrepRequest {
    pub caller: Caller,
    pub job: JobRef,
    pub stream: StreamName,
    /// A regex (Rust `regex` syntax) that a line must match.
    pub pattern: String,
    /// Lines of context before and after each match.
    pub context: u32,
    /// Skip the lines before this one (1-based): where the last page stopped.
    pub offset: u64,
    /// Most matching lines to return; `None`: the daemon's `max_lines`.
    pub limit: Option<u64>,
    /// Reach a job of another session too (`--any-session`).
    pub any_session: bool,
}

/// A TCP or UDP port a process of a job has open for others: a TCP socket that
/// listens, or a bound UDP socket.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ListenPort {
    /// `tcp` or `udp`.
    pub protocol: String,
    pub port: u16,
    /// The address it is bound to (`0.0.0.0`, `::`, `127.0.0.1`).
    pub address: String,
    pub pid: u32,
    /// The port on the host's loopback where bashd publishes it, for a job in a
    /// session network (`--net off`, `allow-list`; issue 43): the same port when it was
    /// free on the host, else another.
    pub published: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KillRequest {
    pub caller: Caller,
    pub job: JobRef,
    /// A signal name (`TERM`, `SIGINT`) or number; `None` is SIGTERM.
    pub signal: Option<String>,
    /// Time between the signal and SIGKILL; `None` takes `timeouts.kill_grace_ms`.
    pub grace_ms: Option<u64>,
    /// Reach a job of another session too (`--any-session`).
    pub any_session: bool,
}

/// One line of `bashc jobs` (DESIGN §9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    pub job: JobId,
    pub session: String,
    pub pid: Option<u32>,
    pub state: JobState,
    pub exit_code: Option<i32>,
    /// The signal that ended it (`signaled`, `killed`), as in its result: `bashc jobs`
    /// shows 128+N, the status `kill` and `wait` report.
    pub signal: Option<i32>,
    /// `foreground` or `background`: background once the job outlives its request.
    pub mode: String,
    /// The command, cut to its first 4 KiB.
    pub command: String,
    pub description: Option<String>,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub duration_ms: u64,
    /// What the job used and how it ended, once it has.
    pub record: Option<ExitRecord>,
    /// The ports its processes listen on, read from `/proc` when the list was asked for.
    pub ports: Vec<ListenPort>,
    /// It runs with a stdin pipe or a terminal and is blocked reading it, printing
    /// nothing (as the kernel says; for a pipe job in a poll, after a quiet, idle
    /// while): it waits for `send`.
    pub waiting_for_input: bool,
    /// The sandbox it runs in, when it is confined. With the network off, its ports
    /// answer only inside it.
    pub sandbox: Option<crate::SandboxInForce>,
}

/// One line of `bashc sessions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub session: String,
    /// The live processes that own the session.
    pub owners: Vec<u32>,
    /// `active` while an owner lives, `lingering` after, `closing` while its jobs stop.
    pub state: String,
    /// Seconds until a lingering session ends.
    pub linger_left_secs: Option<u64>,
    pub running_jobs: u32,
    pub finished_jobs: u32,
    pub dir: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionClosed {
    pub session: String,
    /// Jobs that were still running and were killed.
    pub killed_jobs: u32,
}

/// Asks for lines `offset ..` of one stream of a job's full output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputRequest {
    pub job: JobRef,
    pub stream: StreamName,
    /// 1-based, as file viewers count lines.
    pub offset: u64,
    /// Most lines to return; `None` takes the daemon's `max_lines`.
    pub limit: Option<u64>,
    /// On whose behalf: a job of another session is refused unless `any_session`.
    pub caller: Caller,
    pub any_session: bool,
    /// Most bytes of text in the page; `None` takes the job's `max_bytes` (the
    /// `bash` result limit). At most [`crate::limits::MAX_PAGE_BYTES`].
    pub max_bytes: Option<u64>,
    /// `offset` counts back from the stream's last line: 1 is the last line.
    pub from_end: bool,
}

/// Lines of a job's full output (`bashc output`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputPage {
    pub job: JobId,
    pub stream: StreamName,
    /// The line `text` starts with, 1-based.
    pub offset: u64,
    /// Lines in `text`.
    pub lines: u64,
    pub text: String,
    /// Where the next page starts, when there are more lines to read now.
    pub next_offset: Option<u64>,
    /// Every line the stream produced so far.
    pub total_lines: u64,
    pub total_bytes: u64,
    /// False while the job runs: more lines may come.
    pub complete: bool,
    /// The spill file read, when the stream has one.
    pub full_output: Option<String>,
    /// Why fewer lines than asked came back, when it is not the end of the stream:
    /// a line cut at the page size, or a spill file that stopped at its cap.
    pub notices: Vec<Notice>,
}

/// What `bashc policy check` asks: would `exec` run this command in this directory?
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyCheck {
    pub command: String,
    /// The directory to judge the command in, as `exec` judges it in its workdir:
    /// relative paths, `.`, `..`, `$PWD` are read from here. `None`: no directory is
    /// known, and such targets are judged as unknown. A bridge resolves an empty or
    /// relative one against its login directory, as it does an `Exec`'s.
    pub workdir: Option<String>,
}

/// The answer of `bashc policy check`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyVerdict {
    pub allowed: bool,
    /// The id of the rule that denies, when one does.
    pub rule: Option<String>,
    /// `permission denied: <rule>: <why and what to do instead>`.
    pub message: Option<String>,
}

/// What `bashc status` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusInfo {
    pub daemon_pid: u32,
    pub daemon_version: String,
    pub protocol: u32,
    pub uptime_ms: u64,
    pub runtime_dir: String,
    pub running_jobs: u32,
    /// How jobs are held: `cgroup <path>`, `subreaper` or `scan` (DESIGN §4.2).
    pub containment: String,
    /// Why jobs get no cgroup, when containment is `subreaper`: which cgroup or
    /// controller is missing, and how to give bashd one (issue 45).
    pub containment_why: Option<String>,
    /// Descriptors the daemon holds (two pipes per running job, and its sockets), and
    /// its limit.
    pub open_files: u64,
    pub open_files_limit: Option<u64>,
    /// The sandbox in force by default and what the system offers it.
    pub sandbox: Option<crate::SandboxStatus>,
    /// The network mode by default, the allow-list in force and bashd's proxy (issue
    /// 43); `None` from a daemon older than it. Boxed: it would double the size of
    /// every `Response`.
    #[serde(default)]
    pub network: Option<Box<crate::NetworkStatus>>,
    /// The hosts the person's own tools fetch from, each with where bashd read it
    /// (issue 44): what the allow-list is built from beside `[sandbox] allow_hosts`.
    /// Empty from an older daemon, and until the daemon's first reading ends.
    #[serde(default)]
    pub tool_sources: Vec<crate::ToolSource>,
}

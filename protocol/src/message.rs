//! Every message that crosses the socket, and the JSON shapes `bashc --json` prints
//! (DESIGN §7, §9). Field names here are the JSON keys, so renaming one is a breaking
//! change of both the protocol and the CLI.

use std::fmt;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::notice::{ErrorHint, JobId, Notice};
use crate::proc_stat::process_start_time;

/// Echoed by every response, so one connection can carry many requests at once.
pub type RequestId = u64;

/// A frame sent by a client.
// A frame lives only between the codec and its handler; boxing the request would cost
// an allocation per frame for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ClientFrame {
    /// Must be the first frame of a connection.
    Hello(Hello),
    Request(RequestId, Request),
}

/// A frame sent by the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ServerFrame {
    Welcome(Welcome),
    Response(RequestId, Response),
    /// The connection is unusable (bad frame, wrong version); the daemon closes it
    /// right after sending this.
    Fatal(ErrorReply),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    /// Free text naming the client, for the daemon's log (`bashc 0.1.0`).
    pub client: String,
    pub pid: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    pub protocol: u32,
    pub daemon_version: String,
    pub daemon_pid: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    Exec(ExecParams),
    /// A page of a job's full output.
    Output(OutputRequest),
    /// Would this command be allowed? Nothing runs.
    CheckPolicy(String),
    Status,
    /// The jobs of one session, or of all.
    Jobs(JobsRequest),
    /// A job's output since the caller's session last checked it, and its state.
    Check(JobRequest),
    /// The job's result once it ends, or its state when the wait times out.
    Wait(WaitRequest),
    /// Stops a job (the signal, a grace period, then SIGKILL) and answers its result.
    Kill(KillRequest),
    /// Every session the daemon knows.
    Sessions,
    /// Kills a session's jobs and removes its directory now.
    CloseSession(String),
    /// A job's output as it comes (`bashc follow`): `Output` events (and a `Notice`
    /// for lines a slow reader missed), then `Finished` with its result once it ends.
    Follow(FollowRequest),
    /// Writes to the stdin pipe of a job started with `stdin: pipe`; answers `Sent`.
    Send(SendRequest),
    /// The lines of a job's full output that match a regex, with context; answers `Page`.
    Grep(GrepRequest),
    /// Gives up request `RequestId` of this connection, which gets no further
    /// response; this request gets none at all. A foreground job the cancelled `Exec`
    /// waited for is killed (`ended_by = cancel`), or, for an MCP call whose daemon
    /// says `[mcp] on_cancel = "background"`, moved to the background. A cancelled
    /// `Wait` only stops waiting. A request already answered is not affected.
    Cancel(RequestId),
    /// The current screen of a terminal job (`exec --pty`); answers `Screen`.
    Screen(JobRequest),
    /// Gives a terminal job a new size (the program gets SIGWINCH); answers `Screen`.
    Resize(ResizeRequest),
    /// Stops the daemon (`bashc stop`) as SIGTERM does: it answers `Stopping` first,
    /// then stops accepting, stops every job of every session and exits. Refused to a
    /// client inside a sandboxed job, which may not end the jobs of others.
    Shutdown,
    /// Waits on several jobs at once, until the first (or every) one ends or meets its
    /// conditions; answers `Waited`.
    WaitMany(WaitManyRequest),
    /// Every session's jobs, with their CPU, memory, prompt and last line (`bashc
    /// top`); answers `Top`.
    Top(crate::top::TopRequest),
    /// Every session's jobs and then their changes, until cancelled (`bashc top`'s
    /// view); answers `Watch`, many times, and never a last response.
    Watch(crate::top::WatchRequest),
}

impl Request {
    /// The session a request acts for, for every request that names one (a wait on
    /// several jobs: its first wait's); `None` for the others (`bashc top` looks at
    /// every session and acts for none).
    pub fn session(&self) -> Option<&str> {
        match self {
            Request::Exec(params) => Some(&params.session),
            Request::Jobs(JobsRequest { caller, .. })
            | Request::Check(JobRequest { caller, .. })
            | Request::Wait(WaitRequest { caller, .. })
            | Request::Kill(KillRequest { caller, .. })
            | Request::Follow(FollowRequest { caller, .. })
            | Request::Send(SendRequest { caller, .. })
            | Request::Grep(GrepRequest { caller, .. })
            | Request::Output(OutputRequest { caller, .. })
            | Request::Screen(JobRequest { caller, .. })
            | Request::Resize(ResizeRequest { caller, .. }) => Some(&caller.session),
            Request::WaitMany(many) => many.waits.first().map(|wait| wait.caller.session.as_str()),
            Request::Top(_)
            | Request::Watch(_)
            | Request::CheckPolicy(_)
            | Request::Status
            | Request::Sessions
            | Request::CloseSession(_)
            | Request::Cancel(_)
            | Request::Shutdown => None,
        }
    }

    /// The owner a request names for the session it acts in, for every request that
    /// names one: the one list both ends use. The daemon fills in the connecting
    /// process for an owner left out; a client to another host clears it, since a pid
    /// of this machine means nothing there (the bridge owns the session).
    ///
    /// A wait on several jobs names an owner per job: [`Request::owners_mut`] has those
    /// too.
    pub fn owner_mut(&mut self) -> Option<&mut Option<Owner>> {
        match self {
            Request::Exec(params) => Some(&mut params.owner),
            Request::Jobs(JobsRequest { caller, .. })
            | Request::Check(JobRequest { caller, .. })
            | Request::Wait(WaitRequest { caller, .. })
            | Request::Kill(KillRequest { caller, .. })
            | Request::Follow(FollowRequest { caller, .. })
            | Request::Send(SendRequest { caller, .. })
            | Request::Grep(GrepRequest { caller, .. })
            | Request::Output(OutputRequest { caller, .. })
            | Request::Screen(JobRequest { caller, .. })
            | Request::Resize(ResizeRequest { caller, .. }) => Some(&mut caller.owner),
            Request::CheckPolicy(_)
            | Request::Status
            | Request::Sessions
            | Request::CloseSession(_)
            | Request::Cancel(_)
            | Request::Shutdown
            | Request::WaitMany(_)
            | Request::Top(_)
            | Request::Watch(_) => None,
        }
    }

    /// Every owner a request names: its one ([`Request::owner_mut`]), or a wait on
    /// several jobs' one per job. What a front end clears for another host, and what
    /// the daemon fills in, is this list.
    pub fn owners_mut(&mut self) -> Vec<&mut Option<Owner>> {
        match self {
            Request::WaitMany(many) => many
                .waits
                .iter_mut()
                .map(|wait| &mut wait.caller.owner)
                .collect(),
            request => request.owner_mut().into_iter().collect(),
        }
    }
}

/// The responses to one request, in order. `Exec` gets `Started`, any number of
/// `Output`, then exactly one `Finished`; every other request gets one response.
/// `Error` ends a request of any kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Response {
    Started(Started),
    Output(OutputChunk),
    Finished(Box<ExecResult>),
    Page(OutputPage),
    Policy(PolicyVerdict),
    Status(StatusInfo),
    Jobs(Vec<JobInfo>),
    Sessions(Vec<SessionInfo>),
    SessionClosed(SessionClosed),
    Error(ErrorReply),
    /// Something to say about a request still in flight: lines of a stream a slow
    /// reader missed (`Notice::OutputMissed`).
    Notice(Notice),
    Sent(SendReply),
    Screen(ScreenInfo),
    /// The answer to `Shutdown`, sent before the daemon acts on it.
    Stopping(Stopping),
    /// What the caller's session's jobs did since its last call (issue 32): sent at
    /// most once per request, just before its final response, and then forgotten.
    Inbox(crate::inbox::Inbox),
    Waited(WaitedMany),
    Top(Vec<crate::top::TopJob>),
    /// One answer of `Watch`; there are many, and none is the last.
    Watch(crate::top::WatchUpdate),
}

impl Response {
    /// Whether this is the last response of its request: every response is, but
    /// `Started`, `Output` and `Notice`, which come ahead of an `Exec`'s or a
    /// `Follow`'s `Finished`, `Inbox`, which comes ahead of any final response, and
    /// `Watch`, of which none is the last.
    pub fn is_final(&self) -> bool {
        !matches!(
            self,
            Response::Started(_)
                | Response::Output(_)
                | Response::Notice(_)
                | Response::Inbox(_)
                | Response::Watch(_)
        )
    }
}

/// On whose behalf a request acts: the session it names, re-adopted if it lingers, and
/// the process to watch as that session's owner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Caller {
    pub session: String,
    /// `None`: the process that opened the connection (the pid of its `Hello`).
    pub owner: Option<Owner>,
}

/// A process that owns a session: while one lives, the session's jobs are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: u32,
    /// Field 22 of `/proc/<pid>/stat` as the client read it; the daemon compares it so
    /// that a pid reused since then is not taken for the owner.
    pub start_time: Option<u64>,
}

impl Owner {
    /// `pid`, with its start time read from `/proc` (`None` if it is gone).
    pub fn of(pid: u32) -> Owner {
        Owner {
            pid,
            start_time: process_start_time(pid),
        }
    }
}

/// Names a job: by id (`j12`) or by the pid of its leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobRef {
    Id(String),
    Pid(u32),
}

impl fmt::Display for JobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobRef::Id(id) => f.write_str(id),
            JobRef::Pid(pid) => write!(f, "the job with pid {pid}"),
        }
    }
}

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

/// A terminal job's size, in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtySize {
    pub cols: u16,
    pub rows: u16,
}

impl PtySize {
    /// `COLSxROWS`, as `--size 120x40` spells it.
    pub fn parse(text: &str) -> Result<PtySize, String> {
        let bad = || format!("the terminal size {text:?} is not COLSxROWS, for example 120x40");
        let (cols, rows) = text.split_once(['x', 'X']).ok_or_else(bad)?;
        let cols: u16 = cols.trim().parse().map_err(|_| bad())?;
        let rows: u16 = rows.trim().parse().map_err(|_| bad())?;
        if !(2..=1000).contains(&cols) || !(2..=1000).contains(&rows) {
            return Err(format!(
                "the terminal size {cols}x{rows} is out of range: columns and rows go from 2 to 1000"
            ));
        }
        Ok(PtySize { cols, rows })
    }
}

impl Default for PtySize {
    fn default() -> PtySize {
        PtySize {
            cols: 120,
            rows: 40,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResizeRequest {
    pub caller: Caller,
    pub job: JobRef,
    pub size: PtySize,
    /// Reach a job of another session too (`--any-session`).
    pub any_session: bool,
}

/// The screen of a terminal job, as its emulator in the daemon keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenInfo {
    pub job: JobId,
    pub cols: u16,
    pub rows: u16,
    /// 0-based.
    pub cursor_row: u16,
    pub cursor_col: u16,
    /// One string per row, trailing blanks trimmed.
    pub lines: Vec<String>,
    /// The program switched to the alternate screen (a full-screen program).
    pub alternate: bool,
    pub title: String,
    pub waiting_for_input: bool,
    pub state: JobState,
    /// The program moved the cursor itself (cursor addressing), or used the alternate
    /// screen: its output reads right only as a screen.
    pub drawn: bool,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Default,
    Slow,
    Background,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTimeout {
    Kill,
    Background,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    #[default]
    Tail,
    Head,
    HeadTail,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamName {
    Stdout,
    Stderr,
}

/// What a client asks to run (DESIGN §8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecParams {
    pub command: String,
    pub session: String,
    /// The session's owner; `None`: the process that opened the connection.
    pub owner: Option<Owner>,
    pub mode: Mode,
    /// Overrides the mode's timeout; outside 1 s .. 24 h the daemon refuses it.
    pub timeout_secs: Option<u64>,
    /// `None` takes the daemon's configured default.
    pub on_timeout: Option<OnTimeout>,
    /// Absolute; the client sends its own cwd when the user names none.
    pub workdir: String,
    pub description: Option<String>,
    /// The client's environment as raw bytes, since variables need not be UTF-8.
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    pub merge_stderr: bool,
    pub output: OutputOptions,
    /// Send `Output` events while the job runs.
    pub stream: bool,
    /// What the job may use; `None` takes the daemon's `[limits]` default.
    pub limits: JobLimits,
    /// The job's stdin: /dev/null, or a pipe that `send` writes to.
    pub stdin: StdinMode,
    /// The sandbox profile asked for; `None` takes `[sandbox] default`. A profile
    /// looser than `[sandbox] floor` is refused.
    pub sandbox: Option<crate::SandboxProfile>,
    /// The network asked for; `None` takes `[sandbox] network`.
    pub network: Option<crate::Network>,
    /// The request is an MCP tool call (`bashc mcp`): the daemon's `[mcp]` settings
    /// apply. It is answered by `max_call_secs` at the latest (a job still running
    /// then moves to the background), and a `Cancel` of it does `on_cancel`.
    pub mcp_call: bool,
    /// Run the job on a pseudo-terminal of this size (`exec --pty`): its stdin, stdout
    /// and stderr are that terminal, and `send` writes to it.
    pub pty: Option<PtySize>,
    /// Tell the session's inbox about lines matching this regex (`exec --notify`):
    /// the first match and a count, while the job runs in the background.
    pub notify: Option<String>,
    /// Tell the session's inbox when the job has printed nothing for this long while
    /// it runs in the background (`exec --notify-idle`).
    pub notify_idle_secs: Option<u64>,
}

/// What a job reads on its stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StdinMode {
    /// `/dev/null`: every read ends at once.
    #[default]
    Null,
    /// A pipe the daemon holds open; `send` writes to it, `send --eof` closes it.
    Pipe,
}

/// Per-job resource limits (DESIGN §4.6). Each is enforced by the job's cgroup where
/// the controller is there, else by the nearest rlimit, else the job is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JobLimits {
    /// Memory, in bytes.
    pub memory_bytes: Option<u64>,
    /// CPU, in thousandths of a core (1500 is one and a half cores).
    pub cpu_millicores: Option<u32>,
    /// Processes alive at once.
    pub pids: Option<u32>,
}

/// How a stream is shown in a result. `None` takes the daemon's limit.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct OutputOptions {
    pub max_lines: Option<u32>,
    pub max_bytes: Option<u32>,
    /// `None`: `head` when only `head` is given, `head_tail` when both are, else `tail`.
    pub direction: Option<Direction>,
    /// Show at most this many lines from the start; narrows `max_lines`.
    pub head: Option<u32>,
    /// Show at most this many lines from the end; narrows `max_lines`.
    pub tail: Option<u32>,
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Started {
    pub job: JobId,
    pub session: String,
    pub pid: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputChunk {
    pub stream: StreamName,
    /// Sanitized text: whole lines (a line longer than 64 KiB comes in pieces). One
    /// length and the bytes on the wire, not a sequence of numbers (`Bytes` serializes
    /// as bytes; bincode would encode each byte of a `Vec` alone). Shared, not copied,
    /// between the readers of one job and the buffer it was read into.
    pub bytes: Bytes,
    /// The line of the stream `bytes` starts on, counting from 1.
    pub line: u64,
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Running,
    /// Exited on its own; `exit_code` is set.
    Exited,
    /// Ended by a signal nobody in bashd sent; `signal` is set.
    Signaled,
    /// Killed because it passed its timeout.
    TimedOut,
    /// Killed on request, or because nobody was left to wait for it.
    Killed,
    /// Refused by the command policy before anything ran.
    Denied,
    /// Could not be started at all.
    Failed,
    /// Its daemon died while it ran; the next daemon ended what was left of it and
    /// keeps what it wrote to its spill files.
    Lost,
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JobState::Running => "running",
            JobState::Exited => "exited",
            JobState::Signaled => "signaled",
            JobState::TimedOut => "timed_out",
            JobState::Killed => "killed",
            JobState::Denied => "denied",
            JobState::Failed => "failed",
            JobState::Lost => "lost",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TruncatedBy {
    Lines,
    Bytes,
}

/// One stream of a result, as shown to the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    pub text: String,
    pub truncated: bool,
    pub truncated_by: Option<TruncatedBy>,
    pub direction: Direction,
    /// Every line the stream produced, shown or not; a last line without a newline counts.
    pub total_lines: u64,
    pub total_bytes: u64,
    pub shown_lines: u64,
    pub shown_bytes: u64,
    /// One line alone was longer than `max_bytes`: it is shown cut on a character
    /// boundary.
    pub partial: bool,
    /// The file holding the whole stream, when it was written to one.
    pub full_output: Option<String>,
}

impl StreamResult {
    /// A stream that produced nothing.
    pub fn empty() -> StreamResult {
        StreamResult {
            text: String::new(),
            truncated: false,
            truncated_by: None,
            direction: Direction::Tail,
            total_lines: 0,
            total_bytes: 0,
            shown_lines: 0,
            shown_bytes: 0,
            partial: false,
            full_output: None,
        }
    }
}

/// The result of `exec`, `wait`, `kill` and `check` (DESIGN §9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecResult {
    pub job: JobId,
    pub session: String,
    pub pid: Option<u32>,
    pub state: JobState,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_ms: u64,
    pub backgrounded: bool,
    pub description: Option<String>,
    pub workdir: String,
    pub stdout: StreamResult,
    /// `None` when stderr was merged into stdout.
    pub stderr: Option<StreamResult>,
    /// What the result says beyond its figures, in the order a person reads it.
    pub notices: Vec<Notice>,
    /// What the job used and how it ended, once it has (DESIGN §4.5).
    pub record: Option<ExitRecord>,
    /// The sandbox the job ran in; `None` when it ran unconfined (profile `off`,
    /// network on).
    pub sandbox: Option<crate::SandboxInForce>,
    /// A terminal job's screen, when its program drew on it (the alternate screen or
    /// cursor addressing): the front ends show it in place of the stdout tail, which
    /// reads right only as a screen.
    pub screen: Option<ScreenInfo>,
}

/// What an ended job used, and what ended it. A figure the daemon's containment cannot
/// measure is `None`, never a guess.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitRecord {
    /// CPU time of every process of the job that ended.
    pub cpu_user_ms: Option<u64>,
    pub cpu_system_ms: Option<u64>,
    /// The job cgroup's `memory.peak` where there is one, else the largest resident
    /// set of any one of the job's processes.
    pub peak_rss_bytes: Option<u64>,
    /// How many processes the job started, where that is counted.
    pub processes: Option<u64>,
    pub ended_by: EndedBy,
    /// With `ended_by = kill`: who asked.
    pub killed_by: Option<Killer>,
    /// With `ended_by = limit`: which limit, at what value (`memory 2147483648`).
    pub limit: Option<String>,
}

/// What ended a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    /// Its processes exited by themselves.
    Exit,
    /// A signal nobody in bashd sent ended its shell.
    Signal,
    /// It passed its timeout and was killed.
    Timeout,
    /// A `kill` request, or the daemon's shutdown; `killed_by` says which.
    Kill,
    /// The request that waited for it went away (its client disconnected or
    /// cancelled) while it ran in the foreground.
    Cancel,
    /// Every owner of its session exited while it ran in the foreground.
    OwnerGone,
    /// Its session was closed, or its linger time ran out.
    SessionClosed,
    /// The daemon died while it ran; a later daemon ended what was left.
    DaemonRestart,
    /// The kernel killed it for passing one of its limits; `limit` says which.
    Limit,
    /// The kernel killed a process of it for want of memory, with no limit of its own.
    Oom,
    /// It never ran: refused by the policy, or it could not be started.
    NotRun,
}

/// Who killed a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Killer {
    /// A client acting in the job's own session: its agent.
    Agent,
    /// A client acting in another session (`bashc kill --session`, an operator).
    Client,
    /// The daemon, on its way down (SIGTERM).
    Shutdown,
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
    /// Descriptors the daemon holds (two pipes per running job, and its sockets), and
    /// its limit.
    pub open_files: u64,
    pub open_files_limit: Option<u64>,
    /// The sandbox in force by default and what the system offers it.
    pub sandbox: Option<crate::SandboxStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request cannot be carried out as asked (bad workdir, bad argument).
    InvalidRequest,
    /// A job or session named in the request does not exist.
    NotFound,
    /// The frame could not be read: too large, truncated or not a message.
    BadFrame,
    /// Client and daemon speak different protocol versions.
    VersionMismatch,
    /// The daemon is stopping and takes no more work.
    ShuttingDown,
    /// Something failed inside the daemon; the message says what.
    Internal,
    /// The daemon is at one of its limits (connections, open files) and takes no more
    /// of that until some is given back; the message names the limit and the fix.
    Busy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorReply {
    pub kind: ErrorKind,
    /// What went wrong, naming the thing; the front end adds the hint in its own words.
    pub message: String,
    pub hint: Option<ErrorHint>,
}

impl ErrorReply {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ErrorReply {
            kind,
            message: message.into(),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: ErrorHint) -> Self {
        self.hint = Some(hint);
        self
    }
}

impl fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Whether `id` is a valid session id: `[A-Za-z0-9._@-]{1,64}` (DESIGN §3; `@` for the
/// `<session>@<hostname>` that another host's bashc names by default, DESIGN §14).
pub fn is_valid_session_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'@'))
        && id != "."
        && id != ".."
}

impl ExecParams {
    /// A foreground command in mode `default` with the daemon's output limits and an
    /// empty environment; set the other fields as needed.
    pub fn new(
        command: impl Into<String>,
        session: impl Into<String>,
        workdir: impl Into<String>,
    ) -> ExecParams {
        ExecParams {
            command: command.into(),
            session: session.into(),
            owner: None,
            mode: Mode::Default,
            timeout_secs: None,
            on_timeout: None,
            workdir: workdir.into(),
            description: None,
            env: Vec::new(),
            merge_stderr: false,
            output: OutputOptions::default(),
            stream: false,
            limits: JobLimits::default(),
            stdin: StdinMode::Null,
            sandbox: None,
            network: None,
            mcp_call: false,
            pty: None,
            notify: None,
            notify_idle_secs: None,
        }
    }
}

#[cfg(test)]
mod owner_tests {
    use super::*;

    #[test]
    fn an_owner_carries_its_start_time() {
        let me = Owner::of(std::process::id());
        assert!(me.start_time.is_some_and(|t| t > 0));
        assert_eq!(Owner::of(u32::MAX).start_time, None);
    }
}

//! Every message that crosses the socket, and the JSON shapes `bashc --json` prints
//! (DESIGN §7, §9). Field names here are the JSON keys, so renaming one is a breaking
//! change of both the protocol and the CLI.
//!
//! This file has the frames, the `Request` and `Response` enums, who a request acts for
//! (`Caller`, `Owner`) and errors; `exec.rs` has what `exec` asks and a job's result,
//! `requests.rs` every other request's payload and answer.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::exec::{ExecParams, ExecResult, OutputChunk, ScreenInfo, Started};
use crate::notice::{ErrorHint, JobId, Notice};
use crate::proc_stat::process_start_time;
use crate::requests::{
    FollowRequest, GrepRequest, JobInfo, JobRequest, JobsRequest, KillRequest, OutputPage,
    OutputRequest, PolicyCheck, PolicyVerdict, ResizeRequest, SendReply, SendRequest,
    SessionClosed, SessionInfo, StatusInfo, Stopping, WaitManyRequest, WaitRequest, WaitedMany,
};

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
    /// Would this command be allowed in this directory? Nothing runs.
    CheckPolicy(PolicyCheck),
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
    /// The person's answers (`bashc allow`): list the asks and grants, answer an ask,
    /// revoke a grant, grant a host; answers `Allow`. Refused through a job's channel
    /// and to a client bashd can tell runs inside one of its jobs.
    Allow(crate::asks::AllowRequest),
}

/// The one list of which requests act for a caller, and where their callers are:
/// [`Request::callers`] and [`Request::callers_mut`] expand it for a shared and for a
/// mutable borrow (match ergonomics give each binding the borrow's kind), so the two
/// cannot drift apart. Its match has no `_` arm: a new request does not compile until
/// it is placed here.
macro_rules! callers_of {
    ($request:expr) => {{
        let (one, many) = match $request {
            Request::Exec(ExecParams { session, owner, .. }) => {
                (Some(CallerFields { session, owner }), None)
            }
            Request::Jobs(JobsRequest { caller, .. })
            | Request::Check(JobRequest { caller, .. })
            | Request::Wait(WaitRequest { caller, .. })
            | Request::Kill(KillRequest { caller, .. })
            | Request::Follow(FollowRequest { caller, .. })
            | Request::Send(SendRequest { caller, .. })
            | Request::Grep(GrepRequest { caller, .. })
            | Request::Output(OutputRequest { caller, .. })
            | Request::Screen(JobRequest { caller, .. })
            | Request::Resize(ResizeRequest { caller, .. }) => {
                let Caller { session, owner } = caller;
                (Some(CallerFields { session, owner }), None)
            }
            // A wait on several jobs acts for the caller of each of its waits.
            Request::WaitMany(WaitManyRequest { waits, .. }) => (None, Some(waits)),
            // `bashc top` names a session of its own, but looks at every session and
            // acts for none: it takes no inbox and owns nothing.
            Request::Top(_)
            | Request::Watch(_)
            | Request::CheckPolicy(_)
            | Request::Status
            | Request::Sessions
            | Request::CloseSession(_)
            | Request::Cancel(_)
            | Request::Allow(_)
            | Request::Shutdown => (None, None),
        };
        one.into_iter().chain(many.into_iter().flatten().map(
            |WaitRequest {
                 caller: Caller { session, owner },
                 ..
             }| CallerFields { session, owner },
        ))
    }};
}

/// On whose behalf a request acts, borrowed from it: its session and the owner it
/// names for that session. `S` and `O` are shared or mutable references, as the
/// request was borrowed ([`CallerRef`], [`CallerMut`]).
#[derive(Debug, PartialEq)]
pub struct CallerFields<S, O> {
    pub session: S,
    /// `None`: the process that opened the connection; the daemon fills it in.
    pub owner: O,
}

/// A caller read from a request ([`Request::callers`]).
pub type CallerRef<'a> = CallerFields<&'a String, &'a Option<Owner>>;

/// A caller of a request to change ([`Request::callers_mut`]).
pub type CallerMut<'a> = CallerFields<&'a mut String, &'a mut Option<Owner>>;

impl Request {
    /// Every caller a request acts for, in order: one for a request that names a
    /// session, one per wait for a wait on several jobs, none for the others (`bashc
    /// top` looks at every session and acts for none).
    pub fn callers(&self) -> impl Iterator<Item = CallerRef<'_>> {
        callers_of!(self)
    }

    /// [`Request::callers`], to change: the one list both ends use. The daemon fills
    /// in the connecting process for an owner left out; a client to another host clears
    /// the owners, since a pid of this machine means nothing there (the bridge owns the
    /// session).
    pub fn callers_mut(&mut self) -> impl Iterator<Item = CallerMut<'_>> {
        callers_of!(self)
    }

    /// The session a request acts for: its first caller's (a wait on several jobs: its
    /// first wait's); `None` for a request that acts for none.
    pub fn session(&self) -> Option<&str> {
        self.callers().next().map(|caller| caller.session.as_str())
    }

    /// Every owner a request names, of each of its callers: what a front end clears for
    /// another host, and what the daemon fills in.
    pub fn owners_mut(&mut self) -> Vec<&mut Option<Owner>> {
        self.callers_mut().map(|caller| caller.owner).collect()
    }
}

/// The responses to one request, in order. `Exec` gets `Recorded`, `Started`, any
/// number of `Output`, then exactly one `Finished`; every other request gets one
/// response. `Error` ends a request of any kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Response {
    /// An `Exec`'s job id, sent once the job is in the daemon's journal and before its
    /// process is spawned: a client whose daemon dies from then on can name the job.
    Recorded(JobId),
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
    Allow(crate::asks::AllowReply),
}

impl Response {
    /// Whether this is the last response of its request: every response is, but
    /// `Recorded`, `Started`, `Output` and `Notice`, which come ahead of an `Exec`'s or a
    /// `Follow`'s `Finished`, `Inbox`, which comes ahead of any final response, and
    /// `Watch`, of which none is the last.
    pub fn is_final(&self) -> bool {
        !matches!(
            self,
            Response::Recorded(_)
                | Response::Started(_)
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

#[cfg(test)]
#[path = "message_tests.rs"]
mod callers_tests;

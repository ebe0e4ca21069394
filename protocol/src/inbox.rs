//! A session's inbox (issue 32): what happened to its jobs since its last call, as data.
//! The daemon sends it once, as `Response::Inbox` just before the final response of a
//! request of that session, and forgets it; each front end words it in its own terms
//! (`since your last call: ...`).

use serde::{Deserialize, Serialize};

use crate::exec::{EndedBy, JobState, StreamName};
use crate::notice::JobId;

/// What a session's jobs did since its last call, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Inbox {
    pub events: Vec<InboxEvent>,
    /// Older events that did not fit the session's bound and were dropped.
    pub folded: u64,
}

impl Inbox {
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.folded == 0
    }

    /// Adds `other`'s events after this one's (two answers read before one result).
    pub fn extend(&mut self, other: Inbox) {
        self.events.extend(other.events);
        self.folded += other.folded;
    }
}

/// One thing that happened to a job of the session while nobody of it was asking.
/// Every variant names its job and its command (cut), so a line can say which.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InboxEvent {
    /// A background job ended.
    Ended {
        job: JobId,
        command: String,
        state: JobState,
        exit_code: Option<i32>,
        signal: Option<i32>,
        duration_ms: u64,
        ended_by: Option<EndedBy>,
        /// With `ended_by = limit`: which limit (`memory 2147483648`).
        limit: Option<String>,
        /// It failed with output that reads like its sandbox refused something.
        sandbox_denied: bool,
        /// Lines of its output the session has not checked yet.
        new_lines: u64,
    },
    /// A background job blocks reading its stdin pipe or terminal, printing nothing.
    WaitingForInput {
        job: JobId,
        command: String,
        /// The line it printed last and did not end: what it asks.
        prompt: Option<String>,
    },
    /// Lines of a job matched the pattern it was started with (`exec --notify`).
    Matched {
        job: JobId,
        command: String,
        pattern: String,
        stream: StreamName,
        /// The first matching line since the last call, and its number.
        line: u64,
        text: String,
        /// Matching lines since the last call, the first included.
        count: u64,
    },
    /// A job printed nothing for its `--notify-idle` time.
    Idle {
        job: JobId,
        command: String,
        idle_secs: u64,
    },
    /// An ask whose call was answered `pending` was answered since (issue 44): refused,
    /// expired, or granted (`job`: the job it started, whose end is told as any
    /// background job's).
    AskAnswered {
        ask: crate::asks::AskId,
        command: String,
        state: crate::asks::AskState,
        job: Option<JobId>,
    },
    /// bashd's proxy refused a connection of the session's `allow-list` network
    /// (issue 43), told of the job that most likely made it: the session's newest
    /// running `allow-list` job (the proxy sees the session, not the process).
    NetworkRefused {
        job: JobId,
        command: String,
        host: String,
        port: u16,
        /// `network: refused HOST:PORT, not on the allow-list` (or why a listed
        /// name was: it resolves to an address of the host itself).
        message: String,
        /// Refusals of the same host and port since the last call, the first included.
        count: u64,
    },
}

impl InboxEvent {
    /// The job it is about; `None` for an answered ask that started none.
    pub fn job(&self) -> Option<JobId> {
        match self {
            InboxEvent::Ended { job, .. }
            | InboxEvent::WaitingForInput { job, .. }
            | InboxEvent::Matched { job, .. }
            | InboxEvent::Idle { job, .. }
            | InboxEvent::NetworkRefused { job, .. } => Some(*job),
            InboxEvent::AskAnswered { job, .. } => *job,
        }
    }
}

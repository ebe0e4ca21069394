//! `bashc top` (issue 32): every session's jobs with what a person watching them wants
//! beside `jobs`' columns: the CPU and memory a running job's processes use, what a job
//! waiting for input asks, and its last line. `Top` answers once (`top --once`, and the
//! view's look at the rows it shows); `Watch` answers with the whole table and then
//! with its changes, for as long as the view is open.

use serde::{Deserialize, Serialize};

use crate::message::Caller;
use crate::notice::JobId;
use crate::requests::JobInfo;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopRequest {
    /// Whose request it is; a session of its own (`top-<pid>`), so that the view takes
    /// no agent's inbox.
    pub caller: Caller,
    /// Only these jobs (the rows a view shows, for their CPU, memory and ports); empty:
    /// every job.
    pub jobs: Vec<JobId>,
}

/// `Watch`: every session's jobs, then their changes, until the request is cancelled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchRequest {
    /// As `TopRequest::caller`: a session of the view's own.
    pub caller: Caller,
}

/// One answer of `Watch`: the first is `Table`, every later one `Changed`.
///
/// Rows carry no CPU, memory or ports (`cpu_ms`, `rss_bytes` are `None`, `ports` is
/// empty): those are read from /proc, which costs per process, so a view asks `Top`
/// for the rows it shows. A job's row is sent again when it starts, changes state,
/// ends, starts or stops waiting for input, or prints a new last line, at most a few
/// times a second however much it prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WatchUpdate {
    /// Every job, as `Top` lists them.
    Table(Vec<TopJob>),
    /// Jobs new or changed since the last update, whole, and jobs no longer kept.
    Changed { rows: Vec<TopJob>, gone: Vec<JobId> },
}

/// One job of `bashc top`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopJob {
    pub info: JobInfo,
    /// CPU time of its live processes, user and system, read from /proc now.
    pub cpu_ms: Option<u64>,
    /// Resident memory of its live processes, summed.
    pub rss_bytes: Option<u64>,
    /// What it asks, when it waits for input: the line it left unended.
    pub prompt: Option<String>,
    /// The last line it printed on either stream (sanitized, as `output` has it), cut
    /// to 200 bytes: the last line of the stream that printed last.
    pub last_line: Option<String>,
}

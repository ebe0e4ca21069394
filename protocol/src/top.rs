//! `bashc top` (issue 32): every session's jobs with what a person watching them wants
//! beside `jobs`' columns: the CPU and memory a running job's processes use, what a job
//! waiting for input asks, and its last line.

use serde::{Deserialize, Serialize};

use crate::message::{Caller, JobInfo};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopRequest {
    /// Whose request it is; a session of its own (`top-<pid>`), so that the view takes
    /// no agent's inbox.
    pub caller: Caller,
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
    /// The last line it printed (sanitized, as `output` has it), cut to 200 bytes.
    pub last_line: Option<String>,
}

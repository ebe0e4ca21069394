//! What a result has to say beyond its figures, as data: each front end words it in its
//! own terms (the CLI as `bashc ...` commands, `bashc mcp` as tool calls), so the daemon
//! holds no sentence meant for a person and nothing is rewritten by pattern.
//!
//! Every variant has named fields, even when it has none, so that `--json` shows each
//! notice the same way: an object with one key, the kind, e.g.
//! `{"timed_out": {"after_secs": 30}}`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::exec::StreamName;

/// A job's id as bashd gives it out: `j12`. Ids increase and are never reused within a
/// runtime directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "j{}", self.0)
    }
}

impl FromStr for JobId {
    type Err = String;

    /// `j` and a number: what [`JobId`]'s `Display` writes.
    fn from_str(text: &str) -> Result<JobId, String> {
        text.strip_prefix('j')
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse().ok())
            .map(JobId)
            .ok_or_else(|| format!("{text:?} is not a job id (j12)"))
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.to_string()
    }
}

impl TryFrom<String> for JobId {
    type Error = String;

    fn try_from(text: String) -> Result<JobId, String> {
        text.parse()
    }
}

/// One thing a result says beyond its figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Notice {
    /// The request was answered while the job runs on in the background.
    Background {
        job: JobId,
        pid: u32,
        why: BackgroundWhy,
        /// The timeout it passed, when `why` is `timeout`.
        timeout_secs: Option<u64>,
    },
    /// The job passed its timeout and was killed with every process it started.
    TimedOut { after_secs: u64 },
    /// The daemon stopped, and killed the job on its way.
    Shutdown {},
    /// Every owner of the session exited while the job ran in the foreground.
    OwnersGone { session: String },
    /// The session was closed, or its linger time ran out.
    SessionEnded { session: String },
    /// The shell exited leaving processes, and `sessions.on_straggler = "kill"` ended
    /// them.
    StragglersKilled {},
    /// The stream's spill file could not be written in full.
    SpillIncomplete {
        stream: StreamName,
        path: String,
        error: String,
    },
    /// The stream's spill file stopped at `limits.max_spill_bytes`.
    SpillCapped {
        stream: StreamName,
        path: String,
        cap_bytes: u64,
        written_bytes: u64,
        total_bytes: u64,
    },
    /// A check showed the last new lines; `lines` lines from `offset` on were not shown.
    LinesNotShown {
        job: JobId,
        stream: StreamName,
        offset: u64,
        lines: u64,
    },
    /// A check found nothing new.
    NoNewOutput { job: JobId, ended: bool },
    /// A wait gave up before the job ended.
    StillRunning { job: JobId, waited_ms: u64 },
    /// A kill found the job ended already; nothing was signalled.
    AlreadyEnded { job: JobId },
    /// The policy refused the command before anything ran. `message` is the rule's
    /// own, starting `permission denied:`.
    Denied { rule: String, message: String },
    /// The job could not be started.
    NotStarted { error: String },
    /// A page stopped inside a line longer than the page size.
    LineCut {
        line: u64,
        page_bytes: u64,
        /// The spill file holding the whole line, when there is one.
        path: Option<String>,
    },
    /// A page reached the end of a spill file that stopped at its cap; the stream's
    /// later lines were not kept.
    PageCapped { last_line: u64, lost_lines: u64 },
    /// A live reader (`--stream`, `follow`) fell behind and `lines` lines of `stream`
    /// from `offset` on were not sent to it; `path` has them when the stream spilled.
    OutputMissed {
        job: JobId,
        stream: StreamName,
        offset: u64,
        lines: u64,
        path: Option<String>,
    },
    /// A `wait` returned because one of its conditions was met; the job may run on.
    ConditionMet { job: JobId, met: WaitMet },
    /// A process of the job is blocked reading its stdin pipe or terminal and the job
    /// has printed nothing for `idle_secs`: it most likely waits for input. `prompt`
    /// is the line it printed last and did not end (the cursor's line on a terminal),
    /// when there is one: what it asks.
    WaitingForInput {
        job: JobId,
        idle_secs: u64,
        prompt: Option<String>,
    },
    /// The daemon died while the job ran (state `lost`). What it wrote to its spill
    /// files was kept; `in_memory` names the streams that had no spill file, whose
    /// output (if any) was held in the dead daemon's memory only and is gone.
    Lost {
        job: JobId,
        in_memory: Vec<StreamName>,
    },
    /// The job failed with output that reads like something its sandbox refused: a
    /// file access (`Permission denied`, `Read-only file system`) or, with the network
    /// off, a connection.
    SandboxDenied {
        profile: crate::SandboxProfile,
        network: crate::Network,
        denied: crate::SandboxDenial,
    },
    /// The job asked to write its workspace (`workspace-write`) and ran `read-only`,
    /// writing only its `$TMPDIR`: its workdir is outside every writable root of its
    /// session (issue 42). The person decides the roots, never the request: the
    /// directory the client runs in (where the agent started `bashc mcp`) and the
    /// config's `[sandbox] writable`, resolved.
    OutsideRoots { workdir: String, roots: Vec<String> },
    /// The job asked to write its workspace and ran `read-only`, writing only its
    /// `$TMPDIR`: its session has no writable root. `directory` is the directory its
    /// client runs in, which is `/`, the home directory or a parent of it, and so
    /// never a root; `None` when bashd could not read it.
    NoWritableRoot { directory: Option<String> },
    /// A page stopped before the lines asked for, at its byte limit; `next_offset`
    /// says where the next page starts.
    PageFull { max_bytes: u64 },
    /// A job on pipes failed with output that reads like its program wanted a terminal
    /// (`not a terminal`, `no tty present`, `Inappropriate ioctl for device`, `/dev/tty`
    /// that cannot be opened): it may run as a terminal job.
    TerminalWanted {},
    /// No cgroup holds the job's memory here (no cgroup v2 memory controller delegated
    /// to bashd), so its memory limit of `bytes` was set as the nearest rlimit, the
    /// address space (`RLIMIT_AS`): it counts address space reserved, not memory used,
    /// and runtimes that reserve much up front (V8, the JVM, Go) may fail to start
    /// under it (issue 45).
    MemoryAsAddressSpace { bytes: u64 },
    /// The request is looser than its session's floor and waits for a person's
    /// answer (issue 44): ask `ask`, for `kind`, pending for at most `expires_secs`.
    Asked {
        ask: crate::asks::AskId,
        kind: crate::asks::AskKind,
        /// The command that asks, cut: what an elicitation shows the person.
        command: String,
        expires_secs: u64,
    },
}

/// Which condition of a `wait` was met.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitMet {
    /// A new line matched `until`: the line, its number, and the lines around it as
    /// they had arrived.
    Line {
        stream: StreamName,
        line: u64,
        text: String,
        before: Vec<String>,
        after: Vec<String>,
    },
    /// A process of the job listens on this TCP port; for a job in a session network
    /// (issue 43), `published` is the port on the host's loopback where bashd
    /// publishes it.
    Port {
        port: u16,
        pid: u32,
        published: Option<u16>,
    },
    /// No output for this long.
    Idle { idle_ms: u64 },
}

/// Why a job was moved to the background.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackgroundWhy {
    /// Mode `background`.
    Requested,
    /// It passed its timeout with `on_timeout = background`.
    Timeout,
    /// Its shell exited while processes it started still run.
    Stragglers,
    /// The MCP call that started it reached `[mcp] max_call_secs`; the job's own
    /// timeout still holds.
    CallBudget,
    /// The MCP call that started it was cancelled and `[mcp] on_cancel =
    /// "background"`.
    Cancelled,
}

/// What a client can do about an error, when there is something to point at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorHint {
    /// Job ids are the ones `exec` and `jobs` give out.
    JobIds,
    /// A well-formed job id that this daemon has not given out: `jobs` lists the
    /// session's jobs.
    NoSuchJob,
    /// A job named by pid is named by its shell's pid, as `jobs` shows it.
    JobPids,
    /// `sessions` lists the sessions the daemon has.
    Sessions,
    /// The job belongs to `session`, not the caller's: name that session, or ask
    /// for any session's job, to act on it.
    OtherSession { session: String },
    /// `argument` of the request is what the message speaks of: the front end names
    /// it as its user wrote it (`--max-lines`, `max_lines`).
    BadArgument { argument: Argument },
    /// The job can start here less confined: with the sandbox off (`sandbox_off`)
    /// and the network on (`network_on`), where bashd's config allows.
    LooserSandbox { sandbox_off: bool, network_on: bool },
    /// The request turned the network on where the config keeps it off: without
    /// that, the job starts.
    NetworkOn,
    /// A job started from a sandboxed job asked for a looser sandbox: asking for
    /// none gives it the same as the job it came from.
    SameSandbox,
    /// The limit `argument` needs a cgroup controller bashd lacks: the job starts
    /// without that limit.
    ControllerMissing { argument: Argument },
    /// The job has no terminal: one started on a pty has one.
    NeedsPty,
    /// The job's stdin is /dev/null: one started with a stdin pipe (or a pty) takes
    /// input.
    NeedsStdinPipe,
    /// A send with end-of-file closed the job's stdin.
    StdinClosed,
    /// The job has ended, and its output is kept to page through.
    OutputKept { job: JobId },
    /// The request waits on ask `ask`, which a person answers (`state`: pending when
    /// the call's budget ran out first).
    Ask {
        ask: crate::asks::AskId,
        state: crate::asks::AskState,
    },
}

/// A request's argument, as data: the CLI spells it as a flag (`--timeout`), `bashc
/// mcp` as a tool argument (`timeout_secs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Argument {
    /// `timeout_secs` of an exec.
    Timeout,
    /// `output.max_lines`.
    MaxLines,
    /// `output.max_bytes`.
    MaxBytes,
    /// `workdir`.
    Workdir,
    /// `limits.cpu_millicores`.
    Cpu,
    /// `limits.pids`.
    Pids,
    /// `notify`: the pattern a later call is told about.
    Notify,
    /// `notify_idle_secs`.
    NotifyIdle,
    /// `sandbox`: the profile asked for.
    Sandbox,
    /// `network`.
    Network,
    /// `until`: the pattern a wait waits for.
    Until,
    /// `grep`: the pattern an output search looks for.
    Grep,
    /// `output.head`.
    Head,
    /// `output.tail`.
    Tail,
}

/// A value as `--json` prints it: its own keys, then `notice`, its notices worded by
/// the front end, for readers of the key results had before notices were data.
#[derive(Debug, Serialize)]
pub struct Worded<'a, T: Serialize> {
    #[serde(flatten)]
    pub value: &'a T,
    pub notice: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_read_what_they_write() {
        assert_eq!("j12".parse::<JobId>(), Ok(JobId(12)));
        assert_eq!(JobId(7).to_string(), "j7");
        for bad in [
            "",
            "j",
            "12",
            "j-1",
            "j1x",
            "J1",
            "j99999999999999999999999",
        ] {
            assert!(bad.parse::<JobId>().is_err(), "{bad}");
        }
    }
}

//! What `exec` asks (`ExecParams`: mode, timeout, limits, stdin, how a stream is shown)
//! and what a job ends with (`ExecResult`, its streams, its state and `ExitRecord`), the
//! result `wait`, `kill` and `check` answer too (DESIGN §8, §9). Field names here are the
//! JSON keys that `bashc --json` prints.

use std::fmt;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::message::Owner;
use crate::notice::{JobId, Notice};

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
    #[serde(with = "env_bytes")]
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
    /// Write the `.git` of the session's writable roots (a commit), which
    /// `workspace-write` keeps read-only: an ask (issue 44) unless a person granted it
    /// for the session. What git runs code from (config, hooks) stays read-only.
    pub git_write: bool,
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
            git_write: false,
        }
    }
}

/// The environment's names and values each as one length and their bytes, the way
/// `serde_bytes` writes them. On bincode's wire that is byte for byte what a sequence
/// of `u8` is (a length, then each byte as itself), so peers of either build agree; it
/// only spares encoding and decoding some 2 KB of environment one byte at a time on
/// every `exec`.
mod env_bytes {
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_bytes::{ByteBuf, Bytes};

    /// Each variable's name and value.
    type Env = Vec<(Vec<u8>, Vec<u8>)>;

    pub fn serialize<S: Serializer>(env: &[(Vec<u8>, Vec<u8>)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(
            env.iter()
                .map(|(name, value)| (Bytes::new(name), Bytes::new(value))),
        )
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Env, D::Error> {
        let pairs = Vec::<(ByteBuf, ByteBuf)>::deserialize(d)?;
        Ok(pairs
            .into_iter()
            .map(|(name, value)| (name.into_vec(), value.into_vec()))
            .collect())
    }

    #[cfg(test)]
    mod tests {
        use serde::{Deserialize, Serialize};

        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct AsBytes(#[serde(with = "super")] Vec<(Vec<u8>, Vec<u8>)>);

        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct AsNumbers(Vec<(Vec<u8>, Vec<u8>)>);

        fn env() -> Vec<(Vec<u8>, Vec<u8>)> {
            let long = vec![b'x'; 300];
            vec![
                (b"PATH".to_vec(), b"/usr/bin:/bin".to_vec()),
                (b"EMPTY".to_vec(), Vec::new()),
                (b"NOT_UTF8".to_vec(), vec![0xff, 0xfe, 0x80, 0]),
                (long.clone(), long),
            ]
        }

        /// A daemon and a client of builds before this encoding read each other.
        #[test]
        fn the_environment_is_the_same_bytes_on_the_wire_as_a_sequence_of_numbers() {
            let config = bincode::config::standard();
            let bytes = bincode::serde::encode_to_vec(AsBytes(env()), config).unwrap();
            let numbers = bincode::serde::encode_to_vec(AsNumbers(env()), config).unwrap();
            assert_eq!(bytes, numbers);
            let (back, _): (AsBytes, usize) =
                bincode::serde::decode_from_slice(&numbers, config).unwrap();
            assert_eq!(back.0, env());
            let (old, _): (AsNumbers, usize) =
                bincode::serde::decode_from_slice(&bytes, config).unwrap();
            assert_eq!(old.0, env());
        }

        /// `--json` and anything else that prints the request see numbers, as before.
        #[test]
        fn the_environment_reads_back_from_json_as_numbers() {
            let json = serde_json::to_string(&AsBytes(env())).unwrap();
            assert_eq!(json, serde_json::to_string(&AsNumbers(env())).unwrap());
            let back: AsBytes = serde_json::from_str(&json).unwrap();
            assert_eq!(back.0, env());
        }
    }
}

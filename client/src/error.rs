//! What can go wrong between a front end and a daemon, whatever carries the connection:
//! one enum, so that each event (a daemon that died under a job, a link to another
//! host that closed) has one error and one message, which front ends word their own
//! way from its data.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use bashd_protocol::runtime::{self, RuntimeDirError};
use bashd_protocol::{ErrorReply, FrameError, JobId};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to bashd at {path}: {source}")]
    Connect { path: PathBuf, source: io::Error },
    #[error(
        "bashd is not running at {path} and BASHD_NO_AUTOSTART=1 forbids starting it (start it with `bashd &`, or `systemctl --user start bashd`)"
    )]
    NotRunning { path: PathBuf },
    #[error("cannot start bashd: {0}")]
    Autostart(String),
    /// The directory of the socket is not the caller's own (another user's, a symlink,
    /// open to others): whoever made it may listen there, so nothing was sent.
    #[error("{0}; bashc sent nothing there")]
    UnsafeDir(RuntimeDirError),
    /// What listens on the socket runs as another user: it is not this user's bashd
    /// (or relay), so nothing was sent it.
    #[error(
        "the process listening on {path} runs as uid {uid}{}, not as you (uid {me}), so it is not your bashd; bashc sent it nothing (set BASHD_RUNTIME_DIR to a directory of your own, or have {path} removed)",
        runtime::user_name(*.uid).map(|name| format!(" ({name})")).unwrap_or_default()
    )]
    NotYours { path: PathBuf, uid: u32, me: u32 },
    #[error("bashd refused the connection: {0}")]
    Refused(ErrorReply),
    #[error("{0}")]
    Daemon(ErrorReply),
    #[error("bashd did not answer the handshake within {0:?}")]
    HandshakeTimeout(Duration),
    #[error("bashd closed the connection before answering")]
    Disconnected,
    #[error("bad frame from bashd: {0}")]
    Frame(#[from] FrameError),
    #[error("bashd sent {0} where another answer was expected")]
    Unexpected(&'static str),
    /// The caller gave up the request ([`crate::Watch::cancellation`]); the daemon was
    /// told, and answers it no more.
    #[error("the call was cancelled")]
    Cancelled,
    /// The daemon went away after it started `job` and before its result: it died
    /// (a clean stop answers first). Its next start keeps the job's output, as lost.
    #[error("bashd stopped while {job} ran; its output so far is kept for when bashd is back")]
    DiedWhileRunning { job: JobId },
    /// The daemon went away while it was waiting for or stopping `job` (its words
    /// as the caller gave them): the job's output is kept as for `DiedWhileRunning`.
    #[error("bashd stopped while {doing} {job}; its output so far is kept for when bashd is back")]
    DiedDuring { doing: &'static str, job: String },
    #[error("host {host}: {message}")]
    Remote { host: String, message: String },
    /// Inside a sandboxed job: its channel to bashd cannot be used (closed, not
    /// inherited, the job ended); the daemon's socket would refuse such a process.
    #[error("{0}")]
    Channel(String),
    /// The connection to another host closed under a call: its ssh, or this machine's
    /// relay to it, ended. What ran in the foreground there (`job`) stopped with it;
    /// background jobs run on, and the next call reconnects.
    #[error("host {host}: the connection closed{} (its ssh, or the relay to it, ended); a foreground job there stops with its connection, background jobs run on, and the next call reconnects", .job.map(|job| format!(" while {job} ran there")).unwrap_or_default())]
    Lost { host: String, job: Option<JobId> },
    /// The connection to another host closed under `job` while the relay to it still
    /// answers: the link is up, so bashd there stopped (or its bridge did). The job's
    /// output is kept there as for `DiedWhileRunning`.
    #[error(
        "host {host}: bashd on {host} stopped while {job} ran; its output so far is kept there for when it is back (the next call starts it): bashc --host {host} output {job}"
    )]
    RemoteDied { host: String, job: JobId },
}

impl ClientError {
    /// Whether the error means nothing is listening, so starting a daemon could help.
    pub fn is_not_running(&self) -> bool {
        matches!(self, ClientError::Connect { source, .. }
            if matches!(source.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused))
    }
}

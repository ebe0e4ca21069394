//! The write end of a job's stdin pipe (`bashc exec --stdin pipe`), owned by one small
//! task per job; `send` requests reach it through [`StdinHandle`]. A write to a job
//! that does not read blocks only this task, and only for [`SEND_WAIT`]; the job's end
//! drops the handle, which ends the task and closes the pipe.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

/// How long a `send` waits for a job that does not read its stdin to make room.
pub const SEND_WAIT: Duration = Duration::from_secs(5);

/// What one `send` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub written: u64,
    /// The pipe is closed now: by this `eof`, or earlier.
    pub closed: bool,
}

/// Why a `send` wrote less than asked.
#[derive(Debug)]
pub enum SendError {
    /// The job read nothing for [`SEND_WAIT`] and the pipe is full.
    Full {
        written: u64,
    },
    /// No process of the job holds the pipe open any more.
    Gone {
        written: u64,
    },
    /// The pipe was closed by an earlier `eof`.
    Closed,
    Io(io::Error),
}

struct Write {
    bytes: Vec<u8>,
    eof: bool,
    reply: oneshot::Sender<Result<Sent, SendError>>,
}

/// Reaches a job's stdin task; dropping every clone closes the pipe.
#[derive(Debug, Clone)]
pub struct StdinHandle {
    writes: mpsc::Sender<Write>,
    /// The pipe's inode, as `/proc/PID/fd/0` of the job's processes names it.
    pub inode: u64,
}

impl StdinHandle {
    /// Starts the task that owns `fd`, the write end of a job's stdin pipe, or the
    /// master of a terminal job's terminal.
    pub fn start(fd: OwnedFd) -> io::Result<StdinHandle> {
        let inode = rustix::fs::fstat(fd.as_fd())?.st_ino;
        let pipe = if crate::jobs::job::pty::is_terminal(&fd) {
            Sink::Terminal(crate::jobs::job::pty::Master::new(fd)?)
        } else {
            Sink::Pipe(pipe::Sender::from_owned_fd(fd)?)
        };
        let (writes, rx) = mpsc::channel(16);
        tokio::spawn(run(pipe, rx));
        Ok(StdinHandle { writes, inode })
    }

    /// Writes `bytes`, then closes the pipe if `eof`.
    pub async fn send(&self, bytes: Vec<u8>, eof: bool) -> Result<Sent, SendError> {
        let (reply, answer) = oneshot::channel();
        self.writes
            .send(Write { bytes, eof, reply })
            .await
            .map_err(|_| SendError::Closed)?;
        answer.await.map_err(|_| SendError::Closed)?
    }
}

/// What a job's input is written to.
enum Sink {
    Pipe(pipe::Sender),
    /// A terminal job's master: what is written is typed on its terminal.
    Terminal(crate::jobs::job::pty::Master),
}

impl Sink {
    async fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Pipe(pipe) => pipe.write(bytes).await,
            Sink::Terminal(master) => master.write(bytes).await,
        }
    }
}

async fn run(pipe: Sink, mut writes: mpsc::Receiver<Write>) {
    let mut pipe = Some(pipe);
    while let Some(write) = writes.recv().await {
        let Some(open) = pipe.as_mut() else {
            let _ = write.reply.send(Err(SendError::Closed));
            continue;
        };
        let mut written = 0;
        let mut outcome = Ok(());
        while written < write.bytes.len() {
            match tokio::time::timeout(SEND_WAIT, open.write(&write.bytes[written..])).await {
                Ok(Ok(n)) => written += n,
                Ok(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => {
                    outcome = Err(SendError::Gone {
                        written: written as u64,
                    });
                    break;
                }
                Ok(Err(e)) => {
                    outcome = Err(SendError::Io(e));
                    break;
                }
                Err(_) => {
                    outcome = Err(SendError::Full {
                        written: written as u64,
                    });
                    break;
                }
            }
        }
        if write.eof {
            pipe = None;
        }
        let reply = outcome.map(|()| Sent {
            written: written as u64,
            closed: pipe.is_none(),
        });
        let _ = write.reply.send(reply);
    }
}

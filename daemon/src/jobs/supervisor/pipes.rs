//! What a supervisor waits on besides its phase: the job's pipes (read into their
//! captures), the leader's exit from the reaper, and the actor's control messages.

use std::future::Future;
use std::os::fd::{AsFd, OwnedFd};

use bashd_protocol::BackgroundWhy;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

use super::{Control, Stop, Streams};
use crate::jobs::process::LeaderExit;
use crate::output::StreamCapture;

/// A pipe read starts with this buffer and grows it while reads fill it, so a quiet
/// background job holds little memory and a loud one reads in large chunks.
const FIRST_READ_CHUNK: usize = 8 * 1024;
const READ_CHUNK: usize = 256 * 1024;
/// A pipe that a read found full is enlarged to this, once: fewer wake-ups for a fast
/// writer. Pipes start at the kernel's default, since pipe memory is a per-user quota
/// that a thousand quiet jobs must not spend.
const BIG_PIPE_BYTES: usize = 1024 * 1024;

/// The job's shell, the leader.
#[derive(Debug)]
pub(super) enum Shell {
    /// Not reaped yet: the reaper sends its status here.
    Running(oneshot::Receiver<LeaderExit>),
    /// Reaped; `None` when the reaper went away first (the daemon is going down).
    Exited(Option<LeaderExit>),
}

impl Shell {
    pub(super) fn status(&self) -> Option<LeaderExit> {
        match self {
            Shell::Running(_) => None,
            Shell::Exited(status) => *status,
        }
    }
}

/// What woke a supervisor up.
pub(super) enum Wake<T> {
    /// Output was read, a snapshot answered, or the control channel closed.
    Busy,
    LeaderExited,
    Stop(Stop),
    /// The phase's own event.
    Phase(T),
}

pub(super) struct Inputs {
    pub(super) out: PipeReader,
    pub(super) err: PipeReader,
    /// stderr goes to the stdout pipe; `err` has no pipe and stays empty.
    pub(super) merged: bool,
    /// `None` once the actor has dropped its end.
    pub(super) control: Option<mpsc::UnboundedReceiver<Control>>,
    pub(super) shell: Shell,
    /// A `Control::Detach` that came, for the phase that can answer the request.
    pub(super) detach_asked: Option<BackgroundWhy>,
}

impl Inputs {
    /// Waits for one thing to happen: output, the leader's exit, a control message, or
    /// `phase`. Cancelling any branch loses nothing: a pipe read that did not complete
    /// consumed no bytes, the exit status and control messages stay in their channels,
    /// and `phase` is re-created or pinned by the caller.
    pub(super) async fn wake<T>(&mut self, phase: impl Future<Output = T>) -> Wake<T> {
        enum Got<T> {
            Exit(Result<LeaderExit, oneshot::error::RecvError>),
            Read,
            Control(Option<Control>),
            Phase(T),
        }
        let got = tokio::select! {
            status = recv_exit(&mut self.shell) => Got::Exit(status),
            () = self.out.read_some(), if !self.out.is_done() => Got::Read,
            () = self.err.read_some(), if !self.err.is_done() => Got::Read,
            msg = recv_control(&mut self.control) => Got::Control(msg),
            value = phase => Got::Phase(value),
        };
        match got {
            Got::Exit(status) => {
                // An error means the reaper is gone: the daemon is going down.
                self.shell = Shell::Exited(status.ok());
                Wake::LeaderExited
            }
            Got::Read => Wake::Busy,
            Got::Control(Some(Control::Stop(stop))) => Wake::Stop(stop),
            Got::Control(Some(Control::Snapshot(reply))) => {
                let _ = reply.send(self.streams());
                Wake::Busy
            }
            Got::Control(Some(Control::Detach(why))) => {
                self.detach_asked = Some(why);
                Wake::Busy
            }
            Got::Control(None) => {
                self.control = None;
                Wake::Busy
            }
            Got::Phase(value) => Wake::Phase(value),
        }
    }

    pub(super) fn pipes_done(&self) -> bool {
        self.out.is_done() && self.err.is_done()
    }

    pub(super) fn streams(&self) -> Streams {
        Streams {
            stdout: self.out.capture.source(),
            stderr: (!self.merged).then(|| self.err.capture.source()),
        }
    }
}

async fn recv_exit(shell: &mut Shell) -> Result<LeaderExit, oneshot::error::RecvError> {
    match shell {
        Shell::Running(exit) => exit.await,
        Shell::Exited(_) => std::future::pending().await,
    }
}

async fn recv_control(control: &mut Option<mpsc::UnboundedReceiver<Control>>) -> Option<Control> {
    match control {
        Some(control) => control.recv().await,
        None => std::future::pending().await,
    }
}

/// One pipe of a job and what was read from it.
pub(super) struct PipeReader {
    pipe: Option<pipe::Receiver>,
    buf: Vec<u8>,
    pub(super) capture: StreamCapture,
}

impl PipeReader {
    pub(super) fn new(fd: Option<OwnedFd>, capture: StreamCapture) -> PipeReader {
        let pipe = fd.and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok());
        PipeReader {
            pipe,
            buf: Vec::new(),
            capture,
        }
    }

    fn is_done(&self) -> bool {
        self.pipe.is_none()
    }

    /// Reads one chunk into the capture; EOF or an error closes the pipe. Cancel-safe.
    async fn read_some(&mut self) {
        let Some(pipe) = self.pipe.as_mut() else {
            return;
        };
        if self.buf.is_empty() {
            self.buf = vec![0; FIRST_READ_CHUNK];
        }
        match pipe.read(&mut self.buf).await {
            Ok(0) | Err(_) => {
                self.pipe = None;
                self.buf = Vec::new();
            }
            Ok(n) => {
                self.capture.push(&self.buf[..n]);
                if n == self.buf.len() && n < READ_CHUNK {
                    if n >= FIRST_READ_CHUNK * 8 {
                        // Above /proc/sys/fs/pipe-max-size or the user's pipe quota
                        // this fails, and the pipe keeps its size.
                        let _ = rustix::pipe::fcntl_setpipe_size(pipe.as_fd(), BIG_PIPE_BYTES);
                    }
                    self.buf = vec![0; n * 2];
                }
            }
        }
    }
}

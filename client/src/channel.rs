//! A client inside a sandboxed job reaches the daemon through the job's channel
//! (issue 30; `bashd_protocol::channel`): the descriptor the job was started with,
//! named by `$BASHD_CHANNEL`. It makes a pair of stream sockets, sends one end over
//! the channel and speaks the protocol over the other; the daemon knows the
//! connection as the job's by where it came from. No path and no `socket(AF_UNIX)`
//! are needed, so this works where the sandbox forbids both, and the daemon's socket,
//! which refuses a sandboxed process, is never tried.

use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use bashd_protocol::channel::{CHANNEL_ENV, CHANNEL_HELLO};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketType};

use crate::client::Client;
use crate::error::ClientError;

/// How long a send waits for room in a channel the daemon is slow to read.
const SEND_WAIT: Duration = Duration::from_secs(10);
/// How long a send waits for room before it tries again.
const POLL_STEP: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 100_000_000,
};

/// The channel this process's environment names, when it names one: this process
/// runs inside a sandboxed job. A value that names no descriptor is an error, never a
/// reason to try the daemon's socket instead.
pub(crate) fn inherited() -> Option<Result<RawFd, ClientError>> {
    let value = std::env::var_os(CHANNEL_ENV).filter(|v| !v.is_empty())?;
    let fd = value
        .to_str()
        .and_then(|text| text.parse::<RawFd>().ok())
        .filter(|fd| *fd >= 0);
    Some(fd.ok_or_else(|| {
        ClientError::Channel(format!(
            "${CHANNEL_ENV} is {value:?}, which names no descriptor; inside a sandboxed bashd job it is the number of the job's channel to bashd, as bashd set it"
        ))
    }))
}

/// A connection to the daemon through the job's channel `fd`; the handshake goes with
/// the first request ([`Client::start`]).
pub(crate) async fn connect(fd: RawFd) -> Result<Client, ClientError> {
    let ours = tokio::task::spawn_blocking(move || open(fd))
        .await
        .map_err(|e| ClientError::Channel(format!("cannot send over the job's channel: {e}")))??;
    Client::from_std(ours)
        .map_err(|e| ClientError::Channel(format!("cannot use a socket pair: {e}")))
}

/// A new connection through the channel `fd`: this end of a pair whose other end the
/// daemon was sent (waiting at most `SEND_WAIT` for room in the channel).
pub(crate) fn open(fd: RawFd) -> Result<std::os::unix::net::UnixStream, ClientError> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()
        .map_err(|e| ClientError::Channel(format!("cannot make a socket pair: {e}")))?;
    send(fd, theirs.as_fd())?;
    Ok(ours)
}

/// Sends `end` over the channel `fd`: one message, which no other process of the job
/// can interleave with.
fn send(fd: RawFd, end: BorrowedFd<'_>) -> Result<(), ClientError> {
    // SAFETY: only borrowed for this call; a descriptor that is not open fails below.
    let channel = unsafe { BorrowedFd::borrow_raw(fd) };
    let closed = |why: String| {
        ClientError::Channel(format!(
            "this process runs inside a sandboxed bashd job, whose channel to bashd (descriptor {fd}, ${CHANNEL_ENV}) {why}; a process of a sandboxed job reaches bashd only through it (a program that closes the descriptors it passes on must keep this one: Python's subprocess with pass_fds=({fd},))"
        ))
    };
    match rustix::net::sockopt::socket_type(channel) {
        Ok(SocketType::SEQPACKET) => {}
        Ok(_) => return Err(closed("is another socket here".to_owned())),
        Err(e) => return Err(closed(format!("is not open here ({e})"))),
    }
    let deadline = Instant::now() + SEND_WAIT;
    loop {
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut ancillary = SendAncillaryBuffer::new(&mut space);
        let fds = [end];
        if !ancillary.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err(ClientError::Channel(
                "no room for a descriptor in a message".to_owned(),
            ));
        }
        // DONTWAIT: the descriptor's blocking mode is shared with every process of
        // the job, so this does not rely on it either way.
        let sent = rustix::net::sendmsg(
            channel,
            &[IoSlice::new(CHANNEL_HELLO)],
            &mut ancillary,
            SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
        );
        match sent {
            Ok(_) => return Ok(()),
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) if Instant::now() < deadline => {
                let mut ready = [PollFd::from_borrowed_fd(channel, PollFlags::OUT)];
                let _ = rustix::event::poll(&mut ready, Some(&POLL_STEP));
            }
            Err(Errno::AGAIN) => {
                return Err(ClientError::Channel(format!(
                    "bashd did not take a connection from this job's channel within {} s; try again",
                    SEND_WAIT.as_secs()
                )));
            }
            Err(Errno::PIPE | Errno::CONNREFUSED | Errno::CONNRESET) => {
                return Err(closed(
                    "is closed: bashd has ended the job it was made for, or bashd stopped"
                        .to_owned(),
                ));
            }
            Err(e) => return Err(closed(format!("cannot be written ({e})"))),
        }
    }
}

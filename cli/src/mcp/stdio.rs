//! The MCP server's stdin and stdout, read and written on the runtime's own thread
//! when they are pipes or sockets (what an agent starts a server with), else through
//! tokio's `stdin()` and `stdout()`.
//!
//! tokio's `stdin()` and `stdout()` do each read and write on a thread of the blocking
//! pool: a request came in on that thread, which woke the runtime, and an answer went
//! out by waking another, three thread switches on every call's path (issue 31; 2
//! cores, under load, each may wait for a CPU). Here the runtime's epoll watches the
//! descriptor itself, and a read or a write is made only once `poll` says it returns
//! at once: the descriptor keeps its blocking mode, so nothing changes for another
//! process that shares it (O_NONBLOCK is a property of the open file, which the agent
//! or a wrapper script may hold too).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::FileType;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// The most written at once: a pipe takes up to `PIPE_BUF` bytes in one write without
/// blocking once `poll` says it is writable.
const WRITE_CHUNK: usize = 4096;

/// The server's stdin.
pub fn stdin() -> Box<dyn AsyncRead + Send + Unpin> {
    match Polled::of(rustix::stdio::stdin(), Interest::READABLE) {
        Some(polled) => Box::new(polled),
        None => Box::new(tokio::io::stdin()),
    }
}

/// The server's stdout.
pub fn stdout() -> Box<dyn AsyncWrite + Send + Unpin> {
    match Polled::of(rustix::stdio::stdout(), Interest::WRITABLE) {
        Some(polled) => Box::new(polled),
        None => Box::new(tokio::io::stdout()),
    }
}

/// A pipe or socket watched by the runtime's epoll, in blocking mode.
struct Polled {
    fd: AsyncFd<OwnedFd>,
}

impl Polled {
    /// A copy of `fd` watched for `interest`; `None` for what epoll cannot watch
    /// (a file, /dev/null) and what a blocking write could stall on once `poll` said
    /// it could go (a terminal).
    fn of(fd: BorrowedFd<'_>, interest: Interest) -> Option<Polled> {
        let kind = FileType::from_raw_mode(rustix::fs::fstat(fd).ok()?.st_mode);
        if !matches!(kind, FileType::Fifo | FileType::Socket) {
            return None;
        }
        let copy = rustix::io::fcntl_dupfd_cloexec(fd, 0).ok()?;
        // SAFETY: `copy` is an open descriptor that this AsyncFd owns from here on.
        let fd = unsafe { AsyncFd::register_with_interest(copy, interest) }.ok()?;
        Some(Polled { fd })
    }

    /// Whether a read (`IN`) or a write (`OUT`) of the descriptor returns at once:
    /// it has data, room, an end or an error. Epoll's word is not enough: it is
    /// edge-triggered and shared, so its readiness may be stale.
    fn ready_now(&self, flags: PollFlags) -> io::Result<bool> {
        let mut fds = [PollFd::new(self.fd.get_ref(), flags)];
        loop {
            match rustix::event::poll(&mut fds, Some(&Timespec::default())) {
                Ok(n) => return Ok(n > 0),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl AsyncRead for Polled {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if buf.remaining() == 0 {
            // A read into no room would return 0, which says end of input.
            return Poll::Ready(Ok(()));
        }
        loop {
            let mut guard = ready!(self.fd.poll_read_ready(cx))?;
            if !self.ready_now(PollFlags::IN)? {
                guard.clear_ready();
                continue;
            }
            let unfilled = buf.initialize_unfilled();
            match rustix::io::read(self.fd.get_ref().as_fd(), unfilled) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Poll::Ready(Err(e.into())),
            }
        }
    }
}

impl AsyncWrite for Polled {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.fd.poll_write_ready(cx))?;
            if !self.ready_now(PollFlags::OUT)? {
                guard.clear_ready();
                continue;
            }
            let chunk = &buf[..buf.len().min(WRITE_CHUNK)];
            match rustix::io::write(self.fd.get_ref().as_fd(), chunk) {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Poll::Ready(Err(e.into())),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Nothing is held back: each write is the system call's.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

//! The proxy's copy loop: one direction of a connection, from a socket to a socket.
//! It starts with a small buffer, and when a read fills it (a bulk transfer) it moves
//! the rest with `splice(2)` through a pipe of its own while a shared budget lasts:
//! the bytes go from one socket's buffers to the other's through the kernel, never
//! copied into bashd. Thousands of idle or chatty connections cost 8 KiB a direction
//! and no pipe; a download gets a pipe (two descriptors, at most `PIPE` bytes of
//! kernel pages in flight), up to `LARGE_BUFFERS` at once. Should a pipe not be made
//! (out of descriptors), the direction copies through a 64 KiB buffer instead.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A direction's buffer to start with.
pub(super) const SMALL: usize = 8 * 1024;
/// A bulk direction's buffer, when no pipe could be made.
pub(super) const LARGE: usize = 64 * 1024;
/// Bulk directions at once, all connections together: each holds a pipe (or a
/// `LARGE` buffer), so at most 64 pipes and 16 MiB of their pages, or 4 MiB of buffers.
pub(super) const LARGE_BUFFERS: usize = 64;
/// A bulk direction's pipe: 256 KiB moves in four times fewer calls than the default
/// 64 KiB. A pipe that cannot be made this large (the user's pipe pages are
/// `fs.pipe-user-pages-soft`) keeps its size and works the same, in smaller steps.
const PIPE: usize = 256 * 1024;

/// What bulk directions share: their budget, and how they move bytes.
pub(super) struct Bulk {
    /// Places for a pipe or a large buffer, `LARGE_BUFFERS` in all.
    budget: Arc<Semaphore>,
    /// Through a pipe with `splice(2)`; else through a `LARGE` buffer.
    splice: bool,
    /// Directions moved through a pipe, for `ProxyCounts`.
    pub(super) spliced: AtomicU64,
}

impl Bulk {
    pub(super) fn new(splice: bool) -> Bulk {
        Bulk {
            budget: Arc::new(Semaphore::new(LARGE_BUFFERS)),
            splice,
            spliced: AtomicU64::new(0),
        }
    }
}

/// Copies `from` to `to` until `from` ends, then shuts `to`'s writing down; the bytes
/// copied. A bulk direction takes its pipe's place from `bulk`.
pub(super) async fn pump(
    from: &mut ReadHalf<'_>,
    to: &mut WriteHalf<'_>,
    bulk: &Bulk,
) -> io::Result<u64> {
    let mut buffer = vec![0u8; SMALL];
    // Held while the pipe or the large buffer is: given back when the direction ends.
    let mut permit: Option<OwnedSemaphorePermit> = None;
    let mut total = 0u64;
    loop {
        let read = from.read(&mut buffer).await?;
        if read == 0 {
            to.shutdown().await?;
            return Ok(total);
        }
        to.write_all(&buffer[..read]).await?;
        total += read as u64;
        if read == buffer.len()
            && permit.is_none()
            && let Ok(taken) = Arc::clone(&bulk.budget).try_acquire_owned()
        {
            permit = Some(taken);
            let pipe = if bulk.splice {
                Pipe::new()
            } else {
                Err(io::Error::other("splice is off (ProxyCaps::splice)"))
            };
            match pipe {
                Ok(pipe) => {
                    drop(buffer);
                    bulk.spliced.fetch_add(1, Ordering::Relaxed);
                    total += pipe.splice_all(from.as_ref(), to.as_ref()).await?;
                    to.shutdown().await?;
                    return Ok(total);
                }
                Err(e) => {
                    tracing::debug!("proxy: no pipe for a bulk transfer, copying instead: {e}");
                    buffer = vec![0u8; LARGE];
                }
            }
        }
    }
}

/// A pipe that one direction's bytes pass through.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    size: usize,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let size = rustix::pipe::fcntl_setpipe_size(&write, PIPE)
            .or_else(|_| rustix::pipe::fcntl_getpipe_size(&write))?;
        Ok(Pipe { read, write, size })
    }

    /// Moves `from`'s bytes to `to` until `from` ends: into the pipe as much as `from`
    /// has, then all of it out, and again. The pipe is empty at each splice into it,
    /// so `EAGAIN` there can only mean `from` has nothing, and `from`'s readiness is
    /// cleared rightly; out of it, only that `to` is full.
    async fn splice_all(&self, from: &TcpStream, to: &TcpStream) -> io::Result<u64> {
        let flags = SpliceFlags::NONBLOCK | SpliceFlags::MOVE;
        let mut total = 0u64;
        loop {
            let filled = loop {
                from.readable().await?;
                match from.try_io(Interest::READABLE, || {
                    Ok(rustix::pipe::splice(
                        from,
                        None,
                        &self.write,
                        None,
                        self.size,
                        flags,
                    )?)
                }) {
                    Ok(filled) => break filled,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            };
            if filled == 0 {
                return Ok(total);
            }
            let mut left = filled;
            while left > 0 {
                to.writable().await?;
                match to.try_io(Interest::WRITABLE, || {
                    Ok(rustix::pipe::splice(
                        &self.read, None, to, None, left, flags,
                    )?)
                }) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(sent) => left -= sent,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            }
            total += filled as u64;
        }
    }
}

/// Both directions of a tunnel until both have ended, each shutting its writer down at
/// its reader's end, as `tokio::io::copy_bidirectional` does.
pub(super) async fn both_ways(
    client: &mut TcpStream,
    server: &mut TcpStream,
    bulk: &Bulk,
) -> io::Result<()> {
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    tokio::try_join!(
        pump(&mut client_read, &mut server_write, bulk),
        pump(&mut server_read, &mut client_write, bulk),
    )?;
    Ok(())
}

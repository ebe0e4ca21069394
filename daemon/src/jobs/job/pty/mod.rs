//! Terminal jobs (`exec --pty`): the pseudo-terminal the daemon opens for a job, the
//! asynchronous reads and writes of its master, its size, the emulator that renders
//! its screen (`screen.rs`) and the keys `send --keys` names (`keys.rs`).
//!
//! The daemon opens the terminal, not the resident: the master is one more descriptor
//! the daemon owns (read by the supervisor like a pipe, written by the stdin task), and
//! the slave travels to the resident in the places of the job's stdin, stdout and
//! stderr pipes, so the spawn frame gains one flag and the resident one `TIOCSCTTY`.
//! The daemon closes its copy of the slave once the zygote has it: the master reads
//! end-of-file (EIO) when the job's last process closes the terminal.

pub mod keys;
mod lines;
pub mod screen;
pub mod wanted;

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use bashd_protocol::PtySize;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// The environment of a terminal job: `TERM=xterm-256color`, the terminal the
/// emulator is, and no `NO_COLOR`; the rest of the hardening (pagers, editors,
/// prompts) stays. A job without a terminal keeps `env` as it is.
pub fn terminal_env(
    pty: Option<PtySize>,
    mut env: Vec<(Vec<u8>, Vec<u8>)>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    if pty.is_some() {
        env.retain(|(key, _)| key != b"TERM" && key != b"NO_COLOR");
        env.push((b"TERM".to_vec(), b"xterm-256color".to_vec()));
    }
    env
}

/// A new pseudo-terminal of `size`: (master, slave). Both close on exec; the master
/// does not block.
pub fn open(size: PtySize) -> io::Result<(OwnedFd, OwnedFd)> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::io::ioctl_fionbio(&master, true)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(
        name.as_c_str(),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    set_size(&master, size)?;
    Ok((master, slave))
}

/// Tells the terminal its size; the kernel sends SIGWINCH to its foreground group.
pub fn set_size(master: &impl AsFd, size: PtySize) -> io::Result<()> {
    let winsize = Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    Ok(rustix::termios::tcsetwinsize(master, winsize)?)
}

/// Whether `fd` is a terminal's master rather than a pipe.
pub fn is_terminal(fd: &impl AsFd) -> bool {
    rustix::fs::fstat(fd.as_fd()).is_ok_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::CharacterDevice
    })
}

/// The path of the slave of `master` (`/dev/pts/N`), as `/proc/PID/fd/0` of the job's
/// processes names it.
pub fn slave_path(master: &impl AsFd) -> Option<String> {
    rustix::pty::ptsname(master, Vec::new())
        .ok()?
        .into_string()
        .ok()
}

/// A terminal master registered with the runtime: reads and writes that wait for it.
#[derive(Debug)]
pub struct Master {
    fd: AsyncFd<OwnedFd>,
}

impl Master {
    pub fn new(fd: OwnedFd) -> io::Result<Master> {
        rustix::io::ioctl_fionbio(&fd, true)?;
        // SAFETY: the AsyncFd owns the descriptor and drops it last.
        let fd = unsafe {
            AsyncFd::register_with_interest(fd, Interest::READABLE | Interest::WRITABLE)?
        };
        Ok(Master { fd })
    }

    /// Reads some bytes; 0 once no process holds the terminal (Linux says EIO then).
    /// Cancel-safe: a read that did not complete consumed nothing.
    /// A terminal gives at most 4 KiB a read: what it holds beyond that is read in the
    /// same wake-up, up to `buf`'s size, so a loud program costs a wake-up (and a pass
    /// through the screen) per buffer, not per 4 KiB.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| {
                let mut filled = 0;
                while filled < buf.len() {
                    match rustix::io::read(fd.get_ref(), &mut buf[filled..]) {
                        Ok(0) => break,
                        Ok(n) => filled += n,
                        // Empty now, or closed: what was read is the answer; the next
                        // read meets the same and reports it.
                        Err(_) if filled > 0 => break,
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok(filled)
            }) {
                Ok(Err(e)) if e.raw_os_error() == Some(Errno::IO.raw_os_error()) => return Ok(0),
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    /// Reads what the terminal holds now, without waiting; 0 when it holds nothing (or
    /// is closed, which the next [`Master::read`] reports).
    pub fn read_now(&self, buf: &mut [u8]) -> usize {
        rustix::io::read(self.fd.get_ref(), buf).unwrap_or(0)
    }

    /// Writes some bytes; how many.
    pub async fn write(&self, buf: &[u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.writable().await?;
            match guard.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), buf)?)) {
                Ok(Err(e)) if e.raw_os_error() == Some(Errno::IO.raw_os_error()) => {
                    return Err(io::Error::from(io::ErrorKind::BrokenPipe));
                }
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    pub fn set_size(&self, size: PtySize) -> io::Result<()> {
        set_size(self.fd.get_ref(), size)
    }
}

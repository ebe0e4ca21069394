//! The daemon's end of the zygote: `bashd-resident --zygote`, started once (and again
//! if it is lost), which forks every job's resident from itself. Forking a small
//! process that holds nothing is cheaper than starting the resident binary for each
//! job (`docs/PERFORMANCE.md`), and the daemon itself is never copied.
//!
//! The reaper owns it (`jobs/os/reaper.rs`): it performs every spawn, and the zygote is
//! the daemon's child. Spawn frames go one at a time on a blocking socket, which the
//! zygote reads at once; a zygote that stops reading for [`SEND_TIMEOUT`] is taken for
//! lost.

use std::io::{self, IoSlice, Write};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};

use bashd_resident_core::wire::MAX_SPAWN_FDS;

/// How long a spawn frame may wait for the zygote to read it.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// A running zygote and the daemon's end of its socket.
#[derive(Debug)]
pub struct Zygote {
    socket: StdUnixStream,
    pid: i32,
}

impl Zygote {
    /// Starts `binary --zygote` with the other end of a new socket as its stdin. Its
    /// stderr is the daemon's, for what it says when it fails.
    pub fn start(binary: &Path) -> io::Result<Zygote> {
        let (ours, theirs) = StdUnixStream::pair()?;
        ours.set_write_timeout(Some(SEND_TIMEOUT))?;
        let child = Command::new(binary)
            .arg("--zygote")
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::from(OwnedFd::from(theirs)))
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot start {} --zygote: {e}", binary.display()),
                )
            })?;
        // Dropped without a wait: the reaper reaps it with the other children.
        Ok(Zygote {
            socket: ours,
            pid: child.id() as i32,
        })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Sends one spawn frame with the job's descriptors attached to its first byte.
    pub fn send(&mut self, frame: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        let mut space =
            [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_SPAWN_FDS))];
        let mut ancillary = SendAncillaryBuffer::new(&mut space);
        if !ancillary.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::other("no room for a job's descriptors"));
        }
        let sent = rustix::net::sendmsg(
            &self.socket,
            &[IoSlice::new(frame)],
            &mut ancillary,
            SendFlags::NOSIGNAL,
        )?;
        // A large frame may go in parts; the descriptors went with the first.
        (&self.socket).write_all(&frame[sent..])
    }

    /// Ends a zygote that stopped taking spawns. The residents it forked run on.
    pub fn kill(self) {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(self.pid).expect("a child's pid is positive"),
            rustix::process::Signal::KILL,
        );
    }
}

//! The daemon's end of the zygote: `bashd-resident --zygote`, started at the first
//! job (and again if it is lost), which forks every job's resident from itself.
//! Forking a small process that holds nothing is cheaper than starting the resident
//! binary for each job (`docs/PERFORMANCE.md`), and the daemon itself is never copied.
//!
//! [`Zygote::spawn`] sends one job's launch (`jobs/os/spawn/`) as a spawn frame, with
//! the job's descriptors and the resident's end of a new control socket attached, and
//! returns the daemon's ends; `resident.rs` takes it from there. The reaper forks the
//! zygote, as every child of the daemon, and reaps it. Frames go one at a time on a
//! blocking socket, which the zygote reads at once; a zygote that stops reading for
//! [`SEND_TIMEOUT`] is taken for lost.

use std::io::{self, IoSlice, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use rustix::process::{Pid, Signal};
use tokio::sync::{Mutex, oneshot};

use bashd_resident_core::wire::MAX_SPAWN_FDS;

use crate::jobs::os::reaper::{Child, LeaderExit, ReaperHandle};
use crate::jobs::os::spawn::{Ends, Launch};

/// How long a spawn frame may wait for the zygote to read it.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// The daemon's zygote, started at the first spawn; cheap to clone.
#[derive(Debug, Clone)]
pub struct Zygote {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    binary: PathBuf,
    reaper: ReaperHandle,
    /// The running zygote, if any. A tokio mutex: a spawn waits here without holding
    /// a worker thread while another sends, which may block that one's thread for up
    /// to [`SEND_TIMEOUT`] on a zygote slow to read; and frames must not interleave.
    running: Mutex<Option<Running>>,
}

/// A running zygote and the daemon's end of its socket.
#[derive(Debug)]
struct Running {
    socket: StdUnixStream,
    pid: Pid,
    /// Resolves when the reaper has reaped it: its pid may name another process then.
    exit: oneshot::Receiver<LeaderExit>,
}

/// A job whose resident the zygote was asked to fork: the daemon's ends of the job's
/// stdio and of the resident's control socket. `resident.rs` waits there for the
/// shell's pid.
#[derive(Debug)]
pub struct ResidentStarted {
    pub ends: Ends,
    pub control: OwnedFd,
}

impl Zygote {
    /// The zygote of `binary`, not yet started.
    pub fn new(binary: PathBuf, reaper: ReaperHandle) -> Zygote {
        Zygote {
            shared: Arc::new(Shared {
                binary,
                reaper,
                running: Mutex::new(None),
            }),
        }
    }

    /// The resident's binary, which also holds session networks.
    pub fn binary(&self) -> &Path {
        &self.shared.binary
    }

    /// The reaper that forks the daemon's children.
    pub fn reaper(&self) -> &ReaperHandle {
        &self.shared.reaper
    }

    /// Has the zygote fork a resident for `launch`.
    pub async fn spawn(&self, launch: Launch) -> io::Result<ResidentStarted> {
        let (frame, job_fds, ends) = launch.into_frame()?;
        let (ours, theirs) = StdUnixStream::pair()?;
        let mut fds = Vec::with_capacity(MAX_SPAWN_FDS);
        fds.push(theirs.as_fd());
        fds.extend(job_fds.iter().map(|fd| fd.as_fd()));
        self.send(&frame.encode(), &fds).await?;
        // The zygote has its own copies now, and the daemon's close here: the pipes
        // reach EOF when the job's last process closes them.
        Ok(ResidentStarted {
            ends,
            control: OwnedFd::from(ours),
        })
    }

    /// Sends `frame` and `fds` to the zygote, starting it if there is none, and again
    /// once if the one there is was lost.
    async fn send(&self, frame: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        let mut running = self.shared.running.lock().await;
        let mut last_error = None;
        for _ in 0..2 {
            if running.is_none() {
                let started = Running::start(&self.shared.binary, &self.shared.reaper).await?;
                *running = Some(started);
            }
            let zygote = running.as_mut().expect("started just above");
            match zygote.send(frame, fds) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!(
                        "the zygote that forks job residents was lost ({e}); starting another"
                    );
                    if let Some(lost) = running.take() {
                        lost.kill();
                    }
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("the zygote could not be reached")))
    }
}

/// Starts `binary ARGS` (`bashd-resident --zygote`, `--network-holder`), forked by the
/// reaper as every child of the daemon, with an empty environment, in `/`, the other
/// end of a new socket as its stdin and no stdout; its stderr is the daemon's, for
/// what it says when it fails. The daemon's end of the socket, and the child.
pub async fn start_resident(
    binary: &Path,
    reaper: &ReaperHandle,
    args: &[&str],
) -> io::Result<(StdUnixStream, Child)> {
    let (ours, theirs) = StdUnixStream::pair()?;
    let mut command = Command::new(binary);
    command
        .args(args)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::null());
    let child = reaper.spawn(command).await.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot start {} {}: {e}", binary.display(), args.join(" ")),
        )
    })?;
    Ok((ours, child))
}

impl Running {
    /// Starts `binary --zygote` (`start_resident`).
    async fn start(binary: &Path, reaper: &ReaperHandle) -> io::Result<Running> {
        let (ours, child) = start_resident(binary, reaper, &["--zygote"]).await?;
        ours.set_write_timeout(Some(SEND_TIMEOUT))?;
        Ok(Running {
            socket: ours,
            pid: child.pid,
            exit: child.exit,
        })
    }

    /// Sends one spawn frame with the job's descriptors attached to its first byte.
    fn send(&mut self, frame: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
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
    fn kill(mut self) {
        if let Err(oneshot::error::TryRecvError::Empty) = self.exit.try_recv() {
            let _ = rustix::process::kill_process(self.pid, Signal::KILL);
        }
    }
}

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
        send_frame(&self.socket, frame, fds)
    }

    /// Ends a zygote that stopped taking spawns. The residents it forked run on.
    fn kill(mut self) {
        if let Err(oneshot::error::TryRecvError::Empty) = self.exit.try_recv() {
            let _ = rustix::process::kill_process(self.pid, Signal::KILL);
        }
    }
}

/// Sends `frame` on `socket` with `fds` attached to its first byte.
///
/// A signal that comes while the send waits for room is no loss of the zygote: with a
/// send timeout set, the kernel never restarts a socket call that a handler
/// interrupted (signal(7)), and bashd handles SIGCHLD. Under 200 agents the zygote's
/// socket fills and every such `EINTR` was taken for a lost zygote, which was killed
/// with the spawns in flight (issue 46, step 7). Nothing is sent when `sendmsg` says
/// `EINTR`, so it is made again.
fn send_frame(socket: &StdUnixStream, frame: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_SPAWN_FDS))];
    let sent = loop {
        let mut ancillary = SendAncillaryBuffer::new(&mut space);
        if !ancillary.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::other("no room for a job's descriptors"));
        }
        match rustix::net::sendmsg(
            socket,
            &[IoSlice::new(frame)],
            &mut ancillary,
            SendFlags::NOSIGNAL,
        ) {
            Ok(sent) => break sent,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    };
    // A large frame may go in parts; the descriptors went with the first. `write_all`
    // makes a write again when a signal interrupts it.
    (&*socket).write_all(&frame[sent..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::sync::atomic::{AtomicI32, Ordering};

    extern "C" fn ignore(_: libc::c_int) {}

    /// A spawn that waits for room on a full socket and is interrupted by a signal
    /// still goes, whole, once the zygote reads (it was taken for a lost zygote).
    #[test]
    fn a_signal_while_the_zygote_socket_is_full_loses_no_spawn() {
        // SAFETY: installs a handler that does nothing, for SIGUSR2, which nothing else
        // in the test binary uses; the sigaction struct is zeroed and then filled in.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = ignore as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            assert_eq!(
                libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut()),
                0
            );
        }
        let (ours, mut theirs) = StdUnixStream::pair().unwrap();
        ours.set_write_timeout(Some(SEND_TIMEOUT)).unwrap();
        // Fill the socket, as a zygote busy forking leaves it.
        ours.set_nonblocking(true).unwrap();
        let mut filled = 0;
        let chunk = [0u8; 4096];
        loop {
            match (&ours).write(&chunk) {
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        ours.set_nonblocking(false).unwrap();
        let sender_tid = std::sync::Arc::new(AtomicI32::new(0));
        let tid = std::sync::Arc::clone(&sender_tid);
        let frame = vec![7u8; 100];
        let expected = frame.len();
        let sender = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tid.store(unsafe { libc::gettid() }, Ordering::SeqCst);
            let null = std::fs::File::open("/dev/null").unwrap();
            send_frame(&ours, &frame, &[null.as_fd()])
        });
        while sender_tid.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        // Signals at the sender while it waits for room.
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(40));
            // SAFETY: tgkill of a thread of this process that is alive until joined below.
            unsafe {
                libc::syscall(
                    libc::SYS_tgkill,
                    libc::getpid(),
                    sender_tid.load(Ordering::SeqCst),
                    libc::SIGUSR2,
                );
            }
        }
        let mut received = vec![0u8; filled + expected];
        theirs.read_exact(&mut received).unwrap();
        let sent = sender.join().unwrap();
        assert!(sent.is_ok(), "the spawn was lost: {sent:?}");
        assert!(received[filled..].iter().all(|b| *b == 7));
    }
}

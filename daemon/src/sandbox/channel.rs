//! A sandboxed job's channel to the daemon (issue 30): where a request from inside a
//! job comes from, known by construction rather than guessed.
//!
//! Each sandboxed job is started with one end of a `SOCK_SEQPACKET` socket pair,
//! at descriptor [`bashd_resident_core::wire::CHANNEL_FD`] and named in its environment
//! (`BASHD_CHANNEL`); the daemon keeps the other end for that job alone. A client in
//! the job makes a socket pair, sends one end over the channel (one message, one
//! descriptor: atomic however many of the job's processes send at once) and speaks the
//! protocol over the other. Every connection that arrives on a job's channel is that
//! job's: its session, its sandbox ([`Origin`]). When the job ends its channel
//! closes, and so do the connections that came through it: an ended job lends no one
//! its identity.
//!
//! A job holds at most [`MOST_CONNECTIONS`] connections through its channel at once,
//! counted apart from the daemon's socket (`[limits] max_connections`): a job that
//! sends a thousand ends holds its own share and no more, and the person's own
//! requests on the socket (`bashc status`, `bashc kill` of that job) still get through
//! (issue 42, hole 6). A connection over the limit is told why and closed.
//!
//! The channel needs no `socket(AF_UNIX)` and no path, so it still works where a
//! sandbox forbids both; a process of a sandboxed job that comes any other way (it
//! closed the descriptor, cleared its environment) is refused at the daemon's socket
//! (`peer.rs`).

use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bashd_protocol::{ErrorKind, JobId, Network, SandboxInForce, SandboxProfile};
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SocketFlags, SocketType,
};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::roots::Roots;

/// The sandboxed job a connection came from, through its channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub job: JobId,
    pub session: String,
    pub sandbox: SandboxInForce,
    /// The writable roots of the session it was started in, resolved when the
    /// request that started it came (issue 42): a job it starts has the same ones,
    /// whatever workdir it names.
    pub roots: Arc<Roots>,
}

impl Origin {
    /// Whether a job confined by `other` (`None`: not confined) with the writable
    /// roots `roots` is as tight as this one or tighter, so that a request from this
    /// one may reach it: no looser profile or network, and under `workspace-write`
    /// no root outside this one's (a job does not type into a sibling that writes
    /// another workspace).
    pub fn reaches(&self, other: Option<SandboxInForce>, roots: Option<&Roots>) -> bool {
        let other = other.unwrap_or(SandboxInForce {
            profile: SandboxProfile::Off,
            network: Network::On,
        });
        if !at_most(other, self.sandbox) {
            return false;
        }
        // An `off` origin writes everywhere, a `read-only` one reaches only jobs that
        // write nothing: the roots matter only between `workspace-write` jobs.
        let both_write_roots = self.sandbox.profile == SandboxProfile::WorkspaceWrite
            && other.profile == SandboxProfile::WorkspaceWrite;
        !both_write_roots || roots.is_some_and(|roots| roots.within(&self.roots))
    }

    /// `read-only with the network off`, as a refusal says it.
    pub fn describe(&self) -> String {
        describe(Some(self.sandbox))
    }
}

/// Whether `inner` allows no more than `outer`.
pub fn at_most(inner: SandboxInForce, outer: SandboxInForce) -> bool {
    inner.profile.looseness() <= outer.profile.looseness()
        && inner.network.looseness() <= outer.network.looseness()
}

/// A sandbox as a refusal says it: `read-only with the network off`, `no sandbox`.
pub fn describe(sandbox: Option<SandboxInForce>) -> String {
    match sandbox {
        None => "no sandbox".to_owned(),
        Some(s) => format!("{} with the network {}", s.profile, s.network),
    }
}

/// The most connections a job holds through its channel at once. Each `bashc` that
/// runs in the job holds one while it runs, and each `bashc mcp` one while it serves;
/// a job that needs more at once is one that floods.
pub const MOST_CONNECTIONS: usize = 64;

/// A connection that came through a job's channel.
#[derive(Debug)]
pub struct Arrived {
    pub stream: tokio::net::UnixStream,
    pub origin: Arc<Origin>,
    /// Cancelled when the job ends: the connection ends with it.
    pub ended: CancellationToken,
    /// The connection's place among the job's [`MOST_CONNECTIONS`]: held while it is
    /// served, given back when it is dropped.
    pub held: Held,
}

/// One of a job's connections (or refusals) counted until dropped.
#[derive(Debug)]
pub struct Held(Arc<AtomicUsize>);

impl Held {
    /// A place among `count`'s, or `None` when all `most` are taken.
    fn take(count: &Arc<AtomicUsize>, most: usize) -> Option<Held> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < most).then_some(n + 1)
            })
            .ok()
            .map(|_| Held(Arc::clone(count)))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The daemon's hold on a job's channel. Dropping it (the job has ended) closes the
/// channel and ends every connection that came through it.
#[derive(Debug)]
pub struct Channel {
    _open: DropGuard,
}

/// A channel made for a job that has no number yet: what can fail is done.
#[derive(Debug)]
pub struct Unopened {
    ours: AsyncFd<OwnedFd>,
    theirs: OwnedFd,
}

impl Channel {
    /// Makes a channel's two ends (within the async runtime, which watches ours).
    pub fn make() -> io::Result<Unopened> {
        let (ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )?;
        // The job's end blocks, as a descriptor a program inherits is expected to.
        rustix::io::ioctl_fionbio(&theirs, false)?;
        // SAFETY: `ours` is an open descriptor that this AsyncFd owns from here on.
        let ours = unsafe { AsyncFd::register_with_interest(ours, Interest::READABLE) }?;
        Ok(Unopened { ours, theirs })
    }
}

impl Unopened {
    /// Opens the channel for the job `origin`: the job's end, for its spawn, and the
    /// daemon's hold, whose task hands each connection sent over it to `arrivals`.
    pub fn open(self, origin: Arc<Origin>, arrivals: mpsc::Sender<Arrived>) -> (Channel, OwnedFd) {
        let ended = CancellationToken::new();
        tokio::spawn(serve(self.ours, origin, arrivals, ended.clone()));
        let channel = Channel {
            _open: ended.drop_guard(),
        };
        (channel, self.theirs)
    }
}

/// Takes the descriptors sent over a job's channel until the job ends or every
/// process of it has closed its end.
async fn serve(
    channel: AsyncFd<OwnedFd>,
    origin: Arc<Origin>,
    arrivals: mpsc::Sender<Arrived>,
    ended: CancellationToken,
) {
    // The job's connections being served, and its refusals being told: each bounded,
    // so a job that floods its channel costs the daemon a fixed number of descriptors.
    let (held, refusing) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    // The log says it once a job, not once a connection.
    let mut logged = false;
    loop {
        let ready = tokio::select! {
            () = ended.cancelled() => return,
            ready = channel.readable() => ready,
        };
        let Ok(mut ready) = ready else { return };
        loop {
            match receive(channel.get_ref()) {
                Ok(Received::Stream(stream)) => {
                    let Some(place) = Held::take(&held, MOST_CONNECTIONS) else {
                        if !std::mem::replace(&mut logged, true) {
                            tracing::warn!(
                                job = %origin.job,
                                "refused a connection through the job's channel: it holds {MOST_CONNECTIONS} already (and refuses the next ones without a word here)"
                            );
                        }
                        refuse(stream, &origin, &refusing);
                        continue;
                    };
                    let arrived = Arrived {
                        stream,
                        origin: Arc::clone(&origin),
                        ended: ended.clone(),
                        held: place,
                    };
                    // Waits while the server is busy: the job's sends wait in turn.
                    let sent = tokio::select! {
                        () = ended.cancelled() => return,
                        sent = arrivals.send(arrived) => sent,
                    };
                    if sent.is_err() {
                        return;
                    }
                }
                Ok(Received::Nothing) => {}
                Ok(Received::Closed) => return,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready.clear_ready();
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(job = %origin.job, "the job's channel to bashd failed: {e}");
                    return;
                }
            }
        }
    }
}

/// Tells a connection over the job's limit why, and closes it; past
/// [`MOST_CONNECTIONS`] refusals being told at once, closes it without a word.
fn refuse(stream: tokio::net::UnixStream, origin: &Origin, refusing: &Arc<AtomicUsize>) {
    let Some(place) = Held::take(refusing, MOST_CONNECTIONS) else {
        return;
    };
    let reason = format!(
        "this job ({}) already holds {MOST_CONNECTIONS} connections to bashd through its channel, the most a job may hold at once; let some of its clients of bashd finish (each one that runs holds one, an MCP server its own), then try again",
        origin.job
    );
    tokio::spawn(async move {
        crate::server::refuse(stream, ErrorKind::Busy, reason).await;
        drop(place);
    });
}

enum Received {
    /// A stream socket to serve as a connection from the job.
    Stream(tokio::net::UnixStream),
    /// A message without a usable descriptor: nothing to serve.
    Nothing,
    /// Every process of the job has closed its end.
    Closed,
}

/// One message of the channel. Anything but one Unix stream socket is dropped.
fn receive(channel: &OwnedFd) -> io::Result<Received> {
    let mut byte = [0u8; 16];
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        channel,
        &mut [IoSliceMut::new(&mut byte)],
        &mut ancillary,
        RecvFlags::CMSG_CLOEXEC | RecvFlags::DONTWAIT,
    )?;
    let mut sent: Option<OwnedFd> = None;
    for message in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            for fd in fds {
                // More than one: the first is served, the others close here.
                if sent.is_none() {
                    sent = Some(fd);
                }
            }
        }
    }
    let Some(fd) = sent else {
        // A seqpacket socket reads 0 bytes only at its end: every message a client
        // sends carries a byte.
        return Ok(if got.bytes == 0 {
            Received::Closed
        } else {
            Received::Nothing
        });
    };
    let is_stream = rustix::net::sockopt::socket_domain(&fd).ok() == Some(AddressFamily::UNIX)
        && rustix::net::sockopt::socket_type(&fd).ok() == Some(SocketType::STREAM);
    if !is_stream {
        return Ok(Received::Nothing);
    }
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    Ok(Received::Stream(tokio::net::UnixStream::from_std(stream)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bashd_protocol::SandboxProfile;

    fn sandbox(profile: SandboxProfile, network: Network) -> SandboxInForce {
        SandboxInForce { profile, network }
    }

    fn roots(paths: &[&str]) -> Arc<Roots> {
        Arc::new(Roots {
            paths: paths.iter().map(Into::into).collect(),
            caller: None,
        })
    }

    #[test]
    fn a_job_reaches_only_jobs_as_tight_as_itself() {
        let origin = Origin {
            job: JobId(3),
            session: "s".into(),
            sandbox: sandbox(SandboxProfile::WorkspaceWrite, Network::Off),
            roots: roots(&["/ws"]),
        };
        let same = Some(&*origin.roots);
        assert!(origin.reaches(Some(origin.sandbox), same));
        assert!(origin.reaches(Some(sandbox(SandboxProfile::ReadOnly, Network::Off)), None));
        assert!(!origin.reaches(None, same), "an unconfined job is looser");
        assert!(!origin.reaches(Some(sandbox(SandboxProfile::ReadOnly, Network::On)), same));
        assert!(!origin.reaches(Some(sandbox(SandboxProfile::Off, Network::Off)), same));
        assert_eq!(origin.describe(), "workspace-write with the network off");
    }

    /// Sends one end of a new stream pair over the job's end of a channel; the other.
    fn send_end(theirs: &OwnedFd) -> std::os::unix::net::UnixStream {
        use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
        use std::os::fd::AsFd;
        let (mine, sent) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut ancillary = SendAncillaryBuffer::new(&mut space);
        let fds = [sent.as_fd()];
        assert!(ancillary.push(SendAncillaryMessage::ScmRights(&fds)));
        rustix::net::sendmsg(
            theirs,
            &[std::io::IoSlice::new(
                bashd_protocol::channel::CHANNEL_HELLO,
            )],
            &mut ancillary,
            SendFlags::NOSIGNAL,
        )
        .unwrap();
        mine
    }

    /// Issue 42, hole 6: a job's channel serves `MOST_CONNECTIONS` at once; the next
    /// is told the limit and closed, and a connection that ends makes room again.
    #[tokio::test]
    async fn a_job_holds_at_most_its_share_of_connections() {
        let origin = Arc::new(Origin {
            job: JobId(9),
            session: "s".into(),
            sandbox: sandbox(SandboxProfile::ReadOnly, Network::Off),
            roots: roots(&["/ws"]),
        });
        let (arrivals_tx, mut arrivals) = mpsc::channel(2 * MOST_CONNECTIONS);
        let (_channel, theirs) = Channel::make().unwrap().open(origin, arrivals_tx);
        let ends: Vec<_> = (0..MOST_CONNECTIONS + 1)
            .map(|_| send_end(&theirs))
            .collect();
        let mut served = Vec::new();
        for _ in 0..MOST_CONNECTIONS {
            served.push(arrivals.recv().await.unwrap());
        }
        // The one past the limit is told why, after its Hello is waited for.
        let mut over = ends.last().unwrap().try_clone().unwrap();
        let told = tokio::task::spawn_blocking(move || {
            let mut told = Vec::new();
            std::io::Read::read_to_end(&mut over, &mut told).unwrap();
            told
        })
        .await
        .unwrap();
        let told = String::from_utf8_lossy(&told);
        assert!(
            told.contains(
                "this job (j9) already holds 64 connections to bashd through its channel"
            ),
            "{told}"
        );
        assert!(arrivals.try_recv().is_err(), "a connection past the limit");
        // One ends: the next is served.
        served.pop();
        let _next = send_end(&theirs);
        let arrived = tokio::time::timeout(std::time::Duration::from_secs(10), arrivals.recv())
            .await
            .expect("no room after a connection ended");
        assert!(arrived.is_some());
    }

    #[test]
    fn a_job_reaches_no_job_that_writes_outside_its_roots() {
        let origin = Origin {
            job: JobId(3),
            session: "s".into(),
            sandbox: sandbox(SandboxProfile::WorkspaceWrite, Network::Off),
            roots: roots(&["/ws"]),
        };
        let tight = Some(origin.sandbox);
        assert!(origin.reaches(tight, Some(&roots(&["/ws/sub"]))));
        assert!(!origin.reaches(tight, Some(&roots(&["/other"]))));
        assert!(!origin.reaches(tight, Some(&roots(&["/ws", "/other"]))));
        assert!(!origin.reaches(tight, None), "roots unknown: out of reach");
    }

    #[tokio::test]
    async fn a_descriptor_sent_over_the_channel_arrives_as_the_jobs_connection() {
        use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
        use std::io::IoSlice;
        use std::os::fd::AsFd;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let origin = Arc::new(Origin {
            job: JobId(7),
            session: "s".into(),
            sandbox: sandbox(SandboxProfile::ReadOnly, Network::Off),
            roots: roots(&["/ws"]),
        });
        let (arrivals_tx, mut arrivals) = mpsc::channel(4);
        let (channel, theirs) = Channel::make()
            .unwrap()
            .open(Arc::clone(&origin), arrivals_tx);
        let (mut mine, sent) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut ancillary = SendAncillaryBuffer::new(&mut space);
        let fds = [sent.as_fd()];
        assert!(ancillary.push(SendAncillaryMessage::ScmRights(&fds)));
        rustix::net::sendmsg(
            &theirs,
            &[IoSlice::new(bashd_protocol::channel::CHANNEL_HELLO)],
            &mut ancillary,
            SendFlags::NOSIGNAL,
        )
        .unwrap();
        drop(sent);
        let mut arrived = arrivals.recv().await.unwrap();
        assert_eq!(*arrived.origin, *origin);
        std::io::Write::write_all(&mut mine, b"hi").unwrap();
        let mut got = [0u8; 2];
        arrived.stream.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hi");
        arrived.stream.write_all(b"ok").await.unwrap();

        // The job ends: its connections are told, and its channel takes no more.
        drop(channel);
        assert!(arrived.ended.is_cancelled());
        let mut tries = 0;
        let refused = loop {
            let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut ancillary = SendAncillaryBuffer::new(&mut space);
            match rustix::net::sendmsg(
                &theirs,
                &[IoSlice::new(b"c")],
                &mut ancillary,
                SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
            ) {
                Err(e) => break e,
                Ok(_) if tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
                Ok(_) => panic!("the channel of an ended job still takes messages"),
            }
        };
        // Reset when the daemon's end closed with messages unread.
        assert!(
            [rustix::io::Errno::PIPE, rustix::io::Errno::CONNRESET].contains(&refused),
            "{refused}"
        );
    }
}

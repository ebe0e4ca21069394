//! Who is at the other end of a Unix socket, as the daemon (its socket refuses a
//! process inside a sandbox) and a host's relay (it carries no call from one) both
//! need to know: the peer's pid and uid, and whether it runs in this process's user
//! namespace. A sandboxed job runs in a user namespace of its own, and no process
//! leaves its user namespace. Each side words and decides its refusal itself.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use rustix::process::{Pid, PidfdFlags};

/// `SO_PEERPIDFD` (Linux 6.5): a pidfd of the process that connected.
const SO_PEERPIDFD: libc::c_int = 77;

/// The process at the other end of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub pid: u32,
    pub uid: u32,
    /// Whether it is in the user namespace of the process that asks.
    pub same_user_namespace: bool,
}

/// The process that connected on `socket`. It is held by a pidfd while its namespace
/// is read, so a pid reused meanwhile is never read instead; one that has exited is an
/// error.
pub fn identify(socket: &impl AsFd) -> io::Result<Peer> {
    let credentials = rustix::net::sockopt::socket_peercred(socket)?;
    let pidfd = peer_pidfd(socket, credentials.pid)?;
    let pid = credentials.pid.as_raw_nonzero().get();
    let namespace = File::open(format!("/proc/{pid}/ns/user"))?;
    // Through libc: rustix's pidfd_send_signal takes a `Signal`, which is never 0.
    // SAFETY: the call reads its arguments only: a pidfd this function owns, signal 0
    // (none is sent, the process is only checked to live), a null siginfo, which the
    // call allows, and no flags.
    let alive = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    } == 0;
    if !alive {
        return Err(io::Error::other("the process that connected has exited"));
    }
    let theirs = namespace.metadata()?;
    let ours = std::fs::metadata("/proc/self/ns/user")?;
    Ok(Peer {
        pid: pid as u32,
        uid: credentials.uid.as_raw(),
        same_user_namespace: (theirs.dev(), theirs.ino()) == (ours.dev(), ours.ino()),
    })
}

/// A pidfd of the socket's peer: from the socket itself where the kernel gives it
/// (Linux 6.5), else opened by pid, which a pid reused since the connect could mislead.
fn peer_pidfd(socket: &impl AsFd, pid: Pid) -> io::Result<OwnedFd> {
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `fd`, an int.
    let got = unsafe {
        libc::getsockopt(
            socket.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&mut fd as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if got == 0 && fd >= 0 {
        // SAFETY: a new descriptor the kernel just gave this process.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    Ok(rustix::process::pidfd_open(pid, PidfdFlags::empty())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_of_this_process_is_in_its_namespace() {
        let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let peer = identify(&ours).unwrap();
        assert_eq!(peer.pid, std::process::id());
        assert_eq!(peer.uid, rustix::process::getuid().as_raw());
        assert!(peer.same_user_namespace);
    }
}

//! Whether a client connects from inside a sandboxed job. A job's resident makes a
//! user namespace of its own before it forks the shell, and no process leaves its user
//! namespace, so the namespaces of the connecting process name the job it is part of:
//! a job started from inside a sandboxed job may then be no looser than that job
//! (`bashc exec --sandbox off` run by a confined command is refused).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

/// `NS_GET_PARENT`: the namespace above a user namespace, as a new descriptor.
const NS_GET_PARENT: libc::c_ulong = 0xb702;
/// `SO_PEERPIDFD` (Linux 6.5): a pidfd of the process that connected.
const SO_PEERPIDFD: libc::c_int = 77;
/// Deeper nesting than this is not followed; a job could nest without end.
const MAX_DEPTH: usize = 32;

/// The user namespaces a client is in, innermost first, up to but not including the
/// daemon's own: empty for a client in the daemon's namespace, as every client outside
/// a sandbox is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peer {
    pub namespaces: Vec<u64>,
}

/// The inode of the user namespace of process `pid`.
pub fn userns_of(pid: u32) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/ns/user"))
        .ok()
        .map(|meta| meta.ino())
}

impl Peer {
    /// The peer of `socket`, or why it cannot be told (then a request to start a job is
    /// refused: it may come from inside a sandbox). The process is held by a pidfd
    /// while its namespace is read, so a pid reused meanwhile is never read instead.
    pub fn of(socket: &impl AsFd) -> Result<Peer, String> {
        let cannot = |e: io::Error| format!("cannot tell where the client connects from: {e}");
        let credentials =
            rustix::net::sockopt::socket_peercred(socket).map_err(|e| cannot(e.into()))?;
        let pid = credentials.pid.as_raw_nonzero().get();
        let pidfd = peer_pidfd(socket, pid).map_err(cannot)?;
        let namespace = File::open(format!("/proc/{pid}/ns/user")).map_err(cannot)?;
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
            return Err(cannot(io::Error::other(
                "the process that connected has exited",
            )));
        }
        let own = userns_of(std::process::id())
            .ok_or_else(|| cannot(io::Error::other("the daemon cannot read its own namespace")))?;
        let mut namespaces = Vec::new();
        let mut at = OwnedFd::from(namespace);
        for _ in 0..MAX_DEPTH {
            let inode = File::from(at.try_clone().map_err(cannot)?)
                .metadata()
                .map_err(cannot)?
                .ino();
            if inode == own {
                break;
            }
            namespaces.push(inode);
            let parent = unsafe { libc::ioctl(at.as_raw_fd(), NS_GET_PARENT) };
            if parent < 0 {
                // Above the daemon's namespace, or the top: the peer is not below it.
                break;
            }
            at = unsafe { OwnedFd::from_raw_fd(parent) };
        }
        Ok(Peer { namespaces })
    }
}

/// A pidfd of the socket's peer: from the socket itself where the kernel gives it
/// (Linux 6.5), else opened by pid, which a pid reused since the connect could mislead.
fn peer_pidfd(socket: &impl AsFd, pid: i32) -> io::Result<OwnedFd> {
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
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
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_in_the_daemons_namespace_is_in_no_sandbox() {
        let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(Peer::of(&ours), Ok(Peer::default()));
        assert!(userns_of(std::process::id()).is_some());
    }
}

//! Whether a client on the daemon's socket runs outside every sandbox (issue 30). A
//! sandboxed job's processes live in a user namespace its resident made, and no
//! process leaves its user namespace; they reach the daemon through their job's
//! channel (`channel.rs`). A connection on the socket from any namespace but the
//! daemon's own is from a process that did not come that way (it closed the channel,
//! or cleared its environment), or from a container bashd cannot tie to a job: it is
//! refused, never served as if it came from outside.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

/// `SO_PEERPIDFD` (Linux 6.5): a pidfd of the process that connected.
const SO_PEERPIDFD: libc::c_int = 77;

/// The inode of the user namespace of process `pid`.
pub fn userns_of(pid: u32) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/ns/user"))
        .ok()
        .map(|meta| meta.ino())
}

/// `Ok` when the process that connected on `socket` is in the daemon's own user
/// namespace; otherwise why the connection is refused, in the words the client
/// shows. The process is held by a pidfd while its namespace is read, so a pid reused
/// meanwhile is never read instead.
pub fn outside_sandboxes(socket: &impl AsFd) -> Result<(), String> {
    let cannot = |e: io::Error| {
        format!(
            "bashd cannot tell whether this connection comes from inside a sandbox ({e}), so it refuses it; a process of a sandboxed job reaches bashd only through its job's channel (${})",
            bashd_protocol::channel::CHANNEL_ENV
        )
    };
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
    let theirs = namespace.metadata().map_err(cannot)?.ino();
    let own = userns_of(std::process::id())
        .ok_or_else(|| cannot(io::Error::other("the daemon cannot read its own namespace")))?;
    if theirs == own {
        return Ok(());
    }
    Err(format!(
        "this connection comes from inside a sandbox (pid {pid} is in another user namespace than bashd), and not through its job's channel: a process of a sandboxed job reaches bashd only through the descriptor its job was started with (${}); one that closed it or cleared its environment is refused",
        bashd_protocol::channel::CHANNEL_ENV
    ))
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
    fn a_client_in_the_daemons_namespace_is_outside_every_sandbox() {
        let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(outside_sandboxes(&ours), Ok(()));
        assert!(userns_of(std::process::id()).is_some());
    }
}

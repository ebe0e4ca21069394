//! Who connects to a host's relay (issue 30): the relay carries a client's requests to
//! another host, where they run as the user with no sandbox of this machine around
//! them, so it serves only this user's processes outside any sandbox. A sandboxed job
//! runs in a user namespace of its own (its resident makes one before the shell), and
//! no process leaves its user namespace: one other than the relay's own means the
//! client is inside a sandbox, or somewhere else the relay cannot vouch for. The daemon
//! tells its peers apart the same way (`daemon/src/sandbox/peer.rs`).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

/// `SO_PEERPIDFD` (Linux 6.5): a pidfd of the process that connected.
const SO_PEERPIDFD: libc::c_int = 77;

/// Why the relay will not carry a client, in the words its caller is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Another user's process: the relay is this user's alone.
    OtherUser { uid: u32, me: u32 },
    /// A process inside a sandbox (or another user namespace).
    Sandboxed,
    /// Who connected cannot be told; refused, since it may be either of the above.
    Unknown(String),
}

impl Refusal {
    /// What the refused client is told about `host`'s relay.
    pub(crate) fn words(&self, host: &str) -> String {
        match self {
            Refusal::OtherUser { uid, me } => format!(
                "the relay to {host} (pid {}) serves uid {me} only, and you are uid {uid}; use a runtime dir of your own (set BASHD_RUNTIME_DIR to a directory of yours, or unset it)",
                std::process::id()
            ),
            Refusal::Sandboxed => format!(
                "this bashc runs inside a sandboxed job, and the relay to {host} carries no call from a sandbox: a command there would run outside it; call `bashc --host {host}` from outside the sandbox"
            ),
            Refusal::Unknown(why) => format!(
                "the relay to {host} cannot tell where this bashc runs ({why}), so it does not carry the call: a call from inside a sandbox must not reach {host}"
            ),
        }
    }
}

/// Checks the process at the other end of `socket`: this user's, in the relay's user
/// namespace. The process is held by a pidfd while its namespace is read, so a pid
/// reused meanwhile is never read instead.
pub(crate) fn check(socket: &impl AsFd) -> Result<(), Refusal> {
    let unknown = |e: io::Error| Refusal::Unknown(e.to_string());
    let credentials =
        rustix::net::sockopt::socket_peercred(socket).map_err(|e| unknown(io::Error::from(e)))?;
    let me = rustix::process::getuid().as_raw();
    let uid = credentials.uid.as_raw();
    if uid != me {
        return Err(Refusal::OtherUser { uid, me });
    }
    let pid = credentials.pid.as_raw_nonzero().get();
    let pidfd = peer_pidfd(socket, pid).map_err(unknown)?;
    let theirs = File::open(format!("/proc/{pid}/ns/user"))
        .and_then(|file| file.metadata())
        .map_err(unknown)?;
    // SAFETY: a signal of 0 to a pidfd this function owns checks only that it lives.
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
        return Err(Refusal::Unknown(
            "the process that connected has exited".to_owned(),
        ));
    }
    let ours = std::fs::metadata("/proc/self/ns/user").map_err(unknown)?;
    if (theirs.dev(), theirs.ino()) != (ours.dev(), ours.ino()) {
        return Err(Refusal::Sandboxed);
    }
    Ok(())
}

/// A pidfd of the socket's peer: from the socket itself where the kernel gives it
/// (Linux 6.5), else opened by pid, which a pid reused since the connect could mislead.
fn peer_pidfd(socket: &impl AsFd, pid: i32) -> io::Result<OwnedFd> {
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
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above, a new descriptor of this process.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_of_this_user_in_this_namespace_is_carried() {
        let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(check(&ours), Ok(()));
        assert!(Refusal::Sandboxed.words("box").contains("bashc --host box"));
    }
}

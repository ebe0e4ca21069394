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

/// A user namespace, as `stat` names its file: the device and inode of its nsfs file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserNamespace {
    dev: u64,
    ino: u64,
}

impl UserNamespace {
    fn of(file: &impl AsFd) -> io::Result<UserNamespace> {
        let stat = rustix::fs::fstat(file)?;
        Ok(UserNamespace {
            dev: stat.st_dev,
            ino: stat.st_ino,
        })
    }

    /// This process's own. One that never changes its user namespace (a
    /// multi-threaded process cannot) may read it once and keep it.
    pub fn own() -> io::Result<UserNamespace> {
        let meta = std::fs::metadata("/proc/self/ns/user")?;
        Ok(UserNamespace {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }
}

/// The process that connected on `socket`. It is held by a pidfd while its namespace
/// is read, so a pid reused meanwhile is never read instead; one that has exited is an
/// error.
pub fn identify(socket: &impl AsFd) -> io::Result<Peer> {
    identify_against(socket, UserNamespace::own()?)
}

/// [`identify`], with `ours` the asking process's user namespace, read once by a
/// process that asks for every connection (the daemon).
pub fn identify_against(socket: &impl AsFd, ours: UserNamespace) -> io::Result<Peer> {
    let credentials = rustix::net::sockopt::socket_peercred(socket)?;
    let pidfd = peer_pidfd(socket, credentials.pid)?;
    let pid = credentials.pid.as_raw_nonzero().get();
    let theirs = user_namespace_of(&pidfd, pid)?;
    Ok(Peer {
        pid: pid as u32,
        uid: credentials.uid.as_raw(),
        same_user_namespace: theirs == ours,
    })
}

/// [`identify_against`], and the peer's working directory as it is now, resolved
/// (symlinks and `..` gone): where the daemon lets that client's confined jobs write
/// (issue 42). Read under the same pidfd, and kept only if the process still lives
/// after the read, so a pid reused meanwhile is never read instead. The directory is
/// an error when it cannot be read (it was removed, or the process hides it).
pub fn identify_with_cwd(
    socket: &impl AsFd,
    ours: UserNamespace,
) -> io::Result<(Peer, io::Result<std::path::PathBuf>)> {
    let credentials = rustix::net::sockopt::socket_peercred(socket)?;
    let pidfd = peer_pidfd(socket, credentials.pid)?;
    let pid = credentials.pid.as_raw_nonzero().get();
    let theirs = user_namespace_of(&pidfd, pid)?;
    let peer = Peer {
        pid: pid as u32,
        uid: credentials.uid.as_raw(),
        same_user_namespace: theirs == ours,
    };
    let cwd = std::fs::canonicalize(format!("/proc/{pid}/cwd")).and_then(|cwd| {
        if alive(&pidfd) {
            Ok(cwd)
        } else {
            Err(io::Error::other("the process that connected has exited"))
        }
    });
    Ok((peer, cwd))
}

/// The user namespace of the process `pidfd` holds. Through the pidfd itself where the
/// kernel can (`PIDFD_GET_USER_NAMESPACE`, Linux 6.11), which names that process and no
/// other, and costs no lookup in /proc; else through `/proc/PID`, checked afterwards to
/// be the pidfd's process still.
fn user_namespace_of(pidfd: &OwnedFd, pid: i32) -> io::Result<UserNamespace> {
    let exited = || io::Error::other("the process that connected has exited");
    // SAFETY: the ioctl takes the pidfd this function borrows and no argument (0), and
    // returns a new descriptor or -1.
    let got = unsafe { libc::ioctl(pidfd.as_raw_fd(), libc::PIDFD_GET_USER_NAMESPACE, 0) };
    if got >= 0 {
        // SAFETY: a new descriptor the kernel just gave this process.
        let namespace = unsafe { OwnedFd::from_raw_fd(got) };
        return UserNamespace::of(&namespace);
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        // The process has exited (a zombie has no namespaces left to give).
        Some(libc::ESRCH) => return Err(exited()),
        // A kernel before 6.11: pidfds take no ioctl.
        Some(libc::ENOTTY | libc::EINVAL | libc::EOPNOTSUPP) => {}
        _ => return Err(error),
    }
    let namespace = File::open(format!("/proc/{pid}/ns/user"))?;
    if !alive(pidfd) {
        return Err(exited());
    }
    UserNamespace::of(&namespace)
}

/// Whether the process `pidfd` holds still runs (a zombie does not).
fn alive(pidfd: &OwnedFd) -> bool {
    // Through libc: rustix's pidfd_send_signal takes a `Signal`, which is never 0.
    // SAFETY: the call reads its arguments only: a pidfd this function borrows, signal
    // 0 (none is sent, the process is only checked to live), a null siginfo, which the
    // call allows, and no flags.
    let sent = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    sent == 0
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

    #[test]
    fn a_peers_working_directory_is_read_resolved() {
        let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let (peer, cwd) = identify_with_cwd(&ours, UserNamespace::own().unwrap()).unwrap();
        assert_eq!(peer.pid, std::process::id());
        assert_eq!(
            cwd.unwrap(),
            std::env::current_dir().unwrap().canonicalize().unwrap()
        );
    }

    #[test]
    fn the_pidfds_namespace_is_the_one_proc_names() {
        let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let credentials = rustix::net::sockopt::socket_peercred(&ours).unwrap();
        let pidfd = peer_pidfd(&ours, credentials.pid).unwrap();
        let pid = credentials.pid.as_raw_nonzero().get();
        assert_eq!(
            user_namespace_of(&pidfd, pid).unwrap(),
            UserNamespace::own().unwrap()
        );
    }

    #[test]
    fn a_peer_that_has_exited_is_an_error() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        let pidfd = rustix::process::pidfd_open(pid, PidfdFlags::empty()).unwrap();
        child.wait().unwrap();
        let error = user_namespace_of(&pidfd, pid.as_raw_nonzero().get()).unwrap_err();
        assert_eq!(error.to_string(), "the process that connected has exited");
    }
}

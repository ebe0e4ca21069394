//! Whether a client on the daemon's socket runs outside every sandbox (issue 30). A
//! sandboxed job's processes live in a user namespace its resident made, and no
//! process leaves its user namespace; they reach the daemon through their job's
//! channel (`channel.rs`). A connection on the socket from any namespace but the
//! daemon's own is from a process that did not come that way (it closed the channel,
//! or cleared its environment), or from a container bashd cannot tie to a job: it is
//! refused, never served as if it came from outside.

use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

use bashd_protocol::peer::UserNamespace;

use super::roots::CallerDir;

/// The inode of the user namespace of process `pid`.
pub fn userns_of(pid: u32) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/ns/user"))
        .ok()
        .map(|meta| meta.ino())
}

/// The directory of the process that connected on `socket` (`roots.rs`: its writable
/// root) when it is in the daemon's own user namespace; otherwise why the connection
/// is refused, in the words the client shows. The process is held by a pidfd while
/// its namespace and its directory are read, so a pid reused meanwhile is never read
/// instead (`bashd_protocol::peer`, which the relay's check shares).
pub fn outside_sandboxes(socket: &impl AsFd) -> Result<CallerDir, String> {
    let cannot = |e: io::Error| {
        format!(
            "bashd cannot tell whether this connection comes from inside a sandbox ({e}), so it refuses it; a process of a sandboxed job reaches bashd only through its job's channel (${})",
            bashd_protocol::channel::CHANNEL_ENV
        )
    };
    let (peer, cwd) = own_user_namespace()
        .and_then(|ours| bashd_protocol::peer::identify_with_cwd(socket, ours))
        .map_err(cannot)?;
    if peer.same_user_namespace {
        return Ok(match cwd {
            Ok(dir) => CallerDir::of(dir),
            Err(e) => {
                tracing::debug!(pid = peer.pid, "cannot read the client's directory: {e}");
                CallerDir::Unknown
            }
        });
    }
    Err(format!(
        "this connection comes from inside a sandbox (pid {} is in another user namespace than bashd), and not through its job's channel: a process of a sandboxed job reaches bashd only through the descriptor its job was started with (${}); one that closed it or cleared its environment is refused",
        peer.pid,
        bashd_protocol::channel::CHANNEL_ENV
    ))
}

/// The daemon's own user namespace, read at the first connection: a multi-threaded
/// process never changes it, and reading it costs a lookup in /proc.
fn own_user_namespace() -> io::Result<UserNamespace> {
    static OWN: OnceLock<UserNamespace> = OnceLock::new();
    if let Some(ours) = OWN.get() {
        return Ok(*ours);
    }
    let ours = UserNamespace::own()?;
    Ok(*OWN.get_or_init(|| ours))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_in_the_daemons_namespace_is_outside_every_sandbox() {
        let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let here = std::env::current_dir().unwrap().canonicalize().unwrap();
        assert_eq!(outside_sandboxes(&ours), Ok(CallerDir::of(here)));
        assert!(userns_of(std::process::id()).is_some());
    }
}

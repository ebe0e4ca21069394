//! Who connects to a host's relay (issue 30): the relay carries a client's requests to
//! another host, where they run as the user with no sandbox of this machine around
//! them, so it serves only this user's processes outside any sandbox. A sandboxed job
//! runs in a user namespace of its own (its resident makes one before the shell), and
//! no process leaves its user namespace: one other than the relay's own means the
//! client is inside a sandbox, or somewhere else the relay cannot vouch for. The daemon
//! tells its peers apart the same way (`daemon/src/sandbox/peer.rs`).

use std::os::fd::AsFd;

/// Why the relay will not carry a client, in the words its caller is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Another user's process: the relay is this user's alone.
    OtherUser { uid: u32, me: u32 },
    /// A process inside a sandbox (or another user namespace).
    Sandboxed,
    /// Who connected cannot be told; refused, since it may be either of the above.
    Unknown(String),
}

impl Refusal {
    /// What the refused client is told about `host`'s relay.
    pub fn words(&self, host: &str) -> String {
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
/// namespace (`bashd_protocol::peer`, which the daemon's check shares).
pub fn check(socket: &impl AsFd) -> Result<(), Refusal> {
    let peer =
        bashd_protocol::peer::identify(socket).map_err(|e| Refusal::Unknown(e.to_string()))?;
    let me = rustix::process::getuid().as_raw();
    if peer.uid != me {
        return Err(Refusal::OtherUser { uid: peer.uid, me });
    }
    if !peer.same_user_namespace {
        return Err(Refusal::Sandboxed);
    }
    Ok(())
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

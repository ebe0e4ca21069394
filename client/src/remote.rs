//! Reaching another host's daemon (DESIGN §14): `ssh HOST bashc bridge`, or the
//! command `[remote] bridge_command` (or `$BASHD_BRIDGE_COMMAND`) names, whose stdin and
//! stdout carry the protocol. That command is run by the host's relay (`relay.rs`),
//! which keeps it open and carries every call over it; the SSH connection under it is
//! multiplexed too (a control socket under the local runtime dir), so a new relay
//! costs an SSH session on a warm master, not a handshake.
//!
//! What goes wrong on the way is said in the user's words: an ssh that cannot log in,
//! a host without `bashc` on its PATH, a far side of another protocol version.

use std::path::{Path, PathBuf};
use std::time::Duration;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bashd_protocol::{JobId, Request};
use tokio::net::UnixStream;

use crate::client::{Client, Link};
use crate::error::ClientError;

pub use bashd_protocol::config::BRIDGE_COMMAND_ENV;

/// `[remote]` of the user's config file: how to reach a host. The daemon reads the
/// file through the same type, so the two say the same of it.
pub type RemoteConfig = bashd_protocol::config::Remote;

/// `[remote]` of `$XDG_CONFIG_HOME/bashd/config.toml` (else
/// `~/.config/bashd/config.toml`), with `$BASHD_BRIDGE_COMMAND` over it; a missing file
/// means the defaults. A broken one is refused in the daemon's words (`bashd
/// --check-config` says the same): its `[remote]` cannot be trusted either.
pub fn load_remote() -> Result<RemoteConfig, bashd_protocol::config::ConfigError> {
    bashd_protocol::config::ConfigFile::load().map(|file| file.remote.in_force())
}

/// This machine's name, as `hostname` prints it: the suffix of the remote sessions it
/// names by default.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Checks a host name before it reaches ssh's command line.
pub fn check_host(host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("--host needs a host name (as `ssh HOST` takes it)".to_owned());
    }
    if host.starts_with('-') || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{host:?} is not a host name: it must not start with - or hold spaces"
        ));
    }
    Ok(())
}

/// A connection to `host`'s daemon through the host's relay (started if none runs),
/// with the handshake done.
pub(crate) async fn connect_remote(host: &str, runtime_dir: &Path) -> Result<Client, ClientError> {
    // A relay that was ending when it took the connection (or held it in its backlog)
    // closes it unanswered, or resets it: the second try starts a new one.
    for attempt in 0..2 {
        let (stream, socket) = crate::relay::connect_relay(host, runtime_dir).await?;
        let relay = stream
            .peer_cred()
            .ok()
            .and_then(|cred| cred.pid())
            .map(|pid| (pid as u32, socket));
        let (read, write) = stream.into_split();
        match Client::handshake(read, write).await {
            Ok(mut client) => {
                client.link = Some(Arc::new(Remote {
                    host: host.to_owned(),
                    relay,
                }));
                return Ok(client);
            }
            Err(ClientError::Disconnected | ClientError::Frame(_)) if attempt == 0 => continue,
            Err(e @ (ClientError::Disconnected | ClientError::Frame(_))) => {
                let why = match e {
                    ClientError::Frame(e) => format!(" ({e})"),
                    _ => String::new(),
                };
                return Err(remote_error(
                    host,
                    format!(
                        "the relay to {host} closed the connection before bashd there answered{why}; see {}",
                        crate::relay::RelayPaths::new(
                            runtime_dir,
                            host,
                            &load_remote().unwrap_or_default()
                        )
                        .log
                        .display()
                    ),
                ));
            }
            Err(ClientError::HandshakeTimeout(after)) => {
                return Err(remote_error(
                    host,
                    format!("bashd there did not answer the handshake within {after:?}"),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    unreachable!("the loop returns on its second try")
}

pub(crate) fn remote_error(host: &str, message: String) -> ClientError {
    ClientError::Remote {
        host: host.to_owned(),
        message,
    }
}

/// A connection to another host's daemon, through this machine's relay to it.
#[derive(Debug)]
struct Remote {
    host: String,
    /// The relay that carries it, its pid and socket.
    relay: Option<(u32, PathBuf)>,
}

impl Remote {
    /// Whether the relay that carried the connection still answers: a connection it
    /// closed then ended on the far side, not on the link.
    async fn relay_answers(&self) -> bool {
        let Some((pid, socket)) = &self.relay else {
            return false;
        };
        let connected =
            tokio::time::timeout(Duration::from_secs(2), UnixStream::connect(socket)).await;
        matches!(connected, Ok(Ok(stream))
            if stream.peer_cred().ok().and_then(|cred| cred.pid()) == Some(*pid as i32))
    }
}

impl Link for Remote {
    /// Removes the owners a request names: on another host a local pid means nothing
    /// (or another process), and the bridge, which the daemon there takes as the owner
    /// of a request that names none, is the one whose end should make the session
    /// linger.
    fn prepare(&self, request: &mut Request) {
        for owner in request.owners_mut() {
            *owner = None;
        }
    }

    /// A connection closed under a running job while the relay still answers: bashd
    /// there stopped; else the link did.
    fn lost(&self, job: Option<JobId>) -> Pin<Box<dyn Future<Output = ClientError> + Send + '_>> {
        Box::pin(async move {
            let host = self.host.clone();
            match job {
                Some(job) if self.relay_answers().await => ClientError::RemoteDied { host, job },
                job => ClientError::Lost { host, job },
            }
        })
    }

    fn relay(&self) -> Option<(u32, &Path)> {
        self.relay
            .as_ref()
            .map(|(pid, socket)| (*pid, socket.as_path()))
    }
}

/// A directory under the runtime dir (`remote/`), private to the user.
pub(crate) fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir)
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// The config file every bashd program reads: `$XDG_CONFIG_HOME/bashd/config.toml`, else
/// `~/.config/bashd/config.toml`.
pub fn config_path() -> Option<PathBuf> {
    bashd_protocol::config::default_path()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_to_another_host_names_no_owner_of_this_one() {
        use bashd_protocol::{
            Caller, JobRef, JobRequest, OutputRequest, Owner, PtySize, ResizeRequest, StreamName,
        };
        let caller = Caller {
            session: "s".into(),
            owner: Some(Owner::of(std::process::id())),
        };
        let job = JobRef::Id("j1".into());
        let requests = [
            Request::Output(OutputRequest {
                job: job.clone(),
                stream: StreamName::Stdout,
                offset: 1,
                limit: None,
                caller: caller.clone(),
                any_session: false,
                max_bytes: None,
                from_end: false,
            }),
            Request::Screen(JobRequest {
                caller: caller.clone(),
                job: job.clone(),
                any_session: false,
            }),
            Request::Resize(ResizeRequest {
                caller: caller.clone(),
                job: job.clone(),
                size: PtySize::default(),
                any_session: false,
            }),
            Request::Check(JobRequest {
                caller,
                job,
                any_session: false,
            }),
        ];
        let remote = Remote {
            host: "box".to_owned(),
            relay: None,
        };
        for mut request in requests {
            remote.prepare(&mut request);
            let shown = format!("{request:?}");
            let owners: Vec<_> = request.callers().map(|caller| *caller.owner).collect();
            assert_eq!(owners, [None], "{shown}");
        }
    }

    #[test]
    fn a_host_that_looks_like_an_option_is_refused() {
        assert!(check_host("-oProxyCommand=x").is_err());
        assert!(check_host("a b").is_err());
        assert!(check_host("").is_err());
        assert!(check_host("user@build-box.example").is_ok());
    }
}

//! Which daemon a front end talks to, and the one way every front end (the CLI, `bashc
//! mcp`) reaches it.

use std::path::PathBuf;

use bashd_protocol::runtime::{self, RuntimeDirSource};

use crate::autostart::connect_or_start;
use crate::client::Client;
use crate::error::ClientError;
use crate::remote::connect_remote;

/// The variable that names the host a front end acts on when none is named
/// (`bashc --host`).
pub const HOST_ENV: &str = "BASHD_HOST";

/// The daemon a client talks to: this machine's, or another host's over an SSH channel
/// (DESIGN §14); every caller goes through [`connect`] either way.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target {
    /// The daemon of a runtime directory on this machine, started if none answers.
    Local {
        runtime_dir: PathBuf,
        /// Which rule chose the directory: a front end warns of a second daemon only
        /// when nobody named the directory on purpose.
        source: RuntimeDirSource,
    },
    /// The daemon of the same user on another host, reached through this machine's
    /// relay to it, which holds an SSH channel to `bashc bridge` there (DESIGN §14).
    Remote {
        /// As `ssh HOST` takes it: a name, `user@name`, or a `Host` of `~/.ssh/config`.
        host: String,
        /// This machine's runtime directory, which holds the relays' sockets
        /// (`remote/`) and the SSH control sockets (`ssh/`).
        runtime_dir: PathBuf,
    },
}

impl Target {
    /// This user's daemon on this machine, in the runtime directory every bashd
    /// program resolves the same way (DESIGN §2).
    pub fn local() -> Target {
        let resolved = runtime::resolve_current();
        Target::Local {
            runtime_dir: resolved.path,
            source: resolved.source,
        }
    }

    /// The daemon of `runtime_dir`, named on purpose (`--runtime-dir`).
    pub fn local_at(runtime_dir: PathBuf) -> Target {
        Target::Local {
            runtime_dir,
            source: RuntimeDirSource::Named,
        }
    }

    /// `host`'s daemon, reached from the runtime directory `local` names (for its
    /// relay and SSH control sockets). Fails for a host name ssh would take for an
    /// option.
    pub fn remote(host: &str, local: Target) -> Result<Target, String> {
        crate::remote::check_host(host)?;
        Ok(Target::Remote {
            host: host.to_owned(),
            runtime_dir: local.runtime_dir().to_owned(),
        })
    }

    /// The host of a remote target; `None` for this machine's daemon.
    pub fn host(&self) -> Option<&str> {
        match self {
            Target::Local { .. } => None,
            Target::Remote { host, .. } => Some(host),
        }
    }

    /// The runtime directory of a local target; of this machine for a remote one.
    pub fn runtime_dir(&self) -> &std::path::Path {
        match self {
            Target::Local { runtime_dir, .. } | Target::Remote { runtime_dir, .. } => runtime_dir,
        }
    }

    /// Whether the target's runtime directory was named on purpose (`--runtime-dir`,
    /// `$BASHD_RUNTIME_DIR`) rather than found.
    pub fn is_named(&self) -> bool {
        match self {
            Target::Local { source, .. } => *source == RuntimeDirSource::Named,
            Target::Remote { .. } => false,
        }
    }
}

/// A connection to `target`'s daemon, with the handshake done. A local daemon is
/// started when none answers, unless `BASHD_NO_AUTOSTART=1`; then
/// [`Client::other_daemons`] says which daemons of this user served other runtime
/// directories, and the new daemon's log names them too. Inside a sandboxed job
/// (`$BASHD_CHANNEL`), the local daemon is the job's own, reached through the job's
/// channel, whatever runtime directory is named.
pub async fn connect(target: &Target) -> Result<Client, ClientError> {
    match target {
        Target::Local { runtime_dir, .. } => match crate::channel::inherited() {
            Some(channel) => crate::channel::connect(channel?).await,
            None => connect_or_start(runtime_dir).await,
        },
        Target::Remote { host, runtime_dir } => connect_remote(host, runtime_dir).await,
    }
}

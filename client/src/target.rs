//! Which daemon a front end talks to, and the one way every front end (the CLI, `bashc
//! mcp`) reaches it.

use std::path::PathBuf;

use bashd_protocol::runtime::{self, RuntimeDirSource};

use crate::autostart::connect_or_start;
use crate::client::{Client, ClientError};

/// The daemon a client talks to. A remote host (DESIGN §14) will be a variant of its
/// own, whose stream is an SSH channel; every caller goes through [`connect`] either way.
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

    /// The runtime directory of a local target.
    pub fn runtime_dir(&self) -> &std::path::Path {
        match self {
            Target::Local { runtime_dir, .. } => runtime_dir,
        }
    }

    /// Whether the target's runtime directory was named on purpose (`--runtime-dir`,
    /// `$BASHD_RUNTIME_DIR`) rather than found.
    pub fn is_named(&self) -> bool {
        match self {
            Target::Local { source, .. } => *source == RuntimeDirSource::Named,
        }
    }
}

/// A connection to `target`'s daemon, with the handshake done. A local daemon is
/// started when none answers, unless `BASHD_NO_AUTOSTART=1`; then
/// [`Client::other_daemons`] says which daemons of this user served other runtime
/// directories, and the new daemon's log names them too.
pub async fn connect(target: &Target) -> Result<Client, ClientError> {
    match target {
        Target::Local { runtime_dir, .. } => connect_or_start(runtime_dir).await,
    }
}

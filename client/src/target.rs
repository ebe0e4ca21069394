//! Which daemon a front end talks to, and the one way every front end (the CLI, `bashc
//! mcp`) reaches it.

use std::path::PathBuf;

use bashd_protocol::runtime;

use crate::autostart::connect_or_start;
use crate::client::{Client, ClientError};

/// The daemon a client talks to. A remote host (DESIGN §14) will be a variant of its
/// own, whose stream is an SSH channel; every caller goes through [`connect`] either way.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target {
    /// The daemon of a runtime directory on this machine, started if none answers.
    Local { runtime_dir: PathBuf },
}

impl Target {
    /// This user's daemon on this machine, in the runtime directory every bashd
    /// program resolves the same way (DESIGN §2).
    pub fn local() -> Target {
        Target::Local {
            runtime_dir: runtime::runtime_dir(),
        }
    }
}

/// A connection to `target`'s daemon, with the handshake done. A local daemon is
/// started when none answers, unless `BASHD_NO_AUTOSTART=1`.
pub async fn connect(target: &Target) -> Result<Client, ClientError> {
    match target {
        Target::Local { runtime_dir } => connect_or_start(runtime_dir).await,
    }
}

//! The local transport: a Unix socket of this machine, spoken to only once its
//! directory and the process listening on it are found to be the caller's own.

use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use bashd_protocol::runtime::{self, RuntimeDirError};
use tokio::net::UnixStream;

use crate::client::Client;
use crate::error::ClientError;

impl Client {
    /// Connects to the socket at `path`, once its directory and its listener are found
    /// to be the caller's own (`connect_checked`); the handshake goes with the first
    /// request ([`Client::start`]), and a refusal is that request's error. Starts no
    /// daemon: [`crate::connect`] does, for a [`crate::Target`].
    pub async fn connect(path: &Path) -> Result<Client, ClientError> {
        let dir = path.parent().unwrap_or(Path::new("/"));
        let stream = connect_checked(path, &[dir]).await?;
        let (read, write) = stream.into_split();
        Ok(Client::start(read, write))
    }

    /// Speaks the protocol over a std socket made without a runtime (a blocking
    /// connect, one end of a pair), as [`Client::start`] does.
    pub(crate) fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<Client> {
        stream.set_nonblocking(true)?;
        let (read, write) = UnixStream::from_std(stream)?.into_split();
        Ok(Client::start(read, write))
    }
}

/// A connection to the socket at `path`, made only when each of `dirs` (the socket's
/// directory and those above it that hold it) is a real directory of the caller's,
/// mode 0700, and kept only when the process listening runs as the caller (its
/// `SO_PEERCRED`); otherwise why not, with nothing sent. Whoever can make such a
/// directory (`/tmp/bashd-$UID`, the last resort of DESIGN §2, is open to every user
/// until it exists) would otherwise get the caller's environment with its first
/// request, and choose what the command "printed". A directory that is missing is
/// said as nothing listening ([`ClientError::is_not_running`]), so that autostart
/// makes it.
pub async fn connect_checked(path: &Path, dirs: &[&Path]) -> Result<UnixStream, ClientError> {
    check_dirs(path, dirs)?;
    let stream = UnixStream::connect(path)
        .await
        .map_err(|source| ClientError::Connect {
            path: path.to_owned(),
            source,
        })?;
    check_listener(path, &stream)?;
    Ok(stream)
}

/// As [`connect_checked`], for a caller without a runtime: a std socket, in blocking
/// mode (a connect to a Unix socket waits only while its listener's backlog is full).
pub(crate) fn connect_checked_blocking(
    path: &Path,
    dirs: &[&Path],
) -> Result<std::os::unix::net::UnixStream, ClientError> {
    check_dirs(path, dirs)?;
    let stream =
        std::os::unix::net::UnixStream::connect(path).map_err(|source| ClientError::Connect {
            path: path.to_owned(),
            source,
        })?;
    check_listener(path, &stream)?;
    Ok(stream)
}

/// Each of `dirs` is the caller's own (see [`connect_checked`]).
fn check_dirs(path: &Path, dirs: &[&Path]) -> Result<(), ClientError> {
    for dir in dirs {
        match runtime::check_runtime_dir(dir) {
            Ok(()) => {}
            Err(RuntimeDirError::Inspect { source, .. })
                if source.kind() == io::ErrorKind::NotFound =>
            {
                return Err(ClientError::Connect {
                    path: path.to_owned(),
                    source,
                });
            }
            Err(e) => return Err(ClientError::UnsafeDir(e)),
        }
    }
    Ok(())
}

/// The process listening at the other end of `stream` runs as the caller.
fn check_listener(path: &Path, stream: &impl AsFd) -> Result<(), ClientError> {
    let me = rustix::process::getuid().as_raw();
    match rustix::net::sockopt::socket_peercred(stream) {
        Ok(cred) if cred.uid.as_raw() == me => Ok(()),
        Ok(cred) => Err(ClientError::NotYours {
            path: path.to_owned(),
            uid: cred.uid.as_raw(),
            me,
        }),
        // Who listens cannot be told: not spoken to, as if another user did.
        Err(errno) => {
            let source = io::Error::from(errno);
            Err(ClientError::Connect {
                path: path.to_owned(),
                source: io::Error::new(
                    source.kind(),
                    format!("cannot tell who listens there ({source}), so bashc sent nothing"),
                ),
            })
        }
    }
}

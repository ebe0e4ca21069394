//! The daemon's hold on its runtime directory: the checked directory, the `flock`ed
//! lock file that makes it the one daemon there, and the bound socket.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use bashd_protocol::runtime::{self, RuntimeDirError};
use rustix::fs::{FlockOperation, flock};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    RuntimeDir(#[from] RuntimeDirError),
    #[error(
        "another bashd (pid {pid}) is already running on {dir}; stop it first, or set BASHD_RUNTIME_DIR to use another directory"
    )]
    AlreadyRunning { pid: String, dir: PathBuf },
    #[error("cannot use lock file {path}: {source}")]
    Lock { path: PathBuf, source: io::Error },
    #[error("cannot listen on {path}: {source}")]
    Bind { path: PathBuf, source: io::Error },
}

/// Held for the daemon's whole life; [`Runtime::remove_files`] gives the directory back.
#[derive(Debug)]
pub struct Runtime {
    pub dir: PathBuf,
    pub socket_path: PathBuf,
    lock_path: PathBuf,
    /// The open lock file; the `flock` on it lasts as long as this does.
    _lock: File,
    /// The socket came from systemd (socket activation), which keeps its file.
    inherited_socket: bool,
}

impl Runtime {
    /// Checks the directory, takes the lock, and binds the socket (mode 0600),
    /// replacing a socket file that no live daemon holds; or, when systemd passed a
    /// listening socket (`inherited`), serves that one and leaves its file alone.
    pub fn acquire(
        dir: &Path,
        inherited: Option<UnixListener>,
    ) -> Result<(Runtime, UnixListener), StartError> {
        runtime::ensure_runtime_dir(dir)?;
        let lock_path = runtime::lock_path(dir);
        let lock = take_lock(dir, &lock_path)?;
        let socket_path = runtime::socket_path(dir);
        let inherited_socket = inherited.is_some();
        let listener = match inherited {
            Some(listener) => listener,
            None => bind(&socket_path).map_err(|source| StartError::Bind {
                path: socket_path.clone(),
                source,
            })?,
        };
        Ok((
            Runtime {
                dir: dir.to_owned(),
                socket_path,
                lock_path,
                _lock: lock,
                inherited_socket,
            },
            listener,
        ))
    }

    /// Removes the socket and the lock file. Called last, while the lock is still held,
    /// so no other daemon can have started on this directory in between.
    pub fn remove_files(&self) {
        let socket = (!self.inherited_socket).then_some(&self.socket_path);
        for path in socket.into_iter().chain([&self.lock_path]) {
            if let Err(e) = fs::remove_file(path)
                && e.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!("cannot remove {}: {e}", path.display());
            }
        }
    }
}

fn take_lock(dir: &Path, path: &Path) -> Result<File, StartError> {
    let lock_err = |source| StartError::Lock {
        path: path.to_owned(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(o_nofollow())
        .open(path)
        .map_err(lock_err)?;
    if let Err(e) = flock(&file, FlockOperation::NonBlockingLockExclusive) {
        if e == rustix::io::Errno::WOULDBLOCK {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let pid = pid.trim();
            return Err(StartError::AlreadyRunning {
                pid: if pid.is_empty() {
                    "unknown".into()
                } else {
                    pid.into()
                },
                dir: dir.to_owned(),
            });
        }
        return Err(lock_err(e.into()));
    }
    file.set_len(0).map_err(lock_err)?;
    writeln!(file, "{}", std::process::id()).map_err(lock_err)?;
    Ok(file)
}

fn bind(path: &Path) -> io::Result<UnixListener> {
    // We hold the lock, so a socket file here belongs to a daemon that is gone.
    match fs::remove_file(path) {
        Ok(()) => tracing::info!("replaced stale socket {}", path.display()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// `O_NOFOLLOW` for `OpenOptionsExt::custom_flags`: every file bashd opens in the
/// runtime dir is opened with it.
pub(crate) fn o_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

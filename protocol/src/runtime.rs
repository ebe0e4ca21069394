//! Where a daemon's files live (DESIGN §2), resolved the same way by `bashd` and
//! `bashc`, and the checks that make the directory safe to use.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Environment variable that names the runtime directory outright.
pub const RUNTIME_DIR_ENV: &str = "BASHD_RUNTIME_DIR";

/// `$BASHD_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/bashd`, else `/tmp/bashd-$UID`.
pub fn runtime_dir() -> PathBuf {
    let non_empty = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty(RUNTIME_DIR_ENV) {
        return PathBuf::from(dir);
    }
    if let Some(xdg) = non_empty("XDG_RUNTIME_DIR") {
        return PathBuf::from(xdg).join("bashd");
    }
    PathBuf::from(format!("/tmp/bashd-{}", rustix::process::getuid().as_raw()))
}

pub fn socket_path(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("bashd.sock")
}

pub fn lock_path(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("bashd.lock")
}

/// Held by a client while it starts a daemon, so that many clients starting at once
/// start one daemon between them.
pub fn autostart_lock_path(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("autostart.lock")
}

/// Where an autostarted daemon writes its log.
pub fn log_path(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("bashd.log")
}

pub fn sessions_dir(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join("sessions")
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeDirError {
    #[error(
        "runtime dir {0} is a symlink; bashd only uses a real directory (remove the link, or set BASHD_RUNTIME_DIR to another path)"
    )]
    Symlink(PathBuf),
    #[error(
        "runtime dir {0} is not a directory (remove it, or set BASHD_RUNTIME_DIR to another path)"
    )]
    NotADirectory(PathBuf),
    #[error(
        "runtime dir {path} belongs to uid {owner}, not to you (uid {me}); set BASHD_RUNTIME_DIR to a directory of your own"
    )]
    WrongOwner { path: PathBuf, owner: u32, me: u32 },
    #[error(
        "runtime dir {path} has mode {mode:04o}, but bashd needs 0700 so no one else can reach its socket (fix: chmod 700 {path})"
    )]
    WrongMode { path: PathBuf, mode: u32 },
    #[error("cannot create runtime dir {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
    #[error("cannot inspect runtime dir {path}: {source}")]
    Inspect { path: PathBuf, source: io::Error },
}

/// Creates the runtime directory with mode 0700 if it is missing, and otherwise checks
/// that it is a real directory of ours that nobody else can enter.
pub fn ensure_runtime_dir(path: &Path) -> Result<(), RuntimeDirError> {
    match fs::symlink_metadata(path) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let created = fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .and_then(|()| fs::set_permissions(path, fs::Permissions::from_mode(0o700)));
            if let Err(source) = created {
                return Err(RuntimeDirError::Create {
                    path: path.to_owned(),
                    source,
                });
            }
        }
        Err(source) => {
            return Err(RuntimeDirError::Inspect {
                path: path.to_owned(),
                source,
            });
        }
    }
    check_runtime_dir(path)
}

/// Checks an existing runtime directory without changing it.
pub fn check_runtime_dir(path: &Path) -> Result<(), RuntimeDirError> {
    let meta = fs::symlink_metadata(path).map_err(|source| RuntimeDirError::Inspect {
        path: path.to_owned(),
        source,
    })?;
    if meta.file_type().is_symlink() {
        return Err(RuntimeDirError::Symlink(path.to_owned()));
    }
    if !meta.is_dir() {
        return Err(RuntimeDirError::NotADirectory(path.to_owned()));
    }
    let me = rustix::process::getuid().as_raw();
    if meta.uid() != me {
        return Err(RuntimeDirError::WrongOwner {
            path: path.to_owned(),
            owner: meta.uid(),
            me,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode != 0o700 {
        return Err(RuntimeDirError::WrongMode {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_missing_dir_with_mode_0700() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        ensure_runtime_dir(&dir).unwrap();
        let mode = fs::metadata(&dir).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn refuses_symlink_and_open_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        fs::set_permissions(&real, fs::Permissions::from_mode(0o755)).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();

        let err = ensure_runtime_dir(&link).unwrap_err().to_string();
        assert!(err.contains("is a symlink"), "{err}");
        let err = ensure_runtime_dir(&real).unwrap_err().to_string();
        assert!(
            err.contains("mode 0755") && err.contains("chmod 700"),
            "{err}"
        );
    }
}

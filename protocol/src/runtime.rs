//! Where a daemon's files live (DESIGN §2), resolved the same way by `bashd`, `bashc`
//! and `bashc mcp`, and the checks that make the directory safe to use.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Environment variable that names the runtime directory outright.
pub const RUNTIME_DIR_ENV: &str = "BASHD_RUNTIME_DIR";

/// Where systemd-logind makes each user's runtime directory, `/run/user/$UID`.
pub const RUN_USER_ROOT: &str = "/run/user";

/// A runtime directory and which rule of the resolution chose it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedRuntimeDir {
    pub path: PathBuf,
    pub source: RuntimeDirSource,
}

/// Which rule of [`resolve_runtime_dir`] gave the runtime directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeDirSource {
    /// `$BASHD_RUNTIME_DIR`, or a front end's `--runtime-dir`: someone named it.
    Named,
    /// `$XDG_RUNTIME_DIR/bashd`.
    Xdg,
    /// `/run/user/$UID/bashd`, found without `XDG_RUNTIME_DIR`.
    RunUser,
    /// `/tmp/bashd-$UID`, the last resort.
    Tmp,
}

/// This process's runtime directory: [`resolve_runtime_dir`] over its environment.
pub fn runtime_dir() -> PathBuf {
    resolve_current().path
}

/// [`resolve_runtime_dir`] over this process's environment and the real `/run/user`.
pub fn resolve_current() -> ResolvedRuntimeDir {
    resolve_runtime_dir(
        |name| std::env::var_os(name),
        Path::new(RUN_USER_ROOT),
        rustix::process::getuid().as_raw(),
    )
}

/// `$BASHD_RUNTIME_DIR` (made absolute against the current directory), else `$XDG_RUNTIME_DIR/bashd`, else `<run_user>/$UID/bashd`
/// when that user directory is a real directory owned by `uid`, else `/tmp/bashd-$UID`.
///
/// The third rule is why a client that an MCP host started with a stripped
/// environment (no `XDG_RUNTIME_DIR`) still finds the daemon of the user's shells,
/// whose `XDG_RUNTIME_DIR` is `/run/user/$UID` wherever systemd-logind runs. `env`
/// reads a variable (empty counts as unset); `run_user` is `/run/user` but for tests.
pub fn resolve_runtime_dir(
    env: impl Fn(&str) -> Option<OsString>,
    run_user: &Path,
    uid: u32,
) -> ResolvedRuntimeDir {
    let non_empty = |name| env(name).filter(|v| !v.is_empty());
    let (path, source) = if let Some(dir) = non_empty(RUNTIME_DIR_ENV) {
        // A relative one is taken from the directory of the process that reads it, once,
        // so that bashc and the daemon it starts (in `/`) name the same directory.
        let dir = PathBuf::from(dir);
        (
            std::path::absolute(&dir).unwrap_or(dir),
            RuntimeDirSource::Named,
        )
    } else if let Some(xdg) = non_empty("XDG_RUNTIME_DIR") {
        (PathBuf::from(xdg).join("bashd"), RuntimeDirSource::Xdg)
    } else {
        let user_dir = run_user.join(uid.to_string());
        // Not followed through a symlink, and only the user's own: another user's
        // directory must never be taken for ours.
        let ours = fs::symlink_metadata(&user_dir).is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if ours {
            (user_dir.join("bashd"), RuntimeDirSource::RunUser)
        } else {
            (
                PathBuf::from(format!("/tmp/bashd-{uid}")),
                RuntimeDirSource::Tmp,
            )
        }
    };
    ResolvedRuntimeDir { path, source }
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

/// The name of user `uid` in `/etc/passwd`, for messages: a directory or a listener
/// of another user is named by who that is, where it can be told.
pub fn user_name(uid: u32) -> Option<String> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        (fields.nth(1)?.parse::<u32>().ok()? == uid).then(|| name.to_owned())
    })
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
        "runtime dir {path} belongs to uid {owner}{}, not to you (uid {me}); set BASHD_RUNTIME_DIR to a directory of your own, or have its owner or root remove it",
        user_name(*.owner).map(|name| format!(" ({name})")).unwrap_or_default()
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

    /// Issue 24: an MCP host that strips `XDG_RUNTIME_DIR` must not send its server to
    /// another daemon than the user's shells reach.
    #[test]
    fn without_xdg_runtime_dir_a_client_finds_the_directory_a_login_shell_would() {
        let root = tempfile::tempdir().unwrap();
        let uid = rustix::process::getuid().as_raw();
        let user_dir = root.path().join(uid.to_string());
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        let stripped = env(&[("PATH", "/usr/bin"), ("HOME", "/home/u")]);
        let tmp = PathBuf::from(format!("/tmp/bashd-{uid}"));

        // No user directory (no logind): the last resort.
        assert_eq!(resolve_runtime_dir(stripped, root.path(), uid).path, tmp);

        fs::create_dir(&user_dir).unwrap();
        let login_shell = resolve_runtime_dir(
            |name| match name {
                "XDG_RUNTIME_DIR" => Some(user_dir.clone().into_os_string()),
                _ => None,
            },
            root.path(),
            uid,
        );
        let mcp_server = resolve_runtime_dir(stripped, root.path(), uid);
        assert_eq!(mcp_server.path, login_shell.path);
        assert_eq!(mcp_server.path, user_dir.join("bashd"));
        assert_eq!(mcp_server.source, RuntimeDirSource::RunUser);
        assert_eq!(login_shell.source, RuntimeDirSource::Xdg);

        // Named outright, it wins; empty counts as unset.
        let named = resolve_runtime_dir(
            env(&[("BASHD_RUNTIME_DIR", "/r"), ("XDG_RUNTIME_DIR", "/x")]),
            root.path(),
            uid,
        );
        assert_eq!(named.path, Path::new("/r"));
        assert_eq!(named.source, RuntimeDirSource::Named);
        let empty = resolve_runtime_dir(
            env(&[("BASHD_RUNTIME_DIR", ""), ("XDG_RUNTIME_DIR", "")]),
            root.path(),
            uid,
        );
        assert_eq!(empty.path, user_dir.join("bashd"));

        // Another user's directory is never ours, nor one reached through a symlink.
        let other = uid.wrapping_add(1);
        fs::create_dir(root.path().join(other.to_string())).unwrap();
        assert_eq!(
            resolve_runtime_dir(stripped, root.path(), other).path,
            PathBuf::from(format!("/tmp/bashd-{other}"))
        );
        fs::remove_dir(&user_dir).unwrap();
        std::os::unix::fs::symlink(root.path().join(other.to_string()), &user_dir).unwrap();
        assert_eq!(resolve_runtime_dir(stripped, root.path(), uid).path, tmp);
    }

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

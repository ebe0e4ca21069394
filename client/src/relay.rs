//! The client's side of a host's relay (DESIGN §14, issue 19): one local process per
//! host and transport (`bashc relay HOST`, in the CLI) keeps one SSH channel to
//! `bashc bridge` on that host open, and carries the bashd connections of every local
//! client over it. A call then costs a round trip on the open channel, not an SSH
//! session (a fork of sshd and a login shell on the far side). This module finds the
//! relay, or starts it and waits for its word.
//!
//! The relay listens on `R/remote/<host>-<key>.sock`, where the key is a hash of the
//! transport (`[remote] bridge_command`, `bashc_path`), so a changed transport gets a
//! relay of its own. The first client that finds no relay takes `<...>.lock`, looks
//! again, and starts `bashc relay HOST` in a session of its own, which inherits the
//! locked descriptor; the relay connects, greets the bridge, listens (never over a
//! socket that answers), lets the lock go and says `ready` (or, in the user's words,
//! why not) on its stdout, which the starting client reads. So a caller that comes
//! while a relay starts waits for it, even if the client that started it has died.
//! Its log is `<...>.log`.
//!

use std::fs::OpenOptions;
use std::io::BufRead;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use bashd_protocol::runtime;
use tokio::net::UnixStream;

use crate::autostart::{detach, look_lock_start};
use crate::error::ClientError;
use crate::local::connect_checked;
use crate::remote::{RemoteConfig, ensure_private_dir, load_remote, remote_error};

/// How long the client that starts a relay waits for its word.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The descriptor of the start lock a relay inherits from the client that starts it,
/// and holds until it listens: a second caller waits for it even when the first died
/// before the relay was ready, and then finds the relay answering.
pub const RELAY_LOCK_FD_ENV: &str = "BASHD_RELAY_LOCK_FD";

/// Where the relay of a host and transport listens, locks and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayPaths {
    /// Where it listens.
    pub socket: PathBuf,
    /// The start lock: whoever holds it is starting the relay.
    pub lock: PathBuf,
    /// Its stderr.
    pub log: PathBuf,
}

impl RelayPaths {
    /// The paths of the relay to `host` by the transport `config` names, under
    /// `runtime_dir/remote/`.
    pub fn new(runtime_dir: &Path, host: &str, config: &RemoteConfig) -> RelayPaths {
        let dir = runtime_dir.join("remote");
        let key = transport_key(host, config);
        let readable: String = host
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._@-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let mut stem = format!("{readable}-{:08x}", key as u32);
        // A socket's path holds at most 107 bytes.
        if dir.join(format!("{stem}.sock")).as_os_str().len() > 100 {
            stem = format!("{key:016x}");
        }
        RelayPaths {
            socket: dir.join(format!("{stem}.sock")),
            lock: dir.join(format!("{stem}.lock")),
            log: dir.join(format!("{stem}.log")),
        }
    }
}

/// FNV-1a of the host and everything that changes how it is reached: stable across
/// builds, unlike std's hasher.
fn transport_key(host: &str, config: &RemoteConfig) -> u64 {
    let parts = [
        host,
        config.bridge_command.as_deref().unwrap_or(""),
        config.bashc_path.as_deref().unwrap_or(""),
    ];
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// A connection to `host`'s relay, started if none runs, and the relay's socket.
pub(crate) async fn connect_relay(
    host: &str,
    runtime_dir: &Path,
) -> Result<(UnixStream, PathBuf), ClientError> {
    let config = load_remote().map_err(|e| remote_error(host, e.to_string()))?;
    let paths = RelayPaths::new(runtime_dir, host, &config);
    let stream = connect_or_start(host, runtime_dir, &paths).await?;
    Ok((stream, paths.socket))
}

async fn connect_or_start(
    host: &str,
    runtime_dir: &Path,
    paths: &RelayPaths,
) -> Result<UnixStream, ClientError> {
    let dir = paths
        .socket
        .parent()
        .expect("a relay's socket is in remote/");
    // The runtime dir and its remote/ must be the caller's, and the relay the caller's
    // process, before a byte goes out: the relay sees every request, environment too.
    let dirs = [runtime_dir, dir];
    let connect = || connect_checked(&paths.socket, &dirs);
    let unreachable = |e: ClientError| match e {
        ClientError::Connect { source, .. } => remote_error(
            host,
            format!(
                "cannot connect to its relay at {}: {source}",
                paths.socket.display()
            ),
        ),
        other => remote_error(host, other.to_string()),
    };
    let look = || async {
        match connect().await {
            Ok(stream) => Ok(Some(stream)),
            Err(e) if e.is_not_running() => Ok(None),
            Err(e) => Err(unreachable(e)),
        }
    };
    let prepare = || {
        runtime::ensure_runtime_dir(runtime_dir).map_err(|e| remote_error(host, e.to_string()))?;
        ensure_private_dir(dir)
            .map_err(|e| remote_error(host, format!("cannot make {}: {e}", dir.display())))
    };
    let start = |lock: std::fs::File| async move {
        let started = start_relay(host, runtime_dir, paths, &lock).await;
        drop(lock);
        match connect().await {
            Ok(stream) => Ok(stream),
            // Why the relay did not start says more than the socket it did not make.
            Err(e) if e.is_not_running() => Err(started.err().unwrap_or_else(|| unreachable(e))),
            Err(e) => Err(unreachable(e)),
        }
    };
    let lock_error = |e| remote_error(host, e);
    look_lock_start(look, prepare, paths.lock.clone(), lock_error, start).await
}

/// Starts `bashc relay HOST` (this executable) in a session of its own and waits for
/// its word: `ready`, or why it could not reach the host.
async fn start_relay(
    host: &str,
    runtime_dir: &Path,
    paths: &RelayPaths,
    lock: &std::fs::File,
) -> Result<(), ClientError> {
    use std::os::fd::{AsRawFd, BorrowedFd};
    use std::os::unix::process::CommandExt;

    use rustix::io::FdFlags;
    let log = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(&paths.log)
        .map_err(|e| remote_error(host, format!("cannot open {}: {e}", paths.log.display())))?;
    let exe = relay_program(
        std::env::current_exe(),
        |path| path.is_file(),
        || which("bashc"),
    )
    .map_err(|why| remote_error(host, why))?;
    let mut command = std::process::Command::new(&exe);
    command
        .arg("--runtime-dir")
        .arg(runtime_dir)
        .args(["relay", "--", host])
        // A relay takes its host from its argument only.
        .env_remove(crate::target::HOST_ENV)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    // A Ctrl-C of the caller must not end the relay of every other client.
    detach(&mut command);
    // After detach's close-on-exec of every descriptor: the start lock stays open in
    // the relay, which holds it until it listens.
    let lock_fd = lock.as_raw_fd();
    command.env(RELAY_LOCK_FD_ENV, lock_fd.to_string());
    // SAFETY: fcntl is a system call, async-signal-safe; `lock_fd` is open in the
    // forked child, which inherits `lock`, held until `spawn` returns.
    unsafe {
        command.pre_exec(move || {
            rustix::io::fcntl_setfd(BorrowedFd::borrow_raw(lock_fd), FdFlags::empty())?;
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| {
        remote_error(
            host,
            format!("cannot start a relay ({}): {e}", exe.display()),
        )
    })?;
    let stdout = child.stdout.take().expect("stdout was piped above");
    let word = tokio::time::timeout(
        READY_TIMEOUT,
        tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            line
        }),
    )
    .await;
    let word = match word {
        Ok(Ok(line)) => line,
        Ok(Err(e)) => return Err(remote_error(host, e.to_string())),
        Err(_) => {
            kill_group(&mut child);
            return Err(remote_error(
                host,
                format!(
                    "ssh did not connect within {READY_TIMEOUT:?}; see {}",
                    paths.log.display()
                ),
            ));
        }
    };
    let word = word.trim_end();
    if word == "ready" {
        // Reaped when it ends, if this process is still there then.
        std::thread::spawn(move || child.wait());
        return Ok(());
    }
    let status = child.wait();
    Err(remote_error(
        host,
        match word.strip_prefix("error: ") {
            Some(why) => why.to_owned(),
            None => format!(
                "its relay ended before it was ready ({}); see {}",
                status.map_or_else(|e| e.to_string(), |s| s.to_string()),
                paths.log.display()
            ),
        },
    ))
}

/// Kills a relay that never got ready, and its ssh with it: it leads a process group
/// of its own (`detach`), where ssh is too, and ssh would outlive a relay killed alone.
fn kill_group(child: &mut std::process::Child) {
    if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    let _ = child.wait();
}

/// What a linked executable that was removed from its directory looks like in
/// `/proc/self/exe`.
const DELETED: &str = " (deleted)";

/// The bashc to run as a relay: this executable, else, once it was replaced on disk
/// (`cargo install` under a long-lived `bashc mcp`), the new one at its path, else the
/// `bashc` on the PATH; or why none can be.
fn relay_program(
    current: std::io::Result<PathBuf>,
    exists: impl Fn(&Path) -> bool,
    on_path: impl FnOnce() -> Option<PathBuf>,
) -> Result<PathBuf, String> {
    let mut replaced = None;
    if let Ok(current) = &current {
        if exists(current) {
            return Ok(current.clone());
        }
        let text = current.to_string_lossy();
        if let Some(path) = text.strip_suffix(DELETED).map(PathBuf::from) {
            if exists(&path) {
                return Ok(path);
            }
            replaced = Some(path);
        }
    }
    if let Some(found) = on_path() {
        return Ok(found);
    }
    Err(match (replaced, current) {
        (Some(path), _) => format!(
            "this bashc ({}) was removed or replaced since it started, and there is no bashc on the PATH to start a relay with: restart the MCP server (or the program running this bashc)",
            path.display()
        ),
        (None, Err(e)) => format!("cannot find this bashc to start a relay: {e}"),
        (None, Ok(path)) => format!(
            "this bashc ({}) is gone, and there is no bashc on the PATH to start a relay with: restart the MCP server (or the program running this bashc)",
            path.display()
        ),
    })
}

/// The executable `name` on the PATH.
fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .filter(|dir| dir.is_absolute())
            .map(|dir| dir.join(name))
            .find(|file| {
                std::fs::metadata(file)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_transport_has_its_own_relay() {
        let plain = RemoteConfig::default();
        let other = RemoteConfig {
            bashc_path: Some("/opt/bashc".to_owned()),
            ..RemoteConfig::default()
        };
        let a = RelayPaths::new(Path::new("/r"), "box", &plain);
        assert!(a.socket.starts_with("/r/remote"));
        assert!(a.socket.to_string_lossy().contains("/box-"), "{a:?}");
        assert_eq!(a, RelayPaths::new(Path::new("/r"), "box", &plain));
        assert_ne!(a, RelayPaths::new(Path::new("/r"), "box", &other));
        assert_ne!(a, RelayPaths::new(Path::new("/r"), "box2", &plain));
    }

    #[test]
    fn a_bashc_replaced_on_disk_starts_the_new_one_or_the_one_on_the_path() {
        let exe = || Ok(PathBuf::from("/bin/bashc"));
        let deleted = || Ok(PathBuf::from("/bin/bashc (deleted)"));
        let only = |there: &'static str| move |path: &Path| path == Path::new(there);
        let none = || None;
        let on_path = || Some(PathBuf::from("/usr/bin/bashc"));
        assert_eq!(
            relay_program(exe(), only("/bin/bashc"), none),
            Ok(PathBuf::from("/bin/bashc"))
        );
        // Replaced: the new file at the same path.
        assert_eq!(
            relay_program(deleted(), only("/bin/bashc"), none),
            Ok(PathBuf::from("/bin/bashc"))
        );
        // Removed: the one on the PATH.
        assert_eq!(
            relay_program(deleted(), only("/nowhere"), on_path),
            Ok(PathBuf::from("/usr/bin/bashc"))
        );
        let why = relay_program(deleted(), only("/nowhere"), none).unwrap_err();
        assert!(
            why.contains("this bashc (/bin/bashc) was removed or replaced")
                && why.contains("restart the MCP server"),
            "{why}"
        );
    }

    #[test]
    fn a_relay_killed_before_it_is_ready_takes_its_children_with_it() {
        let mut command = std::process::Command::new("sh");
        command
            .args(["-c", "sleep 1950 & echo $!; wait"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        detach(&mut command);
        let mut child = command.spawn().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let sleep: u32 = line.trim().parse().unwrap();
        let alive = || bashd_protocol::ProcStat::read(sleep).is_some_and(|stat| stat.alive());
        assert!(alive());
        kill_group(&mut child);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while alive() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let outlived = alive();
        if outlived {
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_raw(sleep as i32).unwrap(),
                rustix::process::Signal::KILL,
            );
        }
        assert!(!outlived, "the relay's child outlived it");
    }

    #[test]
    fn a_long_runtime_dir_still_gives_a_socket_path_that_fits() {
        let dir = PathBuf::from(format!("/{}", "d".repeat(70)));
        let paths = RelayPaths::new(&dir, &"h".repeat(60), &RemoteConfig::default());
        assert!(paths.socket.as_os_str().len() <= 107, "{paths:?}");
        let odd = RelayPaths::new(Path::new("/r"), "a/b c", &RemoteConfig::default());
        assert_eq!(odd.socket.parent(), Some(Path::new("/r/remote")));
    }
}

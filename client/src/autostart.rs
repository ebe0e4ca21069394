//! Starting the daemon when nothing answers on its socket.
//!
//! Clients that find no daemon take `autostart.lock` in the runtime directory, look
//! again, and only then start one, so any number of clients starting at once start
//! exactly one daemon; the daemon's own lock is the backstop.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bashd_protocol::runtime;
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::{FlockOperation, flock};

use crate::client::Client;
use crate::error::ClientError;
use crate::local::connect_checked_blocking;
use crate::others::{OtherDaemon, other_daemons};

/// Set to `1` to never start a daemon.
pub const AUTOSTART_ENV: &str = "BASHD_NO_AUTOSTART";

/// How long a new daemon has to start answering.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Connects to the daemon of `runtime_dir`, starting one if none answers and
/// `BASHD_NO_AUTOSTART` is not `1`.
pub(crate) async fn connect_or_start(runtime_dir: &Path) -> Result<Client, ClientError> {
    match Client::connect(&runtime::socket_path(runtime_dir)).await {
        Err(e) if e.is_not_running() => {}
        found => return found,
    }
    // The lock may be waited for and a start waits for the daemon's first answer: on a
    // thread of their own, for a runtime that serves other calls meanwhile (`bashc mcp`).
    let dir = runtime_dir.to_owned();
    let reached = tokio::task::spawn_blocking(move || reach(&dir))
        .await
        .map_err(|e| ClientError::Autostart(e.to_string()))??;
    let mut client = Client::from_std(reached.stream).map_err(|source| ClientError::Connect {
        path: runtime::socket_path(runtime_dir),
        source,
    })?;
    client.others = reached.others.map(std::sync::Arc::new);
    Ok(client)
}

/// A connection to the daemon of a runtime directory on this machine, with what
/// [`crate::Client::other_daemons`] says when it was started for it.
pub(crate) struct Reached {
    pub(crate) stream: UnixStream,
    pub(crate) others: Option<Vec<OtherDaemon>>,
}

/// As [`connect_or_start`], blocking: the blocking client's way, and the async one's
/// once nothing answered. Connect, else lock, look again, start, as
/// [`look_lock_start`] does for a host's relay.
pub(crate) fn reach(runtime_dir: &Path) -> Result<Reached, ClientError> {
    let socket = runtime::socket_path(runtime_dir);
    let look = || {
        let found = match connect_checked_blocking(&socket, &[runtime_dir]) {
            Err(e) if e.is_not_running() => return Ok(None),
            found => found?,
        };
        Ok::<_, ClientError>(Some(Reached {
            stream: found,
            others: None,
        }))
    };
    if let Some(found) = look()? {
        return Ok(found);
    }
    if std::env::var_os(AUTOSTART_ENV).is_some_and(|v| v == "1") {
        return Err(ClientError::NotRunning { path: socket });
    }
    runtime::ensure_runtime_dir(runtime_dir).map_err(|e| ClientError::Autostart(e.to_string()))?;
    let lock =
        lock_file(&runtime::autostart_lock_path(runtime_dir)).map_err(ClientError::Autostart)?;
    // Another client may have started it while this one waited for the lock.
    if let Some(found) = look()? {
        return Ok(found);
    }
    let others = other_daemons(runtime_dir);
    let stream = start_daemon(runtime_dir, &socket, &others)?;
    drop(lock);
    Ok(Reached {
        stream,
        others: Some(others),
    })
}

/// Connect, else lock, look again, start, async: how a client starts a host's relay
/// (the local daemon's start is [`reach`], the same steps on one thread), so that any
/// number of clients starting at once start exactly one. `look` connects, `None` when nothing answers;
/// `prepare` checks and makes what the start needs before the lock at `lock` is
/// taken; `start` gets the lock (to hold while it starts, or hand on to what it
/// starts) and answers the connection to what it started.
pub(crate) async fn look_lock_start<T, E, Look, Start>(
    look: impl Fn() -> Look,
    prepare: impl FnOnce() -> Result<(), E>,
    lock: PathBuf,
    lock_error: impl FnOnce(String) -> E,
    start: impl FnOnce(std::fs::File) -> Start,
) -> Result<T, E>
where
    Look: std::future::Future<Output = Result<Option<T>, E>>,
    Start: std::future::Future<Output = Result<T, E>>,
{
    if let Some(found) = look().await? {
        return Ok(found);
    }
    prepare()?;
    let lock = lock_exclusive(lock).await.map_err(lock_error)?;
    // Another client may have started it while this one waited for the lock.
    if let Some(found) = look().await? {
        return Ok(found);
    }
    start(lock).await
}

fn start_daemon(
    runtime_dir: &Path,
    socket: &Path,
    others: &[OtherDaemon],
) -> Result<UnixStream, ClientError> {
    let binary = daemon_binary();
    let log_path = runtime::log_path(runtime_dir);
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log_path)
        .map_err(|e| ClientError::Autostart(format!("cannot open {}: {e}", log_path.display())))?;
    if !others.is_empty() {
        // The daemon's log is where a user looks for why there are two; a failed write
        // costs only this line.
        let _ = writeln!(
            log,
            "bashc (pid {}) is starting bashd for {} while {}",
            std::process::id(),
            runtime_dir.display(),
            crate::others::describe(others)
        );
    }
    // Under a user systemd instance, first in a delegated scope of its own, so bashd
    // can give each job a cgroup; where that cannot start, directly.
    let mut error = None;
    for scope in [delegated_scope(), None] {
        let scoped = scope.is_some();
        // Where this start's lines begin in the log.
        let from = std::fs::metadata(&log_path).map_or(0, |meta| meta.len());
        let daemon = match spawn_daemon(&binary, runtime_dir, &log_path, scope) {
            Ok(daemon) => daemon,
            Err(e) if scoped => {
                error = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        match wait_for_daemon(&daemon, &binary, socket, &log_path, from) {
            Ok(stream) => return Ok(stream),
            Err(e) if scoped && daemon.exited() => {
                // systemd-run could not make the scope (no bus, no user manager): it
                // exited without running bashd.
                let _ = writeln!(
                    log,
                    "bashc: could not start bashd in a delegated systemd scope ({e}); starting it directly"
                );
                error = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(error.unwrap_or_else(|| ClientError::Autostart("bashd did not start".into())))
}

/// `systemd-run --user --scope -p Delegate=yes --`, where a user systemd instance
/// runs (its private socket is in `$XDG_RUNTIME_DIR/systemd`) and `systemd-run` is on
/// PATH: the daemon then runs in a scope whose cgroup it may write.
fn delegated_scope() -> Option<Command> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")?;
    if !Path::new(&runtime).join("systemd/private").exists() {
        return None;
    }
    let systemd_run = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("systemd-run"))
            .find(|candidate| candidate.is_file())
    })?;
    let mut command = Command::new(systemd_run);
    command.args([
        "--user",
        "--scope",
        "--quiet",
        "--collect",
        "--property=Delegate=yes",
        "--description=bashd, started by bashc",
        "--",
    ]);
    Some(command)
}

/// A daemon just started: not a child of this process (see [`spawn_daemon`]), watched
/// through a pidfd so that a daemon that dies before it answers is told at once.
struct Daemon {
    pid: u32,
    /// `None` when the daemon was gone before it could be opened.
    pidfd: Option<std::os::fd::OwnedFd>,
}

impl Daemon {
    /// Whether the daemon has exited (a pidfd reads ready once its process has).
    fn exited(&self) -> bool {
        let Some(pidfd) = &self.pidfd else {
            return true;
        };
        let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
        rustix::event::poll(&mut fds, Some(&Timespec::default())).is_ok_and(|ready| ready > 0)
    }
}

/// Starts `binary` (after `scope`'s command, if any) as a daemon that belongs to no
/// client: its own session, no descriptor of bashc's but its log as stderr, and no
/// longer a descendant of bashc. A double fork (bashc's child makes a new session,
/// forks the daemon and exits) reparents it to init, or to the nearest subreaper:
/// agents end their MCP server by signalling the server's whole process tree as
/// /proc shows it (OpenCode does), which would otherwise stop the daemon and every
/// session's jobs with it.
fn spawn_daemon(
    binary: &Path,
    runtime_dir: &Path,
    log_path: &Path,
    scope: Option<Command>,
) -> Result<Daemon, ClientError> {
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log_path)
        .map_err(|e| ClientError::Autostart(format!("cannot open {}: {e}", log_path.display())))?;
    let mut command = match scope {
        Some(mut scope) => {
            scope.arg(binary);
            scope
        }
        None => Command::new(binary),
    };
    command
        .env(runtime::RUNTIME_DIR_ENV, runtime_dir)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    detach(&mut command);
    // The intermediate process writes the daemon's pid here before it exits; the
    // daemon's copy of the write end closes at its exec.
    let (pid_read, pid_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| ClientError::Autostart(format!("cannot make a pipe: {e}")))?;
    let pid_fd = std::os::fd::AsRawFd::as_raw_fd(&pid_write);
    // fork and _exit through libc: rustix offers no fork for a program's own use.
    // SAFETY: between the spawn's fork and its exec, only async-signal-safe calls:
    // fork, write (a system call through rustix) and _exit; the child of this second
    // fork is the only process that goes on to exec. `pid_fd` is open in the forked
    // child: `pid_write` lives until `spawn` returns, and is inherited.
    unsafe {
        command.pre_exec(move || match libc::fork() {
            -1 => Err(std::io::Error::last_os_error()),
            0 => Ok(()),
            daemon => {
                let _ = rustix::io::write(BorrowedFd::borrow_raw(pid_fd), &daemon.to_ne_bytes());
                libc::_exit(0)
            }
        });
    }
    let mut intermediate = command.spawn().map_err(|e| {
        ClientError::Autostart(format!(
            "cannot run {}: {e} (bashc starts the bashd beside it, else the first on PATH: install it with `cargo install --locked --path daemon` in a bashd checkout, or build it with `cargo build --release`)",
            command.get_program().to_string_lossy()
        ))
    })?;
    drop(pid_write);
    // It exits right after its fork: this wait is short, and leaves no zombie.
    let _ = intermediate.wait();
    let mut bytes = [0u8; 4];
    let pid = std::io::Read::read_exact(&mut std::fs::File::from(pid_read), &mut bytes)
        .map(|()| i32::from_ne_bytes(bytes))
        .map_err(|e| {
            ClientError::Autostart(format!(
                "cannot start {}: the process that forks it said nothing ({e})",
                binary.display()
            ))
        })?;
    let pidfd = rustix::process::Pid::from_raw(pid).and_then(|pid| {
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
    });
    Ok(Daemon {
        pid: pid as u32,
        pidfd,
    })
}

/// Makes `command` start a process that outlives its caller: in a session of its own
/// (a Ctrl-C or a kill of the caller's process group does not reach it), holding no
/// descriptor of the caller's but its stdio.
pub(crate) fn detach(command: &mut Command) {
    // close_range through libc: rustix has no wrapper for it.
    // SAFETY: between the spawn's fork and its exec, only system calls, which are
    // async-signal-safe: setsid, and close_range, which takes three integers.
    unsafe {
        command.pre_exec(|| {
            rustix::process::setsid()?;
            // An agent's runtime may hand bashc descriptors without close-on-exec (a
            // pipe it waits on for EOF); a process that outlives the call must not
            // keep them.
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            Ok(())
        });
    }
}

/// Takes an exclusive lock on the file `path` (made if missing), waiting for it on a
/// blocking thread; the lock is held until the file is dropped.
pub(crate) async fn lock_exclusive(path: PathBuf) -> Result<std::fs::File, String> {
    tokio::task::spawn_blocking(move || lock_file(&path))
        .await
        .map_err(|e| e.to_string())?
}

/// As [`lock_exclusive`], waiting on this thread.
fn lock_file(path: &Path) -> Result<std::fs::File, String> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    flock(&file, FlockOperation::LockExclusive)
        .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    Ok(file)
}

/// What the daemon said last on its way out (`bashd: why`, its `main`'s last words on
/// stderr, which go to the log, and the lines after it: a config file with several
/// errors has one line each), among the lines from `from` on, so that a bad config
/// line is told where the person looks, not only in the log.
fn last_words(log_path: &Path, from: u64) -> Option<String> {
    const MOST_LINES: usize = 20;
    let log = std::fs::read(log_path).ok()?;
    let ours = log.get(usize::try_from(from).ok()?..)?;
    let text = String::from_utf8_lossy(ours);
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().rposition(|line| line.starts_with("bashd: "))?;
    let said: Vec<&str> = lines[start..].iter().take(MOST_LINES).copied().collect();
    Some(said.join("\n").trim_start_matches("bashd: ").to_owned())
}

/// Waits until the daemon just started answers on `socket`.
fn wait_for_daemon(
    daemon: &Daemon,
    binary: &Path,
    socket: &Path,
    log_path: &Path,
    from: u64,
) -> Result<UnixStream, ClientError> {
    let deadline = Instant::now() + START_TIMEOUT;
    let dir = socket.parent().unwrap_or(Path::new("/"));
    loop {
        match connect_checked_blocking(socket, &[dir]) {
            Ok(stream) => return Ok(stream),
            Err(e) if !e.is_not_running() => return Err(e),
            Err(_) => {}
        }
        if daemon.exited() {
            return Err(ClientError::Autostart(format!(
                "{} (pid {}) exited before it answered{}; see {}",
                binary.display(),
                daemon.pid,
                last_words(log_path, from)
                    .map(|said| format!(": {said}"))
                    .unwrap_or_default(),
                log_path.display()
            )));
        }
        if Instant::now() > deadline {
            return Err(ClientError::Autostart(format!(
                "{} did not answer on {} within {START_TIMEOUT:?}; see {}",
                binary.display(),
                socket.display(),
                log_path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `bashd` beside the running executable, else the first on PATH.
fn daemon_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("bashd")))
        .filter(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from("bashd"))
}

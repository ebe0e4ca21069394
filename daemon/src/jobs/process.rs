//! Spawning, signalling and reaping job processes.
//!
//! [`Reaper`] is the only code in the daemon that calls `wait*`. It also performs every
//! spawn, so a child is registered before the reaper can next look for exits: no exit
//! status is ever reaped before someone is waiting for it. Exits of processes that are
//! not job leaders (descendants reparented to the daemon, which is a child subreaper)
//! are reaped and dropped.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions, WaitStatus};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot};

/// Everything needed to start one job's shell.
#[derive(Debug)]
pub struct SpawnSpec {
    pub shell: PathBuf,
    pub command: String,
    pub workdir: PathBuf,
    /// The complete environment of the job; nothing of the daemon's own is inherited.
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    pub merge_stderr: bool,
}

/// A started job leader. Its pid is also its process group id (it called `setsid`).
#[derive(Debug)]
pub struct Spawned {
    pub pid: Pid,
    pub stdout: OwnedFd,
    /// `None` when stderr goes to the stdout pipe.
    pub stderr: Option<OwnedFd>,
    /// Resolves once, when the reaper has collected the leader.
    pub exit: oneshot::Receiver<WaitStatus>,
}

/// Asks the reaper task to spawn; cheap to clone.
#[derive(Debug, Clone)]
pub struct ReaperHandle {
    requests: mpsc::Sender<SpawnRequest>,
}

#[derive(Debug)]
struct SpawnRequest {
    spec: SpawnSpec,
    reply: oneshot::Sender<io::Result<Spawned>>,
}

impl ReaperHandle {
    pub async fn spawn(&self, spec: SpawnSpec) -> io::Result<Spawned> {
        let (reply, answer) = oneshot::channel();
        let gone = || io::Error::other("the daemon's reaper has stopped");
        self.requests
            .send(SpawnRequest { spec, reply })
            .await
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

/// The task that owns every child of the daemon.
pub struct Reaper {
    requests: mpsc::Receiver<SpawnRequest>,
    waiting: HashMap<i32, oneshot::Sender<WaitStatus>>,
}

impl Reaper {
    pub fn new() -> (Reaper, ReaperHandle) {
        let (tx, rx) = mpsc::channel(64);
        let reaper = Reaper {
            requests: rx,
            waiting: HashMap::new(),
        };
        (reaper, ReaperHandle { requests: tx })
    }

    /// Runs until every handle is dropped. The SIGCHLD stream is created before the
    /// first spawn, so no exit can go unnoticed.
    pub async fn run(mut self) -> io::Result<()> {
        let mut sigchld = signal(SignalKind::child())?;
        loop {
            // Cancelling either branch loses nothing: a pending SIGCHLD stays pending,
            // and a spawn request stays queued in the channel.
            tokio::select! {
                _ = sigchld.recv() => self.reap_all(),
                request = self.requests.recv() => match request {
                    Some(SpawnRequest { spec, reply }) => {
                        let spawned = spawn(spec).map(|(spawned, exit_tx)| {
                            self.waiting.insert(spawned.pid.as_raw_nonzero().get(), exit_tx);
                            spawned
                        });
                        let _ = reply.send(spawned);
                    }
                    None => return Ok(()),
                },
            }
        }
    }

    fn reap_all(&mut self) {
        loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => {
                    if let Some(waiter) = self.waiting.remove(&pid.as_raw_nonzero().get()) {
                        let _ = waiter.send(status);
                    }
                }
                // No child has exited yet (Ok(None)), or there are no children (ECHILD).
                Ok(None) | Err(_) => return,
            }
        }
    }
}

/// The most a job can write before the supervisor reads: a large pipe lets a fast
/// writer hand over big chunks, with fewer wake-ups on both sides.
const PIPE_BYTES: usize = 1024 * 1024;

fn output_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    // Above /proc/sys/fs/pipe-max-size this fails, and the default size is fine.
    let _ = rustix::pipe::fcntl_setpipe_size(&read, PIPE_BYTES);
    Ok((read, write))
}

fn spawn(spec: SpawnSpec) -> io::Result<(Spawned, oneshot::Sender<WaitStatus>)> {
    let (stdout_read, stdout_write) = output_pipe()?;
    let (stderr_read, stderr_write) = if spec.merge_stderr {
        (None, stdout_write.try_clone()?)
    } else {
        let (r, w) = output_pipe()?;
        (Some(r), w)
    };

    let mut command = Command::new(&spec.shell);
    command
        .arg("-c")
        .arg(&spec.command)
        .current_dir(&spec.workdir)
        .env_clear()
        .envs(
            spec.env
                .iter()
                .map(|(k, v)| (OsStr::from_bytes(k), OsStr::from_bytes(v))),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout_write))
        .stderr(Stdio::from(stderr_write));
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
        });
    }
    // The Child is dropped without waiting: the reaper collects it by pid.
    let child = command.spawn()?;
    // The write ends were moved into `command`; dropping it closes the daemon's copies,
    // so the pipes reach EOF when the job's last holder exits.
    drop(command);
    let pid = Pid::from_raw(child.id() as i32).expect("a spawned child has a positive pid");
    let (exit_tx, exit_rx) = oneshot::channel();
    Ok((
        Spawned {
            pid,
            stdout: stdout_read,
            stderr: stderr_read,
            exit: exit_rx,
        },
        exit_tx,
    ))
}

/// Sends `signal` to the process group `pgid`. Returns whether any process got it.
pub fn signal_group(pgid: Pid, signal: Signal) -> bool {
    rustix::process::kill_process_group(pgid, signal).is_ok()
}

/// Whether any process of the group `pgid` is still alive (zombies count until reaped).
pub fn group_alive(pgid: Pid) -> bool {
    rustix::process::test_kill_process_group(pgid).is_ok()
}

/// SIGTERM to the group, then SIGKILL once `grace` has passed with any of it alive.
/// Returns whether anything was alive to signal.
pub async fn terminate_group(pgid: Pid, grace: Duration) -> bool {
    if !signal_group(pgid, Signal::TERM) {
        return false;
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if !group_alive(pgid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    signal_group(pgid, Signal::KILL);
    true
}

/// Makes orphaned descendants of jobs children of the daemon, so they are reaped here
/// and never escape to init.
pub fn become_subreaper() -> io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    Ok(())
}

/// Finds `bash`: the first on the daemon's PATH, else `/bin/bash`.
pub fn find_shell() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("bash"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from("/bin/bash"))
}

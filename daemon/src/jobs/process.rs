//! Spawning and reaping job processes, and waiting for a process through its pidfd.
//!
//! [`Reaper`] is the only code in the daemon that calls `wait*`. It also performs every
//! spawn, so a child is registered before the reaper can next look for exits: no exit
//! status is ever reaped before someone is waiting for it. Exits of processes that are
//! not job leaders (descendants reparented to the daemon, which is a child subreaper)
//! are reaped and dropped. Which processes belong to a job, and signalling them, is
//! `contain/`'s.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use rustix::process::{Pid, Rlimit, WaitOptions, WaitStatus};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot};

use bashd_protocol::JobLimits;

use super::contain::resident::{self, Held, ResidentSpawn};

/// Everything needed to start one job's shell.
#[derive(Debug)]
pub struct SpawnSpec {
    pub shell: PathBuf,
    pub command: String,
    pub workdir: PathBuf,
    /// The complete environment of the job; nothing of the daemon's own is inherited.
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    pub merge_stderr: bool,
    /// Start the shell under a resident (`contain/resident.rs`) rather than directly.
    pub resident: Option<ResidentSpawn>,
    /// What the job asked to be held to; `contain` decides how.
    pub limits: JobLimits,
    /// `RLIMIT_AS` for the job, where no cgroup holds its memory.
    pub rlimit_as: Option<u64>,
    /// What confines the job, applied by its resident (`crate::sandbox`).
    pub sandbox: Option<crate::sandbox::confine::Spec>,
}

/// A started job leader: the shell. Its pid is also its process group id (it called
/// `setsid`, or its resident gave it a group of its own).
#[derive(Debug)]
pub struct Spawned {
    pub pid: Pid,
    pub stdout: OwnedFd,
    /// `None` when stderr goes to the stdout pipe.
    pub stderr: Option<OwnedFd>,
    /// Resolves once, when the reaper has collected the leader.
    pub exit: oneshot::Receiver<LeaderExit>,
    /// Field 22 of its `/proc/<pid>/stat`, for the journal; 0 if it could not be read.
    pub start_time: u64,
    /// The daemon's end of the resident's control socket, as the reaper spawned it;
    /// `contain` takes it and makes it `held`.
    pub control: Option<OwnedFd>,
    /// The resident's hold on the job, once `contain` has heard from it.
    pub held: Option<Held>,
    /// The user namespace (its inode) a sandboxed job's resident made, which every
    /// process of the job is in or below: how a request from inside the job is known.
    pub userns: Option<u64>,
}

/// How a job's leader ended, as the reaper collected it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderExit {
    /// It exited with this code.
    Code(i32),
    /// A signal of this number ended it.
    Signal(i32),
}

impl LeaderExit {
    fn from_wait(status: WaitStatus) -> LeaderExit {
        match (status.terminating_signal(), status.exit_status()) {
            (Some(signal), _) => LeaderExit::Signal(signal),
            (None, Some(code)) => LeaderExit::Code(code),
            // `wait` without WUNTRACED or WCONTINUED reports only exits and deaths by
            // signal; this is never taken.
            (None, None) => LeaderExit::Code(-1),
        }
    }

    pub fn code(self) -> Option<i32> {
        match self {
            LeaderExit::Code(code) => Some(code),
            LeaderExit::Signal(_) => None,
        }
    }

    pub fn signal(self) -> Option<i32> {
        match self {
            LeaderExit::Code(_) => None,
            LeaderExit::Signal(signal) => Some(signal),
        }
    }
}

/// Asks the reaper task to spawn; cheap to clone.
#[derive(Debug, Clone)]
pub struct ReaperHandle {
    requests: mpsc::Sender<ReaperRequest>,
}

#[derive(Debug)]
enum ReaperRequest {
    Spawn {
        // Boxed: a spec is far larger than the other requests.
        spec: Box<SpawnSpec>,
        reply: oneshot::Sender<io::Result<Spawned>>,
    },
    /// The daemon's children that it did not spawn: descendants of jobs whose parents
    /// died, handed to the daemon because it is a subreaper.
    Orphans { reply: oneshot::Sender<Vec<i32>> },
}

impl ReaperHandle {
    pub async fn spawn(&self, spec: SpawnSpec) -> io::Result<Spawned> {
        let (reply, answer) = oneshot::channel();
        let gone = || io::Error::other("the daemon's reaper has stopped");
        self.requests
            .send(ReaperRequest::Spawn {
                spec: Box::new(spec),
                reply,
            })
            .await
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    /// The pids of the daemon's orphaned children; empty if the reaper is gone.
    pub async fn orphans(&self) -> Vec<i32> {
        let (reply, answer) = oneshot::channel();
        if self
            .requests
            .send(ReaperRequest::Orphans { reply })
            .await
            .is_err()
        {
            return Vec::new();
        }
        answer.await.unwrap_or_default()
    }
}

/// The task that owns every child of the daemon.
pub struct Reaper {
    requests: mpsc::Receiver<ReaperRequest>,
    waiting: HashMap<i32, oneshot::Sender<LeaderExit>>,
    /// The open-file limit jobs get: the one the daemon started with, before it raised
    /// its own.
    job_open_files: Option<Rlimit>,
}

impl Reaper {
    pub fn new(job_open_files: Option<Rlimit>) -> (Reaper, ReaperHandle) {
        let (tx, rx) = mpsc::channel(64);
        let reaper = Reaper {
            requests: rx,
            waiting: HashMap::new(),
            job_open_files,
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
                    Some(ReaperRequest::Spawn { spec, reply }) => {
                        let spawned = spawn(*spec, self.job_open_files).map(|(spawned, exit_tx)| {
                            self.waiting.insert(spawned.pid.as_raw_nonzero().get(), exit_tx);
                            spawned
                        });
                        let _ = reply.send(spawned);
                    }
                    Some(ReaperRequest::Orphans { reply }) => {
                        let _ = reply.send(self.orphans());
                    }
                    None => return Ok(()),
                },
            }
        }
    }

    /// Children of any of the daemon's threads that are not job leaders. Reads a few
    /// small files in /proc, one per thread of the daemon.
    fn orphans(&self) -> Vec<i32> {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return Vec::new();
        };
        tasks
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("children")).ok())
            .flat_map(|children| {
                children
                    .split_ascii_whitespace()
                    .filter_map(|pid| pid.parse::<i32>().ok())
                    .collect::<Vec<_>>()
            })
            .filter(|pid| !self.waiting.contains_key(pid))
            .collect()
    }

    fn reap_all(&mut self) {
        loop {
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => {
                    if let Some(waiter) = self.waiting.remove(&pid.as_raw_nonzero().get()) {
                        let _ = waiter.send(LeaderExit::from_wait(status));
                    }
                }
                // No child has exited yet (Ok(None)), or there are no children (ECHILD).
                Ok(None) | Err(_) => return,
            }
        }
    }
}

fn output_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

fn spawn(
    spec: SpawnSpec,
    open_files: Option<Rlimit>,
) -> io::Result<(Spawned, oneshot::Sender<LeaderExit>)> {
    let (stdout_read, stdout_write) = output_pipe()?;
    let (stderr_read, stderr_write) = if spec.merge_stderr {
        (None, stdout_write.try_clone()?)
    } else {
        let (r, w) = output_pipe()?;
        (Some(r), w)
    };

    let (mut command, control) = match &spec.resident {
        // No pre_exec: std spawns with posix_spawn, without copying the daemon; the
        // resident sets up the session and the limit itself.
        Some(how) => {
            let (command, control) = resident::command(
                how,
                &spec.shell,
                &spec.command,
                &spec.workdir,
                &spec.env,
                open_files,
                spec.rlimit_as,
            )?;
            (command, Some(control))
        }
        None => (direct(&spec, open_files), None),
    };
    command
        .stdout(Stdio::from(stdout_write))
        .stderr(Stdio::from(stderr_write));
    // The Child is dropped without waiting: the reaper collects it by pid.
    let child = command.spawn()?;
    // The write ends were moved into `command`; dropping it closes the daemon's copies,
    // so the pipes reach EOF when the job's last holder exits.
    drop(command);
    let pid = Pid::from_raw(child.id() as i32).expect("a spawned child has a positive pid");
    // Read before the reaper looks for exits again: until it does, the child is at
    // worst a zombie, whose stat is still there.
    let start_time = bashd_protocol::process_start_time(child.id()).unwrap_or(0);
    let (exit_tx, exit_rx) = oneshot::channel();
    Ok((
        Spawned {
            pid,
            stdout: stdout_read,
            stderr: stderr_read,
            exit: exit_rx,
            start_time,
            control,
            held: None,
            userns: None,
        },
        exit_tx,
    ))
}

/// `bash -c COMMAND` as the job's leader, forked from the daemon (the scan mechanism).
fn direct(spec: &SpawnSpec, open_files: Option<Rlimit>) -> Command {
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
        .stdin(Stdio::null());
    let address_space = spec.rlimit_as;
    // SAFETY: setsid and setrlimit are async-signal-safe system calls, and the limits
    // are copied into the closure before the fork.
    unsafe {
        command.pre_exec(move || {
            rustix::process::setsid()?;
            if let Some(limit) = open_files {
                rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)?;
            }
            if let Some(bytes) = address_space {
                let limit = Rlimit {
                    current: Some(bytes),
                    maximum: Some(bytes),
                };
                rustix::process::setrlimit(rustix::process::Resource::As, limit)?;
            }
            Ok(())
        });
    }
    command
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

/// Waits until the process of `pidfd` has exited: a pidfd turns readable then. It
/// reaps nothing: the reaper does.
pub async fn exited(pidfd: OwnedFd) {
    // SAFETY: the AsyncFd owns the pidfd and drops it last.
    match unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) } {
        Ok(fd) => {
            let _ = fd.readable().await;
        }
        // Not pollable: nothing to wait on, so never report an exit that did not happen.
        Err(_) => std::future::pending().await,
    }
}

/// Raises the daemon's open-file limit to its hard limit: a job holds two pipes, and
/// a thousand background jobs pass the usual soft limit of 1024. Returns the limit the
/// daemon started with, for jobs to get back, when it was raised.
pub fn raise_open_files_limit() -> io::Result<Option<Rlimit>> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let original = getrlimit(Resource::Nofile);
    if original.current == original.maximum {
        return Ok(None);
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: original.maximum,
            maximum: original.maximum,
        },
    )?;
    Ok(Some(original))
}

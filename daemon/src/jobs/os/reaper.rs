//! Spawning and reaping job processes, and waiting for a process through its pidfd.
//!
//! [`Reaper`] is the only code in the daemon that calls `wait*`. It also performs every
//! spawn, so a child is registered before the reaper can next look for exits: no exit
//! status is ever reaped before someone is waiting for it. Exits of processes that are
//! not job leaders (descendants reparented to the daemon, which is a child subreaper)
//! are reaped and dropped. Which processes belong to a job, and signalling them, is
//! `contain/`'s.
//!
//! Over 600 lines: it still holds the spawn paths (scan, resident, zygote) besides
//! spawn-and-wait; issue 31's step 5 moves them to containment.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use rustix::process::{Pid, Rlimit, WaitOptions, WaitStatus};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, oneshot};

use bashd_protocol::JobLimits;

use crate::jobs::contain::resident::{Held, JOB_OOM_SCORE_ADJ, ResidentSpawn};
use crate::jobs::contain::zygote::Zygote;
use bashd_resident_core::wire::Spawn;

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
    /// Give the shell a pipe as stdin (`send` writes to it) instead of /dev/null.
    pub stdin_pipe: bool,
    /// What confines the job, applied by its resident (`crate::sandbox`).
    pub sandbox: Option<bashd_resident_core::confine::Spec>,
    /// Run the job on a new pseudo-terminal of this size (`exec --pty`) instead of
    /// pipes: `stdout` and `stdin` of [`Spawned`] are then its master.
    pub pty: Option<bashd_protocol::PtySize>,
    /// The job's end of its channel to the daemon (`sandbox/channel.rs`), which its
    /// shell inherits; the daemon's copy closes once the spawn is sent.
    pub channel: Option<OwnedFd>,
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
    /// The resident's hold on the job, once `contain` has heard from it.
    pub held: Option<Held>,
    /// The write end of the job's stdin pipe, when it has one.
    pub stdin: Option<OwnedFd>,
    /// The job runs on a terminal of this size: `stdout` and `stdin` are its master.
    pub pty: Option<bashd_protocol::PtySize>,
}

/// How a job's leader ended, as the reaper collected it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderExit {
    /// It exited with this code.
    Code(i32),
    /// A signal of this number ended it.
    Signal(i32),
}

/// A job whose resident the zygote was asked to fork: the daemon's ends of its pipes
/// and of the resident's control socket. `contain` waits there for the shell's pid.
#[derive(Debug)]
pub struct ResidentStarted {
    pub stdout: OwnedFd,
    /// `None` when stderr goes to the stdout pipe.
    pub stderr: Option<OwnedFd>,
    pub control: OwnedFd,
    /// The write end of the job's stdin pipe, when it has one.
    pub stdin: Option<OwnedFd>,
    /// The job runs on a terminal of this size: `stdout` and `stdin` are its master.
    pub pty: Option<bashd_protocol::PtySize>,
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
    /// A job's resident, forked by the zygote.
    SpawnResident {
        spec: Box<SpawnSpec>,
        reply: oneshot::Sender<io::Result<ResidentStarted>>,
    },
    /// The daemon's children that it did not spawn: descendants of jobs whose parents
    /// died, handed to the daemon because it is a subreaper.
    Orphans { reply: oneshot::Sender<Vec<i32>> },
}

impl ReaperHandle {
    /// Spawns the shell of `spec` as the daemon's child (the scan mechanism).
    pub async fn spawn(&self, spec: SpawnSpec) -> io::Result<Spawned> {
        self.ask(|reply| ReaperRequest::Spawn {
            spec: Box::new(spec),
            reply,
        })
        .await
    }

    /// Has the zygote fork a resident for `spec`, whose `resident` says how.
    pub async fn spawn_resident(&self, spec: SpawnSpec) -> io::Result<ResidentStarted> {
        self.ask(|reply| ReaperRequest::SpawnResident {
            spec: Box::new(spec),
            reply,
        })
        .await
    }

    async fn ask<T>(
        &self,
        request: impl FnOnce(oneshot::Sender<io::Result<T>>) -> ReaperRequest,
    ) -> io::Result<T> {
        let (reply, answer) = oneshot::channel();
        let gone = || io::Error::other("the daemon's reaper has stopped");
        self.requests
            .send(request(reply))
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
    /// Forks the residents; started at the first, and again if it was lost.
    zygote: Option<Zygote>,
}

impl Reaper {
    pub fn new(job_open_files: Option<Rlimit>) -> (Reaper, ReaperHandle) {
        let (tx, rx) = mpsc::channel(64);
        let reaper = Reaper {
            requests: rx,
            waiting: HashMap::new(),
            job_open_files,
            zygote: None,
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
                    Some(ReaperRequest::SpawnResident { spec, reply }) => {
                        let _ = reply.send(self.spawn_resident(*spec));
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
            .filter(|pid| self.zygote.as_ref().is_none_or(|z| z.pid() != *pid))
            .collect()
    }

    /// Sends the zygote a spawn for `spec`'s resident, starting the zygote if there is
    /// none, and again once if the one there is was lost.
    fn spawn_resident(&mut self, spec: SpawnSpec) -> io::Result<ResidentStarted> {
        let Some(how) = &spec.resident else {
            return Err(io::Error::other("a resident spawn without a resident"));
        };
        if let Some(size) = spec.pty {
            return self.spawn_resident_on_terminal(spec, size);
        }
        let pipes = JobPipes::new(spec.merge_stderr)?;
        let stdin = if spec.stdin_pipe {
            Some(output_pipe()?)
        } else {
            None
        };
        let (ours, theirs) = StdUnixStream::pair()?;
        let spawn = self.spawn_frame(&spec, how, stdin.is_some());
        let frame = spawn.encode();
        let mut fds = vec![
            theirs.as_fd(),
            pipes.stdout_write.as_fd(),
            pipes.stderr_write.as_fd(),
        ];
        fds.extend(stdin.as_ref().map(|(read, _)| read.as_fd()));
        fds.extend(spec.channel.as_ref().map(|channel| channel.as_fd()));
        self.send_to_zygote(&how.binary, &frame, &fds)?;
        // The zygote has its own copies now; the pipes reach EOF when the job's last
        // process closes them.
        Ok(ResidentStarted {
            stdout: pipes.stdout_read,
            stderr: pipes.stderr_read,
            control: OwnedFd::from(ours),
            stdin: stdin.map(|(_, write)| write),
            pty: None,
        })
    }

    /// Like [`Reaper::spawn_resident`] for a terminal job: the daemon opens the
    /// terminal, keeps its master, and sends its slave as the job's stdin, stdout and
    /// stderr (see `pty.rs` for why the daemon and not the resident).
    fn spawn_resident_on_terminal(
        &mut self,
        spec: SpawnSpec,
        size: bashd_protocol::PtySize,
    ) -> io::Result<ResidentStarted> {
        let Some(how) = &spec.resident else {
            return Err(io::Error::other("a resident spawn without a resident"));
        };
        let (master, slave) = crate::jobs::job::pty::open(size)?;
        let (ours, theirs) = StdUnixStream::pair()?;
        let mut spawn = self.spawn_frame(&spec, how, true);
        spawn.pty = true;
        let frame = spawn.encode();
        let mut fds = vec![theirs.as_fd(), slave.as_fd(), slave.as_fd(), slave.as_fd()];
        fds.extend(spec.channel.as_ref().map(|channel| channel.as_fd()));
        self.send_to_zygote(&how.binary, &frame, &fds)?;
        // The daemon's slave closes here: the master reads EIO once the job's last
        // process has let go of the terminal.
        drop(slave);
        Ok(ResidentStarted {
            stdin: Some(master.try_clone()?),
            stdout: master,
            stderr: None,
            control: OwnedFd::from(ours),
            pty: Some(size),
        })
    }

    /// The spawn frame of `spec`, less its descriptors.
    fn spawn_frame(&self, spec: &SpawnSpec, how: &ResidentSpawn, stdin_pipe: bool) -> Spawn {
        let nofile = self
            .job_open_files
            .and_then(|limit| Some((limit.current?, limit.maximum?)));
        Spawn {
            cgroup: how
                .cgroup
                .as_ref()
                .map(|dir| dir.as_os_str().as_bytes().to_vec()),
            nofile,
            rlimit_as: spec.rlimit_as,
            oom_score_adj: Some(JOB_OOM_SCORE_ADJ),
            workdir: spec.workdir.as_os_str().as_bytes().to_vec(),
            program: vec![
                spec.shell.as_os_str().as_bytes().to_vec(),
                b"-c".to_vec(),
                spec.command.clone().into_bytes(),
            ],
            env: spec
                .env
                .iter()
                .map(|(key, value)| [key.as_slice(), b"=", value].concat())
                .collect(),
            stdin_pipe,
            pty: false,
            channel: spec.channel.is_some(),
            sandbox: how
                .sandbox
                .as_ref()
                .map(|spec| spec.encode().into_encoded_bytes()),
        }
    }

    /// Sends `frame` and `fds` to the zygote, starting it if there is none, and again
    /// once if the one there is was lost.
    fn send_to_zygote(
        &mut self,
        binary: &std::path::Path,
        frame: &[u8],
        fds: &[std::os::fd::BorrowedFd<'_>],
    ) -> io::Result<()> {
        let mut last_error = None;
        for _ in 0..2 {
            let zygote = match &mut self.zygote {
                Some(zygote) => zygote,
                None => self.zygote.insert(Zygote::start(binary)?),
            };
            match zygote.send(frame, fds) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    tracing::warn!(
                        "the zygote that forks job residents was lost ({e}); starting another"
                    );
                    if let Some(lost) = self.zygote.take() {
                        lost.kill();
                    }
                    last_error = Some(e);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("the zygote could not be reached")))
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

/// A job's stdout and stderr pipes: the daemon's read ends and the job's write ends.
struct JobPipes {
    stdout_read: OwnedFd,
    stdout_write: OwnedFd,
    /// `None` when stderr goes to the stdout pipe.
    stderr_read: Option<OwnedFd>,
    /// The stdout pipe again when stderr is merged into it.
    stderr_write: OwnedFd,
}

impl JobPipes {
    fn new(merge_stderr: bool) -> io::Result<JobPipes> {
        let (stdout_read, stdout_write) = output_pipe()?;
        let (stderr_read, stderr_write) = if merge_stderr {
            (None, stdout_write.try_clone()?)
        } else {
            let (r, w) = output_pipe()?;
            (Some(r), w)
        };
        Ok(JobPipes {
            stdout_read,
            stdout_write,
            stderr_read,
            stderr_write,
        })
    }
}

/// Spawns `bash -c COMMAND` as the daemon's child (the scan mechanism).
fn spawn(
    spec: SpawnSpec,
    open_files: Option<Rlimit>,
) -> io::Result<(Spawned, oneshot::Sender<LeaderExit>)> {
    if let Some(size) = spec.pty {
        return spawn_on_terminal(spec, open_files, size);
    }
    let pipes = JobPipes::new(spec.merge_stderr)?;
    // The job's stdin pipe: the daemon keeps the write end (close-on-exec), the shell
    // reads the other.
    let stdin = if spec.stdin_pipe {
        Some(output_pipe()?)
    } else {
        None
    };
    let mut command = direct(&spec, open_files);
    if let Some((read, _)) = &stdin {
        command.stdin(Stdio::from(read.try_clone()?));
    }
    command
        .stdout(Stdio::from(pipes.stdout_write))
        .stderr(Stdio::from(pipes.stderr_write));
    // The Child is dropped without waiting: the reaper collects it by pid.
    let spawned = command.spawn();
    let (stdin_read, stdin_write) = stdin.unzip();
    drop(stdin_read);
    let child = spawned?;
    // The write ends were moved into `command`; dropping it closes the daemon's copies,
    // so the pipes reach EOF when the job's last holder exits.
    drop(command);
    Ok(spawned_shell(
        &child,
        pipes.stdout_read,
        pipes.stderr_read,
        stdin_write,
        None,
    ))
}

/// The [`Spawned`] of a shell the daemon has just started, and the sender of its exit
/// for the reaper.
fn spawned_shell(
    child: &std::process::Child,
    stdout: OwnedFd,
    stderr: Option<OwnedFd>,
    stdin: Option<OwnedFd>,
    pty: Option<bashd_protocol::PtySize>,
) -> (Spawned, oneshot::Sender<LeaderExit>) {
    let pid = Pid::from_raw(child.id() as i32).expect("a spawned child has a positive pid");
    // Read before the reaper looks for exits again: until it does, the child is at
    // worst a zombie, whose stat is still there.
    let start_time = bashd_protocol::process_start_time(child.id()).unwrap_or(0);
    let (exit_tx, exit_rx) = oneshot::channel();
    let spawned = Spawned {
        pid,
        stdout,
        stderr,
        exit: exit_rx,
        start_time,
        held: None,
        stdin,
        pty,
    };
    (spawned, exit_tx)
}

/// [`spawn`] for a terminal job: the slave is the shell's stdin, stdout and stderr and
/// becomes its controlling terminal; the daemon keeps the master.
fn spawn_on_terminal(
    spec: SpawnSpec,
    open_files: Option<Rlimit>,
    size: bashd_protocol::PtySize,
) -> io::Result<(Spawned, oneshot::Sender<LeaderExit>)> {
    let (master, slave) = crate::jobs::job::pty::open(size)?;
    let mut command = direct(&spec, open_files);
    command
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave));
    // SAFETY: one ioctl, async-signal-safe; it runs after `direct`'s setsid.
    unsafe {
        command.pre_exec(|| {
            if libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    drop(command);
    let stdin = master.try_clone()?;
    Ok(spawned_shell(&child, master, None, Some(stdin), Some(size)))
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

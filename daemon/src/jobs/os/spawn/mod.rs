//! A job's spawn, composed of steps (issue 31), as process-wrap composes its wrappers
//! on a core that knows none of them. The core, [`Launch`], knows what runs (the
//! shell, its command, workdir and environment) and the job's stdio: /dev/null in and
//! a pipe to the daemon for stdout and stderr unless a step gave it others. Each
//! optional part is a [`Step`] in a file of its own that adds to the launch:
//! `stdin.rs` (a pipe for stdin), `pty.rs` (a terminal instead of the pipes),
//! `limits.rs` (rlimits and the OOM score), `cgroup.rs` (the job's cgroup) and
//! `sandbox.rs` (the confinement and the job's channel to the daemon).
//!
//! A launch has one of two targets, and a step says what it adds to each: a frame for
//! the zygote, which forks the job's resident and the resident the shell
//! (`contain/zygote.rs`); or a [`Command`] the reaper forks from the daemon (the scan
//! mechanism, [`Launch::spawn_direct`]). Containment (`contain/mod.rs`) chooses the
//! target and the steps; the reaper only spawns and waits.

mod cgroup;
mod limits;
mod pty;
mod sandbox;
mod stdin;

pub use cgroup::Cgroup;
pub use limits::{Limits, raise_open_files_limit};
pub use pty::Terminal;
pub use sandbox::Sandbox;
pub use stdin::StdinPipe;

use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use rustix::process::Pid;
use tokio::sync::oneshot;

use bashd_protocol::{JobLimits, PtySize};
use bashd_resident_core::confine;
use bashd_resident_core::wire::Spawn;

use crate::jobs::contain::resident::Held;
use crate::jobs::os::reaper::{LeaderExit, ReaperHandle};

/// What a job asks to be started as; containment turns it into a [`Launch`] and its
/// steps.
#[derive(Debug)]
pub struct SpawnSpec {
    pub shell: PathBuf,
    pub command: String,
    pub workdir: PathBuf,
    /// The complete environment of the job; nothing of the daemon's own is inherited.
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    pub merge_stderr: bool,
    /// What the job asked to be held to; `contain` decides how.
    pub limits: JobLimits,
    /// Give the shell a pipe as stdin (`send` writes to it) instead of /dev/null.
    pub stdin_pipe: bool,
    /// What confines the job, applied by its resident (`crate::sandbox`).
    pub sandbox: Option<confine::Spec>,
    /// Run the job on a new pseudo-terminal of this size (`exec --pty`) instead of
    /// pipes: `stdout` and `stdin` of [`Spawned`] are then its master.
    pub pty: Option<PtySize>,
    /// The job's end of its channel to the daemon (`sandbox/channel.rs`), which its
    /// shell inherits; the daemon's copy closes once the spawn is sent.
    pub channel: Option<OwnedFd>,
    /// The session network the job shares (`sandbox/network.rs`), whose namespaces
    /// its spawn frame carries.
    pub network: Option<std::sync::Arc<crate::sandbox::network::SessionNetwork>>,
}

/// A started job leader: the shell. Its pid is also its process group id (it called
/// `setsid`, or its resident gave it a group of its own).
#[derive(Debug)]
pub struct Spawned {
    pub pid: Pid,
    pub stdout: OwnedFd,
    /// `None` when stderr goes to the stdout pipe.
    pub stderr: Option<OwnedFd>,
    /// Resolves once, when the leader has been reaped.
    pub exit: oneshot::Receiver<LeaderExit>,
    /// Field 22 of its `/proc/<pid>/stat`, for the journal; 0 if it could not be read.
    pub start_time: u64,
    /// The resident's hold on the job, once `contain` has heard from it.
    pub held: Option<Held>,
    /// The write end of the job's stdin pipe, when it has one.
    pub stdin: Option<OwnedFd>,
    /// The job runs on a terminal of this size: `stdout` and `stdin` are its master.
    pub pty: Option<PtySize>,
    /// It runs in a session network, counted there until its record drops it.
    pub in_network: Option<crate::sandbox::network::InNetwork>,
}

/// One optional part of a job's spawn. It adds what it needs to the launch for its
/// target, and may refuse a target it cannot serve; steps are added in order, and a
/// later one may take the place of what an earlier one gave the job's stdio.
pub trait Step {
    fn add_to(self, launch: &mut Launch) -> io::Result<()>;
}

/// A step that was not asked for adds nothing.
impl<S: Step> Step for Option<S> {
    fn add_to(self, launch: &mut Launch) -> io::Result<()> {
        match self {
            Some(step) => step.add_to(launch),
            None => Ok(()),
        }
    }
}

/// One job's spawn as its steps build it.
#[derive(Debug)]
pub struct Launch {
    target: Target,
    merge_stderr: bool,
    /// The job's stdio; `None` leaves the core's: /dev/null for stdin, a pipe to the
    /// daemon for stdout and stderr.
    job: Slots,
    /// The daemon's ends of what the steps gave the job.
    ours: Slots,
    /// The job runs on a terminal of this size (`pty.rs`).
    pty: Option<PtySize>,
}

/// Where a launch goes: what each step adds to.
#[derive(Debug)]
enum Target {
    /// Forked by the zygote under a resident: the frame it is sent, and the
    /// descriptors that follow the job's stdio, in the frame's order.
    Resident { frame: Spawn, more: Vec<OwnedFd> },
    /// Forked by the daemon's reaper (the scan mechanism).
    Direct(Command),
}

/// Stdin, stdout and stderr, each set or left to the core.
#[derive(Debug, Default)]
struct Slots {
    stdin: Option<OwnedFd>,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
}

/// The daemon's ends of a launched job's stdio.
#[derive(Debug)]
pub struct Ends {
    pub stdout: OwnedFd,
    /// `None` when stderr goes to the stdout pipe, or to the terminal.
    pub stderr: Option<OwnedFd>,
    pub stdin: Option<OwnedFd>,
    pub pty: Option<PtySize>,
}

impl Launch {
    /// A launch through the zygote, under a resident.
    pub fn resident(spec: &SpawnSpec) -> Launch {
        let frame = Spawn {
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
            ..Spawn::default()
        };
        Launch::new(
            Target::Resident {
                frame,
                more: Vec::new(),
            },
            spec.merge_stderr,
        )
    }

    /// A launch of `bash -c COMMAND` forked from the daemon, leading a session of its
    /// own (the scan mechanism).
    pub fn direct(spec: &SpawnSpec) -> Launch {
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
            );
        // SAFETY: setsid and close_range are async-signal-safe system calls and the
        // closure touches no memory of the parent; it runs first, before the steps' own
        // (`pty.rs` needs it).
        unsafe {
            command.pre_exec(|| {
                rustix::process::setsid()?;
                // What the daemon was started with and did not mark close-on-exec is
                // not the job's. Marked, not closed: std's pipe that reports a failed
                // exec must stay open until the exec. Linux 5.11; an older kernel
                // leaves them be.
                libc::syscall(
                    libc::SYS_close_range,
                    3 as libc::c_uint,
                    libc::c_uint::MAX,
                    libc::CLOSE_RANGE_CLOEXEC,
                );
                Ok(())
            });
        }
        Launch::new(Target::Direct(command), spec.merge_stderr)
    }

    fn new(target: Target, merge_stderr: bool) -> Launch {
        Launch {
            target,
            merge_stderr,
            job: Slots::default(),
            ours: Slots::default(),
            pty: None,
        }
    }

    /// Adds `step` to the launch.
    pub fn add(&mut self, step: impl Step) -> io::Result<&mut Launch> {
        step.add_to(self)?;
        Ok(self)
    }

    /// The frame for the zygote, the job's descriptors in the frame's order (stdout,
    /// stderr, then stdin and the rest when the frame says so; the resident's control
    /// socket goes before them) and the daemon's ends.
    pub fn into_frame(mut self) -> io::Result<(Spawn, Vec<OwnedFd>, Ends)> {
        let (stdout, stderr) = self.output()?;
        let Target::Resident { mut frame, more } = self.target else {
            return Err(io::Error::other("a forked job's launch sent to the zygote"));
        };
        frame.stdin_pipe = self.job.stdin.is_some();
        let mut fds = Vec::with_capacity(4 + more.len());
        fds.extend([stdout, stderr]);
        fds.extend(self.job.stdin);
        fds.extend(more);
        Ok((frame, fds, self.ours.into_ends(self.pty)))
    }

    /// Forks the job's shell from the daemon, through the reaper, which waits for it.
    pub async fn spawn_direct(mut self, reaper: &ReaperHandle) -> io::Result<Spawned> {
        let (stdout, stderr) = self.output()?;
        let Target::Direct(mut command) = self.target else {
            return Err(io::Error::other("a resident's launch forked by the daemon"));
        };
        command
            .stdin(self.job.stdin.map_or_else(Stdio::null, Stdio::from))
            .stdout(stdout)
            .stderr(stderr);
        // The reaper drops the command once it has forked: that closes the daemon's
        // copies of the job's ends, so the pipes reach EOF when the job's last holder
        // exits.
        let child = reaper.spawn(command).await?;
        let ends = self.ours.into_ends(self.pty);
        Ok(Spawned {
            pid: child.pid,
            stdout: ends.stdout,
            stderr: ends.stderr,
            exit: child.exit,
            start_time: child.start_time,
            held: None,
            stdin: ends.stdin,
            pty: ends.pty,
            in_network: None,
        })
    }

    /// The job's stdout and stderr: what a step gave it, else a pipe to the daemon
    /// (one for both when stderr is merged).
    fn output(&mut self) -> io::Result<(OwnedFd, OwnedFd)> {
        if let (Some(stdout), Some(stderr)) = (self.job.stdout.take(), self.job.stderr.take()) {
            return Ok((stdout, stderr));
        }
        let (read, stdout) = pipe()?;
        self.ours.stdout = Some(read);
        let stderr = if self.merge_stderr {
            stdout.try_clone()?
        } else {
            let (read, write) = pipe()?;
            self.ours.stderr = Some(read);
            write
        };
        Ok((stdout, stderr))
    }
}

impl Slots {
    fn into_ends(self, pty: Option<PtySize>) -> Ends {
        Ends {
            stdout: self
                .stdout
                .expect("a step that gives the job its output keeps the daemon's end, and the core's pipes are made before the ends are taken"),
            stderr: self.stderr,
            stdin: self.stdin,
            pty,
        }
    }
}

/// A pipe whose ends both close on exec: (read, write).
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
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

//! Containment (DESIGN §4): which processes belong to a job, when the last of them has
//! exited, and how they are all ended. This module is the one place that decides it;
//! the supervisor of a job asks through [`JobProcesses`], and recovery through
//! [`end_dead_jobs`]. Nothing else signals a job's processes.
//!
//! The daemon chooses a mechanism at start ([`Plan::choose`], then [`Containment`]),
//! spawns each job through it ([`Containment::spawn`], which picks the spawn's steps
//! in `jobs/os/spawn/`) and gets the job's processes from it ([`Containment::job`])
//! once its shell runs:
//!
//! - `resident.rs` (the default): the job's first process is `bashd-resident`, a
//!   child subreaper that forks the shell, so whatever the job starts stays in its
//!   subtree; the job ends when the resident says none of it is left, `terminate`
//!   orders the resident to signal its subtree, and the resident kills it by itself
//!   when the daemon's end of its socket closes. The zygote (`zygote.rs`) forks each
//!   job's resident.
//! - `cgroup.rs`, with the resident where the daemon has a cgroup root: the job's
//!   cgroup, made before the spawn, into which the resident clones the shell
//!   (`CLONE_INTO_CGROUP`); `cgroup.kill` ends it, its limits are written there, and recovery kills
//!   what is left in a dead instance's job cgroups.
//! - `scan.rs`: the job's process group, while its leader is unreaped, and every
//!   process of the daemon's uid whose environment carries the job's `BASHD_JOB`
//!   cookie, found by reading `/proc` (`proc.rs`, whose [`Scanner`] shares one read
//!   among every scan asked for before it began) and signalled through pidfds. A job's
//!   escapees whose parents died are reparented to the daemon (a subreaper), so
//!   "anything left after the leader" asks the reaper for the daemon's orphans. It
//!   relies on marks a process can shed (`setsid` and a cleared environment), so it
//!   is the mechanism only by `[containment] mechanism = "scan"` or without the
//!   resident binary; otherwise it stands behind a resident that was killed, and
//!   serves recovery.
//!
//! A new mechanism is a file of its own, a variant of [`Containment`] and of
//! [`Contained`], and an arm in each match below; the supervisor does not change.

pub mod cgroup;
mod proc;
pub mod resident;
mod scan;
pub mod zygote;

use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::process::{Rlimit, Signal};

use bashd_protocol::{Argument, ErrorHint, ErrorKind, ErrorReply, JobId, JobLimits};

use crate::config::{ContainmentConfig, Mechanism};
use crate::jobs::os::reaper::ReaperHandle;
use crate::jobs::os::spawn::{
    Cgroup, Launch, Limits, Sandbox, SpawnSpec, Spawned, StdinPipe, Terminal,
};
use crate::journal::OpenJob;
use crate::sandbox::Support;
use cgroup::CgroupRoot;
pub use proc::Scanner;
use resident::ResidentJob;
use zygote::Zygote;

/// The processes of one running job, as the supervisor sees them: its own mechanism
/// (below), or a fake in tests.
pub trait JobProcesses: Send + Sync + 'static {
    /// Whether anything of the job outlived its leader; asked once the leader has
    /// been reaped and its pipes have had a moment to close.
    fn outlived_leader(&self) -> impl Future<Output = bool> + Send;

    /// Resolves when the last process of the job has exited; asked once the leader
    /// has been reaped. Dropping it before then loses nothing.
    fn all_exited(&self) -> impl Future<Output = ()> + Send;

    /// Ends every process of the job: `signal`, `grace` for them to go, then SIGKILL
    /// until none is left. `leader` says whether the leader's pid (and so its group id)
    /// still names the job's process.
    fn terminate(
        &self,
        signal: Signal,
        grace: Duration,
        leader: Leader,
    ) -> impl Future<Output = ()> + Send;

    /// What the job's processes used, once all of them have ended; `None` for a
    /// figure the mechanism cannot measure.
    fn usage(&self) -> Usage {
        Usage::default()
    }
}

/// What an ended job's processes used, as far as its mechanism can tell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_user_us: Option<u64>,
    pub cpu_system_us: Option<u64>,
    pub peak_rss_bytes: Option<u64>,
    /// The kernel killed a process of the job for memory: its own limit (`Some(bytes)`)
    /// or the system's (`None`).
    pub oom_killed: Option<Option<u64>>,
}

/// Whether the job's leader has been reaped. Until it is, its pid cannot have been
/// reused, so its process group may be signalled by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leader {
    Unreaped,
    Reaped,
}

/// How this daemon contains its jobs, chosen once at start.
#[derive(Debug, Clone)]
pub enum Containment {
    /// Process group and cookie scan (`scan.rs`).
    Scan {
        scanner: Scanner,
        reaper: ReaperHandle,
        /// The open-file limit jobs get back (`spawn/limits.rs`).
        open_files: Option<Rlimit>,
    },
    /// A resident per job (`resident.rs`), forked by the zygote, each job in a cgroup
    /// of its own under `cgroup` where the daemon has one (`cgroup.rs`); the scan
    /// behind them.
    Resident {
        zygote: Zygote,
        cgroup: Option<CgroupRoot>,
        /// Why `cgroup` is `None`, for `bashc status`; shared, as the enum is cloned.
        no_cgroup: Option<std::sync::Arc<String>>,
        instance: String,
        scanner: Scanner,
        reaper: ReaperHandle,
        open_files: Option<Rlimit>,
        /// What the resident can confine jobs by, probed at start.
        sandbox: Support,
    },
}

/// Where a job's limits were set, for the words of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitsFrom {
    Request,
    Config,
}

/// The mechanism chosen at start, before the reaper and scanner exist (recovery needs
/// the cgroup root first).
#[derive(Debug)]
pub enum Plan {
    Scan,
    Resident {
        binary: std::path::PathBuf,
        cgroup: Option<CgroupRoot>,
        /// Why `cgroup` is `None`.
        no_cgroup: Option<std::sync::Arc<String>>,
        sandbox: Support,
    },
}

impl Plan {
    /// What `[containment]` asks for and the system allows. An explicit cgroup that
    /// cannot be used stops the daemon (the user asked for it); a delegated one that
    /// cannot is logged and done without; a missing `bashd-resident` leaves the scan.
    pub fn choose(config: &ContainmentConfig) -> Result<Plan, String> {
        if config.mechanism == Mechanism::Scan {
            return Ok(Plan::Scan);
        }
        let Some(binary) = resident::find_binary() else {
            tracing::warn!(
                "bashd-resident is not beside bashd; jobs are contained by process group and cookie only, which a job can shed (install both binaries together)"
            );
            return Ok(Plan::Scan);
        };
        let cgroup = match &config.cgroup {
            Some(dir) => Some(Ok(CgroupRoot::take(dir).map_err(|e| {
                format!("{e} (containment.cgroup in the config names a cgroup v2 directory bashd may write; fix it or remove the key)")
            })?)),
            None => CgroupRoot::delegated().map(|dir| {
                CgroupRoot::take(&dir).map_err(|e| {
                    tracing::warn!("not using the delegated cgroup: {e}");
                    format!("its delegated cgroup could not be taken: {e}")
                })
            }),
        };
        let (cgroup, no_cgroup) = match cgroup {
            Some(Ok(root)) => (Some(root), None),
            Some(Err(why)) => (None, Some(cgroup::why_no_cgroup(Some(why)).into())),
            None => (None, Some(cgroup::why_no_cgroup(None).into())),
        };
        // Before the reaper runs, which would collect the probe's exit.
        let sandbox = Support::probe(&binary);
        Ok(Plan::Resident {
            binary,
            cgroup,
            no_cgroup,
            sandbox,
        })
    }

    pub fn cgroup(&self) -> Option<&CgroupRoot> {
        match self {
            Plan::Resident { cgroup, .. } => cgroup.as_ref(),
            Plan::Scan => None,
        }
    }

    /// The mechanism, running; `open_files` is what jobs get back of the open-file
    /// limit the daemon raised.
    pub fn start(
        self,
        instance: String,
        scanner: Scanner,
        reaper: ReaperHandle,
        open_files: Option<Rlimit>,
    ) -> Containment {
        match self {
            Plan::Scan => Containment::Scan {
                scanner,
                reaper,
                open_files,
            },
            Plan::Resident {
                binary,
                cgroup,
                no_cgroup,
                sandbox,
            } => Containment::Resident {
                zygote: Zygote::new(binary, reaper.clone()),
                cgroup,
                no_cgroup,
                instance,
                scanner,
                reaper,
                open_files,
                sandbox,
            },
        }
    }
}

impl Containment {
    /// What `bashc status` says: `cgroup <path>`, `subreaper` or `scan`.
    pub fn describe(&self) -> String {
        match self {
            Containment::Scan { .. } => "scan".to_owned(),
            Containment::Resident {
                cgroup: Some(root), ..
            } => format!("cgroup {}", root.dir().display()),
            Containment::Resident { cgroup: None, .. } => "subreaper".to_owned(),
        }
    }

    /// Why jobs get no cgroup, when they get none under a resident (`subreaper`).
    pub fn why_no_cgroup(&self) -> Option<String> {
        match self {
            Containment::Resident { no_cgroup, .. } => no_cgroup.as_deref().cloned(),
            Containment::Scan { .. } => None,
        }
    }

    /// Whether a cgroup holds a job's memory here; else a memory limit is the address
    /// space's rlimit (`spawn`).
    pub fn memory_by_cgroup(&self) -> bool {
        match self {
            Containment::Resident {
                cgroup: Some(root), ..
            } => root.has("memory"),
            Containment::Resident { cgroup: None, .. } | Containment::Scan { .. } => false,
        }
    }

    /// What this daemon's jobs can be confined by: the resident's probe, or nothing on
    /// the scan path.
    pub fn sandbox(&self) -> Support {
        match self {
            Containment::Resident { sandbox, .. } => sandbox.clone(),
            Containment::Scan { .. } => Support::NoResident(
                "[containment] mechanism = \"scan\" in its config, or no bashd-resident beside bashd".to_owned(),
            ),
        }
    }

    /// Whether `limits` can be enforced here, each by its cgroup controller or the
    /// nearest rlimit; the refusal names what is missing, where the limit was set and
    /// what to do.
    /// A limit the request asked for is named by its hint, for the front end to spell
    /// with the way to run the job without it.
    pub fn check_limits(&self, limits: &JobLimits, from: LimitsFrom) -> Result<(), ErrorReply> {
        let root = match self {
            Containment::Resident { cgroup, .. } => cgroup.as_ref(),
            Containment::Scan { .. } => None,
        };
        let has = |controller: &str| root.is_some_and(|root| root.has(controller));
        let missing = |argument: Argument, key: &str, controller: &str| {
            let needs = format!(
                "needs the cgroup v2 {controller} controller, which bashd does not have here (containment: {}); give bashd a cgroup with it delegated ([containment] cgroup in its config, or systemd's Delegate=yes)",
                self.describe()
            );
            match from {
                LimitsFrom::Request => {
                    ErrorReply::new(ErrorKind::InvalidRequest, format!("a {key} limit {needs}"))
                        .with_hint(ErrorHint::ControllerMissing { argument })
                }
                LimitsFrom::Config => ErrorReply::new(
                    ErrorKind::InvalidRequest,
                    format!(
                        "[limits] {key} in bashd's config {needs}, or remove {key} from [limits]"
                    ),
                ),
            }
        };
        if limits.cpu_millicores.is_some() && !has("cpu") {
            return Err(missing(Argument::Cpu, "cpu", "cpu"));
        }
        if limits.pids.is_some() && !has("pids") {
            return Err(missing(Argument::Pids, "pids", "pids"));
        }
        // Memory always has RLIMIT_AS to fall back on.
        Ok(())
    }

    /// Spawns job `job`'s shell: forked by the daemon on the scan path, else by the
    /// zygote under a resident, in the job's cgroup where the mechanism has them.
    /// Returns once the shell runs.
    pub async fn spawn(&self, job: JobId, spec: SpawnSpec) -> io::Result<Spawned> {
        match self {
            Containment::Scan {
                reaper, open_files, ..
            } => {
                let limits = Limits {
                    open_files: *open_files,
                    address_space: spec.limits.memory_bytes,
                };
                let mut launch = Launch::direct(&spec);
                add_steps(&mut launch, spec, limits, None, None)?;
                launch.spawn_direct(reaper).await
            }
            Containment::Resident {
                zygote,
                cgroup,
                instance,
                open_files,
                ..
            } => {
                let job_cgroup = match cgroup {
                    Some(root) => {
                        let mut job_cgroup = root.make_job(instance, job)?;
                        job_cgroup.limit(&spec.limits, root)?;
                        Some(job_cgroup)
                    }
                    None => None,
                };
                let limits = Limits {
                    open_files: *open_files,
                    // Memory without the controller: the nearest rlimit, the address space.
                    address_space: spec.limits.memory_bytes.filter(|_| {
                        job_cgroup
                            .as_ref()
                            .is_none_or(|c| c.memory_limit().is_none())
                    }),
                };
                // The session network's holder starts with its first job.
                let (network, in_network) = match &spec.network {
                    Some(network) => {
                        let holder = network.holder(zygote.binary(), zygote.reaper()).await?;
                        (Some(holder.namespaces()?), Some(holder.job_runs()))
                    }
                    None => (None, None),
                };
                let mut launch = Launch::resident(&spec);
                let dir = job_cgroup.as_ref().map(|c| c.dir());
                add_steps(&mut launch, spec, limits, dir, network)?;
                let started = zygote.spawn(launch).await?;
                let mut spawned = resident::take(started, job_cgroup).await?;
                spawned.in_network = in_network;
                Ok(spawned)
            }
        }
    }

    /// The processes of a job whose shell has just been spawned; `cookie` is the
    /// `BASHD_JOB=...` entry of its environment.
    pub fn job(&self, spawned: &mut Spawned, cookie: Vec<u8>) -> Contained {
        let (scanner, reaper) = match self {
            Containment::Scan {
                scanner, reaper, ..
            }
            | Containment::Resident {
                scanner, reaper, ..
            } => (scanner, reaper),
        };
        let scan = scan::ScanJob::new(
            scan::Mark {
                pgid: spawned.pid,
                cookie,
            },
            scanner.clone(),
            reaper.clone(),
        );
        match spawned.held.take() {
            Some(held) => Contained::Resident(ResidentJob::new(held, scan, spawned.start_time)),
            None => Contained::Scan(scan),
        }
    }
}

/// The steps of a job's spawn, in order: a terminal takes the place of a stdin pipe.
/// A step the target cannot serve refuses the job (a sandbox on the scan path).
fn add_steps(
    launch: &mut Launch,
    spec: SpawnSpec,
    limits: Limits,
    cgroup: Option<&std::path::Path>,
    network: Option<(OwnedFd, OwnedFd)>,
) -> io::Result<()> {
    let sandbox = spec.sandbox.map(|confine| Sandbox {
        spec: confine,
        channel: spec.channel,
        network,
    });
    launch
        .add(spec.stdin_pipe.then_some(StdinPipe))?
        .add(spec.pty.map(Terminal))?
        .add(limits)?
        .add(cgroup.map(Cgroup))?
        .add(sandbox)?;
    Ok(())
}

/// One job's processes, by the daemon's mechanism.
#[derive(Debug, Clone)]
pub enum Contained {
    Scan(scan::ScanJob),
    Resident(ResidentJob),
}

impl JobProcesses for Contained {
    async fn outlived_leader(&self) -> bool {
        match self {
            Contained::Scan(job) => job.outlived_leader().await,
            Contained::Resident(job) => job.outlived_leader().await,
        }
    }

    async fn all_exited(&self) {
        match self {
            Contained::Scan(job) => job.all_exited().await,
            Contained::Resident(job) => job.all_exited().await,
        }
    }

    async fn terminate(&self, signal: Signal, grace: Duration, leader: Leader) {
        match self {
            Contained::Scan(job) => job.terminate(signal, grace, leader).await,
            Contained::Resident(job) => job.terminate(signal, grace, leader).await,
        }
    }

    fn usage(&self) -> Usage {
        match self {
            Contained::Scan(job) => job.usage(),
            Contained::Resident(job) => job.usage(),
        }
    }
}

/// What ending a dead daemon's jobs did.
#[derive(Debug, Clone, Copy)]
pub struct DeadJobsEnded {
    /// Processes found alive and signalled.
    pub killed: usize,
    /// Whether some survived every round of SIGKILL.
    pub survivors: bool,
}

/// Ends whatever is alive of `jobs`, which a daemon that died left running (crash
/// recovery, before anything is served): TERM, `grace`, then SIGKILL. Today by the
/// scan (cookie, and groups of leaders a start time confirms); issue 14 adds the dead
/// instance's job cgroups and residents.
pub async fn end_dead_jobs<'a>(
    scanner: &Scanner,
    jobs: impl IntoIterator<Item = &'a OpenJob>,
    grace: Duration,
) -> DeadJobsEnded {
    scan::end_dead_jobs(scanner, jobs, grace).await
}

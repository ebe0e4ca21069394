//! The cgroup v2 side of containment (DESIGN §4.2): where the daemon may write a cgroup
//! subtree (its own delegated cgroup under systemd, or `[containment] cgroup`), each
//! job gets a cgroup of its own, into which its resident clones the shell.
//! A process cannot leave a cgroup by forking, detaching or dying parents, so the job's
//! processes are exactly the cgroup's: `cgroup.kill` ends them all at once, and
//! `cgroup.events` saying `populated 0` is the job's end even when its resident was
//! killed.
//!
//! Layout under the root `C`: the daemon lives in the leaf `C/daemon` (a cgroup with
//! processes cannot also have children that use controllers), and job `jN` of daemon
//! instance `I` in `C/I-jN`, so a restarted daemon finds the cgroups of the jobs its
//! journal names and of no other daemon's. A clean stop moves the daemon back where
//! it came from and removes `C/daemon`, and `C` too when the daemon made it
//! ([`CgroupRoot::release`], issue 42).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bashd_protocol::{JobId, JobLimits};

/// The period of `cpu.max`, in microseconds: the kernel's default.
const CPU_PERIOD_US: u64 = 100_000;

/// How often a cgroup whose resident was lost is looked at until it is empty.
const EMPTY_POLL: Duration = Duration::from_millis(20);

/// The cgroup under which the daemon makes its jobs' cgroups.
#[derive(Debug, Clone)]
pub struct CgroupRoot {
    dir: PathBuf,
    /// The controllers job cgroups get (`memory`, `cpu`, `pids`, where the root has
    /// them), for their limits.
    controllers: Vec<String>,
    /// What a clean stop undoes; boxed, as it is read once, at the end.
    release: Box<Release>,
}

/// What the daemon changed in the hierarchy when it took its root.
#[derive(Debug, Clone)]
struct Release {
    /// The cgroup the daemon was in before it moved into `dir/daemon`, to go back to.
    origin: Option<PathBuf>,
    /// Whether the daemon made `dir`, and so removes it.
    made: bool,
}

impl CgroupRoot {
    /// Takes `dir` for jobs: creates it if needed, moves the daemon into `dir/daemon`,
    /// and checks that a job cgroup can be made there.
    pub fn take(dir: &Path) -> io::Result<CgroupRoot> {
        let context = |what: &str, path: &Path, e: io::Error| {
            io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
        };
        let origin = own_cgroup();
        let made = !dir.join("cgroup.procs").exists();
        if made {
            fs::create_dir_all(dir).map_err(|e| context("create the cgroup", dir, e))?;
        }
        let leaf = dir.join("daemon");
        if !leaf.exists() {
            fs::create_dir(&leaf).map_err(|e| context("create the cgroup", &leaf, e))?;
        }
        fs::write(leaf.join("cgroup.procs"), "0")
            .map_err(|e| context("move bashd into the cgroup", &leaf, e))?;
        // Job cgroups get every limit controller the root was given; with the daemon
        // moved out, the root may now hand them down.
        let offered = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        let controllers: Vec<String> = offered
            .split_whitespace()
            .filter(|c| matches!(*c, "memory" | "cpu" | "pids"))
            .filter(|c| fs::write(dir.join("cgroup.subtree_control"), format!("+{c}")).is_ok())
            .map(str::to_owned)
            .collect();
        let root = CgroupRoot {
            dir: dir.to_owned(),
            controllers,
            release: Box::new(Release { origin, made }),
        };
        // A root that takes the daemon may still refuse children (a threaded or
        // domain-invalid cgroup): better to know now than at the first job.
        let probe = dir.join(format!("probe-{}", std::process::id()));
        fs::create_dir(&probe).map_err(|e| context("create a job cgroup in", dir, e))?;
        let _ = fs::remove_dir(&probe);
        Ok(root)
    }

    /// The daemon's own cgroup, when it is a delegated one it may write (systemd's
    /// `Delegate=yes`): not the root of the hierarchy, and writable by the daemon.
    pub fn delegated() -> Option<PathBuf> {
        let dir = own_cgroup()?;
        if Some(dir.as_path()) == mount_point().as_deref() {
            return None;
        }
        let writable = rustix::fs::access(dir.join("cgroup.procs"), rustix::fs::Access::WRITE_OK)
            .is_ok()
            && rustix::fs::access(&dir, rustix::fs::Access::WRITE_OK).is_ok();
        writable.then_some(dir)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// At a clean stop, once every job has ended: moves the daemon back into the
    /// cgroup it came from, then removes its leaf `dir/daemon` (once the zygote has
    /// left it), and `dir` when the daemon made it and no job cgroup is left in it.
    /// Where the daemon cannot go back (its origin is `dir` itself, as under systemd's
    /// `Delegate=yes`, where systemd removes the cgroup; or it may not write there), the
    /// leaf stays, and the next daemon takes it again.
    pub async fn release(&self) {
        let Release { origin, made } = &*self.release;
        let Some(origin) = origin.as_ref().filter(|o| !o.starts_with(&self.dir)) else {
            return;
        };
        if let Err(e) = fs::write(origin.join("cgroup.procs"), "0") {
            tracing::debug!(
                "cannot move bashd back to {}: {e}; {} stays",
                origin.display(),
                self.dir.join("daemon").display()
            );
            return;
        }
        let leaf = self.dir.join("daemon");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            match fs::remove_dir(&leaf) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                // The zygote and its spare leave as they see the daemon's pipes close.
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    tracing::warn!("cannot remove the cgroup {}: {e}", leaf.display());
                    return;
                }
                Err(_) => tokio::time::sleep(EMPTY_POLL).await,
            }
        }
        if *made {
            // Fails, and rightly, while a job cgroup is left in it.
            let _ = fs::remove_dir(&self.dir);
        }
    }

    /// Whether job cgroups have `controller` (`memory`, `cpu`, `pids`).
    pub fn has(&self, controller: &str) -> bool {
        self.controllers.iter().any(|c| c == controller)
    }

    fn job_dir(&self, instance: &str, job: JobId) -> PathBuf {
        self.dir.join(format!("{instance}-{job}"))
    }

    /// Makes the cgroup of a job about to be spawned.
    pub fn make_job(&self, instance: &str, job: JobId) -> io::Result<JobCgroup> {
        let dir = self.job_dir(instance, job);
        fs::create_dir(&dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create the job's cgroup {}: {e}", dir.display()),
            )
        })?;
        Ok(JobCgroup {
            dir,
            limits: JobLimits::default(),
        })
    }

    /// Kills what is left in the cgroups of a dead daemon's jobs and removes them
    /// (crash recovery); how many processes were in them.
    pub async fn end_dead(&self, jobs: impl IntoIterator<Item = (String, JobId)>) -> usize {
        let mut killed = 0;
        for (instance, job) in jobs {
            let cgroup = JobCgroup {
                dir: self.job_dir(&instance, job),
                limits: JobLimits::default(),
            };
            if !cgroup.dir.exists() {
                continue;
            }
            killed += cgroup.processes().len();
            let _ = cgroup.kill();
            cgroup.emptied().await;
        }
        killed
    }
}

/// One job's cgroup, removed when the value is dropped (it is empty by then: the job
/// has ended).
#[derive(Debug)]
pub struct JobCgroup {
    dir: PathBuf,
    /// The limits written into it.
    limits: JobLimits,
}

impl JobCgroup {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes the limits whose controller the cgroup has (before any process is in
    /// it); the others are left to the caller.
    pub fn limit(&mut self, limits: &JobLimits, root: &CgroupRoot) -> io::Result<()> {
        let write = |file: &str, value: String| {
            fs::write(self.dir.join(file), &value).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot set {file} = {value} in {}: {e}", self.dir.display()),
                )
            })
        };
        if let (Some(bytes), true) = (limits.memory_bytes, root.has("memory")) {
            write("memory.max", bytes.to_string())?;
            // Without swap the limit means what it says.
            let _ = fs::write(self.dir.join("memory.swap.max"), "0");
            self.limits.memory_bytes = Some(bytes);
        }
        if let (Some(millis), true) = (limits.cpu_millicores, root.has("cpu")) {
            write(
                "cpu.max",
                format!(
                    "{} {CPU_PERIOD_US}",
                    u64::from(millis) * CPU_PERIOD_US / 1000
                ),
            )?;
            self.limits.cpu_millicores = Some(millis);
        }
        if let (Some(pids), true) = (limits.pids, root.has("pids")) {
            write("pids.max", pids.to_string())?;
            self.limits.pids = Some(pids);
        }
        Ok(())
    }

    /// Whether the kernel killed a process of the job for memory: `Some(true)` when
    /// its own memory limit was passed, `Some(false)` for an OOM kill without one.
    pub fn oom_killed(&self) -> Option<bool> {
        let events = fs::read_to_string(self.dir.join("memory.events")).ok()?;
        let kills: u64 = events
            .lines()
            .find_map(|line| line.strip_prefix("oom_kill ")?.trim().parse().ok())?;
        (kills > 0).then_some(self.limits.memory_bytes.is_some())
    }

    /// The memory limit written into the cgroup, if any.
    pub fn memory_limit(&self) -> Option<u64> {
        self.limits.memory_bytes
    }

    /// SIGKILLs every process in the cgroup, at once, forks in flight included.
    pub fn kill(&self) -> io::Result<()> {
        fs::write(self.dir.join("cgroup.kill"), "1")
    }

    /// The pids in the cgroup now.
    pub fn processes(&self) -> Vec<i32> {
        fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|text| text.lines().filter_map(|l| l.parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Whether a process of the job is alive (`cgroup.events`); false once the cgroup
    /// is gone.
    pub fn populated(&self) -> bool {
        fs::read_to_string(self.dir.join("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|line| line == "populated 1"))
    }

    /// Resolves when no process is left in the cgroup. Looks again after 1 ms, then
    /// twice as long each time up to 20 ms: a resident that said its job is done leaves
    /// the cgroup within microseconds, a job killed by `cgroup.kill` within a few ms.
    pub async fn emptied(&self) {
        let mut wait = Duration::from_millis(1);
        while self.populated() {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(EMPTY_POLL);
        }
    }

    /// `cpu.stat`'s `user_usec` and `system_usec`: every process that ran in the
    /// cgroup, reaped or not.
    pub fn cpu_usec(&self) -> Option<(u64, u64)> {
        let stat = fs::read_to_string(self.dir.join("cpu.stat")).ok()?;
        let field = |name: &str| {
            stat.lines()
                .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        };
        Some((field("user_usec ")?, field("system_usec ")?))
    }

    /// `memory.peak`, where the memory controller is enabled for the cgroup.
    pub fn memory_peak(&self) -> Option<u64> {
        fs::read_to_string(self.dir.join("memory.peak"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for JobCgroup {
    fn drop(&mut self) {
        // Fails while a process is left; recovery removes such a cgroup later.
        let _ = fs::remove_dir(&self.dir);
    }
}

/// The daemon's cgroup v2 directory, from `/proc/self/cgroup`.
fn own_cgroup() -> Option<PathBuf> {
    let own = fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|line| line.strip_prefix("0::"))?;
    Some(mount_point()?.join(own.trim().trim_start_matches('/')))
}

/// Why the daemon has no cgroup for its jobs, for `bashc status` (issue 45): `taken`
/// is why a delegated one could not be taken; else why none was delegated. Says which
/// limit controllers sit on cgroup v1, which bashd does not use, and how to give it
/// one.
pub fn why_no_cgroup(taken: Option<String>) -> String {
    let why = taken.unwrap_or_else(|| match (own_cgroup(), mount_point()) {
        (_, None) => "no cgroup v2 hierarchy is mounted".to_owned(),
        (None, Some(_)) => "bashd is in no cgroup v2".to_owned(),
        (Some(own), Some(mount)) if own == mount => format!(
            "its cgroup is the root of the cgroup v2 hierarchy ({}), which bashd does not take",
            mount.display()
        ),
        (Some(own), Some(_)) => format!(
            "its cgroup {} is not delegated to it (bashd may not write there)",
            own.display()
        ),
    });
    let on_v1 = v1_controllers();
    let v1 = match on_v1.is_empty() {
        true => String::new(),
        false => format!(
            "; {} on cgroup v1 here, which bashd does not use",
            match on_v1.len() {
                1 => format!("{} is", on_v1[0]),
                _ => format!("{} are", on_v1.join(", ")),
            }
        ),
    };
    format!(
        "jobs get no cgroup: {why}{v1}; so memory limits are address-space rlimits and cpu and pids limits are refused; give bashd a cgroup with memory, cpu and pids delegated ([containment] cgroup in its config, or systemd's Delegate=yes)"
    )
}

/// The limit controllers mounted on cgroup v1, from `/proc/self/mountinfo`.
fn v1_controllers() -> Vec<&'static str> {
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    ["memory", "cpu", "pids"]
        .into_iter()
        .filter(|controller| {
            mounts.lines().any(|line| {
                line.split_once(" - ").is_some_and(|(_, after)| {
                    let mut fields = after.split(' ');
                    fields.next() == Some("cgroup")
                        && fields
                            .nth(1)
                            .is_some_and(|options| options.split(',').any(|o| o == *controller))
                })
            })
        })
        .collect()
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on a hybrid system), from `/proc/self/mountinfo`.
pub fn mount_point() -> Option<PathBuf> {
    let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        if after.split(' ').next()? != "cgroup2" {
            return None;
        }
        before.split(' ').nth(4).map(PathBuf::from)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount() {
        // Every machine this runs on has cgroup v2 somewhere; where varies.
        if let Some(dir) = mount_point() {
            assert!(dir.join("cgroup.controllers").exists(), "{}", dir.display());
        }
    }
}

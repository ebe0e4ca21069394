//! The cgroup v2 side of containment (DESIGN §4.2): where the daemon may write a cgroup
//! subtree (its own delegated cgroup under systemd, or `[containment] cgroup`), each
//! job gets a cgroup of its own, which its resident joins before it forks the shell.
//! A process cannot leave a cgroup by forking, detaching or dying parents, so the job's
//! processes are exactly the cgroup's: `cgroup.kill` ends them all at once, and
//! `cgroup.events` saying `populated 0` is the job's end even when its resident was
//! killed.
//!
//! Layout under the root `C`: the daemon lives in the leaf `C/daemon` (a cgroup with
//! processes cannot also have children that use controllers), and job `jN` of daemon
//! instance `I` in `C/I-jN`, so a restarted daemon finds the cgroups of the jobs its
//! journal names and of no other daemon's.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bashd_protocol::JobId;

/// How often a cgroup whose resident was lost is looked at until it is empty.
const EMPTY_POLL: Duration = Duration::from_millis(20);

/// The cgroup under which the daemon makes its jobs' cgroups.
#[derive(Debug, Clone)]
pub struct CgroupRoot {
    dir: PathBuf,
}

impl CgroupRoot {
    /// Takes `dir` for jobs: creates it if needed, moves the daemon into `dir/daemon`,
    /// and checks that a job cgroup can be made there.
    pub fn take(dir: &Path) -> io::Result<CgroupRoot> {
        let context = |what: &str, path: &Path, e: io::Error| {
            io::Error::new(e.kind(), format!("cannot {what} {}: {e}", path.display()))
        };
        if !dir.join("cgroup.procs").exists() {
            fs::create_dir_all(dir).map_err(|e| context("create the cgroup", dir, e))?;
        }
        let leaf = dir.join("daemon");
        if !leaf.exists() {
            fs::create_dir(&leaf).map_err(|e| context("create the cgroup", &leaf, e))?;
        }
        fs::write(leaf.join("cgroup.procs"), "0")
            .map_err(|e| context("move bashd into the cgroup", &leaf, e))?;
        let root = CgroupRoot {
            dir: dir.to_owned(),
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
        let own = fs::read_to_string("/proc/self/cgroup").ok()?;
        let own = own.lines().find_map(|line| line.strip_prefix("0::"))?;
        if own == "/" {
            return None;
        }
        let dir = mount_point()?.join(own.trim_start_matches('/'));
        let writable = rustix::fs::access(dir.join("cgroup.procs"), rustix::fs::Access::WRITE_OK)
            .is_ok()
            && rustix::fs::access(&dir, rustix::fs::Access::WRITE_OK).is_ok();
        writable.then_some(dir)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
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
        Ok(JobCgroup { dir })
    }

    /// Kills what is left in the cgroups of a dead daemon's jobs and removes them
    /// (crash recovery); how many processes were in them.
    pub async fn end_dead(&self, jobs: impl IntoIterator<Item = (String, JobId)>) -> usize {
        let mut killed = 0;
        for (instance, job) in jobs {
            let cgroup = JobCgroup {
                dir: self.job_dir(&instance, job),
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
}

impl JobCgroup {
    pub fn dir(&self) -> &Path {
        &self.dir
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

    /// Resolves when no process is left in the cgroup.
    pub async fn emptied(&self) {
        while self.populated() {
            tokio::time::sleep(EMPTY_POLL).await;
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

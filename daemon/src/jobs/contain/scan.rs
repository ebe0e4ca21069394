//! The scan mechanism (DESIGN §4, the fallback): a job's processes are its process
//! group, while its leader is unreaped, and every process of the daemon's uid whose
//! environment carries the job's cookie, which finds the ones that left the group
//! (`setsid`, double forks). Each is signalled through a pidfd opened before its
//! identity is checked again, so a pid reused since the scan is never hit.
//!
//! A job's escapees whose parents died are reparented to the daemon (a subreaper), so
//! "did anything outlive the leader" asks the reaper for the daemon's orphans. The same
//! scan ends the jobs of a daemon that died ([`end_dead_jobs`], for recovery), by
//! cookie and by the groups of leaders the journal names and a start time confirms.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bashd_protocol::process_start_time;
use rustix::process::{Pid, Signal};

use super::proc::{Matcher, Scanner, Seen, all_exited};
use super::{DeadJobsEnded, JobProcesses, Leader};
use crate::jobs::os::reaper::ReaperHandle;
use crate::journal::{self, OpenJob};

/// Rounds of SIGKILL before giving up on a job whose processes keep forking.
const KILL_ROUNDS: usize = 20;
/// How long one round waits for the processes it signalled to go.
const KILL_ROUND_WAIT: Duration = Duration::from_secs(1);

/// How a job's processes are recognised.
#[derive(Debug, Clone)]
pub struct Mark {
    /// The leader's pid, which is the group id of every process that stayed in it.
    pub pgid: Pid,
    /// `BASHD_JOB=<instance>/<job>`, exactly as it sits in the environment.
    pub cookie: Vec<u8>,
}

/// One running job's processes, found by scanning.
#[derive(Debug, Clone)]
pub struct ScanJob {
    mark: Mark,
    scanner: Scanner,
    /// Asked for the daemon's orphans, where a job's escapees end up.
    reaper: ReaperHandle,
}

impl ScanJob {
    pub fn new(mark: Mark, scanner: Scanner, reaper: ReaperHandle) -> ScanJob {
        ScanJob {
            mark,
            scanner,
            reaper,
        }
    }
}

impl ScanJob {
    /// Ends every process the daemon inherited that started at or after `since` (clock
    /// ticks after boot, as `/proc/PID/stat` counts them; the job's leader's start),
    /// and what they start meanwhile: for a job whose resident died, whose orphans were
    /// reparented to the daemon and may have shed the job's group and cookie. While
    /// residents live, they reap their own jobs' orphans, so the daemon's orphans are
    /// only ever those of jobs whose residents died.
    pub async fn end_orphans_since(&self, since: u64) {
        for _ in 0..KILL_ROUNDS {
            let orphans = self.reaper.orphans().await;
            let hit = tokio::task::spawn_blocking(move || kill_orphans(&orphans, since))
                .await
                .unwrap_or(0);
            if hit == 0 {
                return;
            }
            // What the killed started is reparented to the daemon as they die.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// SIGKILLs each of `pids` that is alive and started at or after `since`, held by a
/// pidfd before its start time is read, so a reused pid is never hit. Blocking.
fn kill_orphans(pids: &[i32], since: u64) -> usize {
    let mut hit = 0;
    for &pid in pids {
        let Some(raw) = Pid::from_raw(pid) else {
            continue;
        };
        let Ok(pidfd) = rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty())
        else {
            continue;
        };
        let started = process_start_time(pid as u32);
        if started.is_some_and(|started| started >= since) && Seen::read(pid).is_some() {
            let _ = rustix::process::pidfd_send_signal(&pidfd, Signal::KILL);
            hit += 1;
        }
    }
    hit
}

impl JobProcesses for ScanJob {
    /// Its group is alive, or an escapee the daemon inherited carries its cookie.
    async fn outlived_leader(&self) -> bool {
        rustix::process::test_kill_process_group(self.mark.pgid).is_ok()
            || owns_any(&self.mark, self.reaper.orphans().await).await
    }

    /// Watches what a scan by cookie finds through pidfds, and scans again when all of
    /// those are gone: some may have started others before they went.
    async fn all_exited(&self) {
        // The leader is reaped: only the cookie names the job's processes now.
        let by_cookie = self.mark.matching(false);
        loop {
            let alive = self.scanner.scan(&by_cookie).await;
            if alive.is_empty() {
                return;
            }
            all_exited(alive).await;
        }
    }

    async fn terminate(&self, signal: Signal, grace: Duration, leader: Leader) {
        let matcher = self.mark.matching(leader == Leader::Unreaped);
        terminate(&self.scanner, &matcher, signal, grace).await;
    }
}

/// One job's processes; `by_group` also counts processes in the job's process group
/// that lost the cookie: only while the leader is unreaped, since after that its group
/// id can be reused by a stranger once the group is empty.
#[derive(Debug, Clone)]
pub struct JobMatch {
    pub mark: Mark,
    pub by_group: bool,
}

impl Matcher for JobMatch {
    fn claims(&self, seen: &Seen) -> bool {
        (self.by_group && seen.pgid == self.mark.pgid.as_raw_nonzero().get())
            || seen.has_cookie(&self.mark.cookie)
    }

    fn signal_groups(&self, signal: Signal) {
        if self.by_group {
            let _ = rustix::process::kill_process_group(self.mark.pgid, signal);
        }
    }
}

impl Mark {
    pub fn matching(&self, by_group: bool) -> JobMatch {
        JobMatch {
            mark: self.clone(),
            by_group,
        }
    }

    /// Whether any of `pids`, the daemon's orphaned children, belongs to the job: where
    /// every escapee of a job whose group is gone ends up, the daemon being a
    /// subreaper. Blocking.
    fn owns_any(&self, pids: &[i32]) -> bool {
        let by_cookie = self.matching(false);
        pids.iter()
            .filter_map(|&pid| Seen::read(pid))
            .any(|seen| by_cookie.claims(&seen))
    }
}

/// Whether any of `orphans` belongs to the job, read on a blocking thread.
async fn owns_any(mark: &Mark, orphans: Vec<i32>) -> bool {
    if orphans.is_empty() {
        return false;
    }
    let mark = mark.clone();
    tokio::task::spawn_blocking(move || mark.owns_any(&orphans))
        .await
        .unwrap_or(false)
}

/// Ends every process `matcher` claims: `first` to each (and to the groups it may
/// signal whole, which catches processes forked since the scan), then SIGKILL to
/// whatever is left after `grace`, in rounds until a scan finds nothing. Returns how
/// many processes the first scan found.
pub async fn terminate(
    scanner: &Scanner,
    matcher: &impl Matcher,
    first: Signal,
    grace: Duration,
) -> usize {
    let members = scanner.scan(matcher).await;
    let found = members.len();
    matcher.signal_groups(first);
    for member in &members {
        member.signal(first);
    }
    if first != Signal::KILL {
        let _ = tokio::time::timeout(grace, all_exited(members)).await;
    }
    // Each round's scan also catches what was forked since the last one.
    for _ in 0..KILL_ROUNDS {
        let members = scanner.scan(matcher).await;
        if members.is_empty() {
            return found;
        }
        matcher.signal_groups(Signal::KILL);
        for member in &members {
            member.signal(Signal::KILL);
        }
        let _ = tokio::time::timeout(KILL_ROUND_WAIT, all_exited(members)).await;
    }
    tracing::warn!("processes of a job survived {KILL_ROUNDS} rounds of SIGKILL");
    found
}

/// Ends every process of `jobs`, the jobs a dead daemon left running: TERM, `grace`,
/// then SIGKILL rounds, and one more scan to say whether any survived.
pub async fn end_dead_jobs<'a>(
    scanner: &Scanner,
    jobs: impl IntoIterator<Item = &'a OpenJob>,
    grace: Duration,
) -> DeadJobsEnded {
    let dead = DeadJobs::new(jobs);
    let killed = terminate(scanner, &dead, Signal::TERM, grace).await;
    let survivors = !scanner.scan(&dead).await.is_empty();
    DeadJobsEnded { killed, survivors }
}

/// Every process of the jobs a dead daemon left.
#[derive(Clone)]
struct DeadJobs {
    cookies: Arc<HashSet<Vec<u8>>>,
    /// Leaders that were alive, with the start time the journal gave, when recovery
    /// began; each is checked again before its group is counted or signalled.
    leaders: Arc<Vec<journal::Leader>>,
}

impl DeadJobs {
    fn new<'a>(jobs: impl IntoIterator<Item = &'a OpenJob>) -> DeadJobs {
        let me = std::process::id();
        let (mut cookies, mut leaders) = (HashSet::new(), Vec::new());
        for job in jobs {
            cookies.insert(job.cookie());
            leaders.extend(
                job.leader
                    .filter(|leader| leader.pid != me && leader.pgid != me)
                    .filter(is_alive),
            );
        }
        DeadJobs {
            cookies: Arc::new(cookies),
            leaders: Arc::new(leaders),
        }
    }
}

/// Whether the leader's pid still names the process the journal recorded, so its
/// group id is still the job's.
fn is_alive(leader: &journal::Leader) -> bool {
    process_start_time(leader.pid) == Some(leader.start_time)
}

impl Matcher for DeadJobs {
    fn claims(&self, seen: &Seen) -> bool {
        let in_group = self
            .leaders
            .iter()
            .any(|leader| leader.pgid as i32 == seen.pgid && is_alive(leader));
        in_group || seen.cookies.iter().any(|c| self.cookies.contains(c))
    }

    fn signal_groups(&self, signal: Signal) {
        for leader in self.leaders.iter().filter(|leader| is_alive(leader)) {
            if let Some(pgid) = Pid::from_raw(leader.pgid as i32) {
                let _ = rustix::process::kill_process_group(pgid, signal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::super::proc::tests::job;
    use super::*;

    #[tokio::test]
    async fn terminate_ends_its_job_and_nothing_else() {
        let scanner = Scanner::start();
        let (mut mine, cookie) = job("terminate", 0);
        let (mut other, _) = job("terminate", 1);
        let mark = Mark {
            // Not the child's group: only the cookie may find it.
            pgid: rustix::process::getpid(),
            cookie,
        };
        let found = terminate(
            &scanner,
            &mark.matching(false),
            Signal::TERM,
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(found, 1);
        assert!(mine.0.wait().unwrap().signal().is_some());
        assert!(
            other.0.try_wait().unwrap().is_none(),
            "another job's process was hit"
        );
    }
}

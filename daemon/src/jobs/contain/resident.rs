//! The resident mechanism (DESIGN §4.2): every job's first process is
//! `bashd-resident`, a child subreaper in a session of its own that forks the shell,
//! so whatever the job starts stays below the resident however it forks, detaches or
//! clears its environment, and the resident ends that subtree on order or when the
//! daemon dies. It is a job's process like any other (it carries the cookie), so the
//! scan still finds it, and a resident that was killed leaves its job to the scan
//! ([`ResidentJob`] falls back to it).
//!
//! The daemon's side: the zygote (`zygote.rs`) forks the resident; [`take`] waits for
//! it to fork the shell, and [`Link`], one task per job, owns the control socket: it
//! turns the resident's reports into the leader's exit and the job's end, and carries
//! the supervisor's orders.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bashd_protocol::ProcStat;
use rustix::process::{Pid, Signal};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot, watch};

use bashd_resident_core::wire::{Order, Report, Usage};

use super::cgroup::JobCgroup;
use super::scan::ScanJob;
use super::zygote::ResidentStarted;
use super::{JobProcesses, Leader, Usage as JobUsage};
use crate::jobs::os::reaper::LeaderExit;
use crate::jobs::os::spawn::Spawned;

/// How long the resident has to fork the shell and say so.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// After the shell exits, how long the resident has to say that nothing else of the
/// job lives: it reaps and reports in microseconds, so a job still there after this
/// has processes left.
const LAST_REPORT_WAIT: Duration = Duration::from_millis(100);
/// How long SIGKILL rounds may take before the job is left to the scan.
const KILL_WAIT: Duration = Duration::from_secs(30);

/// Where the resident binary is: beside the daemon's own, as cargo builds and installs
/// them. `None` if it is not there (the daemon then contains jobs by scan).
pub fn find_binary() -> Option<PathBuf> {
    let path = std::env::current_exe()
        .ok()?
        .with_file_name("bashd-resident");
    path.is_file().then_some(path)
}

/// Where a job is, as its resident last said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// The shell or processes it started run.
    Running,
    /// No process of the job is left; what they used.
    Done(Usage),
    /// The resident went away without saying the job was done: killed from inside the
    /// job, most likely. What is left is found by the scan.
    Lost,
}

/// The task that owns one resident's control socket.
pub struct Link;

/// What [`Link::start`] hands out.
pub struct Linked {
    /// The shell's pid and the resident's, once the resident has forked the shell, or
    /// why it could not.
    pub leader: oneshot::Receiver<Result<(Pid, u32), String>>,
    /// The shell's exit, once the resident has reaped it.
    pub exit: oneshot::Receiver<LeaderExit>,
    pub orders: mpsc::UnboundedSender<Order>,
    pub heard: watch::Receiver<Heard>,
}

impl Link {
    /// Starts the task for the daemon's end of a resident's socket. It ends when the
    /// resident closes the socket (it has exited).
    pub fn start(socket: OwnedFd) -> io::Result<Linked> {
        let socket = StdUnixStream::from(socket);
        socket.set_nonblocking(true)?;
        let socket = UnixStream::from_std(socket)?;
        let (leader_tx, leader) = oneshot::channel();
        let (exit_tx, exit) = oneshot::channel();
        let (orders, mut orders_rx) = mpsc::unbounded_channel::<Order>();
        let (heard_tx, heard) = watch::channel(Heard::Running);
        tokio::spawn(async move {
            let (read, mut write) = socket.into_split();
            let mut lines = BufReader::new(read).lines();
            let mut leader_tx = Some(leader_tx);
            let mut exit_tx = Some(exit_tx);
            let mut orders_open = true;
            loop {
                // Cancelling either branch loses nothing: a partial line stays in the
                // reader's buffer, an order in its channel.
                tokio::select! {
                    line = lines.next_line() => match line {
                        Ok(Some(line)) => match Report::parse(&line) {
                            Some(Report::Started { pid, resident }) => {
                                if let (Some(tx), Some(pid)) = (leader_tx.take(), Pid::from_raw(pid)) {
                                    let _ = tx.send(Ok((pid, resident as u32)));
                                }
                            }
                            Some(Report::Error(text)) => {
                                if let Some(tx) = leader_tx.take() {
                                    let _ = tx.send(Err(text));
                                }
                            }
                            Some(Report::Leader { status }) => {
                                if let Some(tx) = exit_tx.take() {
                                    let _ = tx.send(leader_exit(status));
                                }
                            }
                            Some(Report::Done(usage)) => {
                                let _ = heard_tx.send(Heard::Done(usage));
                            }
                            None => tracing::warn!("a job's resident said {line:?}"),
                        },
                        Ok(None) | Err(_) => {
                            // A resident killed before its shell ended (from inside the
                            // job, most likely): its first process died by a signal, as
                            // far as anyone can tell, and the scan looks for the rest.
                            if let Some(tx) = exit_tx.take() {
                                tracing::warn!("a job's resident was killed; its processes are looked for by the scan from now on");
                                let _ = tx.send(LeaderExit::Signal(Signal::KILL.as_raw()));
                            }
                            heard_tx.send_if_modified(|heard| {
                                let lost = *heard == Heard::Running;
                                if lost {
                                    *heard = Heard::Lost;
                                }
                                lost
                            });
                            return;
                        }
                    },
                    // The spawn gave up on this resident before it said it started
                    // the shell (it took too long: stopped, or starved): the socket
                    // closes, and the resident, seeing the daemon gone, kills what it
                    // started, so no job runs that the daemon reported as failed.
                    () = async {
                        match leader_tx.as_mut() {
                            Some(tx) => tx.closed().await,
                            None => std::future::pending().await,
                        }
                    }, if leader_tx.is_some() => {
                        tracing::warn!("a job's resident was given up before it started the shell; it ends the job when it sees its socket close");
                        return;
                    }
                    order = orders_rx.recv(), if orders_open => match order {
                        // A failed write means the resident is gone; the read sees it.
                        Some(order) => { let _ = write.write_all(order.to_string().as_bytes()).await; }
                        None => orders_open = false,
                    },
                }
            }
        });
        Ok(Linked {
            leader,
            exit,
            orders,
            heard,
        })
    }
}

/// A job's hold by its resident, as the spawn hands it to `contain`.
#[derive(Debug)]
pub struct Held {
    pub orders: mpsc::UnboundedSender<Order>,
    pub heard: watch::Receiver<Heard>,
    /// The job's cgroup, when it has one; removed when the job is done with it.
    pub cgroup: Option<JobCgroup>,
    /// The resident's pid: the root of the job's processes.
    pub resident: u32,
}

/// Waits for the resident the zygote was just asked for to fork the shell: the job's
/// shell, its exit, and the resident's hold on it.
pub async fn take(started: ResidentStarted, cgroup: Option<JobCgroup>) -> io::Result<Spawned> {
    let linked = Link::start(started.control)?;
    let (pid, resident) = match tokio::time::timeout(START_TIMEOUT, linked.leader).await {
        Ok(Ok(Ok(started))) => started,
        Ok(Ok(Err(why))) => return Err(io::Error::other(why)),
        Ok(Err(_)) => {
            return Err(io::Error::other(
                "bashd-resident exited before it started the shell",
            ));
        }
        Err(_) => {
            return Err(io::Error::other(format!(
                "bashd-resident did not start the shell within {} s",
                START_TIMEOUT.as_secs()
            )));
        }
    };
    let ends = started.ends;
    Ok(Spawned {
        pid,
        stdout: ends.stdout,
        stderr: ends.stderr,
        exit: linked.exit,
        // The shell may already have exited and been reaped by its resident: 0 then,
        // as for a leader whose stat could not be read.
        start_time: bashd_protocol::process_start_time(pid.as_raw_nonzero().get() as u32)
            .unwrap_or(0),
        held: Some(Held {
            orders: linked.orders,
            heard: linked.heard,
            cgroup,
            resident,
        }),
        stdin: ends.stdin,
        pty: ends.pty,
        in_network: None,
    })
}

/// A raw wait status as the resident's `waitpid` gave it. Read with libc's macros:
/// rustix makes a `WaitStatus` only from a wait of its own.
fn leader_exit(status: i32) -> LeaderExit {
    if libc::WIFEXITED(status) {
        LeaderExit::Code(libc::WEXITSTATUS(status))
    } else {
        LeaderExit::Signal(libc::WTERMSIG(status))
    }
}

/// One running job held by its resident, with its cgroup where it has one, and the
/// scan behind both for a resident that was lost.
#[derive(Debug, Clone)]
pub struct ResidentJob {
    orders: mpsc::UnboundedSender<Order>,
    heard: watch::Receiver<Heard>,
    /// Shared with the clones a supervisor makes; removed when the last goes.
    cgroup: Option<Arc<JobCgroup>>,
    fallback: ScanJob,
    /// The resident's pid, and the start time of the job's shell (0 when it was not
    /// read): the job's orphans, should the resident die, start at or after it.
    resident: u32,
    since: u64,
}

impl ResidentJob {
    pub fn new(held: Held, fallback: ScanJob, since: u64) -> ResidentJob {
        ResidentJob {
            orders: held.orders,
            heard: held.heard,
            cgroup: held.cgroup.map(Arc::new),
            fallback,
            resident: held.resident,
            since,
        }
    }

    /// For a job without a cgroup whose resident died: its processes were reparented
    /// to the daemon, a subreaper, as the resident exited, and may have shed the
    /// group and the cookie the scan finds; they end with the job.
    async fn end_orphans(&self) {
        // The socket closes before the kernel reparents the resident's children: once
        // it is a zombie or gone, they are the daemon's.
        let gone = || ProcStat::read(self.resident).is_none_or(|stat| !stat.alive());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        while !gone() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.fallback.end_orphans_since(self.since).await;
    }

    /// Waits until the job's cgroup, if it has one, holds no process, the resident
    /// included, so that the cgroup can be removed when the job is done with it.
    async fn cgroup_emptied(&self) {
        if let Some(cgroup) = &self.cgroup {
            cgroup.emptied().await;
        }
    }

    /// Waits until the resident says the job is done or is lost, at most `limit`;
    /// what it last said.
    async fn settled(&self, limit: Duration) -> Heard {
        let mut heard = self.heard.clone();
        let settled = heard.wait_for(|h| *h != Heard::Running);
        match tokio::time::timeout(limit, settled).await {
            Ok(Ok(heard)) => *heard,
            // The link ended without a word: the same as lost.
            Ok(Err(_)) => Heard::Lost,
            Err(_) => Heard::Running,
        }
    }
}

impl JobProcesses for ResidentJob {
    async fn outlived_leader(&self) -> bool {
        match self.settled(LAST_REPORT_WAIT).await {
            Heard::Done(_) => {
                self.cgroup_emptied().await;
                false
            }
            Heard::Running => true,
            Heard::Lost => match &self.cgroup {
                Some(cgroup) => cgroup.populated(),
                None => {
                    let outlived = self.fallback.outlived_leader().await;
                    if !outlived {
                        // The job ends now: what the scan cannot see ends with it.
                        self.end_orphans().await;
                    }
                    outlived
                }
            },
        }
    }

    async fn all_exited(&self) {
        let mut heard = self.heard.clone();
        let lost = match heard.wait_for(|h| *h != Heard::Running).await {
            Ok(heard) => *heard == Heard::Lost,
            Err(_) => true,
        };
        if lost && self.cgroup.is_none() {
            self.fallback.all_exited().await;
            self.end_orphans().await;
        }
        self.cgroup_emptied().await;
    }

    async fn terminate(&self, signal: Signal, grace: Duration, leader: Leader) {
        let _ = self.orders.send(Order::Signal(signal.as_raw()));
        if self.settled(grace).await == Heard::Running {
            // The cgroup kills at once, forks in flight included; the resident's rounds
            // are for a job without one.
            if let Some(cgroup) = &self.cgroup {
                let _ = cgroup.kill();
            }
            let _ = self.orders.send(Order::Kill);
            if self.settled(KILL_WAIT).await == Heard::Running {
                tracing::warn!("a job's resident did not end its processes in time");
            }
        }
        if *self.heard.borrow() == Heard::Lost {
            // Killed from inside the job, most likely: what it held is the cgroup's, or
            // whatever the scan still finds by the cookie.
            match &self.cgroup {
                Some(cgroup) => {
                    let _ = cgroup.kill();
                }
                None => {
                    self.fallback
                        .terminate(Signal::KILL, Duration::ZERO, leader)
                        .await;
                    self.end_orphans().await;
                }
            }
        }
        self.cgroup_emptied().await;
    }

    /// The cgroup's figures where there is one (they count every process that ran in
    /// it), else the resident's `RUSAGE_CHILDREN` (every process that was reaped).
    fn usage(&self) -> JobUsage {
        let resident = match *self.heard.borrow() {
            Heard::Done(usage) => Some(usage),
            Heard::Running | Heard::Lost => None,
        };
        let cpu = self.cgroup.as_ref().and_then(|c| c.cpu_usec());
        let peak = self.cgroup.as_ref().and_then(|c| c.memory_peak());
        JobUsage {
            cpu_user_us: cpu.map(|c| c.0).or(resident.map(|u| u.user_us)),
            cpu_system_us: cpu.map(|c| c.1).or(resident.map(|u| u.system_us)),
            peak_rss_bytes: peak.or(resident.map(|u| u.max_rss_kb * 1024)),
            oom_killed: self.cgroup.as_ref().and_then(|c| {
                c.oom_killed()
                    .map(|own| own.then(|| c.memory_limit()).flatten())
            }),
        }
    }
}

//! The descriptor budget (issue 18): a job is refused, with the limit and the fix,
//! when starting it could run the daemon out of open files, rather than failing inside
//! its spawn ("Too many open files") or leaving the daemon unable to accept a
//! connection. Owned by the jobs actor, which asks before each start.
//!
//! Counting `/proc/self/fd` costs about a microsecond per descriptor, so it is done
//! at most once a second, or when the estimate since the last count (each job started
//! since then counted at its most) comes near the limit.

use std::time::{Duration, Instant};

use bashd_protocol::{ErrorKind, ErrorReply};

/// The most descriptors one job holds in the daemon: its two pipes, its resident's
/// control socket, a pidfd, its two spill files, and a sandboxed job's channel.
pub const FDS_PER_JOB: u64 = 7;
/// Descriptors kept free for what serving needs besides jobs: accepting connections,
/// the journal's compaction, reading a page of output.
pub const RESERVED_FDS: u64 = 32;
/// How long a count stands when the estimate is far from the limit.
const FRESH: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct DescriptorBudget {
    counted: Option<(Instant, u64)>,
    started_since: u64,
}

impl DescriptorBudget {
    pub fn new() -> DescriptorBudget {
        DescriptorBudget {
            counted: None,
            started_since: 0,
        }
    }

    /// Whether one more job fits under the open-file limit in force; records it when
    /// it does.
    pub fn admit(&mut self) -> Result<(), ErrorReply> {
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(u64::MAX);
        let room = limit.saturating_sub(RESERVED_FDS + FDS_PER_JOB);
        let estimate = |counted: u64, started: u64| counted + FDS_PER_JOB * started;
        let stale = match self.counted {
            Some((at, counted)) => {
                at.elapsed() >= FRESH || estimate(counted, self.started_since) > room
            }
            None => true,
        };
        if stale {
            self.counted = Some((Instant::now(), count_open_files()));
            self.started_since = 0;
        }
        let open = self.counted.map_or(0, |(_, counted)| counted);
        if estimate(open, self.started_since) > room {
            return Err(ErrorReply::new(
                ErrorKind::Busy,
                format!(
                    "bashd has {open} of its {limit} open files in use, too few left to start another job (each holds up to {FDS_PER_JOB}); end some jobs, or raise the daemon's limit: `ulimit -Hn` shows the hard limit it can raise itself to, and LimitNOFILE= in its systemd unit sets it"
                ),
            ));
        }
        self.started_since += 1;
        Ok(())
    }
}

/// The daemon's open descriptors now.
pub fn count_open_files() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |fds| fds.count() as u64)
}

//! What the daemon and a job's resident (`bashd-resident`) say to each other over the
//! control socket that is the resident's stdin: one line per message, text, so a
//! person can read it in `strace` and a torn read costs only the line.
//!
//! Resident to daemon: `started PID`, `leader STATUS` (the raw wait status of the
//! job's shell), `done USER_US SYSTEM_US MAXRSS_KB REAPED`, `error TEXT` (the
//! setup failed; the shell never ran).
//! Daemon to resident: `signal N` (to every process of the job), `kill` (SIGKILL to
//! every process of the job, again until none is left).
//! The daemon closing its end (it died) means `kill`.

use std::fmt;

/// A message from the resident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// The job's shell was forked with this pid, which is also its process group.
    Started { pid: i32 },
    /// The job's shell exited; `status` is as `waitpid` gave it.
    Leader { status: i32 },
    /// The last process of the job is gone; the resident exits next.
    Done(Usage),
    /// The resident could not set the job up (join its cgroup, fork the shell); it
    /// exits next, and the shell never ran.
    Error(String),
}

/// What the job's processes used, as the resident's `RUSAGE_CHILDREN` counts it: every
/// process of the job that was reaped, by the resident or by a parent of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub user_us: u64,
    pub system_us: u64,
    /// The largest resident set of any one of those processes.
    pub max_rss_kb: u64,
    /// Processes the resident reaped: the shell and every orphan reparented to it.
    pub reaped: u64,
}

/// A message to the resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Signal(i32),
    Kill,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Report::Started { pid } => writeln!(f, "started {pid}"),
            Report::Leader { status } => writeln!(f, "leader {status}"),
            Report::Done(u) => writeln!(
                f,
                "done {} {} {} {}",
                u.user_us, u.system_us, u.max_rss_kb, u.reaped
            ),
            // One line: a newline in the text would end the message early.
            Report::Error(text) => writeln!(f, "error {}", text.replace('\n', " ")),
        }
    }
}

impl Report {
    /// One line, without its newline.
    pub fn parse(line: &str) -> Option<Report> {
        if let Some(text) = line.strip_prefix("error ") {
            return Some(Report::Error(text.to_owned()));
        }
        let mut words = line.split(' ');
        let report = match words.next()? {
            "started" => Report::Started {
                pid: words.next()?.parse().ok()?,
            },
            "leader" => Report::Leader {
                status: words.next()?.parse().ok()?,
            },
            "done" => {
                let mut number = || words.next()?.parse::<u64>().ok();
                Report::Done(Usage {
                    user_us: number()?,
                    system_us: number()?,
                    max_rss_kb: number()?,
                    reaped: number()?,
                })
            }
            _ => return None,
        };
        words.next().is_none().then_some(report)
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Order::Signal(n) => writeln!(f, "signal {n}"),
            Order::Kill => writeln!(f, "kill"),
        }
    }
}

impl Order {
    /// One line, without its newline.
    pub fn parse(line: &str) -> Option<Order> {
        match line.split_once(' ') {
            None if line == "kill" => Some(Order::Kill),
            Some(("signal", n)) => n.parse().ok().map(Order::Signal),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_reads_back_as_written() {
        let reports = [
            Report::Started { pid: 42 },
            Report::Leader { status: 256 },
            Report::Done(Usage {
                user_us: 1,
                system_us: 2,
                max_rss_kb: 3,
                reaped: 4,
            }),
            Report::Error("cannot join the cgroup /x: permission denied".into()),
        ];
        for report in reports {
            let line = report.to_string();
            assert_eq!(
                Report::parse(line.trim_end()),
                Some(report.clone()),
                "{line}"
            );
        }
        for order in [Order::Signal(15), Order::Kill] {
            let line = order.to_string();
            assert_eq!(Order::parse(line.trim_end()), Some(order), "{line}");
        }
        for bad in [
            "",
            "started",
            "started x",
            "leader 1 2",
            "done 1 2 3",
            "kil",
        ] {
            assert_eq!(Report::parse(bad), None, "{bad}");
            assert_eq!(Order::parse(bad), None, "{bad}");
        }
    }
}

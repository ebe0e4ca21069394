//! Finding the agent a client works for: the nearest ancestor that is not a shell or a
//! wrapper (DESIGN §3), so that an agent running `bashc` through its own shell tool
//! keeps one session for its whole life.

use bashd_protocol::{Owner, ProcStat};

/// Processes that run commands on someone else's behalf and so are never the agent.
const NOT_AN_AGENT: &[&str] = &[
    "bash", "sh", "dash", "zsh", "fish", "env", "sudo", "timeout", "nohup", "xargs", "bashc",
];

/// The pid of the agent this process works for: the nearest ancestor whose name is not
/// a shell or a wrapper. Falls back to the parent when the walk finds none.
pub fn find_agent_pid() -> u32 {
    find_agent().pid
}

/// The agent this process works for, as [`find_agent_pid`] finds it, with the start
/// time read in the same look at its `/proc/PID/stat`: the owner a request names
/// (issue 31: `Owner::of` after the walk read the same file again).
pub fn find_agent() -> Owner {
    let parent = rustix::process::getppid().map_or(1, |p| p.as_raw_nonzero().get() as u32);
    let mut pid = parent;
    // What the walk read of the parent, for the fallback to name it without a second
    // read; `None` when the parent is already gone.
    let mut parent_start = None;
    // The chain is short; the bound only guards against a /proc that lies.
    for _ in 0..64 {
        let Some(stat) = ProcStat::read(pid) else {
            break;
        };
        if pid == parent {
            parent_start = Some(stat.starttime);
        }
        if !NOT_AN_AGENT.contains(&stat.comm.as_str()) {
            return Owner {
                pid,
                start_time: Some(stat.starttime),
            };
        }
        if stat.ppid <= 1 {
            break;
        }
        pid = stat.ppid;
    }
    Owner {
        pid: parent,
        start_time: parent_start,
    }
}

/// The session this process uses when none is named: `agent-<pid>`.
pub fn default_session() -> String {
    format!("agent-{}", find_agent_pid())
}

#[cfg(test)]
mod tests {
    use bashd_protocol::process_start_time;

    use super::*;

    /// The owner found in the walk is the process `Owner::of` would name: its pid and
    /// the start time its own `/proc/PID/stat` says.
    #[test]
    fn the_agent_found_carries_its_own_start_time() {
        let agent = find_agent();
        assert_eq!(agent.pid, find_agent_pid());
        assert_eq!(agent.start_time, process_start_time(agent.pid));
        assert!(agent.start_time.is_some(), "{agent:?}");
        assert_eq!(agent, Owner::of(agent.pid));
    }
}

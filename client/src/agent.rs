//! Finding the agent a client works for: the nearest ancestor that is not a shell or a
//! wrapper (DESIGN §3), so that an agent running `bashc` through its own shell tool
//! keeps one session for its whole life.

use std::fs;

/// Processes that run commands on someone else's behalf and so are never the agent.
const NOT_AN_AGENT: &[&str] = &[
    "bash", "sh", "dash", "zsh", "fish", "env", "sudo", "timeout", "nohup", "xargs", "bashc",
];

/// The pid of the agent this process works for: the nearest ancestor whose name is not
/// a shell or a wrapper. Falls back to the parent when the walk finds none.
pub fn find_agent_pid() -> u32 {
    let parent = rustix::process::getppid().map_or(1, |p| p.as_raw_nonzero().get() as u32);
    let mut pid = parent;
    // The chain is short; the bound only guards against a /proc that lies.
    for _ in 0..64 {
        let Some((name, ppid)) = read_stat(pid) else {
            return parent;
        };
        if !NOT_AN_AGENT.contains(&name.as_str()) {
            return pid;
        }
        if ppid <= 1 {
            return parent;
        }
        pid = ppid;
    }
    parent
}

/// The session this process uses when none is named: `agent-<pid>`.
pub fn default_session() -> String {
    format!("agent-{}", find_agent_pid())
}

/// The name and parent pid of a process, from `/proc/<pid>/stat`.
fn read_stat(pid: u32) -> Option<(String, u32)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name is in parentheses and may itself contain spaces or parentheses.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_owned();
    let ppid = stat.get(close + 2..)?.split(' ').nth(1)?.parse().ok()?;
    Some((name, ppid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_stat() {
        let (name, ppid) = read_stat(std::process::id()).unwrap();
        assert!(!name.is_empty());
        assert_eq!(
            ppid,
            rustix::process::getppid().unwrap().as_raw_nonzero().get() as u32
        );
    }
}

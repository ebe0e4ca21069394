//! Finding the agent a client works for: the nearest ancestor that is not a shell or a
//! wrapper (DESIGN §3), so that an agent running `bashc` through its own shell tool
//! keeps one session for its whole life.

use bashd_protocol::ProcStat;

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
        let Some(stat) = ProcStat::read(pid) else {
            return parent;
        };
        if !NOT_AN_AGENT.contains(&stat.comm.as_str()) {
            return pid;
        }
        if stat.ppid <= 1 {
            return parent;
        }
        pid = stat.ppid;
    }
    parent
}

/// The session this process uses when none is named: `agent-<pid>`.
pub fn default_session() -> String {
    format!("agent-{}", find_agent_pid())
}

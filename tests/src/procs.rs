//! What `/proc` says about processes: the tests' only source of truth on what is alive.

use std::fs;
use std::time::{Duration, Instant};

use bashd_protocol::ProcStat;

/// Whether `pid` is a live process (a zombie is dead: it only waits to be reaped).
pub fn alive(pid: u32) -> bool {
    ProcStat::read(pid).is_some_and(|stat| stat.alive())
}

pub fn all_pids() -> Vec<u32> {
    fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn nul_separated(path: String) -> Vec<String> {
    fs::read(path)
        .map(|bytes| {
            bytes
                .split(|&b| b == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The environment of a process, as `KEY=VALUE` strings (empty if unreadable).
pub fn environ(pid: u32) -> Vec<String> {
    nul_separated(format!("/proc/{pid}/environ"))
}

/// The parent pid of a process, from `/proc/<pid>/stat`.
pub fn parent_pid(pid: u32) -> Option<u32> {
    ProcStat::read(pid).map(|stat| stat.ppid)
}

/// Every live descendant of `pid` (children, their children, ...), found by the
/// parent pids /proc shows, as an agent that ends its MCP server's tree finds them.
pub fn descendants(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = all_pids()
        .into_iter()
        .filter(|&p| alive(p))
        .filter_map(|p| Some((p, parent_pid(p)?)))
        .collect();
    let mut found = Vec::new();
    let mut next = vec![pid];
    while let Some(parent) = next.pop() {
        for &(child, _) in parents.iter().filter(|(_, ppid)| *ppid == parent) {
            if !found.contains(&child) {
                found.push(child);
                next.push(child);
            }
        }
    }
    found
}

/// The command line of a process, joined with spaces.
pub fn cmdline(pid: u32) -> String {
    nul_separated(format!("/proc/{pid}/cmdline")).join(" ")
}

/// Live processes whose command line, its words joined by spaces, is exactly
/// `command_line`. Exact, so that a client whose arguments mention the command (a
/// `bashc exec -- 'sleep 300; ...'`) is not taken for the command itself.
pub fn pids_running(command_line: &str) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&pid| alive(pid) && cmdline(pid) == command_line)
        .collect()
}

/// Whether `pid` holds a socket open: a client has connected by then.
pub fn has_socket(pid: u32) -> bool {
    fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
        fds.flatten().any(|fd| {
            fs::read_link(fd.path())
                .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
        })
    })
}

/// Live processes whose environment has every one of `entries` (`KEY=VALUE`, or a
/// `KEY=` prefix).
pub fn pids_with_env(entries: &[&str]) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&pid| {
            let env = environ(pid);
            alive(pid)
                && entries.iter().all(|entry| {
                    env.iter().any(|e| {
                        if entry.ends_with('=') {
                            e.starts_with(entry)
                        } else {
                            e == entry
                        }
                    })
                })
        })
        .collect()
}

/// Waits up to 10 s for a live process whose command line is exactly `command_line`
/// and returns the pids of all of them; panics if none appears.
pub fn wait_for_running(command_line: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    let started = wait_until(Duration::from_secs(10), || {
        pids = pids_running(command_line);
        !pids.is_empty()
    });
    assert!(started, "`{command_line}` never started");
    pids
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes; returns whether
/// it held.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The resident set size of a process in KiB (`VmRSS`), or its peak (`VmHWM`).
pub fn memory_kib(pid: u32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// A process the test started, SIGKILLed and reaped when dropped, even on a panic.
pub struct KillOnDrop(pub std::process::Child);

impl KillOnDrop {
    /// A `sleep` to stand in for an agent that owns a session.
    pub fn sleeper() -> KillOnDrop {
        let child = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .expect("cannot start sleep");
        KillOnDrop(child)
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// SIGKILLs the process and reaps it.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `command` to completion, again while its program is "Text file busy": a file
/// the test has just written (a copy of a binary, a script) may still be open for
/// writing in a child another test thread forked meanwhile, until that child execs.
pub fn output_of_new_file(command: &mut std::process::Command) -> std::process::Output {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match command.output() {
            Err(e)
                if e.kind() == std::io::ErrorKind::ExecutableFileBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            result => return result.expect("cannot run the command"),
        }
    }
}

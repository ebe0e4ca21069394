//! What a job's processes are doing, read from `/proc` when someone asks (never
//! polled in the background): the ports they listen on (`bashc jobs`, `wait --port`)
//! and whether they are blocked reading the job's stdin pipe (`waiting for input?`).
//! Blocking: every function here reads files; call them off the async workers.
//!
//! A job's processes are its root process (its resident, or its shell on the scan
//! path) and every descendant, found through `/proc/PID/task/*/children`. On the
//! resident path that is the whole job, since the resident is a child subreaper.

use std::collections::{HashMap, HashSet};
use std::fs;

use bashd_protocol::{ListenPort, ProcStat};

/// The root process of a job and everything below it, the root first.
pub fn descendants(root: u32) -> Vec<u32> {
    let mut found = vec![root];
    let mut seen = HashSet::from([root]);
    let mut at = 0;
    while at < found.len() {
        let pid = found[at];
        at += 1;
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(children) = fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for child in children.split_ascii_whitespace() {
                if let Ok(child) = child.parse::<u32>()
                    && seen.insert(child)
                {
                    found.push(child);
                }
            }
        }
    }
    // The root itself may be gone (its job ended meanwhile).
    found.retain(|pid| fs::metadata(format!("/proc/{pid}")).is_ok());
    found
}

/// A socket some process may hold: what `/proc/net/{tcp,tcp6,udp,udp6}` says of it.
#[derive(Debug, Clone)]
struct Socket {
    protocol: &'static str,
    port: u16,
    address: String,
}

/// Listening TCP sockets and bound UDP sockets of one network namespace, by inode.
type SocketTable = HashMap<u64, Socket>;

/// The ports each group of processes listens on: one `/proc/net` read per network
/// namespace, then the socket descriptors of each process.
pub fn listening(groups: &[Vec<u32>]) -> Vec<Vec<ListenPort>> {
    let mut tables: HashMap<String, SocketTable> = HashMap::new();
    groups
        .iter()
        .map(|pids| {
            let mut ports = Vec::new();
            for &pid in pids {
                let inodes = socket_inodes(pid);
                if inodes.is_empty() {
                    continue;
                }
                let namespace = fs::read_link(format!("/proc/{pid}/ns/net"))
                    .map_or_else(|_| String::new(), |p| p.to_string_lossy().into_owned());
                let table = tables.entry(namespace).or_insert_with(|| socket_table(pid));
                for inode in inodes {
                    if let Some(socket) = table.get(&inode) {
                        ports.push(ListenPort {
                            protocol: socket.protocol.to_owned(),
                            port: socket.port,
                            address: socket.address.clone(),
                            pid,
                        });
                    }
                }
            }
            ports.sort();
            ports.dedup_by(|a, b| {
                a.protocol == b.protocol && a.port == b.port && a.address == b.address
            });
            ports
        })
        .collect()
}

/// The inodes of the sockets a process holds open.
fn socket_inodes(pid: u32) -> Vec<u64> {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| {
            let target = fs::read_link(fd.path()).ok()?;
            let target = target.to_str()?;
            target
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// The sockets open for others in the network namespace of `pid`.
fn socket_table(pid: u32) -> SocketTable {
    let mut table = SocketTable::new();
    for (file, protocol, wanted) in [
        ("tcp", "tcp", "0A"),
        ("tcp6", "tcp", "0A"),
        ("udp", "udp", "07"),
        ("udp6", "udp", "07"),
    ] {
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/net/{file}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if fields.len() < 10 || fields[3] != wanted {
                continue;
            }
            let Some((address, port)) = fields[1].split_once(':') else {
                continue;
            };
            let (Ok(port), Ok(inode)) = (u16::from_str_radix(port, 16), fields[9].parse::<u64>())
            else {
                continue;
            };
            if port == 0 || inode == 0 {
                continue;
            }
            table.insert(
                inode,
                Socket {
                    protocol,
                    port,
                    address: hex_address(address),
                },
            );
        }
    }
    table
}

/// An address as `/proc/net` spells it (hex, in the kernel's byte order per 32-bit
/// word), as people write it.
fn hex_address(hex: &str) -> String {
    let words: Vec<u32> = (0..hex.len() / 8)
        .filter_map(|i| u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16).ok())
        .collect();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    match bytes.len() {
        4 => std::net::Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).to_string(),
        16 => {
            let array: [u8; 16] = bytes.try_into().unwrap_or([0; 16]);
            std::net::Ipv6Addr::from(array).to_string()
        }
        _ => hex.to_owned(),
    }
}

/// What the processes of a job with a stdin pipe are doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputState {
    /// None of them runs, and one is blocked reading the job's stdin pipe (a `read` of
    /// descriptor 0, or a `poll`/`select` while descriptor 0 is that pipe).
    pub blocked_on_stdin: bool,
    /// None of them runs, and one is blocked in a `read` of a descriptor that is the
    /// job's stdin (descriptor 0 or a copy): the kernel says so, no guess. A poll does
    /// not say which descriptors it waits on, so it never counts here.
    pub reading_stdin: bool,
    /// Their CPU time so far, in clock ticks.
    pub cpu_ticks: u64,
}

/// System call numbers that wait for input: the reads, which name descriptor 0 in
/// their first argument, and the polls, which do not say which descriptors.
#[cfg(target_arch = "x86_64")]
const READS: &[u64] = &[0, 19, 17, 295]; // read, readv, pread64, preadv
#[cfg(target_arch = "x86_64")]
const POLLS: &[u64] = &[7, 23, 270, 271, 232, 281, 441]; // poll, select, pselect6, ppoll, epoll_wait, epoll_pwait, epoll_pwait2
#[cfg(target_arch = "aarch64")]
const READS: &[u64] = &[63, 65, 67, 69];
#[cfg(target_arch = "aarch64")]
const POLLS: &[u64] = &[72, 73, 22, 441];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const READS: &[u64] = &[];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const POLLS: &[u64] = &[];

/// Reads the state of the processes below `root`; `stdin` is what `/proc/PID/fd/0`
/// names when it is the job's stdin: `pipe:[INODE]`, or a terminal job's `/dev/pts/N`.
pub fn input_state(root: u32, stdin: &str) -> InputState {
    let pipe = stdin;
    let mut any_running = false;
    let mut blocked = false;
    let mut reading = false;
    let mut cpu_ticks = 0;
    for pid in descendants(root) {
        let Some(stat) = ProcStat::read(pid) else {
            continue;
        };
        cpu_ticks += stat.cpu_ticks();
        match stat.state {
            'S' => {}
            // Zombies and stopped processes wait for nothing.
            'Z' | 'T' | 't' | 'X' => continue,
            _ => any_running = true,
        }
        let Ok(syscall) = fs::read_to_string(format!("/proc/{pid}/syscall")) else {
            continue;
        };
        let mut words = syscall.split_ascii_whitespace();
        let number = words.next().and_then(|n| n.parse::<u64>().ok());
        let first = words
            .next()
            .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
        let is_stdin = |fd: u64| {
            fs::read_link(format!("/proc/{pid}/fd/{fd}"))
                .is_ok_and(|target| target.to_str() == Some(pipe))
        };
        match (number, first) {
            (Some(n), Some(fd)) if READS.contains(&n) && is_stdin(fd) => {
                reading = true;
                blocked |= fd == 0;
            }
            (Some(n), _) if POLLS.contains(&n) && is_stdin(0) => blocked = true,
            _ => {}
        }
    }
    InputState {
        blocked_on_stdin: blocked && !any_running,
        reading_stdin: reading && !any_running,
        cpu_ticks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_as_people_write_them() {
        assert_eq!(hex_address("0100007F"), "127.0.0.1");
        assert_eq!(hex_address("00000000"), "0.0.0.0");
        assert_eq!(hex_address("00000000000000000000000000000000"), "::");
        assert_eq!(hex_address("00000000000000000000000001000000"), "::1");
    }

    #[test]
    fn a_listening_socket_of_this_process_is_found() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = std::process::id();
        let found = listening(&[vec![me]]);
        assert!(
            found[0]
                .iter()
                .any(|p| p.port == port && p.protocol == "tcp" && p.pid == me),
            "{found:?}"
        );
        assert!(descendants(me).contains(&me));
    }
}

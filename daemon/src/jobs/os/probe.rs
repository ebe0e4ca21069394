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

mod diag;

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

/// A socket some process may hold: a listening TCP socket or a bound UDP one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Socket {
    protocol: &'static str,
    port: u16,
    address: String,
}

/// Listening TCP sockets (or bound UDP sockets) of one network namespace, by inode.
type SocketTable = HashMap<u64, Socket>;

/// The two kinds of socket a port can belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Tcp,
    Udp,
}

/// The ports each group of processes listens on. Cheap for what most jobs hold: a
/// process's sockets are told apart by their protocol name (one `getxattr` each), so
/// one holding only unix sockets (every resident holds one to bashd) costs no table
/// read at all. For the TCP and UDP sockets, one table per network namespace and
/// kind, read once per call: see [`socket_table`].
pub fn listening(groups: &[Vec<u32>]) -> Vec<Vec<ListenPort>> {
    let own = namespace_of("self");
    let mut tables: HashMap<(Option<(u64, u64)>, Kind), SocketTable> = HashMap::new();
    groups
        .iter()
        .map(|pids| {
            let mut ports = Vec::new();
            for &pid in pids {
                let sockets = inet_sockets(pid);
                if sockets.is_empty() {
                    continue;
                }
                let namespace = namespace_of(&pid.to_string());
                let shared = namespace.is_some() && namespace == own;
                for (inode, kind) in sockets {
                    let table = tables
                        .entry((namespace, kind))
                        .or_insert_with(|| socket_table(pid, kind, shared));
                    if let Some(socket) = table.get(&inode) {
                        ports.push(ListenPort {
                            protocol: socket.protocol.to_owned(),
                            port: socket.port,
                            address: socket.address.clone(),
                            pid,
                            published: None,
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

/// The TCP ports listened on in the namespace a `sock_diag` socket was opened in
/// (a session network's, `sandbox/network.rs`), each once, in order.
pub fn tcp_listening_in(diag: &impl std::os::fd::AsFd) -> std::io::Result<Vec<u16>> {
    let table = diag::listening_on(diag, Kind::Tcp)?;
    let mut ports: Vec<u16> = table.values().map(|socket| socket.port).collect();
    ports.sort_unstable();
    ports.dedup();
    Ok(ports)
}

/// The network namespace of `/proc/<pid>` (`self` for bashd's own), as device and inode.
fn namespace_of(pid: &str) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(format!("/proc/{pid}/ns/net")).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// The TCP and UDP sockets a process holds open, by inode. The kernel names each
/// socket's protocol in the `system.sockprotoname` attribute of its descriptor
/// (`TCP`, `TCPv6`, `UDP`, `UDPv6`, `UNIX-STREAM`, ...), read without walking any table.
fn inet_sockets(pid: u32) -> Vec<(u64, Kind)> {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| {
            let path = fd.path();
            let target = fs::read_link(&path).ok()?;
            let inode = target
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()?;
            let mut name = [0u8; 32];
            let len = rustix::fs::getxattr(&path, "system.sockprotoname", &mut name).ok()?;
            let kind = match name[..len].strip_suffix(b"\0").unwrap_or(&name[..len]) {
                b"TCP" | b"TCPv6" => Kind::Tcp,
                b"UDP" | b"UDPv6" => Kind::Udp,
                _ => return None,
            };
            Some((inode, kind))
        })
        .collect()
}

/// The listening sockets of one kind in the network namespace of `pid`.
///
/// In bashd's own namespace (`shared`) they come from sock_diag with a state filter:
/// for TCP the kernel then walks only its listening hash, never the established one,
/// which holds every connection of the machine (reading `/proc/net/tcp` walks all of
/// it). A diag socket sees only the namespace it was opened in, and bashd cannot enter
/// a job's own namespace (`--net off`, confined jobs): `setns` needs `CAP_SYS_ADMIN`
/// in bashd's own user namespace too. So for those, and wherever sock_diag is not
/// there, `/proc/PID/net/*` of the job: it prints only that namespace's few sockets,
/// though the kernel still steps over the machine's connections to find them. It is
/// read only for jobs that hold a TCP or UDP socket, which `--net off` ones rarely do.
fn socket_table(pid: u32, kind: Kind, shared: bool) -> SocketTable {
    if shared && let Ok(table) = diag::listening(kind) {
        return table;
    }
    proc_net_table(pid, kind)
}

/// The sockets of one kind open for others, as `/proc/<pid>/net/*` lists them.
fn proc_net_table(pid: u32, kind: Kind) -> SocketTable {
    let files: [(&str, &str); 2] = match kind {
        Kind::Tcp => [("tcp", "0A"), ("tcp6", "0A")],
        Kind::Udp => [("udp", "07"), ("udp6", "07")],
    };
    let protocol = protocol_name(kind);
    let mut table = SocketTable::new();
    for (file, wanted) in files {
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

fn protocol_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Tcp => "tcp",
        Kind::Udp => "udp",
    }
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
    fn unix_sockets_are_told_apart_from_tcp_and_udp_ones() {
        let inode = |fd: &dyn std::os::fd::AsFd| {
            let fd = fd.as_fd();
            rustix::fs::fstat(fd).unwrap().st_ino
        };
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let (unix, _other) = std::os::unix::net::UnixStream::pair().unwrap();
        let found = inet_sockets(std::process::id());
        assert!(found.contains(&(inode(&tcp), Kind::Tcp)), "{found:?}");
        assert!(found.contains(&(inode(&udp), Kind::Udp)), "{found:?}");
        assert!(!found.iter().any(|(i, _)| *i == inode(&unix)), "{found:?}");
        let udp_port = udp.local_addr().unwrap().port();
        let ports = listening(&[vec![std::process::id()]]);
        assert!(
            ports[0]
                .iter()
                .any(|p| p.protocol == "udp" && p.port == udp_port),
            "{ports:?}"
        );
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

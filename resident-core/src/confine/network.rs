//! One network namespace per session and network setting (issue 43): the confined
//! jobs of a session with the network `off` (or `allow-list`) share one, loopback up,
//! so that a server one call starts is reached by the next call, by `wait --port` and,
//! published by bashd, from the host.
//!
//! The kernel lets a process enter a network namespace (`setns`) only with
//! `CAP_SYS_ADMIN` both in the user namespace that owns it and in its own: an
//! unprivileged process in the host's user namespace has neither, but it has every
//! capability in a user namespace its user made, and in the namespaces below it. So a
//! holder ([`hold`], `bashd-resident --network-holder`, started by the daemon for each
//! session network) makes a user namespace `U` (the user mapped to itself) and a network
//! namespace owned by it, brings its loopback up, and stays, doing there what bashd
//! cannot do from outside: the proxy's listening sockets, made before any job runs, a
//! `sock_diag` socket that sees the namespace's listeners, and a connection to a
//! job's port when bashd publishes it on the host. It exits when bashd's end of its
//! socket closes (the session's network dropped, or bashd gone).
//!
//! A job then enters `U` and the network namespace ([`SessionNet::enter`]) and makes its
//! own user namespace nested in `U`, then its IPC, cgroup and mount namespaces
//! (`namespaces.rs`): its processes have no capability over the shared network
//! namespace (they are in a child user namespace: measured, `ip link add` and `ip addr
//! add` fail with EPERM even as root there), and Landlock's signal and ptrace scopes
//! keep them from the holder, which runs as the same user outside their domain.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use rustix::fs::{Mode, OFlags};
use rustix::net::{AddressFamily, SocketFlags, SocketType, netlink};

use super::Failure;
use super::namespaces::{FIX_NETWORK, enter_network, enter_user, failure, setns};
use crate::frame;

/// The port of the proxy's HTTP listener (`http_proxy`, `https_proxy`) on the loopback
/// of an `allow-list` session network. Fixed: the namespace is the session's own, and
/// the holder binds it before any job runs, so it is always free there.
pub const PROXY_HTTP_PORT: u16 = 3128;
/// The port of the proxy's SOCKS5 listener (`all_proxy=socks5h://...`).
pub const PROXY_SOCKS_PORT: u16 = 1080;

/// How many descriptors the holder's first frame carries: its user and network
/// namespaces, its `sock_diag` socket, then, for `allow-list`, the HTTP and SOCKS
/// listeners.
pub const HELLO_FDS: usize = 3;

/// The user and network namespaces of a session network, as a job receives them in
/// its spawn frame: entered by the shell's process before it makes its own.
#[derive(Debug)]
pub struct SessionNet {
    user: OwnedFd,
    net: OwnedFd,
}

impl SessionNet {
    pub fn new(user: OwnedFd, net: OwnedFd) -> SessionNet {
        SessionNet { user, net }
    }

    /// The user namespace, then the network namespace, in that order: entering the
    /// user namespace is what gives the capability the second `setns` needs.
    pub(super) fn enter(&self) -> Result<(), Failure> {
        setns(&self.user, libc::CLONE_NEWUSER)
            .map_err(|e| failure("enter the session network's user namespace", e, FIX_NETWORK))?;
        setns(&self.net, libc::CLONE_NEWNET)
            .map_err(|e| failure("enter the session's network namespace", e, FIX_NETWORK))
    }
}

/// The holder of one session network, on the calling process (single-threaded,
/// `bashd-resident --network-holder`), with `socket` its stream to bashd: makes the
/// namespaces and what bashd needs made inside them, sends them in one frame (body
/// `ready`, or `error TEXT` without descriptors), then serves bashd's requests until
/// its end closes. Requests: `connect PORT` (a TCP connection from inside to
/// `127.0.0.1:PORT`, answered `ok` with the connected socket, or `error TEXT`).
pub fn hold(socket: &OwnedFd, allow_list: bool) -> io::Result<()> {
    let made = make(allow_list);
    match &made {
        Ok(fds) => {
            let raw: Vec<_> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
            frame::send(socket, b"ready", &raw)?;
        }
        Err(why) => {
            frame::send(socket, format!("error {why}").as_bytes(), &[])?;
            return Ok(());
        }
    }
    while let Some((body, _)) = frame::receive(socket)? {
        let answer = String::from_utf8(body)
            .ok()
            .and_then(|text| text.strip_prefix("connect ")?.trim().parse::<u16>().ok())
            .ok_or_else(|| io::Error::other("an unknown request"))
            .and_then(|port| {
                TcpStream::connect_timeout(
                    &SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                    Duration::from_secs(2),
                )
            });
        match answer {
            Ok(stream) => frame::send(socket, b"ok", &[stream.as_raw_fd()])?,
            Err(e) => frame::send(socket, format!("error {e}").as_bytes(), &[])?,
        }
    }
    Ok(())
}

/// The namespaces and what is made inside them, in the order of the hello frame.
fn make(allow_list: bool) -> Result<Vec<OwnedFd>, String> {
    enter_user().map_err(|f| f.to_string())?;
    enter_network().map_err(|f| f.to_string())?;
    let open = |name: &str| -> Result<OwnedFd, String> {
        rustix::fs::open(
            format!("/proc/self/ns/{name}"),
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot open the session network's {name} namespace: {e}"))
    };
    let diag = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        Some(netlink::SOCK_DIAG),
    )
    .map_err(|e| format!("cannot open a sock_diag socket in the session network: {e}"))?;
    let mut fds = vec![open("user")?, open("net")?, diag];
    if allow_list {
        for port in [PROXY_HTTP_PORT, PROXY_SOCKS_PORT] {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).map_err(|e| {
                format!("cannot listen on 127.0.0.1:{port} in the session network: {e}")
            })?;
            fds.push(OwnedFd::from(listener));
        }
    }
    Ok(fds)
}

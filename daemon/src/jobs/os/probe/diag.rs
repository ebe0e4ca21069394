//! The listening sockets of bashd's own network namespace, asked of the kernel through
//! sock_diag netlink (`NETLINK_SOCK_DIAG`, `SOCK_DIAG_BY_FAMILY` dumps with a state
//! filter), rather than read from `/proc/net/tcp`: with only `TCP_LISTEN` asked for, the
//! kernel walks its listening hash and skips the established one, whose size is every
//! connection of the machine. The messages are built and read as bytes, in the layout
//! of `linux/netlink.h` and `linux/inet_diag.h`: no unsafe code.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};

use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType, netlink};

use super::{Kind, Socket, SocketTable, protocol_name};

/// `SOCK_DIAG_BY_FAMILY`, the request and reply type of `linux/sock_diag.h`.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// `struct nlmsghdr`: length, type, flags, sequence, port id.
const HEADER: usize = 16;
/// `struct inet_diag_msg`: family, state, timer, retrans, the 48-byte socket id, then
/// expires, rqueue, wqueue, uid and inode (`u32` each).
const DIAG_MSG: usize = 72;
const TCP_LISTEN: u8 = 10;
/// What a bound, unconnected UDP socket's state reads (`TCP_CLOSE`), as `/proc/net/udp`'s `07`.
const UDP_UNCONNECTED: u8 = 7;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

/// The listening sockets of `kind` in bashd's namespace, IPv4 and IPv6, by inode.
pub(super) fn listening(kind: Kind) -> io::Result<SocketTable> {
    let socket = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        Some(netlink::SOCK_DIAG),
    )?;
    listening_on(&socket, kind)
}

/// The listening sockets of `kind` in the namespace `socket` was opened in: bashd's
/// own, or a session network's, whose holder opened it there (`sandbox/network.rs`).
pub(super) fn listening_on(socket: &impl std::os::fd::AsFd, kind: Kind) -> io::Result<SocketTable> {
    let (protocol, state) = match kind {
        Kind::Tcp => (IPPROTO_TCP, TCP_LISTEN),
        Kind::Udp => (IPPROTO_UDP, UDP_UNCONNECTED),
    };
    let mut table = SocketTable::new();
    let mut buffer = vec![0u8; 64 * 1024];
    for family in [AF_INET, AF_INET6] {
        // Sent without an address: an unbound netlink socket speaks to the kernel.
        rustix::net::send(
            socket,
            &request(family, protocol, state),
            SendFlags::empty(),
        )?;
        loop {
            let (len, _) = rustix::net::recv(socket, &mut buffer, RecvFlags::empty())?;
            if parse(&buffer[..len], kind, state, &mut table)? {
                break;
            }
        }
    }
    Ok(table)
}

/// A dump request (`nlmsghdr` + `inet_diag_req_v2`) for the sockets of `family` and
/// `protocol` in `state`, all ports.
fn request(family: u8, protocol: u8, state: u8) -> [u8; HEADER + 56] {
    let mut message = [0u8; HEADER + 56];
    message[0..4].copy_from_slice(&((HEADER + 56) as u32).to_ne_bytes());
    message[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    message[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    message[8..12].copy_from_slice(&1u32.to_ne_bytes());
    // inet_diag_req_v2: family, protocol, ext, pad, states, then the id left zero.
    message[HEADER] = family;
    message[HEADER + 1] = protocol;
    message[HEADER + 4..HEADER + 8].copy_from_slice(&(1u32 << state).to_ne_bytes());
    message
}

/// Reads one datagram of a dump into `table`; whether the dump is done.
fn parse(mut data: &[u8], kind: Kind, state: u8, table: &mut SocketTable) -> io::Result<bool> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "a short sock_diag message");
    while data.len() >= HEADER {
        let len = u32::from_ne_bytes(data[0..4].try_into().map_err(|_| bad())?) as usize;
        let kind_of = u16::from_ne_bytes([data[4], data[5]]);
        if len < HEADER || len > data.len() {
            return Err(bad());
        }
        let body = &data[HEADER..len];
        match kind_of {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let code = body
                    .get(0..4)
                    .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                // An error message with code 0 is an acknowledgement, not an error.
                if code != 0 {
                    return Err(io::Error::from_raw_os_error(-code));
                }
            }
            SOCK_DIAG_BY_FAMILY if body.len() >= DIAG_MSG => {
                if let Some((inode, socket)) = diag_msg(body, kind, state) {
                    table.insert(inode, socket);
                }
            }
            _ => {}
        }
        // Messages are aligned to 4 bytes.
        data = data.get(len.next_multiple_of(4)..).unwrap_or_default();
    }
    Ok(false)
}

/// One `inet_diag_msg`: the socket's inode and what it listens on, if it is one.
fn diag_msg(body: &[u8], kind: Kind, state: u8) -> Option<(u64, Socket)> {
    let family = body[0];
    if body[1] != state {
        return None;
    }
    // The id: source port and destination port (big-endian), source then destination
    // address (16 bytes each, an IPv4 one in the first four).
    let port = u16::from_be_bytes([body[4], body[5]]);
    let source = &body[8..24];
    let address = match family {
        AF_INET => Ipv4Addr::new(source[0], source[1], source[2], source[3]).to_string(),
        AF_INET6 => Ipv6Addr::from(<[u8; 16]>::try_from(source).ok()?).to_string(),
        _ => return None,
    };
    let inode = u32::from_ne_bytes(body[68..72].try_into().ok()?);
    if port == 0 || inode == 0 {
        return None;
    }
    let protocol = protocol_name(kind);
    Some((
        u64::from(inode),
        Socket {
            protocol,
            port,
            address,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply message as the kernel writes it, for one socket.
    fn reply(family: u8, state: u8, port: u16, address: &[u8], inode: u32) -> Vec<u8> {
        let mut message = vec![0u8; HEADER + DIAG_MSG];
        message[0..4].copy_from_slice(&((HEADER + DIAG_MSG) as u32).to_ne_bytes());
        message[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        let body = &mut message[HEADER..];
        body[0] = family;
        body[1] = state;
        body[4..6].copy_from_slice(&port.to_be_bytes());
        body[8..8 + address.len()].copy_from_slice(address);
        body[68..72].copy_from_slice(&inode.to_ne_bytes());
        message
    }

    fn done() -> Vec<u8> {
        let mut message = vec![0u8; HEADER + 4];
        message[0..4].copy_from_slice(&((HEADER + 4) as u32).to_ne_bytes());
        message[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        message
    }

    #[test]
    fn a_dump_reads_as_listening_sockets_by_inode() {
        let mut data = reply(AF_INET, TCP_LISTEN, 8080, &[127, 0, 0, 1], 41);
        let mut v6 = [0u8; 16];
        v6[15] = 1;
        data.extend(reply(AF_INET6, TCP_LISTEN, 443, &v6, 42));
        // Not listening, and a listener without an inode: neither counts.
        data.extend(reply(AF_INET, 1, 9000, &[10, 0, 0, 1], 43));
        data.extend(reply(AF_INET, TCP_LISTEN, 9001, &[0, 0, 0, 0], 0));
        let mut table = SocketTable::new();
        assert!(!parse(&data, Kind::Tcp, TCP_LISTEN, &mut table).unwrap());
        assert_eq!(table.len(), 2, "{table:?}");
        let socket = |protocol, port, address: &str| Socket {
            protocol,
            port,
            address: address.to_owned(),
        };
        assert_eq!(table[&41], socket("tcp", 8080, "127.0.0.1"));
        assert_eq!(table[&42], socket("tcp", 443, "::1"));
        assert!(parse(&done(), Kind::Tcp, TCP_LISTEN, &mut table).unwrap());
    }

    #[test]
    fn a_truncated_or_refused_dump_is_an_error() {
        let whole = reply(AF_INET, TCP_LISTEN, 8080, &[127, 0, 0, 1], 41);
        let mut table = SocketTable::new();
        assert!(parse(&whole[..40], Kind::Tcp, TCP_LISTEN, &mut table).is_err());
        let mut refused = done();
        refused[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        refused[HEADER..HEADER + 4].copy_from_slice(&(-1i32).to_ne_bytes());
        assert!(parse(&refused, Kind::Tcp, TCP_LISTEN, &mut table).is_err());
    }

    #[test]
    fn the_request_asks_for_listeners_only() {
        let message = request(AF_INET6, IPPROTO_TCP, TCP_LISTEN);
        assert_eq!(u32::from_ne_bytes(message[0..4].try_into().unwrap()), 72);
        assert_eq!(message[HEADER], AF_INET6);
        assert_eq!(message[HEADER + 1], IPPROTO_TCP);
        assert_eq!(
            u32::from_ne_bytes(message[HEADER + 4..HEADER + 8].try_into().unwrap()),
            1 << 10
        );
    }

    #[test]
    fn the_kernel_lists_a_listener_of_this_process() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let table = listening(Kind::Tcp).unwrap();
        assert!(
            table
                .values()
                .any(|s| s.port == port && s.address == "127.0.0.1"),
            "{table:?}"
        );
    }
}

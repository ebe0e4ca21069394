//! The proxy's SOCKS5 side (RFC 1928): no authentication, the CONNECT command, and
//! targets as a name (resolved by the proxy, after the allow-list let it through), an
//! IPv4 or an IPv6 address. A refusal by the allow-list is reply 0x02 ("connection not
//! allowed by ruleset"); a listed name that does not resolve, 0x04.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::{Admission, Denied};
use crate::network::allow_list::Target;

pub(super) const VERSION: u8 = 5;

const NO_AUTHENTICATION: u8 = 0;
const NO_ACCEPTABLE_METHOD: u8 = 0xff;
const CONNECT: u8 = 1;

const SUCCEEDED: u8 = 0;
const GENERAL_FAILURE: u8 = 1;
const NOT_ALLOWED: u8 = 2;
const HOST_UNREACHABLE: u8 = 4;
const CONNECTION_REFUSED: u8 = 5;
const COMMAND_NOT_SUPPORTED: u8 = 7;
const ADDRESS_TYPE_NOT_SUPPORTED: u8 = 8;

/// Serves one SOCKS5 connection on `client`; the greeting and the request must arrive
/// by `deadline`.
pub(super) async fn serve(
    client: &mut TcpStream,
    admission: &Admission,
    deadline: Instant,
) -> io::Result<()> {
    let request = match tokio::time::timeout_at(deadline, read_request(client)).await {
        Ok(request) => request?,
        Err(_) => {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the SOCKS request did not arrive in time",
            ));
        }
    };
    let (target, port) = match request {
        Ok(request) => request,
        Err(reply) => return refuse(client, reply).await,
    };
    let Some(target) = target else {
        return refuse(client, NOT_ALLOWED).await;
    };
    let mut server = match admission.open(&target, port).await {
        Ok(server) => server,
        Err(Denied::Refused(..)) => return refuse(client, NOT_ALLOWED).await,
        Err(Denied::Unresolved(_)) => return refuse(client, HOST_UNREACHABLE).await,
        Err(Denied::Unreachable(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
            return refuse(client, CONNECTION_REFUSED).await;
        }
        Err(Denied::Unreachable(_)) => return refuse(client, HOST_UNREACHABLE).await,
        Err(Denied::Busy) => return refuse(client, GENERAL_FAILURE).await,
    };
    let bound = server.local_addr()?;
    client.write_all(&reply(SUCCEEDED, bound)).await?;
    super::pump::both_ways(client, &mut server, &admission.shared().bulk).await
}

/// The greeting, then the request: `Ok(Err(reply))` for what is refused before any
/// host is judged. A name that is not one reads as `None`, which is refused.
async fn read_request(client: &mut TcpStream) -> io::Result<Result<(Option<Target>, u16), u8>> {
    let mut greeting = [0u8; 2];
    client.read_exact(&mut greeting).await?;
    let mut methods = [0u8; 255];
    let methods = &mut methods[..greeting[1] as usize];
    client.read_exact(methods).await?;
    if !methods.contains(&NO_AUTHENTICATION) {
        client.write_all(&[VERSION, NO_ACCEPTABLE_METHOD]).await?;
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the SOCKS client offers no method without authentication",
        ));
    }
    client.write_all(&[VERSION, NO_AUTHENTICATION]).await?;
    let mut header = [0u8; 4];
    client.read_exact(&mut header).await?;
    let [version, command, _, address_type] = header;
    if version != VERSION {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a SOCKS5 request",
        ));
    }
    let target = match address_type {
        1 => {
            let mut octets = [0u8; 4];
            client.read_exact(&mut octets).await?;
            Some(Target::Ip(IpAddr::V4(Ipv4Addr::from(octets))))
        }
        3 => {
            let mut name = [0u8; 256];
            client.read_exact(&mut name[..1]).await?;
            let length = name[0] as usize;
            let name = &mut name[1..=length];
            client.read_exact(name).await?;
            std::str::from_utf8(name).ok().and_then(Target::parse)
        }
        4 => {
            let mut octets = [0u8; 16];
            client.read_exact(&mut octets).await?;
            Some(Target::Ip(IpAddr::V6(Ipv6Addr::from(octets))))
        }
        _ => return Ok(Err(ADDRESS_TYPE_NOT_SUPPORTED)),
    };
    let mut port = [0u8; 2];
    client.read_exact(&mut port).await?;
    if command != CONNECT {
        return Ok(Err(COMMAND_NOT_SUPPORTED));
    }
    Ok(Ok((target, u16::from_be_bytes(port))))
}

/// A reply with `code`, bound to `address`.
fn reply(code: u8, address: SocketAddr) -> Vec<u8> {
    let mut out = vec![VERSION, code, 0];
    match address.ip() {
        IpAddr::V4(ip) => {
            out.push(1);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&address.port().to_be_bytes());
    out
}

async fn refuse(client: &mut TcpStream, code: u8) -> io::Result<()> {
    let none = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
    client.write_all(&reply(code, none)).await?;
    client.shutdown().await
}

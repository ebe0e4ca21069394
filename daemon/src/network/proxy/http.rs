//! The proxy's HTTP side: `CONNECT host:port` opens a tunnel; any other method must
//! name an absolute URI (`GET http://host/path HTTP/1.1`), judged on its host and
//! sent to the server in origin form (`GET /path HTTP/1.1`).
//!
//! One request per connection: the request goes to the server with `Connection:
//! close`, and the client's connection ends when the server's answer does. So every
//! request a client makes is judged on its own, and bytes a client sends after its
//! request can only reach the server that request was judged for.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::pump::{self, Bulk, pump};
use super::{Admission, Denied};
use crate::network::allow_list::Target;

/// Headers that concern this hop only, never passed on.
const HOP_HEADERS: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
];

/// A request head and what the client sent past it.
struct Head {
    bytes: Vec<u8>,
    /// Where the head ends (past its blank line); what follows is body.
    end: usize,
}

/// Serves one HTTP request on `client`.
pub(super) async fn serve(
    client: &mut TcpStream,
    admission: &Admission,
    deadline: Instant,
) -> io::Result<()> {
    let max = admission.shared().caps.max_head_bytes;
    let head = match read_head(client, max, deadline).await? {
        Ok(head) => head,
        Err(status) => return answer(client, status, "", status_why(status, max)).await,
    };
    let Some((method, target, version)) = request_line(&head.bytes) else {
        return answer(
            client,
            400,
            "",
            "bashd's proxy: the request line is not METHOD TARGET HTTP/1.x".to_owned(),
        )
        .await;
    };
    if method == "CONNECT" {
        let Some((host, Some(port))) = split_authority(target) else {
            return answer(
                client,
                400,
                "",
                format!("bashd's proxy: CONNECT {target}: write CONNECT host:port"),
            )
            .await;
        };
        let Some(host) = Target::parse(host) else {
            return refuse_bad_host(client, admission, host, port).await;
        };
        let mut server = match admission.open(&host, port).await {
            Ok(server) => server,
            Err(denied) => return deny(client, admission, denied).await,
        };
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
        server.write_all(&head.bytes[head.end..]).await?;
        // The head's buffer is not held for the tunnel's life.
        drop(head);
        return pump::both_ways(client, &mut server, &admission.shared().bulk).await;
    }
    let Some((authority, origin)) = absolute_uri(target) else {
        let why = if target.len() >= 8 && target[..8].eq_ignore_ascii_case("https://") {
            format!(
                "bashd's proxy: {method} {target}: an https URL goes through CONNECT, as clients do when https_proxy is set"
            )
        } else {
            format!(
                "bashd's proxy: {method} {target}: a request to a proxy names an absolute URI, like GET http://example.org/ HTTP/1.1"
            )
        };
        return answer(client, 400, "", why).await;
    };
    let Some((host, port)) = split_authority(authority) else {
        return answer(
            client,
            400,
            "",
            format!("bashd's proxy: {target}: no host in the URI"),
        )
        .await;
    };
    let port = port.unwrap_or(80);
    let Some(host) = Target::parse(host) else {
        return refuse_bad_host(client, admission, host, port).await;
    };
    let mut server = match admission.open(&host, port).await {
        Ok(server) => server,
        Err(denied) => return deny(client, admission, denied).await,
    };
    let rewritten = rewrite(&head.bytes[..head.end], method, origin, version, authority);
    server.write_all(&rewritten).await?;
    server.write_all(&head.bytes[head.end..]).await?;
    drop(head);
    one_exchange(client, &mut server, &admission.shared().bulk).await
}

/// Streams the client's body to the server and the server's answer back until the
/// server's answer ends; then the client's connection ends too, whatever it still
/// sends (the request was sent with `Connection: close`).
async fn one_exchange(
    client: &mut TcpStream,
    server: &mut TcpStream,
    bulk: &Bulk,
) -> io::Result<()> {
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    let up = pump(&mut client_read, &mut server_write, bulk);
    let down = pump(&mut server_read, &mut client_write, bulk);
    tokio::pin!(up, down);
    // Cancelling `up` when the answer has ended loses only what the client sends past
    // its request, which no server reads.
    tokio::select! {
        done = &mut down => done.map(drop),
        sent = &mut up => {
            sent?;
            down.await.map(drop)
        }
    }
}

/// Reads up to the blank line that ends a request head, within `max` bytes and by
/// `deadline`; `Ok(Err(status))` for a head too long (431) or too slow (408).
async fn read_head(
    client: &mut TcpStream,
    max: usize,
    deadline: Instant,
) -> io::Result<Result<Head, u16>> {
    let mut bytes = Vec::with_capacity(1024.min(max));
    let mut chunk = [0u8; 1024];
    loop {
        let room = (max - bytes.len()).min(chunk.len());
        if room == 0 {
            return Ok(Err(431));
        }
        let read = match tokio::time::timeout_at(deadline, client.read(&mut chunk[..room])).await {
            Ok(read) => read?,
            Err(_) => return Ok(Err(408)),
        };
        if read == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the client closed before its request head ended",
            ));
        }
        let from = bytes.len().saturating_sub(3);
        bytes.extend_from_slice(&chunk[..read]);
        if let Some(at) = memchr::memmem::find(&bytes[from..], b"\r\n\r\n") {
            let end = from + at + 4;
            return Ok(Ok(Head { bytes, end }));
        }
    }
}

/// `METHOD TARGET HTTP/1.x` of the head's first line.
fn request_line(head: &[u8]) -> Option<(&str, &str, &str)> {
    let line = head.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let valid = parts.next().is_none()
        && !method.is_empty()
        && method.bytes().all(|b| b.is_ascii_alphabetic())
        && !target.is_empty()
        && version.starts_with("HTTP/1.");
    valid.then_some((method, target, version))
}

/// `http://AUTHORITY/rest` as the authority and the origin form (`/rest`, `/` for
/// none). The scheme is matched without case; the authority ends at the first `/`,
/// `?` or `#`, as a URL parser ends it.
fn absolute_uri(target: &str) -> Option<(&str, String)> {
    if target.len() < 7 || !target[..7].eq_ignore_ascii_case("http://") {
        return None;
    }
    let rest = &target[7..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let path = path.split('#').next().unwrap_or("");
    let origin = match path {
        "" => "/".to_owned(),
        path if path.starts_with('?') => format!("/{path}"),
        path => path.to_owned(),
    };
    Some((authority, origin))
}

/// The host and port of an authority: what follows its last `@` (a userinfo before it
/// names no host: `http://listed@unlisted/` is `unlisted`), the port after the last
/// `:` past a `[v6]`. `None` for no host or a port that is no port.
fn split_authority(authority: &str) -> Option<(&str, Option<u16>)> {
    let host_port = authority.rsplit('@').next()?;
    let (host, port) = match host_port.rfind(':') {
        Some(colon) if !host_port[colon..].contains(']') => {
            let digits = &host_port[colon + 1..];
            let port = digits
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0 && digits.bytes().all(|b| b.is_ascii_digit()))?;
            (&host_port[..colon], Some(port))
        }
        _ => (host_port, None),
    };
    (!host.is_empty()).then_some((host, port))
}

/// The head as the server gets it: the request line in origin form, the hop headers
/// (and those `Connection` names) left out, `Connection: close`, and a `Host` when
/// the client sent none.
fn rewrite(head: &[u8], method: &str, origin: String, version: &str, authority: &str) -> Vec<u8> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .skip(1)
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let headers: Vec<&[u8]> = lines.by_ref().take_while(|line| !line.is_empty()).collect();
    let name_of = |line: &[u8]| -> String {
        let name = line.split(|&b| b == b':').next().unwrap_or(b"");
        String::from_utf8_lossy(name).trim().to_ascii_lowercase()
    };
    let mut hop: Vec<String> = HOP_HEADERS.iter().map(|h| h.to_string()).collect();
    for line in &headers {
        if name_of(line) == "connection" {
            let value =
                String::from_utf8_lossy(line.splitn(2, |&b| b == b':').nth(1).unwrap_or(b""));
            hop.extend(
                value
                    .split(',')
                    .map(|token| token.trim().to_ascii_lowercase()),
            );
        }
    }
    let mut out = Vec::with_capacity(head.len() + 32);
    out.extend_from_slice(format!("{method} {origin} {version}\r\n").as_bytes());
    let mut has_host = false;
    for line in headers {
        let name = name_of(line);
        if hop.contains(&name) {
            continue;
        }
        has_host |= name == "host";
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
    }
    if !has_host {
        let host = authority.rsplit('@').next().unwrap_or(authority);
        out.extend_from_slice(format!("Host: {host}\r\n").as_bytes());
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

/// A host that is neither an address nor a name: no entry can name it.
async fn refuse_bad_host(
    client: &mut TcpStream,
    admission: &Admission,
    host: &str,
    port: u16,
) -> io::Result<()> {
    let list = admission.allow_list();
    let body = format!(
        "bashd's proxy refused {host}:{port}: not a host name nor an address, so not on the allow-list\nthe allow-list: {list}\n"
    );
    answer(client, 403, "", body).await
}

/// The answer to a request not carried.
async fn deny(client: &mut TcpStream, admission: &Admission, denied: Denied) -> io::Result<()> {
    let caps = admission.shared().caps;
    match denied {
        Denied::Refused(refusal, ask) => {
            let list = admission.allow_list();
            let target = format!("{}:{}", refusal.host, refusal.port);
            let (asked, mut header) = match ask {
                Some(ask) => (
                    format!(
                        "ask {ask} is open: the person allows it from a terminal with bashc allow --ask {ask} (for this session) or bashc allow {target} (every session), and it is reached from the next connection\n"
                    ),
                    format!("X-Bashd-Ask: {ask}\r\n"),
                ),
                None => (
                    format!(
                        "the person allows it from a terminal with bashc allow {target}, and it is reached from the next connection\n"
                    ),
                    String::new(),
                ),
            };
            header.push_str(&format!("X-Bashd-Refused: {target}\r\n"));
            let body = format!(
                "bashd: {refusal}\n{asked}the allow-list: {list}\nto allow it for good, the person adds it to {} and reloads bashd (SIGHUP)\n",
                list.origin(),
            );
            answer(client, 403, &header, body).await
        }
        Denied::Unresolved(e) => answer(client, 502, "", format!("bashd's proxy: the host is on the allow-list, and does not resolve: {e}\n")).await,
        Denied::Unreachable(e) => answer(client, 502, "", format!("bashd's proxy: the host is on the allow-list, and cannot be reached: {e}\n")).await,
        Denied::Busy => answer(client, 503, "", format!(
            "bashd's proxy is at its limit of connections ({} in all, {} per session): retry when some of this session's connections have ended\n",
            caps.max_connections, caps.max_session_connections
        )).await,
    }
}

fn status_why(status: u16, max: usize) -> String {
    match status {
        431 => format!("bashd's proxy: the request head is longer than {max} bytes\n"),
        _ => "bashd's proxy: the request head did not arrive in time\n".to_owned(),
    }
}

/// Writes a plain-text answer that closes the connection.
async fn answer(
    client: &mut TcpStream,
    status: u16,
    headers: &str,
    body: String,
) -> io::Result<()> {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        _ => "Service Unavailable",
    };
    let text = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
        body.len()
    );
    client.write_all(text.as_bytes()).await?;
    client.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_is_what_follows_the_userinfo() {
        assert_eq!(
            absolute_uri("http://listed@unlisted/x?y"),
            Some(("listed@unlisted", "/x?y".to_owned()))
        );
        assert_eq!(split_authority("listed@unlisted"), Some(("unlisted", None)));
        assert_eq!(split_authority("a@b@c:8080"), Some(("c", Some(8080))));
        assert_eq!(split_authority("[::1]:80"), Some(("[::1]", Some(80))));
        assert_eq!(split_authority("[::1]"), Some(("[::1]", None)));
        assert_eq!(split_authority("host:x"), None);
        assert_eq!(split_authority("host:0"), None);
        assert_eq!(absolute_uri("HTTP://h"), Some(("h", "/".to_owned())));
        assert_eq!(absolute_uri("http://h?q"), Some(("h", "/?q".to_owned())));
        assert_eq!(
            absolute_uri("http://unlisted#@listed/"),
            Some(("unlisted", "/".to_owned()))
        );
        assert_eq!(absolute_uri("/path"), None);
    }

    #[test]
    fn the_server_gets_origin_form_without_hop_headers() {
        let head = b"GET http://h/p HTTP/1.1\r\nHost: h\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nAccept: */*\r\n\r\n";
        let out = rewrite(head, "GET", "/p".into(), "HTTP/1.1", "h");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /p HTTP/1.1\r\nHost: h\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let out = rewrite(
            b"GET http://u@h:81/ HTTP/1.0\r\n\r\n",
            "GET",
            "/".into(),
            "HTTP/1.0",
            "u@h:81",
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET / HTTP/1.0\r\nHost: h:81\r\nConnection: close\r\n\r\n"
        );
    }
}

//! The proxy on real sockets, all on loopback (issue 43): servers bound to 127.0.0.2
//! and 127.0.0.3, names mapped by the test's own resolver, which records what it is
//! asked. Each refusal has its positive control beside it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::network::resolve::Resolving;

/// Names the test maps, and every name it was asked for.
#[derive(Default)]
struct MapResolver {
    names: HashMap<String, Vec<IpAddr>>,
    asked: Mutex<Vec<String>>,
}

impl Resolve for MapResolver {
    fn resolve<'a>(&'a self, name: &'a str, port: u16) -> Resolving<'a> {
        self.asked.lock().unwrap().push(name.to_owned());
        let found = self
            .names
            .get(name)
            .map(|ips| ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect());
        Box::pin(async move {
            found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such name"))
        })
    }
}

/// An HTTP server on `ip` that answers each request with `hello from IP: REQUEST LINE`,
/// and records the request heads it got.
struct Server {
    address: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

async fn server(ip: &str) -> Server {
    let listener = TcpListener::bind((ip.parse::<IpAddr>().unwrap(), 0))
        .await
        .unwrap();
    let address = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&heads);
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let recorded = Arc::clone(&recorded);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let line = head.lines().next().unwrap_or("").to_owned();
                recorded.lock().unwrap().push(head);
                let body = format!("hello from {}: {line}", address.ip());
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    Server { address, heads }
}

struct Running {
    proxy: Proxy,
    address: SocketAddr,
    resolver: Arc<MapResolver>,
    refusals: mpsc::Receiver<Refusal>,
    shutdown: CancellationToken,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn list(entries: &[String]) -> AllowList {
    AllowList::new(
        entries.iter().map(|e| e.parse().unwrap()).collect(),
        "[sandbox] allow_hosts in /test/config.toml".into(),
    )
}

async fn start(entries: &[String], names: &[(&str, &str)], caps: ProxyCaps) -> Running {
    let resolver = Arc::new(MapResolver {
        names: names
            .iter()
            .map(|(name, ip)| (name.to_string(), vec![ip.parse().unwrap()]))
            .collect(),
        asked: Mutex::default(),
    });
    let (tell, mut reported) = mpsc::channel::<Refused>(64);
    let (forward, refusals) = mpsc::channel(64);
    // The jobs actor's part: each refusal opens an ask, a1, a2, ...
    tokio::spawn(async move {
        let mut asks = 0;
        while let Some(Refused { refusal, ask }) = reported.recv().await {
            asks += 1;
            let _ = ask.send(AskId(asks));
            let _ = forward.send(refusal).await;
        }
    });
    let proxy = Proxy::new(list(entries), caps, resolver.clone(), tell);
    let shutdown = CancellationToken::new();
    let address = serve_session(&proxy, "s1", &shutdown).await;
    Running {
        proxy,
        address,
        resolver,
        refusals,
        shutdown,
    }
}

/// Serves a listener of `session` on 127.0.0.1 and gives its address.
async fn serve_session(proxy: &Proxy, session: &str, shutdown: &CancellationToken) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (proxy, session, shutdown) = (proxy.clone(), session.to_owned(), shutdown.clone());
    tokio::spawn(async move { proxy.serve(listener, session, shutdown).await });
    address
}

/// Sends `request` raw to the proxy and reads all it answers.
async fn raw(proxy: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

fn get(url: &str) -> String {
    format!("GET {url} HTTP/1.1\r\nHost: ignored\r\nProxy-Connection: keep-alive\r\n\r\n")
}

/// `CONNECT authority`, then a plain request through the tunnel.
async fn connect(proxy: SocketAddr, authority: &str) -> String {
    raw(proxy, &format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\nGET /tunnelled HTTP/1.1\r\nHost: x\r\n\r\n")).await
}

enum Socks<'a> {
    Name(&'a str),
    Ip(IpAddr),
}

/// A SOCKS5 CONNECT to `target:port`, then a plain request: the reply code and what
/// came back.
async fn socks(proxy: SocketAddr, target: Socks<'_>, port: u16) -> (u8, String) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream.write_all(&[5, 1, 0]).await.unwrap();
    let mut choice = [0u8; 2];
    stream.read_exact(&mut choice).await.unwrap();
    assert_eq!(choice, [5, 0]);
    let mut request = vec![5, 1, 0];
    match target {
        Socks::Name(name) => {
            request.push(3);
            request.push(name.len() as u8);
            request.extend_from_slice(name.as_bytes());
        }
        Socks::Ip(IpAddr::V4(ip)) => {
            request.push(1);
            request.extend_from_slice(&ip.octets());
        }
        Socks::Ip(IpAddr::V6(ip)) => {
            request.push(4);
            request.extend_from_slice(&ip.octets());
        }
    }
    request.extend_from_slice(&port.to_be_bytes());
    stream.write_all(&request).await.unwrap();
    let mut reply = [0u8; 10];
    stream.read_exact(&mut reply).await.unwrap();
    if reply[1] != 0 {
        return (reply[1], String::new());
    }
    stream
        .write_all(b"GET /socks HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    (0, String::from_utf8_lossy(&answer).into_owned())
}

fn refused(answer: &str, host_port: &str) {
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert!(
        answer.contains(&format!(
            "network: refused {host_port}, not on the allow-list"
        )),
        "{answer}"
    );
    assert!(answer.contains("the allow-list: "), "{answer}");
    assert!(answer.contains("/test/config.toml"), "{answer}");
}

#[tokio::test]
async fn a_listed_host_is_reached_over_http_connect_and_socks() {
    let server = server("127.0.0.2").await;
    let port = server.address.port();
    let mut proxy = start(
        &[format!("listed.test:{port}"), format!("127.0.0.2:{port}")],
        &[("listed.test", "127.0.0.2")],
        ProxyCaps::default(),
    )
    .await;
    let answer = raw(
        proxy.address,
        &get(&format!("http://listed.test:{port}/path?q=1")),
    )
    .await;
    assert!(
        answer.contains("hello from 127.0.0.2: GET /path?q=1 HTTP/1.1"),
        "{answer}"
    );
    let head = server.heads.lock().unwrap()[0].clone();
    assert!(
        head.contains("Connection: close") && !head.contains("Proxy-Connection"),
        "{head}"
    );
    let answer = connect(proxy.address, &format!("listed.test:{port}")).await;
    assert!(
        answer.starts_with("HTTP/1.1 200 Connection established\r\n\r\n"),
        "{answer}"
    );
    assert!(
        answer.contains("hello from 127.0.0.2: GET /tunnelled"),
        "{answer}"
    );
    let (code, answer) = socks(proxy.address, Socks::Name("listed.test"), port).await;
    assert_eq!(code, 0);
    assert!(
        answer.contains("hello from 127.0.0.2: GET /socks"),
        "{answer}"
    );
    let (code, answer) = socks(proxy.address, Socks::Ip("127.0.0.2".parse().unwrap()), port).await;
    assert_eq!(code, 0);
    assert!(answer.contains("hello from 127.0.0.2"), "{answer}");
    assert!(proxy.refusals.try_recv().is_err(), "nothing was refused");
}

#[tokio::test]
async fn an_unlisted_host_is_refused_and_named_over_each_protocol() {
    let (listed, unlisted) = (server("127.0.0.2").await, server("127.0.0.3").await);
    let (port, other) = (listed.address.port(), unlisted.address.port());
    let mut proxy = start(&[format!("127.0.0.2:{port}")], &[], ProxyCaps::default()).await;
    // The positive control: the listed one is reached.
    let answer = raw(proxy.address, &get(&format!("http://127.0.0.2:{port}/"))).await;
    assert!(answer.contains("hello from 127.0.0.2"), "{answer}");
    let answer = raw(proxy.address, &get(&format!("http://127.0.0.3:{other}/"))).await;
    refused(&answer, &format!("127.0.0.3:{other}"));
    assert!(
        answer.contains(&format!("the allow-list: 127.0.0.2:{port}")),
        "{answer}"
    );
    // The refusal names the ask it opened, and how the person answers it (issue 44).
    assert!(
        answer.contains("X-Bashd-Ask: a1\r\n")
            && answer.contains(
                "ask a1 is open: the person allows it from a terminal with bashc allow --ask a1"
            ),
        "{answer}"
    );
    let answer = connect(proxy.address, &format!("127.0.0.3:{other}")).await;
    refused(&answer, &format!("127.0.0.3:{other}"));
    assert!(!answer.contains("hello"), "{answer}");
    let (code, _) = socks(
        proxy.address,
        Socks::Ip("127.0.0.3".parse().unwrap()),
        other,
    )
    .await;
    assert_eq!(code, 2, "not allowed by ruleset");
    assert!(
        unlisted.heads.lock().unwrap().is_empty(),
        "the unlisted server got nothing"
    );
    let told = proxy.refusals.recv().await.unwrap();
    assert_eq!(told.session, "s1");
    assert_eq!(
        told.to_string(),
        format!("network: refused 127.0.0.3:{other}, not on the allow-list")
    );
    assert_eq!(proxy.proxy.counts().refused, 3);
}

#[tokio::test]
async fn the_request_line_decides_not_the_host_header_nor_the_userinfo() {
    let (listed, unlisted) = (server("127.0.0.2").await, server("127.0.0.3").await);
    let (port, other) = (listed.address.port(), unlisted.address.port());
    let proxy = start(
        &[format!("listed.test:{port}"), format!("127.0.0.2:{port}")],
        &[("listed.test", "127.0.0.2"), ("unlisted.test", "127.0.0.3")],
        ProxyCaps::default(),
    )
    .await;
    // A Host header of the listed host, on a request line of the unlisted one.
    let answer = raw(
        proxy.address,
        &format!("GET http://127.0.0.3:{other}/ HTTP/1.1\r\nHost: listed.test:{port}\r\n\r\n"),
    )
    .await;
    refused(&answer, &format!("127.0.0.3:{other}"));
    // The other way round is the listed host: the header does not count either way.
    let answer = raw(
        proxy.address,
        &format!("GET http://listed.test:{port}/ HTTP/1.1\r\nHost: unlisted.test:{other}\r\n\r\n"),
    )
    .await;
    assert!(answer.contains("hello from 127.0.0.2"), "{answer}");
    // The listed name as userinfo names no host.
    let answer = raw(
        proxy.address,
        &get(&format!("http://listed.test:{port}@unlisted.test:{other}/")),
    )
    .await;
    refused(&answer, &format!("unlisted.test:{other}"));
    let answer = raw(
        proxy.address,
        &get(&format!("http://listed.test@127.0.0.3:{other}/")),
    )
    .await;
    refused(&answer, &format!("127.0.0.3:{other}"));
    // A hand-written absolute URI of an unlisted name: refused without a lookup.
    let answer = raw(
        proxy.address,
        &get(&format!("http://unlisted.test:{other}/x")),
    )
    .await;
    refused(&answer, &format!("unlisted.test:{other}"));
    let answer = raw(proxy.address, &get("http://UNLISTED.test./")).await;
    refused(&answer, "unlisted.test:80");
    // CONNECT to a port of the listed host that the list does not name.
    let answer = connect(proxy.address, &format!("listed.test:{other}")).await;
    refused(&answer, &format!("listed.test:{other}"));
    let (code, _) = socks(proxy.address, Socks::Name("unlisted.test"), other).await;
    assert_eq!(code, 2);
    assert!(
        unlisted.heads.lock().unwrap().is_empty(),
        "the unlisted server got nothing"
    );
    let asked = proxy.resolver.asked.lock().unwrap().clone();
    assert!(
        asked.iter().all(|name| name == "listed.test"),
        "only the listed name was resolved: {asked:?}"
    );
    assert_eq!(asked.len(), 1, "{asked:?}");
}

#[tokio::test]
async fn a_listed_name_reaches_a_loopback_address_only_when_it_is_listed() {
    let server = server("127.0.0.2").await;
    let port = server.address.port();
    let entries = [format!("loopy.test:{port}")];
    let mut proxy = start(
        &entries,
        &[("loopy.test", "127.0.0.2")],
        ProxyCaps::default(),
    )
    .await;
    let answer = raw(proxy.address, &get(&format!("http://loopy.test:{port}/"))).await;
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert!(
        answer.contains("it resolves to 127.0.0.2, an address of this host"),
        "{answer}"
    );
    let (code, _) = socks(proxy.address, Socks::Name("loopy.test"), port).await;
    assert_eq!(code, 2);
    assert!(matches!(
        proxy.refusals.recv().await.unwrap().why,
        RefusedWhy::Local(_)
    ));
    assert!(server.heads.lock().unwrap().is_empty());
    // With the address listed (a reload), the name reaches it.
    proxy
        .proxy
        .set_allow_list(list(&[entries[0].clone(), "127.0.0.2".into()]));
    let answer = raw(proxy.address, &get(&format!("http://loopy.test:{port}/"))).await;
    assert!(answer.contains("hello from 127.0.0.2"), "{answer}");
}

#[tokio::test]
async fn an_ip_literal_passes_only_when_listed_as_one() {
    let server = server("127.0.0.2").await;
    let port = server.address.port();
    // The name is listed, and resolves to the address: the address itself is not.
    let proxy = start(
        &["named.test".into(), format!("127.0.0.3:{port}")],
        &[("named.test", "127.0.0.2")],
        ProxyCaps::default(),
    )
    .await;
    let answer = raw(proxy.address, &get(&format!("http://127.0.0.2:{port}/"))).await;
    refused(&answer, &format!("127.0.0.2:{port}"));
    let answer = raw(
        proxy.address,
        &get(&format!("http://[::ffff:127.0.0.2]:{port}/")),
    )
    .await;
    refused(&answer, &format!("[::ffff:127.0.0.2]:{port}"));
    let (code, _) = socks(
        proxy.address,
        Socks::Ip("::ffff:127.0.0.2".parse().unwrap()),
        port,
    )
    .await;
    assert_eq!(code, 2);
    // The positive control: listed as an address, it passes.
    proxy
        .proxy
        .set_allow_list(list(&[format!("127.0.0.2:{port}")]));
    let answer = raw(proxy.address, &get(&format!("http://127.0.0.2:{port}/"))).await;
    assert!(answer.contains("hello from 127.0.0.2"), "{answer}");
    let (code, _) = socks(
        proxy.address,
        Socks::Ip("::ffff:127.0.0.2".parse().unwrap()),
        port,
    )
    .await;
    assert_eq!(code, 0);
}

#[tokio::test]
async fn a_listed_name_that_does_not_resolve_is_a_bad_gateway() {
    let proxy = start(&["nowhere.test".into()], &[], ProxyCaps::default()).await;
    let answer = raw(proxy.address, &get("http://nowhere.test/")).await;
    assert!(answer.starts_with("HTTP/1.1 502 "), "{answer}");
    assert!(answer.contains("does not resolve"), "{answer}");
    let (code, _) = socks(proxy.address, Socks::Name("nowhere.test"), 443).await;
    assert_eq!(code, 4, "host unreachable");
}

#[tokio::test]
async fn one_request_per_connection_so_a_pipelined_one_is_not_carried() {
    let (listed, unlisted) = (server("127.0.0.2").await, server("127.0.0.3").await);
    let (port, other) = (listed.address.port(), unlisted.address.port());
    let proxy = start(&[format!("127.0.0.2:{port}")], &[], ProxyCaps::default()).await;
    let answer = raw(
        proxy.address,
        &format!(
            "GET http://127.0.0.2:{port}/one HTTP/1.1\r\nHost: a\r\n\r\nGET http://127.0.0.3:{other}/two HTTP/1.1\r\nHost: b\r\n\r\n"
        ),
    )
    .await;
    assert!(answer.contains("GET /one"), "{answer}");
    assert_eq!(
        answer.matches("HTTP/1.1 ").count(),
        1,
        "one answer, then the connection ends: {answer}"
    );
    assert!(unlisted.heads.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_slow_reader_does_not_stall_another_connection() {
    // A server that sends far more than any buffer holds.
    let listener = TcpListener::bind("127.0.0.2:0").await.unwrap();
    let big = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut head = [0u8; 1024];
                let _ = stream.read(&mut head).await;
                let chunk = vec![b'x'; 1 << 16];
                let _ = stream
                    .write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
                    .await;
                while stream.write_all(&chunk).await.is_ok() {}
            });
        }
    });
    let server = server("127.0.0.3").await;
    let port = server.address.port();
    let proxy = start(
        &["127.0.0.2".into(), "127.0.0.3".into()],
        &[],
        ProxyCaps::default(),
    )
    .await;
    // The slow client asks and never reads.
    let mut slow = TcpStream::connect(proxy.address).await.unwrap();
    slow.write_all(get(&format!("http://{big}/")).as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    for n in 0..20 {
        let answer = tokio::time::timeout(
            Duration::from_secs(5),
            raw(proxy.address, &get(&format!("http://127.0.0.3:{port}/{n}"))),
        )
        .await
        .expect("another connection is served while one reader is stuck");
        assert!(answer.contains(&format!("GET /{n}")), "{answer}");
    }
    drop(slow);
}

#[tokio::test]
async fn the_caps_answer_busy_past_the_limit_and_a_freed_place_serves_again() {
    let server = server("127.0.0.2").await;
    let port = server.address.port();
    let caps = ProxyCaps {
        max_connections: 3,
        max_session_connections: 2,
        ..ProxyCaps::default()
    };
    let proxy = start(&["127.0.0.2".into()], &[], caps).await;
    // Two tunnels held open by this session: its cap.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(proxy.address).await.unwrap();
        stream
            .write_all(format!("CONNECT 127.0.0.2:{port} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut answer = [0u8; 39];
        stream.read_exact(&mut answer).await.unwrap();
        assert!(answer.starts_with(b"HTTP/1.1 200"));
        held.push(stream);
    }
    let answer = raw(proxy.address, &get(&format!("http://127.0.0.2:{port}/"))).await;
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(
        answer.contains("limit of connections (3 in all, 2 per session)"),
        "{answer}"
    );
    let (code, _) = socks(proxy.address, Socks::Ip("127.0.0.2".parse().unwrap()), port).await;
    assert_eq!(code, 1, "general failure");
    // Another session has a place of its own, up to the total.
    let other = serve_session(&proxy.proxy, "s2", &proxy.shutdown).await;
    let mut third = TcpStream::connect(other).await.unwrap();
    third
        .write_all(format!("CONNECT 127.0.0.2:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = [0u8; 39];
    third.read_exact(&mut answer).await.unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 200"));
    let answer = raw(other, &get(&format!("http://127.0.0.2:{port}/"))).await;
    assert!(
        answer.starts_with("HTTP/1.1 503 "),
        "the total holds: {answer}"
    );
    assert_eq!(proxy.proxy.counts().open, 3);
    // A freed place serves again.
    drop(held.pop());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let answer = raw(
            proxy.address,
            &get(&format!("http://127.0.0.2:{port}/again")),
        )
        .await;
        if answer.contains("GET /again") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{answer}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_request_head_is_bounded_in_size_and_time() {
    let caps = ProxyCaps {
        max_head_bytes: 2048,
        head_timeout: Duration::from_millis(300),
        ..ProxyCaps::default()
    };
    let proxy = start(&["127.0.0.2".into()], &[], caps).await;
    let long = format!(
        "GET http://127.0.0.2/ HTTP/1.1\r\nX-Long: {}\r\n\r\n",
        "a".repeat(4096)
    );
    let answer = raw(proxy.address, &long).await;
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    let answer = raw(proxy.address, "GET http://127.0.0.2/ HTTP/1.1\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    let answer = raw(proxy.address, "GET /origin-form HTTP/1.1\r\n\r\n").await;
    assert!(
        answer.starts_with("HTTP/1.1 400 ") && answer.contains("absolute URI"),
        "{answer}"
    );
}

/// Bytes that tell their place: a shifted or lost piece shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// A bulk transfer through a CONNECT tunnel, both ways at once, and an HTTP answer
/// comes through whole: moved with `splice(2)` through a pipe by default (the
/// counts say so), and copied with it off. On main there was no pipe.
#[tokio::test]
async fn a_bulk_transfer_comes_through_whole_spliced_and_copied() {
    const LEN: usize = 8 << 20;
    let echo = TcpListener::bind("127.0.0.2:0").await.unwrap();
    let echo_address = echo.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = echo.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = stream.split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
                let _ = write.shutdown().await;
            });
        }
    });
    let bulk = TcpListener::bind("127.0.0.2:0").await.unwrap();
    let bulk_address = bulk.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = bulk.accept().await {
            tokio::spawn(async move {
                let mut head = [0u8; 1024];
                let _ = stream.read(&mut head).await;
                let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {LEN}\r\n\r\n");
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.write_all(&pattern(LEN)).await;
            });
        }
    });
    for splice in [true, false] {
        let caps = ProxyCaps {
            splice,
            ..ProxyCaps::default()
        };
        let proxy = start(&["127.0.0.2".into()], &[], caps).await;
        let mut tunnel = TcpStream::connect(proxy.address).await.unwrap();
        tunnel
            .write_all(format!("CONNECT {echo_address} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut established = [0u8; 39];
        tunnel.read_exact(&mut established).await.unwrap();
        assert!(established.starts_with(b"HTTP/1.1 200"));
        let (mut read, mut write) = tunnel.into_split();
        let sending = tokio::spawn(async move {
            write.write_all(&pattern(LEN)).await.unwrap();
            write.shutdown().await.unwrap();
        });
        let mut back = Vec::with_capacity(LEN);
        read.read_to_end(&mut back).await.unwrap();
        sending.await.unwrap();
        assert!(
            back == pattern(LEN),
            "splice {splice}: the echo came back whole"
        );

        let mut client = TcpStream::connect(proxy.address).await.unwrap();
        client
            .write_all(get(&format!("http://{bulk_address}/")).as_bytes())
            .await
            .unwrap();
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.unwrap();
        let body = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|at| &answer[at + 4..])
            .unwrap();
        assert!(
            body == pattern(LEN),
            "splice {splice}: the answer came whole"
        );
        let spliced = proxy.proxy.counts().spliced;
        if splice {
            // Both ways of the tunnel, and the answer.
            assert!(spliced >= 3, "{spliced}");
        } else {
            assert_eq!(spliced, 0);
        }
    }
}

/// A host grant is joined to the list once, when the grants change, not for each
/// connection: two connections of the session read the same joined list. The grant
/// holds for its session only, and no longer once its time is up. On main the list
/// was joined afresh for every connection while a grant existed.
#[tokio::test]
async fn host_grants_are_joined_when_they_change_not_per_connection() {
    let granted = server("127.0.0.3").await;
    let port = granted.address.port();
    let proxy = start(&["127.0.0.2".into()], &[], ProxyCaps::default()).await;
    let shared = &proxy.proxy.shared;
    let before = shared.list_for("s1");
    proxy.proxy.set_host_grants(vec![
        HostGrant {
            session: Some("s1".into()),
            entry: "127.0.0.3".parse().unwrap(),
            until: None,
        },
        HostGrant {
            session: None,
            entry: "127.0.0.4".parse().unwrap(),
            until: Some(std::time::Instant::now() + Duration::from_millis(300)),
        },
    ]);
    let first = shared.list_for("s1");
    assert!(
        !Arc::ptr_eq(&before, &first),
        "a change of grants joins anew"
    );
    assert!(
        Arc::ptr_eq(&first, &shared.list_for("s1")),
        "the same joined list for the session's next connection"
    );
    assert!(first.allows_ip("127.0.0.3".parse().unwrap(), port));
    assert!(first.allows_ip("127.0.0.4".parse().unwrap(), 80));
    let other = shared.list_for("s2");
    assert!(!other.allows_ip("127.0.0.3".parse().unwrap(), port));
    assert!(other.allows_ip("127.0.0.4".parse().unwrap(), 80));
    let answer = raw(proxy.address, &get(&format!("http://127.0.0.3:{port}/g"))).await;
    assert!(answer.contains("GET /g"), "{answer}");
    let s2 = serve_session(&proxy.proxy, "s2", &proxy.shutdown).await;
    let answer = raw(s2, &get(&format!("http://127.0.0.3:{port}/g"))).await;
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    // The timed grant lapses; the session's own stays.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let after = shared.list_for("s1");
    assert!(!after.allows_ip("127.0.0.4".parse().unwrap(), 80));
    assert!(after.allows_ip("127.0.0.3".parse().unwrap(), port));
    assert!(Arc::ptr_eq(&after, &shared.list_for("s1")));
}

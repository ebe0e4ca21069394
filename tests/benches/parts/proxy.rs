//! `BASHD_BENCH=proxy` (issue 43): bashd's proxy for `allow-list` jobs.
//!
//! Throughput: 200 MiB through it (HTTP forwarding and a CONNECT tunnel) against the
//! same transfer made directly (goal: at least 0.8x of direct's throughput), with bulk
//! bytes moved by `splice(2)` (the default) and copied through the proxy's memory
//! (`ProxyCaps::splice` off), the three taken in turns. The proxy runs in a process
//! of its own for this: this bench binary again, with `BASHD_BENCH_PROXY_CHILD` set
//! ([`child`]), serving the daemon's `Proxy` on loopback listeners.
//!
//! Memory: 1,000 connections held through it at once, in four sessions of 250 (the
//! default cap is 256 a session), with the RSS of the process that holds them (goal:
//! under 64 MiB): that child, and bashd itself, whose confined `allow-list` jobs open
//! them from inside their session networks (`held_in_bashd`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bashd_tests::Daemon;
use bashd_tests::procs::memory_kib;

use super::{median_of, ms};

/// The environment variable that makes the bench binary a proxy.
pub const CHILD: &str = "BASHD_BENCH_PROXY_CHILD";
const BYTES: u64 = 200 << 20;
const RUNS: usize = 5;
const HELD: usize = 1000;
const SESSIONS: usize = 4;

pub fn proxy(tokio: &tokio::runtime::Runtime) {
    let proxy = ProxyProcess::start();
    let server = bulk_server();
    for (what, via) in [
        ("HTTP forwarding", Via::Http),
        ("a CONNECT tunnel", Via::Connect),
    ] {
        let [direct, spliced, copied] = in_turns([
            &mut || fetch(server, None),
            &mut || fetch(server, Some((proxy.ports[0], via))),
            &mut || fetch(server, Some((proxy.copy_port, via))),
        ]);
        report_throughput(what, direct, spliced, copied);
    }
    let idle = memory_kib(proxy.pid(), "VmRSS").unwrap_or(0);
    let (held, took) = tokio.block_on(hold(&proxy.ports));
    let rss = memory_kib(proxy.pid(), "VmRSS").unwrap_or(0);
    println!(
        "proxy: {} connections held through it in {SESSIONS} sessions, in a process of its own (opened in {:.0} ms): RSS {:.1} MiB (idle {:.1} MiB; goal: under 64 MiB)",
        held.len(),
        ms(took),
        rss as f64 / 1024.0,
        idle as f64 / 1024.0,
    );
    drop(held);
    drop(proxy);
    held_in_bashd();
}

/// The medians of three transfers, run in turns.
fn in_turns(mut runs: [&mut dyn FnMut(); 3]) -> [Duration; 3] {
    let mut times: [Vec<Duration>; 3] = Default::default();
    for _ in 0..RUNS {
        for (run, times) in runs.iter_mut().zip(&mut times) {
            let start = Instant::now();
            run();
            times.push(start.elapsed());
        }
    }
    times.map(median_of)
}

fn report_throughput(what: &str, direct: Duration, spliced: Duration, copied: Duration) {
    let mib = (BYTES >> 20) as f64;
    let rate = |d: Duration| mib / d.as_secs_f64();
    println!(
        "proxy: {} MiB through {what}: {:.2}x of direct spliced, {:.2}x copied ({:.0} / {:.0} vs {:.0} MiB/s; goal >= 0.8x)",
        BYTES >> 20,
        direct.as_secs_f64() / spliced.as_secs_f64(),
        direct.as_secs_f64() / copied.as_secs_f64(),
        rate(spliced),
        rate(copied),
        rate(direct),
    );
}

/// The proxy in a process of its own, ended on drop: `ports` served with splice, one
/// a session, and `copy_port` by a proxy with splice off.
struct ProxyProcess {
    child: Child,
    ports: Vec<u16>,
    copy_port: u16,
}

impl ProxyProcess {
    fn start() -> ProxyProcess {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(CHILD, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let mut ports: Vec<u16> = line
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        let copy_port = ports.pop().unwrap();
        ProxyProcess {
            child,
            ports,
            copy_port,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        // Closing its stdin ends it.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The child's side: the daemon's proxy, default caps, allowing 127.0.0.2, on
/// `SESSIONS` listeners, and one with splice off on another, whose ports it prints on
/// one line (that one last); it ends when its stdin does.
pub fn child() {
    let _ = bashd::jobs::raise_open_files_limit();
    let workers =
        std::thread::available_parallelism().map_or(1, |n| n.get().saturating_sub(1).max(1));
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async {
        use bashd::network::{AllowList, Proxy, ProxyCaps, SystemResolver};
        let (refusals, _unread) = tokio::sync::mpsc::channel(16);
        let allow = AllowList::new(vec!["127.0.0.2".parse().unwrap()], "bench".into());
        let made = |caps| {
            Proxy::new(
                allow.clone(),
                caps,
                Arc::new(SystemResolver),
                refusals.clone(),
            )
        };
        let spliced = made(ProxyCaps::default());
        let copied = made(ProxyCaps {
            splice: false,
            ..ProxyCaps::default()
        });
        let shutdown = tokio_util::sync::CancellationToken::new();
        let mut ports = Vec::new();
        for n in 0..=SESSIONS {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            ports.push(listener.local_addr().unwrap().port().to_string());
            let proxy = if n < SESSIONS { &spliced } else { &copied }.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move { proxy.serve(listener, format!("s{n}"), shutdown).await });
        }
        println!("{}", ports.join(" "));
        tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new()))
            .await
            .unwrap()
            .unwrap();
        shutdown.cancel();
    });
}

/// A server on 127.0.0.2 that answers each request with `BYTES` bytes.
fn bulk_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.2:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if stream.read(&mut byte).unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {BYTES}\r\nConnection: close\r\n\r\n"
                );
                stream.write_all(answer.as_bytes()).unwrap();
                let chunk = vec![b'x'; 1 << 20];
                let mut left = BYTES;
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    if stream.write_all(&chunk[..n]).is_err() {
                        return;
                    }
                    left -= n as u64;
                }
            });
        }
    });
    address
}

#[derive(Clone, Copy)]
enum Via {
    Http,
    Connect,
}

/// Fetches the bulk answer directly or through the proxy, reading it all.
fn fetch(server: SocketAddr, via: Option<(u16, Via)>) {
    let mut stream = match via {
        None => {
            let mut stream = TcpStream::connect(server).unwrap();
            write!(stream, "GET / HTTP/1.1\r\nHost: {server}\r\n\r\n").unwrap();
            stream
        }
        Some((port, Via::Http)) => {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
            write!(
                stream,
                "GET http://{server}/ HTTP/1.1\r\nHost: {server}\r\n\r\n"
            )
            .unwrap();
            stream
        }
        Some((port, Via::Connect)) => {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
            write!(stream, "CONNECT {server} HTTP/1.1\r\n\r\n").unwrap();
            let mut established = [0u8; 39];
            stream.read_exact(&mut established).unwrap();
            assert!(established.starts_with(b"HTTP/1.1 200"));
            write!(stream, "GET / HTTP/1.1\r\nHost: {server}\r\n\r\n").unwrap();
            stream
        }
    };
    let mut buffer = vec![0u8; 256 << 10];
    let mut total = 0u64;
    loop {
        let n = stream.read(&mut buffer).unwrap();
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    assert!(
        total > BYTES,
        "the whole answer came through: {total} bytes"
    );
}

/// `HELD` CONNECT tunnels through the proxy's `ports` in turn to an echo server, each
/// carrying one round trip, all held open; and how long opening them took.
async fn hold(ports: &[u16]) -> (Vec<tokio::net::TcpStream>, Duration) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let echo = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut read, mut write) = stream.split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
    let start = Instant::now();
    let mut opening = Vec::new();
    for n in 0..HELD {
        let port = ports[n % ports.len()];
        opening.push(tokio::spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            stream
                .write_all(format!("CONNECT {echo} HTTP/1.1\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut established = [0u8; 39];
            stream.read_exact(&mut established).await.unwrap();
            assert!(
                established.starts_with(b"HTTP/1.1 200"),
                "{}",
                String::from_utf8_lossy(&established)
            );
            stream.write_all(b"ping").await.unwrap();
            let mut pong = [0u8; 4];
            stream.read_exact(&mut pong).await.unwrap();
            stream
        }));
    }
    let mut held = Vec::new();
    for task in opening {
        held.push(task.await.unwrap());
    }
    let took = start.elapsed();
    // Let the proxy settle before its memory is read.
    tokio::time::sleep(Duration::from_millis(200)).await;
    (held, took)
}

/// The same 1,000 connections held through bashd's own proxy: four sessions, each
/// with a confined `allow-list` job whose bash opens 250 CONNECT tunnels to an echo
/// server on 127.0.0.2 through its session network's proxy port and holds them; the
/// RSS of bashd once `bashc status` counts them all open (and before, with the four
/// session networks made and idle).
fn held_in_bashd() {
    let echo = TcpListener::bind("127.0.0.2:0").unwrap();
    let echo_port = echo.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in echo.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut read = stream.try_clone().unwrap();
                let mut write = stream;
                let _ = std::io::copy(&mut read, &mut write);
            });
        }
    });
    let daemon = Daemon::start_with_config("[sandbox]\nallow_hosts = [\"127.0.0.2\"]\n");
    let per_session = HELD / SESSIONS;
    let exec = |session: &str, command: &str| {
        let out = daemon.run_bashc_in(
            session,
            &[
                "exec",
                "--sandbox",
                "workspace-write",
                "--net",
                "allow-list",
                "--mode",
                "background",
                "--",
                command,
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // The sessions' networks made, with a job each that holds nothing yet.
    for n in 0..SESSIONS {
        exec(&format!("held{n}"), "sleep 600");
    }
    let connections = || -> u64 {
        let out = daemon.run_bashc(&["status", "--json"]);
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        status["network"]["proxy"]["connections"]
            .as_u64()
            .unwrap_or(0)
    };
    std::thread::sleep(Duration::from_millis(500));
    let idle = memory_kib(daemon.pid(), "VmRSS").unwrap_or(0);
    let hold = format!(
        "port=${{http_proxy##*:}}; fds=(); \
         for i in $(seq {per_session}); do exec {{fd}}<>/dev/tcp/127.0.0.1/$port || exit 1; \
         printf 'CONNECT 127.0.0.2:{echo_port} HTTP/1.1\\r\\n\\r\\n' >&$fd; fds+=($fd); done; \
         for fd in \"${{fds[@]}}\"; do read -r line <&$fd; read -r blank <&$fd; done; sleep 600"
    );
    let start = Instant::now();
    for n in 0..SESSIONS {
        exec(&format!("held{n}"), &hold);
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut open = 0;
    while Instant::now() < deadline {
        open = connections();
        if open >= HELD as u64 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let took = start.elapsed();
    // Let bashd settle before its memory is read.
    std::thread::sleep(Duration::from_millis(500));
    let rss = memory_kib(daemon.pid(), "VmRSS").unwrap_or(0);
    println!(
        "proxy: {open} connections held through bashd's own proxy by confined jobs in {SESSIONS} sessions (open in {:.0} ms): bashd's RSS {:.1} MiB (with the 4 session networks idle {:.1} MiB; goal: under 64 MiB)",
        ms(took),
        rss as f64 / 1024.0,
        idle as f64 / 1024.0,
    );
    // The daemon's drop ends it and every job's process.
    drop(daemon);
}

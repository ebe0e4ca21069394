//! Issue 31: `bashc mcp` reads and writes its stdio on the runtime's own thread when
//! they are pipes or sockets (`mcp/stdio.rs`), and through tokio's blocking threads
//! otherwise. What an agent sees stays the same over each kind of descriptor, and the
//! descriptors keep their blocking mode, which other holders of them share.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use bashd_tests::{Daemon, KillOnDrop, bin_path, wait_until};
use serde_json::{Value, json};

const WITHIN: Duration = Duration::from_secs(20);

/// `bashc mcp` for `daemon`, not started.
fn server(daemon: &Daemon) -> Command {
    let mut command = Command::new(bin_path("bashc"));
    command
        .arg("mcp")
        .env(
            bashc::protocol::runtime::RUNTIME_DIR_ENV,
            daemon.runtime_dir(),
        )
        .env("XDG_CONFIG_HOME", daemon.config_home())
        .env("BASHD_NO_AUTOSTART", "1")
        .current_dir(daemon.scratch())
        .stderr(Stdio::null());
    command
}

/// Writes `message` as one line.
fn send(to: &mut impl Write, message: Value) {
    to.write_all(format!("{message}\n").as_bytes()).unwrap();
    to.flush().unwrap();
}

/// Reads lines until the response with `id`.
fn response(from: &mut impl BufRead, id: i64) -> Value {
    loop {
        let mut line = String::new();
        let n = from.read_line(&mut line).unwrap();
        assert!(n > 0, "bashc mcp closed its stdout before answering {id}");
        let message: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        if message["id"] == id {
            return message;
        }
    }
}

/// `initialize`, then `initialized`.
fn initialize(to: &mut impl Write, from: &mut impl BufRead) {
    send(
        to,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "stdio-test", "version": "0"}}}),
    );
    let initialized = response(from, 1);
    assert_eq!(
        initialized["result"]["serverInfo"]["name"], "bashd",
        "{initialized}"
    );
    send(
        to,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
}

/// A `bash` call, as a request line.
fn bash(id: i64, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "bash", "arguments": arguments}})
}

/// The text of a tool result.
fn text(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {response}"))
}

/// Whether the descriptor `fd` of process `pid` is open in non-blocking mode, from
/// its `/proc/PID/fdinfo` flags (octal).
fn non_blocking(pid: u32, fd: i32) -> bool {
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap();
    let flags = info
        .lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .unwrap_or_else(|| panic!("no flags in {info}"));
    let flags = u32::from_str_radix(flags.trim(), 8).unwrap();
    flags & 0o4000 != 0
}

/// A Node agent (libuv) gives its server a socket for stdin and stdout, not a pipe:
/// calls go both ways over it, a result larger than a socket takes at once included,
/// and the socket stays in blocking mode.
/// (Issue 31.)
#[test]
fn the_server_speaks_over_a_socket_and_leaves_it_blocking() {
    let daemon = Daemon::start();
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut child = KillOnDrop(
        server(&daemon)
            .stdin(OwnedFd::from(theirs.try_clone().unwrap()))
            .stdout(OwnedFd::from(theirs))
            .spawn()
            .unwrap(),
    );
    ours.set_read_timeout(Some(WITHIN)).unwrap();
    let mut to = ours.try_clone().unwrap();
    let mut from = BufReader::new(ours);
    initialize(&mut to, &mut from);

    send(
        &mut to,
        bash(2, json!({"command": "echo hello over a socket"})),
    );
    let answer = response(&mut from, 2);
    assert!(text(&answer).contains("hello over a socket"), "{answer}");
    // 900,000 bytes: several times what the socket holds, so the server meets a full
    // socket and waits for room.
    send(
        &mut to,
        bash(
            3,
            json!({"command": "head -c 900000 /dev/zero | tr '\\0' x | fold -w 99",
                "max_lines": 100000, "max_bytes": 1000000}),
        ),
    );
    let answer = response(&mut from, 3);
    let lines = text(&answer)
        .lines()
        .filter(|line| *line == "x".repeat(99))
        .count();
    assert_eq!(lines, 9090, "{}", &text(&answer)[..200]);
    assert_eq!(
        answer["result"]["isError"],
        false,
        "{}",
        &text(&answer)[..200]
    );

    let pid = child.pid();
    assert!(!non_blocking(pid, 0), "stdin was made non-blocking");
    assert!(!non_blocking(pid, 1), "stdout was made non-blocking");
    // The positive control: a descriptor made non-blocking reads as one.
    to.set_nonblocking(true).unwrap();
    assert!(non_blocking(std::process::id(), to.as_raw_fd()));
    drop(to);
    drop(from);
    assert!(
        wait_until(WITHIN, || child.0.try_wait().unwrap().is_some()),
        "bashc mcp did not exit when its socket closed"
    );
}

/// Pipes, as most agents (and rmcp's client) start a server: a call is answered, and
/// both pipes stay in blocking mode.
/// (Issue 31.)
#[test]
fn the_server_leaves_its_pipes_blocking() {
    let daemon = Daemon::start();
    let mut child = KillOnDrop(
        server(&daemon)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut to = child.0.stdin.take().unwrap();
    let mut from = BufReader::new(child.0.stdout.take().unwrap());
    initialize(&mut to, &mut from);
    send(&mut to, bash(2, json!({"command": "echo piped"})));
    let answer = response(&mut from, 2);
    assert!(text(&answer).contains("piped"), "{answer}");
    let pid = child.pid();
    assert!(!non_blocking(pid, 0), "stdin was made non-blocking");
    assert!(!non_blocking(pid, 1), "stdout was made non-blocking");
    drop(to);
    assert!(
        wait_until(WITHIN, || child.0.try_wait().unwrap().is_some()),
        "bashc mcp did not exit when its stdin closed"
    );
}

/// What epoll cannot watch (here /dev/null, at once at its end) is read through
/// tokio's blocking stdin: the server starts and exits cleanly at the end of its input.
/// (Issue 31.)
#[test]
fn the_server_takes_stdin_that_epoll_cannot_watch() {
    let daemon = Daemon::start();
    let mut child = KillOnDrop(
        server(&daemon)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut status = None;
    assert!(
        wait_until(WITHIN, || {
            status = child.0.try_wait().unwrap();
            status.is_some()
        }),
        "bashc mcp did not exit at the end of /dev/null"
    );
    assert_eq!(status.unwrap().code(), Some(0));
}

/// Issue 45: a method the server does not know is answered with its name and what the
/// server offers, not with the name alone; a known one still answers (the control).
#[test]
fn an_unknown_method_says_what_the_server_offers() {
    let daemon = Daemon::start();
    let mut child = KillOnDrop(
        server(&daemon)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut to = child.0.stdin.take().unwrap();
    let mut from = BufReader::new(child.0.stdout.take().unwrap());
    initialize(&mut to, &mut from);
    send(
        &mut to,
        json!({"jsonrpc": "2.0", "id": 2, "method": "bash/run", "params": {}}),
    );
    let answer = response(&mut from, 2);
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("\"bash/run\"")
            && message.contains("tools/list")
            && message.contains("tools/call")
            && message.contains("bash_check"),
        "{answer}"
    );
    send(
        &mut to,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    );
    let listed = response(&mut from, 3);
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    drop(to);
    assert!(
        wait_until(WITHIN, || child.0.try_wait().unwrap().is_some()),
        "bashc mcp did not exit when its stdin closed"
    );
}

//! The wire: bad input of every kind gets an error where one can be sent and never
//! stops the daemon; the library runs many requests on one connection.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use bashc::protocol::codec::ClientCodec;
use bashc::protocol::{
    Caller, ClientFrame, ErrorKind, Hello, JobRef, JobRequest, KillRequest, PROTOCOL_VERSION,
    Request, Response, ServerFrame,
};
use bashd_tests::Daemon;
use bashd_tests::procs::{memory_kib, pids_running};
use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

fn encode(frame: ClientFrame) -> Vec<u8> {
    let mut buf = BytesMut::new();
    ClientCodec::default().encode(frame, &mut buf).unwrap();
    buf.to_vec()
}

fn hello(protocol: u32) -> Vec<u8> {
    encode(ClientFrame::Hello(Hello {
        protocol,
        client: "raw test".into(),
        pid: std::process::id(),
    }))
}

/// Sends `bytes` on a new connection, half-closes it, and returns every frame the
/// daemon sent before closing its side.
fn exchange(daemon: &Daemon, bytes: &[u8]) -> Vec<ServerFrame> {
    let mut stream = UnixStream::connect(daemon.socket_path()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    // The daemon may close before reading everything; that is its right.
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    let mut buf = BytesMut::from(&reply[..]);
    let mut codec = ClientCodec::default();
    let mut frames = Vec::new();
    while let Ok(Some(frame)) = codec.decode(&mut buf) {
        frames.push(frame);
    }
    frames
}

fn fatal_kind(frames: &[ServerFrame]) -> Option<ErrorKind> {
    frames.iter().find_map(|f| match f {
        ServerFrame::Fatal(e) => Some(e.kind.clone()),
        _ => None,
    })
}

fn assert_still_serving(daemon: &Daemon) {
    let out = daemon.run_bashc(&["exec", "--", "echo alive"]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::show(&out));
}

#[test]
fn bad_frames_get_an_error_and_the_daemon_keeps_serving() {
    let daemon = Daemon::start();
    // Warm up, so the first measurement is not of a cold daemon.
    assert_still_serving(&daemon);
    let rss_before = memory_kib(daemon.pid(), "VmRSS").unwrap();

    for round in 0..20 {
        let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7 + round) as u8).collect();
        // Patterned bytes: read as a length prefix, round 0 promises 462 KB and sends
        // 4 KB (a truncated frame), later rounds promise more than the 16 MiB limit.
        assert_eq!(
            fatal_kind(&exchange(&daemon, &garbage)),
            Some(ErrorKind::BadFrame)
        );
        // A length prefix of 0xFFFFFFFF.
        let frames = exchange(&daemon, &[0xFF, 0xFF, 0xFF, 0xFF, 0, 0]);
        assert_eq!(fatal_kind(&frames), Some(ErrorKind::BadFrame));
        // A frame of garbage with a plausible length.
        let mut bad = 64u32.to_be_bytes().to_vec();
        bad.extend(std::iter::repeat_n(0xEE, 64));
        assert_eq!(
            fatal_kind(&exchange(&daemon, &bad)),
            Some(ErrorKind::BadFrame)
        );
        // A truncated frame: the length promises more than ever comes.
        let mut truncated = hello(PROTOCOL_VERSION);
        truncated.truncate(truncated.len() - 2);
        assert_eq!(
            fatal_kind(&exchange(&daemon, &truncated)),
            Some(ErrorKind::BadFrame)
        );
        // A good hello, then garbage.
        let mut after = hello(PROTOCOL_VERSION);
        after.extend_from_slice(&bad);
        let frames = exchange(&daemon, &after);
        assert!(
            matches!(frames.first(), Some(ServerFrame::Welcome(_))),
            "{frames:?}"
        );
        assert_eq!(fatal_kind(&frames), Some(ErrorKind::BadFrame));
    }
    assert_still_serving(&daemon);
    let rss_after = memory_kib(daemon.pid(), "VmRSS").unwrap();
    assert!(
        rss_after < rss_before + 8 * 1024,
        "daemon RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
}

#[test]
fn a_wrong_protocol_version_is_reported_with_both_versions() {
    let daemon = Daemon::start();
    let frames = exchange(&daemon, &hello(PROTOCOL_VERSION + 41));
    let Some(ServerFrame::Fatal(error)) = frames.first() else {
        panic!("expected a fatal error, got {frames:?}");
    };
    assert_eq!(error.kind, ErrorKind::VersionMismatch);
    assert!(
        error
            .message
            .contains(&format!("protocol {}", PROTOCOL_VERSION + 41))
            && error
                .message
                .contains(&format!("protocol {PROTOCOL_VERSION}"))
            && error.message.contains("restart the daemon"),
        "{}",
        error.message
    );
    assert_still_serving(&daemon);
}

#[test]
fn a_request_before_hello_is_refused() {
    let daemon = Daemon::start();
    let frames = exchange(&daemon, &encode(ClientFrame::Request(1, Request::Status)));
    assert_eq!(fatal_kind(&frames), Some(ErrorKind::BadFrame));
}

#[tokio::test]
async fn a_command_over_the_limit_is_refused_by_name() {
    let daemon = Daemon::start();
    let client = daemon.client().await;
    let command = format!("echo {}", "x".repeat(2 * 1024 * 1024));
    let error = client.exec(daemon.params(&command)).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("more than the limit"), "{message}");
    // The same connection still works.
    let result = client.exec(daemon.params("echo ok")).await.unwrap();
    assert_eq!(result.stdout.text, "ok\n");
}

#[tokio::test]
async fn one_connection_carries_many_requests_at_once() {
    let daemon = Daemon::start();
    let client = daemon.client().await;
    let mut slow = client
        .request(Request::Exec(daemon.params("sleep 1; echo slow")))
        .await
        .unwrap();
    // Wait until the slow job runs, so the fast one is certainly sent after it.
    assert!(matches!(slow.next().await.unwrap(), Response::Started(_)));
    let fast = client.exec(daemon.params("echo fast")).await.unwrap();
    assert_eq!(fast.stdout.text, "fast\n");
    // The slow one is still running: its result has not arrived.
    let pending = tokio::time::timeout(Duration::from_millis(10), slow.next()).await;
    assert!(
        pending.is_err(),
        "the slow job finished before the fast one: {pending:?}"
    );
    loop {
        if let Response::Finished(result) = slow.next().await.unwrap() {
            assert_eq!(result.stdout.text, "slow\n");
            break;
        }
    }
    let status = client.status().await.unwrap();
    assert_eq!(status.daemon_pid, daemon.pid());
    assert_eq!(status.running_jobs, 0);
}

#[tokio::test]
async fn a_job_that_answered_is_no_longer_running_for_the_next_request() {
    let daemon = Daemon::start();
    let client = daemon.client().await;
    // The answer and the daemon's own record of the end travel different paths; a
    // request sent on the answer must never find the job still running.
    for round in 0..200 {
        let result = client.exec(daemon.params("true")).await.unwrap();
        let status = client.status().await.unwrap();
        assert_eq!(
            status.running_jobs, 0,
            "round {round}: {} was still running after its answer",
            result.job
        );
    }
}

#[tokio::test]
async fn a_check_sent_on_a_move_to_the_background_repeats_nothing() {
    let daemon = Daemon::start();
    let client = daemon.client().await;
    let caller = || Caller {
        session: "test".into(),
        owner: None,
    };
    // The shell exits at once and leaves its sleep: the job moves to the background
    // with "started" already shown, and a check sent on that answer starts after it.
    for round in 0..20 {
        let moved = client
            .exec(daemon.params("sleep 600.7 & echo started"))
            .await
            .unwrap();
        assert!(moved.backgrounded, "round {round}: {moved:?}");
        assert_eq!(moved.stdout.text, "started\n", "round {round}");
        let job = JobRef::Id(moved.job.to_string());
        let checked = client
            .check(JobRequest {
                caller: caller(),
                job: job.clone(),
                any_session: false,
            })
            .await
            .unwrap();
        assert_eq!(
            checked.stdout.text, "",
            "round {round}: {} showed a line twice",
            moved.job
        );
        client
            .kill(KillRequest {
                caller: caller(),
                job,
                signal: None,
                grace_ms: None,
                any_session: false,
            })
            .await
            .unwrap();
    }
    assert!(pids_running("sleep 600.7").is_empty());
}

#[test]
fn two_hundred_idle_connections_do_not_hold_up_a_request() {
    let daemon = Daemon::start();
    // Half never say anything, half complete the handshake and then idle.
    let idle: Vec<UnixStream> = (0..200)
        .map(|i| {
            let mut stream = UnixStream::connect(daemon.socket_path()).unwrap();
            if i % 2 == 0 {
                stream.write_all(&hello(PROTOCOL_VERSION)).unwrap();
            }
            stream
        })
        .collect();
    // A daemon that served connections one at a time would wait out each idle one's
    // handshake timeout (10 s) before this request.
    let started = std::time::Instant::now();
    assert_still_serving(&daemon);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "a request took {:?} with 200 idle connections open",
        started.elapsed()
    );
    drop(idle);
}

/// What a raw client sent `bytes` in one write got back: every frame until the first
/// `Fatal` or `Finished`, or until the daemon closed the connection. The client is
/// perl, run in a user namespace of its own when `unshared` (as a process of a sandbox
/// that shed its channel is): the daemon's checks of the peer read the process, so
/// this one must not be the test's. The client stays connected until then, so an
/// `Exec` it sent is not given up by its going away.
fn raw_call(daemon: &Daemon, bytes: &[u8], unshared: bool) -> Vec<ServerFrame> {
    use std::process::{Command, Stdio};

    let frames_file = tempfile::NamedTempFile::new_in(daemon.scratch()).unwrap();
    std::fs::write(frames_file.path(), bytes).unwrap();
    let script = "use Socket; \
        socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die \"socket: $!\"; \
        connect($s, pack_sockaddr_un($ARGV[0])) or die \"connect: $!\"; \
        open(my $f, '<:raw', $ARGV[1]) or die \"open: $!\"; \
        my $bytes = do { local $/; <$f> }; \
        syswrite($s, $bytes) == length($bytes) or die \"write: $!\"; \
        while (sysread($s, my $chunk, 65536)) { syswrite(STDOUT, $chunk) }";
    let mut command = Command::new("perl");
    command
        .args(["-e", script])
        .arg(daemon.socket_path())
        .arg(frames_file.path());
    if unshared {
        command = crate::boundary::in_user_namespace(command);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("cannot run perl");
    let mut stdout = child.stdout.take().unwrap();
    let (chunks, arrived) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 65536];
        while let Ok(n @ 1..) = stdout.read(&mut chunk) {
            if chunks.send(chunk[..n].to_vec()).is_err() {
                return;
            }
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut buf = BytesMut::new();
    let mut codec = ClientCodec::default();
    let mut frames = Vec::new();
    'read: while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        let Ok(chunk) = arrived.recv_timeout(left) else {
            break;
        };
        buf.extend_from_slice(&chunk);
        while let Ok(Some(frame)) = codec.decode(&mut buf) {
            let last = matches!(
                frame,
                ServerFrame::Fatal(_) | ServerFrame::Response(_, Response::Finished(_))
            );
            frames.push(frame);
            if last {
                break 'read;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    frames
}

/// `Hello` of `protocol` and an `Exec` that creates `file`, as the client sends them:
/// in one write, the request not waiting for `Welcome`.
fn hello_and_touch(daemon: &Daemon, protocol: u32, file: &std::path::Path) -> Vec<u8> {
    let mut bytes = hello(protocol);
    let touch = format!("touch '{}'", file.display());
    bytes.extend(encode(ClientFrame::Request(
        1,
        Request::Exec(daemon.params(&touch)),
    )));
    bytes
}

fn finished_with(frames: &[ServerFrame]) -> Option<i32> {
    frames.iter().find_map(|frame| match frame {
        ServerFrame::Response(_, Response::Finished(result)) => result.exit_code,
        _ => None,
    })
}

/// Issue 31: a request that came in one write with `Hello` is served only once the
/// daemon has checked the peer and the `Hello`: a refused peer's (another protocol
/// version, a connection over `max_connections`, a process of a sandbox on the
/// daemon's socket) never runs, while the same bytes from an admitted peer do.
#[test]
fn a_request_sent_with_hello_runs_only_for_an_admitted_peer() {
    let daemon = Daemon::start_with_config("[limits]\nmax_connections = 2\n");
    let file = |name: &str| daemon.scratch().join(name);
    // The positive control: the same write from outside, at this protocol, runs.
    let frames = raw_call(
        &daemon,
        &hello_and_touch(&daemon, PROTOCOL_VERSION, &file("admitted")),
        false,
    );
    assert!(
        matches!(frames.first(), Some(ServerFrame::Welcome(_))),
        "{frames:?}"
    );
    assert_eq!(finished_with(&frames), Some(0), "{frames:?}");
    assert!(file("admitted").exists());

    // Another protocol version.
    let frames = raw_call(
        &daemon,
        &hello_and_touch(&daemon, PROTOCOL_VERSION + 41, &file("mismatch")),
        false,
    );
    assert_eq!(
        fatal_kind(&frames),
        Some(ErrorKind::VersionMismatch),
        "{frames:?}"
    );

    // A process in another user namespace, on the socket.
    let frames = raw_call(
        &daemon,
        &hello_and_touch(&daemon, PROTOCOL_VERSION, &file("unshared")),
        true,
    );
    let Some(ServerFrame::Fatal(refused)) = frames.first() else {
        panic!("a sandboxed peer was not refused: {frames:?}");
    };
    assert!(
        refused.message.contains("comes from inside a sandbox"),
        "{refused:?}"
    );

    // Over the cap: two connections held, served, the third refused.
    let held: Vec<UnixStream> = (0..2)
        .map(|_| {
            let mut stream = UnixStream::connect(daemon.socket_path()).unwrap();
            stream.write_all(&hello(PROTOCOL_VERSION)).unwrap();
            let mut welcome = [0u8; 4];
            stream.read_exact(&mut welcome).unwrap();
            stream
        })
        .collect();
    let frames = raw_call(
        &daemon,
        &hello_and_touch(&daemon, PROTOCOL_VERSION, &file("over-the-cap")),
        false,
    );
    assert_eq!(fatal_kind(&frames), Some(ErrorKind::Busy), "{frames:?}");
    drop(held);

    // Another call made after them all runs to its end: had any of theirs been
    // served, its `touch` would have run by now.
    let admitted = bashd_tests::wait_until(Duration::from_secs(20), || {
        let frames = raw_call(
            &daemon,
            &hello_and_touch(&daemon, PROTOCOL_VERSION, &file("after")),
            false,
        );
        finished_with(&frames) == Some(0)
    });
    assert!(admitted, "the daemon serves no call after the refusals");
    for refused in ["mismatch", "unshared", "over-the-cap"] {
        assert!(!file(refused).exists(), "the {refused} peer's request ran");
    }
}

/// The frames of the first read on `stream` that holds any: what the daemon wrote
/// together arrives together.
fn first_read(stream: &mut UnixStream) -> Vec<ServerFrame> {
    let mut buf = BytesMut::new();
    let mut codec = ClientCodec::default();
    loop {
        let mut chunk = [0u8; 65536];
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "the daemon closed the connection");
        buf.extend_from_slice(&chunk[..n]);
        let mut frames = Vec::new();
        while let Ok(Some(frame)) = codec.decode(&mut buf) {
            frames.push(frame);
        }
        if !frames.is_empty() {
            return frames;
        }
    }
}

fn connected(daemon: &Daemon, bytes: &[u8]) -> UnixStream {
    let mut stream = UnixStream::connect(daemon.socket_path()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    stream
}

/// Issue 31: an `Exec` sent with `Hello` gets `Welcome` and its first answer (the
/// job's id, `Recorded`) in one write, waking its client once; a `Hello` alone (the
/// relay waits for `Welcome` before its first request) and a `Hello` with a request
/// whose answer may wait long get their `Welcome` without waiting for anything.
#[test]
fn welcome_goes_out_with_the_first_answer_of_an_exec_it_came_with() {
    let daemon = Daemon::start();
    let mut bytes = hello(PROTOCOL_VERSION);
    bytes.extend(encode(ClientFrame::Request(
        1,
        Request::Exec(daemon.params("sleep 1")),
    )));
    let frames = first_read(&mut connected(&daemon, &bytes));
    assert!(
        matches!(
            frames[..],
            [
                ServerFrame::Welcome(_),
                ServerFrame::Response(1, Response::Recorded(_))
            ]
        ),
        "{frames:?}"
    );

    let frames = first_read(&mut connected(&daemon, &hello(PROTOCOL_VERSION)));
    assert!(
        matches!(frames[..], [ServerFrame::Welcome(_)]),
        "{frames:?}"
    );

    let job = daemon.background_in("test", &[], "sleep 600.9");
    let mut bytes = hello(PROTOCOL_VERSION);
    bytes.extend(encode(ClientFrame::Request(
        1,
        Request::Wait(bashc::protocol::WaitRequest {
            caller: daemon.caller(),
            job: JobRef::Id(job),
            timeout_ms: None,
            conditions: Default::default(),
            any_session: false,
            mcp_call: false,
        }),
    )));
    let frames = first_read(&mut connected(&daemon, &bytes));
    assert!(
        matches!(frames[..], [ServerFrame::Welcome(_)]),
        "{frames:?}"
    );
}

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

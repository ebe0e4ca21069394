//! Bounded under abuse (issue 18): huge partial frames, unread answers and too many
//! connections cost the daemon a bounded amount of memory, and it goes on serving.
//! Memory is the daemon's `VmRSS` from /proc; latency targets live in the benchmark.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use bashd_tests::Daemon;
use bashd_tests::attack::{Attack, hello};
use bashd_tests::procs::memory_kib;

use crate::{json, show};

const MIB: u64 = 1024;

fn rss_kib(daemon: &Daemon) -> u64 {
    memory_kib(daemon.pid(), "VmRSS").expect("the daemon's /proc status has VmRSS")
}

fn exec_true(daemon: &Daemon) {
    let out = daemon.run_bashc(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

/// The two attacks at once: 64 connections that each send a 16 MiB length
/// prefix and 16 MiB - 1 bytes, and 2,000 pipelined `output` requests whose answers
/// are never read. Before: 1-2 GiB, and 1.7 GiB kept after they closed.
#[test]
fn partial_frames_and_unread_answers_leave_the_daemon_small() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&[
        "exec",
        "--json",
        "--mode",
        "background",
        "--",
        "yes i18-abcdefghijklmnopqrstuvwxyz-0123456789 | head -c 30000000",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let job = json(&out)["job"].as_str().unwrap().to_owned();
    let waited = daemon.run_bashc(&["wait", &job, "--timeout", "60"]);
    assert_eq!(waited.status.code(), Some(0), "{}", show(&waited));
    exec_true(&daemon);

    let socket = daemon.socket_path();
    let mut frames = Attack::partial_frames(&socket, 64, 16 << 20);
    let mut pages = Attack::unread_pages(&socket, &job, 2_000, 1_000_000);
    // Let the attack take what it can: the socket buffers fill and the writers block.
    assert!(
        frames.wait_stalled(Duration::from_secs(60)) && pages.wait_stalled(Duration::from_secs(60)),
        "the daemon went on reading the attack"
    );
    let mut peak = rss_kib(&daemon);
    for _ in 0..5 {
        exec_true(&daemon);
        peak = peak.max(rss_kib(&daemon));
    }
    assert!(
        peak < 64 * MIB,
        "daemon RSS {peak} KiB under attack (limit 64 MiB)"
    );
    frames.stop();
    pages.stop();
    exec_true(&daemon);
    let settled = bashd_tests::wait_until(Duration::from_secs(20), || rss_kib(&daemon) < 32 * MIB);
    assert!(
        settled,
        "daemon RSS {} KiB after the attack ended (limit 32 MiB)",
        rss_kib(&daemon)
    );
}

/// The connection over `limits.max_connections` is told why, and a connection that
/// closes makes room.
#[test]
fn the_connection_over_the_cap_gets_a_clear_error() {
    let daemon = Daemon::start_with_config("[limits]\nmax_connections = 3\n");
    let mut held: Vec<UnixStream> = (0..3)
        .map(|_| {
            let mut stream = UnixStream::connect(daemon.socket_path()).unwrap();
            std::io::Write::write_all(&mut stream, &hello()).unwrap();
            // The Welcome: the connection is served, so it counts.
            let mut welcome = [0u8; 4];
            stream.read_exact(&mut welcome).unwrap();
            stream
        })
        .collect();
    let out = daemon.run_bashc(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    let stderr = crate::stderr(&out);
    assert!(
        stderr.contains("already serves 3 connections") && stderr.contains("max_connections"),
        "{stderr}"
    );
    held.pop();
    let served = bashd_tests::wait_until(Duration::from_secs(10), || {
        daemon.run_bashc(&["exec", "--", "true"]).status.code() == Some(0)
    });
    assert!(served, "a closed connection did not make room");
}

/// A hard link and a symlink planted where the next jobs' spill files go leave the
/// files they point at unchanged, byte for byte; the results say the output could not
/// be kept, naming the path.
#[test]
fn planted_links_at_spill_paths_leave_the_outside_file_unchanged() {
    use std::os::unix::fs::PermissionsExt;

    let daemon = Daemon::start();
    let first = daemon.run_bashc(&["exec", "--json", "--session", "i18-links", "--", "true"]);
    let first = json(&first)["job"].as_str().unwrap()[1..]
        .parse::<u64>()
        .unwrap();
    let session = bashc::protocol::runtime::sessions_dir(daemon.runtime_dir()).join("i18-links");
    std::fs::create_dir_all(&session).unwrap();
    std::fs::set_permissions(&session, std::fs::Permissions::from_mode(0o700)).unwrap();
    let outside = daemon.scratch().join("outside-i18");
    let precious: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&outside, &precious).unwrap();
    let (hard, soft) = (first + 1, first + 2);
    std::fs::hard_link(&outside, session.join(format!("j{hard}.stdout"))).unwrap();
    std::os::unix::fs::symlink(&outside, session.join(format!("j{soft}.stdout"))).unwrap();

    for n in [hard, soft] {
        let out = daemon.run_bashc(&[
            "exec",
            "--json",
            "--session",
            "i18-links",
            "--",
            "seq 1 50000",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        let result = json(&out);
        assert_eq!(result["job"], format!("j{n}"));
        assert_eq!(result["stdout"]["total_lines"], 50000);
        let notice = result["notice"].as_str().unwrap_or_default();
        let path = session.join(format!("j{n}.stdout"));
        assert!(
            notice.contains("may be incomplete") && notice.contains(&path.display().to_string()),
            "{notice}"
        );
    }
    assert_eq!(std::fs::read(&outside).unwrap(), precious);
}

/// With a hard open-file limit of 256 on the daemon, the job that would run it out of
/// descriptors is refused with the limit and the fix (before: job 252 of 1,024 failed
/// inside its spawn with "Too many open files"), and the daemon keeps serving.
#[test]
fn a_job_near_the_open_file_limit_is_refused_with_the_fix() {
    use std::os::unix::process::CommandExt;

    let mut daemon = Daemon::unstarted();
    let mut command = daemon.bashd_command();
    // SAFETY: setrlimit is async-signal-safe, and nothing else runs in the child.
    unsafe {
        command.pre_exec(|| {
            let limit = rustix::process::Rlimit {
                current: Some(256),
                maximum: Some(256),
            };
            rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)
                .map_err(std::io::Error::from)
        });
    }
    daemon.start_with(command);

    let mut refusals = Vec::new();
    for i in 1..=60 {
        let out = daemon.run_bashc(&["exec", "--mode", "background", "--", "sleep 18004"]);
        match out.status.code() {
            Some(0) => assert!(refusals.is_empty(), "job {i} started after a refusal"),
            _ => refusals.push((i, crate::stderr(&out))),
        }
    }
    let (first, message) = refusals.first().expect("no job was refused");
    assert_eq!(refusals.last().unwrap().0, 60, "{refusals:?}");
    assert!(*first > 20, "refused too early, at job {first}");
    assert!(
        message.contains("of its 256 open files in use")
            && message.contains("ulimit -Hn")
            && message.contains("LimitNOFILE="),
        "{message}"
    );
    let status = daemon.run_bashc(&["status", "--json"]);
    assert_eq!(status.status.code(), Some(0), "{}", show(&status));
    assert_eq!(json(&status)["open_files_limit"], 256);
    assert!(
        !daemon.log().contains("Too many open files"),
        "{}",
        daemon.log()
    );
}

/// Issue 42: two connections that each start a 16 MiB frame and stall held the whole
/// large-frame budget until the partial-frame deadline (10 s each, one after the
/// other), and every other client's large frame waited behind them. A stalled large
/// frame now has a few seconds from getting its room; a third client's large `exec`
/// goes through well before the attackers' old deadline, and a small one at once.
#[test]
fn stalled_large_frames_do_not_hold_the_budget_for_long() {
    let daemon = Daemon::start();
    let socket = daemon.socket_path();
    let mut frames = Attack::partial_frames(&socket, 2, 16 << 20);
    // Both attackers have sent their prefix and hold the budget (or wait for it).
    assert!(
        frames.wait_stalled(Duration::from_secs(20)),
        "the daemon went on reading the stalled frames"
    );
    let started = std::time::Instant::now();
    exec_true(&daemon);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a small frame waited"
    );

    // 100 KB of command: a frame over the 64 KiB that is read without the budget.
    let command = format!("echo large-i42 # {}", "x".repeat(100_000));
    let started = std::time::Instant::now();
    let out = daemon.run_bashc(&["exec", "--", &command]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        crate::stdout(&out).contains("large-i42\n"),
        "{}",
        show(&out)
    );
    // Before, it waited for the first attacker's 10 s deadline; now for its 3 s one.
    assert!(
        took < Duration::from_secs(7),
        "the large frame waited {took:?} behind two stalled ones"
    );
    frames.stop();
}

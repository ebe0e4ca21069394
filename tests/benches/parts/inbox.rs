//! `BASHD_BENCH=inbox` (issue 32): what the inbox costs a call with nothing to say
//! (against the same call before any session had something), the call that carries
//! the events of 1,000 jobs that ended, and `bashc top` with 1,000 jobs running: one
//! `top --once`, and the CPU of `bashc top` and of the daemon serving it, in tmux.

use std::process::Command;
use std::time::{Duration, Instant};

use bashd_tests::{Daemon, bin_path, wait_until};

use super::{cpu_ms, exec_round_trip, median, report};

const JOBS: usize = 1000;

pub fn inbox(tokio: &tokio::runtime::Runtime) {
    let daemon = Daemon::start();
    let marker = daemon.scratch().join("go");
    tokio.block_on(async {
        let client = daemon.client().await;
        // Nobody has anything to say: the check is one atomic load.
        let quiet = exec_round_trip(&client, daemon.params("true")).await;
        // Another session has something to say: each call asks the actor, and finds
        // nothing for its own session.
        let mut other = daemon.params("exit 3");
        other.session = "other".to_owned();
        other.mode = bashc::protocol::Mode::Background;
        client.exec(other).await.unwrap();
        assert!(wait_until(Duration::from_secs(10), || {
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current()
                    .block_on(async { client.status().await.unwrap().running_jobs == 0 })
            })
        }));
        let asking = exec_round_trip(&client, daemon.params("true")).await;
        report(
            "exec true while another session has an inbox to take vs while none has",
            asking,
            quiet,
            1.02,
        );
        assert!(client.take_inbox().is_none(), "another session's inbox came here");

        // 1,000 background jobs of one session end together.
        let command = format!(
            "until [ -e {} ]; do sleep 0.5; done; echo done",
            marker.display()
        );
        for _ in 0..JOBS {
            let mut params = daemon.params(&command);
            params.session = "many".to_owned();
            params.mode = bashc::protocol::Mode::Background;
            client.exec(params).await.unwrap();
        }
        std::fs::write(&marker, "").unwrap();
        let start = Instant::now();
        loop {
            if client.status().await.unwrap().running_jobs == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let ended = start.elapsed();
        let mut params = daemon.params("true");
        params.session = "many".to_owned();
        let start = Instant::now();
        client.exec(params.clone()).await.unwrap();
        let carrying = start.elapsed();
        let inbox = client.take_inbox().expect("the call carried the inbox");
        println!(
            "{JOBS} background jobs of one session ended in {:.2} s (their marker seen within 0.5 s); the next call carried {} events and {} folded: {:.3} ms",
            ended.as_secs_f64(),
            inbox.events.len(),
            inbox.folded,
            carrying.as_secs_f64() * 1e3
        );
        let plain = exec_round_trip(&client, params).await;
        report(
            &format!("the call that carries the inbox of {JOBS} ended jobs vs the next one"),
            carrying,
            plain,
            3.0,
        );
        let _ = std::fs::remove_file(&marker);
    });

    // 1,000 running jobs for `bashc top`.
    tokio.block_on(async {
        let client = daemon.client().await;
        for i in 0..JOBS {
            let mut params = daemon.params(&format!("sleep 900.{i}"));
            params.session = format!("agent-{}", i % 10);
            params.mode = bashc::protocol::Mode::Background;
            client.exec(params).await.unwrap();
        }
    });
    let once = median(5, || {
        let out = daemon.bashc().args(["top", "--once"]).output().unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).lines().count() > JOBS);
    });
    let jobs = median(5, || {
        let out = daemon.bashc().args(["jobs", "--all"]).output().unwrap();
        assert!(out.status.success());
    });
    println!(
        "bashc top --once with {JOBS} running jobs: {:.1} ms (bashc jobs --all: {:.1} ms)",
        once.as_secs_f64() * 1e3,
        jobs.as_secs_f64() * 1e3
    );
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("bashc top in a terminal: skipped, tmux is not installed");
        return;
    }
    let socket = format!("bashd-bench-top-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", &socket])
            .args(args)
            .output()
            .unwrap()
    };
    let command = format!(
        "env BASHD_RUNTIME_DIR={} XDG_CONFIG_HOME={} BASHD_NO_AUTOSTART=1 {} top",
        daemon.runtime_dir().display(),
        daemon.config_home().display(),
        bin_path("bashc").display()
    );
    tmux(&["new-session", "-d", "-x", "200", "-y", "50", &command]);
    let pid = || {
        let out = tmux(&["list-panes", "-F", "#{pane_pid}"]);
        let shell: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
        // The pane runs `env`, which execs bashc: the pane's pid is bashc's.
        Some(shell)
    };
    let mut top = None;
    assert!(wait_until(Duration::from_secs(10), || {
        top = pid();
        top.is_some()
    }));
    let top = top.unwrap();
    std::thread::sleep(Duration::from_secs(3));
    const WATCH: Duration = Duration::from_secs(20);
    let (top_before, daemon_before) = (cpu_ms(top), cpu_ms(daemon.pid()));
    std::thread::sleep(WATCH);
    let (top_after, daemon_after) = (cpu_ms(top), cpu_ms(daemon.pid()));
    tmux(&["kill-server"]);
    let share =
        |before: u64, after: u64| (after - before) as f64 / WATCH.as_millis() as f64 * 100.0;
    println!(
        "bashc top with {JOBS} running jobs, a look a second, over {} s: bashc {:.1} % of a core, bashd serving it {:.1} % (target: bashc at most 2 %)",
        WATCH.as_secs(),
        share(top_before, top_after),
        share(daemon_before, daemon_after)
    );
}

//! `BASHD_BENCH=live` (issue 16): stream latency and capture under a flood.

use super::*;

/// `BASHD_BENCH=live` (issue 16): stream latency while another job writes 1 GB, capture
/// throughput with a streaming reader against without, `wait --port` detection delay,
/// and `jobs` (with its ports lookup) with 1,000 jobs running against an empty table.
pub(super) fn live(tokio: &tokio::runtime::Runtime) {
    use bashc::protocol::{
        Caller, JobRef, JobsRequest, Mode, Response, WaitConditions, WaitRequest,
    };
    let daemon = Daemon::start();
    let now_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    tokio.block_on(async {
        let client = daemon.client().await;
        // The loud neighbour: 1 GB into its own capture, not streamed.
        let mut loud = daemon.params("yes 'a line of the loud job' | head -c 1000000000");
        loud.mode = Mode::Background;
        let loud = client.exec(loud).await.unwrap();
        // A line every 10 ms, each carrying the wall clock of its write.
        let mut ticking = daemon.params(
            "python3 -u -c \"import time; [print(time.time_ns(), flush=True) or time.sleep(0.01) for i in range(300)]\"",
        );
        ticking.stream = true;
        let mut events = client.exec_events(ticking).await.unwrap();
        let mut latencies = Vec::new();
        loop {
            match events.next().await.unwrap() {
                Response::Output(chunk) => {
                    let at = now_ns();
                    for line in String::from_utf8_lossy(&chunk.bytes).lines() {
                        if let Ok(written) = line.trim().parse::<u64>() {
                            latencies.push(Duration::from_nanos(at.saturating_sub(written)));
                        }
                    }
                }
                Response::Finished(_) => break,
                _ => {}
            }
        }
        let loud_running = client
            .jobs(JobsRequest {
                caller: Caller { session: "test".into(), owner: None },
                session: Some("test".into()),
            })
            .await
            .unwrap()
            .iter()
            .any(|j| j.job == loud.job && j.state.to_string() == "running");
        latencies.sort();
        let p = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
        println!(
            "stream latency, a job's write to the client (library) while another job writes 1 GB{}: median {:.2} ms, p99 {:.2} ms ({} lines)",
            if loud_running { "" } else { " (it had ended before the last line)" },
            p(0.5).as_secs_f64() * 1e3,
            p(0.99).as_secs_f64() * 1e3,
            latencies.len()
        );
        let _ = client
            .wait(WaitRequest {
                caller: Caller { session: "test".into(), owner: None },
                job: JobRef::Id(loud.job.to_string()),
                timeout_ms: None,
                conditions: WaitConditions::default(),
                any_session: false,
                mcp_call: false,
            })
            .await;

        // Capture of 1 GB, with a reader of every line and without, in turns so that
        // outside load weighs on both alike; with the daemon's own CPU time per run.
        let daemon_pid = daemon.pid();
        let capture = |stream: bool| {
            let client = client.clone();
            let mut params = daemon.params("yes 'a line of output' | head -c 1000000000");
            params.mode = Mode::Slow;
            params.stream = stream;
            async move {
                let cpu = cpu_ms(daemon_pid);
                let start = Instant::now();
                let mut events = client.exec_events(params).await.unwrap();
                let mut lines = 0u64;
                loop {
                    match events.next().await.unwrap() {
                        Response::Output(chunk) => lines += memchr_count(&chunk.bytes),
                        Response::Finished(result) => {
                            assert_eq!(result.state.to_string(), "exited");
                            break;
                        }
                        _ => {}
                    }
                }
                (start.elapsed(), cpu_ms(daemon_pid) - cpu, lines)
            }
        };
        let (mut without, mut with) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            without.push(capture(false).await);
            with.push(capture(true).await);
        }
        println!(
            "capture turns (s, without | with): {} | {}",
            without.iter().map(|r| format!("{:.2}", r.0.as_secs_f64())).collect::<Vec<_>>().join(" "),
            with.iter().map(|r| format!("{:.2}", r.0.as_secs_f64())).collect::<Vec<_>>().join(" ")
        );
        without.sort();
        with.sort();
        let (fastest_without, fastest_with) = (without[0].0, with[0].0);
        let (without, without_cpu, _) = without[without.len() / 2];
        let (with, with_cpu, streamed) = with[with.len() / 2];
        println!(
            "capture of 1 GB with a streaming reader: fastest {:.2} s against {:.2} s without ({:.2}x), median {:.2} s against {:.2} s ({:.2}x); daemon CPU {:.2} s against {:.2} s; {streamed} of {} lines streamed, the rest said missed (5 turns)",
            fastest_with.as_secs_f64(),
            fastest_without.as_secs_f64(),
            fastest_with.as_secs_f64() / fastest_without.as_secs_f64(),
            with.as_secs_f64(),
            without.as_secs_f64(),
            with.as_secs_f64() / without.as_secs_f64(),
            with_cpu as f64 / 1000.0,
            without_cpu as f64 / 1000.0,
            1_000_000_000u64.div_ceil(17),
        );

        // `wait --port`: from the job's listen() to the wait's answer.
        let mut delays = Vec::new();
        for _ in 0..10 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut server = daemon.params(&format!(
                "python3 -u -c \"import socket,time; time.sleep(0.3); s=socket.socket(); s.bind(('127.0.0.1',{port})); s.listen(); print(time.time_ns(), flush=True); time.sleep(16900)\""
            ));
            server.mode = Mode::Background;
            let job = client.exec(server).await.unwrap().job;
            let caller = Caller { session: "test".into(), owner: None };
            let waited = client
                .wait(WaitRequest {
                    caller: caller.clone(),
                    job: JobRef::Id(job.to_string()),
                    timeout_ms: Some(10_000),
                    conditions: WaitConditions { port: Some(port), ..Default::default() },
                    any_session: false,
                    mcp_call: false,
                })
                .await
                .unwrap();
            let answered = now_ns();
            assert!(!waited.notices.is_empty());
            let page = client
                .output(stdout_page(&job, 1, 1, caller.clone()))
                .await
                .unwrap();
            // The listen() came just before the print; a page read shortly after.
            if let Ok(listened) = page.text.trim().parse::<u64>() {
                delays.push(Duration::from_nanos(answered.saturating_sub(listened)));
            }
            let _ = client
                .kill(bashc::protocol::KillRequest {
                    caller,
                    job: JobRef::Id(job.to_string()),
                    signal: Some("KILL".into()),
                    grace_ms: Some(0),
                    any_session: false,
                })
                .await;
        }
        println!(
            "wait --port detection delay: median {:.1} ms, worst {:.1} ms ({} runs; polled every 50 ms)",
            median_of(delays.clone()).as_secs_f64() * 1e3,
            delays.iter().max().copied().unwrap_or_default().as_secs_f64() * 1e3,
            delays.len()
        );

        // `jobs` with its ports lookup: 1,000 running jobs against none.
        let list = |session: &'static str| {
            let client = client.clone();
            async move {
                let mut samples = Vec::new();
                for _ in 0..10 {
                    let start = Instant::now();
                    let jobs = client
                        .jobs(JobsRequest {
                            caller: Caller { session: session.into(), owner: None },
                            session: Some(session.into()),
                        })
                        .await
                        .unwrap();
                    samples.push(start.elapsed());
                    std::hint::black_box(jobs);
                }
                median_of(samples)
            }
        };
        let empty = list("empty").await;
        for _ in 0..1000 {
            let mut params = daemon.params("sleep 16901");
            params.session = "many".into();
            params.mode = Mode::Background;
            client.exec(params).await.unwrap();
        }
        let many = list("many").await;
        println!(
            "jobs with ports read from /proc, 1,000 running: {:.1} ms against {:.2} ms for none ({:.0}x)",
            many.as_secs_f64() * 1e3,
            empty.as_secs_f64() * 1e3,
            many.as_secs_f64() / empty.as_secs_f64()
        );
        let _ = client.close_session("many".into()).await;
    });
}

pub(super) fn memchr_count(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|&&b| b == b'\n').count() as u64
}

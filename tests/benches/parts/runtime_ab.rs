//! `BASHD_BENCH=runtime-ab` (issue 31): the daemon's async runtime under the loads its
//! shape could cost, this build's `bashd` against another (`BASHD_BENCH_BASHD_BEFORE=DIR`,
//! as for `daemon-ab`), in turns, under the same load: a job that writes as fast as it
//! can (its capture's throughput), many agents at once (each on its own connection,
//! every one running `true` in a loop), and the two together (the agents' latency while
//! a job's capture runs, and the capture's). Each phase runs on one daemon, then on the
//! other, the order alternating by round; the daemon's CPU over each phase is read from
//! `/proc/PID/task/*/schedstat`.
//!
//! `BASHD_BENCH_ENV_AFTER` and `BASHD_BENCH_ENV_BEFORE` (`KEY=VALUE KEY=VALUE`) add to
//! one side's environment, to compare one build under two settings (`MALLOC_ARENA_MAX`);
//! `BASHD_BENCH_ROUNDS` sets the rounds (default 6).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bashd_tests::Daemon;

use super::{median_of, ms, process_cpu, quantile};

/// Agents at once, and the `exec`s each makes in the agents phase.
const AGENTS: usize = 8;
const EXECS_PER_AGENT: usize = 15;
/// Agents beside the writing job in the mixed phase.
const AGENTS_BESIDE_CAPTURE: usize = 4;
const CAPTURE_BYTES: u64 = 512 << 20;

#[derive(Default)]
struct Side {
    capture: Vec<Duration>,
    capture_cpu: Vec<Duration>,
    agents_wall: Vec<Duration>,
    agents_latency: Vec<Duration>,
    agents_cpu: Vec<Duration>,
    mixed_capture: Vec<Duration>,
    mixed_latency: Vec<Duration>,
    mixed_cpu: Vec<Duration>,
    mixed_execs: usize,
}

pub fn runtime_ab(tokio: &tokio::runtime::Runtime) {
    let Some(before) = std::env::var_os("BASHD_BENCH_BASHD_BEFORE").map(PathBuf::from) else {
        println!("runtime-ab: set BASHD_BENCH_BASHD_BEFORE to a directory with another bashd");
        return;
    };
    let rounds: usize = std::env::var("BASHD_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(6);
    let mut after = Daemon::unstarted();
    let mut command = after.bashd_command();
    add_env(&mut command, "BASHD_BENCH_ENV_AFTER");
    after.start_with(command);
    let mut earlier = Daemon::unstarted();
    let mut command = earlier.bashd_command_from(&before.join("bashd"));
    add_env(&mut command, "BASHD_BENCH_ENV_BEFORE");
    earlier.start_with(command);
    let daemons = [&after, &earlier];
    let names = ["this build", &before.display().to_string()].map(str::to_owned);
    let mut sides: [Side; 2] = Default::default();
    tokio.block_on(async {
        // Warm both: the zygote starts at the first job.
        for daemon in daemons {
            let client = daemon.client().await;
            for _ in 0..20 {
                client.exec(daemon.params("true")).await.unwrap();
            }
        }
        for round in 0..rounds {
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                let (took, cpu) = on_cpu(daemons[i], capture(daemons[i])).await;
                sides[i].capture.push(took);
                sides[i].capture_cpu.push(cpu);
            }
            for i in order {
                let ((wall, latencies), cpu) = on_cpu(daemons[i], agents(daemons[i])).await;
                sides[i].agents_wall.push(wall);
                sides[i].agents_latency.extend(latencies);
                sides[i].agents_cpu.push(cpu);
            }
            for i in order {
                let ((took, latencies), cpu) = on_cpu(daemons[i], mixed(daemons[i])).await;
                sides[i].mixed_capture.push(took);
                sides[i].mixed_execs += latencies.len();
                sides[i].mixed_latency.extend(latencies);
                sides[i].mixed_cpu.push(cpu);
            }
        }
    });
    let rate = |d: Duration| CAPTURE_BYTES as f64 / d.as_secs_f64() / 1e9;
    for (name, side) in names.iter().zip(&sides) {
        let agent_execs = (AGENTS * EXECS_PER_AGENT) as f64;
        println!(
            "runtime-ab {name}: capture of {} MiB of yes median {:.2} GB/s (best {:.2}), daemon CPU {:.0} ms; \
             {AGENTS} agents x {EXECS_PER_AGENT} exec true: wall median {:.1} ms, latency median {:.2} p90 {:.2} ms, daemon CPU per exec {:.3} ms; \
             {AGENTS_BESIDE_CAPTURE} agents beside the capture: latency median {:.2} p90 {:.2} ms ({} execs), capture {:.2} GB/s, daemon CPU {:.0} ms",
            CAPTURE_BYTES >> 20,
            rate(median_of(side.capture.clone())),
            rate(side.capture.iter().copied().min().unwrap_or_default()),
            ms(median_of(side.capture_cpu.clone())),
            ms(median_of(side.agents_wall.clone())),
            ms(median_of(side.agents_latency.clone())),
            ms(quantile(&side.agents_latency, 0.9)),
            ms(side.agents_cpu.iter().sum::<Duration>()) / agent_execs / rounds as f64,
            ms(median_of(side.mixed_latency.clone())),
            ms(quantile(&side.mixed_latency, 0.9)),
            side.mixed_execs,
            rate(median_of(side.mixed_capture.clone())),
            ms(median_of(side.mixed_cpu.clone())),
        );
    }
}

/// Adds the `KEY=VALUE` pairs of the variable `var` to `command`'s environment.
fn add_env(command: &mut std::process::Command, var: &str) {
    for pair in std::env::var(var).unwrap_or_default().split_whitespace() {
        if let Some((key, value)) = pair.split_once('=') {
            command.env(key, value);
        }
    }
}

/// What `work` returns, and the CPU the daemon spent while it ran.
async fn on_cpu<T>(daemon: &Daemon, work: impl Future<Output = T>) -> (T, Duration) {
    let start = process_cpu(daemon.pid()).0;
    let out = work.await;
    (
        out,
        Duration::from_nanos(process_cpu(daemon.pid()).0.saturating_sub(start)),
    )
}

/// One job writing `CAPTURE_BYTES` of `yes` as fast as it can, to its end.
async fn capture(daemon: &Daemon) -> Duration {
    let client = daemon.client().await;
    let mut params = daemon.params(&format!("yes | head -c {CAPTURE_BYTES}"));
    params.mode = bashc::protocol::Mode::Slow;
    let start = Instant::now();
    let result = client.exec(params).await.unwrap();
    assert_eq!(result.stdout.total_bytes, CAPTURE_BYTES, "{result:?}");
    start.elapsed()
}

/// `AGENTS` connections at once, each running `true` `EXECS_PER_AGENT` times: the
/// wall time of all of it and each call's latency.
async fn agents(daemon: &Daemon) -> (Duration, Vec<Duration>) {
    let mut clients = Vec::new();
    for _ in 0..AGENTS {
        clients.push(daemon.client().await);
    }
    let start = Instant::now();
    let calls = clients.iter().map(|client| async move {
        let mut latencies = Vec::new();
        for _ in 0..EXECS_PER_AGENT {
            let start = Instant::now();
            client.exec(daemon.params("true")).await.unwrap();
            latencies.push(start.elapsed());
        }
        latencies
    });
    let latencies = futures::future::join_all(calls).await.concat();
    (start.elapsed(), latencies)
}

/// A job writing `CAPTURE_BYTES` while `AGENTS_BESIDE_CAPTURE` agents run `true` in a
/// loop until it ends: the capture's time and the agents' latencies.
async fn mixed(daemon: &Daemon) -> (Duration, Vec<Duration>) {
    let mut clients = Vec::new();
    for _ in 0..AGENTS_BESIDE_CAPTURE {
        clients.push(daemon.client().await);
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    let writing = async {
        let took = capture(daemon).await;
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        took
    };
    let calls = clients.iter().map(|client| {
        let done = &done;
        async move {
            let mut latencies = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let start = Instant::now();
                client.exec(daemon.params("true")).await.unwrap();
                latencies.push(start.elapsed());
            }
            latencies
        }
    });
    let (took, latencies) = futures::join!(writing, futures::future::join_all(calls));
    (took, latencies.concat())
}

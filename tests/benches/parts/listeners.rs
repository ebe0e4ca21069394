//! `BASHD_BENCH=listeners` (issue 46, step 7): what a job listing costs bashd while the
//! machine holds many TCP connections. Reading a job's ports from `/proc/PID/net/tcp`
//! walks the kernel's whole established-connection table; this part fills that table
//! with loopback connections (`BASHD_BENCH_CONNECTIONS`, 9,000 by default: both ends
//! count, and one process may hold 20,000 descriptors), then runs `BASHD_BENCH_AGENTS`
//! agents (50) on one bashd, each in a session of its own with one background job, each
//! looping over the library's `jobs` of its session and an `exec true`. It reports
//! bashd's CPU per call and the latencies. With `BASHD_BENCH_BASHD_BEFORE=DIR` (a
//! directory with another build's `bashd` and `bashd-resident`) the same load runs on
//! that build too, one daemon after the other.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bashc::protocol::{Caller, JobsRequest, Mode};
use bashd_tests::Daemon;

use super::{median_of, ms, process_cpu, quantile};

const ROUNDS: usize = 20;

pub fn listeners(tokio: &tokio::runtime::Runtime) {
    let agents = number("BASHD_BENCH_AGENTS", 50);
    let connections = number("BASHD_BENCH_CONNECTIONS", 9000);
    let held = connect(connections);
    let established = established_count();
    println!(
        "listeners: {} loopback connections held, {established} TCP sockets established on the machine",
        held.len() / 2
    );
    let mut daemons = vec![("this build".to_owned(), Daemon::start())];
    if let Some(before) = std::env::var_os("BASHD_BENCH_BASHD_BEFORE").map(PathBuf::from) {
        let mut earlier = Daemon::unstarted();
        earlier.start_with(earlier.bashd_command_from(&before.join("bashd")));
        daemons.push((before.display().to_string(), earlier));
    }
    for (name, daemon) in &daemons {
        let figures = tokio.block_on(load(daemon, agents));
        println!(
            "listeners {name}, {agents} agents: bashd CPU per call {:.3} ms; jobs median {:.2} ms p90 {:.2}; exec true median {:.2} ms p90 {:.2}; {:.0} calls/s",
            figures.cpu_per_call_ms,
            ms(median_of(figures.jobs.clone())),
            ms(quantile(&figures.jobs, 0.9)),
            ms(median_of(figures.exec.clone())),
            ms(quantile(&figures.exec, 0.9)),
            figures.calls_per_second,
        );
    }
    drop(held);
}

struct Figures {
    jobs: Vec<Duration>,
    exec: Vec<Duration>,
    cpu_per_call_ms: f64,
    calls_per_second: f64,
}

/// `agents` agents at once, each with its background job, `ROUNDS` times `jobs` then
/// `exec true`.
async fn load(daemon: &Daemon, agents: usize) -> Figures {
    let agent = |i: usize| async move {
        let session = format!("agent{i}");
        let client = daemon.client().await;
        let mut params = daemon.params("sleep 600");
        params.session = session.clone();
        params.mode = Mode::Background;
        client.exec(params).await.unwrap();
        // Warm: the zygote starts at the first job.
        let mut quick = daemon.params("true");
        quick.session = session.clone();
        client.exec(quick.clone()).await.unwrap();
        (client, session, quick)
    };
    let ready = futures::future::join_all((0..agents).map(agent)).await;
    let cpu_start = process_cpu(daemon.pid());
    let start = Instant::now();
    let runs = ready
        .into_iter()
        .map(|(client, session, quick)| async move {
            let (mut jobs, mut exec) = (Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                let asked = Instant::now();
                let request = JobsRequest {
                    caller: Caller {
                        session: session.clone(),
                        owner: None,
                    },
                    session: Some(session.clone()),
                };
                let listed = client.jobs(request).await.unwrap();
                assert!(!listed.is_empty());
                jobs.push(asked.elapsed());
                let asked = Instant::now();
                client.exec(quick.clone()).await.unwrap();
                exec.push(asked.elapsed());
            }
            (jobs, exec)
        });
    let results = futures::future::join_all(runs).await;
    let elapsed = start.elapsed();
    let cpu_end = process_cpu(daemon.pid());
    let (jobs, exec): (Vec<_>, Vec<_>) = results.into_iter().unzip();
    let calls = (agents * ROUNDS * 2) as f64;
    Figures {
        jobs: jobs.concat(),
        exec: exec.concat(),
        cpu_per_call_ms: cpu_end.0.saturating_sub(cpu_start.0) as f64 / 1e6 / calls,
        calls_per_second: calls / elapsed.as_secs_f64(),
    }
}

fn number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// `count` loopback connections to a listener of this process, both ends held until
/// dropped. Stops early, with what it has, where descriptors or ports run out.
fn connect(count: usize) -> Vec<TcpStream> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let mut held = Vec::with_capacity(count * 2);
    for _ in 0..count {
        let Ok(client) = TcpStream::connect(address) else {
            break;
        };
        let Ok((server, _)) = listener.accept() else {
            break;
        };
        held.push(client);
        held.push(server);
    }
    held
}

/// The established TCP sockets of this namespace, as the kernel counts them.
fn established_count() -> usize {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|file| std::fs::read_to_string(file).ok())
        .map(|text| {
            text.lines()
                .filter(|line| line.split_whitespace().nth(3) == Some("01"))
                .count()
        })
        .sum()
}

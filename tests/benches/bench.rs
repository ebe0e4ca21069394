//! `cargo bench -p bashd-tests`: each figure is a ratio against a floor measured in the
//! same run, on the same machine (DESIGN §13). Plain text, one figure a line.
//!
//! The release `bashd`, `bashd-resident` and `bashc` are built first through `$CARGO`, since cargo builds
//! only this package's targets for a bench.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bashd_tests::Daemon;
use bashd_tests::procs::memory_kib;

#[path = "parts/abuse.rs"]
mod abuse;
#[path = "parts/basics.rs"]
mod basics;
#[path = "parts/channel.rs"]
mod channel;
#[path = "parts/cli.rs"]
mod cli;
#[path = "parts/containment.rs"]
mod containment;
#[path = "parts/daemon_ab.rs"]
mod daemon_ab;
#[path = "parts/handshake.rs"]
mod handshake;
#[path = "parts/inbox.rs"]
mod inbox;
#[path = "parts/jobs.rs"]
mod jobs;
#[path = "parts/listeners.rs"]
mod listeners;
#[path = "parts/live.rs"]
mod live;
#[path = "parts/many_agents.rs"]
mod many_agents;
#[path = "parts/mcp.rs"]
mod mcp;
#[path = "parts/mcp_ab.rs"]
mod mcp_ab;
#[path = "parts/paging.rs"]
mod paging;
#[path = "parts/policy.rs"]
mod policy;
#[path = "parts/proxy.rs"]
mod proxy;
#[path = "parts/recovery.rs"]
mod recovery;
#[path = "parts/remote.rs"]
mod remote;
#[path = "parts/rivals.rs"]
mod rivals;
#[path = "parts/runtime_ab.rs"]
mod runtime_ab;
#[path = "parts/sandbox.rs"]
mod sandbox;
#[path = "parts/sandbox_pairs.rs"]
mod sandbox_pairs;
#[path = "parts/terminal.rs"]
mod terminal;

use abuse::*;
use basics::*;
use channel::*;
use containment::*;
use jobs::*;
use live::*;
use mcp::*;
use paging::*;
use policy::*;
use recovery::*;
use remote::*;
use sandbox::*;
use terminal::*;

const PROCESS_RUNS: usize = 60;
const ROUND_TRIPS: usize = 300;

fn main() {
    // The proxy part runs the proxy in a process of its own: this binary again.
    if std::env::var_os(proxy::CHILD).is_some() {
        proxy::child();
        return;
    }
    build_release_binaries();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // BASHD_BENCH=jobs runs only the jobs figures, and so on; unset runs them all.
    let only = std::env::var("BASHD_BENCH").ok();
    let wanted = |part: &str| only.as_deref().is_none_or(|o| o == part);
    if wanted("basics") {
        basics(&tokio);
    }
    if wanted("jobs") {
        jobs_at_scale(&tokio);
    }
    if wanted("recovery") {
        recovery(&tokio);
    }
    if wanted("mcp") {
        mcp(&tokio);
    }
    if wanted("paging") {
        paging(&tokio);
    }
    if wanted("containment") {
        containment(&tokio);
    }
    // Only on request: the containment part measures it too, beside 1,000 jobs.
    if only.as_deref() == Some("exec-cost") {
        let cgroup = bench_cgroup();
        exec_cost_by_mechanism(&tokio, &mechanisms(cgroup.as_deref()));
        if let Some(dir) = cgroup {
            remove_cgroup(&dir);
        }
    }
    // Only on request: it holds thousands of TCP connections open.
    if only.as_deref() == Some("listeners") {
        listeners::listeners(&tokio);
    }
    // Only on request: it runs hundreds of MCP servers for minutes.
    if only.as_deref() == Some("many-agents") {
        many_agents::many_agents(&tokio);
    }
    if wanted("live") {
        live(&tokio);
    }
    if wanted("inbox") {
        inbox::inbox(&tokio);
    }
    if wanted("cli") {
        cli::cli();
    }
    if wanted("handshake") {
        handshake::handshake();
    }
    if wanted("abuse") {
        abuse();
    }
    if wanted("sandbox") {
        sandbox(&tokio);
    }
    if wanted("sandbox-pairs") {
        sandbox_pairs::sandbox_pairs(&tokio);
    }
    if wanted("channel") {
        channel(&tokio);
    }
    if wanted("proxy") {
        proxy::proxy(&tokio);
    }
    // Only on request: it needs sshd, and runs one on 127.0.0.1.
    if only.as_deref() == Some("remote") {
        remote();
    }
    // Only on request: the one-liner and script figures already run in basics.
    if only.as_deref() == Some("policy") {
        policy_figures();
    }
    if wanted("terminal") || only.as_deref() == Some("terminal-emulator") {
        terminal_emulator();
    }
    if wanted("terminal") {
        terminal(&tokio);
    }
    if wanted("terminal") || only.as_deref() == Some("terminal-input") {
        terminal_interaction(&tokio);
    }
    // Only on request: it needs another build of bashd to compare with.
    if only.as_deref() == Some("daemon-ab") {
        daemon_ab::daemon_ab(&tokio);
    }
    // Only on request: it needs another build of bashc to compare with.
    if only.as_deref() == Some("mcp-ab") {
        mcp_ab::mcp_ab(&tokio);
    }
    // Only on request: it needs another build of bashd to compare with.
    if only.as_deref() == Some("runtime-ab") {
        runtime_ab::runtime_ab(&tokio);
    }
    // Only on request: it installs three other MCP servers from PyPI and npm.
    if only.as_deref() == Some("rivals") {
        rivals::rivals(&tokio);
    }
}

fn report(what: &str, measured: Duration, floor: Duration, target: f64) {
    let ratio = measured.as_secs_f64() / floor.as_secs_f64();
    println!(
        "{what}: {ratio:.2}x ({:.2} ms vs {:.2} ms; target <= {target}x)",
        measured.as_secs_f64() * 1e3,
        floor.as_secs_f64() * 1e3
    );
}

fn run(command: &mut Command) {
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{command:?} failed: {status}");
}

/// `bash -c true` through tokio with its output piped: what the library's round trip
/// stands against.
async fn tokio_bash_true() {
    let out = tokio::process::Command::new("bash")
        .args(["-c", "true"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
}

/// A page of a job's stdout, as this connection's own session asks for it.
fn stdout_page(
    job: &bashc::protocol::JobId,
    offset: u64,
    limit: u64,
    caller: bashc::protocol::Caller,
) -> bashc::protocol::OutputRequest {
    bashc::protocol::OutputRequest {
        job: bashc::protocol::JobRef::Id(job.to_string()),
        stream: bashc::protocol::StreamName::Stdout,
        offset,
        limit: Some(limit),
        caller,
        any_session: false,
        max_bytes: None,
        from_end: false,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    median_of(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

/// The medians of `a` and `b`, run in turns.
fn paired_medians(runs: usize, mut a: impl FnMut(), mut b: impl FnMut()) -> (Duration, Duration) {
    let (mut first, mut second) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let start = Instant::now();
        a();
        first.push(start.elapsed());
        let start = Instant::now();
        b();
        second.push(start.elapsed());
    }
    (median_of(first), median_of(second))
}

fn median_of(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The sample `q` of the way up (0.5 the median, 0.9 the p90).
fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted
        .get(((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// The CPU time of process `pid`: its live threads' in nanoseconds
/// (`/proc/PID/task/*/schedstat`), and every thread's that ran in clock ticks
/// (`/proc/PID/stat`).
fn process_cpu(pid: u32) -> (u64, u64) {
    let ns = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.filter_map(|task| {
                let text = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
                text.split_whitespace().next()?.parse::<u64>().ok()
            })
            .sum()
        })
        .unwrap_or(0);
    let ticks = bashc::protocol::ProcStat::read(pid).map_or(0, |stat| stat.cpu_ticks());
    (ns, ticks)
}

fn build_release_binaries() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "bashd",
            "-p",
            "bashd-resident",
            "-p",
            "bashc-cli",
        ])
        .status()
        .expect("cannot run cargo to build the release binaries");
    assert!(
        status.success(),
        "cargo build --release -p bashd -p bashd-resident -p bashc-cli failed"
    );
}

//! `BASHD_BENCH=mcp-ab` (issue 31): what `bashc mcp` itself costs per `bash` tool call,
//! this build's `bashc` against another (`BASHD_BENCH_BASHC_BEFORE=DIR`, a directory
//! holding an older build's `bashc`), in turns, under the same load. Both servers talk
//! to one daemon (this build's), so only the server differs. Each round makes one call
//! on each server, the order alternating: a `bash` call of `true`, and a call the
//! server answers itself (a bad argument: stdio, JSON-RPC, rmcp and the gate, no
//! daemon). The CPU each server spent is read from `/proc/PID/task/*/schedstat`
//! (nanoseconds, its live threads) and `/proc/PID/stat` (clock ticks, every thread
//! that ran), divided by the calls.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bashd_tests::Daemon;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};

use super::{ms, process_cpu, quantile};

const ROUNDS: usize = 400;
const WARM_UP: usize = 20;

pub fn mcp_ab(tokio: &tokio::runtime::Runtime) {
    let Some(before) = std::env::var_os("BASHD_BENCH_BASHC_BEFORE").map(PathBuf::from) else {
        println!("mcp-ab: set BASHD_BENCH_BASHC_BEFORE to a directory with another bashc");
        return;
    };
    let daemon = Daemon::start();
    let programs = [bashd_tests::bin_path("bashc"), before.join("bashc")];
    let names = [
        format!("this build ({})", programs[0].display()),
        programs[1].display().to_string(),
    ];
    let true_call = serde_json::json!({"command": "true"});
    let bad_call = serde_json::json!({"command": "true", "timeout_secs": "soon"});
    tokio.block_on(async {
        let mut servers = Vec::new();
        for program in &programs {
            servers.push(serve(program, &daemon).await);
        }
        for (client, _) in &servers {
            for _ in 0..WARM_UP {
                call(client, &true_call).await;
            }
        }
        let cpu_start: Vec<(u64, u64)> = servers.iter().map(|(_, pid)| process_cpu(*pid)).collect();
        let mut bash: [Vec<Duration>; 2] = Default::default();
        let mut own: [Vec<Duration>; 2] = Default::default();
        for round in 0..ROUNDS {
            // Which goes first alternates, so neither always follows the other.
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                bash[i].push(call(&servers[i].0, &true_call).await);
            }
            for i in order {
                own[i].push(call(&servers[i].0, &bad_call).await);
            }
        }
        let cpu_end: Vec<(u64, u64)> = servers.iter().map(|(_, pid)| process_cpu(*pid)).collect();
        let calls = (2 * ROUNDS) as f64;
        for i in 0..2 {
            let (ns, ticks) = (
                cpu_end[i].0.saturating_sub(cpu_start[i].0),
                cpu_end[i].1.saturating_sub(cpu_start[i].1),
            );
            println!(
                "mcp-ab {}: bash(true) median {:.3} ms p10 {:.3} p90 {:.3}; a call it answers itself median {:.3} ms p10 {:.3}; server CPU per call {:.1} us (schedstat) {:.1} us (stat)",
                names[i],
                ms(quantile(&bash[i], 0.5)),
                ms(quantile(&bash[i], 0.1)),
                ms(quantile(&bash[i], 0.9)),
                ms(quantile(&own[i], 0.5)),
                ms(quantile(&own[i], 0.1)),
                ns as f64 / 1e3 / calls,
                ticks as f64 * 10_000.0 / calls,
            );
        }
        for (client, _) in servers {
            let _ = client.cancel().await;
        }
    });
}

/// A `bashc mcp` of `program` on `daemon`, initialized, and its pid.
pub(super) async fn serve(
    program: &Path,
    daemon: &Daemon,
) -> (RunningService<RoleClient, ()>, u32) {
    let mut command = tokio::process::Command::new(program);
    command
        .arg("mcp")
        .env(
            bashc::protocol::runtime::RUNTIME_DIR_ENV,
            daemon.runtime_dir(),
        )
        .env("BASHD_NO_AUTOSTART", "1")
        .current_dir(daemon.scratch());
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let pid = transport.id().expect("the server has a pid");
    (().serve(transport).await.unwrap(), pid)
}

/// One `bash` call with `arguments`, timed.
async fn call(client: &RunningService<RoleClient, ()>, arguments: &serde_json::Value) -> Duration {
    let arguments = arguments.as_object().cloned().unwrap_or_default();
    let start = Instant::now();
    client
        .call_tool(CallToolRequestParams::new("bash").with_arguments(arguments))
        .await
        .unwrap();
    start.elapsed()
}

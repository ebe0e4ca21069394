//! `BASHD_BENCH=many-agents` (issue 46, step 7): one bashd serving many MCP agents at
//! once, each a real `bashc mcp` process spoken to over its stdio in JSON-RPC (rmcp's
//! client), each in a session of its own. Every agent loops over what an agent does
//! most: a quick `bash` (`true`), a `bash` of 2,000 lines, a background job and its
//! `bash_wait`, a `bash_output` page of that job and `bash_jobs`.
//!
//! It runs with the sandbox users get, written out in the config (`[sandbox] default =
//! "workspace-write"`, `network = "allow-list"`), and with the sandbox `off`, for
//! `BASHD_BENCH_AGENTS` agents (`50,200` by default), `BASHD_BENCH_ROUNDS` rounds each
//! (10), the settings in turns. With `BASHD_BENCH_BASHD_BEFORE=DIR` (another build's
//! `bashd`, `bashd-resident` and `bashc`) every run is made on that build too, in
//! turn with this one. Each run reports bashd's CPU per call (its `/proc/PID/stat`
//! utime + stime over the run, divided by the calls), the share of the cores it used,
//! the calls per second, the median and p90 of each tool, and the `bashc mcp`
//! servers' CPU per call. The daemon's directories are on a tmpfs (`runtime_parent`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bashc::protocol::{Caller, JobsRequest, Network, SandboxProfile};
use bashd_tests::Daemon;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

use super::{median_of, ms, process_cpu, quantile};

/// The calls of one round, in order; what each is timed under.
const STEPS: [&str; 6] = [
    "bash true",
    "bash 2,000 lines",
    "bash background",
    "bash_wait",
    "bash_output",
    "bash_jobs",
];

/// The sandbox settings measured: what users get, and none.
const SETTINGS: [(&str, &str, SandboxProfile, Network); 2] = [
    (
        "workspace-write + allow-list",
        "[sandbox]\ndefault = \"workspace-write\"\nnetwork = \"allow-list\"\n",
        SandboxProfile::WorkspaceWrite,
        Network::AllowList,
    ),
    (
        "off",
        "[sandbox]\ndefault = \"off\"\nnetwork = \"on\"\n",
        SandboxProfile::Off,
        Network::On,
    ),
];

/// A build: where its `bashd` (with its `bashd-resident`) and its `bashc` are.
struct Build {
    name: String,
    bashd: PathBuf,
    bashc: PathBuf,
}

pub fn many_agents(tokio: &tokio::runtime::Runtime) {
    let counts: Vec<usize> = std::env::var("BASHD_BENCH_AGENTS")
        .unwrap_or_else(|_| "50,200".to_owned())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let rounds: usize = std::env::var("BASHD_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10);
    let mut builds = vec![Build {
        name: "this build".to_owned(),
        bashd: bashd_tests::bin_path("bashd"),
        bashc: bashd_tests::bin_path("bashc"),
    }];
    if let Some(before) = std::env::var_os("BASHD_BENCH_BASHD_BEFORE").map(PathBuf::from) {
        builds.push(Build {
            name: before.display().to_string(),
            bashd: before.join("bashd"),
            bashc: before.join("bashc"),
        });
    }
    // The builds in turns, which goes first alternating.
    let mut runs = 0;
    for &agents in &counts {
        for setting in SETTINGS {
            for turn in 0..builds.len() {
                let build = &builds[(runs + turn) % builds.len()];
                let figures = tokio.block_on(run(build, setting, agents, rounds));
                figures.print(&build.name, setting.0, agents);
            }
            runs += 1;
        }
    }
}

struct Figures {
    /// Each step's latencies, in `STEPS` order.
    steps: Vec<Vec<Duration>>,
    calls: usize,
    elapsed: Duration,
    /// bashd's CPU over the run, in clock ticks (`/proc/PID/stat`) and nanoseconds
    /// (its live threads' `schedstat`).
    daemon_ticks: u64,
    daemon_ns: u64,
    /// The `bashc mcp` servers' CPU over the run, in nanoseconds (`schedstat`).
    servers_ns: u64,
    load: String,
}

impl Figures {
    fn print(&self, build: &str, setting: &str, agents: usize) {
        let calls = self.calls as f64;
        // Linux counts `/proc/PID/stat` times in USER_HZ, 100 a second.
        let tick_ms = 10.0;
        let seconds = self.elapsed.as_secs_f64();
        println!(
            "many-agents {build}, {setting}, {agents} agents: bashd CPU per call {:.3} ms (stat; {:.3} schedstat), {:.0} % of a core; {:.0} calls/s; bashc mcp CPU per call {:.3} ms; load {}",
            self.daemon_ticks as f64 * tick_ms / calls,
            self.daemon_ns as f64 / 1e6 / calls,
            self.daemon_ticks as f64 * tick_ms / 10.0 / seconds,
            calls / seconds,
            self.servers_ns as f64 / 1e6 / calls,
            self.load,
        );
        let per_step: Vec<String> = STEPS
            .iter()
            .zip(&self.steps)
            .map(|(name, samples)| {
                format!(
                    "{name} {:.1}/{:.1}",
                    ms(median_of(samples.clone())),
                    ms(quantile(samples, 0.9))
                )
            })
            .collect();
        println!("  median/p90 ms: {}", per_step.join("; "));
    }
}

/// `agents` agents on a new daemon of `build` with `setting`, `rounds` rounds each
/// after one not counted.
async fn run(
    build: &Build,
    setting: (&str, &str, SandboxProfile, Network),
    agents: usize,
    rounds: usize,
) -> Figures {
    let mut daemon = Daemon::unstarted_in(&runtime_parent());
    daemon.write_config(setting.1);
    daemon.start_with(daemon.bashd_command_from(&build.bashd));
    let daemon = daemon;
    let servers =
        futures::future::join_all((0..agents).map(|i| serve(&build.bashc, &daemon, i))).await;
    // One round not counted: the zygote starts, the sessions and their networks are made.
    futures::future::join_all(servers.iter().map(|(client, _)| round(client))).await;
    let servers_cpu = |servers: &[(RunningService<RoleClient, ()>, u32)]| -> u64 {
        servers.iter().map(|(_, pid)| process_cpu(*pid).0).sum()
    };
    let daemon_start = process_cpu(daemon.pid());
    let servers_start = servers_cpu(&servers);
    let start = Instant::now();
    let per_agent = futures::future::join_all(servers.iter().map(|(client, _)| async move {
        let mut steps: Vec<Vec<Duration>> = vec![Vec::new(); STEPS.len()];
        for _ in 0..rounds {
            for (i, took) in round(client).await.into_iter().enumerate() {
                steps[i].push(took);
            }
        }
        steps
    }))
    .await;
    let elapsed = start.elapsed();
    let daemon_end = process_cpu(daemon.pid());
    let servers_end = servers_cpu(&servers);
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    confined_as_set(&daemon, setting).await;
    for (client, _) in servers {
        let _ = client.cancel().await;
    }
    let mut steps: Vec<Vec<Duration>> = vec![Vec::new(); STEPS.len()];
    for agent in per_agent {
        for (i, samples) in agent.into_iter().enumerate() {
            steps[i].extend(samples);
        }
    }
    Figures {
        steps,
        calls: agents * rounds * STEPS.len(),
        elapsed,
        daemon_ticks: daemon_end.1.saturating_sub(daemon_start.1),
        daemon_ns: daemon_end.0.saturating_sub(daemon_start.0),
        servers_ns: servers_end.saturating_sub(servers_start),
        load,
    }
}

/// Where the daemon's runtime directory (its sessions' output files) and the jobs'
/// workdir go: `BASHD_BENCH_DIR`, else `/dev/shm`, a tmpfs as a user's `/run/user/UID`
/// is. On this VM's ext4 `/tmp`, creating a background job's two output files costs
/// bashd a third of its CPU (`find_inode_bit` stepping over recently deleted inodes).
fn runtime_parent() -> PathBuf {
    if let Some(dir) = std::env::var_os("BASHD_BENCH_DIR") {
        return PathBuf::from(dir);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_owned()
    } else {
        std::env::temp_dir()
    }
}

/// One round of an agent's calls, each timed.
async fn round(client: &RunningService<RoleClient, ()>) -> Vec<Duration> {
    let mut took = Vec::with_capacity(STEPS.len());
    let (_, t) = call(client, "bash", json!({"command": "true"})).await;
    took.push(t);
    let (result, t) = call(client, "bash", json!({"command": "seq 1 2000"})).await;
    assert!(text(&result).contains("\n2000\n"), "{}", text(&result));
    took.push(t);
    let (result, t) = call(
        client,
        "bash",
        json!({"command": "seq 1 2000", "mode": "background"}),
    )
    .await;
    took.push(t);
    let job = job_in(&text(&result));
    let (_, t) = call(client, "bash_wait", json!({"job": job})).await;
    took.push(t);
    let (result, t) = call(
        client,
        "bash_output",
        json!({"job": job, "offset": 1001, "limit": 100}),
    )
    .await;
    assert!(text(&result).contains("1100\n"), "{}", text(&result));
    took.push(t);
    let (result, t) = call(client, "bash_jobs", json!({})).await;
    assert!(text(&result).contains(&job), "{}", text(&result));
    took.push(t);
    took
}

/// One tool call, which must succeed, timed.
async fn call(
    client: &RunningService<RoleClient, ()>,
    tool: &'static str,
    arguments: Value,
) -> (CallToolResult, Duration) {
    let Value::Object(arguments) = arguments else {
        unreachable!("arguments are an object")
    };
    let start = Instant::now();
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("{tool} failed: {e}"));
    let took = start.elapsed();
    assert_ne!(result.is_error, Some(true), "{tool}: {}", text(&result));
    (result, took)
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// The job id a background `bash` result names (`running: j3 ...` or `job="j3"`).
fn job_in(text: &str) -> String {
    let at = text
        .find("job=\"j")
        .map(|at| at + 5)
        .or_else(|| text.find("running: j").map(|at| at + 9))
        .unwrap_or_else(|| panic!("no job id in {text}"));
    text[at..]
        .chars()
        .take_while(|c| *c == 'j' || c.is_ascii_digit())
        .collect()
}

/// A `bashc mcp` of `program` on `daemon`, started in the daemon's scratch dir (the
/// writable root of its confined jobs) in session `agent<i>`, initialized; and its pid.
async fn serve(program: &Path, daemon: &Daemon, i: usize) -> (RunningService<RoleClient, ()>, u32) {
    let mut command = tokio::process::Command::new(program);
    command
        .args(["mcp", "--session", &format!("agent{i}")])
        .env(
            bashc::protocol::runtime::RUNTIME_DIR_ENV,
            daemon.runtime_dir(),
        )
        .env("XDG_CONFIG_HOME", daemon.config_home())
        .env("BASHD_NO_AUTOSTART", "1")
        .current_dir(daemon.scratch());
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let pid = transport.id().expect("the server has a pid");
    (().serve(transport).await.unwrap(), pid)
}

/// The jobs ran as the setting says, not looser or tighter (a workdir outside the
/// client's roots would run read-only).
async fn confined_as_set(daemon: &Daemon, setting: (&str, &str, SandboxProfile, Network)) {
    let client = daemon.client().await;
    let listed = client
        .jobs(JobsRequest {
            caller: Caller {
                session: "agent0".to_owned(),
                owner: None,
            },
            session: Some("agent0".to_owned()),
        })
        .await
        .unwrap();
    for job in listed {
        let (profile, network) = job.sandbox.map_or((SandboxProfile::Off, Network::On), |s| {
            (s.profile, s.network)
        });
        assert_eq!(
            (profile, network),
            (setting.2, setting.3),
            "{}: {}",
            setting.0,
            job.command
        );
    }
}

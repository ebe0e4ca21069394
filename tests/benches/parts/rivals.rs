//! `BASHD_BENCH=rivals`: `bashc mcp` against three MCP shell servers an agent could use
//! instead, each driven by the same rmcp client over its stdio: the time from spawning
//! the server to its answer to `initialize`, a tool call that runs `true`, and the
//! memory the server holds after the calls. Only on request: the first run installs
//! the servers (PyPI and npm) under `target/rivals`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bashd_tests::procs::{all_pids, memory_kib, parent_pid};
use bashd_tests::{Daemon, bin_path};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;

/// The servers, pinned so that a rerun measures the same code.
const PYTHON_SERVER: &str = "mcp-shell-server==1.1.14";
const NODE_SERVERS: [&str; 2] = [
    "mcp-server-commands@0.5.0",
    "@wonderwhy-er/desktop-commander@0.2.52",
];
const STARTS: usize = 5;
const CALLS: usize = 100;

struct Server {
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    tool: &'static str,
    arguments: serde_json::Value,
    /// What the server starts for a call of `true`, timed alone as its floor.
    runs: &'static [&'static str],
}

pub fn rivals(tokio: &tokio::runtime::Runtime) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/rivals");
    if let Err(why) = install(&dir) {
        println!("rivals: skipped, {why}");
        return;
    }
    // bashd as agents get it (confined: workspace-write on the allow-list) and as a
    // person who turns that off runs it, beside servers that confine nothing.
    let daemon = Daemon::start();
    let unconfined = Daemon::start_agents_unconfined();
    let scratch = daemon.scratch().to_string_lossy().into_owned();
    let bashc = |name: &'static str, daemon: &Daemon| Server {
        name,
        program: bin_path("bashc"),
        args: vec!["mcp".into()],
        env: vec![
            (
                bashc::protocol::runtime::RUNTIME_DIR_ENV.into(),
                daemon.runtime_dir().to_string_lossy().into_owned(),
            ),
            ("BASHD_NO_AUTOSTART".into(), "1".into()),
        ],
        tool: "bash",
        arguments: serde_json::json!({"command": "true"}),
        runs: &["bash", "-c", "true"],
    };
    let servers = [
        bashc("bashc mcp (confined, the default)", &daemon),
        bashc("bashc mcp (unconfined)", &unconfined),
        Server {
            name: "mcp-shell-server 1.1.14 (Python)",
            program: dir.join("py/bin/mcp-shell-server"),
            args: vec![],
            env: vec![("ALLOW_COMMANDS".into(), "true".into())],
            tool: "shell_execute",
            arguments: serde_json::json!({"command": ["true"], "directory": scratch}),
            runs: &["true"],
        },
        Server {
            name: "mcp-server-commands 0.5.0 (Node)",
            program: dir.join("npm/node_modules/.bin/mcp-server-commands"),
            args: vec![],
            env: vec![],
            tool: "run_command",
            arguments: serde_json::json!({"command": "true"}),
            runs: &["sh", "-c", "true"],
        },
        Server {
            name: "desktop-commander 0.2.52 (Node)",
            program: dir.join("npm/node_modules/.bin/desktop-commander"),
            args: vec![],
            env: vec![],
            tool: "start_process",
            arguments: serde_json::json!({"command": "true", "timeout_ms": 10000}),
            runs: &["sh", "-c", "true"],
        },
    ];
    println!(
        "MCP shell servers, release bashc, {STARTS} starts and {CALLS} calls of `true` each, the servers called in turns, one rmcp client:"
    );
    println!(
        "| server | start to `initialize` answered, median | call, median | call, p90 | what a call starts, alone | memory after the calls |"
    );
    println!("|---|---|---|---|---|---|");
    // Each server's starts, then one client each; the calls go to the servers in
    // turns, so that the machine's load moves every server's figures alike.
    let opened: Vec<Result<Opened, String>> = servers
        .iter()
        .map(|server| tokio.block_on(open(server, daemon.scratch())))
        .collect();
    let mut calls: Vec<Vec<Duration>> = vec![Vec::new(); servers.len()];
    let mut failed: Vec<Option<String>> = vec![None; servers.len()];
    for _ in 0..CALLS {
        for (at, (server, opened)) in servers.iter().zip(&opened).enumerate() {
            if let (Ok(opened), None) = (opened, &failed[at]) {
                match tokio.block_on(call(server, opened)) {
                    Ok(took) => calls[at].push(took),
                    Err(why) => failed[at] = Some(why),
                }
            }
        }
    }
    for (at, (server, opened)) in servers.iter().zip(opened).enumerate() {
        let figures = opened.and_then(|opened| match failed[at].take() {
            Some(why) => Err(why),
            None => Ok(tokio.block_on(close(opened, std::mem::take(&mut calls[at])))),
        });
        match figures {
            Ok(figures) => {
                let bashd = match server.name {
                    "bashc mcp (confined, the default)" => Some(&daemon),
                    "bashc mcp (unconfined)" => Some(&unconfined),
                    _ => None,
                };
                let shared = bashd.map_or(String::new(), |bashd| {
                    format!(
                        " (+ {:.1} MiB of bashd, shared by every agent)",
                        memory_kib(bashd.pid(), "VmRSS").unwrap_or(0) as f64 / 1024.0
                    )
                });
                let floor = super::median(CALLS, || {
                    let status = Command::new(server.runs[0])
                        .args(&server.runs[1..])
                        .current_dir(daemon.scratch())
                        .status()
                        .unwrap();
                    assert!(status.success());
                });
                println!(
                    "| {} | {:.1} ms | {:.2} ms | {:.2} ms | `{}` {:.2} ms | {:.1} MiB{shared} |",
                    server.name,
                    super::ms(figures.start),
                    super::ms(figures.call),
                    super::ms(figures.call_p90),
                    server.runs.join(" "),
                    super::ms(floor),
                    figures.rss_kib as f64 / 1024.0,
                );
            }
            Err(why) => println!("| {} | failed: {why} | | | | |", server.name),
        }
    }
}

struct Figures {
    start: Duration,
    call: Duration,
    call_p90: Duration,
    rss_kib: u64,
}

/// A server started `STARTS` times to its answer to `initialize`, and then once more
/// for its calls.
struct Opened {
    starts: Vec<Duration>,
    pid: u32,
    client: rmcp::service::RunningService<rmcp::RoleClient, ()>,
}

async fn open(server: &Server, workdir: &Path) -> Result<Opened, String> {
    let command = || {
        let mut command = tokio::process::Command::new(&server.program);
        command
            .args(&server.args)
            .envs(server.env.iter().cloned())
            .current_dir(workdir);
        command
    };
    let spawn = || {
        rmcp::transport::TokioChildProcess::builder(command())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", server.program.display()))
    };
    let mut starts = Vec::new();
    for _ in 0..STARTS {
        let began = Instant::now();
        let (transport, _) = spawn()?;
        let client = ().serve(transport).await.map_err(|e| e.to_string())?;
        starts.push(began.elapsed());
        let _ = client.cancel().await;
    }
    let (transport, _) = spawn()?;
    let pid = transport.id().ok_or("the server has no pid")?;
    let client = ().serve(transport).await.map_err(|e| e.to_string())?;
    Ok(Opened {
        starts,
        pid,
        client,
    })
}

/// One call of the server's tool, timed.
async fn call(server: &Server, opened: &Opened) -> Result<Duration, String> {
    let arguments = server.arguments.as_object().cloned().unwrap_or_default();
    let began = Instant::now();
    let result = opened
        .client
        .call_tool(CallToolRequestParams::new(server.tool).with_arguments(arguments))
        .await
        .map_err(|e| e.to_string())?;
    let took = began.elapsed();
    if result.is_error == Some(true) {
        return Err(format!("the call failed: {:?}", result.content));
    }
    Ok(took)
}

/// The server's figures, read before its client goes.
async fn close(opened: Opened, mut calls: Vec<Duration>) -> Figures {
    let rss_kib = tree(opened.pid)
        .into_iter()
        .filter_map(|pid| memory_kib(pid, "VmRSS"))
        .sum();
    let _ = opened.client.cancel().await;
    calls.sort();
    Figures {
        start: super::median_of(opened.starts),
        call: calls[calls.len() / 2],
        call_p90: calls[calls.len() * 9 / 10],
        rss_kib,
    }
}

/// A process and its descendants, read from /proc.
fn tree(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, Option<u32>)> = all_pids()
        .into_iter()
        .map(|pid| (pid, parent_pid(pid)))
        .collect();
    let mut found = vec![root];
    let mut at = 0;
    while at < found.len() {
        let parent = Some(found[at]);
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(pid, _)| *pid),
        );
        at += 1;
    }
    found
}

/// Installs the servers once: a Python venv and an npm prefix under `dir`.
fn install(dir: &Path) -> Result<(), String> {
    let run = |command: &mut Command| -> Result<(), String> {
        let out = command
            .output()
            .map_err(|e| format!("cannot run {command:?}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{command:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or_default()
            ))
        }
    };
    if !dir.join("py/bin/mcp-shell-server").exists() {
        run(Command::new("python3")
            .args(["-m", "venv"])
            .arg(dir.join("py")))?;
        run(Command::new(dir.join("py/bin/pip")).args(["install", "--quiet", PYTHON_SERVER]))?;
    }
    if !dir.join("npm/node_modules/.bin/desktop-commander").exists() {
        // Their install scripts download a browser the shell tools do not use.
        run(Command::new("npm")
            .args(["install", "--ignore-scripts", "--silent", "--prefix"])
            .arg(dir.join("npm"))
            .args(NODE_SERVERS)
            .env("PUPPETEER_SKIP_DOWNLOAD", "1"))?;
    }
    Ok(())
}

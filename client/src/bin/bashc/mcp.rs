//! `bashc mcp` (DESIGN §12): bashd as the bash tool of any MCP agent. A Model Context
//! Protocol server on stdio, built on rmcp, whose tools call the daemon through one
//! client connection. One server is one session, owned by the agent that started it
//! (its parent): when the agent goes, stdin closes, the server exits, and the daemon
//! lets the session linger as for any other owner.

use std::path::PathBuf;
use std::sync::Arc;

use bashc::protocol::{
    Caller, Direction, ErrorKind, ExecParams, ExecResult, JobRef, JobRequest, JobState,
    JobsRequest, KillRequest, Mode, OnTimeout, OutputOptions, OutputRequest, Owner, StreamName,
    WaitRequest,
};
use bashc::{Client, ClientError};
use clap::Args;
use rmcp::handler::server::common::schema_for_type;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::schemars::JsonSchema;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::render;

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The session the agent's commands run in (default: $BASHD_SESSION, else
    /// mcp-<pid of the agent that started this server>).
    #[arg(long, env = "BASHD_SESSION")]
    session: Option<String>,
    /// The process that owns the session (default: the agent that started this
    /// server, its parent). When it exits, the session's foreground jobs are killed,
    /// and its background jobs after the linger time (15 min) unless it comes back.
    #[arg(long, value_name = "PID")]
    owner_pid: Option<u32>,
}

/// `agent` is the parent bashc had when it started: the agent, unless it has died.
pub async fn mcp(args: McpArgs, agent: u32) -> anyhow::Result<u8> {
    let session = args.session.unwrap_or_else(|| format!("mcp-{agent}"));
    let caller = Caller {
        session,
        owner: Some(Owner::of(args.owner_pid.unwrap_or(agent))),
    };
    let workdir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let tools = BashTools {
        caller,
        workdir,
        env: Arc::new(crate::environment()),
        client: Arc::new(Mutex::new(None)),
    };
    // Start the daemon now, not at the first call; a failure is told then.
    if let Err(e) = tools.client().await {
        eprintln!("bashc mcp: {e}");
    }
    let (rmcp_end, gate_end) = tokio::io::duplex(GATE_BUFFER);
    let (stdin_closed_tx, stdin_closed) = tokio::sync::oneshot::channel();
    tokio::spawn(gate(gate_end, stdin_closed_tx));
    let serving = async move {
        let server = tools
            .serve(rmcp_end)
            .await
            .map_err(|e| anyhow::anyhow!("cannot start the MCP server: {e}"))?;
        let _ = server.waiting().await;
        anyhow::Ok(())
    };
    // The agent is gone or done when stdin closes: exit then, without waiting for calls
    // in flight; closing the connection to bashd ends their foreground jobs. A process
    // the agent left may hold stdin open: the agent's own end counts too.
    tokio::select! {
        _ = stdin_closed => {}
        served = serving => served?,
        () = reparented(agent) => {}
    }
    Ok(0)
}

/// How often the server looks whether its agent is still its parent.
const AGENT_POLL: std::time::Duration = std::time::Duration::from_secs(1);

pub fn parent() -> u32 {
    rustix::process::getppid().map_or(1, |pid| pid.as_raw_nonzero().get() as u32)
}

/// Resolves once the process is no longer the child of `agent`: the agent has exited.
/// (Not PR_SET_PDEATHSIG: it fires when the agent's *thread* that started the server
/// exits, which a thread-pooled agent does while alive.)
async fn reparented(agent: u32) {
    loop {
        tokio::time::sleep(AGENT_POLL).await;
        if parent() != agent {
            return;
        }
    }
}

/// Bytes in flight between the gate and rmcp, each way.
const GATE_BUFFER: usize = 1 << 20;
/// The longest message taken from the agent.
const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// Stands between stdio and rmcp: a line that is not JSON-RPC gets the JSON-RPC error
/// for it (rmcp would drop it without a word); every other line goes on to rmcp, and
/// everything rmcp writes goes to stdout. One task writes stdout, so no two messages
/// mix. `stdin_closed` fires at end of input.
async fn gate(rmcp: tokio::io::DuplexStream, stdin_closed: tokio::sync::oneshot::Sender<()>) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let (from_rmcp, mut to_rmcp) = tokio::io::split(rmcp);
    let (lines_tx, mut lines) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = lines.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                return;
            }
        }
    });
    let answers = lines_tx.clone();
    tokio::spawn(async move {
        let mut from_rmcp = BufReader::new(from_rmcp);
        loop {
            let mut line = Vec::new();
            match from_rmcp.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if answers.send(line).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let mut stdin = BufReader::new(tokio::io::stdin());
    loop {
        let mut line = Vec::new();
        let read = (&mut stdin)
            .take(MAX_MESSAGE_BYTES as u64)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") && line.len() >= MAX_MESSAGE_BYTES {
            let error = protocol_error(
                serde_json::Value::Null,
                PARSE_ERROR,
                format!("a message is longer than {MAX_MESSAGE_BYTES} bytes; it was dropped"),
            );
            let _ = lines_tx.send(error).await;
            // Skip the rest of it, a bounded piece at a time.
            loop {
                let mut rest = Vec::new();
                match (&mut stdin)
                    .take(MAX_MESSAGE_BYTES as u64)
                    .read_until(b'\n', &mut rest)
                    .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) if rest.ends_with(b"\n") => break,
                    Ok(_) => {}
                }
            }
            continue;
        }
        match check_message(&line) {
            Ok(()) => {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                if to_rmcp.write_all(&line).await.is_err() {
                    break;
                }
            }
            Err(Some(error)) => {
                if lines_tx.send(error).await.is_err() {
                    break;
                }
            }
            Err(None) => {}
        }
    }
    let _ = to_rmcp.shutdown().await;
    let _ = stdin_closed.send(());
    drop(lines_tx);
    let _ = writer.await;
}

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// `Ok` for a line to pass on to rmcp; `Err(Some(answer))` for one that is not
/// JSON-RPC; `Err(None)` for a blank line.
fn check_message(line: &[u8]) -> Result<(), Option<Vec<u8>>> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Err(None);
    }
    let message: serde_json::Value = serde_json::from_slice(line).map_err(|e| {
        Some(protocol_error(
            serde_json::Value::Null,
            PARSE_ERROR,
            format!("not JSON: {e}"),
        ))
    })?;
    let valid = |m: &serde_json::Value| {
        m.get("jsonrpc").and_then(|v| v.as_str()) == Some("2.0")
            && (m.get("method").is_some_and(|v| v.is_string())
                || m.get("result").is_some()
                || m.get("error").is_some())
    };
    let ok = match &message {
        serde_json::Value::Object(_) => valid(&message),
        serde_json::Value::Array(batch) => !batch.is_empty() && batch.iter().all(valid),
        _ => false,
    };
    if ok {
        return Ok(());
    }
    let id = message
        .get("id")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    Err(Some(protocol_error(
        id,
        INVALID_REQUEST,
        "not a JSON-RPC 2.0 message: it needs \"jsonrpc\": \"2.0\" and a \"method\"".to_owned(),
    )))
}

/// A JSON-RPC error response, as one line.
fn protocol_error(id: serde_json::Value, code: i64, message: String) -> Vec<u8> {
    let mut line = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message },
    }))
    .unwrap_or_default();
    line.push(b'\n');
    line
}

/// The tools; one per server process, cloned into each call.
#[derive(Clone)]
struct BashTools {
    /// The session and its owner, for every request.
    caller: Caller,
    /// Where a command runs when the call names no `workdir`.
    workdir: PathBuf,
    /// The environment of every job: the server's own, which is the agent's.
    env: Arc<Vec<(Vec<u8>, Vec<u8>)>>,
    /// The connection to bashd, made again after it is lost (a daemon restart).
    client: Arc<Mutex<Option<Client>>>,
}

const INSTRUCTIONS: &str = "bashd runs shell commands for you and owns every process they start. \
Use the `bash` tool for every shell command. A command that passes its timeout is not killed: \
it goes on as a background job, and bash_check, bash_wait and bash_kill reach it by its job id. \
Start servers and watchers with mode=background. Nothing persists between calls but files: \
pass `workdir` to run somewhere else. When output is cut, bash_output pages through the whole \
of it. A denied command did not run: do what the denial says instead.";

const BASH: &str = "Run a shell command (`bash -c COMMAND`) through bashd, which owns every process it starts.

Each call is a fresh shell: the working directory, variables and `cd` do not persist between calls. Pass `workdir` (absolute, or relative to the directory the MCP server started in, which is the default). stdin is /dev/null and pagers and editors are disabled: never run anything interactive.

Modes and timeouts: `default` (30 s), `slow` (15 min: builds, test suites, installs), `background` (returns at once with a job id; for dev servers, watchers, long jobs; runs up to 24 h). `timeout_secs` overrides the mode's timeout. A command that passes its timeout is NOT killed: the call returns what it printed so far with state `running`, and the job goes on in the background (set on_timeout=\"kill\" to kill it instead). Processes a command leaves running (`npm run dev &`) also go on as a background job under the same id. Follow a background job with bash_check (new output), bash_wait (its end) and bash_kill.

Output: stdout and stderr are cleaned to plain text (escape sequences stripped, progress bars collapsed) and each shows at most 2000 lines and 50 KiB by default: the last ones (`direction`, `head`, `tail`, `max_lines`, `max_bytes` change that). When a stream is cut, the whole of it is kept in a file the result names, and bash_output pages through it; nothing is lost.

Policy: bashd refuses, before anything runs, the dangerous commands agents are known for: `git add -A`/`.`/`--all`, `git push --force`, a recursive `rm` of /, ~, $HOME or .git, and whatever the user's config adds. A denial (state `denied`, exit 126, a message starting `permission denied:`) means nothing ran; do what the message says instead, and do not try to get around it.

Result: the output and exit code as text, the same as JSON in the structured content. The result is an error (isError) when the command exited non-zero, was ended by a signal, was killed at its timeout, or was denied.";

const BASH_CHECK: &str = "New output of a job since this session last checked it, and its state: whole lines only (a line still being written waits for the next check), so two checks never repeat or lose a line. Returns at once; use it to follow a background job or a command that went on past its timeout. When more new lines came than the limits show, the last ones are shown and the result says how to read the others with bash_output.";

const BASH_WAIT: &str = "Wait for a job to end and return its result (its output as for `bash`). With `timeout_secs`, give up waiting after that long: the job keeps running and the result has state `running`.";

const BASH_KILL: &str = "Stop a job: `signal` (default TERM) to every process of it, including those that left its process group (setsid, nohup, double forks), then SIGKILL to whatever is left after a grace time (2 s). Returns the job's result.";

const BASH_JOBS: &str = "List this session's jobs, running and finished (the last 100 finished are kept): id, state, exit code, mode, command, description, start time, duration.";

const BASH_OUTPUT: &str = "Page through the whole output of a job, which bashd keeps even when a result showed only part of it. Lines count from 1: `offset` is the first line to return, `limit` how many (default 2000). `stream` is stdout (default) or stderr. Returns the lines and, in the structured content, the range and the totals.";

/// Arguments of `bash`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct BashArgs {
    /// The command, run as `bash -c COMMAND`: pipes, `&&`, redirections and multi-line scripts work.
    command: String,
    /// `default` (30 s timeout), `slow` (15 min) or `background` (returns at once with a job id).
    mode: Option<ModeArg>,
    /// Timeout in seconds, instead of the mode's (1 s to 24 h).
    timeout_secs: Option<u64>,
    /// What happens at the timeout: `background` (the default: the job goes on, the call returns) or `kill`.
    on_timeout: Option<OnTimeoutArg>,
    /// The directory to run in: absolute, or relative to the directory the MCP server started in (the default).
    workdir: Option<String>,
    /// What the command is for, in a few words; shown in bash_jobs.
    description: Option<String>,
    /// Send stderr into stdout: one stream, in the order written.
    merge_stderr: Option<bool>,
    /// Most lines of each stream to show (default 2000).
    max_lines: Option<u32>,
    /// Most bytes of each stream to show (default 51200).
    max_bytes: Option<u32>,
    /// Which lines to show when a stream is cut: `tail` (the last, default), `head` (the first) or `head_tail` (both ends).
    direction: Option<DirectionArg>,
    /// Show at most the first N lines (with `tail` too: the first N and the last M).
    head: Option<u32>,
    /// Show at most the last N lines.
    tail: Option<u32>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(crate = "rmcp::schemars")]
enum ModeArg {
    Default,
    Slow,
    Background,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(crate = "rmcp::schemars")]
enum OnTimeoutArg {
    Background,
    Kill,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(crate = "rmcp::schemars")]
enum DirectionArg {
    Tail,
    Head,
    HeadTail,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(crate = "rmcp::schemars")]
enum StreamArg {
    Stdout,
    Stderr,
}

/// Arguments of `bash_check`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct JobArgs {
    /// The job id, as `bash` returned it (j12).
    job: String,
}

/// Arguments of `bash_wait`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct WaitArgs {
    /// The job id, as `bash` returned it (j12).
    job: String,
    /// Give up waiting after this many seconds (the job keeps running); default: wait until it ends.
    timeout_secs: Option<f64>,
}

/// Arguments of `bash_kill`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct KillArgs {
    /// The job id, as `bash` returned it (j12).
    job: String,
    /// The first signal: TERM (default), INT, HUP, QUIT, KILL, USR1, USR2, ALRM or ABRT.
    signal: Option<String>,
}

/// Arguments of `bash_jobs`: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct NoArgs {}

/// Arguments of `bash_output`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct OutputArgs {
    /// The job id, as `bash` returned it (j12).
    job: String,
    /// `stdout` (default) or `stderr`.
    stream: Option<StreamArg>,
    /// The first line to return, counting from 1 (default 1).
    offset: Option<u64>,
    /// How many lines to return (default 2000).
    limit: Option<u64>,
}

/// A call that cannot be made as asked: the tool error the agent sees.
struct CallError(String);

impl From<ClientError> for CallError {
    fn from(e: ClientError) -> Self {
        CallError(e.to_string())
    }
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("bash", BASH, schema_for_type::<BashArgs>()),
        Tool::new("bash_check", BASH_CHECK, schema_for_type::<JobArgs>()),
        Tool::new("bash_wait", BASH_WAIT, schema_for_type::<WaitArgs>()),
        Tool::new("bash_kill", BASH_KILL, schema_for_type::<KillArgs>()),
        Tool::new("bash_jobs", BASH_JOBS, schema_for_type::<NoArgs>()),
        Tool::new("bash_output", BASH_OUTPUT, schema_for_type::<OutputArgs>()),
    ]
}

impl ServerHandler for BashTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("bashd", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = serde_json::Value::Object(request.arguments.unwrap_or_default());
        let outcome = match request.name.as_ref() {
            "bash" => match parse(arguments) {
                Ok(args) => self.bash(args).await,
                Err(e) => Err(e),
            },
            "bash_check" => match parse::<JobArgs>(arguments) {
                Ok(args) => self.check(args).await,
                Err(e) => Err(e),
            },
            "bash_wait" => match parse(arguments) {
                Ok(args) => self.wait(args).await,
                Err(e) => Err(e),
            },
            "bash_kill" => match parse(arguments) {
                Ok(args) => self.kill(args).await,
                Err(e) => Err(e),
            },
            "bash_jobs" => match parse::<NoArgs>(arguments) {
                Ok(_) => self.jobs().await,
                Err(e) => Err(e),
            },
            "bash_output" => match parse(arguments) {
                Ok(args) => self.output(args).await,
                Err(e) => Err(e),
            },
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "no tool {other:?}; the tools are bash, bash_check, bash_wait, bash_kill, bash_jobs, bash_output"
                    ),
                    None,
                ));
            }
        };
        Ok(outcome
            .unwrap_or_else(|CallError(message)| {
                CallToolResult::error(vec![ContentBlock::text(message)])
            })
            .into())
    }
}

/// The arguments of a call, or a tool error that names the one that is wrong.
fn parse<T: for<'de> Deserialize<'de>>(arguments: serde_json::Value) -> Result<T, CallError> {
    serde_path_to_error::deserialize(arguments).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            // A missing or unknown argument: serde names it in the message.
            CallError(format!("bad arguments: {inner}"))
        } else {
            CallError(format!("bad argument `{path}`: {inner}"))
        }
    })
}

impl BashTools {
    /// The connection to bashd, made (and bashd started) if there is none or the one
    /// there has ended.
    async fn client(&self) -> Result<Client, ClientError> {
        let mut client = self.client.lock().await;
        if let Some(client) = client.as_ref().filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        let dir = bashc::protocol::runtime::runtime_dir();
        let new = bashc::connect_or_start(&dir).await?;
        *client = Some(new.clone());
        Ok(new)
    }

    /// Forgets a connection that was lost, so the next call makes a new one.
    async fn lost(&self, error: &ClientError) {
        if matches!(error, ClientError::Disconnected | ClientError::Frame(_)) {
            *self.client.lock().await = None;
        }
    }

    async fn bash(&self, args: BashArgs) -> Result<CallToolResult, CallError> {
        let workdir = self.workdir_of(args.workdir.as_deref())?;
        let params = ExecParams {
            owner: self.caller.owner,
            mode: match args.mode.unwrap_or(ModeArg::Default) {
                ModeArg::Default => Mode::Default,
                ModeArg::Slow => Mode::Slow,
                ModeArg::Background => Mode::Background,
            },
            timeout_secs: args.timeout_secs,
            on_timeout: args.on_timeout.map(|on| match on {
                OnTimeoutArg::Background => OnTimeout::Background,
                OnTimeoutArg::Kill => OnTimeout::Kill,
            }),
            description: args.description,
            env: self.env.as_ref().clone(),
            merge_stderr: args.merge_stderr.unwrap_or(false),
            output: OutputOptions {
                max_lines: args.max_lines,
                max_bytes: args.max_bytes,
                direction: args.direction.map(|d| match d {
                    DirectionArg::Tail => Direction::Tail,
                    DirectionArg::Head => Direction::Head,
                    DirectionArg::HeadTail => Direction::HeadTail,
                }),
                head: args.head,
                tail: args.tail,
            },
            ..ExecParams::new(args.command, self.caller.session.clone(), workdir)
        };
        let client = self.client().await?;
        let result = client.exec(params).await;
        let result = self.answer(result, "command").await?;
        Ok(exec_result(&result, is_failure(&result)))
    }

    async fn check(&self, args: JobArgs) -> Result<CallToolResult, CallError> {
        let request = JobRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
        };
        let result = self.client().await?.check(request).await;
        let result = self.answer(result, "job").await?;
        Ok(exec_result(&result, is_failure(&result)))
    }

    async fn wait(&self, args: WaitArgs) -> Result<CallToolResult, CallError> {
        let timeout_ms = match args.timeout_secs {
            Some(secs) if !secs.is_finite() || secs < 0.0 => {
                return Err(CallError(format!(
                    "bad argument `timeout_secs`: {secs} is not a number of seconds, 0 or more"
                )));
            }
            Some(secs) => Some((secs * 1000.0).round() as u64),
            None => None,
        };
        let request = WaitRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
            timeout_ms,
        };
        let result = self.client().await?.wait(request).await;
        let result = self.answer(result, "job").await?;
        Ok(exec_result(&result, is_failure(&result)))
    }

    async fn kill(&self, args: KillArgs) -> Result<CallToolResult, CallError> {
        let request = KillRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
            signal: args.signal,
            grace_ms: None,
        };
        let result = self.client().await?.kill(request).await;
        let result = self.answer(result, "job").await?;
        // Killed is what was asked for; a job that had ended already says how.
        let failed = result.state != JobState::Killed && is_failure(&result);
        Ok(exec_result(&result, failed))
    }

    async fn jobs(&self) -> Result<CallToolResult, CallError> {
        let request = JobsRequest {
            caller: self.caller.clone(),
            session: Some(self.caller.session.clone()),
        };
        let jobs = self.client().await?.jobs(request).await;
        let jobs = self.answer(jobs, "session").await?;
        let text = if jobs.is_empty() {
            "no jobs in this session yet\n".to_owned()
        } else {
            render::jobs_text(&jobs)
        };
        Ok(result(text, serde_json::json!({ "jobs": jobs }), false))
    }

    async fn output(&self, args: OutputArgs) -> Result<CallToolResult, CallError> {
        if args.offset == Some(0) {
            return Err(CallError(
                "bad argument `offset`: lines count from 1".to_owned(),
            ));
        }
        let request = OutputRequest {
            job: JobRef::Id(args.job),
            stream: match args.stream.unwrap_or(StreamArg::Stdout) {
                StreamArg::Stdout => StreamName::Stdout,
                StreamArg::Stderr => StreamName::Stderr,
            },
            offset: args.offset.unwrap_or(1),
            limit: args.limit,
        };
        let page = self.client().await?.output(request).await;
        let page = self.answer(page, "job").await?;
        let mut text = render::page_text(&page);
        if let Some(notice) = &page.notice {
            text.push_str(&format!("\n[{notice}]\n"));
        }
        let structured = serde_json::to_value(&page).unwrap_or_default();
        Ok(result(text, structured, false))
    }

    /// The daemon's answer, or the tool error for it: a thing the daemon did not find
    /// is named as the argument `subject`.
    async fn answer<T>(
        &self,
        answer: Result<T, ClientError>,
        subject: &str,
    ) -> Result<T, CallError> {
        match answer {
            Ok(value) => Ok(value),
            Err(ClientError::Daemon(reply)) if reply.kind == ErrorKind::NotFound => Err(CallError(
                format!("bad argument `{subject}`: {}", tool_words(&reply.message)),
            )),
            Err(e) => {
                self.lost(&e).await;
                Err(CallError(tool_words(&e.to_string())))
            }
        }
    }

    /// `workdir` resolved against the server's own directory, checked to be a
    /// directory, so that a bad one is named as the argument it is.
    fn workdir_of(&self, given: Option<&str>) -> Result<String, CallError> {
        let path = match given {
            Some(dir) => self.workdir.join(dir),
            None => self.workdir.clone(),
        };
        let bad =
            |why: &str| CallError(format!("bad argument `workdir`: {} {why}", path.display()));
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(bad("is not a directory")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(bad("does not exist"));
            }
            Err(e) => return Err(bad(&format!("cannot be used: {e}"))),
        }
        path.to_str()
            .map(str::to_owned)
            .ok_or_else(|| bad("is not valid UTF-8"))
    }
}

/// Whether a result is one the agent must see as failed: a non-zero exit, a signal,
/// a timeout that killed, a denial, a job that could not start.
fn is_failure(result: &ExecResult) -> bool {
    match result.state {
        JobState::Running => false,
        JobState::Exited => result.exit_code != Some(0),
        JobState::Signaled
        | JobState::TimedOut
        | JobState::Killed
        | JobState::Denied
        | JobState::Failed => true,
    }
}

/// A job's result: the text of DESIGN §9 as content, the JSON result as structured
/// content.
fn exec_result(result: &ExecResult, failed: bool) -> CallToolResult {
    let mut text = tool_words(&render::exec_text(result));
    for (name, stream) in [
        ("stdout", Some(&result.stdout)),
        ("stderr", result.stderr.as_ref()),
    ] {
        if let Some(stream) = stream.filter(|s| s.truncated) {
            text.push_str(&format!(
                "[the whole {name} ({} lines) is kept: bash_output(job=\"{}\", stream=\"{name}\", offset=1) pages through it]\n",
                stream.total_lines, result.job
            ));
        }
    }
    let structured = serde_json::to_value(result).unwrap_or_default();
    self::result(text, structured, failed)
}

fn result(text: String, structured: serde_json::Value, failed: bool) -> CallToolResult {
    let mut result = if failed {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(structured);
    result
}

/// The daemon words its hints for the `bashc` CLI (`bashc check j3`); an agent on MCP
/// calls tools instead, so the hints are reworded as the tool calls they stand for.
fn tool_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("bashc ") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "bashc ".len()..];
        let (call, used) = reword(after);
        match call {
            Some(call) => {
                out.push_str(&call);
                rest = &after[used..];
            }
            None => {
                out.push_str("bashc ");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `check j3` -> `bash_check(job="j3")`, and `output j3 --stream stderr --offset 5
/// --limit 10` -> `bash_output(job="j3", stream="stderr", offset=5, limit=10)`; how
/// much of `text` the hint took.
fn reword(text: &str) -> (Option<String>, usize) {
    let words: Vec<(usize, &str)> = text
        .split(' ')
        .scan(0, |at, word| {
            let start = *at;
            *at += word.len() + 1;
            Some((start, word))
        })
        .collect();
    // A word's leading letters and digits: `j4;` is `j4`, `7\n` is `7`.
    let clean = |word: &str| {
        let end = word
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(word.len());
        word[..end].to_owned()
    };
    let job = |word: &str| {
        let id = clean(word);
        (id.len() > 1 && id.starts_with('j') && id[1..].bytes().all(|b| b.is_ascii_digit())).then(
            || {
                let len = id.len();
                (id, len)
            },
        )
    };
    let Some(&(_, verb)) = words.first() else {
        return (None, 0);
    };
    let tool = match verb {
        "check" | "wait" | "kill" | "output" => verb,
        "jobs" | "jobs`" => return (Some("bash_jobs()".to_owned()), "jobs".len()),
        _ => return (None, 0),
    };
    let Some(&(job_at, job_word)) = words.get(1) else {
        return (None, 0);
    };
    let Some((id, id_len)) = job(job_word) else {
        return (None, 0);
    };
    let mut call = format!("bash_{tool}(job=\"{id}\"");
    let mut used = job_at + id_len;
    if tool == "output" && id_len == job_word.len() {
        let mut i = 2;
        while let (Some(&(_, flag)), Some(&(value_at, value))) = (words.get(i), words.get(i + 1)) {
            let name = match flag {
                "--stream" => "stream",
                "--offset" => "offset",
                "--limit" => "limit",
                _ => break,
            };
            let value_clean = clean(value);
            if name == "stream" {
                call.push_str(&format!(", stream=\"{value_clean}\""));
            } else {
                call.push_str(&format!(", {name}={value_clean}"));
            }
            used = value_at + value_clean.len();
            if value_clean.len() != value.len() {
                break;
            }
            i += 2;
        }
    }
    call.push(')');
    (Some(call), used)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_hints_become_tool_calls() {
        assert_eq!(
            tool_words(
                "New output: bashc check j4; wait for it: bashc wait j4; stop it: bashc kill j4."
            ),
            "New output: bash_check(job=\"j4\"); wait for it: bash_wait(job=\"j4\"); stop it: bash_kill(job=\"j4\")."
        );
        assert_eq!(
            tool_words(
                "stdout: 7 of the new lines are not shown; read them with: bashc output j9 --stream stderr --offset 3 --limit 7\n"
            ),
            "stdout: 7 of the new lines are not shown; read them with: bash_output(job=\"j9\", stream=\"stderr\", offset=3, limit=7)\n"
        );
        assert_eq!(
            tool_words("job ids look like j12, as `bashc exec` and `bashc jobs` show them"),
            "job ids look like j12, as `bashc exec` and `bash_jobs()` show them"
        );
        assert_eq!(tool_words("run bashc status"), "run bashc status");
    }

    #[test]
    fn a_wrong_argument_is_named() {
        let err = parse::<BashArgs>(serde_json::json!({"command": "ls", "timeout_secs": "soon"}))
            .unwrap_err();
        assert!(
            err.0
                .starts_with("bad argument `timeout_secs`: invalid type"),
            "{}",
            err.0
        );
        let err = parse::<BashArgs>(serde_json::json!({"comand": "ls"})).unwrap_err();
        assert!(err.0.contains("unknown field `comand`"), "{}", err.0);
        let err = parse::<JobArgs>(serde_json::json!({})).unwrap_err();
        assert!(err.0.contains("missing field `job`"), "{}", err.0);
        let err =
            parse::<BashArgs>(serde_json::json!({"command": "ls", "mode": "fast"})).unwrap_err();
        assert!(
            err.0
                .starts_with("bad argument `mode`: unknown variant `fast`"),
            "{}",
            err.0
        );
    }
}

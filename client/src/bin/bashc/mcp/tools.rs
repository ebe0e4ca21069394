//! The tools of `bashc mcp`: their definitions and argument types, and the calls they
//! make to the daemon through the library's client, which `words.rs` words.

use std::path::PathBuf;
use std::sync::Arc;

use bashc::protocol::{
    Caller, ErrorKind, ExecResult, GrepRequest, JobLimits, JobRef, JobRequest, JobState,
    JobsRequest, KillRequest, Mode, OutputOptions, OutputRequest, SendRequest, StdinMode,
    WaitConditions, WaitRequest,
};
use bashc::{Client, ClientError, ExecOptions};
use rmcp::handler::server::common::schema_for_type;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::schemars::JsonSchema;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::Deserialize;
use tokio::sync::Mutex;

use super::words;
use crate::options::{DirectionArg, ModeArg, OnTimeoutArg, StdinArg, StreamArg};

/// The tools; one per server process, cloned into each call.
#[derive(Clone)]
pub struct BashTools {
    /// The session and its owner, for every request.
    caller: Caller,
    /// Where a command runs when the call names no `workdir`.
    workdir: PathBuf,
    /// The environment of every job: the server's own, which is the agent's.
    env: Arc<Vec<(Vec<u8>, Vec<u8>)>>,
    /// The daemon to reach: `--runtime-dir`, else the one every bashd program finds.
    target: bashc::Target,
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

Each call is a fresh shell: the working directory, variables and `cd` do not persist between calls. Pass `workdir` (absolute, or relative to the directory the MCP server started in, which is the default). stdin is /dev/null and pagers and editors are disabled: never run anything interactive. With stdin=\"pipe\" the job reads a pipe instead, which bash_send writes to (for a prompt you cannot avoid); there is no terminal.

Servers: start them with `wait_until` (a regex, like \"Listening|Serving\"): the job starts in the background and the call returns as soon as a new output line matches (with that line and the lines around it), or when the job ends, or after `timeout_secs` (default 30), whichever comes first; the job keeps running. bash_jobs shows the ports each job listens on.

Modes and timeouts: `default` (30 s), `slow` (15 min: builds, test suites, installs), `background` (returns at once with a job id; for dev servers, watchers, long jobs; runs up to 24 h). `timeout_secs` overrides the mode's timeout. A command that passes its timeout is NOT killed: the call returns what it printed so far with state `running`, and the job goes on in the background (set on_timeout=\"kill\" to kill it instead). Processes a command leaves running (`npm run dev &`) also go on as a background job under the same id. Follow a background job with bash_check (new output), bash_wait (its end) and bash_kill.

Output: stdout and stderr are cleaned to plain text (escape sequences stripped, progress bars collapsed) and each shows at most 2000 lines and 50 KiB by default: the last ones (`direction`, `head`, `tail`, `max_lines`, `max_bytes` change that). When a stream is cut, the whole of it is kept in a file the result names, and bash_output pages through it; nothing is lost.

Policy: bashd refuses, before anything runs, the dangerous commands agents are known for: `git add -A`/`.`/`--all`, `git push --force`, a recursive `rm` of /, ~, $HOME or .git, and whatever the user's config adds. A denial (state `denied`, exit 126, a message starting `permission denied:`) means nothing ran; do what the message says instead, and do not try to get around it.

Result: the output and exit code as text, the same as JSON in the structured content. The result is an error (isError) when the command exited non-zero, was ended by a signal, was killed at its timeout, or was denied.";

const BASH_CHECK: &str = "New output of a job since this session last checked it, and its state: whole lines only (a line still being written waits for the next check), so two checks never repeat or lose a line. Returns at once; use it to follow a background job or a command that went on past its timeout. When more new lines came than the limits show, the last ones are shown and the result says how to read the others with bash_output.";

const BASH_WAIT: &str = "Wait for a job to end and return its result (its output as for `bash`). With `timeout_secs`, give up waiting after that long: the job keeps running and the result has state `running`. With `until` (a regex a new output line must match), `port` (a TCP port a process of the job listens on) or `idle_secs` (no output for that long), return as soon as one of them is met, saying which (and the matching line with the lines around it); the job keeps running. Use it instead of sleeping: start a server with mode=\"background\", then bash_wait(job, until=\"Listening\", timeout_secs=60).";

const BASH_SEND: &str = "Write text to the stdin of a job started with stdin=\"pipe\" or pty=true (for a prompt that cannot be avoided, or a REPL): `text` goes as is (end it with \"\\n\" to press Enter), `keys` presses keys on a terminal job as tmux names them ([\"6*7\", \"Enter\"], [\"C-c\"], [\"Esc\", \":wq\", \"Enter\"]), `eof`=true closes the job's stdin afterwards. A terminal job answers with its screen once its output settles. Then bash_check or bash_wait shows what the job did. A job marked `waiting for input?` is blocked reading its stdin.";

const BASH_SCREEN: &str = "The screen of a job started with pty=true, as a terminal shows it: its rows as text, then its size, the cursor and whether a process of the job waits for input (blocked reading the terminal). Use it for REPLs, editors (vim), pagers (less), top, prompts: what scrolled off the screen is the job's output (bash_check, bash_output). In the structured content: cols, rows, cursor {row, col}, lines, alternate, title, waiting_for_input, state.";

const BASH_KILL: &str = "Stop a job: `signal` (default TERM) to every process of it, including those that left its process group (setsid, nohup, double forks), then SIGKILL to whatever is left after a grace time (2 s). Returns the job's result.";

const BASH_JOBS: &str = "List this session's jobs, running and finished (the last 100 finished are kept): id, state, exit code, mode, command, description, start time, duration.";

const BASH_OUTPUT: &str = "Page through the whole output of a job, which bashd keeps even when a result showed only part of it. Lines count from 1: `offset` is the first line to return, `limit` how many (default 2000). `stream` is stdout (default) or stderr. With `grep` (a regex), only the matching lines, numbered (`12:match`, `11-context` with `context`), searched over the whole output: the way to find an error in a huge log. Returns the lines and, in the structured content, the range and the totals.";

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
    /// Most memory the job may use, like "512M" or "2G".
    memory: Option<String>,
    /// Most CPU the job may use, in cores, like 0.5 or 1.5.
    cpu: Option<f64>,
    /// Most processes the job may have at once.
    pids: Option<u32>,
    /// `null` (default: /dev/null) or `pipe`: a pipe that bash_send writes to.
    stdin: Option<StdinArg>,
    /// Start the job in the background and return when a new output line matches this regex (a server's \"Listening on\"), when it ends, or after timeout_secs (default 30); it keeps running.
    wait_until: Option<String>,
    /// Run on a pseudo-terminal (REPLs, editors, pagers, password prompts): bash_screen shows its screen, bash_send with `keys` types on it.
    pty: Option<bool>,
    /// The terminal's size with pty=true, COLSxROWS (default 120x40).
    size: Option<String>,
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
    /// Return when a new output line matches this regex (the job keeps running).
    until: Option<String>,
    /// Return when a process of the job listens on this TCP port.
    port: Option<u16>,
    /// Return when the job has printed nothing for this many seconds.
    idle_secs: Option<f64>,
}

/// Arguments of `bash_send`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
struct SendArgs {
    /// The job id, as `bash` returned it (j12); it must have been started with stdin=\"pipe\".
    job: String,
    /// What to write to the job's stdin, as is: end it with \"\\n\" to press Enter.
    text: Option<String>,
    /// Close the job's stdin after writing: it reads end-of-file.
    eof: Option<bool>,
    /// Keys to press on a terminal job (pty=true), after `text`, as tmux names them: Enter, Tab, Esc, BSpace, Space, Up, Down, Left, Right, Home, End, PgUp, PgDn, F1..F12, C-a..C-z, M-x; any other word is typed as text.
    keys: Option<Vec<String>>,
    /// Type every word of `keys` as text, naming no key.
    literal: Option<bool>,
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
    /// How many lines to return (default 2000); with `grep`, how many matching lines.
    limit: Option<u64>,
    /// Return only the lines matching this regex, numbered as `grep -n` does (`12:match`, `11-context`), searched in bashd over the whole output from `offset` on.
    grep: Option<String>,
    /// Lines of context before and after each match (with `grep`).
    context: Option<u32>,
}

/// A call that cannot be made as asked: the tool error the agent sees.
pub struct CallError(pub String);

impl From<ClientError> for CallError {
    fn from(e: ClientError) -> Self {
        CallError(words::error(&e))
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
        Tool::new("bash_send", BASH_SEND, schema_for_type::<SendArgs>()),
        Tool::new("bash_screen", BASH_SCREEN, schema_for_type::<JobArgs>()),
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
            "bash_send" => match parse(arguments) {
                Ok(args) => self.send(args).await,
                Err(e) => Err(e),
            },
            "bash_screen" => match parse::<JobArgs>(arguments) {
                Ok(args) => self.screen(args).await,
                Err(e) => Err(e),
            },
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "no tool {other:?}; the tools are bash, bash_check, bash_wait, bash_kill, bash_jobs, bash_output, bash_send, bash_screen"
                    ),
                    None,
                ));
            }
        };
        Ok(outcome.unwrap_or_else(words::call_error).into())
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
    /// Tools acting for `caller` on `target`'s daemon, running commands in `workdir`
    /// unless a call names another, with the environment `env`. No connection is made
    /// yet.
    pub fn new(
        caller: Caller,
        workdir: PathBuf,
        env: Arc<Vec<(Vec<u8>, Vec<u8>)>>,
        target: bashc::Target,
    ) -> BashTools {
        BashTools {
            caller,
            workdir,
            env,
            target,
            client: Arc::new(Mutex::new(None)),
        }
    }

    /// The connection to bashd, made (and bashd started) if there is none or the one
    /// there has ended.
    pub async fn client(&self) -> Result<Client, ClientError> {
        let mut client = self.client.lock().await;
        if let Some(client) = client.as_ref().filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        let new = bashc::connect(&self.target).await?;
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
        let options = ExecOptions {
            mode: args.mode.map(Into::into),
            timeout_secs: args.timeout_secs,
            on_timeout: args.on_timeout.map(Into::into),
            workdir,
            description: args.description,
            merge_stderr: args.merge_stderr.unwrap_or(false),
            output: OutputOptions {
                max_lines: args.max_lines,
                max_bytes: args.max_bytes,
                direction: args.direction.map(Into::into),
                head: args.head,
                tail: args.tail,
            },
            env: self.env.as_ref().clone(),
            limits: JobLimits {
                memory_bytes: args
                    .memory
                    .as_deref()
                    .map(bashc::parse_size)
                    .transpose()
                    .map_err(|e| CallError(format!("bad argument `memory`: {e}")))?,
                cpu_millicores: args
                    .cpu
                    .map(|cores| bashc::parse_cpu(&cores.to_string()))
                    .transpose()
                    .map_err(|e| CallError(format!("bad argument `cpu`: {e}")))?,
                pids: args.pids,
            },
            stream: false,
            stdin: args.stdin.map_or(StdinMode::Null, Into::into),
            pty: match (args.pty.unwrap_or(false), args.size.as_deref()) {
                (false, _) => None,
                (true, None) => Some(bashc::protocol::PtySize::default()),
                (true, Some(size)) => Some(
                    bashc::protocol::PtySize::parse(size)
                        .map_err(|e| CallError(format!("bad argument `size`: {e}")))?,
                ),
            },
        };
        let wait_until = args.wait_until;
        let timeout_secs = args.timeout_secs;
        let mut options = options;
        if wait_until.is_some() {
            // Started in the background; the wait below is what returns.
            options.mode = Some(Mode::Background);
            options.timeout_secs = None;
        }
        let params = options.params(args.command, self.caller.clone());
        let client = self.client().await?;
        let result = client.exec(params).await;
        let result = self.answer(result, "command").await?;
        let Some(until) = wait_until else {
            return Ok(words::exec_result(&result, is_failure(&result), true));
        };
        if result.state != JobState::Running {
            // Denied, or could not start.
            return Ok(words::exec_result(&result, is_failure(&result), true));
        }
        let request = WaitRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(result.job.to_string()),
            timeout_ms: Some(timeout_secs.unwrap_or(30).saturating_mul(1000)),
            conditions: WaitConditions {
                until: Some(until),
                ..WaitConditions::default()
            },
        };
        let waited = client.wait(request).await;
        let mut waited = self.answer(waited, "wait_until").await?;
        // How to follow the job, from the start's answer, before what the wait found.
        let mut notices = result.notices;
        notices.append(&mut waited.notices);
        waited.notices = notices;
        Ok(words::exec_result(&waited, is_failure(&waited), true))
    }

    async fn send(&self, args: SendArgs) -> Result<CallToolResult, CallError> {
        let eof = args.eof.unwrap_or(false);
        let text = args.text.unwrap_or_default();
        let keys = args.keys.unwrap_or_default();
        if text.is_empty() && !eof && keys.is_empty() {
            return Err(CallError(
                "bad arguments: give `text` to write, `keys` to press, or eof=true to close the job's stdin"
                    .to_owned(),
            ));
        }
        let request = SendRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
            bytes: text.into_bytes(),
            eof,
            keys,
            literal: args.literal.unwrap_or(false),
            // A terminal job answers with its screen once it settles; a job on pipes
            // has none and answers at once.
            screen_settle_ms: Some(300),
        };
        let sent = self.client().await?.send(request).await;
        let sent = self.answer(sent, "job").await?;
        if let Some(screen) = &sent.screen {
            return Ok(words::tool_result(
                crate::terminal::screen_text(screen),
                crate::terminal::screen_json(screen),
                false,
            ));
        }
        let text = format!(
            "Wrote {} bytes to the stdin of {}{}. See what it did: bash_check(job=\"{}\").\n",
            sent.written,
            sent.job,
            if sent.closed { " and closed it" } else { "" },
            sent.job
        );
        Ok(words::tool_result(
            text,
            serde_json::to_value(&sent).unwrap_or_default(),
            false,
        ))
    }

    async fn screen(&self, args: JobArgs) -> Result<CallToolResult, CallError> {
        let request = JobRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
        };
        let screen = self.client().await?.screen(request).await;
        let screen = self.answer(screen, "job").await?;
        Ok(words::tool_result(
            crate::terminal::screen_text(&screen),
            crate::terminal::screen_json(&screen),
            false,
        ))
    }

    async fn check(&self, args: JobArgs) -> Result<CallToolResult, CallError> {
        let request = JobRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
        };
        let result = self.client().await?.check(request).await;
        let result = self.answer(result, "job").await?;
        Ok(words::exec_result(&result, is_failure(&result), false))
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
        let idle_ms = match args.idle_secs {
            Some(secs) if !secs.is_finite() || secs < 0.0 => {
                return Err(CallError(format!(
                    "bad argument `idle_secs`: {secs} is not a number of seconds, 0 or more"
                )));
            }
            secs => secs.map(|secs| (secs * 1000.0).round() as u64),
        };
        let request = WaitRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
            timeout_ms,
            conditions: WaitConditions {
                until: args.until,
                until_stream: None,
                port: args.port,
                idle_ms,
            },
        };
        let result = self.client().await?.wait(request).await;
        let result = self.answer(result, "job").await?;
        Ok(words::exec_result(&result, is_failure(&result), true))
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
        Ok(words::exec_result(&result, failed, true))
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
            crate::tables::jobs_text(&jobs)
        };
        Ok(words::tool_result(
            text,
            serde_json::json!({ "jobs": jobs }),
            false,
        ))
    }

    async fn output(&self, args: OutputArgs) -> Result<CallToolResult, CallError> {
        if args.offset == Some(0) {
            return Err(CallError(
                "bad argument `offset`: lines count from 1".to_owned(),
            ));
        }
        let job = JobRef::Id(args.job);
        let stream = args.stream.unwrap_or(StreamArg::Stdout).into();
        let offset = args.offset.unwrap_or(1);
        let client = self.client().await?;
        let page = match args.grep {
            Some(pattern) => {
                client
                    .grep(GrepRequest {
                        caller: self.caller.clone(),
                        job,
                        stream,
                        pattern,
                        context: args.context.unwrap_or(0),
                        offset,
                        limit: args.limit,
                    })
                    .await
            }
            None => {
                client
                    .output(OutputRequest {
                        job,
                        stream,
                        offset,
                        limit: args.limit,
                    })
                    .await
            }
        };
        let page = self.answer(page, "job").await?;
        Ok(words::page_result(&page))
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
                format!("bad argument `{subject}`: {}", words::reply(&reply)),
            )),
            Err(e) => {
                self.lost(&e).await;
                Err(CallError(words::error(&e)))
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

#[cfg(test)]
mod tests {
    use super::*;

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

//! The tools of `bashc mcp`: their definitions and argument types, and the calls they
//! make to the daemon through the library's client, which `words.rs` words.
//!
//! Every call is an MCP call to the daemon (`mcp_call`): the daemon's `[mcp]` config
//! bounds it (`max_call_secs`) and says what a cancel does (`on_cancel`). A cancelled
//! call (`notifications/cancelled`) cancels its daemon request; a call that carries a
//! `progressToken` gets `notifications/progress` while it waits.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use bashc::protocol::{
    Caller, ErrorKind, ExecResult, GrepRequest, JobId, JobLimits, JobRef, JobRequest, JobState,
    JobsRequest, KillRequest, Mode, OutputOptions, OutputPage, OutputRequest, Request, Response,
    SendRequest, StdinMode, StreamName, WaitConditions, WaitRequest, limits,
};
use bashc::{Client, ClientError, ExecOptions, Responses};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::schemars::JsonSchema;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde::Deserialize;
use tokio::sync::Mutex;

use super::clients::{Budget, Settings};
use super::{schema, words};
use crate::options::{
    DirectionArg, ModeArg, NetArg, OnTimeoutArg, SandboxArg, StdinArg, StreamArg,
};

/// How often a call with a `progressToken` is told of: under the 5 s within which
/// clients that reset their timeout on progress expect a sign of life.
const PROGRESS_EVERY: Duration = Duration::from_secs(3);
/// The most of a job's last line a progress message carries.
const PROGRESS_LINE_BYTES: u64 = 200;

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
    /// What the config file says of clients' budgets and credentials.
    settings: Arc<Settings>,
}

/// Arguments some clients add to every call of every tool, taken and ignored: Gemini
/// CLI adds `wait_for_previous` (its system prompt tells the model to set it).
const ADDED_BY_CLIENTS: &[&str] = &["wait_for_previous"];

const INSTRUCTIONS: &str = "bashd runs shell commands for you and owns every process they start: \
run a shell command, start a dev server or watcher in the background, wait for output, \
type into a program that prompts. Use the `bash` tool for every shell command. A command that passes its timeout, or a call that reaches its time budget (50 s by default), is not killed: \
it goes on as a background job, and bash_check, bash_wait and bash_kill reach it by its job id. \
Start servers and watchers with mode=background. Nothing persists between calls but files: \
pass `workdir` to run somewhere else. When output is cut, bash_output pages through the whole \
of it. A denied command did not run: do what the denial says instead. \
To start a dev server: bash(command, wait_until=\"Listening|ready\"). To wait for output \
of a running job: bash_wait(job, until=REGEX). To type into a program: bash_send(job, text) \
on a job started with stdin=\"pipe\" or pty=true.";

const BASH: &str = "Run a shell command (`bash -c COMMAND`) through bashd, which owns every process it starts: a terminal command, a build, a test suite, a script, or start a dev server in the background.

Each call is a fresh shell: the working directory, variables and `cd` do not persist between calls. Pass `workdir` (absolute, or relative to the directory the MCP server started in, which is the default). stdin is /dev/null and pagers and editors are disabled: never run anything interactive. With stdin=\"pipe\" the job reads a pipe instead, which bash_send writes to (for a prompt you cannot avoid); there is no terminal.

Servers: start them with `wait_until` (a regex, like \"Listening|Serving\"): the job starts in the background and the call returns as soon as a new output line matches (with that line and the lines around it), or when the job ends, or after `timeout_secs` (default 30), whichever comes first; the job keeps running. bash_jobs shows the ports each job listens on.

Modes and timeouts: `default` (30 s), `slow` (15 min: builds, test suites, installs), `background` (returns at once with a job id; for dev servers, watchers, long jobs; runs up to 24 h). `timeout_secs` overrides the mode's timeout (1 to 86400). A command that passes its timeout is NOT killed: the call returns what it printed so far with state `running`, and the job goes on in the background (set on_timeout=\"kill\" to kill it instead). A call also returns within its time budget (50 s unless the user set another), so that your client does not give up on it: a `slow` command still running then goes on in the background, and bash_wait waits for its end. Processes a command leaves running (`npm run dev &`) also go on as a background job under the same id. Follow a background job with bash_check (new output), bash_wait (its end) and bash_kill.

Output: stdout and stderr are cleaned to plain text (escape sequences stripped, progress bars collapsed) and each shows at most 2000 lines and 50 KiB by default: the last ones (`direction`, `head`, `tail`, `max_lines`, `max_bytes` change that). When a stream is cut, the whole of it is kept, and the result names the bash_output call that shows the rest; nothing is lost.

Policy: bashd refuses, before anything runs, the dangerous commands agents are known for: `git add -A`/`.`/`--all`, `git push --force`, a recursive `rm` of /, ~, $HOME or .git, and whatever the user's config adds. A denial (state `denied`, exit 126, a message starting `permission denied:`) means nothing ran; do what the message says instead, and do not try to get around it.

Result: the output, then what happened (notices, the job id when it runs on), then the exit code. The result is an error (isError) when the command exited non-zero, was ended by a signal, was killed, or was denied.";

const BASH_CHECK: &str = "Read the new output of a running or background job (a dev server, a watcher, a long build) since this session last checked it, and its state: whole lines only (a line still being written waits for the next check), so two checks never repeat or lose a line. Returns at once; use it to follow a background job or a command that went on past its timeout. When more new lines came than the limits show, the last ones are shown and the result says how to read the others with bash_output. Only this session's jobs.";

const BASH_WAIT: &str = "Wait for output of a job, or for it to end (a server to be ready, a build to finish, a line to appear), and return its result (its output as for `bash`). With `timeout_secs`, give up waiting after that long; a wait also returns within the call budget (50 s by default). Either way the job keeps running, the result has state `running`, and you may wait again. With `until` (a regex a new output line must match), `port` (a TCP port a process of the job listens on) or `idle_secs` (no output for that long), return as soon as one of them is met, saying which (and the matching line with the lines around it); the job keeps running. Use it instead of sleeping: start a server with mode=\"background\", then bash_wait(job, until=\"Listening\", timeout_secs=45). With `jobs` (a list of ids) instead of `job`, wait on all of them at once: the call returns when the first is done (or every one, with all=true) and says which. Only this session's jobs.";

const BASH_SEND: &str = "Type into a program: answer a prompt, drive a REPL or an editor. Writes text to the stdin of a job started with stdin=\"pipe\" or pty=true (for a prompt that cannot be avoided, or a REPL): `text` goes as is (end it with \"\\n\" to press Enter), `keys` presses keys on a terminal job as tmux names them ([\"6*7\", \"Enter\"], [\"C-c\"], [\"Esc\", \":wq\", \"Enter\"]), `eof`=true closes the job's stdin afterwards. A terminal job answers with its screen once its output settles. Then bash_check or bash_wait shows what the job did. A job marked `waiting for input?` is blocked reading its stdin.";

const BASH_SCREEN: &str = "The screen of a job started with pty=true, as a terminal shows it: its rows as text, then its size, the cursor and whether a process of the job waits for input (blocked reading the terminal). Use it for REPLs, editors (vim), pagers (less), top, prompts: what scrolled off the screen is the job's output (bash_check, bash_output).";

const BASH_KILL: &str = "Stop a job: `signal` (default TERM) to every process of it, including those that left its process group (setsid, nohup, double forks), then SIGKILL to whatever is left after a grace time (2 s). Returns the job's result. Only this session's jobs.";

const BASH_JOBS: &str = "List this session's jobs, running and finished (the last 100 finished are kept): id, state, exit code, mode, command, description, start time, duration.";

const BASH_OUTPUT: &str = "Page through the whole output of a job, which bashd keeps even when a result showed only part of it. Lines count from 1: `offset` is the first line to return, `limit` how many (default 2000), `stream` stdout (default) or stderr. A page holds whole lines and at most `max_bytes` (default 51200, up to 1048576); only a line longer than the page is cut, and marked. The result says the lines shown, the stream's total, and the exact call for the next page, which starts at the first line not shown. With `grep` (a regex), only the matching lines, numbered (`12:match`, `11-context` with `context`), searched over the whole output: the way to find an error in a huge log. Only this session's jobs.";

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
    /// The directory to run in: absolute, or relative to the directory the MCP server started in (the default); for a server of another host (`bashc mcp --host`), relative to the login directory there.
    workdir: Option<String>,
    /// What the command is for, in a few words; shown in bash_jobs.
    description: Option<String>,
    /// Send stderr into stdout: one stream, in the order written.
    merge_stderr: Option<bool>,
    /// Most lines of each stream to show (default 2000, 1 or more).
    max_lines: Option<u32>,
    /// Most bytes of each stream to show (default 51200, 1 or more).
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
    /// Run in a kernel sandbox: `workspace-write` (write only in the workdir and $TMPDIR, .git read-only, credential stores hidden), `read-only` (write only in $TMPDIR) or `off`. Default: bashd's config, which may refuse a looser one.
    sandbox: Option<SandboxArg>,
    /// `off`: the job reaches no network but its own loopback. Default: bashd's config.
    net: Option<NetArg>,
    /// Run on a pseudo-terminal (REPLs, editors, pagers, password prompts): bash_screen shows its screen, bash_send with `keys` types on it; once the program draws (vim, less, top), bash, bash_wait and bash_check show its screen in place of stdout.
    pty: Option<bool>,
    /// The terminal's size with pty=true, COLSxROWS (default 120x40).
    size: Option<String>,
    /// A regex: while the job runs in the background, a later call of this session ends with the first line that matched it and how many did (\"since your last call: ...\"), so you need not poll.
    notify: Option<String>,
    /// Tell a later call of this session when the job, in the background, has printed nothing for this many seconds.
    notify_idle_secs: Option<u64>,
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
    job: Option<String>,
    /// Several job ids to wait on at once, instead of `job`: the call returns when the first of them is done (ended, or met `until`/`port`/`idle_secs`), or every one with all=true, saying which.
    jobs: Option<Vec<String>>,
    /// With `jobs`: return only when every job is done.
    all: Option<bool>,
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
    /// How many lines to return (default 2000, 1 or more); with `grep`, how many matching lines.
    limit: Option<u64>,
    /// Most bytes of text to return (default 51200, as `bash` shows; at most 1048576). A page holds whole lines: a line longer than the page is cut and marked.
    max_bytes: Option<u64>,
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

/// The tools: the one list that `tools/list`, the unknown-tool error and `bashc mcp
/// --help` read, and that a call dispatches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolName {
    Bash,
    Check,
    Wait,
    Kill,
    Jobs,
    Output,
    Send,
    Screen,
}

impl ToolName {
    /// Every tool, in the order `tools/list` gives them.
    pub const ALL: [ToolName; 8] = [
        ToolName::Bash,
        ToolName::Check,
        ToolName::Wait,
        ToolName::Kill,
        ToolName::Jobs,
        ToolName::Output,
        ToolName::Send,
        ToolName::Screen,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::Bash => "bash",
            ToolName::Check => "bash_check",
            ToolName::Wait => "bash_wait",
            ToolName::Kill => "bash_kill",
            ToolName::Jobs => "bash_jobs",
            ToolName::Output => "bash_output",
            ToolName::Send => "bash_send",
            ToolName::Screen => "bash_screen",
        }
    }

    fn find(name: &str) -> Option<ToolName> {
        ToolName::ALL.into_iter().find(|tool| tool.as_str() == name)
    }

    /// The tool's definition: its description, flat schema and annotations.
    fn tool(self) -> Tool {
        let read_only = || ToolAnnotations::new().read_only(true).destructive(false);
        let (description, schema, annotations) = match self {
            ToolName::Bash => (
                BASH,
                schema::flat_schema::<BashArgs>(),
                ToolAnnotations::new()
                    .read_only(false)
                    .destructive(true)
                    .open_world(true),
            ),
            ToolName::Check => (BASH_CHECK, schema::flat_schema::<JobArgs>(), read_only()),
            ToolName::Wait => (BASH_WAIT, schema::flat_schema::<WaitArgs>(), read_only()),
            ToolName::Kill => (
                BASH_KILL,
                schema::flat_schema::<KillArgs>(),
                ToolAnnotations::new().read_only(false).destructive(true),
            ),
            ToolName::Jobs => (BASH_JOBS, schema::flat_schema::<NoArgs>(), read_only()),
            ToolName::Output => (
                BASH_OUTPUT,
                schema::flat_schema::<OutputArgs>(),
                read_only(),
            ),
            ToolName::Send => (
                BASH_SEND,
                schema::flat_schema::<SendArgs>(),
                ToolAnnotations::new().read_only(false).destructive(false),
            ),
            ToolName::Screen => (BASH_SCREEN, schema::flat_schema::<JobArgs>(), read_only()),
        };
        Tool::new(self.as_str(), description, Arc::new(schema)).annotate(annotations)
    }
}

/// The tools' names as a sentence lists them: `bash, bash_check, ... and bash_screen`.
pub fn tool_names() -> String {
    let names: Vec<&str> = ToolName::ALL.iter().map(|tool| tool.as_str()).collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The tools and their flat schemas, made once: a call's arguments are read against
/// its tool's schema.
static TOOLS: LazyLock<Vec<Tool>> =
    LazyLock::new(|| ToolName::ALL.into_iter().map(ToolName::tool).collect());

/// The schema of the tool `name`.
fn schema_of(name: &str) -> Option<&'static JsonObject> {
    TOOLS
        .iter()
        .find(|t| t.name == name)
        .map(|t| t.input_schema.as_ref())
}

impl ServerHandler for BashTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("bashd", env!("CARGO_PKG_VERSION")))
            .with_instructions(match self.target.host() {
                Some(host) => format!("{INSTRUCTIONS} {}", words::on_host(host)),
                None => INSTRUCTIONS.to_owned(),
            })
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(TOOLS.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        let (Some(tool), Some(schema)) = (ToolName::find(name), schema_of(name)) else {
            return Err(ErrorData::invalid_params(
                format!("no tool {name:?}; the tools are {}", tool_names()),
                None,
            ));
        };
        let mut arguments = request.arguments.unwrap_or_default();
        prepare(&mut arguments, schema);
        // Claude Code 2.1.332 speaks MCP 2026-07-28 where the server has it: no
        // `initialize`, its clientInfo in every request's `_meta` instead.
        let client = context.client_info().map(|info| info.name);
        let arguments = serde_json::Value::Object(arguments);
        let call = Call {
            progress: context
                .meta
                .get_progress_token()
                .map(|token| (token, context.peer.clone())),
            cancelled: context.ct.clone(),
            budget: self.settings.budget(client.as_deref()),
            client,
        };
        let outcome = match tool {
            ToolName::Bash => match parse(arguments) {
                Ok(args) => self.bash(args, call).await,
                Err(e) => Err(e),
            },
            ToolName::Check => match parse::<JobArgs>(arguments) {
                Ok(args) => self.check(args, call).await,
                Err(e) => Err(e),
            },
            ToolName::Wait => match parse(arguments) {
                Ok(args) => self.wait(args, call).await,
                Err(e) => Err(e),
            },
            ToolName::Kill => match parse(arguments) {
                Ok(args) => self.kill(args, call).await,
                Err(e) => Err(e),
            },
            ToolName::Jobs => match parse::<NoArgs>(arguments) {
                Ok(_) => self.jobs().await,
                Err(e) => Err(e),
            },
            ToolName::Output => match parse(arguments) {
                Ok(args) => self.output(args, call).await,
                Err(e) => Err(e),
            },
            ToolName::Send => match parse(arguments) {
                Ok(args) => self.send(args).await,
                Err(e) => Err(e),
            },
            ToolName::Screen => match parse::<JobArgs>(arguments) {
                Ok(args) => self.screen(args).await,
                Err(e) => Err(e),
            },
        };
        let result = outcome.unwrap_or_else(words::call_error);
        let result = super::since::append(result, self.take_inbox().await);
        Ok(match self.target.host() {
            Some(host) => words::name_host(result, host),
            None => result,
        }
        .into())
    }
}

/// What a call has besides its arguments: where its progress goes, if it asked for
/// any, and the token rmcp cancels when the client cancels the call.
struct Call {
    progress: Option<(ProgressToken, Peer<RoleServer>)>,
    cancelled: tokio_util::sync::CancellationToken,
    /// The client's name, as `initialize` gave it.
    client: Option<String>,
    /// How much of a result the client shows whole, when it is one that cuts.
    budget: Option<Budget>,
}

/// A call's arguments as the tool's schema reads them: without those clients add, and
/// numbers and booleans in the forms clients write taken as the schema says.
fn prepare(arguments: &mut JsonObject, schema: &JsonObject) {
    for added in ADDED_BY_CLIENTS {
        arguments.remove(*added);
    }
    schema::coerce(arguments, schema);
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

/// A bad argument, named.
fn bad(argument: &str, why: impl std::fmt::Display) -> CallError {
    CallError(format!("bad argument `{argument}`: {why}"))
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
        settings: Arc<Settings>,
    ) -> BashTools {
        BashTools {
            caller,
            workdir,
            env,
            target,
            client: Arc::new(Mutex::new(None)),
            settings,
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

    /// What the session's jobs did since its last call, as the daemon told this
    /// server's connection (issue 32).
    async fn take_inbox(&self) -> Option<bashc::protocol::Inbox> {
        self.client.lock().await.as_ref()?.take_inbox()
    }

    /// Forgets a connection that was lost, so the next call makes a new one.
    async fn lost(&self, error: &ClientError) {
        if matches!(
            error,
            ClientError::Disconnected
                | ClientError::Lost { .. }
                | ClientError::RemoteDied { .. }
                | ClientError::Frame(_)
                | ClientError::DiedWhileRunning { .. }
        ) {
            *self.client.lock().await = None;
        }
    }

    async fn bash(&self, args: BashArgs, call: Call) -> Result<CallToolResult, CallError> {
        // The timeout's range, limits of 0 and the workdir are the daemon's to check,
        // whose refusal names the argument for `words` to spell (issue 31). A
        // `wait_until` call's timeout is its wait's, which the daemon does not see as
        // one: the same check, made here.
        let workdir = self.workdir_of(args.workdir.as_deref())?;
        if args.wait_until.is_some()
            && let Some(secs) = args.timeout_secs
        {
            limits::check_timeout_secs(secs).map_err(|e| {
                CallError(words::reply(
                    &bashc::protocol::ErrorReply::new(ErrorKind::InvalidRequest, e).with_hint(
                        bashc::protocol::ErrorHint::BadArgument {
                            argument: bashc::protocol::Argument::Timeout,
                        },
                    ),
                ))
            })?;
        }
        // A call's own limits win: what it asked for is shown, uncut.
        let own_limits = args.max_lines.is_some() || args.max_bytes.is_some();
        let stream_budget = call.budget.filter(|_| !own_limits);
        let options = ExecOptions {
            mode: args.mode.map(Into::into),
            timeout_secs: args.timeout_secs,
            on_timeout: args.on_timeout.map(Into::into),
            workdir,
            description: args.description,
            merge_stderr: args.merge_stderr.unwrap_or(false),
            output: OutputOptions {
                max_lines: args.max_lines.or(stream_budget.map(|b| b.stream_lines())),
                max_bytes: args.max_bytes.or(stream_budget.map(|b| b.stream_bytes())),
                direction: args.direction.map(Into::into),
                head: args.head,
                tail: args.tail,
            },
            // The agent's own credentials stay out of its jobs, unless `[env] pass`
            // names them.
            env: self
                .env
                .iter()
                .filter(|(name, _)| !self.settings.withheld(call.client.as_deref(), name))
                .cloned()
                .collect(),
            limits: JobLimits {
                memory_bytes: args
                    .memory
                    .as_deref()
                    .map(bashc::parse_size)
                    .transpose()
                    .map_err(|e| bad("memory", e))?,
                cpu_millicores: args
                    .cpu
                    .map(|cores| bashc::parse_cpu(&cores.to_string()))
                    .transpose()
                    .map_err(|e| bad("cpu", e))?,
                pids: args.pids,
            },
            stream: false,
            stdin: args.stdin.map_or(StdinMode::Null, Into::into),
            sandbox: args.sandbox.map(Into::into),
            network: args.net.map(Into::into),
            pty: match (args.pty.unwrap_or(false), args.size.as_deref()) {
                (false, _) => None,
                (true, None) => Some(bashc::protocol::PtySize::default()),
                (true, Some(size)) => Some(
                    bashc::protocol::PtySize::parse(size)
                        .map_err(|e| CallError(format!("bad argument `size`: {e}")))?,
                ),
            },
            notify: args.notify,
            notify_idle_secs: args.notify_idle_secs,
        };
        let wait_until = args.wait_until;
        let timeout_secs = args.timeout_secs;
        let mut options = options;
        if wait_until.is_some() {
            // Started in the background; the wait below is what returns.
            options.mode = Some(Mode::Background);
            options.timeout_secs = None;
        }
        let mut params = options.params(args.command, self.caller.clone());
        params.mcp_call = true;
        let client = self.client().await?;
        let responses = client.request(Request::Exec(params)).await;
        let responses = self.answer(responses, "command").await?;
        let result = self
            .follow(&client, responses, None, &call, "command")
            .await?;
        let whole = |result: ExecResult| {
            let failed = is_failure(&result);
            words::exec_result(result, failed, true, stream_budget, &|_| None)
        };
        let Some(until) = wait_until else {
            return Ok(whole(result));
        };
        if result.state != JobState::Running {
            // Denied, or could not start.
            return Ok(whole(result));
        }
        let request = WaitRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(result.job.to_string()),
            timeout_ms: Some(timeout_secs.unwrap_or(30).saturating_mul(1000)),
            conditions: WaitConditions {
                until: Some(until),
                ..WaitConditions::default()
            },
            any_session: false,
            mcp_call: true,
        };
        let responses = client.request(Request::Wait(request)).await;
        let responses = self.answer(responses, "wait_until").await?;
        let mut waited = self
            .follow(&client, responses, Some(result.job), &call, "wait_until")
            .await?;
        // How to follow the job, from the start's answer, before what the wait found.
        let mut notices = result.notices;
        notices.append(&mut waited.notices);
        waited.notices = notices;
        Ok(whole(waited))
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
            any_session: false,
        };
        let sent = self.client().await?.send(request).await;
        let sent = self.answer(sent, "job").await?;
        if let Some(screen) = &sent.screen {
            return Ok(words::tool_result(
                crate::terminal::screen_text(screen),
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
        Ok(words::tool_result(text, false))
    }

    /// Waits for the final answer of a `bash` or `bash_wait` request, telling the
    /// caller of its progress when it asked, and cancelling the request when the
    /// caller cancels the call. `job` is the job when the request names it; a `bash`
    /// request learns it from `Started`.
    async fn follow(
        &self,
        client: &Client,
        mut responses: Responses,
        mut job: Option<JobId>,
        call: &Call,
        subject: &str,
    ) -> Result<ExecResult, CallError> {
        let started = Instant::now();
        let mut ticks =
            tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        loop {
            // Cancelling a branch loses nothing: responses wait in their channel.
            tokio::select! {
                response = responses.next() => match response {
                    Ok(Response::Started(started)) => job = Some(started.job),
                    Ok(Response::Output(_)) => {}
                    Ok(Response::Finished(result)) => return Ok(*result),
                    Ok(Response::Error(error)) => {
                        return self.answer(Err(ClientError::Daemon(error)), subject).await;
                    }
                    Ok(_) => return Err(ClientError::Unexpected("a reply to another request").into()),
                    Err(e) => return self.answer(Err(e), subject).await,
                },
                _ = ticks.tick(), if call.progress.is_some() => {
                    if let (Some((token, peer)), Some(job)) = (&call.progress, job) {
                        let message = self.progress_message(client, job, started.elapsed()).await;
                        let progress = ProgressNotificationParam::new(
                            token.clone(),
                            started.elapsed().as_secs_f64().floor(),
                        )
                        .with_message(message);
                        let _ = peer.notify_progress(progress).await;
                    }
                }
                () = call.cancelled.cancelled() => {
                    // The client gave up: the daemon kills the job, or moves it to the
                    // background (`[mcp] on_cancel`), or stops waiting. rmcp sends no
                    // answer to a cancelled request.
                    let _ = client.cancel(responses.id()).await;
                    return Err(CallError("the call was cancelled".to_owned()));
                }
            }
        }
    }

    /// `j12 running for 15 s: <its last line>`: the job's age, which a wait for a job
    /// started long before the call has beyond the call's `elapsed`.
    async fn progress_message(&self, client: &Client, job: JobId, elapsed: Duration) -> String {
        let request = JobsRequest {
            caller: self.caller.clone(),
            session: Some(self.caller.session.clone()),
        };
        let age = match client.jobs(request).await {
            Ok(jobs) => jobs
                .iter()
                .find(|info| info.job == job)
                .map_or(elapsed, |info| Duration::from_millis(info.duration_ms)),
            Err(_) => elapsed,
        };
        let mut message = format!("{job} running for {} s", age.as_secs());
        for stream in [StreamName::Stdout, StreamName::Stderr] {
            let request = OutputRequest {
                job: JobRef::Id(job.to_string()),
                stream,
                offset: 1,
                limit: Some(1),
                caller: self.caller.clone(),
                any_session: false,
                max_bytes: Some(PROGRESS_LINE_BYTES),
                from_end: true,
            };
            if let Ok(page) = client.output(request).await
                && let Some(line) = page.text.lines().next().filter(|l| !l.trim().is_empty())
            {
                message.push_str(": ");
                message.push_str(line.trim_end());
                break;
            }
        }
        message
    }

    async fn screen(&self, args: JobArgs) -> Result<CallToolResult, CallError> {
        let request = JobRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
            any_session: false,
        };
        let screen = self.client().await?.screen(request).await;
        let screen = self.answer(screen, "job").await?;
        Ok(words::tool_result(
            crate::terminal::screen_text(&screen),
            false,
        ))
    }

    async fn check(&self, args: JobArgs, call: Call) -> Result<CallToolResult, CallError> {
        let request = JobRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
            any_session: false,
        };
        let client = self.client().await?;
        let result = client.check(request).await;
        let result = self.answer(result, "job").await?;
        let failed = job_failure(&result);
        // A check's lines start at its cursor, which its result does not say: a check
        // cut to fit names the lines it leaves out from the stream's total.
        let mut first_lines = [None, None];
        if let Some(budget) = call.budget
            && words::over_budget(&result, failed, false, budget)
        {
            for (i, stream) in [StreamName::Stdout, StreamName::Stderr]
                .into_iter()
                .enumerate()
            {
                let shown = match stream {
                    StreamName::Stdout => Some(&result.stdout),
                    StreamName::Stderr => result.stderr.as_ref(),
                };
                let Some(shown) = shown.filter(|s| s.total_lines > 0) else {
                    continue;
                };
                let request = OutputRequest {
                    job: JobRef::Id(result.job.to_string()),
                    stream,
                    offset: 1,
                    limit: Some(1),
                    caller: self.caller.clone(),
                    any_session: false,
                    max_bytes: Some(1),
                    from_end: false,
                };
                // FIXME: of a job still running, lines written since the check make
                // this later than the check's first line; a first line in the check's
                // figures would make it exact, and takes a protocol version.
                if let Ok(page) = client.output(request).await {
                    first_lines[i] = Some(
                        (page.total_lines + 1)
                            .saturating_sub(shown.total_lines)
                            .max(1),
                    );
                }
            }
        }
        let first_line = |stream| match stream {
            StreamName::Stdout => first_lines[0],
            StreamName::Stderr => first_lines[1],
        };
        Ok(words::exec_result(
            result,
            failed,
            false,
            call.budget,
            &first_line,
        ))
    }

    async fn wait(&self, args: WaitArgs, call: Call) -> Result<CallToolResult, CallError> {
        let timeout_ms = match args.timeout_secs {
            Some(secs) if !secs.is_finite() || secs < 0.0 => {
                return Err(bad(
                    "timeout_secs",
                    format!("{secs} is not a number of seconds, 0 or more"),
                ));
            }
            Some(secs) => Some((secs * 1000.0).round() as u64),
            None => None,
        };
        let idle_ms = match args.idle_secs {
            Some(secs) if !secs.is_finite() || secs < 0.0 => {
                return Err(bad(
                    "idle_secs",
                    format!("{secs} is not a number of seconds, 0 or more"),
                ));
            }
            secs => secs.map(|secs| (secs * 1000.0).round() as u64),
        };
        let conditions = WaitConditions {
            until: args.until.clone(),
            until_stream: None,
            port: args.port,
            idle_ms,
        };
        let one = match (args.job, args.jobs) {
            (Some(job), None) => job,
            (None, Some(jobs)) if jobs.len() == 1 => jobs[0].clone(),
            (None, Some(jobs)) if !jobs.is_empty() => {
                return self
                    .wait_many(jobs, &conditions, args.all.unwrap_or(false), timeout_ms)
                    .await;
            }
            (Some(_), Some(_)) => {
                return Err(bad("jobs", "give `job` or `jobs`, not both"));
            }
            (None, _) => return Err(bad("job", "name the job to wait for (j12), or `jobs`")),
        };
        let job = one.parse::<JobId>().ok();
        let request = WaitRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(one),
            timeout_ms,
            conditions: WaitConditions {
                until: args.until,
                until_stream: None,
                port: args.port,
                idle_ms,
            },
            any_session: false,
            mcp_call: true,
        };
        let client = self.client().await?;
        let responses = client.request(Request::Wait(request)).await;
        let responses = self.answer(responses, "job").await?;
        let result = self.follow(&client, responses, job, &call, "job").await?;
        Ok(job_result(result, &call))
    }

    /// `bash_wait(jobs=[...])`: the results of the jobs done, then which are and which
    /// are not.
    async fn wait_many(
        &self,
        jobs: Vec<String>,
        conditions: &WaitConditions,
        all: bool,
        timeout_ms: Option<u64>,
    ) -> Result<CallToolResult, CallError> {
        let jobs = jobs.into_iter().map(JobRef::Id).collect();
        let request =
            crate::waited::request(&self.caller, jobs, conditions, all, timeout_ms, false, true);
        let waited = self.client().await?.wait_many(request).await;
        let waited = self.answer(waited, "jobs").await?;
        let done = crate::waited::done(&waited);
        let mut content = Vec::new();
        for result in &done {
            content.push(rmcp::model::ContentBlock::text(format!("{}:", result.job)));
            content.extend(
                words::exec_result((*result).clone(), false, true, None, &|_| None).content,
            );
        }
        let summary =
            crate::waited::summary(&waited, all, |job| format!("bash_check(job=\"{job}\")"));
        content.push(rmcp::model::ContentBlock::text(summary));
        let failed = done.iter().any(|result| job_failure(result));
        Ok(if failed {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        })
    }

    async fn kill(&self, args: KillArgs, call: Call) -> Result<CallToolResult, CallError> {
        let request = KillRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
            signal: args.signal,
            grace_ms: None,
            any_session: false,
        };
        let result = self.client().await?.kill(request).await;
        let result = self.answer(result, "job").await?;
        Ok(job_result(result, &call))
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
        Ok(words::tool_result(text, false))
    }

    async fn output(&self, args: OutputArgs, call: Call) -> Result<CallToolResult, CallError> {
        if args.offset == Some(0) {
            return Err(bad("offset", "lines count from 1"));
        }
        if args.limit == Some(0) {
            return Err(bad("limit", "0 lines is no page; give 1 or more"));
        }
        match args.max_bytes {
            Some(0) => return Err(bad("max_bytes", "0 bytes is no page; give 1 or more")),
            Some(n) if n > limits::MAX_PAGE_BYTES => {
                return Err(bad(
                    "max_bytes",
                    format!(
                        "{n} is more than a page holds: at most {}",
                        limits::MAX_PAGE_BYTES
                    ),
                ));
            }
            _ => {}
        }
        let stream: StreamName = args.stream.unwrap_or(StreamArg::Stdout).into();
        // A page the client would cut holds no more than it shows whole.
        let limit = args
            .limit
            .or(call.budget.map(|b| u64::from(b.stream_lines())));
        let max_bytes = args.max_bytes.or(call
            .budget
            .map(|b| u64::from(b.stream_bytes()).min(limits::MAX_PAGE_BYTES)));
        let request = |stream, offset, limit, max_bytes| OutputRequest {
            job: JobRef::Id(args.job.clone()),
            stream,
            offset,
            limit,
            caller: self.caller.clone(),
            any_session: false,
            max_bytes,
            from_end: false,
        };
        let client = self.client().await?;
        let grep = args.grep.clone();
        let page = match args.grep {
            Some(pattern) => {
                client
                    .grep(GrepRequest {
                        caller: self.caller.clone(),
                        job: JobRef::Id(args.job.clone()),
                        stream,
                        pattern,
                        context: args.context.unwrap_or(0),
                        offset: args.offset.unwrap_or(1),
                        limit,
                        any_session: false,
                    })
                    .await
            }
            None => {
                client
                    .output(request(stream, args.offset.unwrap_or(1), limit, max_bytes))
                    .await
            }
        };
        let page = self.answer(page, "job").await?;
        // An empty stream says where the output is: the other stream's totals.
        let other: Option<OutputPage> =
            if grep.is_none() && page.lines == 0 && page.total_lines == 0 {
                let other = match stream {
                    StreamName::Stdout => StreamName::Stderr,
                    StreamName::Stderr => StreamName::Stdout,
                };
                client
                    .output(request(other, 1, Some(1), Some(1)))
                    .await
                    .ok()
            } else {
                None
            };
        let grep = grep
            .as_deref()
            .map(|pattern| (pattern, args.context.unwrap_or(0)));
        Ok(words::page_result(&page, other.as_ref(), grep))
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
            Err(ClientError::Daemon(reply)) if reply.kind == ErrorKind::NotFound => {
                Err(bad(subject, words::reply(&reply)))
            }
            Err(e) => {
                self.lost(&e).await;
                Err(CallError(words::error(&e)))
            }
        }
    }

    /// `workdir` resolved against the server's own directory; the daemon checks that
    /// it is a directory, and its refusal names the argument. On another host it is
    /// sent as given (empty: the login directory there), which the bridge there
    /// resolves: this machine's directories mean nothing there.
    fn workdir_of(&self, given: Option<&str>) -> Result<String, CallError> {
        if self.target.host().is_some() {
            return Ok(given.unwrap_or_default().to_owned());
        }
        let path = match given {
            Some(dir) => self.workdir.join(dir),
            None => self.workdir.clone(),
        };
        path.to_str()
            .map(str::to_owned)
            .ok_or_else(|| bad("workdir", format!("{} is not valid UTF-8", path.display())))
    }
}

/// Whether a `bash` result is one the agent must see as failed: a non-zero exit, a
/// signal, a timeout that killed, a kill (the command did not finish), a denial, a
/// job that could not start.
fn is_failure(result: &ExecResult) -> bool {
    match result.state {
        JobState::Running => false,
        JobState::Exited => result.exit_code != Some(0),
        JobState::Signaled
        | JobState::TimedOut
        | JobState::Killed
        | JobState::Denied
        | JobState::Failed
        | JobState::Lost => true,
    }
}

/// The result of `bash_wait` or `bash_kill`: the job's whole streams, fitted to the
/// client's budget, an error as `job_failure` says.
fn job_result(result: ExecResult, call: &Call) -> CallToolResult {
    let failed = job_failure(&result);
    words::exec_result(result, failed, true, call.budget, &|_| None)
}

/// Whether a job tool's result (`bash_check`, `bash_wait`, `bash_kill`) is an error:
/// the same for the same job state in all three. A job that failed on its own terms
/// is; a killed one is not, since a kill is what `bash_kill` asks for and the text
/// says who killed it.
fn job_failure(result: &ExecResult) -> bool {
    result.state != JobState::Killed && is_failure(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_as<T: for<'de> Deserialize<'de>>(
        tool: &str,
        arguments: serde_json::Value,
    ) -> Result<T, CallError> {
        let serde_json::Value::Object(mut arguments) = arguments else {
            panic!("arguments are an object")
        };
        prepare(&mut arguments, schema_of(tool).unwrap());
        parse(serde_json::Value::Object(arguments))
    }

    /// Issue 34: Gemini CLI adds `wait_for_previous` to every call of every tool; a
    /// model's own typo is still refused, naming the arguments there are.
    #[test]
    fn arguments_clients_add_are_taken_and_typos_refused() {
        let calls = [
            ("bash", serde_json::json!({"command": "ls"})),
            ("bash_check", serde_json::json!({"job": "j1"})),
            ("bash_wait", serde_json::json!({"job": "j1"})),
            ("bash_kill", serde_json::json!({"job": "j1"})),
            ("bash_jobs", serde_json::json!({})),
            ("bash_output", serde_json::json!({"job": "j1"})),
            ("bash_send", serde_json::json!({"job": "j1", "text": "y\n"})),
            ("bash_screen", serde_json::json!({"job": "j1"})),
        ];
        for (tool, mut arguments) in calls {
            arguments["wait_for_previous"] = serde_json::json!(true);
            let parsed = match tool {
                "bash" => parse_as::<BashArgs>(tool, arguments).map(drop),
                "bash_wait" => parse_as::<WaitArgs>(tool, arguments).map(drop),
                "bash_kill" => parse_as::<KillArgs>(tool, arguments).map(drop),
                "bash_jobs" => parse_as::<NoArgs>(tool, arguments).map(drop),
                "bash_output" => parse_as::<OutputArgs>(tool, arguments).map(drop),
                "bash_send" => parse_as::<SendArgs>(tool, arguments).map(drop),
                _ => parse_as::<JobArgs>(tool, arguments).map(drop),
            };
            if let Err(e) = parsed {
                panic!("{tool}: {}", e.0);
            }
        }
        let err = parse_as::<BashArgs>(
            "bash",
            serde_json::json!({"command": "ls", "wait_for_previus": true}),
        )
        .unwrap_err();
        assert!(
            err.0.contains("unknown field `wait_for_previus`")
                && err.0.contains("`command`")
                && err.0.contains("`timeout_secs`"),
            "{}",
            err.0
        );
    }

    #[test]
    fn a_wrong_argument_is_named() {
        let err = parse_as::<BashArgs>(
            "bash",
            serde_json::json!({"command": "ls", "timeout_secs": "soon"}),
        )
        .unwrap_err();
        assert!(
            err.0
                .starts_with("bad argument `timeout_secs`: invalid type"),
            "{}",
            err.0
        );
        let err = parse_as::<BashArgs>("bash", serde_json::json!({"comand": "ls"})).unwrap_err();
        assert!(err.0.contains("unknown field `comand`"), "{}", err.0);
        let err = parse_as::<JobArgs>("bash_check", serde_json::json!({})).unwrap_err();
        assert!(err.0.contains("missing field `job`"), "{}", err.0);
        let err =
            parse_as::<BashArgs>("bash", serde_json::json!({"command": "ls", "mode": "fast"}))
                .unwrap_err();
        assert!(
            err.0
                .starts_with("bad argument `mode`: unknown variant `fast`"),
            "{}",
            err.0
        );
    }

    /// Issue 15: what Python and form-based clients send is taken.
    #[test]
    fn numbers_and_booleans_come_in_the_forms_clients_write() {
        let args = parse_as::<BashArgs>(
            "bash",
            serde_json::json!({"command": "ls", "timeout_secs": 30.0, "max_lines": "20", "merge_stderr": "true", "cpu": "1.5"}),
        )
        .unwrap_or_else(|e| panic!("{}", e.0));
        assert_eq!(args.timeout_secs, Some(30));
        assert_eq!(args.max_lines, Some(20));
        assert_eq!(args.merge_stderr, Some(true));
        assert_eq!(args.cpu, Some(1.5));
        let args = parse_as::<WaitArgs>(
            "bash_wait",
            serde_json::json!({"job": "j1", "timeout_secs": "2.5"}),
        )
        .unwrap_or_else(|e| panic!("{}", e.0));
        assert_eq!(args.timeout_secs, Some(2.5));
        let err = parse_as::<BashArgs>(
            "bash",
            serde_json::json!({"command": "ls", "timeout_secs": 2.5}),
        )
        .unwrap_err();
        assert!(
            err.0.starts_with("bad argument `timeout_secs`"),
            "{}",
            err.0
        );
    }

    /// Issue 34: a client that hides tools behind a search (Claude Code) finds each
    /// tool by what an agent asks for, in its name and description, and the server's
    /// instructions say them all.
    #[test]
    fn tools_are_found_by_what_an_agent_searches_for() {
        let searches = [
            ("run a shell command", "bash"),
            ("start a dev server", "bash"),
            ("wait for output", "bash_wait"),
            ("type into a program", "bash_send"),
        ];
        for (search, tool) in searches {
            let found = TOOLS
                .iter()
                .find(|t| t.name == tool)
                .and_then(|t| t.description.as_deref())
                .is_some_and(|d| d.to_lowercase().contains(search));
            assert!(found, "{tool}'s description does not say {search:?}");
            assert!(
                INSTRUCTIONS.to_lowercase().contains(search),
                "the instructions do not say {search:?}"
            );
        }
    }

    /// Issue 15: every tool's schema is flat.
    #[test]
    fn every_schema_keeps_the_flat_rules() {
        for tool in TOOLS.iter() {
            assert_eq!(
                schema::flat_rule_breaks(&tool.input_schema),
                Vec::<String>::new(),
                "{}: {:?}",
                tool.name,
                tool.input_schema
            );
        }
    }
}

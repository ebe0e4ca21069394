//! The tools of `bashc mcp`: their definitions and argument types, and the calls they
//! make to the daemon through the library's client, which `words.rs` words.
//!
//! Every call is an MCP call to the daemon (`mcp_call`): the daemon's `[mcp]` config
//! bounds it (`max_call_secs`) and says what a cancel does (`on_cancel`). A cancelled
//! call (`notifications/cancelled`) cancels its daemon request; a call that carries a
//! `progressToken` gets `notifications/progress` while it waits.
//!
//! `mod.rs` is the tools' list (`ToolName`), their descriptions and argument types, and
//! the dispatch of a call; `bash.rs` is the `bash` call and the loop that follows a job
//! for it and `bash_wait`; `jobs.rs` the calls that act on jobs already running.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use bashc::protocol::{Caller, ErrorKind};
use bashc::{Client, ClientError};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ProgressToken, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
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

mod bash;
mod elicit;
mod input_required;
mod jobs;
#[cfg(test)]
mod tests;

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
    /// The calls that answered `input_required` for an ask, until the client calls again.
    waiting: input_required::Waiting,
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
    /// Run in a kernel sandbox: `workspace-write` (write only in the directory the agent started bashc mcp in, the config's writable paths and $TMPDIR, .git read-only, credential stores hidden), `read-only` (write only in $TMPDIR) or `off`. Default: bashd's config, workspace-write unless the person set it; a looser one waits for the person's yes.
    sandbox: Option<SandboxArg>,
    /// `off`: the job reaches no network but its session's own loopback; `allow-list`: also the hosts bashd's config lists, through bashd's proxy; `on`: every host. Default: bashd's config, allow-list unless the person set it.
    net: Option<NetArg>,
    /// Run on a pseudo-terminal (REPLs, editors, pagers, password prompts): bash_screen shows its screen, bash_send with `keys` types on it; once the program draws (vim, less, top), bash, bash_wait and bash_check show its screen in place of stdout.
    pty: Option<bool>,
    /// The terminal's size with pty=true, COLSxROWS (default 120x40).
    size: Option<String>,
    /// A regex: while the job runs in the background, a later call of this session ends with the first line that matched it and how many did (\"since your last call: ...\"), so you need not poll.
    notify: Option<String>,
    /// Tell a later call of this session when the job, in the background, has printed nothing for this many seconds.
    notify_idle_secs: Option<u64>,
    /// true: a workspace-write job may write the .git of its writable roots (to commit; config and hooks stay read-only). The person grants it first, in their prompt or a terminal, unless they did for this session.
    git_write: Option<bool>,
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

    /// A method this server does not know: its name, and what it offers instead
    /// (rmcp's own answer is the name alone).
    async fn on_custom_request(
        &self,
        request: rmcp::model::CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CustomResult, ErrorData> {
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            words::unknown_method(&request.method, &tool_names()),
            None,
        ))
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
            peer: context.peer.clone(),
            cancelled: context.ct.clone(),
            budget: self.settings.budget(client.as_deref()),
            client,
            asked: None,
        };
        let outcome = if let Some(state) = request.request_state.as_deref() {
            // The same call again, with the person's answer to the ask it waits on.
            self.answered(state, request.input_responses.as_ref(), call)
                .await
        } else {
            match tool {
                ToolName::Bash if input_required::wanted(&context) => match parse(arguments) {
                    Ok(args) => match self.bash_asking(args, call).await {
                        Ok(input_required::Asked::Done(result)) => Ok(result),
                        Ok(input_required::Asked::Ask(input)) => {
                            return Ok(CallToolResponse::InputRequired(input));
                        }
                        Err(e) => Err(e),
                    },
                    Err(e) => Err(e),
                },
                _ => self.dispatch(tool, arguments, call).await,
            }
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

impl BashTools {
    /// The call of `tool` with its `arguments`.
    async fn dispatch(
        &self,
        tool: ToolName,
        arguments: serde_json::Value,
        call: Call,
    ) -> Result<CallToolResult, CallError> {
        match tool {
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
        }
    }
}

/// What a call has besides its arguments: where its progress goes, if it asked for
/// any, and the token rmcp cancels when the client cancels the call.
struct Call {
    progress: Option<(ProgressToken, Peer<RoleServer>)>,
    /// The client, for an ask's elicitation (issue 44).
    peer: Peer<RoleServer>,
    cancelled: tokio_util::sync::CancellationToken,
    /// The client's name, as `initialize` gave it.
    client: Option<String>,
    /// How much of a result the client shows whole, when it is one that cuts.
    budget: Option<Budget>,
    /// Where an ask goes when the client is answered `input_required` for it (MCP
    /// 2026-07-28); `None`, it goes to the client's elicitation, if it has one.
    asked: Option<tokio::sync::mpsc::UnboundedSender<elicit::Ask>>,
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
            waiting: input_required::Waiting::default(),
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
                | ClientError::DiedDuring { .. }
        ) {
            *self.client.lock().await = None;
        }
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

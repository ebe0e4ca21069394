//! The `bashc` CLI: parses arguments, asks the daemon through the client library, and
//! prints. Exit status: the command's own; 128+N for a signal; 124 for a timeout that
//! killed; 126 for a policy denial; 2 for a usage error (nothing ran); 255 when the
//! daemon cannot be reached or refuses. A reader that closes stdout early (`| head`)
//! changes nothing: the rest of the output is dropped quietly.
//!
//! Over 600 lines: nearly half is `Command` and its argument structs, whose doc comments
//! are the `--help` text; they stay beside `run`, the one match over the subcommands.

mod allow;
mod bridge;
mod common;
mod deferred;
mod jobs;
mod lean;
mod live;
mod mcp;
mod mux;
mod options;
mod peer;
mod relay;
mod render;
mod since;
mod ssh;
mod stop;
mod tables;
mod terminal;
mod top;
mod waited;
mod wording;

use std::path::PathBuf;

use anyhow::{Context, bail};
use bashc::protocol::{
    ErrorHint, ExecParams, GrepRequest, JobLimits, OutputOptions, OutputRequest, StreamName, Worded,
};
use bashc::{ClientError, ExecOptions};
use clap::{Args, Parser, Subcommand};

use crate::common::{SessionArgs, UsageError, command_text, connect, environment, print, target};
use crate::deferred::Deferred;
use crate::options::{
    DirectionArg, ModeArg, NetArg, OnTimeoutArg, SandboxArg, StdinArg, StreamArg,
};

/// Exit status when bashd cannot be reached or refuses a request.
const EXIT_UNREACHABLE: u8 = 255;
/// A usage error: nothing ran (clap's own exit status for one).
const EXIT_USAGE: u8 = 2;

/// Run shell commands through bashd, the supervisor that owns every process it starts.
///
/// bashc starts bashd itself when nothing answers on its socket (unless
/// BASHD_NO_AUTOSTART=1). The runtime directory is --runtime-dir, else
/// $BASHD_RUNTIME_DIR, else $XDG_RUNTIME_DIR/bashd, else /run/user/$UID/bashd when
/// that directory is yours, else /tmp/bashd-$UID. bashc sends nothing unless that
/// directory is yours, mode 0700 and no symlink, and bashd on its socket runs as you.
#[derive(Debug, Parser)]
#[command(
    version,
    propagate_version = true,
    after_help = "Each command's flags: bashc help <command> (or bashc <command> --help)."
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

// The arguments every subcommand takes.
#[derive(Debug, Args)]
struct Global {
    /// The runtime directory of the daemon to use (default: $BASHD_RUNTIME_DIR, else
    /// $XDG_RUNTIME_DIR/bashd, else /run/user/$UID/bashd when it is yours, else
    /// /tmp/bashd-$UID).
    #[arg(long, global = true, value_name = "DIR")]
    runtime_dir: Option<PathBuf>,
    /// Act on HOST's bashd, over SSH (`ssh HOST bashc bridge`, kept open by a relay
    /// per host that every call shares; default: $BASHD_HOST, else this machine).
    /// Sessions not named with --session are `<the local default>@<this hostname>`
    /// there. `jobs --all` takes it several times.
    #[arg(long, global = true, value_name = "HOST")]
    host: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a command and print its output and exit code.
    ///
    /// The command runs as `bash -c COMMAND` in its own process group, with stdin
    /// /dev/null (or a pipe for `bashc send`: --stdin pipe), in the working directory given (default: the current one), with
    /// this environment plus pagers and editors disabled. The command policy is
    /// checked first (see `bashc policy check`). A stream longer than the limits is
    /// kept whole in a file the result names; `bashc output` pages through it.
    /// A command that passes its timeout moves to the background (--on-timeout kill
    /// kills it instead), and so do processes it leaves running when its shell exits
    /// (`server &`): the call returns, and the job goes on under bashd, which owns
    /// every process of it. --mode background returns at once.
    ///
    /// Exit status: the command's own (the shell's, when processes it started run on);
    /// 0 for a job that runs on in the background; 128+N if a signal ended it; 124 if
    /// it timed out and was killed (with every process it started); 126 if the policy
    /// denied it (nothing ran); 255 if bashd refused or could not be reached.
    Exec(Deferred<ExecArgs>),
    /// List jobs: this session's, another's, or all, running and finished.
    Jobs(Deferred<jobs::JobsArgs>),
    /// Show a job's output since this session last checked it, and its state.
    ///
    /// Only whole lines are shown; a line still being written waits for the next check.
    /// When more lines came than the limits show, the last ones are shown and the
    /// result says how to read the others. Exit status as for `exec`; 0 while the job
    /// runs.
    Check(Deferred<jobs::CheckArgs>),
    /// Wait for a job to end, or for a line, a port or quiet, and show its result.
    ///
    /// With --until, --port or --idle (any combination), returns as soon as one of them
    /// is met, the job's end, or --timeout, whichever comes first; the result says which
    /// condition was met (with the matching line and the lines around it) and the job
    /// runs on. Exit status: 0 when a condition was met; the job's own, as for `exec`,
    /// when it ended first; 124 if --timeout passes first (the job runs on).
    ///
    /// Several jobs (`bashc wait j3 j4 j5`): returns when the first of them is done
    /// (ended, or met the conditions), or with --all when every one is, and says which,
    /// with the result of each that is done. Exit status: that of the first job done
    /// (with --all, the first that is not 0), 124 if --timeout passes before.
    Wait(Deferred<jobs::WaitArgs>),
    /// Print a job's output as it comes, like `tail -f`, until the job ends; then its
    /// exit code.
    ///
    /// Works for any running or finished job of the session, also one started by another
    /// client. Shows the last 10 lines of each stream first (--lines N, --from-start).
    /// A loud job is shown a 16 MiB burst, then 32 MiB a second; what is not shown is
    /// said, with the `bashc output` command that pages through it.
    /// stdout's lines go to stdout, stderr's to stderr. A reader that falls behind a
    /// fast job is told how many lines it missed and how to read them. Exit status: the
    /// job's, as for `exec`.
    Follow(Deferred<live::FollowArgs>),
    /// Write to the stdin of a job started with `bashc exec --stdin pipe`.
    ///
    /// TEXT goes to the job as it is (--newline adds the newline Enter would); `-` reads
    /// it from bashc's stdin; --eof closes the job's stdin afterwards. Fails, with what
    /// was written, if the job reads nothing for 5 s while its pipe is full.
    Send(Deferred<live::SendArgs>),
    /// Show the screen of a terminal job (`exec --pty`), as its emulator in bashd has
    /// it: the rows as text, then a line with the size, the cursor and the state
    /// (`waiting for input` when a process of the job is blocked reading the terminal).
    Screen(Deferred<terminal::ScreenArgs>),
    /// Give a terminal job's terminal a new size, COLSxROWS: its program gets SIGWINCH.
    /// Shows the screen after.
    Resize(Deferred<terminal::ResizeArgs>),
    /// Stop a job: the signal (default TERM) to every process of it, then SIGKILL to
    /// whatever is left after the grace time. Shows its result.
    Kill(Deferred<jobs::KillArgs>),
    /// List sessions: their owners, whether they linger, their jobs.
    Sessions(Deferred<jobs::SessionsArgs>),
    /// Act on one session.
    #[command(subcommand)]
    Session(jobs::SessionCommand),
    /// Print lines of a job's full output, as `sed -n` would.
    ///
    /// Reads the spill file of a stream that passed its limits, or the output kept in
    /// memory. Lines count from 1. A page holds whole lines, at most --limit lines and
    /// --max-bytes bytes (the job's own limits by default, 2000 and 50 KiB); only a
    /// line longer than the page is cut. Only the lines go to stdout; anything to say
    /// about them (where the next page starts, a line cut, a file that stopped at its
    /// size cap) goes to stderr. --json adds the range and the totals. A job of
    /// another session is refused unless --session names it or --any-session is given.
    ///
    /// Exit status: 0; with --grep, 1 when no line matched, as grep; 255 if bashd
    /// refused or could not be reached.
    Output(Deferred<OutputArgs>),
    /// The command policy: what bashd refuses to run.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Show the daemon's pid, version, uptime, runtime dir, running jobs, how jobs are
    /// contained (cgroup PATH, subreaper or scan), its open files against the limit,
    /// and the sandbox: the default, the floor, which kernel mechanisms are there and
    /// the doors each closes to a sandboxed job (unix sockets, other terminals, IPC,
    /// nested .git, signals to the job's resident).
    Status(Deferred<StatusArgs>),
    /// A live view of every session's jobs, for the person running the agents.
    ///
    /// A row per job, grouped by session (the most active first): its state (input?
    /// when it waits for input), CPU, memory, age, ports, command, and its last line
    /// (or what it asks). Keys: Up/Down pick a job, f follows its output, s shows a
    /// terminal job's screen, i types a line into it, k kills it, c closes its session,
    /// q quits. Pending asks are listed above the table: a grants the first once, A
    /// for its session, r refuses it. The table is read again every --interval seconds. --once prints it
    /// once, for scripts. With --host, the jobs of that host's bashd.
    Top(Deferred<top::TopArgs>),
    /// Stop bashd: every job of every session is stopped (TERM, grace, KILL), then the
    /// daemon exits; waits until it has. Nothing to do when none is running.
    ///
    /// The next bashc starts a new daemon (unless BASHD_NO_AUTOSTART=1). Under
    /// systemd's bashd.socket, the next connection starts it again: `systemctl --user
    /// stop bashd.socket bashd` stops both. A command inside a sandboxed job cannot
    /// stop bashd.
    Stop(Deferred<stop::StopArgs>),
    /// Answer asks and grant exceptions: only a person does (issue 44).
    ///
    /// A request looser than its session's floor (`[sandbox] floor`, or the network on
    /// where the floor keeps it off) is not refused but waits as an ask (a1, a2, ...)
    /// for at most `[sandbox] ask_secs`: `bashc allow --ask a1` runs it (once; with
    /// --session-wide, every later request of its session as loose runs too), `bashc
    /// allow --refuse a1` refuses it. `bashc allow` alone lists the asks and grants.
    /// `bashc allow HOST[:PORT]` lets jobs reach a host through bashd's network proxy,
    /// for every session or --session S, until revoked or for --secs N. `--revoke ID`
    /// takes a grant back for new jobs (--kill ends the running jobs it started).
    /// Refused inside a job bashd runs.
    Allow(Deferred<allow::AllowArgs>),
    /// Serve bashd to an MCP agent (Claude Code, Codex, Gemini CLI, OpenCode, ...) on
    /// stdin/stdout.
    // The long help names the tools from the list the server serves.
    #[command(long_about = mcp::long_about())]
    Mcp(Deferred<mcp::McpArgs>),
    /// The far end of `bashc --host`: joins stdin and stdout to this machine's bashd,
    /// started if none is running. `ssh HOST bashc bridge` runs it; nothing else should.
    Bridge,
    /// The local end of `bashc --host HOST`: keeps one SSH channel to HOST's bridge
    /// open and carries the calls of every local client over it (of this uid, and
    /// none from inside a sandboxed job). bashc starts it when a call finds none; it
    /// ends with its channel, or after `[remote] relay_idle_secs` (600) with no client.
    #[command(hide = true)]
    Relay {
        /// As `ssh HOST` takes it.
        #[arg(value_name = "HOST")]
        relay_host: String,
    },
}

#[derive(Debug, Args)]
struct ExecArgs {
    #[command(flatten)]
    session: SessionArgs,
    /// default (30 s timeout), slow (15 min) or background (returns at once).
    #[arg(long, value_enum, default_value = "default")]
    mode: ModeArg,
    /// Timeout in seconds, overriding the mode's (1 s to 24 h; outside, a usage error).
    #[arg(long, value_name = "SECS", value_parser = timeout_secs)]
    timeout: Option<u64>,
    /// What happens at the timeout (default: background, unless bashd's config says).
    #[arg(long, value_enum)]
    on_timeout: Option<OnTimeoutArg>,
    /// Directory to run in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    workdir: Option<std::path::PathBuf>,
    /// What the command is for; kept with the job.
    #[arg(long, value_name = "TEXT")]
    description: Option<String>,
    /// Send stderr into the same pipe as stdout: one section, in order.
    #[arg(long)]
    merge_stderr: bool,
    /// Most lines of each stream to show (default 2000).
    #[arg(long, value_name = "N")]
    max_lines: Option<u32>,
    /// Most bytes of each stream to show (default 51200).
    #[arg(long, value_name = "N")]
    max_bytes: Option<u32>,
    /// Which lines to show when the output passes a limit: the last (tail, the
    /// default), the first (head), or half of each (head_tail). The whole output is
    /// kept in a file either way, named in the result.
    #[arg(long, value_enum)]
    direction: Option<DirectionArg>,
    /// Show at most the first N lines (with --tail too: the first N and the last M).
    #[arg(long, value_name = "N")]
    head: Option<u32>,
    /// Show at most the last N lines.
    #[arg(long, value_name = "N")]
    tail: Option<u32>,
    /// Most memory the job may use (512M, 2G): its cgroup's memory.max, else the
    /// address-space rlimit of its shell.
    #[arg(long, value_name = "SIZE", value_parser = bashc::parse_size)]
    memory: Option<u64>,
    /// Most CPU the job may use, in cores (0.5, 1.5); needs the cgroup cpu controller
    /// (`bashc status` says the containment), else the job is refused.
    #[arg(long, value_name = "CORES", value_parser = bashc::parse_cpu)]
    cpu: Option<u32>,
    /// Most processes the job may have at once; needs the cgroup pids controller,
    /// else the job is refused.
    #[arg(long, value_name = "N")]
    pids: Option<u32>,
    /// Run the job in a kernel sandbox (default: bashd's [sandbox] default); a
    /// profile looser than its floor is refused.
    #[arg(long, value_enum, value_name = "PROFILE")]
    sandbox: Option<SandboxArg>,
    /// The job's network (default: bashd's [sandbox] network).
    #[arg(long, value_enum)]
    net: Option<NetArg>,
    /// Print the output as it comes (stdout's lines to stdout, stderr's to stderr),
    /// then the exit code. With --json: one JSON object a line, the result last.
    /// A loud job is shown a 16 MiB burst, then 32 MiB a second; what is not shown is
    /// said, with the `bashc output` command that pages through it.
    #[arg(long)]
    stream: bool,
    /// The command's stdin: null (/dev/null, the default) or pipe, which `bashc send`
    /// writes to. There is no terminal: programs that need one refuse or misbehave. A
    /// job blocked reading the pipe is marked `waiting for input?`, with what it asks
    /// (`It asks: "..."`, the line it left unended); bash's `read -p` prints its prompt
    /// only on a terminal, so on a pipe there is none to show: --pty shows it.
    #[arg(long, value_enum, default_value = "null")]
    stdin: StdinArg,
    /// Run the command on a pseudo-terminal (for REPLs, editors, pagers, prompts read
    /// from /dev/tty): TERM=xterm-256color, colours allowed; `bashc screen` shows its
    /// screen, `bashc send --keys` types on it. Its output is what scrolls off the
    /// screen, as plain text.
    #[arg(long)]
    pty: bool,
    /// The terminal's size, COLSxROWS (with --pty).
    #[arg(long, value_name = "COLSxROWS", value_parser = bashd_size, requires = "pty")]
    size: Option<bashc::protocol::PtySize>,
    /// Tell this session when a line of the job matches REGEX while it runs in the
    /// background: the next bashc call of the session ends with the first match and a
    /// count ("since your last call: ..."). A bad regex is refused, and nothing runs.
    #[arg(long, value_name = "REGEX")]
    notify: Option<String>,
    /// Tell this session when the job, in the background, has printed nothing for
    /// SECS seconds.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    notify_idle: Option<u64>,
    /// Let a workspace-write job write the .git of its writable roots (a commit); its
    /// config, hooks and info stay read-only. Under a floor, a person grants it first
    /// (bashc allow) unless they did for the session.
    #[arg(long)]
    allow_git_write: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// The command: one word is a shell command as written (`'make && make test'`);
    /// several are a program and its arguments, each word kept whole as `sudo` and
    /// `env` take theirs (`grep -rn "TODO: fix" .`); `-` alone reads it from stdin.
    /// Flags of bashc come before it (an unknown one is an error, and nothing runs);
    /// after `--` or the command's first word, everything is the command's.
    #[arg(required = true, num_args = 1.., trailing_var_arg = true)]
    command: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    /// Say whether bashd would run COMMAND, without running anything.
    ///
    /// Exit status 0 when allowed, 1 when denied (with the rule and what to do
    /// instead), 255 when bashd cannot be reached.
    Check(PolicyCheckArgs),
}

#[derive(Debug, Args)]
struct PolicyCheckArgs {
    /// Print the verdict as JSON: allowed, rule, message.
    #[arg(long)]
    json: bool,
    /// Judge the command as `bashc exec` would run it in DIR (default: the current
    /// directory): what `.`, `..` and relative paths name depends on it.
    #[arg(long, value_name = "DIR")]
    workdir: Option<std::path::PathBuf>,
    /// The command: one word is a shell command as written (`'make && make test'`);
    /// several are a program and its arguments, each word kept whole as `sudo` and
    /// `env` take theirs (`grep -rn "TODO: fix" .`); `-` alone reads it from stdin.
    #[arg(required = true, num_args = 1.., trailing_var_arg = true)]
    command: Vec<String>,
}

#[derive(Debug, Args)]
struct OutputArgs {
    #[command(flatten)]
    target: jobs::OneJob,
    /// Which stream to read.
    #[arg(long, value_enum, default_value = "stdout")]
    stream: StreamArg,
    /// The first line to print, counting from 1.
    #[arg(long, value_name = "LINE", default_value_t = 1, value_parser = line_number)]
    offset: u64,
    /// Most lines to print (default: the job's max_lines, 2000).
    #[arg(long, value_name = "LINES")]
    limit: Option<u64>,
    /// Most bytes to print (default: the job's max_bytes, 51200; at most 1 MiB). A
    /// page holds whole lines; stderr says where the next one starts.
    #[arg(long, value_name = "N")]
    max_bytes: Option<u64>,
    /// Print only the lines that match this regex (Rust regex syntax), as `grep -n`
    /// does: `12:line` for a match, `11-line` for context, `--` between groups. The
    /// search runs in bashd over the whole output, from --offset on; --limit counts
    /// matching lines. Exit status, as grep's: 0 when a line matched, 1 when none did.
    #[arg(long, value_name = "REGEX")]
    grep: Option<String>,
    /// Lines of context before and after each match (with --grep).
    #[arg(long, value_name = "N", default_value_t = 0, requires = "grep")]
    context: u32,
    /// Print the page as JSON, with its range and the stream's totals.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct StatusArgs {
    /// Print the status as JSON.
    #[arg(long)]
    json: bool,
}

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(bashc_main())
}

fn bashc_main() -> u8 {
    // First thing: the longer bashc runs before reading it, the likelier an agent that
    // dies at once has already handed it to another parent.
    let parent = mcp::parent();
    let cli = Cli::parse();
    let local = match target(cli.global.runtime_dir.as_deref()) {
        Ok(target) => target,
        Err(e) => return fail(e),
    };
    let targets = match common::host_targets(&cli.global.host, &local, &cli.command) {
        Ok(targets) => targets,
        Err(e) => return fail(e),
    };
    let target = targets.first().cloned().unwrap_or(local);
    let command = match lean::run(cli.command, &target) {
        Ok(outcome) => {
            since::print_left();
            return outcome.unwrap_or_else(fail);
        }
        Err(command) => *command,
    };
    // An exec holds nothing whose drop does something once it has printed; the relay's
    // and the bridge's children, `top`'s terminal and MCP's tasks may.
    let plain = matches!(command, Command::Exec(_));
    // One thread: a call waits on one socket. (tokio sets up its signal and process
    // drivers with its I/O driver whatever is enabled, so enabling all costs nothing.)
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    let tokio = match builder.build() {
        Ok(tokio) => tokio,
        Err(e) => {
            let e = anyhow::Error::from(e).context("cannot start the async runtime");
            return fail(e);
        }
    };
    let outcome = tokio.block_on(async {
        match command {
            Command::Jobs(Deferred(args)) if targets.len() > 1 => {
                jobs::jobs_of_hosts(args, &targets).await
            }
            command => run(command, &target, parent).await,
        }
    });
    since::print_left();
    let code = match outcome {
        Ok(code) => code,
        Err(e) => fail(e),
    };
    if plain {
        // Out without dropping the runtime: the kernel closes its descriptors and frees
        // its memory faster than the drop would, one by one (issue 31). std flushes
        // stdout first.
        std::process::exit(i32::from(code));
    }
    // A read of stdin still blocked on a thread of its own (`bashc mcp` whose agent
    // died with the pipe held open elsewhere) must not hold the exit up.
    tokio.shutdown_background();
    code
}

/// Prints an error, with the hint the daemon gave for it in the CLI's words; the exit
/// status.
fn fail(e: anyhow::Error) -> u8 {
    if let Some(usage) = e
        .chain()
        .find_map(|cause| cause.downcast_ref::<UsageError>())
    {
        eprintln!("bashc: {usage}");
        return EXIT_USAGE;
    }
    if let Some(ClientError::DiedWhileRunning { job }) =
        e.chain().find_map(|cause| cause.downcast_ref())
    {
        eprintln!(
            "bashc: bashd stopped while {job} ran; bashc output {job} has what it printed once bashd is back"
        );
        return EXIT_UNREACHABLE;
    }
    if let Some(ClientError::DiedDuring { doing, job }) =
        e.chain().find_map(|cause| cause.downcast_ref())
    {
        eprintln!(
            "bashc: bashd stopped while {doing} {job}; once it is back (the next bashc starts it), bashc check {job} says what became of the job and bashc output {job} has what it printed"
        );
        return EXIT_UNREACHABLE;
    }
    let hint = e.chain().find_map(|cause| match cause.downcast_ref() {
        Some(ClientError::Daemon(reply) | ClientError::Refused(reply)) => reply.hint.clone(),
        _ => None,
    });
    eprintln!(
        "bashc: {}",
        wording::error(&format!("{e:#}"), hint.as_ref(), &wording::Cli)
    );
    // An argument bashd refused (`--max-lines 0`, a bad `--notify` regex) is a usage
    // error, as clap's are: nothing ran.
    match hint {
        Some(ErrorHint::BadArgument { .. }) => EXIT_USAGE,
        _ => EXIT_UNREACHABLE,
    }
}

fn bashd_size(text: &str) -> Result<bashc::protocol::PtySize, String> {
    bashc::protocol::PtySize::parse(text)
}

async fn run(command: Command, target: &bashc::Target, parent: u32) -> anyhow::Result<u8> {
    match command {
        Command::Exec(Deferred(args)) => exec(args, target).await,
        Command::Output(Deferred(args)) => output(args, target).await,
        Command::Jobs(Deferred(args)) => jobs::jobs(args, target).await,
        Command::Check(Deferred(args)) => jobs::check(args, target).await,
        Command::Wait(Deferred(args)) => jobs::wait(args, target).await,
        Command::Follow(Deferred(args)) => live::follow(args, target).await,
        Command::Send(Deferred(args)) => live::send(args, target).await,
        Command::Screen(Deferred(args)) => terminal::screen(args, target).await,
        Command::Resize(Deferred(args)) => terminal::resize(args, target).await,
        Command::Kill(Deferred(args)) => jobs::kill(args, target).await,
        Command::Sessions(Deferred(args)) => jobs::sessions(args, target).await,
        Command::Session(jobs::SessionCommand::Close(args)) => jobs::close(args, target).await,
        Command::Policy(PolicyCommand::Check(args)) => policy_check(args, target).await,
        Command::Status(Deferred(args)) => status(args, target).await,
        Command::Stop(Deferred(args)) => stop::stop(args, target).await,
        Command::Top(Deferred(args)) => top::top(args, target).await,
        Command::Allow(Deferred(args)) => allow::allow(args, target).await,
        Command::Mcp(Deferred(args)) => mcp::mcp(args, target, parent).await,
        Command::Bridge => {
            bridge::bridge(target.runtime_dir()).await?;
            Ok(0)
        }
        Command::Relay { relay_host } => {
            relay::relay(&relay_host, target.runtime_dir()).await?;
            Ok(0)
        }
    }
}

/// `exec --timeout`: whole seconds the daemon takes, so that a timeout it would refuse
/// is a usage error (exit 2) and nothing is sent.
fn timeout_secs(text: &str) -> Result<u64, String> {
    use bashc::protocol::limits::{MAX_TIMEOUT_SECS, MIN_TIMEOUT_SECS};
    let secs: u64 = text.parse().map_err(|_| {
        format!("a whole number of seconds, {MIN_TIMEOUT_SECS} to {MAX_TIMEOUT_SECS}")
    })?;
    bashc::protocol::limits::check_timeout_secs(secs)
        .map_err(|e| format!("{e}{}", wording::timeout_fix(&wording::Cli)))
}

/// `--offset`: a line number, which counts from 1, said in the user's words.
fn line_number(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("lines count from 1, so --offset starts at 1".to_owned()),
        Ok(line) => Ok(line),
        Err(_) => Err("a line number, 1 or more".to_owned()),
    }
}

async fn exec(args: ExecArgs, target: &bashc::Target) -> anyhow::Result<u8> {
    let params = exec_params(&args, target)?;
    let client = connect(target).await?;
    if args.stream {
        let events = client.exec_events(params).await?;
        let result = live::print_events(events, args.json).await?;
        live::print_end(&result, args.json)?;
        return Ok(render::exit_status(&result));
    }
    // Only the ask is said while it waits: the person has to learn where to answer.
    let result = client
        .exec_events(params)
        .await?
        .watch(&mut AskTeller)
        .await?;
    print_exec(&args, &result)
}

/// As [`exec`] without `--stream`, through the blocking client (`lean.rs`).
fn exec_blocking(args: ExecArgs, target: &bashc::Target) -> anyhow::Result<u8> {
    use bashc::Watch;
    let params = exec_params(&args, target)?;
    let result = common::connect_blocking(target)?.exec(params, |event| AskTeller.event(event))?;
    print_exec(&args, &result)
}

fn print_exec(args: &ExecArgs, result: &bashc::protocol::ExecResult) -> anyhow::Result<u8> {
    common::print_result(args.json, result, true)?;
    Ok(render::exit_status(result))
}

/// Tells stderr of an ask the request waits on (issue 44): bashc waits for the answer
/// as long as the ask lives (`[sandbox] ask_secs`), and the person answers elsewhere.
struct AskTeller;

impl bashc::Watch for AskTeller {
    type Error = anyhow::Error;

    fn event(&mut self, response: bashc::protocol::Response) -> anyhow::Result<()> {
        if let bashc::protocol::Response::Notice(notice @ bashc::protocol::Notice::Asked { .. }) =
            &response
        {
            eprintln!("bashc: {}", render::notice_text(notice));
        }
        Ok(())
    }
}

fn exec_params(args: &ExecArgs, target: &bashc::Target) -> anyhow::Result<ExecParams> {
    let command = command_text(&args.command)?;
    let workdir = workdir(args.workdir.as_deref(), target)?;
    let options = ExecOptions {
        mode: Some(args.mode.into()),
        timeout_secs: args.timeout,
        on_timeout: args.on_timeout.map(Into::into),
        workdir,
        description: args.description.clone(),
        merge_stderr: args.merge_stderr,
        output: OutputOptions {
            max_lines: args.max_lines,
            max_bytes: args.max_bytes,
            direction: args.direction.map(Into::into),
            head: args.head,
            tail: args.tail,
        },
        env: environment(target),
        limits: JobLimits {
            memory_bytes: args.memory,
            cpu_millicores: args.cpu,
            pids: args.pids,
        },
        stream: args.stream,
        stdin: args.stdin.into(),
        sandbox: args.sandbox.map(Into::into),
        network: args.net.map(Into::into),
        pty: args.pty.then(|| args.size.unwrap_or_default()),
        notify: args.notify.clone(),
        notify_idle_secs: args.notify_idle,
        git_write: args.allow_git_write,
    };
    Ok(options.params(command, args.session.caller()))
}

/// The directory a command runs in (`exec`) or is judged in (`policy check`): `--workdir`
/// against the current directory, or the current directory; on another host, as given
/// (empty for none), for the bridge there to resolve.
fn workdir(arg: Option<&std::path::Path>, target: &bashc::Target) -> anyhow::Result<String> {
    let workdir = match (arg, target.host()) {
        // On another host, the bridge there resolves the directory from its login
        // directory: this machine's current directory means nothing there.
        (Some(dir), Some(_)) => dir.to_owned(),
        (None, Some(_)) => PathBuf::new(),
        (dir, None) => {
            let cwd = std::env::current_dir()
                .context("cannot read the current directory (was it removed?); pass --workdir")?;
            match dir {
                Some(dir) => cwd.join(dir),
                None => cwd,
            }
        }
    };
    match workdir.into_os_string().into_string() {
        Ok(workdir) => Ok(workdir),
        Err(workdir) => bail!(
            "working directory {} is not valid UTF-8",
            std::path::Path::new(&workdir).display()
        ),
    }
}

async fn output(args: OutputArgs, target: &bashc::Target) -> anyhow::Result<u8> {
    let client = connect(target).await?;
    let job = args.target.job_ref()?;
    let stream = args.stream.into();
    let caller = args.target.caller();
    let request = |stream, offset, limit, max_bytes| OutputRequest {
        job: job.clone(),
        stream,
        offset,
        limit,
        caller: caller.clone(),
        any_session: args.target.any_session,
        max_bytes,
        from_end: false,
    };
    let page = match &args.grep {
        Some(pattern) => {
            client
                .grep(GrepRequest {
                    caller: caller.clone(),
                    job: job.clone(),
                    stream,
                    pattern: pattern.clone(),
                    context: args.context,
                    offset: args.offset,
                    limit: args.limit,
                    any_session: args.target.any_session,
                })
                .await?
        }
        None => {
            client
                .output(request(stream, args.offset, args.limit, args.max_bytes))
                .await?
        }
    };
    let notice = render::notices_text(&page.notices);
    if !args.json {
        if let Some(notice) = &notice {
            eprintln!("bashc: {notice}");
        }
        match &args.grep {
            Some(pattern) => {
                if let Some(next) = page.next_offset {
                    eprintln!(
                        "bashc: more matches may follow: bashc output {job_name} --grep {pattern:?} --offset {next}",
                        job_name = page.job
                    );
                }
            }
            None => {
                if let Some(next) = render::page_next(&page, render::output_page_command) {
                    eprintln!("bashc: {next}");
                }
            }
        }
        if page.lines == 0 && args.grep.is_none() {
            let other = match stream {
                StreamName::Stdout => StreamName::Stderr,
                StreamName::Stderr => StreamName::Stdout,
            };
            // Only its totals are wanted; a merged stream has no stderr to ask about.
            let other_page = client.output(request(other, 1, Some(1), None)).await.ok();
            if let Some(note) = wording::empty_page(&page, other_page.as_ref(), &wording::Cli) {
                eprintln!("bashc: {note}");
            }
        }
    }
    let worded = Worded {
        value: &page,
        notice,
    };
    print(args.json, &worded, |worded| render::page_text(worded.value))?;
    // As grep: a search that found nothing is told by the status, for `if bashc output
    // J --grep E; then`.
    Ok(if args.grep.is_some() && page.lines == 0 {
        1
    } else {
        0
    })
}

async fn policy_check(args: PolicyCheckArgs, target: &bashc::Target) -> anyhow::Result<u8> {
    let command = command_text(&args.command)?;
    let workdir = workdir(args.workdir.as_deref(), target)?;
    let client = connect(target).await?;
    let verdict = client.check_policy(command, Some(workdir)).await?;
    print(args.json, &verdict, render::policy_text)?;
    Ok(if verdict.allowed { 0 } else { 1 })
}

async fn status(args: StatusArgs, target: &bashc::Target) -> anyhow::Result<u8> {
    let client = connect(target).await?;
    let status = client.status().await?;
    print(args.json, &status, |status| {
        let text = render::status_text(status);
        match (target.host(), client.relay()) {
            // How the call got there, and how to make the next one reconnect (after a
            // change to ~/.ssh/config, say).
            (Some(host), Some((pid, socket))) => format!(
                "host: {host}, through the relay pid {pid} ({}; kill it to reconnect)\n{text}",
                socket.display()
            ),
            (Some(host), None) => format!("host: {host}\n{text}"),
            (None, _) => text,
        }
    })?;
    Ok(0)
}

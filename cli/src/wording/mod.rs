//! The one wording layer (issue 31): what the daemon says as data (a [`Notice`], an
//! [`ErrorHint`]) made into sentences, the same sentences for every front end, with
//! the calls and arguments in each front end's own spelling: the CLI's (`bashc check
//! j3`, `--net on`) and `bashc mcp`'s (`bash_check(job="j3")`, `net="on"`).
//!
//! A front end is a [`Spelling`]; [`notice`] and [`error`] are the only places a notice
//! or a hint becomes text, in the manner of ripgrep's printers over one sink. The daemon
//! holds no sentence that names a front end's command or flag (a test in
//! `daemon/src/front_end_words.rs` keeps it so), and nothing here rewrites its text.
//!
//! The two spellings, the CLI's and MCP's, are in `spellings.rs`; `tests.rs` sends every
//! notice and hint through both.

use std::fmt::Write;

use bashc::protocol::{
    Argument, BackgroundWhy, ErrorHint, JobId, Network, Notice, OutputPage, SandboxDenial,
    SandboxProfile, StreamName, WaitMet, limits,
};

use crate::render::{human_size, plural, stream_name, waited_secs};

mod spellings;
#[cfg(test)]
mod tests;

pub use spellings::{Cli, Mcp};

/// A call that acts on one job as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobCall {
    Check,
    Wait,
    Kill,
    /// Its whole output, from the first line.
    Output,
}

/// A call that names no job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// The call that runs a command.
    Exec,
    /// The call that lists jobs.
    Jobs,
}

/// A setting of the call that runs a command, with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    ModeSlow,
    ModeBackground,
    /// A timeout of the caller's choosing.
    Timeout,
    OnTimeoutBackground,
    Sandbox(SandboxProfile),
    Network(Network),
    Pty,
    StdinPipe,
}

/// How a front end spells the calls and arguments a sentence names. Each method gives
/// the words and nothing around them: the sentences are [`notice`]'s and [`error`]'s.
pub trait Spelling {
    /// `bashc check j3`, `bash_check(job="j3")`.
    fn job_call(&self, call: JobCall, job: JobId) -> String;
    /// `bashc jobs`, `bash_jobs()`.
    fn call(&self, call: Call) -> &'static str;
    /// The call that reads `limit` lines of `stream` from line `offset`: `bashc output
    /// j3 --stream stderr --offset 3 --limit 7`. stdout, the default, goes unsaid.
    fn output_call(&self, job: JobId, stream: StreamName, offset: u64, limit: u64) -> String;
    /// The call that reads a page of `stream` from line `offset`: `bashc output j3
    /// --offset 86`, `bash_output(job="j3", offset=86)`.
    fn page_call(&self, job: JobId, stream: StreamName, offset: u64) -> String;
    /// The call that reads `stream` from its first line: `bashc output j3 --stream
    /// stderr`, `bash_output(job="j3", stream="stderr")`.
    fn stream_call(&self, job: JobId, stream: StreamName) -> String;
    /// A page's first line as the caller gives it: `--offset 86`, `offset=86`.
    fn offset(&self, offset: u64) -> String;
    /// The call that answers a job waiting for input, and how to close its stdin.
    fn send_call(&self, job: JobId) -> String;
    /// An argument as its user writes it: `--max-lines`, `max_lines`.
    fn argument(&self, argument: Argument) -> &'static str;
    /// A setting with its value: `--net on`, `net="on"`.
    fn setting(&self, setting: Setting) -> String;
    /// Running the command again with `settings`: `--sandbox off --net on`,
    /// `bash(sandbox="off", net="on")`.
    fn again_with(&self, settings: &[Setting]) -> String;
    /// Closing a job's stdin: `--eof`, `eof=true`.
    fn eof(&self) -> &'static str;
    /// An error about `argument`: `--workdir: MESSAGE`, ``bad argument `workdir`: MESSAGE``.
    fn bad_argument(&self, argument: Argument, message: &str) -> String;
    /// How to reach a job of another session, when this front end can: `None` when it
    /// reaches its own session only.
    fn other_session(&self, session: &str) -> Option<String>;
    /// The call that lists sessions, when this front end has one.
    fn sessions_call(&self) -> Option<&'static str>;
    /// How a job is run inside one of its session's writable roots (issue 42).
    fn inside_a_root(&self) -> &'static str;
    /// How a session gets its project's directory as a writable root: the client
    /// started there.
    fn start_in_project(&self) -> &'static str;
    /// How the person answers ask `ask` (issue 44): never the agent, which passes it
    /// on.
    fn answer_ask(&self, ask: bashc::protocol::AskId) -> String;
}

/// Why a page of output holds no line, the calls it names in `spelling`: the stream is
/// empty (and whether the other one, `other`'s, has lines and how to read them), or the
/// offset is past its end. `None` for a page with lines, or one whose offset is within
/// the stream (a search that found nothing).
pub fn empty_page(
    page: &OutputPage,
    other: Option<&OutputPage>,
    spelling: &dyn Spelling,
) -> Option<String> {
    if page.lines > 0 {
        return None;
    }
    let (job, name) = (page.job, stream_name(page.stream));
    if page.total_lines > 0 {
        return (page.offset > page.total_lines).then(|| {
            format!(
                "{job}'s {name} has {} line{}; {} is past its end",
                page.total_lines,
                plural(page.total_lines),
                spelling.offset(page.offset)
            )
        });
    }
    let still = if page.complete {
        ""
    } else {
        " so far (it is still running)"
    };
    Some(match other {
        Some(other) if other.total_lines > 0 => format!(
            "{job}'s {name} is empty{still}; its {} has {} line{}: {}",
            stream_name(other.stream),
            other.total_lines,
            plural(other.total_lines),
            spelling.stream_call(job, other.stream)
        ),
        Some(other) => format!(
            "{job}'s {name} is empty{still}, and so is its {}",
            stream_name(other.stream)
        ),
        None => format!("{job}'s {name} is empty{still}"),
    })
}

/// The notices of a result or page in `spelling`, a line each in their order; `None`
/// when there are none.
pub fn notices(notices: &[Notice], spelling: &dyn Spelling) -> Option<String> {
    (!notices.is_empty()).then(|| {
        notices
            .iter()
            .map(|n| notice(n, spelling))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

/// A notice as a person or an agent reads it, naming the calls that act on it in
/// `spelling`.
pub fn notice(notice: &Notice, spelling: &dyn Spelling) -> String {
    let follow = |job: JobId, again: &str| {
        format!(
            "New output: {}; {again}: {}; stop it: {}.",
            spelling.job_call(JobCall::Check, job),
            spelling.job_call(JobCall::Wait, job),
            spelling.job_call(JobCall::Kill, job)
        )
    };
    match notice {
        Notice::Background {
            job,
            pid,
            why,
            timeout_secs,
        } => background_text(
            *job,
            *pid,
            *why,
            *timeout_secs,
            &follow(*job, "wait for it"),
        ),
        Notice::TimedOut { after_secs } => format!(
            "Command timed out after {after_secs} s and was killed with every process it started. Use {}, {} or {} for longer commands.",
            spelling.setting(Setting::ModeSlow),
            spelling.setting(Setting::Timeout),
            spelling.setting(Setting::OnTimeoutBackground)
        ),
        Notice::LinesNotShown {
            job,
            stream,
            offset,
            lines,
        } => format!(
            "{}: {lines} of the new lines are not shown; read them with: {}",
            stream_name(*stream),
            spelling.output_call(*job, *stream, *offset, *lines)
        ),
        Notice::StillRunning { job, waited_ms } => format!(
            "{job} is still running after waiting {} s. {}",
            waited_secs(*waited_ms),
            follow(*job, "wait again")
        ),
        Notice::Shutdown {} => "bashd is shutting down; the command was killed.".to_owned(),
        Notice::OwnersGone { session } => format!(
            "Every process that owned session {session} has exited, so its foreground command was killed."
        ),
        Notice::SessionEnded { session } => format!(
            "Session {session} ended (closed, or its linger time ran out), so the job was killed."
        ),
        Notice::StragglersKilled {} => "The command's shell exited while processes it started were still running; they were killed (sessions.on_straggler = \"kill\").".to_owned(),
        Notice::SpillIncomplete { path, error, .. } => {
            format!("Full output file may be incomplete: {path} ({error})")
        }
        Notice::SpillCapped {
            stream,
            path,
            cap_bytes,
            written_bytes,
            total_bytes,
        } => format!(
            "{}: full output truncated at {} (limits.max_spill_bytes): {path} holds the first {written_bytes} of {total_bytes} bytes.",
            stream_name(*stream),
            human_size(*cap_bytes)
        ),
        Notice::NoNewOutput { job, ended: false } => {
            format!("No new output from {job} since the last check.")
        }
        Notice::NoNewOutput { job, ended: true } => {
            format!("No new output from {job} since the last check; it has ended.")
        }
        Notice::AlreadyEnded { job } => format!(
            "{job} had already ended; nothing was killed. Its output: {}",
            spelling.job_call(JobCall::Output, *job)
        ),
        Notice::Denied { message, .. } => message.clone(),
        Notice::NotStarted { error } => error.clone(),
        Notice::LineCut {
            line,
            page_bytes,
            path,
        } => {
            let more = if *page_bytes < limits::MAX_PAGE_BYTES {
                format!(
                    "; pass {} (up to {}) to see more of it",
                    spelling.argument(Argument::MaxBytes),
                    limits::MAX_PAGE_BYTES
                )
            } else {
                String::new()
            };
            format!(
                "Line {line} is longer than the page ({page_bytes} bytes) and is cut here{more}; the whole line is in {}.",
                path.as_deref().unwrap_or("the output")
            )
        }
        Notice::SandboxDenied {
            profile,
            network,
            denied,
        } => sandbox_denied_text(*profile, *network, *denied, spelling),
        Notice::PageCapped {
            last_line,
            lost_lines,
        } => format!(
            "The full output file stopped at its size cap after line {last_line}; the {lost_lines} lines after it were not kept."
        ),
        Notice::OutputMissed {
            job,
            stream,
            offset,
            lines,
            path,
        } => {
            let file = path
                .as_deref()
                .map_or(String::new(), |p| format!(" (the file {p} has them)"));
            format!(
                "{}: {lines} line{} from line {offset} went by while this reader was behind and were not shown{file}; read them with: {}",
                stream_name(*stream),
                plural(*lines),
                spelling.output_call(*job, *stream, *offset, *lines)
            )
        }
        Notice::ConditionMet { job, met } => condition_text(*job, met),
        Notice::WaitingForInput {
            job,
            idle_secs,
            prompt,
        } => {
            let asks = prompt
                .as_deref()
                .map_or(String::new(), |prompt| format!(" It asks: {prompt:?}."));
            let quiet = match idle_secs {
                0 => String::new(),
                secs => format!(", printing nothing for {secs} s"),
            };
            format!(
                "{job} is waiting for input? It is blocked reading its stdin{quiet}.{asks} Answer it: {}; or stop it ({}) and pass the input another way (a file, a here-string, a flag such as --yes).",
                spelling.send_call(*job),
                spelling.job_call(JobCall::Kill, *job)
            )
        }
        Notice::Lost { job, in_memory } => {
            let mut text = format!(
                "bashd stopped while {job} ran, and the next bashd ended what was left of it (state lost). What it printed to its output files was kept: {}.",
                spelling.job_call(JobCall::Output, *job)
            );
            for stream in in_memory {
                text.push_str(&format!(
                    " {}: what it printed before bashd stopped was held in memory only and is lost.",
                    stream_name(*stream)
                ));
            }
            text
        }
        Notice::PageFull { max_bytes } => format!(
            "The page is full at {max_bytes} bytes; it holds whole lines only."
        ),
        Notice::OutsideRoots { workdir, roots } => format!(
            "This job ran read-only (it writes only its $TMPDIR): its working directory {workdir} is outside this session's writable roots ({}), which the person decides, never the request. To let it write, {}, or add the directory to [sandbox] writable in bashd's config.",
            roots.join(", "),
            spelling.inside_a_root()
        ),
        Notice::NoWritableRoot { directory } => {
            let why = match directory {
                Some(directory) => format!(
                    "its client runs in {directory}, and /, the home directory and its parents are never one"
                ),
                None => "bashd could not read the directory its client runs in".to_owned(),
            };
            format!(
                "This job ran read-only (it writes only its $TMPDIR): this session has no writable root, as {why}. To let it write, {}, or add the project's directory to [sandbox] writable in bashd's config.",
                spelling.start_in_project()
            )
        }
        Notice::TerminalWanted {} => format!(
            "The program wanted a terminal and ran without one (on pipes): run it again with {} to give it one.",
            spelling.again_with(&[Setting::Pty])
        ),
        Notice::Asked {
            ask,
            kind,
            expires_secs,
            ..
        } => format!(
            "This request ({kind}) is looser than the session's floor and waits for a person's yes as ask {ask}, for at most {expires_secs} s: {}.",
            spelling.answer_ask(*ask)
        ),
        Notice::MemoryAsAddressSpace { bytes } => format!(
            "Its memory limit of {} was set as an address-space limit (RLIMIT_AS), as no cgroup holds its memory here: it counts address space reserved, not memory used, so runtimes that reserve much at start (node, java, go) may fail under it. Run it without the memory limit, or give bashd a cgroup with the memory controller delegated ([containment] cgroup in its config, or systemd's Delegate=yes).",
            human_size(*bytes)
        ),
    }
}

/// The daemon's error `message` with what its `hint` says, in `spelling`.
pub fn error(message: &str, hint: Option<&ErrorHint>, spelling: &dyn Spelling) -> String {
    let Some(hint) = hint else {
        return message.to_owned();
    };
    let again = |settings: &[Setting]| spelling.again_with(settings);
    match hint {
        ErrorHint::JobIds => format!(
            "{message}: job ids look like j12, as `{}` and `{}` show them",
            spelling.call(Call::Exec),
            spelling.call(Call::Jobs)
        ),
        ErrorHint::NoSuchJob => format!(
            "{message}: `{}` lists this session's jobs",
            spelling.call(Call::Jobs)
        ),
        ErrorHint::JobPids => format!(
            "{message}: a job's pid is the pid of its shell, as `{}` shows it",
            spelling.call(Call::Jobs)
        ),
        ErrorHint::Sessions => match spelling.sessions_call() {
            Some(call) => format!("{message}: `{call}` lists the sessions bashd has"),
            None => format!("{message}: these tools act in this server's session only"),
        },
        ErrorHint::OtherSession { session } => match spelling.other_session(session) {
            Some(how) => format!("{message}: to act on it anyway, {how}"),
            None => format!(
                "{message}: these tools reach only this session's jobs, so leave it alone; {} lists this session's",
                spelling.call(Call::Jobs)
            ),
        },
        ErrorHint::BadArgument {
            argument: Argument::Timeout,
        } => spelling.bad_argument(
            Argument::Timeout,
            &format!("{message}{}", timeout_fix(spelling)),
        ),
        ErrorHint::BadArgument { argument } => spelling.bad_argument(*argument, message),
        ErrorHint::LooserSandbox {
            sandbox_off,
            network_on,
        } => {
            let mut settings = Vec::new();
            if *sandbox_off {
                settings.push(Setting::Sandbox(SandboxProfile::Off));
            }
            if *network_on {
                settings.push(Setting::Network(Network::On));
            }
            format!("{message}, or run the job with {}", again(&settings))
        }
        ErrorHint::NetworkOn => format!(
            "{message}, or run the job without {}",
            spelling.setting(Setting::Network(Network::On))
        ),
        ErrorHint::Ask {
            ask,
            state: bashc::protocol::AskState::Pending,
        } => format!("{message}: {}", spelling.answer_ask(*ask)),
        ErrorHint::Ask { .. } => message.to_owned(),
        ErrorHint::SameSandbox => format!(
            "{message}: leave out {} and {} to get the same",
            spelling.argument(Argument::Sandbox),
            spelling.argument(Argument::Network)
        ),
        ErrorHint::ControllerMissing { argument } => format!(
            "{message}, or run the job without {}",
            spelling.argument(*argument)
        ),
        ErrorHint::NeedsPty => format!(
            "{message}: run it with {} to see a screen",
            again(&[Setting::Pty])
        ),
        ErrorHint::NeedsStdinPipe => format!(
            "{message}; only a job started with {} or {} takes input",
            again(&[Setting::StdinPipe]),
            again(&[Setting::Pty])
        ),
        ErrorHint::StdinClosed => format!(
            "{message} by a send with {}; it reads no more",
            spelling.eof()
        ),
        ErrorHint::OutputKept { job } => format!(
            "{message}; its output is in `{}`",
            spelling.job_call(JobCall::Output, *job)
        ),
    }
}

/// A client error as one line in `spelling`: the daemon's message with its hint, or
/// the error itself.
pub fn client_error(e: &bashc::ClientError, spelling: &dyn Spelling) -> String {
    match e {
        bashc::ClientError::Daemon(reply) | bashc::ClientError::Refused(reply) => {
            error(&e.to_string(), reply.hint.as_ref(), spelling)
        }
        _ => e.to_string(),
    }
}

/// What follows a refused timeout: the mode for longer jobs.
pub fn timeout_fix(spelling: &dyn Spelling) -> String {
    format!(
        ", or use {} for jobs that run up to 24 h",
        spelling.setting(Setting::ModeBackground)
    )
}

/// That a job runs on in the background, and why; `how` says how to follow it.
fn background_text(
    job: JobId,
    pid: u32,
    why: BackgroundWhy,
    timeout_secs: Option<u64>,
    how: &str,
) -> String {
    match why {
        BackgroundWhy::Requested => {
            format!("Running in the background as {job} (pid {pid}). {how}")
        }
        BackgroundWhy::Timeout => {
            let timeout = timeout_secs.map_or(String::new(), |secs| format!(" of {secs} s"));
            format!(
                "The command passed its timeout{timeout} and moved to the background as {job} (pid {pid}); it keeps running. {how}"
            )
        }
        BackgroundWhy::Stragglers => format!(
            "The command's shell exited, but processes it started are still running; they stay in the background as {job}. {how}"
        ),
        BackgroundWhy::CallBudget => {
            let budget = timeout_secs.map_or(String::new(), |secs| format!(" of {secs} s"));
            format!(
                "The call reached its time budget{budget} (mcp.max_call_secs) and returned; the command keeps running in the background as {job} (pid {pid}) until it ends or reaches its own timeout. {how}"
            )
        }
        BackgroundWhy::Cancelled => format!(
            "The call was cancelled; the command keeps running in the background as {job} (pid {pid}). {how}"
        ),
    }
}

/// Which condition ended a wait, with the matching line and the lines around it.
fn condition_text(job: JobId, met: &WaitMet) -> String {
    match met {
        WaitMet::Line {
            stream,
            line,
            text,
            before,
            after,
        } => {
            let mut out = format!(
                "Condition met: {} line {line} of {job} matches:",
                stream_name(*stream)
            );
            let first = line.saturating_sub(before.len() as u64);
            for (i, context) in before.iter().enumerate() {
                let _ = write!(out, "\n  {}| {context}", first + i as u64);
            }
            let _ = write!(out, "\n> {line}| {text}");
            for (i, context) in after.iter().enumerate() {
                let _ = write!(out, "\n  {}| {context}", line + 1 + i as u64);
            }
            out
        }
        WaitMet::Port {
            port,
            pid,
            published: None,
        } => format!("Condition met: pid {pid} of {job} listens on TCP port {port}."),
        WaitMet::Port {
            port,
            pid,
            published: Some(host),
        } => format!(
            "Condition met: pid {pid} of {job} listens on TCP port {port} in its session's network, published on the host at 127.0.0.1:{host}."
        ),
        WaitMet::Idle { idle_ms } => format!(
            "Condition met: {job} printed nothing for {} s.",
            waited_secs(*idle_ms)
        ),
    }
}

/// What a failure that reads like a sandbox refusal means, and how to ask for more, in
/// `spelling`.
fn sandbox_denied_text(
    profile: SandboxProfile,
    network: Network,
    denied: SandboxDenial,
    spelling: &dyn Spelling,
) -> String {
    const LIKELY: &str = "so \"Permission denied\" or \"Read-only file system\" here is likely the sandbox, not a file permission";
    let off = spelling.again_with(&[Setting::Sandbox(SandboxProfile::Off)]);
    match denied {
        // `writable` widens workspace-write only: read-only ignores it, so the way to
        // write in the workdir is the next profile up.
        SandboxDenial::Files if profile == SandboxProfile::ReadOnly => format!(
            "This job ran in the sandbox (profile read-only: writes only in $TMPDIR; credential stores in [sandbox] deny_read are hidden), {LIKELY}. To let it write in its workdir, run it with {} if bashd's [sandbox] floor allows ({off} to write elsewhere too); [sandbox] writable in bashd's config adds paths for workspace-write jobs only, never for read-only ones.",
            spelling.again_with(&[Setting::Sandbox(SandboxProfile::WorkspaceWrite)])
        ),
        SandboxDenial::Files => format!(
            "This job ran in the sandbox (profile {profile}: writes only in the workdir, $TMPDIR and [sandbox] writable paths, never in .git; credential stores in [sandbox] deny_read are hidden), {LIKELY}. To allow more, run it with {off} if bashd's [sandbox] floor allows, or add the path to [sandbox] writable in bashd's config."
        ),
        // No profile but `off` and no `writable` path shows a hidden path: only
        // `deny_read` does.
        SandboxDenial::Read => format!(
            "This job ran in the sandbox (profile {profile}), which hides the paths of bashd's [sandbox] deny_read (credential stores: ~/.ssh, ~/.aws, ...) from every confined job, so \"Permission denied\" reading one is the sandbox, not a file permission. To let confined jobs read it, set [sandbox] deny_read in bashd's config to a list without it (bashd --check-config prints the list in force), or run it with {off} if bashd's [sandbox] floor allows."
        ),
        SandboxDenial::Network => format!(
            "This job ran with the network off (sandbox {profile}, network {network}): it reaches no other host, nor listeners on this host's loopback. To allow it, run it with {} if bashd's config allows.",
            spelling.again_with(&[Setting::Network(Network::On)])
        ),
    }
}

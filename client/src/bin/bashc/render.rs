//! The text forms of results (DESIGN §9), the CLI's words for notices and error hints,
//! and the exit status a result maps to. `bashc mcp` words notices and hints as tool
//! calls in `mcp/words.rs`, and shares the rest.

use std::fmt::Write;
use std::time::Duration;

use bashc::protocol::{
    BackgroundWhy, Direction, EndedBy, ErrorHint, ExecResult, ExitRecord, JobId, JobState, Killer,
    Network, Notice, OutputPage, PolicyVerdict, SandboxDenial, SandboxProfile, StatusInfo,
    StreamName, StreamResult, WaitMet,
};

const EXIT_TIMEOUT: u8 = 124;
const EXIT_DENIED: u8 = 126;
const EXIT_FAILED: u8 = 255;

/// The exit status `bashc` ends with for a result.
pub fn exit_status(result: &ExecResult) -> u8 {
    status_of(result.state, result.exit_code, result.signal)
}

/// The exit status of a job in `state`: what `exec`, `check`, `wait` and `kill` end
/// with and say, and what `bashc jobs` shows under EXIT, so that one job has one
/// number everywhere (143 for a job killed with SIGTERM).
pub fn status_of(state: JobState, exit_code: Option<i32>, signal: Option<i32>) -> u8 {
    let by_signal = signal.map(|n| 128u8.wrapping_add(n as u8));
    match state {
        // The shell's status, when processes it started run on.
        JobState::Running => exit_code.map_or(0, |c| c as u8),
        JobState::Exited => exit_code.map_or(EXIT_FAILED, |c| c as u8),
        JobState::TimedOut => EXIT_TIMEOUT,
        JobState::Denied => EXIT_DENIED,
        JobState::Signaled | JobState::Killed => by_signal
            .or(exit_code.map(|c| c as u8))
            .unwrap_or(EXIT_FAILED),
        JobState::Failed | JobState::Lost => EXIT_FAILED,
    }
}

/// What a front end says of a job whose daemon died while it ran; `read` is its way
/// to the job's kept output.
pub fn lost_text(job: JobId, in_memory: &[StreamName], read: &str) -> String {
    let mut text = format!(
        "bashd stopped while {job} ran, and the next bashd ended what was left of it (state lost). What it printed to its output files was kept: {read}."
    );
    for stream in in_memory {
        text.push_str(&format!(
            " {}: what it printed before bashd stopped was held in memory only and is lost.",
            stream_name(*stream)
        ));
    }
    text
}

/// The lines of a cut stream that its result does not show, as a page of `output`:
/// `limit` lines from line `offset` (counting from 1). A line shown cut counts as
/// unseen, since only a page shows it whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unseen {
    pub job: JobId,
    pub stream: StreamName,
    pub offset: u64,
    pub limit: u64,
}

impl Unseen {
    /// What `stream` of `job`'s result leaves out, from its figures: `None` when it
    /// shows everything. Only for a result whose streams count from their first line
    /// (not a check's, whose lines start at its cursor and whose notices say the rest).
    pub fn of(job: JobId, name: StreamName, stream: &StreamResult) -> Option<Unseen> {
        if !stream.truncated || stream.total_lines == 0 {
            return None;
        }
        let (total, shown) = (
            stream.total_lines,
            stream.shown_lines.min(stream.total_lines),
        );
        let hidden = total - shown;
        let partial = u64::from(stream.partial);
        let (offset, limit) = match stream.direction {
            // The last `shown` lines are shown; the first of them may be cut.
            Direction::Tail => (1, hidden + partial),
            // The first `shown` lines are shown; the last of them may be cut.
            Direction::Head => {
                let first = (shown + 1 - partial).max(1);
                (first, total - first + 1)
            }
            Direction::HeadTail => match head_lines(stream, hidden) {
                Some(head) => (head + 1, hidden),
                // A cut line at either end: its marker counts bytes, not lines.
                None => (1, total),
            },
        };
        (limit > 0).then_some(Unseen {
            job,
            stream: name,
            offset,
            limit,
        })
    }
}

/// How many lines a `head_tail` text shows before its `... [N lines omitted] ...`
/// marker, the one line the daemon puts between its two ends.
// FIXME: a `head_lines` figure in StreamResult would spare finding the marker; that
// takes a protocol version.
fn head_lines(stream: &StreamResult, hidden: u64) -> Option<u64> {
    if stream.partial {
        return None;
    }
    let marker = format!("... [{hidden} lines omitted] ...");
    let at = stream.text.lines().position(|line| line == marker)?;
    Some(at as u64)
}

/// `bashc output j3 --stream stderr --offset 1 --limit 8000`: the unseen lines in the
/// CLI's words (`--stream stdout` is the default, left out as in every notice).
pub fn output_command(unseen: &Unseen) -> String {
    let flag = match unseen.stream {
        StreamName::Stdout => "",
        StreamName::Stderr => " --stream stderr",
    };
    format!(
        "bashc output {}{flag} --offset {} --limit {}",
        unseen.job, unseen.offset, unseen.limit
    )
}

/// A job's result as `bashc exec`, `check`, `wait` and `kill` print it. `whole`: its
/// streams count from their first line, so a cut one names the command for the rest.
pub fn exec_text(result: &ExecResult, whole: bool) -> String {
    let rest = whole.then_some(output_command as fn(&Unseen) -> String);
    result_text(result, notices_text(&result.notices).as_deref(), rest)
}

/// A job's result with its notices worded as `notice`: its streams (the screen in
/// place of stdout when the program drew on its terminal), the notice, then its exit
/// code or state. Under a cut stream, `rest` words the call that shows what
/// is not shown (`None`: a check's result, whose notices say it).
pub fn result_text(
    result: &ExecResult,
    notice: Option<&str>,
    rest: Option<fn(&Unseen) -> String>,
) -> String {
    let mut out = result_body(result, notice, rest);
    let _ = writeln!(out, "{}", status_line(result));
    out.push_str(&record_lines(result));
    out
}

/// What a result shows before its status line: its streams (or screen) and notice.
pub fn result_body(
    result: &ExecResult,
    notice: Option<&str>,
    rest: Option<fn(&Unseen) -> String>,
) -> String {
    let mut out = String::new();
    let streams = [
        (StreamName::Stdout, Some(&result.stdout)),
        (StreamName::Stderr, result.stderr.as_ref()),
    ];
    for (name, stream) in streams {
        // A program that drew on its terminal reads right only as its screen.
        if let (StreamName::Stdout, Some(screen)) = (name, &result.screen) {
            let _ = writeln!(out, "screen:");
            out.push_str(&crate::terminal::screen_text(screen));
            out.push('\n');
            continue;
        }
        if let Some(stream) = stream.filter(|s| !s.text.is_empty()) {
            let unseen = rest
                .zip(Unseen::of(result.job, name, stream))
                .map(|(word, unseen)| word(&unseen));
            section(&mut out, stream_name(name), stream, unseen.as_deref());
        }
    }
    if let Some(notice) = notice {
        let _ = writeln!(out, "{notice}\n");
    }
    out
}

/// What follows a result's status line: its exit record and its sandbox, a line each.
pub fn record_lines(result: &ExecResult) -> String {
    let mut out = String::new();
    if let Some(line) = result
        .record
        .as_ref()
        .and_then(|r| record_line(r, result.duration_ms))
    {
        let _ = writeln!(out, "{line}");
    }
    if let Some(sandbox) = result.sandbox {
        let _ = writeln!(
            out,
            "sandbox: {}, network {}",
            sandbox.profile, sandbox.network
        );
    }
    out
}

/// The line that says how a job ended, or that it runs on: `exit code: 0`,
/// `running: j4 (pid 77), 3 s so far`.
pub fn status_line(result: &ExecResult) -> String {
    let code = exit_status(result);
    let pid = result
        .pid
        .map_or(String::new(), |pid| format!(" (pid {pid})"));
    match (result.state, result.signal) {
        (JobState::Running, _) if result.exit_code.is_some() => format!(
            "exit code: {code} (of the shell; {}{pid} runs on in the background)",
            result.job
        ),
        (JobState::Running, _) => format!(
            "running: {}{pid}, {} s so far",
            result.job,
            result.duration_ms / 1000
        ),
        (JobState::Exited, _) => format!("exit code: {code}"),
        (JobState::TimedOut, _) => format!("exit code: {code} (timed out)"),
        (_, Some(signal)) => format!(
            "exit code: {code} ({}, {})",
            result.state,
            signal_name(signal)
        ),
        (state, None) => format!("exit code: {code} ({state})"),
    }
}

/// What a failure that reads like a sandbox refusal means, and how to ask for more:
/// `looser` words asking for profile `off` and `workspace-write`, `network_on` asking
/// for the network, each in the front end's own terms.
pub fn sandbox_denied_text(
    profile: SandboxProfile,
    network: Network,
    denied: SandboxDenial,
    looser: [&str; 2],
    network_on: &str,
) -> String {
    const LIKELY: &str = "so \"Permission denied\" or \"Read-only file system\" here is likely the sandbox, not a file permission";
    match denied {
        // `writable` widens workspace-write only: read-only ignores it, so the way to
        // write in the workdir is the next profile up.
        SandboxDenial::Files if profile == SandboxProfile::ReadOnly => format!(
            "This job ran in the sandbox (profile read-only: writes only in $TMPDIR; credential stores in [sandbox] deny_read are hidden), {LIKELY}. To let it write in its workdir, run it with {} if bashd's [sandbox] floor allows ({} to write elsewhere too); [sandbox] writable in bashd's config adds paths for workspace-write jobs only, never for read-only ones.",
            looser[1], looser[0]
        ),
        SandboxDenial::Files => format!(
            "This job ran in the sandbox (profile {profile}: writes only in the workdir, $TMPDIR and [sandbox] writable paths, never in .git; credential stores in [sandbox] deny_read are hidden), {LIKELY}. To allow more, run it with {} if bashd's [sandbox] floor allows, or add the path to [sandbox] writable in bashd's config.",
            looser[0]
        ),
        // No profile but `off` and no `writable` path shows a hidden path: only
        // `deny_read` does.
        SandboxDenial::Read => format!(
            "This job ran in the sandbox (profile {profile}), which hides the paths of bashd's [sandbox] deny_read (credential stores: ~/.ssh, ~/.aws, ...) from every confined job, so \"Permission denied\" reading one is the sandbox, not a file permission. To let confined jobs read it, set [sandbox] deny_read in bashd's config to a list without it (bashd --check-config prints the list in force), or run it with {} if bashd's [sandbox] floor allows.",
            looser[0]
        ),
        SandboxDenial::Network => format!(
            "This job ran with the network off (sandbox {profile}, network {network}): it reaches no other host, nor listeners on this host's loopback. To allow it, run it with {network_on} if bashd's config allows."
        ),
    }
}

/// The exit record as one line, when it tells something the exit code does not: the
/// job ran a second or more, or something other than its own end or timeout ended it.
/// A quick command's result stays as short as before.
pub fn record_line(record: &ExitRecord, duration_ms: u64) -> Option<String> {
    let ended = match (record.ended_by, record.killed_by) {
        (EndedBy::Exit | EndedBy::Signal | EndedBy::Timeout | EndedBy::NotRun, _) => None,
        (EndedBy::Kill, Some(Killer::Agent)) => Some("killed on request".to_owned()),
        (EndedBy::Kill, Some(Killer::Client)) => {
            Some("killed by a client of another session".to_owned())
        }
        (EndedBy::Kill, Some(Killer::Shutdown) | None) => {
            Some("killed as bashd shut down".to_owned())
        }
        (EndedBy::Cancel, _) => Some("killed: its caller went away".to_owned()),
        (EndedBy::OwnerGone, _) => Some("killed: its session's owners exited".to_owned()),
        (EndedBy::SessionClosed, _) => Some("killed: its session ended".to_owned()),
        (EndedBy::DaemonRestart, _) => Some("ended when bashd restarted".to_owned()),
        (EndedBy::Limit, _) => Some(format!(
            "killed at its limit ({})",
            record.limit.as_deref().unwrap_or("a limit")
        )),
        (EndedBy::Oom, _) => Some("killed by the kernel for want of memory".to_owned()),
    };
    if ended.is_none() && duration_ms < 1000 {
        return None;
    }
    let mut parts = Vec::new();
    if let (Some(user), Some(system)) = (record.cpu_user_ms, record.cpu_system_ms) {
        parts.push(format!(
            "{:.2} s CPU ({:.2} user, {:.2} system)",
            (user + system) as f64 / 1000.0,
            user as f64 / 1000.0,
            system as f64 / 1000.0
        ));
    }
    if let Some(peak) = record.peak_rss_bytes {
        parts.push(format!(
            "peak memory {:.1} MiB",
            peak as f64 / (1 << 20) as f64
        ));
    }
    parts.extend(ended);
    (!parts.is_empty()).then(|| format!("used: {}", parts.join(", ")))
}

/// One stream: its text, a note when it is cut (what is shown, the call for the rest,
/// the file that holds it whole), and one blank line.
fn section(out: &mut String, name: &str, stream: &StreamResult, rest: Option<&str>) {
    let _ = writeln!(out, "{name}:");
    out.push_str(&stream.text);
    if !stream.text.ends_with('\n') {
        out.push('\n');
    }
    if stream.truncated {
        let _ = write!(out, "[{name}: showing {}", shown_part(stream));
        if let Some(rest) = rest {
            let _ = write!(out, ". The rest: {rest}");
        }
        if let Some(path) = &stream.full_output {
            let _ = write!(out, ". Full output: {path}");
        }
        out.push_str("]\n");
    }
    out.push('\n');
}

/// `last 2000 of 8500 lines`, and the like, for the notice under a cut stream.
fn shown_part(stream: &StreamResult) -> String {
    let total = stream.total_lines;
    if stream.partial && stream.shown_lines <= 1 {
        let which = match stream.direction {
            Direction::Head => "first",
            _ => "last",
        };
        return format!(
            "{which} {} of {} bytes of a single long line",
            stream.shown_bytes, stream.total_bytes
        );
    }
    let partial = if stream.partial {
        ", one of them cut"
    } else {
        ""
    };
    match stream.direction {
        Direction::Tail => format!("last {} of {total} lines{partial}", stream.shown_lines),
        Direction::Head => format!("first {} of {total} lines{partial}", stream.shown_lines),
        Direction::HeadTail => format!(
            "{} of {total} lines, from the start and the end{partial}",
            stream.shown_lines
        ),
    }
}

/// The notices of a result or page as one text, a line each in their order; `None`
/// when there are none. `--json` shows it as `notice`.
pub fn notices_text(notices: &[Notice]) -> Option<String> {
    join_notices(notices, notice_text)
}

/// Notices worded by `word`, a line each; `None` when there are none.
pub fn join_notices(notices: &[Notice], word: fn(&Notice) -> String) -> Option<String> {
    (!notices.is_empty()).then(|| notices.iter().map(word).collect::<Vec<_>>().join("\n"))
}

/// A notice as the CLI says it, naming the `bashc` commands that act on it.
pub fn notice_text(notice: &Notice) -> String {
    match notice {
        Notice::Background {
            job,
            pid,
            why,
            timeout_secs,
        } => {
            let how = format!(
                "New output: bashc check {job}; wait for it: bashc wait {job}; stop it: bashc kill {job}."
            );
            background_text(*job, *pid, *why, *timeout_secs, &how)
        }
        Notice::TimedOut { after_secs } => format!(
            "Command timed out after {after_secs} s and was killed with every process it started. Use --mode slow, --timeout SECS or --on-timeout background for longer commands."
        ),
        Notice::LinesNotShown {
            job,
            stream,
            offset,
            lines,
        } => {
            let flag = match stream {
                StreamName::Stdout => "",
                StreamName::Stderr => " --stream stderr",
            };
            format!(
                "{}: {lines} of the new lines are not shown; read them with: bashc output {job}{flag} --offset {offset} --limit {lines}",
                stream_name(*stream)
            )
        }
        Notice::StillRunning { job, waited_ms } => format!(
            "{job} is still running after waiting {} s. New output: bashc check {job}; wait again: bashc wait {job}; stop it: bashc kill {job}.",
            waited_secs(*waited_ms)
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
        Notice::AlreadyEnded { job } => format!("{job} had already ended; nothing was killed."),
        Notice::Denied { message, .. } => message.clone(),
        Notice::NotStarted { error } => error.clone(),
        Notice::LineCut {
            line,
            page_bytes,
            path,
        } => format!(
            "Line {line} is longer than {} KiB and is cut here; the whole line is in {}.",
            page_bytes / 1024,
            path.as_deref().unwrap_or("the output")
        ),
        Notice::SandboxDenied {
            profile,
            network,
            denied,
        } => sandbox_denied_text(
            *profile,
            *network,
            *denied,
            ["--sandbox off", "--sandbox workspace-write"],
            "--net on",
        ),
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
            let flag = match stream {
                StreamName::Stdout => "",
                StreamName::Stderr => " --stream stderr",
            };
            missed_text(
                *stream,
                *offset,
                *lines,
                path.as_deref(),
                &format!("bashc output {job}{flag} --offset {offset} --limit {lines}"),
            )
        }
        Notice::ConditionMet { job, met } => condition_text(*job, met),
        Notice::WaitingForInput {
            job,
            idle_secs,
            prompt,
        } => waiting_text(
            *job,
            *idle_secs,
            prompt.as_deref(),
            &format!("bashc send {job} TEXT --newline (or --eof to close it)"),
            &format!("bashc kill {job}"),
        ),
        Notice::Lost { job, in_memory } => lost_text(*job, in_memory, &format!("bashc output {job}")),
        Notice::PageFull { max_bytes } => format!(
            "The page is full at {max_bytes} bytes; it holds whole lines only."
        ),
        Notice::TerminalWanted {} => terminal_wanted_text("--pty"),
    }
}

/// That the program asked for a terminal and had none; `pty` is how to give it one.
pub fn terminal_wanted_text(pty: &str) -> String {
    format!(
        "The program wanted a terminal and ran without one (on pipes): run it again with {pty} to give it one."
    )
}

/// That a live reader missed lines, and where they are; `read` is the command that
/// shows them.
pub fn missed_text(
    stream: StreamName,
    offset: u64,
    lines: u64,
    path: Option<&str>,
    read: &str,
) -> String {
    let file = path.map_or(String::new(), |p| format!(" (the file {p} has them)"));
    format!(
        "{}: {lines} line{} from line {offset} went by while this reader was behind and were not shown{file}; read them with: {read}",
        stream_name(stream),
        plural(lines)
    )
}

/// Which condition ended a wait, with the matching line and the lines around it.
pub fn condition_text(job: JobId, met: &WaitMet) -> String {
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
        WaitMet::Port { port, pid } => {
            format!("Condition met: pid {pid} of {job} listens on TCP port {port}.")
        }
        WaitMet::Idle { idle_ms } => format!(
            "Condition met: {job} printed nothing for {} s.",
            waited_secs(*idle_ms)
        ),
    }
}

/// That a job seems to wait for input; `send` and `kill` say how to answer or end it.
pub fn waiting_text(
    job: JobId,
    idle_secs: u64,
    prompt: Option<&str>,
    send: &str,
    kill: &str,
) -> String {
    let asks = prompt.map_or(String::new(), |prompt| format!(" It asks: {prompt:?}."));
    let quiet = match idle_secs {
        0 => String::new(),
        secs => format!(", printing nothing for {secs} s"),
    };
    format!(
        "{job} is waiting for input? It is blocked reading its stdin{quiet}.{asks} Answer it: {send}; or stop it ({kill}) and pass the input another way (a file, a here-string, a flag such as --yes)."
    )
}

/// That a job runs on in the background, and why; `how` says how to follow it.
pub fn background_text(
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

/// How long a wait waited, in seconds, as exactly as it was measured (`0.2`, `1.5`).
pub fn waited_secs(waited_ms: u64) -> f64 {
    Duration::from_millis(waited_ms).as_secs_f64()
}

/// What the CLI adds to an error the daemon gave a hint for.
pub fn hint_text(hint: &ErrorHint) -> String {
    match hint {
        ErrorHint::JobIds => {
            "job ids look like j12, as `bashc exec` and `bashc jobs` show them".to_owned()
        }
        ErrorHint::JobPids => {
            "--pid takes the pid of a job's shell, as `bashc jobs` shows it".to_owned()
        }
        ErrorHint::Sessions => "`bashc sessions` lists the sessions bashd has".to_owned(),
        ErrorHint::OtherSession { session } => format!(
            "to act on it anyway, add --session {session}, or --any-session; `bashc jobs --all` lists every session's jobs"
        ),
    }
}

/// `bashc output j3 --stream stderr --offset 86`: the next page, in the CLI's words.
pub fn output_page_command(job: JobId, stream: StreamName, offset: u64) -> String {
    let flag = match stream {
        StreamName::Stdout => "",
        StreamName::Stderr => " --stream stderr",
    };
    format!("bashc output {job}{flag} --offset {offset}")
}

/// What a page that is not the stream's last says: the range shown, the stream's
/// lines, and the call for the next page, worded by `next`. `None` at the end.
pub fn page_next(page: &OutputPage, next: fn(JobId, StreamName, u64) -> String) -> Option<String> {
    let next_offset = page.next_offset?;
    let range = match page.lines {
        0 => "no lines".to_owned(),
        1 => format!("line {}", page.offset),
        n => format!("lines {}-{}", page.offset, page.offset + n - 1),
    };
    let so_far = if page.complete { "" } else { " so far" };
    Some(format!(
        "{range} of {}{so_far} shown; next page: {}",
        page.total_lines,
        next(page.job, page.stream, next_offset)
    ))
}

pub fn stream_name(stream: StreamName) -> &'static str {
    match stream {
        StreamName::Stdout => "stdout",
        StreamName::Stderr => "stderr",
    }
}

/// `100 MiB` for a whole number of mebibytes, else the number of bytes.
fn human_size(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// What `bashc output` says on stderr of a page that holds no line: where the output
/// is when the stream is empty (`other` is the other stream's page, when there is
/// one), or that the offset is past the end.
pub fn empty_page_note(page: &OutputPage, other: Option<&OutputPage>) -> Option<String> {
    if page.lines > 0 {
        return None;
    }
    let (job, name) = (page.job, stream_name(page.stream));
    if page.total_lines > 0 {
        return (page.offset > page.total_lines).then(|| {
            format!(
                "{job}'s {name} has {} line{}; --offset {} is past its end",
                page.total_lines,
                plural(page.total_lines),
                page.offset
            )
        });
    }
    Some(match other {
        Some(other) if other.total_lines > 0 => {
            let flag = match other.stream {
                StreamName::Stdout => "",
                StreamName::Stderr => " --stream stderr",
            };
            format!(
                "{job}'s {name} is empty; its {} has {} line{}: bashc output {job}{flag}",
                stream_name(other.stream),
                other.total_lines,
                plural(other.total_lines)
            )
        }
        Some(other) => format!(
            "{job}'s {name} is empty, and so is its {}",
            stream_name(other.stream)
        ),
        None => format!("{job}'s {name} is empty"),
    })
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `bashc output` prints the lines and nothing else, ending with a newline.
pub fn page_text(page: &OutputPage) -> String {
    let mut text = page.text.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

pub fn policy_text(verdict: &PolicyVerdict) -> String {
    match &verdict.message {
        Some(message) => format!("{message}\n"),
        None => "allowed\n".to_owned(),
    }
}

pub fn status_text(status: &StatusInfo) -> String {
    let limit = status
        .open_files_limit
        .map_or("no limit".to_owned(), |l| l.to_string());
    let mut text = format!(
        "bashd {} (protocol {}), pid {}, up {} s\nruntime dir: {}\nrunning jobs: {}\ncontainment: {}\nopen files: {} of {limit}\n",
        status.daemon_version,
        status.protocol,
        status.daemon_pid,
        status.uptime_ms / 1000,
        status.runtime_dir,
        status.running_jobs,
        status.containment,
        status.open_files,
    );
    if let Some(sandbox) = &status.sandbox {
        let _ = writeln!(
            text,
            "sandbox: {}, network {} by default; floor {}",
            sandbox.default.profile, sandbox.default.network, sandbox.floor
        );
        for mechanism in &sandbox.mechanisms {
            let state = if mechanism.available {
                "available"
            } else {
                "missing"
            };
            let detail = if mechanism.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", mechanism.detail)
            };
            let _ = writeln!(text, "  {}: {state}{detail}", mechanism.name);
            if !mechanism.closes.is_empty() {
                let _ = writeln!(text, "    closes: {}", mechanism.closes.join("; "));
            }
        }
    }
    text
}

pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return format!("signal {signal}"),
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use bashc::protocol::{ErrorHint, Worded};

    use super::*;

    fn job() -> JobId {
        JobId(12)
    }

    /// The sentences the daemon said before notices were data, byte for byte.
    #[test]
    fn notices_read_as_they_did_when_the_daemon_worded_them() {
        let how =
            "New output: bashc check j12; wait for it: bashc wait j12; stop it: bashc kill j12.";
        let background = |why, timeout_secs| Notice::Background {
            job: job(),
            pid: 4242,
            why,
            timeout_secs,
        };
        let path = "/r/sessions/s/j12.stdout".to_owned();
        let cases = [
            (
                background(BackgroundWhy::Requested, None),
                format!("Running in the background as j12 (pid 4242). {how}"),
            ),
            (
                background(BackgroundWhy::Timeout, Some(30)),
                format!(
                    "The command passed its timeout of 30 s and moved to the background as j12 (pid 4242); it keeps running. {how}"
                ),
            ),
            (
                background(BackgroundWhy::Stragglers, None),
                format!(
                    "The command's shell exited, but processes it started are still running; they stay in the background as j12. {how}"
                ),
            ),
            (
                Notice::TimedOut { after_secs: 2 },
                "Command timed out after 2 s and was killed with every process it started. Use --mode slow, --timeout SECS or --on-timeout background for longer commands.".to_owned(),
            ),
            (
                Notice::Shutdown {},
                "bashd is shutting down; the command was killed.".to_owned(),
            ),
            (
                Notice::OwnersGone {
                    session: "s".to_owned(),
                },
                "Every process that owned session s has exited, so its foreground command was killed.".to_owned(),
            ),
            (
                Notice::SessionEnded {
                    session: "s".to_owned(),
                },
                "Session s ended (closed, or its linger time ran out), so the job was killed.".to_owned(),
            ),
            (
                Notice::StragglersKilled {},
                "The command's shell exited while processes it started were still running; they were killed (sessions.on_straggler = \"kill\").".to_owned(),
            ),
            (
                Notice::SpillIncomplete {
                    stream: StreamName::Stdout,
                    path: path.clone(),
                    error: "No space left on device".to_owned(),
                },
                format!("Full output file may be incomplete: {path} (No space left on device)"),
            ),
            (
                Notice::SpillCapped {
                    stream: StreamName::Stderr,
                    path: path.clone(),
                    cap_bytes: 100 << 20,
                    written_bytes: 100 << 20,
                    total_bytes: 200 << 20,
                },
                format!(
                    "stderr: full output truncated at 100 MiB (limits.max_spill_bytes): {path} holds the first 104857600 of 209715200 bytes."
                ),
            ),
            (
                Notice::SpillCapped {
                    stream: StreamName::Stdout,
                    path: path.clone(),
                    cap_bytes: 1000,
                    written_bytes: 1000,
                    total_bytes: 5000,
                },
                format!(
                    "stdout: full output truncated at 1000 bytes (limits.max_spill_bytes): {path} holds the first 1000 of 5000 bytes."
                ),
            ),
            (
                Notice::LinesNotShown {
                    job: job(),
                    stream: StreamName::Stdout,
                    offset: 3,
                    lines: 7,
                },
                "stdout: 7 of the new lines are not shown; read them with: bashc output j12 --offset 3 --limit 7".to_owned(),
            ),
            (
                Notice::LinesNotShown {
                    job: job(),
                    stream: StreamName::Stderr,
                    offset: 3,
                    lines: 7,
                },
                "stderr: 7 of the new lines are not shown; read them with: bashc output j12 --stream stderr --offset 3 --limit 7".to_owned(),
            ),
            (
                Notice::NoNewOutput {
                    job: job(),
                    ended: false,
                },
                "No new output from j12 since the last check.".to_owned(),
            ),
            (
                Notice::NoNewOutput {
                    job: job(),
                    ended: true,
                },
                "No new output from j12 since the last check; it has ended.".to_owned(),
            ),
            (
                Notice::StillRunning {
                    job: job(),
                    waited_ms: 1500,
                },
                "j12 is still running after waiting 1.5 s. New output: bashc check j12; wait again: bashc wait j12; stop it: bashc kill j12.".to_owned(),
            ),
            (
                Notice::AlreadyEnded { job: job() },
                "j12 had already ended; nothing was killed.".to_owned(),
            ),
            (
                Notice::Denied {
                    rule: "git-add-blind".to_owned(),
                    message: "permission denied: git-add-blind: stage paths by name".to_owned(),
                },
                "permission denied: git-add-blind: stage paths by name".to_owned(),
            ),
            (
                Notice::NotStarted {
                    error: "Working directory does not exist: /nope".to_owned(),
                },
                "Working directory does not exist: /nope".to_owned(),
            ),
            (
                Notice::LineCut {
                    line: 4,
                    page_bytes: 1 << 20,
                    path: None,
                },
                "Line 4 is longer than 1024 KiB and is cut here; the whole line is in the output.".to_owned(),
            ),
            (
                Notice::PageCapped {
                    last_line: 9,
                    lost_lines: 4,
                },
                "The full output file stopped at its size cap after line 9; the 4 lines after it were not kept.".to_owned(),
            ),
        ];
        for (notice, words) in cases {
            assert_eq!(notice_text(&notice), words);
        }
        assert_eq!(
            hint_text(&ErrorHint::JobIds),
            "job ids look like j12, as `bashc exec` and `bashc jobs` show them"
        );
    }

    /// Issue 24: the call under a cut stream names exactly the lines it leaves out.
    #[test]
    fn the_unseen_part_of_a_cut_stream_follows_from_its_figures() {
        let cut = |direction, total_lines, shown_lines, partial, text: &str| StreamResult {
            text: text.to_owned(),
            truncated: true,
            direction,
            total_lines,
            shown_lines,
            partial,
            ..StreamResult::empty()
        };
        let unseen = |stream: &StreamResult| {
            Unseen::of(job(), StreamName::Stderr, stream).map(|u| output_command(&u))
        };
        let cases = [
            (
                cut(Direction::Tail, 8500, 2000, false, ""),
                "--offset 1 --limit 6500",
            ),
            (
                cut(Direction::Head, 8500, 2000, false, ""),
                "--offset 2001 --limit 6500",
            ),
            // The line shown cut is unseen too: only a page shows it whole.
            (cut(Direction::Tail, 1, 1, true, ""), "--offset 1 --limit 1"),
            (
                cut(Direction::Tail, 10, 3, true, ""),
                "--offset 1 --limit 8",
            ),
            (
                cut(Direction::Head, 10, 3, true, ""),
                "--offset 3 --limit 8",
            ),
            (
                cut(
                    Direction::HeadTail,
                    10,
                    4,
                    false,
                    "1\n2\n... [6 lines omitted] ...\n9\n10\n",
                ),
                "--offset 3 --limit 6",
            ),
            // A marker that counts bytes: the whole stream.
            (
                cut(
                    Direction::HeadTail,
                    10,
                    2,
                    true,
                    "1\n... [99 bytes omitted] ...\n10",
                ),
                "--offset 1 --limit 10",
            ),
        ];
        for (stream, range) in cases {
            assert_eq!(
                unseen(&stream),
                Some(format!("bashc output j12 --stream stderr {range}")),
                "{stream:?}"
            );
        }
        let whole = StreamResult {
            total_lines: 3,
            shown_lines: 3,
            ..StreamResult::empty()
        };
        assert_eq!(unseen(&whole), None);
    }

    #[test]
    fn json_keeps_the_worded_notice_last_beside_the_notices() {
        let notices = vec![Notice::Shutdown {}, Notice::AlreadyEnded { job: job() }];
        let notice = notices_text(&notices);
        assert_eq!(
            notice.as_deref(),
            Some(
                "bashd is shutting down; the command was killed.\nj12 had already ended; nothing was killed."
            )
        );
        assert_eq!(notices_text(&[]), None);
        let page = OutputPage {
            job: job(),
            stream: StreamName::Stdout,
            offset: 1,
            lines: 0,
            text: String::new(),
            next_offset: None,
            total_lines: 0,
            total_bytes: 0,
            complete: true,
            full_output: None,
            notices,
        };
        // As `--json` prints it: in field order (a `Value` would sort the keys).
        let text = serde_json::to_string(&Worded {
            value: &page,
            notice,
        })
        .unwrap();
        assert!(
            text.starts_with("{\"job\":\"j12\",")
                && text.ends_with(",\"notice\":\"bashd is shutting down; the command was killed.\\nj12 had already ended; nothing was killed.\"}"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["job"], "j12");
        assert_eq!(json["notices"][0], serde_json::json!({"shutdown": {}}));
    }
}

//! The text forms of results (DESIGN §9) and the exit status a result maps to. Notices
//! and error hints become words in `wording.rs`, in the CLI's spelling or `bashc mcp`'s.
//!
//! Over 600 lines with its unit tests, which sit at its end; the code is about 475.

use std::fmt::Write;
use std::time::Duration;

use bashc::protocol::{
    Direction, EndedBy, ExecResult, ExitRecord, FrontEnd, JobId, JobState, Killer, Notice,
    OutputPage, PolicyVerdict, SandboxInForce, SandboxProfile, SandboxStatus, SettingFrom,
    StatusInfo, StreamName, StreamResult,
};

use crate::wording;

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

/// A job's result as `bashc exec`, `check`, `wait` and `kill` print it. `whole`: its
/// streams count from their first line, so a cut one names the command for the rest.
pub fn exec_text(result: &ExecResult, whole: bool) -> String {
    result_text(result, &wording::Cli, whole)
}

/// The notices of a result or page as the CLI says them, a line each in their order;
/// `None` when there are none. `--json` shows it as `notice`.
pub fn notices_text(notices: &[Notice]) -> Option<String> {
    wording::notices(notices, &wording::Cli)
}

/// A notice as the CLI says it, naming the `bashc` commands that act on it.
pub fn notice_text(notice: &Notice) -> String {
    wording::notice(notice, &wording::Cli)
}

/// A job's result in `spelling`: its streams (the screen in place of stdout when the
/// program drew on its terminal), its notices, then its exit code or state. `whole`:
/// its streams count from their first line, so under a cut one the call that shows
/// what is not shown is named (a check's result is not whole: its notices say it).
pub fn result_text(result: &ExecResult, spelling: &dyn wording::Spelling, whole: bool) -> String {
    let mut out = result_body(result, spelling, whole);
    let _ = writeln!(out, "{}", status_line(result));
    out.push_str(&record_lines(result));
    out
}

/// What a result shows before its status line: its streams (or screen) and notices.
pub fn result_body(result: &ExecResult, spelling: &dyn wording::Spelling, whole: bool) -> String {
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
            let unseen = Unseen::of(result.job, name, stream)
                .filter(|_| whole)
                .map(|u| spelling.output_call(u.job, u.stream, u.offset, u.limit));
            section(&mut out, stream_name(name), stream, unseen.as_deref());
        }
    }
    if let Some(notice) = wording::notices(&result.notices, spelling) {
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

/// How long a wait waited, in seconds, as exactly as it was measured (`0.2`, `1.5`).
pub fn waited_secs(waited_ms: u64) -> f64 {
    Duration::from_millis(waited_ms).as_secs_f64()
}

/// `bashc output j3 --stream stderr --offset 86`: the next page, in the CLI's words.
pub fn output_page_command(job: JobId, stream: StreamName, offset: u64) -> String {
    use wording::Spelling;
    wording::Cli.page_call(job, stream, offset)
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
pub fn human_size(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

pub fn plural(n: u64) -> &'static str {
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

/// The sandbox each front end's jobs get when a request names none, and where each
/// setting came from (issue 44): one line when every front end gets the same.
fn front_ends_text(sandbox: &SandboxStatus) -> String {
    let line = |default: &SandboxInForce, floor: SandboxProfile| {
        format!(
            "{}, network {} by default; floor {}",
            default.profile, default.network, floor
        )
    };
    let fronts = &sandbox.front_ends;
    let same = fronts
        .windows(2)
        .all(|w| w[0].default == w[1].default && w[0].floor == w[1].floor);
    if fronts.is_empty() || same {
        let all_written = fronts.iter().all(|f| {
            [f.default_from, f.network_from, f.floor_from]
                .iter()
                .all(|from| *from == SettingFrom::File)
        });
        let from = if fronts.is_empty() {
            ""
        } else if all_written {
            " (bashd's config, for bashc and bashc mcp alike)"
        } else {
            " (for bashc and bashc mcp alike)"
        };
        return format!("sandbox: {}{from}\n", line(&sandbox.default, sandbox.floor));
    }
    let mut text = "sandbox by front end (what a request that names none gets):\n".to_owned();
    for front in fronts {
        let (name, own) = match front.front_end {
            FrontEnd::Mcp => ("bashc mcp (agents)", "bashc mcp's default"),
            FrontEnd::Cli => ("bashc (command line)", "the command line's default"),
        };
        let mut written = Vec::new();
        let mut unset = Vec::new();
        let mut follows = Vec::new();
        for (key, from) in [
            ("default", front.default_from),
            ("network", front.network_from),
            ("floor", front.floor_from),
        ] {
            match from {
                SettingFrom::File => written.push(key),
                SettingFrom::FrontEnd => unset.push(key),
                SettingFrom::Follows => follows.push(key),
            }
        }
        let mut whence = Vec::new();
        if !unset.is_empty() {
            whence.push(format!("{own} for {}", unset.join(", ")));
        }
        if !written.is_empty() {
            whence.push(format!("bashd's config for {}", written.join(", ")));
        }
        if !follows.is_empty() {
            whence.push(format!(
                "{} unset, so it follows the key written",
                follows.join(", ")
            ));
        }
        let _ = writeln!(
            text,
            "  {name}: {} ({})",
            line(&front.default, front.floor),
            whence.join("; ")
        );
    }
    // What follows is the system's, for every front end alike.
    text.push_str("sandbox mechanisms:\n");
    text
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
        match &status.containment_why {
            Some(why) => format!("{} ({why})", status.containment),
            None => status.containment.clone(),
        },
        status.open_files,
    );
    if let Some(sandbox) = &status.sandbox {
        text.push_str(&front_ends_text(sandbox));
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
    if let Some(network) = &status.network {
        let hosts = match network.allow_hosts.as_slice() {
            [] => "(empty: an allow-list job reaches no host)".to_owned(),
            hosts => hosts.join(", "),
        };
        let proxy = &network.proxy;
        // The network each front end's jobs get is on the sandbox's lines; here
        // only when they all get the same (a daemon older than front ends says one).
        let fronts = status.sandbox.as_ref().map(|s| &s.front_ends[..]);
        let mode = match fronts.unwrap_or_default() {
            [] => format!("{} by default", network.mode),
            [first, rest @ ..]
                if rest
                    .iter()
                    .all(|f| f.default.network == first.default.network) =>
            {
                format!("{} by default", first.default.network)
            }
            _ => "by front end, as above".to_owned(),
        };
        let _ = write!(
            text,
            "network: {mode}\n  allow-list: {hosts}\n    from {}\n  proxy: in bashd, {} session{} served, {} connection{} open (at most {}, {} per session), {} refused, {} over the limit\n",
            network.allow_hosts_origin,
            proxy.sessions,
            plural(proxy.sessions.into()),
            proxy.connections,
            plural(proxy.connections.into()),
            proxy.max_connections,
            proxy.max_session_connections,
            proxy.refused,
            proxy.busy,
        );
    }
    // Where the allow-list's hosts come from beside `allow_hosts` (issue 44).
    if !status.tool_sources.is_empty() {
        let _ = writeln!(text, "your tools fetch from:");
        let width = status
            .tool_sources
            .iter()
            .map(|s| s.entry.chars().count())
            .max()
            .unwrap_or(0);
        for source in &status.tool_sources {
            let _ = writeln!(text, "  {:width$}  from {}", source.entry, source.origin);
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
    use bashc::protocol::{BackgroundWhy, ErrorHint, Worded};

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
                "j12 had already ended; nothing was killed. Its output: bashc output j12".to_owned(),
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
                // Issue 31: in the words `bashc mcp` has always used, one sentence for both.
                "Line 4 is longer than the page (1048576 bytes) and is cut here; the whole line is in the output.".to_owned(),
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
            wording::error("no job j99", Some(&ErrorHint::JobIds), &wording::Cli),
            "no job j99: job ids look like j12, as `bashc exec` and `bashc jobs` show them"
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
            Unseen::of(job(), StreamName::Stderr, stream).map(|u| {
                wording::Spelling::output_call(&wording::Cli, u.job, u.stream, u.offset, u.limit)
            })
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
                "bashd is shutting down; the command was killed.\nj12 had already ended; nothing was killed. Its output: bashc output j12"
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
                && text.ends_with(",\"notice\":\"bashd is shutting down; the command was killed.\\nj12 had already ended; nothing was killed. Its output: bashc output j12\"}"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["job"], "j12");
        assert_eq!(json["notices"][0], serde_json::json!({"shutdown": {}}));
    }
}

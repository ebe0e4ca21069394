//! The text forms of results (DESIGN §9) and the exit status a result maps to.

use std::fmt::Write;

use bashc::protocol::{
    Direction, ExecResult, JobState, OutputPage, PolicyVerdict, StatusInfo, StreamResult,
};

const EXIT_TIMEOUT: u8 = 124;
const EXIT_DENIED: u8 = 126;
const EXIT_FAILED: u8 = 255;

/// The exit status `bashc` ends with for a result.
pub fn exit_status(result: &ExecResult) -> u8 {
    let by_signal = result.signal.map(|n| 128u8.wrapping_add(n as u8));
    match result.state {
        JobState::Running => 0,
        JobState::Exited => result.exit_code.map_or(EXIT_FAILED, |c| c as u8),
        JobState::TimedOut => EXIT_TIMEOUT,
        JobState::Denied => EXIT_DENIED,
        JobState::Signaled | JobState::Killed => by_signal
            .or(result.exit_code.map(|c| c as u8))
            .unwrap_or(EXIT_FAILED),
        JobState::Failed => EXIT_FAILED,
    }
}

pub fn exec_text(result: &ExecResult) -> String {
    let mut out = String::new();
    let streams = [
        ("stdout", Some(&result.stdout)),
        ("stderr", result.stderr.as_ref()),
    ];
    for (name, stream) in streams {
        if let Some(stream) = stream.filter(|s| !s.text.is_empty()) {
            section(&mut out, name, stream);
        }
    }
    if let Some(notice) = &result.notice {
        let _ = writeln!(out, "{notice}\n");
    }
    let code = exit_status(result);
    let _ = match (result.state, result.signal) {
        (JobState::Exited, _) => writeln!(out, "exit code: {code}"),
        (JobState::TimedOut, _) => writeln!(out, "exit code: {code} (timed out)"),
        (_, Some(signal)) => writeln!(
            out,
            "exit code: {code} ({}, {})",
            result.state,
            signal_name(signal)
        ),
        (state, None) => writeln!(out, "exit code: {code} ({state})"),
    };
    out
}

fn section(out: &mut String, name: &str, stream: &StreamResult) {
    let _ = writeln!(out, "{name}:");
    out.push_str(&stream.text);
    if !stream.text.ends_with('\n') {
        out.push('\n');
    }
    if stream.truncated {
        let _ = write!(out, "[{name}: showing {}", shown_part(stream));
        match &stream.full_output {
            Some(path) => {
                let _ = writeln!(out, ". Full output: {path}]");
            }
            None => out.push_str("]\n"),
        }
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
    format!(
        "bashd {} (protocol {}), pid {}, up {} s\nruntime dir: {}\nrunning jobs: {}\n",
        status.daemon_version,
        status.protocol,
        status.daemon_pid,
        status.uptime_ms / 1000,
        status.runtime_dir,
        status.running_jobs
    )
}

fn signal_name(signal: i32) -> String {
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

//! The text forms of results (DESIGN §9) and the exit status a result maps to.

use std::fmt::Write;

use bashc::protocol::{
    Direction, ExecResult, JobInfo, JobState, OutputPage, PolicyVerdict, SessionInfo, StatusInfo,
    StreamResult,
};

const EXIT_TIMEOUT: u8 = 124;
const EXIT_DENIED: u8 = 126;
const EXIT_FAILED: u8 = 255;

/// The exit status `bashc` ends with for a result.
pub fn exit_status(result: &ExecResult) -> u8 {
    let by_signal = result.signal.map(|n| 128u8.wrapping_add(n as u8));
    match result.state {
        // The shell's status, when processes it started run on.
        JobState::Running => result.exit_code.map_or(0, |c| c as u8),
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
    let pid = result
        .pid
        .map_or(String::new(), |pid| format!(" (pid {pid})"));
    let _ = match (result.state, result.signal) {
        (JobState::Running, _) if result.exit_code.is_some() => writeln!(
            out,
            "exit code: {code} (of the shell; {}{pid} runs on in the background)",
            result.job
        ),
        (JobState::Running, _) => writeln!(
            out,
            "running: {}{pid}, {} s so far",
            result.job,
            result.duration_ms / 1000
        ),
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

/// `bashc jobs`: one line a job, newest last.
pub fn jobs_text(jobs: &Vec<JobInfo>) -> String {
    if jobs.is_empty() {
        return "no jobs\n".to_owned();
    }
    let mut out = format!(
        "{:<8} {:<20} {:<9} {:>4} {:<10} {:>9} {:>8}  COMMAND\n",
        "JOB", "SESSION", "STATE", "EXIT", "MODE", "PID", "TIME"
    );
    for job in jobs {
        let exit = job.exit_code.map_or("-".to_owned(), |c| c.to_string());
        let pid = job.pid.map_or("-".to_owned(), |p| p.to_string());
        let command = one_line(&job.command, 60);
        let _ = write!(
            out,
            "{:<8} {:<20} {:<9} {:>4} {:<10} {:>9} {:>7}s  {command}",
            job.job,
            job.session,
            job.state,
            exit,
            job.mode,
            pid,
            job.duration_ms / 1000
        );
        if let Some(description) = &job.description {
            let _ = write!(out, "  # {}", one_line(description, 60));
        }
        out.push('\n');
    }
    out
}

/// `bashc sessions`.
pub fn sessions_text(sessions: &Vec<SessionInfo>) -> String {
    if sessions.is_empty() {
        return "no sessions\n".to_owned();
    }
    let mut out = format!(
        "{:<24} {:<10} {:>7} {:>8}  OWNERS\n",
        "SESSION", "STATE", "RUNNING", "FINISHED"
    );
    for session in sessions {
        let owners: Vec<String> = session.owners.iter().map(u32::to_string).collect();
        let state = match session.linger_left_secs {
            Some(left) if session.state == "lingering" => format!("lingering ({left} s left)"),
            _ => session.state.clone(),
        };
        let _ = writeln!(
            out,
            "{:<24} {:<10} {:>7} {:>8}  {}",
            session.session,
            state,
            session.running_jobs,
            session.finished_jobs,
            if owners.is_empty() {
                "-".to_owned()
            } else {
                owners.join(",")
            }
        );
    }
    out
}

/// The first line of `text`, at most `max` chars, marked when cut.
fn one_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    let cut = line.chars().count() > max || line.len() < text.trim_end().len();
    let mut shown: String = line.chars().take(max).collect();
    if cut {
        shown.push('…');
    }
    shown
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

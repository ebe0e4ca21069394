//! "since your last call:": the section that ends a result when the session's jobs did
//! something meanwhile (issue 32), worded once for both front ends, which each give
//! the calls that read more in their own terms (the CLI here, MCP in `mcp/since.rs`).
//! The CLI prints it to stderr after everything else (stdout stays the job's output),
//! and under the key `since_last_call` of a `--json` object.

use std::sync::OnceLock;

use bashc::InboxHandle;
use bashc::protocol::{EndedBy, Inbox, InboxEvent, JobId, JobState};

/// The calls a line names to read more, in a front end's words.
pub struct Calls {
    /// The new output and state of a job (`bashc check j4`).
    pub check: fn(JobId) -> String,
    /// Answering a job that waits for input.
    pub send: fn(JobId) -> String,
    /// The lines of a job that match a pattern.
    pub grep: fn(JobId, &str) -> String,
}

/// The CLI's calls.
pub const CLI: Calls = Calls {
    check: |job| format!("bashc check {job}"),
    send: |job| format!("bashc send {job} TEXT --newline"),
    grep: |job, pattern| format!("bashc output {job} --grep {}", quoted(pattern)),
};

/// The section, or `None` when nothing happened: one line for one event, else a line
/// a event under the heading.
pub fn section(inbox: &Inbox, calls: &Calls) -> Option<String> {
    let mut lines: Vec<String> = inbox.events.iter().map(|e| line(e, calls)).collect();
    if inbox.folded > 0 {
        lines.insert(
            0,
            format!(
                "{} older event{} dropped (the inbox keeps the last {})",
                inbox.folded,
                if inbox.folded == 1 { " was" } else { "s were" },
                inbox.events.len()
            ),
        );
    }
    match lines.as_slice() {
        [] => None,
        [one] => Some(format!("since your last call: {one}")),
        many => Some(format!("since your last call:\n- {}", many.join("\n- "))),
    }
}

/// One event in a line, ending with the call that reads more.
pub fn line(event: &InboxEvent, calls: &Calls) -> String {
    match event {
        InboxEvent::Ended {
            job,
            command,
            state,
            exit_code,
            signal,
            duration_ms,
            ended_by,
            limit,
            sandbox_denied,
            new_lines,
        } => {
            let how = match (state, ended_by) {
                (JobState::Exited, _) => format!("ended with exit {}", exit_code.unwrap_or(0)),
                (JobState::Signaled, _) => format!(
                    "was ended by {}",
                    signal.map_or("a signal".to_owned(), crate::render::signal_name)
                ),
                (JobState::TimedOut, _) => "passed its timeout and was killed".to_owned(),
                (_, Some(EndedBy::Limit)) => format!(
                    "was killed at its limit ({})",
                    limit.as_deref().unwrap_or("a limit")
                ),
                (_, Some(EndedBy::Oom)) => "was killed by the kernel for want of memory".to_owned(),
                (JobState::Killed, Some(EndedBy::Kill)) => "was killed".to_owned(),
                (JobState::Killed, _) => "was killed".to_owned(),
                (state, _) => format!("ended ({state})"),
            };
            let sandbox = if *sandbox_denied {
                ", its output reads like its sandbox refused something"
            } else {
                ""
            };
            let new = match new_lines {
                0 => String::new(),
                1 => ", 1 new line".to_owned(),
                n => format!(", {n} new lines"),
            };
            format!(
                "{job} ({command}) {how} after {}{sandbox}{new}: {}",
                duration(*duration_ms),
                (calls.check)(*job)
            )
        }
        InboxEvent::WaitingForInput {
            job,
            command,
            prompt,
        } => {
            let asks = prompt
                .as_deref()
                .filter(|p| !p.trim().is_empty())
                .map(|p| format!(", it asks {}", quoted(p.trim())))
                .unwrap_or_default();
            format!(
                "{job} ({command}) waits for input{asks}: {}",
                (calls.send)(*job)
            )
        }
        InboxEvent::Matched {
            job,
            command,
            pattern,
            line,
            text,
            count,
            ..
        } => {
            let more = match count {
                1 => String::new(),
                n => format!(" ({n} matching lines)"),
            };
            format!(
                "{job} ({command}) printed a line matching {}{more}, first line {line}: {}: {}",
                quoted(pattern),
                quoted(&cut(text, 120)),
                (calls.grep)(*job, pattern)
            )
        }
        InboxEvent::Idle {
            job,
            command,
            idle_secs,
        } => format!(
            "{job} ({command}) has printed nothing for {}: {}",
            duration(idle_secs * 1000),
            (calls.check)(*job)
        ),
        InboxEvent::AskAnswered {
            ask,
            command,
            state,
            job: Some(job),
        } => format!(
            "ask {ask} ({command}) was {}: it runs as {job}: {}",
            state.as_str(),
            (calls.check)(*job)
        ),
        InboxEvent::AskAnswered {
            ask,
            command,
            state,
            job: None,
        } => format!(
            "ask {ask} ({command}) was {}, so it did not run",
            state.as_str()
        ),
        InboxEvent::NetworkRefused {
            job,
            command,
            message,
            count,
            ..
        } => {
            let times = match count {
                1 => String::new(),
                n => format!(" ({n} times)"),
            };
            format!("{job} ({command}): {message}{times}; the list in force: bashc status")
        }
    }
}

/// `4.2s`, `3m12s`, `1h05m`.
pub fn duration(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{:.1}s", ms as f64 / 1000.0),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, secs / 60 % 60),
    }
}

/// A string as a shell or a JSON reader takes it: double-quoted, escaped.
fn quoted(text: &str) -> String {
    format!("{text:?}")
}

fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// The inbox of the CLI's connection: set by `common::connect` (or `connect_blocking`), taken by whatever
/// prints the result, and what is left printed by `main` last.
static CONNECTION: OnceLock<InboxHandle> = OnceLock::new();

/// Remembers the inbox of the CLI's connection (the first one made).
pub fn watch(inbox: InboxHandle) {
    let _ = CONNECTION.set(inbox);
}

/// What the CLI's connection was told and nobody printed yet.
pub fn take() -> Option<Inbox> {
    CONNECTION.get()?.take()
}

/// Prints what is left, in the CLI's words, to stderr.
pub fn print_left() {
    if let Some(text) = take().and_then(|inbox| section(&inbox, &CLI)) {
        eprintln!("bashc: {text}");
    }
}

/// Adds `since_last_call` (the events, and the text) to a `--json` object.
pub fn add_to_json(value: &mut serde_json::Value) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    let Some(inbox) = take() else {
        return;
    };
    let text = section(&inbox, &CLI);
    if let Ok(mut events) = serde_json::to_value(&inbox) {
        if let Some(events) = events.as_object_mut() {
            events.insert("text".to_owned(), text.into());
        }
        object.insert("since_last_call".to_owned(), events);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_job_in_one_line() {
        let inbox = Inbox {
            events: vec![InboxEvent::Ended {
                job: JobId(4),
                command: "npm test".to_owned(),
                state: JobState::Exited,
                exit_code: Some(1),
                signal: None,
                duration_ms: 192_000,
                ended_by: Some(EndedBy::Exit),
                limit: None,
                sandbox_denied: false,
                new_lines: 41,
            }],
            folded: 0,
        };
        assert_eq!(
            section(&inbox, &CLI).unwrap(),
            "since your last call: j4 (npm test) ended with exit 1 after 3m12s, 41 new lines: bashc check j4"
        );
        assert_eq!(section(&Inbox::default(), &CLI), None);
    }
}

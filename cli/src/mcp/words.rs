//! `bashc mcp`'s result texts: results, pages and errors as an agent on MCP reads them.
//! Notices and error hints are worded in `wording.rs`, the same sentences as the CLI's
//! in the `Mcp` spelling, naming tool calls (`bash_check(job="j4")`) where the CLI
//! names `bashc` commands. Built from the daemon's data, never from its text.
//!
//! A result is one text content block and nothing else: no `structuredContent`.
//! Claude Code, Codex and OpenCode pass `structuredContent` to the model instead of
//! the text when it is there, other clients only the text, so whichever is sent must
//! be complete, and sending both doubled every result (docs/PERFORMANCE.md). The text
//! is that one complete form: output, notices, the calls that act on the job, the
//! exit code.

use bashc::ClientError;
use bashc::protocol::{ErrorReply, ExecResult, JobId, Notice, OutputPage, StreamName};
use rmcp::model::{CallToolResult, ContentBlock};

use super::clients::{self, Budget};
use super::tools::CallError;
use crate::render;
use crate::wording::{self, JobCall, Mcp, Spelling};

/// A job's result: its text, with the notices in tool words and, under each cut
/// stream, the `bash_output` call that shows the rest. `whole`: the result's streams
/// count from their first line (not a check's, whose notices say where its unshown
/// lines are).
///
/// Its first line is its status, as its last is, for a client that keeps only the
/// start of a long result. Fitted to the client's `budget`, when it has one: the
/// streams are cut on lines until the whole text fits (`clients::fit`); `first_line`
/// gives the first line number a check's stream shows, for its notice.
pub fn exec_result(
    mut result: ExecResult,
    failed: bool,
    whole: bool,
    budget: Option<Budget>,
    first_line: &dyn Fn(StreamName) -> Option<u64>,
) -> CallToolResult {
    let text = match budget {
        Some(budget) => clients::fit(
            &mut result,
            whole,
            budget_bytes(budget, failed),
            budget.result_lines,
            first_line,
            &|result| exec_text(result, whole),
        ),
        None => exec_text(&result, whole),
    };
    tool_result(text, failed)
}

/// Whether `result`'s text is more than the client shows whole.
pub fn over_budget(result: &ExecResult, failed: bool, whole: bool, budget: Budget) -> bool {
    let text = exec_text(result, whole);
    text.len() as u64 > budget_bytes(budget, failed)
        || text.lines().count() as u64 > budget.result_lines
}

fn budget_bytes(budget: Budget, failed: bool) -> u64 {
    if failed {
        budget.error_result_bytes
    } else {
        budget.result_bytes
    }
}

/// A job's result as text: its status line, its streams and notices in tool words,
/// its exit record, and its status line again, last.
fn exec_text(result: &ExecResult, whole: bool) -> String {
    let body = render::result_body(result, &Mcp, whole);
    let status = render::status_line(result);
    let record = render::record_lines(result);
    if body.is_empty() {
        // Nothing between the two: once is enough.
        return format!("{record}{status}\n");
    }
    format!("{status}\n{body}{record}{status}\n")
}

/// A page of output: its lines, then in brackets its notices, the range shown and
/// the call for the next page; or, for a page without lines, why it has none.
/// `other` is the other stream's page, asked for when this stream is empty.
/// `grep` is the search a page of matches came from (its pattern and context): its
/// range counts matches, and its next page searches on.
pub fn page_result(
    page: &OutputPage,
    other: Option<&OutputPage>,
    grep: Option<(&str, u32)>,
) -> CallToolResult {
    if let Some((pattern, context)) = grep {
        return grep_result(page, pattern, context);
    }
    let mut text = render::page_text(page);
    let mut said = Vec::new();
    if page.lines == 0 {
        let never_ran = page
            .notices
            .iter()
            .any(|n| matches!(n, Notice::Denied { .. } | Notice::NotStarted { .. }));
        if never_ran {
            // The notices below say why.
            said.push(format!("{} never ran, so it has no output:", page.job));
        } else {
            said.extend(wording::empty_page(page, other, &Mcp));
        }
    }
    said.extend(page.notices.iter().map(notice));
    said.extend(render::page_next(page, next_page_call));
    if page.next_offset.is_none() && page.lines > 0 {
        let end = page.offset + page.lines - 1;
        let so_far = if page.complete {
            "the end of the stream"
        } else {
            "all there is so far; the job is still running"
        };
        said.push(format!(
            "lines {}-{end} of {}: {so_far}",
            page.offset, page.total_lines
        ));
    }
    if !said.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&format!("[{}]\n", said.join("\n")));
    }
    tool_result(text, false)
}

/// A page of matches: the matching lines numbered as `grep -n` does, then what was
/// searched and the call for the next page, which searches on with the same pattern.
fn grep_result(page: &OutputPage, pattern: &str, context: u32) -> CallToolResult {
    let mut text = render::page_text(page);
    let mut said: Vec<String> = page.notices.iter().map(notice).collect();
    let (job, name) = (page.job, render::stream_name(page.stream));
    // The page's matches are its `N:` lines (`N-` lines are context): the range says
    // which lines matched, not where the search began (issue 45).
    let matched: Vec<&str> = page
        .text
        .lines()
        .filter_map(|line| line.split_once(':').map(|(n, _)| n))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    let matches = match (page.lines, matched.first(), matched.last()) {
        (0, _, _) => "no line matches".to_owned(),
        (1, Some(first), _) => format!("1 line matches: line {first}"),
        (n, Some(first), Some(last)) if first != last => {
            format!("{n} lines match: lines {first} to {last}")
        }
        (1, _, _) => "1 line matches".to_owned(),
        (n, _, _) => format!("{n} lines match"),
    };
    let so_far = if page.complete { "" } else { " so far" };
    let searched = format!(
        "in {job}'s {name}, {matches} (searched from line {} of {} lines{so_far})",
        page.offset, page.total_lines
    );
    said.push(match page.next_offset {
        Some(next) => {
            let stream_argument = match page.stream {
                StreamName::Stdout => "",
                StreamName::Stderr => ", stream=\"stderr\"",
            };
            let context_argument = if context > 0 {
                format!(", context={context}")
            } else {
                String::new()
            };
            format!(
                "{searched}; more may follow: bash_output(job=\"{job}\"{stream_argument}, grep={}{context_argument}, offset={next})",
                serde_json::Value::String(pattern.to_owned())
            )
        }
        None if page.complete => format!("{searched}: the end of the stream"),
        None => format!("{searched}: all there are so far; the job is still running"),
    });
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(&format!("[{}]\n", said.join("\n")));
    tool_result(text, false)
}

/// `bash_output(job="j4", stream="stderr", offset=86)`.
fn next_page_call(job: JobId, stream: StreamName, offset: u64) -> String {
    Mcp.page_call(job, stream, offset)
}

/// A tool's answer: `text` as its one content block, an error (`isError`) when
/// `failed`.
pub fn tool_result(text: String, failed: bool) -> CallToolResult {
    if failed {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    }
}

/// What the instructions of a server for another host add.
/// The error of a method this server does not offer.
pub fn unknown_method(method: &str, tools: &str) -> String {
    format!(
        "no method {method:?}: this server offers tools only (tools/list, and tools/call with {tools}), with initialize and ping"
    )
}

pub fn on_host(host: &str) -> String {
    format!(
        "Every command runs on the host {host}, over SSH, as the same user: paths in calls and results are paths there (`workdir` relative to the login directory there), and job ids are of the bashd there; each result ends with `host: {host}`."
    )
}

/// A result of a server for another host, its last line naming the host: the agent
/// may also have a local bash tool, and a path or job id means something else there.
pub fn name_host(mut result: CallToolResult, host: &str) -> CallToolResult {
    match result.content.last_mut() {
        Some(ContentBlock::Text(last)) => {
            if !last.text.ends_with('\n') {
                last.text.push('\n');
            }
            last.text.push_str(&format!("host: {host}\n"));
        }
        _ => result
            .content
            .push(ContentBlock::text(format!("host: {host}"))),
    }
    result
}

/// A call that could not be made, as the tool error the agent sees.
pub fn call_error(CallError(message): CallError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// A client error, with the daemon's hint in tool words when it gave one.
pub fn error(error: &ClientError) -> String {
    match error {
        ClientError::Daemon(reply) => self::reply(reply),
        ClientError::Refused(refused) => {
            wording::error(&error.to_string(), refused.hint.as_ref(), &Mcp)
        }
        ClientError::DiedWhileRunning { job } => format!(
            "bashd stopped while {job} ran; {} has what it printed once bashd is back",
            Mcp.job_call(JobCall::Output, *job)
        ),
        ClientError::RemoteDied { host, job } => format!(
            "host {host}: bashd on {host} stopped while {job} ran; {} has what it printed once bashd there is back (the next call starts it)",
            Mcp.job_call(JobCall::Output, *job)
        ),
        ClientError::DiedDuring { doing, job } => format!(
            "bashd stopped while {doing} {job}; once it is back (the next call starts it), bash_check(job=\"{job}\") says what became of the job and bash_output(job=\"{job}\") has what it printed"
        ),
        _ => error.to_string(),
    }
}

/// The daemon's error message, with its hint in tool words when it gave one.
pub fn reply(reply: &ErrorReply) -> String {
    wording::error(&reply.message, reply.hint.as_ref(), &Mcp)
}

/// A notice as an agent on MCP reads it: the calls that act on it are tool calls.
fn notice(notice: &Notice) -> String {
    wording::notice(notice, &Mcp)
}

#[cfg(test)]
mod tests {
    use bashc::protocol::{BackgroundWhy, ErrorHint, ErrorKind};

    use super::*;

    #[test]
    fn a_result_of_another_host_ends_naming_it() {
        let result = name_host(tool_result("exit code: 0\n".to_owned(), false), "box");
        let text = &result.content[0].as_text().unwrap().text;
        assert_eq!(text, "exit code: 0\nhost: box\n");
        let result = name_host(call_error(CallError("no such job".to_owned())), "box");
        let text = &result.content[0].as_text().unwrap().text;
        assert_eq!(text, "no such job\nhost: box\n");
    }

    #[test]
    fn hints_name_tool_calls() {
        let background = Notice::Background {
            job: JobId(4),
            pid: 77,
            why: BackgroundWhy::Requested,
            timeout_secs: None,
        };
        assert_eq!(
            notice(&background),
            "Running in the background as j4 (pid 77). New output: bash_check(job=\"j4\"); wait for it: bash_wait(job=\"j4\"); stop it: bash_kill(job=\"j4\")."
        );
        let unshown = |stream| Notice::LinesNotShown {
            job: JobId(9),
            stream,
            offset: 3,
            lines: 7,
        };
        assert_eq!(
            notice(&unshown(StreamName::Stderr)),
            "stderr: 7 of the new lines are not shown; read them with: bash_output(job=\"j9\", stream=\"stderr\", offset=3, limit=7)"
        );
        assert_eq!(
            notice(&unshown(StreamName::Stdout)),
            "stdout: 7 of the new lines are not shown; read them with: bash_output(job=\"j9\", offset=3, limit=7)"
        );
        assert_eq!(
            notice(&Notice::StillRunning {
                job: JobId(2),
                waited_ms: 200
            }),
            "j2 is still running after waiting 0.2 s. New output: bash_check(job=\"j2\"); wait again: bash_wait(job=\"j2\"); stop it: bash_kill(job=\"j2\")."
        );
        let timed_out = notice(&Notice::TimedOut { after_secs: 30 });
        assert!(!timed_out.contains("--"), "{timed_out}");
        let not_found =
            ErrorReply::new(ErrorKind::NotFound, "no job j999").with_hint(ErrorHint::JobIds);
        assert_eq!(
            reply(&not_found),
            "no job j999: job ids look like j12, as `bash` and `bash_jobs()` show them"
        );
    }
}

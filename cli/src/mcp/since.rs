//! MCP's words for the "since your last call:" section that ends every tool result
//! when the session's jobs did something meanwhile (issue 32): the lines are
//! `crate::since`'s, the calls that read more are tool calls.

use bashc::protocol::{Inbox, JobId};
use rmcp::model::{CallToolResult, ContentBlock};

use crate::since::{Calls, section};

/// The tool calls a line names.
pub const MCP: Calls = Calls {
    check: |job| call("bash_check", job),
    send: |job| format!("bash_send(job=\"{job}\", text=\"...\\n\")"),
    grep: |job, pattern| format!("bash_output(job=\"{job}\", grep={pattern:?})"),
};

fn call(tool: &str, job: JobId) -> String {
    format!("{tool}(job=\"{job}\")")
}

/// `result` with the section as its last lines, when there is one.
pub fn append(mut result: CallToolResult, inbox: Option<Inbox>) -> CallToolResult {
    let Some(text) = inbox.and_then(|inbox| section(&inbox, &MCP)) else {
        return result;
    };
    match result.content.last_mut() {
        Some(ContentBlock::Text(last)) => {
            if !last.text.is_empty() && !last.text.ends_with('\n') {
                last.text.push('\n');
            }
            last.text.push_str(&text);
            last.text.push('\n');
        }
        _ => result.content.push(ContentBlock::text(text)),
    }
    result
}

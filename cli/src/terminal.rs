//! `bashc screen`, `bashc resize` and how a terminal job's screen reads, for the CLI
//! and the MCP tools.

use bashc::Target;
use bashc::protocol::{PtySize, ResizeRequest, ScreenInfo};
use clap::Args;

use crate::common::{SessionArgs, connect, write_stdout};
use crate::jobs::OneJob;

#[derive(Debug, Args)]
pub struct ScreenArgs {
    #[command(flatten)]
    target: OneJob,
    /// Print the screen as JSON: job, cols, rows, cursor, lines, alternate, title,
    /// waiting_for_input, state.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ResizeArgs {
    /// The job, as `exec` and `jobs` name it (j12).
    job: String,
    /// The new size, COLSxROWS (100x30).
    #[arg(value_name = "COLSxROWS", value_parser = PtySize::parse)]
    size: PtySize,
    #[command(flatten)]
    session: SessionArgs,
    /// Act on the job even if it belongs to another session than this one.
    #[arg(long)]
    any_session: bool,
    /// Print the screen after the resize as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn screen(args: ScreenArgs, target: &Target) -> anyhow::Result<u8> {
    let request = args.target.request()?;
    let screen = connect(target).await?.screen(request).await?;
    print_screen(&screen, args.json)?;
    Ok(0)
}

pub async fn resize(args: ResizeArgs, target: &Target) -> anyhow::Result<u8> {
    let request = ResizeRequest {
        caller: args.session.caller(),
        job: bashc::protocol::JobRef::Id(args.job),
        size: args.size,
        any_session: args.any_session,
    };
    let screen = connect(target).await?.resize(request).await?;
    print_screen(&screen, args.json)?;
    Ok(0)
}

pub fn print_screen(screen: &ScreenInfo, json: bool) -> anyhow::Result<()> {
    if json {
        let mut bytes = serde_json::to_vec_pretty(&screen_json(screen))?;
        bytes.push(b'\n');
        write_stdout(&bytes)
    } else {
        write_stdout(screen_text(screen).as_bytes())
    }
}

/// The screen as text: its rows down to the last with text (or the cursor's), trailing
/// blanks trimmed, then one line with the size, the cursor and the state.
pub fn screen_text(screen: &ScreenInfo) -> String {
    let last = screen
        .lines
        .iter()
        .rposition(|line| !line.is_empty())
        .unwrap_or(0)
        .max(screen.cursor_row as usize)
        .min(screen.lines.len().saturating_sub(1));
    let mut text = String::new();
    for line in screen.lines.iter().take(last + 1) {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(&format!(
        "[{} {}x{}, cursor row {} col {}{}{}{}, {}]\n",
        screen.job,
        screen.cols,
        screen.rows,
        screen.cursor_row,
        screen.cursor_col,
        if screen.alternate {
            ", alternate screen"
        } else {
            ""
        },
        if screen.title.is_empty() {
            String::new()
        } else {
            format!(", title {:?}", screen.title)
        },
        if screen.waiting_for_input {
            ", waiting for input"
        } else {
            ""
        },
        serde_json::to_value(screen.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
    ));
    text
}

/// A job's result as `--json` prints it (`exec`, `wait`, `check`, the end of
/// `follow`): its keys, its notices worded, and its screen, when it carries one, in the
/// shape `screen --json` gives it (`cursor: {row, col}`, not the wire's field names).
pub fn result_json(result: &bashc::protocol::ExecResult) -> anyhow::Result<serde_json::Value> {
    let mut value = serde_json::to_value(bashc::protocol::Worded {
        value: result,
        notice: crate::render::notices_text(&result.notices),
    })?;
    if let (Some(screen), Some(object)) = (&result.screen, value.as_object_mut()) {
        object.insert("screen".to_owned(), screen_json(screen));
    }
    Ok(value)
}

/// The screen as `screen --json` prints it.
pub fn screen_json(screen: &ScreenInfo) -> serde_json::Value {
    serde_json::json!({
        "job": screen.job,
        "cols": screen.cols,
        "rows": screen.rows,
        "cursor": { "row": screen.cursor_row, "col": screen.cursor_col },
        "lines": screen.lines,
        "alternate": screen.alternate,
        "title": screen.title,
        "waiting_for_input": screen.waiting_for_input,
        "state": screen.state,
    })
}

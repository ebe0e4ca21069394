//! The live commands: `exec --stream` and `follow` print a job's lines as they come,
//! `send` writes to a job's stdin.

use std::io::{Read, Write};

use anyhow::Context;
use bashc::protocol::{
    ExecResult, FollowFrom, FollowRequest, JobId, Notice, Response, SendRequest, StreamName, Worded,
};
use bashc::{Responses, Target};
use clap::Args;

use crate::common::{UsageError, connect, print, write_stdout};
use crate::jobs::OneJob;
use crate::options::StreamsArg;
use crate::render;

#[derive(Debug, Args)]
pub struct FollowArgs {
    #[command(flatten)]
    target: OneJob,
    /// Which streams to show.
    #[arg(long, value_enum, default_value = "both")]
    stream: StreamsArg,
    /// Show every line from the first before the new ones.
    #[arg(long, conflicts_with = "lines")]
    from_start: bool,
    /// Show the last N lines of each stream before the new ones (default 10).
    #[arg(long, value_name = "N")]
    lines: Option<u64>,
    /// Print one JSON object a line: each piece of output, notices, then the result.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    #[command(flatten)]
    target: OneJob,
    /// What to write to the job's stdin; `-` reads it from bashc's own stdin. Leave it
    /// out with --eof to only close the job's stdin.
    #[arg(value_name = "TEXT", allow_hyphen_values = true)]
    text: Option<String>,
    /// Add a newline after TEXT (what pressing Enter sends).
    #[arg(long)]
    newline: bool,
    /// Close the job's stdin afterwards: it reads end-of-file.
    #[arg(long)]
    eof: bool,
    /// Send keys as `tmux send-keys` names them, after TEXT: each word is a key (Enter,
    /// Tab, Esc, BSpace, Space, Up, Down, Left, Right, Home, End, PgUp, PgDn, F1..F12,
    /// C-a..C-z, M-x) or else text. For a terminal job (`exec --pty`).
    #[arg(long, num_args = 1.., value_name = "KEY")]
    keys: Vec<String>,
    /// Send every word of --keys as text, naming no key.
    #[arg(long, requires = "keys")]
    literal: bool,
    /// Then show the screen of the terminal job, once the keys' answer has drawn and
    /// been quiet for --settle-ms (a screen they leave unchanged is shown after 2 s;
    /// 5 s at most).
    #[arg(long)]
    screen: bool,
    /// How long the output must be quiet before --screen shows the screen.
    #[arg(long, value_name = "MS", default_value_t = 300)]
    settle_ms: u64,
    /// Print the reply as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn follow(args: FollowArgs, target: &Target) -> anyhow::Result<u8> {
    let from = match (args.from_start, args.lines) {
        (true, _) => FollowFrom::Start,
        (false, lines) => FollowFrom::Last(lines.unwrap_or(10)),
    };
    let request = FollowRequest {
        caller: args.target.caller(),
        job: args.target.job_ref()?,
        stream: args.stream.into(),
        from,
        any_session: args.target.any_session,
    };
    // Held until the end: the connection lives as long as a `Client` does.
    let client = connect(target).await?;
    let responses = client.follow(request).await?;
    let result = print_events(responses, args.json).await?;
    print_end(&result, args.json)?;
    Ok(render::exit_status(&result))
}

pub async fn send(args: SendArgs, target: &Target) -> anyhow::Result<u8> {
    let mut bytes = match args.text.as_deref() {
        Some("-") => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("cannot read what to send from stdin")?;
            bytes
        }
        Some(text) => text.as_bytes().to_vec(),
        None if args.eof || args.newline || !args.keys.is_empty() || args.screen => Vec::new(),
        None => {
            return Err(UsageError(
                "give TEXT to send (or - to read it from stdin), --keys, or --eof to close the job's stdin".to_owned(),
            )
            .into());
        }
    };
    if args.newline {
        bytes.push(b'\n');
    }
    let request = SendRequest {
        caller: args.target.caller(),
        job: args.target.job_ref()?,
        bytes,
        eof: args.eof,
        keys: args.keys,
        literal: args.literal,
        screen_settle_ms: args.screen.then_some(args.settle_ms),
        any_session: args.target.any_session,
    };
    let sent = connect(target).await?.send(request).await?;
    if let Some(screen) = &sent.screen {
        crate::terminal::print_screen(screen, args.json)?;
        return Ok(0);
    }
    print(args.json, &sent, |sent| {
        format!(
            "sent {} byte{} to the stdin of {}{}\n",
            sent.written,
            if sent.written == 1 { "" } else { "s" },
            sent.job,
            if sent.closed { ", and closed it" } else { "" }
        )
    })?;
    Ok(0)
}

/// Prints the live events of a request (`exec --stream`, `follow`) as they come:
/// stdout's lines to stdout, stderr's to stderr, notices to stderr; with `json`, one
/// object a line on stdout. Returns the result that ends them.
pub async fn print_events(responses: Responses, json: bool) -> anyhow::Result<ExecResult> {
    let mut printer = Printer {
        json,
        missed: [None, None],
    };
    let result = responses.watch(&mut printer).await?;
    for (stream, so_far) in [StreamName::Stdout, StreamName::Stderr]
        .into_iter()
        .zip(printer.missed)
    {
        if let Some(so_far) = so_far.filter(|m| m.stretches > 1) {
            eprintln!("bashc: {}", so_far.text(stream));
        }
    }
    Ok(result)
}

/// The CLI's hook on the client's response loop: prints each event.
struct Printer {
    json: bool,
    /// A reader far behind a loud job misses many stretches: the first is said as it
    /// happens, the rest once, at the end, rather than a notice between every two
    /// reads.
    missed: [Option<MissedSoFar>; 2],
}

impl bashc::Watch for Printer {
    type Error = anyhow::Error;

    fn event(&mut self, response: Response) -> anyhow::Result<()> {
        let json = self.json;
        match response {
            Response::Started(started) if json => {
                json_line(&serde_json::json!({ "started": started }))?;
            }
            Response::Output(chunk) if json => json_line(&serde_json::json!({
                "stream": chunk.stream,
                "line": chunk.line,
                "text": String::from_utf8_lossy(&chunk.bytes),
            }))?,
            Response::Output(chunk) => match chunk.stream {
                StreamName::Stdout => write_stdout(&chunk.bytes)?,
                StreamName::Stderr => {
                    let mut stderr = std::io::stderr().lock();
                    let _ = stderr.write_all(&chunk.bytes).and_then(|()| stderr.flush());
                }
            },
            Response::Notice(notice) if json => json_line(&Worded {
                value: &serde_json::json!({ "notices": [&notice] }),
                notice: Some(render::notice_text(&notice)),
            })?,
            Response::Notice(Notice::OutputMissed {
                job,
                stream,
                lines,
                path,
                ..
            }) if self.missed[stream as usize].is_some() => {
                if let Some(so_far) = &mut self.missed[stream as usize] {
                    so_far.stretches += 1;
                    so_far.lines += lines;
                    so_far.job = job;
                    so_far.path = path.or(so_far.path.take());
                }
            }
            Response::Notice(notice) => {
                if let Notice::OutputMissed {
                    job,
                    stream,
                    lines,
                    path,
                    ..
                } = &notice
                {
                    self.missed[*stream as usize] = Some(MissedSoFar {
                        job: *job,
                        stretches: 1,
                        lines: *lines,
                        path: path.clone(),
                    });
                }
                eprintln!("bashc: {}", render::notice_text(&notice));
            }
            _ => {}
        }
        Ok(())
    }
}

/// The lines a streaming reader missed, all told.
struct MissedSoFar {
    job: JobId,
    stretches: u64,
    lines: u64,
    path: Option<String>,
}

impl MissedSoFar {
    fn text(&self, stream: StreamName) -> String {
        let file = self
            .path
            .as_deref()
            .map_or(String::new(), |p| format!("; the file {p} has every line"));
        let flag = match stream {
            StreamName::Stdout => "",
            StreamName::Stderr => " --stream stderr",
        };
        format!(
            "{}: in all, {} lines in {} stretches went by while this reader was behind and were not shown{file}; page through them with: bashc output {}{flag}",
            render::stream_name(stream),
            self.lines,
            self.stretches,
            self.job,
        )
    }
}

/// The end of a streamed job: its result without the text already printed (notices,
/// exit code, record), or with `json` the whole result as the last line.
pub fn print_end(result: &ExecResult, json: bool) -> anyhow::Result<()> {
    if json {
        return json_line(&crate::terminal::result_json(result)?);
    }
    let mut shown = result.clone();
    shown.stdout.text.clear();
    if let Some(stderr) = &mut shown.stderr {
        stderr.text.clear();
    }
    // Lines missed were said as they were missed.
    shown
        .notices
        .retain(|n| !matches!(n, Notice::OutputMissed { .. }));
    let text = render::exec_text(&shown, true);
    // The streamed lines may not have ended with a newline.
    write_stdout(format!("\n{text}").as_bytes())
}

fn json_line<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let mut bytes = serde_json::to_vec(value)?;
    bytes.push(b'\n');
    write_stdout(&bytes)
}

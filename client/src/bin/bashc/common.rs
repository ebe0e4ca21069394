//! What the subcommands share: the session they act for, the connection to bashd, the
//! job's environment and command text, and printing a value as text or JSON.

use std::io::{Read, Write};

use anyhow::Context;
use bashc::protocol::{Caller, ExecResult, Owner, Worded};
use clap::Args;

use crate::render;

#[derive(Debug, Args)]
pub struct SessionArgs {
    /// The session to act in; default: $BASHD_SESSION, else `agent-<pid>` of the
    /// nearest ancestor that is not a shell or a wrapper.
    #[arg(long, env = "BASHD_SESSION")]
    session: Option<String>,
    /// The process that owns the session (default: that same ancestor). When every
    /// owner has exited, the session's foreground jobs are killed, and its background
    /// jobs after the linger time (15 min) unless someone uses the session again.
    #[arg(long, value_name = "PID")]
    owner_pid: Option<u32>,
}

impl SessionArgs {
    /// The session and owner a request acts for.
    pub fn caller(&self) -> Caller {
        let agent = || bashc::find_agent_pid();
        let session = self
            .session
            .clone()
            .unwrap_or_else(|| format!("agent-{}", agent()));
        Caller {
            session,
            owner: Some(Owner::of(self.owner_pid.unwrap_or_else(agent))),
        }
    }
}

/// The connection to this user's bashd, started if none is running.
pub async fn connect() -> anyhow::Result<bashc::Client> {
    Ok(bashc::connect(&bashc::Target::local()).await?)
}

/// This process's environment, as bytes: a job runs with the environment of the one
/// that asked for it.
pub fn environment() -> Vec<(Vec<u8>, Vec<u8>)> {
    use std::os::unix::ffi::OsStrExt;
    std::env::vars_os()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// The words of a command joined with spaces, or stdin for `-`.
pub fn command_text(words: &[String]) -> anyhow::Result<String> {
    if words.len() == 1 && words[0] == "-" {
        let mut command = String::new();
        std::io::stdin()
            .read_to_string(&mut command)
            .context("cannot read the command from stdin")?;
        Ok(command)
    } else {
        Ok(words.join(" "))
    }
}

/// Prints `value` as pretty JSON, or as the text `text` makes of it.
pub fn print<T: serde::Serialize>(
    json: bool,
    value: &T,
    text: fn(&T) -> String,
) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut stdout, value)?;
        writeln!(stdout)?;
    } else {
        stdout.write_all(text(value).as_bytes())?;
    }
    stdout.flush()?;
    Ok(())
}

/// Prints a job's result (of `exec`, `check`, `wait`, `kill`): its text, or its JSON
/// with the notices worded under `notice` besides the notices themselves.
pub fn print_result(json: bool, result: &ExecResult) -> anyhow::Result<()> {
    let worded = Worded {
        value: result,
        notice: render::notices_text(&result.notices),
    };
    print(json, &worded, |worded| render::exec_text(worded.value))
}

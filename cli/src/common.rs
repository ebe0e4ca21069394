//! What the subcommands share: the daemon they talk to, the session they act for, the
//! job's environment and command text, and printing a value as text or JSON.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::Context;
use bashc::Target;
use bashc::protocol::{Caller, ExecResult, Owner, runtime};
use clap::Args;

use crate::render;

/// The variable that names the session when `--session` does not.
pub const SESSION_ENV: &str = "BASHD_SESSION";

// `--session` and `--owner-pid`. The session's default comes from `$BASHD_SESSION` at
// run time, not through clap's `env`, so that a usage error shows what the user typed
// and not a value taken from the environment. (A `//` comment: clap would take a doc
// comment here for the help page of every command that flattens these arguments.)
#[derive(Debug, Args)]
pub struct SessionArgs {
    /// The session to act in; default: $BASHD_SESSION, else `agent-<pid>` of the
    /// nearest ancestor that is not a shell or a wrapper.
    #[arg(long, value_name = "SESSION")]
    session: Option<String>,
    /// The process that owns the session (default: that same ancestor). When every
    /// owner has exited, the session's foreground jobs are killed, and its background
    /// jobs after the linger time (15 min) unless someone uses the session again.
    #[arg(long, value_name = "PID", value_parser = owner_pid)]
    owner_pid: Option<u32>,
}

/// `--owner-pid`: a live process other than init, which never exits (a session it
/// owned would never end); a usage error otherwise, and nothing is sent.
pub fn owner_pid(text: &str) -> Result<u32, String> {
    let pid: u32 = text
        .parse()
        .map_err(|_| format!("a process id, not {text:?}"))?;
    match pid {
        0 | 1 => Err(format!(
            "pid {pid} never exits, so a session it owned would never end; give the pid of the agent that owns the session"
        )),
        _ if !std::path::Path::new(&format!("/proc/{pid}")).exists() => Err(format!(
            "no process {pid} is running; give the pid of the agent that owns the session"
        )),
        _ => Ok(pid),
    }
}

impl SessionArgs {
    /// The session and owner a request acts for.
    pub fn caller(&self) -> Caller {
        // Walked once: the session's default and the owner both come from it, the
        // owner's start time from the walk's own read of the agent's /proc/PID/stat.
        let found = std::cell::OnceCell::new();
        let agent = || *found.get_or_init(bashc::find_agent);
        let session = match &self.session {
            Some(session) => session.clone(),
            None => remote_session(
                session_from_env().unwrap_or_else(|| format!("agent-{}", agent().pid)),
            ),
        };
        let owner = match self.owner_pid {
            Some(pid) => Owner::of(pid),
            None => agent(),
        };
        Caller {
            session,
            owner: Some(owner),
        }
    }
}

use bashc::HOST_ENV;

/// This machine's name, set once `--host` names another host: the default session
/// there is `<the local default>@<this hostname>` (DESIGN §14).
static REMOTE_SUFFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `local`, the session's default name here, as the default name of a session on
/// another host when one is the target.
pub fn remote_session(local: String) -> String {
    match REMOTE_SUFFIX.get() {
        // Cut to the 64 bytes a session id may have; a hostname is ASCII.
        Some(hostname) => format!("{local}@{hostname}").chars().take(64).collect(),
        None => local,
    }
}

/// The daemons `--host` (or `$BASHD_HOST`) names, in order; none for this machine's.
/// Only `jobs` takes several; `bridge` takes none, since it is the far end.
pub fn host_targets(
    hosts: &[String],
    local: &Target,
    command: &crate::Command,
) -> anyhow::Result<Vec<Target>> {
    let from_env = std::env::var(HOST_ENV).ok().filter(|h| !h.is_empty());
    let hosts: Vec<String> = match (hosts, from_env) {
        ([], Some(host)) => vec![host],
        (hosts, _) => hosts.to_vec(),
    };
    match command {
        crate::Command::Bridge if !hosts.is_empty() => anyhow::bail!(
            "bashc bridge serves this machine's bashd and takes no --host (unset {HOST_ENV} in the remote login environment)"
        ),
        crate::Command::Relay { .. } if !hosts.is_empty() => {
            anyhow::bail!("bashc relay takes its host as its argument, not --host")
        }
        crate::Command::Bridge | crate::Command::Relay { .. } | crate::Command::Jobs(_) => {}
        _ if hosts.len() > 1 => anyhow::bail!(
            "--host is given {} times, but only `bashc jobs` acts on several hosts; give one",
            hosts.len()
        ),
        _ => {}
    }
    if !hosts.is_empty() {
        let _ = REMOTE_SUFFIX.set(bashc::hostname());
    }
    hosts
        .iter()
        .map(|host| Target::remote(host, local.clone()).map_err(anyhow::Error::msg))
        .collect()
}

/// `$BASHD_SESSION`, when set and not empty.
pub fn session_from_env() -> Option<String> {
    std::env::var(SESSION_ENV).ok().filter(|s| !s.is_empty())
}

/// The daemon to talk to: the one of `--runtime-dir` (made absolute: the daemon and
/// the jobs get it as it is), else the one every bashd program resolves.
pub fn target(runtime_dir: Option<&Path>) -> anyhow::Result<Target> {
    Ok(match runtime_dir {
        Some(dir) => Target::local_at(
            std::path::absolute(dir)
                .with_context(|| format!("cannot make --runtime-dir {} absolute", dir.display()))?,
        ),
        None => Target::local(),
    })
}

/// The connection to the target's bashd, started if none is running. A daemon started
/// while others of this user serve other runtime dirs is said on stderr, unless the
/// runtime dir was named on purpose.
pub async fn connect(target: &Target) -> anyhow::Result<bashc::Client> {
    let client = bashc::connect(target).await?;
    crate::since::watch(client.inbox_handle());
    if let Some(note) = second_daemon_note(target, client.other_daemons()) {
        eprintln!("bashc: {note}");
    }
    Ok(client)
}

/// As [`connect`], through the blocking client: for the lean commands (`lean.rs`) on
/// this machine's bashd.
pub fn connect_blocking(target: &Target) -> anyhow::Result<bashc::BlockingClient> {
    let client = bashc::BlockingClient::connect(target)?;
    crate::since::watch(client.inbox_handle());
    if let Some(note) = second_daemon_note(target, client.other_daemons()) {
        eprintln!("bashc: {note}");
    }
    Ok(client)
}

/// What to say when connecting started a second daemon of this user (`others`, the
/// connection's [`bashc::Client::other_daemons`]), if anything.
pub fn second_daemon_note(
    target: &Target,
    others: Option<&[bashc::OtherDaemon]>,
) -> Option<String> {
    let others = others.filter(|o| !o.is_empty())?;
    if target.is_named() {
        return None;
    }
    Some(format!(
        "started bashd for {} while another of yours runs ({}): jobs of one are not seen by the other; use --runtime-dir DIR or BASHD_RUNTIME_DIR to choose one",
        target.runtime_dir().display(),
        bashc::describe_others(others)
    ))
}

/// This process's environment, as bytes, with the runtime dir of `target`: a job runs
/// with the environment of the one that asked for it, and a `bashc` inside the job
/// reaches the daemon that runs it, whatever this process's environment lacked.
pub fn environment(target: &Target) -> Vec<(Vec<u8>, Vec<u8>)> {
    use std::os::unix::ffi::OsStrExt;
    if target.host().is_some() {
        // None of it is sent to another host: the bridge there gives the job its own
        // login environment.
        return Vec::new();
    }
    let key = runtime::RUNTIME_DIR_ENV.as_bytes();
    let mut env: Vec<(Vec<u8>, Vec<u8>)> = std::env::vars_os()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .filter(|(k, _)| k != key)
        .collect();
    env.push((
        key.to_vec(),
        target.runtime_dir().as_os_str().as_bytes().to_vec(),
    ));
    env
}

/// A mistake on the command line that clap cannot see: bashc says it and exits 2,
/// having sent nothing (as clap's own usage errors do).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The command of `exec` and `policy check`: one word is a shell command as written
/// (`bashc exec -- 'echo $((1+1))'`); several are an argument vector, each word kept
/// whole (`bashc exec -- grep -rn "TODO: fix" .`), as `sudo`, `env` and `timeout` take
/// theirs; `-` alone reads the command from stdin. An empty command is a usage error.
pub fn command_text(words: &[String]) -> anyhow::Result<String> {
    let command = match words {
        [only] if only == "-" => {
            let mut command = String::new();
            std::io::stdin()
                .read_to_string(&mut command)
                .context("cannot read the command from stdin")?;
            command
        }
        [first, ..] if first == "-" => {
            return Err(UsageError(
                "`-` reads the command from stdin and takes no other words: give either `-` alone or the command".to_owned(),
            )
            .into());
        }
        [only] => only.clone(),
        words => words
            .iter()
            .map(|word| shell_word(word))
            .collect::<Vec<_>>()
            .join(" "),
    };
    if command.trim().is_empty() {
        return Err(UsageError(
            "the command is empty: give one (bashc exec -- 'make test'), or pipe it to bashc exec -".to_owned(),
        )
        .into());
    }
    Ok(command)
}

/// `word` as bash reads back one word with the same text: as it is when every
/// character is plain, else single-quoted. (`=` is quoted too, so that a first word
/// `A=1` stays a word and does not become an assignment.)
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+:,./-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Writes `text` to stdout. A reader that went away (`bashc jobs | head -1`) is not an
/// error: the rest is dropped quietly and bashc exits with the status it would have
/// had, as `git log | head` does.
pub fn write_stdout(text: &[u8]) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other.context("cannot write to stdout")?),
    }
}

/// Prints `value` as pretty JSON, or as the text `text` makes of it.
pub fn print<T: serde::Serialize>(
    json: bool,
    value: &T,
    text: impl FnOnce(&T) -> String,
) -> anyhow::Result<()> {
    if json {
        let mut value = serde_json::to_value(value)?;
        crate::since::add_to_json(&mut value);
        let mut bytes = serde_json::to_vec_pretty(&value)?;
        bytes.push(b'\n');
        write_stdout(&bytes)
    } else {
        write_stdout(text(value).as_bytes())
    }
}

/// Prints a job's result (of `exec`, `check`, `wait`, `kill`): its text, or its JSON
/// with the notices worded under `notice` besides the notices themselves. `whole` says
/// the result's streams count from the stream's first line (not a check's new lines),
/// so the note under a cut stream can name the lines it does not show.
pub fn print_result(json: bool, result: &ExecResult, whole: bool) -> anyhow::Result<()> {
    if json {
        return print(true, &crate::terminal::result_json(result)?, |_| {
            String::new()
        });
    }
    write_stdout(render::exec_text(result, whole).as_bytes())
}

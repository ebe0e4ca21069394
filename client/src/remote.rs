//! Reaching another host's daemon (DESIGN §14): `ssh HOST bashc bridge`, or the
//! command `[remote] bridge_command` (or `$BASHD_BRIDGE_COMMAND`) names, whose stdin and
//! stdout carry the protocol. One multiplexed SSH connection per host, its control
//! socket under the local runtime dir, makes a call cost a round trip on a warm master.
//!
//! What goes wrong on the way is said in the user's words: an ssh that cannot log in,
//! a host without `bashc` on its PATH, a far side of another protocol version.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use bashd_protocol::{
    FollowRequest, GrepRequest, JobRequest, JobsRequest, KillRequest, Request, SendRequest,
    WaitRequest,
};
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use crate::client::{Client, ClientError};

/// Overrides `[remote] bridge_command` (the same syntax): how to reach a host's bridge.
pub const BRIDGE_COMMAND_ENV: &str = "BASHD_BRIDGE_COMMAND";

/// How long an idle multiplexed master stays up after its last call.
const CONTROL_PERSIST: &str = "10m";

/// How much of ssh's stderr is kept to explain a failure.
const STDERR_KEPT: usize = 4096;

/// How long ssh has to exit once its stdout closed, before its status is read.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// How long ssh's stderr may stay open after ssh exited (a master it forked holds it).
const STDERR_WAIT: Duration = Duration::from_millis(200);

/// `[remote]` of the user's config file: how to reach a host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteConfig {
    /// A command run by `sh -c` that reaches a host's bridge; `{host}` and `{control}`
    /// (the control socket path for multiplexing) are replaced, shell-quoted.
    pub bridge_command: Option<String>,
    /// Where `bashc` is on the remote hosts, when not on their PATH.
    pub bashc_path: Option<String>,
}

impl RemoteConfig {
    /// `[remote]` of `$XDG_CONFIG_HOME/bashd/config.toml` (else
    /// `~/.config/bashd/config.toml`), with `$BASHD_BRIDGE_COMMAND` over it. A missing
    /// or unreadable file means the defaults: the daemon reports a broken one.
    pub fn load() -> RemoteConfig {
        let mut config = config_path()
            .and_then(|path| std::fs::read_to_string(path).ok())
            .and_then(|text| text.parse::<toml::Table>().ok())
            .and_then(|mut table| table.remove("remote"))
            .map(|remote| {
                let text = |key: &str| remote.get(key).and_then(|v| v.as_str()).map(str::to_owned);
                RemoteConfig {
                    bridge_command: text("bridge_command"),
                    bashc_path: text("bashc_path"),
                }
            })
            .unwrap_or_default();
        if let Some(command) = std::env::var(BRIDGE_COMMAND_ENV)
            .ok()
            .filter(|c| !c.is_empty())
        {
            config.bridge_command = Some(command);
        }
        config
    }
}

/// This machine's name, as `hostname` prints it: the suffix of the remote sessions it
/// names by default.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// Checks a host name before it reaches ssh's command line.
pub fn check_host(host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("--host needs a host name (as `ssh HOST` takes it)".to_owned());
    }
    if host.starts_with('-') || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{host:?} is not a host name: it must not start with - or hold spaces"
        ));
    }
    Ok(())
}

/// A connection to `host`'s daemon through its bridge, with the handshake done.
pub(crate) async fn connect_remote(host: &str, runtime_dir: &Path) -> Result<Client, ClientError> {
    let control_dir = runtime_dir.join("ssh");
    let config = RemoteConfig::load();
    let mut command = bridge_command(host, &control_dir, &config);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Err(e) = ensure_control_dir(&control_dir) {
        return Err(remote_error(
            host,
            format!("cannot make {}: {e}", control_dir.display()),
        ));
    }
    let mut child = command.spawn().map_err(|e| {
        remote_error(
            host,
            format!(
                "cannot run {}: {e} (install OpenSSH's client, or set [remote] bridge_command)",
                command.as_std().get_program().to_string_lossy()
            ),
        )
    })?;
    let stdin = child.stdin.take().expect("stdin was piped above");
    let stdout = child.stdout.take().expect("stdout was piped above");
    let stderr = child.stderr.take().expect("stderr was piped above");
    let said = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let stderr = tokio::spawn(keep_tail(stderr, said.clone()));
    match Client::handshake(stdout, stdin).await {
        Ok(mut client) => {
            client.remote = true;
            // ssh exits when the connection's end closes its stdin; reap it then.
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
            Ok(client)
        }
        Err(ClientError::Refused(reply)) => {
            let _ = child.start_kill();
            Err(ClientError::Refused(reply))
        }
        Err(e) => {
            let status = tokio::time::timeout(EXIT_WAIT, child.wait()).await;
            if status.is_err() {
                let _ = child.start_kill();
            }
            // A master ssh forked keeps stderr open as long as it lives: take what was
            // said by then.
            let _ = tokio::time::timeout(STDERR_WAIT, stderr).await;
            let said = String::from_utf8_lossy(
                &said.lock().expect("never poisoned: no panics while held"),
            )
            .into_owned();
            Err(explain(
                host,
                &config,
                status.ok().and_then(Result::ok),
                &said,
                e,
            ))
        }
    }
}

fn remote_error(host: &str, message: String) -> ClientError {
    ClientError::Remote {
        host: host.to_owned(),
        message,
    }
}

/// Why the bridge did not answer, from ssh's exit status and what it said.
fn explain(
    host: &str,
    config: &RemoteConfig,
    status: Option<ExitStatus>,
    said: &str,
    error: ClientError,
) -> ClientError {
    let said = said.trim();
    let last = said.lines().last().unwrap_or("").trim();
    let bashc = config.bashc_path.as_deref().unwrap_or("bashc");
    let message = match status.and_then(|s| s.code()) {
        Some(127) => format!(
            "{bashc} is not on the PATH of {host} ({last}): install it there (`cargo install --path client` and `cargo install --path daemon` in a bashd checkout), or set [remote] bashc_path in ~/.config/bashd/config.toml to where it is"
        ),
        Some(2) if said.contains("bridge") => format!(
            "the bashc on {host} has no `bridge` command, so it is older than this one: upgrade it there (`cargo install --path client` in a bashd checkout of this version)"
        ),
        Some(255) if !said.is_empty() => format!(
            "ssh could not reach {host}: {last} (check that `ssh {host} true` logs in without a password prompt; bashc runs ssh with BatchMode=yes)"
        ),
        Some(code) => format!(
            "the bridge on {host} ended (exit {code}) before it answered: {} ({error})",
            if said.is_empty() {
                "it said nothing"
            } else {
                last
            }
        ),
        None => format!("the bridge on {host} did not answer: {error} ({last})"),
    };
    remote_error(host, message)
}

/// Removes the owner a request names: on another host a local pid means nothing (or
/// another process), and the bridge, which the daemon there takes as the owner of a
/// request that names none, is the one whose end should make the session linger.
pub(crate) fn clear_owner(request: &mut Request) {
    match request {
        Request::Exec(params) => params.owner = None,
        Request::Jobs(JobsRequest { caller, .. })
        | Request::Check(JobRequest { caller, .. })
        | Request::Wait(WaitRequest { caller, .. })
        | Request::Kill(KillRequest { caller, .. })
        | Request::Follow(FollowRequest { caller, .. })
        | Request::Send(SendRequest { caller, .. })
        | Request::Grep(GrepRequest { caller, .. }) => caller.owner = None,
        _ => {}
    }
}

/// `ssh -T ... -- HOST bashc bridge`, multiplexed through a control socket in
/// `control_dir`; or the configured command, run by `sh -c`.
fn bridge_command(host: &str, control_dir: &Path, config: &RemoteConfig) -> Command {
    let control = control_dir.join("%C");
    let bashc = config.bashc_path.as_deref().unwrap_or("bashc");
    match &config.bridge_command {
        Some(template) => {
            let text = template
                .replace("{host}", &shell_quote(host))
                .replace("{control}", &shell_quote(&control.to_string_lossy()))
                .replace("{bashc}", bashc);
            let mut command = Command::new("sh");
            command.arg("-c").arg(format!("exec {text}"));
            command
        }
        None => {
            let mut command = Command::new("ssh");
            command
                .args(["-T", "-o", "BatchMode=yes", "-o", "ControlMaster=auto"])
                .arg("-o")
                .arg(format!("ControlPath={}", control.display()))
                .arg("-o")
                .arg(format!("ControlPersist={CONTROL_PERSIST}"))
                .args(["--", host, bashc, "bridge"]);
            command
        }
    }
}

/// `text` in single quotes, for `sh`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The directory of the control sockets, private to the user.
fn ensure_control_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir)
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Keeps the last [`STDERR_KEPT`] bytes ssh writes to stderr in `kept`, shared with
/// the task that explains a failure (a std `Mutex`: held for a copy, never across an
/// await).
async fn keep_tail(
    mut stderr: tokio::process::ChildStderr,
    kept: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
) {
    let mut chunk = [0u8; 1024];
    while let Ok(n @ 1..) = stderr.read(&mut chunk).await {
        let mut kept = kept.lock().expect("never poisoned: no panics while held");
        kept.extend_from_slice(&chunk[..n]);
        if kept.len() > STDERR_KEPT {
            let excess = kept.len() - STDERR_KEPT;
            kept.drain(..excess);
        }
    }
}

fn config_path() -> Option<PathBuf> {
    let non_empty = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let base = non_empty("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("bashd").join("config.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_that_looks_like_an_option_is_refused() {
        assert!(check_host("-oProxyCommand=x").is_err());
        assert!(check_host("a b").is_err());
        assert!(check_host("").is_err());
        assert!(check_host("user@build-box.example").is_ok());
    }

    #[test]
    fn the_configured_command_gets_the_host_quoted() {
        let config = RemoteConfig {
            bridge_command: Some("ssh -F cfg {host} {bashc} bridge".to_owned()),
            bashc_path: Some("/opt/bashc".to_owned()),
        };
        let command = bridge_command("it's", Path::new("/r/ssh"), &config);
        let args: Vec<_> = command.as_std().get_args().collect();
        assert_eq!(args[1], r"exec ssh -F cfg 'it'\''s' /opt/bashc bridge");
    }
}

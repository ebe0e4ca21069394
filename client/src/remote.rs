//! Reaching another host's daemon (DESIGN §14): `ssh HOST bashc bridge`, or the
//! command `[remote] bridge_command` (or `$BASHD_BRIDGE_COMMAND`) names, whose stdin and
//! stdout carry the protocol. That command is run by the host's relay (`relay.rs`),
//! which keeps it open and carries every call over it; the SSH connection under it is
//! multiplexed too (a control socket under the local runtime dir), so a new relay
//! costs an SSH session on a warm master, not a handshake.
//!
//! What goes wrong on the way is said in the user's words: an ssh that cannot log in,
//! a host without `bashc` on its PATH, a far side of another protocol version.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use bashd_protocol::Request;
use tokio::io::AsyncReadExt;
use tokio::process::Command;

use crate::client::{Client, ClientError};

pub use bashd_protocol::config::BRIDGE_COMMAND_ENV;

/// How long an idle multiplexed master stays up after its last call.
const CONTROL_PERSIST: &str = "10m";

/// How much of ssh's stderr is kept to explain a failure.
pub(crate) const STDERR_KEPT: usize = 4096;

/// How long ssh has to exit once its stdout closed, before its status is read.
pub(crate) const EXIT_WAIT: Duration = Duration::from_secs(5);

/// How long ssh's stderr may stay open after ssh exited (a master it forked holds it).
pub(crate) const STDERR_WAIT: Duration = Duration::from_millis(200);

/// `[remote]` of the user's config file: how to reach a host. The daemon reads the
/// file through the same type, so the two say the same of it.
pub type RemoteConfig = bashd_protocol::config::Remote;

/// `[remote]` of `$XDG_CONFIG_HOME/bashd/config.toml` (else
/// `~/.config/bashd/config.toml`), with `$BASHD_BRIDGE_COMMAND` over it; a missing file
/// means the defaults. A broken one is refused in the daemon's words (`bashd
/// --check-config` says the same): its `[remote]` cannot be trusted either.
pub fn load_remote() -> Result<RemoteConfig, bashd_protocol::config::ConfigError> {
    bashd_protocol::config::ConfigFile::load().map(|file| file.remote.in_force())
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

/// A connection to `host`'s daemon through the host's relay (started if none runs),
/// with the handshake done.
pub(crate) async fn connect_remote(host: &str, runtime_dir: &Path) -> Result<Client, ClientError> {
    // A relay that was ending when it took the connection (or held it in its backlog)
    // closes it unanswered, or resets it: the second try starts a new one.
    for attempt in 0..2 {
        let (stream, socket) = crate::relay::connect_relay(host, runtime_dir).await?;
        let relay = stream
            .peer_cred()
            .ok()
            .and_then(|cred| cred.pid())
            .map(|pid| std::sync::Arc::new((pid as u32, socket)));
        let (read, write) = stream.into_split();
        match Client::handshake(read, write).await {
            Ok(mut client) => {
                client.host = Some(host.into());
                client.relay = relay;
                return Ok(client);
            }
            Err(ClientError::Disconnected | ClientError::Frame(_)) if attempt == 0 => continue,
            Err(e @ (ClientError::Disconnected | ClientError::Frame(_))) => {
                let why = match e {
                    ClientError::Frame(e) => format!(" ({e})"),
                    _ => String::new(),
                };
                return Err(remote_error(
                    host,
                    format!(
                        "the relay to {host} closed the connection before bashd there answered{why}; see {}",
                        crate::relay::RelayPaths::new(
                            runtime_dir,
                            host,
                            &load_remote().unwrap_or_default()
                        )
                        .log
                        .display()
                    ),
                ));
            }
            Err(ClientError::HandshakeTimeout(after)) => {
                return Err(remote_error(
                    host,
                    format!("bashd there did not answer the handshake within {after:?}"),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    unreachable!("the loop returns on its second try")
}

pub(crate) fn remote_error(host: &str, message: String) -> ClientError {
    ClientError::Remote {
        host: host.to_owned(),
        message,
    }
}

/// Why the bridge did not answer, from ssh's exit status and what it said.
pub(crate) fn explain(
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
        Some(_) if said.contains("bad frame from the caller") => format!(
            "the bashc on {host} has no relay mode, so it is older than this one: upgrade it there (`cargo install --path client` in a bashd checkout of this version)"
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
    if let Request::WaitMany(many) = request {
        for wait in &mut many.waits {
            wait.caller.owner = None;
        }
    }
    if let Some(owner) = request.owner_mut() {
        *owner = None;
    }
}

/// `ssh -T ... -- HOST bashc bridge`, multiplexed through a control socket in
/// `control_dir`; or the configured command, run by `sh -c`.
pub(crate) fn bridge_command(host: &str, control_dir: &Path, config: &RemoteConfig) -> Command {
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
                // A link that dies without a word ends the relay within a minute, so
                // its calls fail instead of waiting.
                .args([
                    "-o",
                    "ServerAliveInterval=20",
                    "-o",
                    "ServerAliveCountMax=3",
                ])
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
pub(crate) fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
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
pub(crate) async fn keep_tail(
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

/// The config file every bashd program reads: `$XDG_CONFIG_HOME/bashd/config.toml`, else
/// `~/.config/bashd/config.toml`.
pub fn config_path() -> Option<PathBuf> {
    bashd_protocol::config::default_path()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_to_another_host_names_no_owner_of_this_one() {
        use bashd_protocol::{
            Caller, JobRef, JobRequest, OutputRequest, Owner, PtySize, ResizeRequest, StreamName,
        };
        let caller = Caller {
            session: "s".into(),
            owner: Some(Owner::of(std::process::id())),
        };
        let job = JobRef::Id("j1".into());
        let requests = [
            Request::Output(OutputRequest {
                job: job.clone(),
                stream: StreamName::Stdout,
                offset: 1,
                limit: None,
                caller: caller.clone(),
                any_session: false,
                max_bytes: None,
                from_end: false,
            }),
            Request::Screen(JobRequest {
                caller: caller.clone(),
                job: job.clone(),
                any_session: false,
            }),
            Request::Resize(ResizeRequest {
                caller: caller.clone(),
                job: job.clone(),
                size: PtySize::default(),
                any_session: false,
            }),
            Request::Check(JobRequest {
                caller,
                job,
                any_session: false,
            }),
        ];
        for mut request in requests {
            clear_owner(&mut request);
            let shown = format!("{request:?}");
            assert_eq!(request.owner_mut(), Some(&mut None), "{shown}");
        }
    }

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
            ..RemoteConfig::default()
        };
        let command = bridge_command("it's", Path::new("/r/ssh"), &config);
        let args: Vec<_> = command.as_std().get_args().collect();
        assert_eq!(args[1], r"exec ssh -F cfg 'it'\''s' /opt/bashc bridge");
    }
}

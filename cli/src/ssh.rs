//! The relay's ssh: the command that reaches a host's bridge (`ssh HOST bashc bridge`,
//! multiplexed, or `[remote] bridge_command`), what it said on stderr, and why it did
//! not answer, in the user's words.

use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use bashc::{ClientError, RemoteConfig};
use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// How long an idle multiplexed master stays up after its last call.
const CONTROL_PERSIST: &str = "10m";

/// How much of ssh's stderr is kept to explain a failure.
const STDERR_KEPT: usize = 4096;

/// How long ssh has to exit once its stdout closed, before its status is read.
pub const EXIT_WAIT: Duration = Duration::from_secs(5);

/// How long ssh's stderr may stay open after ssh exited (a master it forked holds it).
pub const STDERR_WAIT: Duration = Duration::from_millis(200);

/// Why the bridge did not answer, from ssh's exit status and what it said.
pub fn explain(
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
    ClientError::Remote {
        host: host.to_owned(),
        message,
    }
}

/// `ssh -T ... -- HOST bashc bridge`, multiplexed through a control socket in
/// `control_dir`; or the configured command, run by `sh -c`.
pub fn bridge_command(host: &str, control_dir: &Path, config: &RemoteConfig) -> Command {
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

/// Keeps the last [`STDERR_KEPT`] bytes ssh writes to stderr in `kept`, shared with
/// the task that explains a failure (a std `Mutex`: held for a copy, never across an
/// await).
pub async fn keep_tail(
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

#[cfg(test)]
mod tests {
    use super::*;

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

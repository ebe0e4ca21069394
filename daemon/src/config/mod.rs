//! The daemon's settings (DESIGN §11), made from the config file's types
//! (`bashd_protocol::config`, which bashc reads too): each section as the daemon uses
//! it, with durations, paths with `~` expanded, the hardening set merged with `[env]`
//! and the command policy built. The check only the daemon can make (`~` under its
//! `HOME`) runs here, placed at the file's line like the rest; the others are the
//! file's (`ConfigFile::check`), which bashc makes too.

mod effective;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bashd_protocol::config::{self as file, ConfigFile, Refusal};
use bashd_protocol::{JobLimits, OnTimeout};

use crate::network::AllowList;
use crate::policy::{CustomRule, Policy};
use crate::sandbox::{self, SandboxConfig};

pub use bashd_protocol::config::{ConfigError, Mechanism, OnCancel, OnStraggler, default_path};

#[derive(Debug, Clone)]
pub struct Config {
    pub limits: Limits,
    pub timeouts: Timeouts,
    pub sessions: Sessions,
    pub containment: ContainmentConfig,
    /// Added to every job's environment over the client's own (DESIGN §8): the
    /// hardening set, with `[env]`'s variables added or overriding and its `unset`
    /// ones removed.
    pub env: Vec<(String, String)>,
    /// The command policy: built-in rules less `disable`, plus `[[policy.deny]]`.
    pub policy: Policy,
    /// `[sandbox]`: the sandbox jobs get and the floor a client may not go below.
    pub sandbox: SandboxConfig,
    /// `[mcp]`: how the daemon treats MCP tool calls (requests marked `mcp_call`).
    pub mcp: McpConfig,
    /// `[sandbox] allow_hosts`, with the file it is written in: what the proxy lets a
    /// job whose network is `allow-list` reach (issue 43).
    pub allow_list: AllowList,
    /// The file as read, defaults filled in: what `bashd --check-config` shows, and
    /// the sections bashc reads (`[remote]`, `[mcp.clients]`, `[env] pass`), which the
    /// daemon only checks.
    pub file: ConfigFile,
}

/// `[mcp]` (DESIGN §12) as the daemon uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpConfig {
    /// `max_call_secs`: an MCP call is answered within this; a job still running then
    /// moves to the background.
    pub max_call: Duration,
    /// `on_cancel`: what a cancelled `bash` call does to its job.
    pub on_cancel: OnCancel,
}

#[derive(Debug, Clone)]
pub struct Limits {
    pub max_lines: u32,
    pub max_bytes: u32,
    pub max_spill_bytes: u64,
    pub max_frame_bytes: usize,
    pub max_command_bytes: usize,
    /// What a job may use when its request does not say (`memory`, `cpu`, `pids`).
    pub job: JobLimits,
    /// Bytes of spill files one session may hold on disk; past it the files of its
    /// oldest finished jobs go first.
    pub max_session_spill_bytes: u64,
    /// Bytes of spill files all sessions together may hold on disk.
    pub max_total_spill_bytes: u64,
    /// Connections served at once; the one over it is told so and closed.
    pub max_connections: usize,
}

#[derive(Debug, Clone)]
pub struct Timeouts {
    pub default_secs: u64,
    pub slow_secs: u64,
    pub background_secs: u64,
    /// What a foreground job that passes its timeout becomes, unless the request says.
    pub on_timeout: OnTimeout,
    pub kill_grace: Duration,
}

#[derive(Debug, Clone)]
pub struct Sessions {
    /// How long a session whose owners have all exited keeps its background jobs.
    pub linger: Duration,
    /// What happens to processes a foreground job's shell leaves running.
    pub on_straggler: OnStraggler,
    /// Finished jobs each session keeps listed, with their output, until it ends.
    pub keep_finished: usize,
}

/// `[containment]`: how the daemon holds its jobs' processes, chosen at start (a
/// reload does not change it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainmentConfig {
    /// `mechanism`: what holds a job's processes together.
    pub mechanism: Mechanism,
    /// `cgroup`: a cgroup v2 directory the daemon may write, under which each job gets
    /// a cgroup of its own.
    pub cgroup: Option<PathBuf>,
}

/// Every job's environment unless `[env]` says otherwise (DESIGN §8): nothing waits
/// for a pager, an editor or a prompt, and no colour codes reach the agent.
const HARDENING: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", ""),
    ("GIT_EDITOR", "true"),
    ("EDITOR", "true"),
    ("VISUAL", "true"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
];

impl Default for Config {
    fn default() -> Self {
        Config::from_file(ConfigFile::default())
            .expect("the defaults pass the daemon's checks: every rule they name is built in")
    }
}

impl Config {
    /// Loads `path`, or the default path when `None`; a missing default file means
    /// all defaults, a missing named file is an error.
    pub fn load(path: Option<&Path>) -> Result<(Config, Option<PathBuf>), ConfigError> {
        let (_, mut config, read) =
            ConfigFile::load_with(path, |file| Config::from_file(file.clone()))?;
        config.allow_list = AllowList::new(
            config.allow_list.entries().to_vec(),
            allow_list_origin(
                read.as_deref()
                    .or(path)
                    .map(Path::to_path_buf)
                    .or_else(default_path),
            ),
        );
        Ok((config, read))
    }

    /// Parses the text of a config file; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let (_, mut config) =
            ConfigFile::parse_with(text, path, |file| Config::from_file(file.clone()))?;
        config.allow_list = AllowList::new(
            config.allow_list.entries().to_vec(),
            allow_list_origin(Some(path.to_path_buf())),
        );
        Ok(config)
    }

    /// The settings of `file`, or what in it only the daemon can refuse.
    fn from_file(file: ConfigFile) -> Result<Config, Refusal> {
        let l = &file.limits;
        let t = &file.timeouts;
        let s = &file.sessions;
        let limits = Limits {
            max_lines: l.max_lines.get() as u32,
            max_bytes: l.max_bytes.get() as u32,
            max_spill_bytes: l.max_spill_bytes.get(),
            max_frame_bytes: l.max_frame_bytes.get() as usize,
            max_command_bytes: l.max_command_bytes.get() as usize,
            job: JobLimits {
                memory_bytes: l.memory.map(|size| size.0),
                cpu_millicores: l.cpu.map(|cores| cores.0),
                pids: l.pids.map(|pids| pids.get() as u32),
            },
            max_session_spill_bytes: l.max_session_spill_bytes.get(),
            max_total_spill_bytes: l.max_total_spill_bytes.get(),
            max_connections: l.max_connections.get() as usize,
        };
        let timeouts = Timeouts {
            default_secs: t.default_secs.get(),
            slow_secs: t.slow_secs.get(),
            background_secs: t.background_secs.get(),
            on_timeout: t.on_timeout,
            kill_grace: Duration::from_millis(t.kill_grace_ms.get()),
        };
        let sessions = Sessions {
            linger: Duration::from_secs(s.linger_secs.get()),
            on_straggler: s.on_straggler,
            keep_finished: s.keep_finished.get() as usize,
        };
        let containment = ContainmentConfig {
            mechanism: file.containment.mechanism,
            cgroup: file
                .containment
                .cgroup
                .as_ref()
                .map(|dir| PathBuf::from(&dir.0)),
        };
        let mcp = McpConfig {
            max_call: file.mcp.max_call(),
            on_cancel: file.mcp.on_cancel,
        };
        Ok(Config {
            limits,
            timeouts,
            sessions,
            containment,
            env: environment(&file.env),
            policy: policy(&file.policy),
            sandbox: sandbox_config(&file.sandbox)?,
            mcp,
            allow_list: AllowList::new(
                file.sandbox.allow_hosts.0.clone(),
                allow_list_origin(default_path()),
            ),
            file,
        })
    }
}

/// Where a refusal tells a person to add a host: the key in the file read, or in the
/// file the daemon would read when there is none.
fn allow_list_origin(file: Option<PathBuf>) -> String {
    match file {
        Some(file) => format!("[sandbox] allow_hosts in {}", file.display()),
        None => "[sandbox] allow_hosts in bashd's config file".to_owned(),
    }
}

/// The hardening set with `[env]` merged in: a removed variable is the client's again,
/// if it has one.
fn environment(env: &file::Env) -> Vec<(String, String)> {
    let mut vars: Vec<(String, String)> = HARDENING
        .iter()
        .filter(|(name, _)| !env.unset.iter().any(|unset| unset == name))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    for (name, value) in &env.set {
        match vars.iter_mut().find(|(k, _)| k == name) {
            Some(var) => var.1 = value.clone(),
            None => vars.push((name.clone(), value.clone())),
        }
    }
    vars
}

/// The built-in rules less those `[policy] disable` names (built-in rules, as the
/// file's own check made sure), plus `[[policy.deny]]`.
fn policy(source: &file::Policy) -> Policy {
    let disabled = &source.disable.0;
    let custom = source.deny.0.iter().map(|rule| CustomRule {
        id: rule.id.0.clone(),
        command: rule.command.0.clone(),
        args: rule.args.0.clone(),
        message: rule.message.0.clone(),
    });
    Policy::new(disabled.clone(), custom.collect())
}

/// `[sandbox]` with its paths under the daemon's `HOME`. A default credential store
/// that cannot be placed (no `HOME`) is left out, as the daemon has no home to guard.
fn sandbox_config(section: &file::Sandbox) -> Result<SandboxConfig, Refusal> {
    let paths = |key: &str, list: &file::Strings| -> Result<Vec<PathBuf>, Refusal> {
        let mut paths = Vec::new();
        for path in &list.0 {
            match sandbox::expand_home(path) {
                Ok(path) => paths.push(path),
                Err(_)
                    if key == "deny_read" && file::DEFAULT_DENY_READ.contains(&path.as_str()) => {}
                Err(e) => {
                    return Err(Refusal::at(
                        &["sandbox", key],
                        format!("sandbox.{key}: {e}"),
                    ));
                }
            }
        }
        Ok(paths)
    };
    Ok(SandboxConfig {
        default: section.default,
        network: section.network,
        writable: paths("writable", &section.writable)?,
        deny_read: paths("deny_read", &section.deny_read)?,
        unix_sockets: paths("unix_sockets", &section.unix_sockets)?,
        floor: section.floor,
        ask: std::time::Duration::from_secs(section.ask_secs.get()),
    })
}

#[cfg(test)]
mod tests;

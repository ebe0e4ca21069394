//! The daemon's settings (DESIGN §11): defaults for every key, overridden by a TOML
//! file: `[limits]`, `[timeouts]`, `[sessions]`, `[containment]`, `[env]`, `[policy]`
//! and `[mcp]`.
//! An unknown key or a bad value is an error naming the file, the line and the key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bashd_protocol::{JobLimits, OnTimeout, limits};

use crate::policy::{BUILTIN_RULES, CustomRule, Policy};
use crate::sandbox::{self, SandboxConfig};
use bashd_protocol::{Network, SandboxProfile};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

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
    /// `[policy]` as written, which [`Policy`] does not give back: what
    /// `bashd --check-config` shows.
    pub policy_source: PolicySource,
    /// `[sandbox]`: the sandbox jobs get and the floor a client may not go below.
    pub sandbox: SandboxConfig,
    /// `[mcp]`: how the daemon treats MCP tool calls (requests marked `mcp_call`).
    pub mcp: McpConfig,
    /// `[remote]` as written: bashc reads it (DESIGN §14), the daemon only checks it
    /// and shows it in `bashd --check-config`.
    pub remote: RemoteSource,
    /// `[mcp.clients."NAME"]`: how much of a result each MCP client shows whole
    /// (`result_lines`, `result_bytes`, `error_result_bytes`). Read by `bashc mcp`,
    /// which fits results to it; checked here, with the rest of the file.
    pub mcp_clients: Vec<(String, ClientBudget)>,
    /// `[env] pass`: the agent's own credentials that `bashc mcp` passes into jobs all
    /// the same (it keeps them out by default). Read by `bashc mcp`; checked here.
    pub env_pass: Vec<String>,
}

/// One `[mcp.clients."NAME"]`; a key not given keeps `bashc mcp`'s figure for the
/// client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientBudget {
    pub result_lines: Option<u64>,
    pub result_bytes: Option<u64>,
    pub error_result_bytes: Option<u64>,
}

/// `[remote]` as the file gave it; `None` is bashc's default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteSource {
    pub bridge_command: Option<String>,
    pub bashc_path: Option<String>,
    pub relay_idle_secs: Option<u64>,
}

/// bashc's `[remote] relay_idle_secs` when the file says none (its
/// `relay::DEFAULT_IDLE`), shown by `--check-config`.
const DEFAULT_RELAY_IDLE_SECS: u64 = 600;

/// `[mcp]` (DESIGN §12): the bounds of MCP tool calls, kept in the daemon's config so
/// that one file, reloaded on SIGHUP, rules every `bashc mcp` of the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpConfig {
    /// `max_call_secs`: an MCP call is answered within this; a job still running then
    /// moves to the background. Below the 60 s after which common clients give up.
    pub max_call: Duration,
    /// `on_cancel`: what a cancelled `bash` call does to its job.
    pub on_cancel: OnCancel,
}

/// `mcp.on_cancel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnCancel {
    /// Kill the job (`ended_by = cancel`).
    Kill,
    /// Move it to the background, as a timeout with `on_timeout = background` does.
    Background,
}

/// The `[policy]` section as the file gave it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicySource {
    /// Built-in rules switched off, in the file's order.
    pub disabled: Vec<String>,
    pub custom: Vec<CustomRule>,
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

/// Default `limits.max_session_spill_bytes`: 1 GiB.
pub const DEFAULT_MAX_SESSION_SPILL_BYTES: u64 = 1 << 30;
/// Default `limits.max_total_spill_bytes`: 4 GiB.
pub const DEFAULT_MAX_TOTAL_SPILL_BYTES: u64 = 4 << 30;
/// Default `limits.max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

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

/// `containment.mechanism`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mechanism {
    /// A per-job resident, in a cgroup of its own when one can be made: what holds.
    #[default]
    Auto,
    /// Process group and cookie only: what a job can shed (`env -i setsid`). For
    /// comparison, and for a system without `bashd-resident`.
    Scan,
}

/// `sessions.on_straggler`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnStraggler {
    /// The call returns; the survivors stay, as a background job.
    Background,
    Kill,
}

/// Default `sessions.linger_secs` (DESIGN §3).
pub const DEFAULT_LINGER_SECS: u64 = 900;
/// Default `sessions.keep_finished`: each finished job holds at most its limits of
/// output in memory, so this bounds a session's memory.
pub const DEFAULT_KEEP_FINISHED: usize = 100;

impl Default for Config {
    fn default() -> Self {
        let hardening = [
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
        Config {
            limits: Limits {
                max_lines: limits::DEFAULT_MAX_LINES,
                max_bytes: limits::DEFAULT_MAX_BYTES,
                max_spill_bytes: limits::DEFAULT_MAX_SPILL_BYTES,
                max_frame_bytes: limits::MAX_FRAME_BYTES,
                max_command_bytes: limits::DEFAULT_MAX_COMMAND_BYTES,
                job: JobLimits::default(),
                max_session_spill_bytes: DEFAULT_MAX_SESSION_SPILL_BYTES,
                max_total_spill_bytes: DEFAULT_MAX_TOTAL_SPILL_BYTES,
                max_connections: DEFAULT_MAX_CONNECTIONS,
            },
            timeouts: Timeouts {
                default_secs: limits::DEFAULT_TIMEOUT_SECS,
                slow_secs: limits::SLOW_TIMEOUT_SECS,
                background_secs: limits::BACKGROUND_TIMEOUT_SECS,
                on_timeout: OnTimeout::Background,
                kill_grace: Duration::from_millis(limits::DEFAULT_KILL_GRACE_MS),
            },
            sessions: Sessions {
                linger: Duration::from_secs(DEFAULT_LINGER_SECS),
                on_straggler: OnStraggler::Background,
                keep_finished: DEFAULT_KEEP_FINISHED,
            },
            containment: ContainmentConfig::default(),
            env: hardening
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            policy: Policy::default(),
            policy_source: PolicySource::default(),
            sandbox: SandboxConfig::default(),
            mcp: McpConfig {
                max_call: Duration::from_secs(limits::DEFAULT_MCP_MAX_CALL_SECS),
                on_cancel: OnCancel::Kill,
            },
            remote: RemoteSource::default(),
            mcp_clients: Vec::new(),
            env_pass: Vec::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// `$XDG_CONFIG_HOME/bashd/config.toml`, else `~/.config/bashd/config.toml`.
pub fn default_path() -> Option<PathBuf> {
    let non_empty = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    let base = non_empty("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("bashd").join("config.toml"))
}

impl Config {
    /// Loads `path`, or the default path when `None`; a missing default file means
    /// all defaults, a missing named file is an error.
    pub fn load(path: Option<&Path>) -> Result<(Config, Option<PathBuf>), ConfigError> {
        let (path, must_exist) = match path {
            Some(path) => (path.to_owned(), true),
            None => match default_path() {
                Some(path) => (path, false),
                None => return Ok((Config::default(), None)),
            },
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok((Config::parse(&text, &path)?, Some(path))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => {
                Ok((Config::default(), None))
            }
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }

    /// Parses the text of a config file; `path` only names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let file = File { text, path };
        let root = DeTable::parse(text).map_err(|e| {
            let line = e.span().map_or(1, |span| file.line_of(span.start));
            file.error_at(line, e.message().trim_end().to_owned())
        })?;
        let mut config = Config::default();
        for (key, value) in root.get_ref() {
            let table = file.table(key, value)?;
            match key.get_ref().as_ref() {
                "limits" => file.limits(table, &mut config.limits)?,
                "timeouts" => file.timeouts(table, &mut config.timeouts)?,
                "sessions" => file.sessions(table, &mut config.sessions)?,
                "containment" => file.containment(table, &mut config.containment)?,
                "env" => file.env(table, &mut config.env, &mut config.env_pass)?,
                "sandbox" => file.sandbox(key, table, &mut config.sandbox)?,
                "mcp" => file.mcp(table, &mut config.mcp, &mut config.mcp_clients)?,
                "policy" => {
                    let source = file.policy(table)?;
                    config.policy = Policy::new(source.disabled.clone(), source.custom.clone());
                    config.policy_source = source;
                }
                // Read by bashc, not the daemon (DESIGN §14); checked here so that a
                // mistake in it is said where every other one is.
                "remote" => file.remote(table, &mut config.remote)?,
                other => {
                    return Err(file.error(
                        key,
                        format!(
                            "unknown section [{other}]; known: [limits], [timeouts], [sessions], [containment], [env], [policy], [sandbox], [mcp], [remote]"
                        ),
                    ));
                }
            }
        }
        Ok(config)
    }
}

type Key<'i> = Spanned<std::borrow::Cow<'i, str>>;
type Value<'i> = Spanned<DeValue<'i>>;

struct File<'a> {
    text: &'a str,
    path: &'a Path,
}

impl File<'_> {
    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .matches('\n')
            .count()
            + 1
    }

    fn error_at(&self, line: usize, message: String) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_owned(),
            line,
            message,
        }
    }

    fn error(&self, key: &Key<'_>, message: String) -> ConfigError {
        self.error_at(self.line_of(key.span().start), message)
    }

    fn table<'v, 'i>(
        &self,
        key: &Key<'_>,
        value: &'v Value<'i>,
    ) -> Result<&'v DeTable<'i>, ConfigError> {
        match value.get_ref() {
            DeValue::Table(table) => Ok(table),
            _ => Err(self.error(
                key,
                format!(
                    "`{}` must be a section ([{}])",
                    key.get_ref(),
                    key.get_ref()
                ),
            )),
        }
    }

    /// An integer in `min..=max`, for the key `section.key`.
    fn integer(
        &self,
        section: &str,
        key: &Key<'_>,
        value: &Value<'_>,
        min: u64,
        max: u64,
    ) -> Result<u64, ConfigError> {
        let name = format!("{section}.{}", key.get_ref());
        let number = match value.get_ref() {
            DeValue::Integer(i) => u64::from_str_radix(i.as_str(), i.radix()).ok(),
            _ => None,
        };
        match number {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(self.error(
                key,
                format!("{name} must be a whole number from {min} to {max}"),
            )),
        }
    }

    /// A string, integer or float value as text, for the parsers that read limits as
    /// people write them; anything else becomes text no parser takes.
    fn scalar_text(&self, value: &Value<'_>) -> String {
        match value.get_ref() {
            DeValue::String(s) => s.to_string(),
            DeValue::Integer(i) => i.as_str().to_owned(),
            DeValue::Float(f) => f.as_str().to_owned(),
            _ => "(not a string or number)".to_owned(),
        }
    }

    fn unknown(&self, section: &str, key: &Key<'_>, known: &[&str]) -> ConfigError {
        self.error(
            key,
            format!(
                "unknown key {section}.{}; known keys of [{section}]: {}",
                key.get_ref(),
                known.join(", ")
            ),
        )
    }

    /// `[remote]`: `bridge_command` and `bashc_path`, both strings, and
    /// `relay_idle_secs`, which bashc reads.
    fn remote(&self, table: &DeTable<'_>, remote: &mut RemoteSource) -> Result<(), ConfigError> {
        const KNOWN: &[&str] = &["bridge_command", "bashc_path", "relay_idle_secs"];
        for (key, value) in table {
            if !KNOWN.contains(&key.get_ref().as_ref()) {
                return Err(self.unknown("remote", key, KNOWN));
            }
            if key.get_ref() == "relay_idle_secs" {
                // A day at most: a relay holds an SSH connection open. At least the
                // floor bashc keeps (`relay::MIN_IDLE`): a relay idle at once would
                // end before the call that started it connects.
                match self.integer("remote", key, value, 5, 86_400) {
                    Ok(secs) => remote.relay_idle_secs = Some(secs),
                    Err(_) => return Err(self.error(
                        key,
                        "remote.relay_idle_secs must be a whole number from 5 to 86400: a relay needs a few seconds to take the call that started it, so 0 cannot turn relays off (5 ends one soon after each call)"
                            .to_owned(),
                    )),
                }
                continue;
            }
            let DeValue::String(text) = value.get_ref() else {
                return Err(self.error(key, format!("remote.{} must be a string", key.get_ref())));
            };
            let text = Some(text.to_string());
            match key.get_ref().as_ref() {
                "bridge_command" => remote.bridge_command = text,
                _ => remote.bashc_path = text,
            }
        }
        Ok(())
    }

    fn limits(&self, table: &DeTable<'_>, limits: &mut Limits) -> Result<(), ConfigError> {
        const KNOWN: &[&str] = &[
            "max_lines",
            "max_bytes",
            "max_spill_bytes",
            "max_frame_bytes",
            "max_command_bytes",
            "memory",
            "cpu",
            "pids",
            "max_session_spill_bytes",
            "max_total_spill_bytes",
            "max_connections",
        ];
        let frame_max = limits::MAX_FRAME_BYTES as u64;
        for (key, value) in table {
            match key.get_ref().as_ref() {
                "max_lines" => {
                    limits.max_lines =
                        self.integer("limits", key, value, 1, u32::MAX.into())? as u32
                }
                "max_bytes" => {
                    limits.max_bytes =
                        self.integer("limits", key, value, 1, limits::MAX_SHOWN_BYTES.into())?
                            as u32
                }
                "max_spill_bytes" => {
                    limits.max_spill_bytes = self.integer("limits", key, value, 0, 1 << 40)?
                }
                "max_frame_bytes" => {
                    limits.max_frame_bytes =
                        self.integer("limits", key, value, 64 * 1024, frame_max)? as usize
                }
                "max_command_bytes" => {
                    limits.max_command_bytes =
                        self.integer("limits", key, value, 1, frame_max / 2)? as usize
                }
                // Written as on the command line: `memory = "2G"`, `cpu = 1.5`.
                "memory" => {
                    let text = self.scalar_text(value);
                    limits.job.memory_bytes = Some(
                        limits::parse_size(&text)
                            .map_err(|e| self.error(key, format!("limits.memory: {e}")))?,
                    )
                }
                "cpu" => {
                    let text = self.scalar_text(value);
                    limits.job.cpu_millicores = Some(
                        limits::parse_cpu(&text)
                            .map_err(|e| self.error(key, format!("limits.cpu: {e}")))?,
                    )
                }
                "pids" => {
                    limits.job.pids =
                        Some(self.integer("limits", key, value, 1, u32::MAX.into())? as u32)
                }
                "max_session_spill_bytes" => {
                    limits.max_session_spill_bytes =
                        self.integer("limits", key, value, 0, 1 << 50)?
                }
                "max_total_spill_bytes" => {
                    limits.max_total_spill_bytes = self.integer("limits", key, value, 0, 1 << 50)?
                }
                "max_connections" => {
                    limits.max_connections =
                        self.integer("limits", key, value, 1, 1 << 20)? as usize
                }
                _ => return Err(self.unknown("limits", key, KNOWN)),
            }
        }
        Ok(())
    }

    fn timeouts(&self, table: &DeTable<'_>, timeouts: &mut Timeouts) -> Result<(), ConfigError> {
        const KNOWN: &[&str] = &[
            "default_secs",
            "slow_secs",
            "background_secs",
            "on_timeout",
            "kill_grace_ms",
        ];
        let (min, max) = (limits::MIN_TIMEOUT_SECS, limits::MAX_TIMEOUT_SECS);
        for (key, value) in table {
            match key.get_ref().as_ref() {
                "default_secs" => {
                    timeouts.default_secs = self.integer("timeouts", key, value, min, max)?
                }
                "slow_secs" => {
                    timeouts.slow_secs = self.integer("timeouts", key, value, min, max)?
                }
                "background_secs" => {
                    timeouts.background_secs = self.integer("timeouts", key, value, min, max)?
                }
                "kill_grace_ms" => {
                    timeouts.kill_grace =
                        Duration::from_millis(self.integer("timeouts", key, value, 0, 600_000)?)
                }
                "on_timeout" => {
                    timeouts.on_timeout =
                        match self.choice("timeouts", key, value, &["background", "kill"])? {
                            "kill" => OnTimeout::Kill,
                            _ => OnTimeout::Background,
                        }
                }
                _ => return Err(self.unknown("timeouts", key, KNOWN)),
            }
        }
        Ok(())
    }

    fn sessions(&self, table: &DeTable<'_>, sessions: &mut Sessions) -> Result<(), ConfigError> {
        const KNOWN: &[&str] = &["linger_secs", "on_straggler", "keep_finished"];
        for (key, value) in table {
            match key.get_ref().as_ref() {
                "linger_secs" => {
                    sessions.linger =
                        Duration::from_secs(self.integer("sessions", key, value, 0, 7 * 86_400)?)
                }
                "keep_finished" => {
                    sessions.keep_finished =
                        self.integer("sessions", key, value, 0, 100_000)? as usize
                }
                "on_straggler" => {
                    sessions.on_straggler =
                        match self.choice("sessions", key, value, &["background", "kill"])? {
                            "kill" => OnStraggler::Kill,
                            _ => OnStraggler::Background,
                        }
                }
                _ => return Err(self.unknown("sessions", key, KNOWN)),
            }
        }
        Ok(())
    }

    fn containment(
        &self,
        table: &DeTable<'_>,
        containment: &mut ContainmentConfig,
    ) -> Result<(), ConfigError> {
        const KNOWN: &[&str] = &["mechanism", "cgroup"];
        for (key, value) in table {
            match key.get_ref().as_ref() {
                "mechanism" => {
                    containment.mechanism =
                        match self.choice("containment", key, value, &["auto", "scan"])? {
                            "scan" => Mechanism::Scan,
                            _ => Mechanism::Auto,
                        }
                }
                "cgroup" => match value.get_ref() {
                    DeValue::String(dir) if dir.starts_with('/') => {
                        containment.cgroup = Some(PathBuf::from(dir.as_ref()))
                    }
                    _ => {
                        return Err(self.error(
                            key,
                            "containment.cgroup must be an absolute path, like \"/sys/fs/cgroup/user.slice/bashd\"".into(),
                        ));
                    }
                },
                _ => return Err(self.unknown("containment", key, KNOWN)),
            }
        }
        Ok(())
    }

    /// `[sandbox]`: `default`, `network`, `writable`, `deny_read`, `unix_sockets`,
    /// `floor`. A default
    /// looser than the floor is an error: every job would be refused.
    fn sandbox(
        &self,
        section: &Key<'_>,
        table: &DeTable<'_>,
        config: &mut SandboxConfig,
    ) -> Result<(), ConfigError> {
        const KNOWN: &[&str] = &[
            "default",
            "network",
            "writable",
            "deny_read",
            "unix_sockets",
            "floor",
        ];
        const PROFILES: &[&str] = &["off", "workspace-write", "read-only"];
        let profile = |key: &Key<'_>, value: &Value<'_>| -> Result<SandboxProfile, ConfigError> {
            let name = self.choice("sandbox", key, value, PROFILES)?;
            Ok(name
                .parse()
                .expect("choice returns one of PROFILES, each a profile"))
        };
        let paths = |key: &Key<'_>, value: &Value<'_>| -> Result<Vec<PathBuf>, ConfigError> {
            let name = format!("sandbox.{}", key.get_ref());
            self.strings(&name, key, value)?
                .iter()
                .map(|path| {
                    sandbox::expand_home(path).map_err(|e| self.error(key, format!("{name}: {e}")))
                })
                .collect()
        };
        for (key, value) in table {
            match key.get_ref().as_ref() {
                "default" => config.default = profile(key, value)?,
                "floor" => config.floor = profile(key, value)?,
                "network" => {
                    config.network = match self.choice("sandbox", key, value, &["on", "off"])? {
                        "off" => Network::Off,
                        _ => Network::On,
                    }
                }
                "writable" => config.writable = paths(key, value)?,
                "deny_read" => config.deny_read = paths(key, value)?,
                "unix_sockets" => config.unix_sockets = paths(key, value)?,
                _ => return Err(self.unknown("sandbox", key, KNOWN)),
            }
        }
        if config.default.looseness() > config.floor.looseness() {
            return Err(self.error(
                section,
                format!(
                    "sandbox.default = \"{}\" is looser than sandbox.floor = \"{}\": every job would be refused; set default to the floor or tighter",
                    config.default, config.floor
                ),
            ));
        }
        Ok(())
    }

    fn mcp(
        &self,
        table: &DeTable<'_>,
        mcp: &mut McpConfig,
        clients: &mut Vec<(String, ClientBudget)>,
    ) -> Result<(), ConfigError> {
        const KNOWN: &[&str] = &["max_call_secs", "on_cancel", "clients"];
        for (key, value) in table {
            match key.get_ref().as_ref() {
                "clients" => *clients = self.mcp_clients(key, value)?,
                "max_call_secs" => {
                    mcp.max_call = Duration::from_secs(self.integer(
                        "mcp",
                        key,
                        value,
                        limits::MIN_TIMEOUT_SECS,
                        limits::MAX_TIMEOUT_SECS,
                    )?)
                }
                "on_cancel" => {
                    mcp.on_cancel = match self.choice("mcp", key, value, &["kill", "background"])? {
                        "background" => OnCancel::Background,
                        _ => OnCancel::Kill,
                    }
                }
                _ => return Err(self.unknown("mcp", key, KNOWN)),
            }
        }
        Ok(())
    }

    /// `[mcp.clients]`: a table per client name, each with the parts of a budget.
    fn mcp_clients(
        &self,
        key: &Key<'_>,
        value: &Value<'_>,
    ) -> Result<Vec<(String, ClientBudget)>, ConfigError> {
        const KNOWN: &[&str] = &["result_lines", "result_bytes", "error_result_bytes"];
        let DeValue::Table(table) = value.get_ref() else {
            return Err(self.error(
                key,
                "mcp.clients must be a table of clients, like [mcp.clients.\"codex-mcp-client\"]"
                    .to_owned(),
            ));
        };
        let mut clients = Vec::new();
        for (name, client) in table {
            let section = format!("mcp.clients.\"{}\"", name.get_ref());
            let DeValue::Table(keys) = client.get_ref() else {
                return Err(self.error(
                    name,
                    format!("{section} must be a table with {}", KNOWN.join(", ")),
                ));
            };
            let mut budget = ClientBudget::default();
            for (key, value) in keys {
                let (min, max) = match key.get_ref().as_ref() {
                    "result_lines" => (10, 1_000_000),
                    _ => (1_000, 100_000_000),
                };
                let n = Some(self.integer(&section, key, value, min, max)?);
                match key.get_ref().as_ref() {
                    "result_lines" => budget.result_lines = n,
                    "result_bytes" => budget.result_bytes = n,
                    "error_result_bytes" => budget.error_result_bytes = n,
                    _ => return Err(self.unknown(&section, key, KNOWN)),
                }
            }
            clients.push((name.get_ref().to_string(), budget));
        }
        Ok(clients)
    }

    /// One of `choices`, for the key `section.key`.
    fn choice<'c>(
        &self,
        section: &str,
        key: &Key<'_>,
        value: &Value<'_>,
        choices: &[&'c str],
    ) -> Result<&'c str, ConfigError> {
        let given = match value.get_ref() {
            DeValue::String(s) => choices.iter().find(|c| **c == s.as_ref()).copied(),
            _ => None,
        };
        given.ok_or_else(|| {
            self.error(
                key,
                format!(
                    "{section}.{} must be one of \"{}\"",
                    key.get_ref(),
                    choices.join("\", \"")
                ),
            )
        })
    }

    /// `[policy]`: `disable = [ids]` and `[[policy.deny]]` rules.
    fn policy(&self, table: &DeTable<'_>) -> Result<PolicySource, ConfigError> {
        let mut disabled = Vec::new();
        let mut custom = Vec::new();
        for (key, value) in table {
            match key.get_ref().as_ref() {
                "disable" => {
                    for id in self.strings("policy.disable", key, value)? {
                        if !BUILTIN_RULES.iter().any(|rule| rule.id == id) {
                            let known: Vec<&str> = BUILTIN_RULES.iter().map(|r| r.id).collect();
                            return Err(self.error(
                                key,
                                format!(
                                    "policy.disable names {id:?}, which is no built-in rule; built-in rules: {}",
                                    known.join(", ")
                                ),
                            ));
                        }
                        disabled.push(id);
                    }
                }
                "deny" => {
                    let DeValue::Array(rules) = value.get_ref() else {
                        return Err(self.error(
                            key,
                            "policy.deny must be written as [[policy.deny]] tables".into(),
                        ));
                    };
                    for rule in rules.iter() {
                        custom.push(self.deny_rule(key, rule)?);
                    }
                }
                _ => return Err(self.unknown("policy", key, &["disable", "deny"])),
            }
        }
        Ok(PolicySource { disabled, custom })
    }

    /// One `[[policy.deny]]` table: `id`, `command`, `args` (optional), `message`.
    fn deny_rule(&self, at: &Key<'_>, rule: &Value<'_>) -> Result<CustomRule, ConfigError> {
        let DeValue::Table(table) = rule.get_ref() else {
            return Err(self.error(at, "each policy.deny entry must be a table".into()));
        };
        let (mut id, mut command, mut args, mut message) = (None, None, Vec::new(), None);
        for (key, value) in table {
            let name = format!("policy.deny.{}", key.get_ref());
            let string = || match value.get_ref() {
                DeValue::String(s) if !s.is_empty() => Ok(s.to_string()),
                _ => Err(self.error(key, format!("{name} must be a non-empty string"))),
            };
            match key.get_ref().as_ref() {
                "id" => id = Some(string()?),
                "command" => command = Some(string()?),
                "message" => message = Some(string()?),
                "args" => args = self.strings(&name, key, value)?,
                _ => {
                    return Err(self.unknown(
                        "policy.deny",
                        key,
                        &["id", "command", "args", "message"],
                    ));
                }
            }
        }
        let line = self.line_of(rule.span().start);
        let missing =
            |what: &str| self.error_at(line, format!("a [[policy.deny]] rule needs `{what}`"));
        Ok(CustomRule {
            id: id.ok_or_else(|| missing("id"))?,
            command: command.ok_or_else(|| missing("command"))?,
            args,
            message: message.ok_or_else(|| missing("message"))?,
        })
    }

    fn strings(
        &self,
        name: &str,
        key: &Key<'_>,
        value: &Value<'_>,
    ) -> Result<Vec<String>, ConfigError> {
        let bad = || {
            self.error(
                key,
                format!("{name} must be a list of strings, like [\"a\", \"b\"]"),
            )
        };
        let DeValue::Array(items) = value.get_ref() else {
            return Err(bad());
        };
        items
            .iter()
            .map(|item| match item.get_ref() {
                DeValue::String(s) => Ok(s.to_string()),
                _ => Err(bad()),
            })
            .collect()
    }

    /// `[env]` merges into the hardening set: each string key adds a variable or
    /// overrides one, and `unset = ["NAME", ...]` removes variables, which is the only
    /// way to loosen the set (a copied example that names a few variables must not
    /// drop the others). A removed variable is the client's again, if it has one.
    fn env(
        &self,
        table: &DeTable<'_>,
        env: &mut Vec<(String, String)>,
        pass: &mut Vec<String>,
    ) -> Result<(), ConfigError> {
        let mut set = Vec::new();
        let mut unset = Vec::new();
        for (key, value) in table {
            let name = key.get_ref().to_string();
            if name == "unset" {
                unset = self.strings("env.unset", key, value)?;
                continue;
            }
            if name == "pass" {
                *pass = self.strings("env.pass", key, value)?;
                continue;
            }
            let DeValue::String(s) = value.get_ref() else {
                return Err(self.error(
                    key,
                    format!(
                        "env.{name} must be a string (`unset = [\"NAME\"]` removes a variable)"
                    ),
                ));
            };
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(self.error(key, format!("env: {name:?} is not a variable name")));
            }
            set.push((key, name, s.to_string()));
        }
        if let Some((key, name, _)) = set.iter().find(|(_, name, _)| unset.contains(name)) {
            return Err(self.error(
                key,
                format!("env.{name} is both set and in env.unset; keep one"),
            ));
        }
        env.retain(|(name, _)| !unset.contains(name));
        for (_, name, value) in set {
            match env.iter_mut().find(|(k, _)| *k == name) {
                Some(var) => var.1 = value,
                None => env.push((name, value)),
            }
        }
        Ok(())
    }
}

impl Config {
    /// The config in force as a TOML file that loads to the same settings: every
    /// key, each one that differs from its default marked `# default: ...`, every
    /// hardening variable, every built-in rule with whether it is on. What
    /// `bashd --check-config` prints, so that a copied example that loosens something
    /// shows it.
    pub fn effective_toml(&self) -> String {
        let defaults = Config::default();
        let mut out = String::new();
        let key = |out: &mut String, name: &str, value: String, default: String| {
            out.push_str(&format!("{name} = {value}"));
            if value != default {
                out.push_str(&format!("  # default: {default}"));
            }
            out.push('\n');
        };
        let (l, d) = (&self.limits, &defaults.limits);
        out.push_str("[limits]\n");
        key(
            &mut out,
            "max_lines",
            l.max_lines.to_string(),
            d.max_lines.to_string(),
        );
        key(
            &mut out,
            "max_bytes",
            l.max_bytes.to_string(),
            d.max_bytes.to_string(),
        );
        key(
            &mut out,
            "max_spill_bytes",
            l.max_spill_bytes.to_string(),
            d.max_spill_bytes.to_string(),
        );
        key(
            &mut out,
            "max_frame_bytes",
            l.max_frame_bytes.to_string(),
            d.max_frame_bytes.to_string(),
        );
        key(
            &mut out,
            "max_command_bytes",
            l.max_command_bytes.to_string(),
            d.max_command_bytes.to_string(),
        );
        let job = &l.job;
        let limit = |out: &mut String, name: &str, value: Option<String>| match value {
            Some(value) => key(out, name, value, "none".to_owned()),
            None => out.push_str(&format!("# {name}: none\n")),
        };
        limit(
            &mut out,
            "memory",
            job.memory_bytes.map(|b| quoted(&b.to_string())),
        );
        limit(
            &mut out,
            "cpu",
            job.cpu_millicores
                .map(|m| format!("{}.{:03}", m / 1000, m % 1000)),
        );
        limit(&mut out, "pids", job.pids.map(|p| p.to_string()));
        key(
            &mut out,
            "max_session_spill_bytes",
            l.max_session_spill_bytes.to_string(),
            d.max_session_spill_bytes.to_string(),
        );
        key(
            &mut out,
            "max_total_spill_bytes",
            l.max_total_spill_bytes.to_string(),
            d.max_total_spill_bytes.to_string(),
        );
        key(
            &mut out,
            "max_connections",
            l.max_connections.to_string(),
            d.max_connections.to_string(),
        );

        let (t, d) = (&self.timeouts, &defaults.timeouts);
        let on_timeout = |o: OnTimeout| {
            quoted(if o == OnTimeout::Kill {
                "kill"
            } else {
                "background"
            })
        };
        let millis = |grace: Duration| grace.as_millis().to_string();
        out.push_str("\n[timeouts]\n");
        key(
            &mut out,
            "default_secs",
            t.default_secs.to_string(),
            d.default_secs.to_string(),
        );
        key(
            &mut out,
            "slow_secs",
            t.slow_secs.to_string(),
            d.slow_secs.to_string(),
        );
        key(
            &mut out,
            "background_secs",
            t.background_secs.to_string(),
            d.background_secs.to_string(),
        );
        key(
            &mut out,
            "on_timeout",
            on_timeout(t.on_timeout),
            on_timeout(d.on_timeout),
        );
        key(
            &mut out,
            "kill_grace_ms",
            millis(t.kill_grace),
            millis(d.kill_grace),
        );

        let (s, d) = (&self.sessions, &defaults.sessions);
        let straggler = |o: OnStraggler| {
            quoted(if o == OnStraggler::Kill {
                "kill"
            } else {
                "background"
            })
        };
        out.push_str("\n[sessions]\n");
        key(
            &mut out,
            "linger_secs",
            s.linger.as_secs().to_string(),
            d.linger.as_secs().to_string(),
        );
        key(
            &mut out,
            "on_straggler",
            straggler(s.on_straggler),
            straggler(d.on_straggler),
        );
        key(
            &mut out,
            "keep_finished",
            s.keep_finished.to_string(),
            d.keep_finished.to_string(),
        );

        let mechanism = |m: Mechanism| quoted(if m == Mechanism::Scan { "scan" } else { "auto" });
        out.push_str("\n[containment]\n");
        key(
            &mut out,
            "mechanism",
            mechanism(self.containment.mechanism),
            mechanism(defaults.containment.mechanism),
        );
        match &self.containment.cgroup {
            Some(cgroup) => key(
                &mut out,
                "cgroup",
                quoted(&cgroup.to_string_lossy()),
                "none".to_owned(),
            ),
            None => out.push_str("# cgroup: none\n"),
        }

        let (b, d) = (&self.sandbox, &defaults.sandbox);
        let list = |paths: &[PathBuf]| {
            let quoted: Vec<String> = paths.iter().map(|p| quoted(&p.to_string_lossy())).collect();
            format!("[{}]", quoted.join(", "))
        };
        out.push_str("\n[sandbox]\n");
        key(
            &mut out,
            "default",
            quoted(b.default.as_str()),
            quoted(d.default.as_str()),
        );
        key(
            &mut out,
            "network",
            quoted(b.network.as_str()),
            quoted(d.network.as_str()),
        );
        key(&mut out, "writable", list(&b.writable), list(&d.writable));
        key(
            &mut out,
            "deny_read",
            list(&b.deny_read),
            list(&d.deny_read),
        );
        key(
            &mut out,
            "unix_sockets",
            list(&b.unix_sockets),
            list(&d.unix_sockets),
        );
        key(
            &mut out,
            "floor",
            quoted(b.floor.as_str()),
            quoted(d.floor.as_str()),
        );

        out.push_str("\n[env]\n");
        let removed: Vec<&str> = defaults
            .env
            .iter()
            .filter(|(name, _)| !self.env.iter().any(|(k, _)| k == name))
            .map(|(name, _)| name.as_str())
            .collect();
        for (name, value) in &self.env {
            let default = defaults.env.iter().find(|(k, _)| k == name);
            let note = match default {
                None => "  # added".to_owned(),
                Some((_, d)) if d != value => format!("  # default: {}", quoted(d)),
                Some(_) => String::new(),
            };
            out.push_str(&format!("{} = {}{note}\n", bare_key(name), quoted(value)));
        }
        if !removed.is_empty() {
            let list: Vec<String> = removed.iter().map(|name| quoted(name)).collect();
            out.push_str(&format!(
                "unset = [{}]  # removed from the hardening set\n",
                list.join(", ")
            ));
        }
        if !self.env_pass.is_empty() {
            let list: Vec<String> = self.env_pass.iter().map(|name| quoted(name)).collect();
            out.push_str(&format!(
                "pass = [{}]  # the agent's credentials the MCP server passes into jobs\n",
                list.join(", ")
            ));
        }

        let on_cancel = |o: OnCancel| {
            quoted(if o == OnCancel::Kill {
                "kill"
            } else {
                "background"
            })
        };
        out.push_str("\n[mcp]\n");
        key(
            &mut out,
            "max_call_secs",
            self.mcp.max_call.as_secs().to_string(),
            defaults.mcp.max_call.as_secs().to_string(),
        );
        key(
            &mut out,
            "on_cancel",
            on_cancel(self.mcp.on_cancel),
            on_cancel(defaults.mcp.on_cancel),
        );
        for (name, budget) in &self.mcp_clients {
            out.push_str(&format!("\n[mcp.clients.{}]\n", quoted(name)));
            for (key, value) in [
                ("result_lines", budget.result_lines),
                ("result_bytes", budget.result_bytes),
                ("error_result_bytes", budget.error_result_bytes),
            ] {
                if let Some(value) = value {
                    out.push_str(&format!("{key} = {value}\n"));
                }
            }
        }

        // bashc's, shown so that every section of the file is; `None` is bashc's
        // default, which is not a TOML value of its own.
        let r = &self.remote;
        out.push_str("\n[remote]\n");
        match &r.bridge_command {
            Some(command) => key(
                &mut out,
                "bridge_command",
                quoted(command),
                "none".to_owned(),
            ),
            None => out.push_str(
                "# bridge_command: none (ssh ... HOST bashc bridge, over a control socket)\n",
            ),
        }
        if let Some(command) = std::env::var("BASHD_BRIDGE_COMMAND")
            .ok()
            .filter(|c| !c.is_empty())
        {
            out.push_str(&format!(
                "# $BASHD_BRIDGE_COMMAND overrides bridge_command here: {}\n",
                quoted(&command)
            ));
        }
        match &r.bashc_path {
            Some(path) => key(&mut out, "bashc_path", quoted(path), "none".to_owned()),
            None => out.push_str("# bashc_path: none (the host's PATH finds bashc)\n"),
        }
        key(
            &mut out,
            "relay_idle_secs",
            r.relay_idle_secs
                .unwrap_or(DEFAULT_RELAY_IDLE_SECS)
                .to_string(),
            DEFAULT_RELAY_IDLE_SECS.to_string(),
        );

        let policy = &self.policy_source;
        out.push_str("\n[policy]\n");
        for rule in BUILTIN_RULES {
            let on = !policy.disabled.iter().any(|id| id == rule.id);
            let state = if on { "on" } else { "OFF" };
            out.push_str(&format!("# built-in rule {}: {state}\n", rule.id));
        }
        let disabled: Vec<String> = policy.disabled.iter().map(|id| quoted(id)).collect();
        out.push_str(&format!("disable = [{}]\n", disabled.join(", ")));
        for rule in &policy.custom {
            let args: Vec<String> = rule.args.iter().map(|a| quoted(a)).collect();
            out.push_str(&format!(
                "\n[[policy.deny]]\nid = {}\ncommand = {}\nargs = [{}]\nmessage = {}\n",
                quoted(&rule.id),
                quoted(&rule.command),
                args.join(", "),
                quoted(&rule.message)
            ));
        }
        out
    }
}

/// `text` as a TOML string.
fn quoted(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// `name` as a TOML key: bare when it can be, quoted otherwise.
fn bare_key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare { name.to_owned() } else { quoted(name) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(text, Path::new("/c.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn empty_file_means_defaults() {
        let config = parse("").unwrap();
        assert_eq!(config.limits.max_lines, limits::DEFAULT_MAX_LINES);
        assert!(config.env.iter().any(|(k, v)| k == "PAGER" && v == "cat"));
    }

    #[test]
    fn keys_override_defaults() {
        let config = parse(
            "[limits]\nmax_lines = 10\n[timeouts]\nkill_grace_ms = 50\n[env]\nPAGER = \"more\"\n",
        )
        .unwrap();
        assert_eq!(config.limits.max_lines, 10);
        assert_eq!(config.timeouts.kill_grace, Duration::from_millis(50));
        let pager: Vec<_> = config.env.iter().filter(|(k, _)| k == "PAGER").collect();
        assert_eq!(pager, [&("PAGER".to_owned(), "more".to_owned())]);
    }

    /// Issue 19: `[remote]` is bashc's, but checked here like any other section.
    #[test]
    fn remote_keys_are_checked() {
        assert!(parse("[remote]\nbashc_path = \"/opt/bashc\"\nrelay_idle_secs = 60\n").is_ok());
        let err = parse("[remote]\nrelay_idle_secs = 0\n").unwrap_err();
        assert!(
            err.contains("remote.relay_idle_secs must be a whole number from 5")
                && err.contains("0 cannot turn relays off"),
            "{err}"
        );
        assert!(parse("[remote]\nrelay_idle_secs = 4\n").is_err());
        assert!(parse("[remote]\nrelay_idle_secs = 5\n").is_ok());
        let err = parse("[remote]\nrelay_idle = 5\n").unwrap_err();
        assert!(err.contains("relay_idle_secs"), "{err}");
    }

    /// Issue 33: `--check-config` shows `[remote]` too, and it loads back.
    #[test]
    fn the_effective_config_shows_remote() {
        let defaults = parse("").unwrap().effective_toml();
        assert!(
            defaults.contains("\n[remote]\n# bridge_command: none")
                && defaults.contains("# bashc_path: none")
                && defaults.contains("relay_idle_secs = 600\n"),
            "{defaults}"
        );
        let config =
            parse("[remote]\nbashc_path = \"/opt/bashc\"\nrelay_idle_secs = 60\n").unwrap();
        let effective = config.effective_toml();
        assert!(
            effective.contains("bashc_path = \"/opt/bashc\"  # default: none\n")
                && effective.contains("relay_idle_secs = 60  # default: 600\n"),
            "{effective}"
        );
        assert_eq!(parse(&effective).unwrap().remote, config.remote);
    }

    /// Issue 34: the budgets of MCP clients and the credentials passed into jobs,
    /// read by `bashc mcp`, are checked here like every other key.
    #[test]
    fn mcp_clients_and_env_pass_are_checked() {
        let text = "[env]\npass = [\"OPENAI_API_KEY\"]\n\n[mcp.clients.\"codex-mcp-client\"]\nresult_bytes = 20000\n";
        let config = parse(text).unwrap();
        assert_eq!(config.env_pass, ["OPENAI_API_KEY"]);
        assert_eq!(
            config.mcp_clients,
            [(
                "codex-mcp-client".to_owned(),
                ClientBudget {
                    result_bytes: Some(20_000),
                    ..ClientBudget::default()
                }
            )]
        );
        let effective = parse(&config.effective_toml()).unwrap();
        assert_eq!(effective.mcp_clients, config.mcp_clients);
        assert_eq!(effective.env_pass, config.env_pass);
        let err = parse("[mcp.clients.x]\nresult_byte = 5000\n").unwrap_err();
        assert!(
            err.contains("unknown key") && err.contains("result_bytes"),
            "{err}"
        );
        let err = parse("[mcp.clients.x]\nresult_bytes = 5\n").unwrap_err();
        assert!(err.contains("must be a whole number from 1000"), "{err}");
        assert!(parse("[env]\npass = \"OPENAI_API_KEY\"\n").is_err());
    }

    /// Issue 15: `[mcp]` bounds MCP calls; its values are checked like any other.
    #[test]
    fn the_mcp_section_sets_the_call_budget_and_what_a_cancel_does() {
        let defaults = parse("").unwrap();
        assert_eq!(defaults.mcp.max_call, Duration::from_secs(50));
        assert_eq!(defaults.mcp.on_cancel, OnCancel::Kill);
        let config = parse("[mcp]\nmax_call_secs = 3\non_cancel = \"background\"\n").unwrap();
        assert_eq!(config.mcp.max_call, Duration::from_secs(3));
        assert_eq!(config.mcp.on_cancel, OnCancel::Background);
        let effective = config.effective_toml();
        assert!(
            effective.contains("[mcp]\nmax_call_secs = 3  # default: 50\non_cancel = \"background\"  # default: \"kill\"\n"),
            "{effective}"
        );
        assert_eq!(parse(&effective).unwrap().mcp, config.mcp);
        let err = parse("[mcp]\nmax_call_secs = 0\n").unwrap_err();
        assert!(
            err.contains("mcp.max_call_secs must be a whole number from 1 to 86400"),
            "{err}"
        );
        let err = parse("[mcp]\non_cancel = \"ignore\"\n").unwrap_err();
        assert!(
            err.contains("mcp.on_cancel must be one of \"kill\", \"background\""),
            "{err}"
        );
        let err = parse("[mcp]\nbudget = 3\n").unwrap_err();
        assert!(err.contains("unknown key mcp.budget"), "{err}");
    }

    fn env_of<'c>(config: &'c Config, name: &str) -> Option<&'c str> {
        let found = config.env.iter().find(|(k, _)| k == name);
        found.map(|(_, v)| v.as_str())
    }

    /// Issue 24: an `[env]` that names a few variables must not drop the others.
    #[test]
    fn env_adds_to_the_hardening_set_and_only_unset_removes() {
        let config =
            parse("[env]\nPAGER = \"less\"\nPIP_NO_INPUT = \"1\"\nunset = [\"TERM\"]\n").unwrap();
        assert_eq!(env_of(&config, "PAGER"), Some("less"));
        assert_eq!(env_of(&config, "PIP_NO_INPUT"), Some("1"));
        assert_eq!(env_of(&config, "TERM"), None);
        for (name, value) in Config::default().env {
            if name != "PAGER" && name != "TERM" {
                assert_eq!(env_of(&config, &name), Some(value.as_str()), "{name}");
            }
        }
        let err = parse("[env]\nTERM = \"xterm\"\nunset = [\"TERM\"]\n").unwrap_err();
        assert!(
            err.starts_with("/c.toml:2: env.TERM is both set and in env.unset"),
            "{err}"
        );
        let err = parse("[env]\nunset = \"TERM\"\n").unwrap_err();
        assert!(err.contains("env.unset must be a list of strings"), "{err}");
        let err = parse("[env]\nNO_COLOR = 1\n").unwrap_err();
        assert!(err.contains("env.NO_COLOR must be a string"), "{err}");
    }

    /// The example config of the README, as a user copies it.
    fn readme_example() -> String {
        let readme = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"));
        let section = readme
            .split("\n## Configuration\n")
            .nth(1)
            .expect("the README has a Configuration section");
        let mut lines = section.lines().skip_while(|line| *line != "    [limits]");
        let mut example = String::new();
        for line in lines.by_ref() {
            match line.strip_prefix("    ") {
                Some(line) => example.push_str(line),
                None if line.is_empty() => {}
                None => break,
            }
            example.push('\n');
        }
        assert!(!example.is_empty(), "no example config in the README");
        example
    }

    /// Issue 24: copying the README's example must keep every safety default.
    #[test]
    fn the_readme_example_config_leaves_every_rule_on_and_every_hardening_variable_set() {
        let example = readme_example();
        let config = Config::parse(&example, Path::new("README.md")).unwrap();
        assert_eq!(config.policy_source.disabled, Vec::<String>::new());
        for command in ["git add -A", "git push --force", "rm -rf ~"] {
            assert!(config.policy.check(command).is_err(), "{command} passes");
        }
        for (name, value) in Config::default().env {
            assert_eq!(env_of(&config, &name), Some(value.as_str()), "{name}");
        }
        let effective = config.effective_toml();
        assert!(!effective.contains("OFF"), "{effective}");
    }

    /// `bashd --check-config` prints a file that loads to the config it describes.
    #[test]
    fn the_effective_config_loads_to_itself_and_shows_what_is_off() {
        let config = parse(
            "[limits]\nmax_lines = 10\n[containment]\ncgroup = \"/sys/fs/cgroup/b\"\n[env]\nTERM = \"xterm\"\nA_B = \"x\\\"y\"\nunset = [\"NO_COLOR\"]\n[policy]\ndisable = [\"git-add-blind\"]\n[[policy.deny]]\nid = \"no-publish\"\ncommand = \"npm\"\nargs = [\"publish\"]\nmessage = \"CI\"\n",
        )
        .unwrap();
        let effective = config.effective_toml();
        for line in [
            "max_lines = 10  # default: 2000\n",
            "max_bytes = 51200\n",
            "cgroup = \"/sys/fs/cgroup/b\"  # default: none\n",
            "TERM = \"xterm\"  # default: \"dumb\"\n",
            "A_B = 'x\"y'  # added\n",
            "unset = [\"NO_COLOR\"]  # removed from the hardening set\n",
            "# built-in rule git-add-blind: OFF\n",
            "# built-in rule rm-dangerous: on\n",
            "disable = [\"git-add-blind\"]\n",
            "[[policy.deny]]\nid = \"no-publish\"\ncommand = \"npm\"\nargs = [\"publish\"]\nmessage = \"CI\"\n",
        ] {
            assert!(effective.contains(line), "no {line:?} in:\n{effective}");
        }
        let again = parse(&effective).unwrap();
        assert_eq!(again.effective_toml(), effective);
        assert_eq!(again.env, config.env);
        assert_eq!(again.policy_source, config.policy_source);
    }

    #[test]
    fn an_unknown_key_names_file_line_and_key() {
        let err = parse("[limits]\nmax_lines = 10\nmax_linez = 3\n").unwrap_err();
        assert!(
            err.starts_with("/c.toml:3: unknown key limits.max_linez"),
            "{err}"
        );
        let err = parse("\n[limitz]\n").unwrap_err();
        assert!(
            err.starts_with("/c.toml:2: unknown section [limitz]"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_value_names_its_range() {
        let err = parse("[timeouts]\ndefault_secs = 0\n").unwrap_err();
        assert!(
            err.contains("/c.toml:2: timeouts.default_secs must be a whole number from 1"),
            "{err}"
        );
        let err = parse("[limits]\nmax_lines = \"many\"\n").unwrap_err();
        assert!(
            err.contains("limits.max_lines must be a whole number"),
            "{err}"
        );
        let err = parse("[limits]\nmemory = \"lots\"\n").unwrap_err();
        assert!(
            err.contains("/c.toml:2: limits.memory: \"lots\" is not a size"),
            "{err}"
        );
        let err = parse("[limits]\ncpu = 0\n").unwrap_err();
        assert!(err.contains("limits.cpu: \"0\" cores"), "{err}");
    }

    /// Job limits are written as on the command line, and shown back so they load to
    /// the same.
    #[test]
    fn job_limits_read_as_people_write_them() {
        let config = parse("[limits]\nmemory = \"1.5G\"\ncpu = 1.5\npids = 512\n").unwrap();
        let job = config.limits.job;
        assert_eq!(job.memory_bytes, Some(3 << 29));
        assert_eq!(job.cpu_millicores, Some(1500));
        assert_eq!(job.pids, Some(512));
        assert_eq!(
            parse("[limits]\ncpu = 2\n")
                .unwrap()
                .limits
                .job
                .cpu_millicores,
            Some(2000)
        );
        let effective = config.effective_toml();
        assert!(
            effective.contains("cpu = 1.500  # default: none\n"),
            "{effective}"
        );
        assert_eq!(parse(&effective).unwrap().limits.job, job);
        assert!(
            Config::default()
                .effective_toml()
                .contains("# memory: none\n")
        );
    }

    #[test]
    fn policy_rules_come_from_the_config() {
        let config = parse(
            "[policy]\ndisable = [\"git-add-blind\"]\n\n[[policy.deny]]\nid = \"no-publish\"\ncommand = \"npm\"\nargs = [\"publish\"]\nmessage = \"CI releases\"\n",
        )
        .unwrap();
        assert!(config.policy.check("git add -A").is_ok());
        assert_eq!(
            config.policy.check("npm publish").unwrap_err().rule,
            "no-publish"
        );

        let err = parse("[policy]\ndisable = [\"git-add-blnd\"]\n").unwrap_err();
        assert!(
            err.starts_with("/c.toml:2: policy.disable names \"git-add-blnd\""),
            "{err}"
        );
        let err = parse("[[policy.deny]]\nid = \"x\"\ncommand = \"npm\"\n").unwrap_err();
        assert!(err.contains("needs `message`"), "{err}");
        let err = parse("[[policy.deny]]\nid = \"x\"\ncmd = \"npm\"\n").unwrap_err();
        assert!(
            err.starts_with("/c.toml:3: unknown key policy.deny.cmd"),
            "{err}"
        );
    }

    #[test]
    fn sessions_and_on_timeout() {
        let config = parse(
            "[sessions]\nlinger_secs = 3\non_straggler = \"kill\"\nkeep_finished = 5\n[timeouts]\non_timeout = \"kill\"\n",
        )
        .unwrap();
        assert_eq!(config.sessions.linger, Duration::from_secs(3));
        assert_eq!(config.sessions.on_straggler, OnStraggler::Kill);
        assert_eq!(config.sessions.keep_finished, 5);
        assert_eq!(config.timeouts.on_timeout, OnTimeout::Kill);
        let err = parse("[sessions]\non_straggler = \"ignore\"\n").unwrap_err();
        assert!(
            err.contains(
                "/c.toml:2: sessions.on_straggler must be one of \"background\", \"kill\""
            ),
            "{err}"
        );
    }

    #[test]
    fn a_syntax_error_names_the_line() {
        let err = parse("[limits]\nmax_lines = = 3\n").unwrap_err();
        assert!(err.starts_with("/c.toml:2:"), "{err}");
    }

    #[test]
    fn containment_takes_a_mechanism_and_an_absolute_cgroup() {
        let config =
            parse("[containment]\nmechanism = \"scan\"\ncgroup = \"/sys/fs/cgroup/x\"\n").unwrap();
        assert_eq!(config.containment.mechanism, Mechanism::Scan);
        assert_eq!(
            config.containment.cgroup.as_deref(),
            Some(Path::new("/sys/fs/cgroup/x"))
        );
        let err = parse("[containment]\ncgroup = \"relative\"\n").unwrap_err();
        assert!(err.contains("must be an absolute path"), "{err}");
        let err = parse("[containment]\nmechanism = \"magic\"\n").unwrap_err();
        assert!(err.contains("must be one of \"auto\", \"scan\""), "{err}");
    }
}

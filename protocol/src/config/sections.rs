//! The sections of the config file as types, each with its defaults (DESIGN §11):
//! one field per key, whose type checks its value. A key is added here and where it
//! is used; its error words, its place in `bashd --check-config` and the list of
//! known keys follow from the field.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::value::{Cores, Size, Strings, Text, Whole, choice, choice_or_unset};
use super::{AllowHosts, Mechanism, OnCancel, OnStraggler};
use crate::limits::{self, MAX_TIMEOUT_SECS as MAX_T, MIN_TIMEOUT_SECS as MIN_T};
use crate::{Network, OnTimeout, SandboxProfile};

const U32: u64 = u32::MAX as u64;
const FRAME: u64 = limits::MAX_FRAME_BYTES as u64;

/// `[limits]`: what a job may show, spill and use, and what the daemon serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a section ([limits])")]
pub struct Limits {
    pub max_lines: Whole<1, U32>,
    pub max_bytes: Whole<1, { limits::MAX_SHOWN_BYTES as u64 }>,
    pub max_spill_bytes: Whole<0, { 1 << 40 }>,
    pub max_frame_bytes: Whole<{ 64 * 1024 }, FRAME>,
    pub max_command_bytes: Whole<1, { FRAME / 2 }>,
    /// What a job may use when its request does not say: written as on the command
    /// line (`memory = "2G"`, `cpu = 1.5`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<Size>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cores>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pids: Option<Whole<1, U32>>,
    /// Bytes of spill files one session may hold on disk; past it the files of its
    /// oldest finished jobs go first.
    pub max_session_spill_bytes: Whole<0, { 1 << 50 }>,
    /// Bytes of spill files all sessions together may hold on disk.
    pub max_total_spill_bytes: Whole<0, { 1 << 50 }>,
    /// Connections served at once; the one over it is told so and closed.
    pub max_connections: Whole<1, { 1 << 20 }>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_lines: Whole::at(limits::DEFAULT_MAX_LINES as u64),
            max_bytes: Whole::at(limits::DEFAULT_MAX_BYTES as u64),
            max_spill_bytes: Whole::at(limits::DEFAULT_MAX_SPILL_BYTES),
            max_frame_bytes: Whole::at(FRAME),
            max_command_bytes: Whole::at(limits::DEFAULT_MAX_COMMAND_BYTES as u64),
            memory: None,
            cpu: None,
            pids: None,
            max_session_spill_bytes: Whole::at(1 << 30),
            max_total_spill_bytes: Whole::at(4 << 30),
            max_connections: Whole::at(1024),
        }
    }
}

/// `[timeouts]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a section ([timeouts])")]
pub struct Timeouts {
    pub default_secs: Whole<MIN_T, MAX_T>,
    pub slow_secs: Whole<MIN_T, MAX_T>,
    pub background_secs: Whole<MIN_T, MAX_T>,
    /// What a foreground job that passes its timeout becomes, unless the request says.
    #[serde(with = "choice")]
    pub on_timeout: OnTimeout,
    pub kill_grace_ms: Whole<0, 600_000>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            default_secs: Whole::at(limits::DEFAULT_TIMEOUT_SECS),
            slow_secs: Whole::at(limits::SLOW_TIMEOUT_SECS),
            background_secs: Whole::at(limits::BACKGROUND_TIMEOUT_SECS),
            on_timeout: OnTimeout::Background,
            kill_grace_ms: Whole::at(limits::DEFAULT_KILL_GRACE_MS),
        }
    }
}

/// `[sessions]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a section ([sessions])")]
pub struct Sessions {
    /// How long a session whose owners have all exited keeps its background jobs
    /// (DESIGN §3).
    pub linger_secs: Whole<0, { 7 * 86_400 }>,
    #[serde(with = "choice")]
    pub on_straggler: OnStraggler,
    /// Finished jobs each session keeps listed, with their output, until it ends: each
    /// holds at most its limits of output in memory, so this bounds a session's memory.
    pub keep_finished: Whole<0, 100_000>,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            linger_secs: Whole::at(900),
            on_straggler: OnStraggler::Background,
            keep_finished: Whole::at(100),
        }
    }
}

/// `[containment]`: how the daemon holds its jobs' processes, chosen at start (a
/// reload does not change it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a section ([containment])")]
pub struct Containment {
    #[serde(with = "choice")]
    pub mechanism: Mechanism,
    /// A cgroup v2 directory the daemon may write, under which each job gets a cgroup
    /// of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<AbsolutePath>,
}

/// An absolute path, as `containment.cgroup` needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct AbsolutePath(pub String);

impl<'de> Deserialize<'de> for AbsolutePath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match String::deserialize(deserializer) {
            Ok(path) if path.starts_with('/') => Ok(AbsolutePath(path)),
            _ => Err(serde::de::Error::custom(
                "must be an absolute path, like \"/sys/fs/cgroup/user.slice/bashd\"",
            )),
        }
    }
}

/// The credential stores `deny_read` hides unless the config says otherwise.
pub const DEFAULT_DENY_READ: &[&str] = &[
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker/config.json",
    "~/.netrc",
    "~/.git-credentials",
    "~/.config/gh",
    "~/.azure",
    "~/.cargo/credentials.toml",
    // Registry tokens (issue 44): confined jobs get the registries' URLs through
    // their tools' environment variables instead (`daemon/src/network/sources.rs`).
    "~/.npmrc",
    "~/.yarnrc.yml",
    "~/.pypirc",
    "~/.m2/settings.xml",
    "~/.gem/credentials",
];

/// A `[sandbox]` path as written: `~`, `~/...` or absolute ([`sandbox_path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxPath<'a> {
    /// Under the home of whoever expands it (the daemon: its own `HOME`); what follows
    /// `~/`, empty for `~` itself.
    Home(&'a str),
    Absolute(&'a str),
}

/// Where a `[sandbox]` path is, or why it is none: the file's rule, checked alike by
/// every reader; only the daemon, which confines jobs, knows the `HOME` it is under.
pub fn sandbox_path(path: &str) -> Result<SandboxPath<'_>, String> {
    if path == "~" {
        return Ok(SandboxPath::Home(""));
    }
    if let Some(rest) = path.strip_prefix("~/") {
        return Ok(SandboxPath::Home(rest));
    }
    if path.starts_with('/') {
        Ok(SandboxPath::Absolute(path))
    } else {
        Err(format!(
            "{path:?} is neither absolute nor under ~: write it like \"/data/cache\" or \"~/.cache\""
        ))
    }
}

/// `[sandbox]`: the sandbox jobs get and the floor a client may not go below. The
/// paths are as written ([`sandbox_path`]); the daemon expands `~` under its own
/// `HOME`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a section ([sandbox])")]
pub struct Sandbox {
    /// The profile of a job whose request names none. Unset (`None`): each front
    /// end's own (`FrontEnd::own`: `workspace-write` for an agent's MCP calls, `off`
    /// for the command line); written, it holds for every front end.
    #[serde(with = "choice_or_unset", skip_serializing_if = "Option::is_none")]
    pub default: Option<SandboxProfile>,
    /// The network of a job whose request names none; unset, each front end's own
    /// (`allow-list` for MCP, `on` for the command line).
    #[serde(with = "choice_or_unset", skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
    pub writable: Strings,
    pub deny_read: Strings,
    pub unix_sockets: Strings,
    /// The loosest profile without a person's yes; unset, each front end's own
    /// (`workspace-write` for MCP, `off` for the command line), loosened to a written
    /// `default` (`FrontEnd::resolve`).
    #[serde(with = "choice_or_unset", skip_serializing_if = "Option::is_none")]
    pub floor: Option<SandboxProfile>,
    /// How long a request looser than the floor waits for a person's answer (issue
    /// 44) before it is refused.
    pub ask_secs: Whole<MIN_T, MAX_T>,
    /// The hosts a job whose network is `allow-list` reaches through bashd's proxy
    /// (issue 43); empty, such a job reaches none.
    pub allow_hosts: AllowHosts,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox {
            default: None,
            network: None,
            writable: Strings::default(),
            deny_read: Strings(DEFAULT_DENY_READ.iter().map(|p| p.to_string()).collect()),
            unix_sockets: Strings::default(),
            floor: None,
            ask_secs: Whole::at(limits::DEFAULT_ASK_SECS),
            allow_hosts: AllowHosts::default(),
        }
    }
}

/// `[mcp]` (DESIGN §12): the bounds of MCP tool calls, in the daemon's config so that
/// one file, reloaded on SIGHUP, rules every `bashc mcp` of the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a section ([mcp])")]
pub struct Mcp {
    /// An MCP call is answered within this; a job still running then moves to the
    /// background. Below the 60 s after which common clients give up.
    pub max_call_secs: Whole<MIN_T, MAX_T>,
    #[serde(with = "choice")]
    pub on_cancel: OnCancel,
    /// `[mcp.clients."NAME"]`, read by `bashc mcp`; shown as sections of their own.
    #[serde(skip_serializing, deserialize_with = "clients")]
    pub clients: BTreeMap<String, ClientBudget>,
}

/// `[mcp.clients]`: a table per client name.
fn clients<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, ClientBudget>, D::Error> {
    struct Clients;
    impl<'de> serde::de::Visitor<'de> for Clients {
        type Value = BTreeMap<String, ClientBudget>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a table of clients, like [mcp.clients.\"codex-mcp-client\"]")
        }

        fn visit_map<M: serde::de::MapAccess<'de>>(
            self,
            mut map: M,
        ) -> Result<Self::Value, M::Error> {
            let mut clients = BTreeMap::new();
            while let Some((name, budget)) = map.next_entry()? {
                clients.insert(name, budget);
            }
            Ok(clients)
        }
    }
    deserializer.deserialize_map(Clients)
}

impl Default for Mcp {
    fn default() -> Self {
        Mcp {
            max_call_secs: Whole::at(limits::DEFAULT_MCP_MAX_CALL_SECS),
            on_cancel: OnCancel::Kill,
            clients: BTreeMap::new(),
        }
    }
}

impl Mcp {
    pub fn max_call(&self) -> Duration {
        Duration::from_secs(self.max_call_secs.get())
    }
}

/// One `[mcp.clients."NAME"]`: how much of a result the client shows whole. A key not
/// given keeps `bashc mcp`'s figure for the client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table of result_lines, result_bytes, error_result_bytes"
)]
pub struct ClientBudget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_lines: Option<Whole<10, 1_000_000>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_bytes: Option<Whole<1_000, 100_000_000>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_result_bytes: Option<Whole<1_000, 100_000_000>>,
}

/// bashc's relay idle time when the file says none.
pub const DEFAULT_RELAY_IDLE_SECS: u64 = 600;

/// The least relay idle time: a relay idle at once would end before the call that
/// started it connects.
pub const MIN_RELAY_IDLE_SECS: u64 = 5;

/// `[remote]` (DESIGN §14): how bashc reaches other hosts. Read by bashc, checked and
/// shown by the daemon with the rest of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a section ([remote])")]
pub struct Remote {
    /// A command run by `sh -c` that reaches a host's bridge; `{host}` and `{control}`
    /// (the control socket path for multiplexing) are replaced, shell-quoted.
    /// `$BASHD_BRIDGE_COMMAND` overrides it ([`Remote::in_force`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bridge_command: Option<String>,
    /// Where `bashc` is on the remote hosts, when not on their PATH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bashc_path: Option<String>,
    /// How long a host's relay stays up with no client.
    pub relay_idle_secs: RelayIdle,
}

impl Default for Remote {
    fn default() -> Self {
        Remote {
            bridge_command: None,
            bashc_path: None,
            relay_idle_secs: RelayIdle(Whole::at(DEFAULT_RELAY_IDLE_SECS)),
        }
    }
}

/// Overrides `[remote] bridge_command` (the same syntax): how to reach a host's bridge.
pub const BRIDGE_COMMAND_ENV: &str = "BASHD_BRIDGE_COMMAND";

impl Remote {
    /// `[remote]` with `$BASHD_BRIDGE_COMMAND` over `bridge_command`.
    pub fn in_force(mut self) -> Remote {
        if let Some(command) = bridge_command_env() {
            self.bridge_command = Some(command);
        }
        self
    }

    pub fn relay_idle(&self) -> Duration {
        Duration::from_secs(self.relay_idle_secs.0.get())
    }
}

/// `$BASHD_BRIDGE_COMMAND`, when set to something.
pub fn bridge_command_env() -> Option<String> {
    std::env::var(BRIDGE_COMMAND_ENV)
        .ok()
        .filter(|c| !c.is_empty())
}

/// `remote.relay_idle_secs`: a day at most, since a relay holds an SSH connection open;
/// at least [`MIN_RELAY_IDLE_SECS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct RelayIdle(pub Whole<MIN_RELAY_IDLE_SECS, 86_400>);

impl<'de> Deserialize<'de> for RelayIdle {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Whole::deserialize(deserializer).map(RelayIdle).map_err(|_: D::Error| {
            serde::de::Error::custom(
                "must be a whole number from 5 to 86400: a relay needs a few seconds to take the call that started it, so 0 cannot turn relays off (5 ends one soon after each call)",
            )
        })
    }
}

/// The ids of the daemon's built-in policy rules, which `[policy] disable` may name:
/// only the names, so that bashc refuses a wrong one as the daemon does. The rules
/// themselves are the daemon's (`policy/rules.rs`, whose test keeps the two alike).
pub const BUILTIN_RULE_IDS: &[&str] = &[
    "git-add-blind",
    "git-push-force",
    "rm-dangerous",
    "dynamic-command",
];

/// `[policy]`: built-in rules switched off and rules of the user's own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default, expecting = "a section ([policy])")]
pub struct Policy {
    /// Built-in rules switched off, in the file's order; each one of
    /// [`BUILTIN_RULE_IDS`].
    pub disable: Strings,
    pub deny: DenyRules,
}

/// `[[policy.deny]]`, each table a rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DenyRules(pub Vec<DenyRule>);

impl<'de> Deserialize<'de> for DenyRules {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Rules;
        impl<'de> serde::de::Visitor<'de> for Rules {
            type Value = DenyRules;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("written as [[policy.deny]] tables")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<DenyRules, A::Error> {
                let mut rules = Vec::new();
                while let Some(rule) = seq.next_element()? {
                    rules.push(rule);
                }
                Ok(DenyRules(rules))
            }
        }
        deserializer.deserialize_seq(Rules)
    }
}

/// One `[[policy.deny]]`: a command (with these arguments, if given) is refused with
/// `message`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a [[policy.deny]] table")]
pub struct DenyRule {
    pub id: Text,
    pub command: Text,
    #[serde(default)]
    pub args: Strings,
    pub message: Text,
}

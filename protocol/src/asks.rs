//! Asks and grants (issue 44): a request looser than the session's floor is not refused
//! outright but held as an ask (`a1`, `a2`, ...) that only a person answers (`bashc
//! allow`, `bashc top`, an MCP client's elicitation), never a job or a tool. A yes is
//! a grant, for the one request or for the session; a host grant (`bashc allow
//! HOST[:PORT]`) is stored for the network proxy to consult.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::notice::JobId;
use crate::sandbox::{Network, SandboxProfile};

/// An ask's id as bashd gives it out: `a3`. Never reused while the daemon runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct AskId(pub u64);

impl fmt::Display for AskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a{}", self.0)
    }
}

impl FromStr for AskId {
    type Err = String;

    fn from_str(text: &str) -> Result<AskId, String> {
        text.strip_prefix('a')
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse().ok())
            .map(AskId)
            .ok_or_else(|| format!("{text:?} is not an ask id (a3, as bashc allow --list shows)"))
    }
}

impl From<AskId> for String {
    fn from(id: AskId) -> String {
        id.to_string()
    }
}

impl TryFrom<String> for AskId {
    type Error = String;

    fn try_from(text: String) -> Result<AskId, String> {
        text.parse()
    }
}

/// What an ask is for: each kind names what the person lets through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskKind {
    /// A sandbox looser than the session's floor: a profile, or the network on where
    /// the floor keeps it off.
    Sandbox {
        profile: SandboxProfile,
        network: Network,
    },
    /// Writing the `.git` of the session's writable roots (a commit).
    GitWrite { roots: Vec<String> },
    /// A connection to a host off the allow-list, opened by the network proxy.
    Host { host: String, port: Option<u16> },
}

impl fmt::Display for AskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AskKind::Sandbox { profile, network } => {
                write!(f, "sandbox {profile}, network {network}")
            }
            AskKind::GitWrite { roots } if roots.is_empty() => f.write_str("writing .git"),
            AskKind::GitWrite { roots } => write!(f, "writing .git in {}", roots.join(", ")),
            AskKind::Host {
                host,
                port: Some(port),
            } => write!(f, "host {host}:{port}"),
            AskKind::Host { host, port: None } => write!(f, "host {host}"),
        }
    }
}

/// How long a yes holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantScope {
    /// The one request that asked.
    Once,
    /// Every request of the ask's session, until revoked or the session ends.
    Session,
}

impl GrantScope {
    pub fn as_str(self) -> &'static str {
        match self {
            GrantScope::Once => "once",
            GrantScope::Session => "session",
        }
    }
}

/// Where an ask stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AskState {
    /// Nobody has answered yet.
    Pending,
    Granted {
        scope: GrantScope,
    },
    Refused,
    /// Nobody answered within `[sandbox] ask_secs`.
    Expired,
    /// The request that made it was given up before the answer (its client left).
    Withdrawn,
}

impl AskState {
    pub fn as_str(self) -> &'static str {
        match self {
            AskState::Pending => "pending",
            AskState::Granted {
                scope: GrantScope::Once,
            } => "granted once",
            AskState::Granted {
                scope: GrantScope::Session,
            } => "granted for the session",
            AskState::Refused => "refused",
            AskState::Expired => "expired",
            AskState::Withdrawn => "withdrawn",
        }
    }
}

/// One ask, as `bashc allow --list` and `bashc top` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskInfo {
    pub id: AskId,
    pub kind: AskKind,
    pub session: String,
    /// The command that asked, cut; empty for a host ask.
    pub command: String,
    pub state: AskState,
    /// When it was made, in milliseconds since the epoch.
    pub asked_ms: u64,
    /// When it expires unanswered (pending), in milliseconds since the epoch.
    pub expires_ms: u64,
    /// Who answered, and when: `bashc allow (pid 123, uid 1000)`, an MCP client's name.
    pub answered_by: Option<String>,
    pub answered_ms: Option<u64>,
    /// The job a yes started.
    pub job: Option<JobId>,
}

/// A grant that holds beyond the one request that asked: for a session, or a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantInfo {
    /// `a3` for a grant made by answering ask a3; `h1`, `h2`... for `bashc allow HOST`.
    pub id: String,
    pub kind: AskKind,
    /// `None`: every session (a host grant made without `--session`).
    pub session: Option<String>,
    pub scope: GrantScope,
    pub granted_by: String,
    pub granted_ms: u64,
    /// `None`: until revoked (or its session ends).
    pub until_ms: Option<u64>,
    /// Jobs it let start that still run.
    pub running: Vec<JobId>,
}

/// `bashc allow`: one request for every way a person answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllowRequest {
    /// The asks (pending and recently answered) and the grants in force.
    List,
    /// Answers an ask: a yes runs its request as asked, a no refuses it.
    Answer {
        ask: AskId,
        grant: bool,
        scope: GrantScope,
        /// Where the person answered, when not in `bashc allow`: an MCP client's
        /// elicitation (`bashc mcp` says which client).
        via: Option<String>,
    },
    /// Takes back a grant (`a3` or `h1`, or a host): new jobs and connections no
    /// longer get it. `kill`: end the running jobs it started too.
    Revoke { id: String, kill: bool },
    /// Lets jobs reach `host` (and only `port`, when given) through the proxy: for
    /// `session`, or every session; for `secs`, or until revoked.
    Host {
        host: String,
        port: Option<u16>,
        session: Option<String>,
        secs: Option<u64>,
    },
}

/// What `bashc allow` did, and the asks and grants as they stand after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowReply {
    /// What was done, for a person: `granted a3 once: j12 runs`.
    pub done: Option<String>,
    pub asks: Vec<AskInfo>,
    pub grants: Vec<GrantInfo>,
    /// Running jobs a revoked grant had started (ended with `kill`).
    pub jobs: Vec<JobId>,
    pub killed: bool,
}

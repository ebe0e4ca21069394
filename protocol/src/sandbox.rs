//! The sandbox a job runs in (DESIGN §15, issue 23): what a client asks for, what a
//! result says ran, and what `bashc status` reports the daemon can do.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What a job may do to the file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxProfile {
    /// Everything the user may do.
    Off,
    /// Write only in the job's workdir, the session's temp dir (the job's `TMPDIR`)
    /// and the config's `writable` paths, with `.git` read-only; read everything but
    /// `deny_read`.
    WorkspaceWrite,
    /// Write nothing but the session's temp dir; read everything but `deny_read`.
    ReadOnly,
}

/// Whether a job reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Network {
    On,
    /// Only the job's own loopback: no other host, nor the host's own listeners.
    Off,
    /// The session's own loopback, and the hosts of `[sandbox] allow_hosts` through
    /// the proxy bashd owns (issue 43).
    #[serde(rename = "allow-list")]
    AllowList,
}

/// The sandbox a job ran in, when it was not `off` with the network on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxInForce {
    pub profile: SandboxProfile,
    pub network: Network,
}

/// Who a request came through, as far as the sandbox is concerned: each front end has
/// defaults of its own for the `[sandbox]` keys the file leaves unset (issue 44). An
/// agent's `bashc mcp` runs confined by default; the command line, which a person
/// types, stays unconfined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrontEnd {
    /// `bashc` typed by a person (and the library): every request not marked
    /// `mcp_call`.
    Cli,
    /// An agent's MCP tool calls (`bashc mcp`, requests marked `mcp_call`).
    Mcp,
}

impl FrontEnd {
    pub const ALL: [FrontEnd; 2] = [FrontEnd::Mcp, FrontEnd::Cli];

    /// The front end of a request: an MCP tool call's or the command line's. The
    /// daemon knows a session by its requests only, and this is the one that decides
    /// a job's sandbox.
    pub fn of(mcp_call: bool) -> FrontEnd {
        if mcp_call {
            FrontEnd::Mcp
        } else {
            FrontEnd::Cli
        }
    }

    /// Its own `default`, `network` and `floor`, for the keys the file leaves unset:
    /// an agent writes its roots and fetches from the allow-list, and nothing looser
    /// without a person's yes; the command line is unconfined, as a shell is.
    pub fn own(self) -> (SandboxProfile, Network, SandboxProfile) {
        match self {
            FrontEnd::Mcp => (
                SandboxProfile::WorkspaceWrite,
                Network::AllowList,
                SandboxProfile::WorkspaceWrite,
            ),
            FrontEnd::Cli => (SandboxProfile::Off, Network::On, SandboxProfile::Off),
        }
    }

    /// What one front end's jobs get under the file's `[sandbox] default`, `network`
    /// and `floor` (`None`: not written). A written key holds for every front end. An
    /// unset floor is the front end's, loosened to a written default (so that writing
    /// `default = "off"` turns the agent's confinement off rather than making every
    /// job an ask); an unset default is the front end's, tightened to a written floor.
    pub fn resolve(
        self,
        default: Option<SandboxProfile>,
        network: Option<Network>,
        floor: Option<SandboxProfile>,
    ) -> FrontEndSandbox {
        let (own_default, own_network, own_floor) = self.own();
        let loosest = |a: SandboxProfile, b: SandboxProfile| {
            if a.looseness() >= b.looseness() { a } else { b }
        };
        let tightest = |a: SandboxProfile, b: SandboxProfile| {
            if a.looseness() <= b.looseness() { a } else { b }
        };
        let from = |written: bool| {
            if written {
                SettingFrom::File
            } else {
                SettingFrom::FrontEnd
            }
        };
        // An unset key the other one moved from the front end's own.
        let moved = |own: SandboxProfile, now: SandboxProfile| {
            if own == now {
                SettingFrom::FrontEnd
            } else {
                SettingFrom::Follows
            }
        };
        let profile = default.unwrap_or_else(|| match floor {
            Some(floor) => tightest(own_default, floor),
            None => own_default,
        });
        let lowest = floor.unwrap_or_else(|| match default {
            Some(default) => loosest(own_floor, default),
            None => own_floor,
        });
        FrontEndSandbox {
            front_end: self,
            default: SandboxInForce {
                profile,
                network: network.unwrap_or(own_network),
            },
            floor: lowest,
            default_from: match default {
                Some(_) => SettingFrom::File,
                None => moved(own_default, profile),
            },
            network_from: from(network.is_some()),
            floor_from: match floor {
                Some(_) => SettingFrom::File,
                None => moved(own_floor, lowest),
            },
        }
    }
}

/// Where a front end's sandbox setting came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettingFrom {
    /// Written in bashd's config file: it holds for every front end.
    File,
    /// Not written: the front end's own default ([`FrontEnd::own`]).
    FrontEnd,
    /// Not written, and moved from the front end's own by the other key written: a
    /// floor loosened to a written `default`, a default tightened to a written `floor`.
    Follows,
}

/// What one front end's jobs get when a request names nothing, and its floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontEndSandbox {
    pub front_end: FrontEnd,
    pub default: SandboxInForce,
    /// The loosest profile a request may have without a person's yes. Below an
    /// `off` floor, a network looser than `default.network` is an ask too.
    pub floor: SandboxProfile,
    pub default_from: SettingFrom,
    pub network_from: SettingFrom,
    pub floor_from: SettingFrom,
}

/// What `bashc status` says of the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxStatus {
    /// What a command-line job gets when its request names nothing (`[sandbox]
    /// default`, `network`); `front_ends` has every front end's.
    pub default: SandboxInForce,
    /// The command line's floor (`[sandbox] floor`).
    pub floor: SandboxProfile,
    /// Each front end's defaults and floor, and where each came from.
    #[serde(default)]
    pub front_ends: Vec<FrontEndSandbox>,
    /// Each mechanism the sandbox uses, and whether this system has it.
    pub mechanisms: Vec<SandboxMechanism>,
}

/// What `bashc status` says of the network of `allow-list` jobs (issue 43).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkStatus {
    /// `[sandbox] network`: the network of a job whose request names none.
    pub mode: Network,
    /// `[sandbox] allow_hosts` in force, as the file writes them.
    pub allow_hosts: Vec<String>,
    /// Where the list is written: `[sandbox] allow_hosts in /path/config.toml`.
    pub allow_hosts_origin: String,
    pub proxy: ProxyStatus,
}

/// bashd's proxy, which carries an `allow-list` job's connections to listed hosts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyStatus {
    /// Sessions whose proxy port bashd serves.
    pub sessions: u32,
    /// Connections open through it, all sessions together.
    pub connections: u32,
    /// Its caps, apart from `[limits] max_connections`.
    pub max_connections: u32,
    pub max_session_connections: u32,
    /// Requests refused since bashd started: by the allow-list, and over a cap.
    pub refused: u64,
    pub busy: u64,
}

/// One kernel mechanism of the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxMechanism {
    /// `landlock`, `user namespace`, `mount namespace`, `network namespace`,
    /// `seccomp`.
    pub name: String,
    pub available: bool,
    /// The version (`ABI 7`) where it is there, what failed where it is not.
    pub detail: String,
    /// The doors it closes to a sandboxed job, as a person reads them (`unix sockets`,
    /// `other terminals`); empty from a daemon older than issue 30.
    #[serde(default)]
    pub closes: Vec<String>,
}

/// A host the person's own tools fetch from, as `bashc status` shows it (issue 44).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSource {
    /// `host` or `host:port`, as `[sandbox] allow_hosts` takes it.
    pub entry: String,
    /// Where bashd read it: `npm config get registry`, `~/.cargo/config.toml
    /// [registries.corp]`, `git remote origin of /src/app`.
    pub origin: String,
}

/// What a failed job's output suggests the sandbox refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxDenial {
    /// A file access was refused (`Permission denied`, `Read-only file system`) that
    /// names no hidden path: most likely a write outside what the profile allows.
    Files,
    /// A read of a path under `[sandbox] deny_read` was refused: the error names it.
    Read,
    /// A connection failed with the network off.
    Network,
}

impl SandboxProfile {
    pub const ALL: [SandboxProfile; 3] = [
        SandboxProfile::Off,
        SandboxProfile::WorkspaceWrite,
        SandboxProfile::ReadOnly,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SandboxProfile::Off => "off",
            SandboxProfile::WorkspaceWrite => "workspace-write",
            SandboxProfile::ReadOnly => "read-only",
        }
    }

    /// How much the profile allows: `off` most, `read-only` least.
    pub fn looseness(self) -> u8 {
        match self {
            SandboxProfile::Off => 2,
            SandboxProfile::WorkspaceWrite => 1,
            SandboxProfile::ReadOnly => 0,
        }
    }
}

impl fmt::Display for SandboxProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxProfile {
    type Err = String;

    fn from_str(text: &str) -> Result<SandboxProfile, String> {
        SandboxProfile::ALL
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| {
                format!("{text:?} is not a sandbox profile: use off, workspace-write or read-only")
            })
    }
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::On => "on",
            Network::Off => "off",
            Network::AllowList => "allow-list",
        }
    }

    /// How much the setting lets through: `on` most, `off` least. A floor holds on
    /// it as on the profile.
    pub fn looseness(self) -> u8 {
        match self {
            Network::On => 2,
            Network::AllowList => 1,
            Network::Off => 0,
        }
    }

    /// Whether the job gets a network namespace of its session's rather than the
    /// host's network.
    pub fn confined(self) -> bool {
        self != Network::On
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Network {
    type Err = String;

    fn from_str(text: &str) -> Result<Network, String> {
        match text {
            "on" => Ok(Network::On),
            "off" => Ok(Network::Off),
            "allow-list" => Ok(Network::AllowList),
            _ => Err(format!(
                "{text:?} is not a network setting: use on, allow-list or off"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_and_networks_read_back_as_written() {
        for profile in SandboxProfile::ALL {
            assert_eq!(profile.as_str().parse(), Ok(profile));
        }
        for network in [Network::On, Network::AllowList, Network::Off] {
            assert_eq!(network.as_str().parse(), Ok(network));
        }
        assert!("none".parse::<SandboxProfile>().is_err());
        assert!("maybe".parse::<Network>().is_err());
    }

    /// Unset, each front end gets its own; a written key holds for all; an unset
    /// floor follows a looser written default, an unset default a tighter floor.
    #[test]
    fn each_front_end_gets_its_own_where_the_file_is_silent() {
        use SandboxProfile::*;
        let got = |front: FrontEnd, d, n, f| {
            let r = front.resolve(d, n, f);
            (r.default.profile, r.default.network, r.floor)
        };
        assert_eq!(
            got(FrontEnd::Mcp, None, None, None),
            (WorkspaceWrite, Network::AllowList, WorkspaceWrite)
        );
        assert_eq!(
            got(FrontEnd::Cli, None, None, None),
            (Off, Network::On, Off)
        );
        // How a person turns an agent's confinement off.
        assert_eq!(
            got(FrontEnd::Mcp, Some(Off), Some(Network::On), None),
            (Off, Network::On, Off)
        );
        let follows = FrontEnd::Mcp.resolve(Some(Off), None, None);
        assert_eq!(follows.floor_from, SettingFrom::Follows);
        assert_eq!(follows.default_from, SettingFrom::File);
        assert_eq!(follows.network_from, SettingFrom::FrontEnd);
        // A tighter written default keeps the front end's floor.
        assert_eq!(
            got(FrontEnd::Mcp, Some(ReadOnly), None, None),
            (ReadOnly, Network::AllowList, WorkspaceWrite)
        );
        // A written floor tightens the command line's default to it.
        assert_eq!(
            got(FrontEnd::Cli, None, None, Some(ReadOnly)),
            (ReadOnly, Network::On, ReadOnly)
        );
        assert_eq!(
            FrontEnd::Cli
                .resolve(None, None, Some(ReadOnly))
                .default_from,
            SettingFrom::Follows
        );
        // Written keys are every front end's.
        for front in FrontEnd::ALL {
            assert_eq!(
                got(
                    front,
                    Some(WorkspaceWrite),
                    Some(Network::Off),
                    Some(WorkspaceWrite)
                ),
                (WorkspaceWrite, Network::Off, WorkspaceWrite)
            );
        }
    }
}

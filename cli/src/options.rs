//! The choices `bashc exec` and the MCP `bash` tool share, as one set of argument
//! types: each derives clap's `ValueEnum` for the CLI and serde and schemars for the
//! MCP schema, and maps into protocol's type in one `From`.
//!
//! Variants carry their help as `#[value(help)]`, not doc comments: schemars would
//! turn documented variants into a `oneOf`, which MCP clients do not all accept.

use bashc::protocol::{Direction, Mode, Network, OnTimeout, SandboxProfile, StdinMode, StreamName};
use clap::ValueEnum;
use rmcp::schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Clone, Copy, ValueEnum, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(crate = "rmcp::schemars")]
pub enum ModeArg {
    #[value(help = "Timeout 30 s")]
    Default,
    #[value(help = "Timeout 15 min")]
    Slow,
    #[value(help = "Return at once with the job id; timeout 24 h")]
    Background,
}

#[derive(Debug, Clone, Copy, ValueEnum, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(crate = "rmcp::schemars")]
pub enum OnTimeoutArg {
    #[value(help = "Kill the command and every process it started")]
    Kill,
    #[value(help = "Return what it printed so far and let it run on as a background job")]
    Background,
}

#[derive(Debug, Clone, Copy, ValueEnum, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(crate = "rmcp::schemars")]
pub enum DirectionArg {
    Tail,
    Head,
    #[value(name = "head_tail")]
    HeadTail,
}

#[derive(Debug, Clone, Copy, ValueEnum, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(crate = "rmcp::schemars")]
pub enum StreamArg {
    Stdout,
    Stderr,
}

#[derive(Debug, Clone, Copy, ValueEnum, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(crate = "rmcp::schemars")]
pub enum StdinArg {
    #[value(help = "Every read ends at once (the default)")]
    Null,
    #[value(help = "A pipe that `bashc send` writes to")]
    Pipe,
}

impl From<StdinArg> for StdinMode {
    fn from(stdin: StdinArg) -> StdinMode {
        match stdin {
            StdinArg::Null => StdinMode::Null,
            StdinArg::Pipe => StdinMode::Pipe,
        }
    }
}

/// Which streams `bashc follow` shows.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StreamsArg {
    Stdout,
    Stderr,
    Both,
}

impl From<StreamsArg> for Option<StreamName> {
    fn from(streams: StreamsArg) -> Option<StreamName> {
        match streams {
            StreamsArg::Stdout => Some(StreamName::Stdout),
            StreamsArg::Stderr => Some(StreamName::Stderr),
            StreamsArg::Both => None,
        }
    }
}

impl From<ModeArg> for Mode {
    fn from(mode: ModeArg) -> Mode {
        match mode {
            ModeArg::Default => Mode::Default,
            ModeArg::Slow => Mode::Slow,
            ModeArg::Background => Mode::Background,
        }
    }
}

impl From<OnTimeoutArg> for OnTimeout {
    fn from(on_timeout: OnTimeoutArg) -> OnTimeout {
        match on_timeout {
            OnTimeoutArg::Kill => OnTimeout::Kill,
            OnTimeoutArg::Background => OnTimeout::Background,
        }
    }
}

impl From<DirectionArg> for Direction {
    fn from(direction: DirectionArg) -> Direction {
        match direction {
            DirectionArg::Tail => Direction::Tail,
            DirectionArg::Head => Direction::Head,
            DirectionArg::HeadTail => Direction::HeadTail,
        }
    }
}

impl From<StreamArg> for StreamName {
    fn from(stream: StreamArg) -> StreamName {
        match stream {
            StreamArg::Stdout => StreamName::Stdout,
            StreamArg::Stderr => StreamName::Stderr,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[schemars(crate = "rmcp::schemars")]
pub enum SandboxArg {
    #[value(help = "No sandbox: everything the user may do")]
    Off,
    #[value(
        help = "Write only in the workdir, $TMPDIR and the config's writable paths; .git read-only; credential stores hidden"
    )]
    WorkspaceWrite,
    #[value(help = "Write only in $TMPDIR; credential stores hidden")]
    ReadOnly,
}

#[derive(Debug, Clone, Copy, ValueEnum, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(crate = "rmcp::schemars")]
pub enum NetArg {
    On,
    #[value(help = "Only the job's own loopback: no other host, no listener of this host")]
    Off,
    #[value(
        help = "The session's own loopback, and the hosts of [sandbox] allow_hosts through bashd's proxy"
    )]
    #[serde(rename = "allow-list")]
    AllowList,
}

impl From<SandboxArg> for SandboxProfile {
    fn from(sandbox: SandboxArg) -> SandboxProfile {
        match sandbox {
            SandboxArg::Off => SandboxProfile::Off,
            SandboxArg::WorkspaceWrite => SandboxProfile::WorkspaceWrite,
            SandboxArg::ReadOnly => SandboxProfile::ReadOnly,
        }
    }
}

impl From<NetArg> for Network {
    fn from(net: NetArg) -> Network {
        match net {
            NetArg::On => Network::On,
            NetArg::Off => Network::Off,
            NetArg::AllowList => Network::AllowList,
        }
    }
}

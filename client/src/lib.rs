//! The async client library of bashd. [`Client`] speaks the protocol over one
//! connection (any byte stream), with any number of requests in flight; [`connect`]
//! reaches the daemon a [`Target`] names, starting a local one when none is running;
//! [`ExecOptions`] makes a command's request from the options every front end shares.
//! The `bashc` CLI and `bashc mcp` are built on this and nothing else.

mod agent;
mod autostart;
mod bridge;
mod channel;
mod client;
mod error;
mod local;
mod mux;
mod options;
mod others;
mod peer;
mod relay;
mod remote;
mod target;
mod watch;

pub use agent::{default_session, find_agent_pid};
pub use autostart::AUTOSTART_ENV;
pub use bashd_protocol as protocol;
pub use bridge::{BridgeError, bridge};
pub use client::{Client, InboxHandle, Responses};
pub use error::ClientError;
pub use options::{ExecOptions, parse_cpu, parse_size};
pub use others::{OtherDaemon, describe as describe_others, other_daemons};
pub use relay::relay;
pub use remote::{BRIDGE_COMMAND_ENV, RemoteConfig, config_path, hostname};
pub use target::{Target, connect};
pub use watch::Watch;

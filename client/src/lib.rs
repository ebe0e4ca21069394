//! The async client library of bashd. [`connect`] reaches the daemon a [`Target`]
//! names (starting a local one when none is running); a [`Session`] and its [`Job`]s
//! are the handles a program holds, a method a request. Under them, [`Client`]
//! speaks the protocol over one connection (any byte stream), with any number of
//! requests in flight, and [`Responses::watch`] is the one loop that reads a
//! request's responses to its end, with the hooks of [`Watch`]. [`ExecOptions`] makes
//! a command's request from the options every front end shares. [`BlockingClient`]
//! is the same protocol without a runtime, one request at a time, for a program that
//! asks one thing of this machine's daemon and exits. The `bashc` CLI and `bashc mcp`
//! are built on this and nothing else.
//!
//! ```no_run
//! # async fn example() -> Result<(), bashc::ClientError> {
//! let client = bashc::connect(&bashc::Target::local()).await?;
//! let session = bashc::Session::new(client, "my-agent");
//! let result = session.run("ls").await?;
//! print!("{}", result.stdout.text);
//! # Ok(()) }
//! ```

mod agent;
mod autostart;
mod blocking;
mod channel;
mod client;
mod error;
mod local;
mod options;
mod others;
mod relay;
mod remote;
mod requests;
mod session;
mod target;
mod watch;

pub use agent::{default_session, find_agent, find_agent_pid};
pub use autostart::AUTOSTART_ENV;
pub use bashd_protocol as protocol;
pub use blocking::{BlockingClient, BlockingResponses};
pub use client::{Client, InboxHandle, Responses};
pub use error::ClientError;
pub use local::connect_checked;
pub use options::{ExecOptions, parse_cpu, parse_size};
pub use others::{OtherDaemon, describe as describe_others, other_daemons};
pub use relay::{RELAY_LOCK_FD_ENV, RelayPaths};
pub use remote::{
    BRIDGE_COMMAND_ENV, RemoteConfig, check_host, config_path, hostname, load_remote,
};
pub use session::{Job, Session};
pub use target::{HOST_ENV, Target, connect};
pub use watch::Watch;

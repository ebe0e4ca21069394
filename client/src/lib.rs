//! The async client library of bashd. [`Client`] speaks the protocol over one
//! connection, with any number of requests in flight; [`connect_or_start`] also starts
//! the daemon when none is running. The `bashc` CLI is built on this and nothing else.

mod agent;
mod autostart;
mod client;

pub use agent::{default_session, find_agent_pid};
pub use autostart::{AUTOSTART_ENV, connect_or_start};
pub use bashd_protocol as protocol;
pub use client::{Client, ClientError, Responses};

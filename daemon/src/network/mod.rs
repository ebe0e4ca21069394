//! The network of a job whose `[sandbox] network` is `allow-list` (issue 43): the
//! allow-list in force (`allow_list.rs`), the proxy bashd runs for every session
//! (`proxy/`), the names it resolves (`resolve.rs`), and where the person's own
//! tools fetch from (`sources.rs`, issue 44), which the allow-list is built from.
//!
//! The daemon makes one [`Proxy`] and hands it each session's listening socket
//! (`Proxy::serve`); the socket is made inside the session's network namespace by
//! its resident and passed to bashd, so every connection on it is that session's.
//! What the proxy refuses comes back as [`Refused`] values on a channel, for the
//! session's inbox and the job's result; the jobs actor opens an ask for a person
//! (issue 44) and tells the proxy its id, which the refusal names.

pub mod allow_list;
pub mod proxy;
pub mod resolve;
pub mod sources;

use std::fmt;
use std::net::IpAddr;

pub use allow_list::{AllowList, Target};
pub use proxy::{Proxy, ProxyCaps, ProxyCounts};
pub use resolve::{Resolve, SystemResolver};

/// A host a person allowed beyond the list (`bashc allow HOST[:PORT]`, issue 44).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostGrant {
    /// The session it holds for; `None`: every session.
    pub session: Option<String>,
    pub entry: bashd_protocol::config::AllowHost,
    /// When it lapses (`--secs`).
    pub until: Option<std::time::Instant>,
}

/// A request the proxy refused because of the allow-list, as the session is told it:
/// `network: refused HOST:PORT, not on the allow-list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The session whose listener the request came in on.
    pub session: String,
    /// The host as the request named it (`example.org`, `192.0.2.7`, `[::1]`).
    pub host: String,
    pub port: u16,
    pub why: RefusedWhy,
}

/// A refusal as the proxy reports it, with where it hears of the ask the refusal
/// opened: dropped unanswered when none was (the session has no `allow-list` job, too
/// many asks are pending, or the refusal is one no grant of the host would lift).
#[derive(Debug)]
pub struct Refused {
    pub refusal: Refusal,
    pub ask: tokio::sync::oneshot::Sender<bashd_protocol::AskId>,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedWhy {
    /// No entry of the list names the host on that port: a name is refused before it
    /// is resolved.
    NotListed,
    /// The name is listed, and resolves only to this address of the host itself
    /// (loopback, link-local), which the list does not name as an address.
    Local(IpAddr),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Refusal { host, port, .. } = self;
        match self.why {
            RefusedWhy::NotListed => {
                write!(f, "network: refused {host}:{port}, not on the allow-list")
            }
            RefusedWhy::Local(ip) => write!(
                f,
                "network: refused {host}:{port}, it resolves to {ip}, an address of this host not on the allow-list"
            ),
        }
    }
}

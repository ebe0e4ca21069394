//! `bashc allow`: the person's answers to asks (issue 44). A request looser than its
//! session's floor waits as an ask (`a3`) until the person grants it (`--ask`, for
//! the one request or `--session-wide`), refuses it (`--refuse`), or it expires; a
//! grant is taken back with `--revoke`. `bashc allow HOST[:PORT]` stores a host grant
//! for the network proxy. With no argument, or `--list`: the asks and grants.
//!
//! bashd refuses all of it through a job's channel and from a process it can tell
//! runs inside one of its jobs: only a person answers.

use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use bashc::protocol::{AllowReply, AllowRequest, AskId, AskState, GrantScope};
use clap::Args;

use crate::common::{connect, print};

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("action").multiple(false).args(["address", "ask", "refuse", "list", "revoke"]))]
pub struct AllowArgs {
    /// Let jobs reach HOST (HOST:PORT: that port only) through bashd's network proxy.
    /// Holds for every session unless --session names one ($BASHD_SESSION is never
    /// read), until revoked unless --secs.
    #[arg(value_name = "HOST[:PORT]")]
    address: Option<String>,
    /// Grant ask ID: its request runs as asked. Once (the default) lets that request
    /// through; --session-wide lets every later request of its session as loose.
    #[arg(long, value_name = "ID")]
    ask: Option<AskId>,
    /// With --ask: the grant holds for the one request that asked (the default).
    #[arg(long, requires = "ask", conflicts_with = "session_wide")]
    once: bool,
    /// With --ask: the grant holds for every request of the ask's session, until
    /// revoked or the session ends.
    #[arg(long, requires = "ask")]
    session_wide: bool,
    /// Refuse ask ID: its request is refused, with what the agent can do instead.
    #[arg(long, visible_alias = "deny", value_name = "ID")]
    refuse: Option<AskId>,
    /// List the asks (pending first) and the grants in force, with who granted each,
    /// when and until when. The default with no argument.
    #[arg(long)]
    list: bool,
    /// Take back a grant: ID (a3, h1) or HOST[:PORT]. New jobs ask again; the running
    /// jobs it started are named, and ended with --kill.
    #[arg(long, value_name = "ID|HOST")]
    revoke: Option<String>,
    /// With --revoke: end the running jobs the grant started.
    #[arg(long, requires = "revoke")]
    kill: bool,
    /// With HOST: the session the grant holds for.
    #[arg(long, requires = "address", value_name = "SESSION")]
    session: Option<String>,
    /// With HOST: the grant lapses after N seconds.
    #[arg(long, requires = "address", value_name = "N")]
    secs: Option<u64>,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn allow(args: AllowArgs, target: &bashc::Target) -> anyhow::Result<u8> {
    let request = if let Some(ask) = args.ask {
        AllowRequest::Answer {
            ask,
            grant: true,
            scope: if args.session_wide {
                GrantScope::Session
            } else {
                GrantScope::Once
            },
            via: None,
        }
    } else if let Some(ask) = args.refuse {
        AllowRequest::Answer {
            ask,
            grant: false,
            scope: GrantScope::Once,
            via: None,
        }
    } else if let Some(id) = args.revoke.clone() {
        AllowRequest::Revoke {
            id,
            kill: args.kill,
        }
    } else if let Some(address) = &args.address {
        let (host, port) = host_port(address)?;
        AllowRequest::Host {
            host,
            port,
            session: args.session.clone(),
            secs: args.secs,
        }
    } else {
        AllowRequest::List
    };
    let listing = matches!(request, AllowRequest::List);
    let client = connect(target).await?;
    let reply = client.allow(request).await?;
    print(args.json, &reply, |reply| text(reply, listing, &args))?;
    Ok(0)
}

/// `HOST` or `HOST:PORT` (an IPv6 address in brackets: `[::1]:8080`).
fn host_port(text: &str) -> anyhow::Result<(String, Option<u16>)> {
    let bad = || {
        anyhow::anyhow!(
            "{text:?} is not HOST or HOST:PORT; give one like pypi.org or 10.0.0.5:8080"
        )
    };
    let (host, port) = match text.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') || host.ends_with(']') => {
            (host, Some(port.parse::<u16>().map_err(|_| bad())?))
        }
        _ => (text, None),
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(bad());
    }
    Ok((host.to_owned(), port))
}

fn text(reply: &AllowReply, listing: bool, args: &AllowArgs) -> String {
    let mut out = String::new();
    if let Some(done) = &reply.done {
        let _ = writeln!(out, "{done}");
        if let Some(id) = &args.revoke
            && !reply.jobs.is_empty()
            && !reply.killed
        {
            let _ = writeln!(out, "bashc allow --revoke {id} --kill ends them");
        }
    }
    if !listing {
        return out;
    }
    let now = now_ms();
    let mut asks: Vec<_> = reply.asks.iter().collect();
    // Pending on top, then the newest answers.
    asks.sort_by_key(|ask| (ask.state != AskState::Pending, std::cmp::Reverse(ask.id)));
    if asks.is_empty() {
        out.push_str("no asks\n");
    } else {
        let _ = writeln!(out, "ASK  STATE                    SESSION  WHAT  COMMAND");
        for ask in asks {
            let state = match ask.state {
                AskState::Pending => format!(
                    "pending ({} s left)",
                    ask.expires_ms.saturating_sub(now) / 1000
                ),
                state => {
                    let by = ask
                        .answered_by
                        .as_deref()
                        .map_or(String::new(), |by| format!(" by {by}"));
                    let job = ask.job.map_or(String::new(), |job| format!(" ({job})"));
                    format!("{}{by}{job}", state.as_str())
                }
            };
            let _ = writeln!(
                out,
                "{}  {state}  {}  {}  {}",
                ask.id, ask.session, ask.kind, ask.command
            );
        }
        if reply.asks.iter().any(|ask| ask.state == AskState::Pending) {
            out.push_str(
                "answer: bashc allow --ask ID (once; --session-wide for the session), or bashc allow --refuse ID\n",
            );
        }
    }
    if reply.grants.is_empty() {
        out.push_str("no grants\n");
    } else {
        let _ = writeln!(out, "GRANT  FOR  SESSION  WHAT  BY  SINCE  UNTIL  RUNNING");
        for grant in &reply.grants {
            let until = grant.until_ms.map_or("until revoked".to_owned(), |until| {
                format!("{} s from now", until.saturating_sub(now) / 1000)
            });
            let running: Vec<String> = grant.running.iter().map(|j| j.to_string()).collect();
            let _ = writeln!(
                out,
                "{}  {}  {}  {}  {}  {} s ago  {until}  {}",
                grant.id,
                grant.scope.as_str(),
                grant.session.as_deref().unwrap_or("every session"),
                grant.kind,
                grant.granted_by,
                now.saturating_sub(grant.granted_ms) / 1000,
                if running.is_empty() {
                    "-".to_owned()
                } else {
                    running.join(",")
                }
            );
        }
    }
    out
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

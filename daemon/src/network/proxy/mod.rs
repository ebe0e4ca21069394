//! bashd's proxy (issue 43): one port per session that speaks HTTP forwarding
//! (`http.rs`: `GET http://host/path`, and `CONNECT host:port`) and SOCKS5
//! (`socks.rs`), told apart by the first byte. Each request is judged on the target
//! it names (the request line, the CONNECT, the SOCKS request), never on a `Host`
//! header; a name on the list is resolved by the proxy, and the connection goes to
//! the address it resolved and judged (`open`).
//!
//! Bounds: connections are counted in all and per session, apart from the daemon's
//! own `max_connections`; past either count a connection is still read for its
//! request (under a small count of its own) and answered "busy", so a client says why.
//! A request head has a deadline and a size; past the head, bytes are streamed through
//! a bounded buffer each way, and a bulk transfer through a pipe with `splice(2)`
//! (`pump.rs`), so a connection's memory is bounded and a slow side holds up its own
//! connection only.

mod http;
mod pump;
mod socks;

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::allow_list::{AllowList, Target};
use super::resolve::Resolve;
use super::{HostGrant, Refusal, Refused, RefusedWhy};
use bashd_protocol::AskId;
use bashd_protocol::config::AllowHost;

/// How long a refusal waits to be told the ask it opened: the jobs actor answers at
/// once unless it is swamped, and the refusal must not wait on it.
const ASK_TOLD_WITHIN: Duration = Duration::from_secs(2);

/// The proxy's own bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyCaps {
    /// Connections served at once, all sessions together.
    pub max_connections: usize,
    /// Connections one session's jobs hold at once.
    pub max_session_connections: usize,
    /// Connections over a count that are read for their request to be answered
    /// "busy"; past these, a connection is closed unanswered.
    pub max_busy_answers: usize,
    /// How long a client has to send its request head (or SOCKS greeting and request).
    pub head_timeout: Duration,
    /// The longest request head read; a longer one is answered 431.
    pub max_head_bytes: usize,
    /// How long connecting to a server may take.
    pub connect_timeout: Duration,
    /// A bulk transfer moves through a pipe with `splice(2)` (`pump.rs`); off, it is
    /// copied through bashd's memory, as the bench compares.
    pub splice: bool,
}

impl Default for ProxyCaps {
    /// 1,024 connections at 16 KiB of buffers each (two 8 KiB copy buffers; the head
    /// buffer is gone by then) bound the proxy's buffers to 16 MiB; 64 bulk directions
    /// at once add a pipe each, of at most 256 KiB of kernel pages (`pump.rs`).
    fn default() -> ProxyCaps {
        ProxyCaps {
            max_connections: 1024,
            max_session_connections: 256,
            max_busy_answers: 32,
            head_timeout: Duration::from_secs(10),
            max_head_bytes: 16 * 1024,
            connect_timeout: Duration::from_secs(10),
            splice: true,
        }
    }
}

/// What `bashc status` shows of the proxy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyCounts {
    /// Connections open, all sessions together.
    pub open: usize,
    /// Sessions whose port is served ([`Proxy::serve`] running).
    pub sessions: usize,
    pub refused: u64,
    pub busy: u64,
    /// Bulk directions moved through a pipe with `splice(2)`, since the start.
    pub spliced: u64,
}

/// The proxy: made once by the daemon, cloned for each session it serves.
#[derive(Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("caps", &self.shared.caps)
            .finish_non_exhaustive()
    }
}

struct Shared {
    caps: ProxyCaps,
    /// The list in force; a reload replaces it, and each request reads it afresh.
    allow: watch::Sender<Arc<AllowList>>,
    /// The hosts a person allowed beyond the list (`bashc allow HOST`, issue 44),
    /// for a session or every one, each until its time is up.
    grants: watch::Sender<Arc<Vec<HostGrant>>>,
    /// The list joined with the grants, made again when either changes or a grant's
    /// time is up, never per connection. A std mutex: held to clone an `Arc` out, or
    /// to make it again, never across an await.
    joined: Mutex<Joined>,
    resolver: Arc<dyn Resolve>,
    /// Refusals for the sessions' inboxes and asks; full, a refusal is only counted.
    refusals: mpsc::Sender<Refused>,
    open: AtomicUsize,
    busy_open: AtomicUsize,
    /// Listeners served, one per session and mode.
    listeners: AtomicUsize,
    /// Connections per session. A std mutex: held for an insert or a decrement,
    /// never across an await.
    per_session: Mutex<HashMap<String, usize>>,
    refused: AtomicU64,
    busy: AtomicU64,
    /// The bulk transfers' budget and counts (`pump.rs`).
    bulk: pump::Bulk,
}

/// The lists in force: the list and the grants for every session, and for each
/// session with grants of its own, those too.
struct Joined {
    everyone: Arc<AllowList>,
    sessions: HashMap<String, Arc<AllowList>>,
    /// When the first grant in it lapses: from then on it is made again.
    lapses: Option<std::time::Instant>,
}

impl Joined {
    fn new(list: &Arc<AllowList>, grants: &[HostGrant]) -> Joined {
        let now = std::time::Instant::now();
        let live: Vec<&HostGrant> = grants
            .iter()
            .filter(|g| g.until.is_none_or(|until| until > now))
            .collect();
        let with = |extra: Vec<AllowHost>| {
            if extra.is_empty() {
                return Arc::clone(list);
            }
            let mut entries = list.entries().to_vec();
            entries.extend(extra);
            Arc::new(AllowList::new(entries, list.origin().to_owned()))
        };
        let for_all: Vec<AllowHost> = live
            .iter()
            .filter(|g| g.session.is_none())
            .map(|g| g.entry.clone())
            .collect();
        let mut sessions = HashMap::new();
        for session in live.iter().filter_map(|g| g.session.as_deref()) {
            if sessions.contains_key(session) {
                continue;
            }
            let mut extra = for_all.clone();
            extra.extend(
                live.iter()
                    .filter(|g| g.session.as_deref() == Some(session))
                    .map(|g| g.entry.clone()),
            );
            sessions.insert(session.to_owned(), with(extra));
        }
        Joined {
            everyone: with(for_all),
            sessions,
            lapses: live.iter().filter_map(|g| g.until).min(),
        }
    }
}

/// A connection's place under the caps, given back when it ends.
enum Admission {
    Served(Arc<Shared>, String),
    /// Over a cap: the request is read and answered busy.
    Busy(Arc<Shared>),
}

/// Why a request was not carried.
#[derive(Debug)]
enum Denied {
    /// Over a cap (`Admission::Busy`).
    Busy,
    /// The host is not one the allow-list names ([`Refusal`]), and the ask for a
    /// person it opened, if one was.
    Refused(Refusal, Option<AskId>),
    /// A listed name did not resolve.
    Unresolved(io::Error),
    /// No address of the host took the connection.
    Unreachable(io::Error),
}

impl Proxy {
    /// A proxy judging by `allow`, resolving names with `resolver`, and telling its
    /// refusals on `refusals`.
    pub fn new(
        allow: AllowList,
        caps: ProxyCaps,
        resolver: Arc<dyn Resolve>,
        refusals: mpsc::Sender<Refused>,
    ) -> Proxy {
        let allow = Arc::new(allow);
        Proxy {
            shared: Arc::new(Shared {
                caps,
                allow: watch::Sender::new(Arc::clone(&allow)),
                grants: watch::Sender::new(Arc::default()),
                joined: Mutex::new(Joined::new(&allow, &[])),
                resolver,
                refusals,
                open: AtomicUsize::new(0),
                busy_open: AtomicUsize::new(0),
                listeners: AtomicUsize::new(0),
                per_session: Mutex::new(HashMap::new()),
                refused: AtomicU64::new(0),
                busy: AtomicU64::new(0),
                bulk: pump::Bulk::new(caps.splice),
            }),
        }
    }

    /// Puts `allow` in force: requests judged from now on use it (a reload).
    pub fn set_allow_list(&self, allow: AllowList) {
        self.shared.allow.send_replace(Arc::new(allow));
        self.shared.rejoin();
    }

    /// Replaces the hosts a person allowed: each request from now on is judged with
    /// them (a revoked host is refused from the next connection).
    pub fn set_host_grants(&self, grants: Vec<HostGrant>) {
        self.shared.grants.send_replace(Arc::new(grants));
        self.shared.rejoin();
    }

    /// The list in force.
    pub fn allow_list(&self) -> Arc<AllowList> {
        Arc::clone(&self.shared.allow.borrow())
    }

    pub fn caps(&self) -> ProxyCaps {
        self.shared.caps
    }

    pub fn counts(&self) -> ProxyCounts {
        let shared = &self.shared;
        ProxyCounts {
            open: shared.open.load(Ordering::Relaxed),
            sessions: shared
                .per_session
                .lock()
                .expect("never poisoned: no panic while held")
                .len(),
            refused: shared.refused.load(Ordering::Relaxed),
            busy: shared.busy.load(Ordering::Relaxed),
            spliced: shared.bulk.spliced.load(Ordering::Relaxed),
        }
    }

    /// Serves `listener`, the proxy port of `session`, until `shutdown`: each
    /// connection in a task of its own, ended with the listener's serving at
    /// shutdown. Returns when `shutdown` is cancelled.
    pub async fn serve(&self, listener: TcpListener, session: String, shutdown: CancellationToken) {
        let shared = &self.shared;
        shared.listeners.fetch_add(1, Ordering::Relaxed);
        let _served = scopeguard(|| {
            shared.listeners.fetch_sub(1, Ordering::Relaxed);
        });
        loop {
            // Cancelling the accept loses no connection: one not yet accepted is
            // closed with the listener.
            let accepted = tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors or memory: wait rather than spin; the
                    // client is not lost, it waits in the backlog.
                    tracing::warn!("proxy of session {session}: cannot accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Some(admission) = self.shared.admit(&session) else {
                continue;
            };
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                // Cancelling a connection at shutdown closes both its sides.
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    () = connection(stream, admission) => {}
                }
            });
        }
    }
}

/// Runs `f` when dropped: a count given back however `serve` ends (returned or
/// cancelled).
fn scopeguard<F: FnOnce()>(f: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

impl Shared {
    /// A place for a connection of `session`: served under both caps, else read to be
    /// answered busy, else none (closed at once).
    fn admit(self: &Arc<Self>, session: &str) -> Option<Admission> {
        let caps = &self.caps;
        {
            let mut per_session = self
                .per_session
                .lock()
                .expect("never poisoned: no panic while held");
            let mine = per_session.get(session).copied().unwrap_or(0);
            if mine < caps.max_session_connections
                && self.open.load(Ordering::Relaxed) < caps.max_connections
            {
                // Both counts change under the lock, so two sessions cannot pass the
                // total together.
                self.open.fetch_add(1, Ordering::Relaxed);
                *per_session.entry(session.to_owned()).or_insert(0) += 1;
                return Some(Admission::Served(Arc::clone(self), session.to_owned()));
            }
        }
        self.busy.fetch_add(1, Ordering::Relaxed);
        if self.busy_open.fetch_add(1, Ordering::Relaxed) < caps.max_busy_answers {
            Some(Admission::Busy(Arc::clone(self)))
        } else {
            self.busy_open.fetch_sub(1, Ordering::Relaxed);
            None
        }
    }

    /// Judges `target:port` for `session` and connects to it: a name is matched
    /// before it is resolved, and each address it resolves to is judged again; an
    /// address is matched as one.
    async fn open(&self, session: &str, target: &Target, port: u16) -> Result<TcpStream, Denied> {
        let allow = self.list_for(session);
        let refuse = |why| self.refuse(session, target, port, why);
        let addresses = match target {
            Target::Ip(ip) if allow.allows_ip(*ip, port) => vec![SocketAddr::new(*ip, port)],
            Target::Ip(_) => return Err(refuse(RefusedWhy::NotListed).await),
            Target::Name(name) if allow.allows_name(name, port) => {
                let resolved = tokio::time::timeout(
                    self.caps.connect_timeout,
                    self.resolver.resolve(name, port),
                )
                .await
                .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "no answer")))
                .map_err(Denied::Unresolved)?;
                let Some(first) = resolved.first() else {
                    return Err(Denied::Unresolved(io::Error::new(
                        io::ErrorKind::NotFound,
                        "no address",
                    )));
                };
                let allowed: Vec<SocketAddr> = resolved
                    .iter()
                    .filter(|a| allow.allows_resolved(a.ip(), port))
                    .map(|a| SocketAddr::new(a.ip(), port))
                    .collect();
                if allowed.is_empty() {
                    return Err(refuse(RefusedWhy::Local(first.ip())).await);
                }
                allowed
            }
            Target::Name(_) => return Err(refuse(RefusedWhy::NotListed).await),
        };
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
        for address in addresses {
            match tokio::time::timeout(self.caps.connect_timeout, TcpStream::connect(address)).await
            {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Ok(Err(e)) => last = e,
                Err(_) => {
                    last = io::Error::new(io::ErrorKind::TimedOut, format!("{address}: no answer"))
                }
            }
        }
        Err(Denied::Unreachable(last))
    }
}

impl Shared {
    /// The list in force for `session`: the list, and the hosts a person granted it
    /// or every session whose time is not up.
    fn list_for(&self, session: &str) -> Arc<AllowList> {
        let mut joined = self
            .joined
            .lock()
            .expect("never poisoned: no panic while held");
        if joined
            .lapses
            .is_some_and(|lapses| lapses <= std::time::Instant::now())
        {
            *joined = Joined::new(&self.allow.borrow(), &self.grants.borrow());
        }
        Arc::clone(joined.sessions.get(session).unwrap_or(&joined.everyone))
    }

    /// Refuses `target:port` to `session`: counted, reported for its inbox, and named
    /// with the ask the report opened, if the jobs actor says so soon. A full channel
    /// loses the report, never the answer; a late actor only leaves the ask unnamed
    /// here (the inbox still names it).
    async fn refuse(&self, session: &str, target: &Target, port: u16, why: RefusedWhy) -> Denied {
        let refusal = Refusal {
            session: session.to_owned(),
            host: target.to_string(),
            port,
            why,
        };
        self.refused.fetch_add(1, Ordering::Relaxed);
        let (ask, asked) = tokio::sync::oneshot::channel();
        let sent = self.refusals.try_send(Refused {
            refusal: refusal.clone(),
            ask,
        });
        let ask = match sent {
            Ok(()) => tokio::time::timeout(ASK_TOLD_WITHIN, asked)
                .await
                .ok()
                .and_then(Result::ok),
            Err(_) => None,
        };
        Denied::Refused(refusal, ask)
    }

    /// Makes the joined lists again from the list and the grants in force. Read under
    /// the lock, so that of two changes at once the last to take it sees both.
    fn rejoin(&self) {
        let mut joined = self
            .joined
            .lock()
            .expect("never poisoned: no panic while held");
        *joined = Joined::new(&self.allow.borrow(), &self.grants.borrow());
    }
}

impl Admission {
    fn shared(&self) -> &Arc<Shared> {
        match self {
            Admission::Served(shared, _) | Admission::Busy(shared) => shared,
        }
    }

    /// Opens the connection a request asks for, or says why not.
    async fn open(&self, target: &Target, port: u16) -> Result<TcpStream, Denied> {
        match self {
            Admission::Served(shared, session) => shared.open(session, target, port).await,
            Admission::Busy(_) => Err(Denied::Busy),
        }
    }

    /// What a refusal tells the client: the list and where to change it.
    fn allow_list(&self) -> Arc<AllowList> {
        Arc::clone(&self.shared().allow.borrow())
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        match self {
            Admission::Served(shared, session) => {
                let mut per_session = shared
                    .per_session
                    .lock()
                    .expect("never poisoned: no panic while held");
                if let Some(count) = per_session.get_mut(session.as_str()) {
                    *count -= 1;
                    if *count == 0 {
                        per_session.remove(session.as_str());
                    }
                }
                shared.open.fetch_sub(1, Ordering::Relaxed);
            }
            Admission::Busy(shared) => {
                shared.busy_open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// One client connection: SOCKS5 when its first byte is 5 (its version), else HTTP.
async fn connection(mut client: TcpStream, admission: Admission) {
    let deadline = Instant::now() + admission.shared().caps.head_timeout;
    let mut first = [0u8; 1];
    let peeked = tokio::time::timeout_at(deadline, client.peek(&mut first)).await;
    if !matches!(peeked, Ok(Ok(1))) {
        return;
    }
    let _ = client.set_nodelay(true);
    let outcome = match first[0] {
        socks::VERSION => socks::serve(&mut client, &admission, deadline).await,
        _ => http::serve(&mut client, &admission, deadline).await,
    };
    if let Err(e) = outcome {
        tracing::debug!("proxy connection ended: {e}");
    }
}

#[cfg(test)]
mod tests;

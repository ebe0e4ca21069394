//! A session's networks (issue 43): the confined jobs of a session with the same
//! network setting (`off`, `allow-list`) share one network namespace, loopback up, so
//! that a server one call starts is reached by the next call and by `wait --port`, and
//! bashd publishes its ports on the host's loopback.
//!
//! bashd cannot make or enter such a namespace itself (`setns` needs `CAP_SYS_ADMIN`
//! in the namespace's user namespace and in the caller's own), so a holder does it
//! (`bashd-resident --network-holder`, `resident-core/src/confine/network.rs`): it makes
//! a user namespace and a network namespace owned by it, and sends back, on its socket,
//! the two namespaces (which each job's spawn frame carries, as it carries the job's
//! channel), a `sock_diag` socket opened inside (which sees the namespace's listeners)
//! and, for `allow-list`, the proxy's listening sockets. It stays until that socket
//! closes, and answers `connect PORT` with a socket connected from inside.
//!
//! The session owns its networks (`table/session.rs`, `Session::networks`), one
//! [`SessionNetwork`] per setting, made at the first confined job that needs it and
//! dropped with the session: the drop closes the holder's socket, so the holder exits,
//! and ends the tasks that publish its ports. A spawn in flight holds a clone of the
//! `Arc` only until its frame is sent.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bashd_protocol::Network;
use bashd_resident_core::confine::network::{HELLO_FDS, PROXY_HTTP_PORT, PROXY_SOCKS_PORT};
use bashd_resident_core::frame;
use tokio::sync::{OnceCell, watch};
use tokio::task::AbortHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::jobs::os::reaper::ReaperHandle;
use crate::network::Proxy;

/// How often bashd looks for new listeners in a session network, to publish them,
/// while a job runs in it.
const PUBLISH_EVERY: Duration = Duration::from_millis(250);
/// The most ports of one session network published on the host: each costs bashd a
/// listening socket, and a job may listen on thousands.
const MOST_PUBLISHED: usize = 64;
/// How long the holder may take to make its namespaces.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// The environment an `allow-list` job gets, set after everything else so that no
/// request's environment overrides it: every variable points at the session
/// network's proxy, on its own loopback.
pub fn proxy_env() -> Vec<(Vec<u8>, Vec<u8>)> {
    let http = format!("http://127.0.0.1:{PROXY_HTTP_PORT}");
    // socks5h: the proxy resolves names, as it must to match a name before it
    // resolves it; the job has no DNS anyway.
    let socks = format!("socks5h://127.0.0.1:{PROXY_SOCKS_PORT}");
    let no_proxy = "localhost,127.0.0.1,::1".to_owned();
    let mut env = Vec::new();
    for (key, value) in [
        ("http_proxy", &http),
        ("https_proxy", &http),
        ("all_proxy", &socks),
        ("no_proxy", &no_proxy),
    ] {
        env.push((key.as_bytes().to_vec(), value.as_bytes().to_vec()));
        env.push((
            key.to_ascii_uppercase().into_bytes(),
            value.as_bytes().to_vec(),
        ));
    }
    env
}

/// Sets [`proxy_env`] on a job's environment, over whatever the request sent.
pub fn set_proxy_env(env: &mut Vec<(Vec<u8>, Vec<u8>)>) {
    let proxy = proxy_env();
    env.retain(|(key, _)| !proxy.iter().any(|(k, _)| k == key));
    env.extend(proxy);
}

/// One network of a session: its holder, started at the first job that needs it.
#[derive(Debug)]
pub struct SessionNetwork {
    session: String,
    mode: Network,
    /// bashd's proxy, which serves an `allow-list` network's listeners.
    proxy: Option<Proxy>,
    holder: OnceCell<Arc<Holder>>,
}

/// A running holder and what it handed over.
#[derive(Debug)]
pub struct Holder {
    /// bashd's end of the holder's socket: requests go one at a time. Its close (the
    /// drop of this record) ends the holder.
    socket: Mutex<UnixStream>,
    pid: u32,
    user: OwnedFd,
    net: OwnedFd,
    /// A `sock_diag` socket opened in the namespace: its listeners, seen from outside.
    diag: OwnedFd,
    /// For `allow-list`: the proxy's listening sockets, made in the namespace before
    /// any job ran. The kernel queues connections on them (their backlog) until the
    /// proxy serves them.
    pub proxy: Option<ProxyListeners>,
    /// The ports of the namespace published on the host's loopback: the job's port,
    /// the host's port, and the task that serves it.
    published: Mutex<BTreeMap<u16, Published>>,
    /// The task that publishes, and the proxy's, ended with the holder's record.
    tasks: Mutex<Vec<AbortHandle>>,
    /// The jobs running in the network ([`InNetwork`]): with none, nothing listens in
    /// it, and the publisher sleeps.
    running: watch::Sender<usize>,
    /// Ends the proxy's serving of this network, its open connections included,
    /// when the holder's record drops.
    _proxy_shutdown: Option<DropGuard>,
}

/// A job running in a session network, counted while held: the job's record holds it
/// until the job ends.
#[derive(Debug)]
pub struct InNetwork {
    running: watch::Sender<usize>,
}

impl Drop for InNetwork {
    fn drop(&mut self) {
        self.running.send_modify(|n| *n -= 1);
    }
}

#[derive(Debug)]
struct Published {
    host_port: u16,
    task: AbortHandle,
}

/// The proxy's listening sockets in an `allow-list` session network, on its
/// `127.0.0.1`: HTTP forwarding and `CONNECT` on [`PROXY_HTTP_PORT`], SOCKS5 on
/// [`PROXY_SOCKS_PORT`].
#[derive(Debug)]
pub struct ProxyListeners {
    pub http: TcpListener,
    pub socks: TcpListener,
}

/// Serves an `allow-list` session network's proxy listeners with bashd's proxy, once
/// its holder is up, until `shutdown`: each connection on them is the session's,
/// since only its jobs are in the namespace. A listener that cannot be served is
/// logged, and its connections are refused by the kernel once the holder goes.
fn serve_proxy(
    session: &str,
    listeners: &ProxyListeners,
    proxy: &Proxy,
    shutdown: &CancellationToken,
) -> Vec<AbortHandle> {
    [&listeners.http, &listeners.socks]
        .into_iter()
        .filter_map(|listener| {
            let listener = listener
                .try_clone()
                .and_then(tokio::net::TcpListener::from_std)
                .inspect_err(|e| {
                    tracing::warn!(session, "cannot serve the proxy's listener: {e}");
                })
                .ok()?;
            let proxy = proxy.clone();
            let (session, shutdown) = (session.to_owned(), shutdown.clone());
            let task = async move { proxy.serve(listener, session, shutdown).await };
            Some(tokio::spawn(task).abort_handle())
        })
        .collect()
}

impl Drop for Holder {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().map(std::mem::take).unwrap_or_default() {
            task.abort();
        }
        for (_, published) in std::mem::take(self.published.get_mut().unwrap()) {
            published.task.abort();
        }
        tracing::debug!(pid = self.pid, "session network dropped");
    }
}

impl SessionNetwork {
    pub fn new(session: &str, mode: Network, proxy: Option<Proxy>) -> SessionNetwork {
        SessionNetwork {
            session: session.to_owned(),
            mode,
            proxy,
            holder: OnceCell::new(),
        }
    }

    /// The holder, started at the first call (by `binary`, forked by the reaper); a
    /// start that failed is tried again by the next job, so a passing shortage (of
    /// descriptors, of processes) does not cost the session its network.
    pub async fn holder(
        &self,
        binary: &std::path::Path,
        reaper: &ReaperHandle,
    ) -> io::Result<Arc<Holder>> {
        let holder = self
            .holder
            .get_or_try_init(|| {
                start(
                    &self.session,
                    self.mode,
                    self.proxy.as_ref(),
                    binary,
                    reaper,
                )
            })
            .await?;
        Ok(Arc::clone(holder))
    }

    /// The holder, if it was started.
    pub fn started(&self) -> Option<Arc<Holder>> {
        self.holder.get().cloned()
    }

    /// The host's port each published port of the namespace is reached at.
    pub fn published(&self) -> HashMap<u16, u16> {
        self.started()
            .map(|holder| {
                holder
                    .published
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|(&port, published)| (port, published.host_port))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The host's port for `port`, waiting up to a second for bashd's next look to
    /// publish it.
    pub async fn published_soon(&self, port: u16) -> Option<u16> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        loop {
            if let Some(&host) = self.published().get(&port) {
                return Some(host);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// The holder's pid, if it runs.
    pub fn holder_pid(&self) -> Option<u32> {
        self.started().map(|holder| holder.pid)
    }
}

impl Holder {
    /// Copies of the session network's user and network namespaces, for one job's
    /// spawn frame (its descriptors close once the frame is sent).
    pub fn namespaces(&self) -> io::Result<(OwnedFd, OwnedFd)> {
        Ok((self.user.try_clone()?, self.net.try_clone()?))
    }

    /// Counts a job as running in the network until the returned value drops.
    pub fn job_runs(&self) -> InNetwork {
        self.running.send_modify(|n| *n += 1);
        InNetwork {
            running: self.running.clone(),
        }
    }

    /// A TCP connection made from inside the namespace to its `127.0.0.1:port`.
    fn connect(&self, port: u16) -> io::Result<std::net::TcpStream> {
        let socket = self.socket.lock().unwrap();
        frame::send(&*socket, format!("connect {port}").as_bytes(), &[])?;
        match frame::receive(&*socket)? {
            Some((body, mut fds)) if body == b"ok" && fds.len() == 1 => {
                Ok(std::net::TcpStream::from(fds.remove(0)))
            }
            Some((body, _)) => Err(io::Error::other(
                String::from_utf8_lossy(body.strip_prefix(b"error ").unwrap_or(&body)).into_owned(),
            )),
            None => Err(io::Error::other("the session network's holder has exited")),
        }
    }
}

/// Starts a holder and reads its hello.
async fn start(
    session: &str,
    mode: Network,
    proxy: Option<&Proxy>,
    binary: &std::path::Path,
    reaper: &ReaperHandle,
) -> io::Result<Arc<Holder>> {
    let args: &[&str] = match mode {
        Network::AllowList => &["--network-holder", "allow-list"],
        _ => &["--network-holder"],
    };
    let (ours, child) = crate::jobs::contain::zygote::start_resident(binary, reaper, args).await?;
    let pid = child.pid.as_raw_nonzero().get() as u32;
    ours.set_read_timeout(Some(HELLO_TIMEOUT))?;
    let (ours, hello) = tokio::task::spawn_blocking(move || {
        let hello = frame::receive(&ours);
        (ours, hello)
    })
    .await
    .map_err(io::Error::other)?;
    let (body, fds) = hello?.ok_or_else(|| {
        io::Error::other("the session network's holder exited before it made the network")
    })?;
    if body != b"ready" {
        return Err(io::Error::other(format!(
            "cannot make the session's network: {}",
            String::from_utf8_lossy(body.strip_prefix(b"error ").unwrap_or(&body))
        )));
    }
    let wanted = HELLO_FDS + if mode == Network::AllowList { 2 } else { 0 };
    if fds.len() != wanted {
        return Err(io::Error::other(
            "the session network's holder sent the wrong descriptors",
        ));
    }
    ours.set_read_timeout(Some(Duration::from_secs(5)))?;
    ours.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut fds = fds.into_iter();
    let mut next = || fds.next().expect("counted above");
    let (user, net, diag) = (next(), next(), next());
    let proxy_listeners = match mode {
        Network::AllowList => {
            let http = TcpListener::from(next());
            let socks = TcpListener::from(next());
            http.set_nonblocking(true)?;
            socks.set_nonblocking(true)?;
            Some(ProxyListeners { http, socks })
        }
        _ => None,
    };
    let shutdown = CancellationToken::new();
    let serving = match (&proxy_listeners, proxy) {
        (Some(listeners), Some(proxy)) => serve_proxy(session, listeners, proxy, &shutdown),
        _ => Vec::new(),
    };
    let holder = Arc::new(Holder {
        socket: Mutex::new(ours),
        pid,
        user,
        net,
        diag,
        proxy: proxy_listeners,
        published: Mutex::new(BTreeMap::new()),
        tasks: Mutex::new(Vec::new()),
        running: watch::Sender::new(0),
        _proxy_shutdown: Some(shutdown.drop_guard()),
    });
    let mut tasks = serving;
    let running = holder.running.subscribe();
    let weak = Arc::downgrade(&holder);
    tasks.push(tokio::spawn(at_work(running, move || look(weak.clone()))).abort_handle());
    *holder.tasks.lock().unwrap() = tasks;
    tracing::info!(session = %session, network = %mode, pid, "session network made");
    Ok(holder)
}

/// Runs `look` every [`PUBLISH_EVERY`] while a job runs in the network (`running`
/// above 0), until it says the holder is gone (`None`). With no job running, nothing
/// listens in the namespace: looks go on only until one finds nothing published (the
/// last job's ports are closed on the host), then none until a job starts.
async fn at_work<F, Fut>(mut running: watch::Receiver<usize>, mut look: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<bool>>,
{
    let mut tick = tokio::time::interval(PUBLISH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let idle = *running.borrow_and_update() == 0;
        let Some(published) = look().await else {
            return;
        };
        if idle && !published {
            if running.wait_for(|n| *n > 0).await.is_err() {
                return;
            }
            tick.reset_immediately();
        }
    }
}

/// One look at the namespace's TCP listeners, publishing them on the host's loopback:
/// the same port when it is free on the host, else one the kernel picks; at most
/// [`MOST_PUBLISHED`], the lowest first. A port whose listener is gone is closed on
/// the host. `None` once the holder's record is dropped, else whether any port is
/// published (true too when the look failed: it is tried again).
async fn look(holder: Weak<Holder>) -> Option<bool> {
    let strong = holder.upgrade()?;
    let diag = strong.diag.try_clone().ok()?;
    let proxy_ports = strong
        .proxy
        .as_ref()
        .map(|_| [PROXY_HTTP_PORT, PROXY_SOCKS_PORT]);
    drop(strong);
    let Ok(Ok(ports)) =
        tokio::task::spawn_blocking(move || crate::jobs::os::probe::tcp_listening_in(&diag)).await
    else {
        return Some(true);
    };
    let strong = holder.upgrade()?;
    let ports: Vec<u16> = ports
        .into_iter()
        .filter(|port| !proxy_ports.is_some_and(|proxy| proxy.contains(port)))
        .collect();
    let mut published = strong.published.lock().unwrap();
    published.retain(|port, entry| {
        let keep = ports.contains(port);
        if !keep {
            entry.task.abort();
        }
        keep
    });
    for port in ports {
        if published.contains_key(&port) {
            continue;
        }
        if published.len() >= MOST_PUBLISHED {
            break;
        }
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .or_else(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)));
        let Ok(listener) = listener else { continue };
        let Ok(SocketAddr::V4(address)) = listener.local_addr() else {
            continue;
        };
        if listener.set_nonblocking(true).is_err() {
            continue;
        }
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            continue;
        };
        let task = tokio::spawn(forward(listener, port, Arc::downgrade(&strong)));
        published.insert(
            port,
            Published {
                host_port: address.port(),
                task: task.abort_handle(),
            },
        );
    }
    Some(!published.is_empty())
}

/// Serves one published port: each connection on the host's side is joined to one
/// the holder makes inside to the job's port.
async fn forward(listener: tokio::net::TcpListener, port: u16, holder: Weak<Holder>) {
    loop {
        let Ok((mut outside, _)) = listener.accept().await else {
            // Out of descriptors, most likely: wait rather than spin.
            tokio::time::sleep(PUBLISH_EVERY).await;
            continue;
        };
        let Some(strong) = holder.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            let inside = tokio::task::spawn_blocking(move || strong.connect(port)).await;
            let Ok(Ok(inside)) = inside else {
                return;
            };
            if inside.set_nonblocking(true).is_err() {
                return;
            }
            let Ok(mut inside) = tokio::net::TcpStream::from_std(inside) else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut outside, &mut inside).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// The publisher looks while a job runs, and not at all while none does once its
    /// last look found nothing published; a job's start wakes it at once.
    #[tokio::test(start_paused = true)]
    async fn the_publisher_sleeps_while_no_job_runs() {
        let running = watch::Sender::new(0usize);
        let looks = Arc::new(AtomicUsize::new(0));
        // A port stays published for the first two looks after the job ends.
        let lingering = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(at_work(running.subscribe(), {
            let (looks, lingering) = (Arc::clone(&looks), Arc::clone(&lingering));
            move || {
                looks.fetch_add(1, Ordering::SeqCst);
                let published = lingering
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                async move { Some(published) }
            }
        }));
        let settle = || tokio::time::sleep(Duration::from_millis(1));
        settle().await;
        assert_eq!(looks.load(Ordering::SeqCst), 1, "one look at the start");
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(looks.load(Ordering::SeqCst), 1, "no look with no job");

        running.send_modify(|n| *n += 1);
        settle().await;
        assert_eq!(looks.load(Ordering::SeqCst), 2, "a job's start wakes it");
        tokio::time::sleep(PUBLISH_EVERY * 4).await;
        assert_eq!(
            looks.load(Ordering::SeqCst),
            6,
            "a look a period while it runs"
        );

        lingering.store(2, Ordering::SeqCst);
        running.send_modify(|n| *n -= 1);
        tokio::time::sleep(Duration::from_secs(60)).await;
        // Two looks still finding a port, the third finding none, then sleep.
        assert_eq!(looks.load(Ordering::SeqCst), 9);
        task.abort();
    }
}

//! One connection to the daemon, over any byte stream: the runtime dir's Unix socket,
//! or the socket of this machine's relay to another host's daemon. A connection task owns the
//! stream and the table of requests in flight; `Client` handles send it requests and
//! get their responses on channels of their own.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bashd_protocol::codec::ClientCodec;
use bashd_protocol::runtime::{self, RuntimeDirError};
use bashd_protocol::{
    ClientFrame, ErrorReply, ExecParams, ExecResult, FollowRequest, FrameError, GrepRequest, Hello,
    Inbox, JobId, JobInfo, JobRequest, JobsRequest, KillRequest, OutputPage, OutputRequest,
    PROTOCOL_VERSION, PolicyVerdict, Request, RequestId, ResizeRequest, Response, ScreenInfo,
    SendReply, SendRequest, ServerFrame, SessionClosed, SessionInfo, StatusInfo, Stopping,
    WaitRequest, Welcome,
};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::others::OtherDaemon;

/// How long the daemon has to answer `Hello`.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to bashd at {path}: {source}")]
    Connect { path: PathBuf, source: io::Error },
    #[error(
        "bashd is not running at {path} and BASHD_NO_AUTOSTART=1 forbids starting it (start it with `bashd &`, or `systemctl --user start bashd`)"
    )]
    NotRunning { path: PathBuf },
    #[error("cannot start bashd: {0}")]
    Autostart(String),
    /// The directory of the socket is not the caller's own (another user's, a symlink,
    /// open to others): whoever made it may listen there, so nothing was sent.
    #[error("{0}; bashc sent nothing there")]
    UnsafeDir(RuntimeDirError),
    /// What listens on the socket runs as another user: it is not this user's bashd
    /// (or relay), so nothing was sent it.
    #[error(
        "the process listening on {path} runs as uid {uid}{}, not as you (uid {me}), so it is not your bashd; bashc sent it nothing (set BASHD_RUNTIME_DIR to a directory of your own, or have {path} removed)",
        runtime::user_name(*.uid).map(|name| format!(" ({name})")).unwrap_or_default()
    )]
    NotYours { path: PathBuf, uid: u32, me: u32 },
    #[error("bashd refused the connection: {0}")]
    Refused(ErrorReply),
    #[error("{0}")]
    Daemon(ErrorReply),
    #[error("bashd did not answer the handshake within {0:?}")]
    HandshakeTimeout(Duration),
    #[error("bashd closed the connection before answering")]
    Disconnected,
    #[error("bad frame from bashd: {0}")]
    Frame(#[from] FrameError),
    #[error("bashd sent {0} where another answer was expected")]
    Unexpected(&'static str),
    /// The daemon went away after it started `job` and before its result: it died
    /// (a clean stop answers first). Its next start keeps the job's output, as lost.
    #[error("bashd stopped while {job} ran; its output so far is kept for when bashd is back")]
    DiedWhileRunning { job: JobId },
    /// The daemon went away while it was waiting for or stopping `job` (its words
    /// as the caller gave them): the job's output is kept as for `DiedWhileRunning`.
    #[error("bashd stopped while {doing} {job}; its output so far is kept for when bashd is back")]
    DiedDuring { doing: &'static str, job: String },
    #[error("host {host}: {message}")]
    Remote { host: String, message: String },
    /// Inside a sandboxed job: its channel to bashd cannot be used (closed, not
    /// inherited, the job ended); the daemon's socket would refuse such a process.
    #[error("{0}")]
    Channel(String),
    /// The connection to another host closed under a call: its ssh, or this machine's
    /// relay to it, ended. What ran in the foreground there (`job`) stopped with it;
    /// background jobs run on, and the next call reconnects.
    #[error("host {host}: the connection closed{} (its ssh, or the relay to it, ended); a foreground job there stops with its connection, background jobs run on, and the next call reconnects", .job.map(|job| format!(" while {job} ran there")).unwrap_or_default())]
    Lost { host: String, job: Option<JobId> },
    /// The connection to another host closed under `job` while the relay to it still
    /// answers: the link is up, so bashd there stopped (or its bridge did). The job's
    /// output is kept there as for `DiedWhileRunning`.
    #[error(
        "host {host}: bashd on {host} stopped while {job} ran; its output so far is kept there for when it is back (the next call starts it): bashc --host {host} output {job}"
    )]
    RemoteDied { host: String, job: JobId },
}

impl ClientError {
    /// Whether the error means nothing is listening, so starting a daemon could help.
    pub fn is_not_running(&self) -> bool {
        matches!(self, ClientError::Connect { source, .. }
            if matches!(source.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused))
    }
}

/// A connection to the socket at `path`, made only when each of `dirs` (the socket's
/// directory and those above it that hold it) is a real directory of the caller's,
/// mode 0700, and kept only when the process listening runs as the caller (its
/// `SO_PEERCRED`); otherwise why not, with nothing sent. Whoever can make such a
/// directory (`/tmp/bashd-$UID`, the last resort of DESIGN §2, is open to every user
/// until it exists) would otherwise get the caller's environment with its first
/// request, and choose what the command "printed". A directory that is missing is
/// said as nothing listening ([`ClientError::is_not_running`]), so that autostart
/// makes it.
pub(crate) async fn connect_checked(
    path: &Path,
    dirs: &[&Path],
) -> Result<UnixStream, ClientError> {
    for dir in dirs {
        match runtime::check_runtime_dir(dir) {
            Ok(()) => {}
            Err(RuntimeDirError::Inspect { source, .. })
                if source.kind() == io::ErrorKind::NotFound =>
            {
                return Err(ClientError::Connect {
                    path: path.to_owned(),
                    source,
                });
            }
            Err(e) => return Err(ClientError::UnsafeDir(e)),
        }
    }
    let stream = UnixStream::connect(path)
        .await
        .map_err(|source| ClientError::Connect {
            path: path.to_owned(),
            source,
        })?;
    let me = rustix::process::getuid().as_raw();
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == me => Ok(stream),
        Ok(cred) => Err(ClientError::NotYours {
            path: path.to_owned(),
            uid: cred.uid(),
            me,
        }),
        // Who listens cannot be told: not spoken to, as if another user did.
        Err(source) => Err(ClientError::Connect {
            path: path.to_owned(),
            source: io::Error::new(
                source.kind(),
                format!("cannot tell who listens there ({source}), so bashc sent nothing"),
            ),
        }),
    }
}

/// A connection to bashd; clone it to share the connection between tasks.
#[derive(Debug, Clone)]
pub struct Client {
    outgoing: mpsc::Sender<Outgoing>,
    welcome: Welcome,
    next_id: std::sync::Arc<AtomicU64>,
    /// Set when this connection's daemon was started for it: the daemons of this user
    /// that were alive under other runtime directories then.
    pub(crate) others: Option<std::sync::Arc<Vec<OtherDaemon>>>,
    /// The host, for a connection to another host's daemon (through `bashc bridge`):
    /// no request names an owner there, since a local pid means nothing on that host;
    /// the bridge is the owner (DESIGN §14). A connection lost says the host.
    pub(crate) host: Option<std::sync::Arc<str>>,
    /// For a connection to another host: the relay that carries it, its pid and socket.
    pub(crate) relay: Option<std::sync::Arc<(u32, PathBuf)>>,
    /// What the daemon said the sessions of this connection's requests missed (issue
    /// 32), gathered by the connection task until a front end takes it. A std mutex:
    /// held only to append or take, never across an await.
    inbox: std::sync::Arc<std::sync::Mutex<Inbox>>,
}

#[derive(Debug)]
struct Outgoing {
    id: RequestId,
    request: Request,
    /// `None` for a request that has no response (`Cancel`).
    responses: Option<mpsc::Sender<Response>>,
}

/// A connection's inbox, apart from the connection (`Client::inbox_handle`).
#[derive(Debug, Clone)]
pub struct InboxHandle(std::sync::Arc<std::sync::Mutex<Inbox>>);

impl InboxHandle {
    /// As [`Client::take_inbox`].
    pub fn take(&self) -> Option<Inbox> {
        let mut inbox = self.0.lock().unwrap_or_else(|e| e.into_inner());
        (!inbox.is_empty()).then(|| std::mem::take(&mut *inbox))
    }
}

/// The responses to one request, in the order the daemon sent them.
#[derive(Debug)]
pub struct Responses {
    id: RequestId,
    rx: mpsc::Receiver<Response>,
    host: Option<std::sync::Arc<str>>,
}

impl Responses {
    /// The request's id on its connection, for [`Client::cancel`].
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// The next response; `Err(Disconnected)` if the connection ended before the
    /// request's final response.
    pub async fn next(&mut self) -> Result<Response, ClientError> {
        self.rx.recv().await.ok_or_else(|| gone(&self.host))
    }
}

/// The error of a connection that ended: to another host, it says which.
fn gone(host: &Option<std::sync::Arc<str>>) -> ClientError {
    match host {
        Some(host) => ClientError::Lost {
            host: host.to_string(),
            job: None,
        },
        None => ClientError::Disconnected,
    }
}

impl Client {
    /// Connects to the socket at `path` and completes the handshake, once its directory
    /// and its listener are found to be the caller's own (`connect_checked`).
    pub async fn connect(path: &Path) -> Result<Client, ClientError> {
        let dir = path.parent().unwrap_or(Path::new("/"));
        let stream = connect_checked(path, &[dir]).await?;
        let (read, write) = stream.into_split();
        Client::handshake(read, write).await
    }

    /// Speaks the protocol over `stream`, whatever carries it (a socket, a pipe to
    /// `ssh HOST bashc bridge`), starting with the handshake.
    pub async fn over<S>(stream: S) -> Result<Client, ClientError>
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (read, write) = tokio::io::split(stream);
        Client::handshake(read, write).await
    }

    /// Speaks the protocol over a pair of one-way streams (a child's stdout and
    /// stdin): sends `Hello`, waits for `Welcome`, then hands both to the connection
    /// task.
    pub async fn handshake<R, W>(reader: R, writer: W) -> Result<Client, ClientError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let mut frames_in = FramedRead::new(reader, ClientCodec::default());
        let mut frames_out = FramedWrite::new(writer, ClientCodec::default());
        let sent = frames_out
            .send(ClientFrame::Hello(Hello {
                protocol: PROTOCOL_VERSION,
                client: format!("bashc {}", env!("CARGO_PKG_VERSION")),
                pid: std::process::id(),
            }))
            .await;
        // A daemon that refuses the connection (another uid's) may have said why and
        // closed before `Hello` went out: its reason beats a broken pipe.
        let first = tokio::time::timeout(WELCOME_TIMEOUT, frames_in.next()).await;
        if let Ok(Some(Ok(ServerFrame::Fatal(error)))) = first {
            return Err(ClientError::Refused(error));
        }
        sent?;
        let welcome = match first {
            Err(_) => return Err(ClientError::HandshakeTimeout(WELCOME_TIMEOUT)),
            Ok(None) => return Err(ClientError::Disconnected),
            Ok(Some(frame)) => match frame? {
                ServerFrame::Welcome(welcome) => welcome,
                ServerFrame::Fatal(error) => return Err(ClientError::Refused(error)),
                ServerFrame::Response(..) => return Err(ClientError::Unexpected("a response")),
            },
        };
        let (outgoing, outgoing_rx) = mpsc::channel(64);
        let inbox = std::sync::Arc::new(std::sync::Mutex::new(Inbox::default()));
        tokio::spawn(run_connection(
            frames_in,
            frames_out,
            outgoing_rx,
            std::sync::Arc::clone(&inbox),
        ));
        Ok(Client {
            outgoing,
            welcome,
            next_id: Default::default(),
            others: None,
            host: None,
            relay: None,
            inbox,
        })
    }

    /// What the sessions of this connection's requests missed since their last call,
    /// as the daemon sent it ahead of the final responses so far (issue 32); each
    /// event is handed out once. `None` when nothing happened.
    pub fn take_inbox(&self) -> Option<Inbox> {
        let mut inbox = self.inbox.lock().unwrap_or_else(|e| e.into_inner());
        (!inbox.is_empty()).then(|| std::mem::take(&mut *inbox))
    }

    /// A handle on this connection's inbox that outlives the `Client` (a front end
    /// prints what is left in it last).
    pub fn inbox_handle(&self) -> InboxHandle {
        InboxHandle(std::sync::Arc::clone(&self.inbox))
    }

    /// What the daemon said in its handshake.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// When this connection's daemon was started for it (autostart), the daemons of
    /// this user that were alive under other runtime directories then; `None` when
    /// the daemon was running already. A front end says so when the runtime dir was
    /// not named on purpose: the user's jobs are now split between daemons.
    pub fn other_daemons(&self) -> Option<&[OtherDaemon]> {
        self.others.as_deref().map(Vec::as_slice)
    }

    /// For a connection to another host's daemon: the pid and socket of this machine's
    /// relay to that host, which carries it (ending it makes the next call reconnect).
    pub fn relay(&self) -> Option<(u32, &Path)> {
        self.relay
            .as_deref()
            .map(|(pid, socket)| (*pid, socket.as_path()))
    }

    /// Whether the connection has ended (the daemon went away): a request on it fails
    /// without reaching any daemon, so a new connection is worth making.
    pub fn is_closed(&self) -> bool {
        self.outgoing.is_closed()
    }

    /// Sends a request; its responses arrive on the returned stream, for as long as a
    /// clone of this `Client` is kept: dropping the last one closes the connection.
    pub async fn request(&self, mut request: Request) -> Result<Responses, ClientError> {
        if self.host.is_some() {
            crate::remote::clear_owner(&mut request);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (responses, rx) = mpsc::channel(64);
        self.outgoing
            .send(Outgoing {
                id,
                request,
                responses: Some(responses),
            })
            .await
            .map_err(|_| gone(&self.host))?;
        Ok(Responses {
            id,
            rx,
            host: self.host.clone(),
        })
    }

    /// Gives up the request `id` of this connection (see `Request::Cancel`): its
    /// foreground job is killed, or a wait stops. No response comes for it.
    pub async fn cancel(&self, id: RequestId) -> Result<(), ClientError> {
        let cancel = Outgoing {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            request: Request::Cancel(id),
            responses: None,
        };
        self.outgoing
            .send(cancel)
            .await
            .map_err(|_| gone(&self.host))
    }

    /// Whether the relay that carried this connection to another host still answers:
    /// a connection it closed then ended on the far side, not on the link.
    async fn relay_answers(&self) -> bool {
        let Some(relay) = &self.relay else {
            return false;
        };
        let (pid, socket) = &**relay;
        let connected =
            tokio::time::timeout(Duration::from_secs(2), UnixStream::connect(socket)).await;
        matches!(connected, Ok(Ok(stream))
            if stream.peer_cred().ok().and_then(|cred| cred.pid()) == Some(*pid as i32))
    }

    /// Runs a command and waits for its result.
    pub async fn exec(&self, params: ExecParams) -> Result<ExecResult, ClientError> {
        let mut responses = self.request(Request::Exec(params)).await?;
        let mut started = None;
        loop {
            let response = match (responses.next().await, started) {
                (Err(ClientError::Disconnected), Some(job)) => {
                    return Err(ClientError::DiedWhileRunning { job });
                }
                (Err(ClientError::Lost { host, .. }), Some(job)) => {
                    if self.relay_answers().await {
                        return Err(ClientError::RemoteDied { host, job });
                    }
                    return Err(ClientError::Lost {
                        host,
                        job: Some(job),
                    });
                }
                (response, _) => response?,
            };
            match response {
                Response::Started(s) => started = Some(s.job),
                Response::Output(_) | Response::Notice(_) => {}
                Response::Finished(result) => return Ok(*result),
                Response::Error(error) => return Err(ClientError::Daemon(error)),
                _ => return Err(ClientError::Unexpected("a reply to another request")),
            }
        }
    }

    /// Runs a command and returns its responses as they come: `Started`, `Output`
    /// events and `Notice`s when `params.stream` asked for them, then `Finished`.
    pub async fn exec_events(&self, params: ExecParams) -> Result<Responses, ClientError> {
        self.request(Request::Exec(params)).await
    }

    /// A job's output as it comes: `Output` events (the part `request.from` asks for
    /// first), `Notice`s for lines missed, then `Finished` with its result.
    pub async fn follow(&self, request: FollowRequest) -> Result<Responses, ClientError> {
        self.request(Request::Follow(request)).await
    }

    /// The screen of a terminal job (`exec --pty`).
    pub async fn screen(&self, request: JobRequest) -> Result<ScreenInfo, ClientError> {
        match self.one(Request::Screen(request)).await? {
            Response::Screen(screen) => Ok(screen),
            _ => Err(ClientError::Unexpected("something other than a screen")),
        }
    }

    /// Gives a terminal job a new size; answers its screen.
    pub async fn resize(&self, request: ResizeRequest) -> Result<ScreenInfo, ClientError> {
        match self.one(Request::Resize(request)).await? {
            Response::Screen(screen) => Ok(screen),
            _ => Err(ClientError::Unexpected("something other than a screen")),
        }
    }

    /// Writes to the stdin pipe of a job started with `stdin: pipe`.
    pub async fn send(&self, request: SendRequest) -> Result<SendReply, ClientError> {
        match self.one(Request::Send(request)).await? {
            Response::Sent(sent) => Ok(sent),
            _ => Err(ClientError::Unexpected("something other than a send reply")),
        }
    }

    /// The lines of a job's output that match a regex, with context, as a page.
    pub async fn grep(&self, request: GrepRequest) -> Result<OutputPage, ClientError> {
        match self.one(Request::Grep(request)).await? {
            Response::Page(page) => Ok(page),
            _ => Err(ClientError::Unexpected("something other than a page")),
        }
    }

    /// A page of one stream of a job's full output.
    pub async fn output(&self, request: OutputRequest) -> Result<OutputPage, ClientError> {
        let mut responses = self.request(Request::Output(request)).await?;
        match responses.next().await? {
            Response::Page(page) => Ok(page),
            Response::Error(error) => Err(ClientError::Daemon(error)),
            _ => Err(ClientError::Unexpected("something other than a page")),
        }
    }

    /// Whether the daemon's policy would let `command` run; nothing runs.
    pub async fn check_policy(&self, command: String) -> Result<PolicyVerdict, ClientError> {
        let mut responses = self.request(Request::CheckPolicy(command)).await?;
        match responses.next().await? {
            Response::Policy(verdict) => Ok(verdict),
            Response::Error(error) => Err(ClientError::Daemon(error)),
            _ => Err(ClientError::Unexpected(
                "something other than a policy verdict",
            )),
        }
    }

    /// Asks the daemon to stop, as SIGTERM does: it answers, then stops every job of
    /// every session and exits.
    pub async fn stop(&self) -> Result<Stopping, ClientError> {
        match self.one(Request::Shutdown).await? {
            Response::Stopping(stopping) => Ok(stopping),
            _ => Err(ClientError::Unexpected(
                "something other than an answer to stop",
            )),
        }
    }

    pub async fn status(&self) -> Result<StatusInfo, ClientError> {
        match self.one(Request::Status).await? {
            Response::Status(status) => Ok(status),
            _ => Err(ClientError::Unexpected("something other than a status")),
        }
    }

    /// The jobs of one session, or of all when `request.session` is `None`.
    pub async fn jobs(&self, request: JobsRequest) -> Result<Vec<JobInfo>, ClientError> {
        match self.one(Request::Jobs(request)).await? {
            Response::Jobs(jobs) => Ok(jobs),
            _ => Err(ClientError::Unexpected("something other than a job list")),
        }
    }

    /// A job's state and the output the caller's session has not seen yet.
    pub async fn check(&self, request: JobRequest) -> Result<ExecResult, ClientError> {
        self.result(Request::Check(request)).await
    }

    /// The job's result once it ends, or its state when the wait times out.
    pub async fn wait(&self, request: WaitRequest) -> Result<ExecResult, ClientError> {
        let job = request.job.to_string();
        self.result(Request::Wait(request))
            .await
            .map_err(|e| died_during(e, "waiting for", job))
    }

    /// Stops a job and returns its result once every process of it is gone.
    pub async fn kill(&self, request: KillRequest) -> Result<ExecResult, ClientError> {
        let job = request.job.to_string();
        self.result(Request::Kill(request))
            .await
            .map_err(|e| died_during(e, "stopping", job))
    }

    pub async fn sessions(&self) -> Result<Vec<SessionInfo>, ClientError> {
        match self.one(Request::Sessions).await? {
            Response::Sessions(sessions) => Ok(sessions),
            _ => Err(ClientError::Unexpected(
                "something other than a session list",
            )),
        }
    }

    /// Waits on several jobs at once: until the first (or, with `all`, every) one ends
    /// or meets its conditions, or the timeout passes.
    pub async fn wait_many(
        &self,
        request: bashd_protocol::WaitManyRequest,
    ) -> Result<bashd_protocol::WaitedMany, ClientError> {
        match self.one(Request::WaitMany(request)).await? {
            Response::Waited(waited) => Ok(waited),
            _ => Err(ClientError::Unexpected("something other than wait results")),
        }
    }

    /// Every session's jobs, with their CPU, memory, prompt and last line (`bashc top`).
    pub async fn top(
        &self,
        request: bashd_protocol::TopRequest,
    ) -> Result<Vec<bashd_protocol::TopJob>, ClientError> {
        match self.one(Request::Top(request)).await? {
            Response::Top(rows) => Ok(rows),
            _ => Err(ClientError::Unexpected("something other than top's rows")),
        }
    }

    /// Every session's jobs and then their changes (`bashc top`'s view): the first
    /// response is `Response::Watch(WatchUpdate::Table)`, every later one `Changed`,
    /// until the request is cancelled ([`Client::cancel`]) or the connection ends.
    pub async fn watch(
        &self,
        request: bashd_protocol::WatchRequest,
    ) -> Result<Responses, ClientError> {
        self.request(Request::Watch(request)).await
    }

    /// Kills a session's jobs and removes its directory.
    pub async fn close_session(&self, session: String) -> Result<SessionClosed, ClientError> {
        match self.one(Request::CloseSession(session)).await? {
            Response::SessionClosed(closed) => Ok(closed),
            _ => Err(ClientError::Unexpected(
                "something other than a closed session",
            )),
        }
    }

    /// Sends a request that has exactly one response; an `Error` becomes `Err`.
    async fn one(&self, request: Request) -> Result<Response, ClientError> {
        let mut responses = self.request(request).await?;
        match responses.next().await? {
            Response::Error(error) => Err(ClientError::Daemon(error)),
            response => Ok(response),
        }
    }

    async fn result(&self, request: Request) -> Result<ExecResult, ClientError> {
        match self.one(request).await? {
            Response::Finished(result) => Ok(*result),
            _ => Err(ClientError::Unexpected("something other than a job result")),
        }
    }
}

/// A connection lost while a request about `job` was pending names the job.
fn died_during(error: ClientError, doing: &'static str, job: String) -> ClientError {
    match error {
        ClientError::Disconnected => ClientError::DiedDuring { doing, job },
        other => other,
    }
}

/// Owns the stream: writes requests, routes responses to their requests by id.
/// Ends when the daemon closes the connection or every `Client` is dropped; either
/// way the channels of the requests still pending close, which their callers see
/// as `Disconnected`.
async fn run_connection<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    mut frames_in: FramedRead<R, ClientCodec>,
    mut frames_out: FramedWrite<W, ClientCodec>,
    mut outgoing: mpsc::Receiver<Outgoing>,
    inbox: std::sync::Arc<std::sync::Mutex<Inbox>>,
) {
    let mut pending: HashMap<RequestId, mpsc::Sender<Response>> = HashMap::new();
    loop {
        // Cancelling either branch loses nothing: a request stays in its channel and a
        // partial frame stays in FramedRead's buffer.
        tokio::select! {
            request = outgoing.recv() => {
                let Some(Outgoing { id, request, responses }) = request else { return };
                if let Some(responses) = responses {
                    pending.insert(id, responses);
                }
                if let Request::Cancel(cancelled) = &request {
                    // Nothing more is routed to it.
                    pending.remove(cancelled);
                }
                if frames_out.send(ClientFrame::Request(id, request)).await.is_err() {
                    return;
                }
            }
            frame = frames_in.next() => match frame {
                // Kept for the front end, before the final response it comes ahead of
                // is routed, so whoever reads that response finds it.
                Some(Ok(ServerFrame::Response(_, Response::Inbox(more)))) => {
                    inbox.lock().unwrap_or_else(|e| e.into_inner()).extend(more);
                }
                Some(Ok(ServerFrame::Response(id, response))) => {
                    let last = !matches!(
                        response,
                        Response::Started(_)
                            | Response::Output(_)
                            | Response::Notice(_)
                            | Response::Watch(_)
                    );
                    if let Some(responses) = pending.get(&id)
                        && (responses.send(response).await.is_err() || last)
                    {
                        pending.remove(&id);
                    }
                }
                Some(Ok(ServerFrame::Fatal(error))) => {
                    for (_, responses) in pending.drain() {
                        let _ = responses.send(Response::Error(error.clone())).await;
                    }
                    return;
                }
                Some(Ok(ServerFrame::Welcome(_))) => {}
                Some(Err(_)) | None => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use bashd_protocol::codec::DaemonCodec;
    use bashd_protocol::{ClientFrame, StatusInfo};

    use super::*;

    fn status() -> StatusInfo {
        StatusInfo {
            daemon_pid: 42,
            daemon_version: "test".to_owned(),
            protocol: PROTOCOL_VERSION,
            uptime_ms: 7,
            runtime_dir: "/nowhere".to_owned(),
            running_jobs: 0,
            containment: "subreaper".to_owned(),
            open_files: 9,
            open_files_limit: None,
            sandbox: None,
        }
    }

    /// A daemon that answers `Hello` and one `Status`, over whatever stream it is given.
    async fn fake_daemon(stream: tokio::io::DuplexStream) {
        let (read, write) = tokio::io::split(stream);
        let mut frames_in = FramedRead::new(read, DaemonCodec::default());
        let mut frames_out = FramedWrite::new(write, DaemonCodec::default());
        let Some(Ok(ClientFrame::Hello(hello))) = frames_in.next().await else {
            panic!("the first frame was not Hello");
        };
        assert_eq!(hello.protocol, PROTOCOL_VERSION);
        let welcome = Welcome {
            protocol: PROTOCOL_VERSION,
            daemon_version: "test".to_owned(),
            daemon_pid: 42,
        };
        frames_out
            .send(ServerFrame::Welcome(welcome))
            .await
            .unwrap();
        let Some(Ok(ClientFrame::Request(id, Request::Status))) = frames_in.next().await else {
            panic!("the request was not Status");
        };
        frames_out
            .send(ServerFrame::Response(id, Response::Status(status())))
            .await
            .unwrap();
        // The daemon goes away: the client must notice.
    }

    #[tokio::test]
    async fn the_protocol_runs_over_any_byte_stream() {
        let (client_end, daemon_end) = tokio::io::duplex(4096);
        let daemon = tokio::spawn(fake_daemon(daemon_end));
        let client = Client::over(client_end).await.unwrap();
        assert_eq!(client.welcome().daemon_pid, 42);
        assert_eq!(client.status().await.unwrap(), status());
        daemon.await.unwrap();
        assert!(matches!(
            client.status().await,
            Err(ClientError::Disconnected)
        ));
    }
}

//! One connection to the daemon, over any byte stream (a transport makes it: the
//! runtime dir's socket, a sandboxed job's channel, this machine's relay to another
//! host). A connection task owns the stream and the table of requests in flight;
//! `Client` handles send it requests and get their responses on channels of their own.
//! This module knows no host: what a transport adds (the owner a far side must not be
//! told, what a connection lost there means) comes through its [`Link`].
//!
//! The handshake does not hold the first request back: `Hello` goes out in one write
//! with the requests asked for by then, and `Welcome` is read when it comes (issue 31:
//! a round trip through the daemon's runtime, its accept and its checks of the peer,
//! before every call). The daemon reads a request only once it has checked the peer
//! and answered `Hello`, so a refused peer's requests are never served; what refused
//! the connection (its `Fatal`, a timeout) becomes the error of every request on it.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bashd_protocol::codec::ClientCodec;
use bashd_protocol::{
    ClientFrame, ErrorReply, FrameError, Hello, Inbox, JobId, PROTOCOL_VERSION, Request, RequestId,
    Response, ServerFrame, Welcome,
};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::error::ClientError;
use crate::others::OtherDaemon;

/// How long the daemon has to answer `Hello`.
const WELCOME_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to bashd; clone it to share the connection between tasks.
///
/// ```no_run
/// # async fn example() -> Result<(), bashc::ClientError> {
/// use bashc::protocol::ExecParams;
///
/// let client = bashc::connect(&bashc::Target::local()).await?;
/// println!("bashd {}", client.status().await?.daemon_version);
/// let result = client
///     .exec(ExecParams::new("echo hello", "my-session", "/tmp"))
///     .await?;
/// assert_eq!(result.stdout.text, "hello\n");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    outgoing: mpsc::Sender<Outgoing>,
    /// Where the handshake is, as the connection task last said.
    handshake: watch::Receiver<Handshake>,
    next_id: Arc<AtomicU64>,
    /// Set when this connection's daemon was started for it: the daemons of this user
    /// that were alive under other runtime directories then.
    pub(crate) others: Option<Arc<Vec<OtherDaemon>>>,
    /// What the transport adds, when it adds anything (a connection to another host).
    pub(crate) link: Option<Arc<dyn Link>>,
    /// What the daemon said the sessions of this connection's requests missed (issue
    /// 32), gathered by the connection task until a front end takes it. A std mutex:
    /// held only to append or take, never across an await.
    inbox: Arc<std::sync::Mutex<Inbox>>,
}

/// What a transport adds to the connections it makes, for the connection to stay
/// ignorant of it: how a request is fit for the far side, and what a connection that
/// ended means there.
pub(crate) trait Link: Send + Sync + std::fmt::Debug {
    /// Changes `request` before it is sent (an owner a far side must not be told).
    fn prepare(&self, request: &mut Request);

    /// The error for the connection's end under a request; `job`, the job the request
    /// runs in the foreground, once it has started one.
    fn lost(&self, job: Option<JobId>) -> Pin<Box<dyn Future<Output = ClientError> + Send + '_>>;

    /// The pid and socket of the local process that carries the connection, if one does.
    fn relay(&self) -> Option<(u32, &Path)>;
}

/// How far a connection's handshake got.
#[derive(Debug, Clone)]
enum Handshake {
    /// `Hello` is sent, or about to be, with the first requests.
    Waiting,
    Welcomed(Welcome),
    Failed(Failure),
}

/// Why a handshake failed: kept for each request on the connection and for
/// [`Client::welcome`], which each get the error of their own.
#[derive(Debug, Clone)]
enum Failure {
    /// The daemon said why (another uid, a sandboxed process on its socket, too many
    /// connections, another protocol version).
    Refused(ErrorReply),
    Timeout,
    Disconnected,
    Unexpected(&'static str),
    Frame(Arc<FrameError>),
}

impl Failure {
    /// A frame that could not be read or written: a connection reset or cut in the
    /// middle of a frame is the daemon going away, as a clean close is, not a bad frame.
    fn of_frame(error: FrameError) -> Failure {
        use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
        match &error {
            FrameError::Truncated { .. } => Failure::Disconnected,
            FrameError::Io(e)
                if matches!(
                    e.kind(),
                    ConnectionReset | BrokenPipe | ConnectionAborted | UnexpectedEof
                ) =>
            {
                Failure::Disconnected
            }
            _ => Failure::Frame(Arc::new(error)),
        }
    }

    fn error(&self) -> ClientError {
        match self {
            Failure::Refused(reply) => ClientError::Refused(reply.clone()),
            Failure::Timeout => ClientError::HandshakeTimeout(WELCOME_TIMEOUT),
            Failure::Disconnected => ClientError::Disconnected,
            Failure::Unexpected(what) => ClientError::Unexpected(what),
            Failure::Frame(error) => ClientError::Frame(match &**error {
                FrameError::TooLarge { len, max } => FrameError::TooLarge {
                    len: *len,
                    max: *max,
                },
                FrameError::Truncated { buffered } => FrameError::Truncated {
                    buffered: *buffered,
                },
                FrameError::Malformed(why) => FrameError::Malformed(why.clone()),
                FrameError::Io(e) => FrameError::Io(std::io::Error::new(e.kind(), e.to_string())),
            }),
        }
    }
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
pub struct InboxHandle(Arc<std::sync::Mutex<Inbox>>);

impl InboxHandle {
    /// As [`Client::take_inbox`].
    pub fn take(&self) -> Option<Inbox> {
        let mut inbox = self.0.lock().unwrap_or_else(|e| e.into_inner());
        (!inbox.is_empty()).then(|| std::mem::take(&mut *inbox))
    }
}

/// The responses to one request, in the order the daemon sent them. The connection
/// lives while they are read.
#[derive(Debug)]
pub struct Responses {
    id: RequestId,
    rx: mpsc::Receiver<Response>,
    client: Client,
    about: About,
}

/// What a request is about, for what its connection's end means: the one place where
/// a daemon gone under a request becomes the error that names its job.
#[derive(Debug, Clone)]
enum About {
    /// A command, and its job once `Recorded` names it.
    Exec(Option<JobId>),
    /// A request about a job the caller named, and what it does with it, in words
    /// (`waiting for`).
    Job {
        doing: &'static str,
        job: String,
    },
    Other,
}

impl About {
    fn of(request: &Request) -> About {
        let job = |doing, job: &bashd_protocol::JobRef| About::Job {
            doing,
            job: job.to_string(),
        };
        match request {
            Request::Exec(_) => About::Exec(None),
            Request::Wait(wait) => job("waiting for", &wait.job),
            Request::Kill(kill) => job("stopping", &kill.job),
            Request::Follow(follow) => job("following", &follow.job),
            _ => About::Other,
        }
    }
}

impl Responses {
    /// The request's id on its connection, for [`Client::cancel`].
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// The job this request runs or acts on, once known (an `Exec`'s from `Recorded`,
    /// which comes before its process runs).
    pub fn job(&self) -> Option<JobId> {
        match &self.about {
            About::Exec(job) => *job,
            About::Job { job, .. } => job.parse().ok(),
            About::Other => None,
        }
    }

    /// The next response. When the connection ends before the request's final
    /// response, the error says what that means for the request: a daemon that
    /// died under a job names it ([`ClientError::DiedWhileRunning`],
    /// [`ClientError::DiedDuring`]), a link to another host that closed says so.
    /// An `Exec`'s `Recorded` is not handed out: it names the job for that error.
    pub async fn next(&mut self) -> Result<Response, ClientError> {
        loop {
            let Some(response) = self.rx.recv().await else {
                return Err(self.ended().await);
            };
            let named = match &response {
                Response::Recorded(job) => Some(*job),
                Response::Started(started) => Some(started.job),
                _ => None,
            };
            if let (Some(named), About::Exec(job)) = (named, &mut self.about) {
                *job = Some(named);
            }
            // The front ends learn the job from `Started`, which follows.
            if !matches!(response, Response::Recorded(_)) {
                return Ok(response);
            }
        }
    }

    /// Gives the request up (see [`Client::cancel`]).
    pub async fn cancel(&self) -> Result<(), ClientError> {
        self.client.cancel(self.id).await
    }

    /// The error for a connection that ended under this request: the handshake's
    /// when there was none, since the request then never reached the daemon.
    async fn ended(&self) -> ClientError {
        // A daemon that went away before its `Welcome` (stopped, then killed) is told
        // as one that went away after it: the request's job is named either way.
        if let Some(failure) = self.client.failure()
            && !matches!(failure, Failure::Disconnected)
        {
            return failure.error();
        }
        match (&self.client.link, &self.about) {
            (Some(link), About::Exec(job)) => link.lost(*job).await,
            (Some(link), _) => link.lost(None).await,
            (None, About::Exec(Some(job))) => ClientError::DiedWhileRunning { job: *job },
            (None, About::Job { doing, job }) => ClientError::DiedDuring {
                doing,
                job: job.clone(),
            },
            (None, _) => ClientError::Disconnected,
        }
    }
}

impl Client {
    /// Speaks the protocol over `stream`, whatever carries it (a socket, a pipe to
    /// `ssh HOST bashc bridge`), as [`Client::start`] does: the handshake goes with the
    /// first request, whose error says why it failed. Never fails itself.
    pub async fn over<S>(stream: S) -> Result<Client, ClientError>
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (read, write) = tokio::io::split(stream);
        Ok(Client::start(read, write))
    }

    /// Speaks the protocol over a pair of one-way streams (a socket's halves, a
    /// child's stdout and stdin): hands both to the connection task, which sends
    /// `Hello` together with the requests asked for by the time it runs, and reads
    /// `Welcome` when it comes. A refused handshake (the daemon's `Fatal`, no answer
    /// within 10 s, a closed stream) is the error of every request on the connection
    /// and of [`Client::welcome`]. Must be called within a tokio runtime.
    pub fn start<R, W>(reader: R, writer: W) -> Client
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let (outgoing, outgoing_rx) = mpsc::channel(64);
        let (handshake_tx, handshake) = watch::channel(Handshake::Waiting);
        let inbox = Arc::new(std::sync::Mutex::new(Inbox::default()));
        tokio::spawn(run_connection(
            FramedRead::new(reader, ClientCodec::default()),
            FramedWrite::new(writer, ClientCodec::default()),
            outgoing_rx,
            Arc::clone(&inbox),
            handshake_tx,
        ));
        Client {
            outgoing,
            handshake,
            next_id: Default::default(),
            others: None,
            link: None,
            inbox,
        }
    }

    /// As [`Client::start`], then waits for `Welcome` before anything else is sent:
    /// for a transport that must know the daemon answers before it risks a request
    /// (a relay may close a connection unanswered, which is then made again).
    pub async fn handshake<R, W>(reader: R, writer: W) -> Result<Client, ClientError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let client = Client::start(reader, writer);
        client.welcome().await?;
        Ok(client)
    }

    /// What the daemon said in its handshake, once it has: waits for its `Welcome`,
    /// or answers why none came.
    pub async fn welcome(&self) -> Result<Welcome, ClientError> {
        let mut handshake = self.handshake.clone();
        let outcome = handshake
            .wait_for(|state| !matches!(state, Handshake::Waiting))
            .await;
        match outcome.as_deref() {
            Ok(Handshake::Welcomed(welcome)) => Ok(welcome.clone()),
            Ok(Handshake::Failed(failure)) => Err(failure.error()),
            // The connection task is gone without a word: its runtime ended.
            Ok(Handshake::Waiting) | Err(_) => Err(ClientError::Disconnected),
        }
    }

    /// Why the handshake failed, once it has.
    fn failure(&self) -> Option<Failure> {
        match &*self.handshake.borrow() {
            Handshake::Failed(failure) => Some(failure.clone()),
            _ => None,
        }
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
        InboxHandle(Arc::clone(&self.inbox))
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
        self.link.as_deref().and_then(|link| link.relay())
    }

    /// Whether the connection has ended (the daemon went away): a request on it fails
    /// without reaching any daemon, so a new connection is worth making.
    pub fn is_closed(&self) -> bool {
        self.outgoing.is_closed()
    }

    /// Sends a request; its responses arrive on the returned stream.
    pub async fn request(&self, mut request: Request) -> Result<Responses, ClientError> {
        if let Some(link) = &self.link {
            link.prepare(&mut request);
        }
        let about = About::of(&request);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (responses, rx) = mpsc::channel(32);
        let sent = self
            .outgoing
            .send(Outgoing {
                id,
                request,
                responses: Some(responses),
            })
            .await;
        if sent.is_err() {
            return Err(self.gone().await);
        }
        Ok(Responses {
            id,
            rx,
            client: self.clone(),
            about,
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
        if self.outgoing.send(cancel).await.is_err() {
            return Err(self.gone().await);
        }
        Ok(())
    }

    /// The error of a connection found ended before a request went out.
    async fn gone(&self) -> ClientError {
        if let Some(failure) = self.failure() {
            return failure.error();
        }
        match &self.link {
            Some(link) => link.lost(None).await,
            None => ClientError::Disconnected,
        }
    }
}

/// Owns the stream: sends `Hello` with the first requests, writes requests, routes
/// responses to their requests by id. Ends when the daemon closes the connection, when
/// the handshake fails (said through `handshake` first, so that the requests it ends
/// find why) or every `Client` is dropped; either way the channels of the requests
/// still pending close, which their callers see as the handshake's error or
/// `Disconnected`.
async fn run_connection<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    mut frames_in: FramedRead<R, ClientCodec>,
    mut frames_out: FramedWrite<W, ClientCodec>,
    mut outgoing: mpsc::Receiver<Outgoing>,
    inbox: std::sync::Arc<std::sync::Mutex<Inbox>>,
    handshake: watch::Sender<Handshake>,
) {
    let mut pending: HashMap<RequestId, mpsc::Sender<Response>> = HashMap::new();
    let deadline = Instant::now() + WELCOME_TIMEOUT;
    let welcomed = greet(
        &mut frames_in,
        &mut frames_out,
        &mut outgoing,
        &mut pending,
        deadline,
    )
    .await;
    match welcomed {
        Some(Ok(welcome)) => {
            handshake.send_replace(Handshake::Welcomed(welcome));
        }
        Some(Err(failure)) => {
            handshake.send_replace(Handshake::Failed(failure));
            return;
        }
        // Every `Client` is gone, or a request could not be written after `Hello`
        // was: the connection ends as it would after the handshake.
        None => return,
    }
    loop {
        // Cancelling either branch loses nothing: a request stays in its channel and a
        // partial frame stays in FramedRead's buffer.
        tokio::select! {
            request = outgoing.recv() => {
                let Some(request) = request else { return };
                if frames_out.send(frame_of(request, &mut pending)).await.is_err() {
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
                    let last = response.is_final();
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

/// The handshake: writes `Hello` and the requests queued by now in one write, then
/// the requests that come while it waits, and answers the `Welcome`, or why none
/// came; `None` when there is nothing more to do (no `Client` left, or a request that
/// could not be written after a `Welcome`).
async fn greet<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    frames_in: &mut FramedRead<R, ClientCodec>,
    frames_out: &mut FramedWrite<W, ClientCodec>,
    outgoing: &mut mpsc::Receiver<Outgoing>,
    pending: &mut HashMap<RequestId, mpsc::Sender<Response>>,
    deadline: Instant,
) -> Option<Result<Welcome, Failure>> {
    let hello = ClientFrame::Hello(Hello {
        protocol: PROTOCOL_VERSION,
        client: format!("bashc {}", env!("CARGO_PKG_VERSION")),
        pid: std::process::id(),
    });
    // `feed` only encodes into the buffer (it writes first only past 8 KiB); the flush
    // is the one write.
    let sent = tokio::time::timeout_at(deadline, async {
        frames_out.feed(hello).await?;
        while let Ok(request) = outgoing.try_recv() {
            frames_out.feed(frame_of(request, pending)).await?;
        }
        frames_out.flush().await
    })
    .await;
    // The first write that failed: nothing more is written after it.
    let mut broken = match sent {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(Failure::of_frame(e)),
        Err(_) => Some(Failure::Timeout),
    };
    let first = loop {
        tokio::select! {
            frame = tokio::time::timeout_at(deadline, frames_in.next()) => break frame,
            request = outgoing.recv(), if broken.is_none() => {
                // No `Client` is left to ask anything.
                let frame = frame_of(request?, pending);
                broken = match tokio::time::timeout_at(deadline, frames_out.send(frame)).await {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(Failure::of_frame(e)),
                    Err(_) => Some(Failure::Timeout),
                };
            }
        }
    };
    Some(match (first, broken) {
        // A daemon that refuses the connection (another uid's) may have said why and
        // closed before what was written went out: its reason beats a broken pipe.
        (Ok(Some(Ok(ServerFrame::Fatal(error)))), _) => Err(Failure::Refused(error)),
        (Ok(Some(Ok(ServerFrame::Welcome(_)))), Some(_)) => return None,
        (_, Some(broken)) => Err(broken),
        (Err(_), None) => Err(Failure::Timeout),
        (Ok(None), None) => Err(Failure::Disconnected),
        (Ok(Some(Err(e))), None) => Err(Failure::of_frame(e)),
        (Ok(Some(Ok(ServerFrame::Welcome(welcome)))), None) => Ok(welcome),
        (Ok(Some(Ok(ServerFrame::Response(..)))), None) => Err(Failure::Unexpected("a response")),
    })
}

/// The frame of a request, its responses routed to its caller from now on.
fn frame_of(
    request: Outgoing,
    pending: &mut HashMap<RequestId, mpsc::Sender<Response>>,
) -> ClientFrame {
    let Outgoing {
        id,
        request,
        responses,
    } = request;
    if let Some(responses) = responses {
        pending.insert(id, responses);
    }
    if let Request::Cancel(cancelled) = &request {
        // Nothing more is routed to it.
        pending.remove(cancelled);
    }
    ClientFrame::Request(id, request)
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::task::{Context, Poll};

    use bashd_protocol::codec::DaemonCodec;
    use bashd_protocol::{ClientFrame, ErrorKind, StatusInfo};
    use bytes::BytesMut;
    use tokio::io::{AsyncWriteExt, DuplexStream};
    use tokio_util::codec::{Decoder, Encoder};

    use super::*;

    /// Longer than any of these tests takes, shorter than `WELCOME_TIMEOUT`: a client
    /// that waits for `Welcome` before its first request fails by it.
    const WITHIN: Duration = Duration::from_secs(5);

    fn status() -> StatusInfo {
        StatusInfo {
            daemon_pid: 42,
            daemon_version: "test".to_owned(),
            protocol: PROTOCOL_VERSION,
            uptime_ms: 7,
            runtime_dir: "/nowhere".to_owned(),
            running_jobs: 0,
            containment: "subreaper".to_owned(),
            containment_why: None,
            open_files: 9,
            open_files_limit: None,
            sandbox: None,
            network: None,
            tool_sources: Vec::new(),
        }
    }

    fn welcome() -> Welcome {
        Welcome {
            protocol: PROTOCOL_VERSION,
            daemon_version: "test".to_owned(),
            daemon_pid: 42,
        }
    }

    fn daemon_frames(
        stream: DuplexStream,
    ) -> (
        FramedRead<tokio::io::ReadHalf<DuplexStream>, DaemonCodec>,
        FramedWrite<tokio::io::WriteHalf<DuplexStream>, DaemonCodec>,
    ) {
        let (read, write) = tokio::io::split(stream);
        (
            FramedRead::new(read, DaemonCodec::default()),
            FramedWrite::new(write, DaemonCodec::default()),
        )
    }

    /// A daemon that answers `Hello` and one `Status`, over whatever stream it is given.
    /// With `hold_welcome`, it reads the request before it answers `Hello`, as a daemon
    /// whose accept and checks of the peer are slow may find both already there.
    async fn fake_daemon(stream: DuplexStream, hold_welcome: bool) {
        let (mut frames_in, mut frames_out) = daemon_frames(stream);
        let Some(Ok(ClientFrame::Hello(hello))) = frames_in.next().await else {
            panic!("the first frame was not Hello");
        };
        assert_eq!(hello.protocol, PROTOCOL_VERSION);
        if !hold_welcome {
            frames_out
                .send(ServerFrame::Welcome(welcome()))
                .await
                .unwrap();
        }
        let Some(Ok(ClientFrame::Request(id, Request::Status))) = frames_in.next().await else {
            panic!("the request was not Status");
        };
        if hold_welcome {
            frames_out
                .send(ServerFrame::Welcome(welcome()))
                .await
                .unwrap();
        }
        frames_out
            .send(ServerFrame::Response(id, Response::Status(status())))
            .await
            .unwrap();
        // The daemon goes away: the client must notice.
    }

    #[tokio::test]
    async fn the_protocol_runs_over_any_byte_stream() {
        let (client_end, daemon_end) = tokio::io::duplex(4096);
        let daemon = tokio::spawn(fake_daemon(daemon_end, false));
        let client = Client::over(client_end).await.unwrap();
        assert_eq!(client.welcome().await.unwrap().daemon_pid, 42);
        assert_eq!(client.status().await.unwrap(), status());
        daemon.await.unwrap();
        assert!(matches!(
            client.status().await,
            Err(ClientError::Disconnected)
        ));
    }

    /// Issue 31: the first request goes out without waiting a round trip for
    /// `Welcome`, which is read when it comes.
    #[tokio::test]
    async fn the_first_request_does_not_wait_for_welcome() {
        let (client_end, daemon_end) = tokio::io::duplex(4096);
        let daemon = tokio::spawn(fake_daemon(daemon_end, true));
        let call = async {
            let client = Client::over(client_end).await.unwrap();
            let answer = client.status().await;
            (client, answer)
        };
        let (client, answer) = tokio::time::timeout(WITHIN, call)
            .await
            .expect("the client waited for Welcome before it sent its request");
        assert_eq!(answer.unwrap(), status());
        assert_eq!(client.welcome().await.unwrap().daemon_pid, 42);
        daemon.await.unwrap();
    }

    /// The writes a stream was given, each as it came.
    struct Recorder {
        inner: tokio::io::WriteHalf<DuplexStream>,
        writes: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let written = Pin::new(&mut self.inner).poll_write(cx, buf);
            if let Poll::Ready(Ok(n)) = written {
                let mut writes = self.writes.lock().unwrap();
                writes.push(buf[..n].to_vec());
            }
            written
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    /// `Hello` and a request asked for right after the connection was made go out in
    /// one write: one system call, one segment for the daemon to read.
    #[tokio::test]
    async fn hello_and_the_first_request_go_in_one_write() {
        let (client_end, daemon_end) = tokio::io::duplex(64 * 1024);
        let daemon = tokio::spawn(fake_daemon(daemon_end, false));
        let (read, write) = tokio::io::split(client_end);
        let writes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorder = Recorder {
            inner: write,
            writes: Arc::clone(&writes),
        };
        let client = Client::start(read, recorder);
        assert_eq!(client.status().await.unwrap(), status());
        daemon.await.unwrap();
        let writes = writes.lock().unwrap().clone();
        let mut first = BytesMut::from(&writes[0][..]);
        let mut codec = DaemonCodec::default();
        assert!(
            matches!(codec.decode(&mut first), Ok(Some(ClientFrame::Hello(_)))),
            "{writes:?}"
        );
        assert!(
            matches!(
                codec.decode(&mut first),
                Ok(Some(ClientFrame::Request(_, Request::Status)))
            ),
            "{writes:?}"
        );
        assert_eq!(writes.len(), 1, "{writes:?}");
    }

    fn fatal_bytes(reply: ErrorReply) -> BytesMut {
        let mut bytes = BytesMut::new();
        DaemonCodec::default()
            .encode(ServerFrame::Fatal(reply), &mut bytes)
            .unwrap();
        bytes
    }

    /// A daemon that refuses the connection: its reason is the error of every request
    /// made on it and of `welcome`, as it was of the handshake, even when it closed
    /// before reading what was sent (a broken pipe, here at once).
    #[tokio::test]
    async fn a_refusal_is_the_error_of_each_request_and_beats_a_broken_pipe() {
        let reply = ErrorReply::new(ErrorKind::VersionMismatch, "speaks protocol 0");
        let (client_end, mut daemon_end) = tokio::io::duplex(4096);
        daemon_end
            .write_all(&fatal_bytes(reply.clone()))
            .await
            .unwrap();
        drop(daemon_end);
        let client = Client::over(client_end).await.unwrap();
        for _ in 0..2 {
            match client.status().await {
                Err(ClientError::Refused(refused)) => assert_eq!(refused, reply),
                other => panic!("not refused: {other:?}"),
            }
        }
        assert!(matches!(
            client.welcome().await,
            Err(ClientError::Refused(refused)) if refused == reply
        ));
        // A request about a job says the refusal too, not that bashd died under it.
        let waited = client
            .wait(bashd_protocol::WaitRequest {
                caller: bashd_protocol::Caller {
                    session: "test".to_owned(),
                    owner: None,
                },
                job: bashd_protocol::JobRef::Id("j1".to_owned()),
                timeout_ms: None,
                conditions: Default::default(),
                any_session: false,
                mcp_call: false,
            })
            .await;
        assert!(
            matches!(&waited, Err(ClientError::Refused(_))),
            "{waited:?}"
        );
    }

    /// A daemon that reads `Hello` and the request, then refuses: the request fails
    /// with its reason, and `handshake`, which waits for `Welcome`, fails with it.
    #[tokio::test]
    async fn a_refusal_after_the_request_was_read_is_its_error() {
        let reply = ErrorReply::new(ErrorKind::Busy, "already serves 3 connections");
        for waits in [false, true] {
            let (client_end, daemon_end) = tokio::io::duplex(4096);
            let refused = reply.clone();
            let daemon = tokio::spawn(async move {
                let (mut frames_in, mut frames_out) = daemon_frames(daemon_end);
                assert!(matches!(
                    frames_in.next().await,
                    Some(Ok(ClientFrame::Hello(_)))
                ));
                frames_out.send(ServerFrame::Fatal(refused)).await.unwrap();
            });
            let (read, write) = tokio::io::split(client_end);
            let error = if waits {
                Client::handshake(read, write).await.unwrap_err()
            } else {
                Client::start(read, write).status().await.unwrap_err()
            };
            assert!(
                matches!(&error, ClientError::Refused(r) if *r == reply),
                "{error:?}"
            );
            daemon.await.unwrap();
        }
    }

    /// A daemon that takes the connection and never answers: the handshake's timeout
    /// is the request's error.
    #[tokio::test(start_paused = true)]
    async fn a_daemon_that_never_answers_is_a_handshake_timeout() {
        let (client_end, daemon_end) = tokio::io::duplex(4096);
        let client = Client::over(client_end).await.unwrap();
        let error = client.status().await.unwrap_err();
        assert!(
            matches!(error, ClientError::HandshakeTimeout(after) if after == WELCOME_TIMEOUT),
            "{error:?}"
        );
        drop(daemon_end);
    }

    /// A stream that closes without a word: the request says the daemon closed it.
    #[tokio::test]
    async fn a_stream_closed_unanswered_is_disconnected() {
        let (client_end, daemon_end) = tokio::io::duplex(4096);
        let daemon = tokio::spawn(async move {
            let (mut frames_in, _out) = daemon_frames(daemon_end);
            let _ = frames_in.next().await;
        });
        let client = Client::over(client_end).await.unwrap();
        let error = client.status().await.unwrap_err();
        assert!(matches!(error, ClientError::Disconnected), "{error:?}");
        daemon.await.unwrap();
    }
}

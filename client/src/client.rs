//! One connection to the daemon, over any byte stream (a transport makes it: the
//! runtime dir's socket, a sandboxed job's channel, this machine's relay to another
//! host). A connection task owns the stream and the table of requests in flight;
//! `Client` handles send it requests and get their responses on channels of their own.
//! This module knows no host: what a transport adds (the owner a far side must not be
//! told, what a connection lost there means) comes through its [`Link`].

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bashd_protocol::codec::ClientCodec;
use bashd_protocol::{
    ClientFrame, Hello, Inbox, JobId, PROTOCOL_VERSION, Request, RequestId, Response, ServerFrame,
    Welcome,
};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
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
    welcome: Welcome,
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
    /// A command, and its job once `Started` names it.
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

    /// The job this request runs or acts on, once known (an `Exec`'s from `Started`).
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
    pub async fn next(&mut self) -> Result<Response, ClientError> {
        match self.rx.recv().await {
            Some(response) => {
                if let (Response::Started(started), About::Exec(job)) = (&response, &mut self.about)
                {
                    *job = Some(started.job);
                }
                Ok(response)
            }
            None => Err(self.ended().await),
        }
    }

    /// Gives the request up (see [`Client::cancel`]).
    pub async fn cancel(&self) -> Result<(), ClientError> {
        self.client.cancel(self.id).await
    }

    /// The error for a connection that ended under this request.
    async fn ended(&self) -> ClientError {
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
        let inbox = Arc::new(std::sync::Mutex::new(Inbox::default()));
        tokio::spawn(run_connection(
            frames_in,
            frames_out,
            outgoing_rx,
            Arc::clone(&inbox),
        ));
        Ok(Client {
            outgoing,
            welcome,
            next_id: Default::default(),
            others: None,
            link: None,
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
        InboxHandle(Arc::clone(&self.inbox))
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
        match &self.link {
            Some(link) => link.lost(None).await,
            None => ClientError::Disconnected,
        }
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

//! The blocking client: one connection to this machine's daemon over a std socket, one
//! request at a time, and no runtime (no thread, no epoll, no timer), for a front end
//! that asks one thing and exits: the CLI's `exec`, `check`, `kill` and `jobs`, as
//! pueue_lib's `network_blocking` serves pueue's CLI. A process that starts a tokio
//! runtime for one round trip pays for the runtime's start and its exit every call.
//!
//! It reaches the daemon as [`crate::connect`] does (started when none answers, through
//! the job's channel inside a sandboxed job), speaks through the same codec, and tells
//! the same errors through the same code as [`Client`](crate::Client): the handshake's
//! failures, what a daemon gone under a request means, what each answer means. `Hello`
//! goes out with the first request in one write; `Welcome` is read ahead of its
//! responses, within the same 10 s.
//!
//! What only the async client does: requests side by side on one connection,
//! cancelling one, streaming a command's output to a caller that ticks, another host.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use bashd_protocol::codec::ClientCodec;
use bashd_protocol::{
    ClientFrame, ExecParams, ExecResult, FrameError, Inbox, JobId, JobInfo, JobRequest,
    JobsRequest, KillRequest, Request, RequestId, Response, ServerFrame, StatusInfo, Welcome,
};
use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::client::{About, Failure, InboxHandle, WELCOME_TIMEOUT, hello};
use crate::error::ClientError;
use crate::others::OtherDaemon;
use crate::requests::{answered, jobs_of, result_of, status_of};
use crate::target::Target;
use crate::watch::{Turn, turn};

/// How much a read asks for: most answers are one read.
const READ_CHUNK: usize = 16 * 1024;

/// A connection to this machine's bashd that blocks the calling thread.
///
/// ```no_run
/// # fn example() -> Result<(), bashc::ClientError> {
/// use bashc::protocol::ExecParams;
///
/// let mut client = bashc::BlockingClient::connect(&bashc::Target::local())?;
/// let result = client.exec(ExecParams::new("echo hello", "my-session", "/tmp"), |_| {
///     Ok::<(), bashc::ClientError>(())
/// })?;
/// assert_eq!(result.stdout.text, "hello\n");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct BlockingClient {
    stream: UnixStream,
    codec: ClientCodec,
    /// What was read and not yet decoded.
    incoming: BytesMut,
    next_id: RequestId,
    handshake: Handshake,
    /// Whether the socket has a read timeout set (while the handshake waits).
    timeout_set: bool,
    /// How long the daemon has to answer `Hello` (shorter in tests).
    welcome_timeout: Duration,
    inbox: InboxHandle,
    others: Option<Vec<OtherDaemon>>,
}

/// How far the connection's handshake got.
#[derive(Debug)]
enum Handshake {
    /// `Hello` goes with the first request.
    Unsent,
    /// `Hello` is sent; `Welcome` is due by then.
    Waiting(Instant),
    Welcomed(Welcome),
    Failed(Failure),
}

/// The responses to one request, read as they are asked for.
#[derive(Debug)]
pub struct BlockingResponses<'a> {
    client: &'a mut BlockingClient,
    id: RequestId,
    about: About,
}

impl BlockingResponses<'_> {
    /// The next response. When the connection ends first, the error says what that
    /// means for the request, as [`crate::Responses::next`]'s does.
    /// An `Exec`'s `Recorded` is not handed out: it names the job for that error.
    pub fn next_response(&mut self) -> Result<Response, ClientError> {
        loop {
            let response = self.client.response(self.id, &self.about)?;
            if self.about.heard(&response) {
                return Ok(response);
            }
        }
    }

    /// The job this request runs or acts on, once known (an `Exec`'s from `Recorded`).
    pub fn job(&self) -> Option<JobId> {
        self.about.job()
    }
}

impl BlockingClient {
    /// A connection to the daemon of `target`, which must be this machine's: started if
    /// none answers (unless `BASHD_NO_AUTOSTART=1`), reached through the job's channel
    /// inside a sandboxed job, as [`crate::connect`] does. Another host's daemon is
    /// reached by the async client only.
    pub fn connect(target: &Target) -> Result<BlockingClient, ClientError> {
        match target {
            Target::Local { runtime_dir, .. } => match crate::channel::inherited() {
                Some(channel) => Ok(BlockingClient::over(crate::channel::open(channel?)?)),
                None => {
                    let reached = crate::autostart::reach(runtime_dir)?;
                    let mut client = BlockingClient::over(reached.stream);
                    client.others = reached.others;
                    Ok(client)
                }
            },
            Target::Remote { host, .. } => Err(ClientError::Remote {
                host: host.clone(),
                message: "the blocking client reaches this machine's bashd only; bashc::connect reaches another host's".to_owned(),
            }),
        }
    }

    /// Speaks the protocol over `stream`, a socket in blocking mode whose far end is a
    /// daemon (or its job's channel): the handshake goes with the first request.
    pub fn over(stream: UnixStream) -> BlockingClient {
        BlockingClient {
            stream,
            codec: ClientCodec::default(),
            incoming: BytesMut::new(),
            next_id: 0,
            handshake: Handshake::Unsent,
            timeout_set: false,
            welcome_timeout: WELCOME_TIMEOUT,
            inbox: InboxHandle::new(),
            others: None,
        }
    }

    /// What the daemon said in its handshake, once a request has brought it.
    pub fn welcome(&self) -> Option<&Welcome> {
        match &self.handshake {
            Handshake::Welcomed(welcome) => Some(welcome),
            _ => None,
        }
    }

    /// As [`crate::Client::other_daemons`].
    pub fn other_daemons(&self) -> Option<&[OtherDaemon]> {
        self.others.as_deref()
    }

    /// As [`crate::Client::take_inbox`].
    pub fn take_inbox(&self) -> Option<Inbox> {
        self.inbox.take()
    }

    /// As [`crate::Client::inbox_handle`].
    pub fn inbox_handle(&self) -> InboxHandle {
        self.inbox.clone()
    }

    /// Sends a request; its responses are read through the returned [`BlockingResponses`].
    pub fn request(&mut self, request: Request) -> Result<BlockingResponses<'_>, ClientError> {
        let about = About::of(&request);
        let id = self.next_id;
        self.next_id += 1;
        self.send(id, request, &about)?;
        Ok(BlockingResponses {
            client: self,
            id,
            about,
        })
    }

    /// Runs a command and waits for its result; `event` is told of each response
    /// ahead of it (`Started`, `Output` and `Notice`s), and an error of its own ends
    /// the wait (the connection's end then stops a foreground job).
    pub fn exec<E: From<ClientError>>(
        &mut self,
        params: ExecParams,
        mut event: impl FnMut(Response) -> Result<(), E>,
    ) -> Result<ExecResult, E> {
        let mut pending = self.request(Request::Exec(params))?;
        loop {
            match turn(pending.next_response()?)? {
                Turn::Done(result) => return Ok(*result),
                Turn::Event(response) => event(response)?,
            }
        }
    }

    /// As [`crate::Client::check`].
    pub fn check(&mut self, request: JobRequest) -> Result<ExecResult, ClientError> {
        result_of(self.one(Request::Check(request))?)
    }

    /// As [`crate::Client::kill`].
    pub fn kill(&mut self, request: KillRequest) -> Result<ExecResult, ClientError> {
        result_of(self.one(Request::Kill(request))?)
    }

    /// As [`crate::Client::jobs`].
    pub fn jobs(&mut self, request: JobsRequest) -> Result<Vec<JobInfo>, ClientError> {
        jobs_of(self.one(Request::Jobs(request))?)
    }

    /// As [`crate::Client::status`].
    pub fn status(&mut self) -> Result<StatusInfo, ClientError> {
        status_of(self.one(Request::Status)?)
    }

    fn one(&mut self, request: Request) -> Result<Response, ClientError> {
        answered(self.request(request)?.next_response()?)
    }

    /// Writes the request, with `Hello` ahead of it on a new connection, in one write.
    fn send(&mut self, id: RequestId, request: Request, about: &About) -> Result<(), ClientError> {
        if let Handshake::Failed(failure) = &self.handshake {
            return Err(failure.error());
        }
        let mut out = BytesMut::new();
        let first = matches!(self.handshake, Handshake::Unsent);
        if first {
            self.codec.encode(hello(), &mut out)?;
        }
        self.codec
            .encode(ClientFrame::Request(id, request), &mut out)?;
        if first {
            self.handshake = Handshake::Waiting(Instant::now() + self.welcome_timeout);
        }
        let Err(error) = self.stream.write_all(&out) else {
            return Ok(());
        };
        let broken = Failure::of_frame(FrameError::Io(error));
        if !matches!(self.handshake, Handshake::Waiting(_)) {
            // After the handshake, a daemon that is gone: the request was not taken.
            return Err(match broken {
                Failure::Disconnected => about.died(),
                broken => broken.error(),
            });
        }
        // A daemon that refuses the connection (another uid's) may have said why and
        // closed before what was written went out: its reason beats a broken pipe.
        self.handshake = Handshake::Failed(match self.read_frame() {
            Ok(Some(ServerFrame::Fatal(reply))) => Failure::Refused(reply),
            _ => broken,
        });
        Ok(())
    }

    /// The next response to the request `id`, after the `Welcome` when it is due.
    fn response(&mut self, id: RequestId, about: &About) -> Result<Response, ClientError> {
        loop {
            if let Handshake::Failed(_) = self.handshake {
                return Err(self.ended(about));
            }
            let frame = match self.read_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => return Err(self.lost(Failure::Disconnected, about)),
                Err(failure) => return Err(self.lost(failure, about)),
            };
            if let Handshake::Waiting(_) = self.handshake {
                self.handshake = match frame {
                    ServerFrame::Welcome(welcome) => Handshake::Welcomed(welcome),
                    ServerFrame::Fatal(reply) => Handshake::Failed(Failure::Refused(reply)),
                    ServerFrame::Response(..) => {
                        Handshake::Failed(Failure::Unexpected("a response"))
                    }
                };
                continue;
            }
            match frame {
                // Kept for the front end, ahead of the final response it comes with.
                ServerFrame::Response(_, Response::Inbox(more)) => self.inbox.extend(more),
                ServerFrame::Response(of, response) if of == id => return Ok(response),
                ServerFrame::Response(..) | ServerFrame::Welcome(_) => {}
                // The daemon ends the connection with a reason: the request's error, as
                // the async client makes it; the connection is over.
                ServerFrame::Fatal(error) => {
                    self.handshake = Handshake::Failed(Failure::Disconnected);
                    return Ok(Response::Error(error));
                }
            }
        }
    }

    /// The error of a connection that ended (or could not be read) under a request:
    /// the handshake's, when it was not done, else what the end means for the request.
    fn lost(&mut self, failure: Failure, about: &About) -> ClientError {
        if let Handshake::Waiting(_) = self.handshake {
            self.handshake = Handshake::Failed(failure);
        } else {
            self.handshake = Handshake::Failed(Failure::Disconnected);
        }
        self.ended(about)
    }

    /// As the async client's `Responses::ended`: a daemon that went away before its
    /// `Welcome` is told as one that went away after it, so the request's job is named.
    fn ended(&self, about: &About) -> ClientError {
        match &self.handshake {
            Handshake::Failed(failure) if !matches!(failure, Failure::Disconnected) => {
                failure.error()
            }
            _ => about.died(),
        }
    }

    /// The next frame; `None` when the daemon closed the connection between frames.
    /// While `Welcome` is due, a read waits no longer than its deadline.
    fn read_frame(&mut self) -> Result<Option<ServerFrame>, Failure> {
        loop {
            if let Some(frame) = self
                .codec
                .decode(&mut self.incoming)
                .map_err(Failure::of_frame)?
            {
                return Ok(Some(frame));
            }
            self.read_timeout()?;
            let len = self.incoming.len();
            self.incoming.resize(len + READ_CHUNK, 0);
            let read = self.stream.read(&mut self.incoming[len..]);
            self.incoming.truncate(len + *read.as_ref().unwrap_or(&0));
            match read {
                Ok(0) => {
                    return self
                        .codec
                        .decode_eof(&mut self.incoming)
                        .map_err(Failure::of_frame);
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(Failure::Timeout);
                }
                Err(e) => return Err(Failure::of_frame(FrameError::Io(e))),
            }
        }
    }

    /// Sets the socket's read timeout to what is left of the handshake's, or clears it
    /// once the handshake is done.
    fn read_timeout(&mut self) -> Result<(), Failure> {
        let timeout = match self.handshake {
            Handshake::Waiting(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Failure::Timeout);
                }
                Some(left)
            }
            _ if self.timeout_set => None,
            _ => return Ok(()),
        };
        self.timeout_set = timeout.is_some();
        self.stream
            .set_read_timeout(timeout)
            .map_err(|e| Failure::of_frame(FrameError::Io(e)))
    }
}

#[cfg(test)]
mod tests {
    use std::thread::JoinHandle;

    use bashd_protocol::codec::DaemonCodec;
    use bashd_protocol::{
        Caller, ErrorKind, ErrorReply, InboxEvent, JobRef, PROTOCOL_VERSION, Started,
    };

    use super::*;

    /// The daemon's end of a connection: frames read and written with its codec.
    struct FakeDaemon {
        stream: UnixStream,
        codec: DaemonCodec,
        incoming: BytesMut,
    }

    impl FakeDaemon {
        /// The next frames, as one read of the socket brought them.
        fn read(&mut self) -> Vec<ClientFrame> {
            let mut chunk = [0u8; 64 * 1024];
            let n = self.stream.read(&mut chunk).unwrap();
            self.incoming.extend_from_slice(&chunk[..n]);
            let mut frames = Vec::new();
            while let Some(frame) = self.codec.decode(&mut self.incoming).unwrap() {
                frames.push(frame);
            }
            frames
        }

        fn send(&mut self, frame: ServerFrame) {
            let mut out = BytesMut::new();
            self.codec.encode(frame, &mut out).unwrap();
            self.stream.write_all(&out).unwrap();
        }

        fn welcome(&mut self) {
            self.send(ServerFrame::Welcome(Welcome {
                protocol: PROTOCOL_VERSION,
                daemon_version: "test".to_owned(),
                daemon_pid: 42,
            }));
        }
    }

    /// A client and a fake daemon on a thread, which `serve` plays.
    fn pair(serve: impl FnOnce(FakeDaemon) + Send + 'static) -> (BlockingClient, JoinHandle<()>) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let daemon = std::thread::spawn(move || {
            serve(FakeDaemon {
                stream: theirs,
                codec: DaemonCodec::default(),
                incoming: BytesMut::new(),
            })
        });
        (BlockingClient::over(ours), daemon)
    }

    fn caller() -> Caller {
        Caller {
            session: "test".to_owned(),
            owner: None,
        }
    }

    fn kill_j7() -> KillRequest {
        KillRequest {
            caller: caller(),
            job: JobRef::Id("j7".to_owned()),
            signal: None,
            grace_ms: None,
            any_session: false,
        }
    }

    /// `Hello` and the first request arrive together: one round trip, not two.
    #[test]
    fn hello_and_the_first_request_arrive_together_and_the_answer_is_read() {
        let (mut client, daemon) = pair(|mut daemon| {
            let frames = daemon.read();
            assert!(matches!(frames[0], ClientFrame::Hello(_)), "{frames:?}");
            let ClientFrame::Request(id, Request::Jobs(_)) = frames[1] else {
                panic!("not a jobs request: {frames:?}");
            };
            daemon.welcome();
            daemon.send(ServerFrame::Response(id, Response::Jobs(Vec::new())));
        });
        let request = JobsRequest {
            caller: caller(),
            session: None,
        };
        assert_eq!(client.jobs(request).unwrap(), Vec::new());
        assert_eq!(client.welcome().map(|w| w.daemon_pid), Some(42));
        daemon.join().unwrap();
    }

    /// A daemon that refuses the connection and closes before reading: its reason is
    /// the error, not the broken pipe.
    #[test]
    fn a_refusal_beats_a_broken_pipe() {
        let reply = ErrorReply::new(ErrorKind::VersionMismatch, "speaks protocol 0");
        let refused = reply.clone();
        let (mut client, daemon) = pair(move |mut daemon| {
            daemon.send(ServerFrame::Fatal(refused));
        });
        daemon.join().unwrap();
        match client.status() {
            Err(ClientError::Refused(said)) => assert_eq!(said, reply),
            other => panic!("not refused: {other:?}"),
        }
        // A request about a job says the refusal too, not that bashd died under it.
        let killed = client.kill(kill_j7());
        assert!(matches!(killed, Err(ClientError::Refused(_))), "{killed:?}");
    }

    /// A daemon that goes away under a request names what it was doing: the job an
    /// exec started, the job a kill was stopping.
    #[test]
    fn a_daemon_gone_under_a_request_names_the_job() {
        let (mut client, daemon) = pair(|mut daemon| {
            let frames = daemon.read();
            let ClientFrame::Request(id, Request::Exec(_)) = frames[1] else {
                panic!("not an exec: {frames:?}");
            };
            daemon.welcome();
            let started = Started {
                job: JobId(3),
                session: "test".to_owned(),
                pid: 99,
            };
            daemon.send(ServerFrame::Response(id, Response::Started(started)));
        });
        let mut events = 0;
        let error = client
            .exec(ExecParams::new("sleep 9", "test", "/"), |_| {
                events += 1;
                Ok::<(), ClientError>(())
            })
            .unwrap_err();
        daemon.join().unwrap();
        assert!(
            matches!(error, ClientError::DiedWhileRunning { job: JobId(3) }),
            "{error:?}"
        );
        assert_eq!(events, 1);

        let (mut client, daemon) = pair(|mut daemon| {
            daemon.read();
            daemon.welcome();
        });
        let error = client.kill(kill_j7()).unwrap_err();
        daemon.join().unwrap();
        assert!(
            matches!(&error, ClientError::DiedDuring { doing: "stopping", job } if job == "j7"),
            "{error:?}"
        );
    }

    /// A daemon that takes the connection and never answers: the handshake's timeout.
    #[test]
    fn a_daemon_that_never_answers_is_a_handshake_timeout() {
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let (mut client, daemon) = pair(move |mut daemon| {
            daemon.read();
            let _ = wait.recv();
        });
        client.welcome_timeout = Duration::from_millis(100);
        let error = client.status().unwrap_err();
        assert!(
            matches!(error, ClientError::HandshakeTimeout(_)),
            "{error:?}"
        );
        done.send(()).unwrap();
        daemon.join().unwrap();
    }

    /// What the daemon sends ahead of a final response for the front end is kept.
    #[test]
    fn the_inbox_ahead_of_an_answer_is_kept() {
        let (mut client, daemon) = pair(|mut daemon| {
            let frames = daemon.read();
            let ClientFrame::Request(id, _) = frames[1] else {
                panic!("no request: {frames:?}");
            };
            daemon.welcome();
            let inbox = Inbox {
                events: vec![InboxEvent::WaitingForInput {
                    job: JobId(2),
                    command: "read x".to_owned(),
                    prompt: None,
                }],
                folded: 0,
            };
            daemon.send(ServerFrame::Response(id, Response::Inbox(inbox)));
            daemon.send(ServerFrame::Response(id, Response::Jobs(Vec::new())));
        });
        let request = JobsRequest {
            caller: caller(),
            session: None,
        };
        client.jobs(request).unwrap();
        daemon.join().unwrap();
        let inbox = client.take_inbox().expect("the inbox was kept");
        assert_eq!(inbox.events.len(), 1);
        assert!(
            client.take_inbox().is_none(),
            "each event is handed out once"
        );
    }
}

//! One client connection: the handshake, then many requests in flight at once, each
//! in its own task, their responses funnelled through one writer.
//!
//! A connection that goes away takes its requests with it: their tasks are dropped,
//! which closes the channels their foreground jobs report to, which stops those jobs.

use std::time::Duration;

use bashd_protocol::codec::DaemonCodec;
use bashd_protocol::{
    ClientFrame, ErrorKind, ErrorReply, ExecResult, FollowRequest, GrepRequest, JobRequest,
    JobsRequest, KillRequest, Owner, PROTOCOL_VERSION, PolicyVerdict, Request, RequestId, Response,
    SendRequest, ServerFrame, WaitRequest, Welcome,
};
use futures::{SinkExt, StreamExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;

use crate::jobs::JobsHandle;

/// A client that connects and says nothing is dropped after this long.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn serve_connection(
    stream: UnixStream,
    jobs: JobsHandle,
    shutdown: CancellationToken,
    max_frame_bytes: usize,
) {
    let (read, write) = stream.into_split();
    let mut frames = FramedRead::new(read, DaemonCodec::new(max_frame_bytes));
    let (out, out_rx) = mpsc::channel::<ServerFrame>(256);
    let writer = tokio::spawn(write_frames(
        FramedWrite::new(write, DaemonCodec::new(max_frame_bytes)),
        out_rx,
    ));

    if let Some(client_pid) = handshake(&mut frames, &out).await {
        serve_requests(&mut frames, &out, &jobs, &shutdown, client_pid).await;
    }
    // The writer ends once every sender is gone, after flushing what was queued.
    drop(out);
    let _ = writer.await;
}

/// Reads the `Hello`; answers `Welcome` and returns the client's pid, or sends why not.
async fn handshake(
    frames: &mut FramedRead<tokio::net::unix::OwnedReadHalf, DaemonCodec>,
    out: &mpsc::Sender<ServerFrame>,
) -> Option<u32> {
    let first = match tokio::time::timeout(HELLO_TIMEOUT, frames.next()).await {
        Ok(Some(first)) => first,
        Ok(None) | Err(_) => return None,
    };
    let fatal = match first {
        Ok(ClientFrame::Hello(hello)) if hello.protocol == PROTOCOL_VERSION => {
            tracing::debug!(client = %hello.client, pid = hello.pid, "client connected");
            let welcome = Welcome {
                protocol: PROTOCOL_VERSION,
                daemon_version: env!("CARGO_PKG_VERSION").to_owned(),
                daemon_pid: std::process::id(),
            };
            let sent = out.send(ServerFrame::Welcome(welcome)).await.is_ok();
            return sent.then_some(hello.pid);
        }
        Ok(ClientFrame::Hello(hello)) => ErrorReply::new(
            ErrorKind::VersionMismatch,
            format!(
                "{} speaks protocol {}, but this bashd {} (pid {}) speaks protocol {PROTOCOL_VERSION}; restart the daemon so that client and daemon are the same version",
                hello.client,
                hello.protocol,
                env!("CARGO_PKG_VERSION"),
                std::process::id()
            ),
        ),
        Ok(ClientFrame::Request(..)) => ErrorReply::new(
            ErrorKind::BadFrame,
            "the first frame of a connection must be Hello",
        ),
        Err(e) => ErrorReply::new(ErrorKind::BadFrame, format!("bad frame: {e}")),
    };
    tracing::debug!("closing a connection: {fatal}");
    let _ = out.send(ServerFrame::Fatal(fatal)).await;
    None
}

async fn serve_requests(
    frames: &mut FramedRead<tokio::net::unix::OwnedReadHalf, DaemonCodec>,
    out: &mpsc::Sender<ServerFrame>,
    jobs: &JobsHandle,
    shutdown: &CancellationToken,
    client_pid: u32,
) {
    let mut requests = JoinSet::new();
    loop {
        // Cancelling a read loses nothing: FramedRead keeps partial frames buffered.
        let frame = tokio::select! {
            () = shutdown.cancelled() => break,
            Some(_) = requests.join_next(), if !requests.is_empty() => continue,
            frame = frames.next() => frame,
        };
        match frame {
            Some(Ok(ClientFrame::Request(id, request))) => {
                let request = with_owner(request, client_pid);
                requests.spawn(serve_request(id, request, jobs.clone(), out.clone()));
            }
            Some(Ok(ClientFrame::Hello(_))) => {
                let _ = out
                    .send(ServerFrame::Fatal(ErrorReply::new(
                        ErrorKind::BadFrame,
                        "Hello may only be sent once, as the first frame",
                    )))
                    .await;
                return;
            }
            Some(Err(e)) => {
                tracing::debug!("closing a connection after a bad frame: {e}");
                let _ = out
                    .send(ServerFrame::Fatal(ErrorReply::new(
                        ErrorKind::BadFrame,
                        format!("bad frame: {e}"),
                    )))
                    .await;
                return;
            }
            // The client is gone: dropping `requests` stops its foreground jobs.
            None => return,
        }
    }
    // Shutting down: the actor stops every job, so each request still in flight gets
    // its final answer; wait for those to be written.
    while requests.join_next().await.is_some() {}
}

/// A request that names no owner is owned by the process that connected.
fn with_owner(mut request: Request, client_pid: u32) -> Request {
    let owner = match &mut request {
        Request::Exec(params) => &mut params.owner,
        Request::Jobs(JobsRequest { caller, .. })
        | Request::Check(JobRequest { caller, .. })
        | Request::Wait(WaitRequest { caller, .. })
        | Request::Kill(KillRequest { caller, .. })
        | Request::Follow(FollowRequest { caller, .. })
        | Request::Send(SendRequest { caller, .. })
        | Request::Grep(GrepRequest { caller, .. })
        | Request::Screen(JobRequest { caller, .. })
        | Request::Resize(bashd_protocol::ResizeRequest { caller, .. }) => &mut caller.owner,
        _ => return request,
    };
    owner.get_or_insert(Owner {
        pid: client_pid,
        start_time: None,
    });
    request
}

async fn serve_request(
    id: RequestId,
    request: Request,
    jobs: JobsHandle,
    out: mpsc::Sender<ServerFrame>,
) {
    let answer = |result: Result<Response, ErrorReply>| match result {
        Ok(response) => response,
        Err(error) => Response::Error(error),
    };
    let finished = |result: Result<ExecResult, ErrorReply>| {
        answer(result.map(|r| Response::Finished(Box::new(r))))
    };
    let response = match request {
        Request::Exec(params) => {
            let events = jobs.exec(params).await;
            return forward(id, events, &out).await;
        }
        Request::Follow(request) => return forward(id, jobs.follow(request), &out).await,
        Request::Send(request) => answer(jobs.send(request).await.map(Response::Sent)),
        Request::Grep(request) => answer(jobs.grep(request).await.map(Response::Page)),
        Request::Screen(request) => answer(jobs.screen(request).await.map(Response::Screen)),
        Request::Resize(request) => answer(jobs.resize(request).await.map(Response::Screen)),
        Request::Output(request) => answer(jobs.output(request).await.map(Response::Page)),
        Request::CheckPolicy(command) => {
            Response::Policy(match jobs.policy_verdict(command, None).await {
                Ok(()) => PolicyVerdict {
                    allowed: true,
                    rule: None,
                    message: None,
                },
                Err(denial) => PolicyVerdict {
                    allowed: false,
                    rule: Some(denial.rule),
                    message: Some(denial.message),
                },
            })
        }
        Request::Status => match jobs.status().await {
            Some(status) => Response::Status(status),
            None => Response::Error(crate::jobs::shutting_down()),
        },
        Request::Jobs(request) => answer(jobs.jobs(request).await.map(Response::Jobs)),
        Request::Check(request) => finished(jobs.new_output(request).await),
        Request::Wait(request) => finished(jobs.wait(request).await),
        Request::Kill(request) => finished(jobs.kill(request).await),
        Request::Sessions => answer(jobs.sessions().await.map(Response::Sessions)),
        Request::CloseSession(session) => answer(
            jobs.close_session(session)
                .await
                .map(Response::SessionClosed),
        ),
    };
    let _ = out.send(ServerFrame::Response(id, response)).await;
}

/// Forwards the responses of a request that has many (`Exec`, `Follow`) until its last.
async fn forward(
    id: RequestId,
    mut events: mpsc::Receiver<Response>,
    out: &mpsc::Sender<ServerFrame>,
) {
    while let Some(event) = events.recv().await {
        let last = matches!(event, Response::Finished(_) | Response::Error(_));
        if out.send(ServerFrame::Response(id, event)).await.is_err() || last {
            return;
        }
    }
}

async fn write_frames(
    mut sink: FramedWrite<tokio::net::unix::OwnedWriteHalf, DaemonCodec>,
    mut frames: mpsc::Receiver<ServerFrame>,
) {
    while let Some(frame) = frames.recv().await {
        if let Err(e) = sink.send(frame).await {
            tracing::debug!("cannot write to a client: {e}");
            return;
        }
    }
}

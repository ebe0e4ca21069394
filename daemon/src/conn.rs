//! One client connection: the handshake, then many requests in flight at once, each
//! in its own task, which writes its responses itself (`outbound.rs`).
//!
//! A connection that goes away takes its requests with it: their tasks are dropped,
//! which closes the channels their foreground jobs report to, which stops those jobs.
//!
//! What a connection holds is bounded (issue 18): frames are read by `inbound.rs`
//! (budget, deadline), at most [`MAX_QUERIES_IN_FLIGHT`] answers other than `Exec`s
//! are being made at once and at most [`MAX_EXECS_IN_FLIGHT`] `Exec`s wait, and each
//! of them waits to write its one frame while the client does not read: a client that
//! does not read its answers stops being read (backpressure), it does not make the
//! daemon buffer them.
//! A `Cancel` does the same for one request (or, for an MCP call under
//! `[mcp] on_cancel = "background"`, moves its job to the background).

use std::collections::HashMap;
use std::time::Duration;

use bashd_protocol::{
    ClientFrame, ErrorKind, ErrorReply, Owner, PROTOCOL_VERSION, Request, RequestId, ServerFrame,
    Welcome,
};
use tokio::net::UnixStream;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::inbound::{FrameReader, LargeFrames};
use crate::jobs::JobsHandle;
use crate::outbound::Outbound;

/// A client that connects and says nothing is dropped after this long.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a `Welcome` waits to go out with the first answer to the `Exec` that
/// came with the `Hello`: that answer (`Recorded`, or the refusal) comes after the
/// policy and the job's record, well within it, and the client waits for nothing
/// else.
const WELCOME_HOLD: Duration = Duration::from_millis(100);
/// Answers other than `Exec`s being made at once for one connection; an `output` page
/// can be a MiB, so this bounds what a client that does not read can make us hold.
pub const MAX_QUERIES_IN_FLIGHT: usize = 4;
/// `Exec`s one connection may have waiting for their jobs at once.
pub const MAX_EXECS_IN_FLIGHT: usize = 1024;

/// Serves one connection; `jobs` says whether it came through a sandboxed job's
/// channel (`JobsHandle::from_job`), which bounds every request it makes.
pub async fn serve_connection(
    stream: UnixStream,
    jobs: JobsHandle,
    shutdown: CancellationToken,
    max_frame_bytes: usize,
    large_frames: LargeFrames,
) {
    let (read, write) = stream.into_split();
    let mut frames = FrameReader::new(read, max_frame_bytes, large_frames);
    let out = Outbound::new(write, max_frame_bytes);

    if let Some((client_pid, welcome)) = handshake(&mut frames, &out).await {
        serve_requests(&mut frames, &out, &jobs, &shutdown, client_pid, welcome).await;
    }
    // Every request's task has ended or been dropped: what is left is a frame a
    // dropped one was writing.
    out.close().await;
}

/// Whether the `Welcome` went out, or waits for the first answer to go with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Welcomed {
    Sent,
    Held,
}

/// Reads the `Hello`; answers `Welcome` and returns the client's pid, or sends why not.
/// A client that sent its first request with its `Hello` (`Client::start`) has it
/// read already: the `Welcome` is held, to go out with that request's first answer
/// in one write when the request is an `Exec` (`serve_requests` decides), rather
/// than waking the client twice.
async fn handshake(frames: &mut FrameReader, out: &Outbound) -> Option<(u32, Welcomed)> {
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
            let frame = ServerFrame::Welcome(welcome);
            let welcomed = if frames.holds_a_frame() {
                out.hold(frame).await.map(|()| Welcomed::Held)
            } else {
                out.send(frame).await.map(|()| Welcomed::Sent)
            };
            return welcomed.ok().map(|welcomed| (hello.pid, welcomed));
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
    frames: &mut FrameReader,
    out: &Outbound,
    jobs: &JobsHandle,
    shutdown: &CancellationToken,
    client_pid: u32,
    mut welcome: Welcomed,
) {
    let mut execs = JoinSet::new();
    // A held `Welcome` goes out with the first answer, or at this deadline, whichever
    // comes first (a flush after the answer writes nothing).
    let welcome_by = tokio::time::sleep(WELCOME_HOLD);
    tokio::pin!(welcome_by);
    let mut queries = JoinSet::new();
    // The requests in flight, each with the token that cancels it; a request's task
    // returns its id when it is done, which takes it out.
    let mut in_flight: HashMap<RequestId, CancellationToken> = HashMap::new();
    loop {
        // Cancelling a read loses nothing: the reader keeps partial frames buffered.
        // A full set of requests in flight stops the reading (backpressure) until one
        // of them is answered.
        let room = execs.len() < MAX_EXECS_IN_FLIGHT && queries.len() < MAX_QUERIES_IN_FLIGHT;
        let frame = tokio::select! {
            () = shutdown.cancelled() => break,
            Some(done) = execs.join_next(), if !execs.is_empty() => {
                if let Ok(id) = done {
                    in_flight.remove(&id);
                }
                continue;
            }
            Some(done) = queries.join_next(), if !queries.is_empty() => {
                if let Ok(id) = done {
                    in_flight.remove(&id);
                }
                continue;
            }
            () = &mut welcome_by, if welcome == Welcomed::Held => {
                welcome = Welcomed::Sent;
                if out.flush().await.is_err() {
                    return;
                }
                continue;
            }
            frame = frames.next(), if room => frame,
        };
        // Only an `Exec` answers at once (`Recorded`, or why not); any other request
        // may wait long before its answer, so the `Welcome` goes out now.
        if welcome == Welcomed::Held
            && !matches!(frame, Some(Ok(ClientFrame::Request(_, Request::Exec(_)))))
        {
            welcome = Welcomed::Sent;
            if out.flush().await.is_err() {
                return;
            }
        }
        match frame {
            Some(Ok(ClientFrame::Request(_, Request::Cancel(target)))) => {
                // A request that was answered already, or never sent, is no error.
                if let Some(cancel) = in_flight.remove(&target) {
                    cancel.cancel();
                }
            }
            Some(Ok(ClientFrame::Request(id, request))) => {
                let request = with_owner(request, client_pid);
                let task_kind = match request {
                    Request::Exec(_) => TaskKind::Exec,
                    _ => TaskKind::Query,
                };
                let cancel = CancellationToken::new();
                in_flight.insert(id, cancel.clone());
                let (jobs, out) = (jobs.clone(), out.clone());
                let task = async move {
                    crate::jobs::requests::serve(id, request, jobs, out, cancel).await;
                    id
                };
                match task_kind {
                    TaskKind::Exec => execs.spawn(task),
                    TaskKind::Query => queries.spawn(task),
                };
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
    while execs.join_next().await.is_some() {}
    while queries.join_next().await.is_some() {}
}

/// Which bound a request in flight counts against.
enum TaskKind {
    Exec,
    Query,
}

/// A request that names no owner is owned by the process that connected.
fn with_owner(mut request: Request, client_pid: u32) -> Request {
    let owner = Owner {
        pid: client_pid,
        start_time: None,
    };
    // A wait on several jobs names an owner per job it waits on: `owners_mut` is the
    // one list of them, the client's as well.
    for slot in request.owners_mut() {
        slot.get_or_insert(owner);
    }
    request
}

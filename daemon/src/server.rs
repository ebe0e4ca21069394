//! The accept loop: admits peers of the daemon's own uid from outside every sandbox,
//! and the connections sandboxed jobs send over their channels, and gives each
//! connection a task of its own. The socket's connections count against `[limits]
//! max_connections`; a job's, against its channel's own limit, so that no job can take
//! the person's.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bashd_protocol::codec::DaemonCodec;
use bashd_protocol::{ErrorKind, ErrorReply, ServerFrame};
use futures::{SinkExt, StreamExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::conn;
use crate::inbound::LargeFrames;
use crate::jobs::JobsHandle;
use crate::sandbox::channel::Arrived;
use crate::sandbox::peer;

/// The frame limit for a peer that is being refused: a `Hello` fits in it.
const REFUSED_FRAME_BYTES: usize = 64 * 1024;

/// Accepts until `shutdown` is cancelled. Connection tasks are tracked by `tracker`
/// so the caller can wait for them to wind down.
pub async fn serve(
    listener: UnixListener,
    mut arrivals: mpsc::Receiver<Arrived>,
    jobs: JobsHandle,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let me = rustix::process::getuid().as_raw();
    let large_frames = LargeFrames::default();
    // Connections on the socket being served (refusals not counted: they end on their
    // own within `REFUSAL_WAIT`). A count, not a semaphore, so a reload can change the
    // cap.
    let open = Arc::new(AtomicUsize::new(0));
    // Connections that came through jobs' channels, all jobs together: each job holds
    // at most its channel's share, and together they hold at most `max_connections`
    // of their own, so jobs that start jobs that flood cost the daemon a bounded
    // number of descriptors and still leave the socket's to the person.
    let from_jobs = Arc::new(AtomicUsize::new(0));
    loop {
        // Cancelling accept loses no connection: an unaccepted one stays in the backlog
        // and is refused when the listener is dropped; one sent over a channel stays in
        // `arrivals`.
        let (stream, arrived) = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => (stream, None),
                Err(e) => {
                    // Out of file descriptors, usually; back off instead of spinning.
                    tracing::warn!("cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            Some(arrived) = arrivals.recv() => {
                let Arrived { stream, origin, ended, held } = arrived;
                (stream, Some((origin, ended, held)))
            }
        };
        if arrived.is_none() {
            match stream.peer_cred() {
                Ok(cred) if cred.uid() == me => {}
                Ok(cred) => {
                    tracing::warn!(
                        "refused a connection from uid {} (pid {:?}): bashd serves uid {me} only",
                        cred.uid(),
                        cred.pid()
                    );
                    let reason = format!(
                        "this bashd (pid {}) serves uid {me} only, and you are uid {}; use a bashd of your own (set BASHD_RUNTIME_DIR to a directory of yours, or unset it)",
                        std::process::id(),
                        cred.uid()
                    );
                    tracker.spawn(refuse(stream, ErrorKind::InvalidRequest, reason));
                    continue;
                }
                Err(e) => {
                    tracing::warn!("refused a connection whose peer cannot be identified: {e}");
                    continue;
                }
            }
        }
        // A job's connections are counted by its channel (`channel::MOST_CONNECTIONS`)
        // and in `from_jobs`, apart from these: a job that floods its channel leaves
        // the socket's to the person.
        let cap = jobs.max_connections();
        if let Some((origin, _, _)) = &arrived
            && from_jobs.load(Ordering::Relaxed) >= cap
        {
            tracing::warn!(job = %origin.job, "refused a connection through the job's channel: jobs hold {cap} already (limits.max_connections)");
            let reason = format!(
                "bashd (pid {}) already serves {cap} connections from inside sandboxed jobs, its limit for them; let some of the jobs' clients of bashd finish, or end the jobs that hold many, then try again",
                std::process::id()
            );
            tracker.spawn(refuse(stream, ErrorKind::Busy, reason));
            continue;
        }
        if arrived.is_none() && open.load(Ordering::Relaxed) >= cap {
            tracing::warn!("refused a connection: {cap} are open already (limits.max_connections)");
            let reason = format!(
                "bashd (pid {}) already serves {cap} connections, its limit; close some (each client and each MCP server holds one), or raise [limits] max_connections in the config and reload it (systemctl --user reload bashd)",
                std::process::id()
            );
            tracker.spawn(refuse(stream, ErrorKind::Busy, reason));
            continue;
        }
        // A reloaded limit applies to connections made after the reload.
        let (max_frame_bytes, large_frames) = (jobs.max_frame_bytes(), large_frames.clone());
        let (jobs, shutdown) = (jobs.clone(), shutdown.clone());
        match arrived {
            Some((origin, ended, held)) => {
                tracing::debug!(job = %origin.job, "a connection came through the job's channel");
                from_jobs.fetch_add(1, Ordering::Relaxed);
                let counted = (held, OpenConnection(Arc::clone(&from_jobs)));
                let jobs = jobs.from_job(Some(origin));
                let serve =
                    conn::serve_connection(stream, jobs, shutdown, max_frame_bytes, large_frames);
                tracker.spawn(async move {
                    // The job has ended: what came through its channel ends with it,
                    // requests in flight too.
                    tokio::select! {
                        () = serve => {}
                        () = ended.cancelled() => {}
                    }
                    drop(counted);
                });
            }
            None => {
                open.fetch_add(1, Ordering::Relaxed);
                let counted = OpenConnection(Arc::clone(&open));
                tracker.spawn(async move {
                    // Read before anything else, while the process that connected
                    // surely still runs.
                    // Its directory too: where the confined jobs it starts may write
                    // (`sandbox/roots.rs`), read once for the connection.
                    let peer_pid = stream
                        .peer_cred()
                        .ok()
                        .and_then(|cred| cred.pid())
                        .and_then(|pid| u32::try_from(pid).ok());
                    let caller_dir = match peer::outside_sandboxes(&stream) {
                        Ok(dir) => dir,
                        Err(reason) => {
                            tracing::warn!("refused a connection: {reason}");
                            drop(counted);
                            refuse(stream, ErrorKind::InvalidRequest, reason).await;
                            return;
                        }
                    };
                    let jobs = jobs.from_caller(caller_dir, peer_pid);
                    conn::serve_connection(stream, jobs, shutdown, max_frame_bytes, large_frames)
                        .await;
                    drop(counted);
                });
            }
        }
    }
}

/// One connection counted as open until dropped.
struct OpenConnection(Arc<AtomicUsize>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long a refused peer has to send its `Hello` before the reason is sent anyway.
const REFUSAL_WAIT: Duration = Duration::from_secs(2);

/// Tells a refused peer why, as an error reply, then closes (a peer on the socket, or
/// a connection over a job's limit, `sandbox/channel.rs`). Its `Hello` is read
/// first (or waited for, briefly): a socket closed with unread data resets the peer's
/// end, which would lose the reply; a peer that never sends costs this task
/// `REFUSAL_WAIT` and a small buffer, no more. Nothing it sends is acted on.
pub(crate) async fn refuse(stream: UnixStream, kind: ErrorKind, reason: String) {
    let (read, write) = stream.into_split();
    let mut frames = FramedRead::new(read, DaemonCodec::new(REFUSED_FRAME_BYTES));
    let _ = tokio::time::timeout(REFUSAL_WAIT, frames.next()).await;
    let reply = ErrorReply::new(kind, reason);
    let mut sink = FramedWrite::new(write, DaemonCodec::default());
    let _ = tokio::time::timeout(REFUSAL_WAIT, sink.send(ServerFrame::Fatal(reply))).await;
}

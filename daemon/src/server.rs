//! The accept loop: admits peers of the daemon's own uid and gives each connection a
//! task of its own.

use std::time::Duration;

use bashd_protocol::codec::DaemonCodec;
use bashd_protocol::{ErrorKind, ErrorReply, ServerFrame};
use futures::{SinkExt, StreamExt};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::conn;
use crate::jobs::JobsHandle;

/// Accepts until `shutdown` is cancelled. Connection tasks are tracked by `tracker`
/// so the caller can wait for them to wind down.
pub async fn serve(
    listener: UnixListener,
    jobs: JobsHandle,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let me = rustix::process::getuid().as_raw();
    loop {
        // Cancelling accept loses no connection: an unaccepted one stays in the backlog
        // and is refused when the listener is dropped.
        let accepted = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, usually; back off instead of spinning.
                tracing::warn!("cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == me => {}
            Ok(cred) => {
                tracing::warn!(
                    "refused a connection from uid {} (pid {:?}): bashd serves uid {me} only",
                    cred.uid(),
                    cred.pid()
                );
                tracker.spawn(refuse(stream, cred.uid(), me));
                continue;
            }
            Err(e) => {
                tracing::warn!("refused a connection whose peer cannot be identified: {e}");
                continue;
            }
        }
        // A reloaded limit applies to connections made after the reload.
        tracker.spawn(conn::serve_connection(
            stream,
            jobs.clone(),
            shutdown.clone(),
            jobs.max_frame_bytes(),
        ));
    }
}

/// How long a refused peer has to send its `Hello` before the reason is sent anyway.
const REFUSAL_WAIT: Duration = Duration::from_secs(2);

/// Tells a peer of another uid why it is refused, as an error reply, then closes.
/// Its `Hello` is read first (or waited for, briefly): a socket closed with unread
/// data resets the peer's end, which would lose the reply; a peer that never sends
/// costs this task `REFUSAL_WAIT`, no more. Nothing it sends is acted on.
async fn refuse(stream: UnixStream, uid: u32, me: u32) {
    let (read, write) = stream.into_split();
    let mut frames = FramedRead::new(read, DaemonCodec::default());
    let _ = tokio::time::timeout(REFUSAL_WAIT, frames.next()).await;
    let reply = ErrorReply::new(
        ErrorKind::InvalidRequest,
        format!(
            "this bashd (pid {}) serves uid {me} only, and you are uid {uid}; use a bashd of your own (set BASHD_RUNTIME_DIR to a directory of yours, or unset it)",
            std::process::id()
        ),
    );
    let mut sink = FramedWrite::new(write, DaemonCodec::default());
    let _ = tokio::time::timeout(REFUSAL_WAIT, sink.send(ServerFrame::Fatal(reply))).await;
}

//! The accept loop: admits peers of the daemon's own uid and gives each connection a
//! task of its own.

use std::time::Duration;

use tokio::net::UnixListener;
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

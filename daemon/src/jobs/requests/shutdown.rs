//! `shutdown` (`bashc stop`): answers with the daemon's pid and running jobs, then
//! asks the daemon to stop, as SIGTERM does.

use bashd_protocol::{ErrorKind, ErrorReply, RequestId, Response, ServerFrame, Stopping};

use crate::jobs::table::handle::{JobsHandle, shutting_down};
use crate::outbound::Outbound;

/// Answers `Shutdown` (`bashc stop`), then asks the daemon to stop. A client inside
/// a sandboxed job is refused: stopping the daemon ends every session's jobs, which a
/// confined command may not reach.
pub(super) async fn serve(id: RequestId, jobs: JobsHandle, out: Outbound) {
    let response = if jobs.origin().is_some() {
        Response::Error(ErrorReply::new(
            ErrorKind::InvalidRequest,
            "a command in a sandboxed job cannot stop bashd, which would end every session's jobs; stop it from outside the sandbox",
        ))
    } else {
        match jobs.status().await {
            Some(status) => Response::Stopping(Stopping {
                daemon_pid: status.daemon_pid,
                running_jobs: status.running_jobs,
            }),
            None => Response::Error(shutting_down()),
        }
    };
    let stopping = matches!(response, Response::Stopping(_));
    // The answer is written before the stop begins (pueue): the connection is wound
    // down, not dropped, so the client reads it.
    let _ = out.send(ServerFrame::Response(id, response)).await;
    if stopping {
        jobs.request_stop();
    }
}

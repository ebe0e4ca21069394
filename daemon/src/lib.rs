//! `bashd`, the supervisor. [`run`] serves a bound socket until its shutdown future
//! resolves, then stops every job and gives the runtime directory back.

pub mod config;
mod conn;
pub mod jobs;
mod output;
pub mod policy;
pub mod runtime;
mod server;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::jobs::JobsActor;
use crate::jobs::process::{self, Reaper};
use crate::runtime::Runtime;

/// How long connections get to write their last answers after the jobs have stopped.
const CONNECTION_WIND_DOWN: Duration = Duration::from_secs(5);

/// Serves `listener` until `shutdown` resolves; then stops accepting, stops every job
/// (TERM, grace, KILL), lets connections send their last answers, and removes the
/// socket and lock file.
pub async fn run(
    runtime: Runtime,
    listener: std::os::unix::net::UnixListener,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    process::become_subreaper()?;
    let job_open_files = jobs::raise_open_files_limit().unwrap_or_else(|e| {
        tracing::warn!("cannot raise the open-file limit: {e}");
        None
    });
    let listener = tokio::net::UnixListener::from_std(listener)?;
    let config = Arc::new(config);

    let (reaper, reaper_handle) = Reaper::new(job_open_files);
    let reaper_task = tokio::spawn(reaper.run());
    let (actor, jobs) = JobsActor::new(
        config.clone(),
        reaper_handle,
        process::find_shell(),
        runtime.dir.clone(),
    );
    let actor_task = tokio::spawn(actor.run());

    let stop_accepting = CancellationToken::new();
    let connections = TaskTracker::new();
    let server = tokio::spawn(server::serve(
        listener,
        jobs.clone(),
        stop_accepting.clone(),
        connections.clone(),
        config.limits.max_frame_bytes,
    ));
    tracing::info!(
        pid = std::process::id(),
        socket = %runtime.socket_path.display(),
        "bashd {} ready",
        env!("CARGO_PKG_VERSION")
    );

    shutdown.await;
    tracing::info!("shutting down: stopping every job");
    stop_accepting.cancel();
    let _ = server.await;
    jobs.shutdown().await;
    drop(jobs);
    connections.close();
    if tokio::time::timeout(CONNECTION_WIND_DOWN, connections.wait())
        .await
        .is_err()
    {
        tracing::warn!("some clients did not read their last answers in time");
    }
    let _ = actor_task.await;
    // The actor held the last spawn handle, so the reaper has returned or is about to.
    reaper_task.abort();
    runtime.remove_files();
    tracing::info!("bashd stopped");
    Ok(())
}

//! `bashd`, the supervisor. [`run`] serves a bound socket until its shutdown future
//! resolves, then stops every job and gives the runtime directory back.

pub mod allocator;
pub mod config;
mod conn;
mod inbound;
pub mod jobs;
mod journal;
pub mod network;
mod outbound;
// Public for the benchmark, which times the pipe path's capture in process.
pub mod output;
pub mod policy;
mod recovery;
pub mod runtime;
pub mod sandbox;
mod server;

#[cfg(test)]
mod front_end_words;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sd_notify::NotifyState;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::jobs::JobsActor;
use crate::jobs::contain::{Plan, Scanner};
use crate::jobs::os::reaper::{self, Reaper};
use crate::jobs::os::spawn;
use crate::journal::Journal;
use crate::network::{Proxy, ProxyCaps, SystemResolver};
use crate::runtime::Runtime;

/// How long connections get to write their last answers after the jobs have stopped.
const CONNECTION_WIND_DOWN: Duration = Duration::from_secs(5);
/// How long the reaper may take, once the last job ended, to reap what is left.
const REAPER_WIND_DOWN: Duration = Duration::from_secs(5);

/// Serves `listener` until `shutdown` resolves; then stops accepting, stops every job
/// (TERM, grace, KILL), lets connections send their last answers, and removes the
/// socket and lock file. Before serving, it ends what a daemon that did not stop left
/// behind. SIGHUP loads the config from `config_arg` (the `--config` given, else the
/// default path) again; a config that does not load leaves the old one in force.
pub async fn run(
    runtime: Runtime,
    listener: std::os::unix::net::UnixListener,
    config: Config,
    config_arg: Option<PathBuf>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    reaper::become_subreaper()?;
    let job_open_files = jobs::raise_open_files_limit().unwrap_or_else(|e| {
        tracing::warn!("cannot raise the open-file limit: {e}");
        None
    });
    let listener = tokio::net::UnixListener::from_std(listener)?;
    // Watched from here on: SIGHUP's default action would end the daemon mid-recovery.
    let hangups = signal(SignalKind::hangup()).context("cannot watch SIGHUP")?;

    let (mut journal, replay) = Journal::open(&runtime.dir).with_context(|| {
        format!(
            "cannot open the journal {}",
            journal::path(&runtime.dir).display()
        )
    })?;
    let plan = Plan::choose(&config.containment).map_err(anyhow::Error::msg)?;
    let scanner = Scanner::start();
    let lost = recovery::recover(
        &runtime.dir,
        &mut journal,
        replay,
        &scanner,
        plan.cgroup(),
        config.timeouts.kill_grace,
    )
    .await?;

    let (config_tx, config_rx) = watch::channel(Arc::new(config));
    let (reaper, reaper_handle) = Reaper::new();
    let mut reaper_task = tokio::spawn(reaper.run());
    let instance = jobs::new_instance_id();
    let cgroup = plan.cgroup().cloned();
    // Read off the startup path: the first answer comes while the daemon serves.
    let tool_sources = network::sources::follow(config_rx.clone(), reaper_handle.clone());
    let containment = plan.start(instance.clone(), scanner, reaper_handle, job_open_files);
    tracing::info!("containment: {}", containment.describe());
    // Connections sent over sandboxed jobs' channels, to the server; bounded, so a
    // job that floods its channel waits for the server rather than filling memory.
    let (arrivals_tx, arrivals) = tokio::sync::mpsc::channel(64);
    let (mut actor, jobs) = JobsActor::new(
        config_rx,
        instance,
        containment,
        spawn::find_shell(),
        runtime.dir.clone(),
        journal,
        arrivals_tx,
    );
    actor.keep_lost(lost);
    let proxy = start_proxy(&config_tx.borrow(), jobs.clone());
    actor.set_proxy(proxy.clone());
    tokio::spawn(join_allow_list(
        config_tx.subscribe(),
        tool_sources.clone(),
        proxy,
    ));
    actor.follow_tool_sources(tool_sources);
    let actor_task = tokio::spawn(actor.run());
    let reload_task = tokio::spawn(reload_on_sighup(hangups, config_tx, config_arg));

    let stop_accepting = CancellationToken::new();
    let connections = TaskTracker::new();
    let server = tokio::spawn(server::serve(
        listener,
        arrivals,
        jobs.clone(),
        stop_accepting.clone(),
        connections.clone(),
    ));
    tracing::info!(
        pid = std::process::id(),
        socket = %runtime.socket_path.display(),
        "bashd {} ready",
        env!("CARGO_PKG_VERSION")
    );
    notify(&[NotifyState::Ready]);

    // Cancelling either branch loses nothing: both only say that it is time to stop.
    let stop_requested = jobs.stop_requested();
    tokio::select! {
        () = shutdown => tracing::info!("shutting down: stopping every job"),
        () = stop_requested.cancelled() => {
            tracing::info!("a client asked bashd to stop (a stop request): stopping every job");
        }
    }
    notify(&[NotifyState::Stopping]);
    reload_task.abort();
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
    // The actor held the last spawn handle, so the reaper reaps what is left (the
    // zygote and its spare leave now) and returns; bounded, in case a handle lives on.
    if tokio::time::timeout(REAPER_WIND_DOWN, &mut reaper_task)
        .await
        .is_err()
    {
        tracing::warn!("the reaper did not finish in time; children may be left to init");
        reaper_task.abort();
    }
    // Every job has ended: the daemon's own cgroup goes (issue 42).
    if let Some(cgroup) = cgroup {
        cgroup.release().await;
    }
    runtime.remove_files();
    tracing::info!("bashd stopped");
    Ok(())
}

/// Loads the config again at each SIGHUP; the jobs actor and new connections take the
/// new one, jobs already running keep the limits they started with.
async fn reload_on_sighup(
    mut hangups: Signal,
    config: watch::Sender<Arc<Config>>,
    config_arg: Option<PathBuf>,
) {
    while hangups.recv().await.is_some() {
        notify(&[NotifyState::Reloading]);
        match Config::load(config_arg.as_deref()) {
            Ok((new, path)) => {
                // The proxy takes the new list from the watch (`join_allow_list`).
                config.send_replace(Arc::new(new));
                match path {
                    Some(path) => tracing::info!("reloaded config {}", path.display()),
                    None => tracing::info!(
                        "reloaded config: no config file, every setting has its default"
                    ),
                }
            }
            Err(e) => tracing::error!("config not reloaded, the old one stays in force: {e}"),
        }
        notify(&[NotifyState::Ready]);
    }
}

/// The proxy of `allow-list` jobs (issue 43), made once; each session's port is
/// handed to it with `Proxy::serve` when the session's network is made. What it
/// refuses is logged, and told to the refused session (`JobsHandle::network_refused`),
/// which opens an ask for a person and gives its id back for the refusal to name.
fn start_proxy(config: &Config, jobs: jobs::JobsHandle) -> Proxy {
    let (refusals_tx, mut refusals) = tokio::sync::mpsc::channel(REFUSALS_QUEUED);
    let proxy = Proxy::new(
        config.allow_list.clone(),
        ProxyCaps::default(),
        Arc::new(SystemResolver),
        refusals_tx,
    );
    tokio::spawn(async move {
        while let Some(network::Refused { refusal, ask }) = refusals.recv().await {
            tracing::info!("session {}: {refusal}", refusal.session);
            if let Some(id) = jobs.network_refused(refusal).await {
                let _ = ask.send(id);
            }
        }
    });
    proxy
}

/// Keeps the proxy's list the config's `allow_hosts` and the hosts the person's tools
/// fetch from (issue 44), made again whenever either changes: at a reload, and when
/// a reading of the tools ends. The proxy judges each request from then on by it.
async fn join_allow_list(
    mut config: watch::Receiver<Arc<Config>>,
    mut tools: watch::Receiver<Arc<network::sources::ToolSources>>,
    proxy: Proxy,
) {
    loop {
        let list = {
            let config = config.borrow_and_update();
            let tools = tools.borrow_and_update();
            joined(&config.allow_list, &tools)
        };
        proxy.set_allow_list(list);
        tokio::select! {
            changed = config.changed() => if changed.is_err() { return },
            changed = tools.changed() => if changed.is_err() { return },
        }
    }
}

/// `allow_hosts` and then each tool's host not already on it; an entry a tool gave
/// that is no host entry is left out with a word in the log.
fn joined(
    config: &network::AllowList,
    tools: &network::sources::ToolSources,
) -> network::AllowList {
    let mut entries = config.entries().to_vec();
    for source in &tools.sources {
        match source.entry.parse::<bashd_protocol::config::AllowHost>() {
            Ok(entry) if !entries.contains(&entry) => entries.push(entry),
            Ok(_) => {}
            Err(why) => tracing::debug!("{} from {}: {why}", source.entry, source.origin),
        }
    }
    network::AllowList::new(entries, config.origin().to_owned())
}

/// Refusals waiting to be told; past these the proxy only counts them.
const REFUSALS_QUEUED: usize = 256;

/// Tells systemd, when it started the daemon with Type=notify; a no-op otherwise.
fn notify(state: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(state) {
        tracing::warn!("cannot notify systemd: {e}");
    }
}

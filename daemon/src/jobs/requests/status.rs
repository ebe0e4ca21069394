//! `status` (`bashc status`, `bash_status`): the daemon's pid, version, uptime,
//! running jobs, containment, open files and sandbox. `shutdown` answers from it too.

use std::sync::Arc;
use std::time::Duration;

use bashd_protocol::{NetworkStatus, ProxyStatus, StatusInfo};

use crate::jobs::table::JobsActor;
use crate::jobs::table::handle::{JobsHandle, ToActor, blocking};
use crate::network::{ProxyCaps, ProxyCounts};

impl JobsHandle {
    /// The daemon's status. Its open files are counted here, not in the actor: a daemon
    /// with a thousand jobs holds thousands, and listing them takes milliseconds, so
    /// the count is taken at most once a second and shared by the calls meanwhile.
    pub async fn status(&self) -> Option<StatusInfo> {
        let mut status = self.call(Status).await.ok()?;
        status.open_files = open_files().await;
        Some(status)
    }
}

/// The message: the table's part of the status.
struct Status;

impl ToActor for Status {
    type Reply = StatusInfo;
    fn handle(self, actor: &mut JobsActor) -> StatusInfo {
        actor.status()
    }
}

impl JobsActor {
    fn status(&self) -> StatusInfo {
        StatusInfo {
            daemon_pid: std::process::id(),
            daemon_version: env!("CARGO_PKG_VERSION").to_owned(),
            protocol: bashd_protocol::PROTOCOL_VERSION,
            uptime_ms: self.started.elapsed().as_millis() as u64,
            runtime_dir: self.runtime_dir.to_string_lossy().into_owned(),
            running_jobs: self.running as u32,
            containment: self.containment.describe(),
            containment_why: self.containment.why_no_cgroup(),
            // Counted by the caller's task (`JobsHandle::status`, above), not here.
            open_files: 0,
            open_files_limit: rustix::process::getrlimit(rustix::process::Resource::Nofile).current,
            sandbox: Some(crate::sandbox::status(
                &self.config.sandbox,
                &self.containment.sandbox(),
            )),
            network: Some(Box::new(self.network_status())),
            tool_sources: self
                .tool_sources
                .borrow()
                .sources
                .iter()
                .map(|s| bashd_protocol::ToolSource {
                    entry: s.entry.clone(),
                    origin: s.origin.clone(),
                })
                .collect(),
        }
    }

    /// The default network, the allow-list in force and the proxy's counts.
    fn network_status(&self) -> NetworkStatus {
        // The list in force: `allow_hosts` and the hosts of the person's tools.
        let list = self.proxy.as_ref().map_or_else(
            || Arc::new(self.config.allow_list.clone()),
            |p| p.allow_list(),
        );
        let (caps, counts) = match &self.proxy {
            Some(proxy) => (proxy.caps(), proxy.counts()),
            None => (ProxyCaps::default(), ProxyCounts::default()),
        };
        NetworkStatus {
            // The command line's; `bashc status` shows each front end's with the sandbox.
            mode: self
                .config
                .sandbox
                .front_end(bashd_protocol::FrontEnd::Cli)
                .default
                .network,
            allow_hosts: list.entries().iter().map(|e| e.to_string()).collect(),
            allow_hosts_origin: list.origin().to_owned(),
            proxy: ProxyStatus {
                sessions: counts.sessions as u32,
                connections: counts.open as u32,
                max_connections: caps.max_connections as u32,
                max_session_connections: caps.max_session_connections as u32,
                refused: counts.refused,
                busy: counts.busy,
            },
        }
    }
}

/// How long a count of the daemon's open files is shown before it is taken again.
const OPEN_FILES_FRESH: Duration = Duration::from_secs(1);

/// The daemon's open files, counted on a blocking thread at most once a second.
async fn open_files() -> u64 {
    // A std mutex: held only to read or replace two numbers, never across an await.
    static LAST: std::sync::Mutex<Option<(std::time::Instant, u64)>> = std::sync::Mutex::new(None);
    let cached = *LAST.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, count)) = cached.filter(|(at, _)| at.elapsed() < OPEN_FILES_FRESH) {
        return count;
    }
    let count = blocking(|| std::fs::read_dir("/proc/self/fd").map_or(0, |fds| fds.count() as u64))
        .await
        .unwrap_or(0);
    *LAST.lock().unwrap_or_else(|e| e.into_inner()) = Some((std::time::Instant::now(), count));
    count
}

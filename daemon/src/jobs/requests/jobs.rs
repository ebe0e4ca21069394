//! `jobs` (`bashc jobs`, `bash_jobs`): the jobs of one session or of all, and for the
//! running ones the ports they listen on and whether they wait for input, read from
//! /proc in the request's task. `top` and `watch` list through the same message.

use std::sync::Arc;

use bashd_protocol::{ErrorKind, ErrorReply, JobInfo, JobsRequest};

use crate::jobs::os::probe;
use crate::jobs::table::JobsActor;
use crate::jobs::table::handle::{JobsHandle, Listing, LiveJob, ToActor, blocking};
use crate::jobs::table::queries::waiting_for_input;
use crate::sandbox::channel::Origin;

impl JobsHandle {
    /// The jobs asked for, with the ports the running ones listen on and whether they
    /// wait for input, read from /proc now on a blocking thread.
    pub(in crate::jobs) async fn jobs(
        &self,
        request: JobsRequest,
    ) -> Result<Vec<JobInfo>, ErrorReply> {
        let origin = self.origin.clone();
        let Listing { mut jobs, live } = self.call(ListJobs { request, origin }).await??;
        look_at(&mut jobs, live).await;
        Ok(jobs)
    }
}

/// The message: the jobs `request` asks for, as `origin` (a sandboxed job) may see
/// them, with a way to look at the running ones.
pub(in crate::jobs) struct ListJobs {
    pub request: JobsRequest,
    pub origin: Option<Arc<Origin>>,
}

impl ToActor for ListJobs {
    type Reply = Result<Listing, ErrorReply>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        let jobs = actor.list(self.request, self.origin.as_deref())?;
        let numbers: Vec<u64> = jobs.iter().map(|job| job.job.0).collect();
        let live = actor.live_jobs(&numbers);
        Ok(Listing { jobs, live })
    }
}

impl JobsActor {
    /// The jobs of one session, or of all; listing adopts no session (looking is not
    /// acting for it). A sandboxed job lists its own session's, those it may reach.
    pub(in crate::jobs) fn list(
        &mut self,
        request: JobsRequest,
        origin: Option<&Origin>,
    ) -> Result<Vec<JobInfo>, ErrorReply> {
        if let Some(origin) = origin {
            let asked = request.session.as_deref().ok_or_else(|| {
                ErrorReply::new(
                    ErrorKind::InvalidRequest,
                    format!(
                        "every session's jobs are refused: this request comes from inside sandboxed job {} (session {}), which reaches only the jobs of its own session",
                        origin.job, origin.session
                    ),
                )
            })?;
            crate::jobs::table::reach::from_job(origin, asked, false)?;
        }
        let numbers: Vec<u64> = match &request.session {
            None => {
                let mut all: Vec<u64> = self.jobs.keys().copied().collect();
                all.sort_unstable();
                all
            }
            Some(name) => match self.sessions.get(name) {
                Some(session) => session.jobs.iter().copied().collect(),
                // The caller's own session before its first job has none.
                None if *name == request.caller.session => Vec::new(),
                None => {
                    return Err(crate::jobs::table::unknown_session(name));
                }
            },
        };
        Ok(numbers
            .iter()
            .filter_map(|n| self.jobs.get(n))
            .filter(|job| self.listed_to(job, origin))
            .map(|job| self.info(job))
            .collect())
    }
}

/// Fills in what the running jobs of a listing are doing: their ports, read from /proc
/// for all of them at once, and whether those with a stdin pipe wait for input.
pub(in crate::jobs) async fn look_at(jobs: &mut [JobInfo], live: Vec<LiveJob>) {
    if live.is_empty() {
        return;
    }
    let roots: Vec<u32> = live.iter().map(|job| job.root).collect();
    let ports = blocking(move || {
        let groups: Vec<Vec<u32>> = roots.iter().map(|&root| probe::descendants(root)).collect();
        probe::listening(&groups)
    })
    .await
    .unwrap_or_default();
    for (job, mut ports) in live.iter().zip(ports) {
        for port in ports.iter_mut().filter(|p| p.protocol == "tcp") {
            port.published = job.published.get(&port.port).copied();
        }
        jobs[job.index].ports = ports;
    }
    let waits = live
        .iter()
        .filter(|job| job.probe.is_some())
        .map(|job| async { (job.index, waiting_for_input(job.probe.as_ref()).await) });
    for (index, waiting) in futures::future::join_all(waits).await {
        jobs[index].waiting_for_input = waiting.is_some();
    }
}

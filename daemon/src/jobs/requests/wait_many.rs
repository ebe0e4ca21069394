//! `bashc wait J1 J2 ... --any|--all` (issue 32): one wait per job, each with its own
//! conditions, run side by side in the request's task, answered when the first (or
//! the last) is done or the timeout passes. A wait given up is dropped, which only
//! stops it waiting.

use std::time::Duration;

use bashd_protocol::{
    ErrorKind, ErrorReply, ExecResult, WaitConditions, WaitManyRequest, WaitRequest, WaitedMany,
};
use futures::StreamExt;
use futures::stream::FuturesUnordered;

use crate::jobs::table::handle::JobsHandle;
use crate::jobs::table::queries::still_running;

/// Jobs one `wait` may name.
pub const MAX_JOBS: usize = 256;

impl JobsHandle {
    pub async fn wait_many(&self, request: WaitManyRequest) -> Result<WaitedMany, ErrorReply> {
        let WaitManyRequest {
            waits,
            all,
            timeout_ms,
        } = request;
        if waits.is_empty() || waits.len() > MAX_JOBS {
            return Err(ErrorReply::new(
                ErrorKind::InvalidRequest,
                format!(
                    "a wait names from 1 to {MAX_JOBS} jobs, not {}",
                    waits.len()
                ),
            ));
        }
        let mut timeout = timeout_ms.map(Duration::from_millis);
        if waits.iter().any(|wait| wait.mcp_call) {
            // An MCP call returns by its budget, with the jobs still running.
            let budget = self.config.borrow().mcp.max_call;
            timeout = Some(timeout.map_or(budget, |t| t.min(budget)));
        }
        let started = tokio::time::Instant::now();
        let deadline = timeout.map(|t| started + t);
        let mut results: Vec<Option<ExecResult>> = vec![None; waits.len()];
        let mut done = Vec::new();
        let mut pending: FuturesUnordered<_> = waits
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, wait)| async move {
                let wait = WaitRequest {
                    timeout_ms: None,
                    mcp_call: false,
                    ..wait
                };
                (i, self.wait(wait).await)
            })
            .collect();
        loop {
            // Cancelling either branch loses nothing that is not given up anyway: a
            // wait dropped only stops waiting.
            let next = tokio::select! {
                next = pending.next() => next,
                () = sleep_until(deadline) => None,
            };
            let Some((i, result)) = next else { break };
            let result = result?;
            done.push(result.job);
            results[i] = Some(result);
            if !all {
                break;
            }
        }
        drop(pending);
        let waited = started.elapsed();
        let mut answered = Vec::with_capacity(waits.len());
        for (wait, result) in waits.into_iter().zip(results) {
            let result = match result {
                Some(result) => result,
                None => {
                    // A look at once: the job as it stands.
                    let look = WaitRequest {
                        timeout_ms: Some(0),
                        conditions: WaitConditions::default(),
                        mcp_call: false,
                        ..wait
                    };
                    let mut result = self.wait(look).await?;
                    if result.state == bashd_protocol::JobState::Running {
                        result = still_running(result, waited);
                    }
                    result
                }
            };
            answered.push(result);
        }
        Ok(WaitedMany {
            results: answered,
            done,
        })
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

//! `bashc wait J1 J2 ... --any|--all` and `bash_wait(jobs=[...])` (issue 32): the
//! request, and the answer in words, a result per job that is done (in the order they
//! were) and a last line naming which are done and which still run.

use bashc::protocol::{
    Caller, ExecResult, JobRef, WaitConditions, WaitManyRequest, WaitRequest, WaitedMany,
};

/// One wait per job, each with `conditions`.
pub fn request(
    caller: &Caller,
    jobs: Vec<JobRef>,
    conditions: &WaitConditions,
    all: bool,
    timeout_ms: Option<u64>,
    any_session: bool,
    mcp_call: bool,
) -> WaitManyRequest {
    WaitManyRequest {
        waits: jobs
            .into_iter()
            .map(|job| WaitRequest {
                caller: caller.clone(),
                job,
                timeout_ms: None,
                conditions: conditions.clone(),
                any_session,
                mcp_call,
            })
            .collect(),
        all,
        timeout_ms,
    }
}

/// The results of the jobs that are done, in the order they were done.
pub fn done(waited: &WaitedMany) -> Vec<&ExecResult> {
    waited
        .done
        .iter()
        .filter_map(|job| waited.results.iter().find(|r| r.job == *job))
        .collect()
}

/// `done: j3, j5; still running: j4 (bashc check j4)`.
pub fn summary(waited: &WaitedMany, all: bool, check: fn(&str) -> String) -> String {
    let done: Vec<String> = waited.done.iter().map(ToString::to_string).collect();
    let running: Vec<String> = waited
        .results
        .iter()
        .filter(|r| !waited.done.contains(&r.job))
        .map(|r| format!("{} ({})", r.job, check(&r.job.to_string())))
        .collect();
    let mut parts = Vec::new();
    match (done.is_empty(), all) {
        (true, _) => parts.push("no job was done before the timeout".to_owned()),
        (false, false) => parts.push(format!("first done: {}", done.join(", "))),
        (false, true) => parts.push(format!("done, in this order: {}", done.join(", "))),
    }
    if !running.is_empty() {
        parts.push(format!("not done: {}", running.join(", ")));
    }
    parts.join("; ")
}

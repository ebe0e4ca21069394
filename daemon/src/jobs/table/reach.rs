//! Who may reach which job: the one rule every request that names a job goes through
//! (issue 33, DESIGN §3 "Isolation"), and what a sandboxed job may ask for through
//! its channel (issue 30).
//!
//! - A job of another session than the caller's is refused, naming its session,
//!   unless the request asked for `any_session` (`--any-session` on the CLI; a
//!   `--session S` names the caller's session instead). MCP never asks for it.
//! - A request that came through a sandboxed job's channel acts for that job's
//!   session only, never `any_session`, and reaches only the jobs of that session
//!   confined as tightly as the job or more, and under `workspace-write` writing
//!   within its roots (issue 42): a sandboxed job does not type into an unconfined
//!   REPL of its own session, nor read what it printed, nor drive a sibling that
//!   writes another workspace.
//! - Only acting on a session adopts it (a lingering session's owners come back):
//!   `exec`, `send`, `kill`, `resize`. Looking (`jobs`, `check`, `output`, `grep`,
//!   `screen`, `follow`, `wait`) never does, so a person who looks at an agent's
//!   session does not keep it from lingering once the agent is gone.

use bashd_protocol::{
    ErrorHint, ErrorKind, ErrorReply, JobRef, Network, SandboxInForce, SandboxProfile,
};

use super::{Job, JobsActor};
use crate::jobs::table::handle::Asker;
use crate::sandbox::channel::{self, Origin};

impl JobsActor {
    /// The job `job` names, if `asker` may reach it.
    pub(in crate::jobs) fn reach(&self, job: &JobRef, asker: &Asker) -> Result<u64, ErrorReply> {
        if let Some(origin) = &asker.origin {
            from_job(origin, &asker.caller.session, asker.any_session)?;
        }
        let n = self.find(job)?;
        let entry = &self.jobs[&n];
        if !asker.any_session && entry.session != asker.caller.session {
            let error = ErrorReply::new(
                ErrorKind::NotFound,
                format!(
                    "{} is a job of session {}, not of this session ({})",
                    entry.id, entry.session, asker.caller.session
                ),
            );
            return Err(match asker.origin {
                // Nothing would take it across: no hint that says how.
                Some(_) => error,
                None => error.with_hint(ErrorHint::OtherSession {
                    session: entry.session.clone(),
                }),
            });
        }
        if let Some(origin) = &asker.origin {
            looser(origin, entry)?;
        }
        Ok(n)
    }

    /// The request of `asker` acts on its session (`exec`, `send`, `kill`, `resize`):
    /// its owner owns that session from now on, and a lingering one is adopted again.
    pub(in crate::jobs) fn acting(&mut self, asker: &Asker) {
        self.adopt(&asker.caller.session, asker.caller.owner);
    }

    /// Whether a request from `origin` may close `session`: its own, and only when
    /// every job of it is confined as tightly as it is (closing kills them all and
    /// forgets their output).
    pub(in crate::jobs) fn may_close(
        &self,
        session: &str,
        origin: Option<&Origin>,
    ) -> Result<(), ErrorReply> {
        let Some(origin) = origin else {
            return Ok(());
        };
        from_job(origin, session, false)?;
        let Some(entry) = self.sessions.get(session) else {
            return Ok(());
        };
        let mut numbers: Vec<&u64> = entry.jobs.iter().collect();
        numbers.sort_unstable();
        for job in numbers.into_iter().filter_map(|n| self.jobs.get(n)) {
            looser(origin, job)?;
        }
        Ok(())
    }

    /// Whether `origin`, when there is one, may see job `job` in a listing: the
    /// jobs it could reach, no others.
    pub(in crate::jobs) fn listed_to(&self, job: &Job, origin: Option<&Origin>) -> bool {
        origin.is_none_or(|origin| {
            job.session == origin.session && origin.reaches(job.sandbox, job.roots.as_deref())
        })
    }
}

/// A request that came through `origin`'s channel acts for that job's session only,
/// and never across sessions.
pub(in crate::jobs) fn from_job(
    origin: &Origin,
    session: &str,
    any_session: bool,
) -> Result<(), ErrorReply> {
    let refuse = |what: String| {
        Err(ErrorReply::new(
            ErrorKind::InvalidRequest,
            format!(
                "{what}: this request comes from inside sandboxed job {} (session {}), which reaches only the jobs of its own session",
                origin.job, origin.session
            ),
        ))
    };
    if any_session {
        return refuse("a request for any session's job is refused".to_owned());
    }
    if session != origin.session {
        return refuse(format!("session {session} is not this job's"));
    }
    Ok(())
}

/// Refuses a request from `origin` that would reach a job confined less tightly.
fn looser(origin: &Origin, job: &Job) -> Result<(), ErrorReply> {
    if origin.reaches(job.sandbox, job.roots.as_deref()) {
        return Ok(());
    }
    if channel::at_most(
        job.sandbox.unwrap_or(SandboxInForce {
            profile: SandboxProfile::Off,
            network: Network::On,
        }),
        origin.sandbox,
    ) {
        return Err(ErrorReply::new(
            ErrorKind::InvalidRequest,
            format!(
                "{} writes where this job ({}) may not (its writable roots are not within this job's): a sandboxed job reaches only the jobs of its session that write within its own roots",
                job.id, origin.job
            ),
        ));
    }
    Err(ErrorReply::new(
        ErrorKind::InvalidRequest,
        format!(
            "{} runs under {}, looser than this job ({}), which runs under {}: a sandboxed job reaches only the jobs of its session that are as tight, not looser",
            job.id,
            channel::describe(job.sandbox),
            origin.job,
            origin.describe()
        ),
    ))
}

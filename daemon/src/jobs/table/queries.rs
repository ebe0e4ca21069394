//! Finding jobs and answering about them: `output`, `check`, `wait`, `kill`, `jobs`;
//! whether a running job waits for input, and a wait that timed out, which several
//! requests ask.

use std::time::{Duration, SystemTime};

use bashd_protocol::text::for_person;
use bashd_protocol::{
    ErrorHint, ErrorKind, ErrorReply, ExecResult, JobId, JobInfo, JobRef, JobState, Mode, Notice,
    StreamResult,
};
use tokio::sync::{mpsc, oneshot};

use super::start::no_output;
use super::{Job, JobsActor, Status};
use crate::jobs::job::supervisor::Control;
use crate::jobs::table::handle::{Asker, Lookup, StreamsAt, ToActor, Waiting};

/// A job's state and a way to its output, for `output`, `check` and `grep`.
pub(in crate::jobs) struct LookupJob {
    pub asker: Asker,
    pub job: JobRef,
}

impl ToActor for LookupJob {
    type Reply = Result<Lookup, ErrorReply>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        actor.lookup(&self.job, &self.asker)
    }
}

impl JobsActor {
    pub(in crate::jobs) fn find(&self, job: &JobRef) -> Result<u64, ErrorReply> {
        let found = match job {
            JobRef::Id(id) => id
                .parse::<JobId>()
                .ok()
                .map(|id| id.0)
                .filter(|n| self.jobs.contains_key(n)),
            JobRef::Pid(pid) => self.by_pid.get(pid).copied(),
        };
        found.ok_or_else(|| self.unknown_job(job))
    }

    pub(in crate::jobs) fn unknown_job(&self, job: &JobRef) -> ErrorReply {
        match job {
            JobRef::Id(id) => match id.parse::<JobId>() {
                Ok(JobId(n)) if n > 0 && n < self.first_job => ErrorReply::new(
                    ErrorKind::NotFound,
                    format!(
                        "job {id} was started by an earlier bashd, which stopped or crashed before this one started; what it left running was ended at this one's start, and its record is gone"
                    ),
                ),
                Ok(JobId(n)) if n > 0 && n < self.journal.next() => ErrorReply::new(
                    ErrorKind::NotFound,
                    format!(
                        "job {id} is no longer kept: its session ended, or it is older than the last {} finished jobs of its session (sessions.keep_finished)",
                        self.config.sessions.keep_finished
                    ),
                ),
                // Well formed, and not given out yet: no such job, whatever its
                // form; only an id of another form is told how ids look.
                Ok(JobId(n)) if n > 0 => ErrorReply::new(
                    ErrorKind::NotFound,
                    match self.journal.next().saturating_sub(1) {
                        0 => format!("no job {id}: bashd has started no job yet"),
                        newest => format!("no job {id}: the newest job is j{newest}"),
                    },
                )
                .with_hint(ErrorHint::NoSuchJob),
                _ => ErrorReply::new(ErrorKind::NotFound, format!("no job {id}"))
                    .with_hint(ErrorHint::JobIds),
            },
            JobRef::Pid(pid) => {
                ErrorReply::new(ErrorKind::NotFound, format!("no job has pid {pid}"))
                    .with_hint(ErrorHint::JobPids)
            }
        }
    }

    /// The job's state and a way to its output, for `output` and `check`.
    pub(in crate::jobs) fn lookup(
        &mut self,
        job: &JobRef,
        asker: &Asker,
    ) -> Result<Lookup, ErrorReply> {
        let n = self.reach(job, asker)?;
        let mut streams = self.streams(n);
        if let StreamsAt::Closed = streams {
            // It has just ended: its report is in the channel.
            while let Ok(report) = self.reports.try_recv() {
                self.report(report);
            }
            streams = self.streams(n);
        }
        let job = self.jobs.get(&n).ok_or_else(|| self.unknown_job(job))?;
        if let Some(why) = self.spill_ledger.evicted(n) {
            return Err(ErrorReply::new(
                ErrorKind::NotFound,
                format!(
                    "the output files of {} were {why}; its result still shows what it showed",
                    job.id
                ),
            ));
        }
        if let StreamsAt::Closed = streams {
            return Err(ErrorReply::new(
                ErrorKind::Internal,
                format!("{} is ending right now; ask again", job.id),
            ));
        }
        Ok(Lookup {
            summary: self.summary(job),
            cursor: job
                .cursors
                .get(&asker.caller.session)
                .copied()
                .unwrap_or_default(),
            page_lines: job.page_lines,
            max_bytes: job.max_bytes,
            streams,
            probe: match &job.status {
                Status::Running { control, .. } if job.stdin.is_some() => Some(control.clone()),
                _ => None,
            },
        })
    }

    pub(in crate::jobs) fn streams(&self, n: u64) -> StreamsAt {
        match self.jobs.get(&n).map(|job| &job.status) {
            Some(Status::Ended(ended)) => StreamsAt::Ready(Box::new(ended.streams.clone())),
            Some(Status::Starting { launch, .. }) => {
                StreamsAt::Ready(Box::new(no_output(launch.merged, false)))
            }
            Some(Status::Running { control, .. }) => {
                let (reply, answer) = oneshot::channel();
                match control.send(Control::Snapshot(reply)) {
                    Ok(()) => StreamsAt::Pending(answer),
                    Err(_) => StreamsAt::Closed,
                }
            }
            None => StreamsAt::Closed,
        }
    }

    /// The job's result as it stands, without its output; of its notices, only that
    /// it was lost, which is about the job, not about one result's output.
    pub(in crate::jobs) fn summary(&self, job: &Job) -> ExecResult {
        match &job.status {
            Status::Ended(ended) => ExecResult {
                stdout: StreamResult::empty(),
                stderr: ended.result.stderr.as_ref().map(|_| StreamResult::empty()),
                // Why a job never ran is what an empty page of it has to say.
                notices: ended
                    .result
                    .notices
                    .iter()
                    .filter(|n| {
                        matches!(
                            n,
                            Notice::Denied { .. } | Notice::NotStarted { .. } | Notice::Lost { .. }
                        )
                    })
                    .cloned()
                    .collect(),
                ..ended.result.clone()
            },
            Status::Starting { .. } | Status::Running { .. } => ExecResult {
                job: job.id,
                session: job.session.clone(),
                pid: job.pid,
                state: JobState::Running,
                exit_code: None,
                signal: None,
                duration_ms: super::age_ms(job.started),
                backgrounded: job.background,
                description: job.description.clone(),
                workdir: job.workdir.clone(),
                stdout: StreamResult::empty(),
                stderr: None,
                notices: Vec::new(),
                record: None,
                sandbox: job.sandbox,
                screen: None,
            },
        }
    }

    /// Registers a waiter for the end of the starting or running job `n`.
    pub(in crate::jobs) fn await_end(&mut self, n: u64) -> Waiting {
        let (tx, rx) = oneshot::channel();
        if let Some(Job {
            status: Status::Starting { waiters, .. } | Status::Running { waiters, .. },
            ..
        }) = self.jobs.get_mut(&n)
        {
            // Waits that timed out leave closed senders behind.
            waiters.retain(|w| !w.is_closed());
            waiters.push(tx);
        }
        Waiting::Pending {
            summary: self.summary(&self.jobs[&n]),
            started: self.jobs[&n].started,
            result: rx,
        }
    }

    pub(in crate::jobs) fn info(&self, job: &Job) -> JobInfo {
        let (state, exit_code, signal, duration_ms, record) = match &job.status {
            Status::Ended(ended) => (
                ended.result.state,
                ended.result.exit_code,
                ended.result.signal,
                ended.result.duration_ms,
                ended.result.record.clone(),
            ),
            Status::Starting { .. } | Status::Running { .. } => (
                JobState::Running,
                None,
                None,
                super::age_ms(job.started),
                None,
            ),
        };
        let mode = match (job.background, job.mode) {
            (true, _) | (_, Mode::Background) => "background",
            (false, Mode::Slow) => "slow",
            (false, Mode::Default) => "default",
        };
        JobInfo {
            job: job.id,
            session: job.session.clone(),
            pid: job.pid,
            state,
            exit_code,
            signal,
            mode: mode.to_owned(),
            // What a job chose to call itself reaches every front end's listing (`bashc
            // jobs --json` prints it as it is) with its controls, bidi controls and line
            // separators shown as escapes, as the text tables show them (issue 42).
            command: for_person(&job.command).into_owned(),
            description: job
                .description
                .as_deref()
                .map(|d| for_person(d).into_owned()),
            started_at: rfc3339(job.started_at),
            duration_ms,
            record,
            // Read from /proc by the request's task (`JobsHandle::jobs`).
            ports: Vec::new(),
            waiting_for_input: false,
            sandbox: job.sandbox,
        }
    }
}

/// `2026-11-22T09:30:05Z`.
pub(in crate::jobs) fn rfc3339(time: SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil algorithm.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// Whether the job behind `probe` (its supervisor) waits for input, and since when.
pub(in crate::jobs) async fn waiting_for_input(
    probe: Option<&mpsc::UnboundedSender<Control>>,
) -> Option<(u64, Option<String>)> {
    let (reply, answer) = oneshot::channel();
    probe?.send(Control::Probe(reply)).ok()?;
    let probe = tokio::time::timeout(Duration::from_secs(2), answer)
        .await
        .ok()?
        .ok()?;
    Some((probe.waiting_for_input?, probe.prompt))
}

/// A `wait` that timed out: the job as it stands.
pub(in crate::jobs) fn still_running(mut summary: ExecResult, waited: Duration) -> ExecResult {
    summary.notices = vec![Notice::StillRunning {
        job: summary.job,
        waited_ms: waited.as_millis() as u64,
    }];
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        let at = |secs| rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_795_338_245), "2026-11-22T09:04:05Z");
    }
}

//! Finding jobs and answering about them: `output`, `check`, `wait`, `kill`, `jobs`.

use std::time::{Duration, SystemTime};

use bashd_protocol::{
    BackgroundWhy, ErrorHint, ErrorKind, ErrorReply, ExecResult, JobId, JobInfo, JobRef, JobState,
    JobsRequest, Killer, Mode, Notice, StreamResult,
};
use rustix::process::Signal;
use tokio::sync::oneshot;

use super::exec::no_output;
use super::{Job, JobsActor, Status};
use crate::jobs::job::supervisor::{Control, Stop, StopReason};
use crate::jobs::table::handle::{Asker, Lookup, StreamsAt, Waiting};
use crate::sandbox::channel::Origin;

impl JobsActor {
    pub(super) fn find(&self, job: &JobRef) -> Result<u64, ErrorReply> {
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

    pub(super) fn unknown_job(&self, job: &JobRef) -> ErrorReply {
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
    pub(super) fn lookup(&mut self, job: &JobRef, asker: &Asker) -> Result<Lookup, ErrorReply> {
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

    pub(super) fn streams(&self, n: u64) -> StreamsAt {
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
    pub(super) fn summary(&self, job: &Job) -> ExecResult {
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
                duration_ms: job.started.elapsed().as_millis() as u64,
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

    pub(super) fn wait(&mut self, job: &JobRef, asker: &Asker) -> Result<Waiting, ErrorReply> {
        let n = self.reach(job, asker)?;
        if let Status::Ended(ended) = &self.jobs[&n].status {
            return Ok(Waiting::Ended(ended.result.clone()));
        }
        Ok(self.await_end(n))
    }

    pub(super) fn kill(
        &mut self,
        job: &JobRef,
        asker: &Asker,
        signal: Option<String>,
        grace_ms: Option<u64>,
    ) -> Result<Waiting, ErrorReply> {
        let signal = match &signal {
            Some(name) => parse_signal(name)?,
            None => Signal::TERM,
        };
        let grace = grace_ms.map_or(self.config.timeouts.kill_grace, Duration::from_millis);
        let n = self.reach(job, asker)?;
        self.acting(asker);
        if let Status::Running { control, .. } = &self.jobs[&n].status
            && control.is_closed()
        {
            // It has just ended: its report is in the channel.
            while let Ok(report) = self.reports.try_recv() {
                self.report(report);
            }
        }
        let job = &self.jobs[&n];
        match &job.status {
            Status::Ended(ended) => {
                let mut result = ended.result.clone();
                result
                    .notices
                    .insert(0, Notice::AlreadyEnded { job: job.id });
                Ok(Waiting::Ended(result))
            }
            // A starting job's supervisor finds the stop waiting when it starts.
            Status::Starting { control, .. } | Status::Running { control, .. } => {
                let stop = Stop {
                    reason: StopReason::Killed(if asker.caller.session == job.session {
                        Killer::Agent
                    } else {
                        Killer::Client
                    }),
                    signal,
                    grace,
                };
                if control.send(Control::Stop(stop)).is_err() {
                    return Err(ErrorReply::new(
                        ErrorKind::Internal,
                        format!("{} is ending right now; ask again", job.id),
                    ));
                }
                tracing::info!(job = %job.id, signal = ?signal, "killing a job on request");
                Ok(self.await_end(n))
            }
        }
    }

    /// Asks a starting or running job to answer its request now and go on in the
    /// background (a cancelled MCP call); nothing for a job that has ended.
    pub(super) fn detach(&mut self, job: JobId) {
        if let Some(control) = self.jobs.get(&job.0).and_then(Job::control) {
            let _ = control.send(Control::Detach(BackgroundWhy::Cancelled));
        }
    }

    /// Registers a waiter for the end of the starting or running job `n`.
    pub(super) fn await_end(&mut self, n: u64) -> Waiting {
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
            result: rx,
        }
    }

    /// The jobs of one session, or of all; listing adopts no session (looking is not
    /// acting for it). A sandboxed job lists its own session's, those it may reach.
    pub(super) fn list(
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
            super::reach::from_job(origin, asked, false)?;
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
                    return Err(super::unknown_session(name));
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

    pub(super) fn info(&self, job: &Job) -> JobInfo {
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
                job.started.elapsed().as_millis() as u64,
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
            command: job.command.clone(),
            description: job.description.clone(),
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

/// `TERM`, `SIGTERM`, `sigterm` or `15`: the signals that end a process.
pub(super) fn parse_signal(name: &str) -> Result<Signal, ErrorReply> {
    const SIGNALS: &[(&str, Signal)] = &[
        ("HUP", Signal::HUP),
        ("INT", Signal::INT),
        ("QUIT", Signal::QUIT),
        ("ABRT", Signal::ABORT),
        ("KILL", Signal::KILL),
        ("USR1", Signal::USR1),
        ("USR2", Signal::USR2),
        ("ALRM", Signal::ALARM),
        ("TERM", Signal::TERM),
    ];
    let upper = name.trim().to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS
        .iter()
        .find(|(n, signal)| *n == bare || bare.parse::<i32>().ok() == Some(signal.as_raw()))
        .map(|(_, signal)| *signal)
        .ok_or_else(|| {
            let names: Vec<&str> = SIGNALS.iter().map(|(n, _)| *n).collect();
            ErrorReply::new(
                ErrorKind::InvalidRequest,
                format!(
                    "unknown signal {name:?}: use one of {} (with or without SIG), or its number",
                    names.join(", ")
                ),
            )
        })
}

/// `2026-11-22T09:30:05Z`.
pub(super) fn rfc3339(time: SystemTime) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn rfc3339_dates() {
        let at = |secs| rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_795_338_245), "2026-11-22T09:04:05Z");
    }

    #[test]
    pub(super) fn signals_by_name_or_number() {
        assert_eq!(parse_signal("TERM").unwrap(), Signal::TERM);
        assert_eq!(parse_signal("sigint").unwrap(), Signal::INT);
        assert_eq!(parse_signal("9").unwrap(), Signal::KILL);
        let err = parse_signal("STOP").unwrap_err().message;
        assert!(err.contains("unknown signal \"STOP\""), "{err}");
    }
}

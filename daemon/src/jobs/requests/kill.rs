//! `kill` (`bashc kill`, `bash_kill`): stops a job (its signal, then SIGKILL after a
//! grace) and answers its result once every process of it is gone.

use std::time::Duration;

use bashd_protocol::{ErrorKind, ErrorReply, ExecResult, JobRef, KillRequest, Killer, Notice};
use rustix::process::Signal;

use crate::jobs::job::supervisor::{Control, Stop, StopReason};
use crate::jobs::table::handle::{Asker, JobsHandle, ToActor, Waiting, shutting_down};
use crate::jobs::table::{JobsActor, Status};

impl JobsHandle {
    /// Stops a job and answers its result once every process of it is gone.
    pub(in crate::jobs) async fn kill(
        &self,
        request: KillRequest,
    ) -> Result<ExecResult, ErrorReply> {
        let asker = self.asker(request.caller, request.any_session);
        let message = Kill {
            asker,
            job: request.job,
            signal: request.signal,
            grace_ms: request.grace_ms,
        };
        match self.call(message).await?? {
            Waiting::Ended(result) => Ok(result),
            Waiting::Pending { result, .. } => result.await.map_err(|_| shutting_down()),
        }
    }
}

/// The message: stop `job` as `asker` may.
struct Kill {
    asker: Asker,
    job: JobRef,
    signal: Option<String>,
    grace_ms: Option<u64>,
}

impl ToActor for Kill {
    type Reply = Result<Waiting, ErrorReply>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        actor.kill(&self.job, &self.asker, self.signal, self.grace_ms)
    }
}

impl JobsActor {
    fn kill(
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
            // Its state and exit, not its output again: the caller asked to stop it,
            // and was told what it printed when it ended (or can page it).
            Status::Ended(ended) => {
                let mut result = ended.result.clone();
                for stream in std::iter::once(&mut result.stdout).chain(result.stderr.as_mut()) {
                    stream.text.clear();
                    stream.shown_lines = 0;
                    stream.shown_bytes = 0;
                }
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
}

/// `TERM`, `SIGTERM`, `sigterm` or `15`: the signals that end a process.
fn parse_signal(name: &str) -> Result<Signal, ErrorReply> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(parse_signal("TERM").unwrap(), Signal::TERM);
        assert_eq!(parse_signal("sigint").unwrap(), Signal::INT);
        assert_eq!(parse_signal("9").unwrap(), Signal::KILL);
        let err = parse_signal("STOP").unwrap_err().message;
        assert!(err.contains("unknown signal \"STOP\""), "{err}");
    }
}

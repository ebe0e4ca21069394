//! Starting jobs: checking a request, spawning its shell, handing it to a supervisor.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use bashd_protocol::{
    ErrorKind, ErrorReply, ExecParams, ExecResult, JobId, JobState, Mode, Notice, Response,
    Started, StreamResult, is_valid_session_id, limits, process_start_time,
};
use tokio::sync::mpsc;

use super::{Job, JobsActor, Status};
use crate::jobs::process::SpawnSpec;
use crate::jobs::session::Session;
use crate::jobs::supervisor::{self, Ended, JobMeta, JobRun, Settings, Streams};
use crate::journal::{self, Leader};
use crate::output::{self, OutputSource, Shape};
use crate::policy::Denial;

/// `bashc jobs` shows this much of a command.
const LISTED_COMMAND_BYTES: usize = 4096;

impl JobsActor {
    /// Creates a job for a denied command or starts one.
    pub(super) async fn exec(
        &mut self,
        params: ExecParams,
        denial: Option<Denial>,
        events: mpsc::Sender<Response>,
    ) {
        let plan = match self.plan(&params) {
            Ok(plan) => plan,
            Err(error) => {
                let _ = events.send(Response::Error(error)).await;
                return;
            }
        };
        let session = params.session.clone();
        if !self.sessions.contains_key(&session) {
            let mut new = Session::default();
            if !new.adopt(&session, params.owner, &self.session_events_tx) {
                new.linger(
                    &session,
                    self.config.sessions.linger,
                    &self.session_events_tx,
                );
            }
            self.sessions.insert(session.clone(), new);
        } else {
            self.adopt(&session, params.owner);
        }
        let n = match self.journal.job(&self.instance, &session) {
            Ok(n) => n,
            Err(e) => {
                let message = format!(
                    "cannot record the job in the journal {}: {e}; bashd runs nothing it could not clean up after a crash (free space in that directory, then try again)",
                    journal::path(&self.runtime_dir).display()
                );
                tracing::error!("{message}");
                let error = ErrorReply::new(ErrorKind::Internal, message);
                let _ = events.send(Response::Error(error)).await;
                return;
            }
        };
        let id = JobId(n);
        if let Some(entry) = self.sessions.get_mut(&session) {
            entry.jobs.insert(n);
        }
        let new_job = |status: Status, pid: Option<u32>| Job {
            id,
            session: session.clone(),
            command: cut(&params.command, LISTED_COMMAND_BYTES),
            description: params.description.clone(),
            workdir: plan.workdir.to_string_lossy().into_owned(),
            mode: params.mode,
            pid,
            started_at: SystemTime::now(),
            started: Instant::now(),
            background: false,
            cursors: HashMap::new(),
            page_lines: plan.limits.max_lines,
            max_bytes: plan.limits.max_bytes,
            status,
        };

        if let Some(denial) = denial {
            tracing::info!(job = %id, session = %session, rule = %denial.rule, command = %params.command, "job denied");
            let notice = Notice::Denied {
                rule: denial.rule.clone(),
                message: denial.message,
            };
            let ended = denied_or_failed(id, &params, JobState::Denied, notice);
            let _ = events
                .send(Response::Finished(Box::new(ended.result.clone())))
                .await;
            let job = new_job(Status::Ended(Box::new(ended)), None);
            self.jobs.insert(n, job);
            self.journal_end(n);
            self.mark_finished(&session, n);
            return;
        }

        let cookie = journal::cookie(&self.instance, id);
        let spec = SpawnSpec {
            shell: self.shell.clone(),
            command: params.command.clone(),
            workdir: plan.workdir.clone(),
            env: self.job_env(&params, id),
            merge_stderr: params.merge_stderr,
        };
        let spawned = match self.reaper.spawn(spec).await {
            Ok(spawned) => spawned,
            Err(e) => {
                let message = format!("cannot start {} for job {id}: {e}", self.shell.display());
                tracing::error!("{message}");
                let _ = events
                    .send(Response::Error(ErrorReply::new(
                        ErrorKind::Internal,
                        message.clone(),
                    )))
                    .await;
                let ended = denied_or_failed(
                    id,
                    &params,
                    JobState::Failed,
                    Notice::NotStarted { error: message },
                );
                let job = new_job(Status::Ended(Box::new(ended)), None);
                self.jobs.insert(n, job);
                self.journal_end(n);
                self.mark_finished(&session, n);
                return;
            }
        };
        let pid = spawned.pid.as_raw_nonzero().get() as u32;
        // The shell is unreaped until its supervisor says so, so its stat is there.
        let leader = Leader {
            pid,
            pgid: pid,
            start_time: process_start_time(pid).unwrap_or(0),
        };
        if let Err(e) = self.journal.leader(n, leader) {
            // The job line is there: a restart still finds the job by its cookie.
            tracing::warn!(job = %id, "cannot record the pid of the job in the journal: {e}");
        }
        tracing::info!(job = %id, session = %session, pid, command = %params.command, "job started");
        let _ = events
            .send(Response::Started(Started {
                job: id,
                session: session.clone(),
                pid,
            }))
            .await;

        // Unbounded so that a stop is never dropped for want of room: it holds at most
        // a stop per reason and a snapshot per request in flight.
        let (control, control_rx) = mpsc::unbounded_channel();
        let job = new_job(
            Status::Running {
                control,
                waiters: Vec::new(),
            },
            Some(pid),
        );
        let run = JobRun {
            meta: JobMeta {
                job: id,
                session: session.clone(),
                description: params.description,
                workdir: job.workdir.clone(),
                started: job.started,
            },
            processes: self.containment.job(spawned.pid, cookie),
            spawned,
            settings: Settings {
                timeout: plan.timeout,
                on_timeout: params.on_timeout.unwrap_or(self.config.timeouts.on_timeout),
                background_timeout: Duration::from_secs(self.config.timeouts.background_secs)
                    .max(plan.timeout),
                on_straggler: self.config.sessions.on_straggler,
                kill_grace: self.config.timeouts.kill_grace,
                limits: plan.limits,
                shape: plan.shape,
                session_dir: self.session_dir(&session),
                detached: params.mode == Mode::Background,
            },
        };
        tokio::spawn(supervisor::supervise(
            run,
            control_rx,
            events,
            self.reports_tx.clone(),
        ));
        self.jobs.insert(n, job);
        self.by_pid.insert(pid, n);
        self.running += 1;
        if let Some(entry) = self.sessions.get_mut(&session) {
            entry.running += 1;
        }
    }

    /// A job that ended joins its session's finished jobs; the oldest beyond
    /// `keep_finished` are forgotten.
    pub(super) fn mark_finished(&mut self, session: &str, n: u64) {
        let keep = self.config.sessions.keep_finished;
        let Some(entry) = self.sessions.get_mut(session) else {
            return;
        };
        entry.finished.push_back(n);
        let mut forget = Vec::new();
        while entry.finished.len() > keep {
            forget.extend(entry.finished.pop_front());
        }
        for n in forget {
            self.forget(n);
        }
    }

    /// Checks a request and works out how to run it, before anything is spawned.
    fn plan(&self, params: &ExecParams) -> Result<Plan, ErrorReply> {
        let invalid = |message: String| ErrorReply::new(ErrorKind::InvalidRequest, message);
        let max_command = self.config.limits.max_command_bytes;
        if params.command.len() > max_command {
            return Err(invalid(format!(
                "command is {} bytes, more than the limit of {max_command} bytes; write it to a script file and run that",
                params.command.len()
            )));
        }
        if !is_valid_session_id(&params.session) {
            return Err(invalid(format!(
                "session id {:?} is not valid: use 1 to 64 of A-Z a-z 0-9 . _ -",
                params.session
            )));
        }
        if self
            .sessions
            .get(&params.session)
            .is_some_and(|s| s.closing.is_some())
        {
            return Err(invalid(format!(
                "session {} is closing; try again in a moment, or use another session",
                params.session
            )));
        }
        if params.stream {
            return Err(invalid(
                "--stream is not supported by this bashd yet".to_owned(),
            ));
        }
        let workdir = check_workdir(Path::new(&params.workdir))?;
        let timeouts = &self.config.timeouts;
        let timeout_secs = match (params.timeout_secs, params.mode) {
            (Some(secs), _) => limits::clamp_timeout_secs(secs),
            (None, Mode::Default) => timeouts.default_secs,
            (None, Mode::Slow) => timeouts.slow_secs,
            (None, Mode::Background) => timeouts.background_secs,
        };
        let limits = &self.config.limits;
        let max_bytes = params.output.max_bytes.unwrap_or(limits.max_bytes);
        Ok(Plan {
            workdir,
            timeout: Duration::from_secs(timeout_secs),
            limits: output::Limits {
                max_lines: params
                    .output
                    .max_lines
                    .unwrap_or(limits.max_lines)
                    .max(1)
                    .into(),
                max_bytes: max_bytes.clamp(1, limits::MAX_SHOWN_BYTES) as usize,
                max_spill_bytes: limits.max_spill_bytes,
            },
            shape: Shape::from_options(&params.output),
        })
    }

    /// The client's environment, then the hardening set over it, then bashd's own.
    fn job_env(&self, params: &ExecParams, job: JobId) -> Vec<(Vec<u8>, Vec<u8>)> {
        let ours: [(&str, String); 2] = [
            (journal::COOKIE_VAR, format!("{}/{job}", self.instance)),
            ("BASHD_SESSION", params.session.clone()),
        ];
        let overridden = |key: &[u8]| {
            self.config.env.iter().any(|(k, _)| k.as_bytes() == key)
                || ours.iter().any(|(k, _)| k.as_bytes() == key)
        };
        let mut env: Vec<(Vec<u8>, Vec<u8>)> = params
            .env
            .iter()
            .filter(|(k, _)| !overridden(k))
            .cloned()
            .collect();
        env.extend(
            self.config
                .env
                .iter()
                .map(|(k, v)| (k.clone().into_bytes(), v.clone().into_bytes())),
        );
        env.extend(
            ours.into_iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.into_bytes())),
        );
        env
    }
}

struct Plan {
    workdir: PathBuf,
    timeout: Duration,
    limits: output::Limits,
    shape: Shape,
}

/// The end of a job that never ran: refused by the policy, or not startable.
pub(super) fn denied_or_failed(
    id: JobId,
    params: &ExecParams,
    state: JobState,
    notice: Notice,
) -> Ended {
    let empty = OutputSource {
        content: output::Content::Memory(Vec::new()),
        total_lines: 0,
        complete_lines: 0,
        total_bytes: 0,
        complete: true,
    };
    Ended {
        result: ExecResult {
            job: id,
            session: params.session.clone(),
            pid: None,
            state,
            exit_code: None,
            signal: None,
            duration_ms: 0,
            backgrounded: false,
            description: params.description.clone(),
            workdir: params.workdir.clone(),
            stdout: StreamResult::empty(),
            stderr: (!params.merge_stderr).then(StreamResult::empty),
            notices: vec![notice],
        },
        streams: Streams {
            stderr: (!params.merge_stderr).then(|| empty.clone()),
            stdout: empty,
        },
    }
}

/// At most `max` bytes of `text`, cut on a char boundary.
pub(super) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

pub(super) fn check_workdir(path: &Path) -> Result<PathBuf, ErrorReply> {
    let invalid = |message: String| ErrorReply::new(ErrorKind::InvalidRequest, message);
    if !path.is_absolute() {
        return Err(invalid(format!(
            "Working directory must be an absolute path: {}",
            path.display()
        )));
    }
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(path.to_owned()),
        Ok(_) => Err(invalid(format!(
            "Working directory is not a directory: {}",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(invalid(format!(
            "Working directory does not exist: {}",
            path.display()
        ))),
        Err(e) => Err(invalid(format!(
            "Working directory cannot be used: {}: {e}",
            path.display()
        ))),
    }
}

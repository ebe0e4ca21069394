//! The actor that owns the job table. It is the only place that creates, lists or
//! forgets jobs; connections reach it through [`JobsHandle`], supervisors report back
//! to it when their job ends.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bashd_protocol::{
    ErrorKind, ErrorReply, ExecParams, ExecResult, JobState, Mode, OnTimeout, OutputRequest,
    Response, Started, StatusInfo, StreamName, StreamResult, is_valid_session_id, limits, runtime,
};
use tokio::sync::mpsc;

use super::handle::{Cmd, JobsHandle, shutting_down};
use super::process::{ReaperHandle, SpawnSpec};
use super::supervisor::{self, Control, Ended, JobMeta, JobRun, SourceReply, StopReason};
use crate::config::Config;
use crate::output::{self, OutputSource, Shape};
use crate::policy::Denial;

/// Finished jobs whose output `bashc output` can still read. Each holds at most
/// `max_bytes` per stream in memory (more went to its spill file), so this bounds the
/// memory of the table.
const KEEP_FINISHED: usize = 200;

/// Identifies this daemon instance in job cookies (`BASHD_JOB=<instance>/<job>`).
pub fn new_instance_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{:x}-{:x}", std::process::id(), nanos)
}

pub struct JobsActor {
    config: Arc<Config>,
    cmds: mpsc::Receiver<Cmd>,
    finished_tx: mpsc::UnboundedSender<Box<Ended>>,
    finished_rx: mpsc::UnboundedReceiver<Box<Ended>>,
    reaper: ReaperHandle,
    running: HashMap<String, RunningJob>,
    /// The output of the last [`KEEP_FINISHED`] jobs that ended, oldest first.
    finished: VecDeque<FinishedJob>,
    next_job: u64,
    instance: String,
    shell: PathBuf,
    runtime_dir: PathBuf,
    started: Instant,
}

struct RunningJob {
    control: mpsc::Sender<Control>,
    /// Lines of a page of its output when the request names no limit.
    page_lines: u64,
}

struct FinishedJob {
    job: String,
    page_lines: u64,
    stdout: OutputSource,
    stderr: Option<OutputSource>,
}

/// What the actor reacts to.
enum Event {
    Cmd(Cmd),
    Finished(Box<Ended>),
}

impl JobsActor {
    pub fn new(
        config: Arc<Config>,
        reaper: ReaperHandle,
        shell: PathBuf,
        runtime_dir: PathBuf,
    ) -> (JobsActor, JobsHandle) {
        let (cmd_tx, cmds) = mpsc::channel(256);
        // Unbounded so a supervisor never waits on the actor; there is at most one
        // message per job in it.
        let (finished_tx, finished_rx) = mpsc::unbounded_channel();
        let actor = JobsActor {
            config,
            cmds,
            finished_tx,
            finished_rx,
            reaper,
            running: HashMap::new(),
            finished: VecDeque::new(),
            next_job: 1,
            instance: new_instance_id(),
            shell,
            runtime_dir,
            started: Instant::now(),
        };
        let policy = Arc::new(actor.config.policy.clone());
        (
            actor,
            JobsHandle {
                cmds: cmd_tx,
                policy,
            },
        )
    }

    pub async fn run(mut self) {
        loop {
            // Cancelling either branch loses nothing: both are channel receives.
            let event = tokio::select! {
                cmd = self.cmds.recv() => match cmd {
                    Some(cmd) => Event::Cmd(cmd),
                    None => break,
                },
                Some(result) = self.finished_rx.recv() => Event::Finished(result),
            };
            match event {
                Event::Cmd(Cmd::Exec {
                    params,
                    denial: Some(denial),
                    events,
                }) => self.deny(*params, denial, events).await,
                Event::Cmd(Cmd::Exec {
                    params,
                    denial: None,
                    events,
                }) => self.exec(*params, events).await,
                Event::Cmd(Cmd::Status { reply }) => {
                    let _ = reply.send(self.status());
                }
                Event::Cmd(Cmd::Output { request, reply }) => self.output(request, reply),
                Event::Cmd(Cmd::Shutdown { reply }) => {
                    self.stop_all().await;
                    let _ = reply.send(());
                    break;
                }
                Event::Finished(ended) => self.finished(*ended),
            }
        }
        self.stop_all().await;
        // Later requests find the channel closed and are told the daemon is stopping.
        self.cmds.close();
        while let Some(cmd) = self.cmds.recv().await {
            if let Cmd::Exec { events, .. } = cmd {
                let _ = events.try_send(Response::Error(shutting_down()));
            }
        }
    }

    fn finished(&mut self, ended: Ended) {
        let result = &ended.result;
        let page_lines = self
            .running
            .remove(&result.job)
            .map_or(u64::from(self.config.limits.max_lines), |job| {
                job.page_lines
            });
        tracing::info!(
            job = %result.job,
            session = %result.session,
            state = %result.state,
            exit_code = ?result.exit_code,
            signal = ?result.signal,
            duration_ms = result.duration_ms,
            "job ended"
        );
        if self.finished.len() == KEEP_FINISHED {
            self.finished.pop_front();
        }
        self.finished.push_back(FinishedJob {
            job: ended.result.job,
            page_lines,
            stdout: ended.stdout,
            stderr: ended.stderr,
        });
    }

    /// Answers with a snapshot of a job's stream: a running job's supervisor answers
    /// for it, so the actor never waits on one.
    fn output(&mut self, request: OutputRequest, reply: SourceReply) {
        if let Some(job) = self.running.get(&request.job) {
            let snapshot = Control::Snapshot {
                stream: request.stream,
                limit: request.limit.unwrap_or(job.page_lines),
                reply,
            };
            match job.control.try_send(snapshot) {
                Ok(()) => return,
                Err(mpsc::error::TrySendError::Full(Control::Snapshot { reply, .. })) => {
                    let _ = reply.send(Err(ErrorReply::new(
                        ErrorKind::Internal,
                        format!("{} is busy; ask for its output again", request.job),
                    )));
                    return;
                }
                // It just ended: its output is on the way to the finished table.
                Err(mpsc::error::TrySendError::Closed(Control::Snapshot { reply, .. })) => {
                    while let Ok(ended) = self.finished_rx.try_recv() {
                        self.finished(*ended);
                    }
                    return self.finished_output(request, reply);
                }
                Err(_) => return,
            }
        }
        self.finished_output(request, reply);
    }

    fn finished_output(&self, request: OutputRequest, reply: SourceReply) {
        let answer = match self.finished.iter().rev().find(|j| j.job == request.job) {
            Some(job) => {
                let limit = request.limit.unwrap_or(job.page_lines);
                match (request.stream, &job.stderr) {
                    (StreamName::Stdout, _) => Ok((job.stdout.clone(), limit)),
                    (StreamName::Stderr, Some(stderr)) => Ok((stderr.clone(), limit)),
                    (StreamName::Stderr, None) => Err(supervisor::merged_stderr(&job.job)),
                }
            }
            None => Err(self.unknown_job(&request.job)),
        };
        let _ = reply.send(answer);
    }

    fn unknown_job(&self, job: &str) -> ErrorReply {
        let known = self.next_job > 1
            && job
                .strip_prefix('j')
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|n| n > 0 && n < self.next_job);
        let message = if known {
            format!(
                "job {job} ended too long ago: bashd keeps the output of the last {KEEP_FINISHED} jobs"
            )
        } else {
            format!("no job {job}: job ids look like j12, as the result of `bashc exec` names them")
        };
        ErrorReply::new(ErrorKind::NotFound, message)
    }

    /// A command the policy refused: it gets a job id and a `denied` result, and
    /// nothing of it runs.
    async fn deny(&mut self, params: ExecParams, denial: Denial, events: mpsc::Sender<Response>) {
        let job = format!("j{}", self.next_job);
        self.next_job += 1;
        tracing::info!(job = %job, session = %params.session, rule = %denial.rule, command = %params.command, "job denied");
        let result = ExecResult {
            job: job.clone(),
            session: params.session,
            pid: None,
            state: JobState::Denied,
            exit_code: None,
            signal: None,
            duration_ms: 0,
            backgrounded: false,
            description: params.description,
            workdir: params.workdir,
            stdout: StreamResult::empty(),
            stderr: (!params.merge_stderr).then(StreamResult::empty),
            notice: Some(denial.message),
        };
        let _ = events
            .send(Response::Finished(Box::new(result.clone())))
            .await;
        let empty = OutputSource {
            content: output::Content::Memory(Vec::new()),
            total_lines: 0,
            total_bytes: 0,
            complete: true,
        };
        self.finished(Ended {
            stderr: result.stderr.as_ref().map(|_| empty.clone()),
            stdout: empty,
            result,
        });
    }

    async fn exec(&mut self, params: ExecParams, events: mpsc::Sender<Response>) {
        let plan = match self.plan(&params) {
            Ok(plan) => plan,
            Err(error) => {
                let _ = events.send(Response::Error(error)).await;
                return;
            }
        };
        let job = format!("j{}", self.next_job);
        self.next_job += 1;
        let spec = SpawnSpec {
            shell: self.shell.clone(),
            command: params.command.clone(),
            workdir: plan.workdir.clone(),
            env: self.job_env(&params, &job),
            merge_stderr: params.merge_stderr,
        };
        let spawned = match self.reaper.spawn(spec).await {
            Ok(spawned) => spawned,
            Err(e) => {
                let message = format!("cannot start {} for job {job}: {e}", self.shell.display());
                tracing::error!("{message}");
                let _ = events
                    .send(Response::Error(ErrorReply::new(
                        ErrorKind::Internal,
                        message,
                    )))
                    .await;
                return;
            }
        };
        let pid = spawned.pid.as_raw_nonzero().get() as u32;
        tracing::info!(job = %job, session = %params.session, pid, command = %params.command, "job started");
        let _ = events
            .send(Response::Started(Started {
                job: job.clone(),
                session: params.session.clone(),
                pid,
            }))
            .await;

        let run = JobRun {
            meta: JobMeta {
                job: job.clone(),
                session: params.session.clone(),
                description: params.description,
                workdir: plan.workdir.to_string_lossy().into_owned(),
                started: Instant::now(),
            },
            spawned,
            timeout: plan.timeout,
            kill_grace: self.config.timeouts.kill_grace,
            limits: plan.limits,
            shape: plan.shape,
            session_dir: runtime::sessions_dir(&self.runtime_dir).join(&params.session),
        };
        let (control, control_rx) = mpsc::channel(16);
        let finished = self.finished_tx.clone();
        tokio::spawn(async move {
            let ended = supervisor::supervise(run, control_rx, events.clone()).await;
            let _ = events
                .send(Response::Finished(Box::new(ended.result.clone())))
                .await;
            let _ = finished.send(Box::new(ended));
        });
        let page_lines = plan.limits.max_lines;
        self.running.insert(
            job,
            RunningJob {
                control,
                page_lines,
            },
        );
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
        let not_yet = |what: &str| {
            Err(invalid(format!(
                "{what} is not supported by this bashd yet"
            )))
        };
        if params.mode == Mode::Background {
            return not_yet("--mode background");
        }
        if params.on_timeout == Some(OnTimeout::Background) {
            return not_yet("--on-timeout background");
        }
        if params.stream {
            return not_yet("--stream");
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
    fn job_env(&self, params: &ExecParams, job: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
        let ours: [(&str, String); 2] = [
            ("BASHD_JOB", format!("{}/{job}", self.instance)),
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

    fn status(&self) -> StatusInfo {
        StatusInfo {
            daemon_pid: std::process::id(),
            daemon_version: env!("CARGO_PKG_VERSION").to_owned(),
            protocol: bashd_protocol::PROTOCOL_VERSION,
            uptime_ms: self.started.elapsed().as_millis() as u64,
            runtime_dir: self.runtime_dir.to_string_lossy().into_owned(),
            running_jobs: self.running.len() as u32,
        }
    }

    /// Stops every running job and waits until each supervisor has reported its end.
    async fn stop_all(&mut self) {
        for job in self.running.values() {
            let _ = job.control.try_send(Control::Stop(StopReason::Shutdown));
        }
        while !self.running.is_empty() {
            match self.finished_rx.recv().await {
                Some(ended) => self.finished(*ended),
                None => break,
            }
        }
    }
}

struct Plan {
    workdir: PathBuf,
    timeout: Duration,
    limits: output::Limits,
    shape: Shape,
}

fn check_workdir(path: &Path) -> Result<PathBuf, ErrorReply> {
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

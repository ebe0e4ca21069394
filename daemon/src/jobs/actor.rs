//! The actor that owns the job table. It is the only place that creates, lists or
//! forgets jobs; connections reach it through [`JobsHandle`], supervisors report back
//! to it when their job ends.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bashd_protocol::{
    Direction, ErrorKind, ErrorReply, ExecParams, ExecResult, Mode, OnTimeout, Response, Started,
    StatusInfo, is_valid_session_id, limits,
};
use tokio::sync::mpsc;

use super::handle::{Cmd, JobsHandle, shutting_down};
use super::process::{ReaperHandle, SpawnSpec};
use super::supervisor::{self, Control, JobMeta, JobRun, StopReason};
use crate::config::Config;

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
    finished_tx: mpsc::UnboundedSender<Box<ExecResult>>,
    finished_rx: mpsc::UnboundedReceiver<Box<ExecResult>>,
    reaper: ReaperHandle,
    running: HashMap<String, RunningJob>,
    next_job: u64,
    instance: String,
    shell: PathBuf,
    runtime_dir: PathBuf,
    started: Instant,
}

struct RunningJob {
    control: mpsc::Sender<Control>,
}

/// What the actor reacts to.
enum Event {
    Cmd(Cmd),
    Finished(Box<ExecResult>),
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
            next_job: 1,
            instance: new_instance_id(),
            shell,
            runtime_dir,
            started: Instant::now(),
        };
        (actor, JobsHandle { cmds: cmd_tx })
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
                Event::Cmd(Cmd::Exec { params, events }) => self.exec(*params, events).await,
                Event::Cmd(Cmd::Status { reply }) => {
                    let _ = reply.send(self.status());
                }
                Event::Cmd(Cmd::Shutdown { reply }) => {
                    self.stop_all().await;
                    let _ = reply.send(());
                    break;
                }
                Event::Finished(result) => self.finished(&result),
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

    fn finished(&mut self, result: &ExecResult) {
        self.running.remove(&result.job);
        tracing::info!(
            job = %result.job,
            session = %result.session,
            state = %result.state,
            exit_code = ?result.exit_code,
            signal = ?result.signal,
            duration_ms = result.duration_ms,
            "job ended"
        );
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
                session: params.session,
                description: params.description,
                workdir: plan.workdir.to_string_lossy().into_owned(),
                started: Instant::now(),
            },
            spawned,
            timeout: plan.timeout,
            kill_grace: self.config.timeouts.kill_grace,
            max_lines: plan.max_lines,
            max_bytes: plan.max_bytes,
        };
        let (control, control_rx) = mpsc::channel(4);
        let finished = self.finished_tx.clone();
        tokio::spawn(async move {
            let result = Box::new(supervisor::supervise(run, control_rx, events.clone()).await);
            let _ = events.send(Response::Finished(result.clone())).await;
            let _ = finished.send(result);
        });
        self.running.insert(job, RunningJob { control });
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
        if params.output.direction != Direction::Tail
            || params.output.head.is_some()
            || params.output.tail.is_some()
        {
            return not_yet(
                "choosing which part of the output is shown (--direction, --head, --tail)",
            );
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
        Ok(Plan {
            workdir,
            timeout: Duration::from_secs(timeout_secs),
            max_lines: params.output.max_lines.unwrap_or(limits.max_lines).max(1),
            max_bytes: params.output.max_bytes.unwrap_or(limits.max_bytes).max(1),
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
                Some(result) => self.finished(&result),
                None => break,
            }
        }
    }
}

struct Plan {
    workdir: PathBuf,
    timeout: Duration,
    max_lines: u32,
    max_bytes: u32,
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

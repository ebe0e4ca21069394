//! The actor that owns the job table and the sessions. It is the only place that
//! creates, lists, finds or forgets jobs and sessions; connections reach it through
//! [`JobsHandle`], supervisors and owner watchers report to it over channels, and it
//! never waits on any of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bashd_protocol::{
    ErrorKind, ErrorReply, ExecParams, ExecResult, JobInfo, JobRef, JobState, JobsRequest,
    KillRequest, Mode, Owner, Response, SessionClosed, SessionInfo, Started, StatusInfo,
    StreamResult, WaitRequest, is_valid_session_id, limits, runtime,
};
use rustix::process::Signal;
use tokio::sync::{mpsc, oneshot};

use super::handle::{Cmd, JobsHandle, Lookup, StreamsAt, Waiting, shutting_down};
use super::members::Mark;
use super::process::{ReaperHandle, SpawnSpec};
use super::session::{CloseReply, Closing, Session, SessionEvent};
use super::supervisor::{self, Control, Ended, JobMeta, JobRun, Report, Stop, StopReason, Streams};
use crate::config::Config;
use crate::output::{self, OutputSource, Shape};
use crate::policy::Denial;

/// `bashc jobs` shows this much of a command.
const LISTED_COMMAND_BYTES: usize = 4096;

/// Identifies this daemon instance in job cookies (`BASHD_JOB=<instance>/<job>`).
pub fn new_instance_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{:x}-{:x}", std::process::id(), nanos)
}

pub struct JobsActor {
    config: Arc<Config>,
    cmds: mpsc::Receiver<Cmd>,
    reports_tx: mpsc::UnboundedSender<Report>,
    reports: mpsc::UnboundedReceiver<Report>,
    session_events_tx: mpsc::UnboundedSender<SessionEvent>,
    session_events: mpsc::UnboundedReceiver<SessionEvent>,
    reaper: ReaperHandle,
    /// Every job the table holds, by number (`j12` is 12).
    jobs: HashMap<u64, Job>,
    /// Leader pid to job, for `--pid`; a reused pid names its newest job.
    by_pid: HashMap<u32, u64>,
    sessions: HashMap<String, Session>,
    running: usize,
    next_job: u64,
    instance: String,
    shell: PathBuf,
    runtime_dir: PathBuf,
    started: Instant,
}

struct Job {
    id: String,
    session: String,
    command: String,
    description: Option<String>,
    workdir: String,
    mode: Mode,
    pid: Option<u32>,
    started_at: SystemTime,
    started: Instant,
    /// Its request was answered before it ended.
    background: bool,
    /// Per session: lines of stdout and stderr that session's `check`s have shown.
    cursors: HashMap<String, [u64; 2]>,
    /// Lines of an output page, and bytes of a check, when the request names none.
    page_lines: u64,
    max_bytes: usize,
    status: Status,
}

enum Status {
    Running {
        control: mpsc::Sender<Control>,
        /// `wait` and `kill` requests, answered when the job ends.
        waiters: Vec<oneshot::Sender<ExecResult>>,
    },
    Ended(Box<Ended>),
}

/// What the actor reacts to.
enum Event {
    Cmd(Cmd),
    Report(Report),
    Session(SessionEvent),
}

impl JobsActor {
    pub fn new(
        config: Arc<Config>,
        reaper: ReaperHandle,
        shell: PathBuf,
        runtime_dir: PathBuf,
    ) -> (JobsActor, JobsHandle) {
        let (cmd_tx, cmds) = mpsc::channel(256);
        // Unbounded so a supervisor or a watcher never waits on the actor; there are at
        // most two reports per job and one event per owner or linger.
        let (reports_tx, reports) = mpsc::unbounded_channel();
        let (session_events_tx, session_events) = mpsc::unbounded_channel();
        let actor = JobsActor {
            config,
            cmds,
            reports_tx,
            reports,
            session_events_tx,
            session_events,
            reaper,
            jobs: HashMap::new(),
            by_pid: HashMap::new(),
            sessions: HashMap::new(),
            running: 0,
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
            // Cancelling any branch loses nothing: all three are channel receives.
            let event = tokio::select! {
                cmd = self.cmds.recv() => match cmd {
                    Some(cmd) => Event::Cmd(cmd),
                    None => break,
                },
                Some(report) = self.reports.recv() => Event::Report(report),
                Some(event) = self.session_events.recv() => Event::Session(event),
            };
            match event {
                Event::Cmd(Cmd::Shutdown { reply }) => {
                    self.stop_all().await;
                    let _ = reply.send(());
                    break;
                }
                Event::Cmd(cmd) => self.command(cmd).await,
                Event::Report(report) => self.report(report),
                Event::Session(event) => self.session_event(event),
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

    async fn command(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Exec {
                params,
                denial,
                events,
            } => self.exec(*params, denial, events).await,
            Cmd::Lookup { caller, job, reply } => {
                if let Some(caller) = &caller {
                    self.adopt(&caller.session, caller.owner);
                }
                let session = caller.map(|c| c.session);
                let _ = reply.send(self.lookup(&job, session.as_deref()));
            }
            Cmd::Advance { job, session, seen } => {
                if let Some(job) = self.jobs.get_mut(&job) {
                    let cursor = job.cursors.entry(session).or_default();
                    cursor[0] = cursor[0].max(seen[0]);
                    cursor[1] = cursor[1].max(seen[1]);
                }
            }
            Cmd::Wait { request, reply } => {
                let _ = reply.send(self.wait(request));
            }
            Cmd::Kill { request, reply } => {
                let _ = reply.send(self.kill(request));
            }
            Cmd::Jobs { request, reply } => {
                let _ = reply.send(self.list(request));
            }
            Cmd::Sessions { reply } => {
                let _ = reply.send(self.session_list());
            }
            Cmd::CloseSession { session, reply } => self.close_session(&session, Some(reply)),
            Cmd::Status { reply } => {
                let _ = reply.send(self.status());
            }
            // Handled by `run`, which ends the loop.
            Cmd::Shutdown { reply } => {
                let _ = reply.send(());
            }
        }
    }

    fn report(&mut self, report: Report) {
        match report {
            Report::Backgrounded { job, seen } => {
                if let Some(job) = number(&job).and_then(|n| self.jobs.get_mut(&n)) {
                    job.background = true;
                    job.cursors.insert(job.session.clone(), seen);
                }
            }
            Report::Ended(ended) => self.ended(*ended),
        }
    }

    fn ended(&mut self, ended: Ended) {
        let result = &ended.result;
        tracing::info!(
            job = %result.job,
            session = %result.session,
            state = %result.state,
            exit_code = ?result.exit_code,
            signal = ?result.signal,
            duration_ms = result.duration_ms,
            "job ended"
        );
        let Some(n) = number(&result.job) else { return };
        let Some(job) = self.jobs.get_mut(&n) else {
            return;
        };
        if !job.background {
            // The request that started it showed its output; checks start after it.
            let seen = [
                ended.streams.stdout.complete_lines,
                ended
                    .streams
                    .stderr
                    .as_ref()
                    .map_or(0, |s| s.complete_lines),
            ];
            job.cursors.insert(job.session.clone(), seen);
        }
        let status = std::mem::replace(&mut job.status, Status::Ended(Box::new(ended)));
        if let (Status::Running { waiters, .. }, Status::Ended(ended)) = (status, &job.status) {
            for waiter in waiters {
                let _ = waiter.send(ended.result.clone());
            }
            self.running -= 1;
        }
        let name = job.session.clone();
        let Some(session) = self.sessions.get_mut(&name) else {
            return;
        };
        session.running -= 1;
        let closed = session.closing.is_some() && session.running == 0;
        self.mark_finished(&name, n);
        if closed {
            self.finish_close(&name);
        }
    }

    /// Drops a finished job and its spill files.
    fn forget(&mut self, n: u64) {
        let Some(job) = self.jobs.remove(&n) else {
            return;
        };
        if let Some(session) = self.sessions.get_mut(&job.session) {
            session.jobs.remove(&n);
        }
        if let Some(pid) = job.pid
            && self.by_pid.get(&pid) == Some(&n)
        {
            self.by_pid.remove(&pid);
        }
        if let Status::Ended(ended) = &job.status {
            let streams = [Some(&ended.streams.stdout), ended.streams.stderr.as_ref()];
            for source in streams.into_iter().flatten() {
                if let output::Content::File { path, .. } = &source.content {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }

    fn session_event(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::OwnerExited { session: name, pid } => {
                let Some(session) = self.sessions.get_mut(&name) else {
                    return;
                };
                if !session.owner_exited(pid) || session.closing.is_some() {
                    return;
                }
                tracing::info!(session = %name, owner = pid, linger_secs = self.config.sessions.linger.as_secs(), "every owner of the session has exited; it lingers");
                session.linger(&name, self.config.sessions.linger, &self.session_events_tx);
                let grace = self.config.timeouts.kill_grace;
                for n in &session.jobs {
                    if let Some(Job {
                        background: false,
                        status: Status::Running { control, .. },
                        ..
                    }) = self.jobs.get(n)
                    {
                        let _ = control
                            .try_send(Control::Stop(Stop::term(StopReason::OwnersGone, grace)));
                    }
                }
            }
            SessionEvent::LingerEnded {
                session,
                generation,
            } => {
                if self
                    .sessions
                    .get(&session)
                    .is_some_and(|s| s.linger_ended(generation))
                {
                    tracing::info!(session = %session, "the session's linger ended");
                    self.close_session(&session, None);
                }
            }
        }
    }

    /// Makes `owner` an owner of `session`, if it exists; an exec creates it first.
    fn adopt(&mut self, name: &str, owner: Option<Owner>) {
        if let Some(session) = self.sessions.get_mut(name)
            && session.closing.is_none()
        {
            let was_lingering = session.is_lingering();
            if session.adopt(name, owner, &self.session_events_tx) && was_lingering {
                tracing::info!(session = %name, owner = ?owner.map(|o| o.pid), "a lingering session was adopted again");
            }
        }
    }

    /// Kills the session's jobs; when the last has ended its directory is removed and
    /// it is forgotten, and `reply` answered.
    fn close_session(&mut self, name: &str, reply: Option<CloseReply>) {
        let Some(session) = self.sessions.get_mut(name) else {
            if let Some(reply) = reply {
                let _ = reply.send(Err(ErrorReply::new(
                    ErrorKind::NotFound,
                    format!("no session {name}: `bashc sessions` lists the sessions bashd has"),
                )));
            }
            return;
        };
        if session.closing.is_none() {
            let grace = self.config.timeouts.kill_grace;
            let mut killed_jobs = 0;
            for n in &session.jobs {
                if let Some(Job {
                    status: Status::Running { control, .. },
                    ..
                }) = self.jobs.get(n)
                {
                    killed_jobs += 1;
                    let _ = control
                        .try_send(Control::Stop(Stop::term(StopReason::SessionEnded, grace)));
                }
            }
            session.closing = Some(Closing {
                waiters: Vec::new(),
                killed_jobs,
            });
        }
        if let (Some(reply), Some(closing)) = (reply, session.closing.as_mut()) {
            closing.waiters.push(reply);
        }
        if session.running == 0 {
            self.finish_close(name);
        }
    }

    fn finish_close(&mut self, name: &str) {
        let Some(mut session) = self.sessions.remove(name) else {
            return;
        };
        for n in std::mem::take(&mut session.jobs) {
            self.forget(n);
        }
        let dir = self.session_dir(name);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("cannot remove session directory {}: {e}", dir.display()),
        }
        let closing = session.closing.take().unwrap_or_default();
        tracing::info!(session = %name, killed_jobs = closing.killed_jobs, "session ended");
        for waiter in closing.waiters {
            let _ = waiter.send(Ok(SessionClosed {
                session: name.to_owned(),
                killed_jobs: closing.killed_jobs,
            }));
        }
    }

    fn session_dir(&self, name: &str) -> PathBuf {
        runtime::sessions_dir(&self.runtime_dir).join(name)
    }

    fn find(&self, job: &JobRef) -> Result<u64, ErrorReply> {
        let found = match job {
            JobRef::Id(id) => number(id).filter(|n| self.jobs.contains_key(n)),
            JobRef::Pid(pid) => self.by_pid.get(pid).copied(),
        };
        found.ok_or_else(|| self.unknown_job(job))
    }

    fn unknown_job(&self, job: &JobRef) -> ErrorReply {
        let message = match job {
            JobRef::Id(id) => match number(id) {
                Some(n) if n > 0 && n < self.next_job => format!(
                    "job {id} is no longer kept: its session ended, or it is older than the last {} finished jobs of its session (sessions.keep_finished)",
                    self.config.sessions.keep_finished
                ),
                _ => format!(
                    "no job {id}: job ids look like j12, as `bashc exec` and `bashc jobs` show them"
                ),
            },
            JobRef::Pid(pid) => format!(
                "no job has pid {pid}: --pid takes the pid of a job's shell, as `bashc jobs` shows it"
            ),
        };
        ErrorReply::new(ErrorKind::NotFound, message)
    }

    /// The job's state and a way to its output, for `output` and `check`.
    fn lookup(&mut self, job: &JobRef, session: Option<&str>) -> Result<Lookup, ErrorReply> {
        let n = self.find(job)?;
        let mut streams = self.streams(n);
        if let StreamsAt::Closed = streams {
            // It has just ended: its report is in the channel.
            while let Ok(report) = self.reports.try_recv() {
                self.report(report);
            }
            streams = self.streams(n);
        }
        let job = self.jobs.get(&n).ok_or_else(|| self.unknown_job(job))?;
        if let StreamsAt::Closed = streams {
            return Err(ErrorReply::new(
                ErrorKind::Internal,
                format!("{} is busy; ask again", job.id),
            ));
        }
        Ok(Lookup {
            summary: self.summary(job),
            cursor: session
                .and_then(|s| job.cursors.get(s))
                .copied()
                .unwrap_or_default(),
            page_lines: job.page_lines,
            max_bytes: job.max_bytes,
            streams,
        })
    }

    fn streams(&self, n: u64) -> StreamsAt {
        match self.jobs.get(&n).map(|job| &job.status) {
            Some(Status::Ended(ended)) => StreamsAt::Ready(ended.streams.clone()),
            Some(Status::Running { control, .. }) => {
                let (reply, answer) = oneshot::channel();
                match control.try_send(Control::Snapshot(reply)) {
                    Ok(()) => StreamsAt::Pending(answer),
                    Err(_) => StreamsAt::Closed,
                }
            }
            None => StreamsAt::Closed,
        }
    }

    /// The job's result as it stands, without its output.
    fn summary(&self, job: &Job) -> ExecResult {
        match &job.status {
            Status::Ended(ended) => ExecResult {
                stdout: StreamResult::empty(),
                stderr: ended.result.stderr.as_ref().map(|_| StreamResult::empty()),
                notice: None,
                ..ended.result.clone()
            },
            Status::Running { .. } => ExecResult {
                job: job.id.clone(),
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
                notice: None,
            },
        }
    }

    fn wait(&mut self, request: WaitRequest) -> Result<Waiting, ErrorReply> {
        self.adopt(&request.caller.session, request.caller.owner);
        let n = self.find(&request.job)?;
        let job = self
            .jobs
            .get_mut(&n)
            .expect("find names a job in the table");
        match &mut job.status {
            Status::Ended(ended) => Ok(Waiting::Ended(ended.result.clone())),
            Status::Running { waiters, .. } => {
                let (tx, rx) = oneshot::channel();
                waiters.retain(|w| !w.is_closed());
                waiters.push(tx);
                let job = &self.jobs[&n];
                Ok(Waiting::Pending {
                    summary: self.summary(job),
                    result: rx,
                })
            }
        }
    }

    fn kill(&mut self, request: KillRequest) -> Result<Waiting, ErrorReply> {
        self.adopt(&request.caller.session, request.caller.owner);
        let signal = match &request.signal {
            Some(name) => parse_signal(name)?,
            None => Signal::TERM,
        };
        let grace = request
            .grace_ms
            .map_or(self.config.timeouts.kill_grace, Duration::from_millis);
        let n = self.find(&request.job)?;
        let job = self
            .jobs
            .get_mut(&n)
            .expect("find names a job in the table");
        match &mut job.status {
            Status::Ended(ended) => {
                let mut result = ended.result.clone();
                let already = format!("{} had already ended; nothing was killed.", job.id);
                result.notice = Some(match result.notice {
                    Some(notice) => format!("{already}\n{notice}"),
                    None => already,
                });
                Ok(Waiting::Ended(result))
            }
            Status::Running { control, waiters } => {
                let stop = Stop {
                    reason: StopReason::Killed,
                    signal,
                    grace,
                };
                if control.try_send(Control::Stop(stop)).is_err() {
                    return Err(ErrorReply::new(
                        ErrorKind::Internal,
                        format!("{} is busy; ask again", job.id),
                    ));
                }
                tracing::info!(job = %job.id, signal = ?signal, "killing a job on request");
                let (tx, rx) = oneshot::channel();
                waiters.push(tx);
                let job = &self.jobs[&n];
                Ok(Waiting::Pending {
                    summary: self.summary(job),
                    result: rx,
                })
            }
        }
    }

    fn list(&mut self, request: JobsRequest) -> Result<Vec<JobInfo>, ErrorReply> {
        self.adopt(&request.caller.session, request.caller.owner);
        // Naming a session is using it: a lingering one is adopted again.
        if let Some(session) = &request.session {
            self.adopt(session, request.caller.owner);
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
                    return Err(ErrorReply::new(
                        ErrorKind::NotFound,
                        format!("no session {name}: `bashc sessions` lists the sessions bashd has"),
                    ));
                }
            },
        };
        Ok(numbers
            .iter()
            .filter_map(|n| self.jobs.get(n))
            .map(|job| self.info(job))
            .collect())
    }

    fn info(&self, job: &Job) -> JobInfo {
        let (state, exit_code, duration_ms) = match &job.status {
            Status::Ended(ended) => (
                ended.result.state,
                ended.result.exit_code,
                ended.result.duration_ms,
            ),
            Status::Running { .. } => (
                JobState::Running,
                None,
                job.started.elapsed().as_millis() as u64,
            ),
        };
        let mode = match (job.background, job.mode) {
            (true, _) | (_, Mode::Background) => "background",
            (false, Mode::Slow) => "slow",
            (false, Mode::Default) => "default",
        };
        JobInfo {
            job: job.id.clone(),
            session: job.session.clone(),
            pid: job.pid,
            state,
            exit_code,
            mode: mode.to_owned(),
            command: job.command.clone(),
            description: job.description.clone(),
            started_at: rfc3339(job.started_at),
            duration_ms,
        }
    }

    fn session_list(&self) -> Vec<SessionInfo> {
        let mut list: Vec<SessionInfo> = self
            .sessions
            .iter()
            .map(|(name, session)| {
                session.info(name, self.session_dir(name).to_string_lossy().into_owned())
            })
            .collect();
        list.sort_by(|a, b| a.session.cmp(&b.session));
        list
    }

    /// Creates a job for a denied command or starts one.
    async fn exec(
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
        let n = self.next_job;
        self.next_job += 1;
        let id = format!("j{n}");
        if let Some(entry) = self.sessions.get_mut(&session) {
            entry.jobs.insert(n);
        }
        let new_job = |status: Status, pid: Option<u32>| Job {
            id: id.clone(),
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
            let ended = denied_or_failed(&id, &params, JobState::Denied, Some(denial.message));
            let _ = events
                .send(Response::Finished(Box::new(ended.result.clone())))
                .await;
            let job = new_job(Status::Ended(Box::new(ended)), None);
            self.jobs.insert(n, job);
            self.mark_finished(&session, n);
            return;
        }

        let cookie = format!("BASHD_JOB={}/{id}", self.instance);
        let spec = SpawnSpec {
            shell: self.shell.clone(),
            command: params.command.clone(),
            workdir: plan.workdir.clone(),
            env: self.job_env(&params, &id),
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
                let ended = denied_or_failed(&id, &params, JobState::Failed, Some(message));
                let job = new_job(Status::Ended(Box::new(ended)), None);
                self.jobs.insert(n, job);
                self.mark_finished(&session, n);
                return;
            }
        };
        let pid = spawned.pid.as_raw_nonzero().get() as u32;
        tracing::info!(job = %id, session = %session, pid, command = %params.command, "job started");
        let _ = events
            .send(Response::Started(Started {
                job: id.clone(),
                session: session.clone(),
                pid,
            }))
            .await;

        let (control, control_rx) = mpsc::channel(16);
        let job = new_job(
            Status::Running {
                control,
                waiters: Vec::new(),
            },
            Some(pid),
        );
        let run = JobRun {
            meta: JobMeta {
                job: id.clone(),
                session: session.clone(),
                description: params.description,
                workdir: job.workdir.clone(),
                started: job.started,
            },
            mark: Mark {
                pgid: spawned.pid,
                cookie: cookie.into_bytes(),
            },
            spawned,
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
        };
        let reports = self.reports_tx.clone();
        tokio::spawn(async move {
            let ended =
                supervisor::supervise(run, control_rx, events.clone(), reports.clone()).await;
            let _ = events
                .send(Response::Finished(Box::new(ended.result.clone())))
                .await;
            let _ = reports.send(Report::Ended(Box::new(ended)));
        });
        self.jobs.insert(n, job);
        self.by_pid.insert(pid, n);
        self.running += 1;
        if let Some(entry) = self.sessions.get_mut(&session) {
            entry.running += 1;
        }
    }

    /// A job that ended joins its session's finished jobs; the oldest beyond
    /// `keep_finished` are forgotten.
    fn mark_finished(&mut self, session: &str, n: u64) {
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
            running_jobs: self.running as u32,
        }
    }

    /// Stops every running job, waits until each supervisor has reported its end, and
    /// removes every session's directory.
    async fn stop_all(&mut self) {
        let grace = self.config.timeouts.kill_grace;
        for job in self.jobs.values() {
            if let Status::Running { control, .. } = &job.status {
                let _ = control.try_send(Control::Stop(Stop::term(StopReason::Shutdown, grace)));
            }
        }
        while self.running > 0 {
            match self.reports.recv().await {
                Some(report) => self.report(report),
                None => break,
            }
        }
        let names: Vec<String> = self.sessions.keys().cloned().collect();
        for name in names {
            self.close_session(&name, None);
        }
    }
}

struct Plan {
    workdir: PathBuf,
    timeout: Duration,
    limits: output::Limits,
    shape: Shape,
}

/// The end of a job that never ran: refused by the policy, or not startable.
fn denied_or_failed(
    id: &str,
    params: &ExecParams,
    state: JobState,
    notice: Option<String>,
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
            job: id.to_owned(),
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
            notice,
        },
        streams: Streams {
            stderr: (!params.merge_stderr).then(|| empty.clone()),
            stdout: empty,
        },
    }
}

/// `j12` -> 12.
fn number(id: &str) -> Option<u64> {
    id.strip_prefix('j')?.parse().ok()
}

/// At most `max` bytes of `text`, cut on a char boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
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

/// `2026-11-22T09:30:05Z`.
fn rfc3339(time: SystemTime) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_dates() {
        let at = |secs| rfc3339(std::time::UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_795_338_245), "2026-11-22T09:04:05Z");
    }

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(parse_signal("TERM").unwrap(), Signal::TERM);
        assert_eq!(parse_signal("sigint").unwrap(), Signal::INT);
        assert_eq!(parse_signal("9").unwrap(), Signal::KILL);
        let err = parse_signal("STOP").unwrap_err().message;
        assert!(err.contains("unknown signal \"STOP\""), "{err}");
    }
}

//! `exec` (`bashc exec`, `bash`): runs a command as a job. The request's task asks the
//! policy, sends the job to the actor and forwards the job's responses until the last
//! (or a cancel); the actor's handler runs the request in stages (`plan`, `admit`,
//! `record`, then `launch` or `deny`) and asks the reaper for the spawn on a task of
//! its own (the actor never waits for the fork: meanwhile the job is `Starting`); when
//! the answer comes back as a report, `table/start.rs` hands the job to a supervisor.
//!
//! Over 600 lines, as one request's whole: most of it is `plan`, the checks a request
//! passes before anything is spawned, which only `exec` makes.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bashd_protocol::channel::CHANNEL_ENV;
use bashd_protocol::{
    Argument, AskId, AskState, BackgroundWhy, ErrorHint, ErrorKind, ErrorReply, ExecParams, JobId,
    JobLimits, JobState, Mode, Network, Notice, RequestId, Response, SandboxInForce,
    SandboxProfile, ServerFrame, StdinMode, is_valid_session_id, limits,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::OnCancel;
use crate::jobs::contain::LimitsFrom;
use crate::jobs::job::supervisor::Control;
use crate::jobs::job::supervisor::{JobMeta, Report, Settings, Subscriber};
use crate::jobs::os::spawn::SpawnSpec;
use crate::jobs::table::asks::Parked;
use crate::jobs::table::handle::{Cmd, JobsHandle, ToActor, shutting_down};
use crate::jobs::table::reach;
use crate::jobs::table::session::Session;
use crate::jobs::table::start::not_run;
use crate::jobs::table::{Job, JobsActor, Launch, Status};
use crate::journal::{self};
use crate::outbound::Outbound;
use crate::output::{self, Shape};
use crate::policy::Denial;
use crate::sandbox;
use crate::sandbox::channel::{Channel, Origin};
use crate::sandbox::roots::{CallerDir, Roots};

/// `bashc jobs` shows this much of a command.
const LISTED_COMMAND_BYTES: usize = 4096;

/// Runs a command and forwards its responses, until the last or a cancel. A cancel
/// drops the job's channel, which stops a foreground job (`ended_by = cancel`); an MCP
/// call under `[mcp] on_cancel = "background"` instead asks its job to move to the
/// background and keeps the channel open until the job has answered that, so the job
/// is never taken for abandoned. Nothing more is sent after a cancel.
pub(super) async fn serve(
    id: RequestId,
    params: bashd_protocol::ExecParams,
    jobs: JobsHandle,
    out: Outbound,
    cancel: CancellationToken,
) {
    let to_background = params.mcp_call;
    let session = params.session.clone();
    let mut events = jobs.exec(params).await;
    let mut job: Option<JobId> = None;
    let mut cancelled = false;
    // An MCP call that waits on an ask answers `pending` by its budget (issue 44).
    let mut asked: Option<(AskId, tokio::time::Instant)> = None;
    loop {
        let ask_deadline = asked.map(|(_, at)| at);
        // Cancelling either branch loses nothing: events stay in their channel.
        let event = tokio::select! {
            event = events.recv() => event,
            () = async { tokio::time::sleep_until(ask_deadline.expect("polled only when set")).await },
                if ask_deadline.is_some() && !cancelled => {
                let (ask, _) = asked.take().expect("set");
                if !jobs.detach_ask(ask).await {
                    // Answered meanwhile: its answer is on the way.
                    continue;
                }
                let pending = Response::Error(
                    ErrorReply::new(
                        ErrorKind::InvalidRequest,
                        format!(
                            "ask {ask} pending: the person has not answered yet; a yes runs the command in the background, and a later call's inbox tells its end"
                        ),
                    )
                    .with_hint(ErrorHint::Ask { ask, state: AskState::Pending }),
                );
                if jobs.deliver_inbox(Some(&session), id, &pending, &out).await {
                    let _ = out.send(ServerFrame::Response(id, pending)).await;
                }
                return;
            }
            () = cancel.cancelled(), if !cancelled => {
                cancelled = true;
                if !to_background || jobs.mcp_on_cancel() == OnCancel::Kill {
                    return;
                }
                if let Some(job) = job {
                    jobs.detach(job).await;
                }
                continue;
            }
        };
        let Some(event) = event else { return };
        let last = matches!(event, Response::Finished(_) | Response::Error(_));
        if cancelled {
            if let Response::Started(started) = &event {
                jobs.detach(started.job).await;
            }
            if last {
                return;
            }
            continue;
        }
        if let Response::Started(started) = &event {
            job = Some(started.job);
            asked = None;
        }
        if to_background && let Response::Notice(Notice::Asked { ask, .. }) = &event {
            asked = Some((*ask, tokio::time::Instant::now() + jobs.mcp_max_call()));
        }
        if last && !jobs.deliver_inbox(Some(&session), id, &event, &out).await {
            return;
        }
        if out.send(ServerFrame::Response(id, event)).await.is_err() || last {
            return;
        }
    }
}

impl JobsHandle {
    /// Starts a job. Its responses arrive on the returned receiver; dropping it before
    /// `Finished` stops a foreground job.
    pub(in crate::jobs) async fn exec(&self, params: ExecParams) -> mpsc::Receiver<Response> {
        let (events, rx) = mpsc::channel(64);
        // The job's workdir, so that `$PWD`, `$(pwd)` and relative targets are judged
        // as where they will run.
        let denial = self
            .policy_verdict(params.command.clone(), Some(params.workdir.clone()))
            .await
            .err();
        let cmd = Cmd::Exec(Exec {
            params: Box::new(params),
            denial,
            events: events.clone(),
            origin: self.origin.clone(),
            caller_dir: Arc::clone(&self.caller_dir),
        });
        if self.cmds.send(cmd).await.is_err() {
            let _ = events.send(Response::Error(shutting_down())).await;
        }
        rx
    }

    /// Asks a job to answer its request now and go on in the background.
    pub(in crate::jobs) async fn detach(&self, job: JobId) {
        self.tell(Detach { job }).await;
    }
}

/// The message: start a job; every response for the request goes to `events`, ending
/// with `Finished` or `Error`. Dropping the receiver of `events` stops a foreground job.
#[derive(Debug)]
pub struct Exec {
    params: Box<ExecParams>,
    /// The policy's refusal, checked before the actor sees the request.
    denial: Option<Denial>,
    events: mpsc::Sender<Response>,
    /// The sandboxed job the request came from, through its channel: it bounds what
    /// the request may start.
    origin: Option<Arc<Origin>>,
    /// The directory the client runs in, as read from its connection: its writable
    /// root, for a request that did not come through a job's channel.
    caller_dir: Arc<CallerDir>,
}

impl Exec {
    /// Handled on the actor's task.
    pub(in crate::jobs) fn handle(self, actor: &mut JobsActor) {
        actor.exec(
            *self.params,
            self.denial,
            self.events,
            self.origin,
            self.caller_dir,
            Granted::default(),
        );
    }

    /// The actor has stopped: the request is told so.
    pub(in crate::jobs) fn refuse(self) {
        let _ = self.events.try_send(Response::Error(shutting_down()));
    }
}

/// The message: answer `job`'s request now and move it to the background.
struct Detach {
    job: JobId,
}

impl ToActor for Detach {
    type Reply = ();
    /// Nothing for a job that has ended.
    fn handle(self, actor: &mut JobsActor) {
        if let Some(control) = actor.jobs.get(&self.job.0).and_then(Job::control) {
            let _ = control.send(Control::Detach(BackgroundWhy::Cancelled));
        }
    }
}

impl JobsActor {
    /// Runs a request in four stages, each of which may refuse it before the next:
    /// `plan` (the request checked, how it would run), `admit` (what it needs of the
    /// daemon: descriptors, a sandboxed job's channel; a request looser than its
    /// session's floor is parked as an ask instead, `requests/allow.rs`), `record`
    /// (its session, its id and `job` line in the journal), then `launch`, or `deny`
    /// for a command the policy refused. Only `record` and what follows change the
    /// table. Every response here is the first on the request's fresh channel (or the
    /// first after its `Asked` notice), so `try_send` always finds room. `granted`:
    /// the sandbox a person's yes to this very request lets through, with the ask's
    /// id; `git_granted`: that yes let it write its roots' `.git`. Returns the job's
    /// id, when it got one.
    pub(in crate::jobs) fn exec(
        &mut self,
        mut params: ExecParams,
        denial: Option<Denial>,
        events: mpsc::Sender<Response>,
        origin: Option<Arc<Origin>>,
        caller_dir: Arc<CallerDir>,
        granted: Granted,
    ) -> Option<JobId> {
        // What a person let through: this request's yes, the session's grants, and,
        // for a request from a sandboxed job, that job's own sandbox (which was).
        let Granted {
            sandbox: mut grants,
            git: git_granted,
        } = granted;
        grants.extend(self.asks.sandbox_grants(&params.session));
        if let Some(origin) = &origin {
            grants.push((origin.job.to_string(), origin.sandbox));
        }
        let sandboxes: Vec<SandboxInForce> = grants.iter().map(|(_, s)| *s).collect();
        let git_grant = git_granted.or_else(|| self.asks.git_grant(&params.session));
        let staged = self
            .plan(
                &params,
                origin.as_deref(),
                &caller_dir,
                &sandboxes,
                git_grant.is_some(),
            )
            .and_then(|plan| {
                let admitted = self.admit(&params, &plan, denial.is_none())?;
                let id = self.record(&params, &plan, denial.is_none())?;
                Ok((plan, admitted, id))
            });
        let (plan, admitted, id) = match staged {
            Ok(staged) => staged,
            // Only a person answers an ask, and a request through a job's channel
            // has none at hand: it is refused, as a job's own sandbox bounds it.
            Err(sandbox::Refused::Ask {
                asked,
                why,
                hint,
                git,
            }) if origin.is_none() => {
                self.park(Parked {
                    params: Box::new(params),
                    denial,
                    events,
                    caller_dir,
                    asked,
                    why,
                    hint,
                    git,
                    detached: false,
                });
                return None;
            }
            Err(refused) => {
                let _ = events.try_send(Response::Error(refused.error()));
                return None;
            }
        };
        // The grant that let it through, if a floor stood in its way: `bashc allow
        // --revoke` names the jobs each grant started.
        if !grants.is_empty()
            && origin.is_none()
            && let Err(sandbox::Refused::Ask { asked, .. }) =
                sandbox::decide(&self.config.sandbox, &params, None, &[])
            && let Some((grant, _)) = grants.iter().find(|(_, g)| sandbox::within(asked, *g))
        {
            self.asks.started.entry(grant.clone()).or_default().push(id);
        }
        if plan.git_write
            && let Some(grant) = git_grant
        {
            self.asks.started.entry(grant).or_default().push(id);
        }
        match denial {
            Some(denial) => self.deny(&params, &plan, admitted, id, denial, &events),
            None => {
                // Moved, not copied, into the job's environment.
                let client_env = std::mem::take(&mut params.env);
                self.launch(&params, plan, admitted, id, client_env, events);
            }
        }
        Some(id)
    }

    /// What a job needs of the daemon before it gets an id: its notify patterns
    /// compiled, descriptors under the budget (a denied command spawns nothing, so it
    /// needs none), and a sandboxed job's channel made.
    fn admit(
        &mut self,
        params: &ExecParams,
        plan: &Plan,
        spawns: bool,
    ) -> Result<Admitted, ErrorReply> {
        let notify = crate::jobs::job::teller::Spec::of(params)?;
        if spawns && let Err(error) = self.descriptors.admit() {
            tracing::warn!("job refused: {}", error.message);
            return Err(error);
        }
        let channel = match plan.sandbox.filter(|_| spawns) {
            Some(_) => Some(Channel::make().map_err(|e| {
                let message = format!(
                    "cannot make the sandboxed job's channel to bashd: {e}; try again (a sandboxed job reaches bashd through it)"
                );
                tracing::error!("{message}");
                ErrorReply::new(ErrorKind::Internal, message)
            })?),
            None => None,
        };
        Ok(Admitted { notify, channel })
    }

    /// Makes or adopts the job's session and takes its id with its `job` line in the
    /// journal (with what `jobs` lists of a job that is to run, should the daemon
    /// die): a job that could not be recorded is refused, since nothing could clean
    /// up after it.
    fn record(
        &mut self,
        params: &ExecParams,
        plan: &Plan,
        spawns: bool,
    ) -> Result<JobId, ErrorReply> {
        let session = &params.session;
        if !self.sessions.contains_key(session) {
            let mut new = Session::default();
            if !new.adopt(session, params.owner, &self.session_events_tx) {
                new.linger(
                    session,
                    self.config.sessions.linger,
                    &self.session_events_tx,
                );
            }
            self.sessions.insert(session.clone(), new);
        } else {
            self.adopt(session, params.owner);
        }
        let record = spawns.then(|| journal::JobRecord {
            started_ms: SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            mode: params.mode,
            merged: params.merge_stderr,
            workdir: plan.workdir.to_string_lossy().into_owned(),
            command: cut(&params.command, LISTED_COMMAND_BYTES),
            description: params.description.clone(),
        });
        let n = self
            .journal
            .job(&self.instance, session, record)
            .map_err(|e| {
                let message = format!(
                    "cannot record the job in the journal {}: {e}; bashd runs nothing it could not clean up after a crash (free space in that directory, then try again)",
                    journal::path(&self.runtime_dir).display()
                );
                tracing::error!("{message}");
                ErrorReply::new(ErrorKind::Internal, message)
            })?;
        if let Some(entry) = self.sessions.get_mut(session) {
            entry.jobs.insert(n);
        }
        Ok(JobId(n))
    }

    /// The table's record of job `id` in `status`.
    fn new_job(
        &self,
        params: &ExecParams,
        plan: &Plan,
        notify: &Option<crate::jobs::job::teller::Spec>,
        id: JobId,
        status: Status,
    ) -> Job {
        Job {
            id,
            session: params.session.clone(),
            command: cut(&params.command, LISTED_COMMAND_BYTES),
            description: params.description.clone(),
            workdir: plan.workdir.to_string_lossy().into_owned(),
            mode: params.mode,
            pid: None,
            started_at: SystemTime::now(),
            started: Instant::now(),
            // Mode `background` is answered as soon as the job starts: it is never a
            // foreground job that its owners' exit would stop.
            background: params.mode == Mode::Background,
            cursors: HashMap::new(),
            page_lines: plan.limits.max_lines,
            max_bytes: plan.limits.max_bytes,
            status,
            root: None,
            stdin: None,
            stdin_mode: params.stdin,
            sandbox: plan.sandbox,
            roots: plan.sandbox.map(|_| Arc::clone(&plan.roots)),
            channel: None,
            in_network: None,
            notify: notify.clone(),
        }
    }

    /// A command the policy refused: a job that ended `denied`, nothing spawned.
    fn deny(
        &mut self,
        params: &ExecParams,
        plan: &Plan,
        admitted: Admitted,
        id: JobId,
        denial: Denial,
        events: &mpsc::Sender<Response>,
    ) {
        let session = &params.session;
        tracing::info!(job = %id, session = %session, rule = %denial.rule, command = %params.command, "job denied");
        let notice = Notice::Denied {
            rule: denial.rule.clone(),
            message: denial.message,
        };
        let meta = JobMeta {
            job: id,
            session: session.clone(),
            description: params.description.clone(),
            workdir: params.workdir.clone(),
            started: Instant::now(),
        };
        let ended = not_run(&meta, params.merge_stderr, JobState::Denied, notice);
        let _ = events.try_send(Response::Finished(Box::new(ended.result.clone())));
        let job = self.new_job(
            params,
            plan,
            &admitted.notify,
            id,
            Status::Ended(Box::new(ended)),
        );
        self.jobs.insert(id.0, job);
        self.watchers.touch(id.0);
        self.journal_end(id.0);
        self.mark_finished(session, id.0);
    }

    /// Hands the recorded job to the reaper: its spawn, environment, channel and
    /// supervisor's settings; the actor serves other requests while it forks, and
    /// the answer comes back as `Report::Spawned`.
    fn launch(
        &mut self,
        params: &ExecParams,
        plan: Plan,
        admitted: Admitted,
        id: JobId,
        client_env: Vec<(Vec<u8>, Vec<u8>)>,
        events: mpsc::Sender<Response>,
    ) {
        let session = &params.session;
        let n = id.0;
        // A confined file system leaves the job the session's temp dir of its sandbox
        // to write in.
        let tmpdir = plan
            .sandbox
            .filter(|s| s.profile != SandboxProfile::Off)
            .map(|in_force| sandbox::tmpdir(&self.session_dir(session), in_force));
        // A sandboxed job's processes reach the daemon through a channel of its own,
        // which says who they are; nothing they claim does.
        let channel = admitted
            .channel
            .zip(plan.sandbox)
            .map(|(unopened, sandbox)| {
                let origin = Origin {
                    job: id,
                    session: session.clone(),
                    sandbox,
                    roots: Arc::clone(&plan.roots),
                };
                unopened.open(Arc::new(origin), self.arrivals.clone())
            });
        let mut env = self.job_env(client_env, session, id, channel.is_some());
        if let Some(dir) = &tmpdir {
            sandbox::set_tmpdir(&mut env, dir);
        }
        // A job confined in its files reads no token file, and writes no cache of the
        // person's: its tools get their registries and bashd's caches (issue 44).
        let tools = Arc::clone(&self.tool_sources.borrow());
        let caches = tmpdir.as_ref().and(tools.caches.clone());
        if tmpdir.is_some() {
            sandbox::set_tool_env(&mut env, &tools.job_env());
        }
        // A confined network is the session's, shared by its jobs of that setting.
        let network = plan
            .sandbox
            .map(|in_force| in_force.network)
            .filter(|network| network.confined())
            .and_then(|network| self.session_network(session, network));
        if plan.sandbox.map(|s| s.network) == Some(Network::AllowList) {
            // Last, over whatever the request's environment said.
            sandbox::network::set_proxy_env(&mut env);
        }
        let (channel, channel_fd) = channel.unzip();
        let spec = SpawnSpec {
            shell: self.shell.clone(),
            command: params.command.clone(),
            workdir: plan.workdir.clone(),
            env: crate::jobs::job::pty::terminal_env(params.pty, env),
            merge_stderr: params.merge_stderr,
            limits: plan.job_limits,
            stdin_pipe: params.stdin == StdinMode::Pipe,
            sandbox: plan.sandbox.map(|in_force| {
                sandbox::spec(
                    in_force,
                    &self.config.sandbox,
                    &plan.roots,
                    tmpdir.as_deref(),
                    &self.runtime_dir,
                    plan.git_write,
                )
            }),
            pty: params.pty,
            channel: channel_fd,
            network,
        };
        let mut spec = spec;
        if let (Some(confined), Some(caches)) = (spec.sandbox.as_mut(), &caches)
            && plan
                .sandbox
                .is_some_and(|s| s.profile == SandboxProfile::WorkspaceWrite)
        {
            confined.writable.push(caches.dir.clone());
            confined.unwalked.push(caches.dir.clone());
        }
        // Unbounded so that a stop is never dropped for want of room: it holds at most
        // a stop per reason and a snapshot per request in flight. Stops sent while the
        // shell is being spawned wait in it for the supervisor.
        let (control, control_rx) = mpsc::unbounded_channel();
        let events_for_stream = events.clone();
        let settings = Settings {
            timeout: plan.timeout,
            on_timeout: params.on_timeout.unwrap_or(self.config.timeouts.on_timeout),
            background_timeout: Duration::from_secs(self.config.timeouts.background_secs)
                .max(plan.timeout),
            on_straggler: self.config.sessions.on_straggler,
            kill_grace: self.config.timeouts.kill_grace,
            limits: plan.limits,
            shape: plan.shape,
            session_dir: self.session_dir(session),
            detached: params.mode == Mode::Background,
            spill_budget: Some(self.spill_ledger.charge(
                session,
                n,
                self.config.limits.max_session_spill_bytes,
                self.config.limits.max_total_spill_bytes,
            )),
            sandbox: plan.sandbox,
            deny_read: spec
                .sandbox
                .as_ref()
                .map(|sandbox| sandbox.deny_read.clone())
                .unwrap_or_default(),
            start_notices: plan.start_notices.clone(),
            // An MCP call returns by its budget; the job's timeout still holds.
            answer_by: (params.mcp_call && params.mode != Mode::Background)
                .then_some(self.config.mcp.max_call)
                .filter(|budget| *budget < plan.timeout),
        };
        let launch = Box::new(Launch {
            events,
            control: control_rx,
            settings,
            cookie: journal::cookie(&self.instance, id),
            merged: params.merge_stderr,
            command: params.command.clone(),
            subscriber: params
                .stream
                .then(|| Subscriber::new(events_for_stream, id, None)),
        });
        let mut job = self.new_job(
            params,
            &plan,
            &admitted.notify,
            id,
            Status::Starting {
                control,
                waiters: Vec::new(),
                launch,
            },
        );
        job.channel = channel;
        self.jobs.insert(n, job);
        self.watchers.touch(n);
        self.running += 1;
        if let Some(entry) = self.sessions.get_mut(session) {
            entry.running += 1;
        }
        // The reaper forks; its answer comes back as a report, so the actor serves
        // other requests meanwhile.
        let (containment, reports) = (self.containment.clone(), self.reports_tx.clone());
        tokio::spawn(async move {
            let made = match tmpdir.as_deref().map(sandbox::make_tmpdir).transpose() {
                Ok(_) => caches
                    .as_ref()
                    .map(|c| {
                        c.make().map_err(|e| {
                            io::Error::new(
                                e.kind(),
                                format!(
                                    "cannot make bashd's tool caches in {}: {e}",
                                    c.dir.display()
                                ),
                            )
                        })
                    })
                    .transpose()
                    .map(drop),
                Err(e) => Err(io::Error::new(
                    e.kind(),
                    format!("cannot make the session's temp dir: {e}"),
                )),
            };
            let spawned = match made {
                Ok(()) => containment.spawn(id, spec).await,
                Err(e) => Err(e),
            };
            let _ = reports.send(Report::Spawned { job: id, spawned });
        });
    }

    /// Checks a request, from the sandboxed job `origin` when it came through that
    /// job's channel, and works out how to run it, before anything is spawned.
    fn plan(
        &self,
        params: &ExecParams,
        origin: Option<&Origin>,
        caller_dir: &CallerDir,
        granted: &[SandboxInForce],
        git_granted: bool,
    ) -> Result<Plan, sandbox::Refused> {
        let invalid = |message: String| {
            sandbox::Refused::Final(ErrorReply::new(ErrorKind::InvalidRequest, message))
        };
        let max_command = self.config.limits.max_command_bytes;
        if params.command.len() > max_command {
            return Err(invalid(format!(
                "command is {} bytes, more than the limit of {max_command} bytes; write it to a script file and run that",
                params.command.len()
            )));
        }
        if !is_valid_session_id(&params.session) {
            return Err(invalid(format!(
                "session id {:?} is not valid: use 1 to 64 of A-Z a-z 0-9 . _ - @",
                params.session
            )));
        }
        if let Some(origin) = origin {
            reach::from_job(origin, &params.session, false)?;
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
        // From inside a job, a hidden path is as unusable as a missing one.
        let hidden = origin.map(|_| &self.config.sandbox.deny_read[..]);
        let workdir = check_workdir(Path::new(&params.workdir), hidden)?;
        // Never a silent no-op: a limit this daemon cannot hold refuses the job.
        self.containment
            .check_limits(&params.limits, LimitsFrom::Request)?;
        let defaults = &self.config.limits.job;
        let job_limits = JobLimits {
            memory_bytes: params.limits.memory_bytes.or(defaults.memory_bytes),
            cpu_millicores: params.limits.cpu_millicores.or(defaults.cpu_millicores),
            pids: params.limits.pids.or(defaults.pids),
        };
        self.containment
            .check_limits(&job_limits, LimitsFrom::Config)?;
        // Never silently unconfined: a sandbox this daemon cannot hold refuses the job.
        let mut sandbox = sandbox::decide(&self.config.sandbox, params, origin, granted).and_then(
            |in_force| match in_force {
                Some(in_force) => self
                    .containment
                    .sandbox()
                    .check(in_force)
                    .map(|()| Some(in_force))
                    .map_err(sandbox::Refused::Final),
                None => Ok(None),
            },
        )?;
        // Where it may write is the person's: the roots of the job it came from, or
        // of the client's directory and the config, never its workdir (issue 42).
        // An unconfined job needs none: it writes what its user may.
        let roots = match origin {
            Some(origin) => Arc::clone(&origin.roots),
            None if sandbox.is_some() => {
                Arc::new(Roots::decide(caller_dir, &self.config.sandbox.writable))
            }
            None => Arc::default(),
        };
        let mut start_notices = Vec::new();
        // Never silently: a memory limit no cgroup holds is the address space's
        // rlimit, which common runtimes do not start under (issue 45).
        if let Some(bytes) = job_limits.memory_bytes
            && !self.containment.memory_by_cgroup()
        {
            start_notices.push(Notice::MemoryAsAddressSpace { bytes });
        }
        if let Some(in_force) = sandbox.as_mut()
            && in_force.profile == SandboxProfile::WorkspaceWrite
        {
            // Resolved, so that neither `..` nor a symlink takes it into a root.
            let resolved = workdir.canonicalize().unwrap_or_else(|_| workdir.clone());
            if let Some(notice) = roots.refusal(&resolved) {
                // As tight as read-only holds it: its $TMPDIR, nothing else.
                in_force.profile = SandboxProfile::ReadOnly;
                start_notices.push(notice);
            }
        }
        // Writing the roots' `.git` (a commit) is a person's to grant (issue 44); it
        // means something only where the roots are writable.
        let git_write = params.git_write
            && sandbox.is_some_and(|in_force| in_force.profile == SandboxProfile::WorkspaceWrite);
        if git_write && !git_granted {
            let in_force = sandbox.expect("set with git_write");
            return Err(sandbox::Refused::Ask {
                asked: in_force,
                why: "writing .git of the writable roots (a commit) needs a person's yes: workspace-write keeps each root's .git read-only, since git runs code from it; have the person grant it (bashc allow), or run git where the person does".to_owned(),
                hint: None,
                git: true,
            });
        }
        super::foreign_session::refuse_other_sessions_dir(
            &self.runtime_dir,
            &params.session,
            &workdir,
            sandbox,
        )?;
        let timeouts = &self.config.timeouts;
        let timeout_secs = match (params.timeout_secs, params.mode) {
            (Some(secs), _) => {
                limits::check_timeout_secs(secs).map_err(|e| bad(Argument::Timeout, e))?
            }
            (None, Mode::Default) => timeouts.default_secs,
            (None, Mode::Slow) => timeouts.slow_secs,
            (None, Mode::Background) => timeouts.background_secs,
        };
        let output = &params.output;
        let zero = [
            (output.max_lines, Argument::MaxLines),
            (output.max_bytes, Argument::MaxBytes),
            (output.head, Argument::Head),
            (output.tail, Argument::Tail),
        ]
        .into_iter()
        .find(|(value, _)| *value == Some(0));
        if let Some((_, what)) = zero {
            return Err(bad(
                what,
                "0 would show nothing of the output; give 1 or more (the whole output is kept either way, to page through)".to_owned(),
            )
            .into());
        }
        let limits = &self.config.limits;
        let max_bytes = params.output.max_bytes.unwrap_or(limits.max_bytes);
        Ok(Plan {
            git_write,
            roots,
            start_notices,
            workdir,
            timeout: Duration::from_secs(timeout_secs),
            job_limits,
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
            sandbox,
        })
    }

    /// The client's environment `client`, then the hardening set over it, then
    /// bashd's own: a sandboxed job's `channel` is named there, and any other job has
    /// none, whatever the client's environment said.
    fn job_env(
        &self,
        mut client: Vec<(Vec<u8>, Vec<u8>)>,
        session: &str,
        job: JobId,
        channel: bool,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut ours: Vec<(&str, String)> = vec![
            (journal::COOKIE_VAR, format!("{}/{job}", self.instance)),
            ("BASHD_SESSION", session.to_owned()),
        ];
        if channel {
            ours.push((
                CHANNEL_ENV,
                bashd_resident_core::wire::CHANNEL_FD.to_string(),
            ));
        }
        let overridden = |key: &[u8]| {
            key == CHANNEL_ENV.as_bytes()
                || self.config.env.iter().any(|(k, _)| k.as_bytes() == key)
                || ours.iter().any(|(k, _)| k.as_bytes() == key)
        };
        client.retain(|(k, _)| !overridden(k));
        let mut env = client;
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

/// What a person's yes to one parked request lets through (`requests/allow.rs`), with
/// the ask's id: a sandbox, or writing its roots' `.git`.
#[derive(Debug, Default)]
pub(in crate::jobs) struct Granted {
    pub(in crate::jobs) sandbox: Vec<(String, SandboxInForce)>,
    pub(in crate::jobs) git: Option<String>,
}

/// What `admit` set aside for a job: its notify patterns and a sandboxed job's
/// channel, not yet opened (it is opened with the job's id, in `launch`).
struct Admitted {
    notify: Option<crate::jobs::job::teller::Spec>,
    channel: Option<crate::sandbox::channel::Unopened>,
}

struct Plan {
    workdir: PathBuf,
    /// A person granted it writing its roots' `.git`.
    git_write: bool,
    /// Where `workspace-write` lets it write (`sandbox/roots.rs`).
    roots: Arc<Roots>,
    /// Why it runs tighter than it asked, for each of its results.
    start_notices: Vec<Notice>,
    timeout: Duration,
    /// The request's limits, with the config's defaults for those it did not set.
    job_limits: JobLimits,
    limits: output::Limits,
    shape: Shape,
    sandbox: Option<SandboxInForce>,
}

/// At most `max` bytes of `text`, cut on a char boundary.
pub(in crate::jobs) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// A refusal of `argument`, which the front end names as its user wrote it.
fn bad(argument: Argument, message: String) -> ErrorReply {
    ErrorReply::new(ErrorKind::InvalidRequest, message)
        .with_hint(ErrorHint::BadArgument { argument })
}

/// The request's workdir, if a job can run there. A request from inside a sandboxed
/// job (`hidden`: the paths hidden from it) gets one answer for every workdir that
/// cannot be used, a hidden one included, so that it cannot tell a hidden name that
/// is a file, or a directory, from one that does not exist (issue 42); one from
/// outside gets DESIGN §8's.
pub(in crate::jobs) fn check_workdir(
    path: &Path,
    hidden: Option<&[PathBuf]>,
) -> Result<PathBuf, ErrorReply> {
    let invalid = |message: String| bad(Argument::Workdir, message);
    if !path.is_absolute() {
        return Err(invalid(format!(
            "Working directory must be an absolute path: {}",
            path.display()
        )));
    }
    let found = std::fs::metadata(path);
    let is_hidden = |hidden: &[PathBuf]| {
        let resolved = path.canonicalize();
        hidden
            .iter()
            .any(|dir| path.starts_with(dir) || resolved.as_ref().is_ok_and(|r| r.starts_with(dir)))
    };
    if let Some(hidden) = hidden
        && (!found.as_ref().is_ok_and(|meta| meta.is_dir()) || is_hidden(hidden))
    {
        return Err(invalid(format!(
            "Working directory is not a directory that exists: {}",
            path.display()
        )));
    }
    match found {
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

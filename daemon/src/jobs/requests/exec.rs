//! `exec` (`bashc exec`, `bash`): runs a command as a job. The request's task asks the
//! policy, sends the job to the actor (`Exec`, a `ToActor`) and forwards the job's
//! responses with `requests::forward` and this request's hooks (`Forwarding`: its
//! cancel, an MCP call's ask budget). The actor's handler runs the request in stages,
//! `plan` → `admit` → `record` → `launch` (see [`JobsActor::exec`]), and asks the
//! reaper for the spawn on a task of its own (the actor never waits for the fork:
//! meanwhile the job is `Starting`); when the answer comes back as a report,
//! `table/start.rs` hands the job to a supervisor.
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
    JobLimits, JobState, Mode, Network, Notice, Response, SandboxInForce, SandboxProfile,
    StdinMode, is_valid_session_id, limits,
};
use tokio::sync::{mpsc, oneshot};

use crate::config::OnCancel;
use crate::jobs::contain::LimitsFrom;
use crate::jobs::job::supervisor::Control;
use crate::jobs::job::supervisor::{JobMeta, Report, Settings, Subscriber};
use crate::jobs::os::spawn::SpawnSpec;
use crate::jobs::table::asks::Parked;
use crate::jobs::table::handle::{JobsHandle, ToActor, shutting_down};
use crate::jobs::table::reach;
use crate::jobs::table::session::Session;
use crate::jobs::table::start::not_run;
use crate::jobs::table::{Job, JobsActor, Launch, Status, cut};
use crate::journal::{self};
use crate::output::{self, Shape};
use crate::policy::Denial;
use crate::sandbox;
use crate::sandbox::channel::{Channel, Origin};
use crate::sandbox::roots::{CallerDir, Roots};

/// `bashc jobs` shows this much of a command.
const LISTED_COMMAND_BYTES: usize = 4096;
/// The longest a job's spawn waits for its client to be sent the job's id.
const TOLD_WAIT: Duration = Duration::from_secs(2);

impl JobsHandle {
    /// Starts a job. Its responses arrive on the returned receiver, which `forward`
    /// reads with the returned hooks; dropping it before `Finished` stops a
    /// foreground job.
    pub(in crate::jobs) async fn exec(
        &self,
        params: ExecParams,
    ) -> (mpsc::Receiver<Response>, Forwarding) {
        let (events, rx) = mpsc::channel(64);
        let (told, heard) = oneshot::channel();
        let forwarding = Forwarding {
            to_background: params.mcp_call,
            job: None,
            asked: None,
            recorded: false,
            told: Some(told),
        };
        // The job's workdir, so that `$PWD`, `$(pwd)` and relative targets are judged
        // as where they will run.
        let denial = self
            .policy_verdict(params.command.clone(), Some(params.workdir.clone()))
            .await
            .err();
        self.tell(Exec {
            params: Box::new(params),
            denial,
            events,
            origin: self.origin.clone(),
            caller_dir: Arc::clone(&self.caller_dir),
            told: heard,
        })
        .await;
        (rx, forwarding)
    }

    /// Asks a job to answer its request now and go on in the background.
    pub(in crate::jobs) async fn detach(&self, job: JobId) {
        self.tell(Detach { job }).await;
    }
}

/// What the forwarding of an `exec`'s responses does beside forwarding them
/// (`requests::forward`). A cancel drops the job's channel, which stops a foreground
/// job (`ended_by = cancel`); an MCP call under `[mcp] on_cancel = "background"`
/// instead asks its job to move to the background and reads on until the job has
/// answered that, so that the job is never taken for abandoned. An MCP call that
/// waits on an ask answers `pending` by its budget (issue 44). Once the job's id
/// (`Recorded`) went out, its spawn is told that it may go.
pub(in crate::jobs) struct Forwarding {
    /// An MCP call, which may move its job to the background rather than stop it.
    to_background: bool,
    job: Option<JobId>,
    /// The ask an MCP call waits on, and when its budget runs out.
    asked: Option<(AskId, tokio::time::Instant)>,
    /// The event that came last was `Recorded`.
    recorded: bool,
    /// Fired once the client has the job's id; dropped, it lets the spawn go too.
    told: Option<oneshot::Sender<()>>,
}

impl super::Hooks for Forwarding {
    async fn came(&mut self, event: &Response, jobs: &JobsHandle, cancelled: bool) {
        self.recorded = matches!(event, Response::Recorded(_));
        let job = match event {
            Response::Recorded(job) => Some(*job),
            Response::Started(started) => Some(started.job),
            Response::Notice(Notice::Asked { ask, .. }) if self.to_background => {
                self.asked = Some((*ask, tokio::time::Instant::now() + jobs.mcp_max_call()));
                None
            }
            _ => None,
        };
        if let Some(job) = job
            && self.job.replace(job).is_none()
        {
            self.asked = None;
            if cancelled {
                jobs.detach(job).await;
            }
        }
    }

    fn sent(&mut self) {
        if self.recorded
            && let Some(told) = self.told.take()
        {
            let _ = told.send(());
        }
    }

    fn answer_by(&self) -> Option<tokio::time::Instant> {
        self.asked.map(|(_, at)| at)
    }

    async fn answer(&mut self, jobs: &JobsHandle) -> Option<Response> {
        let (ask, _) = self.asked.take()?;
        if !jobs.detach_ask(ask).await {
            // Answered meanwhile: its answer is on the way.
            return None;
        }
        Some(Response::Error(
            ErrorReply::new(
                ErrorKind::InvalidRequest,
                format!(
                    "ask {ask} pending: the person has not answered yet; a yes runs the command in the background, and a later call's inbox tells its end"
                ),
            )
            .with_hint(ErrorHint::Ask {
                ask,
                state: AskState::Pending,
            }),
        ))
    }

    async fn cancelled(&mut self, jobs: &JobsHandle) -> bool {
        // Nobody is to be told the job's id now.
        self.told = None;
        if !self.to_background || jobs.mcp_on_cancel() == OnCancel::Kill {
            return false;
        }
        if let Some(job) = self.job {
            jobs.detach(job).await;
        }
        true
    }
}

/// The message: start a job; every response for the request goes to `events`, ending
/// with `Finished` or `Error`. Dropping the receiver of `events` stops a foreground job.
#[derive(Debug)]
pub(in crate::jobs) struct Exec {
    pub(in crate::jobs) params: Box<ExecParams>,
    /// The policy's refusal, checked before the actor sees the request.
    pub(in crate::jobs) denial: Option<Denial>,
    pub(in crate::jobs) events: mpsc::Sender<Response>,
    /// The sandboxed job the request came from, through its channel: it bounds what
    /// the request may start.
    pub(in crate::jobs) origin: Option<Arc<Origin>>,
    /// The directory the client runs in, as read from its connection: its writable
    /// root, for a request that did not come through a job's channel.
    pub(in crate::jobs) caller_dir: Arc<CallerDir>,
    /// Resolves once the client has the job's id (`Response::Recorded`), or never
    /// will: the spawn waits for it.
    pub(in crate::jobs) told: oneshot::Receiver<()>,
}

impl ToActor for Exec {
    type Reply = ();

    fn handle(self, actor: &mut JobsActor) {
        actor.exec(self, Granted::default());
    }

    /// The actor has stopped: the request is told so.
    fn refuse(self) {
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
    /// Runs a request in four stages, each named for what it does and each of which
    /// may refuse the request before the next:
    /// - `plan`: the request checked, and how it would run (its sandbox, writable
    ///   roots, limits); it finds whether the request is looser than its session's
    ///   floor;
    /// - `admit`: what the daemon lets it have (descriptors, a sandboxed job's
    ///   channel); one looser than the floor is admitted by a person instead, so it
    ///   is parked as an ask (`table/asks.rs`: the admit that waits, on no one's
    ///   task), and a yes runs it through here again (`requests/allow.rs`);
    /// - `record`: its session, its id with its `job` line in the journal, and the id
    ///   sent to its client (`Recorded`);
    /// - `launch`: the job `Starting`, its spawn on a task of its own, which waits
    ///   until the client has the id; or `deny`, for a command the policy refused.
    ///
    /// Only `record` and what follows change the table. `granted`: what a person's
    /// yes to this very request lets through. Returns the job's id, when it got one.
    pub(in crate::jobs) fn exec(&mut self, mut exec: Exec, granted: Granted) -> Option<JobId> {
        let granted = self.granted(&exec, granted);
        let sandboxes: Vec<SandboxInForce> = granted.sandbox.iter().map(|(_, s)| *s).collect();
        let staged = self
            .plan(
                &exec.params,
                exec.origin.as_deref(),
                &exec.caller_dir,
                &sandboxes,
                granted.git.is_some(),
            )
            .and_then(|plan| Ok(self.admit(&exec, plan)?));
        let admitted = match staged {
            Ok(admitted) => admitted,
            Err(refused) => {
                self.not_admitted(exec, refused);
                return None;
            }
        };
        let id = match self.record(&exec, &admitted.plan) {
            Ok(id) => id,
            Err(error) => {
                let _ = exec.events.try_send(Response::Error(error));
                return None;
            }
        };
        self.credit_grant(&exec, &admitted.plan, &granted, id);
        match exec.denial.take() {
            Some(denial) => self.deny(&exec, admitted, id, denial),
            None => self.launch(exec, admitted, id),
        }
        Some(id)
    }

    /// What a person let `exec` through: this request's yes, its session's grants,
    /// and, for a request from a sandboxed job, that job's own sandbox (which was).
    fn granted(&mut self, exec: &Exec, mut granted: Granted) -> Granted {
        let session = &exec.params.session;
        granted.sandbox.extend(self.asks.sandbox_grants(session));
        if let Some(origin) = &exec.origin {
            granted
                .sandbox
                .push((origin.job.to_string(), origin.sandbox));
        }
        granted.git = granted.git.or_else(|| self.asks.git_grant(session));
        granted
    }

    /// A request `plan` or `admit` turned down: one looser than its session's floor
    /// is parked as an ask, to wait for a person; any other is told why. Only a person
    /// answers an ask, and a request through a job's channel has none at hand: it is
    /// refused, as that job's own sandbox bounds it.
    fn not_admitted(&mut self, exec: Exec, refused: sandbox::Refused) {
        match refused {
            sandbox::Refused::Ask {
                asked,
                why,
                hint,
                git,
            } if exec.origin.is_none() => self.park(Parked {
                params: exec.params,
                denial: exec.denial,
                events: exec.events,
                caller_dir: exec.caller_dir,
                told: exec.told,
                asked,
                why,
                hint,
                git,
                detached: false,
            }),
            refused => {
                let _ = exec.events.try_send(Response::Error(refused.error()));
            }
        }
    }

    /// Notes which grant let job `id` through, if a floor stood in its way: `bashc
    /// allow --revoke` names the jobs each grant started.
    fn credit_grant(&mut self, exec: &Exec, plan: &Plan, granted: &Granted, id: JobId) {
        if !granted.sandbox.is_empty()
            && exec.origin.is_none()
            && let Err(sandbox::Refused::Ask { asked, .. }) =
                sandbox::decide(&self.config.sandbox, &exec.params, None, &[])
            && let Some((grant, _)) = granted
                .sandbox
                .iter()
                .find(|(_, g)| sandbox::within(asked, *g))
        {
            self.asks.started.entry(grant.clone()).or_default().push(id);
        }
        if plan.git_write
            && let Some(grant) = &granted.git
        {
            self.asks.started.entry(grant.clone()).or_default().push(id);
        }
    }

    /// What a job needs of the daemon before it gets an id: its notify patterns
    /// compiled, descriptors under the budget (a denied command spawns nothing, so it
    /// needs none), and a sandboxed job's channel made.
    fn admit(&mut self, exec: &Exec, plan: Plan) -> Result<Admitted, ErrorReply> {
        let spawns = exec.denial.is_none();
        let notify = crate::jobs::job::teller::Spec::of(&exec.params)?;
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
        Ok(Admitted {
            plan,
            notify,
            channel,
        })
    }

    /// Makes or adopts the job's session and takes its id with its `job` line in the
    /// journal (with what `jobs` lists of a job that is to run, should the daemon
    /// die): a job that could not be recorded is refused, since nothing could clean
    /// up after it. A job to spawn has its id sent to its client now (`Recorded`),
    /// so that a daemon that dies from here on is told as dying under it.
    fn record(&mut self, exec: &Exec, plan: &Plan) -> Result<JobId, ErrorReply> {
        let (params, spawns) = (&exec.params, exec.denial.is_none());
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
        if spawns {
            // The first response on the request's channel (or the first after its
            // `Asked` notice), so there is room for it.
            let _ = exec.events.try_send(Response::Recorded(JobId(n)));
        }
        Ok(JobId(n))
    }

    /// The table's record of job `id` in `status`.
    fn new_job(&self, params: &ExecParams, admitted: &Admitted, id: JobId, status: Status) -> Job {
        let plan = &admitted.plan;
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
            notify: admitted.notify.clone(),
        }
    }

    /// A command the policy refused: a job that ended `denied`, nothing spawned.
    fn deny(&mut self, exec: &Exec, admitted: Admitted, id: JobId, denial: Denial) {
        let params = &exec.params;
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
        let _ = exec
            .events
            .try_send(Response::Finished(Box::new(ended.result.clone())));
        let job = self.new_job(params, &admitted, id, Status::Ended(Box::new(ended)));
        self.jobs.insert(id.0, job);
        self.watchers.touch(id.0);
        self.journal_end(id.0);
        self.mark_finished(session, id.0);
    }

    /// Hands the recorded job to the reaper: its spawn, environment, channel and
    /// supervisor's settings; the actor serves other requests while it forks, and
    /// the answer comes back as `Report::Spawned`. The fork waits until the client
    /// has the job's id (or never will).
    fn launch(&mut self, exec: Exec, mut admitted: Admitted, id: JobId) {
        let Exec {
            mut params,
            events,
            told,
            ..
        } = exec;
        // Moved, not copied, into the job's environment.
        let client_env = std::mem::take(&mut params.env);
        let session = &params.session;
        let n = id.0;
        let plan = &admitted.plan;
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
            .take()
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
            &params,
            &admitted,
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
        let made_dirs = self.made_dirs.clone();
        tokio::spawn(async move {
            let tmpdir_made = tmpdir
                .as_deref()
                .map(|dir| made_dirs.ensure(dir, || sandbox::make_tmpdir(dir)))
                .transpose();
            let made = match tmpdir_made {
                Ok(_) => caches
                    .as_ref()
                    .map(|c| {
                        made_dirs.ensure(&c.dir, || c.make()).map_err(|e| {
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
                Ok(()) => {
                    // Nothing of the job runs before its client has its id: a daemon
                    // that dies under it is then told as dying under the job. A
                    // client that does not read its answers holds its job back this
                    // long at most.
                    let _ = tokio::time::timeout(TOLD_WAIT, told).await;
                    containment.spawn(id, spec).await
                }
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
                    .map_err(|refused| {
                        sandbox::Refused::Final(sandbox::cannot_hold(
                            refused,
                            &self.config.sandbox,
                            params,
                        ))
                    }),
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

/// A request `admit` let through: its plan, its notify patterns and a sandboxed
/// job's channel, not yet opened (it is opened with the job's id, in `launch`).
struct Admitted {
    plan: Plan,
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

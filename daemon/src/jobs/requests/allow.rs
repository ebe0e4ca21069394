//! `allow` (`bashc allow`): the person's answers to asks (issue 44), and the actor's
//! side of an ask: parking a request looser than its session's floor (`park`, from
//! `exec`), its expiry, its answer, the grants that outlive it and their revocation.
//! The asks' state is the table's (`table/asks.rs`); every change goes to the journal.
//!
//! Only a person answers: a request through a job's channel is refused here, and so is
//! one from a process bashd can tell runs inside one of its jobs (its ancestry, its
//! cgroup, its environment's job cookie).

use bashd_protocol::{
    AllowReply, AllowRequest, AskId, AskKind, AskState, ErrorHint, ErrorKind, ErrorReply,
    GrantInfo, GrantScope, InboxEvent, JobId, Killer, Mode, Notice, ProcStat, Response,
};

use crate::jobs::job::supervisor::{Control, Report, Stop, StopReason};
use crate::jobs::requests::exec::{Exec, Granted};
use crate::jobs::table::asks::Parked;
use crate::jobs::table::handle::{JobsHandle, ToActor};
use crate::jobs::table::{JobsActor, Status};

impl JobsHandle {
    /// Serves `bashc allow`, refused to a job: through its channel outright, and from
    /// a process on the socket that the actor finds inside one of its jobs.
    pub(in crate::jobs) async fn allow(
        &self,
        request: AllowRequest,
    ) -> Result<AllowReply, ErrorReply> {
        if let Some(origin) = self.origin() {
            return Err(from_a_job(&format!(
                "this request came through the channel of job {}",
                origin.job
            )));
        }
        let peer = self.peer_pid;
        self.call(Allow { request, peer }).await?
    }

    /// Tells the actor that the MCP call waiting on ask `ask` is to be answered
    /// `pending`: a yes then runs its request in the background, for the inbox to
    /// tell. False when the ask was answered meanwhile: the call waits on.
    pub(in crate::jobs) async fn detach_ask(&self, ask: AskId) -> bool {
        self.call(DetachAsk { ask }).await.unwrap_or(false)
    }

    /// The MCP call budget of the config in force (`[mcp] max_call_secs`).
    pub(in crate::jobs) fn mcp_max_call(&self) -> std::time::Duration {
        self.config.borrow().mcp.max_call
    }
}

/// The refusal of an answer from inside a job, naming how bashd knew.
fn from_a_job(how: &str) -> ErrorReply {
    ErrorReply::new(
        ErrorKind::InvalidRequest,
        format!(
            "only the person answers asks and grants, never a job bashd runs: {how}; answer from a terminal of your own (bashc allow), or in your agent's prompt"
        ),
    )
}

struct Allow {
    request: AllowRequest,
    /// The process that connected, as the socket's credentials name it.
    peer: Option<u32>,
}

impl ToActor for Allow {
    type Reply = Result<AllowReply, ErrorReply>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        if let Some(how) = self.peer.and_then(|pid| actor.inside_a_job(pid)) {
            tracing::warn!("refused an answer to asks from inside a job: {how}");
            let _ = actor
                .journal
                .ask("refused-answer", "-", &[&how.replace(' ', "_")]);
            return Err(from_a_job(&how));
        }
        let via = match &self.request {
            AllowRequest::Answer { via: Some(via), .. } => via.clone(),
            _ => "bashc allow".to_owned(),
        };
        let by = match self.peer {
            Some(pid) => format!("{via} (pid {pid})"),
            None => via,
        };
        actor.allow(self.request, &by)
    }
}

struct DetachAsk {
    ask: AskId,
}

impl ToActor for DetachAsk {
    type Reply = bool;
    fn handle(self, actor: &mut JobsActor) -> bool {
        match actor.asks.parked.get_mut(&self.ask.0) {
            Some(parked) => {
                parked.detached = true;
                parked.params.mode = Mode::Background;
                true
            }
            None => false,
        }
    }
}

impl JobsActor {
    /// Parks a request looser than its session's floor as an ask: it is told the
    /// ask's id at once (`Notice::Asked`), and waits, the actor never, for the answer
    /// or the end of `[sandbox] ask_secs`.
    pub(in crate::jobs) fn park(&mut self, parked: Parked) {
        let lifetime = self.config.sandbox.ask;
        let asked = parked.asked;
        let events = parked.events.clone();
        let (session, command) = (parked.params.session.clone(), parked.params.command.clone());
        let kind = parked.kind();
        let git = parked.git;
        let id = self.asks.park(parked, lifetime);
        tracing::info!(ask = %id, session = %session, what = %kind, "asked a person");
        let what = if git {
            vec!["git-write"]
        } else {
            vec![asked.profile.as_str(), asked.network.as_str()]
        };
        let mut fields: Vec<&str> = vec![&session];
        fields.extend(what);
        fields.push(&command);
        self.audit("asked", id, &fields);
        let _ = events.try_send(Response::Notice(Notice::Asked {
            ask: id,
            kind,
            command: crate::jobs::table::cut(&command, 200),
            expires_secs: lifetime.as_secs(),
        }));
        let reports = self.reports_tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(lifetime).await;
            let _ = reports.send(Report::AskExpired(id));
        });
    }

    /// Opens an ask for the host that bashd's proxy refused to a session (`refusal`),
    /// or gives the one already pending for it; the job that most likely asked ran
    /// `command`. None for a refusal no grant of the host lifts (a listed name that
    /// resolves to this host's own address), and past [`MOST_HOST_ASKS`] pending for
    /// the session: a job trying host after host does not fill the person's list.
    pub(in crate::jobs) fn host_ask(
        &mut self,
        refusal: &crate::network::Refusal,
        command: &str,
    ) -> Option<AskId> {
        if refusal.why != crate::network::RefusedWhy::NotListed {
            return None;
        }
        let pending = self.asks.pending_hosts(Some(&refusal.session));
        if let Some((ask, ..)) = pending
            .iter()
            .find(|(_, _, host, port)| *host == refusal.host && *port == Some(refusal.port))
        {
            return Some(*ask);
        }
        if pending.len() >= MOST_HOST_ASKS {
            return None;
        }
        let lifetime = self.config.sandbox.ask;
        let target = format!("{}:{}", refusal.host, refusal.port);
        let id = self.asks.open_host(
            &refusal.session,
            &refusal.host,
            refusal.port,
            command,
            lifetime,
        );
        tracing::info!(ask = %id, session = %refusal.session, host = %target, "asked a person");
        self.audit("asked", id, &[&refusal.session, "host", &target, command]);
        let reports = self.reports_tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(lifetime).await;
            let _ = reports.send(Report::AskExpired(id));
        });
        Some(id)
    }

    /// Nobody answered ask `ask` in time: its request is refused.
    pub(in crate::jobs) fn ask_expired(&mut self, ask: AskId) {
        let Some(parked) = self.asks.parked.remove(&ask.0) else {
            // A host ask parks no request: it only lapses.
            if self.host_ask_pending(ask).is_some() {
                self.audit("expired", ask, &[]);
                self.asks.settle(ask.0, AskState::Expired, None, None);
            }
            return;
        };
        let secs = self.config.sandbox.ask.as_secs();
        self.audit("expired", ask, &[]);
        self.asks.settle(ask.0, AskState::Expired, None, None);
        self.tell_answer(&parked, ask, AskState::Expired, None);
        let _ = parked.events.try_send(Response::Error(
            ErrorReply::new(
                ErrorKind::InvalidRequest,
                format!(
                    "ask {ask} expired: nobody answered it within {secs} s ([sandbox] ask_secs), so nothing ran. {}",
                    parked.why
                ),
            )
            .with_hint(parked.hint.clone().unwrap_or(ErrorHint::Ask {
                ask,
                state: AskState::Expired,
            })),
        ));
    }

    /// Serves `bashc allow` for `by`.
    fn allow(&mut self, request: AllowRequest, by: &str) -> Result<AllowReply, ErrorReply> {
        let mut reply = AllowReply {
            done: None,
            asks: Vec::new(),
            grants: Vec::new(),
            jobs: Vec::new(),
            killed: false,
        };
        match request {
            AllowRequest::List => {}
            AllowRequest::Answer {
                ask, grant, scope, ..
            } => {
                reply.done = Some(self.answer(ask, grant, scope, by)?);
            }
            AllowRequest::Revoke { id, kill } => {
                let (done, jobs) = self.revoke(&id, kill)?;
                reply.done = Some(done);
                reply.jobs = jobs;
                reply.killed = kill;
            }
            AllowRequest::Host {
                host,
                port,
                session,
                secs,
            } => {
                if host.is_empty() || host.contains(char::is_whitespace) {
                    return Err(ErrorReply::new(
                        ErrorKind::InvalidRequest,
                        format!(
                            "{host:?} is not a host name; give one like pypi.org or 10.0.0.5:8080"
                        ),
                    ));
                }
                let target = match port {
                    Some(port) => format!("{host}:{port}"),
                    None => host.clone(),
                };
                let whom = session.clone().unwrap_or_else(|| "*".to_owned());
                let until = secs.map_or("-".to_owned(), |s| format!("{s}s"));
                // The pending asks it answers: the host's, on its port when one is
                // given, of its session when one is given.
                let answered: Vec<AskId> = self
                    .asks
                    .pending_hosts(session.as_deref())
                    .into_iter()
                    .filter(|(_, _, asked, asked_port)| {
                        *asked == host && (port.is_none() || *asked_port == port)
                    })
                    .map(|(ask, ..)| ask)
                    .collect();
                let id = self.asks.grant_host(None, host, port, session, secs, by);
                self.journal_line("host", &id, &[&target, &whom, &until, by]);
                for ask in &answered {
                    self.audit("granted", *ask, &["host", by]);
                    let scope = GrantScope::Session;
                    self.asks.settle(
                        ask.0,
                        AskState::Granted { scope },
                        Some(by.to_owned()),
                        None,
                    );
                }
                reply.done = Some(match answered.is_empty() {
                    true => format!("granted {id}: host {target}"),
                    false => format!(
                        "granted {id}: host {target}, answering ask {}",
                        list_of(&answered)
                    ),
                });
            }
        }
        self.asks.lapse();
        self.publish_host_grants();
        reply.asks = self.asks.infos.values().cloned().collect();
        reply.grants = self.grant_list();
        Ok(reply)
    }

    /// Answers ask `ask`: a yes runs its request as asked (once, or with a grant for
    /// its session), a no refuses it with what the agent can do.
    fn answer(
        &mut self,
        ask: AskId,
        grant: bool,
        scope: GrantScope,
        by: &str,
    ) -> Result<String, ErrorReply> {
        if let Some((session, host, port)) = self.host_ask_pending(ask) {
            return Ok(self.answer_host(ask, grant, session, host, port, by));
        }
        let Some(parked) = self.asks.parked.remove(&ask.0) else {
            let state = self.asks.infos.get(&ask.0).map(|info| info.state.as_str());
            return Err(ErrorReply::new(
                ErrorKind::InvalidRequest,
                match state {
                    Some(state) => {
                        format!("ask {ask} is {state} already; bashc allow lists the asks")
                    }
                    None => format!("there is no ask {ask}; bashc allow lists the asks"),
                },
            ));
        };
        // A request whose client left is not run for nobody.
        if parked.events.is_closed() && !parked.detached {
            self.audit("withdrawn", ask, &[]);
            self.asks.settle(ask.0, AskState::Withdrawn, None, None);
            return Err(ErrorReply::new(
                ErrorKind::InvalidRequest,
                format!(
                    "ask {ask} was withdrawn: the request that made it was given up (its client left), so nothing ran"
                ),
            ));
        }
        if !grant {
            self.audit("refused", ask, &[by]);
            self.asks
                .settle(ask.0, AskState::Refused, Some(by.to_owned()), None);
            self.tell_answer(&parked, ask, AskState::Refused, None);
            let _ = parked.events.try_send(Response::Error(
                ErrorReply::new(
                    ErrorKind::InvalidRequest,
                    format!(
                        "ask {ask} was refused by the person, so nothing ran. {}",
                        parked.why
                    ),
                )
                .with_hint(parked.hint.clone().unwrap_or(ErrorHint::Ask {
                    ask,
                    state: AskState::Refused,
                })),
            ));
            return Ok(format!("refused {ask}"));
        }
        let kind = parked.kind();
        let Parked {
            params,
            denial,
            events,
            caller_dir,
            told,
            asked,
            detached,
            git,
            ..
        } = parked;
        let (session, command) = (params.session.clone(), params.command.clone());
        self.audit("granted", ask, &[scope.as_str(), by]);
        if scope == GrantScope::Session {
            let sandbox = (!git).then_some(asked);
            self.asks
                .grant_session(ask, &params.session, kind, sandbox, by);
        }
        let granted = if git {
            Granted {
                sandbox: Vec::new(),
                git: Some(ask.to_string()),
            }
        } else {
            Granted {
                sandbox: vec![(ask.to_string(), asked)],
                git: None,
            }
        };
        let exec = Exec {
            params,
            denial,
            events,
            origin: None,
            caller_dir,
            told,
        };
        let job = self.exec(exec, granted);
        self.asks
            .settle(ask.0, AskState::Granted { scope }, Some(by.to_owned()), job);
        if detached {
            self.inboxes.tell(
                &session,
                InboxEvent::AskAnswered {
                    ask,
                    command: crate::jobs::table::cut(&command, 200),
                    state: AskState::Granted { scope },
                    job,
                },
            );
        }
        Ok(match (job, scope) {
            (Some(job), GrantScope::Once) => format!("granted {ask} once: {job} runs"),
            (Some(job), GrantScope::Session) => {
                format!(
                    "granted {ask} for its session: {job} runs, and so may later requests as loose"
                )
            }
            (None, _) => format!(
                "granted {ask}, and its request was refused for another reason (its client was told why)"
            ),
        })
    }

    /// The session, host and port of host ask `ask`, while it is pending.
    fn host_ask_pending(&self, ask: AskId) -> Option<(String, String, Option<u16>)> {
        let info = self.asks.infos.get(&ask.0)?;
        match (&info.kind, info.state) {
            (AskKind::Host { host, port }, AskState::Pending) => {
                Some((info.session.clone(), host.clone(), *port))
            }
            _ => None,
        }
    }

    /// Answers host ask `ask`: a yes grants the host to the ask's session from its
    /// next connection, as a grant named by the ask's id (there is no one request to
    /// run once: `--once` grants it as `--session-wide` does); a no leaves it refused.
    fn answer_host(
        &mut self,
        ask: AskId,
        grant: bool,
        session: String,
        host: String,
        port: Option<u16>,
        by: &str,
    ) -> String {
        let target = match port {
            Some(port) => format!("{host}:{port}"),
            None => host.clone(),
        };
        if !grant {
            self.audit("refused", ask, &[by]);
            self.asks
                .settle(ask.0, AskState::Refused, Some(by.to_owned()), None);
            return format!("refused {ask}: {target} stays refused to session {session}");
        }
        let scope = GrantScope::Session;
        self.audit("granted", ask, &[scope.as_str(), by]);
        self.asks.grant_host(
            Some(ask.to_string()),
            host,
            port,
            Some(session.clone()),
            None,
            by,
        );
        self.asks.settle(
            ask.0,
            AskState::Granted { scope },
            Some(by.to_owned()),
            None,
        );
        format!(
            "granted {ask}: {target} for session {session}, from its next connection (bashc allow --revoke {ask} takes it back)"
        )
    }

    /// Gives the proxy the host grants in force, which it judges each next
    /// connection by; it drops a grant whose time is up itself.
    fn publish_host_grants(&self) {
        let Some(proxy) = &self.proxy else {
            return;
        };
        let grants = self
            .asks
            .grants
            .iter()
            .filter_map(|grant| {
                let AskKind::Host { host, port } = &grant.info.kind else {
                    return None;
                };
                let written = match port {
                    Some(port) => format!("{host}:{port}"),
                    None => host.clone(),
                };
                let entry = written.parse().ok()?;
                Some(crate::network::HostGrant {
                    session: grant.info.session.clone(),
                    entry,
                    until: grant.until,
                })
            })
            .collect();
        proxy.set_host_grants(grants);
    }

    /// Takes back grant `id` (`a3`, `h1`, or a host): new jobs no longer get it. Names
    /// the running jobs it started, and ends them with `kill`.
    fn revoke(&mut self, id: &str, kill: bool) -> Result<(String, Vec<JobId>), ErrorReply> {
        let before = self.asks.grants.len();
        self.asks.grants.retain(|g| {
            g.info.id != id
                && !matches!(&g.info.kind, AskKind::Host { host, port } if *host == id
                    || port.is_some_and(|port| format!("{host}:{port}") == id))
        });
        let once = id
            .parse::<AskId>()
            .ok()
            .and_then(|ask| self.asks.infos.get(&ask.0))
            .is_some_and(|info| {
                matches!(
                    info.state,
                    AskState::Granted {
                        scope: GrantScope::Once
                    }
                )
            });
        let jobs = self.running_of(id);
        // A grant revoked already still names, and ends, the jobs it started.
        if self.asks.grants.len() == before && !once && jobs.is_empty() {
            return Err(ErrorReply::new(
                ErrorKind::InvalidRequest,
                format!("there is no grant {id}; bashc allow lists the grants"),
            ));
        }
        self.audit_raw("revoked", id, &[if kill { "kill" } else { "-" }]);
        if kill {
            for job in &jobs {
                if let Some(Status::Starting { control, .. } | Status::Running { control, .. }) =
                    self.jobs.get(&job.0).map(|job| &job.status)
                {
                    let _ = control.send(Control::Stop(Stop {
                        reason: StopReason::Killed(Killer::Client),
                        signal: rustix::process::Signal::TERM,
                        grace: self.config.timeouts.kill_grace,
                    }));
                }
            }
        }
        let named = match (jobs.is_empty(), kill) {
            (true, _) => "no job it started runs".to_owned(),
            (false, true) => format!("ending the jobs it started: {}", list(&jobs)),
            (false, false) => format!("the jobs it started run on: {}", list(&jobs)),
        };
        Ok((format!("revoked {id}: new jobs ask again; {named}"), jobs))
    }

    /// The running jobs grant `id` let start.
    fn running_of(&self, id: &str) -> Vec<JobId> {
        self.asks
            .started
            .get(id)
            .into_iter()
            .flatten()
            .filter(|job| {
                self.jobs.get(&job.0).is_some_and(|job| {
                    matches!(job.status, Status::Starting { .. } | Status::Running { .. })
                })
            })
            .copied()
            .collect()
    }

    /// The grants in force, each with the running jobs it started.
    fn grant_list(&self) -> Vec<GrantInfo> {
        let mut grants: Vec<GrantInfo> = self
            .asks
            .grants
            .iter()
            .map(|g| GrantInfo {
                running: self.running_of(&g.info.id),
                ..g.info.clone()
            })
            .collect();
        // A yes for one request is listed while the job it started runs.
        for info in self.asks.infos.values() {
            if let (
                AskState::Granted {
                    scope: GrantScope::Once,
                },
                Some(job),
            ) = (info.state, info.job)
            {
                let running = self.running_of(&info.id.to_string());
                if running.contains(&job) {
                    grants.push(GrantInfo {
                        id: info.id.to_string(),
                        kind: info.kind.clone(),
                        session: Some(info.session.clone()),
                        scope: GrantScope::Once,
                        granted_by: info.answered_by.clone().unwrap_or_default(),
                        granted_ms: info.answered_ms.unwrap_or_default(),
                        until_ms: None,
                        running,
                    });
                }
            }
        }
        grants
    }

    /// How bashd can tell that process `pid` runs inside one of its jobs, if it can:
    /// a job's cgroup, a job's first process among its ancestors, or a job's cookie in
    /// its environment. A process that left all three (a daemon reparented to init,
    /// in no job cgroup, its environment cleared) is not found (docs/SANDBOX.md).
    fn inside_a_job(&self, pid: u32) -> Option<String> {
        let marker = format!("/{}-j", self.instance);
        if let Ok(cgroup) = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            && cgroup.contains(&marker)
        {
            return Some(format!(
                "pid {pid} is in the cgroup of a job ({})",
                cgroup.trim()
            ));
        }
        let roots: Vec<(u32, JobId)> = self
            .jobs
            .values()
            .filter_map(|job| job.root.or(job.pid).map(|root| (root, job.id)))
            .collect();
        let mut at = pid;
        for _ in 0..64 {
            if let Some((_, job)) = roots.iter().find(|(root, _)| *root == at) {
                return Some(format!(
                    "pid {pid} descends from job {job}'s first process {at}"
                ));
            }
            match ProcStat::read(at) {
                Some(stat) if stat.ppid > 1 => at = stat.ppid,
                _ => break,
            }
        }
        let cookie = format!("{}={}/", crate::journal::COOKIE_VAR, self.instance);
        if let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ"))
            && environ
                .split(|b| *b == 0)
                .any(|entry| entry.starts_with(cookie.as_bytes()))
        {
            return Some(format!(
                "pid {pid} carries a job's {} in its environment",
                crate::journal::COOKIE_VAR
            ));
        }
        None
    }

    /// Tells the session's inbox the answer to an ask whose MCP call was answered
    /// `pending` (issue 44).
    fn tell_answer(&mut self, parked: &Parked, ask: AskId, state: AskState, job: Option<JobId>) {
        if parked.detached {
            self.inboxes.tell(
                &parked.params.session,
                InboxEvent::AskAnswered {
                    ask,
                    command: crate::jobs::table::cut(&parked.params.command, 200),
                    state,
                    job,
                },
            );
        }
    }

    fn audit(&mut self, what: &str, ask: AskId, fields: &[&str]) {
        self.journal_line(what, &ask.to_string(), fields);
    }

    fn audit_raw(&mut self, what: &str, id: &str, fields: &[&str]) {
        self.journal_line(what, id, fields);
    }

    /// An audit line; one that cannot be written is logged, and the answer stands.
    fn journal_line(&mut self, what: &str, id: &str, fields: &[&str]) {
        let fields: Vec<&str> = fields
            .iter()
            .map(|f| if f.is_empty() { "-" } else { f })
            .collect();
        if let Err(e) = self.journal.ask(what, id, &fields) {
            tracing::warn!("cannot write {what} {id} to the journal: {e}");
        }
    }
}

/// Host asks pending at once for one session, at most.
const MOST_HOST_ASKS: usize = 16;

fn list_of(asks: &[AskId]) -> String {
    asks.iter()
        .map(AskId::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn list(jobs: &[JobId]) -> String {
    jobs.iter()
        .map(JobId::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

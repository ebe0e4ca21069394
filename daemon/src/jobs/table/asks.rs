//! The asks and grants (issue 44), owned by the jobs actor: a request looser than its
//! session's floor is parked here, whole, until a person answers it (`bashc allow`),
//! its time (`[sandbox] ask_secs`) runs out, or its client goes. The actor never waits
//! on one: answering and expiring are messages like any other (`requests/allow.rs`,
//! `Report::AskExpired`), and a parked request is only data.
//!
//! Kept here: the pending requests, what became of recent asks (for `bashc allow
//! --list` and `bashc top`), and the grants that hold beyond one request: a sandbox
//! for a session, a host for a session or every session (for the network proxy).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bashd_protocol::{
    AskId, AskInfo, AskKind, AskState, ExecParams, GrantInfo, GrantScope, JobId, Response,
    SandboxInForce,
};
use tokio::sync::{mpsc, oneshot};

use crate::policy::Denial;
use crate::sandbox::roots::CallerDir;

/// Answered asks kept for `bashc allow --list` and `bashc top`, newest kept.
const KEPT_ANSWERED: usize = 50;

/// A request waiting for a person: all `exec` needs to run it once granted.
pub(in crate::jobs) struct Parked {
    pub(in crate::jobs) params: Box<ExecParams>,
    pub(in crate::jobs) denial: Option<Denial>,
    pub(in crate::jobs) events: mpsc::Sender<Response>,
    pub(in crate::jobs) caller_dir: Arc<CallerDir>,
    /// Resolves once its client has the job's id: its spawn waits for it.
    pub(in crate::jobs) told: oneshot::Receiver<()>,
    /// What it asked for beyond the floor: what a yes lets through.
    pub(in crate::jobs) asked: SandboxInForce,
    /// Why it is beyond the floor, for the words of a refusal.
    pub(in crate::jobs) why: String,
    /// What a refusal points at (`sandbox::Refused::Ask`).
    pub(in crate::jobs) hint: Option<bashd_protocol::ErrorHint>,
    /// It asks to write its roots' `.git` (a commit), not for `asked`.
    pub(in crate::jobs) git: bool,
    /// Its MCP call was answered `ask aN pending`: a yes runs it in the background,
    /// for the session's inbox to tell.
    pub(in crate::jobs) detached: bool,
}

impl Parked {
    /// What it asks for, as listings show it.
    pub(in crate::jobs) fn kind(&self) -> AskKind {
        if self.git {
            AskKind::GitWrite {
                roots: self
                    .caller_dir
                    .root()
                    .map(|root| vec![root.display().to_string()])
                    .unwrap_or_default(),
            }
        } else {
            AskKind::Sandbox {
                profile: self.asked.profile,
                network: self.asked.network,
            }
        }
    }
}

/// A grant beyond one request.
pub(in crate::jobs) struct Grant {
    pub(in crate::jobs) info: GrantInfo,
    /// The sandbox it lets through, for a sandbox grant.
    pub(in crate::jobs) sandbox: Option<SandboxInForce>,
    /// It lets the session's jobs write their roots' `.git`.
    pub(in crate::jobs) git: bool,
    /// When it lapses (`bashc allow HOST --secs N`).
    pub(in crate::jobs) until: Option<Instant>,
}

#[derive(Default)]
pub(in crate::jobs) struct Asks {
    /// The last ask id given out: ids are never reused while the daemon runs.
    last: u64,
    /// The last host grant id (`h1`, `h2`, ...).
    last_host: u64,
    pub(in crate::jobs) parked: BTreeMap<u64, Parked>,
    /// Every ask still pending and the last answered, by number.
    pub(in crate::jobs) infos: BTreeMap<u64, AskInfo>,
    pub(in crate::jobs) grants: Vec<Grant>,
    /// The jobs each grant (by id, `a3`) let start, for `--revoke` to name.
    pub(in crate::jobs) started: BTreeMap<String, Vec<JobId>>,
}

/// Milliseconds since the epoch, as listings give times.
pub(in crate::jobs) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Asks {
    /// Parks `parked` as a new ask that expires after `lifetime`; its id.
    pub(in crate::jobs) fn park(&mut self, parked: Parked, lifetime: Duration) -> AskId {
        self.last += 1;
        let n = self.last;
        let now = now_ms();
        self.infos.insert(
            n,
            AskInfo {
                id: AskId(n),
                kind: parked.kind(),
                session: parked.params.session.clone(),
                command: crate::jobs::table::cut(&parked.params.command, 200),
                state: AskState::Pending,
                asked_ms: now,
                expires_ms: now + lifetime.as_millis() as u64,
                answered_by: None,
                answered_ms: None,
                job: None,
            },
        );
        self.parked.insert(n, parked);
        AskId(n)
    }

    /// Opens an ask for `host:port`, which bashd's proxy refused to `session` (issue
    /// 44), expiring after `lifetime`: nothing waits on it, and a yes grants the host
    /// to the session from its next connection. `command` is the job that most likely
    /// asked.
    pub(in crate::jobs) fn open_host(
        &mut self,
        session: &str,
        host: &str,
        port: u16,
        command: &str,
        lifetime: Duration,
    ) -> AskId {
        self.last += 1;
        let n = self.last;
        let now = now_ms();
        self.infos.insert(
            n,
            AskInfo {
                id: AskId(n),
                kind: AskKind::Host {
                    host: host.to_owned(),
                    port: Some(port),
                },
                session: session.to_owned(),
                command: command.to_owned(),
                state: AskState::Pending,
                asked_ms: now,
                expires_ms: now + lifetime.as_millis() as u64,
                answered_by: None,
                answered_ms: None,
                job: None,
            },
        );
        AskId(n)
    }

    /// The pending host asks of `session`: their ids, and what each asks for.
    pub(in crate::jobs) fn pending_hosts(
        &self,
        session: Option<&str>,
    ) -> Vec<(AskId, String, &str, Option<u16>)> {
        self.infos
            .values()
            .filter(|info| info.state == AskState::Pending)
            .filter(|info| session.is_none_or(|s| s == info.session))
            .filter_map(|info| match &info.kind {
                AskKind::Host { host, port } => {
                    Some((info.id, info.session.clone(), host.as_str(), *port))
                }
                _ => None,
            })
            .collect()
    }

    /// Sets ask `n`'s answer, and forgets the oldest answered asks beyond the bound.
    pub(in crate::jobs) fn settle(
        &mut self,
        n: u64,
        state: AskState,
        by: Option<String>,
        job: Option<JobId>,
    ) {
        if let Some(info) = self.infos.get_mut(&n) {
            info.state = state;
            info.answered_by = by;
            info.answered_ms = Some(now_ms());
            info.job = job;
        }
        let answered: Vec<u64> = self
            .infos
            .iter()
            .filter(|(_, info)| info.state != AskState::Pending)
            .map(|(n, _)| *n)
            .collect();
        for n in answered
            .iter()
            .take(answered.len().saturating_sub(KEPT_ANSWERED))
        {
            self.infos.remove(n);
        }
    }

    /// The sandboxes granted to `session`, each with its grant's id; lapsed grants are
    /// dropped first.
    pub(in crate::jobs) fn sandbox_grants(
        &mut self,
        session: &str,
    ) -> Vec<(String, SandboxInForce)> {
        self.lapse();
        self.grants
            .iter()
            .filter(|g| g.info.session.as_deref().is_none_or(|s| s == session))
            .filter_map(|g| g.sandbox.map(|sandbox| (g.info.id.clone(), sandbox)))
            .collect()
    }

    /// The grant that lets `session`'s jobs write their roots' `.git`, if any.
    pub(in crate::jobs) fn git_grant(&self, session: &str) -> Option<String> {
        self.grants
            .iter()
            .find(|g| g.git && g.info.session.as_deref() == Some(session))
            .map(|g| g.info.id.clone())
    }

    /// Adds a grant for the session of ask `ask`: its sandbox, or writing `.git`.
    pub(in crate::jobs) fn grant_session(
        &mut self,
        ask: AskId,
        session: &str,
        kind: AskKind,
        sandbox: Option<SandboxInForce>,
        by: &str,
    ) {
        let git = matches!(kind, AskKind::GitWrite { .. });
        self.grants.push(Grant {
            git,
            info: GrantInfo {
                id: ask.to_string(),
                kind,
                session: Some(session.to_owned()),
                scope: GrantScope::Session,
                granted_by: by.to_owned(),
                granted_ms: now_ms(),
                until_ms: None,
                running: Vec::new(),
            },
            sandbox,
            until: None,
        });
    }

    /// Adds a host grant; its id: `id` (a host ask's, `a3`), else a new one (`h1`).
    pub(in crate::jobs) fn grant_host(
        &mut self,
        id: Option<String>,
        host: String,
        port: Option<u16>,
        session: Option<String>,
        secs: Option<u64>,
        by: &str,
    ) -> String {
        let id = id.unwrap_or_else(|| {
            self.last_host += 1;
            format!("h{}", self.last_host)
        });
        let now = now_ms();
        self.grants.push(Grant {
            info: GrantInfo {
                id: id.clone(),
                kind: AskKind::Host { host, port },
                session,
                scope: GrantScope::Session,
                granted_by: by.to_owned(),
                granted_ms: now,
                until_ms: secs.map(|secs| now + secs * 1000),
                running: Vec::new(),
            },
            sandbox: None,
            git: false,
            until: secs.map(|secs| Instant::now() + Duration::from_secs(secs)),
        });
        id
    }

    /// Drops the grants whose time is up.
    pub(in crate::jobs) fn lapse(&mut self) {
        let now = Instant::now();
        self.grants
            .retain(|g| g.until.is_none_or(|until| until > now));
    }

    /// Drops the grants of a session that has ended: a session-wide grant is the
    /// session's, and a later session of the same name asks again.
    pub(in crate::jobs) fn session_ended(&mut self, session: &str) {
        self.grants
            .retain(|g| !(g.sandbox.is_some() && g.info.session.as_deref() == Some(session)));
    }
}

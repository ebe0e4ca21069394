//! The sessions' inboxes (issue 32): per session, what happened to its jobs since its
//! last call. The actor owns them (like the sessions they belong to); events come from
//! the actor itself (a background job ended) and from each job's teller
//! (`job/teller.rs`: a pattern matched, the job went quiet, it waits for input), as
//! `Report::Tell`. Each request of the session takes its inbox once, just before its
//! final response (`requests/inbox.rs`), and a closed session drops its own.
//!
//! A counter of non-empty inboxes is shared with every `JobsHandle`, so a call with
//! nothing to say costs one atomic load, not a message to the actor.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bashd_protocol::{Inbox, InboxEvent, JobId, Notice};

use super::{JobsActor, Status};
use crate::jobs::job::supervisor::Ended;
use crate::jobs::job::teller::Teller;
use crate::jobs::table::handle::ToActor;
use crate::network::Refusal;

/// Events one session's inbox holds; older ones are folded into a count.
pub const MAX_EVENTS: usize = 32;

#[derive(Debug)]
pub(in crate::jobs) struct Inboxes {
    by_session: HashMap<String, SessionInbox>,
    /// How many sessions have something to say: only the actor writes it.
    non_empty: Arc<AtomicUsize>,
    /// Per session, the jobs a response of it showed waiting for input, until input is
    /// sent to them or they end: their teller's word that they wait is of the same
    /// quiet stretch, and not news (issue 45).
    shown_waiting: HashMap<String, HashSet<JobId>>,
}

#[derive(Debug, Default)]
struct SessionInbox {
    events: VecDeque<InboxEvent>,
    folded: u64,
}

/// Whether two events of one kind and job are about the same thing: refusals of the
/// same host and port merge, others of a kind always do.
fn same_target(old: &InboxEvent, new: &InboxEvent) -> bool {
    match (old, new) {
        (
            InboxEvent::NetworkRefused { host, port, .. },
            InboxEvent::NetworkRefused {
                host: new_host,
                port: new_port,
                ..
            },
        ) => host == new_host && port == new_port,
        _ => true,
    }
}

impl Inboxes {
    pub(in crate::jobs) fn new() -> Inboxes {
        Inboxes {
            by_session: HashMap::new(),
            non_empty: Arc::new(AtomicUsize::new(0)),
            shown_waiting: HashMap::new(),
        }
    }

    /// The counter a `JobsHandle` reads before asking for an inbox.
    pub(in crate::jobs) fn non_empty(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.non_empty)
    }

    /// Adds `event` to `session`'s inbox. What repeats is merged into the event still
    /// unread: matches into their count (the first match stays), a wait for input or a
    /// quiet stretch into the newest.
    pub(in crate::jobs) fn tell(&mut self, session: &str, event: InboxEvent) {
        if let InboxEvent::WaitingForInput { job, .. } = &event
            && self
                .shown_waiting
                .get(session)
                .is_some_and(|jobs| jobs.contains(job))
        {
            return;
        }
        let inbox = match self.by_session.get_mut(session) {
            Some(inbox) => inbox,
            None => self.by_session.entry(session.to_owned()).or_default(),
        };
        if inbox.events.is_empty() && inbox.folded == 0 {
            self.non_empty.fetch_add(1, Ordering::Relaxed);
        }
        let job = event.job();
        let same = inbox.events.iter_mut().find(|old| {
            old.job() == job
                && std::mem::discriminant(*old) == std::mem::discriminant(&event)
                && same_target(old, &event)
        });
        match (same, event) {
            (Some(InboxEvent::Matched { count, .. }), InboxEvent::Matched { count: more, .. })
            | (
                Some(InboxEvent::NetworkRefused { count, .. }),
                InboxEvent::NetworkRefused { count: more, .. },
            ) => *count += more,
            (Some(old @ (InboxEvent::WaitingForInput { .. } | InboxEvent::Idle { .. })), new) => {
                *old = new;
            }
            (_, event) => {
                if inbox.events.len() == MAX_EVENTS {
                    inbox.events.pop_front();
                    inbox.folded += 1;
                }
                inbox.events.push_back(event);
            }
        }
    }

    /// Takes `session`'s inbox. Events about the jobs `about.told`, whose end the
    /// final response says, are dropped: that response says more. Events about the
    /// jobs `about.kept`, which the response says run on in the background, stay for
    /// the session's next call: the response shows the job as it was, and what the job
    /// did meanwhile (it ended, a line matched) is still news then.
    ///
    /// The jobs `about.waiting`, which the response shows waiting for input, are
    /// marked as shown so: an event that says so again, now or from their teller
    /// later in the same wait, is dropped.
    pub(in crate::jobs) fn take(&mut self, session: &str, about: &About) -> Option<Inbox> {
        if !about.waiting.is_empty() {
            self.shown_waiting
                .entry(session.to_owned())
                .or_default()
                .extend(about.waiting.iter().copied());
        }
        let mut inbox = self.by_session.remove(session)?;
        let shown = |event: &InboxEvent| matches!(event, InboxEvent::WaitingForInput { job, .. } if about.waiting.contains(job));
        // A refusal is told even with its job's end: the result does not say it
        // (the proxy is not the job), so the section after the result does.
        let told = |event: &InboxEvent| {
            event.job().is_some_and(|job| about.told.contains(&job))
                && !matches!(event, InboxEvent::NetworkRefused { .. })
        };
        let (kept, events): (VecDeque<_>, VecDeque<_>) = std::mem::take(&mut inbox.events)
            .into_iter()
            .filter(|event| !told(event) && !shown(event))
            .partition(|event| event.job().is_some_and(|job| about.kept.contains(&job)));
        let taken = Inbox {
            events: events.into(),
            folded: inbox.folded,
        };
        if kept.is_empty() {
            self.non_empty.fetch_sub(1, Ordering::Relaxed);
        } else {
            self.by_session.insert(
                session.to_owned(),
                SessionInbox {
                    events: kept,
                    folded: 0,
                },
            );
        }
        (!taken.is_empty()).then_some(taken)
    }

    /// Tells `refusal` to its session, of the job that most likely made it; dropped
    /// when the session has no `allow-list` job (none can reach the proxy then).
    pub(in crate::jobs) fn network_refused(
        &mut self,
        job: Option<(JobId, String)>,
        refusal: Refusal,
        ask: Option<bashd_protocol::AskId>,
    ) {
        let Some((job, command)) = job else {
            return;
        };
        let message = match ask {
            Some(ask) => format!(
                "{refusal}; ask {ask} is open: the person allows it with bashc allow --ask {ask}"
            ),
            None => refusal.to_string(),
        };
        let event = InboxEvent::NetworkRefused {
            job,
            command,
            host: refusal.host.clone(),
            port: refusal.port,
            message,
            count: 1,
        };
        self.tell(&refusal.session, event);
    }

    /// Input was sent to `job`, or it ended: a wait for input from now on is a new one.
    pub(in crate::jobs) fn input_sent(&mut self, session: &str, job: JobId) {
        if let Some(jobs) = self.shown_waiting.get_mut(session) {
            jobs.remove(&job);
            if jobs.is_empty() {
                self.shown_waiting.remove(session);
            }
        }
    }

    /// Drops a session's inbox with the session.
    pub(in crate::jobs) fn drop_session(&mut self, session: &str) {
        self.shown_waiting.remove(session);
        if self.by_session.remove(session).is_some() {
            self.non_empty.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The jobs a request's final response is about, as [`Inboxes::take`] reads them.
#[derive(Debug, Default)]
pub(in crate::jobs) struct About {
    /// Jobs whose end the response says.
    pub told: Vec<JobId>,
    /// Jobs the response says run on in the background.
    pub kept: Vec<JobId>,
    /// Jobs the response shows waiting for input.
    pub waiting: Vec<JobId>,
}

/// Takes a session's inbox (issue 32), as [`Inboxes::take`] says.
pub(in crate::jobs) struct TakeInbox {
    pub session: String,
    pub about: About,
}

impl ToActor for TakeInbox {
    type Reply = Option<Inbox>;
    fn handle(self, actor: &mut JobsActor) -> Option<Inbox> {
        actor.inboxes.take(&self.session, &self.about)
    }
}

/// A refusal of bashd's proxy, for its session's inbox (issue 43).
pub(in crate::jobs) struct NetworkRefused(pub Refusal);

impl ToActor for NetworkRefused {
    type Reply = Option<bashd_protocol::AskId>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        let job = actor.refused_job(&self.0.session);
        // Only a session with an `allow-list` job reaches the proxy; another's
        // refusal is nobody's to ask about.
        let ask = job
            .as_ref()
            .and_then(|(_, command)| actor.host_ask(&self.0, command));
        actor.inboxes.network_refused(job, self.0, ask);
        ask
    }
}

impl JobsActor {
    /// The job a refusal of `session`'s proxy is told of: its newest running job whose
    /// network is `allow-list`, else its newest such job.
    fn refused_job(&self, session: &str) -> Option<(JobId, String)> {
        let allow_list = |job: &&super::Job| {
            job.session == session
                && job
                    .sandbox
                    .is_some_and(|s| s.network == bashd_protocol::Network::AllowList)
        };
        let running = |job: &&super::Job| {
            matches!(job.status, Status::Running { .. } | Status::Starting { .. })
        };
        let candidates = self.jobs.values().filter(allow_list);
        let job = candidates
            .clone()
            .filter(running)
            .max_by_key(|job| job.id.0)
            .or_else(|| candidates.max_by_key(|job| job.id.0))?;
        Some((job.id, short_command(&job.command)))
    }

    /// Starts the teller of job `n`, now in the background, when it asked to be told
    /// about or may wait for input (`job/teller.rs`).
    pub(in crate::jobs) fn start_teller(&mut self, n: u64, seen: [u64; 2]) {
        let Some(job) = self.jobs.get(&n) else {
            return;
        };
        let Status::Running { control, .. } = &job.status else {
            return;
        };
        let reads_input = job.stdin.is_some();
        if !Teller::wanted(job.notify.as_ref(), reads_input) {
            return;
        }
        let teller = Teller {
            job: job.id,
            session: job.session.clone(),
            command: short_command(&job.command),
            spec: job.notify.clone(),
            reads_input,
            control: control.clone(),
            reports: self.reports_tx.clone(),
            seen,
        };
        tokio::spawn(teller.run());
    }

    /// Tells job `n`'s session that it ended, when it ran in the background: a
    /// foreground job's end is its request's answer.
    pub(in crate::jobs) fn tell_ended(&mut self, n: u64, ended: &Ended) {
        let Some(job) = self.jobs.get(&n) else {
            return;
        };
        self.inboxes.input_sent(&job.session, job.id);
        let closing = self
            .sessions
            .get(&job.session)
            .is_none_or(|session| session.closing.is_some());
        if !job.background || closing {
            return;
        }
        let result = &ended.result;
        let cursor = job.cursors.get(&job.session).copied().unwrap_or_default();
        let lines = [
            ended.streams.stdout.complete_lines,
            ended
                .streams
                .stderr
                .as_ref()
                .map_or(0, |s| s.complete_lines),
        ];
        let new_lines = lines[0].saturating_sub(cursor[0]) + lines[1].saturating_sub(cursor[1]);
        let record = result.record.as_ref();
        let event = InboxEvent::Ended {
            job: job.id,
            command: short_command(&job.command),
            state: result.state,
            exit_code: result.exit_code,
            signal: result.signal,
            duration_ms: result.duration_ms,
            ended_by: record.map(|r| r.ended_by),
            limit: record.and_then(|r| r.limit.clone()),
            sandbox_denied: result
                .notices
                .iter()
                .any(|n| matches!(n, Notice::SandboxDenied { .. })),
            new_lines,
        };
        let session = job.session.clone();
        self.inboxes.tell(&session, event);
    }
}

/// A command as an inbox line names it: its first line, at most 60 characters.
pub fn short_command(command: &str) -> String {
    const MAX_CHARS: usize = 60;
    let first = command.lines().next().unwrap_or_default().trim();
    let mut short: String = first.chars().take(MAX_CHARS).collect();
    if short.len() < first.len() || command.trim().lines().nth(1).is_some() {
        short.push_str("...");
    }
    short
}

#[cfg(test)]
mod tests {
    use super::*;
    use bashd_protocol::StreamName;

    fn matched(job: u64, count: u64) -> InboxEvent {
        InboxEvent::Matched {
            job: JobId(job),
            command: "make".to_owned(),
            pattern: "error".to_owned(),
            stream: StreamName::Stdout,
            line: 3,
            text: "error: one".to_owned(),
            count,
        }
    }

    fn idle(job: u64, idle_secs: u64) -> InboxEvent {
        InboxEvent::Idle {
            job: JobId(job),
            command: "make".to_owned(),
            idle_secs,
        }
    }

    fn refusal(host: &str, port: u16) -> Refusal {
        Refusal {
            session: "s".to_owned(),
            host: host.to_owned(),
            port,
            why: crate::network::RefusedWhy::NotListed,
        }
    }

    /// Issue 43: a refusal of the proxy is told of its job, repeats of one host and
    /// port merge into a count, and it stays in the section after the job's own result
    /// (which does not say it); a session with no `allow-list` job is told nothing.
    #[test]
    fn refusals_merge_by_host_and_survive_their_jobs_result() {
        let mut inboxes = Inboxes::new();
        let job = Some((JobId(4), "curl".to_owned()));
        inboxes.network_refused(job.clone(), refusal("unlisted.test", 443), None);
        inboxes.network_refused(job.clone(), refusal("unlisted.test", 443), None);
        inboxes.network_refused(job.clone(), refusal("other.test", 80), None);
        inboxes.network_refused(None, refusal("third.test", 80), None);
        let told = About {
            told: vec![JobId(4)],
            ..About::default()
        };
        let events = inboxes.take("s", &told).unwrap().events;
        let said: Vec<(String, u64)> = events
            .iter()
            .map(|event| match event {
                InboxEvent::NetworkRefused { message, count, .. } => (message.clone(), *count),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            said,
            [
                (
                    "network: refused unlisted.test:443, not on the allow-list".to_owned(),
                    2
                ),
                (
                    "network: refused other.test:80, not on the allow-list".to_owned(),
                    1
                ),
            ]
        );
    }

    #[test]
    fn an_inbox_is_taken_once() {
        let mut inboxes = Inboxes::new();
        let non_empty = inboxes.non_empty();
        inboxes.tell("s", idle(1, 5));
        assert_eq!(non_empty.load(Ordering::Relaxed), 1);
        assert_eq!(inboxes.take("other", &About::default()), None);
        assert_eq!(
            inboxes.take("s", &About::default()).unwrap().events,
            vec![idle(1, 5)]
        );
        assert_eq!(inboxes.take("s", &About::default()), None);
        assert_eq!(non_empty.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn repeats_merge_and_the_bound_folds_the_oldest() {
        let mut inboxes = Inboxes::new();
        inboxes.tell("s", matched(1, 1));
        inboxes.tell("s", matched(1, 4));
        inboxes.tell("s", idle(1, 5));
        inboxes.tell("s", idle(1, 9));
        let inbox = inboxes.take("s", &About::default()).unwrap();
        assert_eq!(inbox.events, vec![matched(1, 5), idle(1, 9)]);
        for job in 0..MAX_EVENTS as u64 + 10 {
            inboxes.tell("s", idle(job, 1));
        }
        let inbox = inboxes.take("s", &About::default()).unwrap();
        assert_eq!(inbox.events.len(), MAX_EVENTS);
        assert_eq!(inbox.folded, 10);
        assert_eq!(inbox.events[0].job(), Some(JobId(10)));
    }

    #[test]
    fn the_job_a_response_is_about_is_left_out() {
        let mut inboxes = Inboxes::new();
        let non_empty = inboxes.non_empty();
        inboxes.tell("s", idle(1, 5));
        let told = About {
            told: vec![JobId(1)],
            ..About::default()
        };
        assert_eq!(inboxes.take("s", &told), None);
        assert_eq!(non_empty.load(Ordering::Relaxed), 0);
        inboxes.tell("s", idle(2, 5));
        inboxes.drop_session("s");
        assert_eq!(non_empty.load(Ordering::Relaxed), 0);
    }

    /// An answer that its job runs on in the background leaves that job's events for
    /// the next call, and hands out the others'.
    #[test]
    fn the_job_a_running_answer_is_about_waits_for_the_next_call() {
        let mut inboxes = Inboxes::new();
        let non_empty = inboxes.non_empty();
        inboxes.tell("s", idle(1, 5));
        inboxes.tell("s", idle(2, 5));
        let kept = About {
            kept: vec![JobId(1)],
            ..About::default()
        };
        assert_eq!(inboxes.take("s", &kept).unwrap().events, vec![idle(2, 5)]);
        assert_eq!(non_empty.load(Ordering::Relaxed), 1);
        assert_eq!(inboxes.take("s", &kept), None);
        let inbox = inboxes.take("s", &About::default()).unwrap();
        assert_eq!(inbox.events, vec![idle(1, 5)]);
        assert_eq!(non_empty.load(Ordering::Relaxed), 0);
    }

    fn waits(job: u64) -> InboxEvent {
        InboxEvent::WaitingForInput {
            job: JobId(job),
            command: "read".to_owned(),
            prompt: Some("your name?".to_owned()),
        }
    }

    /// A response that showed a job waiting for input drops the inbox's word of it,
    /// and its teller's word of the same wait later; after input is sent, a new wait
    /// is told. Another job's wait is told all along.
    #[test]
    fn a_wait_for_input_the_caller_was_shown_is_not_told_again() {
        let mut inboxes = Inboxes::new();
        inboxes.tell("s", waits(1));
        inboxes.tell("s", waits(2));
        let shown = About {
            kept: vec![JobId(1)],
            waiting: vec![JobId(1)],
            ..About::default()
        };
        assert_eq!(inboxes.take("s", &shown).unwrap().events, vec![waits(2)]);
        assert_eq!(inboxes.take("s", &About::default()), None);
        inboxes.tell("s", waits(1));
        assert_eq!(inboxes.take("s", &About::default()), None);
        inboxes.input_sent("s", JobId(1));
        inboxes.tell("s", waits(1));
        assert_eq!(
            inboxes.take("s", &About::default()).unwrap().events,
            vec![waits(1)]
        );
    }

    #[test]
    fn commands_are_cut_to_one_short_line() {
        assert_eq!(short_command("npm test"), "npm test");
        assert_eq!(short_command("make\nmake install"), "make...");
        assert_eq!(short_command(&"x".repeat(100)).chars().count(), 63);
    }
}

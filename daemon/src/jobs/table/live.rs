//! The actor's side of live jobs (issue 16): adding a live reader to a running job's
//! supervisor (`follow`, `wait --until/--port/--idle`), handing out a job's stdin for
//! `send`, and what `jobs` needs to look at running jobs' processes.

use bashd_protocol::{
    ErrorHint, ErrorKind, ErrorReply, JobId, JobRef, Response, StdinMode, StreamName,
};
use tokio::sync::{mpsc, oneshot};

use super::{Job, JobsActor, Status};
use crate::jobs::job::stdin::StdinHandle;
use crate::jobs::job::supervisor::{Control, Subscriber};
use crate::jobs::table::handle::{Asker, LiveJob, ToActor, Watching};

/// A live reader of `job`'s output (`follow`, `wait` with conditions), as `asker` may;
/// `stream`: `None` for both.
pub(in crate::jobs) struct Subscribe {
    pub asker: Asker,
    pub job: JobRef,
    pub stream: Option<StreamName>,
    pub sink: mpsc::Sender<Response>,
}

impl ToActor for Subscribe {
    type Reply = Result<Watching, ErrorReply>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        actor.subscribe(&self.asker, &self.job, self.stream, self.sink)
    }
}

/// A running job's stdin pipe, for `send`.
pub(in crate::jobs) struct StdinOf {
    pub asker: Asker,
    pub job: JobRef,
}

impl ToActor for StdinOf {
    type Reply = Result<(JobId, StdinHandle), ErrorReply>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        actor.stdin(&self.asker, &self.job)
    }
}

/// A running job's supervisor, for `screen` and `resize`; `acting`: it changes the
/// job (`resize`), so its caller's session is adopted.
pub(in crate::jobs) struct ControlOf {
    pub asker: Asker,
    pub job: JobRef,
    pub acting: bool,
}

impl ToActor for ControlOf {
    type Reply = Result<(JobId, mpsc::UnboundedSender<Control>), ErrorReply>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        actor.control(&self.asker, &self.job, self.acting)
    }
}

impl JobsActor {
    /// A live reader for `job`: the job as it ended, or its supervisor's answer to come
    /// and a waiter for its end.
    pub(in crate::jobs) fn subscribe(
        &mut self,
        asker: &Asker,
        job: &JobRef,
        stream: Option<StreamName>,
        sink: mpsc::Sender<Response>,
    ) -> Result<Watching, ErrorReply> {
        let n = self.reach(job, asker)?;
        if let Status::Running { control, .. } = &self.jobs[&n].status
            && control.is_closed()
        {
            // It has just ended: its report is in the channel.
            while let Ok(report) = self.reports.try_recv() {
                self.report(report);
            }
        }
        let entry = &self.jobs[&n];
        let id = entry.id;
        match &entry.status {
            Status::Ended(ended) => Ok(Watching::Ended {
                result: Box::new(ended.result.clone()),
                streams: Box::new(ended.streams.clone()),
            }),
            Status::Starting { control, .. } | Status::Running { control, .. } => {
                let (reply, subscribed) = oneshot::channel();
                let subscriber = Subscriber::new(sink, id, stream);
                if control
                    .send(Control::Subscribe { subscriber, reply })
                    .is_err()
                {
                    return Err(ending(id));
                }
                let crate::jobs::table::handle::Waiting::Pending {
                    summary,
                    started,
                    result,
                } = self.await_end(n)
                else {
                    return Err(ending(id));
                };
                let cursor = self.jobs[&n]
                    .cursors
                    .get(&asker.caller.session)
                    .copied()
                    .unwrap_or_default();
                let network = self.network_of(&self.jobs[&n]);
                Ok(Watching::Running {
                    summary: Box::new(summary),
                    started,
                    subscribed,
                    result,
                    cursor,
                    network,
                })
            }
        }
    }

    /// The stdin of `job`, for `send`.
    pub(in crate::jobs) fn stdin(
        &mut self,
        asker: &Asker,
        job: &JobRef,
    ) -> Result<(JobId, StdinHandle), ErrorReply> {
        let n = self.reach(job, asker)?;
        self.acting(asker);
        let entry = &self.jobs[&n];
        let invalid = |message: String| ErrorReply::new(ErrorKind::InvalidRequest, message);
        match (&entry.status, &entry.stdin) {
            (Status::Running { .. }, Some(stdin)) => {
                let (id, stdin) = (entry.id, stdin.clone());
                // A wait for input after this one is news again.
                let session = entry.session.clone();
                self.inboxes.input_sent(&session, id);
                Ok((id, stdin))
            }
            (Status::Ended(_), _) => Err(invalid(format!(
                "{} has ended; there is nothing to send to",
                entry.id
            ))),
            (Status::Starting { .. }, _) => Err(invalid(format!(
                "{} is still starting; send again in a moment",
                entry.id
            ))),
            (Status::Running { .. }, None) if entry.stdin_mode == StdinMode::Pipe => {
                Err(invalid(format!("the stdin of {} was closed", entry.id))
                    .with_hint(ErrorHint::StdinClosed))
            }
            (Status::Running { .. }, None) => {
                Err(invalid(format!("{} runs with stdin /dev/null", entry.id))
                    .with_hint(ErrorHint::NeedsStdinPipe))
            }
        }
    }

    /// A running job's supervisor, for `screen` and `resize` (`acting`).
    pub(in crate::jobs) fn control(
        &mut self,
        asker: &Asker,
        job: &JobRef,
        acting: bool,
    ) -> Result<(JobId, mpsc::UnboundedSender<Control>), ErrorReply> {
        let n = self.reach(job, asker)?;
        if acting {
            self.acting(asker);
        }
        let entry = &self.jobs[&n];
        let invalid = |message: String| ErrorReply::new(ErrorKind::InvalidRequest, message);
        match &entry.status {
            Status::Running { control, .. } => Ok((entry.id, control.clone())),
            Status::Starting { .. } => Err(invalid(format!(
                "{} is still starting; ask again in a moment",
                entry.id
            ))),
            Status::Ended(_) => Err(invalid(format!(
                "{} has ended and its terminal with it",
                entry.id
            ))
            .with_hint(ErrorHint::OutputKept { job: entry.id })),
        }
    }

    /// A job's stdin was closed by `send --eof`: later sends are told so.
    pub(in crate::jobs) fn stdin_closed(&mut self, job: JobId) {
        if let Some(entry) = self.jobs.get_mut(&job.0) {
            entry.stdin = None;
        }
    }

    /// For each running job in `numbers`: where its processes are, and its supervisor
    /// when it has a stdin pipe (to ask whether it waits for input).
    pub(in crate::jobs) fn live_jobs(&self, numbers: &[u64]) -> Vec<LiveJob> {
        numbers
            .iter()
            .enumerate()
            .filter_map(|(index, n)| {
                let job = self.jobs.get(n)?;
                let Status::Running { control, .. } = &job.status else {
                    return None;
                };
                Some(LiveJob {
                    index,
                    root: job.root?,
                    probe: job.stdin.as_ref().map(|_| control.clone()),
                    control: control.clone(),
                    published: self.published_for(job),
                })
            })
            .collect()
    }
}

impl JobsActor {
    /// The ports published on the host for `job`'s session network, if it is in one.
    pub(in crate::jobs) fn published_for(&self, job: &Job) -> std::collections::HashMap<u16, u16> {
        self.network_of(job)
            .map(|network| network.published())
            .unwrap_or_default()
    }

    /// The session network `job` is in, if it is in one.
    pub(in crate::jobs) fn network_of(
        &self,
        job: &Job,
    ) -> Option<std::sync::Arc<crate::sandbox::network::SessionNetwork>> {
        let network = job.sandbox.map(|in_force| in_force.network)?;
        let session = self.sessions.get(&job.session)?;
        network
            .confined()
            .then(|| session.networks.get(&network).cloned())
            .flatten()
    }
}

fn ending(job: JobId) -> ErrorReply {
    ErrorReply::new(
        ErrorKind::Internal,
        format!("{job} is ending right now; ask again"),
    )
}

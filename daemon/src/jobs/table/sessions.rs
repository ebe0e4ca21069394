//! Sessions in the job table: owners exiting, lingers ending, adoption, closing.

use bashd_protocol::{Owner, SessionClosed};

use super::{Job, JobsActor};
use crate::jobs::job::supervisor::{Control, Stop, StopReason};
use crate::jobs::table::session::{CloseReply, Closing, SessionEvent};

impl JobsActor {
    pub(in crate::jobs) fn session_event(&mut self, event: SessionEvent) {
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
                let foreground = session
                    .jobs
                    .iter()
                    .filter_map(|n| self.jobs.get(n))
                    .filter(|job| !job.background);
                for control in foreground.filter_map(Job::control) {
                    let _ = control.send(Control::Stop(Stop::term(StopReason::OwnersGone, grace)));
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
    pub(in crate::jobs) fn adopt(&mut self, name: &str, owner: Option<Owner>) {
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
    pub(in crate::jobs) fn close_session(&mut self, name: &str, reply: Option<CloseReply>) {
        let Some(session) = self.sessions.get_mut(name) else {
            if let Some(reply) = reply {
                let _ = reply.send(Err(super::unknown_session(name)));
            }
            return;
        };
        if session.closing.is_none() {
            let grace = self.config.timeouts.kill_grace;
            let mut killed_jobs = 0;
            // A starting job's supervisor finds the stop waiting when it starts.
            let controls = session
                .jobs
                .iter()
                .filter_map(|n| self.jobs.get(n)?.control());
            for control in controls {
                killed_jobs += 1;
                let _ = control.send(Control::Stop(Stop::term(StopReason::SessionEnded, grace)));
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

    pub(in crate::jobs) fn finish_close(&mut self, name: &str) {
        let Some(mut session) = self.sessions.remove(name) else {
            return;
        };
        for n in std::mem::take(&mut session.jobs) {
            self.forget(n);
        }
        self.inboxes.drop_session(name);
        self.asks.session_ended(name);
        let dir = self.session_dir(name);
        self.made_dirs.forget_below(&dir);
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
}

//! The request's side of the inbox (issue 32): which session a request acts for, and
//! handing that session's inbox to the connection just before the request's final
//! response. The inbox itself is the actor's (`table/inbox.rs`).
//!
//! Every request that names a caller takes its caller's inbox: a look at another
//! session's job (`--any-session`) takes the looker's, never that session's. A request
//! from inside a sandboxed job (through its channel) takes none: the inbox is the
//! agent's, and a job's own `bashc` would read events about jobs looser than itself
//! (their commands, what they ask) and take them from the agent that should see them.

use std::sync::atomic::Ordering;

use bashd_protocol::{
    ExecResult, Inbox, JobId, JobState, Notice, Request, RequestId, Response, ServerFrame,
};

use crate::jobs::table::handle::JobsHandle;
use crate::jobs::table::inbox::{About, NetworkRefused, TakeInbox};
use crate::outbound::Outbound;

/// The session a request acts for, whose inbox its final response carries
/// (`Request::session`, the one list of who names a session).
pub fn caller_session(request: &Request) -> Option<String> {
    request.session().map(str::to_owned)
}

/// What a final response says of its jobs: the end of some, whose events it makes
/// needless, or that one runs on in the background, whose events wait for the next
/// call (a job that ended as that answer went out is told then, not dropped as told).
fn about(response: &Response) -> About {
    let about = match response {
        Response::Finished(result) if result.state == JobState::Running => About {
            kept: vec![result.job],
            ..About::default()
        },
        Response::Finished(result) => About {
            told: vec![result.job],
            ..About::default()
        },
        Response::Waited(waited) => About {
            told: waited.done.clone(),
            ..About::default()
        },
        _ => About::default(),
    };
    About {
        waiting: shown_waiting(response),
        ..about
    }
}

/// The jobs `response` shows waiting for input: in a result's notices or its screen,
/// or a screen's.
fn shown_waiting(response: &Response) -> Vec<JobId> {
    let of_result = |result: &ExecResult| {
        let noticed = result.notices.iter().filter_map(|notice| match notice {
            Notice::WaitingForInput { job, .. } => Some(*job),
            _ => None,
        });
        let screen = result
            .screen
            .iter()
            .filter(|screen| screen.waiting_for_input)
            .map(|screen| screen.job);
        noticed.chain(screen).collect::<Vec<_>>()
    };
    match response {
        Response::Finished(result) => of_result(result),
        Response::Waited(waited) => waited.results.iter().flat_map(of_result).collect(),
        Response::Screen(screen) if screen.waiting_for_input => vec![screen.job],
        _ => Vec::new(),
    }
}

impl JobsHandle {
    /// Tells a refusal of bashd's proxy to its session's inbox (issue 43), opening an
    /// ask for a person (issue 44); the ask's id, when one was opened.
    pub async fn network_refused(
        &self,
        refusal: crate::network::Refusal,
    ) -> Option<bashd_protocol::AskId> {
        self.call(NetworkRefused(refusal)).await.ok().flatten()
    }

    /// Takes `session`'s inbox, if it has one, as `Inboxes::take` reads `about`; one
    /// atomic load when no session has one.
    pub(in crate::jobs) async fn take_inbox(&self, session: &str, about: About) -> Option<Inbox> {
        // A response that shows a job waiting for input is marked even when no inbox
        // has anything yet: its teller's word of it may come later.
        if self.inbox_pending.load(Ordering::Relaxed) == 0 && about.waiting.is_empty() {
            return None;
        }
        self.call(TakeInbox {
            session: session.to_owned(),
            about,
        })
        .await
        .ok()
        .flatten()
    }

    /// Sends `session`'s inbox on the connection ahead of `last`, the request's final
    /// response; false if the connection is gone.
    pub async fn deliver_inbox(
        &self,
        session: Option<&str>,
        id: RequestId,
        last: &Response,
        out: &Outbound,
    ) -> bool {
        let Some(session) = session.filter(|_| self.origin.is_none()) else {
            return true;
        };
        match self.take_inbox(session, about(last)).await {
            Some(inbox) => out
                .send(ServerFrame::Response(id, Response::Inbox(inbox)))
                .await
                .is_ok(),
            None => true,
        }
    }
}

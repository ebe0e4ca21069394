//! One file per request a connection makes, each holding all of it (pueue's
//! `message_handler/`, mini-redis's `cmd/`): the `JobsHandle` method the request's
//! task calls, its message to the jobs actor (a [`ToActor`]: the data, and the
//! handler the actor runs), and the actor's handler, with whatever of the table only
//! that request uses. [`serve`] is the one dispatch from a `Request` to its file.
//!
//! Adding a request: its payload and `Request`/`Response` variants in `protocol/`; a
//! file here with its handle method and, if it needs the table, a `ToActor`; one arm
//! in [`serve`]; and each front end's spelling (the CLI's subcommand, MCP's tool).
//! The table's shared queries (`table/queries.rs`: find, reach, lookup, summary) and
//! live readers (`table/live.rs`) are there for every request to use.
//!
//! `inbox.rs` is not a request: it hands a session's inbox to the connection ahead of
//! any request's final response.

pub(super) mod allow;
pub(super) mod check;
mod check_policy;
mod close_session;
pub(super) mod exec;
mod follow;
mod foreign_session;
mod grep;
pub mod inbox;
pub(super) mod jobs;
mod kill;
mod output;
pub(super) mod screen;
mod send;
mod sessions;
mod shutdown;
mod status;
pub(super) mod top;
pub(super) mod wait;
mod wait_many;
pub(super) mod watch;

use bashd_protocol::{ErrorReply, ExecResult, Request, RequestId, Response, ServerFrame};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::jobs::JobsHandle;
#[allow(unused_imports)]
use crate::jobs::table::handle::ToActor;
use crate::outbound::Outbound;

/// Serves request `id` on its task, sending its responses to `out`; `cancel` is the
/// connection's cancel of it. Dropping a request's future is its cancel: a wait stops
/// waiting, and nothing is answered. A request with many responses (`exec`,
/// `follow`) is forwarded by [`forward`], with its own [`Hooks`] for its cancel;
/// `shutdown` answers before it acts.
pub async fn serve(
    id: RequestId,
    request: Request,
    jobs: JobsHandle,
    out: Outbound,
    cancel: CancellationToken,
) {
    match request {
        Request::Exec(params) => {
            let session = Some(params.session.clone());
            let (events, mut hooks) = jobs.exec(params).await;
            forward(id, events, &jobs, session, &out, &cancel, &mut hooks).await;
        }
        Request::Follow(request) => {
            let session = Some(request.caller.session.clone());
            let events = jobs.follow(request);
            forward(id, events, &jobs, session, &out, &cancel, &mut ()).await;
        }
        Request::Shutdown => shutdown::serve(id, jobs, out).await,
        Request::Watch(request) => tokio::select! {
            () = watch::serve(id, request, jobs, out) => {}
            () = cancel.cancelled() => {}
        },
        request => tokio::select! {
            () = answer(id, request, jobs, out) => {}
            () = cancel.cancelled() => {}
        },
    }
}

/// The dispatch of every request with one answer.
async fn answer(id: RequestId, request: Request, jobs: JobsHandle, out: Outbound) {
    let answer = |result: Result<Response, ErrorReply>| match result {
        Ok(response) => response,
        Err(error) => Response::Error(error),
    };
    let finished = |result: Result<ExecResult, ErrorReply>| {
        answer(result.map(|r| Response::Finished(Box::new(r))))
    };
    let session = inbox::caller_session(&request);
    let response = match request {
        Request::Send(request) => answer(jobs.send(request).await.map(Response::Sent)),
        Request::Grep(request) => answer(jobs.grep(request).await.map(Response::Page)),
        Request::Screen(request) => answer(jobs.screen(request).await.map(Response::Screen)),
        Request::Resize(request) => answer(jobs.resize(request).await.map(Response::Screen)),
        // Served by `serve`; a cancel has no answer.
        Request::Exec(_)
        | Request::Follow(_)
        | Request::Shutdown
        | Request::Watch(_)
        | Request::Cancel(_) => return,
        Request::Output(request) => answer(jobs.output(request).await.map(Response::Page)),
        Request::CheckPolicy(check) => Response::Policy(jobs.check_policy(check).await),
        Request::Status => match jobs.status().await {
            Some(status) => Response::Status(status),
            None => Response::Error(crate::jobs::shutting_down()),
        },
        Request::Jobs(request) => answer(jobs.jobs(request).await.map(Response::Jobs)),
        Request::Check(request) => finished(jobs.check(request).await),
        Request::Wait(request) => finished(jobs.wait(request).await),
        Request::WaitMany(request) => answer(jobs.wait_many(request).await.map(Response::Waited)),
        Request::Top(request) => answer(jobs.top(request).await.map(Response::Top)),
        Request::Kill(request) => finished(jobs.kill(request).await),
        Request::Sessions => answer(jobs.sessions().await.map(Response::Sessions)),
        Request::Allow(request) => answer(jobs.allow(request).await.map(Response::Allow)),
        Request::CloseSession(session) => answer(
            jobs.close_session(session)
                .await
                .map(Response::SessionClosed),
        ),
    };
    if jobs
        .deliver_inbox(session.as_deref(), id, &response, &out)
        .await
    {
        let _ = out.send(ServerFrame::Response(id, response)).await;
    }
}

/// What a request with many responses does beside forwarding them, in [`forward`]:
/// `follow` nothing (`()`), `exec` its own (`exec::Forwarding`). By default a cancel
/// ends the forwarding at once, which drops the request's channel.
pub(super) trait Hooks: Send {
    /// `event` came, and is about to go out, or, after a cancel that keeps reading
    /// (`cancelled`), to be dropped.
    async fn came(&mut self, _event: &Response, _jobs: &JobsHandle, _cancelled: bool) {}

    /// The event that came last went out to the client.
    fn sent(&mut self) {}

    /// When the request is to answer by itself, without waiting for its last response.
    fn answer_by(&self) -> Option<Instant> {
        None
    }

    /// At `answer_by`: the answer to end with, or none to go on waiting.
    async fn answer(&mut self, _jobs: &JobsHandle) -> Option<Response> {
        None
    }

    /// The request was cancelled: whether its responses are still to be read, and
    /// dropped, until its last, rather than its channel dropped now.
    async fn cancelled(&mut self, _jobs: &JobsHandle) -> bool {
        false
    }
}

impl Hooks for () {}

/// Forwards the responses of a request that has many (`exec`, `follow`) until its
/// last, its own answer (`Hooks::answer`) or its cancel; nothing is sent after a
/// cancel. The session's inbox goes just before the last.
async fn forward(
    id: RequestId,
    mut events: mpsc::Receiver<Response>,
    jobs: &JobsHandle,
    session: Option<String>,
    out: &Outbound,
    cancel: &CancellationToken,
    hooks: &mut impl Hooks,
) {
    let session = session.as_deref();
    let mut cancelled = false;
    loop {
        let answer_by = hooks.answer_by().filter(|_| !cancelled);
        // Cancelling any branch loses nothing: events stay in their channel.
        let event = tokio::select! {
            event = events.recv() => event,
            () = async { tokio::time::sleep_until(answer_by.expect("polled only when set")).await },
                if answer_by.is_some() => {
                let Some(answer) = hooks.answer(jobs).await else {
                    continue;
                };
                if jobs.deliver_inbox(session, id, &answer, out).await {
                    let _ = out.send(ServerFrame::Response(id, answer)).await;
                }
                return;
            }
            () = cancel.cancelled(), if !cancelled => {
                if !hooks.cancelled(jobs).await {
                    return;
                }
                cancelled = true;
                continue;
            }
        };
        let Some(event) = event else { return };
        hooks.came(&event, jobs, cancelled).await;
        let last = matches!(event, Response::Finished(_) | Response::Error(_));
        if cancelled {
            if last {
                return;
            }
            continue;
        }
        if last && !jobs.deliver_inbox(session, id, &event, out).await {
            return;
        }
        if out.send(ServerFrame::Response(id, event)).await.is_err() || last {
            return;
        }
        hooks.sent();
    }
}

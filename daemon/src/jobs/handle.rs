//! The cloneable way to talk to the job table: each call sends one command to the
//! actor and, where it answers, waits on a oneshot.

use std::sync::Arc;

use bashd_protocol::{
    ErrorKind, ErrorReply, ExecParams, OutputPage, OutputRequest, Response, StatusInfo,
};
use tokio::sync::{mpsc, oneshot};

use super::supervisor::SourceReply;
use crate::output;
use crate::policy::{Denial, Policy};

/// Commands longer than this are checked on a blocking thread: parsing them takes long
/// enough to hold up other requests on the same worker.
const CHECK_INLINE_BYTES: usize = 16 * 1024;

/// A command for the actor.
#[derive(Debug)]
pub enum Cmd {
    /// Start a job; every response for the request goes to `events`, ending with
    /// `Finished` or `Error`. Dropping the receiver of `events` stops a foreground job.
    Exec {
        params: Box<ExecParams>,
        /// The policy's refusal, checked before the actor sees the request.
        denial: Option<Denial>,
        events: mpsc::Sender<Response>,
    },
    /// A snapshot of one stream of a job, for paging.
    Output {
        request: OutputRequest,
        reply: SourceReply,
    },
    Status {
        reply: oneshot::Sender<StatusInfo>,
    },
    /// Stop every job and end the actor; the reply comes when all jobs are gone.
    Shutdown {
        reply: oneshot::Sender<()>,
    },
}

#[derive(Debug, Clone)]
pub struct JobsHandle {
    pub(super) cmds: mpsc::Sender<Cmd>,
    pub(super) policy: Arc<Policy>,
}

impl JobsHandle {
    /// Starts a job. Its responses arrive on the returned receiver; dropping it before
    /// `Finished` stops the job.
    pub async fn exec(&self, params: ExecParams) -> mpsc::Receiver<Response> {
        let (events, rx) = mpsc::channel(64);
        let denial = self.check(params.command.clone()).await.err();
        let cmd = Cmd::Exec {
            params: Box::new(params),
            denial,
            events: events.clone(),
        };
        if self.cmds.send(cmd).await.is_err() {
            let _ = events.send(Response::Error(shutting_down())).await;
        }
        rx
    }

    /// Checks a command against the policy, off the async workers when it is long.
    pub async fn check(&self, command: String) -> Result<(), Denial> {
        if command.len() <= CHECK_INLINE_BYTES {
            return self.policy.check(&command);
        }
        let policy = Arc::clone(&self.policy);
        tokio::task::spawn_blocking(move || policy.check(&command))
            .await
            .unwrap_or_else(|_| {
                Err(Denial {
                    rule: "unparsable".into(),
                    message: "permission denied: unparsable: checking the command failed inside bashd; put it in a script file".into(),
                })
            })
    }

    /// A page of a job's output. The file is read on a blocking thread, never on the
    /// actor or the job's supervisor.
    pub async fn output(&self, request: OutputRequest) -> Result<OutputPage, ErrorReply> {
        let (reply, answer) = oneshot::channel();
        let (job, stream, offset) = (request.job.clone(), request.stream, request.offset);
        let cmd = Cmd::Output { request, reply };
        self.cmds.send(cmd).await.map_err(|_| shutting_down())?;
        // The reply is dropped unanswered only when the job ends at that moment.
        let (source, limit) = answer.await.map_err(|_| {
            ErrorReply::new(
                ErrorKind::Internal,
                format!("{job} ended while its output was being read; ask again"),
            )
        })??;
        tokio::task::spawn_blocking(move || output::page(source, job, stream, offset, limit))
            .await
            .map_err(|e| ErrorReply::new(ErrorKind::Internal, format!("paging failed: {e}")))?
    }

    pub async fn status(&self) -> Option<StatusInfo> {
        let (reply, answer) = oneshot::channel();
        self.cmds.send(Cmd::Status { reply }).await.ok()?;
        answer.await.ok()
    }

    /// Stops every job; returns when they are gone (or the actor already ended).
    pub async fn shutdown(&self) {
        let (reply, answer) = oneshot::channel();
        if self.cmds.send(Cmd::Shutdown { reply }).await.is_ok() {
            let _ = answer.await;
        }
    }
}

pub fn shutting_down() -> bashd_protocol::ErrorReply {
    bashd_protocol::ErrorReply::new(
        bashd_protocol::ErrorKind::ShuttingDown,
        "bashd is shutting down and takes no new commands",
    )
}

//! The cloneable way to talk to the job table: each call sends one command to the
//! actor and, where it answers, waits on a oneshot.

use bashd_protocol::{
    ErrorKind, ErrorReply, ExecParams, OutputPage, OutputRequest, Response, StatusInfo,
};
use tokio::sync::{mpsc, oneshot};

use super::supervisor::SourceReply;
use crate::output;

/// A command for the actor.
#[derive(Debug)]
pub enum Cmd {
    /// Start a job; every response for the request goes to `events`, ending with
    /// `Finished` or `Error`. Dropping the receiver of `events` stops a foreground job.
    Exec {
        params: Box<ExecParams>,
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
}

impl JobsHandle {
    /// Starts a job. Its responses arrive on the returned receiver; dropping it before
    /// `Finished` stops the job.
    pub async fn exec(&self, params: ExecParams) -> mpsc::Receiver<Response> {
        let (events, rx) = mpsc::channel(64);
        let cmd = Cmd::Exec {
            params: Box::new(params),
            events: events.clone(),
        };
        if self.cmds.send(cmd).await.is_err() {
            let _ = events.send(Response::Error(shutting_down())).await;
        }
        rx
    }

    /// A page of a job's output. The file is read on a blocking thread, never on the
    /// actor or the job's supervisor.
    pub async fn output(&self, request: OutputRequest) -> Result<OutputPage, ErrorReply> {
        let (reply, answer) = oneshot::channel();
        let (job, stream, offset) = (request.job.clone(), request.stream, request.offset);
        let cmd = Cmd::Output { request, reply };
        self.cmds.send(cmd).await.map_err(|_| shutting_down())?;
        let (source, limit) = answer.await.map_err(|_| shutting_down())??;
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

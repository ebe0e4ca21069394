//! `close-session` (`bashc close-session`, `bash_close_session`): stops a session's
//! running jobs, forgets its finished ones and removes its directory, answering once
//! its last job has ended.

use std::sync::Arc;

use bashd_protocol::{ErrorReply, SessionClosed};
use tokio::sync::oneshot;

use crate::jobs::table::JobsActor;
use crate::jobs::table::handle::{JobsHandle, ToActor, shutting_down};
use crate::sandbox::channel::Origin;

impl JobsHandle {
    pub(in crate::jobs) async fn close_session(
        &self,
        session: String,
    ) -> Result<SessionClosed, ErrorReply> {
        let origin = self.origin.clone();
        let closed = self.call(CloseSession { session, origin }).await??;
        closed.await.map_err(|_| shutting_down())?
    }
}

/// The message: close `session`, as `origin` (a sandboxed job) may.
struct CloseSession {
    session: String,
    origin: Option<Arc<Origin>>,
}

impl ToActor for CloseSession {
    /// The answer comes when the session's last job has ended.
    type Reply = Result<oneshot::Receiver<Result<SessionClosed, ErrorReply>>, ErrorReply>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        actor.may_close(&self.session, self.origin.as_deref())?;
        let (reply, closed) = oneshot::channel();
        actor.close_session(&self.session, Some(reply));
        Ok(closed)
    }
}

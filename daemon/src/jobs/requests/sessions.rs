//! `sessions` (`bashc sessions`, `bash_sessions`): every session with its owners and
//! jobs; to a sandboxed job, its own only.

use std::sync::Arc;

use bashd_protocol::{ErrorReply, SessionInfo};

use crate::jobs::table::JobsActor;
use crate::jobs::table::handle::{JobsHandle, ToActor};
use crate::sandbox::channel::Origin;

impl JobsHandle {
    pub(in crate::jobs) async fn sessions(&self) -> Result<Vec<SessionInfo>, ErrorReply> {
        let origin = self.origin.clone();
        self.call(Sessions { origin }).await
    }
}

/// The message: the sessions `origin` (a sandboxed job) may see.
struct Sessions {
    origin: Option<Arc<Origin>>,
}

impl ToActor for Sessions {
    type Reply = Vec<SessionInfo>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        actor.session_list(self.origin.as_deref())
    }
}

impl JobsActor {
    /// Every session; to a sandboxed job, its own only.
    fn session_list(&self, origin: Option<&crate::sandbox::channel::Origin>) -> Vec<SessionInfo> {
        let mut list: Vec<SessionInfo> = self
            .sessions
            .iter()
            .filter(|(name, _)| origin.is_none_or(|origin| **name == origin.session))
            .map(|(name, session)| {
                session.info(name, self.session_dir(name).to_string_lossy().into_owned())
            })
            .collect();
        list.sort_by(|a, b| a.session.cmp(&b.session));
        list
    }
}

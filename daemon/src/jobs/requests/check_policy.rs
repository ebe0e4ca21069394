//! `check-policy` (`bashc policy check`): the policy's verdict on a command, without
//! running it, in the caller's directory; `exec` asks the same, with the job's workdir.

use std::sync::Arc;

use bashd_protocol::{PolicyCheck, PolicyVerdict};

use crate::jobs::table::handle::JobsHandle;
use crate::policy::Denial;

/// Commands longer than this are checked on a blocking thread: parsing them takes long
/// enough to hold up other requests on the same worker.
const CHECK_INLINE_BYTES: usize = 16 * 1024;

impl JobsHandle {
    /// The verdict as the answer to `check-policy`: the one `exec` would give in the
    /// same workdir, so a check from a subdirectory sees what `..` and `.` name there.
    pub(in crate::jobs) async fn check_policy(&self, check: PolicyCheck) -> PolicyVerdict {
        let PolicyCheck { command, workdir } = check;
        match self.policy_verdict(command, workdir).await {
            Ok(()) => PolicyVerdict {
                allowed: true,
                rule: None,
                message: None,
            },
            Err(denial) => PolicyVerdict {
                allowed: false,
                rule: Some(denial.rule),
                message: Some(denial.message),
            },
        }
    }

    /// Checks a command against the policy, as run in `workdir` when one is known,
    /// off the async workers when it is long. A short command's verdict is kept by the
    /// policy in force, for the next time it is asked.
    pub async fn policy_verdict(
        &self,
        command: String,
        workdir: Option<String>,
    ) -> Result<(), Denial> {
        let config = Arc::clone(&self.config.borrow());
        if command.len() <= CHECK_INLINE_BYTES {
            return config.policy.verdict(command, workdir);
        }
        tokio::task::spawn_blocking(move || config.policy.check_in(&command, workdir.as_deref()))
            .await
            .unwrap_or_else(|_| {
                Err(Denial {
                    rule: "unparsable".into(),
                    message: "permission denied: unparsable: checking the command failed inside bashd; put it in a script file".into(),
                })
            })
    }
}

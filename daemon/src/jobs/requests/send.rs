//! `send` (`bashc send`, `bash_send`): writes bytes, keys or an end of file to a running
//! job's stdin, through the small task that owns its pipe (`job/stdin.rs`); with
//! `--screen`, answers a terminal job's screen once it has settled.

use std::time::Duration;

use bashd_protocol::{ErrorKind, ErrorReply, JobId, SendReply, SendRequest};

use crate::jobs::job::stdin::SendError;
use crate::jobs::table::JobsActor;
use crate::jobs::table::handle::{JobsHandle, ToActor};
use crate::jobs::table::live::StdinOf;

impl JobsHandle {
    /// Writes to a job's stdin pipe.
    pub(in crate::jobs) async fn send(
        &self,
        request: SendRequest,
    ) -> Result<SendReply, ErrorReply> {
        let SendRequest {
            caller,
            job: job_ref,
            mut bytes,
            eof,
            keys,
            literal,
            screen_settle_ms,
            any_session,
        } = request;
        let asker = self.asker(caller, any_session);
        if !keys.is_empty() {
            bytes.extend(self.key_bytes(&asker, &job_ref, &keys, literal).await?);
        }
        let watcher = asker.clone();
        // The screen before the keys, so that the answer waited for is theirs.
        let before = match screen_settle_ms {
            Some(_) => self.screen_now(watcher.clone(), job_ref.clone()).await,
            None => None,
        };
        let (job, stdin) = self
            .call(StdinOf {
                asker,
                job: job_ref.clone(),
            })
            .await??;
        let asked = bytes.len();
        let sent = stdin.send(bytes, eof).await;
        if eof || matches!(sent, Ok(ref s) if s.closed) {
            self.tell(StdinClosed { job }).await;
        }
        let invalid = |message: String| ErrorReply::new(ErrorKind::InvalidRequest, message);
        match sent {
            Ok(sent) => {
                let screen = match screen_settle_ms {
                    Some(ms) => {
                        let settle = Duration::from_millis(ms);
                        self.settled_screen(watcher, job_ref, settle, before).await
                    }
                    None => None,
                };
                Ok(SendReply {
                    job,
                    written: sent.written,
                    closed: sent.closed,
                    screen,
                })
            }
            Err(SendError::Full { written }) => Err(invalid(format!(
                "{job} is not reading its stdin: {written} of {asked} bytes went in before its pipe stayed full for {} s",
                crate::jobs::job::stdin::SEND_WAIT.as_secs()
            ))),
            Err(SendError::Gone { written }) => Err(invalid(format!(
                "no process of {job} reads its stdin any more ({written} of {asked} bytes written)"
            ))),
            Err(SendError::Closed) => Err(invalid(format!(
                "the stdin of {job} was closed (eof); it reads no more"
            ))),
            Err(SendError::Io(e)) => Err(ErrorReply::new(
                ErrorKind::Internal,
                format!("cannot write to the stdin of {job}: {e}"),
            )),
        }
    }
}

/// The message: `send --eof` closed `job`'s stdin, or its reader went away.
struct StdinClosed {
    job: JobId,
}

impl ToActor for StdinClosed {
    type Reply = ();
    fn handle(self, actor: &mut JobsActor) {
        actor.stdin_closed(self.job);
    }
}

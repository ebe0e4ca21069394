//! The requests of terminal jobs (`exec --pty`): `screen`, `resize`, and the keys and
//! settled screen of `send`. The screen itself lives with the job's supervisor
//! (`pty/screen.rs`); these ask it through the job's control channel.

use std::time::{Duration, Instant};

use bashd_protocol::{
    ErrorHint, ErrorKind, ErrorReply, ExecResult, JobId, JobRef, JobRequest, JobState,
    ResizeRequest, ScreenInfo,
};
use tokio::sync::{mpsc, oneshot};

use crate::jobs::job::supervisor::Control;
use crate::jobs::table::handle::{Asker, JobsHandle};
use crate::jobs::table::live::ControlOf;

/// The longest a `send --screen` waits for the output to settle.
const SETTLE_AT_MOST: Duration = Duration::from_secs(5);
/// How often a settling screen is looked at.
const SETTLE_LOOK: Duration = Duration::from_millis(5);
/// How long a screen the keys have not changed yet is waited on before it is taken
/// as their answer: a program on a loaded machine may take longer than the settle
/// time to draw its first byte, and keys that draw nothing are rare.
const FIRST_CHANGE_AT_MOST: Duration = Duration::from_secs(2);

impl JobsHandle {
    /// The current screen of a terminal job.
    pub async fn screen(&self, request: JobRequest) -> Result<ScreenInfo, ErrorReply> {
        let asker = self.asker(request.caller, request.any_session);
        let (job, control) = self.control(asker, request.job, false).await?;
        Ok(look(job, &control).await?.0)
    }

    /// Gives a terminal job a new size, then answers its screen.
    pub async fn resize(&self, request: ResizeRequest) -> Result<ScreenInfo, ErrorReply> {
        let asker = self.asker(request.caller, request.any_session);
        let (job, control) = self.control(asker, request.job, true).await?;
        let (reply, answer) = oneshot::channel();
        control
            .send(Control::Resize {
                size: request.size,
                reply,
            })
            .map_err(|_| ended(job))?;
        answer
            .await
            .map_err(|_| ended(job))?
            .map_err(|e| invalid(format!("cannot resize {job}: {e}")))?;
        Ok(look(job, &control).await?.0)
    }

    /// The bytes of `keys` for the job (`send --keys`): cursor keys as the program on
    /// its terminal asked for them. A job on pipes gets the normal spelling.
    pub(in crate::jobs) async fn key_bytes(
        &self,
        asker: &Asker,
        job: &JobRef,
        keys: &[String],
        literal: bool,
    ) -> Result<Vec<u8>, ErrorReply> {
        let application_cursor = match self.control(asker.clone(), job.clone(), false).await {
            Ok((id, control)) => look(id, &control).await.is_ok_and(|(_, app)| app),
            Err(_) => false,
        };
        Ok(crate::jobs::job::pty::keys::encode(
            keys,
            literal,
            application_cursor,
        ))
    }

    /// The screen of a terminal job as it is now, if it has one: what
    /// [`JobsHandle::settled_screen`] tells the answer to keys from.
    pub(in crate::jobs) async fn screen_now(
        &self,
        asker: Asker,
        job: JobRef,
    ) -> Option<ScreenInfo> {
        let (id, control) = self.control(asker, job, false).await.ok()?;
        Some(look(id, &control).await.ok()?.0)
    }

    /// The screen once it has changed from `before` (the screen before the keys) and
    /// then not changed for `settle`, at most [`SETTLE_AT_MOST`]; a screen the keys
    /// have not changed is taken after [`FIRST_CHANGE_AT_MOST`]. `None` when the job
    /// has no terminal or has ended.
    pub(in crate::jobs) async fn settled_screen(
        &self,
        asker: Asker,
        job: JobRef,
        settle: Duration,
        before: Option<ScreenInfo>,
    ) -> Option<ScreenInfo> {
        let (id, control) = self.control(asker, job, false).await.ok()?;
        let started = Instant::now();
        let mut last = look(id, &control).await.ok()?.0;
        let mut answered = before.is_some_and(|before| differs(&before, &last));
        let mut same_since = Instant::now();
        loop {
            tokio::time::sleep(SETTLE_LOOK).await;
            let Ok((now, _)) = look(id, &control).await else {
                return Some(last);
            };
            if differs(&now, &last) {
                same_since = Instant::now();
                answered = true;
            }
            last = now;
            let settled = same_since.elapsed() >= settle
                && (answered || started.elapsed() >= FIRST_CHANGE_AT_MOST);
            if settled || started.elapsed() >= SETTLE_AT_MOST {
                return Some(last);
            }
        }
    }

    /// `result` with its screen, when it is of a running terminal job whose program
    /// drew on it (the alternate screen or cursor addressing): `wait` and `check` show
    /// that screen in place of the output tail, as the job's `exec` result did.
    pub(in crate::jobs) async fn with_screen(
        &self,
        asker: Asker,
        mut result: ExecResult,
    ) -> ExecResult {
        if result.state != JobState::Running || result.screen.is_some() {
            return result;
        }
        let job = JobRef::Id(result.job.to_string());
        if let Ok((id, control)) = self.control(asker, job, false).await {
            result.screen = look(id, &control)
                .await
                .ok()
                .map(|(screen, _)| screen)
                .filter(|screen| screen.drawn);
        }
        result
    }

    async fn control(
        &self,
        asker: Asker,
        job: JobRef,
        acting: bool,
    ) -> Result<(JobId, mpsc::UnboundedSender<Control>), ErrorReply> {
        self.call(ControlOf { asker, job, acting }).await?
    }
}

/// Asks the supervisor behind `control` for the screen.
async fn look(
    job: JobId,
    control: &mpsc::UnboundedSender<Control>,
) -> Result<(ScreenInfo, bool), ErrorReply> {
    let (reply, answer) = oneshot::channel();
    control
        .send(Control::Screen { job, reply })
        .map_err(|_| ended(job))?;
    answer
        .await
        .map_err(|_| ended(job))?
        .ok_or_else(|| invalid(format!("{job} has no terminal")).with_hint(ErrorHint::NeedsPty))
}

fn invalid(message: String) -> ErrorReply {
    ErrorReply::new(ErrorKind::InvalidRequest, message)
}

fn ended(job: JobId) -> ErrorReply {
    invalid(format!("{job} has ended and its terminal with it"))
        .with_hint(ErrorHint::OutputKept { job })
}

/// Whether two looks at a screen show something else: its text or its cursor.
fn differs(a: &ScreenInfo, b: &ScreenInfo) -> bool {
    a.lines != b.lines || (a.cursor_row, a.cursor_col) != (b.cursor_row, b.cursor_col)
}

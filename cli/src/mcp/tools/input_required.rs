//! An ask (issue 44) put to a client on MCP 2026-07-28, where a server sends no request
//! of its own: the `bash` call answers `input_required`, carrying the ask's form and,
//! as its `requestState`, only the ask's id; the client shows the form, then calls
//! again with the person's answer and that id, and that second call gets the first
//! one's result. Meanwhile the first call goes on in a task of this server, waiting on
//! bashd for the answer as any asking request does: bashd keeps the ask's state, this
//! server only which task waits on which ask.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bashc::protocol::AskId;
use rmcp::model::{
    CallToolResult, ElicitRequest, ElicitResult, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleServer};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::elicit::{self, Ask};
use super::{BashArgs, BashTools, Call, CallError};
use crate::mcp::words;

/// The key of the one input request: the ask's form.
const FORM: &str = "ask";

/// The calls that answered `input_required`, by the ask each waits on.
#[derive(Clone, Default)]
pub struct Waiting(Arc<Mutex<HashMap<AskId, Asking>>>);

/// A call that waits on an ask, and what cancels it.
pub struct Asking {
    pub call: JoinHandle<CallToolResult>,
    pub cancel: CancellationToken,
}

/// Whether an ask during this call is put to the client as `input_required`: a client
/// on 2026-07-28 or later that declared form elicitation in the request's `_meta`.
pub fn wanted(context: &RequestContext<RoleServer>) -> bool {
    if !context
        .protocol_version()
        .is_some_and(|version| version > ProtocolVersion::V_2025_11_25)
    {
        return false;
    }
    // Neither form nor URL named: form, as earlier versions read an empty capability.
    context
        .client_capabilities()
        .and_then(|capabilities| capabilities.elicitation)
        .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none())
}

/// The result that puts `ask` to the person; the call's `requestState` is its id.
pub fn result(ask: &Ask) -> Result<InputRequiredResult, CallError> {
    let form = elicit::form(ask)
        .ok_or_else(|| CallError(format!("ask {} could not be put as a form", ask.ask)))?;
    let mut requests = InputRequests::new();
    requests.insert(
        FORM.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(form)),
    );
    Ok(InputRequiredResult::new(
        Some(requests),
        Some(ask.ask.to_string()),
    ))
}

impl Waiting {
    /// Keeps `asking` until the client calls again with the answer to `ask`. Calls whose
    /// client never came back and which have ended since are forgotten.
    pub fn keep(&self, ask: AskId, asking: Asking) {
        let mut waiting = self.0.lock().unwrap_or_else(|e| e.into_inner());
        waiting.retain(|_, asking| !asking.call.is_finished());
        waiting.insert(ask, asking);
    }

    /// The call waiting on the ask `state` names.
    pub fn take(&self, state: &str) -> Result<(AskId, Asking), CallError> {
        let ask: AskId = state.parse().map_err(|_| {
            CallError(format!(
                "requestState {state:?} is not one this server gave: call the tool again without it"
            ))
        })?;
        let mut waiting = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let asking = waiting.remove(&ask).ok_or_else(|| {
            CallError(format!(
                "no call of this bashc mcp waits on ask {ask} (it was answered, or the server restarted): `bashc allow --list` shows the ask, and the inbox of a later call tells its answer"
            ))
        })?;
        Ok((ask, asking))
    }
}

/// The person's answer among the client's `responses`, if it carries one.
pub fn answer_in(
    responses: Option<&InputResponses>,
) -> Option<(bool, bashc::protocol::GrantScope)> {
    let response = responses?.get(FORM)?;
    let result: ElicitResult = serde_json::from_value(response.clone()).ok()?;
    elicit::answer_of(&result)
}

/// How a `bash` call that may ask ends here: with its result, or with the ask put to
/// the client.
pub enum Asked {
    Done(CallToolResult),
    Ask(InputRequiredResult),
}

impl BashTools {
    /// The `bash` call on a task of its own, so that an ask can be put to the client
    /// as this call's result while the request goes on waiting for the answer.
    pub(super) async fn bash_asking(
        &self,
        args: BashArgs,
        mut call: Call,
    ) -> Result<Asked, CallError> {
        let (asked, mut ask) = tokio::sync::mpsc::unbounded_channel();
        // The client cancels this call until it is answered `input_required`, and the
        // call that comes back with the answer after that.
        let cancelled = std::mem::replace(&mut call.cancelled, CancellationToken::new());
        let cancel = call.cancelled.clone();
        call.asked = Some(asked);
        let tools = self.clone();
        let mut task = tokio::spawn(async move {
            tools
                .bash(args, call)
                .await
                .unwrap_or_else(words::call_error)
        });
        tokio::select! {
            biased;
            done = &mut task => Ok(Asked::Done(ended(done))),
            Some(ask) = ask.recv() => {
                let result = result(&ask)?;
                self.waiting.keep(ask.ask, Asking { call: task, cancel });
                Ok(Asked::Ask(result))
            }
            () = cancelled.cancelled() => {
                cancel.cancel();
                Ok(Asked::Done(ended(task.await)))
            }
        }
    }

    /// A call again with the person's answer (`responses`) to the ask `state` names:
    /// the answer goes to bashd, and the first call's result comes back.
    pub(super) async fn answered(
        &self,
        state: &str,
        responses: Option<&InputResponses>,
        call: Call,
    ) -> Result<CallToolResult, CallError> {
        let (
            ask,
            Asking {
                call: mut task,
                cancel,
            },
        ) = self.waiting.take(state)?;
        if let Some(answer) = answer_in(responses) {
            let via = format!(
                "the MCP input-required answer of {}",
                call.client.as_deref().unwrap_or("an unnamed client")
            );
            let client = self
                .client()
                .await
                .map_err(|e| CallError(words::error(&e)))?;
            elicit::tell_bashd(&client, ask, answer, via).await;
        }
        // No answer (a dismissed form): the request waits for `bashc allow` until the
        // call's budget, as any asking call does, and says `ask aN pending` then.
        tokio::select! {
            done = &mut task => Ok(ended(done)),
            () = call.cancelled.cancelled() => {
                cancel.cancel();
                Ok(ended(task.await))
            }
        }
    }
}

/// The result of a call's task; a task that panicked is told as the tool's error.
fn ended(done: Result<CallToolResult, tokio::task::JoinError>) -> CallToolResult {
    done.unwrap_or_else(|e| words::call_error(CallError(format!("the call failed: {e}"))))
}

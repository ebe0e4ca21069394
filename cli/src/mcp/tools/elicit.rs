//! An ask (issue 44) put to the person in their agent's own window, in the form each
//! MCP version has: `elicitation/create`, a request of this server's own, for a client
//! that declared the `elicitation` capability (form mode) on a version that has
//! server-to-client requests (up to 2025-11-25); on 2026-07-28, where a server sends no
//! request of its own, the call's `input_required` result ([`super::input_required`]).
//! bashd keeps the ask's state; the client carries back only its answer, which this
//! server hands to bashd as the answer to that ask. No tool answers an ask: these are
//! the only ways `bashc mcp` does.
//!
//! Accept runs the request (once, or for the session when the person picks it; left
//! out, once); decline refuses it; a dismissed form (cancel) or a client that never
//! answers leaves the ask to `bashc allow`, `bashc top` or its expiry.

use std::time::Duration;

use bashc::protocol::{AllowRequest, AskId, AskKind, GrantScope};
use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, EnumSchema,
    ProtocolVersion,
};
use rmcp::service::{ElicitationMode, Peer, RoleServer};

/// The ask as the daemon told it.
pub struct Ask {
    pub ask: AskId,
    pub kind: AskKind,
    pub command: String,
    pub expires_secs: u64,
}

/// The form's one field: how long a yes holds. Optional: left out, once.
const SCOPE: &str = "grant";

/// The form that puts `ask` to the person; `None` only if the schema cannot be built.
pub fn form(ask: &Ask) -> Option<ElicitRequestParams> {
    let Ask {
        ask, kind, command, ..
    } = ask;
    let message = format!(
        "bashd: your agent asks to run `{command}` with {kind}, looser than this session allows without your yes (ask {ask}). Accept to let it run ({SCOPE}: once, or session for every later request of this session as loose); decline to refuse it."
    );
    let schema = ElicitationSchema::builder()
        .optional_enum_schema(
            SCOPE,
            EnumSchema::builder(vec!["once".to_owned(), "session".to_owned()]).build(),
        )
        .build()
        .ok()?;
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    })
}

/// The person's answer in `result`: whether they said yes, and for how long. `None` for
/// a dismissed form (or an action of a later version): the ask waits for another
/// answer, or its end.
pub fn answer_of(result: &ElicitResult) -> Option<(bool, GrantScope)> {
    match result.action {
        ElicitationAction::Accept => {
            let session = result
                .content
                .as_ref()
                .and_then(|content| content.get(SCOPE))
                .and_then(|scope| scope.as_str())
                == Some("session");
            let scope = if session {
                GrantScope::Session
            } else {
                GrantScope::Once
            };
            Some((true, scope))
        }
        ElicitationAction::Decline => Some((false, GrantScope::Once)),
        _ => None,
    }
}

/// Hands the person's answer to bashd, saying which client carried it and how (`via`).
pub async fn tell_bashd(
    client: &bashc::Client,
    ask: AskId,
    (grant, scope): (bool, GrantScope),
    via: String,
) {
    let answer = AllowRequest::Answer {
        ask,
        grant,
        scope,
        via: Some(via),
    };
    // Answered elsewhere first, or expired: bashd says so, and nothing changes.
    if let Err(e) = client.allow(answer).await {
        eprintln!("bashc mcp: ask {ask}: {e}");
    }
}

/// Puts `ask` to the person through `peer`'s elicitation, on a task of its own, and
/// hands the answer to bashd through `client`. Nothing, for a client without form
/// elicitation or on a protocol version without server-to-client requests.
pub fn ask(peer: &Peer<RoleServer>, client: bashc::Client, name: Option<String>, ask: Ask) {
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return;
    }
    if let Some(info) = peer.peer_info()
        && info.protocol_version > ProtocolVersion::V_2025_11_25
    {
        return;
    }
    let Some(params) = form(&ask) else {
        return;
    };
    let peer = peer.clone();
    tokio::spawn(async move {
        let answered = peer
            .create_elicitation_with_timeout(params, Some(Duration::from_secs(ask.expires_secs)))
            .await;
        let answer = match answered {
            Ok(result) => match answer_of(&result) {
                Some(answer) => answer,
                None => return,
            },
            Err(e) => {
                eprintln!("bashc mcp: the client did not answer ask {}: {e}", ask.ask);
                return;
            }
        };
        let via = format!(
            "the MCP elicitation of {}",
            name.as_deref().unwrap_or("an unnamed client")
        );
        tell_bashd(&client, ask.ask, answer, via).await;
    });
}

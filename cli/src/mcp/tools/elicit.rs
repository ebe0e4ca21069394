//! An ask (issue 44) put to the person in their agent's own window: MCP's
//! `elicitation/create`, for a client that declared the `elicitation` capability (form
//! mode) on a protocol version that has server-to-client requests (up to 2025-11-25).
//! bashd keeps the ask's state; the client carries back only its answer to this one
//! request, which this server hands to bashd as the answer to that ask. No tool answers
//! an ask: this is the only way `bashc mcp` does.
//!
//! Accept runs the request (once, or for the session when the person picks it; left
//! out, once); decline refuses it; a dismissed form (cancel) or a client that never
//! answers leaves the ask to `bashc allow`, `bashc top` or its expiry. On 2026-07-28,
//! where rmcp refuses server-to-client requests, nothing is asked here (the
//! input-required result is not built): the call answers `ask aN pending` by its budget.

use std::time::Duration;

use bashc::protocol::{AllowRequest, AskId, AskKind, GrantScope};
use rmcp::model::{
    ElicitRequestParams, ElicitationAction, ElicitationSchema, EnumSchema, ProtocolVersion,
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
    let peer = peer.clone();
    tokio::spawn(async move {
        let Ask {
            ask,
            kind,
            command,
            expires_secs,
        } = ask;
        let message = format!(
            "bashd: your agent asks to run `{command}` with {kind}, looser than this session allows without your yes (ask {ask}). Accept to let it run ({SCOPE}: once, or session for every later request of this session as loose); decline to refuse it."
        );
        let Ok(schema) = ElicitationSchema::builder()
            .optional_enum_schema(
                SCOPE,
                EnumSchema::builder(vec!["once".to_owned(), "session".to_owned()]).build(),
            )
            .build()
        else {
            return;
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema: schema,
        };
        let answered = peer
            .create_elicitation_with_timeout(params, Some(Duration::from_secs(expires_secs)))
            .await;
        let (grant, scope) = match answered {
            Ok(result) => match result.action {
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
                    (true, scope)
                }
                ElicitationAction::Decline => (false, GrantScope::Once),
                // Dismissed (or an action of a later version): the ask waits for
                // another answer, or its end.
                _ => return,
            },
            Err(e) => {
                eprintln!("bashc mcp: the client did not answer ask {ask}: {e}");
                return;
            }
        };
        let via = format!(
            "the MCP elicitation of {}",
            name.as_deref().unwrap_or("an unnamed client")
        );
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
    });
}

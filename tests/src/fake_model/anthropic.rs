//! Anthropic Messages (`POST /v1/messages`), as Claude Code calls it: a streamed
//! answer is `message_start`, one content block (`text_delta`s, or a `tool_use` whose
//! input comes as `input_json_delta`), `message_delta` with the stop reason, and
//! `message_stop`.

use serde_json::{Value, json};

use super::{Answer, event, texts};

pub(super) fn tools(body: &Value) -> Vec<(String, Value)> {
    body.get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| {
                    Some((
                        t.get("name")?.as_str()?.to_owned(),
                        t.get("input_schema").cloned().unwrap_or(Value::Null),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `tool_result` blocks of the user messages, in order.
pub(super) fn tool_results(body: &Value) -> Vec<String> {
    let mut results = Vec::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        for block in message["content"].as_array().into_iter().flatten() {
            if block["type"] == "tool_result" {
                results.push(texts(&block["content"]));
            }
        }
    }
    results
}

fn usage() -> Value {
    json!({"input_tokens": 10, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
}

fn block(answer: &Answer) -> (Value, &'static str) {
    match answer {
        Answer::Call { id, name, args } => (
            json!({"type": "tool_use", "id": format!("toolu_{id}"), "name": name, "input": args}),
            "tool_use",
        ),
        Answer::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
    }
}

pub(super) fn whole(answer: &Answer) -> Value {
    let (block, stop) = block(answer);
    json!({
        "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake-model",
        "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage(),
    })
}

pub(super) fn stream(answer: &Answer) -> String {
    let (block, stop) = block(answer);
    let mut out = event(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake-model",
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage(),
        }}),
    );
    let (start, delta) = match answer {
        Answer::Call { args, .. } => {
            let mut start = block.clone();
            start["input"] = json!({});
            (
                start,
                json!({"type": "input_json_delta", "partial_json": args.to_string()}),
            )
        }
        Answer::Text(text) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": text}),
        ),
    };
    out += &event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": 0, "content_block": start}),
    );
    out += &event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
    );
    out += &event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    );
    out += &event(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": 10}}),
    );
    out += &event("message_stop", &json!({"type": "message_stop"}));
    out
}

//! OpenAI Responses (`POST /v1/responses`, streamed), as Codex calls it:
//! `response.created`, the output item (`response.output_item.added` and `.done`; a
//! `function_call` with its `call_id` and JSON `arguments`, or a `message` with its
//! `output_text`; a function of a namespace tool carries its `namespace`), then `response.completed` with the usage.

use serde_json::{Value, json};

use super::{Answer, event, texts};

/// The offered functions; those of a `namespace` tool (Codex groups each MCP server's
/// tools so, as `mcp__bashd`) are named `NAMESPACE::NAME`.
pub(super) fn tools(body: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        let Some(name) = tool["name"].as_str() else {
            continue;
        };
        if tool["type"] == "namespace" {
            for inner in tool["tools"].as_array().into_iter().flatten() {
                if let Some(inner_name) = inner["name"].as_str() {
                    out.push((format!("{name}::{inner_name}"), inner["parameters"].clone()));
                }
            }
        } else {
            out.push((name.to_owned(), tool["parameters"].clone()));
        }
    }
    out
}

/// The `function_call_output` items of the input, in order.
pub(super) fn tool_results(body: &Value) -> Vec<String> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| texts(&item["output"]))
        .collect()
}

pub(super) fn stream(answer: &Answer) -> String {
    let item = match answer {
        Answer::Call { id, name, args } => {
            let mut item = json!({
                "type": "function_call", "id": format!("fc_{id}"), "call_id": id, "name": name,
                "arguments": args.to_string(), "status": "completed",
            });
            if let Some((namespace, name)) = name.split_once("::") {
                item["namespace"] = json!(namespace);
                item["name"] = json!(name);
            }
            item
        }
        Answer::Text(text) => json!({
            "type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }),
    };
    let response = |status: &str, output: Value| {
        json!({"id": "resp_fake", "object": "response", "created_at": 0, "status": status,
               "model": "fake-model", "output": output,
               "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                         "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                         "total_tokens": 20}})
    };
    let mut out = event(
        "response.created",
        &json!({"type": "response.created", "sequence_number": 0, "response": response("in_progress", json!([]))}),
    );
    out += &event(
        "response.output_item.added",
        &json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item}),
    );
    out += &event(
        "response.output_item.done",
        &json!({"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": item}),
    );
    out += &event(
        "response.completed",
        &json!({"type": "response.completed", "sequence_number": 3, "response": response("completed", json!([item]))}),
    );
    out
}

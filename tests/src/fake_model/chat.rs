//! OpenAI Chat Completions (`POST /v1/chat/completions`), as OpenCode's
//! OpenAI-compatible provider calls it: streamed `chat.completion.chunk`s (the role,
//! then the text or one `tool_calls` entry, then the `finish_reason` and the usage)
//! and `data: [DONE]`.

use serde_json::{Value, json};

use super::{Answer, data, texts};

pub(super) fn tools(body: &Value) -> Vec<(String, Value)> {
    body.get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| {
                    let f = t.get("function")?;
                    Some((
                        f.get("name")?.as_str()?.to_owned(),
                        f.get("parameters").cloned().unwrap_or(Value::Null),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `tool` messages, in order.
pub(super) fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| texts(&m["content"]))
        .collect()
}

fn chunk(delta: Value, finish: Value) -> Value {
    json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
           "model": "fake-model",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

pub(super) fn whole(answer: &Answer) -> Value {
    let (message, finish) = match answer {
        Answer::Call { id, name, args } => (
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}),
            "tool_calls",
        ),
        Answer::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
    };
    json!({"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake-model",
           "choices": [{"index": 0, "message": message, "finish_reason": finish}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}})
}

pub(super) fn stream(answer: &Answer) -> String {
    let mut out = data(&chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    ));
    let finish = match answer {
        Answer::Call { id, name, args } => {
            out += &data(&chunk(
                json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                       "function": {"name": name, "arguments": args.to_string()}}]}),
                Value::Null,
            ));
            "tool_calls"
        }
        Answer::Text(text) => {
            out += &data(&chunk(json!({"content": text}), Value::Null));
            "stop"
        }
    };
    let mut last = chunk(json!({}), json!(finish));
    last["usage"] = json!({"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20});
    out += &data(&last);
    out += "data: [DONE]\n\n";
    out
}

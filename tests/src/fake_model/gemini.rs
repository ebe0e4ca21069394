//! Gemini (`POST /v1beta/models/M:streamGenerateContent?alt=sse`, and
//! `:generateContent` for Gemini CLI's own checks): one candidate whose content is a
//! `functionCall` part or a text part, with `finishReason` and `usageMetadata`.

use serde_json::{Value, json};

use super::{Answer, data, texts};

pub(super) fn tools(body: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        for f in tool["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(name) = f["name"].as_str() {
                let schema = f
                    .get("parametersJsonSchema")
                    .or_else(|| f.get("parameters"))
                    .cloned()
                    .unwrap_or(Value::Null);
                out.push((name.to_owned(), schema));
            }
        }
    }
    out
}

/// The `functionResponse` parts, in order.
pub(super) fn tool_results(body: &Value) -> Vec<String> {
    let mut results = Vec::new();
    for content in body["contents"].as_array().into_iter().flatten() {
        for part in content["parts"].as_array().into_iter().flatten() {
            if let Some(response) = part.get("functionResponse") {
                results.push(texts(&response["response"]));
            }
        }
    }
    results
}

pub(super) fn whole(answer: &Answer) -> Value {
    let part = match answer {
        Answer::Call { id, name, args } => {
            json!({"functionCall": {"id": id, "name": name, "args": args}})
        }
        Answer::Text(text) => json!({"text": text}),
    };
    json!({"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
           "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
           "modelVersion": "fake-model"})
}

pub(super) fn stream(answer: &Answer) -> String {
    data(&whole(answer))
}

//! A fake model on 127.0.0.1 for driving real agent programs offline (issue 34): it
//! speaks the four provider APIs the pinned CLIs use (Anthropic Messages, OpenAI
//! Responses, OpenAI Chat Completions, Gemini `streamGenerateContent`), answers from a
//! script of turns, and keeps every request body, so that a test can assert what a
//! model would have seen: the tool results exactly as the program passed them back.
//!
//! A request that offers the agent's tools (one of them named `bash`, bare or
//! prefixed like `mcp__bashd__bash`, or Claude Code's `ToolSearch`) is a turn of the conversation and takes the
//! script's next turn; any other request (a title, a summary, a quota probe) is the
//! program's own business and gets a short text, so it never eats a turn.

mod anthropic;
mod chat;
mod gemini;
mod responses;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The turn decided when its request comes, from the tool results so far.
pub type Decide = Arc<dyn Fn(&[String]) -> Turn + Send + Sync>;

/// One answer of the scripted model.
#[derive(Clone)]
pub enum Turn {
    /// Call the tool whose name is `tool` or ends with `_tool` (bashd's `bash` is
    /// `mcp__bashd__bash` in Claude Code and Codex, `bashd_bash` in OpenCode).
    Call { tool: String, args: Value },
    /// End the conversation with this text.
    Text(String),
    /// Answer as the function says, given the tool results the request carries (to
    /// follow the next-page call a result names, as a model would).
    With(Decide),
}

impl Turn {
    pub fn call(tool: &str, args: Value) -> Turn {
        Turn::Call {
            tool: tool.to_owned(),
            args,
        }
    }

    pub fn text(text: &str) -> Turn {
        Turn::Text(text.to_owned())
    }

    pub fn with(decide: impl Fn(&[String]) -> Turn + Send + Sync + 'static) -> Turn {
        Turn::With(Arc::new(decide))
    }
}

/// Which provider API a request spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Anthropic,
    Responses,
    Chat,
    Gemini,
    Other,
}

/// A request the fake model received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub api: Api,
    pub method: String,
    pub path: String,
    pub body: Value,
    /// It offered the agent's tools and so took a turn of the script.
    pub turn: bool,
    pub at: Instant,
}

/// What a turn resolved to, in a form each API writes out.
#[derive(Debug, Clone)]
enum Answer {
    Call {
        id: String,
        name: String,
        args: Value,
    },
    Text(String),
}

struct State {
    turns: Vec<Turn>,
    next: usize,
    seen: Vec<Seen>,
    calls: usize,
}

/// The running server; stopped when dropped.
pub struct FakeModel {
    port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What any request past the script, or outside it, is answered with.
pub const DONE_TEXT: &str = "done";

impl FakeModel {
    /// Starts a server on a free port of 127.0.0.1 that answers with `turns`, in order.
    pub fn start(turns: Vec<Turn>) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("cannot bind 127.0.0.1");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            turns,
            next: 0,
            seen: Vec::new(),
            calls: 0,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let state = Arc::clone(&state);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let state = Arc::clone(&state);
                            std::thread::spawn(move || {
                                let _ = serve(stream, &state);
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        FakeModel {
            port,
            state,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`, with no path.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// How many turns of the script were served.
    pub fn turns_served(&self) -> usize {
        self.state.lock().unwrap().next
    }

    /// The tool results the program passed back, in order, each as the first request
    /// that carried it had it: what the model saw right after the call. A later request
    /// may carry it otherwise (Gemini CLI masks older large results in its history).
    pub fn tool_results(&self) -> Vec<String> {
        let mut results = Vec::new();
        for seen in self.requests().iter().filter(|s| s.turn) {
            let carried = results_of(seen.api, &seen.body);
            if carried.len() > results.len() {
                results.extend(carried.into_iter().skip(results.len()));
            }
        }
        results
    }

    /// The tool results as the last turn request carries them: the program's history
    /// at the end of the conversation.
    pub fn last_tool_results(&self) -> Vec<String> {
        self.requests()
            .iter()
            .rev()
            .find(|s| s.turn)
            .map(|last| results_of(last.api, &last.body))
            .unwrap_or_default()
    }

    /// The names of the tools the last turn request offered.
    pub fn tool_names(&self) -> Vec<String> {
        self.requests()
            .iter()
            .rev()
            .find(|s| s.turn)
            .map(|s| tools_of(s.api, &s.body))
            .unwrap_or_default()
    }

    /// The schema of the offered tool `tool` (as [`Turn::Call`] names it) in the last
    /// turn request.
    pub fn tool_schema(&self, tool: &str) -> Option<Value> {
        let seen = self.requests();
        let last = seen.iter().rev().find(|s| s.turn)?;
        let all = tool_specs(last.api, &last.body);
        all.into_iter()
            .find(|(name, _)| matches_tool(name, tool))
            .map(|(_, schema)| schema)
    }

    /// Waits until the script is served to its end and the program sent the request
    /// after the last turn (the one that sees the final tool result), or `timeout`.
    pub fn wait_served(&self, timeout: Duration) -> bool {
        crate::procs::wait_until(timeout, || {
            let state = self.state.lock().unwrap();
            state.next >= state.turns.len()
        })
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The tool results a request carries, in order.
fn results_of(api: Api, body: &Value) -> Vec<String> {
    match api {
        Api::Anthropic => anthropic::tool_results(body),
        Api::Responses => responses::tool_results(body),
        Api::Chat => chat::tool_results(body),
        Api::Gemini => gemini::tool_results(body),
        Api::Other => Vec::new(),
    }
}

/// Whether an offered tool's full name is the script's `tool`.
fn matches_tool(name: &str, tool: &str) -> bool {
    name == tool
        || name
            .strip_suffix(tool)
            .is_some_and(|p| p.ends_with('_') || p.ends_with("::"))
}

fn tools_of(api: Api, body: &Value) -> Vec<String> {
    tool_specs(api, body).into_iter().map(|(n, _)| n).collect()
}

/// Every offered tool's name and input schema.
fn tool_specs(api: Api, body: &Value) -> Vec<(String, Value)> {
    match api {
        Api::Anthropic => anthropic::tools(body),
        Api::Responses => responses::tools(body),
        Api::Chat => chat::tools(body),
        Api::Gemini => gemini::tools(body),
        Api::Other => Vec::new(),
    }
}

/// One HTTP/1.1 request: its method, path (with query) and body.
fn read_request(stream: &mut TcpStream) -> std::io::Result<(String, String, Vec<u8>)> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("").to_owned();
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" || header == "\n" {
            break;
        }
        let lower = header.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
        if lower.starts_with("expect:") && lower.contains("100-continue") {
            stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            if n == 0 {
                let mut end = String::new();
                reader.read_line(&mut end)?;
                break;
            }
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    }
    Ok((method, path, body))
}

fn api_of(path: &str) -> Api {
    let path = path.split('?').next().unwrap_or(path);
    if path.ends_with("/messages") {
        Api::Anthropic
    } else if path.ends_with("/responses") {
        Api::Responses
    } else if path.ends_with("/chat/completions") {
        Api::Chat
    } else if path.contains(":streamGenerateContent") || path.contains(":generateContent") {
        Api::Gemini
    } else {
        Api::Other
    }
}

fn serve(mut stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let (method, path, raw) = read_request(&mut stream)?;
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let api = api_of(&path);
    // Claude Code offers bashd's tools only through its tool search at first.
    let offers_bash = tools_of(api, &body)
        .iter()
        .any(|n| matches_tool(n, "bash") || n == "ToolSearch");
    let answer = {
        let mut state = state.lock().unwrap();
        let answer = if offers_bash {
            let turn = state.turns.get(state.next).cloned();
            state.next += 1;
            state.calls += 1;
            let id = format!("call_{}", state.calls);
            let turn = match turn {
                Some(Turn::With(decide)) => Some(decide(&results_of(api, &body))),
                other => other,
            };
            match turn {
                Some(Turn::Call { tool, args }) => {
                    let name = tools_of(api, &body)
                        .into_iter()
                        .find(|n| matches_tool(n, &tool))
                        .unwrap_or(tool);
                    Answer::Call { id, name, args }
                }
                Some(Turn::Text(text)) => Answer::Text(text),
                Some(Turn::With(_)) | None => Answer::Text(DONE_TEXT.to_owned()),
            }
        } else {
            Answer::Text(side_text(api, &body))
        };
        state.seen.push(Seen {
            api,
            method: method.clone(),
            path: path.clone(),
            body: body.clone(),
            turn: offers_bash,
            at: Instant::now(),
        });
        answer
    };
    let streaming = match api {
        Api::Gemini => path.contains(":streamGenerateContent"),
        _ => body.get("stream").and_then(Value::as_bool).unwrap_or(false),
    };
    let (content_type, payload) = match api {
        Api::Anthropic if streaming => ("text/event-stream", anthropic::stream(&answer)),
        Api::Anthropic => ("application/json", anthropic::whole(&answer).to_string()),
        Api::Responses => ("text/event-stream", responses::stream(&answer)),
        Api::Chat if streaming => ("text/event-stream", chat::stream(&answer)),
        Api::Chat => ("application/json", chat::whole(&answer).to_string()),
        Api::Gemini if streaming => ("text/event-stream", gemini::stream(&answer)),
        Api::Gemini => ("application/json", gemini::whole(&answer).to_string()),
        Api::Other => return other(&mut stream, &method, &path),
    };
    // No Content-Length: the body ends when the connection closes, as an SSE stream
    // may in HTTP/1.1, and every client here reads it so.
    write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n{payload}"
    )?;
    stream.flush()?;
    stream.shutdown(std::net::Shutdown::Both)
}

/// The text for a request outside the script: JSON where the program asked for JSON
/// (Gemini CLI's checks), else a word.
fn side_text(api: Api, body: &Value) -> String {
    let wants_json = match api {
        Api::Gemini => {
            body.pointer("/generationConfig/responseMimeType")
                .and_then(Value::as_str)
                == Some("application/json")
        }
        _ => false,
    };
    if wants_json {
        json!({"next_speaker": "user", "reasoning": "the fake model is done"}).to_string()
    } else {
        DONE_TEXT.to_owned()
    }
}

/// Anything but a model call: token counts get a small count, the rest a 404.
fn other(stream: &mut TcpStream, method: &str, path: &str) -> std::io::Result<()> {
    let (status, body) = if path.contains("count_tokens") || path.contains(":countTokens") {
        ("200 OK", json!({"input_tokens": 10, "totalTokens": 10}))
    } else {
        (
            "404 Not Found",
            json!({"error": {"message": format!("the fake model has no {method} {path}")}}),
        )
    };
    let body = body.to_string();
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// The texts inside a tool result's content, which each program shapes its own way
/// (a string, a list of text blocks, an object holding either).
fn texts(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(texts)
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(map) => {
            for key in ["text", "output", "content", "result", "error", "tool_name"] {
                if let Some(v) = map.get(key) {
                    return texts(v);
                }
            }
            String::new()
        }
        _ => String::new(),
    }
}

/// One SSE event with an `event:` name, as Anthropic and the Responses API send them.
fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// One SSE event with only `data:`, as Chat Completions and Gemini send them.
fn data(data: &Value) -> String {
    format!("data: {data}\n\n")
}

#[cfg(test)]
mod tests {
    //! The fake model as each program's client reads it, so that the harness does not
    //! rot while the opt-in suite that uses it is not run.

    use super::*;

    fn post(model: &FakeModel, path: &str, body: &Value) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", model.port)).unwrap();
        let body = body.to_string();
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    /// The JSON of every `data:` line but `[DONE]`.
    fn events(answer: &str) -> Vec<Value> {
        answer
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    #[test]
    fn each_api_calls_the_tool_by_the_name_it_offered_then_says_the_text() {
        let script = || {
            vec![
                Turn::call("bash", json!({"command": "true"})),
                Turn::text("bye"),
            ]
        };
        // Anthropic: the tool_use block's input comes as one input_json_delta.
        let model = FakeModel::start(script());
        let body = json!({"stream": true, "messages": [],
            "tools": [{"name": "mcp__bashd__bash_output"}, {"name": "mcp__bashd__bash"}]});
        let answer = events(&post(&model, "/v1/messages?beta=true", &body));
        assert_eq!(answer[1]["content_block"]["name"], "mcp__bashd__bash");
        assert_eq!(answer[2]["delta"]["partial_json"], r#"{"command":"true"}"#);
        assert_eq!(answer[4]["delta"]["stop_reason"], "tool_use");
        let answer = events(&post(&model, "/v1/messages", &body));
        assert_eq!(answer[2]["delta"]["text"], "bye");
        // A request that offers no tools is the program's own and takes no turn.
        let side = events(&post(&model, "/v1/messages", &json!({"stream": true})));
        assert_eq!(side[2]["delta"]["text"], DONE_TEXT);
        assert_eq!(model.turns_served(), 2);

        // Responses: a namespace's function is called with its namespace.
        let model = FakeModel::start(script());
        let body = json!({"stream": true, "input": [], "tools": [{"type": "namespace",
            "name": "mcp__bashd", "tools": [{"type": "function", "name": "bash"}]}]});
        let answer = events(&post(&model, "/v1/responses", &body));
        let item = &answer[2]["item"];
        assert_eq!(
            (&item["namespace"], &item["name"]),
            (&json!("mcp__bashd"), &json!("bash"))
        );
        assert_eq!(answer[3]["type"], "response.completed");

        // Chat Completions: one tool_calls delta, then finish_reason and [DONE].
        let model = FakeModel::start(script());
        let body = json!({"stream": true, "messages": [],
            "tools": [{"type": "function", "function": {"name": "bashd_bash"}}]});
        let raw = post(&model, "/v1/chat/completions", &body);
        assert!(raw.ends_with("data: [DONE]\n\n"), "{raw}");
        let answer = events(&raw);
        assert_eq!(
            answer[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
            "bashd_bash"
        );
        assert_eq!(answer[2]["choices"][0]["finish_reason"], "tool_calls");

        // Gemini: a functionCall part.
        let model = FakeModel::start(script());
        let body = json!({"contents": [], "tools": [{"functionDeclarations": [{"name": "mcp_bashd_bash"}]}]});
        let answer = events(&post(
            &model,
            "/v1beta/models/m:streamGenerateContent?alt=sse",
            &body,
        ));
        let call = &answer[0]["candidates"][0]["content"]["parts"][0]["functionCall"];
        assert_eq!(
            (&call["name"], &call["args"]["command"]),
            (&json!("mcp_bashd_bash"), &json!("true"))
        );
    }

    #[test]
    fn tool_results_are_read_as_each_api_passes_them_back() {
        let model = FakeModel::start(vec![Turn::with(|results| {
            Turn::text(&format!("saw {results:?}"))
        })]);
        let body = json!({"stream": true, "tools": [{"name": "bash"}], "messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                "content": [{"type": "text", "text": "exit code: 0"}]}]}]});
        let answer = events(&post(&model, "/v1/messages", &body));
        assert_eq!(answer[2]["delta"]["text"], r#"saw ["exit code: 0"]"#);
        assert_eq!(model.tool_results(), vec!["exit code: 0"]);

        let cases = [
            (
                Api::Responses,
                json!({"input": [{"type": "function_call_output", "call_id": "c", "output": "one"}]}),
            ),
            (
                Api::Chat,
                json!({"messages": [{"role": "tool", "tool_call_id": "c", "content": "one"}]}),
            ),
            (
                Api::Gemini,
                json!({"contents": [{"role": "user", "parts": [
                {"functionResponse": {"name": "bash", "response": {"output": "one"}}}]}]}),
            ),
        ];
        for (api, body) in cases {
            assert_eq!(results_of(api, &body), vec!["one"], "{api:?}");
        }
    }
}

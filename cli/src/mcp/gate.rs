//! The JSON-RPC gate of `bashc mcp`: the one writer of stdout, and the reader of stdin
//! that answers lines rmcp would drop without a word.
//!
//! rmcp reads one message a line and has no JSON-RPC batches. MCP 2025-03-26 had
//! them; 2025-06-18 removed them. So a batch gets, under a version that has them, its
//! messages passed on one by one and their answers gathered into one array; under a
//! later one (or before `initialize` said which), an `Invalid Request` error that says
//! to send one message a line.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// Bytes in flight between the gate and rmcp, each way.
pub const GATE_BUFFER: usize = 1 << 20;
/// The longest message taken from the agent.
const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// Stands between stdio and rmcp: a line that is not JSON-RPC gets the JSON-RPC error
/// for it (rmcp would drop it without a word); every other line goes on to rmcp, and
/// everything rmcp writes goes to stdout. One task writes stdout, so no two messages
/// mix. `stdin_closed` fires at end of input.
pub async fn gate(rmcp: tokio::io::DuplexStream, stdin_closed: tokio::sync::oneshot::Sender<()>) {
    let (from_rmcp, mut to_rmcp) = tokio::io::split(rmcp);
    let (lines_tx, mut lines) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    // A std mutex: held to look up or change a few entries, never across an await.
    let batches: Arc<Mutex<Batches>> = Arc::default();
    let writer = tokio::spawn(async move {
        let mut stdout = super::stdio::stdout();
        while let Some(line) = lines.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                return;
            }
        }
    });
    let answers = lines_tx.clone();
    let gathered = Arc::clone(&batches);
    tokio::spawn(async move {
        let mut from_rmcp = BufReader::new(from_rmcp);
        loop {
            let mut line = Vec::new();
            match from_rmcp.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let out = lock(&gathered).line_from_rmcp(line);
                    if let Some(line) = out
                        && answers.send(line).await.is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    let mut stdin = BufReader::new(super::stdio::stdin());
    loop {
        let mut line = Vec::new();
        let read = (&mut stdin)
            .take(MAX_MESSAGE_BYTES as u64)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if !line.ends_with(b"\n") && line.len() >= MAX_MESSAGE_BYTES {
            let error = protocol_error(
                serde_json::Value::Null,
                PARSE_ERROR,
                format!("a message is longer than {MAX_MESSAGE_BYTES} bytes; it was dropped"),
            );
            let _ = lines_tx.send(error).await;
            // Skip the rest of it, a bounded piece at a time.
            loop {
                let mut rest = Vec::new();
                match (&mut stdin)
                    .take(MAX_MESSAGE_BYTES as u64)
                    .read_until(b'\n', &mut rest)
                    .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) if rest.ends_with(b"\n") => break,
                    Ok(_) => {}
                }
            }
            continue;
        }
        let checked = check_message(&line);
        if let Ok(Message::Batch(items)) = checked {
            let (to_pass, answer) = lock(&batches).batch_from_client(items);
            if let Some(answer) = answer
                && lines_tx.send(answer).await.is_err()
            {
                break;
            }
            let mut passed = true;
            for item in to_pass {
                let mut item = serde_json::to_vec(&item).unwrap_or_default();
                item.push(b'\n');
                passed = passed && to_rmcp.write_all(&item).await.is_ok();
            }
            if !passed {
                break;
            }
            continue;
        }
        match checked.map(|_| ()) {
            Ok(()) => {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                if to_rmcp.write_all(&line).await.is_err() {
                    break;
                }
            }
            Err(Some(error)) => {
                if lines_tx.send(error).await.is_err() {
                    break;
                }
            }
            Err(None) => {}
        }
    }
    // Said before rmcp sees the end: a stdin that closes before `initialize` fails
    // rmcp's handshake, and that failure must not win the race against the end it
    // follows from (`mcp::mcp` looks at this first).
    let _ = stdin_closed.send(());
    let _ = to_rmcp.shutdown().await;
    drop(lines_tx);
    let _ = writer.await;
}

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// A line that is JSON-RPC.
enum Message {
    One,
    /// A non-empty array, each item to be checked on its own.
    Batch(Vec<Value>),
}

/// `Ok` for a line to pass on to rmcp; `Err(Some(answer))` for one that is not
/// JSON-RPC; `Err(None)` for a blank line.
fn check_message(line: &[u8]) -> Result<Message, Option<Vec<u8>>> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Err(None);
    }
    let message: serde_json::Value = serde_json::from_slice(line).map_err(|e| {
        Some(protocol_error(
            serde_json::Value::Null,
            PARSE_ERROR,
            format!("not JSON: {e}"),
        ))
    })?;
    match message {
        Value::Object(_) if valid(&message) => return Ok(Message::One),
        Value::Array(batch) if !batch.is_empty() => return Ok(Message::Batch(batch)),
        _ => {}
    }
    let id = message
        .get("id")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    Err(Some(protocol_error(
        id,
        INVALID_REQUEST,
        "not a JSON-RPC 2.0 message: it needs \"jsonrpc\": \"2.0\" and a \"method\"".to_owned(),
    )))
}

/// Whether `message` is a JSON-RPC 2.0 request, notification or response.
fn valid(message: &Value) -> bool {
    message.get("jsonrpc").and_then(|v| v.as_str()) == Some("2.0")
        && (message.get("method").is_some_and(|v| v.is_string())
            || message.get("result").is_some()
            || message.get("error").is_some())
}

/// A JSON-RPC error response, as one line.
fn protocol_error(id: Value, code: i64, message: String) -> Vec<u8> {
    let mut line = serde_json::to_vec(&error_value(id, code, message)).unwrap_or_default();
    line.push(b'\n');
    line
}

fn error_value(id: Value, code: i64, message: String) -> Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message },
    })
}

/// The first MCP version without JSON-RPC batches.
const NO_BATCHES_SINCE: &str = "2025-06-18";

fn lock(batches: &Mutex<Batches>) -> std::sync::MutexGuard<'_, Batches> {
    batches.lock().unwrap_or_else(|e| e.into_inner())
}

/// The negotiated protocol version, and the batches whose answers are being gathered.
#[derive(Debug, Default)]
struct Batches {
    /// What rmcp answered to `initialize`; `None` before.
    version: Option<String>,
    open: Vec<Batch>,
}

#[derive(Debug)]
struct Batch {
    /// The ids of its requests not answered yet, as JSON text.
    waiting: HashSet<String>,
    answers: Vec<Value>,
}

impl Batches {
    /// A batch from the client: the messages to pass on to rmcp, and what to answer
    /// now (the whole answer, when nothing is left to wait for).
    fn batch_from_client(&mut self, items: Vec<Value>) -> (Vec<Value>, Option<Vec<u8>>) {
        let allowed = self
            .version
            .as_deref()
            .is_some_and(|v| v < NO_BATCHES_SINCE);
        if !allowed {
            let version = self.version.as_deref().unwrap_or("before initialize");
            let error = protocol_error(
                Value::Null,
                INVALID_REQUEST,
                format!(
                    "JSON-RPC batches are not part of MCP {version} (MCP 2025-03-26 had them); send each message on a line of its own"
                ),
            );
            return (Vec::new(), Some(error));
        }
        let mut batch = Batch {
            waiting: HashSet::new(),
            answers: Vec::new(),
        };
        let mut to_pass = Vec::new();
        for item in items {
            if !valid(&item) {
                let id = item.get("id").cloned().unwrap_or(Value::Null);
                batch.answers.push(error_value(
                    id,
                    INVALID_REQUEST,
                    "not a JSON-RPC 2.0 message: it needs \"jsonrpc\": \"2.0\" and a \"method\""
                        .to_owned(),
                ));
                continue;
            }
            if let (Some(_), Some(id)) = (item.get("method"), item.get("id")) {
                batch.waiting.insert(id.to_string());
            }
            to_pass.push(item);
        }
        if batch.waiting.is_empty() {
            // Notifications and responses get no answer; invalid items do.
            let answer = (!batch.answers.is_empty()).then(|| array_line(batch.answers));
            return (to_pass, answer);
        }
        self.open.push(batch);
        (to_pass, None)
    }

    /// A line from rmcp: to write as it is, or held for its batch (which is written
    /// whole with its last answer).
    fn line_from_rmcp(&mut self, line: Vec<u8>) -> Option<Vec<u8>> {
        if self.version.is_none() {
            let message: Option<Value> = serde_json::from_slice(&line).ok();
            if let Some(version) = message
                .as_ref()
                .and_then(|m| m.pointer("/result/protocolVersion"))
                .and_then(Value::as_str)
            {
                self.version = Some(version.to_owned());
            }
        }
        if self.open.is_empty() {
            return Some(line);
        }
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            return Some(line);
        };
        let is_answer = message.get("result").is_some() || message.get("error").is_some();
        let id = message.get("id").map(Value::to_string);
        let Some(at) = id.filter(|_| is_answer).and_then(|id| {
            self.open
                .iter()
                .position(|b| b.waiting.contains(&id))
                .map(|at| (at, id))
        }) else {
            return Some(line);
        };
        let (at, id) = at;
        let batch = &mut self.open[at];
        batch.waiting.remove(&id);
        batch.answers.push(message);
        if !batch.waiting.is_empty() {
            return None;
        }
        let batch = self.open.remove(at);
        Some(array_line(batch.answers))
    }
}

/// Answers as one JSON array, as one line.
fn array_line(answers: Vec<Value>) -> Vec<u8> {
    let mut line = serde_json::to_vec(&Value::Array(answers)).unwrap_or_default();
    line.push(b'\n');
    line
}

//! The JSON-RPC gate of `bashc mcp`: the one writer of stdout, and the reader of stdin
//! that answers lines rmcp would drop without a word.

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
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = lines.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                return;
            }
        }
    });
    let answers = lines_tx.clone();
    tokio::spawn(async move {
        let mut from_rmcp = BufReader::new(from_rmcp);
        loop {
            let mut line = Vec::new();
            match from_rmcp.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if answers.send(line).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let mut stdin = BufReader::new(tokio::io::stdin());
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
        match check_message(&line) {
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
    let _ = to_rmcp.shutdown().await;
    let _ = stdin_closed.send(());
    drop(lines_tx);
    let _ = writer.await;
}

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// `Ok` for a line to pass on to rmcp; `Err(Some(answer))` for one that is not
/// JSON-RPC; `Err(None)` for a blank line.
fn check_message(line: &[u8]) -> Result<(), Option<Vec<u8>>> {
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
    let valid = |m: &serde_json::Value| {
        m.get("jsonrpc").and_then(|v| v.as_str()) == Some("2.0")
            && (m.get("method").is_some_and(|v| v.is_string())
                || m.get("result").is_some()
                || m.get("error").is_some())
    };
    let ok = match &message {
        serde_json::Value::Object(_) => valid(&message),
        serde_json::Value::Array(batch) => !batch.is_empty() && batch.iter().all(valid),
        _ => false,
    };
    if ok {
        return Ok(());
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

/// A JSON-RPC error response, as one line.
fn protocol_error(id: serde_json::Value, code: i64, message: String) -> Vec<u8> {
    let mut line = serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code, "message": message },
    }))
    .unwrap_or_default();
    line.push(b'\n');
    line
}

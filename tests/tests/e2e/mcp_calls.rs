//! Issue 15: `bashc mcp` as every MCP client and model takes it: a cancelled call ends
//! its job, a long call reports progress, every call returns within its budget, one
//! result is sent once in tool words, pages are byte-capped and complete, another
//! session's job is out of reach, and schemas are flat. Driven with rmcp's client and
//! with raw JSON-RPC; what is alive is read from /proc.

use std::time::{Duration, Instant};

use bashd_tests::{Daemon, alive, wait_for_running, wait_until};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};

use super::mcp::{call, connect, is_error, job_in, mcp_command, spawn_raw, text, text_of};
use super::{show, stderr};

const WITHIN: Duration = Duration::from_secs(20);

/// `bashc mcp` spoken to in raw JSON-RPC lines.
pub struct Raw {
    _child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    /// Notifications read while waiting for responses.
    pub notifications: Vec<(Instant, Value)>,
}

impl Raw {
    /// A server for `daemon`, initialized with MCP `version`.
    pub async fn start(daemon: &Daemon, version: &str) -> Raw {
        let (child, stdin, lines) =
            spawn_raw(mcp_command(daemon, daemon.scratch()).env("BASHD_NO_AUTOSTART", "1"));
        let mut raw = Raw {
            _child: child,
            stdin,
            lines,
            notifications: Vec::new(),
        };
        raw.send(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
        )
        .await;
        let (initialized, _) = raw.response(0).await;
        assert_eq!(
            initialized["result"]["protocolVersion"], version,
            "{initialized}"
        );
        raw.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        raw
    }

    pub async fn send(&mut self, message: Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.stdin.write_all(&line).await.unwrap();
    }

    /// The next message and the length of its line.
    async fn next(&mut self, within: Duration) -> Option<(Value, usize)> {
        let line = tokio::time::timeout(within, self.lines.next_line())
            .await
            .ok()?
            .unwrap()
            .expect("bashc mcp closed stdout");
        let message = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        Some((message, line.len()))
    }

    /// Reads until the response to `id`; notifications meanwhile are kept.
    pub async fn response(&mut self, id: i64) -> (Value, usize) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (message, len) = self
                .next(left)
                .await
                .unwrap_or_else(|| panic!("no response to {id}"));
            if message["id"] == id {
                return (message, len);
            }
            if message.get("method").is_some() {
                self.notifications.push((Instant::now(), message));
            }
        }
    }

    /// Reads until a notification that `wanted` picks, keeping the others; `None` when
    /// none came `within`.
    pub async fn notification(
        &mut self,
        within: Duration,
        wanted: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (message, _) = self.next(left).await?;
            if wanted(&message) {
                return Some(message);
            }
            if message.get("method").is_some() {
                self.notifications.push((Instant::now(), message));
            }
        }
    }

    /// A `tools/call` and its response, with the length of the response's line.
    pub async fn call(&mut self, id: i64, tool: &str, arguments: Value) -> (Value, usize) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}))
            .await;
        self.response(id).await
    }
}

/// The text of a raw result, checked to be the one thing sent.
pub fn raw_text(response: &Value) -> String {
    let result = &response["result"];
    assert!(result.get("structuredContent").is_none(), "{response}");
    let content = result["content"].as_array().unwrap();
    assert_eq!(content.len(), 1, "{response}");
    let text = content[0]["text"].as_str().unwrap().to_owned();
    assert!(!text.contains("bashc "), "{text}");
    text
}

/// A job's record as `bashc jobs --all --json` lists it, once it has one.
fn record_of(daemon: &Daemon, job: &str) -> Option<Value> {
    let listing = daemon.run_bashc(&["jobs", "--all", "--json"]);
    let jobs: Value = serde_json::from_slice(&listing.stdout).ok()?;
    jobs.as_array()?
        .iter()
        .find(|j| j["job"] == job)
        .map(|j| j["record"].clone())
        .filter(|r| !r.is_null())
}

/// The newest job of any session.
fn newest_job(daemon: &Daemon) -> String {
    let listing = daemon.run_bashc(&["jobs", "--all", "--json"]);
    let jobs: Value = serde_json::from_slice(&listing.stdout).unwrap();
    jobs.as_array().unwrap().last().unwrap()["job"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Issue 15.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_kills_its_job_and_a_cancelled_wait_only_stops_waiting() {
    let daemon = Daemon::start_agents_unconfined();
    // rmcp's client gives up on the call (its own timeout): it sends the cancel.
    let client = connect(&daemon).await;
    let params = CallToolRequestParams::new("bash").with_arguments(
        json!({"command": "echo started; sleep 15001", "mode": "slow"})
            .as_object()
            .unwrap()
            .clone(),
    );
    let sleep = tokio::task::spawn_blocking(|| wait_for_running("sleep 15001"));
    let gave_up = tokio::time::timeout(Duration::from_secs(3), client.call_tool_once(params)).await;
    assert!(gave_up.is_err(), "the call ended by itself: {gave_up:?}");
    let sleep = sleep.await.unwrap();
    assert!(
        wait_until(WITHIN, || sleep.iter().all(|&pid| !alive(pid))),
        "the job of a cancelled call is still running"
    );
    let job = newest_job(&daemon);
    let mut record = None;
    assert!(wait_until(WITHIN, || {
        record = record_of(&daemon, &job);
        record.is_some()
    }));
    assert_eq!(record.unwrap()["ended_by"], "cancel");
    // The server goes on.
    let after = call(&client, "bash", json!({"command": "echo after"})).await;
    assert_eq!(
        text_of(&after),
        "exit code: 0\nstdout:\nafter\n\nexit code: 0\n"
    );
    client.cancel().await.unwrap();

    // In raw JSON-RPC: the cancel of a wait leaves the job running.
    let mut raw = Raw::start(&daemon, "2025-06-18").await;
    let (started, _) = raw
        .call(
            1,
            "bash",
            json!({"command": "sleep 15002", "mode": "background"}),
        )
        .await;
    let background = job_in(&raw_text(&started));
    let sleep = wait_for_running("sleep 15002");
    raw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "bash_wait", "arguments": {"job": background},
        "_meta": {"progressToken": "w2"}}}))
        .await;
    // The wait's first progress: it is under way at the daemon, not only sent.
    let progress = raw
        .notification(Duration::from_secs(20), |message| {
            message["method"] == "notifications/progress"
                && message["params"]["progressToken"] == "w2"
        })
        .await;
    assert!(progress.is_some(), "the wait never reported progress");
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "the user pressed Esc"}}),
    )
    .await;
    // And the cancel of a foreground call kills its job.
    raw.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": "sleep 15003"}}}))
        .await;
    let foreground = wait_for_running("sleep 15003");
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 3}}),
    )
    .await;
    assert!(
        wait_until(WITHIN, || foreground.iter().all(|&pid| !alive(pid))),
        "the cancelled call's job runs on"
    );
    let (checked, _) = raw.call(4, "bash_check", json!({"job": background})).await;
    assert!(raw_text(&checked).contains("running: "), "{checked}");
    assert!(
        sleep.iter().all(|&pid| alive(pid)),
        "a cancelled wait ended its job"
    );
    // No answer ever came for the cancelled calls.
    let (killed, _) = raw.call(5, "bash_kill", json!({"job": background})).await;
    assert!(raw_text(&killed).contains("killed"), "{killed}");
    while let Some((message, _)) = raw.next(Duration::from_millis(300)).await {
        assert!(message["id"] != 2 && message["id"] != 3, "{message}");
    }
}

/// Issue 15.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_on_cancel_background_a_cancelled_call_leaves_its_job_running() {
    let daemon = Daemon::start_with_config("[mcp]\non_cancel = \"background\"\n");
    let mut raw = Raw::start(&daemon, "2025-06-18").await;
    raw.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": "echo begun; sleep 15004"}}}))
        .await;
    let sleep = wait_for_running("sleep 15004");
    raw.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1}}),
    )
    .await;
    // The daemon took the cancel: the job is a background one now, and still runs.
    let mode = || {
        let listing = daemon.run_bashc(&["jobs", "--all", "--json"]);
        let jobs: Value = serde_json::from_slice(&listing.stdout).unwrap_or_default();
        jobs.as_array()
            .and_then(|all| all.last())
            .map(|job| job["mode"].clone())
    };
    assert!(
        wait_until(WITHIN, || mode() == Some(json!("background"))),
        "the cancelled call's job never moved to the background: {:?}",
        mode()
    );
    assert!(sleep.iter().all(|&pid| alive(pid)), "the job was killed");
    let (jobs, _) = raw.call(2, "bash_jobs", json!({})).await;
    let listed = raw_text(&jobs);
    assert!(
        listed.contains("running") && listed.contains("background"),
        "{listed}"
    );
    let job = newest_job(&daemon);
    let (checked, _) = raw.call(3, "bash_check", json!({"job": job})).await;
    assert!(raw_text(&checked).contains("begun"), "{checked}");
    raw.call(4, "bash_kill", json!({"job": job})).await;
    assert!(wait_until(WITHIN, || sleep.iter().all(|&pid| !alive(pid))));
}

/// A 70 s call with a progressToken hears of its job at least every 5 s, with the
/// job id, the time so far and the last line.
/// (Issue 15.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_call_with_a_progress_token_gets_progress_every_few_seconds() {
    let daemon = Daemon::start_with_config("[mcp]\nmax_call_secs = 120\n");
    let mut raw = Raw::start(&daemon, "2025-06-18").await;
    let command = "while [ $SECONDS -lt 70 ]; do echo \"tick $SECONDS\"; timeout 1 sleep 15005; done; echo finished";
    let start = Instant::now();
    raw.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "bash", "arguments": {"command": command, "mode": "slow"},
        "_meta": {"progressToken": "p-i15"}}}),
    )
    .await;
    let (response, _) = raw.response(1).await;
    let end = Instant::now();
    let text = raw_text(&response);
    assert!(
        text.contains("finished") && text.contains("exit code: 0"),
        "{text}"
    );
    assert!(end - start >= Duration::from_secs(69), "{:?}", end - start);
    let progress: Vec<&(Instant, Value)> = raw
        .notifications
        .iter()
        .filter(|(_, n)| n["method"] == "notifications/progress")
        .collect();
    let mut times = vec![start];
    times.extend(progress.iter().map(|(at, _)| *at));
    times.push(end);
    let longest = times.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(
        longest <= Duration::from_secs(5),
        "a gap of {longest:?} between progress notifications ({} of them)",
        progress.len()
    );
    let job = newest_job(&daemon);
    let mut last = -1.0;
    for (_, notification) in &progress {
        let params = &notification["params"];
        assert_eq!(params["progressToken"], "p-i15");
        let value = params["progress"].as_f64().unwrap();
        assert!(value >= last, "progress went back: {notification}");
        last = value;
        let message = params["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{job} running for ")),
            "{message}"
        );
    }
    assert!(
        progress
            .iter()
            .any(|(_, n)| n["params"]["message"].as_str().unwrap().contains(": tick ")),
        "no progress message showed the last line"
    );
}

/// Issue 15.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_returns_at_its_budget_and_bash_wait_sees_the_end() {
    let daemon = Daemon::start_with_config("[mcp]\nmax_call_secs = 3\n");
    let client = connect(&daemon).await;
    let start = Instant::now();
    let result = call(
        &client,
        "bash",
        json!({"command": "echo begun; timeout 10 sleep 15006; echo done", "mode": "slow"}),
    )
    .await;
    let took = start.elapsed();
    assert!(
        (Duration::from_millis(2900)..Duration::from_secs(7)).contains(&took),
        "the call took {took:?}"
    );
    assert!(!is_error(&result), "{}", text(&result));
    let words = text_of(&result);
    let job = job_in(&words);
    for said in [
        "stdout:\nbegun\n",
        "reached its time budget of 3 s",
        &format!("bash_wait(job=\"{job}\")"),
        &format!("running: {job}"),
    ] {
        assert!(words.contains(said), "no {said:?} in {words}");
    }
    // A wait is bounded by the budget too; the job's end comes to a later one.
    let start = Instant::now();
    let mut waits = 0;
    let ended = loop {
        let waited = call(&client, "bash_wait", json!({"job": job})).await;
        waits += 1;
        let words = text_of(&waited);
        if words.contains("exit code: 0") {
            break words;
        }
        assert!(
            words.contains("is still running after waiting 3 s"),
            "{words}"
        );
        assert!(start.elapsed() < Duration::from_secs(30), "{words}");
    };
    assert!(waits >= 2, "the first wait outlasted the budget");
    assert!(ended.contains("begun\ndone\n"), "{ended}");
    client.cancel().await.unwrap();
}

/// A result is its text once: 2,000 lines of 600 bytes cost no more than 1.2 times
/// the text plus 2 KB, and `bash_output` pages through every line exactly once, each
/// page within the byte cap.
/// (Issue 15.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_are_sent_once_and_pages_show_every_line_once_under_the_cap() {
    let daemon = Daemon::start();
    let mut raw = Raw::start(&daemon, "2025-06-18").await;
    let command = "for i in $(seq 1 2000); do printf 'line %04d %0590d\\n' $i $i; done";
    let (result, size) = raw.call(1, "bash", json!({"command": command})).await;
    let text = raw_text(&result);
    assert!(
        size as f64 <= 1.2 * text.len() as f64 + 2048.0,
        "a result of {size} bytes for {} bytes of text",
        text.len()
    );
    let job = job_in(&text);
    let mut seen = Vec::new();
    let mut next = Some(json!({"job": job}));
    let mut id = 2;
    while let Some(arguments) = next.take() {
        let (page, size) = raw.call(id, "bash_output", arguments).await;
        id += 1;
        let text = raw_text(&page);
        assert!(size as f64 <= 1.2 * text.len() as f64 + 2048.0, "{size}");
        let (lines, said) = text.split_once("\n[").unwrap_or((&text, ""));
        let lines: Vec<&str> = lines.lines().filter(|l| !l.is_empty()).collect();
        let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
        assert!(bytes <= 51_200, "a page of {bytes} bytes");
        seen.extend(lines.iter().map(|l| l.to_string()));
        if let Some(at) = said.find("next page: bash_output(job=") {
            let call = &said[at + "next page: ".len()..];
            let offset: u64 = call[call.find("offset=").unwrap() + 7..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse()
                .unwrap();
            assert!(said.contains(" of 2000 shown"), "{said}");
            next = Some(json!({"job": job, "offset": offset}));
        } else {
            assert!(said.contains("of 2000: the end of the stream"), "{said}");
        }
        assert!(id < 100, "paging does not end");
    }
    let expected: Vec<String> = (1..=2000)
        .map(|i| format!("line {i:04} {i:0590}"))
        .collect();
    assert_eq!(seen.len(), 2000);
    assert!(seen == expected, "pages skipped or repeated lines");
}

/// Issue 15.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_job_tool_refuses_another_sessions_job() {
    let daemon = Daemon::start();
    let started = daemon.run_bashc(&[
        "exec",
        "--mode",
        "background",
        "--json",
        "--",
        "echo mine; sleep 15007",
    ]);
    let theirs: Value = serde_json::from_slice(&started.stdout).unwrap();
    let job = theirs["job"].as_str().unwrap().to_owned();
    let sleep = wait_for_running("sleep 15007");

    let client = connect(&daemon).await;
    for (tool, arguments) in [
        ("bash_check", json!({"job": job})),
        ("bash_wait", json!({"job": job, "timeout_secs": 1})),
        ("bash_kill", json!({"job": job})),
        ("bash_output", json!({"job": job})),
    ] {
        let result = call(&client, tool, arguments).await;
        assert!(is_error(&result), "{tool}: {}", text(&result));
        let words = text_of(&result);
        assert!(
            words.contains(&format!("{job} is a job of session test"))
                && words.contains("reach only this session's jobs"),
            "{tool}: {words}"
        );
        assert!(!words.contains("mine"), "{tool} showed its output: {words}");
    }
    assert!(
        sleep.iter().all(|&pid| alive(pid)),
        "another session's job was killed"
    );
    client.cancel().await.unwrap();

    // The CLI refuses too, and says how to reach it on purpose.
    for command in ["check", "wait", "kill", "output"] {
        let out = daemon.run_bashc(&[command, &job, "--session", "other"]);
        assert_eq!(out.status.code(), Some(255), "{command}: {}", show(&out));
        assert!(
            stderr(&out).contains(&format!(
                "{job} is a job of session test, not of this session (other): to act on it anyway, add --session test, or --any-session"
            )),
            "{command}: {}",
            show(&out)
        );
    }
    assert!(sleep.iter().all(|&pid| alive(pid)));
    let out = daemon.run_bashc(&["output", &job, "--session", "other", "--any-session"]);
    assert_eq!(super::stdout(&out), "mine\n", "{}", show(&out));
    let listed = daemon.run_bashc(&["jobs", "--all", "--session", "other"]);
    assert!(super::stdout(&listed).contains(&job), "{}", show(&listed));
    let out = daemon.run_bashc(&["kill", &job]);
    assert!(out.status.code().is_some(), "{}", show(&out));
    assert!(wait_until(WITHIN, || sleep.iter().all(|&pid| !alive(pid))));
}

/// Every tool's input schema keeps the flat rules and compiles as draft-07 and as
/// 2020-12; arguments in the forms clients write are taken.
/// (Issue 15.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_are_flat_and_compile_as_draft_07_and_2020_12() {
    let daemon = Daemon::start();
    let client = connect(&daemon).await;
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(
        tools.len(),
        8,
        "bash, bash_check, bash_wait, bash_kill, bash_jobs, bash_output, bash_send"
    );
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        let name = tool.name.as_ref();
        check_flat(name, &schema);
        for draft in [boon::Draft::V7, boon::Draft::V2020_12] {
            let mut compiler = boon::Compiler::new();
            compiler.set_default_draft(draft);
            compiler.enable_format_assertions();
            let url = format!("http://bashd.invalid/{name}.json");
            compiler.add_resource(&url, schema.clone()).unwrap();
            let mut schemas = boon::Schemas::new();
            let index = compiler
                .compile(&url, &mut schemas)
                .unwrap_or_else(|e| panic!("{name} as {draft:?}: {e}"));
            let (good, bad) = match name {
                "bash" => (
                    json!({"command": "ls", "mode": "slow", "timeout_secs": 30, "merge_stderr": true}),
                    json!({"command": "ls", "mode": "fast"}),
                ),
                "bash_jobs" => (json!({}), json!([])),
                // `job` or `jobs` (issue 32): the call says which is missing.
                "bash_wait" => (json!({"job": "j1"}), json!({"jobs": "j1"})),
                _ => (json!({"job": "j1"}), json!({})),
            };
            assert!(schemas.validate(&good, index).is_ok(), "{name}: {good}");
            assert!(schemas.validate(&bad, index).is_err(), "{name}: {bad}");
        }
        let annotations = tool.annotations.as_ref().expect("annotated");
        let read_only = ["bash_jobs", "bash_check", "bash_output", "bash_screen"].contains(&name);
        assert_eq!(
            annotations.read_only_hint,
            Some(read_only || name == "bash_wait")
        );
        if name == "bash_kill" {
            assert_eq!(annotations.destructive_hint, Some(true));
        }
    }
    // What Python writes (30.0) and what forms send ("20", "true") is taken.
    let result = call(
        &client,
        "bash",
        json!({"command": "seq 1 30", "timeout_secs": 30.0, "max_lines": "20", "merge_stderr": "true"}),
    )
    .await;
    assert!(!is_error(&result), "{}", text(&result));
    assert!(
        text_of(&result).contains("showing last 20 of 30 lines"),
        "{}",
        text(&result)
    );
    client.cancel().await.unwrap();
}

/// The flat rules (docs/MCP.md, "Schemas"): one plain type per property, described;
/// no `$schema`, `$defs`, `$ref`, `anyOf`, type arrays, `format`, `minimum`,
/// `maximum`, `additionalProperties`; `properties` always there.
fn check_flat(name: &str, schema: &Value) {
    assert_eq!(schema["type"], "object", "{name}: {schema}");
    let properties = schema["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("{name} has no properties: {schema}"));
    let text = schema.to_string();
    for word in [
        "\"$schema\"",
        "\"$defs\"",
        "\"$ref\"",
        "\"anyOf\"",
        "\"oneOf\"",
        "\"format\"",
        "\"minimum\"",
        "\"maximum\"",
        "\"additionalProperties\"",
        // A null type; "null" as an enum value (`stdin`) is a plain string.
        "\"type\":\"null\"",
    ] {
        assert!(!text.contains(word), "{name} has {word}: {schema}");
    }
    for (property, spec) in properties {
        let kind = spec["type"].as_str();
        let plain =
            |kind: Option<&str>| matches!(kind, Some("string" | "integer" | "number" | "boolean"));
        assert!(
            plain(kind) || (kind == Some("array") && plain(spec["items"]["type"].as_str())),
            "{name}.{property}: {spec}"
        );
        assert!(spec["description"].as_str().is_some_and(|d| d.len() > 10));
        if let Some(values) = spec.get("enum") {
            assert_eq!(kind, Some("string"));
            assert!(values.as_array().unwrap().iter().all(Value::is_string));
        }
    }
}

/// Issue 15.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_answered_as_the_negotiated_version_says() {
    let daemon = Daemon::start_agents_unconfined();
    let batch = json!([
        {"jsonrpc": "2.0", "id": 7, "method": "ping"},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
        {"id": 9},
    ]);
    // MCP 2025-06-18 has no batches: one error that says so.
    let mut current = Raw::start(&daemon, "2025-06-18").await;
    current.send(batch.clone()).await;
    let (error, _) = current.next(WITHIN).await.unwrap();
    assert_eq!(error["error"]["code"], -32600, "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("send each message on a line of its own"),
        "{error}"
    );
    // MCP 2025-03-26 had them: one array with an answer per request.
    let mut older = Raw::start(&daemon, "2025-03-26").await;
    older.send(batch).await;
    let (answers, _) = older.next(WITHIN).await.unwrap();
    let answers = answers.as_array().unwrap_or_else(|| panic!("{answers}"));
    let mut ids: Vec<i64> = answers.iter().map(|a| a["id"].as_i64().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, [7, 8, 9], "{answers:?}");
    let by_id = |id: i64| answers.iter().find(|a| a["id"] == id).unwrap();
    assert!(by_id(7)["result"].is_object());
    assert_eq!(by_id(8)["result"]["tools"].as_array().unwrap().len(), 8);
    assert_eq!(by_id(9)["error"]["code"], -32600);
    // And the server goes on, one message a line.
    let (result, _) = older.call(10, "bash", json!({"command": "echo on"})).await;
    assert_eq!(
        raw_text(&result),
        "exit code: 0\nstdout:\non\n\nexit code: 0\n"
    );
}

//! `bashc mcp` (issue 8), driven as an agent drives it: rmcp's client over the child's
//! stdio, raw JSON-RPC lines, and a bash "agent" that is SIGKILLed. Which processes
//! live is read from /proc.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use bashd_tests::{Daemon, alive, bin_path, pids_running, wait_for_running, wait_until};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const GONE_WITHIN: Duration = Duration::from_secs(10);

/// `bashc mcp` for this daemon's runtime dir, started in `workdir`, with the session it
/// picks itself (no BASHD_SESSION).
pub fn mcp_command(daemon: &Daemon, workdir: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(bin_path("bashc"));
    command
        .arg("mcp")
        .env(
            bashc::protocol::runtime::RUNTIME_DIR_ENV,
            daemon.runtime_dir(),
        )
        .env("XDG_CONFIG_HOME", daemon.config_home())
        .env_remove("BASHD_SESSION")
        .current_dir(workdir);
    command
}

/// The `bashc mcp` that `command` starts, as an MCP client's transport; its stderr is
/// dropped.
pub fn transport(command: tokio::process::Command) -> TokioChildProcess {
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start bashc mcp");
    transport
}

/// An MCP client of the `bashc mcp` that `command` starts, initialized as `client`
/// says (`()`, or a `ClientConfig` that names the client).
pub async fn serve<C: rmcp::Service<RoleClient>>(
    client: C,
    command: tokio::process::Command,
) -> RunningService<RoleClient, C> {
    client
        .serve(transport(command))
        .await
        .expect("MCP initialization failed")
}

pub async fn connect(daemon: &Daemon) -> RunningService<RoleClient, ()> {
    let mut command = mcp_command(daemon, daemon.scratch());
    command.env("BASHD_NO_AUTOSTART", "1");
    serve((), command).await
}

pub async fn call<C: rmcp::Service<RoleClient>>(
    client: &RunningService<RoleClient, C>,
    tool: &str,
    args: Value,
) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool} failed as a protocol error: {e}"))
}

pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// The one thing a result is: its text. No `structuredContent` (issue 15: clients show
/// the model one or the other, so the one sent is complete), and no CLI word in it.
pub fn text_of(result: &CallToolResult) -> String {
    assert!(
        result.structured_content.is_none(),
        "a result carries structured content: {result:?}"
    );
    let text = text(result);
    // `bashc allow` is the person's command, which the agent passes on (issue 44).
    assert!(
        !text.replace("bashc allow", "").contains("bashc "),
        "CLI words in a tool result: {text}"
    );
    for flag in [
        "--mode",
        "--timeout",
        "--on-timeout",
        "--offset",
        "--limit",
        "--stream",
        "--session",
        "--max-bytes",
    ] {
        assert!(
            !text.contains(flag),
            "CLI flag {flag} in a tool result: {text}"
        );
    }
    text
}

/// The job id a result names: `running: j3 ...` or a `bash_...(job="j3")` call.
pub fn job_in(text: &str) -> String {
    let at = text
        .find("job=\"j")
        .map(|at| at + 5)
        .or_else(|| text.find("running: j").map(|at| at + 9))
        .unwrap_or_else(|| panic!("no job id in {text}"));
    text[at..]
        .chars()
        .take_while(|c| *c == 'j' || c.is_ascii_digit())
        .collect()
}

pub fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_runs_follows_pages_and_kills_jobs_through_the_tools() {
    let daemon = Daemon::start_agents_unconfined();
    let client = connect(&daemon).await;
    let info = client.peer_info().expect("the server introduced itself");
    assert_eq!(info.server_info.as_ref().unwrap().name, "bashd");

    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "bash",
            "bash_check",
            "bash_jobs",
            "bash_kill",
            "bash_output",
            "bash_screen",
            "bash_send",
            "bash_wait"
        ]
    );
    let bash = tools.iter().find(|t| t.name == "bash").unwrap();
    let schema = Value::Object((*bash.input_schema).clone());
    assert_eq!(schema["required"], json!(["command"]), "{schema}");
    for property in [
        "command",
        "mode",
        "timeout_secs",
        "workdir",
        "description",
        "max_lines",
    ] {
        assert!(
            schema["properties"][property].is_object(),
            "bash lacks {property}: {schema}"
        );
    }
    let description = bash.description.as_deref().unwrap();
    for words in [
        "do not persist between calls",
        "`workdir`",
        "is NOT killed",
        "bash_output",
        "2000 lines and 50 KiB",
        "permission denied:",
    ] {
        assert!(
            description.contains(words),
            "bash says nothing of {words:?}"
        );
    }
    for tool in &tools {
        assert!(
            tool.description.as_ref().is_some_and(|d| d.len() > 60),
            "{} is not described",
            tool.name
        );
    }

    // A command: its text, its JSON, its session.
    let result = call(
        &client,
        "bash",
        json!({"command": "echo hello; echo oops >&2"}),
    )
    .await;
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(
        text_of(&result),
        "exit code: 0\nstdout:\nhello\n\nstderr:\noops\n\nexit code: 0\n"
    );
    // The job ran in the server's session, in its directory.
    let listing = daemon.run_bashc(&["jobs", "--all", "--json"]);
    let listed: Value = serde_json::from_slice(&listing.stdout).unwrap();
    let first = &listed.as_array().unwrap()[0];
    assert!(
        first["session"].as_str().unwrap().starts_with("mcp-"),
        "{first}"
    );
    let pwd = call(&client, "bash", json!({"command": "pwd"})).await;
    assert!(
        text_of(&pwd).starts_with(&format!(
            "exit code: 0\nstdout:\n{}\n",
            daemon.scratch().display()
        )),
        "{}",
        text(&pwd)
    );

    // A cut stream says how to read the rest, and the rest is there.
    let long = call(&client, "bash", json!({"command": "seq 1 3000"})).await;
    let long_job = job_in(&text_of(&long));
    assert!(
        text(&long).contains(&format!(
            "[stdout: showing last 2000 of 3000 lines. The rest: bash_output(job=\"{long_job}\", offset=1, limit=1000). Full output: "
        )),
        "{}",
        text(&long)
    );
    let tail = call(
        &client,
        "bash_output",
        json!({"job": long_job, "offset": 2999, "limit": 5}),
    )
    .await;
    assert_eq!(
        text_of(&tail),
        "2999\n3000\n\n[lines 2999-3000 of 3000: the end of the stream]\n"
    );

    let result = call(&client, "bash", json!({"command": "exit 3"})).await;
    assert!(is_error(&result), "a non-zero exit is a tool error");
    assert_eq!(text_of(&result), "exit code: 3\n");

    // A background job, followed by two checks that neither repeat nor lose a line.
    let result = call(
        &client,
        "bash",
        json!({
            "command": "for i in 1 2 3 4 5 6; do echo line$i; sleep 0.2; done; setsid sleep 306.301 & sleep 306.302",
            "mode": "background",
            "description": "six lines, then two sleeps",
        }),
    )
    .await;
    assert!(!is_error(&result), "{}", text(&result));
    let job = job_in(&text_of(&result));
    assert!(text(&result).contains(&format!("running: {job} (pid ")));
    assert!(
        text(&result).contains(&format!("bash_check(job=\"{job}\")")),
        "{}",
        text(&result)
    );

    let mut seen = String::new();
    let mut checks_with_lines = 0;
    let all_seen = {
        let deadline = tokio::time::Instant::now() + GONE_WITHIN;
        loop {
            let result = call(&client, "bash_check", json!({"job": job})).await;
            assert!(!is_error(&result), "{}", text(&result));
            let text = text_of(&result);
            // After the status line a result starts with (issue 34).
            let body = text.split_once('\n').map_or("", |(_, body)| body);
            let new = match body.strip_prefix("stdout:\n") {
                Some(rest) => rest[..rest.find("\n\n").unwrap() + 1].to_owned(),
                None => String::new(),
            };
            if !new.is_empty() {
                checks_with_lines += 1;
                seen.push_str(&new);
            }
            if seen.contains("line6") || tokio::time::Instant::now() > deadline {
                break seen.contains("line6");
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    };
    assert!(all_seen, "checks saw {seen:?}");
    assert_eq!(seen, "line1\nline2\nline3\nline4\nline5\nline6\n");
    assert!(checks_with_lines >= 2, "one check saw everything");

    let page = call(
        &client,
        "bash_output",
        json!({"job": job, "offset": 2, "limit": 2}),
    )
    .await;
    assert!(!is_error(&page), "{}", text(&page));
    assert!(
        text_of(&page).starts_with(&format!(
            "line2\nline3\n\n[lines 2-3 of 6 so far shown; next page: bash_output(job=\"{job}\", offset=4)]"
        )),
        "{}",
        text(&page)
    );

    let jobs = call(&client, "bash_jobs", json!({})).await;
    let listed = text_of(&jobs);
    let entry = listed
        .lines()
        .find(|line| line.starts_with(&format!("{job} ")))
        .unwrap_or_else(|| panic!("{job} not listed: {listed}"));
    assert!(entry.contains("running"), "{entry}");
    assert!(listed.contains("# six lines, then two sleeps"), "{listed}");
    // The user sees it too.
    let listing = daemon.run_bashc(&["jobs", "--all"]);
    assert!(
        String::from_utf8_lossy(&listing.stdout).contains("# six lines, then two sleeps"),
        "{}",
        crate::show(&listing)
    );

    let waited = call(
        &client,
        "bash_wait",
        json!({"job": job, "timeout_secs": 0.2}),
    )
    .await;
    assert!(!is_error(&waited));
    assert!(
        text_of(&waited).contains(&format!("{job} is still running after waiting 0.2 s")),
        "{}",
        text(&waited)
    );

    let sleeps = [
        wait_for_running("sleep 306.301"),
        wait_for_running("sleep 306.302"),
    ]
    .concat();
    let killed = call(&client, "bash_kill", json!({"job": job})).await;
    assert!(!is_error(&killed), "{}", text(&killed));
    assert!(
        text_of(&killed).contains("(killed, SIGTERM)"),
        "{}",
        text(&killed)
    );
    // The same state is the same verdict in every job tool.
    for tool in ["bash_check", "bash_wait", "bash_kill"] {
        let again = call(&client, tool, json!({"job": job})).await;
        assert!(!is_error(&again), "{tool}: {}", text(&again));
    }
    assert!(
        wait_until(GONE_WITHIN, || sleeps.iter().all(|&pid| !alive(pid))),
        "the job's processes outlived bash_kill"
    );

    // A denial is a tool error, and nothing ran.
    let denied = call(&client, "bash", json!({"command": "git add -A"})).await;
    assert!(is_error(&denied));
    assert!(
        text_of(&denied).contains("permission denied: git-add-blind")
            && text(&denied).contains("(denied)"),
        "{}",
        text(&denied)
    );
    // Its output says why there is none.
    let page = call(&client, "bash_output", json!({"job": job_of_last(&daemon)})).await;
    assert!(
        text_of(&page)
            .contains("never ran, so it has no output:\npermission denied: git-add-blind"),
        "{}",
        text(&page)
    );

    // Bad arguments are tool errors that name the argument.
    for (tool, args, named) in [
        ("bash_check", json!({"job": "j999"}), "`job`"),
        (
            "bash",
            json!({"command": "ls", "workdir": "/no/such/dir"}),
            "`workdir`",
        ),
        ("bash", json!({"command": 5}), "`command`"),
        (
            "bash",
            json!({"command": "ls", "timeout_secs": "soon"}),
            "`timeout_secs`",
        ),
        ("bash_output", json!({"job": job, "offset": 0}), "`offset`"),
        ("bash_output", json!({"job": job, "limit": 0}), "`limit`"),
        (
            "bash_output",
            json!({"job": job, "max_bytes": 2_000_000}),
            "`max_bytes`",
        ),
        (
            "bash",
            json!({"command": "ls", "max_lines": 0}),
            "`max_lines`",
        ),
        (
            "bash",
            json!({"command": "ls", "timeout_secs": 0}),
            "`timeout_secs`",
        ),
        (
            "bash",
            json!({"command": "ls", "timeout_secs": 90_000}),
            "`timeout_secs`",
        ),
    ] {
        let result = call(&client, tool, args.clone()).await;
        assert!(is_error(&result), "{tool} {args} was not an error");
        assert!(
            text(&result).contains(named),
            "{tool} {args}: {}",
            text(&result)
        );
    }

    // An unknown tool is a protocol error, and the server goes on.
    let unknown = client
        .call_tool(CallToolRequestParams::new("bash_nope"))
        .await;
    assert!(unknown.is_err(), "{unknown:?}");
    let result = call(&client, "bash", json!({"command": "echo still here"})).await;
    assert!(text(&result).contains("still here"));

    client.cancel().await.unwrap();
}

/// The newest job of any session, as `bashc jobs --all` lists it.
fn job_of_last(daemon: &Daemon) -> String {
    let listing = daemon.run_bashc(&["jobs", "--all", "--json"]);
    let listed: Value = serde_json::from_slice(&listing.stdout).unwrap();
    let last = listed.as_array().unwrap().last().unwrap();
    last["job"].as_str().unwrap().to_owned()
}

/// A daemon that dies and comes back (crash, upgrade) costs the agent nothing: the
/// server connects again on its next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_reconnects_to_a_restarted_daemon() {
    let mut daemon = Daemon::start_agents_unconfined();
    let client = connect(&daemon).await;
    let result = call(&client, "bash", json!({"command": "echo before"})).await;
    assert_eq!(
        text_of(&result),
        "exit code: 0\nstdout:\nbefore\n\nexit code: 0\n"
    );
    let first = job_of_last(&daemon);

    daemon.kill_daemon();
    daemon.restart();
    let result = call(&client, "bash", json!({"command": "echo after"})).await;
    assert!(!is_error(&result), "{}", text(&result));
    assert_eq!(
        text_of(&result),
        "exit code: 0\nstdout:\nafter\n\nexit code: 0\n"
    );
    assert_ne!(job_of_last(&daemon), first, "a job id was reused");
    // A job of the daemon that died is said to be lost in the restart.
    let gone = call(&client, "bash_check", json!({"job": first})).await;
    assert!(is_error(&gone));
    assert!(
        text_of(&gone).contains("was started by an earlier bashd"),
        "{}",
        text(&gone)
    );
    client.cancel().await.unwrap();
}

pub type Lines = tokio::io::Lines<BufReader<tokio::process::ChildStdout>>;

/// The `bashc mcp` that `command` starts, to be spoken to in raw JSON-RPC lines: the
/// child (killed on drop), its stdin, and the lines of its stdout. Its stderr is
/// dropped.
pub fn spawn_raw(
    command: &mut tokio::process::Command,
) -> (tokio::process::Child, tokio::process::ChildStdin, Lines) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, stdin, lines)
}

/// The next message the server writes, within a deadline.
async fn next_message(lines: &mut Lines) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("bashc mcp wrote nothing")
        .unwrap()
        .expect("bashc mcp closed stdout");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// Reads messages until the response with `id`.
async fn response(lines: &mut Lines, id: i64) -> Value {
    loop {
        let message = next_message(lines).await;
        if message["id"] == id {
            return message;
        }
    }
}

#[tokio::test]
async fn malformed_json_rpc_gets_an_error_and_the_server_starts_bashd_and_goes_on() {
    // No daemon yet: `bashc mcp` starts one, reading the config written here.
    let daemon = Daemon::unstarted();
    daemon.write_config(bashd_tests::AGENTS_UNCONFINED);
    let (mut child, mut stdin, mut lines) = spawn_raw(&mut mcp_command(&daemon, daemon.scratch()));
    let send = |message: String| format!("{message}\n").into_bytes();

    stdin.write_all(b"{this is not json\n").await.unwrap();
    let error = next_message(&mut lines).await;
    assert_eq!(error["error"]["code"], -32700, "{error}");
    assert!(error["id"].is_null(), "{error}");
    stdin
        .write_all(&send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
            .to_string(),
        ))
        .await
        .unwrap();
    let initialized = response(&mut lines, 1).await;
    assert_eq!(
        initialized["result"]["serverInfo"]["name"], "bashd",
        "{initialized}"
    );
    stdin
        .write_all(&send(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        ))
        .await
        .unwrap();
    // A message past the size limit is refused whole, and costs no more than the limit.
    let mut huge = vec![b'x'; 17 << 20];
    huge.push(b'\n');
    stdin.write_all(&huge).await.unwrap();
    let too_long = next_message(&mut lines).await;
    assert_eq!(too_long["error"]["code"], -32700, "{too_long}");
    assert!(
        too_long["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than"),
        "{too_long}"
    );
    stdin.write_all(b"{\"id\": 2}\n").await.unwrap();
    let invalid = response(&mut lines, 2).await;
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    stdin
        .write_all(&send(
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "bash", "arguments": {"command": "echo served"}}})
            .to_string(),
        ))
        .await
        .unwrap();
    let served = response(&mut lines, 3).await;
    assert_eq!(
        served["result"]["content"][0]["text"], "exit code: 0\nstdout:\nserved\n\nexit code: 0\n",
        "{served}"
    );
    assert!(
        served["result"].get("structuredContent").is_none(),
        "{served}"
    );
    assert_eq!(daemon.daemons().len(), 1, "bashc mcp did not start bashd");
    stdin
        .write_all(&send(
            json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}).to_string(),
        ))
        .await
        .unwrap();
    assert!(response(&mut lines, 4).await["result"].is_object());

    // End of input: the server exits.
    drop(stdin);
    let status = tokio::time::timeout(GONE_WITHIN, child.wait()).await;
    assert!(
        status.is_ok_and(|s| s.unwrap().success()),
        "bashc mcp did not exit at EOF"
    );
}

/// An agent, here a bash that holds `bashc mcp` as a coprocess, starts a foreground
/// and a background command and is SIGKILLed: the server exits, the foreground job
/// dies at once, the background one at the end of the session's linger.
#[test]
fn when_the_agent_is_killed_the_server_exits_and_its_session_winds_down() {
    let daemon = Daemon::start_with_config("[sessions]\nlinger_secs = 3\n");
    let responses = daemon.scratch().join("responses");
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bash-agent", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "bash", "arguments": {"command": "sleep 306.401", "timeout_secs": 600}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "bash", "arguments": {"command": "sleep 306.402", "mode": "background"}}}),
    ];
    let script = format!(
        "coproc MCP {{ exec {bashc} mcp 2>/dev/null; }}\n\
         printf '%s\\n' {messages} >&\"${{MCP[1]}}\"\n\
         while read -r line <&\"${{MCP[0]}}\"; do printf '%s\\n' \"$line\" >> {responses}; done\n",
        bashc = bin_path("bashc").display(),
        messages = messages
            .iter()
            .map(|m| format!("'{m}'"))
            .collect::<Vec<_>>()
            .join(" "),
        responses = responses.display(),
    );
    let mut agent = bashd_tests::KillOnDrop(
        std::process::Command::new("bash")
            .args(["-c", &script])
            .env(
                bashc::protocol::runtime::RUNTIME_DIR_ENV,
                daemon.runtime_dir(),
            )
            .env("XDG_CONFIG_HOME", daemon.config_home())
            .env("BASHD_NO_AUTOSTART", "1")
            .env_remove("BASHD_SESSION")
            .current_dir(daemon.scratch())
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let foreground = wait_for_running("sleep 306.401");
    let background = wait_for_running("sleep 306.402");
    assert!(
        wait_until(GONE_WITHIN, || std::fs::read_to_string(&responses)
            .is_ok_and(|r| r.contains("\"id\":3"))),
        "the background call was not answered"
    );
    // Other tests run servers too: this one is the agent's child.
    let server: Vec<u32> = pids_running(&format!("{} mcp", bin_path("bashc").display()))
        .into_iter()
        .filter(|&pid| bashd_tests::procs::parent_pid(pid) == Some(agent.pid()))
        .collect();
    assert_eq!(server.len(), 1, "{server:?}");

    agent.kill();
    assert!(
        wait_until(GONE_WITHIN, || !alive(server[0])),
        "bashc mcp outlived its agent"
    );
    assert!(
        wait_until(GONE_WITHIN, || foreground.iter().all(|&p| !alive(p))),
        "the foreground job outlived the agent"
    );
    assert!(
        background.iter().all(|&p| alive(p)),
        "the background job died before the linger ended"
    );
    assert!(
        wait_until(GONE_WITHIN, || background.iter().all(|&p| !alive(p))),
        "the background job outlived the linger"
    );
}

/// A process the agent leaves behind may keep the server's stdin open; the agent's
/// death ends the server all the same.
#[test]
fn the_server_exits_when_its_agent_dies_even_with_stdin_still_open() {
    let daemon = Daemon::start();
    let (stdin_read, stdin_write) = std::io::pipe().unwrap();
    let mut agent = bashd_tests::KillOnDrop(
        std::process::Command::new("bash")
            .args([
                "-c",
                &format!("exec 3<&0; {} mcp <&3 & wait", bin_path("bashc").display()),
            ])
            .env(
                bashc::protocol::runtime::RUNTIME_DIR_ENV,
                daemon.runtime_dir(),
            )
            .env("BASHD_NO_AUTOSTART", "1")
            .stdin(stdin_read)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let command_line = format!("{} mcp", bin_path("bashc").display());
    let mut server = Vec::new();
    assert!(wait_until(GONE_WITHIN, || {
        server = pids_running(&command_line)
            .into_iter()
            .filter(|&pid| bashd_tests::procs::parent_pid(pid) == Some(agent.pid()))
            .collect();
        !server.is_empty()
    }));
    // Connected to bashd: past the start, where it takes its parent for its agent.
    assert!(wait_until(GONE_WITHIN, || bashd_tests::procs::has_socket(
        server[0]
    )));

    agent.kill();
    assert!(
        wait_until(GONE_WITHIN, || !alive(server[0])),
        "bashc mcp outlived its agent"
    );
    drop(stdin_write);
}

/// Issue 31: with `[sandbox] network = "off"` under a floor, asking for the network is
/// refused in the asker's words: an MCP agent is told `net="on"` (it was told "run the
/// job without --net on", a flag it has no way to give), and the CLI, as the positive
/// control of the same refusal, `--net on`. Nothing runs either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_network_is_told_in_tool_words_not_flags() {
    let daemon = Daemon::start_with_config(
        // Unanswered, the ask (issue 44) expires: refused.
        "[sandbox]\ndefault = \"read-only\"\nnetwork = \"off\"\nfloor = \"read-only\"\nask_secs = 1\n",
    );
    let ran = daemon.scratch().join("ran-i31");
    let command = format!("touch {}", ran.display());

    let client = connect(&daemon).await;
    let refused = call(&client, "bash", json!({"command": command, "net": "on"})).await;
    let said = text_of(&refused);
    assert!(is_error(&refused), "{said}");
    assert!(
        said.contains("turned on only with a person's yes"),
        "{said}"
    );
    assert!(said.contains("without net=\"on\""), "{said}");
    assert!(!said.contains("--"), "a CLI flag in a tool result: {said}");
    client.cancel().await.unwrap();

    let out = daemon.run_bashc(&["exec", "--net", "on", "--", &command]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("turned on only with a person's yes"),
        "{stderr}"
    );
    assert!(stderr.contains("without --net on"), "{stderr}");
    assert!(
        !stderr.contains("net=\""),
        "a tool argument in the CLI's words: {stderr}"
    );
    assert!(!ran.exists(), "a refused command ran");
}

/// Issue 31: the tools are one list: the unknown-tool error and `bashc mcp --help` name
/// every tool `tools/list` gives (they named 7 of 8, without bash_screen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unknown_tool_error_and_help_name_every_listed_tool() {
    let daemon = Daemon::start();
    let client = connect(&daemon).await;
    let tools = client.list_all_tools().await.expect("tools/list failed");
    assert!(tools.len() >= 8, "{tools:?}");
    let unknown = client
        .call_tool(CallToolRequestParams::new("bash_nope"))
        .await
        .expect_err("an unknown tool was called")
        .to_string();
    let help = std::process::Command::new(bin_path("bashc"))
        .args(["mcp", "--help"])
        .output()
        .expect("cannot run bashc mcp --help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    for tool in &tools {
        // A name as a word: `bash` is in every other name too.
        let named = |text: &str| {
            text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|word| word == tool.name)
        };
        assert!(
            named(&unknown),
            "the error does not name {}: {unknown}",
            tool.name
        );
        assert!(
            named(&help),
            "bashc mcp --help does not name {}: {help}",
            tool.name
        );
    }
    client.cancel().await.unwrap();
}

/// A page of an empty stream says why in the CLI's sentence with tool words (issue 46,
/// step 4: the two copies had drifted): one line is "1 line", the other stream is named
/// as the call that reads it, and an offset past the end as the argument.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_page_is_worded_as_the_cli_words_it_in_tool_calls() {
    let daemon = Daemon::start();
    let client = connect(&daemon).await;
    call(&client, "bash", json!({"command": "echo oops >&2"})).await;
    let job = job_of_last(&daemon);
    let page = text_of(&call(&client, "bash_output", json!({"job": job})).await);
    assert!(
        page.contains(&format!(
            "{job}'s stdout is empty; its stderr has 1 line: bash_output(job=\"{job}\", stream=\"stderr\")"
        )),
        "{page}"
    );
    let page = text_of(
        &call(
            &client,
            "bash_output",
            json!({"job": job, "stream": "stderr", "offset": 5}),
        )
        .await,
    );
    assert!(
        page.contains(&format!(
            "{job}'s stderr has 1 line; offset=5 is past its end"
        )),
        "{page}"
    );
    client.cancel().await.unwrap();
}

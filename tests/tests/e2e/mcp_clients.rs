//! What four real agent CLIs do to `bashc mcp` (issue 34), done here by hand: a client
//! that ends its server's whole process tree (OpenCode), the arguments clients add to
//! every call (Gemini CLI), the result budget of each client, and the agent's own
//! credentials kept out of jobs.

use std::time::Duration;

use bashd_tests::{Daemon, alive, descendants, wait_until};
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::json;
use crate::mcp::{call as call_as, is_error, job_in, mcp_command, serve, text_of, transport};
use crate::mcp_calls::{Raw, raw_text};

/// OpenCode ends an MCP server by SIGTERMing every descendant of it that /proc shows.
/// A daemon the server started must not be one of them: it serves every session, and
/// another agent's jobs would go with it.
/// (Issue 34.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_autostarted_daemon_outlives_a_client_that_ends_its_servers_tree() {
    let daemon = Daemon::unstarted();
    let mut command = mcp_command(&daemon, daemon.scratch());
    command.env_remove("BASHD_NO_AUTOSTART");
    let transport = transport(command);
    let server = transport.id().expect("the server has a pid");
    let client = ().serve(transport).await.expect("MCP initialization failed");
    assert!(
        wait_until(Duration::from_secs(20), || daemon.daemons().len() == 1),
        "bashc mcp started no daemon"
    );
    let bashd = daemon.daemons()[0];
    let out = daemon.run_bashc(&[
        "exec",
        "--session",
        "other-agent",
        "--mode",
        "background",
        "--json",
        "--",
        "sleep 300",
    ]);
    let job_pid = json(&out)["pid"].as_u64().expect("the job has a pid") as u32;

    let mut tree = descendants(server);
    tree.push(server);
    for pid in tree {
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    assert!(
        wait_until(Duration::from_secs(10), || !alive(server)),
        "bashc mcp outlived SIGTERM"
    );
    drop(client);
    // A daemon that got the signal stops its jobs at once: give it the time to.
    let died = wait_until(Duration::from_secs(3), || !alive(bashd) || !alive(job_pid));
    assert!(
        !died,
        "ending the MCP server's tree ended bashd ({}) or another session's job ({})",
        alive(bashd),
        alive(job_pid)
    );
    let out = daemon.run_bashc(&["jobs", "--all", "--json"]);
    let jobs = json(&out);
    assert_eq!(jobs[0]["state"], "running", "{jobs}");
    assert_eq!(jobs[0]["session"], "other-agent", "{jobs}");
}

/// `bashc mcp` on this daemon, introduced as the client `name` (`clientInfo.name`),
/// with `env` added to its environment.
async fn connect_as(
    daemon: &Daemon,
    name: &str,
    env: &[(&str, &str)],
) -> RunningService<RoleClient, ClientConfig> {
    let mut command = mcp_command(daemon, daemon.scratch());
    command.env("BASHD_NO_AUTOSTART", "1");
    for (key, value) in env {
        command.env(key, value);
    }
    let client = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(name, "1.0"),
    );
    serve(client, command).await
}

/// Gemini CLI adds `wait_for_previous` to every call; it is taken and ignored on every
/// tool, while a model's typo is still refused with the names there are.
/// (Issue 34.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_s_wait_for_previous_is_taken_by_every_tool() {
    let daemon = Daemon::start();
    let client = connect_as(&daemon, "gemini-cli-mcp-client", &[]).await;
    let ran = call_as(
        &client,
        "bash",
        json!({"command": "echo ran", "wait_for_previous": true}),
    )
    .await;
    let text = text_of(&ran);
    assert!(!is_error(&ran) && text.contains("ran\n"), "{text}");
    let job = job_in(&text_of(
        &call_as(
            &client,
            "bash",
            json!({"command": "sleep 30", "mode": "background", "wait_for_previous": false}),
        )
        .await,
    ));
    for (tool, args) in [
        ("bash_jobs", json!({"wait_for_previous": true})),
        ("bash_check", json!({"job": job, "wait_for_previous": true})),
        (
            "bash_output",
            json!({"job": job, "wait_for_previous": true}),
        ),
        (
            "bash_screen",
            json!({"job": job, "wait_for_previous": true}),
        ),
        (
            "bash_wait",
            json!({"job": job, "timeout_secs": 0.2, "wait_for_previous": true}),
        ),
        (
            "bash_send",
            json!({"job": job, "text": "x", "wait_for_previous": true}),
        ),
        ("bash_kill", json!({"job": job, "wait_for_previous": true})),
    ] {
        let result = call_as(&client, tool, args).await;
        let text = text_of(&result);
        assert!(
            !text.contains("wait_for_previous"),
            "{tool} refused the argument Gemini adds: {text}"
        );
    }
    let typo = call_as(
        &client,
        "bash",
        json!({"command": "echo no", "comand": "x"}),
    )
    .await;
    let text = text_of(&typo);
    assert!(is_error(&typo), "{text}");
    assert!(
        text.contains("unknown field `comand`") && text.contains("`command`, `mode`"),
        "{text}"
    );
    client.cancel().await.unwrap();
}

/// The budgets `bashc mcp` fits results to: (client, bytes of a success, bytes of an
/// error, lines), as docs/MCP.md's table says.
const BUDGETS: &[(&str, usize, usize, usize)] = &[
    ("claude-code", 45_000, 9_000, 4_000),
    ("codex-mcp-client", 10_000, 10_000, 4_000),
    ("gemini-cli-mcp-client", 36_000, 36_000, 4_000),
    ("opencode", 45_000, 45_000, 1_900),
];

/// The exact `bash_output` call a result names for what it left out, and its offset
/// and limit.
fn rest_call(text: &str) -> (String, u64, u64) {
    let at = text
        .find("bash_output(job=")
        .unwrap_or_else(|| panic!("no bash_output call in {text}"));
    let call = &text[at..at + text[at..].find(')').unwrap() + 1];
    let number = |key: &str| -> u64 {
        let from = call
            .find(key)
            .unwrap_or_else(|| panic!("no {key} in {call}"))
            + key.len();
        call[from..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap()
    };
    (call.to_owned(), number("offset="), number("limit="))
}

/// Each client gets the whole result within what it shows (success and error), its
/// status first and last, and the exact call for the lines it does not show.
/// (Issue 34.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_client_gets_a_result_it_shows_whole() {
    let daemon = Daemon::start();
    for &(name, success, error, lines) in BUDGETS {
        let client = connect_as(&daemon, name, &[]).await;
        for (command, failed) in [("seq 1 100000", false), ("seq 1 100000; exit 3", true)] {
            let result = call_as(&client, "bash", json!({"command": command})).await;
            assert_eq!(is_error(&result), failed, "{name}: {command}");
            let text = text_of(&result);
            let budget = if failed { error } else { success };
            assert!(
                text.len() <= budget && text.lines().count() <= lines,
                "{name}: `{command}` gave {} bytes, {} lines; it shows {budget} bytes, {lines} lines",
                text.len(),
                text.lines().count()
            );
            let status = if failed {
                "exit code: 3"
            } else {
                "exit code: 0"
            };
            assert_eq!(text.lines().next(), Some(status), "{name}: {text}");
            assert_eq!(text.lines().last(), Some(status), "{name}: {text}");
            // What it left out is exactly what the call it names reads.
            let (call, offset, limit) = rest_call(&text);
            assert_eq!(offset, 1, "{call}");
            let first_shown: u64 = text.lines().nth(2).unwrap().parse().unwrap();
            assert_eq!(first_shown, limit + 1, "{name}: {call} then {first_shown}");
            let page = call_as(
                &client,
                "bash_output",
                json!({"job": job_in(&call), "offset": offset, "limit": 1}),
            )
            .await;
            assert!(text_of(&page).starts_with("1\n"), "{}", text_of(&page));
        }
        // Both streams share it.
        let both = call_as(
            &client,
            "bash",
            json!({"command": "seq 1 50000; seq 1 50000 >&2"}),
        )
        .await;
        let text = text_of(&both);
        assert!(
            text.len() <= success && text.contains("stderr:\n") && text.contains("stdout:\n"),
            "{name}: {} bytes",
            text.len()
        );
        // A page is no longer than the client shows.
        let job = job_in(&text);
        let page = text_of(&call_as(&client, "bash_output", json!({"job": job})).await);
        assert!(
            page.len() <= success,
            "{name}: a page of {} bytes",
            page.len()
        );
        assert!(page.contains("bash_output(job="), "{page}");
        // A call's own limits win.
        let own = call_as(
            &client,
            "bash",
            json!({"command": "seq 1 100000", "max_lines": 20000, "max_bytes": 200000}),
        )
        .await;
        assert!(
            text_of(&own).lines().count() > 20_000,
            "{name}: max_lines=20000 with max_bytes=200000 was not taken"
        );
        client.cancel().await.unwrap();
    }
}

/// A check of a job that printed more than Codex shows names the new lines it leaves
/// out, and reading them from there gives what was cut.
/// (Issue 34.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_cut_to_the_client_names_the_lines_it_leaves_out() {
    let daemon = Daemon::start();
    let client = connect_as(&daemon, "codex-mcp-client", &[]).await;
    let started = call_as(
        &client,
        "bash",
        json!({"command": "sleep 1; seq 1 3000; sleep 30", "mode": "background"}),
    )
    .await;
    let job = job_in(&text_of(&started));
    let waited = call_as(
        &client,
        "bash_wait",
        json!({"job": job, "until": "^3000$", "timeout_secs": 20}),
    )
    .await;
    assert!(text_of(&waited).len() <= 10_000, "{}", text_of(&waited));
    let check = call_as(&client, "bash_check", json!({"job": job})).await;
    let text = text_of(&check);
    assert!(text.len() <= 10_000, "a check of {} bytes", text.len());
    let (call, offset, limit) = rest_call(&text);
    assert_eq!(offset, 1, "{call}");
    let first_shown: u64 = text
        .lines()
        .find(|l| l.parse::<u64>().is_ok())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(first_shown, limit + 1, "{call} then {first_shown}\n{text}");
    call_as(&client, "bash_kill", json!({"job": job})).await;
    client.cancel().await.unwrap();
}

/// The variables the agent uses to reach its model stay out of its jobs, unless
/// `[env] pass` names them; the rest of its environment is the job's.
/// (Issue 34.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_credentials_stay_out_of_jobs() {
    let secrets = [
        ("ANTHROPIC_API_KEY", "sk-ant-secret"),
        ("CLAUDE_CODE_OAUTH_TOKEN", "oauth-secret"),
        ("OPENAI_API_KEY", "sk-openai-secret"),
        ("GEMINI_API_KEY", "gemini-secret"),
        ("PROJECT_SETTING", "kept"),
    ];
    let env_of = |text: &str, name: &str| -> Option<String> {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")).map(str::to_owned))
    };
    let daemon = Daemon::start();
    // A client not known: no provider's key.
    let client = connect_as(&daemon, "some-agent", &secrets).await;
    let text = text_of(&call_as(&client, "bash", json!({"command": "env"})).await);
    assert_eq!(
        env_of(&text, "PROJECT_SETTING").as_deref(),
        Some("kept"),
        "{text}"
    );
    for (name, _) in &secrets[..4] {
        assert_eq!(
            env_of(&text, name),
            None,
            "{name} reached a job of some-agent"
        );
    }
    client.cancel().await.unwrap();
    // Claude Code: its own keys go, another provider's (the project's) stay.
    let client = connect_as(&daemon, "claude-code", &secrets).await;
    let text = text_of(&call_as(&client, "bash", json!({"command": "env"})).await);
    assert_eq!(env_of(&text, "ANTHROPIC_API_KEY"), None, "{text}");
    assert_eq!(env_of(&text, "CLAUDE_CODE_OAUTH_TOKEN"), None, "{text}");
    assert_eq!(
        env_of(&text, "OPENAI_API_KEY").as_deref(),
        Some("sk-openai-secret")
    );
    client.cancel().await.unwrap();
    drop(daemon);

    // `[env] pass` lets one through.
    let daemon = Daemon::start_with_config("[env]\npass = [\"ANTHROPIC_API_KEY\"]\n");
    let client = connect_as(&daemon, "claude-code", &secrets).await;
    let text = text_of(&call_as(&client, "bash", json!({"command": "env"})).await);
    assert_eq!(
        env_of(&text, "ANTHROPIC_API_KEY").as_deref(),
        Some("sk-ant-secret"),
        "{text}"
    );
    assert_eq!(env_of(&text, "CLAUDE_CODE_OAUTH_TOKEN"), None, "{text}");
    client.cancel().await.unwrap();
}

/// Issue 34.4: a page of `grep` matches says how many matched, from where, and its
/// next-page call searches on (it kept `grep=`, which the CLI's hint keeps too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grep_page_says_its_matches_and_its_next_page_greps_on() {
    let daemon = Daemon::start();
    let client = connect_as(&daemon, "some-agent", &[]).await;
    let ran = call_as(&client, "bash", json!({"command": "seq 1 5001"})).await;
    let job = job_in(&text_of(&ran));
    let page = call_as(
        &client,
        "bash_output",
        json!({"job": job, "grep": "^500[01]$", "limit": 1}),
    )
    .await;
    let text = text_of(&page);
    assert!(text.starts_with("5000:5000\n"), "{text}");
    assert!(!text.contains("5001:5001"), "{text}");
    assert!(
        text.contains(&format!(
            "in {job}'s stdout, 1 line matches: line 5000 (searched from line 1 of 5001 lines)"
        )),
        "{text}"
    );
    // Issue 45: the range names the first and the last match, not where the search began.
    let two = call_as(
        &client,
        "bash_output",
        json!({"job": job, "grep": "^(7|4000)$", "offset": 3}),
    )
    .await;
    let two = text_of(&two);
    assert!(two.starts_with("7:7\n4000:4000\n"), "{two}");
    assert!(
        two.contains(&format!(
            "in {job}'s stdout, 2 lines match: lines 7 to 4000 (searched from line 3 of 5001 lines)"
        )),
        "{two}"
    );
    let (call, offset, _) = {
        let at = text.find("bash_output(").expect("a next-page call");
        let call = text[at..at + text[at..].find(')').unwrap() + 1].to_owned();
        let offset: u64 = call[call.find("offset=").unwrap() + 7..call.len() - 1]
            .parse()
            .unwrap();
        (call, offset, ())
    };
    assert!(call.contains("grep=\"^500[01]$\""), "{call}");
    let next = call_as(
        &client,
        "bash_output",
        json!({"job": job, "grep": "^500[01]$", "offset": offset}),
    )
    .await;
    let text = text_of(&next);
    assert!(text.starts_with("5001:5001\n"), "{call} gave {text}");
    assert!(text.contains("the end of the stream"), "{text}");
    client.cancel().await.unwrap();
}

/// Issue 34.5: a wait's progress says how long the job has run, not the wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waits_progress_says_the_jobs_age() {
    let daemon = Daemon::start();
    let mut raw = Raw::start(&daemon, "2025-06-18").await;
    let (started, _) = raw
        .call(
            1,
            "bash",
            json!({"command": "while true; do echo tick; sleep 1; done", "mode": "background"}),
        )
        .await;
    let job = job_in(&raw_text(&started));
    let old_enough = wait_until(Duration::from_secs(30), || {
        let listed = json(&daemon.run_bashc(&["jobs", "--all", "--json"]));
        listed[0]["duration_ms"].as_u64().unwrap_or(0) >= 8_000
    });
    assert!(old_enough, "the job did not run 8 s");
    raw.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "bash_wait", "arguments": {"job": job, "timeout_secs": 4},
        "_meta": {"progressToken": "p-i34"}}}),
    )
    .await;
    raw.response(2).await;
    let message = raw
        .notifications
        .iter()
        .find(|(_, n)| n["method"] == "notifications/progress")
        .map(|(_, n)| n["params"]["message"].as_str().unwrap().to_owned())
        .expect("no progress during a 4 s wait");
    let secs: u64 = message
        .strip_prefix(&format!("{job} running for "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{message}"));
    assert!(
        secs >= 10,
        "a job of 11 s and more said to run for {secs} s: {message}"
    );
    raw.call(3, "bash_kill", json!({"job": job})).await;
}

/// Found beside issue 34: `jobs --json` says the signal that ended a job, as
/// `check --json` does.
#[test]
fn jobs_json_has_the_signal_of_a_signaled_job() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&["exec", "--", "kill -TERM $$"]);
    assert_eq!(out.status.code(), Some(128 + 15), "{}", crate::show(&out));
    let jobs = json(&daemon.run_bashc(&["jobs", "--json"]));
    assert_eq!(jobs[0]["state"], "signaled", "{jobs}");
    assert_eq!(jobs[0]["signal"], 15, "{jobs}");
}

/// Found beside issue 34: vim on a stdin pipe warns that its input is not a terminal
/// and then waits; the result of the call that reaches its timeout says to run it on
/// a terminal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vim_on_pipes_is_told_to_run_on_a_terminal() {
    if std::process::Command::new("vim")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("vim is not installed: skipped");
        return;
    }
    let daemon = Daemon::start();
    let client = connect_as(&daemon, "some-agent", &[]).await;
    let file = daemon.scratch().join("notes.txt");
    let result = call_as(
        &client,
        "bash",
        json!({"command": format!("vim {}", file.display()), "stdin": "pipe", "timeout_secs": 3}),
    )
    .await;
    let text = text_of(&result);
    assert!(text.contains("Input is not from a terminal"), "{text}");
    assert!(text.contains("bash(pty=true)"), "{text}");
    let job = job_in(&text);
    call_as(&client, "bash_kill", json!({"job": job})).await;
    client.cancel().await.unwrap();
}

/// Claude Code 2.1.332 speaks MCP 2026-07-28 where the server has it (rmcp 3.9 does):
/// `server/discover`, no `initialize`, and its `clientInfo` in every request's `_meta`.
/// The budget follows that name as it follows `initialize`'s: Codex's 10,000 bytes here,
/// where the daemon's default would send about 51 KB.
/// (Issue 34.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_named_in_the_request_meta_gets_its_budget() {
    use tokio::io::AsyncWriteExt;
    let daemon = Daemon::start();
    let (_child, mut stdin, mut lines) = crate::mcp::spawn_raw(
        crate::mcp::mcp_command(&daemon, daemon.scratch()).env("BASHD_NO_AUTOSTART", "1"),
    );
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "codex-mcp-client", "version": "0.169.0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "bash", "arguments": {"command": "seq 1 100000"}, "_meta": meta}}),
    ];
    let mut answers = Vec::new();
    for (id, request) in (1..).zip(requests) {
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
        let answer = loop {
            let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
                .await
                .expect("bashc mcp answered in time")
                .unwrap()
                .expect("bashc mcp closed stdout");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                break message;
            }
        };
        answers.push(answer);
    }
    assert!(
        answers[0]["result"]["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28"))),
        "{}",
        answers[0]
    );
    let text = answers[1]["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", answers[1]));
    assert!(
        text.len() <= 10_000,
        "{} bytes for codex-mcp-client, whose budget is 10,000",
        text.len()
    );
    assert_eq!(text.lines().next(), Some("exit code: 0"), "{text}");
    assert!(text.contains("bash_output(job="), "{text}");
}

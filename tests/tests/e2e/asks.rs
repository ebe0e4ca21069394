//! Asks (issue 44): a request looser than its session's floor is not refused outright
//! but waits as an ask (`a1`) that only a person answers, with `bashc allow`; a yes
//! runs it as asked, a no or no answer refuses it in words that say what to do;
//! nothing a job runs can answer; grants hold for their session only, lapse, and are
//! revoked for new jobs.

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use bashd_tests::{Daemon, bin_path, wait_until};
use serde_json::Value;

use crate::{json, show};

/// Jobs get `workspace-write`, and nothing looser without a person's yes.
const FLOORED: &str = "[sandbox]\ndefault = \"workspace-write\"\nfloor = \"workspace-write\"\n";

const SOON: Duration = Duration::from_secs(20);

fn floored(ask_secs: u64) -> Daemon {
    Daemon::start_with_config(&format!("{FLOORED}ask_secs = {ask_secs}\n"))
}

/// A directory of the daemon's scratch, the clients' directory (their writable root).
fn workspace(daemon: &Daemon) -> PathBuf {
    let ws = daemon.scratch().join("ws-i44");
    std::fs::create_dir_all(&ws).unwrap();
    ws
}

/// `bashc exec --json ARGS -- COMMAND` of `session`, started and not waited for.
fn exec_started(daemon: &Daemon, session: &str, args: &[&str], command: &str) -> Child {
    daemon
        .bashc_in(session)
        .current_dir(workspace(daemon))
        .arg("exec")
        .arg("--json")
        .args(args)
        .arg("--")
        .arg(command)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run bashc")
}

/// `bashc allow --json ARGS`, as the person runs it.
fn allow(daemon: &Daemon, args: &[&str]) -> Output {
    daemon
        .bashc()
        .arg("allow")
        .args(args)
        .output()
        .expect("cannot run bashc allow")
}

/// The asks and grants, as `bashc allow --list --json` gives them.
fn listing(daemon: &Daemon) -> Value {
    let out = allow(daemon, &["--list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    json(&out)
}

/// The pending asks of `session`, by id.
fn pending(daemon: &Daemon, session: &str) -> Vec<String> {
    listing(daemon)["asks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|ask| ask["state"] == "pending" && ask["session"] == session)
        .map(|ask| ask["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits for `session`'s one pending ask; its id.
fn the_ask(daemon: &Daemon, session: &str) -> String {
    let mut asks = Vec::new();
    assert!(
        wait_until(SOON, || {
            asks = pending(daemon, session);
            !asks.is_empty()
        }),
        "no ask of session {session} came: {}",
        listing(daemon)
    );
    assert_eq!(asks.len(), 1, "{asks:?}");
    asks.remove(0)
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn touched(daemon: &Daemon, name: &str) -> PathBuf {
    daemon.scratch().join(name)
}

fn touch(path: &Path) -> String {
    format!("touch {}", path.display())
}

/// A `sandbox: off` request under a `workspace-write` floor waits as an ask, whose id
/// its client is told on stderr with where to answer; `bashc allow --ask` runs it as
/// asked, unconfined. Positive control: a request at the floor runs at once, asking
/// nothing. On main, the request was refused at once and `bashc allow` did not exist.
#[test]
fn a_request_looser_than_the_floor_waits_for_bashc_allow_and_then_runs() {
    let daemon = Daemon::start_with_config(FLOORED);
    let at_floor = daemon.run_bashc_at(&workspace(&daemon), &["exec", "--json", "--", "true"]);
    assert_eq!(at_floor.status.code(), Some(0), "{}", show(&at_floor));
    assert!(pending(&daemon, "test").is_empty());

    let ran = touched(&daemon, "ran-i44");
    let client = exec_started(&daemon, "test", &["--sandbox", "off"], &touch(&ran));
    let ask = the_ask(&daemon, "test");
    assert_eq!(ask, "a1");
    assert!(!ran.exists(), "the request ran before anyone answered");

    let granted = allow(&daemon, &["--ask", &ask]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    assert!(
        String::from_utf8_lossy(&granted.stdout).contains("granted a1 once"),
        "{}",
        show(&granted)
    );
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("ask a1") && stderr.contains("bashc allow --ask a1"),
        "the client was not told where to answer: {stderr}"
    );
    assert_eq!(json(&out)["sandbox"], Value::Null, "{}", show(&out));
    assert!(ran.exists(), "the granted request did not run");

    // Once means once: the next such request asks again.
    let again = exec_started(&daemon, "test", &["--sandbox", "off"], "true");
    assert_eq!(the_ask(&daemon, "test"), "a2");
    let refused = allow(&daemon, &["--refuse", "a2"]);
    assert_eq!(refused.status.code(), Some(0), "{}", show(&refused));
    assert_ne!(again.wait_with_output().unwrap().status.code(), Some(0));

    // The journal has every ask and answer.
    let journal = std::fs::read_to_string(daemon.runtime_dir().join("journal")).unwrap();
    for line in [
        "ask asked a1",
        "ask granted a1 once",
        "ask asked a2",
        "ask refused a2",
    ] {
        assert!(
            journal.contains(line),
            "no {line:?} in the journal:\n{journal}"
        );
    }
}

/// A no, and no answer within `[sandbox] ask_secs`, refuse the request with words that
/// say what happened and what the person can do, and nothing runs.
#[test]
fn a_refused_or_expired_ask_runs_nothing_and_says_what_to_do() {
    let daemon = floored(2);
    let ran = touched(&daemon, "refused-i44");
    let client = exec_started(&daemon, "test", &["--sandbox", "off"], &touch(&ran));
    let ask = the_ask(&daemon, "test");
    let refused = allow(&daemon, &["--deny", &ask]);
    assert_eq!(refused.status.code(), Some(0), "{}", show(&refused));
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains(&format!(
            "ask {ask} was refused by the person, so nothing ran"
        )) && stderr.contains("floor = \"workspace-write\"")
            && stderr.contains("ask for workspace-write or read-only"),
        "{stderr}"
    );

    let client = exec_started(&daemon, "test", &["--sandbox", "off"], &touch(&ran));
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains(
            "expired: nobody answered it within 2 s ([sandbox] ask_secs), so nothing ran"
        ) && stderr.contains("have the person grant it"),
        "{stderr}"
    );
    assert!(!ran.exists(), "a refused request ran");
    // Answering it late does nothing.
    let late = allow(&daemon, &["--ask", "a2"]);
    assert_ne!(late.status.code(), Some(0), "{}", show(&late));
    assert!(
        stderr_of(&late).contains("a2 is expired already"),
        "{}",
        show(&late)
    );
    assert!(!ran.exists(), "a late yes ran an expired request");
}

/// Nothing a job runs can answer: `bashc allow` from a confined job (through its
/// channel) and from an unconfined one (a process bashd finds among its jobs') is
/// refused, the ask stays pending, and the person's answer still works.
#[test]
fn bashc_allow_from_inside_a_job_is_refused() {
    let daemon = Daemon::start_with_config(FLOORED);
    let ws = workspace(&daemon);
    let bashc = bin_path("bashc");
    let ran = touched(&daemon, "asked-i44");
    let asker = exec_started(&daemon, "test", &["--sandbox", "off"], &touch(&ran));
    let ask = the_ask(&daemon, "test");

    // A confined job: through its channel.
    let confined = daemon.run_bashc_at(
        &ws,
        &[
            "exec",
            "--json",
            "--",
            &format!("{} allow --ask {ask}", bashc.display()),
        ],
    );
    let result = json(&confined);
    assert_ne!(result["exit_code"], 0, "{}", show(&confined));
    let said = format!("{}", result["stderr"]["text"]);
    assert!(
        said.contains("only the person answers asks") && said.contains("channel of job"),
        "{said}"
    );
    assert_eq!(pending(&daemon, "test"), vec![ask.clone()]);

    // An unconfined job, of a session the person let run unconfined.
    let other = exec_started(&daemon, "free", &["--sandbox", "off"], "true");
    let free_ask = the_ask(&daemon, "free");
    let granted = allow(&daemon, &["--ask", &free_ask, "--session-wide"]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    assert_eq!(other.wait_with_output().unwrap().status.code(), Some(0));
    let unconfined = daemon
        .bashc_in("free")
        .current_dir(&ws)
        .args(["exec", "--json", "--sandbox", "off", "--"])
        .arg(format!(
            "{} allow --ask {ask}; {} allow --list",
            bashc.display(),
            bashc.display()
        ))
        .output()
        .unwrap();
    let result = json(&unconfined);
    assert_eq!(result["sandbox"], Value::Null, "{}", show(&unconfined));
    let said = format!("{}", result["stderr"]["text"]);
    assert_eq!(
        said.matches("only the person answers asks").count(),
        2,
        "{said}"
    );
    assert_eq!(pending(&daemon, "test"), vec![ask.clone()]);
    assert!(!ran.exists());

    // Positive control: the person's answer.
    let granted = allow(&daemon, &["--ask", &ask]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    assert_eq!(asker.wait_with_output().unwrap().status.code(), Some(0));
    assert!(ran.exists());
}

/// A grant for the session holds for that session's later requests, which run
/// without asking, and for no other session, whose request asks.
#[test]
fn a_session_grant_does_not_reach_another_session() {
    let daemon = Daemon::start_with_config(FLOORED);
    let first = exec_started(&daemon, "one", &["--sandbox", "off"], "true");
    let ask = the_ask(&daemon, "one");
    let granted = allow(&daemon, &["--ask", &ask, "--session-wide"]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    assert_eq!(first.wait_with_output().unwrap().status.code(), Some(0));

    let again = daemon
        .bashc_in("one")
        .current_dir(workspace(&daemon))
        .args(["exec", "--json", "--sandbox", "off", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", show(&again));
    assert!(!stderr_of(&again).contains("ask"), "{}", show(&again));

    let other = exec_started(&daemon, "two", &["--sandbox", "off"], "true");
    let other_ask = the_ask(&daemon, "two");
    assert_ne!(other_ask, ask);
    let refused = allow(&daemon, &["--refuse", &other_ask]);
    assert_eq!(refused.status.code(), Some(0), "{}", show(&refused));
    assert_ne!(other.wait_with_output().unwrap().status.code(), Some(0));

    let grants = listing(&daemon)["grants"].clone();
    assert_eq!(grants.as_array().unwrap().len(), 1, "{grants}");
    assert_eq!(grants[0]["session"], "one", "{grants}");
    assert_eq!(grants[0]["scope"], "session", "{grants}");
    assert!(
        grants[0]["granted_by"]
            .as_str()
            .unwrap()
            .starts_with("bashc allow (pid "),
        "{grants}"
    );
}

/// `bashc allow HOST --secs N` holds for every session (never `$BASHD_SESSION`'s
/// alone) and lapses after N seconds; without `--secs` it stays.
#[test]
fn a_host_grant_holds_for_every_session_and_secs_expire_it() {
    let daemon = Daemon::start_with_config(FLOORED);
    let short = allow(&daemon, &["pypi.example:443", "--secs", "2"]);
    assert_eq!(short.status.code(), Some(0), "{}", show(&short));
    let kept = allow(&daemon, &["files.example", "--session", "s1"]);
    assert_eq!(kept.status.code(), Some(0), "{}", show(&kept));
    let grants = listing(&daemon)["grants"].clone();
    assert_eq!(grants.as_array().unwrap().len(), 2, "{grants}");
    assert_eq!(grants[0]["session"], Value::Null, "{grants}");
    assert_eq!(grants[0]["kind"]["host"]["port"], 443, "{grants}");
    assert_eq!(grants[1]["session"], "s1", "{grants}");

    let mut grants = Value::Null;
    assert!(
        wait_until(Duration::from_secs(10), || {
            grants = listing(&daemon)["grants"].clone();
            grants.as_array().unwrap().len() == 1
        }),
        "the --secs 2 grant did not lapse: {grants}"
    );
    assert_eq!(grants[0]["kind"]["host"]["host"], "files.example");
    let revoked = allow(&daemon, &["--revoke", "files.example"]);
    assert_eq!(revoked.status.code(), Some(0), "{}", show(&revoked));
    assert_eq!(listing(&daemon)["grants"], serde_json::json!([]));
}

/// A revoked session grant holds for new jobs, which ask again; the running job it
/// started is named, and ended with `--kill`.
#[test]
fn revoke_holds_for_new_jobs_and_kill_ends_the_running_ones() {
    let daemon = Daemon::start_with_config(FLOORED);
    let long = exec_started(&daemon, "test", &["--sandbox", "off"], "sleep 300");
    let ask = the_ask(&daemon, "test");
    let granted = allow(&daemon, &["--ask", &ask, "--session-wide"]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    let job = String::from_utf8_lossy(&granted.stdout)
        .split_whitespace()
        .find(|word| word.starts_with('j'))
        .unwrap()
        .trim_end_matches(':')
        .to_owned();

    let revoked = allow(&daemon, &["--revoke", &ask]);
    assert_eq!(revoked.status.code(), Some(0), "{}", show(&revoked));
    let said = String::from_utf8_lossy(&revoked.stdout).into_owned();
    assert!(
        said.contains("new jobs ask again") && said.contains(&job) && said.contains("--kill"),
        "{said}"
    );
    let new = exec_started(&daemon, "test", &["--sandbox", "off"], "true");
    let new_ask = the_ask(&daemon, "test");
    assert_ne!(new_ask, ask);
    allow(&daemon, &["--refuse", &new_ask]);
    assert_ne!(new.wait_with_output().unwrap().status.code(), Some(0));

    let killed = allow(&daemon, &["--revoke", &ask, "--kill"]);
    assert_eq!(killed.status.code(), Some(0), "{}", show(&killed));
    assert!(
        String::from_utf8_lossy(&killed.stdout).contains("ending the jobs it started"),
        "{}",
        show(&killed)
    );
    let out = long.wait_with_output().unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
}

/// Reads the next JSON-RPC message `bashc mcp` writes.
fn next_message(from: &mut impl std::io::BufRead) -> Value {
    let mut line = String::new();
    let n = from
        .read_line(&mut line)
        .expect("bashc mcp said nothing in time");
    assert!(n > 0, "bashc mcp closed its stdout");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// Reads messages until one with `method`, or the response to `id`.
fn next_of(from: &mut impl std::io::BufRead, method: &str, id: i64) -> Value {
    loop {
        let message = next_message(from);
        if message["method"] == method || (message["id"] == id && message.get("method").is_none()) {
            return message;
        }
    }
}

fn send(to: &mut impl std::io::Write, message: Value) {
    to.write_all(format!("{message}\n").as_bytes()).unwrap();
    to.flush().unwrap();
}

/// A `bash` call with `sandbox: "off"`, as a request line.
fn bash(id: i64, command: String) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": command, "sandbox": "off"}}})
}

/// A `bashc mcp` server and its stdio's two ends.
type McpServer = (
    bashd_tests::KillOnDrop,
    std::os::unix::net::UnixStream,
    std::io::BufReader<std::os::unix::net::UnixStream>,
);

/// `bashc mcp` of session `mcp-i44` in the workspace, initialized on 2025-06-18 with
/// `capabilities`.
fn mcp_server(daemon: &Daemon, capabilities: Value) -> McpServer {
    let (server, mut to, mut from) = mcp_spawned(daemon);
    send(
        &mut to,
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": capabilities,
            "clientInfo": {"name": "elicit-test", "version": "0"}}}),
    );
    let init = next_of(&mut from, "-", 1);
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    send(
        &mut to,
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    (server, to, from)
}

/// `bashc mcp` of session `mcp-i44` in the workspace, not yet spoken to.
fn mcp_spawned(daemon: &Daemon) -> McpServer {
    daemon.mcp_over_socket("mcp-i44", &workspace(daemon), &[], SOON)
}

/// An MCP client that declares `elicitation` on 2025-06-18 (the test speaks JSON-RPC
/// over `bashc mcp`'s stdio) is asked in its own window: accept runs the request once,
/// decline refuses it with the floor's words, and bashd records who answered.
#[test]
fn an_mcp_client_with_elicitation_is_asked_and_its_answer_holds() {
    let daemon = Daemon::start_with_config(FLOORED);
    let (_server, mut to, mut from) = mcp_server(&daemon, serde_json::json!({"elicitation": {}}));
    let accepted = touched(&daemon, "accepted-i44");
    send(&mut to, bash(2, touch(&accepted)));
    let asked = next_of(&mut from, "elicitation/create", 2);
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let message = asked["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("ask a1") && message.contains(&touch(&accepted)),
        "{message}"
    );
    assert!(!accepted.exists(), "it ran before the person answered");
    // Accept without the optional choice: once.
    send(
        &mut to,
        serde_json::json!({"jsonrpc": "2.0", "id": asked["id"].clone(),
            "result": {"action": "accept", "content": {}}}),
    );
    let ran = next_of(&mut from, "-", 2);
    assert_ne!(ran["result"]["isError"], true, "{ran}");
    assert!(accepted.exists(), "the accepted request did not run: {ran}");
    let ask = &listing(&daemon)["asks"][0];
    assert_eq!(ask["state"]["granted"]["scope"], "once", "{ask}");
    assert!(
        ask["answered_by"]
            .as_str()
            .unwrap()
            .starts_with("the MCP elicitation of elicit-test"),
        "{ask}"
    );
    assert!(pending(&daemon, "mcp-i44").is_empty());

    let declined = touched(&daemon, "declined-i44");
    send(&mut to, bash(3, touch(&declined)));
    let asked = next_of(&mut from, "elicitation/create", 3);
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    send(
        &mut to,
        serde_json::json!({"jsonrpc": "2.0", "id": asked["id"].clone(),
            "result": {"action": "decline"}}),
    );
    let refused = next_of(&mut from, "-", 3);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let said = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("ask a2 was refused by the person, so nothing ran") && said.contains("floor"),
        "{said}"
    );
    assert!(!declined.exists(), "a declined request ran");
}

/// A `bash` call of a client on MCP 2026-07-28 (no `initialize`: its version, name and
/// capabilities in each request's `_meta`) that declares form elicitation, with
/// `sandbox: "off"`, and what it carries back: `input_responses` and `request_state`.
fn bash_2026(id: i64, command: &str, answer: Option<(Value, &str)>) -> Value {
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "elicit-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    });
    let mut params = serde_json::json!({"name": "bash", "_meta": meta,
        "arguments": {"command": command, "sandbox": "off"}});
    if let Some((responses, state)) = answer {
        params["inputResponses"] = responses;
        params["requestState"] = Value::from(state);
    }
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// On MCP 2026-07-28, where a server sends no request of its own, an ask is the call's
/// `input_required` result: the form, and the ask's id as the state to carry back. The
/// call again with accept runs the request once and returns its result; with decline it
/// is refused in the floor's words; a client that never comes back leaves the ask to
/// the person, and nothing runs. On main the call waited and said `ask a1 pending`.
#[test]
fn a_client_on_2026_07_28_is_answered_input_required_and_its_answer_holds() {
    // The network on, as before an agent's was the allow-list by default (issue 44):
    // the granted `sandbox: "off"` then runs unconfined, its result with no sandbox line.
    let daemon = Daemon::start_with_config(&format!(
        "{FLOORED}ask_secs = 600
network = \"on\"
"
    ));
    let (_server, mut to, mut from) = mcp_spawned(&daemon);

    let accepted = touch(&touched(&daemon, "accepted-2026"));
    send(&mut to, bash_2026(2, &accepted, None));
    let asked = next_of(&mut from, "-", 2);
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    assert_eq!(result["requestState"], "a1", "{asked}");
    let form = &result["inputRequests"]["ask"];
    assert_eq!(form["method"], "elicitation/create", "{asked}");
    let message = form["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("ask a1") && message.contains(&accepted),
        "{message}"
    );
    assert!(
        !touched(&daemon, "accepted-2026").exists(),
        "it ran before the person answered"
    );
    assert_eq!(pending(&daemon, "mcp-i44"), vec!["a1".to_owned()]);
    let accept = serde_json::json!({"ask": {"action": "accept", "content": {"grant": "once"}}});
    send(&mut to, bash_2026(3, &accepted, Some((accept, "a1"))));
    let ran = next_of(&mut from, "-", 3);
    assert_ne!(ran["result"]["isError"], true, "{ran}");
    assert_eq!(
        ran["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .lines()
            .next(),
        Some("exit code: 0"),
        "{ran}"
    );
    assert!(
        touched(&daemon, "accepted-2026").exists(),
        "the accepted request did not run: {ran}"
    );
    let ask = &listing(&daemon)["asks"][0];
    assert_eq!(ask["state"]["granted"]["scope"], "once", "{ask}");
    assert!(
        ask["answered_by"]
            .as_str()
            .unwrap()
            .starts_with("the MCP input-required answer of elicit-test"),
        "{ask}"
    );

    let declined = touch(&touched(&daemon, "declined-2026"));
    send(&mut to, bash_2026(4, &declined, None));
    let asked = next_of(&mut from, "-", 4);
    assert_eq!(asked["result"]["requestState"], "a2", "{asked}");
    let decline = serde_json::json!({"ask": {"action": "decline"}});
    send(&mut to, bash_2026(5, &declined, Some((decline, "a2"))));
    let refused = next_of(&mut from, "-", 5);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let said = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("ask a2 was refused by the person, so nothing ran") && said.contains("floor"),
        "{said}"
    );
    assert!(
        !touched(&daemon, "declined-2026").exists(),
        "a declined request ran"
    );

    // Silence: the ask stays the person's, and nothing runs meanwhile.
    let silent = touch(&touched(&daemon, "silent-2026"));
    send(&mut to, bash_2026(6, &silent, None));
    let asked = next_of(&mut from, "-", 6);
    assert_eq!(asked["result"]["requestState"], "a3", "{asked}");
    assert_eq!(pending(&daemon, "mcp-i44"), vec!["a3".to_owned()]);
    let refused = allow(&daemon, &["--refuse", "a3"]);
    assert_eq!(refused.status.code(), Some(0), "{}", show(&refused));
    assert!(
        !touched(&daemon, "silent-2026").exists(),
        "a request nobody granted ran"
    );
}

/// A client without elicitation gets `ask aN pending` by `[mcp] max_call_secs`, the
/// ask shows in `bashc allow --list`, and once the person grants it the command runs
/// in the background and a later call's inbox tells so.
#[test]
fn an_mcp_call_answers_ask_pending_by_its_budget_and_the_inbox_tells_the_answer() {
    let daemon = Daemon::start_with_config(&format!("{FLOORED}\n[mcp]\nmax_call_secs = 1\n"));
    let (_server, mut to, mut from) = mcp_server(&daemon, serde_json::json!({}));
    let ran = touched(&daemon, "later-i44");
    send(&mut to, bash(2, touch(&ran)));
    let pending_answer = next_of(&mut from, "-", 2);
    let said = pending_answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(said.contains("ask a1 pending"), "{said}");
    assert!(said.contains("bashc allow"), "{said}");
    assert_eq!(pending(&daemon, "mcp-i44"), vec!["a1".to_owned()]);
    assert!(!ran.exists());

    let granted = allow(&daemon, &["--ask", "a1"]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    assert!(
        wait_until(SOON, || ran.exists()),
        "the granted request did not run"
    );
    send(
        &mut to,
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "bash_jobs", "arguments": {}}}),
    );
    let later = next_of(&mut from, "-", 3);
    let said = later["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        said.contains("ask a1") && said.contains("granted once"),
        "{said}"
    );
}

/// Writing a root's `.git` (a commit) under a floor is an ask: without it the commit
/// fails as `.git` is read-only (the control), with `--allow-git-write` the request
/// waits, and a yes lets it commit while the repository's hooks stay read-only.
#[test]
fn a_commit_asks_and_a_yes_lets_it_write_git_but_not_its_hooks() {
    let daemon = Daemon::start_with_config(FLOORED);
    let ws = workspace(&daemon);
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", show(&init));
    let commit = "git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m i44";

    let refused = daemon.run_bashc_at(&ws, &["exec", "--json", "--", commit]);
    assert_ne!(json(&refused)["exit_code"], 0, "{}", show(&refused));
    assert!(pending(&daemon, "test").is_empty(), "a plain commit asked");

    let client = exec_started(
        &daemon,
        "test",
        &["--allow-git-write"],
        &format!("{commit} && echo committed; touch .git/hooks/planted 2>/dev/null; echo hooks=$?"),
    );
    let ask = the_ask(&daemon, "test");
    let listed = listing(&daemon);
    assert!(
        listed["asks"][0]["kind"]["git_write"].is_object(),
        "{listed}"
    );
    let granted = allow(&daemon, &["--ask", &ask]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    let out = client.wait_with_output().unwrap();
    let result = json(&out);
    let said = result["stdout"]["text"].as_str().unwrap_or("");
    assert!(said.contains("committed"), "{}", show(&out));
    assert!(
        said.contains("hooks=1"),
        "a hook could be planted: {}",
        show(&out)
    );
    assert_eq!(
        result["sandbox"]["profile"],
        "workspace-write",
        "{}",
        show(&out)
    );
    assert!(!ws.join(".git/hooks/planted").exists());
    let log = std::process::Command::new("git")
        .args(["log", "--oneline"])
        .current_dir(&ws)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&log.stdout).contains("i44"),
        "{}",
        show(&log)
    );
}

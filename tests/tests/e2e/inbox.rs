//! The inbox in every result (issue 32): what a session's background jobs did reaches
//! that session's next call once (CLI text and `--json`, MCP), never another session's;
//! a restarted `bashc mcp --session S` sees what happened while it was gone; `--notify`
//! and `--notify-idle`; `wait J1 J2 --any/--all`; the bound.

use std::time::Duration;

use bashd_tests::{Daemon, wait_until};
use serde_json::json;

use crate::mcp::{call, mcp_command, serve, text_of};
use crate::{json, show, stderr, stdout};

const SINCE: &str = "since your last call";
const WITHIN: Duration = Duration::from_secs(20);

/// Waits, as session `watcher` (whose own inbox stays empty), until `job` has ended.
fn wait_ended(daemon: &Daemon, job: &str) {
    let ended = wait_until(WITHIN, || {
        let out = daemon.run_bashc_in("watcher", &["jobs", "--all", "--json"]);
        assert!(!stderr(&out).contains(SINCE), "{}", show(&out));
        json(&out)
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["job"] == job && j["state"] != "running")
    });
    assert!(ended, "{job} did not end");
}

/// Issue 32.
#[test]
fn an_ended_job_reaches_the_next_call_of_its_session_once_and_no_other() {
    let daemon = Daemon::start();
    let job = daemon.background_running_in("a", "echo one; echo two; echo three >&2; exit 3");
    wait_ended(&daemon, &job);
    // Another session never sees it.
    let other = daemon.run_bashc_in("b", &["exec", "--", "true"]);
    assert!(!stderr(&other).contains(SINCE), "{}", show(&other));
    // The session's next call, whatever it is, ends with it, in one line.
    let next = daemon.run_bashc_in("a", &["exec", "--", "echo", "hello"]);
    assert!(stdout(&next).contains("hello"), "{}", show(&next));
    let said = stderr(&next);
    assert!(
        said.contains(&format!(
            "bashc: {SINCE}: {job} (echo one; echo two; echo three >&2; exit 3) ended with exit 3 after"
        )) && said.contains(&format!(", 3 new lines: bashc check {job}")),
        "{}",
        show(&next)
    );
    // Once.
    let again = daemon.run_bashc_in("a", &["jobs"]);
    assert!(!stderr(&again).contains(SINCE), "{}", show(&again));
    // A look at the session from another (`--any-session`) leaves its inbox alone.
    let job2 = daemon.background_running_in("a", "exit 5");
    wait_ended(&daemon, &job2);
    let look = daemon.run_bashc_in("b", &["check", &job2, "--any-session"]);
    assert!(!stderr(&look).contains(SINCE), "{}", show(&look));
    // `--json`: under `since_last_call`, the events and their text.
    let next = daemon.run_bashc_in("a", &["jobs", "--json"]);
    let listed = json(&next);
    assert!(listed.is_array(), "a list stays a list: {listed}");
    assert!(
        stderr(&next).contains(&format!("{job2} (exit 5) ended with exit 5")),
        "{}",
        show(&next)
    );
    let job3 = daemon.background_running_in("a", "exit 6");
    wait_ended(&daemon, &job3);
    let next = daemon.run_bashc_in("a", &["exec", "--json", "--", "true"]);
    let result = json(&next);
    let since = &result["since_last_call"];
    assert_eq!(
        since["events"][0]["ended"]["job"],
        job3.as_str(),
        "{result}"
    );
    assert_eq!(since["events"][0]["ended"]["exit_code"], 6, "{result}");
    assert!(
        since["text"]
            .as_str()
            .unwrap()
            .contains("ended with exit 6"),
        "{result}"
    );
    assert!(
        !stderr(&next).contains(SINCE),
        "said twice: {}",
        show(&next)
    );
}

/// Issue 32.
#[test]
fn the_result_that_tells_a_jobs_end_takes_its_event() {
    let daemon = Daemon::start();
    let job = daemon.background_in("a", &[], "exit 2");
    wait_ended(&daemon, &job);
    // The check says the job ended: the inbox line about it would say it twice.
    let check = daemon.run_bashc_in("a", &["check", &job]);
    assert!(!stderr(&check).contains(SINCE), "{}", show(&check));
    let next = daemon.run_bashc_in("a", &["exec", "--", "true"]);
    assert!(!stderr(&next).contains(SINCE), "{}", show(&next));
}

/// Issue 32.
#[test]
fn notify_tells_the_first_match_and_a_count_and_a_bad_pattern_is_refused() {
    let daemon = Daemon::start();
    let bad = daemon.run_bashc_in(
        "a",
        &[
            "exec",
            "--mode",
            "background",
            "--notify",
            "(oops",
            "--",
            "echo x",
        ],
    );
    assert_eq!(bad.status.code(), Some(2), "{}", show(&bad));
    assert!(
        stderr(&bad).contains("not a valid regex") && stderr(&bad).contains("unclosed group"),
        "{}",
        show(&bad)
    );
    let marker = daemon.scratch().join("go");
    let command = format!(
        "echo ok; echo 'FAIL: one'; echo 'FAIL: two'; until [ -e {0} ]; do sleep 0.05; done; echo 'FAIL: three'; sleep 60",
        marker.display()
    );
    let job = daemon.background_in("a", &["--notify", "FAIL"], &command);
    let first = wait_until(WITHIN, || {
        stderr(&daemon.run_bashc_in("a", &["jobs"])).contains("FAIL")
    });
    assert!(first, "no match was told");
    // The two lines printed at once were told in one event, which is gone now.
    std::fs::write(&marker, "").unwrap();
    let mut said = String::new();
    let later = wait_until(WITHIN, || {
        said = stderr(&daemon.run_bashc_in("a", &["jobs"]));
        said.contains("FAIL")
    });
    assert!(later, "the later match was not told");
    assert!(
        said.contains(&format!(
            "{job} (echo ok; echo 'FAIL: one'; echo 'FAIL: two'; until [ -e"
        )) && said.contains("printed a line matching \"FAIL\", first line 4: \"FAIL: three\"")
            && said.contains(&format!("bashc output {job} --grep \"FAIL\"")),
        "{said}"
    );
    let out = daemon.run_bashc_in("a", &["kill", &job]);
    assert!(
        out.status.success() || out.status.code() == Some(143),
        "{}",
        show(&out)
    );
}

/// Issue 32.
#[test]
fn notify_idle_and_a_wait_for_input_are_told() {
    let daemon = Daemon::start();
    let quiet = daemon.background_in("a", &["--notify-idle", "1"], "echo started; sleep 60");
    let asks = daemon.background_in(
        "a",
        &["--stdin", "pipe"],
        "printf 'Your name? '; read name; echo hello $name",
    );
    let mut said = String::new();
    let told = wait_until(WITHIN, || {
        said.push_str(&stderr(&daemon.run_bashc_in("a", &["jobs"])));
        said.contains(&format!("{quiet} (echo started; sleep 60) has printed nothing for"))
            && said.contains(&format!(
                "{asks} (printf 'Your name? '; read name; echo hello $name) waits for input, it asks \"Your name?\": bashc send {asks} TEXT --newline"
            ))
    });
    assert!(told, "{said}");
    for job in [quiet, asks] {
        daemon.run_bashc_in("a", &["kill", &job]);
    }
}

/// Issue 32.
#[test]
fn the_inbox_keeps_its_bound() {
    let daemon = Daemon::start();
    // Every call of the session takes its inbox: the jobs end together, after the last
    // call that started one.
    let marker = daemon.scratch().join("go");
    let command = format!("until [ -e {} ]; do sleep 0.1; done", marker.display());
    let jobs: Vec<String> = (0..70)
        .map(|_| daemon.background_in("a", &[], &command))
        .collect();
    std::fs::write(&marker, "").unwrap();
    for job in &jobs {
        wait_ended(&daemon, job);
    }
    let out = daemon.run_bashc_in("a", &["exec", "--json", "--", "true"]);
    let result = json(&out);
    let since = &result["since_last_call"];
    assert_eq!(since["events"].as_array().unwrap().len(), 32, "{since}");
    assert_eq!(since["folded"], 38, "{since}");
    assert!(
        since["text"]
            .as_str()
            .unwrap()
            .starts_with("since your last call:\n- 38 older events were dropped (the inbox keeps the last 32)\n- j"),
        "{since}"
    );
    let again = daemon.run_bashc_in("a", &["exec", "--json", "--", "true"]);
    assert!(
        json(&again).get("since_last_call").is_none(),
        "{}",
        show(&again)
    );
}

/// Issue 32.
#[test]
fn wait_any_returns_at_the_first_job_done_and_all_at_the_last() {
    let daemon = Daemon::start();
    let slow = daemon.background_in("a", &[], "sleep 60");
    let quick = daemon.background_in("a", &[], "sleep 0.5; exit 4");
    let started = std::time::Instant::now();
    let out = daemon.run_bashc_in("a", &["wait", &slow, &quick, "--any"]);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{}",
        show(&out)
    );
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    let said = stdout(&out);
    assert!(
        said.contains(&format!(
            "first done: {quick}; not done: {slow} (bashc check {slow})"
        )),
        "{}",
        show(&out)
    );
    let out = daemon.run_bashc_in(
        "a",
        &["wait", &quick, &slow, "--all", "--timeout", "1", "--json"],
    );
    assert_eq!(out.status.code(), Some(124), "{}", show(&out));
    let waited = json(&out);
    assert_eq!(waited["done"], json!([quick]), "{waited}");
    assert_eq!(waited["results"][1]["state"], "running", "{waited}");
    let ender = daemon.background_in("a", &[], "sleep 0.3");
    let out = daemon.run_bashc_in("a", &["wait", &quick, &ender, "--all"]);
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));
    assert!(
        stdout(&out).contains(&format!("done, in this order: {quick}, {ender}")),
        "{}",
        show(&out)
    );
    daemon.run_bashc_in("a", &["kill", &slow]);
}

/// Issue 32.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_results_end_with_the_inbox_and_a_restarted_server_sees_what_it_missed() {
    let daemon = Daemon::start();
    let start = || async {
        let mut command = mcp_command(&daemon, daemon.scratch());
        command
            .args(["--session", "agent-s"])
            .env("BASHD_NO_AUTOSTART", "1");
        serve((), command).await
    };
    let client = start().await;
    let started = call(
        &client,
        "bash",
        json!({"command": "sleep 0.3; echo done; exit 1", "mode": "background"}),
    )
    .await;
    let job = crate::mcp::job_in(&text_of(&started));
    let mut said = String::new();
    let told = wait_until(WITHIN, || {
        said = tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current()
                .block_on(async { text_of(&call(&client, "bash_jobs", json!({})).await) })
        });
        said.contains(SINCE)
    });
    assert!(told, "{said}");
    assert!(
        said.contains(&format!(
            "{SINCE}: {job} (sleep 0.3; echo done; exit 1) ended with exit 1 after"
        )) && said.contains(&format!("1 new line: bash_check(job=\"{job}\")")),
        "{said}"
    );
    let again = text_of(&call(&client, "bash", json!({"command": "true"})).await);
    assert!(!again.contains(SINCE), "told twice: {again}");

    // The server goes away; a job ends meanwhile; a new server of the session is told.
    let second = call(
        &client,
        "bash",
        json!({"command": "sleep 1; exit 7", "mode": "background"}),
    )
    .await;
    let job2 = crate::mcp::job_in(&text_of(&second));
    client.cancel().await.unwrap();
    wait_ended(&daemon, &job2);
    let client = start().await;
    let first = text_of(&call(&client, "bash", json!({"command": "echo back"})).await);
    assert!(
        first.contains(&format!("{job2} (sleep 1; exit 7) ended with exit 7")),
        "{first}"
    );
    // bash_wait(jobs=[...]).
    let a = crate::mcp::job_in(&text_of(
        &call(
            &client,
            "bash",
            json!({"command": "sleep 60", "mode": "background"}),
        )
        .await,
    ));
    let b = crate::mcp::job_in(&text_of(
        &call(
            &client,
            "bash",
            json!({"command": "sleep 0.2", "mode": "background"}),
        )
        .await,
    ));
    let waited = text_of(&call(&client, "bash_wait", json!({"jobs": [a, b]})).await);
    assert!(
        waited.contains(&format!(
            "first done: {b}; not done: {a} (bash_check(job=\"{a}\"))"
        )),
        "{waited}"
    );
    call(&client, "bash_kill", json!({"job": a})).await;
    client.cancel().await.unwrap();
}

/// The inbox is the agent's: a `bashc` inside a sandboxed job of the same session
/// neither sees its events (they name jobs looser than the job: their commands, what
/// they ask) nor takes them from the agent, whose next call still shows them.
/// (Issue 32.)
#[test]
fn a_sandboxed_jobs_own_bashc_neither_sees_nor_takes_the_inbox() {
    let daemon = Daemon::start();
    let job = daemon.background_running_in("a", "echo secret-i32-looser; exit 4");
    wait_ended(&daemon, &job);
    let bashc = bashd_tests::bin_path("bashc").display().to_string();
    let inside = daemon.run_bashc_in(
        "a",
        &[
            "exec",
            "--json",
            "--sandbox",
            "read-only",
            "--net",
            "off",
            "--",
            &format!("{bashc} jobs; echo \"jobs: $?\""),
        ],
    );
    let result = json(&inside);
    let shown = format!(
        "{}{}",
        result["stdout"]["text"].as_str().unwrap_or(""),
        result["stderr"]["text"].as_str().unwrap_or("")
    );
    // Positive control: the nested call ran and answered.
    assert!(shown.contains("jobs: 0"), "{}", show(&inside));
    assert!(
        !shown.contains(SINCE) && !shown.contains("secret-i32-looser"),
        "the job's own bashc saw the agent's inbox:\n{shown}"
    );
    // The sandboxed job's own call (the agent's) carries the event, so it is still there.
    let said = format!("{}{}", stderr(&inside), result["since_last_call"]);
    assert!(
        said.contains(&format!(
            "{job} (echo secret-i32-looser; exit 4) ended with exit 4"
        )),
        "the agent lost the event:\n{}",
        show(&inside)
    );
}

/// Issue 45, item 10: a result that showed a job waiting for input is not followed,
/// in the next call, by the inbox saying it again (its teller's word of the same wait
/// comes later); once input is sent, the job's next wait is told (the control; its
/// second prompt ends its line, as a teller looks again only after a whole line).
#[test]
fn a_wait_for_input_the_caller_was_shown_is_not_told_again() {
    let daemon = Daemon::start();
    let asks = daemon.background_in(
        "shown",
        &["--stdin", "pipe"],
        "printf 'Your name? '; read name; echo 'Your age?'; read age; echo done",
    );
    let shown = wait_until(WITHIN, || {
        let out = daemon.run_bashc_in("shown", &["check", &asks, "--json"]);
        json(&out)["notices"]
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n.get("waiting_for_input").is_some()))
    });
    assert!(shown, "check never showed {asks} waiting for input");
    // Its teller looks after half a second of quiet, and then tells the inbox.
    std::thread::sleep(Duration::from_secs(2));
    let sent = daemon.run_bashc_in("shown", &["send", &asks, "bob", "--newline"]);
    assert_eq!(sent.status.code(), Some(0), "{}", show(&sent));
    assert!(
        !stderr(&sent).contains("waits for input"),
        "the wait the check showed was told again: {}",
        show(&sent)
    );
    let mut said = String::new();
    let told = wait_until(WITHIN, || {
        said.push_str(&stderr(&daemon.run_bashc_in("shown", &["jobs"])));
        said.contains(&format!("{asks} (printf 'Your name? '; read name;"))
            && said.contains(") waits for input: bashc send")
    });
    assert!(told, "the next wait was not told: {said}");
    assert!(!said.contains("it asks \"Your name?\""), "{said}");
    daemon.run_bashc_in("shown", &["kill", &asks]);
}

//! Issue 31: a daemon that dies under a running job is said the same way whichever
//! front end waited on it, since one response loop of the client library maps the
//! connection's end: `bashc exec`, `bashc exec --stream` and MCP's `bash` each name
//! the job and where its output is, never "closed the connection before answering".

use std::process::{Child, Stdio};

use bashd_tests::{Daemon, wait_for_running, wait_until};

use crate::mcp::{connect, text};
use crate::show;

/// The job id a message names (`j12`), the first word that is one.
fn job_named(text: &str) -> String {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .find(|w| w.starts_with('j') && w.len() > 1 && w[1..].parse::<u64>().is_ok())
        .unwrap_or_else(|| panic!("no job id in {text:?}"))
        .to_owned()
}

fn exec_in_background(daemon: &Daemon, args: &[&str]) -> Child {
    daemon
        .bashc()
        .env("BASHD_NO_AUTOSTART", "1")
        .arg("exec")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start bashc")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_front_end_names_the_job_when_bashd_dies_under_it() {
    let mut daemon = Daemon::start();
    let plain = exec_in_background(&daemon, &["--session", "i31-died", "--", "sleep 3101"]);
    let streamed = exec_in_background(
        &daemon,
        &[
            "--stream",
            "--session",
            "i31-died",
            "--",
            "echo i31-streamed; sleep 3102",
        ],
    );
    let mcp = connect(&daemon).await;
    let bash = tokio::spawn({
        let peer = mcp.peer().clone();
        async move {
            let args = serde_json::json!({ "command": "sleep 3103" });
            let serde_json::Value::Object(args) = args else {
                unreachable!("an object")
            };
            peer.call_tool(
                rmcp::model::CallToolRequestParams::new("bash".to_owned()).with_arguments(args),
            )
            .await
        }
    });
    for sleep in ["sleep 3101", "sleep 3102", "sleep 3103"] {
        wait_for_running(sleep);
    }
    // The three jobs are the daemon's running ones, so each start was sent to its
    // client (a job's process runs as soon as it is spawned, before that).
    let listed = wait_until(std::time::Duration::from_secs(30), || {
        let out = daemon.run_bashc(&["jobs", "--all", "--json"]);
        String::from_utf8_lossy(&out.stdout)
            .matches("\"running\"")
            .count()
            >= 3
    });
    assert!(listed, "the three jobs never showed as running");
    daemon.kill_daemon();

    let plain = plain.wait_with_output().unwrap();
    let streamed = streamed.wait_with_output().unwrap();
    let bash = bash
        .await
        .unwrap()
        .expect("the bash call failed as a protocol error");
    mcp.cancel().await.ok();

    for (front_end, out) in [("exec", &plain), ("exec --stream", &streamed)] {
        assert_eq!(out.status.code(), Some(255), "{front_end}: {}", show(out));
        let stderr = crate::stderr(out);
        let last = stderr.trim_end().lines().last().unwrap_or_default();
        let job = job_named(last);
        assert_eq!(
            last,
            format!(
                "bashc: bashd stopped while {job} ran; bashc output {job} has what it printed once bashd is back"
            ),
            "{front_end}: {}",
            show(out)
        );
    }
    assert!(crate::stdout(&streamed).contains("i31-streamed"));
    let said = text(&bash);
    assert_eq!(bash.is_error, Some(true), "{said}");
    let job = job_named(&said);
    assert_eq!(
        said.trim_end(),
        format!(
            "bashd stopped while {job} ran; bash_output(job=\"{job}\") has what it printed once bashd is back"
        )
    );
}

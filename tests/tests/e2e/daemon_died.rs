//! Issue 31: a daemon that dies under a running job is said the same way whichever
//! front end waited on it, since one response loop of the client library maps the
//! connection's end: `bashc exec`, `bashc exec --stream` and MCP's `bash` each name
//! the job and where its output is, never "closed the connection before answering".

use std::process::{Child, Stdio};

use std::time::Duration;

use bashc::ClientError;
use bashc::protocol::Request;
use bashd_tests::{Daemon, procs, wait_for_running, wait_until};

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
    // A job's process runs only once its client was sent the job's id: the daemon
    // may die as soon as it does.
    for sleep in ["sleep 3101", "sleep 3102", "sleep 3103"] {
        wait_for_running(sleep);
    }
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

/// A job's id reaches its client before anything of the job is spawned (`Recorded`):
/// a daemon that dies while the job's spawn is held up (here its zygote, which forks
/// every job's resident, is stopped) is told as dying under that job, not as a
/// connection closed before any answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_names_its_job_when_bashd_dies_before_the_job_is_spawned() {
    let mut daemon = Daemon::start();
    // The zygote starts with the first job.
    let first = daemon.run_bashc(&["exec", "--", "true"]);
    assert_eq!(first.status.code(), Some(0), "{}", show(&first));
    let zygote = procs::all_pids()
        .into_iter()
        .find(|&pid| {
            procs::parent_pid(pid) == Some(daemon.pid()) && procs::cmdline(pid).contains("--zygote")
        })
        .expect("no zygote under the daemon");
    let zygote = Stopped::new(zygote);

    let marker = daemon.scratch().join("i46-ran");
    let client = daemon.client().await;
    let command = format!("touch {}; sleep 4601", marker.display());
    let mut responses = client
        .request(Request::Exec(daemon.params(&command)))
        .await
        .unwrap();
    // `Responses::job` is set once the daemon names the job, whatever `next` returns.
    let named = tokio::time::timeout(Duration::from_secs(30), async {
        while responses.job().is_none() {
            let _ = tokio::time::timeout(Duration::from_millis(20), responses.next()).await;
        }
    })
    .await;
    assert!(named.is_ok(), "the client was never told the job's id");
    let job = responses.job().expect("named");
    assert!(
        !marker.exists() && procs::pids_running("sleep 4601").is_empty(),
        "the job ran while its zygote was stopped"
    );

    daemon.kill_daemon();
    let error = responses.next().await.expect_err("the daemon is gone");
    assert!(
        matches!(error, ClientError::DiedWhileRunning { job: died } if died == job),
        "{error:?}"
    );
    assert!(error.to_string().contains(&job.to_string()), "{error}");
    drop(zygote);
    // Nothing of it ever ran, and nothing runs it now.
    assert!(!marker.exists());
}

/// A process the test stopped (SIGSTOP), SIGKILLed when dropped, even on a panic.
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Stopped {
        signal(pid, rustix::process::Signal::STOP);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, rustix::process::Signal::KILL);
        wait_until(Duration::from_secs(10), || !procs::alive(self.0));
    }
}

fn signal(pid: u32, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("a pid");
    rustix::process::kill_process(pid, signal).expect("cannot signal the zygote");
}

//! Issue 31: the library's handles, as a Rust program calls them: a session runs a
//! command, starts a background job, waits for its line, reads it, and kills it.

use bashc::protocol::{JobState, StreamName};
use bashd_tests::{Daemon, pids_running, wait_until};

const GONE_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_runs_waits_reads_and_kills_through_its_handles() {
    let daemon = Daemon::start();
    let session = bashc::Session::new(daemon.client().await, "i31-library");
    let ran = session.run("echo i31-ran").await.unwrap();
    assert_eq!(
        (ran.state, ran.exit_code, ran.stdout.text.as_str()),
        (JobState::Exited, Some(0), "i31-ran\n")
    );

    let server = session.spawn("echo i31-ready; sleep 3111").await.unwrap();
    let waited = server.wait_until("i31-ready", 20).await.unwrap();
    assert_eq!(waited.state, JobState::Running, "{waited:?}");
    let page = server.output(StreamName::Stdout, 1, None).await.unwrap();
    assert_eq!(page.text, "i31-ready\n");
    let listed = session.jobs().await.unwrap();
    assert!(
        listed.iter().any(|job| job.job == server.id()),
        "{listed:?}"
    );

    let killed = server.kill().await.unwrap();
    assert_eq!(killed.state, JobState::Killed, "{killed:?}");
    assert!(wait_until(GONE_WITHIN, || pids_running("sleep 3111").is_empty()));
    let closed = session.close().await.unwrap();
    assert_eq!(closed.killed_jobs, 0, "{closed:?}");
}

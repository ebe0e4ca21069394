//! `BASHD_BENCH=recovery` (issue 6): a restart that recovers running jobs.

use super::*;

/// A daemon SIGKILLed with many background jobs: how long the next one takes to answer
/// and to end every process the dead one left.
pub(super) fn recovery(tokio: &tokio::runtime::Runtime) {
    const RUNNING: usize = 1000;
    let mut daemon = Daemon::start();
    tokio.block_on(async {
        let client = daemon.client().await;
        for i in 0..RUNNING {
            let mut params = daemon.params(&format!("sleep 800.{i}"));
            params.mode = bashc::protocol::Mode::Background;
            client.exec(params).await.unwrap();
        }
        let mut params = daemon.params("for i in $(seq 50); do setsid sleep 801 & done; wait");
        params.mode = bashc::protocol::Mode::Background;
        client.exec(params).await.unwrap();
    });
    // bash execs a lone `sleep`; the loop job is its shell and 50 sleeps.
    let processes = RUNNING + 51;
    assert!(bashd_tests::wait_until(Duration::from_secs(60), || {
        daemon.job_processes().len() >= processes
    }));
    daemon.kill_daemon();

    let start = Instant::now();
    daemon.restart();
    tokio.block_on(async {
        daemon.client().await.status().await.unwrap();
    });
    let answered = start.elapsed();
    assert!(bashd_tests::wait_until(Duration::from_secs(60), || {
        daemon.job_processes().is_empty()
    }));
    let cleaned = start.elapsed();
    println!(
        "restart after a SIGKILL with {} unfinished jobs ({} processes, 50 of them setsid escapees): first answer after {:.2} s, none left after {:.2} s",
        RUNNING + 1,
        processes,
        answered.as_secs_f64(),
        cleaned.as_secs_f64()
    );
}

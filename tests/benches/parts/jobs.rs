//! `BASHD_BENCH=jobs` (issue 5): jobs at scale.

use super::*;

/// 1,000 background jobs and 10,000 finished ones: how long they take to start and
/// list, what the daemon holds, whether a request gets slower, and how long a kill
/// takes to leave nothing of a job with 50 escapees.
pub(super) fn jobs_at_scale(tokio: &tokio::runtime::Runtime) {
    const RUNNING: usize = 1000;
    const FINISHED: usize = 10_000;
    let mut daemon = Daemon::start_with_config("[sessions]\nkeep_finished = 20000\n");
    let rss = |daemon: &Daemon| memory_kib(daemon.pid(), "VmRSS").unwrap_or(0) as f64 / 1024.0;
    tokio.block_on(async {
        let client = daemon.client().await;
        let empty = exec_round_trip(&client, daemon.params("true")).await;
        let status_empty = status_round_trip(&client).await;

        let start = Instant::now();
        for i in 0..RUNNING {
            let mut params = daemon.params(&format!("sleep 600.{i}"));
            params.mode = bashc::protocol::Mode::Background;
            let result = client.exec(params).await.unwrap();
            assert_eq!(result.state, bashc::protocol::JobState::Running);
        }
        let started = start.elapsed();
        let mut finished = 0;
        while finished < FINISHED {
            let batch: Vec<_> = (0..50)
                .map(|_| client.exec(daemon.params("true")))
                .collect();
            finished += futures::future::join_all(batch).await.len();
        }
        let full = exec_round_trip(&client, daemon.params("true")).await;
        let status_full = status_round_trip(&client).await;
        println!(
            "{RUNNING} background jobs started in {:.2} s ({:.2} ms each); daemon RSS with them and {FINISHED} finished: {:.1} MiB",
            started.as_secs_f64(),
            started.as_secs_f64() * 1e3 / RUNNING as f64,
            rss(&daemon)
        );
        report(
            &format!("exec true with {RUNNING} running and {FINISHED} finished jobs vs an empty table"),
            full,
            empty,
            1.2,
        );
        report(
            &format!("status round trip with {RUNNING} running and {FINISHED} finished jobs vs an empty table"),
            status_full,
            status_empty,
            1.2,
        );
    });

    let list = median(5, || {
        let out = daemon
            .bashc()
            .args(["jobs", "--all", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let jobs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(jobs.as_array().unwrap().len() > RUNNING + FINISHED);
    });
    println!(
        "bashc jobs --all --json over {} jobs: {:.1} ms",
        RUNNING + FINISHED + 400,
        list.as_secs_f64() * 1e3
    );

    let out = daemon
        .bashc()
        .args([
            "exec",
            "--json",
            "--mode",
            "background",
            "--",
            "for i in $(seq 50); do setsid sleep 700 & done; wait",
        ])
        .output()
        .unwrap();
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let job = result["job"].as_str().unwrap().to_owned();
    let of_job = |pid: &u32| {
        bashd_tests::procs::environ(*pid)
            .iter()
            .any(|e| e.starts_with("BASHD_JOB=") && e.ends_with(&format!("/{job}")))
    };
    let count = || {
        bashd_tests::procs::pids_running("sleep 700")
            .iter()
            .filter(|pid| of_job(pid))
            .count()
    };
    assert!(bashd_tests::wait_until(Duration::from_secs(30), || count() == 50));
    let start = Instant::now();
    let out = daemon.bashc().args(["kill", &job]).output().unwrap();
    assert!(!out.status.success() || count() == 0);
    let killed = start.elapsed();
    assert!(bashd_tests::wait_until(Duration::from_secs(30), || count() == 0));
    println!(
        "kill of a job with 50 setsid escapees, {RUNNING} other jobs running: {:.0} ms until none is left (kill_grace 2 s; sleep dies on TERM)",
        killed.as_secs_f64() * 1e3
    );

    let start = Instant::now();
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemon.pid() as i32).unwrap(),
        rustix::process::Signal::TERM,
    );
    let _ = daemon.child_mut().wait();
    println!(
        "SIGTERM with {RUNNING} running jobs: daemon gone after {:.2} s",
        start.elapsed().as_secs_f64()
    );
}

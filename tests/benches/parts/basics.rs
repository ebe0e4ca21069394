//! `BASHD_BENCH=basics`: the round trips, the capture, the policy check, the daemon's memory.

use super::*;

/// Round trips, capture, policy and the daemon's footprint.
pub(super) fn basics(tokio: &tokio::runtime::Runtime) {
    let daemon = Daemon::start();

    // Let the daemon settle, then read its idle footprint.
    std::thread::sleep(Duration::from_millis(300));
    let idle_rss = memory_kib(daemon.pid(), "VmRSS").unwrap_or(0);

    // Each pair runs one after the other, so load from outside the bench weighs on
    // both sides alike.
    let (bashc, bash) = paired_medians(
        PROCESS_RUNS,
        || run(daemon.bashc().args(["exec", "--", "true"])),
        || run(Command::new("bash").args(["-c", "true"])),
    );
    report(
        "bashc exec -- true vs bash -c true (median, whole processes)",
        bashc,
        bash,
        1.5,
    );

    let (library, spawn) = tokio.block_on(async {
        let client = daemon.client().await;
        let params = daemon.params("true");
        let (mut library, mut spawn) = (Vec::new(), Vec::new());
        for _ in 0..ROUND_TRIPS {
            let start = Instant::now();
            client.exec(params.clone()).await.unwrap();
            library.push(start.elapsed());
            let start = Instant::now();
            tokio_bash_true().await;
            spawn.push(start.elapsed());
        }
        (median_of(library), median_of(spawn))
    });
    report(
        "library round trip (warm) vs tokio spawn of bash -c true (median)",
        library,
        spawn,
        1.2,
    );

    capture_throughput(&daemon, tokio);
    policy_check_time();

    println!(
        "daemon idle RSS: {:.1} MiB (target <= 16 MiB)",
        idle_rss as f64 / 1024.0
    );
    println!(
        "daemon RSS after the runs above: {:.1} MiB",
        memory_kib(daemon.pid(), "VmRSS").unwrap_or(0) as f64 / 1024.0
    );
}

/// The median of 200 `exec`s of `params` on a warm connection.
pub(super) async fn exec_round_trip(
    client: &bashc::Client,
    params: bashc::protocol::ExecParams,
) -> Duration {
    let mut samples = Vec::new();
    for _ in 0..200 {
        let start = Instant::now();
        client.exec(params.clone()).await.unwrap();
        samples.push(start.elapsed());
    }
    median_of(samples)
}

/// The median of 500 `status` requests on a warm connection: the actor's own cost.
pub(super) async fn status_round_trip(client: &bashc::Client) -> Duration {
    let mut samples = Vec::new();
    for _ in 0..500 {
        let start = Instant::now();
        client.status().await.unwrap();
        samples.push(start.elapsed());
    }
    median_of(samples)
}

/// `yes | head -c 1G` through bashd against the same pipeline into a file.
pub(super) fn capture_throughput(daemon: &Daemon, tokio: &tokio::runtime::Runtime) {
    const BYTES: u64 = 1 << 30;
    let pipeline = format!("yes | head -c {BYTES}");
    let file = daemon.scratch().join("capture-floor");
    let start = Instant::now();
    run(Command::new("bash").args(["-c", &format!("{pipeline} > {}", file.display())]));
    let floor = start.elapsed();
    let _ = std::fs::remove_file(&file);
    // Not a target, the ceiling: one more process reading a pipe and doing nothing.
    let start = Instant::now();
    run(Command::new("bash").args(["-c", &format!("{pipeline} | cat > /dev/null")]));
    let cat = start.elapsed();

    let through = tokio.block_on(async {
        let client = daemon.client().await;
        let mut params = daemon.params(&pipeline);
        params.mode = bashc::protocol::Mode::Slow;
        let start = Instant::now();
        let result = client.exec(params).await.unwrap();
        assert_eq!(result.stdout.total_bytes, BYTES, "{result:?}");
        start.elapsed()
    });
    let rate = |d: Duration| BYTES as f64 / d.as_secs_f64() / 1e9;
    println!(
        "capture of {pipeline}: {:.2} GB/s through bashd vs {:.2} GB/s into a file: {:.0}% (target >= 50% and >= 1 GB/s)",
        rate(through),
        rate(floor),
        100.0 * floor.as_secs_f64() / through.as_secs_f64()
    );
    println!(
        "  for scale, {pipeline} | cat > /dev/null: {:.2} GB/s",
        rate(cat)
    );
    println!(
        "daemon peak RSS (VmHWM) after the capture: {:.1} MiB",
        memory_kib(daemon.pid(), "VmHWM").unwrap_or(0) as f64 / 1024.0
    );
}

/// The policy check alone, in-process, with the thread's parser reused.
pub(super) fn policy_check_time() {
    let policy = bashd::policy::Policy::default();
    let one_liner = "cd src && git add main.rs lib.rs && cargo test --workspace 2>&1 | tail -20";
    let line_time = median(2000, || assert!(policy.check(one_liner).is_ok()));
    let script: String = (0..1000)
        .map(|i| format!("if [ -f out{i} ]; then echo \"$(wc -l < out{i})\" | tee -a log; fi\n"))
        .collect();
    let script_time = median(20, || assert!(policy.check(&script).is_ok()));
    println!(
        "policy check: one-liner {:.0} us (target <= 1 ms), 1,000-line script {:.1} ms",
        line_time.as_secs_f64() * 1e6,
        script_time.as_secs_f64() * 1e3
    );
}

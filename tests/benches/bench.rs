//! `cargo bench -p bashd-tests`: each figure is a ratio against a floor measured in the
//! same run, on the same machine (DESIGN §13). Plain text, one figure a line.
//!
//! The release `bashd` and `bashc` are built first through `$CARGO`, since cargo builds
//! only this package's targets for a bench.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bashd_tests::Daemon;
use bashd_tests::procs::memory_kib;

const PROCESS_RUNS: usize = 60;
const ROUND_TRIPS: usize = 300;

fn main() {
    build_release_binaries();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // BASHD_BENCH=jobs runs only the jobs figures, and so on; unset runs them all.
    let only = std::env::var("BASHD_BENCH").ok();
    let wanted = |part: &str| only.as_deref().is_none_or(|o| o == part);
    if wanted("basics") {
        basics(&tokio);
    }
    if wanted("jobs") {
        jobs_at_scale(&tokio);
    }
    if wanted("recovery") {
        recovery(&tokio);
    }
    if wanted("mcp") {
        mcp(&tokio);
    }
    if wanted("paging") {
        paging(&tokio);
    }
    if wanted("containment") {
        containment(&tokio);
    }
    // Only on request: the one-liner and script figures already run in basics.
    if only.as_deref() == Some("policy") {
        policy_figures();
    }
}

/// Pages of a 100 MB output: the last lines against the first, so what a page costs
/// for being far into the spill file.
fn paging(tokio: &tokio::runtime::Runtime) {
    const BYTES: u64 = 100_000_000;
    let daemon = Daemon::start();
    tokio.block_on(async {
        let client = daemon.client().await;
        let mut params = daemon.params(&format!("yes 'a line of output' | head -c {BYTES}"));
        params.mode = bashc::protocol::Mode::Slow;
        let result = client.exec(params).await.unwrap();
        let lines = result.stdout.total_lines;
        assert!(lines > 5_000_000, "{result:?}");
        let page_at = |offset: u64| {
            let client = client.clone();
            let job = result.job;
            let caller = daemon.caller();
            async move {
                let mut samples = Vec::new();
                for _ in 0..20 {
                    let start = Instant::now();
                    let page = client
                        .output(bashc::protocol::OutputRequest {
                            job: bashc::protocol::JobRef::Id(job.to_string()),
                            stream: bashc::protocol::StreamName::Stdout,
                            offset,
                            limit: Some(10),
                            caller: caller.clone(),
                            any_session: false,
                            max_bytes: None,
                            from_end: false,
                        })
                        .await
                        .unwrap();
                    assert_eq!(page.lines, 10);
                    samples.push(start.elapsed());
                }
                median_of(samples)
            }
        };
        let first = page_at(1).await;
        let last = page_at(lines - 10).await;
        println!(
            "output page of the last 10 of {lines} lines (100 MB spilled): {:.2} ms; of the first 10: {:.2} ms (medians of 20)",
            last.as_secs_f64() * 1e3,
            first.as_secs_f64() * 1e3
        );
    });
}

/// A `bash` tool call through `bashc mcp` against the same command through the library:
/// what the MCP layer (JSON-RPC, rmcp, the gate, rendering) adds to a call.
fn mcp(tokio: &tokio::runtime::Runtime) {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    let daemon = Daemon::start();
    let (through_mcp, through_library) = tokio.block_on(async {
        let mut command = tokio::process::Command::new(bashd_tests::bin_path("bashc"));
        command
            .arg("mcp")
            .env(
                bashc::protocol::runtime::RUNTIME_DIR_ENV,
                daemon.runtime_dir(),
            )
            .env("BASHD_NO_AUTOSTART", "1")
            .current_dir(daemon.scratch());
        let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let client = ().serve(transport).await.unwrap();
        let arguments = serde_json::json!({"command": "true"});
        let arguments = arguments.as_object().unwrap().clone();
        let mut samples = Vec::new();
        for _ in 0..ROUND_TRIPS {
            let start = Instant::now();
            let result = client
                .call_tool(CallToolRequestParams::new("bash").with_arguments(arguments.clone()))
                .await
                .unwrap();
            assert_ne!(result.is_error, Some(true));
            samples.push(start.elapsed());
        }
        // What a result costs on the wire against the text it carries (issue 15: a
        // result is sent once, as text).
        let big = serde_json::json!({
            "command": "for i in $(seq 1 2000); do printf '%0599d\\n' $i; done"
        });
        let result = client
            .call_tool(
                CallToolRequestParams::new("bash").with_arguments(big.as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        let text: usize = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.len()))
            .sum();
        let wire = serde_json::to_string(&result).unwrap().len();
        println!(
            "bash result of 2,000 lines of 600 B: {wire} bytes as JSON for {text} bytes of text ({:.2}x)",
            wire as f64 / text as f64
        );
        client.cancel().await.unwrap();
        let library = daemon.client().await;
        // The same job as the server asks for: the server passes its whole
        // environment, which is this one, and bash takes longer to start with more.
        let mut params = daemon.params("true");
        use std::os::unix::ffi::OsStrExt;
        params.env = std::env::vars_os()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        let mut direct = Vec::new();
        for _ in 0..ROUND_TRIPS {
            let start = Instant::now();
            library.exec(params.clone()).await.unwrap();
            direct.push(start.elapsed());
        }
        (median_of(samples), median_of(direct))
    });
    report(
        "bash tool call through bashc mcp vs the library, command true (median)",
        through_mcp,
        through_library,
        1.2,
    );
}

/// A daemon SIGKILLed with many background jobs: how long the next one takes to answer
/// and to end every process the dead one left.
fn recovery(tokio: &tokio::runtime::Runtime) {
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

/// Round trips, capture, policy and the daemon's footprint.
fn basics(tokio: &tokio::runtime::Runtime) {
    let daemon = Daemon::start();

    // Let the daemon settle, then read its idle footprint.
    std::thread::sleep(Duration::from_millis(300));
    let idle_rss = memory_kib(daemon.pid(), "VmRSS").unwrap_or(0);

    let bash = median(PROCESS_RUNS, || {
        run(Command::new("bash").args(["-c", "true"]));
    });
    let bashc = median(PROCESS_RUNS, || {
        run(daemon.bashc().args(["exec", "--", "true"]));
    });
    report(
        "bashc exec -- true vs bash -c true (median, whole processes)",
        bashc,
        bash,
        1.5,
    );

    let (library, spawn) = tokio.block_on(async {
        let client = daemon.client().await;
        let params = daemon.params("true");
        let mut library = Vec::new();
        for _ in 0..ROUND_TRIPS {
            let start = Instant::now();
            client.exec(params.clone()).await.unwrap();
            library.push(start.elapsed());
        }
        let mut spawn = Vec::new();
        for _ in 0..ROUND_TRIPS {
            let start = Instant::now();
            let status = tokio::process::Command::new("bash")
                .args(["-c", "true"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .output()
                .await
                .unwrap();
            assert!(status.status.success());
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

/// 1,000 background jobs and 10,000 finished ones: how long they take to start and
/// list, what the daemon holds, whether a request gets slower, and how long a kill
/// takes to leave nothing of a job with 50 escapees.
fn jobs_at_scale(tokio: &tokio::runtime::Runtime) {
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

/// The median of 200 `exec`s of `params` on a warm connection.
async fn exec_round_trip(client: &bashc::Client, params: bashc::protocol::ExecParams) -> Duration {
    let mut samples = Vec::new();
    for _ in 0..200 {
        let start = Instant::now();
        client.exec(params.clone()).await.unwrap();
        samples.push(start.elapsed());
    }
    median_of(samples)
}

/// The median of 500 `status` requests on a warm connection: the actor's own cost.
async fn status_round_trip(client: &bashc::Client) -> Duration {
    let mut samples = Vec::new();
    for _ in 0..500 {
        let start = Instant::now();
        client.status().await.unwrap();
        samples.push(start.elapsed());
    }
    median_of(samples)
}

/// `yes | head -c 1G` through bashd against the same pipeline into a file.
fn capture_throughput(daemon: &Daemon, tokio: &tokio::runtime::Runtime) {
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
fn policy_check_time() {
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

/// `BASHD_BENCH=policy`: the basics' policy figures, then the forms that make the
/// check do more work (code fed to a shell, long wrapper chains, brace expansions,
/// dynamic names), each the median of many checks in-process.
fn policy_figures() {
    policy_check_time();
    let policy = bashd::policy::Policy::default();
    let time = |what: &str, command: &str, runs: usize| {
        let verdict = policy.check(command).err().map(|d| d.rule);
        let took = median(runs, || {
            let _ = policy.check(command);
        });
        println!(
            "policy check: {what}: {:.0} us ({} bytes, {})",
            took.as_secs_f64() * 1e6,
            command.len(),
            verdict.as_deref().unwrap_or("allowed")
        );
    };
    time("rm -rf /.", "rm -rf /.", 2000);
    time(
        "literal code piped to bash",
        "echo 'cd build && make -j4 && ./test' | bash",
        2000,
    );
    time(
        "heredoc fed to bash",
        "bash <<'EOF'\nset -e\ncd build\nmake -j4\nEOF",
        2000,
    );
    time(
        "dynamic name and a function",
        "c=ls; f() { $c -la \"$1\"; }; f src",
        2000,
    );
    time(
        "brace expansion of targets",
        "rm -rf build/{a,b,c}/{x,y,z}/{1,2,3}",
        2000,
    );
    let wrappers = format!("{}rm -rf ./build", "nice ".repeat(64));
    time("64 wrappers", &wrappers, 2000);
    let script: String = (0..1000)
        .map(|i| format!("cp -r src{i} out/ && echo \"done {i}\" >> log\n"))
        .collect();
    time(
        "1,000-line heredoc fed to bash",
        &format!("bash <<'EOF'\n{script}EOF"),
        20,
    );
    let line = "ls -la /tmp && echo \"$(date)\" | grep -v foo; ";
    time("a 1 MiB command", &line.repeat((1 << 20) / line.len()), 3);
}

fn report(what: &str, measured: Duration, floor: Duration, target: f64) {
    let ratio = measured.as_secs_f64() / floor.as_secs_f64();
    println!(
        "{what}: {ratio:.2}x ({:.2} ms vs {:.2} ms; target <= {target}x)",
        measured.as_secs_f64() * 1e3,
        floor.as_secs_f64() * 1e3
    );
}

fn run(command: &mut Command) {
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{command:?} failed: {status}");
}

fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    median_of(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

fn median_of(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn build_release_binaries() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "bashd", "-p", "bashc"])
        .status()
        .expect("cannot run cargo to build the release binaries");
    assert!(
        status.success(),
        "cargo build --release -p bashd -p bashc failed"
    );
}

/// Each containment mechanism beside the others (DESIGN §4, §13): the scan alone (what
/// a job could shed), a resident per job, and a resident in a cgroup per job where a
/// cgroup v2 directory can be made. For each: `exec true` on an empty table and with
/// 1,000 jobs running, a kill of a job with 50 `setsid` escapees, and a restart after a
/// SIGKILL with those 1,000 jobs left.
fn containment(tokio: &tokio::runtime::Runtime) {
    const RUNNING: usize = 1000;
    let cgroup = bench_cgroup();
    let mut mechanisms = vec![
        ("scan", "[containment]\nmechanism = \"scan\"\n".to_owned()),
        ("subreaper", String::new()),
    ];
    if let Some(dir) = &cgroup {
        mechanisms.push((
            "cgroup",
            format!("[containment]\ncgroup = \"{}\"\n", dir.display()),
        ));
    } else {
        println!(
            "containment: no cgroup v2 directory could be made; the cgroup path is not measured"
        );
    }
    for (round, (name, config)) in mechanisms.into_iter().enumerate() {
        let mut daemon = Daemon::start_with_config(&config);
        let escapee = format!("sleep {}", 710 + round);
        tokio.block_on(async {
            let client = daemon.client().await;
            let empty = exec_round_trip(&client, daemon.params("true")).await;
            let start = Instant::now();
            for i in 0..RUNNING {
                let mut params = daemon.params(&format!("sleep 600.{i}"));
                params.mode = bashc::protocol::Mode::Background;
                client.exec(params).await.unwrap();
            }
            let started = start.elapsed();
            let full = exec_round_trip(&client, daemon.params("true")).await;
            println!(
                "containment {name}: exec true {:.2} ms on an empty table; {RUNNING} background jobs started in {:.2} s",
                empty.as_secs_f64() * 1e3,
                started.as_secs_f64()
            );
            report(
                &format!("containment {name}: exec true with {RUNNING} jobs running vs an empty table"),
                full,
                empty,
                1.2,
            );

            let mut params = daemon.params(&format!(
                "for i in $(seq 50); do setsid {escapee} & done; wait"
            ));
            params.mode = bashc::protocol::Mode::Background;
            let result = client.exec(params).await.unwrap();
            let count = || bashd_tests::procs::pids_running(&escapee).len();
            assert!(bashd_tests::wait_until(Duration::from_secs(30), || count() == 50));
            let start = Instant::now();
            client
                .kill(bashc::protocol::KillRequest {
                    caller: bashc::protocol::Caller {
                        session: "test".into(),
                        owner: None,
                    },
                    job: bashc::protocol::JobRef::Id(result.job.to_string()),
                    signal: None,
                    grace_ms: None,
                    any_session: false,
                })
                .await
                .unwrap();
            assert!(bashd_tests::wait_until(Duration::from_secs(30), || count() == 0));
            println!(
                "containment {name}: kill of a job with 50 setsid escapees, {RUNNING} other jobs running: {:.0} ms until none is left",
                start.elapsed().as_secs_f64() * 1e3
            );
        });
        daemon.kill_daemon();
        let start = Instant::now();
        daemon.restart();
        assert!(bashd_tests::wait_until(Duration::from_secs(60), || {
            daemon.job_processes().is_empty()
        }));
        println!(
            "containment {name}: restart after a SIGKILL with {RUNNING} jobs running: none left after {:.2} s",
            start.elapsed().as_secs_f64()
        );
    }
    if let Some(dir) = cgroup {
        remove_cgroup(&dir);
    }
}

/// A fresh cgroup v2 directory for the bench's daemon, where one can be made.
fn bench_cgroup() -> Option<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        if !after.starts_with("cgroup2 ") {
            return None;
        }
        before.split(' ').nth(4).map(std::path::PathBuf::from)
    })?;
    let dir = mount.join(format!("bashd-bench-{}", std::process::id()));
    std::fs::create_dir(&dir).ok()?;
    Some(dir)
}

/// Removes the bench's cgroup and whatever job cgroups are left in it.
fn remove_cgroup(dir: &std::path::Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let child = entry.path();
        if child.join("cgroup.procs").exists() {
            let _ = std::fs::write(child.join("cgroup.kill"), "1");
            bashd_tests::wait_until(Duration::from_secs(10), || {
                std::fs::remove_dir(&child).is_ok()
            });
        }
    }
    let _ = std::fs::remove_dir(dir);
}

//! `BASHD_BENCH=containment` and `exec-cost` (issue 14): each containment mechanism.

use super::*;

/// The config of a daemon of each containment mechanism: the scan, a resident per job,
/// and a resident in a cgroup per job under `cgroup` where one could be made.
pub(super) fn mechanisms(cgroup: Option<&std::path::Path>) -> Vec<(&'static str, String)> {
    let mut mechanisms = vec![
        ("scan", "[containment]\nmechanism = \"scan\"\n".to_owned()),
        ("subreaper", String::new()),
    ];
    if let Some(dir) = cgroup {
        mechanisms.push((
            "cgroup",
            format!("[containment]\ncgroup = \"{}\"\n", dir.display()),
        ));
    } else {
        println!(
            "containment: no cgroup v2 directory could be made; the cgroup path is not measured"
        );
    }
    mechanisms
}

/// What one `exec true` costs on an empty table under each mechanism, against tokio
/// spawning `bash -c true` with piped output: one of each in turns, so that load from
/// outside the bench weighs on all alike.
pub(super) fn exec_cost_by_mechanism(
    tokio: &tokio::runtime::Runtime,
    mechanisms: &[(&str, String)],
) {
    let daemons: Vec<Daemon> = mechanisms
        .iter()
        .map(|(_, config)| Daemon::start_with_config(config))
        .collect();
    let medians = tokio.block_on(async {
        let mut clients = Vec::new();
        for daemon in &daemons {
            clients.push((daemon.client().await, daemon.params("true")));
        }
        let mut samples = vec![Vec::new(); clients.len() + 1];
        for _ in 0..ROUND_TRIPS {
            for (i, (client, params)) in clients.iter().enumerate() {
                let start = Instant::now();
                client.exec(params.clone()).await.unwrap();
                samples[i].push(start.elapsed());
            }
            let start = Instant::now();
            tokio_bash_true().await;
            samples[clients.len()].push(start.elapsed());
        }
        samples.into_iter().map(median_of).collect::<Vec<_>>()
    });
    let spawn = medians[mechanisms.len()];
    for ((name, _), median) in mechanisms.iter().zip(&medians) {
        report(
            &format!(
                "containment {name}: library exec true, empty table, vs tokio spawn of bash -c true (in turns)"
            ),
            *median,
            spawn,
            1.2,
        );
    }
}

/// Each containment mechanism beside the others (DESIGN §4, §13): the scan alone (what
/// a job could shed), a resident per job, and a resident in a cgroup per job where a
/// cgroup v2 directory can be made. For each: `exec true` on an empty table and with
/// 1,000 jobs running, a kill of a job with 50 `setsid` escapees, and a restart after a
/// SIGKILL with those 1,000 jobs left.
pub(super) fn containment(tokio: &tokio::runtime::Runtime) {
    const RUNNING: usize = 1000;
    let cgroup = bench_cgroup();
    let mechanisms = mechanisms(cgroup.as_deref());
    exec_cost_by_mechanism(tokio, &mechanisms);
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
pub(super) fn bench_cgroup() -> Option<std::path::PathBuf> {
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
pub(super) fn remove_cgroup(dir: &std::path::Path) {
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

/// User and system CPU time of a process, in milliseconds at 100 clock ticks a second.
pub(super) fn cpu_ms(pid: u32) -> u64 {
    bashd_protocol::ProcStat::read(pid).map_or(0, |stat| stat.cpu_ticks() * 10)
}

//! `BASHD_BENCH=daemon-ab` (issue 31): the daemon's own cost per `exec`, this build's
//! `bashd` against another (`BASHD_BENCH_BASHD_BEFORE=DIR`, a directory holding an
//! older build's `bashd` and `bashd-resident`), in turns, under the same load. Each
//! round makes one call on each daemon, one after the other, so load from outside
//! weighs on both alike: the library's `exec true` on a warm connection, a `status`
//! on a new connection (accept, peer checks, `Welcome`), and `bashc exec -- true` (this
//! build's `bashc`, against each daemon). The CPU each daemon spent over all of it is
//! read from `/proc/PID/task/*/schedstat` (nanoseconds, its live threads) and
//! `/proc/PID/stat` (clock ticks, every thread that ran), divided by the `exec`s (the
//! `status` connections' share included).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bashd_tests::Daemon;

use super::{median_of, ms, process_cpu, quantile, run};

const ROUNDS: usize = 400;
const PROCESS_ROUNDS: usize = 60;

pub fn daemon_ab(tokio: &tokio::runtime::Runtime) {
    let Some(before) = std::env::var_os("BASHD_BENCH_BASHD_BEFORE").map(PathBuf::from) else {
        println!("daemon-ab: set BASHD_BENCH_BASHD_BEFORE to a directory with another bashd");
        return;
    };
    let after = Daemon::start();
    let mut earlier = Daemon::unstarted();
    earlier.start_with(earlier.bashd_command_from(&before.join("bashd")));
    let daemons = [&after, &earlier];
    let names = ["this build", &before.display().to_string()].map(str::to_owned);
    // Warm both: the zygote starts at the first job.
    tokio.block_on(async {
        for daemon in daemons {
            let client = daemon.client().await;
            for _ in 0..20 {
                client.exec(daemon.params("true")).await.unwrap();
            }
        }
    });
    let cpu_start = daemons.map(|d| process_cpu(d.pid()));
    let mut exec: [Vec<Duration>; 2] = Default::default();
    let mut connect: [Vec<Duration>; 2] = Default::default();
    tokio.block_on(async {
        let clients = [after.client().await, earlier.client().await];
        let params = daemons.map(|d| d.params("true"));
        for round in 0..ROUNDS {
            // Which goes first alternates, so neither always follows the other.
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                let start = Instant::now();
                clients[i].exec(params[i].clone()).await.unwrap();
                exec[i].push(start.elapsed());
            }
            for i in order {
                let start = Instant::now();
                let client = daemons[i].client().await;
                client.status().await.unwrap();
                connect[i].push(start.elapsed());
            }
        }
    });
    let mut process: [Vec<Duration>; 2] = Default::default();
    for round in 0..PROCESS_ROUNDS {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let start = Instant::now();
            run(daemons[i].bashc().args(["exec", "--", "true"]));
            process[i].push(start.elapsed());
        }
    }
    let cpu_end = daemons.map(|d| process_cpu(d.pid()));
    let execs = (ROUNDS + PROCESS_ROUNDS) as f64;
    for i in 0..2 {
        let (ns, ticks) = (
            cpu_end[i].0.saturating_sub(cpu_start[i].0),
            cpu_end[i].1.saturating_sub(cpu_start[i].1),
        );
        println!(
            "daemon-ab {}: library exec true min {:.3} ms p25 {:.3} median {:.3}; new connection + status min {:.3} median {:.3}; bashc exec -- true min {:.2} median {:.2} ms; daemon CPU per exec {:.3} ms (schedstat) {:.2} ms (stat)",
            names[i],
            ms(min_of(&exec[i])),
            ms(quantile(&exec[i], 0.25)),
            ms(median_of(exec[i].clone())),
            ms(min_of(&connect[i])),
            ms(median_of(connect[i].clone())),
            ms(min_of(&process[i])),
            ms(median_of(process[i].clone())),
            ns as f64 / 1e6 / execs,
            ticks as f64 * 10.0 / execs,
        );
    }
}

fn min_of(samples: &[Duration]) -> Duration {
    samples.iter().copied().min().unwrap_or_default()
}

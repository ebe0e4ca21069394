//! `BASHD_BENCH=sandbox` (issues 23, 30): `exec true` under each sandbox against none.

use super::*;

/// `exec true` in each sandbox against the same unconfined (issues 23, 30): what the
/// user, IPC, cgroup, mount and network namespaces, the mounts (the `.git` walk and a
/// devpts of the job's own included), Landlock and seccomp cost a job, each set up anew
/// for every job in the child its resident forks for the shell. The sandboxes take turns, 20 jobs at a time, so
/// that a machine shared with other work weighs on each alike.
pub(super) fn sandbox(tokio: &tokio::runtime::Runtime) {
    use bashc::protocol::{Network, SandboxProfile};
    const ROUNDS: usize = 15;
    const PER_ROUND: usize = 20;
    let daemon = Daemon::start();
    let sandboxes = [
        ("off", SandboxProfile::Off, Network::On),
        (
            "network off (user + network namespaces)",
            SandboxProfile::Off,
            Network::Off,
        ),
        (
            "workspace-write (user + mount namespaces, mounts, Landlock)",
            SandboxProfile::WorkspaceWrite,
            Network::On,
        ),
        ("read-only", SandboxProfile::ReadOnly, Network::On),
        (
            "workspace-write, network off",
            SandboxProfile::WorkspaceWrite,
            Network::Off,
        ),
    ];
    tokio.block_on(async {
        let client = daemon.client().await;
        let params = |profile, network| {
            let mut params = daemon.params("true");
            params.sandbox = Some(profile);
            params.network = Some(network);
            params
        };
        let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); sandboxes.len()];
        for round in 0..=ROUNDS {
            for (i, (_, profile, network)) in sandboxes.iter().enumerate() {
                for _ in 0..PER_ROUND {
                    let start = Instant::now();
                    client.exec(params(*profile, *network)).await.unwrap();
                    // The first round warms the page cache and is not counted.
                    if round > 0 {
                        samples[i].push(start.elapsed());
                    }
                }
            }
        }
        let medians: Vec<Duration> = samples.into_iter().map(median_of).collect();
        println!(
            "sandbox off: exec true {:.2} ms",
            medians[0].as_secs_f64() * 1e3
        );
        for ((name, ..), measured) in sandboxes.iter().zip(&medians).skip(1) {
            report(
                &format!("sandbox {name}: exec true vs off"),
                *measured,
                medians[0],
                1.3,
            );
        }
    });
}

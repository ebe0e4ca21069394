//! `BASHD_BENCH=sandbox` (issues 23, 30): `exec true` under each sandbox against none.

use bashc::protocol::{ExecParams, Network, SandboxProfile};

use super::*;

/// A sandbox the sandbox parts compare, the first none.
pub(super) struct Sandbox {
    pub name: &'static str,
    /// What it sets up, where the name does not say.
    pub mechanism: Option<&'static str>,
    pub profile: SandboxProfile,
    pub network: Network,
}

impl Sandbox {
    /// `exec true` in this sandbox.
    pub fn params(&self, daemon: &Daemon) -> ExecParams {
        let mut params = daemon.params("true");
        params.sandbox = Some(self.profile);
        params.network = Some(self.network);
        params
    }
}

/// A client whose directory, as the daemon reads it when it connects, is the daemon's
/// scratch dir, the jobs' workdir: so that directory is the writable root of the
/// `workspace-write` jobs measured (issue 42), which would run read-only in a workdir
/// outside it. The bench runs one part at a time, so the process's directory is its
/// own to change for the connect.
pub(super) async fn client_in_scratch(daemon: &Daemon) -> bashc::Client {
    let here = std::env::current_dir().expect("the bench has a working directory");
    std::env::set_current_dir(daemon.scratch()).expect("cannot enter the scratch dir");
    let client = daemon.client().await;
    // The daemon reads the directory before it answers the handshake.
    let welcomed = client.welcome().await;
    std::env::set_current_dir(here).expect("cannot go back");
    welcomed.expect("the daemon did not answer the handshake");
    client
}

pub(super) const SANDBOXES: [Sandbox; 6] = [
    Sandbox {
        name: "off",
        mechanism: None,
        profile: SandboxProfile::Off,
        network: Network::On,
    },
    Sandbox {
        name: "network off",
        mechanism: Some("user + network namespaces"),
        profile: SandboxProfile::Off,
        network: Network::Off,
    },
    Sandbox {
        name: "workspace-write",
        mechanism: Some("user + mount namespaces, mounts, Landlock"),
        profile: SandboxProfile::WorkspaceWrite,
        network: Network::On,
    },
    Sandbox {
        name: "read-only",
        mechanism: None,
        profile: SandboxProfile::ReadOnly,
        network: Network::On,
    },
    Sandbox {
        name: "workspace-write, network off",
        mechanism: None,
        profile: SandboxProfile::WorkspaceWrite,
        network: Network::Off,
    },
    // Issue 43: the session's network of the allow-list, with the proxy's listeners.
    Sandbox {
        name: "network allow-list",
        mechanism: None,
        profile: SandboxProfile::Off,
        network: Network::AllowList,
    },
];

/// `exec true` in each sandbox against the same unconfined (issues 23, 30): what the
/// user, IPC, cgroup, mount and network namespaces, the mounts (the `.git` walk and a
/// devpts of the job's own included), Landlock and seccomp cost a job, each set up anew
/// for every job in the child its resident forks for the shell. The sandboxes take turns, 20 jobs at a time, so
/// that a machine shared with other work weighs on each alike.
pub(super) fn sandbox(tokio: &tokio::runtime::Runtime) {
    const ROUNDS: usize = 15;
    const PER_ROUND: usize = 20;
    let daemon = Daemon::start();
    tokio.block_on(async {
        let client = client_in_scratch(&daemon).await;
        let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); SANDBOXES.len()];
        for round in 0..=ROUNDS {
            for (i, sandbox) in SANDBOXES.iter().enumerate() {
                for _ in 0..PER_ROUND {
                    let start = Instant::now();
                    client.exec(sandbox.params(&daemon)).await.unwrap();
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
        for (sandbox, measured) in SANDBOXES.iter().zip(&medians).skip(1) {
            let name = match sandbox.mechanism {
                Some(mechanism) => format!("{} ({mechanism})", sandbox.name),
                None => sandbox.name.to_owned(),
            };
            report(
                &format!("sandbox {name}: exec true vs off"),
                *measured,
                medians[0],
                1.3,
            );
        }
    });
}

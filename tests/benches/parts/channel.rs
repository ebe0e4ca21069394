//! `BASHD_BENCH=channel` (issue 30): a nested exec through a job's channel.

use super::*;

/// `BASHD_BENCH=channel` (issue 30): a nested exec's round trip through a sandboxed
/// job's channel (a socket pair made, one end sent over the channel, the handshake,
/// `exec true` under the job's sandbox) against the same exec from outside over the
/// daemon's socket (connect, the peer's namespace checked, the handshake, `exec true`
/// with the same sandbox asked for), each on a new connection as a `bashc` makes it.
/// This process borrows the channel of a running `read-only --net off` job
/// (`pidfd_getfd`), as a process of that job would use it. In turns, 20 at a time.
pub(super) fn channel(tokio: &tokio::runtime::Runtime) {
    use std::os::fd::AsRawFd;

    use bashc::protocol::{Mode, Network, SandboxProfile};
    const ROUNDS: usize = 10;
    const PER_ROUND: usize = 20;
    let daemon = Daemon::start();
    tokio.block_on(async {
        let client = daemon.client().await;
        let mut lender = daemon.params("sleep 3030.9");
        lender.mode = Mode::Background;
        lender.sandbox = Some(SandboxProfile::ReadOnly);
        lender.network = Some(Network::Off);
        let started = client.exec(lender).await.unwrap();
        let pid = started.pid.expect("a started job has a pid");
        let borrowed = {
            use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags, pidfd_getfd, pidfd_open};
            let pid = Pid::from_raw(pid as i32).expect("a job's pid is not 0");
            let pidfd = pidfd_open(pid, PidfdFlags::empty()).expect("pidfd_open");
            pidfd_getfd(pidfd, 63, PidfdGetfdFlags::empty()).expect("pidfd_getfd")
        };
        let socket = daemon.socket_path();
        let target = bashc::Target::local_at(daemon.runtime_dir().to_owned());
        let sandboxed = || {
            let mut params = daemon.params("true");
            params.sandbox = Some(SandboxProfile::ReadOnly);
            params.network = Some(Network::Off);
            params
        };
        let mut samples: [Vec<Duration>; 4] = Default::default();
        for round in 0..=ROUNDS {
            for _ in 0..PER_ROUND {
                let start = Instant::now();
                let outside = bashc::Client::connect(&socket).await.unwrap();
                let connected = start.elapsed();
                outside.exec(sandboxed()).await.unwrap();
                if round > 0 {
                    samples[0].push(start.elapsed());
                    samples[2].push(connected);
                }
            }
            // SAFETY: nothing else in this process reads or writes its environment
            // while the channel is named in it.
            unsafe {
                std::env::set_var(
                    bashc::protocol::channel::CHANNEL_ENV,
                    borrowed.as_raw_fd().to_string(),
                )
            };
            for _ in 0..PER_ROUND {
                let start = Instant::now();
                let inside = bashc::connect(&target).await.unwrap();
                let connected = start.elapsed();
                let result = inside.exec(daemon.params("true")).await.unwrap();
                assert_eq!(
                    result.sandbox.map(|s| s.profile),
                    Some(SandboxProfile::ReadOnly)
                );
                if round > 0 {
                    samples[1].push(start.elapsed());
                    samples[3].push(connected);
                }
            }
            // SAFETY: as for the set_var above: nothing else in this process reads or
            // writes its environment meanwhile.
            unsafe { std::env::remove_var(bashc::protocol::channel::CHANNEL_ENV) };
        }
        let [outside, inside, outside_connect, inside_connect] = samples.map(median_of);
        report(
            "nested exec true through the job's channel vs from outside (read-only, network off, new connection each)",
            inside,
            outside,
            1.5,
        );
        // The handshake goes with the exec (issue 31): the connect alone is timed.
        println!(
            "connect: through the channel {:.3} ms, over the socket {:.3} ms",
            inside_connect.as_secs_f64() * 1e3,
            outside_connect.as_secs_f64() * 1e3
        );
    });
}

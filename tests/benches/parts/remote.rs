//! `BASHD_BENCH=remote` (issue 19): a call through a warm relay.

use super::*;

/// `BASHD_BENCH=remote` (issue 19): `bashc --host H exec -- true` through a warm relay
/// (a real sshd on 127.0.0.1) against local `bashc exec -- true` (target <= 2x) and
/// against `ssh H true` on the warm master the relay's ssh made, the floor of a call
/// that opens an SSH session; and a first call, which starts a relay on that master.
pub(super) fn remote() {
    let mut sshd = match bashd_tests::sshd::Sshd::start() {
        Ok(sshd) => sshd,
        Err(why) => {
            println!("remote: skipped: {why}");
            return;
        }
    };
    let local = Daemon::start();
    let far = Daemon::unstarted();
    let near = Daemon::unstarted();
    sshd.clean_up_after(near.runtime_dir());
    let bridge = sshd.bridge_command(far.runtime_dir(), &far.config_home());
    let host = bashd_tests::sshd::HOST;
    let over_host = || {
        let out = near
            .bashc()
            .env(bashc::BRIDGE_COMMAND_ENV, &bridge)
            .args(["--host", host, "exec", "--", "true"])
            .output()
            .unwrap();
        assert!(out.status.success(), "bashc --host failed: {out:?}");
    };
    // Warm: the relay and the master are up, the far daemon started.
    over_host();
    let control = near.runtime_dir().join("ssh").join("%C");
    let ssh_true = || {
        let status = Command::new("ssh")
            .arg("-F")
            .arg(sshd.config())
            .arg("-o")
            .arg(format!("ControlPath={}", control.display()))
            .args([host, "true"])
            .stdin(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    };
    // The same without the master: a full SSH handshake, to show the master is warm.
    let ssh_handshake = || {
        let status = Command::new("ssh")
            .arg("-F")
            .arg(sshd.config())
            .args(["-o", "ControlMaster=no", "-o", "ControlPath=none"])
            .args([host, "true"])
            .stdin(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    };
    let local_true = || {
        let out = local.run_bashc(&["exec", "--", "true"]);
        assert!(out.status.success());
    };
    const RUNS: usize = 30;
    let (remote, floor) = paired_medians(RUNS, over_host, ssh_true);
    let local = median(RUNS, local_true);
    let handshake = median(10, ssh_handshake);
    // A first call: no relay (the last one killed), the master warm.
    let first = median_of(
        (0..7)
            .map(|_| {
                let relays = bashd_tests::sshd::relay_pids(near.runtime_dir());
                assert!(!relays.is_empty(), "no relay after a call");
                for &pid in &relays {
                    let _ = Command::new("kill").arg(pid.to_string()).status();
                }
                assert!(bashd_tests::wait_until(Duration::from_secs(10), || {
                    relays.iter().all(|&pid| !bashd_tests::alive(pid))
                }));
                let start = Instant::now();
                over_host();
                start.elapsed()
            })
            .collect(),
    );
    println!(
        "remote: bashc --host exec -- true (warm relay) {:.1} ms median; local bashc exec -- true {:.1} ms ({:.2}x, target <= 2x); ssh HOST true on the warm master {:.1} ms, without a master {:.1} ms; a first call, starting a relay on the warm master, {:.1} ms",
        ms(remote),
        ms(local),
        remote.as_secs_f64() / local.as_secs_f64(),
        ms(floor),
        ms(handshake),
        ms(first),
    );
}

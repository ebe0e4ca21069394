//! `bashc --host` (issue 19) against a real sshd on 127.0.0.1: this build's `bashc
//! bridge` on the far side, a daemon of its own there, ssh pointed at the test server
//! by a generated config. Skipped, with the reason, where sshd cannot run.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use bashd_tests::procs::{all_pids, parent_pid};
use bashd_tests::sshd::{HOST, Sshd, bridge_pids, relay_pids};
use bashd_tests::{
    Daemon, KillOnDrop, alive, bin_path, pids_running, wait_for_running, wait_until,
};
use serde_json::json;

use super::{json, show, stdout};

/// The far side: a runtime dir whose daemon the bridge starts (the `Daemon` guard
/// kills it and its jobs on drop), the server, and this side's runtime dir, which
/// holds the control sockets.
struct Remote {
    sshd: Sshd,
    far: Daemon,
    near: Daemon,
}

impl Remote {
    fn start() -> Option<Remote> {
        let mut sshd = match Sshd::start() {
            Ok(sshd) => sshd,
            Err(why) => {
                eprintln!("skipped: {why}");
                return None;
            }
        };
        let near = Daemon::unstarted();
        // The masters ssh forks name their control socket, under this runtime dir.
        sshd.clean_up_after(near.runtime_dir());
        Some(Remote {
            sshd,
            far: Daemon::unstarted(),
            near,
        })
    }

    /// `bashc --host HOST ...`, session `test` here.
    fn bashc(&self) -> Command {
        let mut command = self.near.bashc();
        command
            .env(
                bashc::BRIDGE_COMMAND_ENV,
                self.sshd
                    .bridge_command(self.far.runtime_dir(), &self.far.config_home()),
            )
            .args(["--host", HOST]);
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.bashc().args(args).output().expect("cannot run bashc")
    }

    /// What the far daemon says, asked there directly.
    fn far(&self, args: &[&str]) -> Output {
        self.far.run_bashc(args)
    }

    fn session(&self) -> String {
        format!("test@{}", bashc::hostname())
    }
}

fn job_id(output: &Output) -> String {
    json(output)["job"]
        .as_str()
        .unwrap_or_else(|| panic!("no job id:\n{}", show(output)))
        .to_owned()
}

/// Issue 19.
#[test]
fn exec_background_check_wait_output_kill_over_host() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let out = remote.run(&["exec", "--", "echo hi-i19 $BASHD_RUNTIME_DIR; pwd"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    // The job ran on the far side, with its environment and in its login directory.
    assert!(
        text.contains(&format!("hi-i19 {}", remote.far.runtime_dir().display())),
        "{}",
        show(&out)
    );
    let home = std::env::var("HOME").unwrap_or_default();
    assert!(text.contains(&home), "{}", show(&out));
    // Without SSH_CLIENT, which would make bash read ~/.bashrc for every job there.
    let out = remote.run(&[
        "exec",
        "--",
        r#"echo "[${SSH_CLIENT-unset}] [${SSH_CONNECTION:+set}]""#,
    ]);
    assert!(stdout(&out).contains("[unset] [set]"), "{}", show(&out));
    // The far daemon holds it, in `<local session>@<local hostname>`.
    let listed = remote.far(&["jobs", "--all", "--json"]);
    assert_eq!(
        json(&listed)[0]["session"],
        remote.session(),
        "{}",
        show(&listed)
    );

    let out = remote.run(&[
        "exec",
        "--json",
        "--mode",
        "background",
        "--",
        "echo line-i19; sleep 1901",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let job = job_id(&out);
    let sleeper = wait_for_running("sleep 1901");
    let out = remote.run(&["wait", &job, "--until", "line-i19", "--timeout", "20"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let out = remote.run(&["check", &job, "--json"]);
    assert_eq!(json(&out)["state"], "running", "{}", show(&out));
    let out = remote.run(&["output", &job]);
    assert_eq!(stdout(&out), "line-i19\n", "{}", show(&out));
    let out = remote.run(&["wait", &job, "--timeout", "0.2"]);
    assert_eq!(out.status.code(), Some(124), "{}", show(&out));
    let out = remote.run(&["kill", &job, "--json"]);
    assert_eq!(json(&out)["state"], "killed", "{}", show(&out));
    assert!(
        wait_until(Duration::from_secs(10), || sleeper
            .iter()
            .all(|&pid| !alive(pid))),
        "kill left the sleep"
    );
}

/// Issue 19.
#[test]
fn a_dropped_connection_keeps_background_jobs_and_kills_foreground_ones() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let out = remote.run(&["exec", "--json", "--mode", "background", "--", "sleep 1902"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let job = job_id(&out);
    let background = wait_for_running("sleep 1902");

    let mut foreground = KillOnDrop(
        remote
            .bashc()
            .args(["exec", "--timeout", "300", "--", "sleep 1903"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let foreground_sleep = wait_for_running("sleep 1903");
    // While the call runs, the session has an owner there: the bridge.
    let sessions = remote.far(&["sessions", "--json"]);
    let owners = &json(&sessions)[0]["owners"];
    assert!(
        owners.as_array().is_some_and(|o| !o.is_empty()),
        "{}",
        show(&sessions)
    );

    // The connection drops: every ssh client of the server dies at once.
    let masters = remote.sshd.ssh_clients();
    assert!(!masters.is_empty(), "no ssh master to kill");
    for pid in masters {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    assert!(
        wait_until(Duration::from_secs(20), || foreground_sleep
            .iter()
            .all(|&pid| !alive(pid))),
        "the foreground job outlived its connection"
    );
    // The caller is not left waiting on a dead relay: it fails, naming the host.
    assert!(
        wait_until(Duration::from_secs(20), || foreground
            .0
            .try_wait()
            .unwrap()
            .is_some()),
        "the caller hangs after its connection dropped"
    );
    let mut said = String::new();
    std::io::Read::read_to_string(foreground.0.stderr.as_mut().unwrap(), &mut said).unwrap();
    assert!(
        said.contains(&format!("host {HOST}: the connection closed while j")),
        "{said}"
    );
    assert_eq!(foreground.0.wait().unwrap().code(), Some(255), "{said}");
    // The relay ended with its channel.
    assert!(
        wait_until(Duration::from_secs(20), || relay_pids(
            remote.near.runtime_dir()
        )
        .is_empty()),
        "the relay outlived its SSH channel"
    );
    assert!(
        background.iter().all(|&pid| alive(pid)),
        "the background job died with the connection"
    );
    let sessions = remote.far(&["sessions", "--json"]);
    assert!(
        json(&sessions)[0]["state"]
            .to_string()
            .contains("lingering"),
        "{}",
        show(&sessions)
    );

    // The next call, on a new connection, finds the job in the same session.
    let out = remote.run(&["check", &job, "--json"]);
    assert_eq!(json(&out)["state"], "running", "{}", show(&out));
    let out = remote.run(&["kill", &job, "--json"]);
    assert_eq!(json(&out)["state"], "killed", "{}", show(&out));
    assert!(
        wait_until(Duration::from_secs(10), || pids_running("sleep 1902")
            .is_empty()),
        "kill over a new connection left the job"
    );
}

/// Issue 19.
#[test]
fn jobs_all_lists_each_host_and_names_an_unreachable_one_and_a_missing_bashc() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let out = remote.run(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let out = remote
        .bashc()
        .args(["--host", "nohost-i19.invalid", "jobs", "--all"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let text = stdout(&out);
    assert!(text.starts_with("HOST "), "{}", show(&out));
    assert!(text.contains(&format!("{HOST}  j1")), "{}", show(&out));
    assert!(
        text.contains("unreachable: host nohost-i19.invalid: ssh could not reach"),
        "{}",
        show(&out)
    );

    // A host without bashc where the config says it is.
    std::fs::create_dir_all(remote.near.config_home().join("bashd")).unwrap();
    std::fs::write(
        remote.near.config_home().join("bashd/config.toml"),
        "[remote]\nbashc_path = \"/nonexistent-i19/bashc\"\n",
    )
    .unwrap();
    let out = remote.run(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "/nonexistent-i19/bashc is not on the PATH of {HOST}"
        )),
        "{}",
        show(&out)
    );
}

/// Issue 19.
#[tokio::test]
async fn mcp_over_host_answers_bash() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let local_dir = tempfile::Builder::new()
        .prefix("bashd-i19-mcp-local-")
        .tempdir()
        .unwrap();
    let mut command = tokio::process::Command::new(bin_path("bashc"));
    command
        .args(["mcp", "--host", HOST])
        .env(
            bashc::protocol::runtime::RUNTIME_DIR_ENV,
            remote.near.runtime_dir(),
        )
        .env("XDG_CONFIG_HOME", remote.near.config_home())
        .env(
            bashc::BRIDGE_COMMAND_ENV,
            remote
                .sshd
                .bridge_command(remote.far.runtime_dir(), &remote.far.config_home()),
        )
        .env_remove("BASHD_SESSION")
        // A directory of this machine: the far side must not be sent it.
        .current_dir(local_dir.path());
    let client = super::mcp::serve((), command).await;
    let result = super::mcp::call(
        &client,
        "bash",
        json!({"command": "echo mcp-i19 $BASHD_RUNTIME_DIR"}),
    )
    .await;
    let text = format!("{:?}", result.content);
    assert!(
        text.contains(&format!("mcp-i19 {}", remote.far.runtime_dir().display())),
        "{text}"
    );
    // Results and the instructions name the host: the agent may have a local bash too.
    assert!(text.contains(&format!("host: {HOST}")), "{text}");
    let instructions = client
        .peer_info()
        .and_then(|info| info.instructions.clone())
        .unwrap_or_default();
    assert!(
        instructions.contains(&format!("runs on the host {HOST}")),
        "{instructions}"
    );
    let result = super::mcp::call(&client, "bash_jobs", json!({})).await;
    let text = format!("{:?}", result.content);
    assert!(text.contains(&format!("host: {HOST}")), "{text}");

    // A command runs in the login directory there, and a relative `workdir` is
    // relative to it: the server's own directory is a path of this machine.
    let home = std::env::var("HOME").unwrap();
    let local = local_dir.path().display().to_string();
    for args in [
        json!({"command": "echo dir-i19 $PWD"}),
        json!({"command": "echo dir-i19 $PWD", "workdir": "."}),
    ] {
        let result = super::mcp::call(&client, "bash", args.clone()).await;
        let text = format!("{:?}", result.content);
        assert!(
            text.contains(&format!("dir-i19 {home}\\n")) && !text.contains(&local),
            "{args}: {text}"
        );
    }
    // A path is not checked here, where it means another directory: the daemon there
    // says, naming the argument as the tools do (issue 31).
    let result = super::mcp::call(
        &client,
        "bash",
        json!({"command": "true", "workdir": "/nonexistent-i19"}),
    )
    .await;
    let text = format!("{:?}", result.content);
    assert!(
        result.is_error == Some(true)
            && text.contains(
                "bad argument `workdir`: Working directory does not exist: /nonexistent-i19"
            ),
        "{text}"
    );
    let _ = client.cancel().await;
}

/// The children of `pid` now.
fn children(pid: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&child| parent_pid(child) == Some(pid))
        .collect()
}

/// Issue 19.
#[test]
fn calls_share_one_relay_and_a_killed_caller_stops_only_its_job() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let call = |sleep: &str| {
        KillOnDrop(
            remote
                .bashc()
                .args(["exec", "--timeout", "300", "--", sleep])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    // Calls that find no relay at once start one between them.
    let starters: Vec<_> = (0..3)
        .map(|_| {
            remote
                .bashc()
                .args(["exec", "--", "true"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for starter in starters {
        let out = starter.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    }
    assert_eq!(relay_pids(remote.near.runtime_dir()).len(), 1);
    let mut first = call("sleep 1904");
    let first_sleep = wait_for_running("sleep 1904");
    let second = call("sleep 1905");
    let second_sleep = wait_for_running("sleep 1905");
    // One relay here, one bridge there: both calls ride one SSH channel.
    let relays = relay_pids(remote.near.runtime_dir());
    assert_eq!(relays.len(), 1, "relays: {relays:?}");
    let bridges = bridge_pids(remote.far.runtime_dir());
    assert_eq!(bridges.len(), 1, "bridges: {bridges:?}");
    // status names the host and the relay, so a user can make the next call reconnect.
    let out = remote.run(&["status"]);
    assert!(
        stdout(&out).contains(&format!(
            "host: {HOST}, through the relay pid {} (",
            relays[0]
        )),
        "{}",
        show(&out)
    );

    // Killing one caller closes its connection only.
    first.kill();
    assert!(
        wait_until(Duration::from_secs(20), || first_sleep
            .iter()
            .all(|&pid| !alive(pid))),
        "the killed caller's job outlived it"
    );
    assert!(
        second_sleep.iter().all(|&pid| alive(pid)),
        "the other caller's job died too"
    );
    assert_eq!(relay_pids(remote.near.runtime_dir()), relays);
    let out = remote.run(&["jobs", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(bridge_pids(remote.far.runtime_dir()), bridges);
    drop(second);
    assert!(
        wait_until(Duration::from_secs(20), || second_sleep
            .iter()
            .all(|&pid| !alive(pid))),
        "the second caller's job outlived it"
    );
}

/// Issue 19.
#[test]
fn an_idle_relay_ends_and_leaves_no_process() {
    let Some(remote) = Remote::start() else {
        return;
    };
    remote.near.write_config("[remote]\nrelay_idle_secs = 5\n");
    let out = remote.run(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let relays = relay_pids(remote.near.runtime_dir());
    assert_eq!(relays.len(), 1, "relays: {relays:?}");
    let relay = relays[0];
    let ssh = children(relay);
    assert!(!ssh.is_empty(), "the relay has no ssh");
    let bridges = bridge_pids(remote.far.runtime_dir());
    assert_eq!(bridges.len(), 1, "bridges: {bridges:?}");
    let socket_dir = remote.near.runtime_dir().join("remote");
    let sockets = || {
        std::fs::read_dir(&socket_dir)
            .unwrap()
            .filter(|entry| {
                entry
                    .as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".sock")
            })
            .count()
    };
    assert_eq!(sockets(), 1);

    // Nobody calls: the relay goes, with its ssh, and the bridge there.
    let gone = |pids: &[u32]| pids.iter().all(|&pid| !alive(pid));
    assert!(
        wait_until(Duration::from_secs(30), || gone(&[relay])),
        "the idle relay stayed"
    );
    assert!(
        wait_until(Duration::from_secs(20), || gone(&ssh) && gone(&bridges)),
        "the relay left its ssh {ssh:?} or the bridge {bridges:?}"
    );
    assert_eq!(sockets(), 0, "the relay left its socket");

    // The next call starts a new one.
    let out = remote.run(&["exec", "--", "echo again-i19"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(stdout(&out).contains("again-i19"), "{}", show(&out));
    let new = relay_pids(remote.near.runtime_dir());
    assert!(new.len() == 1 && new[0] != relay, "relays: {new:?}");

    // A relay killed outright leaves nothing either: its ssh sees its stdin close, and
    // the bridge there its channel.
    let ssh = children(new[0]);
    let bridges = bridge_pids(remote.far.runtime_dir());
    assert!(!ssh.is_empty() && bridges.len() == 1, "{ssh:?} {bridges:?}");
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(new[0] as i32).unwrap(),
        rustix::process::Signal::KILL,
    );
    assert!(
        wait_until(Duration::from_secs(20), || gone(&ssh) && gone(&bridges)),
        "a killed relay left its ssh {ssh:?} or the bridge {bridges:?}"
    );
    // Its socket is left, stale: the next call starts a relay over it.
    let out = remote.run(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

/// Issue 19.
#[test]
fn a_caller_that_stops_reading_holds_up_no_other_call() {
    let Some(remote) = Remote::start() else {
        return;
    };
    // About 30 MB of lines over some seconds, far more than a window and the socket
    // buffers between the job and a reader.
    let out = remote.run(&[
        "exec",
        "--json",
        "--mode",
        "background",
        "--",
        "for i in $(seq 1 300); do seq 1 20000; sleep 0.05; done; echo done-i19; sleep 1906",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let job = job_id(&out);
    // A follower whose stdout nobody reads: it stops reading its connection.
    let mut stuck = KillOnDrop(
        remote
            .bashc()
            .args(["follow", &job])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    for round in 0..6 {
        let mut call = KillOnDrop(
            remote
                .bashc()
                .args(["exec", "--", "echo ok-i19"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        assert!(
            wait_until(Duration::from_secs(20), || call
                .0
                .try_wait()
                .unwrap()
                .is_some()),
            "round {round}: a call waited behind the follower that does not read"
        );
        let mut said = String::new();
        std::io::Read::read_to_string(call.0.stdout.as_mut().unwrap(), &mut said).unwrap();
        assert!(said.contains("ok-i19"), "round {round}: {said}");
        std::thread::sleep(Duration::from_millis(500));
    }
    // The follower was held up, not cut off: read now, it gets what the job prints
    // last, seconds later, past all the output the pipe, the relay's window, the
    // sockets and the daemon's backlog between could have held.
    let mut output = stuck.0.stdout.take().unwrap();
    let (read_tx, read_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut chunk = vec![0u8; 64 * 1024];
        let mut tail = Vec::new();
        let mut total = 0;
        loop {
            match std::io::Read::read(&mut output, &mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    total += n;
                    tail.extend_from_slice(&chunk[..n]);
                    if tail.windows(8).any(|w| w == b"done-i19") {
                        let _ = read_tx.send(Ok(total));
                        // Read on: the follower must not end of a closed pipe.
                        let _ = std::io::copy(&mut output, &mut std::io::sink());
                        return;
                    }
                    let keep = tail.len().saturating_sub(8);
                    tail.drain(..keep);
                }
            }
        }
        let _ = read_tx.send(Err(total));
    });
    let read = read_rx.recv_timeout(Duration::from_secs(120));
    assert!(
        matches!(read, Ok(Ok(_))),
        "the follower did not get the job's last line (Err: bytes read before it ended): {read:?}"
    );
    assert!(stuck.0.try_wait().unwrap().is_none(), "the follower ended");
    stuck.kill();
    let out = remote.run(&["kill", &job, "--json"]);
    assert_eq!(json(&out)["state"], "killed", "{}", show(&out));
}

/// The relay's words for a far side that speaks another relay version, or none: a
/// stand-in bridge command, no sshd needed.
/// (Issue 19.)
#[test]
fn a_bridge_of_another_version_is_named_with_the_side_to_upgrade() {
    let near = Daemon::unstarted();
    let call = |bridge: &str| {
        near.bashc()
            .env(bashc::BRIDGE_COMMAND_ENV, bridge)
            .args(["--host", "fake-i19", "exec", "--", "true"])
            .output()
            .unwrap()
    };
    // A relay Hello of version 99 from "bashc 9.9 on far-i19".
    let newer = call(r"printf '\000\000\000\000\143\000\000\000\024bashc 9.9 on far-i19'");
    assert_eq!(newer.status.code(), Some(255), "{}", show(&newer));
    let said = String::from_utf8_lossy(&newer.stderr);
    assert!(
        said.contains("host fake-i19: bashc 9.9 on far-i19 speaks relay version 99, but bashc")
            && said.contains("upgrade bashc on this machine"),
        "{said}"
    );
    // A bashc from before relays: its bridge takes the magic for a bad frame.
    let older = call(
        "cat >/dev/null & echo 'bashc: bad frame from the caller: frame too long' >&2; exit 1",
    );
    assert_eq!(older.status.code(), Some(255), "{}", show(&older));
    let said = String::from_utf8_lossy(&older.stderr);
    assert!(
        said.contains("host fake-i19: the bashc on fake-i19 has no relay mode")
            && said.contains("upgrade it there"),
        "{said}"
    );
    // Neither left a relay behind.
    assert!(
        wait_until(Duration::from_secs(10), || relay_pids(near.runtime_dir())
            .is_empty()),
        "a relay that never got ready stayed"
    );
}

/// `ssh HOST bashc bridge` by hand, as a bashc from before relays runs it: the bridge
/// serves that one caller, with no relay between.
/// (Issue 19.)
#[tokio::test]
async fn a_bridge_still_serves_a_single_caller_without_a_relay() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let command = remote
        .sshd
        .bridge_command(remote.far.runtime_dir(), &remote.far.config_home())
        .replace("{host}", HOST)
        .replace("{control}", "none")
        .replace("{bashc}", "bashc");
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = bashc::Client::handshake(stdout, stdin).await.unwrap();
    let status = client.status().await.unwrap();
    assert_eq!(
        Path::new(&status.runtime_dir),
        remote.far.runtime_dir(),
        "{status:?}"
    );
    assert!(relay_pids(remote.near.runtime_dir()).is_empty());
    drop(client);
    // Its caller gone, the bridge ends, and ssh with it.
    let ended = tokio::time::timeout(Duration::from_secs(20), child.wait()).await;
    assert!(
        matches!(ended, Ok(Ok(status)) if status.success()),
        "the bridge did not end with its caller: {ended:?}"
    );
}

/// A long-lived `bashc mcp --host` whose bashc was replaced on disk (`cargo install`)
/// still starts a relay when its own has gone: the new bashc at the same path.
/// (Issue 19.)
#[tokio::test]
async fn mcp_whose_bashc_was_replaced_still_starts_a_relay() {
    let Some(remote) = Remote::start() else {
        return;
    };
    // A bashc of its own, in the same file system as the build's, to replace.
    let built = bin_path("bashc");
    let bin = tempfile::Builder::new()
        .prefix("i19-replaced-")
        .tempdir_in(built.parent().unwrap())
        .unwrap();
    let own = bin.path().join("bashc");
    let install = || {
        std::fs::hard_link(&built, &own)
            .or_else(|_| std::fs::copy(&built, &own).map(drop))
            .unwrap()
    };
    install();
    let mut command = tokio::process::Command::new(&own);
    command
        .args(["mcp", "--host", HOST])
        .env(
            bashc::protocol::runtime::RUNTIME_DIR_ENV,
            remote.near.runtime_dir(),
        )
        .env("XDG_CONFIG_HOME", remote.near.config_home())
        .env(
            bashc::BRIDGE_COMMAND_ENV,
            remote
                .sshd
                .bridge_command(remote.far.runtime_dir(), &remote.far.config_home()),
        )
        // No bashc on the PATH to fall back on.
        .env("PATH", "/usr/bin:/bin")
        .env_remove("BASHD_SESSION");
    let client = super::mcp::serve((), command).await;
    let result = super::mcp::call(&client, "bash", json!({"command": "echo one-i19"})).await;
    assert!(format!("{:?}", result.content).contains("one-i19"));

    // Replaced, and its relay gone (idle, or its link dropped).
    std::fs::remove_file(&own).unwrap();
    install();
    let relays = relay_pids(remote.near.runtime_dir());
    assert_eq!(relays.len(), 1, "relays: {relays:?}");
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(relays[0] as i32).unwrap(),
        rustix::process::Signal::KILL,
    );
    assert!(wait_until(Duration::from_secs(10), || !alive(relays[0])));
    // The call that finds its connection closed may fail; the next starts a relay.
    let mut said = Vec::new();
    for _ in 0..2 {
        let result = super::mcp::call(&client, "bash", json!({"command": "echo two-i19"})).await;
        said.push(format!("{:?}", result.content));
        if result.is_error != Some(true) {
            break;
        }
    }
    assert!(said.last().unwrap().contains("two-i19"), "{said:?}");
    let _ = client.cancel().await;
}

/// A connection its relay resets before the handshake (one in the backlog of a relay
/// that was ending) is tried again, and the call starts a new relay.
/// (Issue 19.)
#[test]
fn a_connection_reset_before_the_handshake_is_tried_again() {
    use std::io::Read;
    let Some(remote) = Remote::start() else {
        return;
    };
    let out = remote.run(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let relays = relay_pids(remote.near.runtime_dir());
    assert_eq!(relays.len(), 1, "relays: {relays:?}");
    let socket = std::fs::read_dir(remote.near.runtime_dir().join("remote"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|e| e == "sock"))
        .expect("the relay's socket");
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(relays[0] as i32).unwrap(),
        rustix::process::Signal::KILL,
    );
    assert!(wait_until(Duration::from_secs(10), || !alive(relays[0])));
    // A relay that takes one connection, then goes with its Hello unread: the caller
    // reads a reset, not an end.
    std::fs::remove_file(&socket).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let ending = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut first = [0u8; 1];
        stream.read_exact(&mut first).unwrap();
        std::fs::remove_file(&socket).unwrap();
    });
    let out = remote.run(&["exec", "--", "echo again-i19"]);
    ending.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(stdout(&out).contains("again-i19"), "{}", show(&out));
}

/// The least relay idle time the file takes (5 s; below it bashc refuses the file as
/// bashd does, issue 31) is enough: the relay is not gone before its first call
/// connects, nor right after each call.
#[test]
fn a_relay_idle_time_at_the_floor_keeps_the_relay_between_calls() {
    let Some(remote) = Remote::start() else {
        return;
    };
    remote.near.write_config("[remote]\nrelay_idle_secs = 5\n");
    let mut relays = Vec::new();
    for round in 0..3 {
        let out = remote.run(&["exec", "--", "echo idle-i19"]);
        assert_eq!(out.status.code(), Some(0), "round {round}: {}", show(&out));
        assert!(stdout(&out).contains("idle-i19"), "{}", show(&out));
        relays.push(relay_pids(remote.near.runtime_dir()));
    }
    assert!(
        relays[0].len() == 1 && relays.iter().all(|r| *r == relays[0]),
        "a relay for each call: {relays:?}"
    );
}

/// A call that starts a relay and dies before the relay is ready leaves the start to
/// that relay: the next call waits for it instead of starting a second relay (whose
/// socket would replace the first's).
/// (Issue 19.)
#[test]
fn a_starter_that_dies_before_ready_leaves_one_relay() {
    let Some(remote) = Remote::start() else {
        return;
    };
    // The bridge command waits at a gate the test opens.
    let dir = tempfile::Builder::new()
        .prefix("bashd-i19-gate-")
        .tempdir()
        .unwrap();
    let gate = dir.path().join("gate");
    let made = Command::new("mkfifo").arg(&gate).status().unwrap();
    assert!(made.success());
    let script = dir.path().join("gated-bridge");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nread go < '{}'\nexec \"$@\"\n", gate.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let call = || {
        let mut command = remote.bashc();
        command
            .env(
                bashc::BRIDGE_COMMAND_ENV,
                format!(
                    "{} {}",
                    script.display(),
                    remote
                        .sshd
                        .bridge_command(remote.far.runtime_dir(), &remote.far.config_home())
                ),
            )
            .args(["exec", "--", "echo gated-i19"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        KillOnDrop(command.spawn().unwrap())
    };
    let mut first = call();
    assert!(
        wait_until(Duration::from_secs(20), || relay_pids(
            remote.near.runtime_dir()
        )
        .len()
            == 1),
        "no relay started"
    );
    first.kill();
    let _ = first.0.wait();
    let mut second = call();
    // It waits for the relay being started, and starts none of its own.
    let doubled = wait_until(Duration::from_secs(3), || {
        relay_pids(remote.near.runtime_dir()).len() > 1
    });
    // Open the gate (for both, if there are two); read-write, so opening it waits for
    // no reader.
    let mut opener = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&gate)
        .unwrap();
    std::io::Write::write_all(&mut opener, b"go\ngo\n").unwrap();
    assert!(!doubled, "a second relay started");
    assert!(
        wait_until(Duration::from_secs(30), || second
            .0
            .try_wait()
            .unwrap()
            .is_some()),
        "the second call hangs"
    );
    let mut said = String::new();
    std::io::Read::read_to_string(second.0.stdout.as_mut().unwrap(), &mut said).unwrap();
    std::io::Read::read_to_string(second.0.stderr.as_mut().unwrap(), &mut said).unwrap();
    assert_eq!(second.0.wait().unwrap().code(), Some(0), "{said}");
    assert!(said.contains("gated-i19"), "{said}");
    assert_eq!(relay_pids(remote.near.runtime_dir()).len(), 1);
    drop(opener);
}

/// A login that prints to stdout (a chatty ~/.bashrc there) garbles the channel
/// before the bridge speaks: the error says so, and what it printed.
/// (Issue 19.)
#[test]
fn a_login_that_prints_to_stdout_is_named() {
    let near = Daemon::unstarted();
    let out = near
        .bashc()
        .env(
            bashc::BRIDGE_COMMAND_ENV,
            "echo 'Welcome to far-i19, have a nice day'; cat >/dev/null",
        )
        .args(["--host", "fake-i19", "exec", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("host fake-i19: the login on fake-i19 printed to stdout before `bashc bridge` ran (\"Welcome to far-i19")
            && said.contains("make ~/.bashrc (and what it runs) quiet for non-interactive shells"),
        "{said}"
    );
    assert!(
        wait_until(Duration::from_secs(10), || relay_pids(near.runtime_dir())
            .is_empty()),
        "a relay that never got ready stayed"
    );
}

/// bashd there dying under a call while the link stays up is said as bashd there
/// stopping, with the command that gets the job's output, not as a lost connection.
/// (Issue 19.)
#[test]
fn a_far_bashd_that_dies_mid_call_is_named() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let mut call = KillOnDrop(
        remote
            .bashc()
            .args([
                "exec",
                "--timeout",
                "300",
                "--",
                "echo started-i19; sleep 1951",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let sleep = wait_for_running("sleep 1951");
    let daemons = remote.far.daemons();
    assert_eq!(daemons.len(), 1, "far daemons: {daemons:?}");
    let _ = rustix::process::kill_process(
        rustix::process::Pid::from_raw(daemons[0] as i32).unwrap(),
        rustix::process::Signal::KILL,
    );
    let ended = wait_until(Duration::from_secs(20), || {
        call.0.try_wait().unwrap().is_some()
    });
    for pid in sleep {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    assert!(ended, "the call hangs after bashd there died");
    let mut said = String::new();
    std::io::Read::read_to_string(call.0.stderr.as_mut().unwrap(), &mut said).unwrap();
    assert!(
        said.contains(&format!(
            "host {HOST}: bashd on {HOST} stopped while j1 ran"
        )) && said.contains(&format!("bashc --host {HOST} output j1")),
        "{said}"
    );
    assert_eq!(call.0.wait().unwrap().code(), Some(255), "{said}");
    // The relay is still up, and the next call starts bashd there again.
    let out = remote.run(&["exec", "--", "echo back-i19"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

/// Issue 33.1 and 33.2 over `--host`: `output`, `screen` and `resize` name no process
/// of this machine as an owner there, so the far session lingers once the connection
/// drops; a job of another session is refused there as here, and reached with
/// `--any-session`.
#[test]
fn requests_over_host_name_no_local_owner_and_keep_the_session_rule() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let out = remote.run(&[
        "exec",
        "--json",
        "--mode",
        "background",
        "--pty",
        "--",
        "echo hi-i33; sleep 1933",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let job = job_id(&out);
    let sleeper = wait_for_running("sleep 1933");
    for args in [
        vec!["output", &job],
        vec!["screen", &job],
        vec!["resize", &job, "100x30"],
    ] {
        let out = remote.run(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", show(&out));
    }
    let sessions = json(&remote.far(&["sessions", "--json"]));
    let owners: Vec<u64> = sessions[0]["owners"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|pid| pid.as_u64())
        .collect();
    assert!(
        !owners.contains(&u64::from(std::process::id())),
        "a pid of this machine owns the far session: {sessions}"
    );

    // The session rule holds there: another session's client is refused, and the
    // way across is said and works.
    for args in [
        vec!["wait", &job, "--until", "hi", "--timeout", "5"],
        vec!["screen", &job],
        vec!["send", &job, "--keys", "x"],
    ] {
        let out = remote.run(&[&args[..], &["--session", "other-i33"]].concat());
        assert_eq!(out.status.code(), Some(255), "{args:?}: {}", show(&out));
        assert!(
            super::stderr(&out).contains("not of this session (other-i33)"),
            "{args:?}: {}",
            show(&out)
        );
    }
    // A terminal job's line is on its screen, not in its stdout: it goes quiet instead.
    let out = remote.run(&[
        "wait",
        &job,
        "--idle",
        "0.3",
        "--timeout",
        "20",
        "--session",
        "other-i33",
        "--any-session",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));

    // The connection drops: with no owner left there, the session lingers.
    for pid in remote.sshd.ssh_clients() {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    assert!(
        wait_until(Duration::from_secs(30), || {
            let sessions = json(&remote.far(&["sessions", "--json"]));
            sessions
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["session"] == remote.session().as_str() && s["state"] == "lingering")
        }),
        "{}",
        show(&remote.far(&["sessions", "--json"]))
    );
    assert!(sleeper.iter().all(|&pid| alive(pid)));
}

/// Issue 42: `bashc --host H policy check` judges the command where `exec` would run it
/// there: in the `--workdir` given, and without one in the login directory (the local
/// current directory means nothing on the far side), as the bridge resolves an `Exec`'s.
#[test]
fn policy_check_over_host_judges_in_the_far_workdir() {
    let Some(remote) = Remote::start() else {
        return;
    };
    let ws = remote.near.scratch().join("ws-i42");
    let d1 = ws.join("d1");
    std::fs::create_dir_all(&d1).unwrap();
    let stage_ws = format!("git add {}", ws.display());
    let check = |workdir: Option<&std::path::Path>| {
        let mut command = remote.bashc();
        command.current_dir(&d1).args(["policy", "check"]);
        if let Some(dir) = workdir {
            command.arg("--workdir").arg(dir);
        }
        command
            .args(["--", &stage_ws])
            .output()
            .expect("cannot run bashc")
    };
    let out = check(Some(&d1));
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stdout(&out).starts_with("permission denied: git-add-blind: "),
        "{}",
        show(&out)
    );
    // The positive control: judged in the far login directory, not this side's d1.
    let out = check(None);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(stdout(&out), "allowed\n", "{}", show(&out));
}

//! bashd under systemd (issue 6): the unit files pass `systemd-analyze verify`, a
//! socket-activated daemon serves the socket it inherits, readiness and stopping
//! are told to `NOTIFY_SOCKET`, and logs go to the journal only when stderr is it.
//!
//! The machine runs no systemd; its tools check the units and activate the socket.
//! `.ci/run` installs them where they are missing, so in CI a missing tool fails the
//! test; elsewhere the test says it was skipped.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bashc::protocol::runtime;
use bashd_tests::{Daemon, bin_path};
use rustix::process::{Pid, Signal};

use crate::{json, show};

/// The path of the systemd tool `name`; `None` (skip) where it is missing outside CI.
fn systemd_tool(name: &str) -> Option<PathBuf> {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is missing: install systemd (apt-get install systemd), as .ci/run does"
        );
        eprintln!("skipped: {name} is not installed (apt-get install systemd)");
    }
    found
}

fn units_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd")
}

#[test]
fn both_units_pass_systemd_analyze_verify() {
    let Some(analyze) = systemd_tool("systemd-analyze") else {
        return;
    };
    // As a user would have them: bashd installed by cargo into ~/.cargo/bin.
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    let run = scratch.path().join("run");
    fs::create_dir_all(home.join(".cargo/bin")).unwrap();
    fs::create_dir_all(&run).unwrap();
    fs::set_permissions(&run, fs::Permissions::from_mode(0o700)).unwrap();
    symlink(bin_path("bashd"), home.join(".cargo/bin/bashd")).unwrap();
    let units = ["bashd.service", "bashd.socket"].map(|unit| units_dir().join(unit));

    let out = Command::new(analyze)
        .args(["--user", "verify"])
        .args(&units)
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &run)
        .output()
        .unwrap();
    // verify exits 0 on some warnings, so any word from it is a failure.
    assert!(
        out.status.success() && out.stderr.is_empty() && out.stdout.is_empty(),
        "{}",
        show(&out)
    );
    let service = fs::read_to_string(&units[0]).unwrap();
    for line in [
        "Type=notify",
        "KillMode=control-group",
        "Delegate=yes",
        "Restart=on-failure",
    ] {
        assert!(
            service.lines().any(|l| l == line),
            "bashd.service lacks {line}"
        );
    }
    let socket = fs::read_to_string(&units[1]).unwrap();
    for line in ["ListenStream=%t/bashd/bashd.sock", "SocketMode=0600"] {
        assert!(
            socket.lines().any(|l| l == line),
            "bashd.socket lacks {line}"
        );
    }
}

#[test]
fn a_socket_activated_daemon_serves_the_socket_it_inherits() {
    let Some(activate) = systemd_tool("systemd-socket-activate") else {
        return;
    };
    let mut daemon = Daemon::unstarted();
    let dir = daemon.make_runtime_dir();
    let socket = runtime::socket_path(&dir);
    let mut command = Command::new(activate);
    command
        .arg("--listen")
        .arg(&socket)
        .arg(format!(
            "--setenv={}={}",
            runtime::RUNTIME_DIR_ENV,
            dir.display()
        ))
        .arg(format!(
            "--setenv=XDG_CONFIG_HOME={}",
            daemon.config_home().display()
        ))
        .arg("--setenv=BASHD_LOG=info")
        .arg(bin_path("bashd"));
    daemon.start_with(command);

    // The first connection starts bashd, which serves it through the inherited fd.
    let out = daemon.run_bashc(&["exec", "--json", "--", "echo activated; ls /proc/self/fd"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    // A job holds its three standard streams and the fd ls opens to list them: not
    // the daemon's listening socket.
    assert_eq!(
        json(&out)["stdout"]["text"],
        "activated\n0\n1\n2\n3\n",
        "{}",
        show(&out)
    );
    assert!(
        daemon.log().contains("serving the socket systemd passed"),
        "{}",
        daemon.log()
    );
    // The activator execs bashd in its own process.
    let comm = fs::read_to_string(format!("/proc/{}/comm", daemon.pid())).unwrap();
    assert_eq!(comm.trim(), "bashd");

    rustix::process::kill_process(Pid::from_raw(daemon.pid() as i32).unwrap(), Signal::TERM)
        .unwrap();
    assert_eq!(daemon.child_mut().wait().unwrap().code(), Some(0));
    // The socket is systemd's: it stays for the next activation.
    assert!(socket.exists(), "bashd removed the socket systemd owns");
    assert!(!runtime::lock_path(&dir).exists());
}

#[test]
fn readiness_and_stopping_are_told_to_the_notify_socket() {
    let mut daemon = Daemon::unstarted();
    let notify_path = daemon.scratch().join("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut command = daemon.bashd_command();
    command.env("NOTIFY_SOCKET", &notify_path);
    daemon.start_with(command);

    let mut message = [0u8; 512];
    let n = notify.recv(&mut message).expect("no readiness message");
    assert_eq!(String::from_utf8_lossy(&message[..n]), "READY=1\n");
    // Ready means serving.
    let out = daemon.run_bashc(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));

    rustix::process::kill_process(Pid::from_raw(daemon.pid() as i32).unwrap(), Signal::TERM)
        .unwrap();
    let n = notify.recv(&mut message).expect("no stopping message");
    assert_eq!(String::from_utf8_lossy(&message[..n]), "STOPPING=1\n");
    assert_eq!(daemon.child_mut().wait().unwrap().code(), Some(0));
}

/// A daemon started by a process that runs under systemd inherits `JOURNAL_STREAM`
/// without the stream; it must keep logging to its stderr.
#[test]
fn a_journal_stream_that_is_not_stderr_leaves_logs_on_stderr() {
    let mut daemon = Daemon::unstarted();
    let mut command = daemon.bashd_command();
    command.env("JOURNAL_STREAM", "8:12345");
    daemon.start_with(command);
    let out = daemon.run_bashc(&["exec", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(daemon.log().contains("ready"), "{}", daemon.log());
}

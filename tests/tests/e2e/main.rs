//! End-to-end tests: each starts a real `bashd` on a temporary runtime dir and drives
//! it through the `bashc` binary, the client library or raw frames. What is alive
//! afterwards is read from /proc.

mod abuse;
mod ages;
mod allow_list;
mod asks;
mod boundary;
mod chaos;
mod cli;
mod config;
mod confined_default;
mod contain;
mod crash;
mod cut_output;
mod daemon_died;
mod daemon_lifecycle;
mod deny_read;
mod disk;
mod docs;
mod doors;
mod doors42;
mod exec;
mod fuzz;
mod inbox;
mod jobs;
mod library;
mod live;
mod manners;
mod mcp;
mod mcp_calls;
mod mcp_clients;
mod mcp_stdio;
mod output;
mod policy;
mod protocol;
mod proxy;
mod remote;
mod roots;
mod runtime_dir;
mod sandbox;
mod sandbox_hints;
mod session_network;
mod spare;
mod staged;
mod systemd;
mod terminal;
mod tool_sources;
mod top;
mod trust;

use std::process::Stdio;
use std::time::Duration;

pub use bashd_tests::output::{json, show, stderr, stdout};
use bashd_tests::{Daemon, pids_running, wait_for_running, wait_until};

/// Runs `command` through `bashc exec --timeout 1 --on-timeout kill` once every one of
/// `sleeps` (exact command lines) runs, and asserts that the call times out (124,
/// `timed_out`) and that none of them outlives it by more than 10 s.
pub fn assert_timeout_kills(command: &str, sleeps: &[&str]) {
    let daemon = Daemon::start();
    let child = daemon
        .bashc()
        .args([
            "exec",
            "--json",
            "--timeout",
            "1",
            "--on-timeout",
            "kill",
            "--",
            command,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    for sleep in sleeps {
        wait_for_running(sleep);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(124), "{}", show(&out));
    assert_eq!(json(&out)["state"], "timed_out");
    for sleep in sleeps {
        assert!(
            wait_until(Duration::from_secs(10), || pids_running(sleep).is_empty()),
            "`{sleep}` outlived its job's timeout"
        );
    }
}

//! `[sandbox] allow_hosts` (issue 43) as a person meets it before any job uses it:
//! a malformed entry refused at its line by bashd and bashc alike, the list printed by
//! `bashd --check-config`, and `bashc status` showing the mode, the list in force
//! (a reload's) and the proxy. The proxy itself is tested on loopback sockets in
//! the daemon crate (`daemon/src/network/proxy/tests.rs`).

use std::time::Duration;

use bashd_tests::{Daemon, wait_until};
use rustix::process::{Pid, Signal};

use crate::{show, stderr, stdout};

fn status(daemon: &Daemon) -> String {
    let out = daemon.bashc().arg("status").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    stdout(&out)
}

#[test]
fn a_malformed_allow_hosts_entry_is_refused_at_its_line_by_bashd_and_bashc() {
    let daemon = Daemon::unstarted();
    daemon.write_config(
        "[sandbox]\nallow_hosts = [\n  \"example.org\",\n  \"example.org:99999\",\n]\n",
    );
    let config = daemon.config_home().join("bashd/config.toml");
    let expected = format!(
        "{}:4: sandbox.allow_hosts: \"example.org:99999\" is not a host entry (the port \"99999\" is not a number from 1 to 65535)",
        config.display()
    );
    let out = daemon
        .bashd_command()
        .arg("--check-config")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(stderr(&out).contains(&expected), "{}", show(&out));
    // bashc reads the same file through the same types, and refuses it in the same words.
    let out = daemon
        .bashc()
        .env(bashc::BRIDGE_COMMAND_ENV, "exit 3")
        .args(["--host", "nowhere.invalid", "exec", "--", "true"])
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
    assert!(stderr(&out).contains(&expected), "{}", show(&out));

    // Positive control: each form the issue names is taken, and printed.
    daemon.write_config(
        "[sandbox]\nallow_hosts = [\"example.org\", \"*.example.org\", \"example.org:8443\", \"192.0.2.7\", \"192.0.2.7:8080\", \"[2001:db8::1]\"]\n",
    );
    let out = daemon
        .bashd_command()
        .arg("--check-config")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        stdout(&out).contains(
            "allow_hosts = [\"example.org\", \"*.example.org\", \"example.org:8443\", \"192.0.2.7\", \"192.0.2.7:8080\", \"[2001:db8::1]\"]  # default: []"
        ),
        "{}",
        show(&out)
    );
}

#[test]
fn status_shows_the_mode_the_allow_list_in_force_and_the_proxy() {
    let daemon = Daemon::start_with_config(
        "[sandbox]\nnetwork = \"allow-list\"\nallow_hosts = [\"example.org\", \"*.example.org:8443\"]\n",
    );
    let config = daemon.config_home().join("bashd/config.toml");
    let text = status(&daemon);
    assert!(text.contains("network: allow-list by default\n"), "{text}");
    assert!(
        text.contains("  allow-list: example.org, *.example.org:8443\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "    from [sandbox] allow_hosts in {}\n",
            config.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("  proxy: in bashd, 0 sessions served, 0 connections open (at most 1024, 256 per session), 0 refused, 0 over the limit\n"),
        "{text}"
    );
    // A reload puts the new list in force.
    daemon.write_config("[sandbox]\nallow_hosts = [\"192.0.2.7\"]\n");
    rustix::process::kill_process(Pid::from_raw(daemon.pid() as i32).unwrap(), Signal::HUP)
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || status(&daemon)
            .contains("  allow-list: 192.0.2.7\n")),
        "{}",
        status(&daemon)
    );
    // Back to each front end's own network (issue 44): on for the command line, the
    // allow-list for an agent.
    let text = status(&daemon);
    assert!(
        text.contains("network: by front end, as above\n")
            && text.contains("  bashc (command line): off, network on by default")
            && text
                .contains("  bashc mcp (agents): workspace-write, network allow-list by default"),
        "{text}"
    );
}

//! The config file as `bashd` and `bashc` both read it (issue 31): one set of types, so
//! one answer about one file.

use std::time::Duration;

use bashd_tests::sshd::relay_pids;
use bashd_tests::{Daemon, wait_until};

use crate::{show, stderr, stdout};

/// `bashc --host nowhere.invalid exec -- true`, reaching the host through a bridge
/// command that fails at once, so that nothing waits on a network.
fn bashc_to_another_host(daemon: &Daemon) -> std::process::Output {
    daemon
        .bashc()
        .env(bashc::BRIDGE_COMMAND_ENV, "exit 3")
        .args(["--host", "nowhere.invalid", "exec", "--", "true"])
        .output()
        .unwrap()
}

/// `bashd --check-config` on the daemon's config file.
fn check_config(daemon: &Daemon) -> std::process::Output {
    daemon
        .bashd_command()
        .arg("--check-config")
        .output()
        .unwrap()
}

/// `bashd --check-config` and bashc (which reads the file before it reaches a host)
/// both refuse the config file with `expected`, and bashc starts no relay.
fn assert_both_refuse(daemon: &Daemon, expected: &str) {
    let out = check_config(daemon);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(stderr(&out).contains(expected), "{}", show(&out));
    let out = bashc_to_another_host(daemon);
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
    assert!(stderr(&out).contains(expected), "{}", show(&out));
    assert!(relay_pids(daemon.runtime_dir()).is_empty());
}

/// bashc takes the config file and goes on to the host, which its bridge command cannot
/// reach: it fails naming the host, not `not_said` from the file, and its relay ends.
fn assert_bashc_goes_on(daemon: &Daemon, not_said: &str) {
    let out = bashc_to_another_host(daemon);
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        stderr(&out).contains("nowhere.invalid") && !stderr(&out).contains(not_said),
        "{}",
        show(&out)
    );
    assert!(
        wait_until(Duration::from_secs(20), || relay_pids(daemon.runtime_dir())
            .is_empty()),
        "a relay outlived its failed bridge"
    );
}

/// bashd refused `[remote] relay_idle_secs` below 5 while bashc took it as 5: the same
/// file was broken for one and fine for the other. Both read it through one type now.
/// (Issue 31.)
#[test]
fn a_relay_idle_time_below_five_gets_one_answer_from_bashd_and_bashc() {
    let daemon = Daemon::unstarted();
    daemon.write_config("[remote]\nbashc_path = \"/opt/bashc\"\nrelay_idle_secs = 3\n");
    let config = daemon.config_home().join("bashd/config.toml");
    let expected = format!(
        "{}:3: remote.relay_idle_secs must be a whole number from 5 to 86400",
        config.display()
    );
    // bashc reads [remote] before it reaches the host, and refuses the file in the
    // daemon's words, starting no relay.
    assert_both_refuse(&daemon, &expected);

    // Positive control: at the floor, both take the file, and bashc goes on to the
    // host, which its bridge command cannot reach.
    daemon.write_config("[remote]\nbashc_path = \"/opt/bashc\"\nrelay_idle_secs = 5\n");
    let out = check_config(&daemon);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        stdout(&out).contains("relay_idle_secs = 5  # default: 600\n"),
        "{}",
        show(&out)
    );
    assert_bashc_goes_on(&daemon, "relay_idle_secs");
}

/// Issue 31: an unknown key is refused by name, with the keys the section has, by
/// `bashd` and by `bashc` alike.
#[test]
fn an_unknown_key_names_the_keys_its_section_has() {
    let daemon = Daemon::unstarted();
    daemon.write_config("[remote]\nrelay_idle = 60\n");
    let config = daemon.config_home().join("bashd/config.toml");
    let expected = format!(
        "{}:2: unknown key remote.relay_idle; known keys of [remote]: bridge_command, bashc_path, relay_idle_secs",
        config.display()
    );
    let out = check_config(&daemon);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(stderr(&out).contains(&expected), "{}", show(&out));
    let out = bashc_to_another_host(&daemon);
    assert!(stderr(&out).contains(&expected), "{}", show(&out));
}

/// Issue 31: `[policy] disable` naming no built-in rule, and a sandbox path that is
/// neither absolute nor under `~`, were refused by bashd alone, while bashc read the
/// same file and went on. Both refuse them now, in the same words at the same line.
#[test]
fn a_rule_name_or_a_sandbox_path_gets_one_answer_from_bashd_and_bashc() {
    let daemon = Daemon::unstarted();
    let config = daemon.config_home().join("bashd/config.toml");
    let cases = [
        (
            "[policy]\ndisable = [\"git-add-blnd\"]\n",
            "2: policy.disable names \"git-add-blnd\", which is no built-in rule; built-in rules: git-add-blind, git-push-force, rm-dangerous, dynamic-command",
        ),
        (
            "[sandbox]\ndeny_read = [\"~/.ssh\"]\nwritable = [\"cache\"]\n",
            "3: sandbox.writable: \"cache\" is neither absolute nor under ~: write it like \"/data/cache\" or \"~/.cache\"",
        ),
    ];
    for (text, error) in cases {
        daemon.write_config(text);
        assert_both_refuse(&daemon, &format!("{}:{error}", config.display()));
    }

    // Positive control: a built-in rule's name and paths under ~ and absolute pass both.
    daemon.write_config(
        "[policy]\ndisable = [\"git-add-blind\"]\n[sandbox]\nwritable = [\"~/.cache\", \"/data\"]\n",
    );
    let out = check_config(&daemon);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_bashc_goes_on(&daemon, &config.display().to_string());
}

/// A daemon that bashc starts and that refuses its config says why where the person
/// looks: the file, the line and the key of every error, not only "see the log" or
/// the first (issue 45).
#[test]
fn a_bad_config_at_autostart_is_told_by_bashc_with_its_line() {
    let daemon = Daemon::unstarted();
    daemon.write_config("[limits]\nmax_lines = 10\nbogus = 1\n[sandbox]\nfloor = \"nope\"\n");
    let out = daemon
        .bashc()
        .env_remove("BASHD_NO_AUTOSTART")
        .args(["exec", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("exited before it answered: ")
            && said.contains("config.toml:3: unknown key limits.bogus")
            && said.contains("config.toml:5: sandbox.floor"),
        "{}",
        show(&out)
    );
}

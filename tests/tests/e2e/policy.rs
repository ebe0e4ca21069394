//! The command policy through a real daemon: a denied command runs not even in part,
//! `bashc policy check` runs nothing, and the config switches and adds rules.

use bashd_tests::Daemon;

use crate::{json, show, stdout};

#[test]
fn a_denied_command_runs_not_even_its_harmless_part() {
    let daemon = Daemon::start();
    let marker = daemon.scratch().join("marker");
    let workdir = daemon.scratch().to_str().unwrap();
    let out = daemon.run_bashc(&[
        "exec",
        "--workdir",
        workdir,
        "--",
        "touch marker && git add -A",
    ]);
    assert_eq!(out.status.code(), Some(126), "{}", show(&out));
    let text = stdout(&out);
    assert!(
        text.contains("permission denied: git-add-blind: "),
        "{}",
        show(&out)
    );
    assert!(text.ends_with("exit code: 126 (denied)\n"), "{text}");
    assert!(!marker.exists(), "the part before && ran");

    let out = daemon.run_bashc(&[
        "exec",
        "--json",
        "--workdir",
        workdir,
        "--",
        "touch marker; bash -c 'rm -rf \"$HOME\"'",
    ]);
    assert_eq!(out.status.code(), Some(126), "{}", show(&out));
    let result = json(&out);
    assert_eq!(result["state"], "denied");
    assert_eq!(result["pid"], serde_json::Value::Null);
    assert!(result["job"].as_str().unwrap().starts_with('j'));
    let notice = result["notice"].as_str().unwrap();
    assert!(
        notice.starts_with("permission denied: rm-dangerous: "),
        "{notice}"
    );
    assert!(!marker.exists());
    assert!(daemon.job_processes().is_empty());
}

#[test]
fn policy_check_says_what_would_happen_and_runs_nothing() {
    let daemon = Daemon::start();
    let marker = daemon.scratch().join("marker");
    let command = format!("touch {} && git push --force", marker.display());
    let out = daemon.run_bashc(&["policy", "check", "--", &command]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stdout(&out).starts_with("permission denied: git-push-force: "),
        "{}",
        show(&out)
    );
    assert!(stdout(&out).contains("--force-with-lease"));

    let command = format!("touch {} && git push --force-with-lease", marker.display());
    let out = daemon.run_bashc(&["policy", "check", "--json", "--", &command]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let verdict = json(&out);
    assert_eq!(verdict["allowed"], true);
    assert_eq!(verdict["rule"], serde_json::Value::Null);
    assert!(!marker.exists(), "policy check ran the command");
}

#[test]
fn the_config_adds_rules_and_switches_built_ins_off() {
    let daemon = Daemon::start_with_config(
        "[policy]\ndisable = [\"git-add-blind\"]\n\n[[policy.deny]]\nid = \"no-publish\"\ncommand = \"npm\"\nargs = [\"publish\"]\nmessage = \"releases are made by CI; push a tag instead\"\n",
    );
    let out = daemon.run_bashc(&["exec", "--", "npm publish --dry-run"]);
    assert_eq!(out.status.code(), Some(126), "{}", show(&out));
    assert!(
        stdout(&out)
            .contains("permission denied: no-publish: releases are made by CI; push a tag instead"),
        "{}",
        show(&out)
    );
    let out = daemon.run_bashc(&["policy", "check", "--", "git add -A"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let out = daemon.run_bashc(&["policy", "check", "--", "rm -rf /"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "other built-ins stay on: {}",
        show(&out)
    );
}

/// Issue 17: the policy judges what a command means, and code handed to a shell is
/// checked as code. Each denied command gets exit 126 and runs not even its harmless
/// first part; the same through a heredoc and 17 wrappers (the old walk gave up at 16).
#[test]
fn meaning_and_code_fed_to_a_shell_are_checked() {
    let daemon = Daemon::start_with_config(
        "[[policy.deny]]\nid = \"no-marker\"\ncommand = \"touch\"\nargs = [\"MARK*\"]\nmessage = \"no markers here\"\n",
    );
    let workdir = daemon.scratch().to_str().unwrap().to_owned();
    let exec = |command: &str| daemon.run_bashc(&["exec", "--workdir", &workdir, "--", command]);
    let denied = [
        ("touch ran-1; rm -rf /.", "rm-dangerous", "ran-1"),
        ("echo 'touch MARK' | bash", "no-marker", "MARK"),
        (
            "touch ran-2; bash <<'EOF'\ntouch MARK-2\nEOF",
            "no-marker",
            "ran-2",
        ),
        (
            "touch ran-3; nice nice nice nice nice nice nice nice nice nice nice nice nice nice nice nice nice rm -rf /",
            "rm-dangerous",
            "ran-3",
        ),
    ];
    for (command, rule, marker) in denied {
        let out = exec(command);
        assert_eq!(out.status.code(), Some(126), "{command}: {}", show(&out));
        assert!(
            stdout(&out).contains(&format!("permission denied: {rule}: ")),
            "{command}: {}",
            show(&out)
        );
        assert!(
            !daemon.scratch().join(marker).exists(),
            "{command} ran in part"
        );
        assert!(
            !daemon.scratch().join("MARK").exists(),
            "{command} ran in part"
        );
    }
    // The same pipe with a harmless command runs: nothing above was refused wholesale.
    let out = exec("echo 'touch allowed' | bash");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(daemon.scratch().join("allowed").exists());
}

/// Issue 17: `$PWD` and relative targets are judged as the job's workdir, which the
/// daemon hands the policy: removing the workdir itself, however named, is denied, and
/// it stays.
#[test]
fn the_job_workdir_is_what_pwd_means() {
    let daemon = Daemon::start();
    let dir = daemon.scratch().join("project");
    std::fs::create_dir_all(&dir).unwrap();
    // The last one names the workdir by its absolute path, which only a policy that
    // knows the workdir can tell from any other directory.
    let by_path = format!("rm -rf {}", dir.display());
    for command in ["rm -rf \"$PWD\"", "cd .. && rm -rf project", &by_path] {
        let out = daemon.run_bashc(&["exec", "--workdir", dir.to_str().unwrap(), "--", command]);
        assert_eq!(
            out.status.code(),
            Some(126),
            "{command}: {}",
            crate::show(&out)
        );
        assert!(dir.is_dir(), "{command} removed the workdir");
    }
}

/// The daemon keeps the verdicts it gave (issue 31): the same command in another
/// workdir, and after a reload, gets the verdict of that workdir and that config, not
/// the one it was given before.
#[test]
fn a_verdict_given_before_is_not_served_in_another_workdir_nor_after_a_reload() {
    let daemon = Daemon::start();
    let dir = daemon.scratch().join("project");
    let other = daemon.scratch().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let remove = format!("rm -rf {}", dir.display());
    let exec_in = |workdir: &std::path::Path, command: &str| {
        daemon.run_bashc(&[
            "exec",
            "--workdir",
            workdir.to_str().unwrap(),
            "--",
            command,
        ])
    };
    for _ in 0..2 {
        // Allowed from beside it: it goes.
        std::fs::create_dir_all(&dir).unwrap();
        let out = exec_in(&other, &remove);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        assert!(!dir.exists(), "the positive control did not remove it");
        // Denied from inside it, though the same command was just allowed.
        std::fs::create_dir_all(&dir).unwrap();
        let out = exec_in(&dir, &remove);
        assert_eq!(out.status.code(), Some(126), "{}", show(&out));
        assert!(
            stdout(&out).contains("permission denied: rm-dangerous: "),
            "{}",
            show(&out)
        );
        assert!(dir.is_dir(), "the workdir was removed");
    }

    let out = daemon.run_bashc(&["exec", "--", "echo publish"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    daemon.write_config(
        "[[policy.deny]]\nid = \"no-echo\"\ncommand = \"echo\"\nargs = [\"publish\"]\nmessage = \"not here\"\n",
    );
    let hup = rustix::process::Pid::from_raw(daemon.pid() as i32).unwrap();
    rustix::process::kill_process(hup, rustix::process::Signal::HUP).unwrap();
    assert!(
        daemon.wait_for_log("reloaded config", std::time::Duration::from_secs(10)),
        "{}",
        daemon.log()
    );
    let out = daemon.run_bashc(&["exec", "--", "echo publish"]);
    assert_eq!(out.status.code(), Some(126), "{}", show(&out));
    assert!(
        stdout(&out).contains("permission denied: no-echo: not here"),
        "{}",
        show(&out)
    );
}

/// Issue 42 (hole 9): `bashc policy check` judges a command where `bashc exec` would run
/// it, in the caller's directory (or `--workdir`): from `ws/d1`, every spelling of "stage
/// the whole workspace" that exec denies there is denied by the check too, whether the
/// command is one word or several after `--`. Dry runs and scoped forms stay allowed.
#[test]
fn policy_check_from_a_subdirectory_denies_what_exec_denies_there() {
    let daemon = Daemon::start();
    let ws = daemon.scratch().join("ws");
    let d1 = ws.join("d1");
    std::fs::create_dir_all(d1.join("src")).unwrap();
    let in_d1 = |args: &[&str]| {
        daemon
            .bashc()
            .current_dir(&d1)
            .args(args)
            .output()
            .expect("cannot run bashc")
    };
    let ws_text = ws.to_str().unwrap();
    let blind = [
        "git add ../d1".to_owned(),
        "git add ../../ws".to_owned(),
        format!("git add {ws_text}"),
        format!("git add {ws_text}/d1/."),
    ];
    for command in &blind {
        let words: Vec<&str> = command.split(' ').collect();
        let one_word = ["policy", "check", "--", command.as_str()];
        let several = [&["policy", "check", "--"][..], &words].concat();
        for args in [&one_word[..], &several] {
            let out = in_d1(args);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
            assert!(
                stdout(&out).starts_with("permission denied: git-add-blind: "),
                "{args:?}: {}",
                show(&out)
            );
        }
        let out = daemon.run_bashc(&[
            "policy",
            "check",
            "--workdir",
            d1.to_str().unwrap(),
            "--",
            command,
        ]);
        assert_eq!(out.status.code(), Some(1), "--workdir: {}", show(&out));
        let out = in_d1(&["exec", "--", command]);
        assert_eq!(
            out.status.code(),
            Some(126),
            "exec {command}: {}",
            show(&out)
        );
    }

    // Positive controls: allowed by the check and run by exec (git fails outside a
    // repository, but it ran).
    std::fs::create_dir_all(d1.join("build")).unwrap();
    for command in ["git add -n .", "git add src", "rm -rf build"] {
        let out = in_d1(&["policy", "check", "--", command]);
        assert_eq!(out.status.code(), Some(0), "{command}: {}", show(&out));
        assert_eq!(stdout(&out), "allowed\n", "{command}");
        let out = in_d1(&["exec", "--", command]);
        assert_ne!(out.status.code(), Some(126), "{command}: {}", show(&out));
    }
    assert!(!d1.join("build").exists(), "rm -rf build did not run");
    assert!(daemon.job_processes().is_empty());
}

/// Issue 42 (hole 9): targets bashd used to leave unknown, and the corpus's seven known
/// bypasses, are denied by `bashc policy check` anywhere (only checked here: on a
/// daemon that let them through, running them would remove the home).
#[test]
fn the_known_bypasses_are_denied() {
    let daemon = Daemon::start();
    let denied = [
        ("rm -rf ${HOME:?}", "rm-dangerous"),
        ("xargs rm -rf <<< ~", "rm-dangerous"),
        ("echo ~ | xargs rm -rf", "rm-dangerous"),
        ("rm$IFS-rf$IFS/", "rm-dangerous"),
        ("rm${IFS}-rf${IFS}~", "rm-dangerous"),
        ("$SHELL -c 'rm -rf /'", "rm-dangerous"),
        ("IFS=,; x=rm,-rf,/; $x", "rm-dangerous"),
        ("xargs -a /dev/stdin rm -rf <<< /", "rm-dangerous"),
        ("xargs --arg-file=<(echo /) rm -rf", "rm-dangerous"),
        ("IFS=$1; x=rm.-rf./; $x", "dynamic-ifs"),
    ];
    for (command, rule) in denied {
        let out = daemon.run_bashc(&["policy", "check", "--", command]);
        assert_eq!(out.status.code(), Some(1), "{command}: {}", show(&out));
        assert!(
            stdout(&out).starts_with(&format!("permission denied: {rule}: ")),
            "{command}: {}",
            show(&out)
        );
    }
    for command in [
        "rm -rf build",
        "echo build | xargs rm -rf",
        "$SHELL -c 'make test'",
        "while IFS= read -r line; do echo \"$line\"; done < f",
    ] {
        let out = daemon.run_bashc(&["policy", "check", "--", command]);
        assert_eq!(out.status.code(), Some(0), "{command}: {}", show(&out));
    }
}

//! The `bashd-resident` binary's own arguments: only bashd starts it, and it says so
//! to anyone else. (Because this package has an integration test, `cargo test
//! --workspace` builds the `bashd-resident` binary that the e2e tests run.)

use std::process::Command;

#[test]
fn a_person_who_runs_it_is_told_only_bashd_starts_it() {
    for args in [&[][..], &["--help"], &["--zygote", "x"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_bashd-resident"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("bashd-resident: only bashd starts this"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn the_sandbox_probe_answers_one_line_per_mechanism() {
    let out = Command::new(env!("CARGO_BIN_EXE_bashd-resident"))
        .arg("--probe-sandbox")
        .env_clear()
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8(out.stdout).unwrap();
    for mechanism in ["landlock", "user", "mount", "network", "seccomp"] {
        assert!(
            said.lines().any(|line| line.starts_with(mechanism)),
            "no {mechanism} line in {said:?}"
        );
    }
}

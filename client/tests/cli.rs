//! The `bashc` binary's argument handling, without a daemon. (Because this package has
//! an integration test, `cargo test --workspace` builds the `bashc` binary that the
//! e2e tests run.)

use std::process::Command;

#[test]
fn flags_not_built_yet_are_refused_before_any_daemon_is_started() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime_dir = tmp.path().join("run");
    let cases: &[&[&str]] = &[&["--stream"]];
    for flags in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_bashc"))
            .arg("exec")
            .args(*flags)
            .args(["--", "true"])
            .env("BASHD_RUNTIME_DIR", &runtime_dir)
            // Should a flag slip through, bashc must fail without leaving a daemon behind.
            .env("BASHD_NO_AUTOSTART", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(255), "{flags:?}: {stderr}");
        assert!(
            stderr.starts_with("bashc: ") && stderr.contains("not supported"),
            "{flags:?}: {stderr}"
        );
        assert!(!runtime_dir.exists(), "{flags:?} reached for a daemon");
    }
}

#[test]
fn a_job_is_named_by_id_or_by_pid_never_both_or_neither() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime_dir = tmp.path().join("run");
    for args in [
        &["check"][..],
        &["kill", "j1", "--pid", "5"],
        &["wait", "--pid", "x"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_bashc"))
            .args(args)
            .env("BASHD_RUNTIME_DIR", &runtime_dir)
            .env("BASHD_NO_AUTOSTART", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!runtime_dir.exists(), "{args:?} reached for a daemon");
    }
}

#[test]
fn output_offsets_count_from_one() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime_dir = tmp.path().join("run");
    let out = Command::new(env!("CARGO_BIN_EXE_bashc"))
        .args(["output", "j1", "--offset", "0"])
        .env("BASHD_RUNTIME_DIR", &runtime_dir)
        .env("BASHD_NO_AUTOSTART", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--offset"), "{stderr}");
    assert!(!runtime_dir.exists(), "a bad offset reached for a daemon");
}

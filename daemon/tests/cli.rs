//! The `bashd` binary's own arguments. (Because this package has an integration test,
//! `cargo test --workspace` builds the `bashd` binary that the e2e tests run.)

use std::process::Command;

fn bashd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bashd"))
}

#[test]
fn help_names_the_runtime_dir_and_how_to_stop() {
    let out = bashd().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "BASHD_RUNTIME_DIR",
        "XDG_RUNTIME_DIR",
        "SIGTERM",
        "BASHD_LOG",
    ] {
        assert!(
            help.contains(needle),
            "--help does not mention {needle}:\n{help}"
        );
    }
}

#[test]
fn unknown_arguments_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = bashd()
        .arg("--no-such-flag")
        .env("BASHD_RUNTIME_DIR", tmp.path().join("run"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        !tmp.path().join("run").exists(),
        "bashd started despite a bad argument"
    );
}

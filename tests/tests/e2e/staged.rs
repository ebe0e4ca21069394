//! A confined job's mounts staged ahead in the zygote's kit (`confine/staged.rs`) are
//! what the job's own finding would mount: a kit staged before the person changed the
//! workspace is not handed to the next job, which finds and mounts for itself. The
//! kit for a spec and workdir is staged after each job with them, so the jobs run
//! before the change leave one ready for the job after it.

use std::path::Path;

use bashd_tests::Daemon;
use bashd_tests::output::shown;

use super::json;

/// `bashc exec --json --sandbox workspace-write --net off -- COMMAND` from `ws`.
fn confined(daemon: &Daemon, ws: &Path, command: &str) -> String {
    let out = daemon.run_bashc_at(
        ws,
        &[
            "exec",
            "--json",
            "--sandbox",
            "workspace-write",
            "--net",
            "off",
            "--",
            command,
        ],
    );
    shown(&json(&out))
}

/// A nested repository and a `deny_read` directory beneath the workspace, both made by
/// the person after confined jobs ran there (so after a kit was staged for the next
/// one), are read-only and hidden to the next job: each is held by its mount alone,
/// Landlock granting the workspace whole. The control: that job writes the
/// workspace, the nested repository's work tree included.
#[test]
fn mounts_staged_ahead_follow_what_the_person_changed_since() {
    let mut daemon = Daemon::unstarted();
    let ws = daemon.scratch().join("staged-ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    daemon.write_config(&format!(
        "[sandbox]\ndeny_read = [\"{}\"]\n",
        ws.join("secrets").display()
    ));
    let command = daemon.bashd_command();
    daemon.start_with(command);
    for _ in 0..3 {
        let words = confined(&daemon, &ws, "echo warm > warm; echo \"warm: $?\"");
        assert!(words.contains("warm: 0"), "{words}");
    }
    std::fs::create_dir_all(ws.join("nested/.git")).unwrap();
    std::fs::write(ws.join("nested/.git/config"), "[core]\n").unwrap();
    std::fs::create_dir(ws.join("secrets")).unwrap();
    std::fs::write(ws.join("secrets/token"), "s3cret\n").unwrap();
    let words = confined(
        &daemon,
        &ws,
        "echo '[core] fsmonitor = x' >> nested/.git/config; echo \"git: $?\"; \
         cat secrets/token; echo \"secret: $?\"; \
         echo ok > nested/file; echo \"control: $?\"",
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("nested/.git/config")).unwrap(),
        "[core]\n",
        "{words}"
    );
    assert!(words.contains("git: 1"), "{words}");
    assert!(
        words.contains("secret: 1") && !words.contains("s3cret"),
        "{words}"
    );
    assert!(words.contains("control: 0"), "{words}");
    assert!(ws.join("nested/file").is_file(), "{words}");
}

/// The session's temp dir of a sandbox is made once and looked at before each next
/// job (`sandbox::MadeDirs`): removed between two confined jobs, it is made again for
/// the second, which writes its `TMPDIR`. The control: the first job wrote it too.
#[test]
fn a_temp_dir_removed_between_jobs_is_made_again() {
    let daemon = Daemon::start();
    let ws = daemon.scratch().join("tmp-ws");
    std::fs::create_dir_all(&ws).unwrap();
    let write_tmp = "echo x > \"$TMPDIR/f\"; echo \"tmp: $?\"; echo \"dir: $TMPDIR\"";
    let words = confined(&daemon, &ws, write_tmp);
    assert!(words.contains("tmp: 0"), "{words}");
    let dir = words
        .lines()
        .find_map(|line| line.trim().strip_prefix("dir: "))
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| panic!("no TMPDIR said: {words}"));
    std::fs::remove_dir_all(&dir).unwrap();
    let words = confined(&daemon, &ws, write_tmp);
    assert!(words.contains("tmp: 0"), "{words}");
    assert!(dir.join("f").is_file(), "{words}");
}

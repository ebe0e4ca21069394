//! A confined job's mounts staged ahead in the zygote's kit (`confine/staged.rs`) are
//! what the job's own finding would mount: a kit staged before the person changed the
//! workspace is not handed to the next job, which finds and mounts for itself. The
//! kit for a spec and workdir is staged after each job with them, so the jobs run
//! before the change leave one ready for the job after it.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

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
    for n in 0..3 {
        let words = confined(&daemon, &ws, "echo warm > warm; echo \"warm: $?\"");
        assert!(words.contains("warm: 0"), "{words}");
        if n == 0 {
            // A staging whose looks see a time within 2 s (the workspace and the
            // session's temp dir, just made) is not used: the next jobs stage.
            std::thread::sleep(std::time::Duration::from_millis(2500));
        }
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

/// Kills what a daemon started (the zygote, the jobs) when dropped, before the daemon
/// is: a zygote or a job hung by a test is not left behind, whatever the test found.
struct KillDescendants<'a>(&'a Daemon);

impl Drop for KillDescendants<'_> {
    fn drop(&mut self) {
        let mut pids = bashd_tests::procs::descendants(self.0.pid());
        pids.extend(self.0.job_processes());
        for pid in pids {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

/// Runs `command` to completion within `within`; `None` (and the client killed) past
/// it.
fn within(mut command: std::process::Command, within: Duration) -> Option<Output> {
    use std::process::Stdio;
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run bashc");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(within) {
        Ok(out) => Some(out.expect("cannot wait for bashc")),
        Err(_) => {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            None
        }
    }
}

/// How long a job that should start at once may take on the loaded test machine.
const DEADLINE: Duration = Duration::from_secs(60);

/// A confined job makes a `.git` in its workspace that is not a file to read (`make`),
/// then more confined jobs of the same spec run there, so that the zygote stages
/// their mounts from a walk that finds it; each finishes, and so do a confined and an
/// unconfined job of another session. On main the walk opened the `.git` and read it
/// to its end: a FIFO held the single-threaded zygote, and every job of every session
/// after it, for ever.
fn a_git_that_is_no_file_holds_no_job(make: &str) {
    let daemon = Daemon::start();
    let _cleanup = KillDescendants(&daemon);
    let ws = daemon.scratch().join("odd-git-ws");
    let other = daemon.scratch().join("other-ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    let exec = |session: &str, dir: &Path, sandbox: &str, command: &str| {
        let mut bashc = daemon.bashc_in(session);
        bashc.current_dir(dir).args([
            "exec",
            "--json",
            "--sandbox",
            sandbox,
            "--net",
            "off",
            "--",
            command,
        ]);
        let out = within(bashc, DEADLINE).unwrap_or_else(|| {
            panic!("{session}'s {sandbox} job `{command}` did not finish within {DEADLINE:?}")
        });
        shown(&json(&out))
    };
    let words = exec(
        "test",
        &ws,
        "workspace-write",
        &format!("mkdir sub && {make}; echo \"made: $?\""),
    );
    assert!(words.contains("made: 0"), "{words}");
    for n in 0..2 {
        let words = exec("test", &ws, "workspace-write", &format!("echo same {n}"));
        assert!(words.contains(&format!("same {n}")), "{words}");
    }
    // Another session's jobs: the zygote starts them too.
    let words = exec("other", &other, "workspace-write", "echo other confined");
    assert!(words.contains("other confined"), "{words}");
    let words = exec("other", &other, "off", "echo other unconfined");
    assert!(words.contains("other unconfined"), "{words}");
}

#[test]
fn a_fifo_named_git_in_a_workspace_holds_no_job() {
    a_git_that_is_no_file_holds_no_job("mkfifo sub/.git");
}

/// Not run against main: there the zygote read `/dev/zero` into memory until the
/// machine's memory ran out.
#[test]
fn a_git_symlink_to_dev_zero_in_a_workspace_holds_no_job() {
    a_git_that_is_no_file_holds_no_job("ln -s /dev/zero sub/.git");
}

//! `deny_read` holds for a job that is already running (issue 42, hole 5): a
//! credential file made after the job started (`~/.git-credentials`), one replaced by
//! rename (`~/.netrc`, as `git credential-store` and `docker login` write), and a
//! hidden directory renamed and made again (`~/.ssh`) are not read by it. On main only
//! what existed at the start was hidden, by a mount the rename dropped. The positive
//! control beside it: the same job reads and writes its workspace (below `$HOME`), its
//! `TMPDIR`, a file elsewhere (`/etc/hostname`), a file of `$HOME` that was there, and
//! a file made later beneath a directory of `$HOME` that was there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bashd_tests::{Daemon, wait_until};

use crate::{json, show};

/// The secrets the test puts in place while the job runs; none may reach its output.
const SECRETS: &[&str] = &[
    "h5-secret-git-credentials",
    "h5-secret-netrc-renamed-over",
    "h5-secret-ssh-made-again",
    "h5-secret-ssh-renamed-away",
];

/// A daemon whose `HOME` is a fake one (so the default `deny_read` names its paths),
/// and a workspace below it.
struct Home {
    daemon: Daemon,
    home: PathBuf,
    ws: PathBuf,
    /// Where `HOME` is when it is not in the daemon's scratch dir; removed with it.
    _apart: Option<tempfile::TempDir>,
}

impl Home {
    /// `apart`: `HOME` in a temp dir of its own in cargo's `target/tmp`, away from the
    /// daemon's: in the scratch dir, the runtime dir is an entry of a parent of a
    /// hidden path, which the job covers with a mount, so the zygote's rules made
    /// ahead are not used (their rule on it would not hold beneath the mount,
    /// `Prepared::cover`); and below `/tmp`, which other tests change all the time,
    /// they would hardly ever be fresh.
    fn start_in(apart: bool) -> Home {
        let mut daemon = Daemon::unstarted();
        let apart = apart.then(|| {
            tempfile::Builder::new()
                .prefix("i42h5-")
                .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
                .unwrap()
        });
        let base = apart.as_ref().map_or(daemon.scratch(), |dir| dir.path());
        let home = base.join("i42h5").join("home");
        let ws = home.join("ws");
        for dir in [&ws, &home.join(".ssh"), &home.join("notes")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        // Resolved: the job is told absolute paths, and the temp dir may be a symlink.
        let home = std::fs::canonicalize(&home).unwrap();
        let ws = home.join("ws");
        std::fs::write(ws.join("seed"), "h5-seed-read\n").unwrap();
        std::fs::write(home.join(".profile"), "h5-profile-read\n").unwrap();
        std::fs::write(home.join(".netrc"), "h5-old-netrc\n").unwrap();
        std::fs::write(home.join(".ssh/id"), "h5-secret-ssh-renamed-away\n").unwrap();
        let mut command = daemon.bashd_command();
        command.env("HOME", &home);
        daemon.start_with(command);
        Home {
            daemon,
            home,
            ws,
            _apart: apart,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.home.join(name)
    }
}

/// Waits until `path` exists (the job's signs are written by rename, so whole); its
/// text.
fn wait_for_file(path: &Path, what: &str) -> String {
    assert!(
        wait_until(Duration::from_secs(30), || path.exists()),
        "the job never wrote {what} ({})",
        path.display()
    );
    std::fs::read_to_string(path).unwrap()
}

/// Issue 42, hole 5.
#[test]
fn a_running_job_reads_no_credential_made_or_replaced_after_it_started() {
    hole_5(false);
}

/// The same with the read rules the zygote made ahead after a first confined job
/// (`confine/reads.rs`, `Prepared`), which the job applies instead of listing `$HOME`.
#[test]
fn a_running_job_reads_no_later_credential_with_read_rules_made_ahead() {
    hole_5(true);
}

fn hole_5(made_ahead: bool) {
    let h = Home::start_in(made_ahead);
    let home = h.home.display().to_string();
    // Twice: rules made within the clock's tick of a change to `$HOME` are made again
    // after the next job.
    for _ in 0..if made_ahead { 2 } else { 0 } {
        let first = h
            .daemon
            .bashc_at(&h.ws)
            .args(["exec", "--sandbox", "workspace-write", "--workdir"])
            .arg(&h.ws)
            .args(["--", "true"])
            .output()
            .expect("cannot run bashc");
        assert_eq!(first.status.code(), Some(0), "{}", show(&first));
    }
    // Every read is tried once before the test changes anything (`ready`) and once
    // after (`out`); the job waits for `go` in between.
    let reads = format!(
        r#"for f in {home}/.git-credentials {home}/.netrc {home}/.ssh/id {home}/.ssh.old/id {home}/later {home}/.profile {home}/notes/later /etc/hostname seed late; do echo "== $f"; cat "$f" 2>&1; done
echo h5-tmp-wrote > "$TMPDIR/h5" && cat "$TMPDIR/h5"
echo h5-ws-wrote > wrote && cat wrote"#
    );
    let script = format!(
        "{{ {reads}; }} > ready.part 2>&1; mv ready.part ready\n\
         while [ ! -e go ]; do sleep 0.02; done\n\
         {{ {reads}; }} > out.part 2>&1; mv out.part out"
    );
    let answer = h
        .daemon
        .bashc_at(&h.ws)
        .args(["exec", "--json", "--mode", "background"])
        .args(["--sandbox", "workspace-write", "--workdir"])
        .arg(&h.ws)
        .arg("--")
        .arg(&script)
        .output()
        .expect("cannot run bashc");
    assert_eq!(answer.status.code(), Some(0), "{}", show(&answer));
    assert_eq!(json(&answer)["state"], "running", "{}", show(&answer));

    let ready = wait_for_file(&h.ws.join("ready"), "its first reads");
    // Hidden at the start, read where allowed: the job runs confined and its setup works.
    assert!(!ready.contains("h5-old-netrc"), "{ready}");
    assert!(!ready.contains("h5-secret"), "{ready}");
    for allowed in [
        "h5-profile-read",
        "h5-seed-read",
        "h5-tmp-wrote",
        "h5-ws-wrote",
    ] {
        assert!(
            ready.contains(allowed),
            "`{allowed}` not read at the start:\n{ready}"
        );
    }

    // A credential file made after the job started.
    std::fs::write(h.path(".git-credentials"), "h5-secret-git-credentials\n").unwrap();
    // One replaced by rename, as `git credential-store` writes it.
    std::fs::write(h.path(".netrc.tmp"), "h5-secret-netrc-renamed-over\n").unwrap();
    std::fs::rename(h.path(".netrc.tmp"), h.path(".netrc")).unwrap();
    // A hidden directory renamed away and made again.
    std::fs::rename(h.path(".ssh"), h.path(".ssh.old")).unwrap();
    std::fs::create_dir(h.path(".ssh")).unwrap();
    std::fs::write(h.path(".ssh/id"), "h5-secret-ssh-made-again\n").unwrap();
    // The price of it, as docs/design/sandbox.md decides: any name made later directly
    // in `$HOME` is unreadable to a job already running. Beneath a directory of `$HOME`
    // that was there, and in the workspace, what is made later is read.
    std::fs::write(h.path("later"), "h5-later-sibling\n").unwrap();
    std::fs::write(h.path("notes/later"), "h5-notes-later-read\n").unwrap();
    std::fs::write(h.ws.join("late"), "h5-ws-late-read\n").unwrap();
    std::fs::write(h.ws.join("go"), "").unwrap();

    let out = wait_for_file(&h.ws.join("out"), "its reads after the changes");
    let read: Vec<&str> = SECRETS
        .iter()
        .copied()
        .filter(|secret| out.contains(secret))
        .collect();
    assert!(read.is_empty(), "the running job read {read:?}:\n{out}");
    assert!(!out.contains("h5-later-sibling"), "{out}");
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap();
    let hostname = format!("== /etc/hostname\n{hostname}");
    let missed: Vec<&str> = [
        "h5-profile-read",
        "h5-notes-later-read",
        "h5-seed-read",
        "h5-ws-late-read",
        "h5-tmp-wrote",
        "h5-ws-wrote",
        &hostname,
    ]
    .into_iter()
    .filter(|allowed| !out.contains(allowed))
    .collect();
    assert!(
        missed.is_empty(),
        "not read after the changes: {missed:?}\n{out}"
    );
}

/// The read rules the zygote makes ahead for the next job (`confine/reads.rs`,
/// `Prepared`) grant the inodes that were there when they were made: a job is handed
/// them only while every parent of a hidden path is as it was. Here a file granted
/// then (a lock file a credential store writes first) is renamed onto a hidden name
/// before the next job starts, and linked to a new name once it runs (the mount
/// covers the old name only): rules made before the rename would let that job read
/// it. The
/// positive control: the same job reads a file of `$HOME` and its workspace.
#[test]
fn read_rules_made_ahead_are_not_handed_to_a_job_after_a_parent_changed() {
    let h = Home::start_in(true);
    let home = h.home.display().to_string();
    std::fs::write(h.path(".netrc.lock"), "h5-secret-lock-renamed-in\n").unwrap();
    let confined = |script: &str, background: bool| {
        let mut command = h.daemon.bashc_at(&h.ws);
        command.args([
            "exec",
            "--json",
            "--sandbox",
            "workspace-write",
            "--workdir",
        ]);
        command.arg(&h.ws);
        if background {
            command.args(["--mode", "background"]);
        }
        let answer = command
            .arg("--")
            .arg(script)
            .output()
            .expect("cannot run bashc");
        assert_eq!(answer.status.code(), Some(0), "{}", show(&answer));
        answer
    };
    // The first confined job lists the parents itself; the zygote makes the rules
    // ahead after it (and after the next, when the first was within the clock's tick
    // of the write), while `.netrc.lock` is an ordinary file of `$HOME`.
    for _ in 0..2 {
        let first = confined(&format!("cat {home}/.netrc.lock"), false);
        assert!(
            show(&first).contains("h5-secret-lock-renamed-in"),
            "a file of $HOME is read: {}",
            show(&first)
        );
    }
    std::fs::rename(h.path(".netrc.lock"), h.path(".netrc")).unwrap();
    let reads = format!(
        "for f in {home}/.netrc {home}/.netrc-moved {home}/.profile seed; do echo \"== $f\"; cat \"$f\" 2>&1; done"
    );
    let script = format!(
        "{{ {reads}; }} > ready.part 2>&1; mv ready.part ready\n\
         while [ ! -e go ]; do sleep 0.02; done\n\
         {{ {reads}; }} > out.part 2>&1; mv out.part out"
    );
    let answer = confined(&script, true);
    assert_eq!(json(&answer)["state"], "running", "{}", show(&answer));
    let ready = wait_for_file(&h.ws.join("ready"), "its first reads");
    assert!(!ready.contains("h5-secret"), "{ready}");
    // Linked to a name made after the job started, which no mount covers.
    std::fs::hard_link(h.path(".netrc"), h.path(".netrc-moved")).unwrap();
    std::fs::write(h.ws.join("go"), "").unwrap();
    let out = wait_for_file(&h.ws.join("out"), "its reads after the move");
    assert!(
        !out.contains("h5-secret"),
        "the job read the linked credential:\n{out}"
    );
    for allowed in ["h5-profile-read", "h5-seed-read"] {
        assert!(out.contains(allowed), "`{allowed}` not read:\n{out}");
    }
}

//! Disk budgets (issue 18): spill files of a session and of all sessions stay within
//! `limits.max_session_spill_bytes` and `max_total_spill_bytes`, the oldest finished
//! jobs' files going first; a disk that fills up mid-spill and a journal that cannot
//! be written are survived and said. The full disk is a small tmpfs mounted (as root)
//! over the runtime dir, unmounted even when the test fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use bashd_tests::Daemon;

use crate::{json, show};

const MB: u64 = 1_000_000;

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The 30 jobs of 600 MB scaled down 100 times: 30 jobs of 6 MB against a
/// session budget of 20 MB (and the stream cap raised out of the way).
#[test]
fn thirty_big_jobs_leave_at_most_the_session_budget_on_disk() {
    let daemon = Daemon::start_with_config(
        "[limits]\nmax_session_spill_bytes = 20000000\nmax_spill_bytes = 100000000\n",
    );
    let session = bashc::protocol::runtime::sessions_dir(daemon.runtime_dir()).join("i18-disk");
    let mut jobs = Vec::new();
    for _ in 0..30 {
        let out = daemon.run_bashc(&[
            "exec",
            "--json",
            "--session",
            "i18-disk",
            "--",
            "yes i18-abcdefghijklmnopqrstuvwxyz-0123456789 | head -c 6000000",
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        let result = json(&out);
        assert_eq!(result["stdout"]["total_bytes"], 6 * MB);
        jobs.push(result["job"].as_str().unwrap().to_owned());
        let on_disk = dir_bytes(&session);
        assert!(
            on_disk <= 20 * MB,
            "{on_disk} bytes in {}",
            session.display()
        );
    }
    // The newest job's file is whole; the oldest's was removed, and asking says why.
    let last = daemon.run_bashc(&[
        "output",
        jobs.last().unwrap(),
        "--offset",
        "1",
        "--limit",
        "1",
        "--any-session",
    ]);
    assert_eq!(last.status.code(), Some(0), "{}", show(&last));
    let first = daemon.run_bashc(&["output", &jobs[0], "--any-session"]);
    assert_ne!(first.status.code(), Some(0), "{}", show(&first));
    let stderr = crate::stderr(&first);
    assert!(stderr.contains("max_session_spill_bytes"), "{stderr}");

    // A running job whose stream alone passes the budget stops spilling, and says so.
    let out = daemon.run_bashc(&[
        "exec",
        "--json",
        "--session",
        "i18-disk",
        "--",
        "yes i18-abcdefghijklmnopqrstuvwxyz-0123456789 | head -c 30000000",
    ]);
    let result = json(&out);
    assert_eq!(result["stdout"]["total_bytes"], 30 * MB);
    let notice = result["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains("may be incomplete") && notice.contains("max_session_spill_bytes"),
        "{notice}"
    );
    assert!(dir_bytes(&session) <= 20 * MB);
}

/// A tmpfs of `size` mounted at `dir`, lazily unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs-i18",
            ])
            .arg(dir)
            .status()
            .ok()?;
        status.success().then(|| Tmpfs(dir.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_stops_the_spill_and_refuses_jobs_the_journal_cannot_record() {
    let mut daemon = Daemon::unstarted();
    let Some(_tmpfs) = Tmpfs::mount(daemon.runtime_dir(), "2m") else {
        eprintln!("skipped: cannot mount a tmpfs here (not root?)");
        return;
    };
    daemon.restart();
    let out = daemon.run_bashc(&[
        "exec",
        "--json",
        "--",
        "yes i18-abcdefghijklmnopqrstuvwxyz-0123456789 | head -c 5000000",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let result = json(&out);
    assert_eq!(result["stdout"]["total_bytes"], 5 * MB);
    let notice = result["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains("may be incomplete") && notice.contains("No space left on device"),
        "{notice}"
    );
    // The journal's last page fills up within a few dozen jobs; then jobs are refused.
    let mut refused = None;
    for _ in 0..300 {
        let out = daemon.run_bashc(&["exec", "--", "true"]);
        if out.status.code() != Some(0) {
            refused = Some(crate::stderr(&out));
            break;
        }
    }
    let refused = refused.expect("no job was refused on a full disk");
    assert!(
        refused.contains("cannot record the job in the journal") && refused.contains("free space"),
        "{refused}"
    );
    let status = daemon.run_bashc(&["status"]);
    assert_eq!(status.status.code(), Some(0), "{}", show(&status));
}

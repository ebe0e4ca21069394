//! What a starting daemon does about the one before it (DESIGN §6): every job the
//! journal names as started and never ended is ended by containment
//! (`jobs::contain::end_dead_jobs`: today whatever is alive of it found by its cookie,
//! or by its process group while its leader is verified by start time), and kept as
//! `lost` (issue 18): its record and its spill files are handed to the jobs actor, and
//! its session dir stays; every other session dir is removed, since with the lock held
//! no live daemon owns one; the journal is compacted, with the lost jobs in it. It runs
//! before the first connection is served.
//!
//! Removal never follows a symlink and never leaves the runtime dir: an entry that
//! bashd did not make is left alone and logged.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use bashd_protocol::{JobId, is_valid_session_id, runtime};

use crate::jobs::LostJob;
use crate::jobs::contain::cgroup::CgroupRoot;
use crate::jobs::contain::{self, Scanner};
use crate::journal::{self, Journal, Replay};

/// What the runtime dir may hold; the rest was not made by bashd.
const KNOWN_ENTRIES: &[&str] = &[
    "bashd.sock",
    "bashd.lock",
    "autostart.lock",
    "bashd.log",
    "journal",
    "journal.tmp",
    "sessions",
];

/// Ends what the daemon before this one left, cleans the runtime dir `dir`, compacts
/// the journal, and logs one line of what it did. Returns the jobs it ended, and those
/// an earlier restart kept, with their output, for the jobs actor to list as lost.
pub async fn recover(
    dir: &Path,
    journal: &mut Journal,
    replay: Replay,
    scanner: &Scanner,
    cgroup: Option<&CgroupRoot>,
    grace: Duration,
) -> anyhow::Result<Vec<LostJob>> {
    if !replay.problems.is_empty() {
        tracing::warn!(
            "journal {}: {} line(s) could not be read and were skipped: {}",
            journal::path(dir).display(),
            replay.problems.len(),
            replay.problems.join("; ")
        );
    }
    let jobs: Vec<u64> = replay.open.keys().copied().collect();
    let mut killed = 0;
    if !jobs.is_empty() {
        // The cgroups first: what is in them cannot have escaped, whatever it did to
        // its environment; the scan then finds whatever was outside any cgroup.
        if let Some(root) = cgroup {
            let dead = replay
                .open
                .values()
                .map(|job| (job.instance.clone(), JobId(job.job)));
            killed += root.end_dead(dead).await;
        }
        let ended = contain::end_dead_jobs(scanner, replay.open.values(), grace).await;
        killed += ended.killed;
        if !ended.survivors {
            for &n in &jobs {
                journal.keep_lost(n);
            }
        } else {
            // They stay in the journal, for the next start to try again.
            tracing::error!(
                "processes of jobs a previous bashd started survived SIGKILL; they stay in the journal"
            );
        }
    }
    // Every job is ended now (or survived, and stays open): their files are final.
    let kept: Vec<(u64, String, Option<journal::JobRecord>)> = replay
        .open
        .values()
        .chain(replay.lost.values())
        .map(|job| (job.job, job.session.clone(), job.info.clone()))
        .collect();
    let lost_sessions: Vec<String> = kept.iter().map(|(_, s, _)| s.clone()).collect();
    let read_dir = dir.to_owned();
    let lost = tokio::task::spawn_blocking(move || {
        kept.into_iter()
            .map(|(n, session, info)| LostJob::read(&read_dir, JobId(n), &session, info))
            .collect::<Vec<_>>()
    })
    .await
    .context("reading the output of lost jobs failed")?;
    let mut swept = sweep(dir, &lost_sessions)?;
    swept.removed.sort();
    journal.compact().with_context(|| {
        format!(
            "cannot rewrite the journal {}",
            journal::path(dir).display()
        )
    })?;

    for entry in &swept.left_alone {
        tracing::warn!("left alone {entry}: bashd did not make it");
    }
    if !jobs.is_empty() || !swept.removed.is_empty() {
        let ids: Vec<String> = jobs.iter().map(|&n| JobId(n).to_string()).collect();
        tracing::info!(
            "cleaned up after a bashd that did not stop: killed {killed} process(es) of {} unfinished job(s) [{}], kept as lost with their output; removed {} session dir(s) [{}]",
            jobs.len(),
            ids.join(" "),
            swept.removed.len(),
            swept.removed.join(" ")
        );
    }
    Ok(lost)
}

#[derive(Debug, Default)]
struct Swept {
    /// Session dirs removed, by session.
    removed: Vec<String>,
    /// Paths that bashd did not make.
    left_alone: Vec<String>,
}

/// Removes every session dir of the runtime dir but those of `keep` (sessions with
/// lost jobs) and names what it does not know.
fn sweep(dir: &Path, keep: &[String]) -> anyhow::Result<Swept> {
    let mut swept = Swept::default();
    let entries = fs::read_dir(dir)
        .with_context(|| format!("cannot list the runtime dir {}", dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !KNOWN_ENTRIES.iter().any(|known| name == *known) {
            swept.left_alone.push(entry.path().display().to_string());
        }
    }
    let sessions = runtime::sessions_dir(dir);
    let meta = match fs::symlink_metadata(&sessions) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(swept),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot inspect {}", sessions.display()));
        }
    };
    let me = rustix::process::getuid().as_raw();
    if !meta.is_dir() || meta.uid() != me {
        anyhow::bail!(
            "{} is not a directory bashd made (a symlink, a file, or another user's); remove it and start bashd again",
            sessions.display()
        );
    }
    let entries =
        fs::read_dir(&sessions).with_context(|| format!("cannot list {}", sessions.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        // symlink_metadata: a symlink is never taken for the directory it points to.
        let ours = fs::symlink_metadata(&path)
            .is_ok_and(|meta| meta.is_dir() && meta.uid() == me && is_valid_session_id(&name));
        if !ours {
            swept.left_alone.push(path.display().to_string());
            continue;
        }
        if keep.contains(&name) {
            continue;
        }
        // remove_dir_all removes a symlink inside, never what it points to.
        match fs::remove_dir_all(&path) {
            Ok(()) => swept.removed.push(name),
            Err(e) => tracing::warn!("cannot remove stale session dir {}: {e}", path.display()),
        }
    }
    Ok(swept)
}

//! The disk budget of spill files (issue 18): `limits.max_session_spill_bytes` per
//! session and `limits.max_total_spill_bytes` in all. A stream asks for room before
//! each write to its spill file; past a budget, the files of the oldest finished jobs
//! (of the session, or of any session for the total) are removed first, and when no
//! finished job's file is left to remove, the stream stops spilling. A running job's
//! file is never removed.
//!
//! The ledger is shared by every job's supervisor, which writes synchronously on its
//! own task, and the jobs actor, which tells it when a job ends or is forgotten.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// What a job's spill files may take, and where to charge it.
#[derive(Debug, Clone)]
pub struct Charge {
    ledger: SpillLedger,
    session: String,
    job: u64,
    max_session: u64,
    max_total: u64,
}

impl Charge {
    /// Room for `bytes` more of this job's spill files, made by removing the files of
    /// finished jobs if need be; `Err` says which budget has none left.
    pub fn reserve(&self, bytes: u64) -> Result<(), String> {
        self.ledger.lock().reserve(
            &self.session,
            self.job,
            bytes,
            self.max_session,
            self.max_total,
        )
    }
}

/// Bytes of spill files on disk, by session and job. Cloning shares it.
#[derive(Debug, Clone, Default)]
pub struct SpillLedger(Arc<Mutex<Ledger>>);

#[derive(Debug, Default)]
struct Ledger {
    total: u64,
    sessions: HashMap<String, SessionSpill>,
    /// Jobs whose files were removed for a budget, with which.
    evicted: HashMap<u64, String>,
    /// Orders finished jobs across sessions, oldest first.
    next_seq: u64,
}

#[derive(Debug, Default)]
struct SessionSpill {
    used: u64,
    /// Bytes of each job that is still writing.
    running: HashMap<u64, u64>,
    /// Jobs that ended, oldest first.
    finished: VecDeque<Finished>,
}

#[derive(Debug)]
struct Finished {
    job: u64,
    seq: u64,
    bytes: u64,
    paths: Vec<PathBuf>,
}

impl SpillLedger {
    // A std mutex, not the actor: a stream's write is synchronous on its supervisor's
    // task, and what is done under the lock is arithmetic and, at worst, unlinking a
    // few files. Never held across an await.
    fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where job `job` of `session` charges its spill files.
    pub fn charge(&self, session: &str, job: u64, max_session: u64, max_total: u64) -> Charge {
        Charge {
            ledger: self.clone(),
            session: session.to_owned(),
            job,
            max_session,
            max_total,
        }
    }

    /// Job `job` ended: its files, `paths`, may be removed for a budget from now on.
    /// `bytes` is what they hold when the ledger did not see them written (a lost job
    /// of a dead daemon); otherwise what it charged counts.
    pub fn finished(&self, session: &str, job: u64, paths: Vec<PathBuf>, bytes: Option<u64>) {
        let mut ledger = self.lock();
        let seq = ledger.next_seq;
        ledger.next_seq += 1;
        let entry = ledger.sessions.entry(session.to_owned()).or_default();
        let charged = entry.running.remove(&job).unwrap_or(0);
        let bytes = match bytes {
            Some(bytes) => {
                entry.used += bytes;
                ledger.total += bytes;
                bytes
            }
            None => charged,
        };
        let entry = ledger
            .sessions
            .get_mut(session)
            .expect("the session's entry was made above");
        entry.finished.push_back(Finished {
            job,
            seq,
            bytes,
            paths,
        });
    }

    /// Job `job` is forgotten, and its files removed by the caller.
    pub fn forget(&self, session: &str, job: u64) {
        let mut ledger = self.lock();
        ledger.evicted.remove(&job);
        let Some(entry) = ledger.sessions.get_mut(session) else {
            return;
        };
        let mut bytes = entry.running.remove(&job).unwrap_or(0);
        if let Some(at) = entry.finished.iter().position(|f| f.job == job) {
            bytes += entry.finished.remove(at).map_or(0, |f| f.bytes);
        }
        entry.used -= bytes.min(entry.used);
        let empty = entry.used == 0 && entry.running.is_empty() && entry.finished.is_empty();
        if empty {
            ledger.sessions.remove(session);
        }
        ledger.total -= bytes.min(ledger.total);
    }

    /// Why job `job`'s files were removed, if they were.
    pub fn evicted(&self, job: u64) -> Option<String> {
        self.lock().evicted.get(&job).cloned()
    }

    /// Bytes charged now, in all and for `session`.
    #[cfg(test)]
    fn used(&self, session: &str) -> (u64, u64) {
        let ledger = self.lock();
        let session = ledger.sessions.get(session).map_or(0, |s| s.used);
        (ledger.total, session)
    }
}

impl Ledger {
    fn reserve(
        &mut self,
        session: &str,
        job: u64,
        bytes: u64,
        max_session: u64,
        max_total: u64,
    ) -> Result<(), String> {
        loop {
            let used = self.sessions.get(session).map_or(0, |s| s.used);
            let session_over = used + bytes > max_session;
            let total_over = self.total + bytes > max_total;
            if !session_over && !total_over {
                break;
            }
            // The oldest finished job of this session, or of any session.
            let victim = if session_over {
                self.sessions
                    .get(session)
                    .and_then(|s| s.finished.front())
                    .map(|f| (session.to_owned(), f.seq))
            } else {
                self.sessions
                    .iter()
                    .filter_map(|(name, s)| Some((name.clone(), s.finished.front()?.seq)))
                    .min_by_key(|(_, seq)| *seq)
            };
            let Some((victim_session, _)) = victim else {
                return Err(if session_over {
                    format!(
                        "session {session} reached limits.max_session_spill_bytes ({max_session} bytes) and no finished job's output file is left to remove"
                    )
                } else {
                    format!(
                        "bashd's output files reached limits.max_total_spill_bytes ({max_total} bytes) and no finished job's output file is left to remove"
                    )
                });
            };
            let entry = self
                .sessions
                .get_mut(&victim_session)
                .expect("the victim's session is in the ledger");
            let removed = entry
                .finished
                .pop_front()
                .expect("the victim is at the front");
            entry.used -= removed.bytes.min(entry.used);
            self.total -= removed.bytes.min(self.total);
            for path in &removed.paths {
                match std::fs::remove_file(path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => tracing::warn!("cannot remove {}: {e}", path.display()),
                }
            }
            let why = if session_over {
                format!(
                    "removed to keep session {victim_session} under limits.max_session_spill_bytes ({max_session} bytes)"
                )
            } else {
                format!(
                    "removed to keep bashd's output files under limits.max_total_spill_bytes ({max_total} bytes)"
                )
            };
            tracing::info!(job = removed.job, session = %victim_session, "output files {why}");
            self.evicted.insert(removed.job, why);
        }
        let entry = self.sessions.entry(session.to_owned()).or_default();
        entry.used += bytes;
        *entry.running.entry(job).or_default() += bytes;
        self.total += bytes;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_finished_job_of_the_session_goes_first_and_a_running_one_never() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = SpillLedger::default();
        let file = |job: u64| {
            let path = dir.path().join(format!("j{job}.stdout"));
            std::fs::write(&path, b"x").unwrap();
            path
        };
        for job in 1..=3 {
            let charge = ledger.charge("s", job, 100, 1000);
            charge.reserve(40).unwrap();
            ledger.finished("s", job, vec![file(job)], None);
        }
        // 120 of 100 would not fit: j1 went when j3 asked.
        assert_eq!(ledger.used("s"), (80, 80));
        assert!(
            ledger
                .evicted(1)
                .unwrap()
                .contains("max_session_spill_bytes")
        );
        assert!(!dir.path().join("j1.stdout").exists());
        assert!(dir.path().join("j2.stdout").exists());

        let running = ledger.charge("s", 4, 100, 1000);
        running.reserve(90).unwrap();
        // j2 and j3 were removed for it; nothing finished is left, so more is refused.
        assert_eq!(ledger.used("s"), (90, 90));
        let err = running.reserve(20).unwrap_err();
        assert!(err.contains("no finished job's output file"), "{err}");
        ledger.forget("s", 4);
        assert_eq!(ledger.used("s"), (0, 0));
    }

    #[test]
    fn the_total_takes_the_oldest_finished_job_of_any_session() {
        let ledger = SpillLedger::default();
        ledger.charge("a", 1, 100, 100).reserve(50).unwrap();
        ledger.finished("a", 1, Vec::new(), None);
        ledger.finished("b", 2, Vec::new(), Some(30));
        ledger.charge("c", 3, 100, 100).reserve(60).unwrap();
        assert!(ledger.evicted(1).unwrap().contains("max_total_spill_bytes"));
        assert_eq!(ledger.evicted(2), None);
        assert_eq!(ledger.used("c"), (90, 60));
    }
}

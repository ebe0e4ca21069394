//! Who is told which jobs changed (`bashc top`'s watches, `requests/watch.rs`): the
//! actor touches a job here at its start, each change of state, its end and when it
//! is forgotten; each watch's task takes the set of jobs changed since its last look.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The open watches, as the actor holds them: each is told the numbers of the jobs
/// that changed. A watch whose task has ended is dropped at the next change.
#[derive(Default)]
pub(in crate::jobs) struct Watchers {
    list: Vec<Arc<Watcher>>,
}

impl Watchers {
    /// A new watch, told every change from now on.
    pub(in crate::jobs) fn open(&mut self) -> Arc<Watcher> {
        let watcher = Arc::new(Watcher::default());
        self.list.push(Arc::clone(&watcher));
        watcher
    }

    /// Job `n` started, changed state, ended or was forgotten.
    pub(in crate::jobs) fn touch(&mut self, n: u64) {
        if self.list.is_empty() {
            return;
        }
        self.list.retain(|watcher| Arc::strong_count(watcher) > 1);
        for watcher in &self.list {
            lock(&watcher.changed).insert(n);
        }
    }
}

/// One watch's side of [`Watchers`]: the jobs changed since its last tick. A set, so
/// that it stays as small as the table however often its jobs change.
#[derive(Default)]
pub(in crate::jobs) struct Watcher {
    /// A std mutex: held only to insert or take, never across an await.
    changed: Mutex<HashSet<u64>>,
}

impl Watcher {
    /// The jobs changed since the last take.
    pub(in crate::jobs) fn take(&self) -> HashSet<u64> {
        std::mem::take(&mut *lock(&self.changed))
    }
}

fn lock(set: &Mutex<HashSet<u64>>) -> std::sync::MutexGuard<'_, HashSet<u64>> {
    set.lock().unwrap_or_else(|e| e.into_inner())
}

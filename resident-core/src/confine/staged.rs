//! A confined job's mounts made ahead, in the zygote's kit (`resident/src/kit.rs`):
//! what a job with one spec and workdir would find (`namespaces::Hidden::find`: its
//! roots, every `.git` to bind read-only, its `deny_read` paths) is found by the
//! zygote after such a job was handed on, and the kit's maker makes the mounts in the
//! kit's mount namespace before any job enters it. The next job with that spec and
//! workdir enters the namespace with its file system confined already, and only
//! applies Landlock, its capabilities and seccomp; the finding and the mounts (0.2 –
//! 0.3 ms of the job's start, measured, with outliers of milliseconds) are off its
//! path.
//!
//! What was found is what the job's own finding would give only while every path it
//! depends on is as it was: each root, each `deny_read` path and the runtime dir (as
//! `stat` sees them), each `.git` looked for, and each directory the `.git` walk
//! listed (a name made, removed or renamed in it changes its times), all looked at
//! *before* they were read ([`Looks`]). The zygote looks at them again when a job
//! takes the kit, and a kit whose paths changed is thrown away: the job finds and
//! mounts for itself, as without it, and the next kit is staged from what is there
//! then. So a nested repository cloned into a workspace, a credential file made, or a
//! root removed since, is mounted as the job's own finding would mount it.
//!
//! Not staged (the job mounts for itself): a job with a terminal (its own is bound
//! over `/dev/console`), one granted writing `.git` (`git_write`), one whose `.git`
//! walk found a `.git` that is not a directory (what a `.git` file names is read
//! from its contents; the zygote reads nothing a job made, which could be a FIFO),
//! and a staging whose looks saw a time within 2 s of the first look (a file
//! system's tick).

use std::path::{Path, PathBuf};

use super::namespaces::Hidden;
use super::reads::Looks;
use super::{Failure, Spec};

/// How many paths a staging may depend on: each is looked at again on the job's
/// path (a `stat` each), and the zygote's walk for them holds a spawn that comes
/// meanwhile, so a tree with more directories than this is not staged.
pub(super) const MOST_LOOKS: usize = 500;

/// The mounts of a job with one spec and workdir, found ahead, with what they depend
/// on.
#[derive(Debug)]
pub struct Staged {
    spec: Spec,
    /// The workdir as the spawn names it, and as it resolved.
    workdir: Vec<u8>,
    resolved: PathBuf,
    hidden: Hidden,
    looks: Looks,
}

impl Staged {
    /// Whether a job with `spec`, its workdir `workdir` and a terminal or not may have
    /// its mounts staged at all.
    pub fn stageable(spec: &Spec, terminal: bool) -> bool {
        spec.files && !terminal && !spec.git_write
    }

    /// Finds what a job with `spec` in `workdir` would mount; `None` where that
    /// cannot be staged (above), or not now (a time within the clock's tick).
    pub fn find(spec: &Spec, workdir: &[u8]) -> Option<Staged> {
        use std::os::unix::ffi::OsStrExt;
        if !Staged::stageable(spec, false) {
            return None;
        }
        let resolved = std::fs::canonicalize(std::ffi::OsStr::from_bytes(workdir)).ok()?;
        let mut looks = Looks::default();
        let hidden = Hidden::find_looked(spec, &resolved, &mut looks)?;
        if looks.racy() || looks.len() > MOST_LOOKS {
            return None;
        }
        Some(Staged {
            spec: spec.clone(),
            workdir: workdir.to_vec(),
            resolved,
            hidden,
            looks,
        })
    }

    /// Whether these are the mounts of a job with `spec` in `workdir`.
    pub fn fits(&self, spec: &Spec, workdir: &[u8]) -> bool {
        self.spec == *spec && self.workdir == workdir
    }

    /// Whether everything found is as it was found: the workdir resolves where it did
    /// and every path looked at is unchanged.
    pub fn fresh(&self) -> bool {
        use std::os::unix::ffi::OsStrExt;
        std::fs::canonicalize(std::ffi::OsStr::from_bytes(&self.workdir))
            .is_ok_and(|now| now == self.resolved)
            && self.looks.unchanged()
    }

    /// Makes the mounts, in the mount namespace of the kit the calling process (the
    /// kit's maker) has just made.
    pub fn mount(&self) -> Result<(), Failure> {
        self.hidden.mount()
    }

    /// The workdir, resolved.
    pub fn resolved(&self) -> &Path {
        &self.resolved
    }
}

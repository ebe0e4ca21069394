//! Where a confined job may read, as Landlock read rules: everywhere but the
//! `deny_read` paths, including a name that appears there after the job started
//! (issue 42, hole 5).
//!
//! The empty mount over each hidden path (`namespaces.rs`) covers only what exists when
//! the job starts, and the kernel drops it when its target is renamed over: a
//! `~/.git-credentials` made later, a `~/.netrc` replaced by rename (`git
//! credential-store`, `docker login`) or a `~/.ssh` renamed and made again were read by
//! a job already running. Landlock has no rule that takes away, only rules that grant,
//! and a rule holds the inode it was given, not a name. So reads are granted on what
//! exists at the start, around each hidden path: every entry of each directory on the
//! way from `/` to a hidden path (a "parent"), but the parents themselves and the
//! hidden paths. A name that appears later in a parent is then granted nothing: a
//! hidden path made or replaced later, and, the price of it, any other file made later
//! directly in a parent (`$HOME`, for the default `deny_read`). Beneath a granted
//! entry everything stays readable, made later or not; the writable roots are granted
//! in full apart from this (`landlock.rs`), so a workspace and `TMPDIR` are always read.
//!
//! Listing is granted everywhere (`ReadDir` beneath `/`): `ls ~` works whatever was
//! made later, at the price that the names (not the contents) in a hidden directory
//! made later can be listed.
//!
//! Listing the parents and opening their entries cost a job 0.2 – 0.4 ms, so the
//! zygote makes the rules ahead, once for a `deny_read` list ([`Prepared`]), as a
//! Landlock ruleset of the reads alone that each job's shell then only applies. Such a
//! ruleset grants the inodes that were there when it was made: it is handed to a job
//! only while every parent is as it was then (a name made, removed or renamed in a
//! directory changes its modification time), so what it grants is what the job's
//! own listing would grant. Otherwise the job lists them itself, and the zygote makes
//! the rules again.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};

/// What to grant read on: an entry of a parent, opened without following it, its
/// path, and whether it is a directory (a file takes only the file rights).
pub(super) struct Grant {
    pub fd: OwnedFd,
    pub path: PathBuf,
    pub dir: bool,
}

/// The paths Landlock must not grant, for `deny_read`: each path as its parent
/// resolves (symlinks and `..` gone; the part that does not exist yet kept as named),
/// and, for one that is a symlink now, what it names too. The name is kept so that
/// what a later rename puts there is hidden; the target, because reads through the
/// symlink are checked where it leads.
pub(super) fn hidden(deny_read: &[PathBuf]) -> Vec<PathBuf> {
    // Most paths share a parent (`$HOME`): each is resolved once.
    let mut resolved: HashMap<PathBuf, PathBuf> = HashMap::new();
    let mut hidden = Vec::new();
    for path in deny_read {
        let named = resolve_parent(path, &mut resolved);
        // Only a symlink at the last name leads elsewhere: one `lstat` to tell.
        if fs::symlink_metadata(&named).is_ok_and(|meta| meta.is_symlink())
            && let Ok(target) = fs::canonicalize(&named)
        {
            hidden.push(target);
        }
        hidden.push(named);
    }
    hidden
}

/// `path` with its parent resolved as far as it exists, and the rest kept as named
/// (`..` taken away lexically). `resolved`: the prefixes resolved so far.
fn resolve_parent(path: &Path, resolved: &mut HashMap<PathBuf, PathBuf>) -> PathBuf {
    let components: Vec<Component> = path.components().collect();
    // The longest prefix that resolves, short of the last name, which is kept: a
    // symlink there is hidden by its name (and by its target, in `hidden`).
    let last = components.len().saturating_sub(1);
    let (mut out, rest) = (0..=last)
        .rev()
        .find_map(|at| {
            let prefix: PathBuf = components[..at].iter().collect();
            let found = if at == 0 {
                Some(PathBuf::from("/"))
            } else if let Some(known) = resolved.get(&prefix) {
                Some(known.clone())
            } else {
                let found = fs::canonicalize(&prefix).ok()?;
                resolved.insert(prefix, found.clone());
                Some(found)
            };
            found.map(|found| (found, &components[at..]))
        })
        .unwrap_or((PathBuf::from("/"), &components[..]));
    for component in rest {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Every directory on the way from `/` to a hidden path, but one that is hidden or
/// beneath one: their entries are granted one by one.
pub(super) fn parents(hidden: &[PathBuf]) -> BTreeSet<PathBuf> {
    let is_hidden = |path: &Path| hidden.iter().any(|h| path.starts_with(h));
    hidden
        .iter()
        .flat_map(|path| path.ancestors().skip(1))
        .filter(|parent| !is_hidden(parent))
        .map(Path::to_path_buf)
        .collect()
}

/// The entries to grant read beneath: each entry of each parent that exists, but a
/// parent, a hidden path or a symlink (a read through a symlink is checked where it
/// leads, which is granted or hidden in its own place; granting what it names would
/// grant a hidden path to whoever points a symlink at it). Empty `deny_read`: nothing,
/// and the caller grants `/` whole.
pub(super) fn grants(hidden: &[PathBuf]) -> Vec<Grant> {
    let parents = parents(hidden);
    let mut grants = Vec::new();
    for parent in &parents {
        // Opened without following its last name: a parent is a resolved path, and a
        // symlink put in its place since is not followed to what it names. Listed and
        // opened from this one descriptor, so the entries are this directory's.
        let Ok(mut dir) = rustix::fs::open(
            parent,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .and_then(Dir::new) else {
            // Missing (a hidden path beneath a directory made later) or not the user's
            // to list: nothing in it is granted.
            continue;
        };
        let mut entries = Vec::new();
        while let Some(Ok(entry)) = dir.read() {
            let name = entry.file_name();
            if name != c"." && name != c".." {
                entries.push((name.to_owned(), entry.file_type()));
            }
        }
        let Ok(dir) = dir.fd() else {
            continue;
        };
        for (name, kind) in entries {
            let path = parent.join(OsStr::from_bytes(name.as_bytes()));
            if parents.contains(&path) || hidden.iter().any(|h| path.starts_with(h)) {
                continue;
            }
            // The type as the listing says; a `stat` only where the file system
            // does not tell it.
            let kind = match kind {
                FileType::Unknown => {
                    match rustix::fs::statat(dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                        Err(_) => continue,
                    }
                }
                kind => kind,
            };
            if kind == FileType::Symlink {
                continue;
            }
            // Opened without following: if the entry was made a symlink since it was
            // listed, the rule holds the symlink itself, which grants nothing (a read
            // through it is checked where it leads).
            let Ok(fd) = rustix::fs::openat(
                dir,
                name.as_c_str(),
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) else {
                continue;
            };
            grants.push(Grant {
                fd,
                path,
                dir: kind == FileType::Directory,
            });
        }
    }
    grants
}

/// The read rules of one `deny_read` list, made ahead by the zygote: a Landlock
/// ruleset that handles reads only (`landlock::read_layer`), which a job whose spec
/// it fits applies beside a ruleset of its writes (`landlock::restrict_writes`).
pub struct Prepared {
    deny_read: Vec<PathBuf>,
    ruleset: OwnedFd,
    /// Each parent, and how it was before it was listed (`None`: missing).
    parents: Vec<(PathBuf, Option<Seen>)>,
    /// The directories granted, beneath which a job's roots and devices must be for
    /// these rules to read them.
    granted: Vec<PathBuf>,
}

/// Why [`Prepared::make`] made nothing.
#[derive(Debug, PartialEq, Eq)]
pub enum Unprepared {
    /// A path of the list is not as it resolves (a symlink, `..`): what the rules
    /// hide would hang on names no parent's time tells about. Each job makes its own.
    Unresolved,
    /// A parent changed within 2 s (a file system's tick), or the ruleset could not
    /// be made: try again later.
    NotNow,
}

/// What a directory's inode and times were: a name made, removed or renamed in it
/// changes both times, to the kernel's clock tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// How long before a first look a time stamped counts as racy: the tick of a file
/// system that stamps whole seconds, or two (FAT; ext4 with 128-byte inodes, some
/// NFS, 9p and FUSE stamp seconds). A change there within the tick of a time seen
/// leaves the time as it was; the kernel's coarse clock is read to the nanosecond.
const TICK_SECS: i64 = 2;

impl Seen {
    /// Whether a time of this was stamped within [`TICK_SECS`] of `start` or after
    /// it, so that a change made after the look might not change it.
    fn near(&self, start: (i64, i64)) -> bool {
        stamped_near(self.mtime, start) || stamped_near(self.ctime, start)
    }
}

fn stamped_near(time: (i64, i64), start: (i64, i64)) -> bool {
    time >= (start.0.saturating_sub(TICK_SECS), start.1)
}

fn seen(path: &Path) -> Option<Seen> {
    let stat = rustix::fs::lstat(path).ok()?;
    Some(Seen {
        dev: stat.st_dev,
        ino: stat.st_ino,
        mtime: (stat.st_mtime, stat.st_mtime_nsec as i64),
        ctime: (stat.st_ctime, stat.st_ctime_nsec as i64),
    })
}

/// `stat` of `path`, following a symlink at its last name, as [`seen`] keeps it.
fn seen_through(path: &Path) -> Option<Seen> {
    let stat = rustix::fs::stat(path).ok()?;
    Some(Seen {
        dev: stat.st_dev,
        ino: stat.st_ino,
        mtime: (stat.st_mtime, stat.st_mtime_nsec as i64),
        ctime: (stat.st_ctime, stat.st_ctime_nsec as i64),
    })
}

/// Paths looked at, each as it was (`None`: missing), before what depends on them was
/// read: while each is still so, what was read from them is what reading again would
/// give (`staged.rs`). A directory's times change with every name made, removed or
/// renamed in it, to the kernel's clock tick; an entry replaced changes its inode.
#[derive(Debug, Default)]
pub(super) struct Looks {
    /// When the first look was taken: a time stamped at or after it may hide a
    /// later change within the same tick.
    start: Option<(i64, i64)>,
    seen: Vec<(PathBuf, bool, Option<Seen>)>,
    /// What was read depends on more than the looks tell.
    spoiled: bool,
}

impl Looks {
    /// Looks at `path` now, following a symlink at its last name with `through`.
    pub(super) fn push(&mut self, path: PathBuf, through: bool) {
        self.start.get_or_insert_with(coarse_now);
        let seen = if through {
            seen_through(&path)
        } else {
            seen(&path)
        };
        self.seen.push((path, through, seen));
    }

    /// Says that what was read depends on more than the looks tell.
    pub(super) fn spoil(&mut self) {
        self.spoiled = true;
    }

    /// Whether a time seen was stamped within a file system's tick ([`TICK_SECS`])
    /// of the first look, so that a change made right after it would not be told
    /// apart (or the looks were spoiled).
    pub(super) fn racy(&self) -> bool {
        if self.spoiled {
            return true;
        }
        let Some(start) = self.start else {
            return false;
        };
        self.seen
            .iter()
            .filter_map(|(_, _, seen)| seen.as_ref())
            .any(|seen| seen.near(start))
    }

    /// Whether every path is as it was seen.
    pub(super) fn unchanged(&self) -> bool {
        self.seen.iter().all(|(path, through, then)| {
            let now = if *through {
                seen_through(path)
            } else {
                seen(path)
            };
            now == *then
        })
    }

    pub(super) fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether what was read depends on more than the looks tell.
    pub(super) fn spoiled(&self) -> bool {
        self.spoiled
    }
}

/// The kernel's coarse clock, the one it stamps a directory's times with.
fn coarse_now() -> (i64, i64) {
    // SAFETY: plain data, filled in by clock_gettime next.
    let mut now: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a timespec of this frame.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut now) };
    (now.tv_sec, now.tv_nsec)
}

impl Prepared {
    /// Lists the parents of `deny_read` and makes the read ruleset of their entries,
    /// as a job would (`grants`).
    pub fn make(deny_read: &[PathBuf]) -> Result<Prepared, Unprepared> {
        // Before the parents are looked at: a change stamped at or after this may have
        // come after the listing, within the same tick, and not be told apart.
        let start = coarse_now();
        let hidden = hidden(deny_read);
        if hidden != deny_read {
            return Err(Unprepared::Unresolved);
        }
        // Each parent is looked at before it is listed: one that changes after is
        // found changed when the rules are handed out.
        let parents: Vec<(PathBuf, Option<Seen>)> = parents(&hidden)
            .into_iter()
            .map(|parent| {
                let seen = seen(&parent);
                (parent, seen)
            })
            .collect();
        if parents
            .iter()
            .any(|(_, seen)| seen.as_ref().is_some_and(|seen| seen.near(start)))
        {
            return Err(Unprepared::NotNow);
        }
        let grants = grants(&hidden);
        let granted = grants
            .iter()
            .filter(|grant| grant.dir)
            .map(|grant| grant.path.clone())
            .collect();
        let ruleset = super::landlock::read_layer(grants).map_err(|_| Unprepared::NotNow)?;
        Ok(Prepared {
            deny_read: deny_read.to_vec(),
            ruleset,
            parents,
            granted,
        })
    }

    /// Whether these are the rules of `deny_read`.
    pub fn of(&self, deny_read: &[PathBuf]) -> bool {
        self.deny_read == deny_read
    }

    /// Whether every parent is as it was when listed, so that each entry granted still
    /// has its name and no name was added: what a job's own listing would grant now.
    pub fn fresh(&self) -> bool {
        self.parents
            .iter()
            .all(|(parent, then)| seen(parent) == *then)
    }

    /// Whether these rules read every path a job with `writable` roots must read in
    /// full: its roots, and the devices it writes (`landlock::DEVICES`). The job's own
    /// rules grant those whole; these grant only what is beneath a granted directory.
    /// Such a directory must not be one the job mounts over (the cover of the runtime
    /// dir, its devpts, its terminal): Landlock skips a mount point's own rule when a
    /// path crosses the mount on it, and these rules hold the host's inode there, not
    /// the mount's, as a job's own listing after its mounts would.
    pub fn cover(&self, writable: &[PathBuf], runtime_dir: Option<&Path>) -> bool {
        let mounted_over = |dir: &Path| {
            runtime_dir.is_some_and(|runtime| dir.starts_with(runtime))
                || dir == Path::new("/dev/pts")
                || dir == Path::new("/dev/console")
        };
        let covered = |path: &Path| {
            self.granted
                .iter()
                .any(|dir| path.starts_with(dir) && !mounted_over(dir))
        };
        writable.iter().all(|root| covered(root))
            && super::landlock::DEVICES
                .iter()
                .chain(&["/dev/console"])
                .all(|device| covered(Path::new(device)))
    }

    /// A descriptor of the ruleset, for one job.
    pub fn ruleset(&self) -> std::io::Result<OwnedFd> {
        self.ruleset.as_fd().try_clone_to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_within_a_coarse_file_systems_tick_of_the_first_look_is_racy() {
        let start = (1_000, 500_000_000);
        // Whole seconds (ext4 with 128-byte inodes, 9p), two (FAT): a change made
        // after the look, within the tick, stamps the time seen again.
        assert!(stamped_near((1_000, 0), start));
        assert!(stamped_near((999, 0), start));
        assert!(stamped_near((998, 500_000_000), start));
        assert!(stamped_near((1_001, 0), start));
        assert!(!stamped_near((998, 499_999_999), start));
        assert!(!stamped_near((990, 0), start));
        // A directory just made, looked at now: racy, whatever its file system's tick.
        let temp = tempfile::tempdir().unwrap();
        let mut looks = Looks::default();
        looks.push(temp.path().to_owned(), false);
        assert!(looks.racy(), "{looks:?}");
    }

    #[test]
    fn a_missing_hidden_path_keeps_its_name_under_its_resolved_parent() {
        let temp = tempfile::tempdir().unwrap();
        let home = fs::canonicalize(temp.path()).unwrap();
        fs::create_dir(home.join("real")).unwrap();
        std::os::unix::fs::symlink(home.join("real"), home.join("link")).unwrap();
        let hidden = hidden(&[home.join("link/.ssh/id"), home.join("nope/a/../b")]);
        assert_eq!(
            hidden,
            vec![home.join("real/.ssh/id"), home.join("nope/b")],
            "{hidden:?}"
        );
    }

    #[test]
    fn a_hidden_symlink_hides_its_name_and_what_it_names() {
        let temp = tempfile::tempdir().unwrap();
        let home = fs::canonicalize(temp.path()).unwrap();
        fs::write(home.join("store"), "secret").unwrap();
        std::os::unix::fs::symlink(home.join("store"), home.join(".netrc")).unwrap();
        let hidden = hidden(&[home.join(".netrc")]);
        assert_eq!(hidden, vec![home.join("store"), home.join(".netrc")]);
    }

    #[test]
    fn every_entry_around_a_hidden_path_is_granted_but_it_and_symlinks() {
        let temp = tempfile::tempdir().unwrap();
        let home = fs::canonicalize(temp.path()).unwrap();
        fs::create_dir(home.join(".ssh")).unwrap();
        fs::create_dir(home.join("ws")).unwrap();
        fs::write(home.join(".bashrc"), "").unwrap();
        std::os::unix::fs::symlink("/", home.join("root")).unwrap();
        let hidden = [home.join(".ssh"), home.join(".config/gh")];
        let parents = parents(&hidden);
        assert!(parents.contains(Path::new("/")));
        assert!(parents.contains(&home));
        assert!(parents.contains(&home.join(".config")));
        assert!(!parents.contains(&home.join(".ssh")));
        let granted: Vec<PathBuf> = grants(&hidden)
            .iter()
            .map(|grant| fs::read_link(format!("/proc/self/fd/{}", fd_number(&grant.fd))).unwrap())
            .filter(|path| path.starts_with(&home))
            .collect();
        assert_eq!(granted.len(), 2, "{granted:?}");
        assert!(granted.contains(&home.join("ws")) && granted.contains(&home.join(".bashrc")));
    }

    fn fd_number(fd: &OwnedFd) -> i32 {
        use std::os::fd::AsRawFd;
        fd.as_raw_fd()
    }
}

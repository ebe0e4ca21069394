//! Which `.git` a confined job gets read-only (issue 30): a repository's `.git` holds
//! what git runs on the person's behalf later (`core.fsmonitor`, `core.pager`, hooks),
//! so a job that may write the work tree still may not write its `.git`.
//!
//! Covered: the `.git` (directory or file) at each writable root, always, whatever
//! the walk's budget (issue 42); every `.git` a bounded walk beneath the writable
//! roots finds (nested repositories, submodules, worktrees); the `.git` of the
//! workdir's repository; and for a `.git` file the `gitdir:` it names and that
//! gitdir's `commondir` (a worktree's shared repository). The walk does not enter
//! [`SKIPPED`] directories, symlinks or `.git` directories, goes [`MAX_DEPTH`]
//! directories deep and reads at most [`MAX_ENTRIES`] entries; a nested `.git`
//! beyond those is not covered (the README says so). What a `.git` file or a
//! `commondir` names is read only from a regular file, opened without following a
//! symlink or blocking, 4 KiB at most: a job may have made either a FIFO or a
//! symlink to a device, and the zygote's staging walk (`staged.rs`) reads none.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, statat};

use super::reads::Looks;

/// How many directories below a writable root the walk looks.
pub const MAX_DEPTH: usize = 6;
/// How many directory entries the walk reads in all, over every writable root: the
/// walk runs at every sandboxed job's start.
pub const MAX_ENTRIES: usize = 20_000;
/// Directories the walk does not enter: trees of build outputs and installed
/// packages, which hold no repository of the person's and many entries.
pub const SKIPPED: &[&str] = &[
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    ".tox",
    ".mypy_cache",
    ".cache",
];

/// The paths to bind read-only for a job whose writable roots are `writable` (those
/// that exist), in an order where none is beneath one listed before it. The walk
/// does not enter the roots in `unwalked` (bashd's tool caches).
pub(super) fn read_only(writable: &[PathBuf], unwalked: &[PathBuf]) -> Vec<PathBuf> {
    let workdir = std::env::current_dir().ok();
    read_only_in(writable, unwalked, workdir.as_deref(), &mut None)
}

/// [`read_only`] for the job whose workdir, resolved, is `workdir`; with `looks`,
/// each directory listed and each `.git` looked for is looked at first and noted
/// there (`staged.rs`: what tells that the answer still holds).
pub(super) fn read_only_in(
    writable: &[PathBuf],
    unwalked: &[PathBuf],
    workdir: Option<&Path>,
    looks: &mut Option<&mut Looks>,
) -> Vec<PathBuf> {
    // The `.git` of a directory, if it has one (a directory, or the file of a
    // worktree or a submodule).
    let mut git_of = |dir: &Path| {
        let git = dir.join(".git");
        if let Some(looks) = looks.as_deref_mut() {
            looks.push(git.clone(), false);
        }
        git.symlink_metadata().is_ok().then_some(git)
    };
    // Each root's own `.git` outright, however many entries are beside it (issue 42):
    // the walk's budget is for the repositories nested below.
    let mut gits: Vec<PathBuf> = writable.iter().filter_map(|root| git_of(root)).collect();
    // The workdir's own repository, even where its `.git` is above the walk's reach.
    let workdir_git = workdir.and_then(|dir| dir.ancestors().find_map(&mut git_of));
    let mut budget = MAX_ENTRIES;
    for root in writable
        .iter()
        .filter(|root| root.is_dir() && !unwalked.contains(root))
    {
        walk(root, &mut budget, &mut gits, looks);
    }
    gits.extend(workdir_git);
    if let Some(looks) = looks.as_deref_mut() {
        if gits
            .iter()
            .any(|git| !git.symlink_metadata().is_ok_and(|meta| meta.is_dir()))
        {
            // A `.git` file names what else to bind in its contents, which no look
            // tells about.
            looks.spoil();
        }
        if looks.spoiled() {
            // The answer is not used: nothing named is read. The zygote reads
            // nothing a job put in a workspace, so a `.git` that is a FIFO, a
            // device or a symlink to one cannot hold it (and every job's start).
            return Vec::new();
        }
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for git in gits {
        let mut named = vec![git.clone()];
        named.extend(named_by(&git));
        for path in named {
            // What is outside every writable root is read-only already.
            if writable.iter().any(|root| path.starts_with(root)) && !out.contains(&path) {
                out.push(path);
            }
        }
    }
    // A path beneath one bound read-only (recursively) needs no mount of its own.
    out.sort();
    let mut kept: Vec<PathBuf> = Vec::new();
    for path in out {
        if !kept.iter().any(|above| path.starts_with(above)) {
            kept.push(path);
        }
    }
    kept
}

/// What git runs code from in a `.git` directory: its config (`core.fsmonitor`,
/// `core.pager`, aliases, filters), its hooks, `info` (attributes that name
/// filters), and the repositories and worktrees kept inside it (each with a config,
/// hooks and gitdir pointers of its own). A job granted writing `.git` (issue 44)
/// still may not write these.
pub const CODE: &[&str] = &[
    "config",
    "config.worktree",
    "hooks",
    "info",
    "modules",
    "worktrees",
];

/// `read_only` with the `.git` directory of each writable root let writable but for
/// [`CODE`] within it, for a job a person granted a commit (issue 44). Nested
/// repositories, `.git` files and what they name stay read-only whole.
pub(super) fn writable_roots_git(read_only: Vec<PathBuf>, writable: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in read_only {
        let own = path.is_dir()
            && path.file_name().is_some_and(|name| name == ".git")
            && path
                .parent()
                .is_some_and(|root| writable.iter().any(|w| w == root));
        if own {
            out.extend(
                CODE.iter()
                    .map(|name| path.join(name))
                    .filter(|p| p.exists()),
            );
        } else {
            out.push(path);
        }
    }
    out
}

/// Breadth first, so that the shallow repositories are found before the budget runs
/// out.
fn walk(root: &Path, budget: &mut usize, gits: &mut Vec<PathBuf>, looks: &mut Option<&mut Looks>) {
    let mut dirs = VecDeque::from([(root.to_owned(), 0usize)]);
    while let Some((dir, depth)) = dirs.pop_front() {
        if let Some(looks) = looks.as_deref_mut() {
            if looks.len() > super::staged::MOST_LOOKS {
                // Too many to stage: the walk stops here, and its answer is not used.
                looks.spoil();
                return;
            }
            // Before it is listed: a name made, removed or renamed in it after changes
            // what was seen.
            looks.push(dir.clone(), depth == 0);
        }
        // Below the root, not followed at its last name: a directory listed as one
        // and replaced by a symlink since is not walked where the symlink leads.
        let follow = if depth == 0 {
            OFlags::empty()
        } else {
            OFlags::NOFOLLOW
        };
        let Ok(mut entries) = rustix::fs::open(
            &dir,
            OFlags::RDONLY | OFlags::DIRECTORY | follow | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .and_then(Dir::new) else {
            continue;
        };
        while let Some(Ok(entry)) = entries.read() {
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            if *budget == 0 {
                return;
            }
            *budget -= 1;
            if name == ".git" {
                gits.push(dir.join(name));
                continue;
            }
            // Not followed: a symlink's target is outside the tree or walked anyway.
            // The type as the listing says; a `stat` only where the file system does
            // not tell it.
            let kind = match entry.file_type() {
                FileType::Unknown => entries
                    .fd()
                    .and_then(|fd| statat(fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW))
                    .map_or(FileType::Unknown, |stat| {
                        FileType::from_raw_mode(stat.st_mode)
                    }),
                kind => kind,
            };
            let is_dir = kind == FileType::Directory;
            if is_dir && depth < MAX_DEPTH && !SKIPPED.iter().any(|skip| name == *skip) {
                dirs.push_back((dir.join(name), depth + 1));
            }
        }
    }
}

/// What a `.git` file names: its `gitdir:` and that gitdir's `commondir`, relative
/// paths read from where they are written, as git reads them.
fn named_by(git: &Path) -> Vec<PathBuf> {
    let Some(text) = small_file(git) else {
        return Vec::new();
    };
    let Some(gitdir) = text.lines().find_map(|line| line.strip_prefix("gitdir:")) else {
        return Vec::new();
    };
    let base = git.parent().unwrap_or(Path::new("/"));
    let gitdir = base.join(gitdir.trim());
    let Ok(gitdir) = gitdir.canonicalize() else {
        return Vec::new();
    };
    let mut named = vec![gitdir.clone()];
    if let Some(common) = small_file(&gitdir.join("commondir"))
        && let Ok(common) = gitdir.join(common.trim()).canonicalize()
    {
        named.push(common);
    }
    named
}

/// How much of a `.git` file or a `commondir` is read: a path and a few words.
const MOST_READ: usize = 4096;

/// The text of `path` if it is a regular file (not through a symlink), its first
/// [`MOST_READ`] bytes: a `.git` that is a FIFO, a device or a symlink to one (made
/// by a job in its workspace) neither blocks the walk nor feeds it without end.
fn small_file(path: &Path) -> Option<String> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    if FileType::from_raw_mode(rustix::fs::fstat(&fd).ok()?.st_mode) != FileType::RegularFile {
        return None;
    }
    let mut text = Vec::new();
    fs::File::from(fd)
        .take(MOST_READ as u64)
        .read_to_end(&mut text)
        .ok()?;
    String::from_utf8(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwalked_root_is_not_walked_but_a_root_beside_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (ws, cache) = (base.join("ws"), base.join("cache"));
        for sub in ["ws/dep/.git", "cache/cargo/git/checkouts/x/.git"] {
            fs::create_dir_all(base.join(sub)).unwrap();
        }
        let roots = [ws.clone(), cache.clone()];
        let found = read_only(&roots, std::slice::from_ref(&cache));
        assert_eq!(found, [ws.join("dep/.git")]);
        let walked = read_only(&roots, &[]);
        assert!(
            walked.contains(&cache.join("cargo/git/checkouts/x/.git")),
            "{walked:?}"
        );
    }

    #[test]
    fn nested_repositories_worktrees_and_their_gitdirs_are_found_skipped_trees_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in [
            ".git",
            "proj/.git",
            "a/b/c/.git",
            "node_modules/dep/.git",
            "main/.git/worktrees/wt",
        ] {
            fs::create_dir_all(root.join(sub)).unwrap();
        }
        fs::write(root.join("main/.git/worktrees/wt/commondir"), "../..\n").unwrap();
        fs::create_dir_all(root.join("wt")).unwrap();
        fs::write(
            root.join("wt/.git"),
            format!(
                "gitdir: {}\n",
                root.join("main/.git/worktrees/wt").display()
            ),
        )
        .unwrap();
        let found = read_only(std::slice::from_ref(&root), &[]);
        assert!(found.contains(&root.join(".git")), "{found:?}");
        assert!(found.contains(&root.join("proj/.git")), "{found:?}");
        assert!(found.contains(&root.join("a/b/c/.git")), "{found:?}");
        assert!(found.contains(&root.join("main/.git")), "{found:?}");
        assert!(found.contains(&root.join("wt/.git")), "{found:?}");
        // Beneath main/.git, bound with it.
        assert!(
            !found.iter().any(|p| p.ends_with("worktrees/wt")),
            "{found:?}"
        );
        assert!(
            !found
                .iter()
                .any(|p| p.starts_with(root.join("node_modules")))
        );
    }

    #[test]
    fn a_walk_past_what_a_staging_may_look_at_spoils_the_looks() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        fs::create_dir_all(root.join("few/a/.git")).unwrap();
        for n in 0..=super::super::staged::MOST_LOOKS {
            fs::create_dir_all(root.join("many").join(n.to_string())).unwrap();
        }
        let mut looks = Looks::default();
        let few = [root.join("few")];
        let found = read_only_in(&few, &[], None, &mut Some(&mut looks));
        assert_eq!(found, [root.join("few/a/.git")]);
        assert!(!looks.spoiled(), "{looks:?}");
        let mut looks = Looks::default();
        read_only_in(&[root.join("many")], &[], None, &mut Some(&mut looks));
        assert!(looks.spoiled());
    }

    #[test]
    fn a_git_that_is_a_fifo_or_leads_to_a_device_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["fifo", "zero", "wt"] {
            fs::create_dir_all(root.join(sub)).unwrap();
        }
        let fifo = std::ffi::CString::new(root.join("fifo/.git").as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path of this frame.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink("/dev/zero", root.join("zero/.git")).unwrap();
        // A worktree's `.git` whose gitdir's `commondir` is a FIFO.
        fs::create_dir_all(root.join("gitdir")).unwrap();
        let common =
            std::ffi::CString::new(root.join("gitdir/commondir").as_os_str().as_bytes()).unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::mkfifo(common.as_ptr(), 0o600) }, 0);
        fs::write(
            root.join("wt/.git"),
            format!("gitdir: {}\n", root.join("gitdir").display()),
        )
        .unwrap();
        // A job's own walk: each `.git` bound as it is, nothing it names read.
        let found = read_only(std::slice::from_ref(&root), &[]);
        for git in ["fifo/.git", "zero/.git", "wt/.git", "gitdir"] {
            assert!(found.contains(&root.join(git)), "{git}: {found:?}");
        }
        // A staging's walk: spoiled, and nothing read at all.
        let mut looks = Looks::default();
        let found = read_only_in(
            std::slice::from_ref(&root),
            &[],
            None,
            &mut Some(&mut looks),
        );
        assert!(looks.spoiled() && found.is_empty(), "{found:?}");
    }

    #[test]
    fn each_roots_own_git_is_covered_past_the_walks_budget() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (crowded, other) = (base.join("crowded"), base.join("other"));
        fs::create_dir_all(crowded.join(".git")).unwrap();
        fs::create_dir_all(other.join("wt")).unwrap();
        fs::create_dir_all(base.join("main/.git/worktrees/wt")).unwrap();
        fs::write(
            other.join(".git"),
            format!(
                "gitdir: {}\n",
                base.join("main/.git/worktrees/wt").display()
            ),
        )
        .unwrap();
        for n in 0..=MAX_ENTRIES {
            fs::File::create(crowded.join(n.to_string())).unwrap();
        }
        let roots = [crowded.clone(), other.clone(), base.join("main")];
        let found = read_only(&roots, &[]);
        assert!(found.contains(&crowded.join(".git")), "{found:?}");
        assert!(found.contains(&other.join(".git")), "{found:?}");
        assert!(found.contains(&base.join("main/.git")), "{found:?}");
    }
}

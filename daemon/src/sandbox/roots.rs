//! Where a confined job may write: the person decides it, never the request (issue
//! 42, DESIGN §15). A session's writable roots are the directory its client runs in,
//! read from the peer of the connection (`/proc/PID/cwd`, in `server.rs`: for `bashc
//! mcp` the directory its agent started it in, for the CLI the directory of that
//! request), and the config's `[sandbox] writable`, each resolved once (symlinks and
//! `..` gone). `/`, the daemon's `$HOME` and any parent of it are never a root.
//!
//! The roots are fixed when a job is made and carried in its [`Origin`], so a job
//! started from inside it has the same ones; nothing a request names (its workdir)
//! moves them. A `workspace-write` job whose workdir is outside every root runs
//! `read-only`, and its result says so.
//!
//! [`Origin`]: super::channel::Origin

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use bashd_protocol::Notice;

/// The directory the client of a connection runs in, as the daemon read it when the
/// connection was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallerDir {
    /// Resolved, and fit to be a root.
    Root(PathBuf),
    /// `/`, the home directory or a parent of it: never a root.
    Refused(PathBuf),
    /// It could not be read (the client exited, or its directory was removed).
    Unknown,
}

impl CallerDir {
    /// The directory, when it is a root.
    pub fn root(&self) -> Option<&std::path::Path> {
        match self {
            CallerDir::Root(dir) => Some(dir),
            _ => None,
        }
    }

    /// The directory `resolved` (canonical) as a root, unless it is one that never is.
    pub fn of(resolved: PathBuf) -> CallerDir {
        if never_a_root(&resolved) {
            CallerDir::Refused(resolved)
        } else {
            CallerDir::Root(resolved)
        }
    }
}

/// A job's writable roots, resolved, none of them `/`, `$HOME` or above it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Roots {
    pub paths: Vec<PathBuf>,
    /// Why there is no root of the client's own directory, when there is none.
    pub caller: Option<CallerDir>,
}

impl Roots {
    /// The roots of a request from a client that runs in `caller`: that directory and
    /// the config's `writable` paths that exist, resolved.
    pub fn decide(caller: &CallerDir, writable: &[PathBuf]) -> Roots {
        let mut paths = Vec::new();
        let mut refused = Some(caller.clone());
        if let CallerDir::Root(dir) = caller {
            paths.push(dir.clone());
            refused = None;
        }
        for path in writable {
            // One that does not exist (yet) is no root: nothing would be bound there.
            let Ok(path) = path.canonicalize() else {
                continue;
            };
            if !never_a_root(&path) && !paths.contains(&path) {
                paths.push(path);
            }
        }
        Roots {
            paths,
            caller: refused,
        }
    }

    /// Whether `path` (resolved) is at or beneath a root.
    pub fn hold(&self, path: &Path) -> bool {
        self.paths.iter().any(|root| path.starts_with(root))
    }

    /// Whether every root of `self` is at or beneath a root of `other`: a job with
    /// these roots writes nowhere `other`'s may not.
    pub fn within(&self, other: &Roots) -> bool {
        self.paths.iter().all(|path| other.hold(path))
    }

    /// Why a `workspace-write` job in `workdir` (resolved) runs `read-only`, or
    /// `None` when it may write its roots.
    pub fn refusal(&self, workdir: &Path) -> Option<Notice> {
        if self.paths.is_empty() {
            let directory = match &self.caller {
                Some(CallerDir::Refused(dir)) => Some(dir.to_string_lossy().into_owned()),
                _ => None,
            };
            return Some(Notice::NoWritableRoot { directory });
        }
        if self.hold(workdir) {
            return None;
        }
        Some(Notice::OutsideRoots {
            workdir: workdir.to_string_lossy().into_owned(),
            roots: self
                .paths
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
        })
    }
}

/// `/`, the daemon's home directory and every directory above it: a root there would
/// let a job write the person's dotfiles (`~/.bashrc`, `~/.gitconfig`), whatever asks.
pub fn never_a_root(resolved: &Path) -> bool {
    resolved == Path::new("/") || home().is_some_and(|home| home.starts_with(resolved))
}

/// The daemon's `$HOME`, resolved once: it does not change while the daemon runs.
fn home() -> Option<&'static Path> {
    static HOME: OnceLock<Option<PathBuf>> = OnceLock::new();
    HOME.get_or_init(|| {
        let home = std::env::var_os("HOME").filter(|home| !home.is_empty())?;
        let home = PathBuf::from(home);
        Some(home.canonicalize().unwrap_or(home))
    })
    .as_deref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_home_and_its_parents_are_never_roots() {
        let home = home().expect("tests run with a HOME");
        for dir in home.ancestors() {
            assert_eq!(
                CallerDir::of(dir.to_owned()),
                CallerDir::Refused(dir.to_owned())
            );
        }
        let project = home.join("project");
        assert_eq!(
            CallerDir::of(project.clone()),
            CallerDir::Root(project.clone())
        );
        let roots = Roots::decide(
            &CallerDir::Refused(home.to_owned()),
            &[PathBuf::from("/"), home.to_owned()],
        );
        assert!(roots.paths.is_empty(), "{roots:?}");
        assert_eq!(
            roots.refusal(&project),
            Some(Notice::NoWritableRoot {
                directory: Some(home.to_string_lossy().into_owned())
            })
        );
    }

    #[test]
    fn a_workdir_outside_every_root_is_refused_and_roots_nest() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let roots = Roots::decide(&CallerDir::Root(ws.clone()), &[]);
        assert_eq!(roots.refusal(&ws.join("sub")), None);
        assert!(matches!(
            roots.refusal(Path::new("/usr")),
            Some(Notice::OutsideRoots { .. })
        ));
        let inner = Roots::decide(&CallerDir::Root(ws.join("sub")), &[]);
        assert!(inner.within(&roots));
        assert!(!roots.within(&inner));
        let other = Roots::decide(&CallerDir::Root("/elsewhere".into()), &[]);
        assert!(!other.within(&roots));
        assert!(Roots::default().within(&other), "no root is within any");
    }
}

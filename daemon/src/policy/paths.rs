//! What a path argument means, not how it is spelled: a pattern (`words.rs`) is
//! normalised lexically (`.`, `..`, `//`, trailing slashes, `~`, `~user`, `~+`) against
//! the job's working directory and home, then matched, globs and all, against the
//! protected set: `/`, the top-level system directories, every user's home, the home
//! and working directory of the job and every directory above them, any `.git`, and
//! everything inside any of those (`DIR/*`). Symlinks are not followed: the check is
//! lexical, as the daemon does not look at the file system to judge a command.

use super::words::{FILE_TEXT, UNKNOWN, glob_name as glob, has_glob, matches_everything};

/// Top-level directories whose recursive removal breaks the machine.
const SYSTEM_DIRS: &[&str] = &[
    "bin",
    "boot",
    "dev",
    "etc",
    "home",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "lost+found",
    "media",
    "mnt",
    "nix",
    "opt",
    "proc",
    "root",
    "run",
    "sbin",
    "snap",
    "srv",
    "sys",
    "tmp",
    "usr",
    "var",
];

/// The name a home stands for when bashd does not know it; no file name matches it.
const SOME_USER: &str = "\u{1}user";

/// Where the job runs: its home and working directory as path components.
#[derive(Debug, Clone)]
pub struct Places {
    pub home: Vec<String>,
    /// `None` when the request names none (`bashc policy check`): relative paths are
    /// then judged against an unknown directory.
    pub workdir: Option<Vec<String>>,
}

impl Places {
    pub fn new(home: Option<&str>, workdir: Option<&str>) -> Places {
        let absolute = |path: &str| path.starts_with('/').then(|| components(path));
        Places {
            home: home
                .and_then(absolute)
                .filter(|home| !home.is_empty())
                .unwrap_or_else(|| vec!["home".into(), SOME_USER.into()]),
            workdir: workdir.and_then(absolute),
        }
    }

    /// The working directory the job starts in, as a target.
    fn start(&self) -> Target {
        match &self.workdir {
            Some(parts) => Target {
                base: Base::Root,
                up: 0,
                parts: parts.clone(),
            },
            None => Target {
                base: Base::Workdir,
                up: 0,
                parts: Vec::new(),
            },
        }
    }
}

fn components(path: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part.to_owned()),
        }
    }
    parts
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    /// `parts` are from `/`.
    Root,
    /// `up` levels above the unknown starting directory, then `parts`.
    Workdir,
    /// After an expansion bashd could not resolve.
    Unknown,
}

/// A normalised path whose components may still be glob patterns.
#[derive(Debug, Clone)]
pub struct Target {
    base: Base,
    up: usize,
    parts: Vec<String>,
}

impl Target {
    /// Reads `pattern` as a path, relative ones from `cwd`.
    fn new(pattern: &str, places: &Places, cwd: &Target) -> Target {
        let (mut target, rest) = if let Some(rest) = pattern.strip_prefix('/') {
            (
                Target {
                    base: Base::Root,
                    up: 0,
                    parts: Vec::new(),
                },
                rest,
            )
        } else if let Some(tilde) = pattern.strip_prefix('~') {
            let (user, rest) = tilde.split_once('/').unwrap_or((tilde, ""));
            let root = |parts: Vec<String>| Target {
                base: Base::Root,
                up: 0,
                parts,
            };
            let start = match user {
                "" => root(places.home.clone()),
                "+" => cwd.clone(),
                "root" => root(vec!["root".into()]),
                // `~-` is the previous directory, which the source does not say.
                "-" => Target {
                    base: Base::Unknown,
                    up: 0,
                    parts: Vec::new(),
                },
                user => root(vec!["home".into(), user.to_owned()]),
            };
            (start, rest)
        } else if pattern.starts_with([UNKNOWN, FILE_TEXT]) {
            (
                Target {
                    base: Base::Unknown,
                    up: 0,
                    parts: Vec::new(),
                },
                pattern,
            )
        } else {
            (cwd.clone(), pattern)
        };
        for part in split_unescaped(rest) {
            match part {
                "" | "." => {}
                ".." => {
                    if target.parts.pop().is_none() && target.base != Base::Root {
                        target.up += 1;
                    }
                }
                _ => target.parts.push(part.to_owned()),
            }
        }
        target
    }

    /// Whether removing this (recursively) destroys something protected: it is
    /// protected itself, or it is everything in (`DIR/*`, `DIR/*/*`) something that is.
    /// A loop, not recursion: `*/*/*/...` can be as long as the command.
    fn protected(&self, places: &Places) -> bool {
        let mut parts = self.parts.as_slice();
        loop {
            if self.names_protected(parts, places) {
                return true;
            }
            match parts.split_last() {
                Some((last, parent)) if matches_everything(last) => parts = parent,
                _ => return false,
            }
        }
    }

    /// Whether the path of this target's base and `parts` is protected by itself.
    fn names_protected(&self, parts: &[String], places: &Places) -> bool {
        if parts.last().is_some_and(|last| glob(last, ".git")) {
            return true;
        }
        match self.base {
            Base::Root => root_protected(parts, places),
            Base::Workdir => parts.is_empty(),
            Base::Unknown => false,
        }
    }

    /// Whether this is the working directory the job starts in, or one above it.
    fn is_workdir_or_above(&self, places: &Places) -> bool {
        match (self.base, &places.workdir) {
            (Base::Workdir, _) => self.parts.is_empty(),
            (Base::Root, Some(workdir)) => is_prefix(&self.parts, workdir),
            _ => false,
        }
    }
}

/// `/`, a top-level system directory, any user's home, or the job's home or working
/// directory or one above them.
fn root_protected(parts: &[String], places: &Places) -> bool {
    match parts {
        [] => true,
        [top] if SYSTEM_DIRS.iter().any(|dir| glob(top, dir)) => true,
        [top, _] if glob(top, "home") => true,
        _ => {
            is_prefix(parts, &places.home)
                || places
                    .workdir
                    .as_ref()
                    .is_some_and(|workdir| is_prefix(parts, workdir))
        }
    }
}

/// Whether the pattern components name `path` or a directory above it.
fn is_prefix(parts: &[String], path: &[String]) -> bool {
    parts.len() <= path.len() && parts.iter().zip(path).all(|(part, name)| glob(part, name))
}

/// A pattern's components: split at every `/` that is not escaped.
fn split_unescaped(pattern: &str) -> impl Iterator<Item = &str> {
    let mut escaped = false;
    pattern.split(move |c: char| {
        let split = c == '/' && !escaped;
        escaped = c == '\\' && !escaped;
        split
    })
}

/// The directories a relative path can be taken from: where the job starts, and every
/// directory a `cd` in the command moves to.
pub fn cwds(places: &Places, moves: &[&str]) -> Vec<Target> {
    let start = places.start();
    let mut cwds = vec![start.clone()];
    for dir in moves {
        let target = Target::new(dir, places, &start);
        if target.base != Base::Unknown && !has_glob_part(&target) {
            cwds.push(target);
        }
    }
    cwds
}

fn has_glob_part(target: &Target) -> bool {
    target.parts.iter().any(|part| has_glob(part))
}

/// Whether a recursive removal of `pattern` destroys something protected, taken from
/// any of `cwds`.
pub fn is_protected(pattern: &str, places: &Places, cwds: &[Target]) -> bool {
    cwds.iter()
        .any(|cwd| Target::new(pattern, places, cwd).protected(places))
}

/// Whether `pattern` names the job's working directory or a directory above it, from
/// any of `cwds`: a git pathspec that takes in the whole tree.
pub fn is_workdir_or_above(pattern: &str, places: &Places, cwds: &[Target]) -> bool {
    cwds.iter()
        .any(|cwd| Target::new(pattern, places, cwd).is_workdir_or_above(places))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn protected(pattern: &str, workdir: Option<&str>) -> bool {
        let places = Places::new(Some("/home/agent"), workdir);
        is_protected(pattern, &places, &cwds(&places, &[]))
    }

    #[test]
    fn spellings_of_protected_paths_are_seen_through() {
        for workdir in [None, Some("/home/agent/project")] {
            for pattern in [
                "/",
                "/.",
                "/./",
                "/..",
                "/usr/../",
                "//etc",
                "/[u]sr",
                "/u*",
                "/home/x",
                "~",
                "~/",
                "~/..",
                "~/../..",
                "~root",
                "~bob",
                "project/.git",
                "~+/.git",
                ".git/*",
                ".",
                "..",
                "./",
                "~+",
                "*",
                "./*",
                "/home/*",
                "/*/",
                ".*",
            ] {
                assert!(protected(pattern, workdir), "{pattern} in {workdir:?}");
            }
            for pattern in [
                "build",
                "./build",
                "/tmp/x",
                "~/project/build",
                "\\*",
                "./\\*",
                "*.o",
                "/usr/local/lib/x",
                ".gitignore",
                "\u{1}$X",
                "\u{1}$X/*",
                "../sibling",
            ] {
                assert!(!protected(pattern, workdir), "{pattern} in {workdir:?}");
            }
        }
        assert!(protected(
            "/home/agent/project",
            Some("/home/agent/project")
        ));
        assert!(!protected(
            "/home/agent/project/src",
            Some("/home/agent/project")
        ));
        assert!(protected("usr", Some("/")));
        assert!(protected("../../..", Some("/home/agent/project")));
    }

    #[test]
    fn a_cd_in_the_command_moves_relative_paths() {
        let places = Places::new(Some("/home/agent"), None);
        assert!(is_protected("usr", &places, &cwds(&places, &["/"])));
        assert!(!is_protected("usr", &places, &cwds(&places, &["build"])));
    }
}

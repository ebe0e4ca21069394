//! The other daemons of this user: which `bashd` processes run under runtime
//! directories other than the one a client is about to start a daemon in. A second
//! daemon splits the user's jobs in two (`bashc jobs` in one shell does not see the
//! jobs of an agent served by the other), so autostart says so instead of staying
//! silent.

use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use bashd_protocol::runtime;

/// A live `bashd` of this user and the runtime directory it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherDaemon {
    pub pid: u32,
    pub runtime_dir: PathBuf,
}

/// The live `bashd` processes of this user that serve another runtime directory than
/// `runtime_dir`, as far as `/proc` shows them. Each one's directory is resolved from
/// its own environment, the way it resolved it at start.
pub fn other_daemons(runtime_dir: &Path) -> Vec<OtherDaemon> {
    let me = rustix::process::getuid().as_raw();
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut others: Vec<OtherDaemon> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != std::process::id())
        .filter_map(|pid| daemon_dir(pid, me).map(|dir| (pid, dir)))
        .filter(|(_, dir)| dir != runtime_dir)
        .map(|(pid, runtime_dir)| OtherDaemon { pid, runtime_dir })
        .collect();
    others.sort_by_key(|other| other.pid);
    others
}

/// `bashd pid 12 serves /run/user/1000/bashd`, for each of `others`, joined by commas.
pub fn describe(others: &[OtherDaemon]) -> String {
    let each: Vec<String> = others
        .iter()
        .map(|other| {
            format!(
                "bashd pid {} serves {}",
                other.pid,
                other.runtime_dir.display()
            )
        })
        .collect();
    each.join(", ")
}

/// The runtime directory of process `pid` if it is a `bashd` of uid `me`.
fn daemon_dir(pid: u32, me: u32) -> Option<PathBuf> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let comm = fs::read_to_string(proc_dir.join("comm")).ok()?;
    if comm.trim_end() != "bashd" || fs::metadata(&proc_dir).ok()?.uid() != me {
        return None;
    }
    let environ = fs::read(proc_dir.join("environ")).ok()?;
    let vars: Vec<(Vec<u8>, Vec<u8>)> = environ
        .split(|&b| b == 0)
        .filter_map(|var| {
            let eq = var.iter().position(|&b| b == b'=')?;
            Some((var[..eq].to_vec(), var[eq + 1..].to_vec()))
        })
        .collect();
    let lookup = |name: &str| {
        vars.iter()
            .find(|(key, _)| key == name.as_bytes())
            .map(|(_, value)| OsString::from_vec(value.clone()))
    };
    let dir = runtime::resolve_runtime_dir(lookup, Path::new(runtime::RUN_USER_ROOT), me).path;
    // A relative BASHD_RUNTIME_DIR is the daemon's, relative to its own directory.
    if dir.is_relative() {
        Some(fs::read_link(proc_dir.join("cwd")).ok()?.join(dir))
    } else {
        Some(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_no_daemon() {
        let me = rustix::process::getuid().as_raw();
        assert_eq!(daemon_dir(std::process::id(), me), None);
        assert!(
            other_daemons(Path::new("/nowhere"))
                .iter()
                .all(|other| other.pid != std::process::id())
        );
    }
}

//! Confining a job, so that everything the job starts inherits it (issues 23, 30):
//! the daemon says what the job may do in a [`Spec`], and the job's resident, in the
//! child it forks for the shell, calls [`apply`] just before it runs the shell. The
//! resident itself stays outside: nothing of the job can signal it, trace it or reach
//! its memory (Landlock scopes signals and `ptrace` to the job's own domain), so a job
//! cannot kill the process that holds it. The kernel then holds every process of the
//! job to it, whatever the process does (`setsid`, double fork, `unshare`, a cleared
//! environment): none of it can be undone from inside.
//!
//! - A user namespace first (`namespaces.rs`): it lets an unprivileged process make
//!   the others, and a job that runs as the user inside it gets no capability at
//!   `exec`. With it an IPC namespace and a cgroup namespace rooted at the job's
//!   cgroup.
//! - A mount namespace where the file system is confined: every mount read-only but
//!   the writable roots, bound read-write over themselves (Landlock does not hold
//!   `chmod`, `chown` or `utimes`; a read-only mount does); every `.git` beneath a
//!   writable root (`git.rs`) bound read-only over itself; each `deny_read` path that
//!   exists under an empty, read-only mount that nobody can read; a devpts of the
//!   job's own over `/dev/pts`.
//! - A network namespace with only its own loopback, up, for `network = off`.
//! - Landlock (`landlock.rs`, the `landlock` crate) once the mounts are made (a
//!   Landlock domain may not mount): read and run everywhere but `deny_read`, granted
//!   entry by entry around each hidden path (`reads.rs`), so that what a rename or a
//!   later file puts at a hidden name is not read, which a mount cannot hold; write
//!   only beneath the writable roots and to the terminal and null devices; signals and abstract unix
//!   sockets only within the job (ABI 6), also for a job whose files are not
//!   confined; `no_new_privs`.
//! - Seccomp last (`seccomp.rs`): no `socket(AF_UNIX)` and no datagram
//!   `socketpair(AF_UNIX)`, so no pathname unix socket of the host (a session bus,
//!   docker, an ssh agent, `/dev/log`, bashd itself) answers the job, unless the config
//!   names some and the network is on; with the network off, no `AF_VSOCK` and no
//!   netlink but the job's own routes and sockets.
//!
//! The daemon builds the [`Spec`] (`daemon/src/sandbox/`) and reads the [`Probe`]; the
//! resident applies the spec. Like the rest of this crate it uses std, libc, rustix,
//! landlock and seccompiler only, never the daemon's library.

pub mod git;
mod landlock;
mod namespaces;
pub mod network;
mod reads;
mod seccomp;
mod staged;

pub use namespaces::Kit;
pub use network::SessionNet;
pub use reads::{Prepared, Unprepared};
pub use staged::Staged;

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

/// What a job may do, as the daemon worked it out from the profile in force.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spec {
    /// Confine the file system: read everywhere but `deny_read`, write only beneath
    /// `writable`. False with profile `off`.
    pub files: bool,
    /// Absolute paths the job may write beneath (with `files`).
    pub writable: Vec<PathBuf>,
    /// Those of `writable` the `.git` walk does not enter (`git.rs`): bashd's tool
    /// caches (issue 44), which hold no repository of the person's and many entries,
    /// walked at every confined job's start otherwise. Never a root of the person's.
    pub unwalked: Vec<PathBuf>,
    /// Absolute paths hidden from the job (with `files`); `~` already expanded.
    pub deny_read: Vec<PathBuf>,
    /// Give the job a network of its own with only its loopback.
    pub network_off: bool,
    /// Let the job make unix sockets (`[sandbox] unix_sockets` names some, the network
    /// is on); otherwise `socket(AF_UNIX)` and a datagram `socketpair(AF_UNIX)` fail.
    /// A stream or seqpacket `socketpair` is never refused.
    pub unix_sockets: bool,
    /// bashd's runtime dir, hidden from the job but for the `writable` roots beneath it
    /// (the session's temp dir): the journal, the relay's and ssh's sockets and other
    /// sessions' output are not the job's to read (with `files`).
    pub runtime_dir: Option<PathBuf>,
    /// A person granted this job writing the `.git` of its writable roots (issue 44,
    /// a commit): each root's own `.git` directory is writable but for what git runs
    /// code from (`git::CODE`), which stays read-only; nested repositories stay
    /// read-only whole.
    pub git_write: bool,
}

/// Why a job could not be confined: the step, the system's error and the fix.
#[derive(Debug)]
pub struct Failure {
    pub step: String,
    pub error: io::Error,
    pub fix: &'static str,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sandbox: cannot {}: {} ({})",
            self.step, self.error, self.fix
        )
    }
}

impl From<Failure> for io::Error {
    fn from(failure: Failure) -> io::Error {
        io::Error::new(failure.error.kind(), failure.to_string())
    }
}

/// The fix for a missing user namespace, the first thing every profile needs.
pub const FIX_USER_NAMESPACES: &str = "unprivileged user namespaces are off on this system: allow them (sysctl user.max_user_namespaces=15000; kernel.unprivileged_userns_clone=1 on Debian; kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bashd-resident on Ubuntu), or run the job unsandboxed (sandbox off, network on)";
/// The fix for a kernel without Landlock or with too old a version of it.
pub const FIX_LANDLOCK: &str = "the file system sandbox needs Landlock ABI 3 (Linux 6.2) or later, enabled at boot (lsm=...,landlock); upgrade the kernel or enable Landlock, or run the job with sandbox off";

impl Spec {
    /// Whether the spec confines anything at all.
    pub fn confines(&self) -> bool {
        self.files || self.network_off
    }

    /// The spec as one command-line argument: one line per item (`files`,
    /// `network-off`, `write PATH`, `deny PATH`), a path's `\` and newline escaped.
    pub fn encode(&self) -> OsString {
        let mut out = Vec::new();
        if self.files {
            out.extend_from_slice(b"files\n");
        }
        if self.network_off {
            out.extend_from_slice(b"network-off\n");
        }
        if self.unix_sockets {
            out.extend_from_slice(b"unix-sockets\n");
        }
        if self.git_write {
            out.extend_from_slice(b"git-write\n");
        }
        let runtime_dir = self.runtime_dir.iter().cloned().collect::<Vec<_>>();
        for (word, paths) in [
            ("write", &self.writable),
            ("unwalked", &self.unwalked),
            ("deny", &self.deny_read),
            ("runtime", &runtime_dir),
        ] {
            for path in paths {
                out.extend_from_slice(word.as_bytes());
                out.push(b' ');
                for &byte in path.as_os_str().as_bytes() {
                    match byte {
                        b'\\' => out.extend_from_slice(b"\\\\"),
                        b'\n' => out.extend_from_slice(b"\\n"),
                        byte => out.push(byte),
                    }
                }
                out.push(b'\n');
            }
        }
        OsString::from_vec(out)
    }

    /// Reads what [`Spec::encode`] wrote.
    pub fn decode(text: &[u8]) -> Result<Spec, String> {
        let mut spec = Spec::default();
        for line in text.split(|&b| b == b'\n').filter(|line| !line.is_empty()) {
            match line {
                b"files" => spec.files = true,
                b"network-off" => spec.network_off = true,
                b"unix-sockets" => spec.unix_sockets = true,
                b"git-write" => spec.git_write = true,
                _ => {
                    let (word, rest) = match line.iter().position(|&b| b == b' ') {
                        Some(at) => (&line[..at], &line[at + 1..]),
                        None => (line, &[][..]),
                    };
                    let path = unescape(rest).filter(|p| p.is_absolute()).ok_or_else(|| {
                        format!(
                            "sandbox spec: {:?} is not an absolute path",
                            String::from_utf8_lossy(rest)
                        )
                    })?;
                    match word {
                        b"write" => spec.writable.push(path),
                        b"unwalked" => spec.unwalked.push(path),
                        b"deny" => spec.deny_read.push(path),
                        b"runtime" => spec.runtime_dir = Some(path),
                        _ => {
                            return Err(format!(
                                "sandbox spec: unknown item {:?}",
                                String::from_utf8_lossy(line)
                            ));
                        }
                    }
                }
            }
        }
        Ok(spec)
    }
}

fn unescape(bytes: &[u8]) -> Option<PathBuf> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut bytes = bytes.iter();
    while let Some(&byte) = bytes.next() {
        if byte == b'\\' {
            match bytes.next()? {
                b'\\' => out.push(b'\\'),
                b'n' => out.push(b'\n'),
                _ => return None,
            }
        } else {
            out.push(byte);
        }
    }
    Some(PathBuf::from(OsString::from_vec(out)))
}

/// The read rules of a job's `deny_read`, made ahead by the zygote ([`Prepared`]): a
/// Landlock ruleset descriptor, handed to the job's resident after the job's own
/// descriptors and before its kit's.
#[derive(Debug)]
pub struct ReadRules(OwnedFd);

impl ReadRules {
    /// The rules the zygote has ready in `prepared`, for a job with `spec`; `None`
    /// when they are not this job's, or not what its own listing would grant now.
    pub fn of(prepared: &Prepared, spec: &Spec) -> Option<ReadRules> {
        (spec.files
            && prepared.of(&spec.deny_read)
            && prepared.cover(&spec.writable, spec.runtime_dir.as_deref()))
        .then(|| prepared.ruleset().ok().map(ReadRules))
        .flatten()
    }

    pub fn raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// The rules, when `fd` (received after a job's descriptors) is a Landlock
    /// ruleset; otherwise `fd` back (a namespace of the kit).
    pub fn from_fd(fd: OwnedFd) -> Result<ReadRules, OwnedFd> {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()));
        match link {
            Ok(link) if link.as_os_str() == "anon_inode:[landlock-ruleset]" => Ok(ReadRules(fd)),
            _ => Err(fd),
        }
    }
}

/// Does ahead, in the zygote, what every confined job would otherwise do again in the
/// shell's process: the seccomp filter compiled, the last capability read. The
/// residents it forks, and so their shells' processes, inherit both.
pub fn prepare() {
    seccomp::prepare();
    namespaces::prepare();
}

/// What the job's resident takes on itself before it forks the shell: the seccomp
/// filter of a job that gets one (and `no_new_privs`, which it needs), so that the
/// shell inherits the resident's filter rather than installing one of its own. A
/// process's own filter is released when it is reaped, which takes milliseconds on
/// some kernels (measured: docs/PERFORMANCE.md); an inherited one only loses a
/// reference there, and goes with the resident, after its last report. The filter
/// keeps nothing from the resident that it uses. True when the filter is on, for
/// [`apply`].
pub fn resident_filter(spec: &Spec) -> Result<bool, Failure> {
    if !spec.confines() || spec.unix_sockets {
        return Ok(false);
    }
    namespaces::no_new_privs()?;
    seccomp::install(spec.network_off)?;
    Ok(true)
}

/// Confines the calling process, and so everything it starts from now on, to `spec`:
/// the job's shell, in the child its resident forked, just before `exec`. Call it in
/// a single-threaded process (a user namespace cannot be entered by a process with
/// threads), after the process is in the job's cgroup and in the workdir, which it
/// reads. `terminal`: stdin is the job's terminal (`exec --pty`); `cgroup`: the
/// process is in a cgroup of the job's own, which it must not leave; `kit`: the job's
/// namespaces, made ahead by the zygote, which the caller holds until the job is over;
/// `filtered`: the process inherited the job's seccomp filter ([`resident_filter`]);
/// `reads`: the read rules of `spec.deny_read`, made ahead ([`ReadRules::of`]).
/// `network`: the session network the job shares with the session's other jobs of
/// its network setting (`network.rs`), entered first, so that the job's own user
/// namespace is made (or the kit's entered) inside its user namespace.
/// On an error the process is half confined: it must not run the job.
pub fn apply(
    spec: &Spec,
    terminal: bool,
    cgroup: bool,
    kit: Option<&Kit>,
    filtered: bool,
    reads: Option<&ReadRules>,
    network: Option<&SessionNet>,
) -> Result<(), Failure> {
    if !spec.confines() {
        return Ok(());
    }
    // Landlock is checked first: it needs nothing undone when it is missing.
    if spec.files {
        landlock::check()?;
    }
    // A kit staged for this job (`staged.rs`) holds its mounts already: nothing to
    // find or mount, once its namespaces are entered.
    let staged = spec.files && kit.is_some_and(Kit::staged);
    let mut plan = (spec.files && !staged).then(|| namespaces::Hidden::find(spec, terminal));
    // A job whose files are not confined (its network is off) still gets a mount
    // namespace: the kernel's settings read-only (a job run by root would otherwise
    // set a helper that the kernel starts outside the job's namespaces, the network's
    // included), and the cgroup file system (its cgroup namespace holds it in its
    // cgroup only where cgroup2 is mounted with `nsdelegate`).
    // A session network replaces a network namespace of the job's own.
    if let Some(network) = network {
        network.enter()?;
    }
    let own_network = spec.network_off && network.is_none();
    let entered = match kit {
        Some(kit) => kit.enter(true, own_network)?,
        None => {
            namespaces::enter(true, own_network)?;
            false
        }
    };
    if staged && !entered {
        // Namespaces made afresh: the staged mounts are not in them.
        plan = Some(namespaces::Hidden::find(spec, terminal));
    }
    match &plan {
        Some(plan) => plan.mount()?,
        // Staged: mounted already.
        None if spec.files => {}
        None => namespaces::host_settings_read_only(cgroup)?,
    }
    if spec.files {
        match reads {
            // Two rulesets, each right held by the one that handles it: the writes
            // (reads beneath `/`), then the reads made ahead.
            Some(reads) => {
                landlock::restrict(&spec.writable, &[], terminal)?;
                landlock::restrict_reads(&reads.0)?;
            }
            None => landlock::restrict(&spec.writable, &spec.deny_read, terminal)?,
        }
    } else {
        // The file system is the job's to write, but its resident and the rest of the
        // host are still not its to signal.
        landlock::scope_only()?;
        namespaces::no_new_privs()?;
    }
    namespaces::drop_capabilities()?;
    if !spec.unix_sockets && !filtered {
        seccomp::install(spec.network_off)?;
    }
    Ok(())
}

/// What the system offers, as [`probe`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The kernel's Landlock ABI; 0 without Landlock.
    pub landlock_abi: i32,
    /// Whether each namespace could be made and used, or why not.
    pub user: Result<(), String>,
    pub mount: Result<(), String>,
    pub network: Result<(), String>,
    /// Whether the job's seccomp filter could be installed.
    pub seccomp: Result<(), String>,
}

/// Tries each mechanism on the calling process, which must be single-threaded and
/// exit right after (it is left in namespaces of its own): `bashd-resident
/// --probe-sandbox`, which the daemon runs once at start.
pub fn probe() -> Probe {
    let landlock_abi = landlock::abi();
    let user = namespaces::enter(false, false).map_err(|f| f.to_string());
    let needs_user = || Err("needs a user namespace".to_owned());
    let (mount, network) = if user.is_ok() {
        (
            namespaces::probe_mount().map_err(|f| f.to_string()),
            namespaces::enter_network().map_err(|f| f.to_string()),
        )
    } else {
        (needs_user(), needs_user())
    };
    // Last: the filter stays on the probe, which exits next. The filter of a job
    // with the network off, the one with more rules.
    let seccomp = namespaces::no_new_privs()
        .and_then(|()| seccomp::install(true))
        .map_err(|f| f.to_string());
    Probe {
        landlock_abi,
        user,
        mount,
        network,
        seccomp,
    }
}

impl fmt::Display for Probe {
    /// `landlock N`, then `user ok` or `user error TEXT`, `mount ...`, `network ...`,
    /// `seccomp ...`, one a line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "landlock {}", self.landlock_abi)?;
        for (name, result) in [
            ("user", &self.user),
            ("mount", &self.mount),
            ("network", &self.network),
            ("seccomp", &self.seccomp),
        ] {
            match result {
                Ok(()) => writeln!(f, "{name} ok")?,
                Err(e) => writeln!(f, "{name} error {}", e.replace('\n', " "))?,
            }
        }
        Ok(())
    }
}

impl Probe {
    /// Reads what `Display` wrote; a line missing counts as that mechanism missing.
    pub fn parse(text: &str) -> Probe {
        let mut probe = Probe {
            landlock_abi: 0,
            user: Err("not probed".into()),
            mount: Err("not probed".into()),
            network: Err("not probed".into()),
            seccomp: Err("not probed".into()),
        };
        for line in text.lines() {
            let (name, rest) = line.split_once(' ').unwrap_or((line, ""));
            let result = match rest.split_once(' ') {
                None if rest == "ok" => Ok(()),
                Some(("error", text)) => Err(text.to_owned()),
                _ => Err(format!("unreadable probe line {line:?}")),
            };
            match name {
                "landlock" => probe.landlock_abi = rest.parse().unwrap_or(0),
                "user" => probe.user = result,
                "mount" => probe.mount = result,
                "network" => probe.network = result,
                "seccomp" => probe.seccomp = result,
                _ => {}
            }
        }
        probe
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_reads_back_as_written_whatever_its_paths_hold() {
        let spec = Spec {
            files: true,
            writable: vec![
                PathBuf::from("/work/a b"),
                PathBuf::from("/tmp/new\nline\\back"),
                PathBuf::from(OsString::from_vec(b"/x/\xff".to_vec())),
            ],
            unwalked: vec![PathBuf::from("/home/u/.cache/bashd/tools")],
            deny_read: vec![PathBuf::from("/home/u/.ssh")],
            network_off: true,
            unix_sockets: true,
            runtime_dir: Some(PathBuf::from("/run/user/1000/bashd")),
            git_write: true,
        };
        let text = spec.encode();
        assert_eq!(Spec::decode(text.as_bytes()), Ok(spec));
        assert_eq!(Spec::decode(b""), Ok(Spec::default()));
        assert!(Spec::decode(b"write relative").is_err());
        assert!(Spec::decode(b"write /a\\q").is_err());
        assert!(Spec::decode(b"shout /a").is_err());
    }

    #[test]
    fn a_probe_reads_back_as_written() {
        let probe = Probe {
            landlock_abi: 7,
            user: Ok(()),
            mount: Err("cannot x: EPERM (fix)".into()),
            network: Ok(()),
            seccomp: Ok(()),
        };
        assert_eq!(Probe::parse(&probe.to_string()), probe);
        assert_eq!(Probe::parse("").landlock_abi, 0);
        assert!(Probe::parse("").user.is_err());
    }
}

//! The daemon's side of the sandbox (DESIGN §15, issue 23): which sandbox a job gets
//! (`[sandbox]` in the config, the request, the floor), whether this system can hold
//! it ([`Support`], from a probe at start), what the job's resident is told to apply
//! ([`confine::Spec`]), and the notice for a failure that reads like a refusal.
//!
//! The confining itself is `bashd_resident_core::confine` (`resident-core/`), which the
//! resident links without the daemon.

pub mod channel;
pub mod network;
pub mod peer;
pub mod roots;

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use bashd_protocol::config::{SandboxPath, sandbox_path};
use bashd_protocol::{
    ErrorHint, ErrorKind, ErrorReply, ExecParams, ExecResult, FrontEnd, FrontEndSandbox, JobState,
    Network, Notice, SandboxDenial, SandboxInForce, SandboxMechanism, SandboxProfile,
    SandboxStatus, SettingFrom,
};

use bashd_resident_core::confine::{self, Probe};

/// `[sandbox]`: what jobs get, and the least a client may ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// `default`: the profile of a job whose request names none; `None` (not
    /// written): each front end's own ([`SandboxConfig::front_end`]).
    pub default: Option<SandboxProfile>,
    /// `network`: the network of a job whose request says nothing; `None`: each front
    /// end's own. With a `floor` other than `off`, the default network is also a
    /// floor: no client loosens it without a person's yes.
    pub network: Option<Network>,
    /// `writable`: more paths a `workspace-write` job may write beneath.
    pub writable: Vec<PathBuf>,
    /// `deny_read`: paths hidden from a job whose profile is not `off`, `~` expanded.
    pub deny_read: Vec<PathBuf>,
    /// `unix_sockets`: unix sockets a job whose files are confined may connect to
    /// while its network is on. Seccomp cannot tell one path from another, so any
    /// entry lets such a job make unix sockets, and so reach every pathname socket it
    /// can name; empty (the default), `socket(AF_UNIX)` fails in every sandboxed job.
    pub unix_sockets: Vec<PathBuf>,
    /// `floor`: the loosest profile a client may have without a person's yes; `None`:
    /// each front end's own.
    pub floor: Option<SandboxProfile>,
    /// `ask_secs`: how long a request looser than the floor waits for that yes.
    pub ask: std::time::Duration,
}

/// The credential stores `deny_read` hides unless the config says otherwise.
pub use bashd_protocol::config::DEFAULT_DENY_READ;

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            default: None,
            network: None,
            writable: Vec::new(),
            deny_read: DEFAULT_DENY_READ
                .iter()
                .filter_map(|path| expand_home(path).ok())
                .collect(),
            unix_sockets: Vec::new(),
            floor: None,
            ask: std::time::Duration::from_secs(bashd_protocol::limits::DEFAULT_ASK_SECS),
        }
    }
}

impl SandboxConfig {
    /// What `front_end`'s jobs get when a request names nothing, and its floor: the
    /// file's keys where written, else the front end's own (issue 44: an agent's MCP
    /// calls run `workspace-write` on the allow-list by default).
    pub fn front_end(&self, front_end: FrontEnd) -> FrontEndSandbox {
        front_end.resolve(self.default, self.network, self.floor)
    }

    /// [`SandboxConfig::front_end`] of the front end `params` came through.
    pub fn for_request(&self, params: &ExecParams) -> FrontEndSandbox {
        self.front_end(FrontEnd::of(params.mcp_call))
    }
}

/// `~` and `~/...` under the daemon's `HOME`; any other path must be absolute (the
/// file's rule, `config::sandbox_path`, which bashc checks too).
pub fn expand_home(path: &str) -> Result<PathBuf, String> {
    match sandbox_path(path)? {
        SandboxPath::Absolute(path) => Ok(PathBuf::from(path)),
        SandboxPath::Home(rest) => std::env::var_os("HOME")
            .filter(|home| !home.is_empty())
            .map(|home| PathBuf::from(home).join(rest))
            .ok_or_else(|| format!("{path:?} starts with ~, and the daemon has no HOME")),
    }
}

/// A sandbox this system cannot hold, refused ([`Support::check`]). Where it is only
/// bashd's default for an agent's MCP calls, the fix is the person's config, not the
/// request, and the refusal says so.
pub fn cannot_hold(
    mut refused: ErrorReply,
    config: &SandboxConfig,
    params: &ExecParams,
) -> ErrorReply {
    if params.mcp_call && config.default.is_none() {
        refused.message.push_str(
            "; bashd confines an agent's jobs by default, and this system cannot: write [sandbox] default = \"off\" and network = \"on\" in bashd's config to run them unconfined",
        );
    }
    refused
}

/// Why [`decide`] did not let a request through as it is.
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// Refused, whoever answers: the request can be changed, not granted.
    Final(ErrorReply),
    /// Looser than the session's floor (issue 44): a person may let it through. `why`
    /// says which floor it passes, for the words of a refusal.
    Ask {
        asked: SandboxInForce,
        why: String,
        /// What the refusal points at, should the person say no.
        hint: Option<ErrorHint>,
        /// It asks to write the `.git` of its writable roots (a commit), not for a
        /// looser sandbox.
        git: bool,
    },
}

impl Refused {
    /// The refusal as it reads when no person can be asked (a request through a
    /// job's channel, the unit tests).
    pub fn error(self) -> ErrorReply {
        match self {
            Refused::Final(error) => error,
            Refused::Ask { why, hint, .. } => {
                let error = refused(why);
                match hint {
                    Some(hint) => error.with_hint(hint),
                    None => error,
                }
            }
        }
    }
}

impl From<ErrorReply> for Refused {
    fn from(error: ErrorReply) -> Refused {
        Refused::Final(error)
    }
}

/// Whether `asked` is within what a person granted (`granted`): as tight or tighter
/// in both the profile and the network.
pub fn within(asked: SandboxInForce, granted: SandboxInForce) -> bool {
    asked.profile.looseness() <= granted.profile.looseness()
        && asked.network.looseness() <= granted.network.looseness()
}

/// The sandbox job `params` gets under `config`, or why it is not let through: asking
/// for less than the sandboxed job `around` the client (a request that came through
/// its channel), whose sandbox is also the default, is refused; asking for less than
/// the floor is an ask ([`Refused::Ask`]) unless a person granted as much
/// (`granted`, the session's grants or the request's own yes). `None` when nothing is
/// confined. A refusal's hint says what the client can ask for instead, for the
/// front end to spell.
pub fn decide(
    config: &SandboxConfig,
    params: &ExecParams,
    around: Option<&channel::Origin>,
    granted: &[SandboxInForce],
) -> Result<Option<SandboxInForce>, Refused> {
    // The front end's defaults and floor where the file leaves them unset (issue 44).
    let config = &Floors::of(config.for_request(params));
    let profile = params
        .sandbox
        .or(around.map(|o| o.sandbox.profile))
        .unwrap_or(config.default);
    let network = params
        .network
        .or(around.map(|o| o.sandbox.network))
        .unwrap_or(config.network);
    let asked = SandboxInForce { profile, network };
    if let Some(origin) = around
        && !channel::at_most(asked, origin.sandbox)
    {
        return Err(Refused::Final(
            refused(format!(
                "this job ({}) runs under {}; a job it starts can be as tight, not looser (asked for sandbox {profile}, network {network})",
                origin.job,
                origin.describe(),
            ))
            .with_hint(ErrorHint::SameSandbox),
        ));
    }
    let granted = granted.iter().any(|granted| within(asked, *granted));
    if !granted && profile.looseness() > config.floor.looseness() {
        return Err(Refused::Ask {
            asked,
            why: format!(
                "sandbox {profile} is looser than this daemon allows without a person's yes: [sandbox] floor = \"{}\" {} (bashd --check-config shows it); ask for {}, have the person grant it (bashc allow), or {}",
                config.floor,
                config.floor_from,
                allowed(config.floor),
                config.lower_floor,
            ),
            hint: None,
            git: false,
        });
    }
    if !granted
        && network.looseness() > config.network.looseness()
        && config.floor != SandboxProfile::Off
    {
        let how = match network {
            Network::On => "turned on".to_owned(),
            _ => format!("loosened to {network}"),
        };
        return Err(Refused::Ask {
            asked,
            why: format!(
                "the network is {} for jobs here and is {how} only with a person's yes: [sandbox] network = \"{}\" {} with floor = \"{}\"; have the person grant it (bashc allow), or set network = \"{network}\" in bashd's config",
                config.network, config.network, config.network_from, config.floor
            ),
            hint: (network == Network::On).then_some(ErrorHint::NetworkOn),
            git: false,
        });
    }
    if profile == SandboxProfile::Off && network == Network::On {
        return Ok(None);
    }
    Ok(Some(asked))
}

/// A front end's settings as [`decide`] reads them, with the words that say where
/// each came from.
struct Floors {
    default: SandboxProfile,
    network: Network,
    floor: SandboxProfile,
    /// `in bashd's config`, or whose default it is.
    floor_from: &'static str,
    network_from: &'static str,
    /// How the person lowers the floor.
    lower_floor: &'static str,
}

impl Floors {
    fn of(front_end: FrontEndSandbox) -> Floors {
        let from = |from: SettingFrom| match (from, front_end.front_end) {
            (SettingFrom::File | SettingFrom::Follows, _) => "in bashd's config",
            (SettingFrom::FrontEnd, FrontEnd::Mcp) => {
                "by default for an agent's MCP calls, as bashd's config leaves it unset"
            }
            (SettingFrom::FrontEnd, FrontEnd::Cli) => {
                "by default for the command line, as bashd's config leaves it unset"
            }
        };
        Floors {
            default: front_end.default.profile,
            network: front_end.default.network,
            floor: front_end.floor,
            floor_from: from(front_end.floor_from),
            network_from: from(front_end.network_from),
            lower_floor: match front_end.floor_from {
                SettingFrom::File | SettingFrom::Follows => "lower the floor there",
                SettingFrom::FrontEnd => {
                    "write [sandbox] default = \"off\" and network = \"on\" in bashd's config to run agents unconfined"
                }
            },
        }
    }
}

fn refused(message: String) -> ErrorReply {
    ErrorReply::new(ErrorKind::InvalidRequest, message)
}

/// The profiles at or below `floor`, as a person lists them.
fn allowed(floor: SandboxProfile) -> String {
    let names: Vec<&str> = SandboxProfile::ALL
        .iter()
        .filter(|p| p.looseness() <= floor.looseness())
        .map(|p| p.as_str())
        .collect();
    names.join(" or ")
}

/// What the job's resident applies: writes beneath its session's writable `roots`
/// (`workspace-write`; the person's, `roots.rs`) and `tmpdir`; `deny_read` hidden.
pub fn spec(
    in_force: SandboxInForce,
    config: &SandboxConfig,
    roots: &roots::Roots,
    tmpdir: Option<&Path>,
    runtime_dir: &Path,
    git_write: bool,
) -> confine::Spec {
    let files = in_force.profile != SandboxProfile::Off;
    let mut writable = Vec::new();
    if in_force.profile == SandboxProfile::WorkspaceWrite {
        writable.extend(roots.paths.iter().cloned());
    }
    if files {
        writable.extend(tmpdir.map(Path::to_owned));
    }
    confine::Spec {
        files,
        writable,
        unwalked: Vec::new(),
        deny_read: if files {
            config.deny_read.clone()
        } else {
            Vec::new()
        },
        network_off: in_force.network.confined(),
        unix_sockets: files && in_force.network == Network::On && !config.unix_sockets.is_empty(),
        runtime_dir: files.then(|| runtime_dir.to_owned()),
        git_write: git_write && in_force.profile == SandboxProfile::WorkspaceWrite,
    }
}

/// The temp dir of a session's jobs confined by `in_force`, their `TMPDIR` and the
/// one place a `read-only` job may write: `sessions/<session>/tmp/<profile>.net-<network>`,
/// removed with the session. One for each sandbox (issue 42): what a job leaves in
/// its `TMPDIR` is found there only by jobs confined as it was, never by a looser one
/// that runs `$TMPDIR/...` with the network on or its workspace writable (and an
/// unconfined job keeps the client's `TMPDIR`).
pub fn tmpdir(session_dir: &Path, in_force: SandboxInForce) -> PathBuf {
    session_dir
        .join("tmp")
        .join(format!("{}.net-{}", in_force.profile, in_force.network))
}

/// Makes a session's temp dir (0700), its `tmp` and its session dir as needed, never
/// through a symlink.
pub fn make_tmpdir(tmpdir: &Path) -> io::Result<()> {
    let mut dirs: Vec<&Path> = tmpdir.ancestors().take(4).collect();
    dirs.reverse();
    for dir in dirs {
        match fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                if !fs::symlink_metadata(dir)?.is_dir() {
                    return Err(io::Error::other(format!(
                        "{} is not a directory bashd made",
                        dir.display()
                    )));
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The directories bashd made for confined jobs (each session's temp dirs, the tool
/// caches), each with the device and inode it was made as: made at the first job that
/// needs one, then only looked at (one `lstat`) before each next job, where making it
/// again took two calls a level (a `mkdir` that fails, a `lstat`), on the job's path.
/// A directory that is no longer the one made (removed, replaced) is made again, as
/// at the first job.
#[derive(Debug, Clone, Default)]
pub struct MadeDirs(
    std::sync::Arc<std::sync::Mutex<std::collections::HashMap<PathBuf, (u64, u64)>>>,
);

impl MadeDirs {
    /// Makes `dir` with `make`, unless it is still the directory made before: a
    /// directory with the same device and inode. Its last name is not followed; what
    /// is found through a parent that was made a symlink since, with that device and
    /// inode, is the directory bashd made, moved.
    pub fn ensure(&self, dir: &Path, make: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let made = self.lock().get(dir).copied();
        if made.is_some_and(|id| {
            fs::symlink_metadata(dir)
                .is_ok_and(|meta| meta.is_dir() && (meta.dev(), meta.ino()) == id)
        }) {
            return Ok(());
        }
        make()?;
        let meta = fs::symlink_metadata(dir)?;
        self.lock().insert(dir.to_owned(), (meta.dev(), meta.ino()));
        Ok(())
    }

    /// Forgets the directories beneath `dir` (a session's, removed with it).
    pub fn forget_below(&self, dir: &Path) {
        self.lock().retain(|made, _| !made.starts_with(dir));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<PathBuf, (u64, u64)>> {
        // A panic while held leaves nothing half done: each entry is inserted whole.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Puts `TMPDIR` in a sandboxed job's environment, over the client's.
pub fn set_tmpdir(env: &mut Vec<(Vec<u8>, Vec<u8>)>, tmpdir: &Path) {
    use std::os::unix::ffi::OsStrExt;
    env.retain(|(key, _)| key != b"TMPDIR");
    env.push((b"TMPDIR".to_vec(), tmpdir.as_os_str().as_bytes().to_vec()));
}

/// Puts the registries and caches of the person's tools (`network::sources`) in a job
/// confined in its files, over the client's: a registry named by the request's
/// environment is not where its tools are pointed.
pub fn set_tool_env(env: &mut Vec<(Vec<u8>, Vec<u8>)>, tools: &[(String, String)]) {
    env.retain(|(key, _)| !tools.iter().any(|(k, _)| k.as_bytes() == key));
    env.extend(
        tools
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())),
    );
}

/// What this daemon's jobs can be confined by.
#[derive(Debug, Clone)]
pub enum Support {
    /// What `bashd-resident --probe-sandbox` found at start.
    Probed(Probe),
    /// No resident starts the jobs (the scan mechanism), so nothing confines them.
    NoResident(String),
}

impl Support {
    /// Runs `bashd-resident --probe-sandbox` and reads its answer. Called before the
    /// reaper starts, which would otherwise collect the probe's exit.
    pub fn probe(resident: &Path) -> Support {
        let output = Command::new(resident)
            .arg("--probe-sandbox")
            .env_clear()
            .output();
        let probe = match output {
            Ok(output) if output.status.success() => {
                Probe::parse(&String::from_utf8_lossy(&output.stdout))
            }
            Ok(output) => Probe::parse(&format!(
                "user error the probe failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )),
            Err(e) => Probe::parse(&format!(
                "user error cannot run {}: {e}",
                resident.display()
            )),
        };
        Support::Probed(probe)
    }

    /// Whether `in_force` can be held here; the refusal names what is missing and the
    /// fix. The system's own fixes, which the resident's probe words, say how to run
    /// the job looser in words of no front end; the daemon's refusal here says it as a
    /// hint, for the front end to spell.
    pub fn check(&self, in_force: SandboxInForce) -> Result<(), ErrorReply> {
        let probe = match self {
            Support::Probed(probe) => probe,
            Support::NoResident(why) => {
                return Err(refused(format!(
                    "sandbox {}, network {}: the sandbox is applied by bashd-resident, and this daemon starts jobs without it ({why}); use the resident",
                    in_force.profile, in_force.network
                ))
                .with_hint(ErrorHint::LooserSandbox {
                    sandbox_off: in_force.profile != SandboxProfile::Off,
                    network_on: in_force.network.confined(),
                }));
            }
        };
        if in_force.profile != SandboxProfile::Off && probe.landlock_abi < 3 {
            return Err(refused(format!(
                "sandbox {} needs Landlock ABI 3 or later, and this kernel has {} ({})",
                in_force.profile,
                if probe.landlock_abi == 0 {
                    "none".to_owned()
                } else {
                    format!("ABI {}", probe.landlock_abi)
                },
                confine::FIX_LANDLOCK
            )));
        }
        if let Err(why) = &probe.user {
            return Err(refused(format!(
                "sandbox {}, network {} needs a user namespace: {why}",
                in_force.profile, in_force.network
            )));
        }
        if in_force.profile != SandboxProfile::Off
            && let Err(why) = &probe.mount
        {
            return Err(refused(format!(
                "sandbox {} needs a mount namespace: {why}",
                in_force.profile
            )));
        }
        // A job with the network off gets a mount namespace whatever its profile, to
        // keep the kernel's settings read-only (`confine::apply`).
        if in_force.profile == SandboxProfile::Off
            && in_force.network.confined()
            && let Err(why) = &probe.mount
        {
            return Err(refused(format!(
                "network off needs a mount namespace, which keeps /proc/sys read-only: {why}"
            )));
        }
        if in_force.network.confined()
            && let Err(why) = &probe.network
        {
            return Err(refused(format!(
                "network off needs a network namespace: {why}"
            )));
        }
        if let Err(why) = &probe.seccomp {
            return Err(refused(format!(
                "sandbox {}, network {} keeps the job from unix sockets with seccomp: {why}",
                in_force.profile, in_force.network
            )));
        }
        Ok(())
    }

    /// Each mechanism, whether it is there, and the doors it closes to a sandboxed
    /// job, for `bashc status`.
    pub fn mechanisms(&self) -> Vec<SandboxMechanism> {
        let probe = match self {
            Support::Probed(probe) => probe,
            Support::NoResident(why) => {
                return vec![SandboxMechanism {
                    name: "bashd-resident".to_owned(),
                    available: false,
                    detail: why.clone(),
                    closes: Vec::new(),
                }];
            }
        };
        let closes = |doors: &[&str]| doors.iter().map(|d| (*d).to_owned()).collect();
        let mut landlock_closes = vec![
            "writes outside the writable roots",
            "ptrace of processes outside the job",
        ];
        if probe.landlock_abi >= 6 {
            landlock_closes.extend([
                "signals to the job's resident and every process outside the job",
                "abstract unix sockets outside the job",
            ]);
        }
        let mut mechanisms = vec![SandboxMechanism {
            name: "landlock".to_owned(),
            available: probe.landlock_abi >= 3,
            detail: match probe.landlock_abi {
                0 => "not in this kernel, or not enabled at boot".to_owned(),
                abi @ 1..=2 => format!("ABI {abi}, older than the 3 the sandbox needs"),
                abi @ 3..=5 => format!(
                    "ABI {abi}: no signal scope before ABI 6, so a job can signal its resident"
                ),
                abi => format!("ABI {abi}"),
            },
            closes: closes(&landlock_closes),
        }];
        for (name, result, doors) in [
            (
                "user namespace",
                &probe.user,
                &[
                    "capabilities",
                    "System V IPC and POSIX message queues of the host (its own IPC namespace)",
                    "other cgroups (its own cgroup namespace)",
                ][..],
            ),
            (
                "mount namespace",
                &probe.mount,
                &[
                    "chmod, chown and utimes outside the writable roots",
                    "every .git beneath a writable root, nested repositories included",
                    "deny_read paths",
                    "other terminals (a devpts of its own)",
                    "moving out of its cgroup (cgroupfs read-only)",
                    "the kernel's settings (/proc/sys, /sys read-only), which a job run as root could set",
                ][..],
            ),
            (
                "network namespace",
                &probe.network,
                &[
                    "the network (with the network off)",
                    "abstract unix sockets of the host (with the network off)",
                ][..],
            ),
            (
                "seccomp",
                &probe.seccomp,
                &[
                    "unix sockets (socket(AF_UNIX)), datagram socket pairs, io_uring",
                    "vsock, and netlink but the job's own routes and sockets (with the network off)",
                ][..],
            ),
        ] {
            mechanisms.push(SandboxMechanism {
                name: name.to_owned(),
                available: result.is_ok(),
                detail: result.clone().err().unwrap_or_default(),
                closes: closes(doors),
            });
        }
        mechanisms
    }
}

/// What `bashc status` says of the sandbox.
pub fn status(config: &SandboxConfig, support: &Support) -> SandboxStatus {
    let cli = config.front_end(FrontEnd::Cli);
    SandboxStatus {
        default: cli.default,
        floor: cli.floor,
        front_ends: FrontEnd::ALL
            .iter()
            .map(|front_end| config.front_end(*front_end))
            .collect(),
        mechanisms: support.mechanisms(),
    }
}

/// What a job's failure reads like its sandbox refused, as notices (a file access, a
/// connection with the network off, or both); none for a job that ran unconfined,
/// succeeded, or failed for no reason it shows. The kernel does not tell a process
/// which layer refused it, so this reads the output the job showed, as Codex does.
pub fn refusal(result: &ExecResult, deny_read: &[PathBuf]) -> Vec<Notice> {
    const FILES: &[&str] = &[
        "Permission denied",
        "Read-only file system",
        "Operation not permitted",
    ];
    const NETWORK: &[&str] = &[
        "Network is unreachable",
        "Could not resolve host",
        "Temporary failure in name resolution",
        "Name or service not known",
        "Connection refused",
        "No address associated with hostname",
        "Couldn't connect to server",
        "Failed to connect to",
    ];
    let Some(in_force) = result.sandbox else {
        return Vec::new();
    };
    let failed = result.state == JobState::Exited && result.exit_code != Some(0);
    if !failed {
        return Vec::new();
    }
    let shown = |needles: &[&str]| {
        [Some(&result.stdout), result.stderr.as_ref()]
            .into_iter()
            .flatten()
            .any(|stream| needles.iter().any(|needle| stream.text.contains(needle)))
    };
    let files = in_force.profile != SandboxProfile::Off && shown(FILES);
    let network = in_force.network.confined() && shown(NETWORK);
    // A refused read of a hidden path is told apart from a refused write: its fix is
    // `deny_read`, which no profile or `writable` path changes. A job that met both
    // is told both.
    let refused: Vec<&str> = [Some(&result.stdout), result.stderr.as_ref()]
        .into_iter()
        .flatten()
        .flat_map(|stream| stream.text.lines())
        .filter(|line| FILES.iter().any(|needle| line.contains(needle)))
        .collect();
    let (hidden, other): (Vec<&str>, Vec<&str>) = refused
        .into_iter()
        .partition(|line| names_hidden_path(line, deny_read));
    [
        (files && !other.is_empty(), SandboxDenial::Files),
        (files && !hidden.is_empty(), SandboxDenial::Read),
        (network, SandboxDenial::Network),
    ]
    .into_iter()
    .filter(|(shown, _)| *shown)
    .map(|(_, denied)| Notice::SandboxDenied {
        profile: in_force.profile,
        network: in_force.network,
        denied,
    })
    .collect()
}

/// Whether an error line names a path at or beneath one of `hidden`: the absolute
/// paths in it, as tools quote them (`cat: /home/me/.ssh/id_ed25519: Permission
/// denied`, `cannot open '/home/me/.aws/credentials'`).
fn names_hidden_path(line: &str, hidden: &[PathBuf]) -> bool {
    line.split(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ':' | '(' | ')'))
        .filter(|word| word.starts_with('/'))
        .map(|word| Path::new(word.trim_end_matches([',', ';', '.'])))
        .any(|path| hidden.iter().any(|dir| path.starts_with(dir)))
}

#[cfg(test)]
mod tests;

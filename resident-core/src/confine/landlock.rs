//! The Landlock domain of a confined job: read and run everywhere but the `deny_read`
//! paths (`reads.rs`), write only beneath the writable roots (which it reads whole) and
//! to the devices every program writes to; no signal to a
//! process outside the job, its resident included, and no connection to an abstract
//! unix socket made outside it, where the kernel scopes them (ABI 6).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::reads;
use super::{FIX_LANDLOCK, Failure};

/// The oldest ABI whose write rights close every way to change a file: ABI 3 adds
/// `truncate`, which the earlier ones let through.
const MIN_ABI: i32 = 3;

/// Devices a job writes to without writing anything anywhere: output thrown away,
/// terminals. Device ioctls (a terminal's size) are allowed on them only.
pub(super) const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// The kernel's Landlock ABI, 0 without Landlock (not built in, or not enabled at
/// boot).
pub(super) fn abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: a query of the ABI version: null attributes of size 0, as the kernel asks for it.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    version.max(0) as i32
}

/// Whether the kernel's Landlock can hold a job's writes.
pub(super) fn check() -> Result<(), Failure> {
    let abi = abi();
    if abi < MIN_ABI {
        return Err(Failure {
            step: if abi == 0 {
                "confine the file system: this kernel has no Landlock".to_owned()
            } else {
                format!("confine the file system: this kernel has Landlock ABI {abi}")
            },
            error: io::Error::from(io::ErrorKind::Unsupported),
            fix: FIX_LANDLOCK,
        });
    }
    Ok(())
}

/// Scopes the calling process (and what it starts) without confining its files: no
/// signal to a process outside the job and no abstract unix socket of the host, where
/// the kernel has ABI 6; nothing on an older kernel, where a job whose files are not
/// confined can signal its resident (`bashc status` says which).
pub(super) fn scope_only() -> Result<(), Failure> {
    if abi() < 6 {
        return Ok(());
    }
    let fail = |e: landlock::RulesetError| Failure {
        step: "scope the job's signals".to_owned(),
        error: io::Error::other(e.to_string()),
        fix: FIX_LANDLOCK,
    };
    Ruleset::default()
        .scope(Scope::from_all(ABI::V6))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .map_err(fail)?;
    Ok(())
}

/// The read rules of `grants` as a ruleset of their own, made ahead by the zygote
/// (`reads::Prepared`) for [`restrict_reads`]: it handles reads and moves across
/// directories only, so a job applies it beside the ruleset of its writes (with no
/// `deny_read` of its own, reads beneath `/`), and each right is held by the one that
/// handles it. Listing everywhere; reading and running what `grants` holds; moving
/// across directories beneath the directories granted (the writes' ruleset holds it to
/// the writable roots: a ruleset that handles no `Refer` refuses every such move).
pub(super) fn read_layer(grants: Vec<reads::Grant>) -> io::Result<OwnedFd> {
    let error = |e: &dyn std::fmt::Display| io::Error::other(e.to_string());
    let read = AccessFs::from_read(ABI::V5);
    let file: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::Execute;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(read | AccessFs::Refer)
        .and_then(|r| r.create())
        .map_err(|e| error(&e))?;
    let root = PathFd::new("/").map_err(|e| error(&e))?;
    ruleset = ruleset
        .add_rule(PathBeneath::new(root, AccessFs::ReadDir))
        .map_err(|e| error(&e))?;
    for grant in grants {
        let access = if grant.dir {
            read | AccessFs::Refer
        } else {
            file
        };
        ruleset = ruleset
            .add_rule(PathBeneath::new(grant.fd, access))
            .map_err(|e| error(&e))?;
    }
    Option::<OwnedFd>::from(ruleset).ok_or_else(|| io::Error::from(io::ErrorKind::Unsupported))
}

/// Applies a ruleset [`read_layer`] made, after [`restrict`] with no `deny_read`
/// (which set `no_new_privs`, as the kernel asks).
pub(super) fn restrict_reads(ruleset: &OwnedFd) -> Result<(), Failure> {
    // SAFETY: a ruleset descriptor this process holds, and no flags.
    let done = unsafe {
        libc::syscall(
            libc::SYS_landlock_restrict_self,
            ruleset.as_raw_fd(),
            0 as libc::c_uint,
        )
    };
    if done != 0 {
        return Err(Failure {
            step: "confine the file system's reads".to_owned(),
            error: io::Error::last_os_error(),
            fix: FIX_LANDLOCK,
        });
    }
    Ok(())
}

/// Restricts the calling process (and what it starts) to reading everywhere but
/// `deny_read` and writing beneath `writable`; sets `no_new_privs`. A writable root
/// that does not exist is skipped: nothing can be written there either. `terminal`:
/// the job's own terminal is bound over `/dev/console`, which it may then write too.
/// `deny_read` adds a rule for each entry around each hidden path (`reads.rs`).
pub(super) fn restrict(
    writable: &[PathBuf],
    deny_read: &[PathBuf],
    terminal: bool,
) -> Result<(), Failure> {
    let fail = |error: io::Error| Failure {
        step: "confine the file system".to_owned(),
        error,
        fix: FIX_LANDLOCK,
    };
    let landlock_error = |e: landlock::RulesetError| fail(io::Error::other(e.to_string()));
    let all = AccessFs::from_all(ABI::V5);
    let read = AccessFs::from_read(ABI::V5);
    let device: BitFlags<AccessFs> =
        AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let mut ruleset = Ruleset::default()
        // What holds every write is required; what later ABIs add (device ioctls,
        // signal and socket scopes) is taken where the kernel has it.
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI::V3))
        .and_then(|r| {
            r.set_compatibility(CompatLevel::BestEffort)
                .handle_access(all)
        })
        .and_then(|r| r.scope(Scope::from_all(ABI::V6)))
        .and_then(|r| r.create())
        .map_err(landlock_error)?;
    let root = PathFd::new("/").map_err(|e| fail(io::Error::other(e.to_string())))?;
    if deny_read.is_empty() {
        ruleset = ruleset
            .add_rule(PathBeneath::new(root, read))
            .map_err(landlock_error)?;
    } else {
        // Listing everywhere; reading and running only what `reads::grants` found
        // around the hidden paths, so a name that appears there later gets nothing.
        ruleset = ruleset
            .add_rule(PathBeneath::new(root, AccessFs::ReadDir))
            .map_err(landlock_error)?;
        let file: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::Execute;
        for grant in reads::grants(&reads::hidden(deny_read)) {
            let access = if grant.dir { read } else { file };
            ruleset = ruleset
                .add_rule(PathBeneath::new(grant.fd, access))
                .map_err(landlock_error)?;
        }
    }
    for dir in writable {
        if let Ok(fd) = PathFd::new(dir) {
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, all))
                .map_err(landlock_error)?;
        }
    }
    let console = terminal.then_some("/dev/console");
    for device_path in DEVICES.iter().copied().chain(console) {
        if let Ok(fd) = PathFd::new(device_path) {
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, device))
                .map_err(landlock_error)?;
        }
    }
    let status = ruleset.restrict_self().map_err(landlock_error)?;
    if status.ruleset == RulesetStatus::NotEnforced || !status.no_new_privs {
        return Err(fail(io::Error::from(io::ErrorKind::Unsupported)));
    }
    Ok(())
}

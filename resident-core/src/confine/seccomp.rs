//! The seccomp filter of a confined job: `socket(AF_UNIX, ...)` fails with EPERM, so
//! the job reaches no unix socket by its path (a session bus, docker.sock, an ssh
//! agent, bashd's own socket), which neither Landlock (before a kernel that scopes
//! pathname sockets) nor a network namespace holds. `socketpair(AF_UNIX)` stays
//! allowed: a pair connects nothing outside the process that makes it. `io_uring` is
//! refused with it, since an io_uring can make a socket without the `socket` system
//! call. Sockets opened before the filter (the job's stdio, a channel bashd hands the
//! job) keep working. The rules, as Anthropic's sandbox-runtime has them, are
//! compiled by `seccompiler` (Firecracker's).

use std::collections::BTreeMap;
use std::io;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::Failure;

const FIX_SECCOMP: &str = "this kernel refuses the seccomp filter that keeps a job from unix sockets: run the job unsandboxed (sandbox off, network on)";

/// The filter, compiled once: by the zygote before it forks any resident
/// ([`prepare`]), so that a job's process finds it ready in the memory it inherits.
static PROGRAM: OnceLock<Result<BpfProgram, String>> = OnceLock::new();

/// Compiles the filter now, ahead of the jobs.
pub(super) fn prepare() {
    PROGRAM.get_or_init(program);
}

/// Installs the filter on the calling thread, which has `no_new_privs`; everything it
/// starts inherits it. A process of another architecture (a 32-bit program, whose
/// `socketcall` the filter could not read) is killed by the filter's first check.
pub(super) fn deny_unix_sockets() -> Result<(), Failure> {
    let fail = |error: io::Error| Failure {
        step: "keep the job from unix sockets".to_owned(),
        error,
        fix: FIX_SECCOMP,
    };
    let program = PROGRAM
        .get_or_init(program)
        .as_ref()
        .map_err(|e| fail(io::Error::other(e.clone())))?;
    seccompiler::apply_filter(program).map_err(|e| fail(io::Error::other(e.to_string())))
}

fn program() -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let unix = SeccompRule::new(vec![
        SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            libc::AF_UNIX as u64,
        )
        .map_err(|e| e.to_string())?,
    ])
    .map_err(|e| e.to_string())?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, vec![unix.clone()]);
    // x32 calls carry the x86-64 architecture and their own numbers.
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_socket | X32_SYSCALL_BIT, vec![unix]);
    // No condition: always refused.
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

#[cfg(test)]
mod tests {
    #[test]
    fn the_filter_compiles_for_this_architecture() {
        assert!(super::program().is_ok_and(|p| !p.is_empty()));
    }
}

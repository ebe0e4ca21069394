//! The seccomp filter of a confined job: `socket(AF_UNIX, ...)` fails with EPERM, so
//! the job reaches no unix socket by its path (a session bus, docker.sock, an ssh
//! agent, bashd's own socket), which neither Landlock (before a kernel that scopes
//! pathname sockets) nor a network namespace holds. `socketpair(AF_UNIX)` stays
//! allowed for the types whose ends reach only each other, stream and seqpacket (a
//! seqpacket end ignores the address `sendto` names, and `connect` finds it
//! connected); a datagram pair (`SOCK_DGRAM`, and `SOCK_RAW`, which the kernel makes
//! a datagram pair) is refused, since a datagram end sends to any path `sendto` names
//! or `connect` points it at, and seccomp cannot read that address (issue 42, hole 4).
//! With the network off, `socket()` is refused for `AF_VSOCK` too, which no network
//! namespace holds (it reaches the hypervisor's and the host's services), and for
//! every `AF_NETLINK` protocol but `NETLINK_ROUTE` and `NETLINK_SOCK_DIAG`
//! (`getifaddrs`, `ip`, `ss`, which see the job's own namespace only): the others
//! reach nothing of the host's from a job's namespace, but they serve no job and are
//! the kernel's surface (nf_tables through a nested user namespace).
//! `io_uring` is refused with them, since an io_uring can make a socket without the
//! `socket` system call. Sockets opened before the filter (the job's stdio, a channel
//! bashd hands the job) keep working. The rules, as Anthropic's sandbox-runtime has
//! them (with the datagram pair and the network-off families added), are compiled by
//! `seccompiler` (Firecracker's).

use std::collections::BTreeMap;
use std::io;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::Failure;

const FIX_SECCOMP: &str = "this kernel refuses the seccomp filter that keeps a job from unix sockets: run the job unsandboxed (sandbox off, network on)";

/// The filters, compiled once (with the network on, and off): by the zygote before it
/// forks any resident ([`prepare`]), so that a job's process finds them ready in the
/// memory it inherits.
static NETWORK_ON: OnceLock<Result<BpfProgram, String>> = OnceLock::new();
static NETWORK_OFF: OnceLock<Result<BpfProgram, String>> = OnceLock::new();

/// Compiles the filters now, ahead of the jobs.
pub(super) fn prepare() {
    NETWORK_ON.get_or_init(|| program(false));
    NETWORK_OFF.get_or_init(|| program(true));
}

/// Installs the filter of a job with its network on or off on the calling thread,
/// which has `no_new_privs`; everything it starts inherits it. A process of another
/// architecture (a 32-bit program, whose `socketcall` the filter could not read) is
/// killed by the filter's first check.
pub(super) fn install(network_off: bool) -> Result<(), Failure> {
    let fail = |error: io::Error| Failure {
        step: "keep the job from unix sockets".to_owned(),
        error,
        fix: FIX_SECCOMP,
    };
    let program = if network_off {
        NETWORK_OFF.get_or_init(|| program(true))
    } else {
        NETWORK_ON.get_or_init(|| program(false))
    };
    let program = program
        .as_ref()
        .map_err(|e| fail(io::Error::other(e.clone())))?;
    seccompiler::apply_filter(program).map_err(|e| fail(io::Error::other(e.to_string())))
}

/// `arg` (a 32-bit argument) compared by `op` with `value`.
fn arg(arg: u8, op: SeccompCmpOp, value: libc::c_int) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value as u64).map_err(|e| e.to_string())
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

/// The filter: each rule that matches fails the call with EPERM.
fn program(network_off: bool) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let family = |family| arg(0, SeccompCmpOp::Eq, family);
    let mut socket = vec![rule(vec![family(libc::AF_UNIX)?])?];
    if network_off {
        socket.push(rule(vec![family(libc::AF_VSOCK)?])?);
        socket.push(rule(vec![
            family(libc::AF_NETLINK)?,
            arg(2, SeccompCmpOp::Ne, libc::NETLINK_ROUTE)?,
            arg(2, SeccompCmpOp::Ne, libc::NETLINK_SOCK_DIAG)?,
        ])?);
    }
    // The type without SOCK_CLOEXEC and SOCK_NONBLOCK (the kernel's SOCK_TYPE_MASK).
    let kind = |kind| arg(1, SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK), kind);
    let socketpair = vec![
        rule(vec![family(libc::AF_UNIX)?, kind(libc::SOCK_DGRAM)?])?,
        rule(vec![family(libc::AF_UNIX)?, kind(libc::SOCK_RAW)?])?,
    ];
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, socket.clone());
    rules.insert(libc::SYS_socketpair, socketpair.clone());
    // x32 calls carry the x86-64 architecture and their own numbers.
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_socket | X32_SYSCALL_BIT, socket);
        rules.insert(libc::SYS_socketpair | X32_SYSCALL_BIT, socketpair);
    }
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

/// The bits of a socket's type that name it; the others are SOCK_CLOEXEC and
/// SOCK_NONBLOCK.
const SOCK_TYPE_MASK: u64 = 0xf;

#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

#[cfg(test)]
mod tests {
    #[test]
    fn the_filters_compile_for_this_architecture() {
        for network_off in [false, true] {
            assert!(super::program(network_off).is_ok_and(|p| !p.is_empty()));
        }
    }
}

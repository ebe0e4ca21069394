//! `cargo build --release && cargo run --release -p bashd-tests --bin hot-code`: writes
//! `client/hot-code.ld`, the linker script that puts the code an agent's calls run
//! together at the start of a release `bashc`'s text (issue 31; `client/build.rs` says
//! why and when it is applied).
//!
//! It starts a daemon on a temporary runtime directory and runs the release `bashc`
//! beside this program for the calls an agent makes most (`exec` first, then `check`,
//! `wait`, `jobs`, `output`, `kill`, `status`, `--version`), each one single-stepped
//! under `ptrace` from its `execve` to its exit, so that every function it runs is seen
//! once, in the order it first ran. Sampling (`perf record`) misses the short ones, and
//! each one missed is a page fault of its own at every start. `nm` names the function
//! each address is in; a Rust symbol becomes a pattern without its crate hashes (they
//! change with the toolchain, the lock file and the flags, not with an edit of the
//! source), a C one (glibc's start, `malloc`, `memcpy`) the archive member it comes
//! from. Run it again after a change of the toolchain or of what those calls do; a
//! list gone stale costs speed, never correctness.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bashd_tests::{Daemon, bin_path};

/// The calls traced, in the order their code is laid out: an agent's `exec` first.
const CALLS: &[&[&str]] = &[
    &["exec", "--", "true"],
    &["exec", "--", "echo hello; echo there >&2; exit 3"],
    &["exec", "--mode", "background", "--", "sleep 30"],
    &["check", "j3"],
    &["wait", "--timeout", "1", "j3"],
    &["output", "j2"],
    &["jobs"],
    &["kill", "j3"],
    &["status"],
    &["--version"],
];

fn main() {
    let bashc = bin_path("bashc");
    let daemon = Daemon::start();
    let mut first_run: Vec<u64> = Vec::new();
    let mut seen = HashSet::new();
    for args in CALLS {
        let mut command = daemon.bashc();
        // An agent's call names no session: bashc finds the agent in /proc.
        command
            .env_remove("BASHD_SESSION")
            .args(*args)
            .stdout(Stdio::null());
        let steps = single_step(command, &mut |ip| {
            if seen.insert(ip) {
                first_run.push(ip);
            }
        });
        eprintln!(
            "hot-code: bashc {} ran {steps} instructions",
            args.join(" ")
        );
    }
    let functions = Functions::of(&bashc);
    let members = ArchiveMembers::of_c_libraries();
    let mut patterns = Vec::new();
    let mut listed = HashSet::new();
    for ip in first_run {
        let Some(symbol) = functions.containing(ip) else {
            continue;
        };
        let Some(pattern) = pattern_of(symbol, &members) else {
            continue;
        };
        if listed.insert(pattern.clone()) {
            patterns.push(pattern);
        }
    }
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the workspace")
        .join("client/hot-code.ld");
    write_script(&out, &patterns).unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
    eprintln!(
        "hot-code: {} patterns written to {}",
        patterns.len(),
        out.display()
    );
}

/// Runs `command` under `ptrace`, one instruction at a time, calling `each` with the
/// address of every instruction; the number of instructions.
fn single_step(mut command: Command, each: &mut dyn FnMut(u64)) -> u64 {
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // `ptrace`, which is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    #[expect(
        clippy::zombie_processes,
        reason = "reaped by the waitpid below, which sees the child's ptrace stops"
    )]
    let child = command.spawn().expect("cannot start bashc under ptrace");
    let pid = child.id() as libc::pid_t;
    let mut steps = 0;
    let mut signal = 0;
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid out pointer.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == -1 {
            return steps;
        }
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            return steps;
        }
        if libc::WIFSTOPPED(status) && libc::WSTOPSIG(status) != libc::SIGTRAP {
            // A signal for bashc itself (SIGCHLD, SIGPIPE): deliver it.
            signal = libc::WSTOPSIG(status);
        }
        // SAFETY: `user_regs_struct` is plain data, filled in by the kernel.
        let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        // SAFETY: the child is stopped under our trace; `regs` is large enough.
        if unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut regs) } == 0 {
            each(regs.rip);
        }
        // SAFETY: the child is stopped under our trace.
        if unsafe { libc::ptrace(libc::PTRACE_SINGLESTEP, pid, 0, signal as libc::c_long) } == -1 {
            break;
        }
        signal = 0;
        steps += 1;
    }
    // The trace failed with the child still stopped, not yet reaped: its pid is its own.
    // SAFETY: signals and waits for our own unreaped child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    steps
}

/// The text symbols of a binary, by address (`nm -n`).
struct Functions {
    starts: BTreeMap<u64, String>,
}

impl Functions {
    fn of(binary: &Path) -> Functions {
        let mut starts = BTreeMap::new();
        for (address, name) in nm_functions(&["-n"], binary) {
            if let Ok(address) = u64::from_str_radix(&address, 16) {
                starts.entry(address).or_insert(name);
            }
        }
        assert!(
            !starts.is_empty(),
            "nm lists no functions in {}: install binutils, or build bashc first",
            binary.display()
        );
        Functions { starts }
    }

    fn containing(&self, ip: u64) -> Option<&str> {
        self.starts
            .range(..=ip)
            .next_back()
            .map(|(_, name)| name.as_str())
    }
}

/// Which member of glibc's and gcc's static archives defines each C function, for the
/// C part of the static `bashc`: its sections are named `.text`, not after the function.
struct ArchiveMembers {
    by_symbol: BTreeMap<String, String>,
}

impl ArchiveMembers {
    fn of_c_libraries() -> ArchiveMembers {
        let mut by_symbol = BTreeMap::new();
        for archive in ["libc.a", "libgcc.a", "libgcc_eh.a", "libm.a"] {
            let Some(path) = c_archive(archive) else {
                continue;
            };
            // `/usr/lib/.../libc.a:getenv.o:0000000000000000 T getenv`
            for (place, name) in nm_functions(&["-A"], &path) {
                if let Some(member) = place.rsplit(':').nth(1) {
                    let member = format!("{archive}:{member}");
                    by_symbol.entry(name).or_insert(member);
                }
            }
        }
        ArchiveMembers { by_symbol }
    }
}

/// The functions `nm` lists in `file` with `flags`: the first field of each line (the
/// address, or with `-A` the file and address) and the name. Nothing when `nm` fails.
fn nm_functions(flags: &[&str], file: &Path) -> Vec<(String, String)> {
    let Ok(out) = Command::new("nm")
        .args(flags)
        .arg("--defined-only")
        .arg(file)
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (first, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
            matches!(kind, "t" | "T" | "w" | "W" | "i").then(|| (first.to_owned(), name.to_owned()))
        })
        .collect()
}

/// Where the C compiler finds `archive`, if it does.
fn c_archive(archive: &str) -> Option<PathBuf> {
    let out = Command::new("cc")
        .arg(format!("-print-file-name={archive}"))
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    path.is_absolute().then_some(path)
}

/// The input-section pattern that finds `symbol`'s code in another build of the same
/// source: `None` for what no pattern can name (a function of an archive `nm` cannot
/// read, such as Debian's `libm.a`, a linker script).
fn pattern_of(symbol: &str, members: &ArchiveMembers) -> Option<String> {
    if symbol.starts_with("_R") || symbol.starts_with("_ZN") || symbol == "main" {
        // LLVM names the section of a function it thinks cold `.text.unlikely.<symbol>`
        // (`RawVec::grow_one`, a `OnceCell`'s first fill), though a start runs it.
        let name = without_hashes(symbol);
        return Some(format!("*(.text.{name} .text.unlikely.{name})"));
    }
    if symbol == "_start" {
        // The C runtime's entry, in the start file the compiler links first.
        return Some("*crt1.o(.text .text.*)".to_owned());
    }
    let member = members.by_symbol.get(symbol)?;
    Some(format!("*{member}(.text .text.*)"))
}

/// A Rust symbol with its crate hashes (`Cs<base-62>_` in v0 mangling, `17h<hex>E` in
/// the legacy one) and LLVM's `.llvm.<n>` suffix made wildcards.
fn without_hashes(symbol: &str) -> String {
    let symbol = match symbol.find(".llvm.") {
        Some(at) => &symbol[..at],
        None => symbol,
    };
    if let Some(body) = symbol.strip_prefix("_ZN") {
        if let Some(at) = body.rfind("17h") {
            return format!("_ZN{}17h*", &body[..at]);
        }
        return symbol.to_owned();
    }
    let mut out = String::with_capacity(symbol.len());
    let mut rest = symbol;
    while let Some(at) = rest.find("Cs") {
        out.push_str(&rest[..at + 2]);
        let after = &rest[at + 2..];
        let hash = after.bytes().take_while(u8::is_ascii_alphanumeric).count();
        if hash > 0 && after.as_bytes().get(hash) == Some(&b'_') {
            out.push('*');
            rest = &after[hash..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    // The wildcard also takes the `.llvm.` suffix another build may add.
    if symbol.starts_with("_R") {
        out.push('*');
    }
    out
}

fn write_script(out: &Path, patterns: &[String]) -> std::io::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(out)?);
    writeln!(
        file,
        "/* Written by `cargo run --release -p bashd-tests --bin hot-code` (tests/src/bin/hot-code.rs):"
    )?;
    writeln!(
        file,
        "   the code bashc's most frequent calls run, in the order it first runs, put before"
    )?;
    writeln!(
        file,
        "   the rest of the text so that a start faults in a few pages of it, not one page"
    )?;
    writeln!(file, "   in every 64 KiB of 6 MiB. See client/build.rs. */")?;
    writeln!(file, "SECTIONS\n{{\n  .text.hot :\n  {{")?;
    for pattern in patterns {
        writeln!(file, "    {pattern}")?;
    }
    writeln!(file, "  }}\n}}\nINSERT BEFORE .text;")?;
    file.flush()
}

#[cfg(test)]
mod tests {
    use super::without_hashes;

    #[test]
    fn v0_crate_hashes_and_llvm_suffixes_become_wildcards() {
        assert_eq!(
            without_hashes("_RNvCsgEmfK2I1SDS_5bashc4main.llvm.1234"),
            "_RNvCs*_5bashc4main*"
        );
        assert_eq!(
            without_hashes("_RINvNtCs1a_4core3ptr13drop_in_placeNtCs2Bc_5bashc3CliECs3_5bashc"),
            "_RINvNtCs*_4core3ptr13drop_in_placeNtCs*_5bashc3CliECs*_5bashc*"
        );
    }

    #[test]
    fn legacy_hashes_become_wildcards() {
        assert_eq!(
            without_hashes("_ZN5bashc4main17h4bf42105496263a1E"),
            "_ZN5bashc4main17h*"
        );
        assert_eq!(
            without_hashes(
                "_ZN5bashc3run28_$u7b$$u7b$closure$u7d$$u7d$17hf0de75609e3108c2E.llvm.99"
            ),
            "_ZN5bashc3run28_$u7b$$u7b$closure$u7d$$u7d$17h*"
        );
    }
}

//! Links the `bashc` binary static and position-dependent on Linux with glibc (issue
//! 31): an agent starts one `bashc` per command, and before `main` a dynamic `bashc`
//! spent about a third of its start in the loader, mapping libgcc_s, libm and libc and
//! relocating them and itself. A static, position-dependent `bashc` has no loader and
//! no relocations: its pages are mapped as they are in the file.
//!
//! cargo has no stable way to give one binary `-C target-feature=+crt-static` (the
//! flag through `RUSTFLAGS` reaches the proc macros too, which cannot be static), so
//! this is done at the link: `-static -no-pie` to the linker driver, and a directory,
//! searched first, where each library rustc names for std (`-lgcc_s`, `-lc`, `-lm`, ...)
//! is a linker script that takes the static archive of it instead (`libgcc_eh.a` for
//! `libgcc_s`, the unwinder). Where the archives are missing (a distribution without
//! glibc's static libraries, as Fedora without glibc-static), `bashc` is linked dynamic
//! and position-dependent, and the build says so; Debian's build-essential has them.
//!
//! What is given up: the randomised address of bashc's own code and of the libc in it,
//! and libc updates of the system, which a static `bashc` only gets when rebuilt. bashc
//! runs as its user, talks only to that user's daemon, and whoever can feed it input
//! (an agent, a job) can already run any command as that user through it, so there is
//! nothing for an attacker to gain by knowing where its code is; heap, stack and mmap
//! areas are still randomised. bashc calls nothing of glibc that loads shared objects
//! at run time (no user, group or host lookups: NSS, no `dlopen`); a static glibc would
//! still do such a call, with the system's NSS modules of the same glibc version. The
//! library, the daemon and the resident stay dynamic and position-independent.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The libraries std (through the `libc` crate) links on linux-gnu, each with the
/// static archives that stand in for it.
const STATIC_STAND_INS: &[(&str, &str)] = &[
    ("gcc_s", "-l:libgcc_eh.a -l:libgcc.a"),
    ("util", "-l:libutil.a"),
    ("rt", "-l:librt.a"),
    ("pthread", "-l:libpthread.a"),
    ("m", "-l:libm.a"),
    ("dl", "-l:libdl.a"),
    ("c", "-l:libc.a -l:libgcc.a -l:libgcc_eh.a"),
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux" {
        return;
    }
    // rustc passes `-pie` to the linker driver (cc); the last of the two wins.
    println!("cargo:rustc-link-arg-bin=bashc=-no-pie");
    hot_code_first(&var);
    let crt_static = var("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    if var("CARGO_CFG_TARGET_ENV") != "gnu" || crt_static {
        // musl, or a build that asked for a static C runtime itself: rustc links the
        // archives already.
        return;
    }
    let linker = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".to_owned());
    let missing: Vec<&str> = ["libc.a", "libgcc_eh.a"]
        .into_iter()
        .filter(|archive| !has_file(&linker, archive))
        .collect();
    if !missing.is_empty() {
        println!(
            "cargo:warning=bashc is linked dynamic: {linker} has no {} (glibc's and gcc's static libraries); a static bashc starts about 0.3 ms faster",
            missing.join(" or ")
        );
        return;
    }
    let dir = PathBuf::from(var("OUT_DIR")).join("static-libs");
    if let Err(e) = write_stand_ins(&dir) {
        println!(
            "cargo:warning=bashc is linked dynamic: cannot write {}: {e}",
            dir.display()
        );
        return;
    }
    // `-L` reaches every `-l` of the link wherever it stands, and a directory given on
    // the command line is searched before the system's.
    println!("cargo:rustc-link-arg-bin=bashc=-L{}", dir.display());
    println!("cargo:rustc-link-arg-bin=bashc=-static");
}

/// Gives a release `bashc`'s link `hot-code.ld`, which puts the code of an agent's
/// calls before the rest of the text. The text is 6.6 MiB (the MCP server, `top`, SSH),
/// and a `bashc exec` runs about 570 KiB of it, spread over the whole: the kernel maps
/// a file's pages 64 KiB at a time on a fault, so a start took a page fault in 72 of
/// the text's 105 windows, about half its CPU time; together, the code of the calls
/// traced is about 1.1 MiB, eighteen windows. The script's patterns carry no crate hashes, so an edit of the source keeps
/// them; a new toolchain or lock file may leave some stale (speed lost, nothing else),
/// and `hot-code` (tests/src/bin/hot-code.rs) writes them anew. GNU ld and lld, rustc's
/// linker on Linux, read the script; mold and gold do not, and are left without it, as
/// is a debug build, whose link it would slow by seconds.
fn hot_code_first(var: &dyn Fn(&str) -> String) {
    println!("cargo:rerun-if-changed=hot-code.ld");
    let linker = format!("{} {}", var("RUSTC_LINKER"), var("CARGO_ENCODED_RUSTFLAGS"));
    if var("PROFILE") != "release" || linker.contains("mold") || linker.contains("gold") {
        return;
    }
    let Ok(script) = std::fs::read(PathBuf::from(var("CARGO_MANIFEST_DIR")).join("hot-code.ld"))
    else {
        return;
    };
    // Named after its content: cargo links again when the arguments change, and knows
    // nothing of the files the linker reads.
    let hash = script
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    let copy = PathBuf::from(var("OUT_DIR")).join(format!("hot-code-{hash:016x}.ld"));
    if std::fs::write(&copy, &script).is_ok() {
        println!("cargo:rustc-link-arg-bin=bashc=-Wl,-T,{}", copy.display());
    }
}

/// Whether the linker driver finds `name` in its library path: it prints the full path
/// when it does, the name alone when not.
fn has_file(linker: &str, name: &str) -> bool {
    Command::new(linker)
        .arg(format!("-print-file-name={name}"))
        .output()
        .ok()
        .filter(|out| out.status.success())
        .is_some_and(|out| Path::new(String::from_utf8_lossy(&out.stdout).trim()).is_absolute())
}

/// `lib<name>.so` in `dir` for each library: rustc asks for them after `-Bdynamic`, so
/// the linker looks for the `.so` first, and finds these scripts before the system's.
fn write_stand_ins(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, archives) in STATIC_STAND_INS {
        std::fs::write(
            dir.join(format!("lib{name}.so")),
            format!("/* bashc's static link (client/build.rs) */\nGROUP({archives})\n"),
        )?;
    }
    Ok(())
}

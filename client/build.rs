//! Links the `bashc` binary as a position-dependent executable on Linux (issue 31): an
//! agent starts one `bashc` per command, and a PIE `bashc` spent about a fifth of its
//! start in the dynamic loader relocating its own 160 KiB of `.data.rel.ro` (8,800
//! relative relocations, 35 of its 175 page faults) before `main`. Linked at a fixed
//! address, those pointers are final in the file and its pages are mapped as they are.
//!
//! What is given up is the randomised address of bashc's own code. bashc runs as its
//! user, talks only to that user's daemon, and whoever can feed it input (an agent, a
//! job) can already run any command as that user through it, so there is nothing for
//! an attacker to gain by knowing where its code is. The libraries, heap and stack are
//! still randomised. The library, the daemon and the resident stay position-independent.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        // rustc passes `-pie` to the linker driver (cc); the last of the two wins.
        println!("cargo:rustc-link-arg-bin=bashc=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

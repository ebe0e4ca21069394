//! `BASHD_BENCH=cli` (issue 31): what the CLI itself costs, as whole processes.
//! `bashc exec -- true` against `bash -c true` (the call it stands for) and against
//! the start of a Rust hello world, the floor of any Rust program: the difference is
//! bashc's own start (arguments, runtime, connection) and the daemon's round trip,
//! which runs one `bash -c true` itself. `bashc --version` against the same hello
//! world is the start alone, and `bashc status` against it the start with one round
//! trip on a connection (the part of an exec that is not the job). The floor of
//! `bashc exec -- true` is one more process start than `bash -c true`: a sample of it
//! runs the hello world, then `bash -c true`. The hello world is built here with
//! `rustc -O`; where that fails, `/bin/true` stands in as the floor, and the line says
//! so.
//!
//! The minor page faults of each start are counted beside the times: how much of
//! bashc's code and data a call touches decides them, and a count holds still
//! whatever the machine's load.
//!
//! `BASHD_BENCH_BASHC_BEFORE=PATH` names another `bashc` (an older build) to run in
//! turns with this one, so that a change to the client's start is measured against
//! what it replaced in the same run, whatever the machine's load.

use std::path::{Path, PathBuf};
use std::process::Command;

use bashd_tests::Daemon;

use super::{PROCESS_RUNS, paired_medians, report, run};

pub fn cli() {
    let daemon = Daemon::start();
    let (floor, floor_name) = match hello_world(daemon.scratch()) {
        Ok(hello) => (hello, "a Rust hello world"),
        Err(why) => {
            println!("cli: no Rust hello world ({why}); /bin/true is the floor");
            (PathBuf::from("/bin/true"), "/bin/true")
        }
    };
    // Each pair runs one after the other, so load from outside the bench weighs on
    // both sides alike.
    let exec = || run(daemon.bashc().args(["exec", "--", "true"]));
    let (bashc, bash) = paired_medians(PROCESS_RUNS, exec, || {
        run(Command::new("bash").args(["-c", "true"]))
    });
    report(
        "bashc exec -- true vs bash -c true (median, whole processes)",
        bashc,
        bash,
        2.0,
    );
    let (bashc, hello) = paired_medians(PROCESS_RUNS, exec, || run(&mut Command::new(&floor)));
    report(
        &format!("bashc exec -- true vs {floor_name} (median, whole processes)"),
        bashc,
        hello,
        2.7,
    );
    let (version, hello) = paired_medians(
        PROCESS_RUNS,
        || run(daemon.bashc().arg("--version")),
        || run(&mut Command::new(&floor)),
    );
    report(
        &format!("bashc --version vs {floor_name} (median, whole processes)"),
        version,
        hello,
        1.3,
    );
    let (status, hello) = paired_medians(
        PROCESS_RUNS,
        || run(daemon.bashc().arg("status")),
        || run(&mut Command::new(&floor)),
    );
    report(
        &format!("bashc status vs {floor_name} (median, whole processes)"),
        status,
        hello,
        1.6,
    );
    // The floor: 2.0x `bash -c true` is about 1.2x this.
    let (bashc, both) = paired_medians(PROCESS_RUNS, exec, || {
        run(&mut Command::new(&floor));
        run(Command::new("bash").args(["-c", "true"]));
    });
    report(
        &format!("bashc exec -- true vs {floor_name} then bash -c true (median)"),
        bashc,
        both,
        1.2,
    );
    // Page faults are the part of bashc's start that what it touches decides;
    // counted, they hold still whatever the machine's load.
    let faults = |command: &mut Command| {
        let mut each: Vec<i64> = (0..20).map(|_| page_faults_of(command)).collect();
        each.sort_unstable();
        each[each.len() / 2]
    };
    println!(
        "page faults (median of 20): bashc exec -- true {}, bashc --version {}, {floor_name} {}, bash -c true {}",
        faults(daemon.bashc().args(["exec", "--", "true"])),
        faults(daemon.bashc().arg("--version")),
        faults(&mut Command::new(&floor)),
        faults(Command::new("bash").args(["-c", "true"])),
    );
    if let Some(before) = std::env::var_os("BASHD_BENCH_BASHC_BEFORE") {
        let before = PathBuf::from(before);
        let (after, earlier) = paired_medians(PROCESS_RUNS, exec, || {
            run(daemon.bashc_from(&before).args(["exec", "--", "true"]))
        });
        report(
            &format!(
                "bashc exec -- true, this build vs {} (median)",
                before.display()
            ),
            after,
            earlier,
            1.0,
        );
        println!(
            "page faults (median of 20): bashc exec -- true, this build {} vs {} {}",
            faults(daemon.bashc().args(["exec", "--", "true"])),
            before.display(),
            faults(daemon.bashc_from(&before).args(["exec", "--", "true"])),
        );
        let (after, earlier) = paired_medians(
            PROCESS_RUNS,
            || run(daemon.bashc().arg("--version")),
            || run(daemon.bashc_from(&before).arg("--version")),
        );
        report(
            &format!(
                "bashc --version, this build vs {} (median)",
                before.display()
            ),
            after,
            earlier,
            1.0,
        );
    }
}

/// The minor page faults of one run of `command`: what the children this process has
/// waited for took, before and after.
fn page_faults_of(command: &mut Command) -> i64 {
    let children = || {
        // SAFETY: `rusage` is plain data that `getrusage` fills in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid out pointer for the call.
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
        usage.ru_minflt
    };
    let before = children();
    run(command);
    children() - before
}

/// `fn main() { println!("hello") }`, built by `rustc -O` in `dir`.
fn hello_world(dir: &Path) -> Result<PathBuf, String> {
    let source = dir.join("hello.rs");
    let binary = dir.join("hello");
    std::fs::write(&source, "fn main() { println!(\"hello\"); }\n").map_err(|e| e.to_string())?;
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let built = Command::new(rustc)
        .args(["-O", "-o"])
        .arg(&binary)
        .arg(&source)
        .output()
        .map_err(|e| e.to_string())?;
    if !built.status.success() {
        return Err(String::from_utf8_lossy(&built.stderr).trim().to_owned());
    }
    Ok(binary)
}

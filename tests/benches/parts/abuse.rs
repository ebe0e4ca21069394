//! `BASHD_BENCH=abuse` (issue 18): the daemon bounded under abuse.

use super::*;

/// Issue 18: the daemon under the partial-frame attack (64 connections that each
/// announce 16 MiB and send all but a byte) and 2,000 `output` requests whose answers
/// are never read: its RSS then, and after they close, and `bashc exec -- true` while
/// under attack against the same unloaded.
pub(super) fn abuse() {
    use bashd_tests::attack::Attack;
    let daemon = Daemon::start();
    run(daemon.bashc().args([
        "exec",
        "--mode",
        "background",
        "--",
        "yes i18-abcdefghijklmnopqrstuvwxyz-0123456789 | head -c 30000000",
    ]));
    run(daemon.bashc().args(["wait", "j1", "--timeout", "60"]));
    let rss = || memory_kib(daemon.pid(), "VmRSS").unwrap_or(0);
    std::thread::sleep(Duration::from_millis(300));
    let idle = rss();
    let unloaded = median(PROCESS_RUNS, || {
        run(daemon.bashc().args(["exec", "--", "true"]));
    });
    let socket = daemon.socket_path();
    let mut frames = Attack::partial_frames(&socket, 64, 16 << 20);
    let mut pages = Attack::unread_pages(&socket, "j1", 2_000, 1_000_000);
    std::thread::sleep(Duration::from_secs(2));
    let mut peak = rss();
    let attacked = median(PROCESS_RUNS, || {
        run(daemon.bashc().args(["exec", "--", "true"]));
        peak = peak.max(rss());
    });
    frames.stop();
    pages.stop();
    std::thread::sleep(Duration::from_secs(2));
    let after = rss();
    report(
        "bashc exec -- true under 64 x 16 MiB partial frames and 2,000 unread pages vs unloaded (median)",
        attacked,
        unloaded,
        2.0,
    );
    println!(
        "daemon RSS under that attack: {:.1} MiB peak (target < 64), {:.1} MiB 2 s after it closed (target < 32), {:.1} MiB idle before",
        peak as f64 / 1024.0,
        after as f64 / 1024.0,
        idle as f64 / 1024.0
    );
}

//! `BASHD_BENCH=paging`: paging a big output.

use super::*;

/// Pages of a 100 MB output: the last lines against the first, so what a page costs
/// for being far into the spill file.
pub(super) fn paging(tokio: &tokio::runtime::Runtime) {
    const BYTES: u64 = 100_000_000;
    let daemon = Daemon::start();
    tokio.block_on(async {
        let client = daemon.client().await;
        let mut params = daemon.params(&format!("yes 'a line of output' | head -c {BYTES}"));
        params.mode = bashc::protocol::Mode::Slow;
        let result = client.exec(params).await.unwrap();
        let lines = result.stdout.total_lines;
        assert!(lines > 5_000_000, "{result:?}");
        let page_at = |offset: u64| {
            let client = client.clone();
            let job = result.job;
            let caller = daemon.caller();
            async move {
                let mut samples = Vec::new();
                for _ in 0..20 {
                    let start = Instant::now();
                    let page = client
                        .output(stdout_page(&job, offset, 10, caller.clone()))
                        .await
                        .unwrap();
                    assert_eq!(page.lines, 10);
                    samples.push(start.elapsed());
                }
                median_of(samples)
            }
        };
        let first = page_at(1).await;
        let last = page_at(lines - 10).await;
        println!(
            "output page of the last 10 of {lines} lines (100 MB spilled): {:.2} ms; of the first 10: {:.2} ms (medians of 20)",
            last.as_secs_f64() * 1e3,
            first.as_secs_f64() * 1e3
        );
    });
}

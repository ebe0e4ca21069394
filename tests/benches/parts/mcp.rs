//! `BASHD_BENCH=mcp` (issue 8): `bashc mcp`'s calls.

use super::*;

/// A `bash` tool call through `bashc mcp` against the same command through the library:
/// what the MCP layer (JSON-RPC, rmcp, the gate, rendering) adds to a call.
pub(super) fn mcp(tokio: &tokio::runtime::Runtime) {
    use rmcp::model::CallToolRequestParams;
    // Unconfined, as the library's calls are: the figure is the MCP layer's (the
    // sandbox agents get by default is the `rivals` and `sandbox-pairs` parts').
    let daemon = Daemon::start_agents_unconfined();
    let (through_mcp, through_library) = tokio.block_on(async {
        let (client, _) = super::mcp_ab::serve(&bashd_tests::bin_path("bashc"), &daemon).await;
        let arguments = serde_json::json!({"command": "true"});
        let arguments = arguments.as_object().unwrap().clone();
        // Each call in turn with a bare spawn of `bash -c true` from this process (issue
        // 46: the job is the same bash, in the same environment), so load from outside
        // weighs on both alike.
        let (mut samples, mut bare, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUND_TRIPS {
            let start = Instant::now();
            let result = client
                .call_tool(CallToolRequestParams::new("bash").with_arguments(arguments.clone()))
                .await
                .unwrap();
            assert_ne!(result.is_error, Some(true));
            let call = start.elapsed();
            let start = Instant::now();
            tokio_bash_true().await;
            let spawn = start.elapsed();
            samples.push(call);
            bare.push(spawn);
            ratios.push(call.as_secs_f64() / spawn.as_secs_f64());
        }
        ratios.sort_by(f64::total_cmp);
        println!(
            "bash tool call of true through bashc mcp vs a bare spawn of bash -c true, in turns: {:.2}x median of the paired ratios (medians {:.2} ms vs {:.2} ms; target <= 1.5x)",
            ratios[ratios.len() / 2],
            median_of(samples.clone()).as_secs_f64() * 1e3,
            median_of(bare).as_secs_f64() * 1e3,
        );
        // What a result costs on the wire against the text it carries (issue 15: a
        // result is sent once, as text).
        let big = serde_json::json!({
            "command": "for i in $(seq 1 2000); do printf '%0599d\\n' $i; done"
        });
        let result = client
            .call_tool(
                CallToolRequestParams::new("bash").with_arguments(big.as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        let text: usize = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.len()))
            .sum();
        let wire = serde_json::to_string(&result).unwrap().len();
        println!(
            "bash result of 2,000 lines of 600 B: {wire} bytes as JSON for {text} bytes of text ({:.2}x)",
            wire as f64 / text as f64
        );
        client.cancel().await.unwrap();
        let library = daemon.client().await;
        // The same job as the server asks for: the server passes its whole
        // environment, which is this one, and bash takes longer to start with more.
        let mut params = daemon.params("true");
        use std::os::unix::ffi::OsStrExt;
        params.env = std::env::vars_os()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect();
        let mut direct = Vec::new();
        for _ in 0..ROUND_TRIPS {
            let start = Instant::now();
            library.exec(params.clone()).await.unwrap();
            direct.push(start.elapsed());
        }
        (median_of(samples), median_of(direct))
    });
    report(
        "bash tool call through bashc mcp vs the library, command true (median)",
        through_mcp,
        through_library,
        1.2,
    );
}

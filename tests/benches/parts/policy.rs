//! `BASHD_BENCH=policy` (issue 7): the policy's figures.

use super::*;

/// `BASHD_BENCH=policy`: the basics' policy figures, then the forms that make the
/// check do more work (code fed to a shell, long wrapper chains, brace expansions,
/// dynamic names), each the median of many checks in-process.
pub(super) fn policy_figures() {
    policy_check_time();
    let policy = bashd::policy::Policy::default();
    let time = |what: &str, command: &str, runs: usize| {
        let verdict = policy.check(command).err().map(|d| d.rule);
        let took = median(runs, || {
            let _ = policy.check(command);
        });
        println!(
            "policy check: {what}: {:.0} us ({} bytes, {})",
            took.as_secs_f64() * 1e6,
            command.len(),
            verdict.as_deref().unwrap_or("allowed")
        );
    };
    time("rm -rf /.", "rm -rf /.", 2000);
    time(
        "literal code piped to bash",
        "echo 'cd build && make -j4 && ./test' | bash",
        2000,
    );
    time(
        "heredoc fed to bash",
        "bash <<'EOF'\nset -e\ncd build\nmake -j4\nEOF",
        2000,
    );
    time(
        "dynamic name and a function",
        "c=ls; f() { $c -la \"$1\"; }; f src",
        2000,
    );
    time(
        "brace expansion of targets",
        "rm -rf build/{a,b,c}/{x,y,z}/{1,2,3}",
        2000,
    );
    let wrappers = format!("{}rm -rf ./build", "nice ".repeat(64));
    time("64 wrappers", &wrappers, 2000);
    let script: String = (0..1000)
        .map(|i| format!("cp -r src{i} out/ && echo \"done {i}\" >> log\n"))
        .collect();
    time(
        "1,000-line heredoc fed to bash",
        &format!("bash <<'EOF'\n{script}EOF"),
        20,
    );
    let line = "ls -la /tmp && echo \"$(date)\" | grep -v foo; ";
    time("a 1 MiB command", &line.repeat((1 << 20) / line.len()), 3);
}

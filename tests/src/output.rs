//! A finished `bashc` run as a test reads it: its streams as text, its stdout as JSON,
//! and the whole of it for an assertion's message.

use std::process::Output;

/// Formats a finished `bashc` run for an assertion message.
pub fn show(output: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("bashc did not print JSON ({e}):\n{}", show(output)))
}

/// Both streams of a `--json` result as the job printed them, stdout first.
pub fn shown(result: &serde_json::Value) -> String {
    format!(
        "{}{}",
        result["stdout"]["text"].as_str().unwrap_or(""),
        result["stderr"]["text"].as_str().unwrap_or("")
    )
}

/// The lines `N\n` for each N of `lines`: what `seq` prints.
pub fn numbered(lines: std::ops::RangeInclusive<u32>) -> String {
    lines.map(|n| format!("{n}\n")).collect()
}

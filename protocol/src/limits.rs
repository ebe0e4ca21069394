//! Limits and defaults shared by the daemon and the client (DESIGN §5, §7, §8).

/// Lines of a stream shown in a result before it is cut.
pub const DEFAULT_MAX_LINES: u32 = 2000;
/// Bytes of a stream shown in a result before it is cut.
pub const DEFAULT_MAX_BYTES: u32 = 51_200;
/// The most bytes of a stream any result shows, whatever is asked: both streams of a
/// result must fit in one frame.
pub const MAX_SHOWN_BYTES: u32 = 4 * 1024 * 1024;
/// The largest spill file kept for one stream of one job.
pub const DEFAULT_MAX_SPILL_BYTES: u64 = 100 * 1024 * 1024;
/// The largest frame either side accepts; configuration may lower it, never raise it,
/// because the decoder's allocation bound is this constant.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;
/// The longest command accepted.
pub const DEFAULT_MAX_COMMAND_BYTES: usize = 1024 * 1024;

/// Timeout of mode `default`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// Timeout of mode `slow`.
pub const SLOW_TIMEOUT_SECS: u64 = 15 * 60;
/// Timeout of mode `background`.
pub const BACKGROUND_TIMEOUT_SECS: u64 = 24 * 60 * 60;
/// How long an ask waits for a person by default (`[sandbox] ask_secs`, issue 44).
pub const DEFAULT_ASK_SECS: u64 = 120;
/// An explicit timeout outside `MIN_TIMEOUT_SECS ..= MAX_TIMEOUT_SECS` is refused.
pub const MIN_TIMEOUT_SECS: u64 = 1;
/// An explicit timeout outside `MIN_TIMEOUT_SECS ..= MAX_TIMEOUT_SECS` is refused.
pub const MAX_TIMEOUT_SECS: u64 = 24 * 60 * 60;
/// Time between SIGTERM and SIGKILL when a job is stopped.
pub const DEFAULT_KILL_GRACE_MS: u64 = 2000;

/// An explicit timeout, or why it is refused: the one check of the range, which the
/// daemon makes of every request (and `bashc mcp` of the wait its `wait_until` makes),
/// in words of no front end; each front end names the argument.
pub fn check_timeout_secs(secs: u64) -> Result<u64, String> {
    if (MIN_TIMEOUT_SECS..=MAX_TIMEOUT_SECS).contains(&secs) {
        Ok(secs)
    } else {
        Err(format!(
            "{secs} s is outside {MIN_TIMEOUT_SECS} s .. 24 h ({MAX_TIMEOUT_SECS} s); give a timeout in that range"
        ))
    }
}

/// The most text one page of `output` carries, whatever is asked: a line longer than
/// this is cut, and the page says so.
pub const MAX_PAGE_BYTES: u64 = 1024 * 1024;
/// How long an MCP tool call may last by default (`[mcp] max_call_secs`): below the
/// 60 s after which common MCP clients give up on a call.
pub const DEFAULT_MCP_MAX_CALL_SECS: u64 = 50;

/// A size as people write it: `512M`, `2G`, `1.5G`, `100000` (bytes); K, M, G and T are
/// powers of 1024, with or without a trailing `B` or `iB`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let unit_at = trimmed
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(unit_at);
    let scale: u64 = match unit
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(format!("{text:?} is not a size: write it like 512M or 2G")),
    };
    let number: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a size: write it like 512M or 2G"))?;
    let bytes = number * scale as f64;
    if !bytes.is_finite() || bytes < 4096.0 || bytes > u64::MAX as f64 {
        return Err(format!(
            "{text:?} is not a size a job can have: at least 4K"
        ));
    }
    Ok(bytes as u64)
}

/// Cores as a number, `1.5` or `0.25`, in thousandths of a core.
pub fn parse_cpu(text: &str) -> Result<u32, String> {
    let cores: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of cores: write it like 1.5 or 0.5"))?;
    if !(0.001..=1_000_000.0).contains(&cores) {
        return Err(format!("{text:?} cores: give at least 0.001"));
    }
    Ok((cores * 1000.0).round() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_cores_read_as_people_write_them() {
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("100000"), Ok(100_000));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("2X").is_err());
        assert!(parse_size("1").is_err());
        assert_eq!(parse_cpu("1.5"), Ok(1500));
        assert_eq!(parse_cpu("0.5"), Ok(500));
        assert!(parse_cpu("0").is_err());
        assert!(parse_cpu("fast").is_err());
    }
}

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
/// An explicit timeout outside `MIN_TIMEOUT_SECS ..= MAX_TIMEOUT_SECS` is refused.
pub const MIN_TIMEOUT_SECS: u64 = 1;
/// An explicit timeout outside `MIN_TIMEOUT_SECS ..= MAX_TIMEOUT_SECS` is refused.
pub const MAX_TIMEOUT_SECS: u64 = 24 * 60 * 60;
/// Time between SIGTERM and SIGKILL when a job is stopped.
pub const DEFAULT_KILL_GRACE_MS: u64 = 2000;

/// Clamps an explicit timeout into the accepted range.
pub fn clamp_timeout_secs(secs: u64) -> u64 {
    secs.clamp(MIN_TIMEOUT_SECS, MAX_TIMEOUT_SECS)
}

/// The most text one page of `output` carries, whatever is asked: a line longer than
/// this is cut, and the page says so.
pub const MAX_PAGE_BYTES: u64 = 1024 * 1024;
/// How long an MCP tool call may last by default (`[mcp] max_call_secs`): below the
/// 60 s after which common MCP clients give up on a call.
pub const DEFAULT_MCP_MAX_CALL_SECS: u64 = 50;

//! The daemon's settings (DESIGN §11). Every key has a default; the TOML file that
//! overrides them arrives with the crash-safety issue.

use std::time::Duration;

use bashd_protocol::limits;

#[derive(Debug, Clone)]
pub struct Config {
    pub limits: Limits,
    pub timeouts: Timeouts,
    /// Added to every job's environment over the client's own (DESIGN §8).
    pub env: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub struct Limits {
    pub max_lines: u32,
    pub max_bytes: u32,
    pub max_frame_bytes: usize,
    pub max_command_bytes: usize,
}

#[derive(Debug, Clone)]
pub struct Timeouts {
    pub default_secs: u64,
    pub slow_secs: u64,
    pub background_secs: u64,
    pub kill_grace: Duration,
}

impl Default for Config {
    fn default() -> Self {
        let hardening = [
            ("PAGER", "cat"),
            ("GIT_PAGER", "cat"),
            ("MANPAGER", "cat"),
            ("SYSTEMD_PAGER", ""),
            ("GIT_EDITOR", "true"),
            ("EDITOR", "true"),
            ("VISUAL", "true"),
            ("GIT_TERMINAL_PROMPT", "0"),
            ("DEBIAN_FRONTEND", "noninteractive"),
            ("TERM", "dumb"),
            ("NO_COLOR", "1"),
        ];
        Config {
            limits: Limits {
                max_lines: limits::DEFAULT_MAX_LINES,
                max_bytes: limits::DEFAULT_MAX_BYTES,
                max_frame_bytes: limits::MAX_FRAME_BYTES,
                max_command_bytes: limits::DEFAULT_MAX_COMMAND_BYTES,
            },
            timeouts: Timeouts {
                default_secs: limits::DEFAULT_TIMEOUT_SECS,
                slow_secs: limits::SLOW_TIMEOUT_SECS,
                background_secs: limits::BACKGROUND_TIMEOUT_SECS,
                kill_grace: Duration::from_millis(limits::DEFAULT_KILL_GRACE_MS),
            },
            env: hardening
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }
}

//! The options of a command that every front end offers (`bashc exec`, the MCP `bash`
//! tool), made into `ExecParams` in one place.

use bashd_protocol::{
    Caller, ExecParams, JobLimits, Mode, Network, OnTimeout, OutputOptions, SandboxProfile,
};

/// What a front end asks of a command besides the command itself and on whose behalf:
/// each front end fills it from its own arguments, and [`ExecOptions::params`] makes the
/// request. `None` and `false` take the daemon's defaults.
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// `None`: mode `default`.
    pub mode: Option<Mode>,
    /// Overrides the mode's timeout.
    pub timeout_secs: Option<u64>,
    pub on_timeout: Option<OnTimeout>,
    /// Absolute: each front end resolves a relative one against its own directory.
    pub workdir: String,
    pub description: Option<String>,
    pub merge_stderr: bool,
    pub output: OutputOptions,
    /// The job's environment, as raw bytes: the front end's own, usually.
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    /// Memory, CPU and processes the job may use.
    pub limits: JobLimits,
    /// The sandbox profile and network asked for; the daemon refuses one looser than
    /// its floor.
    pub sandbox: Option<SandboxProfile>,
    pub network: Option<Network>,
}

impl ExecOptions {
    /// The request that runs `command` with these options for `caller`.
    pub fn params(self, command: impl Into<String>, caller: Caller) -> ExecParams {
        ExecParams {
            owner: caller.owner,
            mode: self.mode.unwrap_or(Mode::Default),
            timeout_secs: self.timeout_secs,
            on_timeout: self.on_timeout,
            description: self.description,
            env: self.env,
            merge_stderr: self.merge_stderr,
            output: self.output,
            limits: self.limits,
            sandbox: self.sandbox,
            network: self.network,
            ..ExecParams::new(command, caller.session, self.workdir)
        }
    }
}

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

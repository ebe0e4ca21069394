//! The options of a command that every front end offers (`bashc exec`, the MCP `bash`
//! tool), made into `ExecParams` in one place.

use bashd_protocol::{
    Caller, ExecParams, JobLimits, Mode, Network, OnTimeout, OutputOptions, SandboxProfile,
    StdinMode,
};

pub use bashd_protocol::limits::{parse_cpu, parse_size};

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
    /// Send `Output` events while the job runs.
    pub stream: bool,
    /// /dev/null (the default) or a pipe that `send` writes to.
    pub stdin: StdinMode,
    /// The sandbox profile and network asked for; the daemon refuses one looser than
    /// its floor.
    pub sandbox: Option<SandboxProfile>,
    pub network: Option<Network>,
    /// Run on a pseudo-terminal of this size (`--pty`).
    pub pty: Option<bashd_protocol::PtySize>,
    /// Tell the session's inbox about lines matching this regex (`--notify`).
    pub notify: Option<String>,
    /// Tell the session's inbox when the job goes quiet this long (`--notify-idle`).
    pub notify_idle_secs: Option<u64>,
    /// Write the `.git` of the session's writable roots (`--allow-git-write`,
    /// `git_write`): an ask unless a person granted it for the session.
    pub git_write: bool,
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
            stream: self.stream,
            stdin: self.stdin,
            sandbox: self.sandbox,
            network: self.network,
            pty: self.pty,
            notify: self.notify,
            notify_idle_secs: self.notify_idle_secs,
            git_write: self.git_write,
            ..ExecParams::new(command, caller.session, self.workdir)
        }
    }
}

//! Each front end's spelling of the calls and arguments the sentences of `mod.rs`
//! name: the CLI's `bashc check j3` and `--net on`, MCP's `bash_check(job="j3")` and
//! `net="on"`. A new front end adds a `Spelling` here, not sentences.

use bashc::protocol::{Argument, JobId, StreamName};

use super::{Call, JobCall, Setting, Spelling};

/// The CLI's spelling: `bashc` commands and their flags.
pub struct Cli;

/// `bashc mcp`'s spelling: tool calls and their arguments.
pub struct Mcp;

impl Spelling for Cli {
    fn job_call(&self, call: JobCall, job: JobId) -> String {
        let verb = match call {
            JobCall::Check => "check",
            JobCall::Wait => "wait",
            JobCall::Kill => "kill",
            JobCall::Output => "output",
        };
        format!("bashc {verb} {job}")
    }

    fn call(&self, call: Call) -> &'static str {
        match call {
            Call::Exec => "bashc exec",
            Call::Jobs => "bashc jobs",
        }
    }

    fn output_call(&self, job: JobId, stream: StreamName, offset: u64, limit: u64) -> String {
        let flag = match stream {
            StreamName::Stdout => "",
            StreamName::Stderr => " --stream stderr",
        };
        format!("bashc output {job}{flag} --offset {offset} --limit {limit}")
    }

    fn page_call(&self, job: JobId, stream: StreamName, offset: u64) -> String {
        let flag = match stream {
            StreamName::Stdout => "",
            StreamName::Stderr => " --stream stderr",
        };
        format!("bashc output {job}{flag} --offset {offset}")
    }

    fn stream_call(&self, job: JobId, stream: StreamName) -> String {
        match stream {
            StreamName::Stdout => format!("bashc output {job}"),
            StreamName::Stderr => format!("bashc output {job} --stream stderr"),
        }
    }

    fn offset(&self, offset: u64) -> String {
        format!("--offset {offset}")
    }

    fn send_call(&self, job: JobId) -> String {
        format!("bashc send {job} TEXT --newline (or --eof to close it)")
    }

    fn argument(&self, argument: Argument) -> &'static str {
        match argument {
            Argument::Timeout => "--timeout",
            Argument::MaxLines => "--max-lines",
            Argument::MaxBytes => "--max-bytes",
            Argument::Workdir => "--workdir",
            Argument::Cpu => "--cpu",
            Argument::Pids => "--pids",
            Argument::Notify => "--notify",
            Argument::NotifyIdle => "--notify-idle",
            Argument::Sandbox => "--sandbox",
            Argument::Network => "--net",
            Argument::Until => "--until",
            Argument::Grep => "--grep",
            Argument::Head => "--head",
            Argument::Tail => "--tail",
        }
    }

    fn setting(&self, setting: Setting) -> String {
        match setting {
            Setting::ModeSlow => "--mode slow".to_owned(),
            Setting::ModeBackground => "--mode background".to_owned(),
            Setting::Timeout => "--timeout SECS".to_owned(),
            Setting::OnTimeoutBackground => "--on-timeout background".to_owned(),
            Setting::Sandbox(profile) => format!("--sandbox {profile}"),
            Setting::Network(network) => format!("--net {network}"),
            Setting::Pty => "--pty".to_owned(),
            Setting::StdinPipe => "--stdin pipe".to_owned(),
        }
    }

    fn again_with(&self, settings: &[Setting]) -> String {
        let words: Vec<String> = settings.iter().map(|s| self.setting(*s)).collect();
        words.join(" ")
    }

    fn eof(&self) -> &'static str {
        "--eof"
    }

    fn bad_argument(&self, argument: Argument, message: &str) -> String {
        format!("{}: {message}", self.argument(argument))
    }

    fn other_session(&self, session: &str) -> Option<String> {
        Some(format!(
            "add --session {session}, or --any-session; `bashc jobs --all` lists every session's jobs"
        ))
    }

    fn sessions_call(&self) -> Option<&'static str> {
        Some("bashc sessions")
    }

    fn inside_a_root(&self) -> &'static str {
        "run it from inside one of them (the directory bashc runs in is a root: cd there, then run bashc exec)"
    }

    fn start_in_project(&self) -> &'static str {
        "run bashc from inside the project's directory (cd there first)"
    }

    fn answer_ask(&self, ask: bashc::protocol::AskId) -> String {
        format!(
            "the person answers in a terminal with `bashc allow --ask {ask}` (this request once; add --session-wide for the session) or `bashc allow --refuse {ask}`, or in bashc top"
        )
    }
}

impl Spelling for Mcp {
    fn job_call(&self, call: JobCall, job: JobId) -> String {
        let tool = match call {
            JobCall::Check => "bash_check",
            JobCall::Wait => "bash_wait",
            JobCall::Kill => "bash_kill",
            JobCall::Output => "bash_output",
        };
        format!("{tool}(job=\"{job}\")")
    }

    fn call(&self, call: Call) -> &'static str {
        match call {
            Call::Exec => "bash",
            Call::Jobs => "bash_jobs()",
        }
    }

    fn output_call(&self, job: JobId, stream: StreamName, offset: u64, limit: u64) -> String {
        let stream_argument = match stream {
            StreamName::Stdout => "",
            StreamName::Stderr => ", stream=\"stderr\"",
        };
        format!("bash_output(job=\"{job}\"{stream_argument}, offset={offset}, limit={limit})")
    }

    fn page_call(&self, job: JobId, stream: StreamName, offset: u64) -> String {
        let stream_argument = match stream {
            StreamName::Stdout => "",
            StreamName::Stderr => ", stream=\"stderr\"",
        };
        format!("bash_output(job=\"{job}\"{stream_argument}, offset={offset})")
    }

    fn stream_call(&self, job: JobId, stream: StreamName) -> String {
        match stream {
            StreamName::Stdout => format!("bash_output(job=\"{job}\")"),
            StreamName::Stderr => format!("bash_output(job=\"{job}\", stream=\"stderr\")"),
        }
    }

    fn offset(&self, offset: u64) -> String {
        format!("offset={offset}")
    }

    fn send_call(&self, job: JobId) -> String {
        format!("bash_send(job=\"{job}\", text=\"...\\n\") (eof=true closes it)")
    }

    fn argument(&self, argument: Argument) -> &'static str {
        match argument {
            Argument::Timeout => "timeout_secs",
            Argument::MaxLines => "max_lines",
            Argument::MaxBytes => "max_bytes",
            Argument::Workdir => "workdir",
            Argument::Cpu => "cpu",
            Argument::Pids => "pids",
            Argument::Notify => "notify",
            Argument::NotifyIdle => "notify_idle_secs",
            Argument::Sandbox => "sandbox",
            Argument::Network => "net",
            Argument::Until => "until",
            Argument::Grep => "grep",
            Argument::Head => "head",
            Argument::Tail => "tail",
        }
    }

    fn setting(&self, setting: Setting) -> String {
        match setting {
            Setting::ModeSlow => "mode=\"slow\"".to_owned(),
            Setting::ModeBackground => "mode=\"background\"".to_owned(),
            Setting::Timeout => "timeout_secs".to_owned(),
            Setting::OnTimeoutBackground => "on_timeout=\"background\"".to_owned(),
            Setting::Sandbox(profile) => format!("sandbox=\"{profile}\""),
            Setting::Network(network) => format!("net=\"{network}\""),
            Setting::Pty => "pty=true".to_owned(),
            Setting::StdinPipe => "stdin=\"pipe\"".to_owned(),
        }
    }

    fn again_with(&self, settings: &[Setting]) -> String {
        let words: Vec<String> = settings.iter().map(|s| self.setting(*s)).collect();
        format!("bash({})", words.join(", "))
    }

    fn eof(&self) -> &'static str {
        "eof=true"
    }

    fn bad_argument(&self, argument: Argument, message: &str) -> String {
        format!("bad argument `{}`: {message}", self.argument(argument))
    }

    fn other_session(&self, _session: &str) -> Option<String> {
        // Another agent's job: nothing here may touch it.
        None
    }

    fn sessions_call(&self) -> Option<&'static str> {
        // The tools reach no session but the server's own.
        None
    }

    fn inside_a_root(&self) -> &'static str {
        "give the bash tool a workdir inside one of them (the directory the agent was started in is one)"
    }

    fn start_in_project(&self) -> &'static str {
        "start the agent in its project's directory"
    }

    fn answer_ask(&self, ask: bashc::protocol::AskId) -> String {
        // The person's own command, named for the agent to pass on: no tool answers.
        format!(
            "tell the person; they answer in your prompt when it asks them, or in a terminal of theirs with bashc allow (ask {ask}); no tool of yours can answer it"
        )
    }
}

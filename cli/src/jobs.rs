//! The job and session commands: `jobs`, `check`, `wait`, `kill`, `sessions`,
//! `session close`.

use anyhow::bail;
use bashc::protocol::{
    Caller, ErrorKind, ExecResult, JobInfo, JobRef, JobRequest, JobsRequest, KillRequest, Notice,
    WaitConditions, WaitRequest,
};
use bashc::{ClientError, Target};
use clap::{Args, Subcommand};

use crate::common::{
    SessionArgs, connect, connect_blocking, print, print_result, remote_session, session_from_env,
    write_stdout,
};
use crate::options::StreamArg;
use crate::{render, tables};

/// Exit status of a `wait` whose timeout passed while the job runs on.
const EXIT_STILL_RUNNING: u8 = 124;

// A job, by id or by the pid of its shell. (Not a doc comment: clap would open the
// help page of every command that flattens it with it.)
#[derive(Debug, Args)]
pub struct JobArg {
    /// The job, as `exec` and `jobs` name it (j12).
    #[arg(required_unless_present = "pid", conflicts_with = "pid")]
    job: Option<String>,
    /// Name the job by the pid of its shell instead.
    #[arg(long, value_name = "PID")]
    pid: Option<u32>,
}

impl JobArg {
    pub fn job_ref(&self) -> anyhow::Result<JobRef> {
        match (&self.job, self.pid) {
            (_, Some(pid)) => Ok(JobRef::Pid(pid)),
            (Some(job), None) => Ok(JobRef::Id(job.clone())),
            (None, None) => bail!("name a job (j12) or give --pid"),
        }
    }
}

// A job and whom the request acts for: what every command that acts on one job takes
// (`check`, `wait`, `kill`, `output`, `follow`, `send`, `screen`). `resize` takes its
// job alone: its size follows as a second word, which a `--pid` in place of the job
// would take for the job. (Not a doc comment, as for `JobArg`.)
#[derive(Debug, Args)]
pub struct OneJob {
    #[command(flatten)]
    job: JobArg,
    #[command(flatten)]
    session: SessionArgs,
    /// Act on the job even if it belongs to another session than this one.
    #[arg(long)]
    pub any_session: bool,
}

impl OneJob {
    /// The session and owner the request acts for.
    pub fn caller(&self) -> Caller {
        self.session.caller()
    }

    pub fn job_ref(&self) -> anyhow::Result<JobRef> {
        self.job.job_ref()
    }

    /// The request that acts on this job as a whole.
    pub fn request(&self) -> anyhow::Result<JobRequest> {
        Ok(JobRequest {
            caller: self.caller(),
            job: self.job_ref()?,
            any_session: self.any_session,
        })
    }
}

#[derive(Debug, Args)]
pub struct JobsArgs {
    #[command(flatten)]
    session: SessionArgs,
    /// Every session's jobs, whatever --session or $BASHD_SESSION say.
    #[arg(long)]
    all: bool,
    /// Print the jobs as a JSON array.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    target: OneJob,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    #[command(flatten)]
    target: OneJob,
    /// More jobs to wait on, side by side (see --any and --all).
    #[arg(value_name = "JOB")]
    more: Vec<String>,
    /// With several jobs: return when the first is done (the default).
    #[arg(long, conflicts_with = "all")]
    any: bool,
    /// With several jobs: return when every one is done.
    #[arg(long)]
    all: bool,
    /// Give up waiting after this many seconds (fractions allowed); the job runs on.
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    timeout: Option<f64>,
    /// Return when a new whole line matches this regex (Rust regex syntax).
    #[arg(long, value_name = "REGEX")]
    until: Option<String>,
    /// The stream --until watches (default: both).
    #[arg(long, value_enum, requires = "until")]
    stream: Option<StreamArg>,
    /// Return when a process of the job listens on this TCP port (1 to 65535).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    port: Option<u16>,
    /// Return when the job has printed nothing for this many seconds.
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    idle: Option<f64>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct KillArgs {
    #[command(flatten)]
    target: OneJob,
    /// The first signal: TERM (default), INT, HUP, QUIT, KILL, USR1, USR2, ALRM or ABRT.
    #[arg(long, value_name = "NAME")]
    signal: Option<String>,
    /// Seconds between the signal and SIGKILL (default: bashd's kill_grace_ms, 2 s).
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    grace: Option<f64>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Print the sessions as a JSON array.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Kill a session's jobs and remove its directory now.
    Close(CloseArgs),
}

#[derive(Debug, Args)]
pub struct CloseArgs {
    /// The session to close.
    session: String,
}

pub async fn jobs(args: JobsArgs, target: &Target) -> anyhow::Result<u8> {
    let jobs = list_jobs(target, jobs_request(&args)).await?;
    print_jobs(&args, &jobs)
}

/// As [`jobs`], through the blocking client (`lean.rs`).
pub fn jobs_blocking(args: JobsArgs, target: &Target) -> anyhow::Result<u8> {
    let jobs = listed(connect_blocking(target)?.jobs(jobs_request(&args)))?;
    print_jobs(&args, &jobs)
}

fn jobs_request(args: &JobsArgs) -> JobsRequest {
    let mut caller = args.session.caller();
    let session = (!args.all).then(|| caller.session.clone());
    // --session names the jobs to list here; the session acting stays the default one,
    // so that listing a session does not create or adopt it.
    caller.session = remote_session(session_from_env().unwrap_or_else(bashc::default_session));
    JobsRequest { caller, session }
}

fn print_jobs(args: &JobsArgs, jobs: &[JobInfo]) -> anyhow::Result<u8> {
    print(args.json, &jobs, |jobs| tables::jobs_text(jobs))?;
    Ok(0)
}

/// Exit status of `jobs` over several hosts when some of them did not answer.
const EXIT_SOME_UNREACHABLE: u8 = 1;

/// `jobs --host a --host b`: every host asked at once; one that does not answer is
/// said in the output and the others are listed. Exit status 0 when every host
/// answered, 1 when some did not, 255 when none did.
pub async fn jobs_of_hosts(args: JobsArgs, targets: &[Target]) -> anyhow::Result<u8> {
    let request = jobs_request(&args);
    let lists = futures::future::join_all(targets.iter().map(|target| {
        let request = request.clone();
        async move {
            let host = target.host().unwrap_or("localhost").to_owned();
            let jobs = list_jobs(target, request)
                .await
                .map_err(|e| format!("{e:#}"));
            (host, jobs)
        }
    }))
    .await;
    let unreachable = lists.iter().filter(|(_, jobs)| jobs.is_err()).count();
    if args.json {
        let hosts: Vec<serde_json::Value> = lists
            .iter()
            .map(|(host, jobs)| match jobs {
                Ok(jobs) => serde_json::json!({ "host": host, "jobs": jobs }),
                Err(error) => serde_json::json!({ "host": host, "error": error }),
            })
            .collect();
        print(true, &hosts, |_| String::new())?;
    } else {
        write_stdout(tables::jobs_of_hosts_text(&lists).as_bytes())?;
    }
    Ok(match unreachable {
        0 => 0,
        n if n == lists.len() => crate::EXIT_UNREACHABLE,
        _ => EXIT_SOME_UNREACHABLE,
    })
}

/// The jobs a request lists on `target`'s daemon. A filter that matches nothing is
/// an empty list, as for `ps` and `kubectl get`: a script's JSON parser gets `[]`, not
/// an error.
async fn list_jobs(target: &Target, request: JobsRequest) -> anyhow::Result<Vec<JobInfo>> {
    listed(connect(target).await?.jobs(request).await)
}

fn listed(jobs: Result<Vec<JobInfo>, ClientError>) -> anyhow::Result<Vec<JobInfo>> {
    match jobs {
        Err(ClientError::Daemon(reply)) if reply.kind == ErrorKind::NotFound => Ok(Vec::new()),
        listed => Ok(listed?),
    }
}

pub async fn check(args: CheckArgs, target: &Target) -> anyhow::Result<u8> {
    let result = connect(target).await?.check(args.target.request()?).await?;
    print_checked(&args, &result)
}

/// As [`check`], through the blocking client (`lean.rs`).
pub fn check_blocking(args: CheckArgs, target: &Target) -> anyhow::Result<u8> {
    let request = args.target.request()?;
    let result = connect_blocking(target)?.check(request)?;
    print_checked(&args, &result)
}

fn print_checked(args: &CheckArgs, result: &ExecResult) -> anyhow::Result<u8> {
    print_result(args.json, result, false)?;
    Ok(render::exit_status(result))
}

pub async fn wait(args: WaitArgs, target: &Target) -> anyhow::Result<u8> {
    if !args.more.is_empty() || args.all || args.any {
        return wait_many(args, target).await;
    }
    let request = WaitRequest {
        caller: args.target.caller(),
        job: args.target.job_ref()?,
        timeout_ms: args.timeout.map(millis).transpose()?,
        conditions: WaitConditions {
            until: args.until,
            until_stream: args.stream.map(Into::into),
            port: args.port,
            idle_ms: args.idle.map(millis).transpose()?,
        },
        any_session: args.target.any_session,
        mcp_call: false,
    };
    let result = connect(target).await?.wait(request).await?;
    print_result(args.json, &result, true)?;
    let met = result
        .notices
        .iter()
        .any(|n| matches!(n, Notice::ConditionMet { .. }));
    Ok(match result.state {
        _ if met => 0,
        bashc::protocol::JobState::Running => EXIT_STILL_RUNNING,
        _ => render::exit_status(&result),
    })
}

/// `bashc wait j3 j4 ...`.
async fn wait_many(args: WaitArgs, target: &Target) -> anyhow::Result<u8> {
    let mut jobs = vec![args.target.job_ref()?];
    jobs.extend(args.more.iter().cloned().map(JobRef::Id));
    let conditions = WaitConditions {
        until: args.until,
        until_stream: args.stream.map(Into::into),
        port: args.port,
        idle_ms: args.idle.map(millis).transpose()?,
    };
    let request = crate::waited::request(
        &args.target.caller(),
        jobs,
        &conditions,
        args.all,
        args.timeout.map(millis).transpose()?,
        args.target.any_session,
        false,
    );
    let waited = connect(target).await?.wait_many(request).await?;
    let done = crate::waited::done(&waited);
    let summary = crate::waited::summary(&waited, args.all, |job| format!("bashc check {job}"));
    print(args.json, &waited, |_| {
        let mut text = String::new();
        for result in &done {
            text.push_str(&format!("{}:\n", result.job));
            text.push_str(&render::exec_text(result, true));
        }
        text.push_str(&summary);
        text.push('\n');
        text
    })?;
    let failed = done.iter().map(|result| {
        let met = result
            .notices
            .iter()
            .any(|n| matches!(n, Notice::ConditionMet { .. }));
        if met { 0 } else { render::exit_status(result) }
    });
    Ok(
        if waited.done.len() < waited.results.len() && (args.all || done.is_empty()) {
            EXIT_STILL_RUNNING
        } else if args.all {
            failed.into_iter().find(|code| *code != 0).unwrap_or(0)
        } else {
            failed.into_iter().next().unwrap_or(0)
        },
    )
}

pub async fn kill(args: KillArgs, target: &Target) -> anyhow::Result<u8> {
    let result = connect(target).await?.kill(kill_request(&args)?).await?;
    print_killed(&args, &result)
}

/// As [`kill`], through the blocking client (`lean.rs`).
pub fn kill_blocking(args: KillArgs, target: &Target) -> anyhow::Result<u8> {
    let request = kill_request(&args)?;
    let result = connect_blocking(target)?.kill(request)?;
    print_killed(&args, &result)
}

fn kill_request(args: &KillArgs) -> anyhow::Result<KillRequest> {
    Ok(KillRequest {
        caller: args.target.caller(),
        job: args.target.job_ref()?,
        signal: args.signal.clone(),
        grace_ms: args.grace.map(millis).transpose()?,
        any_session: args.target.any_session,
    })
}

fn print_killed(args: &KillArgs, result: &ExecResult) -> anyhow::Result<u8> {
    print_result(args.json, result, true)?;
    Ok(render::exit_status(result))
}

pub async fn sessions(args: SessionsArgs, target: &Target) -> anyhow::Result<u8> {
    let sessions = connect(target).await?.sessions().await?;
    print(args.json, &sessions, |sessions| {
        tables::sessions_text(sessions)
    })?;
    Ok(0)
}

pub async fn close(args: CloseArgs, target: &Target) -> anyhow::Result<u8> {
    let closed = connect(target).await?.close_session(args.session).await?;
    let text = format!(
        "closed session {}: {} running job{} killed, its directory removed\n",
        closed.session,
        closed.killed_jobs,
        if closed.killed_jobs == 1 { "" } else { "s" }
    );
    write_stdout(text.as_bytes())?;
    Ok(0)
}

/// `--timeout`, `--idle`, `--grace`: seconds, fractions allowed, none below 0; a bad
/// one is a usage error (exit 2) and nothing is sent.
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => Ok(secs),
        _ => Err(format!("a time in seconds must be 0 or more, not {text}")),
    }
}

/// Seconds, as given on the command line, in milliseconds.
fn millis(secs: f64) -> anyhow::Result<u64> {
    if !secs.is_finite() || secs < 0.0 {
        bail!("a time in seconds must be 0 or more, not {secs}");
    }
    Ok((secs * 1000.0).round() as u64)
}

//! The `bash` tool's call: it starts a job and follows it through the client's one
//! response loop, with MCP's progress and cancel as that loop's hooks (`bash_wait`
//! follows a job the same way).

use std::time::Duration;

use bashc::protocol::{
    ErrorKind, ExecResult, JobId, JobLimits, JobRef, JobState, JobsRequest, Mode, Notice,
    OutputOptions, OutputRequest, Request, Response, StdinMode, StreamName, WaitConditions,
    WaitRequest, limits,
};
use bashc::{Client, ClientError, ExecOptions, Responses};
use rmcp::model::{CallToolResult, ProgressNotificationParam};

use super::{BashArgs, BashTools, Call, CallError, bad};
use crate::mcp::words;

/// How often a call with a `progressToken` is told of: under the 5 s within which
/// clients that reset their timeout on progress expect a sign of life.
const PROGRESS_EVERY: Duration = Duration::from_secs(3);
/// The most of a job's last line a progress message carries.
const PROGRESS_LINE_BYTES: u64 = 200;

impl BashTools {
    pub(super) async fn bash(
        &self,
        args: BashArgs,
        call: Call,
    ) -> Result<CallToolResult, CallError> {
        // The timeout's range, limits of 0 and the workdir are the daemon's to check,
        // whose refusal names the argument for `words` to spell (issue 31). A
        // `wait_until` call's timeout is its wait's, which the daemon does not see as
        // one: the same check, made here.
        let workdir = self.workdir_of(args.workdir.as_deref())?;
        if args.wait_until.is_some()
            && let Some(secs) = args.timeout_secs
        {
            limits::check_timeout_secs(secs).map_err(|e| {
                CallError(words::reply(
                    &bashc::protocol::ErrorReply::new(ErrorKind::InvalidRequest, e).with_hint(
                        bashc::protocol::ErrorHint::BadArgument {
                            argument: bashc::protocol::Argument::Timeout,
                        },
                    ),
                ))
            })?;
        }
        // A call's own limits win: what it asked for is shown, uncut.
        let own_limits = args.max_lines.is_some() || args.max_bytes.is_some();
        let stream_budget = call.budget.filter(|_| !own_limits);
        let options = ExecOptions {
            mode: args.mode.map(Into::into),
            timeout_secs: args.timeout_secs,
            on_timeout: args.on_timeout.map(Into::into),
            workdir,
            description: args.description,
            merge_stderr: args.merge_stderr.unwrap_or(false),
            output: OutputOptions {
                max_lines: args.max_lines.or(stream_budget.map(|b| b.stream_lines())),
                max_bytes: args.max_bytes.or(stream_budget.map(|b| b.stream_bytes())),
                direction: args.direction.map(Into::into),
                head: args.head,
                tail: args.tail,
            },
            // The agent's own credentials stay out of its jobs, unless `[env] pass`
            // names them.
            env: self
                .env
                .iter()
                .filter(|(name, _)| !self.settings.withheld(call.client.as_deref(), name))
                .cloned()
                .collect(),
            limits: JobLimits {
                memory_bytes: args
                    .memory
                    .as_deref()
                    .map(bashc::parse_size)
                    .transpose()
                    .map_err(|e| bad("memory", e))?,
                cpu_millicores: args
                    .cpu
                    .map(|cores| bashc::parse_cpu(&cores.to_string()))
                    .transpose()
                    .map_err(|e| bad("cpu", e))?,
                pids: args.pids,
            },
            stream: false,
            stdin: args.stdin.map_or(StdinMode::Null, Into::into),
            sandbox: args.sandbox.map(Into::into),
            network: args.net.map(Into::into),
            pty: match (args.pty.unwrap_or(false), args.size.as_deref()) {
                (false, _) => None,
                (true, None) => Some(bashc::protocol::PtySize::default()),
                (true, Some(size)) => Some(
                    bashc::protocol::PtySize::parse(size)
                        .map_err(|e| CallError(format!("bad argument `size`: {e}")))?,
                ),
            },
            notify: args.notify,
            notify_idle_secs: args.notify_idle_secs,
            git_write: args.git_write.unwrap_or(false),
        };
        let wait_until = args.wait_until;
        let timeout_secs = args.timeout_secs;
        let mut options = options;
        if wait_until.is_some() {
            // Started in the background; the wait below is what returns.
            options.mode = Some(Mode::Background);
            options.timeout_secs = None;
        }
        let mut params = options.params(args.command, self.caller.clone());
        params.mcp_call = true;
        let client = self.client().await?;
        let responses = client.request(Request::Exec(params)).await;
        let responses = self.answer(responses, "command").await?;
        let result = self.follow(&client, responses, &call, "command").await?;
        let whole = |result: ExecResult| {
            let failed = is_failure(&result);
            words::exec_result(result, failed, true, stream_budget, &|_| None)
        };
        let Some(until) = wait_until else {
            return Ok(whole(result));
        };
        if result.state != JobState::Running {
            // Denied, or could not start.
            return Ok(whole(result));
        }
        let request = WaitRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(result.job.to_string()),
            timeout_ms: Some(timeout_secs.unwrap_or(30).saturating_mul(1000)),
            conditions: WaitConditions {
                until: Some(until),
                ..WaitConditions::default()
            },
            any_session: false,
            mcp_call: true,
        };
        let responses = client.request(Request::Wait(request)).await;
        let responses = self.answer(responses, "wait_until").await?;
        let mut waited = self.follow(&client, responses, &call, "wait_until").await?;
        // How to follow the job, from the start's answer, before what the wait found.
        let mut notices = result.notices;
        notices.append(&mut waited.notices);
        waited.notices = notices;
        Ok(whole(waited))
    }

    /// Waits for the final answer of a `bash` or `bash_wait` request through the
    /// client's response loop, telling the caller of its progress when it asked, and
    /// cancelling the request when the caller cancels the call.
    pub(super) async fn follow(
        &self,
        client: &Client,
        responses: Responses,
        call: &Call,
        subject: &str,
    ) -> Result<ExecResult, CallError> {
        let mut progress = Progress {
            tools: self,
            client,
            call,
        };
        match responses.watch(&mut progress).await {
            Ok(result) => Ok(result),
            // rmcp sends no answer to a cancelled request; the daemon kills the job,
            // or moves it to the background (`[mcp] on_cancel`), or stops waiting.
            Err(ClientError::Cancelled) => Err(CallError("the call was cancelled".to_owned())),
            Err(e) => self.answer(Err(e), subject).await,
        }
    }

    /// `j12 running for 15 s: <its last line>`: the job's age, which a wait for a job
    /// started long before the call has beyond the call's `elapsed`.
    async fn progress_message(&self, client: &Client, job: JobId, elapsed: Duration) -> String {
        let request = JobsRequest {
            caller: self.caller.clone(),
            session: Some(self.caller.session.clone()),
        };
        let age = match client.jobs(request).await {
            Ok(jobs) => jobs
                .iter()
                .find(|info| info.job == job)
                .map_or(elapsed, |info| Duration::from_millis(info.duration_ms)),
            Err(_) => elapsed,
        };
        let mut message = format!("{job} running for {} s", age.as_secs());
        for stream in [StreamName::Stdout, StreamName::Stderr] {
            let request = OutputRequest {
                job: JobRef::Id(job.to_string()),
                stream,
                offset: 1,
                limit: Some(1),
                caller: self.caller.clone(),
                any_session: false,
                max_bytes: Some(PROGRESS_LINE_BYTES),
                from_end: true,
            };
            if let Ok(page) = client.output(request).await
                && let Some(line) = page.text.lines().next().filter(|l| !l.trim().is_empty())
            {
                message.push_str(": ");
                message.push_str(line.trim_end());
                break;
            }
        }
        message
    }
}

/// MCP's hooks on the client's response loop: progress notifications for a call that
/// asked for them, and the call's cancellation.
struct Progress<'a> {
    tools: &'a BashTools,
    client: &'a Client,
    call: &'a Call,
}

impl bashc::Watch for Progress<'_> {
    type Error = ClientError;

    /// An ask (issue 44) goes to the person through the client's elicitation, when
    /// it has one; the call goes on waiting for the answer meanwhile.
    fn event(&mut self, response: Response) -> Result<(), ClientError> {
        if let Response::Notice(Notice::Asked {
            ask,
            kind,
            command,
            expires_secs,
        }) = response
        {
            let ask = super::elicit::Ask {
                ask,
                kind,
                command,
                expires_secs,
            };
            // The client on 2026-07-28 is answered `input_required` for it.
            if let Some(asked) = &self.call.asked {
                let _ = asked.send(ask);
                return Ok(());
            }
            super::elicit::ask(
                &self.call.peer,
                self.client.clone(),
                self.call.client.clone(),
                ask,
            );
        }
        Ok(())
    }

    fn tick_every(&self) -> Option<Duration> {
        self.call.progress.as_ref().map(|_| PROGRESS_EVERY)
    }

    async fn tick(&mut self, job: Option<JobId>, elapsed: Duration) {
        if let (Some((token, peer)), Some(job)) = (&self.call.progress, job) {
            let message = self.tools.progress_message(self.client, job, elapsed).await;
            let progress =
                ProgressNotificationParam::new(token.clone(), elapsed.as_secs_f64().floor())
                    .with_message(message);
            let _ = peer.notify_progress(progress).await;
        }
    }

    fn cancellation(&self) -> Option<tokio_util::sync::CancellationToken> {
        Some(self.call.cancelled.clone())
    }
}

/// Whether a `bash` result is one the agent must see as failed: a non-zero exit, a
/// signal, a timeout that killed, a kill (the command did not finish), a denial, a
/// job that could not start.
pub(super) fn is_failure(result: &ExecResult) -> bool {
    match result.state {
        JobState::Running => false,
        JobState::Exited => result.exit_code != Some(0),
        JobState::Signaled
        | JobState::TimedOut
        | JobState::Killed
        | JobState::Denied
        | JobState::Failed
        | JobState::Lost => true,
    }
}

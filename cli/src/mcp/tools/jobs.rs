//! The calls that act on jobs already started: `bash_check`, `bash_wait`, `bash_kill`,
//! `bash_jobs`, `bash_output`, `bash_send` and `bash_screen`.

use bashc::protocol::{
    ExecResult, GrepRequest, JobRef, JobRequest, JobState, JobsRequest, KillRequest, OutputPage,
    OutputRequest, Request, SendRequest, StreamName, WaitConditions, WaitRequest, limits,
};
use rmcp::model::CallToolResult;

use super::bash::is_failure;
use super::{BashTools, Call, CallError, JobArgs, KillArgs, OutputArgs, SendArgs, WaitArgs, bad};
use crate::mcp::words;
use crate::options::StreamArg;

impl BashTools {
    pub(super) async fn send(&self, args: SendArgs) -> Result<CallToolResult, CallError> {
        let eof = args.eof.unwrap_or(false);
        let text = args.text.unwrap_or_default();
        let keys = args.keys.unwrap_or_default();
        if text.is_empty() && !eof && keys.is_empty() {
            return Err(CallError(
                "bad arguments: give `text` to write, `keys` to press, or eof=true to close the job's stdin"
                    .to_owned(),
            ));
        }
        let request = SendRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
            bytes: text.into_bytes(),
            eof,
            keys,
            literal: args.literal.unwrap_or(false),
            // A terminal job answers with its screen once it settles; a job on pipes
            // has none and answers at once.
            screen_settle_ms: Some(300),
            any_session: false,
        };
        let sent = self.client().await?.send(request).await;
        let sent = self.answer(sent, "job").await?;
        if let Some(screen) = &sent.screen {
            return Ok(words::tool_result(
                crate::terminal::screen_text(screen),
                false,
            ));
        }
        let text = format!(
            "Wrote {} bytes to the stdin of {}{}. See what it did: bash_check(job=\"{}\").\n",
            sent.written,
            sent.job,
            if sent.closed { " and closed it" } else { "" },
            sent.job
        );
        Ok(words::tool_result(text, false))
    }

    pub(super) async fn screen(&self, args: JobArgs) -> Result<CallToolResult, CallError> {
        let request = JobRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
            any_session: false,
        };
        let screen = self.client().await?.screen(request).await;
        let screen = self.answer(screen, "job").await?;
        Ok(words::tool_result(
            crate::terminal::screen_text(&screen),
            false,
        ))
    }

    pub(super) async fn check(
        &self,
        args: JobArgs,
        call: Call,
    ) -> Result<CallToolResult, CallError> {
        let request = JobRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
            any_session: false,
        };
        let client = self.client().await?;
        let result = client.check(request).await;
        let result = self.answer(result, "job").await?;
        let failed = job_failure(&result);
        // A check's lines start at its cursor, which its result does not say: a check
        // cut to fit names the lines it leaves out from the stream's total.
        let mut first_lines = [None, None];
        if let Some(budget) = call.budget
            && words::over_budget(&result, failed, false, budget)
        {
            for (i, stream) in [StreamName::Stdout, StreamName::Stderr]
                .into_iter()
                .enumerate()
            {
                let shown = match stream {
                    StreamName::Stdout => Some(&result.stdout),
                    StreamName::Stderr => result.stderr.as_ref(),
                };
                let Some(shown) = shown.filter(|s| s.total_lines > 0) else {
                    continue;
                };
                let request = OutputRequest {
                    job: JobRef::Id(result.job.to_string()),
                    stream,
                    offset: 1,
                    limit: Some(1),
                    caller: self.caller.clone(),
                    any_session: false,
                    max_bytes: Some(1),
                    from_end: false,
                };
                // FIXME: of a job still running, lines written since the check make
                // this later than the check's first line; a first line in the check's
                // figures would make it exact, and takes a protocol version.
                if let Ok(page) = client.output(request).await {
                    first_lines[i] = Some(
                        (page.total_lines + 1)
                            .saturating_sub(shown.total_lines)
                            .max(1),
                    );
                }
            }
        }
        let first_line = |stream| match stream {
            StreamName::Stdout => first_lines[0],
            StreamName::Stderr => first_lines[1],
        };
        Ok(words::exec_result(
            result,
            failed,
            false,
            call.budget,
            &first_line,
        ))
    }

    pub(super) async fn wait(
        &self,
        args: WaitArgs,
        call: Call,
    ) -> Result<CallToolResult, CallError> {
        let timeout_ms = match args.timeout_secs {
            Some(secs) if !secs.is_finite() || secs < 0.0 => {
                return Err(bad(
                    "timeout_secs",
                    format!("{secs} is not a number of seconds, 0 or more"),
                ));
            }
            Some(secs) => Some((secs * 1000.0).round() as u64),
            None => None,
        };
        let idle_ms = match args.idle_secs {
            Some(secs) if !secs.is_finite() || secs < 0.0 => {
                return Err(bad(
                    "idle_secs",
                    format!("{secs} is not a number of seconds, 0 or more"),
                ));
            }
            secs => secs.map(|secs| (secs * 1000.0).round() as u64),
        };
        let conditions = WaitConditions {
            until: args.until.clone(),
            until_stream: None,
            port: args.port,
            idle_ms,
        };
        let one = match (args.job, args.jobs) {
            (Some(job), None) => job,
            (None, Some(jobs)) if jobs.len() == 1 => jobs[0].clone(),
            (None, Some(jobs)) if !jobs.is_empty() => {
                return self
                    .wait_many(jobs, &conditions, args.all.unwrap_or(false), timeout_ms)
                    .await;
            }
            (Some(_), Some(_)) => {
                return Err(bad("jobs", "give `job` or `jobs`, not both"));
            }
            (None, _) => return Err(bad("job", "name the job to wait for (j12), or `jobs`")),
        };
        let request = WaitRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(one),
            timeout_ms,
            conditions: WaitConditions {
                until: args.until,
                until_stream: None,
                port: args.port,
                idle_ms,
            },
            any_session: false,
            mcp_call: true,
        };
        let client = self.client().await?;
        let responses = client.request(Request::Wait(request)).await;
        let responses = self.answer(responses, "job").await?;
        let result = self.follow(&client, responses, &call, "job").await?;
        Ok(job_result(result, &call))
    }

    /// `bash_wait(jobs=[...])`: the results of the jobs done, then which are and which
    /// are not.
    async fn wait_many(
        &self,
        jobs: Vec<String>,
        conditions: &WaitConditions,
        all: bool,
        timeout_ms: Option<u64>,
    ) -> Result<CallToolResult, CallError> {
        let jobs = jobs.into_iter().map(JobRef::Id).collect();
        let request =
            crate::waited::request(&self.caller, jobs, conditions, all, timeout_ms, false, true);
        let waited = self.client().await?.wait_many(request).await;
        let waited = self.answer(waited, "jobs").await?;
        let done = crate::waited::done(&waited);
        let mut content = Vec::new();
        for result in &done {
            content.push(rmcp::model::ContentBlock::text(format!("{}:", result.job)));
            content.extend(
                words::exec_result((*result).clone(), false, true, None, &|_| None).content,
            );
        }
        let summary =
            crate::waited::summary(&waited, all, |job| format!("bash_check(job=\"{job}\")"));
        content.push(rmcp::model::ContentBlock::text(summary));
        let failed = done.iter().any(|result| job_failure(result));
        Ok(if failed {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        })
    }

    pub(super) async fn kill(
        &self,
        args: KillArgs,
        call: Call,
    ) -> Result<CallToolResult, CallError> {
        let request = KillRequest {
            caller: self.caller.clone(),
            job: JobRef::Id(args.job),
            signal: args.signal,
            grace_ms: None,
            any_session: false,
        };
        let result = self.client().await?.kill(request).await;
        let result = self.answer(result, "job").await?;
        Ok(job_result(result, &call))
    }

    pub(super) async fn jobs(&self) -> Result<CallToolResult, CallError> {
        let request = JobsRequest {
            caller: self.caller.clone(),
            session: Some(self.caller.session.clone()),
        };
        let jobs = self.client().await?.jobs(request).await;
        let jobs = self.answer(jobs, "session").await?;
        let text = if jobs.is_empty() {
            "no jobs in this session yet\n".to_owned()
        } else {
            crate::tables::jobs_text(&jobs)
        };
        Ok(words::tool_result(text, false))
    }

    pub(super) async fn output(
        &self,
        args: OutputArgs,
        call: Call,
    ) -> Result<CallToolResult, CallError> {
        if args.offset == Some(0) {
            return Err(bad("offset", "lines count from 1"));
        }
        if args.limit == Some(0) {
            return Err(bad("limit", "0 lines is no page; give 1 or more"));
        }
        match args.max_bytes {
            Some(0) => return Err(bad("max_bytes", "0 bytes is no page; give 1 or more")),
            Some(n) if n > limits::MAX_PAGE_BYTES => {
                return Err(bad(
                    "max_bytes",
                    format!(
                        "{n} is more than a page holds: at most {}",
                        limits::MAX_PAGE_BYTES
                    ),
                ));
            }
            _ => {}
        }
        let stream: StreamName = args.stream.unwrap_or(StreamArg::Stdout).into();
        // A page the client would cut holds no more than it shows whole.
        let limit = args
            .limit
            .or(call.budget.map(|b| u64::from(b.stream_lines())));
        let max_bytes = args.max_bytes.or(call
            .budget
            .map(|b| u64::from(b.stream_bytes()).min(limits::MAX_PAGE_BYTES)));
        let request = |stream, offset, limit, max_bytes| OutputRequest {
            job: JobRef::Id(args.job.clone()),
            stream,
            offset,
            limit,
            caller: self.caller.clone(),
            any_session: false,
            max_bytes,
            from_end: false,
        };
        let client = self.client().await?;
        let grep = args.grep.clone();
        let page = match args.grep {
            Some(pattern) => {
                client
                    .grep(GrepRequest {
                        caller: self.caller.clone(),
                        job: JobRef::Id(args.job.clone()),
                        stream,
                        pattern,
                        context: args.context.unwrap_or(0),
                        offset: args.offset.unwrap_or(1),
                        limit,
                        any_session: false,
                    })
                    .await
            }
            None => {
                client
                    .output(request(stream, args.offset.unwrap_or(1), limit, max_bytes))
                    .await
            }
        };
        let page = self.answer(page, "job").await?;
        // An empty stream says where the output is: the other stream's totals.
        let other: Option<OutputPage> =
            if grep.is_none() && page.lines == 0 && page.total_lines == 0 {
                let other = match stream {
                    StreamName::Stdout => StreamName::Stderr,
                    StreamName::Stderr => StreamName::Stdout,
                };
                client
                    .output(request(other, 1, Some(1), Some(1)))
                    .await
                    .ok()
            } else {
                None
            };
        let grep = grep
            .as_deref()
            .map(|pattern| (pattern, args.context.unwrap_or(0)));
        Ok(words::page_result(&page, other.as_ref(), grep))
    }
}

/// The result of `bash_wait` or `bash_kill`: the job's whole streams, fitted to the
/// client's budget, an error as `job_failure` says.
fn job_result(result: ExecResult, call: &Call) -> CallToolResult {
    let failed = job_failure(&result);
    words::exec_result(result, failed, true, call.budget, &|_| None)
}

/// Whether a job tool's result (`bash_check`, `bash_wait`, `bash_kill`) is an error:
/// the same for the same job state in all three. A job that failed on its own terms
/// is; a killed one is not, since a kill is what `bash_kill` asks for and the text
/// says who killed it.
fn job_failure(result: &ExecResult) -> bool {
    result.state != JobState::Killed && is_failure(result)
}

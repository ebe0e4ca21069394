//! `wait` (`bashc wait`, `bash_wait` on one job): the job's result when it ends, or
//! after the timeout its state as it stands; with conditions (`--until`, `--port`,
//! `--idle`), earlier when one of them is met, watched as one more live reader of the
//! job's lines, in the request's task.

use std::collections::VecDeque;
use std::time::Duration;

use bashd_protocol::{
    Argument, ErrorReply, ExecResult, JobId, JobRef, Notice, OutputChunk, OutputRequest, Response,
    StreamName, WaitMet, WaitRequest,
};
use regex::bytes::Regex;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::jobs::job::supervisor::FOLLOW_QUEUE;
use crate::jobs::os::probe;
use crate::jobs::requests::grep::compile;
use crate::jobs::table::handle::{
    Asker, JobsHandle, ToActor, Waiting, Watching, blocking, shutting_down,
};
use crate::jobs::table::live::Subscribe;
use crate::jobs::table::queries::still_running;
use crate::jobs::table::{JobsActor, Status, age_ms};
use crate::output::{self, OutputSource};

impl JobsHandle {
    /// The job's result when it ends, or after `timeout_ms` its state as it stands; with
    /// conditions, earlier when one of them is met (`wait_for` below).
    pub(in crate::jobs) async fn wait(
        &self,
        request: WaitRequest,
    ) -> Result<ExecResult, ErrorReply> {
        let asker = self.asker(request.caller.clone(), request.any_session);
        let result = self.wait_as_asked(request).await?;
        Ok(self.with_screen(asker, result).await)
    }

    pub(in crate::jobs) async fn wait_as_asked(
        &self,
        request: WaitRequest,
    ) -> Result<ExecResult, ErrorReply> {
        if request.conditions.any() {
            return self.wait_for(request).await;
        }
        let mut timeout = request.timeout_ms.map(Duration::from_millis);
        if request.mcp_call {
            // An MCP call returns by its budget, with the job still running.
            let budget = self.config.borrow().mcp.max_call;
            timeout = Some(timeout.map_or(budget, |t| t.min(budget)));
        }
        let asker = self.asker(request.caller, request.any_session);
        let job = request.job;
        match self.call(Wait { asker, job }).await?? {
            Waiting::Ended(result) => Ok(result),
            Waiting::Pending {
                summary,
                started,
                result,
            } => {
                let ended = match timeout {
                    Some(timeout) => tokio::time::timeout(timeout, result).await.ok(),
                    None => Some(result.await),
                };
                match ended {
                    Some(result) => result.map_err(|_| shutting_down()),
                    None => {
                        // Its age now, not when the wait began: a `check` right
                        // after says the same.
                        let summary = ExecResult {
                            duration_ms: age_ms(started),
                            ..summary
                        };
                        Ok(still_running(summary, timeout.unwrap_or_default()))
                    }
                }
            }
        }
    }

    /// `wait` with conditions: the first of a new line matching `until`, a process of
    /// the job listening on `port`, `idle` without output, the job's end, or the
    /// timeout.
    pub(in crate::jobs) async fn wait_for(
        &self,
        request: WaitRequest,
    ) -> Result<ExecResult, ErrorReply> {
        let conditions = request.conditions.clone();
        let regex = conditions
            .until
            .as_deref()
            .map(|pattern| compile(pattern, Argument::Until))
            .transpose()?;
        let (sink, mut events) = mpsc::channel(FOLLOW_QUEUE);
        let asker = self.asker(request.caller.clone(), request.any_session);
        let job = request.job.clone();
        let watching = self
            .call(Subscribe {
                asker: asker.clone(),
                job,
                stream: None,
                sink,
            })
            .await??;
        let (mut summary, job_started, subscribed, mut result, cursor, network) = match watching {
            Watching::Ended { result, .. } => return Ok(*result),
            Watching::Running {
                summary,
                started,
                subscribed,
                result,
                cursor,
                network,
            } => (*summary, started, subscribed, result, cursor, network),
        };
        let job = summary.job;
        let started = Instant::now();
        let deadline = request
            .timeout_ms
            .map(|ms| started + Duration::from_millis(ms));
        let subscribed = match subscribed.await {
            Ok(subscribed) => subscribed,
            // The supervisor is gone: the job has just ended.
            Err(_) => return result.await.map_err(|_| shutting_down()),
        };
        let root = subscribed.root;
        let idle = conditions.idle_ms.map(Duration::from_millis);
        let mut last_output = started;
        // Lines the session has not checked yet count as new: a server started in the
        // background may print its banner before this wait begins.
        if let Some(regex) = &regex {
            let sources = [
                (StreamName::Stdout, Some(subscribed.streams.stdout.clone())),
                (StreamName::Stderr, subscribed.streams.stderr.clone()),
            ];
            for (i, (stream, source)) in sources.into_iter().enumerate() {
                let Some(source) =
                    source.filter(|_| conditions.until_stream.is_none_or(|s| s == stream))
                else {
                    continue;
                };
                if let Some(met) =
                    first_match(source, job, stream, regex.clone(), cursor[i] + 1).await?
                {
                    summary.duration_ms = age_ms(job_started);
                    summary.notices = vec![Notice::ConditionMet { job, met }];
                    return Ok(summary);
                }
            }
        }
        let mut watch = LineWatch::new(regex, conditions.until_stream);
        let mut events_open = true;
        let mut port_tick = tokio::time::interval(PORT_POLL);
        let met = loop {
            // Cancelling a branch loses nothing: events and the result stay in their
            // channels, the timers are made again.
            tokio::select! {
                biased;
                event = events.recv(), if events_open => match event {
                    Some(Response::Output(chunk)) => {
                        last_output = Instant::now();
                        if let Some(met) = watch.scan(&chunk) {
                            break Some(met);
                        }
                    }
                    Some(Response::Notice(Notice::OutputMissed { stream, offset, lines, .. })) => {
                        // The lines went by while this wait was busy: read them back.
                        if let Some(met) = self.scan_missed(&mut watch, &asker, job, stream, offset, lines).await {
                            break Some(met);
                        }
                    }
                    Some(_) => {}
                    None => events_open = false,
                },
                ended = &mut result => {
                    let mut ended = ended.map_err(|_| shutting_down())?;
                    // Lines its last reads handed on, and the stretches this wait
                    // missed, are in the queue before its end.
                    let mut met = None;
                    while met.is_none() {
                        met = match events.try_recv() {
                            Ok(Response::Output(chunk)) => watch.scan(&chunk),
                            Ok(Response::Notice(Notice::OutputMissed { stream, offset, lines, .. })) => {
                                self.scan_missed(&mut watch, &asker, job, stream, offset, lines).await
                            }
                            Ok(_) => None,
                            Err(_) => break,
                        };
                    }
                    if let Some(met) = met {
                        ended.notices.insert(0, Notice::ConditionMet { job, met });
                    }
                    return Ok(ended);
                }
                () = sleep_until(idle.map(|idle| last_output + idle)) => {
                    break Some(WaitMet::Idle { idle_ms: last_output.elapsed().as_millis() as u64 });
                }
                _ = port_tick.tick(), if conditions.port.is_some() => {
                    let port = conditions.port.unwrap_or_default();
                    let found = blocking(move || {
                        probe::listening(&[probe::descendants(root)])
                            .concat()
                            .into_iter()
                            .find(|p| p.protocol == "tcp" && p.port == port)
                    })
                    .await?;
                    if let Some(listen) = found {
                        // In a session network: where the host reaches it, once bashd
                        // has published it (its next look, within a second).
                        let published = match &network {
                            Some(network) => network.published_soon(port).await,
                            None => None,
                        };
                        break Some(WaitMet::Port { port, pid: listen.pid, published });
                    }
                }
                () = sleep_until(deadline) => break None,
            }
        };
        Ok(match met {
            Some(met) => {
                summary.duration_ms = age_ms(job_started);
                summary.notices = vec![Notice::ConditionMet { job, met }];
                summary
            }
            None => {
                summary.duration_ms = age_ms(job_started);
                still_running(summary, started.elapsed())
            }
        })
    }

    /// Scans lines a wait missed, read back from the job's output, as the wait's
    /// asker may.
    async fn scan_missed(
        &self,
        watch: &mut LineWatch,
        asker: &Asker,
        job: JobId,
        stream: StreamName,
        offset: u64,
        lines: u64,
    ) -> Option<WaitMet> {
        // A stretch missed behind a loud job can be far longer than a page.
        let end = offset + lines;
        let mut at = offset;
        while at < end {
            let page = self
                .output(OutputRequest {
                    job: JobRef::Id(job.to_string()),
                    stream,
                    offset: at,
                    limit: Some(end - at),
                    caller: asker.caller.clone(),
                    any_session: asker.any_session,
                    max_bytes: Some(bashd_protocol::limits::MAX_PAGE_BYTES),
                    from_end: false,
                })
                .await
                .ok()?;
            if page.lines == 0 {
                return None;
            }
            let chunk = OutputChunk {
                stream,
                bytes: page.text.into_bytes().into(),
                line: at,
            };
            if let Some(met) = watch.scan(&chunk) {
                return Some(met);
            }
            at += page.lines;
        }
        None
    }
}

/// The message: the end of `job`, as `asker` may wait for it.
struct Wait {
    asker: Asker,
    job: JobRef,
}

impl ToActor for Wait {
    type Reply = Result<Waiting, ErrorReply>;
    fn handle(self, actor: &mut JobsActor) -> Self::Reply {
        actor.wait(&self.job, &self.asker)
    }
}

impl JobsActor {
    fn wait(&mut self, job: &JobRef, asker: &Asker) -> Result<Waiting, ErrorReply> {
        let n = self.reach(job, asker)?;
        if let Status::Ended(ended) = &self.jobs[&n].status {
            return Ok(Waiting::Ended(ended.result.clone()));
        }
        Ok(self.await_end(n))
    }
}

/// How often `wait --port` looks at the job's sockets.
pub const PORT_POLL: Duration = Duration::from_millis(50);
/// Lines of context a matched line comes with, on each side.
const CONTEXT_LINES: usize = 3;

/// The first complete line of `source` from line `from` on that matches `regex`, with
/// the lines around it.
async fn first_match(
    source: OutputSource,
    job: JobId,
    stream: StreamName,
    regex: Regex,
    from: u64,
) -> Result<Option<WaitMet>, ErrorReply> {
    let complete = source.complete_lines;
    if from > complete {
        return Ok(None);
    }
    let context = CONTEXT_LINES as u32;
    let page =
        blocking(move || output::grep(source, job, stream, &regex, context, from, 1)).await??;
    // The page is `grep -n`'s: `N-context`, `N:match`; the first `:` line is the match.
    let mut before = Vec::new();
    let mut after = Vec::new();
    let mut matched = None;
    for line in page.text.lines() {
        let digits = line.bytes().take_while(u8::is_ascii_digit).count();
        let (Ok(number), Some(mark)) =
            (line[..digits].parse::<u64>(), line[digits..].chars().next())
        else {
            continue;
        };
        let text = line[digits + 1..].to_owned();
        match (mark, &matched) {
            (':', None) if number <= complete => matched = Some((number, text)),
            (_, None) => before.push(text),
            (_, Some(_)) if number <= complete => after.push(text),
            _ => {}
        }
    }
    Ok(matched.map(|(line, text)| WaitMet::Line {
        stream,
        line,
        text,
        before,
        after,
    }))
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Matches new lines against `until`, keeping the last lines of each stream for the
/// context of a match.
struct LineWatch {
    regex: Option<Regex>,
    stream: Option<StreamName>,
    recent: [VecDeque<String>; 2],
}

impl LineWatch {
    fn new(regex: Option<Regex>, stream: Option<StreamName>) -> LineWatch {
        LineWatch {
            regex,
            stream,
            recent: [VecDeque::new(), VecDeque::new()],
        }
    }

    fn scan(&mut self, chunk: &OutputChunk) -> Option<WaitMet> {
        let regex = self.regex.as_ref()?;
        if self.stream.is_some_and(|s| s != chunk.stream) {
            return None;
        }
        let i = match chunk.stream {
            StreamName::Stdout => 0,
            StreamName::Stderr => 1,
        };
        let lines: Vec<&[u8]> = chunk
            .bytes
            .strip_suffix(b"\n")
            .unwrap_or(&chunk.bytes)
            .split(|&b| b == b'\n')
            .collect();
        for (at, line) in lines.iter().enumerate() {
            if regex.is_match(line) {
                let after = lines[at + 1..]
                    .iter()
                    .take(CONTEXT_LINES)
                    .map(|l| String::from_utf8_lossy(l).into_owned())
                    .collect();
                return Some(WaitMet::Line {
                    stream: chunk.stream,
                    line: chunk.line + at as u64,
                    text: String::from_utf8_lossy(line).into_owned(),
                    before: self.recent[i].iter().cloned().collect(),
                    after,
                });
            }
            let recent = &mut self.recent[i];
            if recent.len() == CONTEXT_LINES {
                recent.pop_front();
            }
            recent.push_back(String::from_utf8_lossy(line).into_owned());
        }
        None
    }
}

//! Live jobs on the request's side (issue 16): `follow`, `wait` with conditions
//! (`--until`, `--port`, `--idle`), `send`, `output --grep`, and the looks at running
//! jobs' processes that `jobs` and `check` add. All of it runs in the request's task
//! (and /proc reads on blocking threads): the actor only hands out live readers and
//! stdin handles, and a supervisor only `try_send`s lines to its readers.

use std::collections::VecDeque;
use std::time::Duration;

use bashd_protocol::{
    ErrorKind, ErrorReply, ExecResult, FollowFrom, FollowRequest, GrepRequest, JobId, JobInfo,
    JobRef, Notice, OutputChunk, OutputPage, OutputRequest, Response, SendReply, SendRequest,
    StreamName, WaitMet, WaitRequest,
};
use regex::bytes::Regex;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::jobs::job::stdin::SendError;
use crate::jobs::job::supervisor::{Control, FOLLOW_QUEUE, Streams};
use crate::jobs::os::probe;
use crate::jobs::table::handle::{
    Asker, Cmd, JobsHandle, LiveJob, Watching, blocking, shutting_down, still_running,
};
use crate::output::{self, OutputSource};

/// How often `wait --port` looks at the job's sockets.
pub const PORT_POLL: Duration = Duration::from_millis(50);
/// Lines of context a matched line comes with, on each side.
const CONTEXT_LINES: usize = 3;
/// Lines of history `follow` sends in one event.
const HISTORY_PAGE_LINES: u64 = 10_000;

impl JobsHandle {
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
            .map(|pattern| compile(pattern, "until"))
            .transpose()?;
        let (sink, mut events) = mpsc::channel(FOLLOW_QUEUE);
        let asker = self.asker(request.caller.clone(), request.any_session);
        let job = request.job.clone();
        let watching = self
            .ask(|reply| Cmd::Subscribe {
                asker: asker.clone(),
                job,
                stream: None,
                sink,
                reply,
            })
            .await??;
        let (mut summary, subscribed, mut result, cursor) = match watching {
            Watching::Ended { result, .. } => return Ok(*result),
            Watching::Running {
                summary,
                subscribed,
                result,
                cursor,
            } => (*summary, subscribed, result, cursor),
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
                    summary.duration_ms += started.elapsed().as_millis() as u64;
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
                        break Some(WaitMet::Port { port, pid: listen.pid });
                    }
                }
                () = sleep_until(deadline) => break None,
            }
        };
        summary.duration_ms += started.elapsed().as_millis() as u64;
        Ok(match met {
            Some(met) => {
                summary.notices = vec![Notice::ConditionMet { job, met }];
                summary
            }
            None => still_running(summary, started.elapsed()),
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

    /// `follow`: the job's output so far (as `from` asks), then its lines as they come,
    /// then its result. Runs in a task of its own; dropping the receiver ends it.
    pub fn follow(&self, request: FollowRequest) -> mpsc::Receiver<Response> {
        let (out, rx) = mpsc::channel(64);
        let handle = self.clone();
        tokio::spawn(async move {
            if let Err(error) = handle.follow_into(request, &out).await {
                let _ = out.send(Response::Error(error)).await;
            }
        });
        rx
    }

    async fn follow_into(
        &self,
        request: FollowRequest,
        out: &mpsc::Sender<Response>,
    ) -> Result<(), ErrorReply> {
        let (sink, mut events) = mpsc::channel(FOLLOW_QUEUE);
        let FollowRequest {
            caller,
            job,
            stream,
            from,
            any_session,
        } = request;
        let asker = self.asker(caller, any_session);
        let watching = self
            .ask(|reply| Cmd::Subscribe {
                asker,
                job,
                stream,
                sink,
                reply,
            })
            .await??;
        match watching {
            Watching::Ended { result, streams } => {
                if !history(*streams, result.job, stream, from, out).await? {
                    return Ok(());
                }
                let _ = out.send(Response::Finished(result)).await;
            }
            Watching::Running {
                summary,
                subscribed,
                result,
                ..
            } => {
                if let Ok(subscribed) = subscribed.await
                    && !history(subscribed.streams, summary.job, stream, from, out).await?
                {
                    return Ok(());
                }
                // Until the supervisor lets go of its readers: the job has ended.
                while let Some(event) = events.recv().await {
                    if out.send(event).await.is_err() {
                        return Ok(());
                    }
                }
                let result = result.await.map_err(|_| shutting_down())?;
                let _ = out.send(Response::Finished(Box::new(result))).await;
            }
        }
        Ok(())
    }

    /// Writes to a job's stdin pipe.
    pub async fn send(&self, request: SendRequest) -> Result<SendReply, ErrorReply> {
        let SendRequest {
            caller,
            job: job_ref,
            mut bytes,
            eof,
            keys,
            literal,
            screen_settle_ms,
            any_session,
        } = request;
        let asker = self.asker(caller, any_session);
        if !keys.is_empty() {
            bytes.extend(self.key_bytes(&asker, &job_ref, &keys, literal).await?);
        }
        let watcher = asker.clone();
        let (job, stdin) = self
            .ask(|reply| Cmd::Stdin {
                asker,
                job: job_ref.clone(),
                reply,
            })
            .await??;
        let asked = bytes.len();
        let sent = stdin.send(bytes, eof).await;
        if eof || matches!(sent, Ok(ref s) if s.closed) {
            let _ = self.cmds.send(Cmd::StdinClosed { job }).await;
        }
        let invalid = |message: String| ErrorReply::new(ErrorKind::InvalidRequest, message);
        match sent {
            Ok(sent) => {
                let screen = match screen_settle_ms {
                    Some(ms) => {
                        let settle = Duration::from_millis(ms);
                        self.settled_screen(watcher, job_ref, settle).await
                    }
                    None => None,
                };
                Ok(SendReply {
                    job,
                    written: sent.written,
                    closed: sent.closed,
                    screen,
                })
            }
            Err(SendError::Full { written }) => Err(invalid(format!(
                "{job} is not reading its stdin: {written} of {asked} bytes went in before its pipe stayed full for {} s",
                crate::jobs::job::stdin::SEND_WAIT.as_secs()
            ))),
            Err(SendError::Gone { written }) => Err(invalid(format!(
                "no process of {job} reads its stdin any more ({written} of {asked} bytes written)"
            ))),
            Err(SendError::Closed) => Err(invalid(format!(
                "the stdin of {job} was closed (eof); it reads no more"
            ))),
            Err(SendError::Io(e)) => Err(ErrorReply::new(
                ErrorKind::Internal,
                format!("cannot write to the stdin of {job}: {e}"),
            )),
        }
    }

    /// The lines of a job's output that match a regex, on a blocking thread.
    pub async fn grep(&self, request: GrepRequest) -> Result<OutputPage, ErrorReply> {
        let regex = compile(&request.pattern, "grep")?;
        let asker = self.asker(request.caller, request.any_session);
        let (lookup, streams) = self.lookup(asker, request.job).await?;
        let job = lookup.summary.job;
        let source = match (request.stream, streams.stderr) {
            (StreamName::Stdout, _) => streams.stdout,
            (StreamName::Stderr, Some(stderr)) => stderr,
            (StreamName::Stderr, None) => {
                return Err(crate::jobs::job::supervisor::merged_stderr(job));
            }
        };
        let limit = request.limit.unwrap_or(lookup.page_lines);
        let (stream, context, offset) = (request.stream, request.context, request.offset);
        blocking(move || output::grep(source, job, stream, &regex, context, offset, limit)).await?
    }
}

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

/// Whether the job behind `probe` (its supervisor) waits for input, and since when.
pub(in crate::jobs) async fn waiting_for_input(
    probe: Option<&mpsc::UnboundedSender<Control>>,
) -> Option<(u64, Option<String>)> {
    let (reply, answer) = oneshot::channel();
    probe?.send(Control::Probe(reply)).ok()?;
    let probe = tokio::time::timeout(Duration::from_secs(2), answer)
        .await
        .ok()?
        .ok()?;
    Some((probe.waiting_for_input?, probe.prompt))
}

/// Fills in what the running jobs of a listing are doing: their ports, read from /proc
/// for all of them at once, and whether those with a stdin pipe wait for input.
pub(in crate::jobs) async fn look_at(jobs: &mut [JobInfo], live: Vec<LiveJob>) {
    if live.is_empty() {
        return;
    }
    let roots: Vec<u32> = live.iter().map(|job| job.root).collect();
    let ports = blocking(move || {
        let groups: Vec<Vec<u32>> = roots.iter().map(|&root| probe::descendants(root)).collect();
        probe::listening(&groups)
    })
    .await
    .unwrap_or_default();
    for (job, ports) in live.iter().zip(ports) {
        jobs[job.index].ports = ports;
    }
    let waits = live
        .iter()
        .filter(|job| job.probe.is_some())
        .map(|job| async { (job.index, waiting_for_input(job.probe.as_ref()).await) });
    for (index, waiting) in futures::future::join_all(waits).await {
        jobs[index].waiting_for_input = waiting.is_some();
    }
}

/// Sends the lines of `streams` that `from` asks for, stream by stream, as `Output`
/// events; false when the receiver went away.
async fn history(
    streams: Streams,
    job: JobId,
    only: Option<StreamName>,
    from: FollowFrom,
    out: &mpsc::Sender<Response>,
) -> Result<bool, ErrorReply> {
    let wanted = [
        (StreamName::Stdout, Some(streams.stdout)),
        (StreamName::Stderr, streams.stderr),
    ];
    for (stream, source) in wanted {
        let Some(source) = source.filter(|_| only.is_none_or(|s| s == stream)) else {
            continue;
        };
        // Lines still being written come live, whole.
        let complete = if source.complete {
            source.total_lines
        } else {
            source.complete_lines
        };
        let mut offset = match from {
            FollowFrom::Start => 1,
            FollowFrom::Last(n) => complete.saturating_sub(n) + 1,
        };
        while offset <= complete {
            let limit = (complete - offset + 1).min(HISTORY_PAGE_LINES);
            let snapshot: OutputSource = source.clone();
            let page = blocking(move || {
                output::page(
                    snapshot,
                    output::Ask {
                        job,
                        stream,
                        offset,
                        limit,
                        max_bytes: bashd_protocol::limits::MAX_PAGE_BYTES,
                    },
                )
            })
            .await??;
            if page.lines == 0 {
                break;
            }
            let chunk = OutputChunk {
                stream,
                bytes: page.text.into_bytes().into(),
                line: offset,
            };
            if out.send(Response::Output(chunk)).await.is_err() {
                return Ok(false);
            }
            offset += page.lines;
        }
    }
    Ok(true)
}

fn compile(pattern: &str, what: &str) -> Result<Regex, ErrorReply> {
    Regex::new(pattern).map_err(|e| {
        ErrorReply::new(
            ErrorKind::InvalidRequest,
            format!("{what} pattern {pattern:?} is not a valid regex: {e}"),
        )
    })
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

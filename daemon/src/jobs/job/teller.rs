//! A background job's teller (issue 32): a task that reads the job's lines as one more
//! live reader (the same `Subscriber` as `follow` and `wait --until`, so a slow teller
//! never stalls the job) and tells its session's inbox, through the actor, when a line
//! matches the job's `--notify` pattern (each batch of matches once, merged into one
//! event with a count until the session reads it), when the job has been quiet for its
//! `--notify-idle` time, and when a job that can read input waits for it (asked of its
//! supervisor, as `check` does, once per quiet stretch and then less and less often).
//! It ends with the job, when the supervisor drops its readers.

use std::time::Duration;

use bashd_protocol::{
    Argument, ErrorHint, ErrorKind, ErrorReply, ExecParams, InboxEvent, JobId, Response,
    StreamName, limits,
};
use regex::bytes::Regex;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::jobs::job::supervisor::{Control, FOLLOW_QUEUE, Report, Streams, Subscriber};

/// How long a job that can read input must have been quiet before it is first asked
/// whether it waits: a kernel-blocked read counts after 100 ms of quiet, the pipe
/// guess after 5 s.
const FIRST_INPUT_LOOK: Duration = Duration::from_millis(500);
/// The longest time between two looks at a quiet job.
const MAX_INPUT_LOOK: Duration = Duration::from_secs(30);
/// The most matches counted in the output written before a teller starts.
const MAX_SEARCHED_MATCHES: u64 = 10_000;
/// The longest pattern `--notify` takes.
const MAX_PATTERN_BYTES: usize = 4096;

/// What a job asked to be told about, checked when it is started.
#[derive(Debug, Clone)]
pub struct Spec {
    pub pattern: Option<(String, Regex)>,
    pub idle: Option<Duration>,
}

impl Spec {
    /// The job's `notify` and `notify_idle_secs`; a bad pattern is refused with the
    /// regex's own error, before anything runs.
    pub fn of(params: &ExecParams) -> Result<Option<Spec>, ErrorReply> {
        let invalid = |argument: Argument, message: String| {
            ErrorReply::new(ErrorKind::InvalidRequest, message)
                .with_hint(ErrorHint::BadArgument { argument })
        };
        let pattern = match &params.notify {
            None => None,
            Some(pattern) if pattern.len() > MAX_PATTERN_BYTES => {
                return Err(invalid(
                    Argument::Notify,
                    format!(
                        "the pattern is {} bytes, more than {MAX_PATTERN_BYTES}; give a shorter one",
                        pattern.len()
                    ),
                ));
            }
            Some(pattern) => match Regex::new(pattern) {
                Ok(regex) => Some((pattern.clone(), regex)),
                Err(e) => {
                    return Err(invalid(
                        Argument::Notify,
                        format!("the pattern {pattern:?} is not a valid regex: {e}"),
                    ));
                }
            },
        };
        let idle = match params.notify_idle_secs {
            None => None,
            Some(secs @ 1..=limits::MAX_TIMEOUT_SECS) => Some(Duration::from_secs(secs)),
            Some(secs) => {
                return Err(invalid(
                    Argument::NotifyIdle,
                    format!(
                        "{secs} is outside 1 to {} seconds",
                        limits::MAX_TIMEOUT_SECS
                    ),
                ));
            }
        };
        Ok((pattern.is_some() || idle.is_some()).then_some(Spec { pattern, idle }))
    }
}

/// A teller about to start: the job, and where to send what it finds.
pub struct Teller {
    pub job: JobId,
    pub session: String,
    pub command: String,
    pub spec: Option<Spec>,
    /// The job has a stdin pipe or a terminal: it may wait for input.
    pub reads_input: bool,
    pub control: mpsc::UnboundedSender<Control>,
    pub reports: mpsc::UnboundedSender<Report>,
    /// Lines of each stream its request's answer showed: the lines after them, written
    /// before this teller's reader started, are searched in the job's output.
    pub seen: [u64; 2],
}

impl Teller {
    /// Whether there is anything to tell about such a job.
    pub fn wanted(spec: Option<&Spec>, reads_input: bool) -> bool {
        spec.is_some() || reads_input
    }

    pub async fn run(self) {
        let (sink, mut events) = mpsc::channel(FOLLOW_QUEUE);
        let (reply, subscribed) = oneshot::channel();
        let subscriber = Subscriber::new(sink, self.job, None);
        if self
            .control
            .send(Control::Subscribe { subscriber, reply })
            .is_err()
        {
            return;
        }
        let Ok(subscribed) = subscribed.await else {
            return;
        };
        let pattern = self.spec.as_ref().and_then(|s| s.pattern.clone());
        if let Some((text, regex)) = &pattern {
            self.search_written(text, regex, subscribed.streams).await;
        }
        let idle = self.spec.as_ref().and_then(|s| s.idle);
        let mut last_output = Instant::now();
        let mut idle_told = false;
        // When to look next whether the job waits for input; `None` once it was told.
        let mut input_look = self.reads_input.then(|| last_output + FIRST_INPUT_LOOK);
        let mut input_gap = FIRST_INPUT_LOOK;
        loop {
            // Cancelling a branch loses nothing: events stay in their channel and the
            // timers are made again.
            tokio::select! {
                event = events.recv() => match event {
                    Some(Response::Output(chunk)) => {
                        last_output = Instant::now();
                        idle_told = false;
                        if self.reads_input {
                            input_gap = FIRST_INPUT_LOOK;
                            input_look = Some(last_output + input_gap);
                        }
                        if let Some((text, regex)) = &pattern
                            && let Some(event) = self.matches(text, regex, &chunk)
                        {
                            self.tell(event);
                        }
                    }
                    Some(_) => {}
                    None => return,
                },
                () = sleep_until(idle.filter(|_| !idle_told).map(|idle| last_output + idle)) => {
                    idle_told = true;
                    self.tell(InboxEvent::Idle {
                        job: self.job,
                        command: self.command.clone(),
                        idle_secs: last_output.elapsed().as_secs(),
                    });
                }
                () = sleep_until(input_look) => {
                    let (reply, answer) = oneshot::channel();
                    if self.control.send(Control::Probe(reply)).is_err() {
                        return;
                    }
                    let probe = answer.await.unwrap_or_default();
                    if probe.waiting_for_input.is_some() {
                        input_look = None;
                        self.tell(InboxEvent::WaitingForInput {
                            job: self.job,
                            command: self.command.clone(),
                            prompt: probe.prompt,
                        });
                    } else {
                        input_gap = (input_gap * 2).min(MAX_INPUT_LOOK);
                        input_look = Some(Instant::now() + input_gap);
                    }
                }
            }
        }
    }

    /// Tells of the lines that matched between the request's answer and this teller's
    /// start, read from the job's output as `output --grep` reads it.
    async fn search_written(&self, pattern: &str, regex: &Regex, streams: Streams) {
        let sources = [
            (StreamName::Stdout, Some(streams.stdout), self.seen[0]),
            (StreamName::Stderr, streams.stderr, self.seen[1]),
        ];
        for (stream, source, seen) in sources {
            let Some(source) = source.filter(|s| s.complete_lines > seen) else {
                continue;
            };
            let (job, regex) = (self.job, regex.clone());
            let complete = source.complete_lines;
            let page = tokio::task::spawn_blocking(move || {
                crate::output::grep(
                    source,
                    job,
                    stream,
                    &regex,
                    0,
                    seen + 1,
                    MAX_SEARCHED_MATCHES,
                )
            })
            .await;
            let Ok(Ok(page)) = page else { continue };
            // The page is `grep -n`'s: `N:match`.
            let matched: Vec<(u64, &str)> = page
                .text
                .lines()
                .filter_map(|line| {
                    let (number, text) = line.split_once(':')?;
                    Some((number.parse::<u64>().ok()?, text))
                })
                .filter(|(number, _)| *number <= complete)
                .collect();
            if let Some((line, text)) = matched.first() {
                self.tell(InboxEvent::Matched {
                    job: self.job,
                    command: self.command.clone(),
                    pattern: pattern.to_owned(),
                    stream,
                    line: *line,
                    text: cut(text.as_bytes()),
                    count: matched.len() as u64,
                });
            }
        }
    }

    /// The first line of `chunk` that matches, and how many do.
    fn matches(
        &self,
        pattern: &str,
        regex: &Regex,
        chunk: &bashd_protocol::OutputChunk,
    ) -> Option<InboxEvent> {
        let mut first: Option<(u64, &[u8])> = None;
        let mut count = 0;
        for (i, line) in chunk.bytes.split(|&b| b == b'\n').enumerate() {
            if !line.is_empty() && regex.is_match(line) {
                count += 1;
                first.get_or_insert((chunk.line + i as u64, line));
            }
        }
        let (line, text) = first?;
        Some(InboxEvent::Matched {
            job: self.job,
            command: self.command.clone(),
            pattern: pattern.to_owned(),
            stream: chunk.stream,
            line,
            text: cut(text),
            count,
        })
    }

    fn tell(&self, event: InboxEvent) {
        let _ = self.reports.send(Report::Tell {
            session: self.session.clone(),
            event,
        });
    }
}

/// A matched line as an event carries it: its first bytes.
fn cut(text: &[u8]) -> String {
    const MAX_BYTES: usize = 400;
    String::from_utf8_lossy(&text[..text.len().min(MAX_BYTES)]).into_owned()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(notify: Option<&str>, idle: Option<u64>) -> ExecParams {
        ExecParams {
            notify: notify.map(str::to_owned),
            notify_idle_secs: idle,
            ..ExecParams::new("true", "s", "/w")
        }
    }

    #[test]
    fn a_bad_pattern_is_refused_with_the_regex_error() {
        let error = Spec::of(&params(Some("(unclosed"), None)).unwrap_err();
        assert!(
            error.message.contains("not a valid regex") && error.message.contains("unclosed"),
            "{}",
            error.message
        );
        assert!(Spec::of(&params(None, Some(0))).is_err());
        assert!(Spec::of(&params(None, None)).unwrap().is_none());
        assert!(
            Spec::of(&params(Some("FAIL|error"), Some(5)))
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn a_chunk_is_told_once_with_its_count() {
        let (control, _) = mpsc::unbounded_channel();
        let (reports, _) = mpsc::unbounded_channel();
        let teller = Teller {
            job: JobId(3),
            session: "s".to_owned(),
            command: "make".to_owned(),
            spec: None,
            reads_input: false,
            control,
            reports,
            seen: [0, 0],
        };
        let chunk = bashd_protocol::OutputChunk {
            stream: StreamName::Stdout,
            bytes: "ok\nerror: a\nok\nerror: b\n".into(),
            line: 10,
        };
        let regex = Regex::new("error").unwrap();
        let Some(InboxEvent::Matched {
            line, text, count, ..
        }) = teller.matches("error", &regex, &chunk)
        else {
            panic!("no match");
        };
        assert_eq!((line, text.as_str(), count), (11, "error: a", 2));
    }
}

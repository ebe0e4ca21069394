//! `check` (`bashc check`, `bash_check`): a job's state and the output its caller's
//! session has not seen yet. Each stream shows its new complete lines, the last ones
//! when there are more than the limits allow, and says where the others are; a line
//! still being written waits for the next check, so nothing is shown twice or
//! skipped. The reading is blocking (spill files), on a blocking thread.

use bashd_protocol::{
    Direction, ErrorReply, ExecResult, JobId, JobRequest, JobState, Notice, StreamName,
    StreamResult, TruncatedBy,
};

use crate::jobs::job::supervisor::Streams;
use crate::jobs::table::JobsActor;
use crate::jobs::table::handle::{JobsHandle, Lookup, ToActor, blocking};
use crate::jobs::table::queries::waiting_for_input;
use crate::output::{self, OutputSource};

impl JobsHandle {
    /// The job's state and the output its caller's session has not seen yet.
    pub(in crate::jobs) async fn check(
        &self,
        request: JobRequest,
    ) -> Result<ExecResult, ErrorReply> {
        let session = request.caller.session.clone();
        let asker = self.asker(request.caller, request.any_session);
        let (lookup, streams) = self.lookup(asker.clone(), request.job).await?;
        let Lookup {
            summary,
            cursor,
            page_lines,
            max_bytes,
            probe,
            ..
        } = lookup;
        let (mut result, seen) =
            blocking(move || since_cursor(summary, streams, cursor, page_lines, max_bytes))
                .await??;
        if let Some((idle_secs, prompt)) = waiting_for_input(probe.as_ref()).await {
            result.notices.push(Notice::WaitingForInput {
                job: result.job,
                idle_secs,
                prompt,
            });
        }
        let job = result.job;
        self.tell(Advance { job, session, seen }).await;
        Ok(self.with_screen(asker, result).await)
    }
}

/// The message: a `check` of `session` has shown these many lines of each stream of
/// `job`; the next starts after them.
struct Advance {
    job: JobId,
    session: String,
    seen: [u64; 2],
}

impl ToActor for Advance {
    type Reply = ();
    fn handle(self, actor: &mut JobsActor) {
        if let Some(job) = actor.jobs.get_mut(&self.job.0) {
            let cursor = job.cursors.entry(self.session).or_default();
            cursor[0] = cursor[0].max(self.seen[0]);
            cursor[1] = cursor[1].max(self.seen[1]);
        }
    }
}

/// The result of a check, and the lines of each stream it covered.
pub fn since_cursor(
    mut summary: ExecResult,
    streams: Streams,
    cursor: [u64; 2],
    max_lines: u64,
    max_bytes: usize,
) -> Result<(ExecResult, [u64; 2]), ErrorReply> {
    let job = summary.job;
    let mut notices = Vec::new();
    let (stdout, seen_out) = stream(
        &streams.stdout,
        job,
        StreamName::Stdout,
        cursor[0],
        max_lines,
        max_bytes,
        &mut notices,
    )?;
    let (stderr, seen_err) = match &streams.stderr {
        Some(source) => {
            let (result, seen) = stream(
                source,
                job,
                StreamName::Stderr,
                cursor[1],
                max_lines,
                max_bytes,
                &mut notices,
            )?;
            (Some(result), seen)
        }
        None => (None, 0),
    };
    if stdout.total_lines == 0 && stderr.as_ref().is_none_or(|s| s.total_lines == 0) {
        notices.push(Notice::NoNewOutput {
            job,
            ended: summary.state != JobState::Running,
        });
    }
    summary.stdout = stdout;
    summary.stderr = stderr;
    // What the summary says of the job itself (that it was lost) comes first.
    summary.notices.extend(notices);
    Ok((summary, [seen_out, seen_err]))
}

/// The new lines of one stream after `cursor`, and the cursor after them.
fn stream(
    source: &OutputSource,
    job: JobId,
    name: StreamName,
    cursor: u64,
    max_lines: u64,
    max_bytes: usize,
    notices: &mut Vec<Notice>,
) -> Result<(StreamResult, u64), ErrorReply> {
    let end = source.complete_lines;
    if end <= cursor {
        return Ok((StreamResult::empty(), cursor));
    }
    let first = (cursor + 1).max((end + 1).saturating_sub(max_lines.max(1)));
    let ask = output::Ask {
        job,
        stream: name,
        offset: first,
        limit: end + 1 - first,
        max_bytes: bashd_protocol::limits::MAX_PAGE_BYTES,
    };
    let page = output::page(source.clone(), ask)?;
    // A page stops early at its byte cap: the lines after it wait for the next check.
    let covered = first + page.lines - 1;
    let (text, shown_lines, partial) = keep_last(page.text, page.lines, max_bytes);
    let shown_bytes = text.len() as u64;
    let before = first - (cursor + 1);
    let unshown = before + page.lines - shown_lines;
    if unshown > 0 {
        notices.push(Notice::LinesNotShown {
            job,
            stream: name,
            offset: cursor + 1,
            lines: unshown,
        });
    }
    let by = if shown_lines < page.lines || partial {
        TruncatedBy::Bytes
    } else {
        TruncatedBy::Lines
    };
    let result = StreamResult {
        text,
        truncated: unshown > 0 || partial,
        truncated_by: (unshown > 0 || partial).then_some(by),
        direction: Direction::Tail,
        total_lines: covered - cursor,
        total_bytes: shown_bytes,
        shown_lines,
        shown_bytes,
        partial,
        full_output: page.full_output,
    };
    Ok((result, covered))
}

/// The last whole lines of `text` that fit in `max_bytes`; a last line longer than
/// that alone is cut to its last `max_bytes` on a char boundary.
fn keep_last(text: String, lines: u64, max_bytes: usize) -> (String, u64, bool) {
    if text.len() <= max_bytes {
        return (text, lines, false);
    }
    let from = text.len() - max_bytes;
    // The start of the first line that begins at or after `from`.
    let start = text[..text.len() - 1]
        .char_indices()
        .filter(|&(i, c)| c == '\n' && i + 1 >= from)
        .map(|(i, _)| i + 1)
        .next();
    match start {
        Some(start) => {
            let kept = text[start..].to_owned();
            let kept_lines = kept.matches('\n').count() as u64 + u64::from(!kept.ends_with('\n'));
            (kept, kept_lines, false)
        }
        None => {
            let mut cut = from;
            while !text.is_char_boundary(cut) {
                cut += 1;
            }
            (text[cut..].to_owned(), 1, true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_whole_last_lines_within_the_bytes() {
        let (text, lines, partial) = keep_last("aaaa\nbbbb\ncccc\n".into(), 3, 11);
        assert_eq!((text.as_str(), lines, partial), ("bbbb\ncccc\n", 2, false));
        let (text, lines, partial) = keep_last("aaaa\nbbbb\n".into(), 2, 100);
        assert_eq!((text.as_str(), lines, partial), ("aaaa\nbbbb\n", 2, false));
        let (text, lines, partial) = keep_last("ééééé\n".into(), 1, 4);
        assert_eq!((text.as_str(), lines, partial), ("é\n", 1, true));
    }
}

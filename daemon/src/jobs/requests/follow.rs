//! `follow` (`bashc follow`, `exec --stream`'s after its start): a job's output so far,
//! as `from` asks, then its lines as they come, as one more live reader of the job
//! (`job/supervisor/live.rs`), then its result. It runs in a task of its own: the
//! actor only hands out the reader, and a supervisor only `try_send`s lines to it.

use bashd_protocol::{
    ErrorReply, FollowFrom, FollowRequest, JobId, OutputChunk, Response, StreamName,
};
use tokio::sync::mpsc;

use crate::jobs::job::supervisor::{FOLLOW_QUEUE, Streams};
use crate::jobs::table::handle::{JobsHandle, Watching, blocking, shutting_down};
use crate::jobs::table::live::Subscribe;
use crate::output::{self, OutputSource};

/// Lines of history `follow` sends in one event.
const HISTORY_PAGE_LINES: u64 = 10_000;

impl JobsHandle {
    /// `follow`: the job's output so far (as `from` asks), then its lines as they come,
    /// then its result. Runs in a task of its own; dropping the receiver ends it.
    pub(in crate::jobs) fn follow(&self, request: FollowRequest) -> mpsc::Receiver<Response> {
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
            .call(Subscribe {
                asker,
                job,
                stream,
                sink,
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

//! Writing one connection's frames: the task that makes a response writes it itself,
//! one whole frame at a time under the connection's lock, rather than handing it to a
//! writer task of the connection's: a task wake-up fewer for every response, four for
//! an `exec` (`Welcome`, `Recorded`, `Started`, `Finished`), on the path a client
//! waits on.
//!
//! Backpressure is the socket's, as it was the writer's: a client that does not read
//! its answers fills the kernel's buffer, the task writing waits holding the lock, and
//! every other task of the connection waits for the lock holding its one frame, so the
//! daemon holds a frame per request in flight at most, and `conn.rs` stops reading new
//! requests once its bounds of requests in flight are reached.
//!
//! Cancel-safe: a send dropped while it waits for the lock sent nothing; one dropped
//! while its frame is being written leaves the rest of that frame in the writer's
//! buffer, which the next send, or [`Outbound::close`], writes first: frames are
//! never torn.
//!
//! Used by `conn.rs` for every connection; `inbound.rs` is the reading side.

use std::sync::Arc;

use bashd_protocol::ServerFrame;
use bashd_protocol::codec::DaemonCodec;
use futures::SinkExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::Mutex;
use tokio_util::codec::FramedWrite;

/// The write half of one connection, shared by the tasks that answer on it.
#[derive(Clone)]
pub struct Outbound(Arc<Mutex<Writer>>);

struct Writer {
    sink: FramedWrite<OwnedWriteHalf, DaemonCodec>,
    /// A write failed: the client is gone, and every later send fails at once.
    broken: bool,
}

/// What [`Outbound::write`] does on the sink.
enum Step {
    Send(ServerFrame),
    Hold(ServerFrame),
    Flush,
}

/// The connection can no longer be written to: the client has gone away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl Outbound {
    pub fn new(write: OwnedWriteHalf, max_frame_bytes: usize) -> Outbound {
        Outbound(Arc::new(Mutex::new(Writer {
            sink: FramedWrite::new(write, DaemonCodec::new(max_frame_bytes)),
            broken: false,
        })))
    }

    /// Writes `frame` whole, after any frame being written; returns once the kernel
    /// has it.
    pub async fn send(&self, frame: ServerFrame) -> Result<(), Closed> {
        self.write(Step::Send(frame)).await
    }

    /// Encodes `frame` after any frame being written, and writes it with the next
    /// [`Outbound::send`] or [`Outbound::flush`]: one write, and one wake-up of the
    /// client, for two frames.
    pub async fn hold(&self, frame: ServerFrame) -> Result<(), Closed> {
        self.write(Step::Hold(frame)).await
    }

    /// Writes what is held; nothing when nothing is.
    pub async fn flush(&self) -> Result<(), Closed> {
        self.write(Step::Flush).await
    }

    /// One step on the sink, unless a step before failed; a failed one marks the
    /// connection broken for every later one.
    async fn write(&self, step: Step) -> Result<(), Closed> {
        let mut writer = self.0.lock().await;
        if writer.broken {
            return Err(Closed);
        }
        let done = match step {
            Step::Send(frame) => writer.sink.send(frame).await,
            Step::Hold(frame) => writer.sink.feed(frame).await,
            Step::Flush => writer.sink.flush().await,
        };
        if let Err(e) = done {
            tracing::debug!("cannot write to a client: {e}");
            writer.broken = true;
            return Err(Closed);
        }
        Ok(())
    }

    /// Writes what a dropped send left, then shuts the connection's write side: the
    /// client reads its last answers, then the end.
    pub async fn close(&self) {
        let mut writer = self.0.lock().await;
        if !writer.broken {
            let _ = writer.sink.close().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bashd_protocol::codec::ClientCodec;
    use bashd_protocol::{ErrorKind, ErrorReply};
    use futures::StreamExt;
    use tokio::net::UnixStream;
    use tokio_util::codec::FramedRead;

    fn fatal(text: &str) -> ServerFrame {
        ServerFrame::Fatal(ErrorReply::new(ErrorKind::Internal, text))
    }

    #[tokio::test]
    async fn frames_from_many_tasks_arrive_whole_and_in_the_order_each_sent_them() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (_read, write) = ours.into_split();
        let out = Outbound::new(write, 1 << 20);
        let mut tasks = Vec::new();
        for task in 0..4 {
            let out = out.clone();
            tasks.push(tokio::spawn(async move {
                for n in 0..50 {
                    // Large enough that writes go in parts while others wait.
                    let text = format!("{task} {n} {}", "x".repeat(20_000));
                    out.send(fatal(&text)).await.unwrap();
                }
            }));
        }
        let reader = tokio::spawn(async move {
            let mut frames = FramedRead::new(theirs, ClientCodec::default());
            let mut next = [0; 4];
            for _ in 0..200 {
                let Some(Ok(ServerFrame::Fatal(reply))) = frames.next().await else {
                    panic!("a frame did not arrive whole");
                };
                let mut words = reply.message.split(' ');
                let task: usize = words.next().unwrap().parse().unwrap();
                let n: usize = words.next().unwrap().parse().unwrap();
                assert_eq!(n, next[task], "task {task}'s frames came out of order");
                next[task] += 1;
            }
        });
        for task in tasks {
            task.await.unwrap();
        }
        out.close().await;
        reader.await.unwrap();
    }

    #[tokio::test]
    async fn a_send_after_the_client_went_away_fails() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (_read, write) = ours.into_split();
        let out = Outbound::new(write, 1 << 20);
        drop(theirs);
        assert_eq!(out.send(fatal("first")).await, Err(Closed));
        assert_eq!(out.send(fatal("second")).await, Err(Closed));
    }

    #[tokio::test]
    async fn a_send_dropped_mid_frame_leaves_the_rest_for_the_next() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (_read, write) = ours.into_split();
        let out = Outbound::new(write, 1 << 24);
        // Larger than the socket's buffer: the first send cannot finish until the
        // client reads, and is dropped while its frame is part written.
        let big = "y".repeat(4 << 20);
        let first =
            tokio::time::timeout(std::time::Duration::from_millis(50), out.send(fatal(&big))).await;
        assert!(first.is_err(), "the socket took 4 MiB at once");
        let reader = tokio::spawn(async move {
            let mut frames = FramedRead::new(theirs, ClientCodec::new(1 << 24));
            let mut got = Vec::new();
            for _ in 0..2 {
                match frames.next().await {
                    Some(Ok(ServerFrame::Fatal(reply))) => got.push(reply.message.len()),
                    other => panic!("a frame was torn: {other:?}"),
                }
            }
            got
        });
        out.send(fatal("after")).await.unwrap();
        assert_eq!(reader.await.unwrap(), vec![big.len(), "after".len()]);
    }
}

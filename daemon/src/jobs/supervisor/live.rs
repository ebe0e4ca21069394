//! The live readers of a job's output (`exec --stream`, `follow`, `wait --until`): each
//! gets the sanitized lines as its supervisor reads them, through a bounded queue that
//! the supervisor only ever `try_send`s into, so a slow reader never stalls the job.
//! Lines that find its queue full are counted instead, and the reader is told how many
//! it missed, from which line, and which file has them, as soon as there is room again.

use bashd_protocol::{JobId, Notice, OutputChunk, Response, StreamName};
use tokio::sync::mpsc;

/// How many chunks a follower's queue holds: each is what one pipe read handed on (at
/// most 256 KiB and a line), so a reader that falls behind holds a bounded amount.
pub const FOLLOW_QUEUE: usize = 256;

/// One live reader of a job's output.
#[derive(Debug)]
pub struct Subscriber {
    sink: mpsc::Sender<Response>,
    job: JobId,
    /// `None`: both streams.
    stream: Option<StreamName>,
    /// Per stream (stdout, stderr): the first and last line not sent for want of room.
    missed: [Option<(u64, u64)>; 2],
}

impl Subscriber {
    /// A reader of `stream` (`None`: both) of `job` that gets `Output` responses, and a
    /// `Notice` for the lines it missed, on `sink`.
    pub fn new(sink: mpsc::Sender<Response>, job: JobId, stream: Option<StreamName>) -> Subscriber {
        Subscriber {
            sink,
            job,
            stream,
            missed: [None, None],
        }
    }
}

/// Every live reader of one job.
#[derive(Debug, Default)]
pub struct Live {
    subscribers: Vec<Subscriber>,
}

fn index(stream: StreamName) -> usize {
    match stream {
        StreamName::Stdout => 0,
        StreamName::Stderr => 1,
    }
}

impl Live {
    pub fn add(&mut self, subscriber: Subscriber) {
        self.subscribers.push(subscriber);
    }

    pub fn is_empty(&self) -> bool {
        self.subscribers.is_empty()
    }

    /// Hands `text`, which starts on line `line` of `stream`, to every reader of that
    /// stream. `full_output` names the stream's spill file for a reader that missed
    /// lines. Never waits: a reader gone is dropped, a full queue counts as missed.
    pub fn send(
        &mut self,
        stream: StreamName,
        line: u64,
        text: &[u8],
        full_output: impl Fn() -> Option<String>,
    ) {
        if text.is_empty() || self.subscribers.is_empty() {
            return;
        }
        let last = line + memchr::memchr_iter(b'\n', text).count() as u64
            - u64::from(text.ends_with(b"\n"));
        let i = index(stream);
        self.subscribers.retain_mut(|sub| {
            if sub.stream.is_some_and(|s| s != stream) {
                return true;
            }
            if let Some((first, end)) = sub.missed[i] {
                let notice = Notice::OutputMissed {
                    job: sub.job,
                    stream,
                    offset: first,
                    lines: end - first + 1,
                    path: full_output(),
                };
                match sub.sink.try_send(Response::Notice(notice)) {
                    Ok(()) => sub.missed[i] = None,
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        sub.missed[i] = Some((first, last));
                        return true;
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => return false,
                }
            }
            let chunk = OutputChunk {
                stream,
                bytes: text.to_vec(),
                line,
            };
            match sub.sink.try_send(Response::Output(chunk)) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    sub.missed[i] = Some((line, last));
                    true
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
    }

    /// The stream has ended: readers that still miss lines are told, waiting for room
    /// if they must (the job is over, nothing is held up but this reader's answer).
    pub async fn close(&mut self, full_output: [Option<String>; 2]) {
        for sub in self.subscribers.drain(..) {
            for (i, stream) in [StreamName::Stdout, StreamName::Stderr]
                .into_iter()
                .enumerate()
            {
                if let Some((first, end)) = sub.missed[i] {
                    let notice = Notice::OutputMissed {
                        job: sub.job,
                        stream,
                        offset: first,
                        lines: end - first + 1,
                        path: full_output[i].clone(),
                    };
                    let _ = sub.sink.send(Response::Notice(notice)).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_queue_counts_lines_missed_and_says_so_when_there_is_room() {
        let (tx, mut rx) = mpsc::channel(2);
        let mut live = Live::default();
        live.add(Subscriber::new(tx, JobId(3), None));
        let none = || None;
        live.send(StreamName::Stdout, 1, b"1\n", none);
        live.send(StreamName::Stdout, 2, b"2\n", none);
        // Full: lines 3 to 5 are missed.
        live.send(StreamName::Stdout, 3, b"3\n4\n", none);
        live.send(StreamName::Stdout, 5, b"5\n", none);
        let Some(Response::Output(chunk)) = rx.recv().await else {
            panic!()
        };
        assert_eq!((chunk.line, chunk.bytes.as_slice()), (1, &b"1\n"[..]));
        let _ = rx.recv().await;
        live.send(StreamName::Stdout, 6, b"6\n", || Some("/f".to_owned()));
        let Some(Response::Notice(Notice::OutputMissed {
            offset,
            lines,
            path,
            ..
        })) = rx.recv().await
        else {
            panic!()
        };
        assert_eq!((offset, lines, path.as_deref()), (3, 3, Some("/f")));
        let Some(Response::Output(chunk)) = rx.recv().await else {
            panic!()
        };
        assert_eq!(chunk.line, 6);
    }

    #[tokio::test]
    async fn a_reader_of_one_stream_gets_only_it_and_a_gone_reader_is_dropped() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut live = Live::default();
        live.add(Subscriber::new(tx, JobId(3), Some(StreamName::Stderr)));
        live.send(StreamName::Stdout, 1, b"out\n", || None);
        live.send(StreamName::Stderr, 1, b"err\n", || None);
        let Some(Response::Output(chunk)) = rx.recv().await else {
            panic!()
        };
        assert_eq!(chunk.stream, StreamName::Stderr);
        drop(rx);
        live.send(StreamName::Stderr, 2, b"more\n", || None);
        assert!(live.is_empty());
    }
}

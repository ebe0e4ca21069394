//! The live readers of a job's output (`exec --stream`, `follow`, `wait --until`): each
//! gets the sanitized lines as its supervisor reads them, through a bounded queue that
//! the supervisor only ever `try_send`s into, so a slow reader never stalls the job.
//! A reader is not sent more while it is [`LIVE_BACKLOG_BYTES`] behind, or once it has
//! had a burst of [`LIVE_BURST_BYTES`] and more than [`LIVE_RATE_BYTES`] a second
//! since: its lines are counted instead, and it is told how many it missed, from which
//! line, and which file has them, as soon as it is sent again. A live reader wants what
//! is happening now, and no agent or terminal reads faster than that rate; a job
//! writing faster keeps its speed (each line sent costs a copy and a socket write in
//! the daemon and a read in the reader, on the job's cores) and the file keeps every
//! line.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bashd_protocol::{JobId, Notice, OutputChunk, Response, StreamName};
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How many events a reader's queue holds: what one pipe read handed on (at most
/// 256 KiB and a line) each, or a notice.
pub const FOLLOW_QUEUE: usize = 256;
/// How far behind, in bytes of output sent and not yet taken, a reader may fall before
/// its lines are counted as missed instead of sent.
pub const LIVE_BACKLOG_BYTES: usize = 4 * 1024 * 1024;
/// What a reader may be sent at once: a build's or a test run's burst comes whole.
pub const LIVE_BURST_BYTES: usize = 16 * 1024 * 1024;
/// What a reader may be sent a second after its burst.
pub const LIVE_RATE_BYTES: usize = 32 * 1024 * 1024;

/// One live reader of a job's output.
#[derive(Debug)]
pub struct Subscriber {
    sink: mpsc::Sender<Response>,
    job: JobId,
    /// `None`: both streams.
    stream: Option<StreamName>,
    /// Per stream (stdout, stderr): the first and last line not sent.
    missed: [Option<(u64, u64)>; 2],
    /// The sizes of the events sent that may still be in the queue, oldest first: the
    /// queue is first in, first out, so the ones it no longer holds are the oldest.
    sent: VecDeque<usize>,
    sent_bytes: usize,
    /// Bytes it may be sent now, refilled at [`LIVE_RATE_BYTES`] a second up to
    /// [`LIVE_BURST_BYTES`] (a token bucket), as of `refilled`.
    allowance: f64,
    refilled: Instant,
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
            sent: VecDeque::new(),
            sent_bytes: 0,
            allowance: LIVE_BURST_BYTES as f64,
            refilled: Instant::now(),
        }
    }

    fn reads(&self, stream: StreamName) -> bool {
        self.stream.is_none_or(|s| s == stream)
    }

    /// Bytes sent that the reader has not taken yet.
    fn backlog(&mut self) -> usize {
        let queued = self.sink.max_capacity() - self.sink.capacity();
        while self.sent.len() > queued {
            self.sent_bytes -= self.sent.pop_front().unwrap_or_default();
        }
        self.sent_bytes
    }

    fn has_room(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.refilled).as_secs_f64() * LIVE_RATE_BYTES as f64;
        self.allowance = (self.allowance + refill).min(LIVE_BURST_BYTES as f64);
        self.refilled = now;
        self.allowance > 0.0 && self.backlog() < LIVE_BACKLOG_BYTES
    }

    /// The notice of the lines of `stream` this reader missed, if it missed any;
    /// `path` names the stream's spill file.
    fn missed_notice(
        &self,
        stream: StreamName,
        path: impl FnOnce() -> Option<String>,
    ) -> Option<Notice> {
        let (first, end) = self.missed[index(stream)]?;
        Some(Notice::OutputMissed {
            job: self.job,
            stream,
            offset: first,
            lines: end - first + 1,
            path: path(),
        })
    }

    fn miss(&mut self, i: usize, first: u64, last: u64) {
        let from = self.missed[i].map_or(first, |(from, _)| from);
        self.missed[i] = Some((from, last));
    }

    /// Sends `response` of `size` bytes if the queue has a slot; `Err` when the
    /// reader is gone.
    fn try_send(&mut self, response: Response, size: usize) -> Result<bool, ()> {
        match self.sink.try_send(response) {
            Ok(()) => {
                self.sent.push_back(size);
                self.sent_bytes += size;
                self.allowance -= size as f64;
                Ok(true)
            }
            Err(mpsc::error::TrySendError::Full(_)) => Ok(false),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(()),
        }
    }
}

/// The buffers a job's reads are copied into for its live readers, given back when
/// the last reader is done with one (once its frame is encoded): a loud job with a
/// reader attached reuses a few buffers instead of faulting in fresh memory for every
/// read (measured: a page fault per 4 KiB streamed, a third of the daemon's time).
/// At most [`LENT_BYTES`] are out at once, whatever queues they wait in.
#[derive(Debug, Clone, Default)]
pub struct ChunkBuffers {
    home: Arc<Home>,
}

#[derive(Debug, Default)]
struct Home {
    /// Buffers back from the readers, and their capacity in all.
    spare: Mutex<(Vec<Vec<u8>>, usize)>,
    lent_bytes: AtomicUsize,
}

/// The largest buffer kept for the next read.
const SPARE_BUFFER_BYTES: usize = 1024 * 1024;
/// The most a job's live readers hold between its reads and their sockets; a job keeps
/// at most as much again in spare buffers while it runs.
pub const LENT_BYTES: usize = 8 * 1024 * 1024;

impl ChunkBuffers {
    /// Whether a buffer may be lent now.
    pub fn has_room(&self) -> bool {
        self.home.lent_bytes.load(Ordering::Relaxed) < LENT_BYTES
    }

    /// `fill` writes into an empty buffer of at least `capacity` bytes, which is then
    /// shared; it comes back here when the last copy of the `Bytes` is dropped.
    pub fn fill(&self, capacity: usize, fill: impl FnOnce(&mut Vec<u8>)) -> Bytes {
        let spare = self.home.spare.lock().ok().and_then(|mut spare| {
            let buf = spare.0.pop()?;
            spare.1 -= buf.capacity();
            Some(buf)
        });
        let mut buf = spare.unwrap_or_default();
        buf.reserve(capacity);
        fill(&mut buf);
        self.home
            .lent_bytes
            .fetch_add(buf.capacity(), Ordering::Relaxed);
        Bytes::from_owner(Lent {
            buf,
            home: self.home.clone(),
        })
    }
}

/// A buffer out of [`ChunkBuffers`], on its way to the readers.
struct Lent {
    buf: Vec<u8>,
    home: Arc<Home>,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let mut buf = std::mem::take(&mut self.buf);
        self.home
            .lent_bytes
            .fetch_sub(buf.capacity(), Ordering::Relaxed);
        if buf.capacity() > SPARE_BUFFER_BYTES {
            return;
        }
        buf.clear();
        if let Ok(mut spare) = self.home.spare.lock()
            && spare.1 + buf.capacity() <= LENT_BYTES
        {
            spare.1 += buf.capacity();
            spare.0.push(buf);
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

    /// Whether a reader of `stream` would take text now: when none would, the caller
    /// need not copy the text out, only say which lines went by ([`Live::miss`]).
    pub fn wants(&mut self, stream: StreamName) -> bool {
        self.subscribers
            .iter_mut()
            .any(|sub| sub.reads(stream) && sub.has_room())
    }

    /// Whether a reader has lines it missed and was not told of yet.
    pub fn has_missed(&self) -> bool {
        self.subscribers
            .iter()
            .any(|sub| sub.missed.iter().any(Option::is_some))
    }

    /// Tells each reader with room of the lines it missed: for a job gone quiet after
    /// a burst, which sends nothing that would carry the notice. `full_output` names
    /// each stream's spill file.
    pub fn tell_missed(&mut self, full_output: &[Option<String>; 2]) {
        self.subscribers.retain_mut(|sub| {
            for (i, stream) in [StreamName::Stdout, StreamName::Stderr]
                .into_iter()
                .enumerate()
            {
                let Some(notice) = sub.missed_notice(stream, || full_output[i].clone()) else {
                    continue;
                };
                match sub.try_send(Response::Notice(notice), 0) {
                    Ok(true) => sub.missed[i] = None,
                    Ok(false) => {}
                    Err(()) => return false,
                }
            }
            true
        });
    }

    /// Lines `first..=last` of `stream` went by without being sent to any reader.
    pub fn miss(&mut self, stream: StreamName, first: u64, last: u64) {
        let i = index(stream);
        for sub in self.subscribers.iter_mut().filter(|sub| sub.reads(stream)) {
            sub.miss(i, first, last);
        }
    }

    /// Hands `text`, which starts on line `line` of `stream`, to every reader of that
    /// stream that has room, after the notice of what it missed before. `full_output`
    /// names the stream's spill file for that notice. Never waits: a reader gone is
    /// dropped, one without room counts the lines as missed. Readers share `text`.
    pub fn send(
        &mut self,
        stream: StreamName,
        line: u64,
        text: Bytes,
        full_output: impl Fn() -> Option<String>,
    ) {
        if text.is_empty() || self.subscribers.is_empty() {
            return;
        }
        let last = line + memchr::memchr_iter(b'\n', &text).count() as u64
            - u64::from(text.ends_with(b"\n"));
        let i = index(stream);
        self.subscribers.retain_mut(|sub| {
            if !sub.reads(stream) {
                return true;
            }
            if !sub.has_room() {
                sub.miss(i, line, last);
                return true;
            }
            if let Some(notice) = sub.missed_notice(stream, &full_output) {
                match sub.try_send(Response::Notice(notice), 0) {
                    Ok(true) => sub.missed[i] = None,
                    Ok(false) => {
                        sub.miss(i, line, last);
                        return true;
                    }
                    Err(()) => return false,
                }
            }
            let chunk = OutputChunk {
                stream,
                bytes: text.clone(),
                line,
            };
            let size = chunk.bytes.len();
            match sub.try_send(Response::Output(chunk), size) {
                Ok(true) => true,
                Ok(false) => {
                    sub.miss(i, line, last);
                    true
                }
                Err(()) => false,
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
                if let Some(notice) = sub.missed_notice(stream, || full_output[i].clone()) {
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
        live.send(StreamName::Stdout, 1, Bytes::from_static(b"1\n"), none);
        live.send(StreamName::Stdout, 2, Bytes::from_static(b"2\n"), none);
        // Full: lines 3 to 5 are missed.
        live.send(StreamName::Stdout, 3, Bytes::from_static(b"3\n4\n"), none);
        live.send(StreamName::Stdout, 5, Bytes::from_static(b"5\n"), none);
        let Some(Response::Output(chunk)) = rx.recv().await else {
            panic!()
        };
        assert_eq!((chunk.line, &chunk.bytes[..]), (1, &b"1\n"[..]));
        let _ = rx.recv().await;
        live.send(StreamName::Stdout, 6, Bytes::from_static(b"6\n"), || {
            Some("/f".to_owned())
        });
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
    async fn a_reader_too_far_behind_misses_lines_until_it_catches_up() {
        let (tx, mut rx) = mpsc::channel(FOLLOW_QUEUE);
        let mut live = Live::default();
        live.add(Subscriber::new(tx, JobId(3), None));
        let line = |n: usize| {
            let mut text = vec![b'x'; LIVE_BACKLOG_BYTES / 2 - 1];
            text.push(b'\n');
            (n as u64, Bytes::from(text))
        };
        for n in 1..=2 {
            let (at, text) = line(n);
            live.send(StreamName::Stdout, at, text, || None);
        }
        // Two halves of the backlog are queued: the reader is behind.
        assert!(!live.wants(StreamName::Stdout));
        let (at, text) = line(3);
        live.send(StreamName::Stdout, at, text, || None);
        live.miss(StreamName::Stdout, 4, 5);
        for n in 1..=2 {
            let Some(Response::Output(chunk)) = rx.recv().await else {
                panic!()
            };
            assert_eq!(chunk.line, n);
        }
        // Caught up: told what went by, then the new line.
        assert!(live.wants(StreamName::Stdout));
        live.send(StreamName::Stdout, 6, Bytes::from_static(b"six\n"), || {
            Some("/f".to_owned())
        });
        let Some(Response::Notice(Notice::OutputMissed { offset, lines, .. })) = rx.recv().await
        else {
            panic!()
        };
        assert_eq!((offset, lines), (3, 3));
        let Some(Response::Output(chunk)) = rx.recv().await else {
            panic!()
        };
        assert_eq!((chunk.line, &chunk.bytes[..]), (6, &b"six\n"[..]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_reader_that_keeps_up_gets_a_burst_then_the_rate() {
        let (tx, mut rx) = mpsc::channel(FOLLOW_QUEUE);
        let mut live = Live::default();
        live.add(Subscriber::new(tx, JobId(3), None));
        let mib = Bytes::from(vec![b'\n'; 1024 * 1024]);
        let mut line = 1;
        let mut got = 0;
        // The reader takes every chunk at once, and still gets no more than the burst.
        for _ in 0..2 * LIVE_BURST_BYTES / mib.len() {
            live.send(StreamName::Stdout, line, mib.clone(), || None);
            line += mib.len() as u64;
            while let Ok(Response::Output(_)) = rx.try_recv() {
                got += mib.len();
            }
        }
        assert_eq!(got, LIVE_BURST_BYTES);
        // A second later, a second's rate more, after the notice of what went by.
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        for _ in 0..2 * LIVE_RATE_BYTES / mib.len() {
            live.send(StreamName::Stdout, line, mib.clone(), || None);
            line += mib.len() as u64;
        }
        let Ok(Response::Notice(Notice::OutputMissed { offset, lines, .. })) = rx.try_recv() else {
            panic!("no notice first")
        };
        assert_eq!(
            (offset, lines),
            (LIVE_BURST_BYTES as u64 + 1, LIVE_BURST_BYTES as u64)
        );
        let mut more = 0;
        while let Ok(Response::Output(_)) = rx.try_recv() {
            more += mib.len();
        }
        // What the backlog lets through of the second's rate, nothing untaken beyond it.
        assert!(
            (LIVE_BACKLOG_BYTES..=LIVE_RATE_BYTES).contains(&more),
            "{more}"
        );
    }

    #[tokio::test]
    async fn a_reader_of_one_stream_gets_only_it_and_a_gone_reader_is_dropped() {
        let (tx, mut rx) = mpsc::channel(8);
        let mut live = Live::default();
        live.add(Subscriber::new(tx, JobId(3), Some(StreamName::Stderr)));
        live.send(StreamName::Stdout, 1, Bytes::from_static(b"out\n"), || None);
        live.send(StreamName::Stderr, 1, Bytes::from_static(b"err\n"), || None);
        let Some(Response::Output(chunk)) = rx.recv().await else {
            panic!()
        };
        assert_eq!(chunk.stream, StreamName::Stderr);
        drop(rx);
        live.send(StreamName::Stderr, 2, Bytes::from_static(b"more\n"), || {
            None
        });
        assert!(live.is_empty());
    }
}

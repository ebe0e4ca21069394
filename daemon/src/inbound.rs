//! Reading one connection's frames within its bounds (DESIGN §7, issue 18): a frame's
//! buffer grows with what arrived, never from its length prefix alone; a frame larger
//! than [`FREE_FRAME_BYTES`] is read only while it holds its size in the daemon-wide
//! budget for large frames ([`LargeFrames`]), so that many clients sending huge frames
//! at once wait in the kernel's socket buffers, not in the daemon's memory; and a frame
//! that has started must be complete within [`PARTIAL_FRAME_DEADLINE`], a large one
//! within [`large_frame_deadline`] of getting its room (issue 42: two clients that
//! started 16 MiB frames and stalled held the whole budget for the full deadline, and
//! every other client's large frame waited; now a stalled one gives its room back
//! within a few seconds, and the budget's queue is first come, first served, so a
//! client that waited is served before one that connects again).
//!
//! Used by `conn.rs` for every connection; `server.rs` makes the one budget.

use std::sync::Arc;
use std::time::Duration;

use bashd_protocol::ClientFrame;
use bashd_protocol::codec::{DaemonCodec, FrameError};
use bytes::BytesMut;
use tokio::io::AsyncReadExt;
use tokio::net::unix::OwnedReadHalf;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::codec::Decoder;

/// A frame up to this size is read without asking the budget: every request but an
/// `Exec` of a long command or a large environment fits in it.
pub const FREE_FRAME_BYTES: usize = 64 * 1024;
/// Bytes of large frames (over [`FREE_FRAME_BYTES`]) all connections together may be
/// holding at once: two frames of the largest size.
pub const LARGE_FRAMES_BUDGET: usize = 2 * bashd_protocol::limits::MAX_FRAME_BYTES;
/// A frame whose first byte has arrived must be whole this long after it (or after it
/// was given its room in the budget, when it had to wait for that).
pub const PARTIAL_FRAME_DEADLINE: Duration = Duration::from_secs(10);
/// A large frame gets this long after its room in the budget is given, plus a second
/// for every [`LARGE_FRAME_RATE`] bytes, to be whole: a client sends a frame at once
/// (a bridge from another host forwards whole frames), so only a client that stalls
/// on purpose is slower, and the room it holds is every other client's.
pub const LARGE_FRAME_GRACE: Duration = Duration::from_secs(1);
/// The slowest rate a large frame may arrive at once it holds its room: a 16 MiB
/// frame has 3 s in all. A local client writes one in a few milliseconds.
pub const LARGE_FRAME_RATE: usize = 8 * 1024 * 1024;
/// What a connection's buffer starts at, and shrinks back to after a large frame.
const INITIAL_BUFFER: usize = 8 * 1024;
const LENGTH_BYTES: usize = 4;

/// The daemon-wide room for large frames being read, in bytes.
#[derive(Clone, Debug)]
pub struct LargeFrames(Arc<Semaphore>);

impl LargeFrames {
    pub fn new(bytes: usize) -> LargeFrames {
        LargeFrames(Arc::new(Semaphore::new(bytes)))
    }

    /// Bytes not held by any connection now.
    #[cfg(test)]
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }
}

/// How long a large frame of `len` bytes has, from its room in the budget, to be whole.
pub fn large_frame_deadline(len: usize) -> Duration {
    LARGE_FRAME_GRACE + Duration::from_secs_f64(len as f64 / LARGE_FRAME_RATE as f64)
}

impl Default for LargeFrames {
    fn default() -> Self {
        LargeFrames::new(LARGE_FRAMES_BUDGET)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InboundError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error(
        "a frame was not complete {} s after its first byte ({buffered} of {expected} bytes arrived); a client must send a frame at once",
        PARTIAL_FRAME_DEADLINE.as_secs()
    )]
    Deadline { buffered: usize, expected: usize },
    #[error(
        "a large frame was not complete {:.1} s after it was given its room in the daemon's budget for large frames ({buffered} of {expected} bytes arrived), which other clients wait for; a client must send a frame at once",
        large_frame_deadline(*expected).as_secs_f64()
    )]
    LargeDeadline { buffered: usize, expected: usize },
}

/// The read half of one connection, and the frame being read from it.
pub struct FrameReader {
    read: OwnedReadHalf,
    codec: DaemonCodec,
    buffer: BytesMut,
    budget: LargeFrames,
    /// The room held for the large frame being read.
    held: Option<OwnedSemaphorePermit>,
    /// When the frame being read must be whole.
    deadline: Option<Instant>,
}

impl FrameReader {
    pub fn new(read: OwnedReadHalf, max_frame_bytes: usize, budget: LargeFrames) -> FrameReader {
        FrameReader {
            read,
            codec: DaemonCodec::new(max_frame_bytes),
            buffer: BytesMut::with_capacity(INITIAL_BUFFER),
            budget,
            held: None,
            deadline: None,
        }
    }

    /// The next frame; `None` when the client closed between frames. Cancel-safe:
    /// what was read stays buffered, and the room held stays held.
    pub async fn next(&mut self) -> Option<Result<ClientFrame, InboundError>> {
        loop {
            match self.codec.decode(&mut self.buffer) {
                Ok(Some(frame)) => {
                    self.frame_done();
                    return Some(Ok(frame));
                }
                Ok(None) => {}
                Err(e) => return Some(Err(e.into())),
            }
            let expected = self.expected_len();
            if let Some(len) = expected
                && len > FREE_FRAME_BYTES
                && self.held.is_none()
            {
                // Waiting here reads nothing more: the rest stays in the kernel's
                // buffers, and the client's writes block.
                let room = len.min(LARGE_FRAMES_BUDGET) as u32;
                let permit = Arc::clone(&self.budget.0).acquire_many_owned(room).await;
                self.held = Some(permit.expect("the budget's semaphore is never closed"));
                self.deadline = Some(Instant::now() + large_frame_deadline(len));
            }
            if let Some(len) = expected {
                self.grow_towards(len);
            } else if self.buffer.capacity() == self.buffer.len() {
                self.buffer.reserve(INITIAL_BUFFER);
            }
            let read = match self.deadline {
                Some(deadline) => {
                    match tokio::time::timeout_at(deadline, self.read.read_buf(&mut self.buffer))
                        .await
                    {
                        Ok(read) => read,
                        Err(_) => {
                            let (buffered, expected) = (self.buffer.len(), expected.unwrap_or(0));
                            return Some(Err(if self.held.is_some() {
                                InboundError::LargeDeadline { buffered, expected }
                            } else {
                                InboundError::Deadline { buffered, expected }
                            }));
                        }
                    }
                }
                None => self.read.read_buf(&mut self.buffer).await,
            };
            match read {
                Ok(0) if self.buffer.is_empty() => return None,
                Ok(0) => {
                    return Some(Err(FrameError::Truncated {
                        buffered: self.buffer.len(),
                    }
                    .into()));
                }
                Ok(_) => {
                    if self.deadline.is_none() {
                        self.deadline = Some(Instant::now() + PARTIAL_FRAME_DEADLINE);
                    }
                }
                Err(e) => return Some(Err(FrameError::Io(e).into())),
            }
        }
    }

    /// Whether a whole frame is buffered already, so that [`FrameReader::next`] gives
    /// it without reading.
    pub fn holds_a_frame(&self) -> bool {
        self.expected_len()
            .is_some_and(|len| self.buffer.len() >= len)
    }

    /// The whole length of the frame at the front, prefix included, once its prefix
    /// has arrived.
    fn expected_len(&self) -> Option<usize> {
        let prefix = self.buffer.get(..LENGTH_BYTES)?;
        let len = u32::from_be_bytes(prefix.try_into().expect("slice of 4 bytes")) as usize;
        Some(LENGTH_BYTES + len)
    }

    /// Makes room for more of a frame of `len` bytes: doubling what is buffered, never
    /// past the frame's end, so a frame never holds more than its own size.
    fn grow_towards(&mut self, len: usize) {
        if self.buffer.capacity() > self.buffer.len() || self.buffer.len() >= len {
            return;
        }
        let target = (self.buffer.len() * 2).clamp(INITIAL_BUFFER, len.max(INITIAL_BUFFER));
        let mut grown = BytesMut::with_capacity(target);
        grown.extend_from_slice(&self.buffer);
        self.buffer = grown;
    }

    /// A frame was decoded: its room in the budget goes back, and a buffer a large
    /// frame grew is given back too, keeping what followed it.
    fn frame_done(&mut self) {
        self.held = None;
        self.deadline = (!self.buffer.is_empty()).then(|| Instant::now() + PARTIAL_FRAME_DEADLINE);
        if self.buffer.capacity() > FREE_FRAME_BYTES && self.buffer.len() <= INITIAL_BUFFER {
            let mut small = BytesMut::with_capacity(INITIAL_BUFFER);
            small.extend_from_slice(&self.buffer);
            self.buffer = small;
        }
    }
}

#[cfg(test)]
mod tests {
    use bashd_protocol::codec::ClientCodec;
    use bashd_protocol::{Hello, Request};
    use tokio::io::AsyncWriteExt;
    use tokio::net::UnixStream;
    use tokio_util::codec::Encoder;

    use super::*;

    fn reader(budget: &LargeFrames) -> (FrameReader, UnixStream) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let (read, _write) = ours.into_split();
        (FrameReader::new(read, 16 << 20, budget.clone()), theirs)
    }

    fn wire(frame: ClientFrame) -> BytesMut {
        let mut out = BytesMut::new();
        ClientCodec::default().encode(frame, &mut out).unwrap();
        out
    }

    #[tokio::test]
    async fn frames_split_anywhere_come_through() {
        let budget = LargeFrames::default();
        let (mut reader, mut client) = reader(&budget);
        let hello = ClientFrame::Hello(Hello {
            protocol: 1,
            client: "i18".into(),
            pid: 1,
        });
        let mut bytes = wire(hello.clone());
        bytes.extend_from_slice(&wire(ClientFrame::Request(3, Request::Status)));
        for piece in bytes.chunks(3) {
            client.write_all(piece).await.unwrap();
        }
        drop(client);
        assert_eq!(reader.next().await.unwrap().unwrap(), hello);
        assert_eq!(
            reader.next().await.unwrap().unwrap(),
            ClientFrame::Request(3, Request::Status)
        );
        assert!(reader.next().await.is_none());
    }

    /// A large length prefix reserves nothing: the buffer holds what arrived, and the
    /// frame holds its size in the budget while it is read.
    #[tokio::test]
    async fn a_large_frame_grows_with_what_arrived_and_holds_the_budget() {
        let budget = LargeFrames::new(20 << 20);
        let (mut reader, mut client) = reader(&budget);
        let len: u32 = 16 << 20;
        client.write_all(&len.to_be_bytes()).await.unwrap();
        client.write_all(&[0u8; 100_000]).await.unwrap();
        let _ = tokio::time::timeout(Duration::from_millis(200), reader.next()).await;
        assert!(
            reader.buffer.capacity() <= 2 * 100_004 + INITIAL_BUFFER,
            "{}",
            reader.buffer.capacity()
        );
        assert_eq!(budget.available(), (20 << 20) - (len as usize + 4));
        drop(reader);
        assert_eq!(budget.available(), 20 << 20);
    }

    /// A second large frame waits for room without reading: its bytes stay with the
    /// kernel.
    #[tokio::test]
    async fn a_frame_that_finds_no_room_waits_without_buffering() {
        let budget = LargeFrames::new(1 << 20);
        let (mut first, mut a) = reader(&budget);
        let (mut second, mut b) = reader(&budget);
        let len: u32 = 900_000;
        for client in [&mut a, &mut b] {
            client.write_all(&len.to_be_bytes()).await.unwrap();
            client.write_all(&[7u8; 50_000]).await.unwrap();
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), first.next()).await;
        let _ = tokio::time::timeout(Duration::from_millis(100), second.next()).await;
        assert!(first.held.is_some());
        assert!(second.held.is_none());
        assert!(
            second.buffer.len() <= FREE_FRAME_BYTES,
            "{}",
            second.buffer.len()
        );
        drop(first);
        let _ = tokio::time::timeout(Duration::from_millis(100), second.next()).await;
        assert!(second.held.is_some());
    }

    /// Issue 42: a large frame that stalls gives its room back within its short
    /// deadline, not the partial-frame one, and a frame that waited gets the room.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_large_frame_gives_its_room_back_soon() {
        let budget = LargeFrames::new(1 << 20);
        let (mut staller, mut a) = reader(&budget);
        let (mut waiter, mut b) = reader(&budget);
        let len: u32 = 900_000;
        a.write_all(&len.to_be_bytes()).await.unwrap();
        a.write_all(&[7u8; 50_000]).await.unwrap();
        let started = Instant::now();
        let err = staller.next().await.unwrap().unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(
                err,
                InboundError::LargeDeadline {
                    expected: 900_004,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("budget for large frames"), "{err}");
        assert!(took >= LARGE_FRAME_GRACE, "{took:?}");
        assert!(
            took <= large_frame_deadline(900_004) + Duration::from_millis(10),
            "{took:?}"
        );
        assert!(took < PARTIAL_FRAME_DEADLINE / 2, "{took:?}");
        drop(staller);
        b.write_all(&len.to_be_bytes()).await.unwrap();
        let _ = tokio::time::timeout(Duration::from_millis(10), waiter.next()).await;
        assert!(waiter.held.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_partial_frame_ends_at_its_deadline() {
        let budget = LargeFrames::default();
        let (mut reader, mut client) = reader(&budget);
        client.write_all(&[0, 0, 0, 9, 1]).await.unwrap();
        let err = reader.next().await.unwrap().unwrap_err();
        assert!(
            matches!(
                err,
                InboundError::Deadline {
                    buffered: 5,
                    expected: 13
                }
            ),
            "{err}"
        );
    }
}

//! The framing between a host's relay (`bashc relay`, here) and `bashc bridge` on that
//! host, over one SSH channel: many bashd connections, each a stream of bytes named by a
//! connection id. The bashd protocol runs inside each connection unchanged; this layer
//! only says which connection a chunk belongs to, and when one opens and closes.
//!
//! The relay starts the channel with [`MAGIC`], which a bashd frame cannot begin with
//! (its length would be over a gigabyte), so `bashc bridge` tells a relay from a single
//! caller by the first eight bytes. Then both sides send a `Hello` naming their
//! [`MUX_VERSION`]; the relay refuses a bridge of another version with the side to
//! upgrade. An older bashc, whose bridge knows no relay, rejects the magic as a bad
//! frame and exits, and the relay says so.
//!
//! A frame is `kind: u8, id: u32, length: u32` (big-endian) and `length` bytes.
//!
//! Each way of each connection has a window: a side sends at most [`WINDOW`] bytes the
//! other has not acknowledged (`Ack`), and acknowledges what it has written on to the
//! connection's end (the client's socket here, the pipe to the daemon connection
//! there). Neither side ever waits on one connection while reading the channel, so a
//! client that stops reading (`bashc follow | less`, paused), or a daemon connection
//! that stops taking requests, holds up its own connection, never the channel the
//! others share.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::codec::{Decoder, Encoder};

/// The first bytes a relay sends.
pub const MAGIC: [u8; 8] = *b"BASHDMUX";

/// The version of this framing; bumped when a frame changes meaning.
pub const MUX_VERSION: u32 = 1;

/// The most bytes one `Data` frame carries; a connection's bytes are cut to it.
pub const MAX_CHUNK: usize = 64 * 1024;

/// The most bytes one side sends a connection before the other acknowledges them.
pub const WINDOW: usize = 1024 * 1024;

/// The header of a frame: kind, id, length.
const HEADER: usize = 9;

/// One frame of the relay's channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MuxFrame {
    /// The first frame each way: this framing's version, and who speaks it (`bashc
    /// 0.1.0 on build-box`), for messages.
    Hello { version: u32, speaker: String },
    /// A new connection, from the relay: the bridge opens one to its daemon for it.
    Open(u32),
    /// Bytes of a connection, either way.
    Data(u32, Bytes),
    /// A connection ended, either way; frames for it after this are dropped.
    Close(u32),
    /// Either way: this many more bytes of the connection were written on to its
    /// end, so the other side may send that many more.
    Ack(u32, u32),
}

#[derive(Debug, thiserror::Error)]
pub enum MuxError {
    #[error("a relay frame of kind {0}, which this bashc does not know")]
    UnknownKind(u8),
    #[error("a relay frame of {0} bytes, over the {MAX_CHUNK} a frame may hold")]
    TooLong(usize),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(
        "an Ack of {count} bytes for connection {id}, which had {unacked} bytes unacknowledged"
    )]
    AckTooLarge { id: u32, count: u32, unacked: usize },
    /// The other side sent a connection more than its window: this side would have to
    /// hold it all (its end does not take it), so the connection is closed instead.
    #[error(
        "connection {id}: {far} sent {held} bytes that its end has not taken yet, over the window of {WINDOW} it may send unacknowledged; the connection is closed"
    )]
    Flooded { id: u32, far: String, held: usize },
}

/// Encodes and decodes [`MuxFrame`]s (after [`MAGIC`], which is read and written apart).
#[derive(Debug, Default)]
pub struct MuxCodec;

const HELLO: u8 = 0;
const OPEN: u8 = 1;
const DATA: u8 = 2;
const CLOSE: u8 = 3;
const ACK: u8 = 4;

impl Decoder for MuxCodec {
    type Item = MuxFrame;
    type Error = MuxError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<MuxFrame>, MuxError> {
        if src.len() < HEADER {
            return Ok(None);
        }
        let kind = src[0];
        let id = u32::from_be_bytes(src[1..5].try_into().expect("4 bytes"));
        let length = u32::from_be_bytes(src[5..9].try_into().expect("4 bytes")) as usize;
        if length > MAX_CHUNK {
            return Err(MuxError::TooLong(length));
        }
        if src.len() < HEADER + length {
            src.reserve(HEADER + length - src.len());
            return Ok(None);
        }
        src.advance(HEADER);
        let payload = src.split_to(length).freeze();
        Ok(Some(match kind {
            HELLO => MuxFrame::Hello {
                version: id,
                speaker: String::from_utf8_lossy(&payload).into_owned(),
            },
            OPEN => MuxFrame::Open(id),
            DATA => MuxFrame::Data(id, payload),
            CLOSE => MuxFrame::Close(id),
            ACK => match <[u8; 4]>::try_from(&payload[..]) {
                Ok(count) => MuxFrame::Ack(id, u32::from_be_bytes(count)),
                Err(_) => return Err(MuxError::UnknownKind(ACK)),
            },
            other => return Err(MuxError::UnknownKind(other)),
        }))
    }
}

impl Encoder<MuxFrame> for MuxCodec {
    type Error = MuxError;

    fn encode(&mut self, frame: MuxFrame, dst: &mut BytesMut) -> Result<(), MuxError> {
        let (kind, id, payload) = match frame {
            MuxFrame::Hello { version, speaker } => (HELLO, version, Bytes::from(speaker)),
            MuxFrame::Open(id) => (OPEN, id, Bytes::new()),
            MuxFrame::Data(id, bytes) => (DATA, id, bytes),
            MuxFrame::Close(id) => (CLOSE, id, Bytes::new()),
            MuxFrame::Ack(id, count) => (ACK, id, Bytes::copy_from_slice(&count.to_be_bytes())),
        };
        if payload.len() > MAX_CHUNK {
            return Err(MuxError::TooLong(payload.len()));
        }
        dst.reserve(HEADER + payload.len());
        dst.put_u8(kind);
        dst.put_u32(id);
        dst.put_u32(payload.len() as u32);
        dst.extend_from_slice(&payload);
        Ok(())
    }
}

/// What this side may still send one connection: bytes, taken before a `Data` goes
/// out and given back by the other side's `Ack`s.
#[derive(Debug, Clone)]
pub struct Window(Arc<Semaphore>);

impl Window {
    pub fn new() -> Window {
        Window(Arc::new(Semaphore::new(WINDOW)))
    }

    /// Waits until `bytes` may be sent; false once the connection is closed.
    async fn take(&self, bytes: usize) -> bool {
        match self.0.acquire_many(bytes as u32).await {
            Ok(permits) => {
                permits.forget();
                true
            }
            Err(_) => false,
        }
    }

    /// The other side wrote `bytes` more of connection `id` on; more than was sent
    /// and not yet acknowledged is an error of the other side (a window grown past
    /// its size would let a side send without bound).
    pub fn give(&self, id: u32, bytes: u32) -> Result<(), MuxError> {
        // Only `take` lowers the permits meanwhile, which only raises what is unacked.
        let unacked = WINDOW.saturating_sub(self.0.available_permits());
        if bytes as usize > unacked {
            return Err(MuxError::AckTooLarge {
                id,
                count: bytes,
                unacked,
            });
        }
        self.0.add_permits(bytes as usize);
        Ok(())
    }

    /// The connection is gone: a [`forward`] waiting for room gives up.
    pub fn close(&self) {
        self.0.close();
    }
}

/// What the other side sent one connection that this side has not written on to the
/// connection's end yet. The other side may have at most [`WINDOW`] bytes
/// unacknowledged, and this side acknowledges only what it wrote, so more than that
/// held here means the other side ignores the window; counted, not trusted, so that
/// a far side that floods a client that never reads cannot grow this process.
#[derive(Debug, Clone, Default)]
pub struct Unwritten(Arc<AtomicUsize>);

impl Unwritten {
    pub fn new() -> Unwritten {
        Unwritten::default()
    }

    /// Counts `bytes` more received for connection `id` from `far`; an error, and
    /// nothing counted, when they would pass the window.
    pub fn add(&self, id: u32, bytes: usize, far: &str) -> Result<(), MuxError> {
        let held = self.0.load(Ordering::Acquire) + bytes;
        if held > WINDOW {
            return Err(MuxError::Flooded {
                id,
                far: far.to_owned(),
                held,
            });
        }
        // Only the channel's one reader adds, so the load above is still true here.
        self.0.fetch_add(bytes, Ordering::AcqRel);
        Ok(())
    }

    fn written(&self, bytes: usize) {
        self.0.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Sends what `from` yields as connection `id`'s `Data`, within its window, then its
/// `Close` (at the end of `from`, or when the window is closed).
pub async fn forward<R: AsyncRead + Unpin>(
    id: u32,
    mut from: R,
    window: Window,
    frames: mpsc::Sender<MuxFrame>,
) {
    let mut buffer = vec![0u8; MAX_CHUNK];
    while let Ok(n @ 1..) = from.read(&mut buffer).await {
        if !window.take(n).await {
            break;
        }
        let chunk = Bytes::copy_from_slice(&buffer[..n]);
        if frames.send(MuxFrame::Data(id, chunk)).await.is_err() {
            return;
        }
    }
    let _ = frames.send(MuxFrame::Close(id)).await;
}

/// Writes connection `id`'s chunks on to `to`, acknowledging each once written; shuts
/// `to` down when the chunks end (the connection closed on the other side). Each
/// chunk written leaves `unwritten`.
pub async fn deliver<W: AsyncWrite + Unpin>(
    id: u32,
    mut to: W,
    mut chunks: mpsc::UnboundedReceiver<Bytes>,
    unwritten: Unwritten,
    frames: mpsc::Sender<MuxFrame>,
) {
    while let Some(chunk) = chunks.recv().await {
        if to.write_all(&chunk).await.is_err() {
            return;
        }
        unwritten.written(chunk.len());
        if frames
            .send(MuxFrame::Ack(id, chunk.len() as u32))
            .await
            .is_err()
        {
            return;
        }
    }
    let _ = to.shutdown().await;
}

/// Who this side is, for the other side's messages.
pub fn speaker() -> String {
    format!(
        "bashc {} on {}",
        env!("CARGO_PKG_VERSION"),
        bashc::hostname()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_survive_the_round_trip_cut_anywhere() {
        let frames = vec![
            MuxFrame::Hello {
                version: MUX_VERSION,
                speaker: speaker(),
            },
            MuxFrame::Open(7),
            MuxFrame::Data(7, Bytes::from_static(b"hello")),
            MuxFrame::Data(7, Bytes::new()),
            MuxFrame::Ack(7, 65536),
            MuxFrame::Close(7),
        ];
        let mut wire = BytesMut::new();
        for frame in frames.clone() {
            MuxCodec.encode(frame, &mut wire).unwrap();
        }
        // Fed a byte at a time, as a slow channel would.
        let mut decoded = Vec::new();
        let mut buffer = BytesMut::new();
        for byte in wire {
            buffer.put_u8(byte);
            while let Some(frame) = MuxCodec.decode(&mut buffer).unwrap() {
                decoded.push(frame);
            }
        }
        assert_eq!(decoded, frames);
    }

    /// What a side sends one connection stops at a window until the other side
    /// acknowledges some; then as much more goes, a whole chunk at a time.
    #[tokio::test]
    async fn a_connection_sends_no_more_than_its_window() {
        let (mut source, from) = tokio::io::duplex(4 * WINDOW);
        source.write_all(&vec![7u8; 2 * WINDOW]).await.unwrap();
        let window = Window::new();
        let (frames, mut sent) = mpsc::channel(1024);
        tokio::spawn(forward(1, from, window.clone(), frames));
        let mut total = 0;
        let quiet = std::time::Duration::from_millis(300);
        while let Ok(Some(MuxFrame::Data(1, chunk))) =
            tokio::time::timeout(quiet, sent.recv()).await
        {
            total += chunk.len();
        }
        assert_eq!(total, WINDOW);
        // A chunk waits for room for all of it.
        window.give(1, 1000).unwrap();
        assert!(tokio::time::timeout(quiet, sent.recv()).await.is_err());
        window.give(1, MAX_CHUNK as u32 - 1000).unwrap();
        let mut more = 0;
        while let Ok(Some(MuxFrame::Data(1, chunk))) =
            tokio::time::timeout(quiet, sent.recv()).await
        {
            more += chunk.len();
        }
        assert_eq!(more, MAX_CHUNK);
        // Closed, it gives up, and says the connection closed.
        window.close();
        assert_eq!(sent.recv().await, Some(MuxFrame::Close(1)));
    }

    /// An Ack of more than was sent is the other side's error, never a panic or a
    /// window grown past its size.
    #[tokio::test]
    async fn an_ack_of_more_than_was_sent_is_an_error() {
        let window = Window::new();
        assert!(matches!(
            window.give(3, 1),
            Err(MuxError::AckTooLarge {
                id: 3,
                count: 1,
                unacked: 0
            })
        ));
        assert!(window.give(3, u32::MAX).is_err());
        assert!(window.take(100).await);
        window.give(3, 60).unwrap();
        let error = window.give(3, 41).unwrap_err();
        assert_eq!(
            error.to_string(),
            "an Ack of 41 bytes for connection 3, which had 40 bytes unacknowledged"
        );
        window.give(3, 40).unwrap();
        assert_eq!(window.0.available_permits(), WINDOW);
    }

    /// Issue 30: a far side that sends past the window to an end that takes nothing
    /// is told apart from one within it, and what was written makes room again.
    #[tokio::test]
    async fn more_than_a_window_unwritten_is_the_far_sides_error() {
        let unwritten = Unwritten::new();
        for _ in 0..WINDOW / MAX_CHUNK {
            unwritten.add(4, MAX_CHUNK, "bashc 9 on far").unwrap();
        }
        let error = unwritten.add(4, 1, "bashc 9 on far").unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "connection 4: bashc 9 on far sent {} bytes that its end has not taken yet, over the window of {WINDOW} it may send unacknowledged; the connection is closed",
                WINDOW + 1
            )
        );
        // Written on, a chunk makes room for as much.
        let (to, mut end) = tokio::io::duplex(4 * MAX_CHUNK);
        let (queue, chunks) = mpsc::unbounded_channel();
        let (frames, mut sent) = mpsc::channel(16);
        tokio::spawn(deliver(4, to, chunks, unwritten.clone(), frames));
        queue.send(Bytes::from(vec![1u8; MAX_CHUNK])).unwrap();
        let mut taken = vec![0u8; MAX_CHUNK];
        end.read_exact(&mut taken).await.unwrap();
        assert_eq!(sent.recv().await, Some(MuxFrame::Ack(4, MAX_CHUNK as u32)));
        unwritten.add(4, MAX_CHUNK, "bashc 9 on far").unwrap();
        assert!(unwritten.add(4, 1, "bashc 9 on far").is_err());
    }

    #[test]
    fn the_magic_is_no_bashd_frame() {
        // A bashd frame starts with its length; the magic's would be over the limit.
        let length = u32::from_be_bytes(MAGIC[..4].try_into().unwrap()) as usize;
        assert!(length > bashd_protocol::limits::MAX_FRAME_BYTES);
    }

    #[test]
    fn an_oversized_or_unknown_frame_is_an_error() {
        let mut wire = BytesMut::new();
        wire.put_u8(DATA);
        wire.put_u32(1);
        wire.put_u32(MAX_CHUNK as u32 + 1);
        assert!(matches!(
            MuxCodec.decode(&mut wire),
            Err(MuxError::TooLong(_))
        ));
        let mut wire = BytesMut::new();
        wire.put_u8(9);
        wire.put_u32(1);
        wire.put_u32(0);
        assert!(matches!(
            MuxCodec.decode(&mut wire),
            Err(MuxError::UnknownKind(9))
        ));
    }
}

//! The one frame codec: a u32 big-endian length, then one bincode 2 message.
//!
//! The length is checked against the frame limit before a byte of the body is
//! buffered, nothing is reserved from the length alone, and bincode decodes with the
//! same limit, so no frame can make either side allocate more than the limit, nor more
//! than what arrived. bincode is unmaintained upstream; it lives behind this
//! module alone so that postcard can replace it without touching anything else.

use std::io;
use std::marker::PhantomData;

use bytes::{Buf, BufMut, BytesMut};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::codec::{Decoder, Encoder};

use crate::limits::MAX_FRAME_BYTES;
use crate::message::{ClientFrame, ServerFrame};

const LENGTH_BYTES: usize = 4;

fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<MAX_FRAME_BYTES>()
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes is larger than the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("connection closed in the middle of a frame ({buffered} bytes buffered)")]
    Truncated { buffered: usize },
    #[error("frame is not a valid message: {0}")]
    Malformed(String),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Encodes `Out` frames and decodes `In` frames.
#[derive(Debug)]
pub struct FrameCodec<Out, In> {
    max_frame_bytes: usize,
    _messages: PhantomData<fn(Out) -> In>,
}

/// What a client uses: it sends `ClientFrame`s and reads `ServerFrame`s.
pub type ClientCodec = FrameCodec<ClientFrame, ServerFrame>;
/// What the daemon uses: it reads `ClientFrame`s and sends `ServerFrame`s.
pub type DaemonCodec = FrameCodec<ServerFrame, ClientFrame>;

impl<Out, In> FrameCodec<Out, In> {
    /// `max_frame_bytes` is capped at [`MAX_FRAME_BYTES`], the bound bincode decodes with.
    pub fn new(max_frame_bytes: usize) -> Self {
        FrameCodec {
            max_frame_bytes: max_frame_bytes.min(MAX_FRAME_BYTES),
            _messages: PhantomData,
        }
    }
}

impl<Out, In> Default for FrameCodec<Out, In> {
    fn default() -> Self {
        Self::new(MAX_FRAME_BYTES)
    }
}

impl<Out, In: DeserializeOwned> Decoder for FrameCodec<Out, In> {
    type Item = In;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<In>, FrameError> {
        // Nothing is consumed until a whole frame is buffered, so the decoder keeps no
        // state between calls and the length prefix is always at the front.
        let Some(prefix) = src.get(..LENGTH_BYTES) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(prefix.try_into().expect("slice of 4 bytes")) as usize;
        if len > self.max_frame_bytes {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_frame_bytes,
            });
        }
        if src.len() < LENGTH_BYTES + len {
            // Nothing is reserved from the length prefix: the buffer grows with what
            // arrives, so a peer that announces a large frame and sends little costs
            // little (the daemon reads large frames within a budget, `inbound.rs`).
            return Ok(None);
        }
        src.advance(LENGTH_BYTES);
        let body = src.split_to(len);
        decode_body(&body).map(Some)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<In>, FrameError> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() => Ok(None),
            None => Err(FrameError::Truncated {
                buffered: src.len(),
            }),
        }
    }
}

impl<Out: Serialize, In> Encoder<Out> for FrameCodec<Out, In> {
    type Error = FrameError;

    fn encode(&mut self, frame: Out, dst: &mut BytesMut) -> Result<(), FrameError> {
        // Straight into the write buffer behind a length patched afterwards: a frame of
        // streamed output is copied once here, not into a Vec first.
        let start = dst.len();
        dst.put_u32(0);
        let written =
            bincode::serde::encode_into_std_write(&frame, &mut dst.writer(), bincode_config());
        let len = dst.len() - start - LENGTH_BYTES;
        let failed = match written {
            Err(e) => Some(FrameError::Malformed(e.to_string())),
            Ok(_) if len > self.max_frame_bytes => Some(FrameError::TooLarge {
                len,
                max: self.max_frame_bytes,
            }),
            Ok(_) => None,
        };
        if let Some(error) = failed {
            dst.truncate(start);
            return Err(error);
        }
        dst[start..start + LENGTH_BYTES].copy_from_slice(&(len as u32).to_be_bytes());
        Ok(())
    }
}

fn decode_body<In: DeserializeOwned>(body: &[u8]) -> Result<In, FrameError> {
    let (frame, used) = bincode::serde::decode_from_slice(body, bincode_config())
        .map_err(|e| FrameError::Malformed(e.to_string()))?;
    if used != body.len() {
        return Err(FrameError::Malformed(format!(
            "{} bytes left over after the message",
            body.len() - used
        )));
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::message::{Hello, Request};

    fn hello() -> ClientFrame {
        ClientFrame::Hello(Hello {
            protocol: crate::PROTOCOL_VERSION,
            client: "test".into(),
            pid: 42,
        })
    }

    #[test]
    fn streamed_output_is_one_length_and_its_bytes_and_a_frame_too_large_writes_nothing() {
        use crate::exec::{OutputChunk, StreamName};
        use crate::message::Response;
        let chunk = |len: usize| {
            ServerFrame::Response(
                9,
                Response::Output(OutputChunk {
                    stream: StreamName::Stdout,
                    bytes: vec![b'a'; len].into(),
                    line: 1,
                }),
            )
        };
        let mut out = BytesMut::new();
        let mut daemon = DaemonCodec::new(64 * 1024);
        daemon.encode(chunk(60_000), &mut out).unwrap();
        // Not 60,000 numbers: the prefix, a few bytes of tags and lengths, the text.
        assert!(out.len() < 60_000 + 16, "{} bytes", out.len());
        let before = out.len();
        let error = daemon.encode(chunk(70_000), &mut out).unwrap_err();
        assert!(matches!(error, FrameError::TooLarge { .. }), "{error}");
        assert_eq!(out.len(), before, "a refused frame leaves nothing behind");
        let mut client = ClientCodec::new(64 * 1024);
        assert_eq!(client.decode(&mut out).unwrap(), Some(chunk(60_000)));
    }

    #[test]
    fn round_trip_across_split_reads() {
        let mut out = BytesMut::new();
        let mut client = ClientCodec::default();
        client.encode(hello(), &mut out).unwrap();
        client
            .encode(ClientFrame::Request(7, Request::Status), &mut out)
            .unwrap();

        let mut daemon = DaemonCodec::default();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for byte in out {
            buf.extend_from_slice(&[byte]);
            while let Some(frame) = daemon.decode(&mut buf).unwrap() {
                got.push(frame);
            }
        }
        assert_eq!(got, vec![hello(), ClientFrame::Request(7, Request::Status)]);
    }

    #[test]
    fn huge_length_prefix_is_refused_before_buffering() {
        let mut daemon = DaemonCodec::default();
        let mut buf = BytesMut::from(&[0xFF, 0xFF, 0xFF, 0xFF, 1, 2][..]);
        let err = daemon.decode(&mut buf).unwrap_err();
        assert!(
            matches!(
                err,
                FrameError::TooLarge {
                    len: 0xFFFF_FFFF,
                    ..
                }
            ),
            "{err}"
        );
        assert!(buf.capacity() < 1024, "capacity {}", buf.capacity());
    }

    /// Issue 18: 64 connections announcing 16 MiB each held a gigabyte before a byte
    /// of their bodies arrived.
    #[test]
    fn a_large_length_prefix_reserves_nothing() {
        let mut daemon = DaemonCodec::default();
        let mut buf = BytesMut::from(&((MAX_FRAME_BYTES - 1) as u32).to_be_bytes()[..]);
        buf.extend_from_slice(&[1, 2, 3]);
        assert!(daemon.decode(&mut buf).unwrap().is_none());
        assert!(buf.capacity() < 1024, "capacity {}", buf.capacity());
    }

    #[test]
    fn truncated_frame_at_eof_is_an_error() {
        let mut out = BytesMut::new();
        ClientCodec::default().encode(hello(), &mut out).unwrap();
        out.truncate(out.len() - 1);
        let err = DaemonCodec::default().decode_eof(&mut out).unwrap_err();
        assert!(matches!(err, FrameError::Truncated { .. }), "{err}");
    }

    #[test]
    fn trailing_bytes_inside_a_frame_are_malformed() {
        let mut body = bincode::serde::encode_to_vec(hello(), bincode_config()).unwrap();
        body.push(0);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&(body.len() as u32).to_be_bytes());
        buf.extend_from_slice(&body);
        let err = DaemonCodec::default().decode(&mut buf).unwrap_err();
        assert!(matches!(err, FrameError::Malformed(_)), "{err}");
    }

    #[test]
    fn an_oversized_message_is_not_sent() {
        let mut codec = ClientCodec::new(64);
        let frame = ClientFrame::Hello(Hello {
            protocol: 1,
            client: "x".repeat(100),
            pid: 1,
        });
        let err = codec.encode(frame, &mut BytesMut::new()).unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { .. }), "{err}");
    }

    const SMALL_LIMIT: usize = 4096;
    const MAX_READ: usize = 512;

    proptest! {
        /// Arbitrary bytes cut into arbitrary reads never panic the decoder, and the
        /// buffer never grows past a small multiple of the frame limit.
        #[test]
        fn decoder_survives_arbitrary_input(
            input in proptest::collection::vec(any::<u8>(), 0..20_000),
            cuts in proptest::collection::vec(1..MAX_READ, 1..64),
        ) {
            let mut codec = DaemonCodec::new(SMALL_LIMIT);
            let mut buf = BytesMut::new();
            let mut rest = &input[..];
            let mut cut = cuts.iter().cycle();
            'reads: while !rest.is_empty() {
                let n = (*cut.next().unwrap()).min(rest.len());
                buf.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
                loop {
                    match codec.decode(&mut buf) {
                        Ok(Some(_)) => continue,
                        Ok(None) => break,
                        Err(_) => break 'reads,
                    }
                }
                prop_assert!(buf.capacity() <= 2 * (SMALL_LIMIT + LENGTH_BYTES + MAX_READ));
            }
            let _ = codec.decode_eof(&mut buf);
        }

        /// Frames with a valid length and a random body reach bincode, which must turn
        /// any garbage into an error, never a panic or a huge allocation.
        #[test]
        fn random_bodies_never_panic(
            bodies in proptest::collection::vec(
                proptest::collection::vec(any::<u8>(), 0..300), 1..20),
        ) {
            let mut codec = DaemonCodec::new(SMALL_LIMIT);
            let mut buf = BytesMut::new();
            for body in &bodies {
                buf.put_u32(body.len() as u32);
                buf.put_slice(body);
            }
            while let Ok(Some(_)) = codec.decode(&mut buf) {}
        }

        /// Valid frames decode to themselves whatever the read boundaries.
        #[test]
        fn valid_frames_survive_any_split(
            ids in proptest::collection::vec(any::<u64>(), 1..20),
            cuts in proptest::collection::vec(1..64usize, 1..16),
        ) {
            let frames: Vec<ClientFrame> =
                ids.iter().map(|id| ClientFrame::Request(*id, Request::Status)).collect();
            let mut wire = BytesMut::new();
            let mut encoder = ClientCodec::default();
            for frame in &frames {
                encoder.encode(frame.clone(), &mut wire).unwrap();
            }
            let mut decoder = DaemonCodec::default();
            let mut buf = BytesMut::new();
            let mut got = Vec::new();
            let mut rest = &wire[..];
            let mut cut = cuts.iter().cycle();
            while !rest.is_empty() {
                let n = (*cut.next().unwrap()).min(rest.len());
                buf.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
                while let Some(frame) = decoder.decode(&mut buf).unwrap() {
                    got.push(frame);
                }
            }
            prop_assert_eq!(got, frames);
        }
    }
}

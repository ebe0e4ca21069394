//! Abusive clients on raw sockets (issue 18), for the tests and the benchmark: many
//! connections that each start a huge frame and never finish it, and one connection
//! that asks for many pages of output and never reads the answers. Dropping an
//! [`Attack`] closes its sockets and joins its threads.

use std::io::Write;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bashd_protocol::codec::ClientCodec;
use bashd_protocol::{
    ClientFrame, Hello, JobRef, OutputRequest, PROTOCOL_VERSION, Request, StreamName,
};
use bytes::BytesMut;
use tokio_util::codec::Encoder;

/// Connections under attack, each with a thread blocked writing into it.
pub struct Attack {
    streams: Vec<UnixStream>,
    writers: Vec<JoinHandle<()>>,
    /// Bytes the writers have written so far, all of them: it stops growing once each
    /// is blocked on a socket the daemon no longer reads, or done.
    written: Arc<AtomicU64>,
}

/// One frame on the wire.
pub fn encode(frame: ClientFrame) -> Vec<u8> {
    let mut buf = BytesMut::new();
    ClientCodec::default().encode(frame, &mut buf).unwrap();
    buf.to_vec()
}

pub fn hello() -> Vec<u8> {
    encode(ClientFrame::Hello(Hello {
        protocol: PROTOCOL_VERSION,
        client: "attack-i18".into(),
        pid: std::process::id(),
    }))
}

impl Attack {
    /// `connections` connections that each say `Hello`, announce a frame of
    /// `frame_bytes` and send all of it but its last byte.
    pub fn partial_frames(socket: &Path, connections: usize, frame_bytes: u32) -> Attack {
        let mut attack = Attack::default();
        for _ in 0..connections {
            let mut start = hello();
            start.extend_from_slice(&frame_bytes.to_be_bytes());
            attack.start(socket, start, frame_bytes as usize - 1);
        }
        attack
    }

    /// One connection that asks `requests` times for a page of `lines` lines of
    /// `job`'s stdout, all at once, and reads none of the answers.
    pub fn unread_pages(socket: &Path, job: &str, requests: u64, lines: u64) -> Attack {
        let mut attack = Attack::default();
        let mut bytes = hello();
        for id in 0..requests {
            bytes.extend(encode(ClientFrame::Request(
                id + 1,
                Request::Output(OutputRequest {
                    job: JobRef::Id(job.to_owned()),
                    stream: StreamName::Stdout,
                    offset: 1 + id % 100,
                    limit: Some(lines),
                    caller: bashc::protocol::Caller {
                        session: "i18-attack".to_owned(),
                        owner: None,
                    },
                    any_session: true,
                    max_bytes: None,
                    from_end: false,
                }),
            )));
        }
        attack.start(socket, bytes, 0);
        attack
    }

    /// Connects and writes `bytes`, then `filler` bytes of filler, from a thread of
    /// its own: the daemon may stop reading, which blocks the write until the socket
    /// is shut down.
    fn start(&mut self, socket: &Path, bytes: Vec<u8>, filler: usize) {
        let stream = UnixStream::connect(socket).expect("cannot connect to bashd");
        let mut writer = stream.try_clone().expect("cannot clone a socket");
        self.streams.push(stream);
        let written = Arc::clone(&self.written);
        self.writers.push(std::thread::spawn(move || {
            // Fails once the daemon or the drop closes the socket: that is the end.
            let _ = (|| {
                let mut write = |chunk: &[u8]| {
                    writer.write_all(chunk)?;
                    written.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    std::io::Result::Ok(())
                };
                for chunk in bytes.chunks(64 * 1024) {
                    write(chunk)?;
                }
                let chunk = [0xA5u8; 64 * 1024];
                let mut left = filler;
                while left > 0 {
                    let n = left.min(chunk.len());
                    write(&chunk[..n])?;
                    left -= n;
                }
                std::io::Result::Ok(())
            })();
        }));
    }

    /// Waits until the attack has stalled: it has written something, and no writer has
    /// written more for half a second, each blocked on a socket the daemon does not
    /// read or done. Whether it stalled within `within`.
    pub fn wait_stalled(&self, within: Duration) -> bool {
        const QUIET: Duration = Duration::from_millis(500);
        let deadline = Instant::now() + within;
        let mut last = (self.written.load(Ordering::Relaxed), Instant::now());
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            let now = self.written.load(Ordering::Relaxed);
            if now != last.0 {
                last = (now, Instant::now());
            } else if now > 0 && last.1.elapsed() >= QUIET {
                return true;
            }
        }
        false
    }

    /// Closes every connection and waits for the writing threads.
    pub fn stop(&mut self) {
        for stream in &self.streams {
            let _ = stream.shutdown(Shutdown::Both);
        }
        self.streams.clear();
        for writer in self.writers.drain(..) {
            let _ = writer.join();
        }
    }
}

impl Default for Attack {
    fn default() -> Attack {
        Attack {
            streams: Vec::new(),
            writers: Vec::new(),
            written: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Drop for Attack {
    fn drop(&mut self) {
        self.stop();
    }
}

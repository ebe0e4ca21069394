//! The protocol fuzzer (issue 18): valid frames of every request, mutated (bits
//! flipped, bytes set, cut, repeated, spliced, length prefixes changed), go through the
//! daemon's frame decoder at least 100,000 times a run, read in random pieces, and a
//! few thousand more go to a real daemon, which must keep serving. Each run uses a
//! fixed seed and one new random seed; a failure names the seed, which
//! `BASHD_FUZZ_SEED=N` replays.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use bashc::protocol::codec::{ClientCodec, DaemonCodec};
use bashc::protocol::{
    Caller, ClientFrame, ExecParams, Hello, JobRef, JobRequest, JobsRequest, KillRequest, Mode,
    OutputRequest, PROTOCOL_VERSION, PolicyCheck, Request, StreamName, WaitRequest,
};
use bashd_tests::Daemon;
use bashd_tests::attack::{encode, hello};
use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use crate::show;

const FIXED_SEED: u64 = 0x1818_2026_0000_0018;
/// Mutated frames through the decoder per seed: two seeds make the 100,000 a run.
const DECODER_FRAMES_PER_SEED: usize = 50_000;
/// Mutated frames sent to a real daemon per seed.
const DAEMON_FRAMES_PER_SEED: usize = 5_000;

/// xorshift64*: small, fast, and the same sequence for the same seed everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The seeds of this run: `BASHD_FUZZ_SEED` alone when set, else the fixed one and
/// one from the clock.
fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("BASHD_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![seed];
    }
    let random = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    vec![FIXED_SEED, random]
}

/// Runs `body` for each seed; a panic names the seed.
fn for_each_seed(what: &str, mut body: impl FnMut(u64)) {
    for seed in seeds() {
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| body(seed)));
        if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            panic!("{what} failed with seed {seed} (replay: BASHD_FUZZ_SEED={seed}): {message}");
        }
    }
}

/// One valid frame of every kind a client sends.
fn corpus(workdir: &str) -> Vec<Vec<u8>> {
    let caller = Caller {
        session: "i18-fuzz".to_owned(),
        owner: None,
    };
    let job = JobRef::Id("j1".to_owned());
    let mut exec = ExecParams::new("true", "i18-fuzz", workdir);
    exec.description = Some("fuzz".to_owned());
    exec.timeout_secs = Some(5);
    let mut background = ExecParams::new("echo i18", "i18-fuzz", workdir);
    background.mode = Mode::Background;
    background.env = vec![(b"A".to_vec(), b"b".to_vec())];
    let requests = vec![
        Request::Exec(exec),
        Request::Exec(background),
        Request::Output(OutputRequest {
            job: job.clone(),
            stream: StreamName::Stderr,
            offset: 3,
            limit: Some(10),
            caller: caller.clone(),
            any_session: false,
            max_bytes: Some(100),
            from_end: false,
        }),
        Request::CheckPolicy(PolicyCheck {
            command: "git add -A && rm -rf /".to_owned(),
            workdir: None,
        }),
        Request::Status,
        Request::Jobs(JobsRequest {
            caller: caller.clone(),
            session: Some("i18-fuzz".to_owned()),
        }),
        Request::Check(JobRequest {
            caller: caller.clone(),
            job: JobRef::Pid(1),
            any_session: true,
        }),
        Request::Wait(WaitRequest {
            caller: caller.clone(),
            job: job.clone(),
            timeout_ms: Some(10),
            conditions: Default::default(),
            any_session: false,
            mcp_call: true,
        }),
        Request::Kill(KillRequest {
            caller,
            job,
            signal: Some("TERM".to_owned()),
            grace_ms: Some(10),
            any_session: false,
        }),
        Request::Sessions,
        Request::CloseSession("i18-fuzz-other".to_owned()),
    ];
    let mut frames: Vec<Vec<u8>> = requests
        .into_iter()
        .enumerate()
        .map(|(id, request)| encode(ClientFrame::Request(id as u64 + 1, request)))
        .collect();
    frames.push(encode(ClientFrame::Hello(Hello {
        protocol: PROTOCOL_VERSION,
        client: "fuzz-i18".to_owned(),
        pid: 1,
    })));
    frames
}

/// A copy of `frame` with one to four mutations.
fn mutate(rng: &mut Rng, frame: &[u8], corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut out = frame.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = out.len();
        match rng.below(8) {
            0 if len > 0 => {
                let at = rng.below(len);
                out[at] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let at = rng.below(len);
                out[at] = [0, 0xFF, 0x7F, 0x80, 0xFB, 0xFC, 0xFD, rng.next() as u8][rng.below(8)];
            }
            2 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                out.splice(at..at, bytes);
            }
            3 if len > 0 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(16)).min(len);
                out.drain(at..end);
            }
            4 if len > 0 => out.truncate(rng.below(len)),
            5 if len > 0 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(32)).min(len);
                let copy = out[at..end].to_vec();
                out.splice(at..at, copy);
            }
            6 if len >= 4 => {
                // A length prefix a little off, or anything.
                let old = u32::from_be_bytes(out[..4].try_into().unwrap());
                let new = match rng.below(3) {
                    0 => old.wrapping_add(rng.below(9) as u32).wrapping_sub(4),
                    1 => {
                        (bashc::protocol::limits::MAX_FRAME_BYTES as u32)
                            .wrapping_add(rng.below(3) as u32)
                            - 1
                    }
                    _ => rng.next() as u32,
                };
                out[..4].copy_from_slice(&new.to_be_bytes());
            }
            _ => {
                let other = &corpus[rng.below(corpus.len())];
                let at = rng.below(len + 1);
                let from = rng.below(other.len());
                out.splice(at..at, other[from..].iter().copied());
            }
        }
    }
    out
}

/// Feeds `bytes` to the daemon's decoder in random pieces: it must never panic, and a
/// frame it accepts must survive encoding and decoding again unchanged.
fn decode_all(rng: &mut Rng, bytes: &[u8]) -> usize {
    let mut codec = DaemonCodec::default();
    let mut buf = BytesMut::new();
    let mut decoded = 0;
    let mut rest = bytes;
    'reads: while !rest.is_empty() {
        let n = (1 + rng.below(512)).min(rest.len());
        buf.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(frame)) => {
                    decoded += 1;
                    let mut again = BytesMut::new();
                    ClientCodec::default()
                        .encode(frame.clone(), &mut again)
                        .unwrap();
                    let back = DaemonCodec::default().decode(&mut again).unwrap();
                    assert_eq!(back, Some(frame), "a decoded frame does not round-trip");
                }
                Ok(None) => break,
                Err(_) => break 'reads,
            }
        }
        assert!(
            buf.capacity() <= 2 * (bytes.len() + 512) + 8192,
            "the decoder holds {} bytes for {} bytes of input",
            buf.capacity(),
            bytes.len()
        );
    }
    let _ = codec.decode_eof(&mut buf);
    decoded
}

#[test]
fn the_decoder_survives_a_hundred_thousand_mutated_frames() {
    let corpus = corpus("/tmp");
    let mut total = 0;
    for_each_seed("the decoder fuzz", |seed| {
        let mut rng = Rng::new(seed);
        let mut decoded = 0;
        for _ in 0..DECODER_FRAMES_PER_SEED {
            let frame = &corpus[rng.below(corpus.len())];
            let mutated = mutate(&mut rng, frame, &corpus);
            decoded += decode_all(&mut rng, &mutated);
            total += 1;
        }
        // Some mutations leave a frame valid (a changed id, a changed number): the
        // requests that reach the daemon's handlers.
        assert!(decoded > 0, "no mutated frame decoded");
    });
    assert!(total >= 100_000 || std::env::var("BASHD_FUZZ_SEED").is_ok());
}

/// Reads and drops whatever the daemon sends, so that its answers never block it.
fn drain(stream: &UnixStream) -> std::thread::JoinHandle<()> {
    let mut reader = stream.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut sink = [0u8; 65_536];
        while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
    })
}

#[test]
fn a_daemon_fed_mutated_frames_keeps_serving() {
    let daemon = Daemon::start();
    let corpus = corpus(daemon.scratch().to_str().unwrap());
    for_each_seed("the daemon fuzz", |seed| {
        let mut rng = Rng::new(seed);
        let connect = || {
            let mut stream = UnixStream::connect(daemon.socket_path()).unwrap();
            stream
                .set_write_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            stream.write_all(&hello()).unwrap();
            let reader = drain(&stream);
            (stream, reader)
        };
        let (mut stream, mut reader) = connect();
        for _ in 0..DAEMON_FRAMES_PER_SEED {
            let frame = &corpus[rng.below(corpus.len() - 1)];
            let mutated = mutate(&mut rng, frame, &corpus);
            if stream.write_all(&mutated).is_err() {
                // The daemon closed it after a bad frame, as it should: a new one.
                let _ = stream.shutdown(std::net::Shutdown::Both);
                let _ = reader.join();
                (stream, reader) = connect();
            }
        }
        let _ = stream.shutdown(std::net::Shutdown::Both);
        let _ = reader.join();
        let out = daemon.run_bashc(&["exec", "--", "echo alive"]);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        assert!(!daemon.log().contains("panicked"), "{}", daemon.log());
    });
}

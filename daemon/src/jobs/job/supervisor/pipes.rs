//! What a supervisor waits on besides its phase: the job's pipes (read into their
//! captures), the leader's exit from the reaper, and the actor's control messages.

use std::future::Future;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bashd_protocol::{BackgroundWhy, StreamName};
use bytes::Bytes;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

use super::live::{ChunkBuffers, Live};
use super::{Control, InputWatch, Probe, Stop, Streams, Subscribed};
use crate::jobs::job::pty::{self, screen::Screen};
use crate::jobs::os::reaper::LeaderExit;
use crate::output::StreamCapture;

/// A pipe read starts with this buffer and grows it while reads fill it, so a quiet
/// background job holds little memory and a loud one reads in large chunks.
const FIRST_READ_CHUNK: usize = 8 * 1024;
const READ_CHUNK: usize = 256 * 1024;
/// A pipe that a read found full is enlarged to this, once: fewer wake-ups for a fast
/// writer. Pipes start at the kernel's default, since pipe memory is a per-user quota
/// that a thousand quiet jobs must not spend.
const BIG_PIPE_BYTES: usize = 1024 * 1024;
/// Where the kernel cannot tell (a pipe job in a poll, which may wait on other
/// descriptors too): how long it must have printed nothing and used no CPU, while
/// polling with its stdin pipe as descriptor 0, to count as waiting for input.
pub(super) const INPUT_IDLE: Duration = Duration::from_secs(5);
/// Where the kernel tells (a process of the job blocked in a read of its stdin pipe or
/// terminal, or polling its terminal): with nothing printed for this long it waits
/// for input. The pause only lets a prompt that is being written finish first.
const KERNEL_INPUT_IDLE: Duration = Duration::from_millis(100);
/// How long a job must be quiet before its readers are told what they missed.
const MISSED_AFTER_QUIET: Duration = Duration::from_millis(100);
/// The most of a prompt a notice carries, in characters (its end: what is asked).
const PROMPT_CHARS: usize = 200;
/// The most chunks a probe reads from a terminal that holds output already.
const READ_NOW_CHUNKS: usize = 16;
/// A clock tick of `/proc/PID/stat`'s CPU times, in milliseconds (USER_HZ is 100 on
/// every Linux this runs on).
const TICK_MS: u64 = 10;

/// The job's shell, the leader.
#[derive(Debug)]
pub(super) enum Shell {
    /// Not reaped yet: the reaper sends its status here.
    Running(oneshot::Receiver<LeaderExit>),
    /// Reaped; `None` when the reaper went away first (the daemon is going down).
    Exited(Option<LeaderExit>),
}

impl Shell {
    pub(super) fn status(&self) -> Option<LeaderExit> {
        match self {
            Shell::Running(_) => None,
            Shell::Exited(status) => *status,
        }
    }
}

/// What woke a supervisor up.
pub(super) enum Wake<T> {
    /// Output was read, a snapshot answered, or the control channel closed.
    Busy,
    LeaderExited,
    Stop(Stop),
    /// The phase's own event.
    Phase(T),
}

pub(super) struct Inputs {
    pub(super) out: PipeReader,
    pub(super) err: PipeReader,
    /// stderr goes to the stdout pipe; `err` has no pipe and stays empty.
    pub(super) merged: bool,
    /// `None` once the actor has dropped its end.
    pub(super) control: Option<mpsc::UnboundedReceiver<Control>>,
    pub(super) shell: Shell,
    /// The readers of the output as it comes.
    pub(super) live: Live,
    /// When output last came, on either stream (the start, before any).
    pub(super) last_output: Instant,
    /// Which stream that output came on (stdout, before any).
    pub(super) printed_last: StreamName,
    /// Reads that brought output, counted for `bashc top`'s watch (`requests/watch.rs`),
    /// which looks at a job's last line only when this moved.
    pub(super) activity: Arc<AtomicU64>,
    /// For a job with a stdin pipe: what tells whether it waits for input.
    pub(super) watch: Option<InputWatch>,
    /// The job's first process, for live readers that look at its processes.
    pub(super) root: u32,
    /// A `Control::Detach` that came, for the phase that can answer the request.
    pub(super) detach_asked: Option<BackgroundWhy>,
}

impl Inputs {
    /// Waits for one thing to happen: output, the leader's exit, a control message, or
    /// `phase`. Cancelling any branch loses nothing: a pipe read that did not complete
    /// consumed no bytes, the exit status and control messages stay in their channels,
    /// and `phase` is re-created or pinned by the caller.
    pub(super) async fn wake<T>(&mut self, phase: impl Future<Output = T>) -> Wake<T> {
        enum Got<T> {
            Exit(Result<LeaderExit, oneshot::error::RecvError>),
            Read(StreamName, usize),
            Control(Option<Control>),
            Phase(T),
            Quiet,
        }
        // A reader told nothing of the lines it missed because no text came since (a
        // loud burst, then quiet) is told once the job has been quiet a moment.
        let missed = self.live.has_missed();
        let got = tokio::select! {
            status = recv_exit(&mut self.shell) => Got::Exit(status),
            n = self.out.read_some(), if !self.out.is_done() => Got::Read(StreamName::Stdout, n),
            n = self.err.read_some(), if !self.err.is_done() => Got::Read(StreamName::Stderr, n),
            msg = recv_control(&mut self.control) => Got::Control(msg),
            value = phase => Got::Phase(value),
            () = tokio::time::sleep(MISSED_AFTER_QUIET), if missed => Got::Quiet,
        };
        match got {
            Got::Quiet => {
                let full_output = [
                    self.out.capture.full_output(),
                    self.err.capture.full_output(),
                ];
                self.live.tell_missed(&full_output);
                Wake::Busy
            }
            Got::Exit(status) => {
                // An error means the reaper is gone: the daemon is going down.
                self.shell = Shell::Exited(status.ok());
                Wake::LeaderExited
            }
            Got::Read(stream, n) => {
                let reader = match stream {
                    StreamName::Stdout => &mut self.out,
                    StreamName::Stderr => &mut self.err,
                };
                if n > 0 {
                    self.last_output = Instant::now();
                    self.printed_last = stream;
                    self.activity.fetch_add(1, Ordering::Relaxed);
                }
                reader.take(n, stream, &mut self.live);
                Wake::Busy
            }
            Got::Control(Some(Control::Stop(stop))) => Wake::Stop(stop),
            Got::Control(Some(Control::Snapshot(reply))) => {
                let _ = reply.send(self.streams());
                Wake::Busy
            }
            Got::Control(Some(Control::Detach(why))) => {
                self.detach_asked = Some(why);
                Wake::Busy
            }
            Got::Control(Some(Control::Subscribe { subscriber, reply })) => {
                // Between two reads: the snapshot ends where the live lines begin.
                let _ = reply.send(Subscribed {
                    streams: self.streams(),
                    root: self.root,
                });
                self.live.add(subscriber);
                Wake::Busy
            }
            Got::Control(Some(Control::Probe(reply))) => {
                let _ = reply.send(self.probe().await);
                Wake::Busy
            }
            Got::Control(Some(Control::Screen { job, reply })) => {
                let _ = reply.send(self.screen(job).await);
                Wake::Busy
            }
            Got::Control(Some(Control::Resize { size, reply })) => {
                let _ = reply.send(self.out.resize(size));
                Wake::Busy
            }
            Got::Control(None) => {
                self.control = None;
                Wake::Busy
            }
            Got::Phase(value) => Wake::Phase(value),
        }
    }

    /// Whether the job waits for input. The kernel's word first: a process of the job
    /// is blocked in a `read` of its stdin (pipe or terminal), or, on a terminal, in a
    /// poll while its stdin is the terminal, and the job printed nothing for
    /// [`KERNEL_INPUT_IDLE`] (output already written is read first). Where the kernel
    /// cannot tell (a pipe job in a poll, which may wait on other descriptors too), a
    /// guess: blocked like that, printed nothing for [`INPUT_IDLE`] and used no CPU
    /// since a look at least that long ago (every look is kept for the next).
    pub(super) async fn probe(&mut self) -> Probe {
        let mut probe = self.probe_waiting().await;
        if probe.waiting_for_input.is_some() {
            probe.prompt = self.prompt();
        }
        probe
    }

    /// What a job waiting for input asks: the cursor's line on a terminal, else the
    /// line it left unended on stdout, else on stderr; the last [`PROMPT_CHARS`] of it.
    fn prompt(&mut self) -> Option<String> {
        let line = match self.out.screen.as_mut() {
            Some(screen) => screen.cursor_line(),
            None => [&self.out, &self.err]
                .into_iter()
                .map(|reader| String::from_utf8_lossy(reader.capture.pending_line()).into_owned())
                .find(|line| !line.trim().is_empty())
                .unwrap_or_default(),
        };
        let line = line.trim_end();
        let chars = line.chars().count();
        let line: String = line
            .chars()
            .skip(chars.saturating_sub(PROMPT_CHARS))
            .collect();
        (!line.trim().is_empty()).then_some(line)
    }

    async fn probe_waiting(&mut self) -> Probe {
        self.read_held();
        let Some(watch) = &mut self.watch else {
            return Probe::default();
        };
        let root = watch.root;
        let stdin = match &watch.tty {
            Some(tty) => tty.clone(),
            None => format!("pipe:[{}]", watch.stdin_inode),
        };
        let on_terminal = watch.tty.is_some();
        let Ok(now) =
            tokio::task::spawn_blocking(move || crate::jobs::os::probe::input_state(root, &stdin))
                .await
        else {
            return Probe::default();
        };
        // A prompt written just before the read the look saw blocked may still sit in
        // a pipe or the terminal: read it, and the job printed just now.
        self.read_held();
        let quiet_for = self.last_output.elapsed();
        let certain = now.reading_stdin || (on_terminal && now.blocked_on_stdin);
        if certain {
            return Probe {
                waiting_for_input: (quiet_for >= KERNEL_INPUT_IDLE).then_some(quiet_for.as_secs()),
                prompt: None,
            };
        }
        let Some(watch) = &mut self.watch else {
            return Probe::default();
        };
        if on_terminal {
            return Probe::default();
        }
        // "No CPU" allows what a program waiting in `select` spends waking now and then
        // (vim writes its swap file after 4 s): at most 2 % of the time since the look.
        let idle_for = match watch.sample {
            Some((at, ticks))
                if now.cpu_ticks.saturating_sub(ticks) * TICK_MS
                    <= at.elapsed().as_millis() as u64 / 50 =>
            {
                at.elapsed()
            }
            _ => {
                watch.sample = Some((Instant::now(), now.cpu_ticks));
                Duration::ZERO
            }
        };
        let idle = quiet_for.min(idle_for);
        Probe {
            waiting_for_input: (now.blocked_on_stdin && idle >= INPUT_IDLE)
                .then_some(idle.as_secs()),
            prompt: None,
        }
    }

    /// Reads what the job's pipes or terminal hold already, as output: it came before
    /// any read the probe sees blocked (a prompt, then the read of the answer), and is
    /// part of the screen a look shows. The select of [`Inputs::wake`] may answer a
    /// look before a ready read. A few chunks at most, for a job that never stops.
    fn read_held(&mut self) {
        for (reader, stream) in [
            (&mut self.out, StreamName::Stdout),
            (&mut self.err, StreamName::Stderr),
        ] {
            for _ in 0..READ_NOW_CHUNKS {
                let n = reader.read_now();
                if n == 0 {
                    break;
                }
                self.last_output = Instant::now();
                self.printed_last = stream;
                self.activity.fetch_add(1, Ordering::Relaxed);
                reader.take(n, stream, &mut self.live);
            }
        }
    }

    /// The screen of a terminal job, with whether it waits for input; `None` for a job
    /// on pipes.
    pub(super) async fn screen(
        &mut self,
        job: bashd_protocol::JobId,
    ) -> Option<(bashd_protocol::ScreenInfo, bool)> {
        self.out.screen.as_ref()?;
        let waiting = self.probe().await.waiting_for_input.is_some();
        self.settle_screen();
        let screen = self.out.screen.as_ref()?;
        Some((
            screen.info(job, bashd_protocol::JobState::Running, waiting),
            screen.application_cursor(),
        ))
    }

    /// Draws what a terminal job's screen holds back (the fast path's last lines), for
    /// a look at it; what that pushes off the screen goes to the output.
    pub(super) fn settle_screen(&mut self) {
        let Some(screen) = self.out.screen.as_mut() else {
            return;
        };
        let scrolled = screen.settle();
        self.out.push(&scrolled, StreamName::Stdout, &mut self.live);
    }

    /// Takes a first look at the job's CPU time, for a later [`Inputs::probe`].
    pub(super) async fn prime_probe(&mut self) {
        if self.watch.as_ref().is_some_and(|w| w.sample.is_none()) {
            self.probe().await;
        }
    }

    /// The pipes are done: the last lines go to the captures and the live readers.
    pub(super) fn finish(&mut self) {
        let live = &mut self.live;
        for (reader, stream) in [
            (&mut self.out, StreamName::Stdout),
            (&mut self.err, StreamName::Stderr),
        ] {
            let mut rest = Vec::new();
            reader.capture.finish_live(|line, text| {
                rest.push((line, Bytes::copy_from_slice(text)));
            });
            for (line, text) in rest {
                live.send(stream, line, text, || reader.capture.full_output());
            }
        }
    }

    pub(super) fn pipes_done(&self) -> bool {
        self.out.is_done() && self.err.is_done()
    }

    pub(super) fn streams(&self) -> Streams {
        Streams {
            stdout: self.out.capture.source(),
            stderr: (!self.merged).then(|| self.err.capture.source()),
            printed_last: self.printed_last,
        }
    }
}

async fn recv_exit(shell: &mut Shell) -> Result<LeaderExit, oneshot::error::RecvError> {
    match shell {
        Shell::Running(exit) => exit.await,
        Shell::Exited(_) => std::future::pending().await,
    }
}

async fn recv_control(control: &mut Option<mpsc::UnboundedReceiver<Control>>) -> Option<Control> {
    match control {
        Some(control) => control.recv().await,
        None => std::future::pending().await,
    }
}

/// What a job's output is read from.
enum Source {
    Pipe(pipe::Receiver),
    /// The master of a terminal job's terminal (`exec --pty`).
    Terminal(pty::Master),
}

/// One pipe of a job and what was read from it.
pub(super) struct PipeReader {
    pipe: Option<Source>,
    buf: Vec<u8>,
    pub(super) capture: StreamCapture,
    /// A terminal job's screen: what is read goes through it, and only the lines it
    /// scrolls off reach the capture, as plain text.
    pub(super) screen: Option<Box<Screen>>,
    /// What reads are copied into for live readers.
    buffers: ChunkBuffers,
}

impl PipeReader {
    pub(super) fn new(fd: Option<OwnedFd>, capture: StreamCapture) -> PipeReader {
        let pipe = fd.and_then(|fd| {
            // The read end of a pipe the spawn made, O_RDONLY: one fcntl makes it
            // non-blocking, where `from_owned_fd` checked it with fstat and read its
            // flags first, two system calls more a stream, for every job (issue 31).
            rustix::fs::fcntl_setfl(&fd, rustix::fs::OFlags::NONBLOCK).ok()?;
            pipe::Receiver::from_owned_fd_unchecked(fd).ok()
        });
        PipeReader {
            pipe: pipe.map(Source::Pipe),
            buf: Vec::new(),
            capture,
            screen: None,
            buffers: ChunkBuffers::default(),
        }
    }

    /// The reader of a terminal job's master, whose screen is `size`.
    pub(super) fn terminal(
        master: OwnedFd,
        size: bashd_protocol::PtySize,
        capture: StreamCapture,
    ) -> PipeReader {
        let master = pty::Master::new(master)
            .inspect_err(|e| tracing::warn!("cannot read a job's terminal: {e}"))
            .ok();
        PipeReader {
            pipe: master.map(Source::Terminal),
            buf: Vec::new(),
            capture,
            screen: Some(Box::new(Screen::new(size))),
            buffers: ChunkBuffers::default(),
        }
    }

    /// Gives a terminal job's terminal and screen a new size.
    fn resize(&mut self, size: bashd_protocol::PtySize) -> std::io::Result<()> {
        match (&self.pipe, &mut self.screen) {
            (Some(Source::Terminal(master)), Some(screen)) => {
                master.set_size(size)?;
                screen.resize(size);
                Ok(())
            }
            (_, Some(_)) => Err(std::io::Error::other("its terminal is closed")),
            _ => Err(std::io::Error::other("it has no terminal")),
        }
    }

    fn is_done(&self) -> bool {
        self.pipe.is_none()
    }

    /// Reads a chunk the pipe or the terminal's master holds now into the buffer,
    /// without waiting; how many bytes, 0 when there is none. (End-of-file is left to
    /// the next read of the select, which closes the pipe.)
    fn read_now(&mut self) -> usize {
        if self.pipe.is_none() {
            return 0;
        }
        if self.buf.is_empty() {
            self.buf = vec![0; FIRST_READ_CHUNK];
        }
        match self.pipe.as_ref() {
            Some(Source::Terminal(master)) => master.read_now(&mut self.buf),
            Some(Source::Pipe(pipe)) => pipe.try_read(&mut self.buf).unwrap_or(0),
            None => 0,
        }
    }

    /// Reads one chunk into the buffer; how many bytes, 0 at EOF or on an error.
    /// Cancel-safe: a read that did not complete consumed nothing.
    async fn read_some(&mut self) -> usize {
        let Some(pipe) = self.pipe.as_mut() else {
            return 0;
        };
        if self.buf.is_empty() {
            self.buf = vec![0; FIRST_READ_CHUNK];
        }
        match pipe {
            Source::Pipe(pipe) => pipe.read(&mut self.buf).await.unwrap_or(0),
            Source::Terminal(master) => master.read(&mut self.buf).await.unwrap_or(0),
        }
    }

    /// Hands `bytes` to the capture and the live readers.
    fn push(&mut self, bytes: &[u8], stream: StreamName, live: &mut Live) {
        if bytes.is_empty() {
            return;
        }
        if live.is_empty() {
            self.capture.push(bytes);
        } else if !live.wants(stream) || !self.buffers.has_room() {
            // Every reader is behind: no copy, only which lines went by.
            let mut span: Option<(u64, bool)> = None;
            self.capture.push_live(bytes, |line, text| {
                let first = span.map_or(line, |(first, _)| first);
                span = Some((first, text.ends_with(b"\n")));
            });
            if let Some((first, ended)) = span {
                let next = self.capture.next_line();
                let last = if ended { next - 1 } else { next };
                live.miss(stream, first, last.max(first));
            }
        } else {
            // One event per read, not per piece the sanitizer hands over (a line, or a
            // run of them): the pieces of one read are contiguous lines. Sanitizing
            // never grows a read by much: one buffer per read.
            let mut first = None;
            let capture = &mut self.capture;
            let text = self.buffers.fill(bytes.len() + 64, |batch| {
                capture.push_live(bytes, |line, text| {
                    first.get_or_insert(line);
                    batch.extend_from_slice(text);
                });
            });
            if let Some(line) = first {
                // The spill file's name only for a notice of missed lines, not per read.
                live.send(stream, line, text, || self.capture.full_output());
            }
        }
    }

    /// Hands the `n` bytes just read to the capture and the live readers; 0 closes the
    /// pipe.
    fn take(&mut self, n: usize, stream: StreamName, live: &mut Live) {
        if self.pipe.is_none() {
            return;
        }
        match n {
            0 => {
                self.pipe = None;
                self.buf = Vec::new();
                if let Some(screen) = self.screen.as_mut() {
                    let rest = screen.finish();
                    self.push(&rest, stream, live);
                }
            }
            n => {
                match self.screen.as_mut() {
                    Some(screen) => {
                        let scrolled = screen.feed(&self.buf[..n]);
                        self.push(&scrolled, stream, live);
                    }
                    None => {
                        let bytes = std::mem::take(&mut self.buf);
                        self.push(&bytes[..n], stream, live);
                        self.buf = bytes;
                    }
                }
                if n == self.buf.len() && n < READ_CHUNK {
                    if let Some(Source::Pipe(pipe)) = &self.pipe
                        && n >= FIRST_READ_CHUNK * 8
                    {
                        // Above /proc/sys/fs/pipe-max-size or the user's pipe quota
                        // this fails, and the pipe keeps its size.
                        let _ = rustix::pipe::fcntl_setpipe_size(pipe.as_fd(), BIG_PIPE_BYTES);
                    }
                    self.buf = vec![0; n * 2];
                }
            }
        }
    }
}

//! `bashc relay HOST`, the process (DESIGN §14, issue 19): it keeps one SSH channel to
//! `bashc bridge` on HOST open and carries the bashd connections of every local client
//! over it (`mux.rs`). The client's side, which finds or starts it, is the library's
//! (`bashc::connect` for a remote `Target`); this is the CLI's, since it owns the
//! process's stdout (its `ready` word) and runs until its channel or its idle time ends.
//!
//! The relay ends when its SSH channel ends (every client connection is closed then,
//! so no call waits on a dead link; the next call starts a new relay), and after
//! `[remote] relay_idle_secs` (default 10 minutes; at least 5 s, as a relay idle at
//! once would be gone before the call that started it connects) with no client. It removes its socket first (under the lock, and only if it is still its
//! own), then closes the clients that connected in the instant before, which
//! their callers retry once (a call retries a connection that ends or is reset before
//! the handshake).
//!
//! The relay's main loop owns the table of connections; a task per client reads its
//! socket into frames for the channel (`mux::forward`), another writes the channel's
//! bytes for it (`mux::deliver`).
//!
//! It carries only clients of its uid outside any sandbox (`peer.rs`, issue 30): a
//! call carried to the host runs there unconfined. And it counts what the bridge sends
//! each client (`mux::Unwritten`): past a window unwritten, that client is cut off.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bashc::{ClientError, RELAY_LOCK_FD_ENV, RelayPaths, RemoteConfig};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::mux::{
    MAGIC, MUX_VERSION, MuxCodec, MuxError, MuxFrame, Unwritten, Window, deliver, forward,
};
use crate::ssh::{EXIT_WAIT, STDERR_WAIT, bridge_command, explain, keep_tail};

/// How long a new relay has to reach its bridge (an SSH login, perhaps a new master).
const HELLO_TIMEOUT: Duration = Duration::from_secs(50);

/// How long an ending relay tries for the start lock before it removes its socket.
const LEAVE_LOCK_WAIT: Duration = Duration::from_secs(2);

/// `bashc relay HOST`: reaches `host`'s bridge, says `ready` (or `error: why`) on
/// stdout, then carries its clients' connections until the channel ends or no client
/// has come for the idle time.
pub async fn relay(host: &str, runtime_dir: &Path) -> Result<(), ClientError> {
    let start_lock = inherited_lock();
    if let Err(why) = bashc::check_host(host) {
        report(&format!("error: {why}"));
        return Err(remote_error(host, why));
    }
    let config = match bashc::load_remote() {
        Ok(config) => config,
        Err(why) => {
            report(&format!("error: {why}"));
            return Err(remote_error(host, why.to_string()));
        }
    };
    let paths = RelayPaths::new(runtime_dir, host, &config);
    let idle = config.relay_idle();
    let (mut child, channel) = match open_channel(host, runtime_dir, &config).await {
        Ok(opened) => opened,
        Err(why) => {
            report(&format!("error: {}", why.replace('\n', " ")));
            return Err(remote_error(host, why));
        }
    };
    let listener = match listen(&paths.socket).await {
        Ok(listener) => listener,
        Err(e) => {
            let why = format!("cannot listen on {}: {e}", paths.socket.display());
            report(&format!("error: {why}"));
            return Err(remote_error(host, why));
        }
    };
    let inode = std::fs::metadata(&paths.socket).map(|m| (m.dev(), m.ino()));
    // Listening: a caller that waited for the lock connects now.
    drop(start_lock);
    report("ready");
    eprintln!(
        "bashc relay {host}: ready (pid {}), idle time {idle:?}",
        std::process::id()
    );
    let ended = serve(host, listener, channel, idle, async |listener| {
        // Gone from the directory before the listener and any client closes: the next
        // call starts a new relay instead of reaching this one. Under the start lock,
        // so as not to remove the socket a new relay has just made.
        let _lock = lock_for_leaving(&paths.lock).await;
        if std::fs::metadata(&paths.socket)
            .map(|m| (m.dev(), m.ino()))
            .ok()
            == inode.ok()
        {
            let _ = std::fs::remove_file(&paths.socket);
        }
        turn_away(listener);
    })
    .await;
    let _ = child.start_kill();
    let _ = tokio::time::timeout(EXIT_WAIT, child.wait()).await;
    eprintln!("bashc relay {host}: {ended}");
    Ok(())
}

/// The open channel to the bridge: what it says, and a way to send it frames.
struct Channel {
    from_bridge: FramedRead<tokio::process::ChildStdout, MuxCodec>,
    to_bridge: FramedWrite<tokio::process::ChildStdin, MuxCodec>,
    /// What ssh said on stderr, its last bytes.
    said: Arc<Mutex<Vec<u8>>>,
    /// Who the bridge said it is in its `Hello` (`bashc 0.1.0 on box`).
    far: String,
}

/// Runs the bridge command and greets the bridge; or says why not, in the user's words.
async fn open_channel(
    host: &str,
    runtime_dir: &Path,
    config: &RemoteConfig,
) -> Result<(tokio::process::Child, Channel), String> {
    let control_dir = runtime_dir.join("ssh");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(&control_dir)
        .map_err(|e| format!("cannot make {}: {e}", control_dir.display()))?;
    let mut command = bridge_command(host, &control_dir, config);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove(RELAY_LOCK_FD_ENV)
        .kill_on_drop(true);
    let mut child = command.spawn().map_err(|e| {
        format!(
            "cannot run {}: {e} (install OpenSSH's client, or set [remote] bridge_command)",
            command.as_std().get_program().to_string_lossy()
        )
    })?;
    let stdin = child.stdin.take().expect("stdin was piped above");
    let stdout = child.stdout.take().expect("stdout was piped above");
    let stderr = child.stderr.take().expect("stderr was piped above");
    let said = Arc::new(Mutex::new(Vec::new()));
    let stderr = tokio::spawn(keep_tail(stderr, said.clone()));
    let mut channel = Channel {
        from_bridge: FramedRead::new(stdout, MuxCodec),
        to_bridge: FramedWrite::new(stdin, MuxCodec),
        said,
        far: format!("the bridge on {host}"),
    };
    let greeting = tokio::time::timeout(HELLO_TIMEOUT, greet(&mut channel)).await;
    let failure = match greeting {
        Ok(Ok((version, speaker))) if version == MUX_VERSION => {
            channel.far = speaker;
            return Ok((child, channel));
        }
        Ok(Ok((version, speaker))) => {
            let _ = child.start_kill();
            let upgrade = if version < MUX_VERSION {
                format!(
                    "upgrade bashc on {host} (`cargo install --path client` in a bashd checkout of this version)"
                )
            } else {
                "upgrade bashc on this machine".to_owned()
            };
            return Err(format!(
                "{speaker} speaks relay version {version}, but {} speaks {MUX_VERSION}: {upgrade}",
                crate::mux::speaker()
            ));
        }
        Ok(Err(Greeting::Garbled(why, bytes))) => {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(EXIT_WAIT, child.wait()).await;
            let printed = printed(&bytes);
            let printed = if printed.is_empty() {
                String::new()
            } else {
                format!(" ({printed:?})")
            };
            return Err(format!(
                "the login on {host} printed to stdout before `bashc bridge` ran{printed}, which is no relay greeting ({why}): make ~/.bashrc (and what it runs) quiet for non-interactive shells there"
            ));
        }
        Ok(Err(Greeting::Failed(e))) => e,
        Err(_) => ClientError::HandshakeTimeout(HELLO_TIMEOUT),
    };
    let status = tokio::time::timeout(EXIT_WAIT, child.wait()).await;
    if status.is_err() {
        let _ = child.start_kill();
    }
    // A master ssh forked may keep stderr open as long as it lives: take what was
    // said by then.
    let _ = tokio::time::timeout(STDERR_WAIT, stderr).await;
    let said = String::from_utf8_lossy(&channel.said.lock().expect("never poisoned")).into_owned();
    match explain(
        host,
        config,
        status.ok().and_then(Result::ok),
        &said,
        failure,
    ) {
        ClientError::Remote { message, .. } => Err(message),
        other => Err(other.to_string()),
    }
}

/// Sends the magic and `Hello`; answers the bridge's version and who it is.
async fn greet(channel: &mut Channel) -> Result<(u32, String), Greeting> {
    let sent = async {
        channel.to_bridge.get_mut().write_all(&MAGIC).await?;
        channel
            .to_bridge
            .send(MuxFrame::Hello {
                version: MUX_VERSION,
                speaker: crate::mux::speaker(),
            })
            .await
    };
    // A bridge that cannot start has closed its end; what it said is the reason.
    let _ = sent.await;
    match channel.from_bridge.next().await {
        Some(Ok(MuxFrame::Hello { version, speaker })) => Ok((version, speaker)),
        Some(Ok(_)) => Err(Greeting::Garbled(
            "a frame other than Hello".to_owned(),
            Vec::new(),
        )),
        Some(Err(MuxError::Io(_))) | None => Err(Greeting::Failed(ClientError::Disconnected)),
        Some(Err(e)) => Err(Greeting::Garbled(
            e.to_string(),
            channel.from_bridge.read_buffer().to_vec(),
        )),
    }
}

/// Why the bridge's greeting did not come.
enum Greeting {
    /// The channel ended or failed: ssh's status and stderr say why.
    Failed(ClientError),
    /// Bytes that are no relay frame came, and what they were.
    Garbled(String, Vec<u8>),
}

/// What the far side printed instead of a greeting, for the user to recognize: its
/// first line or so, as text.
fn printed(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(80)]);
    let text: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    text.trim().to_owned()
}

/// The start lock this relay inherited, if a client started it; not passed on to ssh
/// (a master it forks would hold it for as long as it lives).
fn inherited_lock() -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let fd: i32 = std::env::var(RELAY_LOCK_FD_ENV).ok()?.parse().ok()?;
    // Through libc: rustix's fcntl takes a `BorrowedFd`, which promises an open
    // descriptor, and this number comes from the environment.
    // SAFETY: fcntl on a descriptor number only sets its flags; one that is not open
    // fails, and is not taken.
    if fd < 3 || unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } == -1 {
        return None;
    }
    // SAFETY: open (checked above), handed over by the starting client, owned by
    // nothing else in this process.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// The start lock, for an ending relay that removes its socket; after
/// [`LEAVE_LOCK_WAIT`], none (a relay starting that long does not bind meanwhile,
/// and this one's clients are not kept waiting on a dead link).
///
/// Tried without blocking and waited for on the runtime's timer, not by a sleep of its
/// thread: the relay runs on one thread, whose other tasks (what the clients are still
/// owed, the ssh child's reaping) go on meanwhile.
async fn lock_for_leaving(path: &Path) -> Option<std::fs::File> {
    use rustix::fs::{FlockOperation, flock};
    let file = OpenOptions::new().read(true).write(true).open(path).ok()?;
    let deadline = tokio::time::Instant::now() + LEAVE_LOCK_WAIT;
    loop {
        if flock(&file, FlockOperation::NonBlockingLockExclusive).is_ok() {
            return Some(file);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The socket, made anew: the starting client holds the lock and found nothing
/// answering on it. A socket that answers is another relay's, which stays.
async fn listen(socket: &Path) -> std::io::Result<UnixListener> {
    match UnixStream::connect(socket).await {
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) => {}
        Ok(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another relay answers there",
            ));
        }
        Err(e) => return Err(e),
    }
    match std::fs::remove_file(socket) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    UnixListener::bind(socket)
}

/// Says one line to the client that started the relay, then nothing more there.
fn report(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
    // Nothing else writes to stdout now (the lock is held).
    if let Ok(null) = OpenOptions::new().write(true).open("/dev/null") {
        let _ = rustix::stdio::dup2_stdout(&null);
    }
}

/// Closes the listener of a relay that is ending, whose socket is gone from the
/// directory: the clients that connected before are accepted and closed with what they
/// sent read, so they see the connection end (and try again) rather than a reset.
fn turn_away(listener: UnixListener) {
    use std::io::Read;
    let Ok(listener) = listener.into_std() else {
        return;
    };
    let _ = listener.set_nonblocking(true);
    while let Ok((mut stream, _)) = listener.accept() {
        let _ = stream.set_nonblocking(true);
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut sent = [0u8; 1024];
        while let Ok(1..) = stream.read(&mut sent) {}
    }
}

/// One client of the relay, as its main loop holds it.
struct Caller {
    /// The channel's bytes for it, written on to its socket by its `deliver` task.
    queue: mpsc::UnboundedSender<Bytes>,
    /// What of those is not written yet.
    unwritten: Unwritten,
    /// What may still be sent the bridge for it.
    window: Window,
    /// Its `forward` and `deliver` tasks.
    tasks: [tokio::task::AbortHandle; 2],
}

impl Caller {
    /// Ends the client at once: both tasks stop, so its socket closes with what was
    /// queued for it unsent.
    fn cut(self) {
        self.window.close();
        for task in self.tasks {
            task.abort();
        }
    }
}

/// Answers a client the relay will not carry with why, as bashd answers a connection
/// it refuses: its `Hello` read (so the reason is not lost to a reset), then a
/// `Fatal` frame, then the end.
async fn refuse(stream: UnixStream, words: String) {
    use bashd_protocol::codec::DaemonCodec;
    use bashd_protocol::{ErrorKind, ErrorReply, ServerFrame};
    let wait = Duration::from_secs(2);
    let (read, write) = stream.into_split();
    let mut frames = FramedRead::new(read, DaemonCodec::new(64 * 1024));
    let _ = tokio::time::timeout(wait, frames.next()).await;
    let reply = ErrorReply::new(ErrorKind::InvalidRequest, words);
    let mut sink = FramedWrite::new(write, DaemonCodec::default());
    let _ = tokio::time::timeout(wait, sink.send(ServerFrame::Fatal(reply))).await;
}

/// Carries the clients' connections over the channel; answers why it ended. `leave`
/// gets the listener when it ends, before any client's connection is closed.
async fn serve(
    host: &str,
    listener: UnixListener,
    channel: Channel,
    idle: Duration,
    leave: impl AsyncFnOnce(UnixListener),
) -> String {
    let Channel {
        mut from_bridge,
        mut to_bridge,
        said,
        far,
    } = channel;
    // One writer owns the channel's stdin; the main loop and the clients' readers
    // send it frames.
    let (frames, mut frames_rx) = mpsc::channel::<MuxFrame>(256);
    tokio::spawn(async move {
        while let Some(frame) = frames_rx.recv().await {
            if to_bridge.feed(frame).await.is_err() {
                return;
            }
            while let Ok(frame) = frames_rx.try_recv() {
                if to_bridge.feed(frame).await.is_err() {
                    return;
                }
            }
            if to_bridge.flush().await.is_err() {
                return;
            }
        }
    });
    let (gone_tx, mut gone) = mpsc::unbounded_channel::<u32>();
    // Each client's queue of the channel's bytes for it, with what of them is not yet
    // written (at most a window, or the bridge ignores it and the client is cut off),
    // the window of what may be sent the bridge for it, and its two tasks.
    let mut clients: HashMap<u32, Caller> = HashMap::new();
    let mut next_id: u32 = 0;
    let idle_timer = tokio::time::sleep(idle);
    tokio::pin!(idle_timer);
    let ended = loop {
        tokio::select! {
            // A client already waiting is taken before the idle time can end the relay.
            biased;
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        // Out of descriptors, most likely: those in use go on.
                        eprintln!("bashc relay: cannot accept a client: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                // Checked before the bridge hears of it: a call carried to the host
                // runs there outside any sandbox of this machine.
                if let Err(refusal) = crate::peer::check(&stream) {
                    let words = refusal.words(host);
                    eprintln!("bashc relay {host}: refused a client: {words}");
                    tokio::spawn(refuse(stream, words));
                    continue;
                }
                let id = next_id;
                next_id = next_id.wrapping_add(1);
                if frames.send(MuxFrame::Open(id)).await.is_err() {
                    break "the channel closed".to_owned();
                }
                let (read, write) = stream.into_split();
                let (queue, chunks) = mpsc::unbounded_channel();
                let window = Window::new();
                let unwritten = Unwritten::new();
                let (frames_in, gone) = (frames.clone(), gone_tx.clone());
                let upstream = window.clone();
                let reader = tokio::spawn(async move {
                    forward(id, read, upstream, frames_in).await;
                    let _ = gone.send(id);
                });
                let writer =
                    tokio::spawn(deliver(id, write, chunks, unwritten.clone(), frames.clone()));
                clients.insert(id, Caller {
                    queue,
                    unwritten,
                    window,
                    tasks: [reader.abort_handle(), writer.abort_handle()],
                });
            }
            frame = from_bridge.next() => match frame {
                Some(Ok(MuxFrame::Data(id, bytes))) => {
                    let Some(client) = clients.get(&id) else { continue };
                    if let Err(e) = client.unwritten.add(id, bytes.len(), &far) {
                        // Cut off: its socket closes, the bridge hears Close; the
                        // bytes held for it go with its queue.
                        eprintln!("bashc relay {host}: {e}");
                        if let Some(client) = clients.remove(&id) {
                            client.cut();
                        }
                        if frames.send(MuxFrame::Close(id)).await.is_err() {
                            break "the channel closed".to_owned();
                        }
                    } else if client.queue.send(bytes).is_err() {
                        clients.remove(&id);
                    }
                }
                Some(Ok(MuxFrame::Ack(id, count))) => {
                    if let Some(client) = clients.get(&id)
                        && let Err(e) = client.window.give(id, count)
                    {
                        break format!("bad frame from the bridge: {e}");
                    }
                }
                Some(Ok(MuxFrame::Close(id))) => {
                    // Its writer sends what is queued, then closes the client's socket;
                    // what the client still sends has nowhere to go.
                    if let Some(client) = clients.remove(&id) {
                        client.window.close();
                    }
                }
                Some(Ok(MuxFrame::Open(_) | MuxFrame::Hello { .. })) => {}
                Some(Err(e)) => break format!("bad frame from the bridge: {e}"),
                None => {
                    let said = String::from_utf8_lossy(&said.lock().expect("never poisoned"))
                        .trim()
                        .to_owned();
                    break format!("the SSH channel ended ({})", if said.is_empty() { "ssh said nothing" } else { &said });
                }
            },
            Some(id) = gone.recv() => {
                clients.remove(&id);
            }
            () = &mut idle_timer, if clients.is_empty() => {
                break format!("no client for {idle:?}");
            }
        }
        // Idle time counts from the last thing that happened.
        idle_timer
            .as_mut()
            .reset(tokio::time::Instant::now() + idle);
    };
    leave(listener).await;
    ended
}

/// The error of a relay that could not serve `host`, said as the library says it.
fn remote_error(host: &str, message: String) -> ClientError {
    ClientError::Remote {
        host: host.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ending relay waits for the start lock without stopping its one thread: a
    /// task of the same runtime (here, the one that holds the lock) runs meanwhile. A
    /// relay that slept its thread instead kept that task from running, and gave up on
    /// the lock after the whole wait.
    #[tokio::test(flavor = "current_thread")]
    async fn the_wait_for_the_start_lock_lets_the_relays_other_tasks_run() {
        use rustix::fs::{FlockOperation, flock};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("relay.lock");
        let held = std::fs::File::create(&path).unwrap();
        flock(&held, FlockOperation::NonBlockingLockExclusive).unwrap();
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(held);
        });

        let asked = std::time::Instant::now();
        let lock = lock_for_leaving(&path).await;
        assert!(lock.is_some(), "no lock after {:?}", asked.elapsed());
        assert!(asked.elapsed() < LEAVE_LOCK_WAIT, "{:?}", asked.elapsed());
        assert!(release.is_finished());

        // Positive control of the give-up: a lock held throughout is given up on after
        // the wait, and the relay leaves without it.
        drop(lock);
        let again = std::fs::File::open(&path).unwrap();
        flock(&again, FlockOperation::NonBlockingLockExclusive).unwrap();
        let asked = std::time::Instant::now();
        assert!(lock_for_leaving(&path).await.is_none());
        assert!(asked.elapsed() >= LEAVE_LOCK_WAIT);
    }
}

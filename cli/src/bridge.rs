//! `bashc bridge` (DESIGN §14): the far end of `bashc --host`. It joins its stdin and
//! stdout (an SSH channel) to this machine's daemon, started if none answers, so the
//! framed protocol runs over SSH as it runs over the socket.
//!
//! A channel carries one connection, or, when it starts with the relay's magic
//! (`mux.rs`), many: the relay of the calling machine keeps the channel open and names
//! each of its clients' connections by an id, and the bridge opens one daemon
//! connection per id. So each caller keeps a daemon connection of its own, and closing
//! it (the caller killed) stops its foreground jobs and no one else's; the channel
//! closing closes them all.
//!
//! The daemon's frames pass through as bytes. The client's frames are decoded and
//! re-encoded, because three things the caller cannot know belong to this side: the
//! `Hello`'s pid becomes the bridge's own, so the bridge owns the remote session and a
//! dropped connection makes it linger; an `Exec` with no environment gets the bridge's
//! (the login environment of this host); and an `Exec` whose working directory is empty
//! or relative runs in, or under, the bridge's (the login directory).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bashc::protocol::codec::{ClientCodec, DaemonCodec};
use bashc::protocol::runtime;
use bashc::protocol::{
    ClientFrame, ErrorKind, ErrorReply, PROTOCOL_VERSION, PolicyCheck, Request, ServerFrame,
};
use bashc::{ClientError, Target, connect_checked};
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::mux::{
    MAGIC, MUX_VERSION, MuxCodec, MuxError, MuxFrame, Unwritten, Window, deliver, forward,
};

/// Why a bridge ended before its caller was done.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error(transparent)]
    Daemon(#[from] ClientError),
    #[error("bad frame from the caller: {0}")]
    Frame(#[from] bashc::protocol::FrameError),
    #[error("bad frame from the relay: {0}")]
    Mux(#[from] MuxError),
    #[error("cannot relay between the SSH channel and bashd: {0}")]
    Io(#[from] std::io::Error),
}

/// How many bytes of one relayed connection wait between the channel and its bridge.
const CONNECTION_BUFFER: usize = 256 * 1024;

/// Relays stdin and stdout to the daemon of `runtime_dir` until either side closes:
/// one connection, or a relay's many.
pub async fn bridge(runtime_dir: &Path) -> Result<(), BridgeError> {
    let mut stdin = tokio::io::stdin();
    let mut head = [0u8; MAGIC.len()];
    let mut read = 0;
    while read < head.len() {
        match stdin.read(&mut head[read..]).await? {
            0 => break,
            n => read += n,
        }
    }
    let home: Arc<Path> = std::env::current_dir()
        .unwrap_or_else(|_| PathBuf::from("/"))
        .into();
    let runtime_dir: Arc<Path> = runtime_dir.into();
    if head == MAGIC {
        return serve_mux(stdin, tokio::io::stdout(), runtime_dir, home).await;
    }
    // A single caller: its first bytes are the start of its `Hello`.
    let from_caller = std::io::Cursor::new(head[..read].to_vec()).chain(stdin);
    serve_connection(from_caller, tokio::io::stdout(), &runtime_dir, &home).await
}

/// One caller's connection to the daemon of `runtime_dir`, over any pair of streams.
async fn serve_connection<R, W>(
    from_caller: R,
    to_caller: W,
    runtime_dir: &Path,
    home: &Path,
) -> Result<(), BridgeError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut from_caller = FramedRead::new(from_caller, DaemonCodec::default());
    let mut to_caller = FramedWrite::new(to_caller, DaemonCodec::default());
    let hello = match from_caller.next().await {
        Some(Ok(ClientFrame::Hello(hello))) => hello,
        // The caller went away, or is not a bashc: nothing to relay.
        None => return Ok(()),
        Some(Ok(ClientFrame::Request(..))) => {
            let fatal = ErrorReply::new(
                ErrorKind::BadFrame,
                "the first frame of a connection must be Hello",
            );
            to_caller.send(ServerFrame::Fatal(fatal)).await?;
            return Ok(());
        }
        Some(Err(e)) => return Err(e.into()),
    };
    if hello.protocol != PROTOCOL_VERSION {
        to_caller
            .send(ServerFrame::Fatal(version_mismatch(
                &hello.client,
                hello.protocol,
            )))
            .await?;
        return Ok(());
    }
    let socket = match daemon_socket(runtime_dir).await {
        Ok(socket) => socket,
        Err(e) => {
            // Said to the caller, who names the host; the bridge serves on.
            let host = bashc::hostname();
            let fatal = ErrorReply::new(
                ErrorKind::Internal,
                format!("bashd on {host} does not answer and cannot be started there: {e}"),
            );
            to_caller.send(ServerFrame::Fatal(fatal)).await?;
            return Err(e.into());
        }
    };
    let (from_daemon, to_daemon) = socket.into_split();
    let mut to_daemon = FramedWrite::new(to_daemon, ClientCodec::default());
    let mut hello = hello;
    hello.pid = std::process::id();
    to_daemon.send(ClientFrame::Hello(hello)).await?;

    let upstream = async {
        while let Some(frame) = from_caller.next().await {
            let frame = match frame? {
                ClientFrame::Request(id, request) => {
                    ClientFrame::Request(id, localize(request, runtime_dir, home))
                }
                hello @ ClientFrame::Hello(_) => hello,
            };
            to_daemon.send(frame).await?;
        }
        Ok::<_, BridgeError>(())
    };
    let downstream = async {
        let mut to_caller = to_caller.into_inner();
        tokio::io::copy(&mut tokio::io::BufReader::new(from_daemon), &mut to_caller).await?;
        to_caller.flush().await?;
        Ok::<_, BridgeError>(())
    };
    // Either end closing ends the bridge: a caller gone (SSH dropped) closes the
    // daemon connection, which stops the connection's foreground jobs and leaves the
    // session to linger; a daemon gone closes the channel, and the caller sees it.
    tokio::select! {
        done = upstream => done,
        done = downstream => done,
    }
}

/// A relay's channel: answers its `Hello`, then serves each connection it opens with a
/// daemon connection of its own, until the channel closes (which closes them all).
async fn serve_mux<R, W>(
    from_relay: R,
    to_relay: W,
    runtime_dir: Arc<Path>,
    home: Arc<Path>,
) -> Result<(), BridgeError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut frames_in = FramedRead::new(from_relay, MuxCodec);
    let mut frames_out = FramedWrite::new(to_relay, MuxCodec);
    let (version, relay) = match frames_in.next().await {
        Some(Ok(MuxFrame::Hello { version, speaker })) => {
            (version, format!("the relay ({speaker})"))
        }
        Some(Ok(_)) | None => return Ok(()),
        Some(Err(e)) => return Err(e.into()),
    };
    frames_out
        .send(MuxFrame::Hello {
            version: MUX_VERSION,
            speaker: crate::mux::speaker(),
        })
        .await?;
    if version != MUX_VERSION {
        // The relay says which side to upgrade; it has this side's version now.
        return Ok(());
    }

    // The connections' pumps and the loop below send frames; one writer owns stdout.
    let (frames_tx, mut frames_rx) = mpsc::channel::<MuxFrame>(256);
    let writer = async move {
        while let Some(frame) = frames_rx.recv().await {
            frames_out.feed(frame).await?;
            // Write out what is queued now in one go, then flush.
            while let Ok(frame) = frames_rx.try_recv() {
                frames_out.feed(frame).await?;
            }
            frames_out.flush().await?;
        }
        Ok::<_, BridgeError>(())
    };
    let reader = async move {
        // Each connection's queue of the relay's bytes for its bridge, what of them is
        // not written yet (at most a window, or the relay ignores it and the connection
        // is cut off), the window of what may be sent the relay, and its two tasks.
        let mut connections: HashMap<u32, Relayed> = HashMap::new();
        while let Some(frame) = frames_in.next().await {
            match frame? {
                MuxFrame::Open(id) => {
                    let (near, far) = tokio::io::duplex(CONNECTION_BUFFER);
                    let (far_read, far_write) = tokio::io::split(far);
                    let (runtime_dir, home) = (runtime_dir.clone(), home.clone());
                    tokio::spawn(async move {
                        if let Err(e) =
                            serve_connection(far_read, far_write, &runtime_dir, &home).await
                        {
                            eprintln!("bashc bridge: connection {id}: {e}");
                        }
                    });
                    let (near_read, near_write) = tokio::io::split(near);
                    let window = Window::new();
                    let reader =
                        tokio::spawn(forward(id, near_read, window.clone(), frames_tx.clone()));
                    let (queue, chunks) = mpsc::unbounded_channel();
                    let unwritten = Unwritten::new();
                    let writer = tokio::spawn(deliver(
                        id,
                        near_write,
                        chunks,
                        unwritten.clone(),
                        frames_tx.clone(),
                    ));
                    connections.insert(
                        id,
                        Relayed {
                            queue,
                            unwritten,
                            window,
                            tasks: [reader.abort_handle(), writer.abort_handle()],
                        },
                    );
                }
                MuxFrame::Data(id, bytes) => {
                    let Some(connection) = connections.get(&id) else {
                        continue;
                    };
                    if let Err(e) = connection.unwritten.add(id, bytes.len(), &relay) {
                        // Cut off: its bridge reads the end and closes its daemon
                        // connection; the relay hears Close.
                        eprintln!("bashc bridge: {e}");
                        if let Some(connection) = connections.remove(&id) {
                            connection.window.close();
                            for task in connection.tasks {
                                task.abort();
                            }
                        }
                        if frames_tx.send(MuxFrame::Close(id)).await.is_err() {
                            break;
                        }
                    } else if connection.queue.send(bytes).is_err() {
                        connections.remove(&id);
                    }
                }
                MuxFrame::Ack(id, count) => {
                    if let Some(connection) = connections.get(&id) {
                        connection.window.give(id, count)?;
                    }
                }
                MuxFrame::Close(id) => {
                    // Its queue ends: what is in it is written, then the connection's
                    // bridge reads the end and closes its daemon connection. Its
                    // forward may wait for a window no one will give back.
                    if let Some(connection) = connections.remove(&id) {
                        connection.window.close();
                    }
                }
                MuxFrame::Hello { .. } => {}
            }
        }
        Ok::<_, BridgeError>(())
    };
    // The channel closing (the relay gone, SSH dropped) ends the process, and with it
    // every daemon connection.
    tokio::select! {
        done = reader => done,
        done = writer => done,
    }
}

/// One relayed connection, as the channel's reader holds it.
struct Relayed {
    /// The relay's bytes for it, written on by its `deliver` task.
    queue: mpsc::UnboundedSender<Bytes>,
    /// What of those is not written yet.
    unwritten: Unwritten,
    /// What may still be sent the relay for it.
    window: Window,
    /// Its `forward` and `deliver` tasks.
    tasks: [tokio::task::AbortHandle; 2],
}

/// The error a caller of another protocol version gets, naming both sides.
fn version_mismatch(client: &str, protocol: u32) -> ErrorReply {
    let host = bashc::hostname();
    let upgrade = if protocol < PROTOCOL_VERSION {
        "upgrade bashc on the calling machine"
    } else {
        "upgrade bashc and bashd on this host"
    };
    ErrorReply::new(
        ErrorKind::VersionMismatch,
        format!(
            "{client} speaks protocol {protocol}, but bashc {} on {host} speaks protocol {PROTOCOL_VERSION}: {upgrade} (`cargo install --path client` and `cargo install --path daemon` in a bashd checkout of the same version), then restart bashd there",
            env!("CARGO_PKG_VERSION")
        ),
    )
}

/// A connection to the daemon's socket, starting the daemon when none answers.
async fn daemon_socket(runtime_dir: &Path) -> Result<UnixStream, ClientError> {
    let path = runtime::socket_path(runtime_dir);
    // Checked as every client checks before it speaks: the caller's frames, with the
    // environment the bridge adds, go to this socket.
    let dirs = [runtime_dir];
    let connect = || connect_checked(&path, &dirs);
    match connect().await {
        Err(e) if e.is_not_running() => {}
        other => return other,
    }
    // Started (or found started by another) with a handshake of its own, then dropped:
    // the bridge's connection is a plain socket it relays.
    drop(bashc::connect(&Target::local_at(runtime_dir.to_owned())).await?);
    connect().await
}

/// Variables of the bridge's environment a job does not get: this daemon's runtime dir
/// is set apart, and `SSH_CLIENT` (and the older `SSH2_CLIENT`) makes bash, as Debian
/// and others build it, read `~/.bashrc` even for `bash -c`, since it takes itself for
/// the shell sshd started: 200 ms of a pyenv init before every remote `true`, for an
/// environment the login that started the bridge has set already. `SSH_CONNECTION`
/// says the same and stays.
const NOT_PASSED: &[&str] = &[runtime::RUNTIME_DIR_ENV, "SSH_CLIENT", "SSH2_CLIENT"];

/// What the caller left to this host: an `Exec`'s environment (the bridge's own, with
/// this daemon's runtime dir) and its working directory (relative to the login
/// directory), and the directory a policy check is judged in.
fn localize(mut request: Request, runtime_dir: &Path, home: &Path) -> Request {
    use std::os::unix::ffi::OsStrExt;
    if let Request::Exec(params) = &mut request {
        if params.env.is_empty() {
            let key = runtime::RUNTIME_DIR_ENV.as_bytes();
            params.env = std::env::vars_os()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .filter(|(k, _)| !NOT_PASSED.iter().any(|name| name.as_bytes() == k))
                .collect();
            params
                .env
                .push((key.to_vec(), runtime_dir.as_os_str().as_bytes().to_vec()));
        }
        localize_workdir(&mut params.workdir, home);
    }
    // A policy check is judged where an `exec` with the same workdir would run.
    if let Request::CheckPolicy(PolicyCheck {
        workdir: Some(workdir),
        ..
    }) = &mut request
    {
        localize_workdir(workdir, home);
    }
    request
}

/// A workdir the caller left to this host: none is the login directory, a relative one
/// is below it.
fn localize_workdir(workdir: &mut String, home: &Path) {
    if workdir.is_empty() {
        *workdir = home.to_string_lossy().into_owned();
    } else if !workdir.starts_with('/') {
        *workdir = home.join(&*workdir).to_string_lossy().into_owned();
    }
}

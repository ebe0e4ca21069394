//! `bashc bridge` (DESIGN §14): the far end of `bashc --host`. It joins its stdin and
//! stdout (an SSH channel) to this machine's daemon, started if none answers, so the
//! framed protocol runs over SSH as it runs over the socket.
//!
//! The daemon's frames pass through as bytes. The client's frames are decoded and
//! re-encoded, because three things the caller cannot know belong to this side: the
//! `Hello`'s pid becomes the bridge's own, so the bridge owns the remote session and a
//! dropped connection makes it linger; an `Exec` with no environment gets the bridge's
//! (the login environment of this host); and an `Exec` whose working directory is empty
//! or relative runs in, or under, the bridge's (the login directory).

use std::path::{Path, PathBuf};

use bashd_protocol::codec::{ClientCodec, DaemonCodec};
use bashd_protocol::runtime;
use bashd_protocol::{ClientFrame, ErrorKind, ErrorReply, PROTOCOL_VERSION, Request, ServerFrame};
use futures::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::autostart::connect_or_start;
use crate::client::ClientError;

/// Why a bridge ended before its caller was done.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error(transparent)]
    Daemon(#[from] ClientError),
    #[error("bad frame from the caller: {0}")]
    Frame(#[from] bashd_protocol::FrameError),
    #[error("cannot relay between the SSH channel and bashd: {0}")]
    Io(#[from] std::io::Error),
}

/// Relays stdin and stdout to the daemon of `runtime_dir` until either side closes.
pub async fn bridge(runtime_dir: &Path) -> Result<(), BridgeError> {
    let mut from_caller = FramedRead::new(tokio::io::stdin(), DaemonCodec::default());
    let mut to_caller = FramedWrite::new(tokio::io::stdout(), DaemonCodec::default());
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
    let socket = daemon_socket(runtime_dir).await?;
    let (from_daemon, to_daemon) = socket.into_split();
    let mut to_daemon = FramedWrite::new(to_daemon, ClientCodec::default());
    let mut hello = hello;
    hello.pid = std::process::id();
    to_daemon.send(ClientFrame::Hello(hello)).await?;

    let home = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let upstream = async {
        while let Some(frame) = from_caller.next().await {
            let frame = match frame? {
                ClientFrame::Request(id, request) => {
                    ClientFrame::Request(id, localize(request, runtime_dir, &home))
                }
                hello @ ClientFrame::Hello(_) => hello,
            };
            to_daemon.send(frame).await?;
        }
        Ok::<_, BridgeError>(())
    };
    let downstream = async {
        let mut stdout = tokio::io::stdout();
        tokio::io::copy(&mut tokio::io::BufReader::new(from_daemon), &mut stdout).await?;
        stdout.flush().await?;
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

/// The error a caller of another protocol version gets, naming both sides.
fn version_mismatch(client: &str, protocol: u32) -> ErrorReply {
    let host = crate::remote::hostname();
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
    let connect = || async {
        UnixStream::connect(&path)
            .await
            .map_err(|source| ClientError::Connect {
                path: path.clone(),
                source,
            })
    };
    match connect().await {
        Err(e) if e.is_not_running() => {}
        other => return other,
    }
    // Started (or found started by another) with a handshake of its own, then dropped:
    // the bridge's connection is a plain socket it relays.
    drop(connect_or_start(runtime_dir).await?);
    connect().await
}

/// What the caller left to this host: an `Exec`'s environment (the bridge's own, with
/// this daemon's runtime dir) and its working directory (relative to the login
/// directory).
fn localize(mut request: Request, runtime_dir: &Path, home: &Path) -> Request {
    use std::os::unix::ffi::OsStrExt;
    if let Request::Exec(params) = &mut request {
        if params.env.is_empty() {
            let key = runtime::RUNTIME_DIR_ENV.as_bytes();
            params.env = std::env::vars_os()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
                .filter(|(k, _)| k != key)
                .collect();
            params
                .env
                .push((key.to_vec(), runtime_dir.as_os_str().as_bytes().to_vec()));
        }
        if params.workdir.is_empty() {
            params.workdir = home.to_string_lossy().into_owned();
        } else if !params.workdir.starts_with('/') {
            params.workdir = home.join(&params.workdir).to_string_lossy().into_owned();
        }
    }
    request
}

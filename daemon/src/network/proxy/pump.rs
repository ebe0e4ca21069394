//! The proxy's copy loop: one direction of a connection, from a reader to a writer,
//! through a buffer that starts small and grows for a bulk transfer while a shared
//! budget lasts. Thousands of idle or chatty connections cost 8 KiB a direction; a
//! download that fills every read gets 64 KiB reads (an eighth of the system calls),
//! up to `LARGE_BUFFERS` at once.

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A direction's buffer to start with.
pub(super) const SMALL: usize = 8 * 1024;
/// A bulk direction's buffer.
pub(super) const LARGE: usize = 64 * 1024;
/// Large buffers at once, all connections together: 4 MiB.
pub(super) const LARGE_BUFFERS: usize = 64;

/// Copies `from` to `to` until `from` ends, then shuts `to`'s writing down; the bytes
/// copied. `large` is the budget of large buffers a bulk direction takes one from.
pub(super) async fn pump<R, W>(from: &mut R, to: &mut W, large: &Arc<Semaphore>) -> io::Result<u64>
where
    R: AsyncRead + Unpin + ?Sized,
    W: AsyncWrite + Unpin + ?Sized,
{
    let mut buffer = vec![0u8; SMALL];
    // Held while the large buffer is: given back when the direction ends.
    let mut permit: Option<OwnedSemaphorePermit> = None;
    let mut total = 0u64;
    loop {
        let read = from.read(&mut buffer).await?;
        if read == 0 {
            to.shutdown().await?;
            return Ok(total);
        }
        to.write_all(&buffer[..read]).await?;
        total += read as u64;
        if read == buffer.len()
            && permit.is_none()
            && let Ok(taken) = Arc::clone(large).try_acquire_owned()
        {
            permit = Some(taken);
            buffer = vec![0u8; LARGE];
        }
    }
}

/// Both directions of a tunnel until both have ended, each shutting its writer down at
/// its reader's end, as `tokio::io::copy_bidirectional` does.
pub(super) async fn both_ways(
    client: &mut tokio::net::TcpStream,
    server: &mut tokio::net::TcpStream,
    large: &Arc<Semaphore>,
) -> io::Result<()> {
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    tokio::try_join!(
        pump(&mut client_read, &mut server_write, large),
        pump(&mut server_read, &mut client_write, large),
    )?;
    Ok(())
}

//! The spawn frame on a Unix socket, as the zygote (`bashd-resident --zygote`) reads it
//! from the daemon and hands it on to a spare resident: a 4-byte little-endian length,
//! the [`Spawn`](crate::wire::Spawn)'s fields, and descriptors attached to the first
//! byte. Called by the zygote and its spares only; the daemon sends its frames with
//! rustix (`contain/zygote.rs`), in the same layout.
//!
//! A frame larger than the socket's buffer goes in parts: the descriptors with the
//! first, the rest after. A reader reads the header alone first, so that no byte of
//! the next frame, and none of its descriptors, is taken with it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::confine::Kit;
use crate::wire::{MAX_SPAWN_BYTES, MAX_SPAWN_FDS};

/// The most descriptors a frame carries: a spawn's, and the kit a spare is handed
/// with it. A spawn from the daemon with more is refused by its count.
pub const MOST_FDS: usize = MAX_SPAWN_FDS + Kit::MOST_FDS;

const SPACE: usize =
    // SAFETY: CMSG_SPACE only computes a size.
    unsafe { libc::CMSG_SPACE((MOST_FDS * size_of::<RawFd>()) as u32) } as usize;

/// Sends one frame of `body`, with `fds` attached to its first byte. On a socket with
/// a send timeout (`SO_SNDTIMEO`), a reader that takes nothing for that long ends the
/// send with `WouldBlock`, the frame partly sent.
pub fn send(socket: &impl AsRawFd, body: &[u8], fds: &[RawFd]) -> io::Result<()> {
    if fds.len() > MOST_FDS {
        return Err(io::Error::other("too many descriptors for a spawn"));
    }
    let socket = socket.as_raw_fd();
    let header = u32::try_from(body.len())
        .map_err(|_| io::Error::other("a spawn over 4 GiB"))?
        .to_le_bytes();
    let mut control = [0u64; SPACE.div_ceil(8)];
    let mut iov = [
        libc::iovec {
            iov_base: header.as_ptr().cast_mut().cast(),
            iov_len: header.len(),
        },
        libc::iovec {
            iov_base: body.as_ptr().cast_mut().cast(),
            iov_len: body.len(),
        },
    ];
    // SAFETY: msghdr is plain data, valid all zeros; its fields are set next.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = iov.as_mut_ptr();
    message.msg_iovlen = 2;
    if !fds.is_empty() {
        message.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a size.
        let used = unsafe { libc::CMSG_SPACE(size_of_val(fds) as u32) } as usize;
        message.msg_controllen = used as _;
        // SAFETY: the control buffer is this frame's, as large as CMSG_SPACE says for
        // MOST_FDS, walked with the kernel's own macros; `fds` are copied into it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&message);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of_val(fds) as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(cmsg).cast::<RawFd>(),
                fds.len(),
            );
        }
    }
    let sent = loop {
        // SAFETY: `message` points at `iov` and `control`, locals that outlive the call;
        // MSG_NOSIGNAL: a reader that died must not kill the sender with SIGPIPE.
        let n = unsafe { libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    // A large frame goes in parts; the descriptors went with the first.
    for (part, skip) in [(&header[..], sent.min(4)), (body, sent.saturating_sub(4))] {
        let mut rest = &part[skip.min(part.len())..];
        while !rest.is_empty() {
            // SAFETY: sends from `rest`, at most its length.
            let n =
                unsafe { libc::send(socket, rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            } else {
                rest = &rest[n as usize..];
            }
        }
    }
    Ok(())
}

/// Reads one frame: its body and the descriptors sent with it. `None` when the
/// writer's end has closed before a frame began.
pub fn receive(socket: &impl AsRawFd) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let socket = socket.as_raw_fd();
    let mut header = [0u8; 4];
    let mut control = [0u64; SPACE.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: header.as_mut_ptr().cast(),
        iov_len: header.len(),
    };
    // SAFETY: msghdr is plain data, valid all zeros; its fields are set next.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = SPACE as _;
    let got = loop {
        // SAFETY: `message` points at `iov` and `control`, locals that outlive the call.
        let n = unsafe { libc::recvmsg(socket, &mut message, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    if got == 0 {
        return Ok(None);
    }
    let mut descriptors = Vec::new();
    // SAFETY: the control buffer is the kernel's, walked with its own macros.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&message);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let count =
                    ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / size_of::<RawFd>();
                for i in 0..count {
                    descriptors.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&message, cmsg);
        }
    }
    read_exact(socket, &mut header[got..])?;
    let len = u32::from_le_bytes(header) as usize;
    if len > MAX_SPAWN_BYTES {
        return Err(io::Error::other(format!(
            "a spawn of {len} bytes, over the {MAX_SPAWN_BYTES} allowed: the daemon and the zygote disagree"
        )));
    }
    let mut body = vec![0; len];
    read_exact(socket, &mut body)?;
    Ok(Some((body, descriptors)))
}

fn read_exact(socket: RawFd, mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: reads into `buf`, at most its length.
        let n = unsafe { libc::read(socket, buf.as_mut_ptr().cast(), buf.len()) };
        match n {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n if n < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            n => buf = &mut buf[n as usize..],
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::time::{Duration, Instant};

    use super::*;

    /// A pipe whose write end goes in a frame: what is written through the received
    /// copy comes out of the read end kept here.
    fn pipe() -> (std::fs::File, OwnedFd) {
        let (read, write) = rustix::pipe::pipe().unwrap();
        (std::fs::File::from(read), write)
    }

    fn through(received: OwnedFd, read: &mut std::fs::File, text: &[u8]) -> Vec<u8> {
        std::fs::File::from(received).write_all(text).unwrap();
        let mut got = vec![0; text.len()];
        read.read_exact(&mut got).unwrap();
        got
    }

    extern "C" fn interrupted(_: libc::c_int) {}

    /// A frame over the socket's buffer, whose send a signal cuts short (as a stop and
    /// a continue of the zygote does: `sendmsg` then returns what it sent so far),
    /// goes on where it stopped and reads back whole, with its descriptors, in their
    /// order; the frame after it keeps its own descriptors.
    #[test]
    fn a_frame_larger_than_the_socket_buffer_reads_back_whole() {
        // SAFETY: a handler that does nothing, without SA_RESTART, so that a blocked
        // send returns; no other test here uses SIGUSR1.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = interrupted as *const () as usize;
            libc::sigemptyset(&mut action.sa_mask);
            assert_eq!(
                libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
                0
            );
        }
        let (writer, reader) = UnixStream::pair().unwrap();
        let buffer = rustix::net::sockopt::socket_send_buffer_size(&writer).unwrap();
        let big: Vec<u8> = (0..4 * buffer + 12345).map(|i| (i % 251) as u8).collect();
        let pipes: Vec<_> = (0..MOST_FDS).map(|_| pipe()).collect();
        let (mut last_read, last_write) = pipe();
        let sender = {
            let big = big.clone();
            let fds: Vec<RawFd> = pipes.iter().map(|(_, w)| w.as_raw_fd()).collect();
            let last = last_write.as_raw_fd();
            std::thread::spawn(move || {
                send(&writer, &big, &fds).unwrap();
                send(&writer, b"second", &[last]).unwrap();
            })
        };
        // Once the buffer holds part of the frame, the sender waits in its send.
        let queued = || {
            let mut n: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int.
            unsafe { libc::ioctl(reader.as_raw_fd(), libc::FIONREAD, &mut n) };
            n as usize
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while queued() < buffer / 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        for _ in 0..3 {
            // SAFETY: the sender thread is alive: it waits for this thread to read.
            unsafe {
                libc::pthread_kill(
                    std::os::unix::thread::JoinHandleExt::as_pthread_t(&sender),
                    libc::SIGUSR1,
                )
            };
            std::thread::sleep(Duration::from_millis(5));
        }
        let (body, fds) = receive(&reader).unwrap().unwrap();
        assert!(body == big, "the large body came back changed");
        assert_eq!(fds.len(), MOST_FDS);
        for (n, (fd, (read, _))) in fds.into_iter().zip(pipes).enumerate() {
            let mut read = read;
            let text = format!("descriptor {n}");
            assert_eq!(through(fd, &mut read, text.as_bytes()), text.as_bytes());
        }
        let (body, fds) = receive(&reader).unwrap().unwrap();
        assert_eq!(body, b"second");
        assert_eq!(fds.len(), 1);
        assert_eq!(
            through(fds.into_iter().next().unwrap(), &mut last_read, b"last"),
            b"last"
        );
        sender.join().unwrap();
        assert!(receive(&reader).unwrap().is_none(), "the writer closed");
    }

    /// A reader that takes nothing (a spare that was stopped) holds a sender with a
    /// send timeout no longer than that timeout; what it got of the frame ends short.
    #[test]
    fn a_send_to_a_reader_that_takes_nothing_times_out() {
        let (writer, reader) = UnixStream::pair().unwrap();
        writer
            .set_write_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let buffer = rustix::net::sockopt::socket_send_buffer_size(&writer).unwrap();
        let big = vec![7u8; 4 * buffer];
        let (_read, write) = pipe();
        let began = Instant::now();
        let error = send(&writer, &big, &[write.as_raw_fd()]).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::WouldBlock, "{error}");
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{:?}",
            began.elapsed()
        );
        drop(writer);
        let error = receive(&reader).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "{error}");
    }

    /// A frame whose length is over the limit is refused before its body is read.
    #[test]
    fn a_frame_over_the_limit_is_refused() {
        let (mut writer, reader) = UnixStream::pair().unwrap();
        writer
            .write_all(&((MAX_SPAWN_BYTES + 1) as u32).to_le_bytes())
            .unwrap();
        let error = receive(&reader).unwrap_err();
        assert!(error.to_string().contains("over the"), "{error}");
    }
}

//! `bashd-resident`: the first process of every job (DESIGN §4.2), and the zygote that
//! forks it.
//!
//! The daemon starts `bashd-resident --zygote` once, with a socket to itself on stdin.
//! The zygote is small and single-threaded and holds nothing of any job, so forking it
//! costs little; for each job the daemon sends it a [`Spawn`] with the job's
//! descriptors, and it forks the job's resident (`job.rs`) from itself. A job so pays
//! no exec and no dynamic link for its resident, only a fork of a small process
//! (`docs/PERFORMANCE.md`). The zygote reaps the residents it forked, and exits when
//! the daemon's end of its socket closes; residents it forked run on until their jobs
//! are done.
//!
//! Single-threaded, no async runtime: it must start fast and fork safely.

#![no_main]
// Every `unsafe` block of the resident says why it holds (issue 31).
#![warn(clippy::undocumented_unsafe_blocks)]

mod job;
mod kit;
mod pty;

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// The wire and the sandbox from resident-core, never the daemon's library: the
// resident links only what it runs, which keeps it small and quick to start.
use bashd_resident_core::confine;
use bashd_resident_core::wire::{MAX_SPAWN_BYTES, MAX_SPAWN_FDS, Report, SPAWN_FDS, Spawn};

/// Exit status when the resident cannot set the job up; the shell never ran.
pub(crate) const EXIT_SETUP: libc::c_int = 126;

enum Never {}

// No std runtime setup (stack guard from /proc/self/maps, signal stacks): every
// microsecond of the zygote's start is on the first job's path. The arguments still
// reach `std::env::args_os`, which glibc hands to std at load time.
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args == ["--probe-sandbox"] {
        // What the kernel offers the sandbox, tried on this process, which exits next.
        print!("{}", confine::probe());
        return 0;
    }
    if args != ["--zygote"] {
        eprintln!(
            "bashd-resident: only bashd starts this, as `bashd-resident --zygote` with a socket to it on stdin, or `--probe-sandbox`"
        );
        return 2;
    }
    match zygote() {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("bashd-resident: the zygote stopped: {e}");
            1
        }
    }
}

/// Forks a resident for each spawn the daemon sends, until the daemon's end closes.
fn zygote() -> io::Result<Never> {
    // A session of its own: a Ctrl-C for a `bashd` run in a terminal is not for it.
    // SAFETY: setsid takes no argument.
    unsafe { libc::setsid() };
    // `ps` and `top` tell it from the residents it forks, which share its command line.
    set_name(c"bashd-zygote");
    // SAFETY: fcntl duplicates stdin to a new descriptor this function owns.
    let socket = unsafe { OwnedFd::from_raw_fd(check(libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3))?) };
    let null = fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    // SAFETY: dup2 on descriptors this process holds.
    check(unsafe { libc::dup2(null.as_raw_fd(), 0) })?;
    drop(null);

    // SIGCHLD is read from a signalfd, here and in every resident forked from here.
    let sigfd = job::block_sigchld()?;
    // Once here, not again in every job.
    confine::prepare();
    let mut kits = kit::Store::default();
    loop {
        let mut fds = [
            libc::pollfd {
                fd: sigfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: socket.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: kits.poll_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: three pollfds, owned by this frame.
        if unsafe { libc::poll(fds.as_mut_ptr(), 3, -1) } < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // Before any reaping: the maker must still own its pid when its kit is opened.
        if fds[2].revents != 0 {
            kits.collect();
        }
        if fds[1].revents != 0 {
            let Some((body, descriptors)) = receive(&socket)? else {
                std::process::exit(0);
            };
            fork_resident(body, descriptors, &socket, &sigfd, &mut kits);
        }
        if fds[0].revents != 0 {
            job::drain(sigfd.as_raw_fd());
            // Residents report to the daemon themselves; their statuses say nothing more.
            // SAFETY: no status is read.
            while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        }
        // While the job just forked sets up, the next one's namespaces are made.
        kits.refill(&[socket.as_raw_fd(), sigfd.as_raw_fd()]);
    }
}

/// Forks the resident of one spawn. A spawn that cannot be read or forked is reported
/// on its control socket, which the daemon reads as the job's failure to start.
fn fork_resident(
    body: Vec<u8>,
    descriptors: Vec<OwnedFd>,
    socket: &OwnedFd,
    sigfd: &OwnedFd,
    kits: &mut kit::Store,
) {
    let control = descriptors.first().map(|fd| fd.as_raw_fd());
    let fail = |why: String| {
        if let Some(control) = control {
            job::report_on(control, &Report::Error(why));
        }
    };
    let spawn = match Spawn::decode(&body) {
        Ok(spawn) => spawn,
        Err(why) => return fail(format!("bashd-resident could not read the job: {why}")),
    };
    if descriptors.len() != SPAWN_FDS + usize::from(spawn.stdin_pipe) + usize::from(spawn.channel) {
        return fail("bashd-resident got the wrong descriptors for the job".into());
    }
    let mut descriptors = descriptors.into_iter();
    let mut next = || descriptors.next().expect("counted above");
    let sandbox = match spawn.sandbox.as_deref().map(confine::Spec::decode) {
        Some(Ok(spec)) => Some(spec),
        Some(Err(why)) => return fail(format!("bashd-resident could not read the job: {why}")),
        None => None,
    };
    let kit = sandbox
        .as_ref()
        .filter(|spec| spec.confines())
        .and_then(|spec| kits.take(spec.network_off));
    let fds = job::JobFds {
        control: next(),
        stdout: next(),
        stderr: next(),
        stdin: spawn.stdin_pipe.then(&mut next),
        channel: spawn.channel.then(&mut next),
    };
    // SAFETY: the zygote is single-threaded, so the child is a whole copy of it.
    match unsafe { libc::fork() } {
        0 => {
            // The zygote's own ends are not the job's.
            // SAFETY: closes the zygote's descriptors in the child, which does not use them.
            unsafe {
                libc::close(socket.as_raw_fd());
                libc::close(sigfd.as_raw_fd());
            }
            kits.forget();
            set_name(c"bashd-resident");
            let control = fds.control.as_raw_fd();
            match job::run(spawn, sandbox, kit, fds) {
                Ok(never) => match never {},
                Err(e) => {
                    job::report_on(control, &Report::Error(e.to_string()));
                    // SAFETY: _exit ends this process only.
                    unsafe { libc::_exit(EXIT_SETUP) }
                }
            }
        }
        -1 => fail(format!(
            "bashd-resident could not fork the job's resident: {}",
            io::Error::last_os_error()
        )),
        // The parent's copies of the job's descriptors close as they drop.
        _ => {}
    }
}

/// Reads one spawn frame: its body and the descriptors sent with it. `None` when the
/// daemon's end has closed.
fn receive(socket: &OwnedFd) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut header = [0u8; 4];
    // The descriptors come with the frame's first byte; the header is read alone, so
    // no byte of the next frame (and none of its descriptors) is taken with it.
    const SPACE: usize =
        // SAFETY: CMSG_SPACE only computes a size.
        unsafe { libc::CMSG_SPACE((MAX_SPAWN_FDS * size_of::<RawFd>()) as u32) } as usize;
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
        let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC) };
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

fn read_exact(socket: &OwnedFd, mut buf: &mut [u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: reads into `buf`, at most its length.
        let n = unsafe { libc::read(socket.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
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

/// The process's name (`comm`), as `ps` and `top` show it.
pub(crate) fn set_name(name: &std::ffi::CStr) {
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
}

fn check<T: Into<i64> + Copy>(result: T) -> io::Result<T> {
    if result.into() < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

//! `bashd-resident`: the first process of every job (DESIGN §4.2), and the zygote that
//! forks it.
//!
//! The daemon starts `bashd-resident --zygote` once, with a socket to itself on stdin.
//! The zygote is small and single-threaded and holds nothing of any job, so forking it
//! costs little; for each job the daemon sends it a [`Spawn`] with the job's
//! descriptors, and hands it to a spare resident (`bashd-spare`) it forked and set up
//! ahead, then forks the next spare; it forks a resident for the job itself only when
//! no spare is there. A job so pays no exec, no dynamic link and no fork for its
//! resident on its path (`docs/PERFORMANCE.md`, `docs/design/containment.md`). The zygote reaps the residents it forked, and exits when
//! the daemon's end of its socket closes; residents it forked run on until their jobs
//! are done.
//!
//! Single-threaded, no async runtime: it must start fast and fork safely.

#![no_main]

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

/// The most descriptors a frame carries: a spawn's, and the kit a spare is handed
/// with it. A spawn from the daemon with more is refused by its count.
const HANDED_FDS: usize = MAX_SPAWN_FDS + confine::Kit::MOST_FDS;

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
    // What the daemon was started with and did not mark close-on-exec (a shell's, a
    // service manager's, a test harness's descriptors) came along through its fork of
    // this process; every resident and every job would inherit it from here.
    close_from(3);
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
    let mut spare = Spare::fork(&[socket.as_raw_fd(), sigfd.as_raw_fd()], &mut kits);
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
        let own = |spare: &Option<Spare>| {
            let mut own = vec![socket.as_raw_fd(), sigfd.as_raw_fd()];
            own.extend(spare.as_ref().map(|s| s.socket.as_raw_fd()));
            own
        };
        if fds[1].revents != 0 {
            let Some((body, descriptors)) = receive(&socket)? else {
                std::process::exit(0);
            };
            let (counted, kit) = inspect(&body, descriptors.len(), &mut kits);
            // Only a spawn with its own count of descriptors: the spare takes those
            // after them for the kit.
            // A frame with a wrong count goes to a resident of its own, which refuses
            // it, and the spare waits for the next.
            let handed = counted
                && spare
                    .take()
                    .is_some_and(|taker| taker.hand(&body, &descriptors, kit.as_ref()).is_ok());
            // The zygote's copies of what was handed close as they drop; a spare that
            // died (killed by someone) leaves the job to a resident forked for it.
            if !handed {
                fork_resident(&body, descriptors, kit, &own(&None), &mut kits);
            }
        }
        if fds[0].revents != 0 {
            job::drain(sigfd.as_raw_fd());
            // Residents report to the daemon themselves; their statuses say nothing more.
            // SAFETY: no status is read.
            while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        }
        // While the job just handed over or forked sets up, the next one's resident
        // and namespaces are made.
        if spare.is_none() {
            spare = Spare::fork(&own(&None), &mut kits);
        }
        kits.refill(&own(&spare));
    }
}

/// A resident forked ahead, set up as far as no job is needed for (`job::Base`: its
/// session, its subreaper bit), and waiting on a socket for the next job's spawn, so
/// that a job's path has no fork of the zygote and none of that setup on it. It
/// exits when the zygote's end closes. A spare holds no job and nothing of one until
/// it is handed its job, with the kit of namespaces the zygote made ahead for it.
struct Spare {
    socket: OwnedFd,
}

impl Spare {
    /// Forks a spare; `close` are the zygote's own descriptors, which it closes first.
    /// `None` when that fails: jobs get a resident forked for each, as without one.
    fn fork(close: &[RawFd], kits: &mut kit::Store) -> Option<Spare> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().ok()?;
        // SAFETY: the zygote is single-threaded, so the child is a whole copy of it.
        match unsafe { libc::fork() } {
            0 => {
                drop(ours);
                for &fd in close {
                    // SAFETY: the zygote's descriptors, not the spare's to use.
                    unsafe { libc::close(fd) };
                }
                kits.forget();
                set_name(c"bashd-spare");
                let theirs = OwnedFd::from(theirs);
                // A failed setup is the job's to hear, on its control socket.
                let base = job::Base::new();
                let got = receive(&theirs);
                drop(theirs);
                match got {
                    Ok(Some((body, descriptors))) => {
                        set_name(c"bashd-resident");
                        start(base, &body, descriptors, KitFrom::Frame)
                    }
                    // SAFETY: _exit ends this process only.
                    _ => unsafe { libc::_exit(0) },
                }
            }
            -1 => None,
            _ => Some(Spare {
                socket: OwnedFd::from(ours),
            }),
        }
    }

    /// Hands a spawn to the spare, which runs it from there: the frame as it came,
    /// the job's descriptors and, after them, the kit's.
    fn hand(
        self,
        body: &[u8],
        descriptors: &[OwnedFd],
        kit: Option<&confine::Kit>,
    ) -> io::Result<()> {
        let header = (body.len() as u32).to_le_bytes();
        let mut fds: Vec<RawFd> = descriptors.iter().map(|fd| fd.as_raw_fd()).collect();
        fds.extend(kit.map(|kit| kit.raw_fds()).unwrap_or_default());
        send_frame(&self.socket, &header, body, &fds)
    }
}

/// What the zygote reads of a spawn before it hands it on: whether it came with the
/// descriptors its fields count, and, for a confined job, the kit of namespaces the
/// store has ready for it, taken here so that no other job is handed it.
fn inspect(body: &[u8], descriptors: usize, kits: &mut kit::Store) -> (bool, Option<confine::Kit>) {
    let Ok(spawn) = Spawn::decode(body) else {
        return (false, None);
    };
    let counted =
        descriptors == SPAWN_FDS + usize::from(spawn.stdin_pipe) + usize::from(spawn.channel);
    let kit = spawn
        .sandbox
        .and_then(|spec| confine::Spec::decode(&spec).ok())
        .filter(|spec| spec.confines())
        .and_then(|spec| kits.take(spec.network_off));
    (counted, kit)
}

/// Forks the resident of one spawn, with its kit.
fn fork_resident(
    body: &[u8],
    descriptors: Vec<OwnedFd>,
    kit: Option<confine::Kit>,
    close: &[RawFd],
    kits: &mut kit::Store,
) {
    // SAFETY: the zygote is single-threaded, so the child is a whole copy of it.
    match unsafe { libc::fork() } {
        0 => {
            // The zygote's own ends are not the job's.
            for &fd in close {
                // SAFETY: the zygote's descriptors, not the resident's to use.
                unsafe { libc::close(fd) };
            }
            kits.forget();
            set_name(c"bashd-resident");
            start(job::Base::new(), body, descriptors, KitFrom::Zygote(kit))
        }
        -1 => {
            if let Some(control) = descriptors.first() {
                job::report_on(
                    control.as_raw_fd(),
                    &Report::Error(format!(
                        "bashd-resident could not fork the job's resident: {}",
                        io::Error::last_os_error()
                    )),
                );
            }
        }
        // The parent's copies of the job's descriptors and of the kit close as they
        // drop.
        _ => {}
    }
}

/// Where a resident's kit of namespaces comes from.
enum KitFrom {
    /// The zygote that forked it took it from its store.
    Zygote(Option<confine::Kit>),
    /// A spare: after the job's descriptors, where the zygote put it.
    Frame,
}

/// Runs one spawn's job in this process, a resident just forked or a spare that was
/// handed it. A spawn that cannot be read or set up is reported on its control
/// socket, which the daemon reads as the job's failure to start.
fn start(
    base: io::Result<job::Base>,
    body: &[u8],
    mut descriptors: Vec<OwnedFd>,
    kit: KitFrom,
) -> ! {
    let control = descriptors.first().map(|fd| fd.as_raw_fd());
    let fail = |why: String| -> ! {
        if let Some(control) = control {
            job::report_on(control, &Report::Error(why));
        }
        // SAFETY: _exit ends this process only.
        unsafe { libc::_exit(EXIT_SETUP) }
    };
    let spawn = match Spawn::decode(body) {
        Ok(spawn) => spawn,
        Err(why) => fail(format!("bashd-resident could not read the job: {why}")),
    };
    let wrong = || -> ! { fail("bashd-resident got the wrong descriptors for the job".into()) };
    let expected = SPAWN_FDS + usize::from(spawn.stdin_pipe) + usize::from(spawn.channel);
    let kit = match kit {
        KitFrom::Zygote(kit) => kit,
        KitFrom::Frame if descriptors.len() > expected => {
            let kit = confine::Kit::from_fds(descriptors.split_off(expected));
            Some(kit.unwrap_or_else(|| wrong()))
        }
        KitFrom::Frame => None,
    };
    if descriptors.len() != expected {
        wrong();
    }
    let mut descriptors = descriptors.into_iter();
    let mut next = || descriptors.next().expect("counted above");
    let sandbox = match spawn.sandbox.as_deref().map(confine::Spec::decode) {
        Some(Ok(spec)) => Some(spec),
        Some(Err(why)) => fail(format!("bashd-resident could not read the job: {why}")),
        None => None,
    };
    let fds = job::JobFds {
        control: next(),
        stdout: next(),
        stderr: next(),
        stdin: spawn.stdin_pipe.then(&mut next),
        channel: spawn.channel.then(&mut next),
    };
    match base.and_then(|base| job::run(base, spawn, sandbox, kit, fds)) {
        Ok(never) => match never {},
        Err(e) => fail(e.to_string()),
    }
}

/// Sends one frame, its descriptors attached to its first byte, as the daemon sends
/// spawns to the zygote.
fn send_frame(socket: &OwnedFd, header: &[u8; 4], body: &[u8], fds: &[RawFd]) -> io::Result<()> {
    const SPACE: usize =
        // SAFETY: CMSG_SPACE only computes a size.
        unsafe { libc::CMSG_SPACE((HANDED_FDS * size_of::<RawFd>()) as u32) } as usize;
    if fds.len() > HANDED_FDS {
        return Err(io::Error::other("too many descriptors for a spawn"));
    }
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
    message.msg_control = control.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE only computes a size.
    let used = unsafe { libc::CMSG_SPACE(size_of_val(fds) as u32) } as usize;
    message.msg_controllen = used as _;
    // SAFETY: the control buffer is this frame's, as large as CMSG_SPACE says, walked
    // with the kernel's own macros; `fds` are copied into it.
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
    let sent = loop {
        // SAFETY: `message` points at `iov` and `control`, locals that outlive the call;
        // MSG_NOSIGNAL: a spare that died must not kill the zygote with SIGPIPE.
        let n = unsafe { libc::sendmsg(socket.as_raw_fd(), &message, libc::MSG_NOSIGNAL) };
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
            let n = unsafe {
                libc::send(
                    socket.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
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

/// Reads one spawn frame: its body and the descriptors sent with it. `None` when the
/// daemon's end has closed.
fn receive(socket: &OwnedFd) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut header = [0u8; 4];
    // The descriptors come with the frame's first byte; the header is read alone, so
    // no byte of the next frame (and none of its descriptors) is taken with it.
    const SPACE: usize =
        // SAFETY: CMSG_SPACE only computes a size.
        unsafe { libc::CMSG_SPACE((HANDED_FDS * size_of::<RawFd>()) as u32) } as usize;
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

/// Closes every descriptor from `first` on: `close_range` (Linux 5.9), else each one
/// `/proc/self/fd` lists.
fn close_from(first: RawFd) {
    // SAFETY: close_range takes integers only; it closes descriptors nothing here uses.
    if unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            0,
        )
    } == 0
    {
        return;
    }
    let Ok(entries) = fs::read_dir("/proc/self/fd") else {
        return;
    };
    let open: Vec<RawFd> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd >= first)
        .collect();
    for fd in open {
        // SAFETY: a descriptor of this process that nothing here uses (the listing's
        // own is closed already, and closing it again fails harmlessly).
        unsafe { libc::close(fd) };
    }
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

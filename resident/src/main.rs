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

mod job;
mod kit;
mod pty;

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::ExitCode;
use std::time::Duration;

// The wire and the sandbox from resident-core, never the daemon's library: the
// resident links only what it runs, which keeps it small and quick to start.
use bashd_resident_core::confine;
use bashd_resident_core::frame;
use bashd_resident_core::wire::{Report, Spawn};

/// Exit status when the resident cannot set the job up; the shell never ran.
pub(crate) const EXIT_SETUP: libc::c_int = 126;

enum Never {}

fn main() -> ExitCode {
    // std's start ignores SIGPIPE; an ignored signal stays ignored across exec, and
    // every job's shell is exec'd from a fork of this process: `yes | head` must end
    // `yes` with SIGPIPE, as in a terminal.
    // SAFETY: sets a signal's disposition before any thread exists.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args == ["--probe-sandbox"] {
        // What the kernel offers the sandbox, tried on this process, which exits next.
        print!("{}", confine::probe());
        return ExitCode::SUCCESS;
    }
    if let [mode, rest @ ..] = args.as_slice()
        && mode == "--network-holder"
    {
        return network_holder(rest);
    }
    if args != ["--zygote"] {
        eprintln!(
            "bashd-resident: only bashd starts this, as `bashd-resident --zygote` or `--network-holder [allow-list]` with a socket to it on stdin, or `--probe-sandbox`"
        );
        return ExitCode::from(2);
    }
    match zygote() {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("bashd-resident: the zygote stopped: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Holds one session network (`confine::network::hold`) with the daemon's socket on
/// stdin, until the daemon's end closes. A mode of the resident's binary rather than
/// a fork of the zygote: the daemon starts it per session network, and its exit is
/// tied to that socket alone.
fn network_holder(rest: &[OsString]) -> ExitCode {
    let allow_list = match rest {
        [] => false,
        [word] if word == "allow-list" => true,
        _ => {
            eprintln!("bashd-resident: --network-holder takes `allow-list` or nothing");
            return ExitCode::from(2);
        }
    };
    // SAFETY: setsid takes no argument.
    unsafe { libc::setsid() };
    set_name(c"bashd-network");
    close_from(3);
    // SAFETY: fcntl duplicates stdin to a new descriptor this function owns.
    let socket = match check(unsafe { libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3) }) {
        // SAFETY: the descriptor was just made, and is owned by nothing else.
        Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
        Err(e) => {
            eprintln!("bashd-resident: the network holder has no socket on stdin: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Ok(null) = fs::File::options().read(true).write(true).open("/dev/null") {
        // SAFETY: dup2 on descriptors this process holds.
        unsafe { libc::dup2(null.as_raw_fd(), 0) };
    }
    match confine::network::hold(&socket, allow_list) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bashd-resident: the network holder stopped: {e}");
            ExitCode::FAILURE
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
        // Every descriptor of the zygote's own, which a process it forks closes first.
        let own = |spare: &Option<Spare>| {
            let mut own = vec![socket.as_raw_fd(), sigfd.as_raw_fd()];
            own.extend(spare.as_ref().map(|s| s.socket.as_raw_fd()));
            own
        };
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
            // A spare writes nothing: its socket wakes the zygote only when it closes,
            // when the spare died (killed by someone).
            libc::pollfd {
                fd: spare.as_ref().map_or(-1, |s| s.socket.as_raw_fd()),
                events: 0,
                revents: 0,
            },
        ];
        // Woken, when idle, to let go of the kits and slots that expire (`kit::Store`).
        let timeout = kits.next_expiry().map_or(-1, |wait| {
            i32::try_from(wait.as_millis().saturating_add(1)).unwrap_or(i32::MAX)
        });
        // SAFETY: four pollfds, owned by this frame.
        if unsafe { libc::poll(fds.as_mut_ptr(), 4, timeout) } < 0 {
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
        if fds[3].revents != 0 {
            // The next spare is forked below, before the next job comes.
            spare = None;
        }
        if fds[1].revents != 0 {
            let Some((body, descriptors)) = frame::receive(&socket)? else {
                std::process::exit(0);
            };
            let (counted, kit, reads) = inspect(&body, &descriptors, &mut kits);
            // Only a spawn with its own count of descriptors: the spare takes those
            // after them for the kit.
            // A frame with a wrong count goes to a resident of its own, which refuses
            // it, and the spare waits for the next.
            let handed = counted
                && spare.take().is_some_and(|taker| {
                    taker.hand(&body, &descriptors, kit.as_ref(), reads.as_ref())
                });
            // The zygote's copies of what was handed close as they drop; a spare that
            // died, or could not take the frame, leaves the job to a resident forked
            // for it.
            if !handed {
                fork_resident(&body, descriptors, (kit, reads), &own(&spare), &mut kits);
            }
        }
        if fds[0].revents != 0 {
            job::drain(sigfd.as_raw_fd());
            // Residents report to the daemon themselves; their statuses say nothing more.
            // SAFETY: no status is read.
            while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
        }
        // While the job just handed over or forked sets up, the next one's resident
        // and namespaces are made. Forked once the handed job's shell had started
        // instead, the next spare shortened the job's start but lengthened its end
        // as much or more on a loaded machine (measured: `docs/PERFORMANCE.md`).
        if spare.is_none() {
            spare = Spare::fork(&own(&None), &mut kits);
        }
        // Kits, read rules and staged mounts are made ahead only while no spawn
        // waits: the next job is handed first.
        if !readable(&socket) {
            kits.refill(&own(&spare));
        }
    }
}

/// How long a spare may take to read the frame it is handed (one larger than the
/// socket's buffer, which it reads as it comes): a spare that was stopped is killed
/// then, and the job gets a resident forked for it. It reads at once otherwise.
const HAND_TIMEOUT: Duration = Duration::from_millis(100);

/// A resident forked ahead, set up as far as no job is needed for (`job::Base`: its
/// session, its subreaper bit), and waiting on a socket for the next job's spawn, so
/// that a job's path has no fork of the zygote and none of that setup on it. It
/// exits when the zygote's end closes. A spare holds no job and nothing of one until
/// it is handed its job, with the kit of namespaces the zygote made ahead for it.
struct Spare {
    socket: OwnedFd,
    /// Its pid, the zygote's unreaped child while its socket is open.
    pid: libc::pid_t,
}

impl Spare {
    /// Forks a spare; `close` are the zygote's own descriptors, which it closes first.
    /// `None` when that fails: jobs get a resident forked for each, as without one.
    fn fork(close: &[RawFd], kits: &mut kit::Store) -> Option<Spare> {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().ok()?;
        // A frame larger than the socket's buffer waits for the spare to read it.
        ours.set_write_timeout(Some(HAND_TIMEOUT)).ok()?;
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
                let got = frame::receive(&theirs);
                drop(theirs);
                match got {
                    Ok(Some((body, descriptors))) if !body.is_empty() => {
                        set_name(c"bashd-resident");
                        // The zygote's byte first: whether the kit is staged.
                        let staged = body[0] == 1;
                        start(base, &body[1..], descriptors, KitFrom::Frame { staged })
                    }
                    // SAFETY: _exit ends this process only.
                    _ => unsafe { libc::_exit(0) },
                }
            }
            -1 => None,
            pid => Some(Spare {
                socket: OwnedFd::from(ours),
                pid,
            }),
        }
    }

    /// Hands a spawn to the spare, which runs it from there: the frame as it came,
    /// the job's descriptors and, after them, its read rules and the kit's. False when the spare did not
    /// take it: it died, or it took none of it for [`HAND_TIMEOUT`] and was killed
    /// (what it got of the frame, descriptors included, goes with it).
    fn hand(
        self,
        body: &[u8],
        descriptors: &[OwnedFd],
        kit: Option<&confine::Kit>,
        reads: Option<&confine::ReadRules>,
    ) -> bool {
        let mut fds: Vec<RawFd> = descriptors.iter().map(|fd| fd.as_raw_fd()).collect();
        fds.extend(reads.map(confine::ReadRules::raw_fd));
        fds.extend(kit.map(|kit| kit.raw_fds()).unwrap_or_default());
        // One byte before the frame as it came: whether the kit holds the job's mounts
        // already (`confine::Staged`), which its descriptors do not say.
        let mut framed = Vec::with_capacity(body.len() + 1);
        framed.push(u8::from(kit.is_some_and(confine::Kit::staged)));
        framed.extend_from_slice(body);
        match frame::send(&self.socket, &framed, &fds) {
            Ok(()) => true,
            Err(e) => {
                if e.kind() == io::ErrorKind::WouldBlock {
                    // Its end of the socket is open, so it has not exited, and the
                    // zygote reaps only in its loop: the pid is still this spare's.
                    // SAFETY: kill takes integers only.
                    unsafe { libc::kill(self.pid, libc::SIGKILL) };
                }
                false
            }
        }
    }
}

/// What the zygote reads of a spawn before it hands it on: whether it came with the
/// descriptors its fields count, and, for a confined job, the kit of namespaces the
/// store has ready for it, taken here so that no other job is handed it, and the read
/// rules made ahead for its `deny_read`.
fn inspect(
    body: &[u8],
    descriptors: &[OwnedFd],
    kits: &mut kit::Store,
) -> (bool, Option<confine::Kit>, Option<confine::ReadRules>) {
    let Ok(spawn) = Spawn::decode(body) else {
        return (false, None, None);
    };
    let counted = descriptors.len() == spawn.descriptors();
    let Some(spec) = spawn
        .sandbox
        .and_then(|spec| confine::Spec::decode(&spec).ok())
        .filter(|spec| spec.confines())
    else {
        return (counted, None, None);
    };
    // A job in a session network enters its user namespace first, from where only a
    // kit made inside it can be entered; the user namespace comes second last.
    let session = (spawn.network && counted).then(|| &descriptors[descriptors.len() - 2]);
    let staged = (counted || !spawn.network)
        .then(|| kits.take_staged(&spec, &spawn.workdir, spawn.pty, session))
        .flatten();
    let kit = match (staged, session) {
        (Some(kit), _) => Some(kit),
        (None, Some(user)) => kits.take_in(user),
        (None, None) if spawn.network => None,
        (None, None) => kits.take(spec.network_off),
    };
    (counted, kit, kits.take_reads(&spec))
}

/// Forks the resident of one spawn, with its kit and read rules.
fn fork_resident(
    body: &[u8],
    descriptors: Vec<OwnedFd>,
    (kit, reads): (Option<confine::Kit>, Option<confine::ReadRules>),
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
            start(
                job::Base::new(),
                body,
                descriptors,
                KitFrom::Zygote(kit, reads),
            )
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

/// Where a resident's kit of namespaces and read rules come from.
enum KitFrom {
    /// The zygote that forked it took them from its store.
    Zygote(Option<confine::Kit>, Option<confine::ReadRules>),
    /// A spare: after the job's descriptors, where the zygote put them; `staged` as
    /// the zygote's byte before the frame said.
    Frame { staged: bool },
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
    let expected = spawn.descriptors();
    let (kit, reads) = match kit {
        KitFrom::Zygote(kit, reads) => (kit, reads),
        KitFrom::Frame { staged } if descriptors.len() > expected => {
            let mut extra = descriptors.split_off(expected);
            // The read rules first, when there are some; the kit's namespaces after.
            let reads = match confine::ReadRules::from_fd(extra.remove(0)) {
                Ok(reads) => Some(reads),
                Err(fd) => {
                    extra.insert(0, fd);
                    None
                }
            };
            let kit = (!extra.is_empty()).then(|| {
                let mut kit = confine::Kit::from_fds(extra).unwrap_or_else(|| wrong());
                kit.set_staged(staged);
                kit
            });
            (kit, reads)
        }
        KitFrom::Frame { .. } => (None, None),
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
        network: spawn
            .network
            .then(|| confine::SessionNet::new(next(), next())),
    };
    match base.and_then(|base| job::run(base, spawn, sandbox, (kit, reads), fds)) {
        Ok(never) => match never {},
        Err(e) => fail(e.to_string()),
    }
}

/// Whether `fd` has something to read now.
fn readable(fd: &OwnedFd) -> bool {
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd of this frame, no wait.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready > 0
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

//! `bashd-resident`: the first process of a job (DESIGN §4.2). It makes the job a
//! subtree the job cannot leave, and ends that subtree when asked or when the daemon
//! dies:
//!
//! - it leads a session of its own and is a child subreaper, so a process of the job
//!   that double-forks, calls `setsid` or clears its environment is reparented to this
//!   resident when its parent exits, never to the daemon or init;
//! - with `--cgroup DIR` it joins that cgroup before it forks the shell, so the job's
//!   first instruction already runs inside it;
//! - it forks the shell (`PROGRAM ARGS...`) into a process group of its own, reaps
//!   whatever is reparented to it, and exits only when it has no child left, which,
//!   being a subreaper, means no process of the job is left;
//! - its stdin is a socket to the daemon (see `wire`, the daemon's `resident.rs`): it reports the shell's pid,
//!   the shell's status and, at the end, what the job used; it signals every process of
//!   the subtree when the daemon says so, and SIGKILLs the subtree when the daemon's end
//!   closes, which is how a job never outlives a daemon that died.
//!
//! The daemon starts it with `posix_spawn` (no copy of the daemon's memory), which is
//! why the session, limits and cgroup are set here rather than between fork and exec.
//! Single-threaded, no async runtime: it must start fast and fork safely.

#![no_main]

use std::collections::HashSet;
use std::ffi::{CString, OsString};
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};

// The wire module alone, not the daemon's library: the resident links only what it
// runs, which keeps it small and quick to start.
#[path = "../resident.rs"]
#[allow(dead_code)] // The daemon's half (reading reports, writing orders) goes unused here.
mod wire;

use wire::{Order, Report, Usage};

// The sandbox's own files, for the same reason: the daemon's side of it stays there.
#[path = "../sandbox/confine/mod.rs"]
#[allow(dead_code)] // The daemon's half (encoding the spec, reading the probe) goes unused here.
mod confine;

/// How often a subtree being signalled or killed is walked again for processes forked
/// or reparented meanwhile.
const KILL_ROUND_MS: i32 = 10;

/// Exit status when the resident cannot set the job up; the shell never ran.
const EXIT_SETUP: libc::c_int = 126;

// No std runtime setup (stack guard from /proc/self/maps, signal stacks): the resident
// starts for every job, and every microsecond of it is on the job's path. The
// arguments still reach `std::env::args_os`, which glibc hands to std at load time.
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == "--probe-sandbox")
    {
        print!("{}", confine::probe());
        return 0;
    }
    let options = match Options::parse(std::env::args_os().skip(1).collect()) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("bashd-resident: {e}");
            return 2;
        }
    };
    match run(options) {
        Ok(never) => match never {},
        Err(e) => {
            // The daemon names it in the job's failure; stderr is for a person running
            // the resident by hand.
            let report = Report::Error(e.to_string()).to_string();
            let control = CONTROL.load(Ordering::Relaxed);
            unsafe {
                libc::send(
                    control,
                    report.as_ptr().cast(),
                    report.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            eprintln!("bashd-resident: {e}");
            EXIT_SETUP
        }
    }
}

/// The control socket's descriptor: stdin at first, a higher one once the shell's
/// stdin is set up. For the report of a setup that failed.
static CONTROL: AtomicI32 = AtomicI32::new(0);

/// `[--cgroup DIR] [--nofile SOFT:HARD] [--rlimit-as BYTES] [--oom-score-adj N]
/// [--sandbox SPEC] -- PROGRAM ARGS...`, or `--probe-sandbox` alone.
struct Options {
    cgroup: Option<PathBuf>,
    nofile: Option<(u64, u64)>,
    rlimit_as: Option<u64>,
    oom_score_adj: Option<i32>,
    program: Vec<CString>,
    /// What confines the job (`confine::Spec::encode`), applied to the resident
    /// itself before it forks the shell, so the shell and all it starts inherit it.
    sandbox: Option<confine::Spec>,
}

impl Options {
    fn parse(args: Vec<OsString>) -> Result<Options, String> {
        let mut options = Options {
            cgroup: None,
            nofile: None,
            rlimit_as: None,
            oom_score_adj: None,
            program: Vec::new(),
            sandbox: None,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = |name: &str| {
                args.next()
                    .ok_or_else(|| format!("{name} needs a value"))
                    .map(|v| v.to_string_lossy().into_owned())
            };
            match arg.to_str() {
                Some("--cgroup") => options.cgroup = Some(value("--cgroup")?.into()),
                Some("--nofile") => {
                    let text = value("--nofile")?;
                    let (soft, hard) = text
                        .split_once(':')
                        .and_then(|(s, h)| Some((s.parse().ok()?, h.parse().ok()?)))
                        .ok_or_else(|| format!("--nofile {text}: expected SOFT:HARD"))?;
                    options.nofile = Some((soft, hard));
                }
                Some("--rlimit-as") => {
                    let text = value("--rlimit-as")?;
                    options.rlimit_as = Some(
                        text.parse()
                            .map_err(|_| format!("--rlimit-as {text}: not a number of bytes"))?,
                    );
                }
                Some("--oom-score-adj") => {
                    let text = value("--oom-score-adj")?;
                    options.oom_score_adj = Some(
                        text.parse()
                            .map_err(|_| format!("--oom-score-adj {text}: not a number"))?,
                    );
                }
                Some("--sandbox") => {
                    let spec = args.next().ok_or("--sandbox needs a value")?;
                    options.sandbox = Some(confine::Spec::decode(spec.as_bytes())?);
                }
                Some("--") => {
                    options.program = args
                        .by_ref()
                        .map(|a| CString::new(a.as_bytes()).map_err(|_| "a NUL in an argument"))
                        .collect::<Result<_, _>>()?;
                }
                _ => return Err(format!("unknown argument {arg:?}")),
            }
        }
        if options.program.is_empty() {
            return Err("no program after --".into());
        }
        Ok(options)
    }
}

enum Never {}

fn run(options: Options) -> io::Result<Never> {
    // The posix_spawned child is no group leader, so this cannot fail with EPERM.
    check(unsafe { libc::setsid() })?;
    check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })?;
    if let Some(dir) = &options.cgroup {
        // "0" is the writer itself; the shell forked next is born in the cgroup.
        fs::write(dir.join("cgroup.procs"), "0").map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot join the job's cgroup {}: {e}", dir.display()),
            )
        })?;
    }
    if let Some((soft, hard)) = options.nofile {
        let limit = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) })?;
    }
    if let Some(adj) = options.oom_score_adj {
        // Raising it needs no privilege; a kernel without the file is no reason to stop.
        let _ = fs::write("/proc/self/oom_score_adj", adj.to_string());
    }
    // After the cgroup and /proc/self writes, which the sandbox forbids; before the
    // fork, so that the job's first instruction already runs confined.
    if let Some(spec) = &options.sandbox {
        confine::apply(spec)?;
    }

    // The control socket moves off stdin; the shell gets /dev/null there instead.
    let control = unsafe { OwnedFd::from_raw_fd(check(libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3))?) };
    CONTROL.store(control.as_raw_fd(), Ordering::Relaxed);
    let null = fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    check(unsafe { libc::dup2(null.as_raw_fd(), 0) })?;

    // SIGCHLD is read from a signalfd; the shell gets the mask the resident started with.
    let mut old_mask: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut chld: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        check(libc::sigprocmask(libc::SIG_BLOCK, &chld, &mut old_mask))?;
    }
    let sigfd = unsafe {
        OwnedFd::from_raw_fd(check(libc::signalfd(
            -1,
            &chld,
            libc::SFD_CLOEXEC | libc::SFD_NONBLOCK,
        ))?)
    };

    let address_space = options.rlimit_as.map(|bytes| libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    });
    let mut argv: Vec<*const libc::c_char> = options.program.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // SAFETY: the resident is single-threaded; the child only makes async-signal-safe
    // calls (setpgid, sigprocmask, execv, write, _exit) on memory prepared before.
    let leader = check(unsafe { libc::fork() })?;
    if leader == 0 {
        unsafe {
            libc::setpgid(0, 0);
            // The shell's, not the resident's: the resident must keep working whatever
            // the job does to its memory.
            if let Some(limit) = &address_space
                && libc::setrlimit(libc::RLIMIT_AS, limit) != 0
            {
                let message = b"bashd-resident: cannot set the job's memory limit\n";
                libc::write(2, message.as_ptr().cast(), message.len());
                libc::_exit(126);
            }
            libc::sigprocmask(libc::SIG_SETMASK, &old_mask, std::ptr::null_mut());
            libc::execv(argv[0], argv.as_ptr());
            let message = b"bashd-resident: cannot run the job's shell\n";
            libc::write(2, message.as_ptr().cast(), message.len());
            libc::_exit(127);
        }
    }
    // The job's pipes reach EOF when the job's last process closes them, not the
    // resident: it lets go of its copies now.
    check(unsafe { libc::dup2(null.as_raw_fd(), 1) })?;
    check(unsafe { libc::dup2(null.as_raw_fd(), 2) })?;
    drop(null);

    let mut resident = Resident {
        control,
        control_open: true,
        inbox: Vec::new(),
        leader,
        reaped: 0,
        killing: false,
        signalling: None,
    };
    resident.send(Report::Started { pid: leader });
    resident.serve(&sigfd)
}

struct Resident {
    control: OwnedFd,
    control_open: bool,
    /// Bytes of an order whose newline has not come yet.
    inbox: Vec<u8>,
    leader: i32,
    reaped: u64,
    /// SIGKILL the subtree every round until no child is left.
    killing: bool,
    /// A signal ordered, and the processes it has reached: each round sends it to
    /// those of the subtree it has not, since a process whose parent dies is
    /// reparented here after the walk that signalled the parent may have passed it.
    signalling: Option<(i32, HashSet<i32>)>,
}

impl Resident {
    fn serve(&mut self, sigfd: &OwnedFd) -> io::Result<Never> {
        loop {
            if !self.reap() {
                self.finish();
            }
            if self.killing {
                signal_subtree(libc::SIGKILL, &mut HashSet::new());
            } else if let Some((signal, reached)) = &mut self.signalling {
                signal_subtree(*signal, reached);
            }
            let mut fds = [
                libc::pollfd {
                    fd: sigfd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: if self.control_open {
                        self.control.as_raw_fd()
                    } else {
                        -1
                    },
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let timeout = if self.killing || self.signalling.is_some() {
                KILL_ROUND_MS
            } else {
                -1
            };
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
            if ready < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if fds[0].revents != 0 {
                drain(sigfd.as_raw_fd());
            }
            if fds[1].revents != 0 {
                self.read_orders();
            }
        }
    }

    /// Reaps every child that has exited; false when no child is left at all.
    fn reap(&mut self) -> bool {
        loop {
            let mut status = 0;
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            match pid {
                0 => return true,
                -1 => {
                    if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                        continue;
                    }
                    // ECHILD: a subreaper with no child has no descendant either.
                    return false;
                }
                pid => {
                    self.reaped += 1;
                    if pid == self.leader {
                        self.send(Report::Leader { status });
                    }
                }
            }
        }
    }

    fn read_orders(&mut self) {
        let mut buf = [0u8; 256];
        let n = unsafe { libc::read(self.control.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if matches!(
                e.kind(),
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
            ) {
                return;
            }
        }
        if n <= 0 {
            // The daemon is gone: nobody is left to own the job, so it ends.
            self.control_open = false;
            self.killing = true;
            return;
        }
        self.inbox.extend_from_slice(&buf[..n as usize]);
        while let Some(end) = self.inbox.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.inbox.drain(..=end).collect();
            match Order::parse(std::str::from_utf8(&line[..end]).unwrap_or("")) {
                Some(Order::Signal(signal)) => {
                    let mut reached = HashSet::new();
                    signal_subtree(signal, &mut reached);
                    self.signalling = Some((signal, reached));
                }
                Some(Order::Kill) => self.killing = true,
                None => {}
            }
        }
        // An endless line is not an order.
        if self.inbox.len() > 4096 {
            self.inbox.clear();
        }
    }

    /// Reports what the job used and exits: the job is over.
    fn finish(&mut self) -> ! {
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
        let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        self.send(Report::Done(Usage {
            user_us: micros(usage.ru_utime),
            system_us: micros(usage.ru_stime),
            max_rss_kb: usage.ru_maxrss as u64,
            reaped: self.reaped,
        }));
        std::process::exit(0);
    }

    fn send(&mut self, report: Report) {
        if !self.control_open {
            return;
        }
        let line = report.to_string();
        // MSG_NOSIGNAL: a daemon that died must not kill the resident with SIGPIPE
        // before it has ended the job.
        let sent = unsafe {
            libc::send(
                self.control.as_raw_fd(),
                line.as_ptr().cast(),
                line.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if sent < 0 {
            self.control_open = false;
            self.killing = true;
        }
    }
}

/// Sends `signal` to every process below the resident that is not in `reached`, and
/// adds them there. Each is held by a pidfd before its parent is checked again, so a
/// pid reused since the listing is never signalled.
fn signal_subtree(signal: i32, reached: &mut HashSet<i32>) {
    let mut parents = vec![(std::process::id() as i32, "/proc/self/task".to_owned())];
    while let Some((parent, tasks)) = parents.pop() {
        for child in children(&tasks) {
            let Some(pidfd) = pidfd_open(child) else {
                continue;
            };
            if parent_of(child) != Some(parent) {
                continue;
            }
            parents.push((child, format!("/proc/{child}/task")));
            if !reached.insert(child) {
                continue;
            }
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    signal,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            }
        }
    }
}

/// The children of every thread of a process, from `/proc/PID/task/*/children`.
fn children(tasks: &str) -> Vec<i32> {
    let Ok(entries) = fs::read_dir(tasks) else {
        return Vec::new();
    };
    entries
        .filter_map(|task| fs::read_to_string(task.ok()?.path().join("children")).ok())
        .flat_map(|list| {
            list.split_ascii_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// Field 4 of `/proc/PID/stat`.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.get(stat.rfind(')')? + 2..)?
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Empties a non-blocking signalfd.
fn drain(fd: RawFd) {
    let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
    while unsafe { libc::read(fd, info.as_mut_ptr().cast(), info.len()) } > 0 {}
}

fn check<T: Into<i64> + Copy>(result: T) -> io::Result<T> {
    if result.into() < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

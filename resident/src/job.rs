//! The resident of one job, forked by the zygote (`main.rs`). It makes the job a
//! subtree the job cannot leave, and ends that subtree when asked or when the daemon
//! dies:
//!
//! - it leads a session of its own and is a child subreaper, so a process of the job
//!   that double-forks, calls `setsid` or clears its environment is reparented to this
//!   resident when its parent exits, never to the daemon or init;
//! - with a cgroup it clones the shell into that cgroup (`CLONE_INTO_CGROUP`), so the
//!   job's first instruction already runs inside it, and stays out of it itself: the
//!   cgroup holds the job's processes only, and is empty once the last is reaped;
//! - it starts the shell in a process group of its own (a `CLONE_VM` clone, or a
//!   fork where the sandbox or a cgroup needs one), reaps whatever is reparented to
//!   it, and exits only when it has no child left, which, being a subreaper, means no
//!   process of the job is left;
//! - it holds a socket to the daemon (see `bashd_resident_core::wire`): it
//!   reports the shell's pid, the shell's status and, at the end, what the job used; it
//!   signals every process of the subtree when the daemon says so, and SIGKILLs the
//!   subtree when the daemon's end closes, which is how a job never outlives a daemon
//!   that died.
//!
//! Over 600 lines: the resident's whole life, from the fork of the shell to its last
//! report, is one single-threaded loop over shared state (the job's cgroup, its
//! subtree, its control socket).

use std::collections::HashSet;
use std::ffi::CString;
use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use bashd_resident_core::confine;
use bashd_resident_core::wire::{self, Order, Report, Spawn, Usage};

use crate::{Never, check};

/// How often a subtree being signalled or killed is walked again for processes forked
/// or reparented meanwhile.
const KILL_ROUND_MS: i32 = 10;

/// The job's cgroup, as a directory descriptor to clone the shell into.
struct JobCgroup {
    dir: OwnedFd,
    path: std::path::PathBuf,
}

/// `struct clone_args` of `clone3(2)`, up to `cgroup` (`CLONE_ARGS_SIZE_VER2`).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

impl JobCgroup {
    fn open(path: &Path) -> io::Result<JobCgroup> {
        let dir = fs::File::open(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open the job's cgroup {}: {e}", path.display()),
            )
        })?;
        Ok(JobCgroup {
            dir: dir.into(),
            path: path.to_owned(),
        })
    }

    /// Forks a child born in the cgroup: `clone3` with `CLONE_INTO_CGROUP` (Linux 5.7),
    /// which moves nothing and so takes none of the locks a migration takes; on an older
    /// kernel, the resident joins the cgroup and forks, and then stays in it.
    fn fork_into(&self) -> io::Result<libc::pid_t> {
        let args = CloneArgs {
            flags: CLONE_INTO_CGROUP,
            exit_signal: libc::SIGCHLD as u64,
            cgroup: self.dir.as_raw_fd() as u64,
            ..CloneArgs::default()
        };
        // SAFETY: like fork: no stack given, so the child runs on a copy of this one;
        // the resident is single-threaded, and the caller's child code makes only
        // async-signal-safe calls.
        let pid = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                &args as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        };
        if pid >= 0 {
            return Ok(pid as libc::pid_t);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOSYS | libc::E2BIG | libc::EINVAL) => {
                // "0" is the writer itself; the shell forked next is born in the cgroup.
                fs::write(self.path.join("cgroup.procs"), "0").map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("cannot join the job's cgroup {}: {e}", self.path.display()),
                    )
                })?;
                // SAFETY: the resident is single-threaded, so the child is a whole copy of it.
                check(unsafe { libc::fork() })
            }
            _ => Err(io::Error::new(
                e.kind(),
                format!(
                    "cannot start the job's shell in its cgroup {}: {e}",
                    self.path.display()
                ),
            )),
        }
    }
}

/// Sends one report on a control socket, for a setup that failed before a
/// [`Resident`] exists.
pub fn report_on(control: RawFd, report: &Report) {
    send_bytes(control, report.to_string().as_bytes());
}

/// Sends a report's line, made beforehand.
fn send_bytes(control: RawFd, line: &[u8]) {
    // MSG_NOSIGNAL: a daemon that died must not kill the resident with SIGPIPE.
    // SAFETY: `line` outlives the call; MSG_NOSIGNAL keeps a closed socket from raising SIGPIPE.
    unsafe {
        libc::send(
            control,
            line.as_ptr().cast(),
            line.len(),
            libc::MSG_NOSIGNAL,
        )
    };
}

/// Blocks SIGCHLD and returns a signalfd that reads it.
pub fn block_sigchld() -> io::Result<OwnedFd> {
    // SAFETY: sigset_t is plain data; sigemptyset sets it next.
    let mut chld: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: the signal set is set before use; signalfd returns a new descriptor this function owns.
    unsafe {
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        check(libc::sigprocmask(
            libc::SIG_BLOCK,
            &chld,
            std::ptr::null_mut(),
        ))?;
        Ok(OwnedFd::from_raw_fd(check(libc::signalfd(
            -1,
            &chld,
            libc::SFD_CLOEXEC | libc::SFD_NONBLOCK,
        ))?))
    }
}

/// The descriptors a spawn brings: the resident's end of its control socket, and the
/// job's pipes.
pub struct JobFds {
    pub control: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The read end of the job's stdin pipe; `None`: /dev/null.
    pub stdin: Option<OwnedFd>,
    /// The job's end of its channel to the daemon, which the shell inherits.
    pub channel: Option<OwnedFd>,
    /// The session network the shell's process enters (`confine::network`).
    pub network: Option<confine::SessionNet>,
}

/// What a resident sets up before it knows its job, the same for every job: a spare
/// resident (`main.rs`) has it done before the job's spawn comes, off the job's path.
pub struct Base {
    sigfd: OwnedFd,
    null: OwnedFd,
}

impl Base {
    /// Leads a session of its own and becomes a child subreaper: from here on,
    /// whatever this process forks stays below it.
    pub fn new() -> io::Result<Base> {
        // The zygote's child is no group leader, so this cannot fail with EPERM.
        // SAFETY: setsid takes no argument.
        check(unsafe { libc::setsid() })?;
        // SAFETY: prctl with integer arguments only.
        check(unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })?;
        let null = fs::File::options()
            .read(true)
            .write(true)
            .open("/dev/null")?
            .into();
        // The zygote's signalfd was closed in the fork; SIGCHLD is still blocked.
        let sigfd = block_sigchld()?;
        Ok(Base { sigfd, null })
    }
}

/// Everything the shell's process needs between its fork and its exec, made before
/// the fork: the process may be a `CLONE_VM` child that shares the resident's memory,
/// where it must not allocate.
struct Shell<'a> {
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    pty: bool,
    /// The sandbox and the pipe its failure is written to.
    sandbox: Option<(&'a confine::Spec, RawFd)>,
    in_cgroup: bool,
    kit: Option<&'a confine::Kit>,
    reads: Option<&'a confine::ReadRules>,
    network: Option<&'a confine::SessionNet>,
    filtered: bool,
    address_space: Option<libc::rlimit>,
    channel_fd: Option<RawFd>,
    control_fd: RawFd,
    resident_pid: i32,
    empty: libc::sigset_t,
}

/// Sets the job up as `spawn` says, forks its shell with the job's pipes as its stdio,
/// and serves the job until none of it is left. `sandbox` is what the shell's process
/// confines itself to (the spawn's, read by the zygote), `kit` the namespaces the
/// zygote made ahead for it, held here until the job's last report is sent, so that
/// their teardown is not on the job's path, and the read rules it made ahead.
pub fn run(
    base: Base,
    spawn: Spawn,
    sandbox: Option<confine::Spec>,
    (kit, reads): (Option<confine::Kit>, Option<confine::ReadRules>),
    fds: JobFds,
) -> io::Result<Never> {
    let Base { sigfd, null } = base;
    let JobFds {
        control,
        stdout,
        stderr,
        stdin,
        channel,
        network,
    } = fds;
    // The shell is cloned straight into the job's cgroup; the resident stays out of it.
    let cgroup = match &spawn.cgroup {
        Some(dir) => Some(JobCgroup::open(Path::new(std::ffi::OsStr::from_bytes(
            dir,
        )))?),
        None => None,
    };
    if let Some((soft, hard)) = spawn.nofile {
        let limit = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: `limit` is an rlimit alive for the call.
        check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) })?;
    }
    if let Some(adj) = spawn.oom_score_adj {
        // Raising it needs no privilege; a kernel without the file is no reason to stop.
        let _ = fs::write("/proc/self/oom_score_adj", adj.to_string());
    }
    let workdir = Path::new(std::ffi::OsStr::from_bytes(&spawn.workdir));
    std::env::set_current_dir(workdir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot enter the job's workdir {}: {e}", workdir.display()),
        )
    })?;
    // The shell's stdin is /dev/null or the job's stdin pipe; its stdout and stderr
    // are the job's pipes.
    let stdin_fd = stdin
        .as_ref()
        .map_or(null.as_raw_fd(), |pipe| pipe.as_raw_fd());
    // SAFETY: dup2 on descriptors this process holds.
    check(unsafe { libc::dup2(stdin_fd, 0) })?;
    // SAFETY: dup2 on descriptors this process holds.
    check(unsafe { libc::dup2(stdout.as_raw_fd(), 1) })?;
    // SAFETY: dup2 on descriptors this process holds.
    check(unsafe { libc::dup2(stderr.as_raw_fd(), 2) })?;
    drop((stdin, stdout, stderr));

    let strings = |list: Vec<Vec<u8>>| {
        list.into_iter()
            .map(|s| {
                CString::new(s)
                    .map_err(|_| io::Error::other("a NUL in the job's command or environment"))
            })
            .collect::<io::Result<Vec<CString>>>()
    };
    // Before the fork, so that the shell inherits it.
    let filtered = match &sandbox {
        Some(spec) => confine::resident_filter(spec)?,
        None => false,
    };
    // The shell's confinement is applied in its own process, so the resident stays out
    // of it; what fails there comes back through this pipe, which closes at exec.
    let setup_pipe = match &sandbox {
        Some(_) => Some(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?),
        None => None,
    };
    let program = strings(spawn.program)?;
    let env = strings(spawn.env)?;
    let pointers = |list: &[CString]| {
        let mut pointers: Vec<*const libc::c_char> = list.iter().map(|a| a.as_ptr()).collect();
        pointers.push(std::ptr::null());
        pointers
    };
    let (argv, envp) = (pointers(&program), pointers(&env));
    // SAFETY: sigset_t is plain data; sigemptyset sets it next.
    let mut empty: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `empty` is a sigset_t of this frame.
    unsafe { libc::sigemptyset(&mut empty) };
    let shell = Shell {
        argv: &argv,
        envp: &envp,
        pty: spawn.pty,
        sandbox: sandbox
            .as_ref()
            .zip(setup_pipe.as_ref().map(|(_, write)| write.as_raw_fd())),
        in_cgroup: cgroup.is_some(),
        kit: kit.as_ref(),
        reads: reads.as_ref(),
        network: network.as_ref(),
        filtered,
        address_space: spawn.rlimit_as.map(|bytes| libc::rlimit {
            rlim_cur: bytes,
            rlim_max: bytes,
        }),
        channel_fd: channel.as_ref().map(|fd| fd.as_raw_fd()),
        control_fd: control.as_raw_fd(),
        resident_pid: std::process::id() as i32,
        empty,
    };
    let leader = match (&cgroup, &sandbox) {
        (Some(cgroup), _) => cgroup.fork_into()?,
        // The common job: its process shares the resident's memory until its exec,
        // so nothing of the resident is copied for it (`clone_vfork`).
        (None, None) => clone_vfork(&shell)?,
        // The sandbox's setup allocates and builds namespaces: it gets a copy.
        // SAFETY: the resident is single-threaded, so the child is a whole copy of it (see `exec_shell`).
        (None, Some(_)) => check(unsafe { libc::fork() })?,
    };
    if leader == 0 {
        // SAFETY: the child of a fork of this single-threaded process, before its exec.
        unsafe { exec_shell(&shell) }
    }
    // Nothing keeps the job's cgroup open but its processes, nor its channel.
    drop(cgroup);
    drop(channel);
    // The holder keeps the session network; the resident needs it no longer.
    drop(network);
    if let Some((read, write)) = setup_pipe {
        drop(write);
        let mut why = Vec::new();
        let _ = fs::File::from(read).read_to_end(&mut why);
        if !why.is_empty() {
            // SAFETY: waits for the child forked above; its status is not read.
            unsafe { libc::waitpid(leader, std::ptr::null_mut(), 0) };
            return Err(io::Error::other(String::from_utf8_lossy(&why).into_owned()));
        }
    }
    // The job's pipes reach EOF when the job's last process closes them, not the
    // resident: it lets go of its copies now (the stdin pipe's too, so the job reads
    // end-of-file once the daemon closes its end).
    // SAFETY: dup2 on descriptors this process holds.
    check(unsafe { libc::dup2(null.as_raw_fd(), 0) })?;
    // SAFETY: dup2 on descriptors this process holds.
    check(unsafe { libc::dup2(null.as_raw_fd(), 1) })?;
    // SAFETY: dup2 on descriptors this process holds.
    check(unsafe { libc::dup2(null.as_raw_fd(), 2) })?;
    drop(null);

    let mut resident = Resident {
        _kit: kit,
        control,
        control_open: true,
        inbox: Vec::new(),
        leader,
        reaped: 0,
        leader_exit: None,
        killing: false,
        signalling: None,
    };
    resident.serve(&sigfd)
}

/// Starts the shell's process with `clone(CLONE_VM | CLONE_VFORK)`, as `posix_spawn`
/// does: it runs on a stack of its own in the resident's memory, and the resident
/// waits until it has called `execve` (or exited). Nothing of the resident is copied,
/// neither page tables nor pages written after the fork, which a `fork` pays on the
/// job's path. Sound because the resident is single-threaded and the child only makes
/// system calls on memory prepared before ([`exec_shell`] without a sandbox).
fn clone_vfork(shell: &Shell) -> io::Result<libc::pid_t> {
    /// The child calls no more than a formatter and a few system calls; a guard page
    /// below stops it, should it ever need more.
    const STACK: usize = 64 * 1024;
    const GUARD: usize = 4096;
    // SAFETY: a new anonymous mapping, owned here and unmapped below.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            STACK + GUARD,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    extern "C" fn entry(shell: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `shell` is the `Shell` the resident passed, alive while it waits for
        // this process's exec (CLONE_VFORK); it is not a forked copy, so `exec_shell`
        // must not allocate, which it does not without a sandbox.
        unsafe { exec_shell(&*shell.cast::<Shell>()) }
    }
    // SAFETY: the lowest page of the mapping above becomes the guard; the stack grows
    // down from its top, 16-byte aligned as the ABI wants; the resident is
    // single-threaded and suspended until the child's exec or exit, after which the
    // stack is unmapped.
    let pid = unsafe {
        // Without its guard, a stack overrun would write into whatever lies below.
        if libc::mprotect(base, GUARD, libc::PROT_NONE) != 0 {
            let error = io::Error::last_os_error();
            libc::munmap(base, STACK + GUARD);
            return Err(error);
        }
        let top = (base as usize + GUARD + STACK) & !15;
        let pid = libc::clone(
            entry,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (shell as *const Shell).cast_mut().cast(),
        );
        let error = io::Error::last_os_error();
        libc::munmap(base, STACK + GUARD);
        if pid < 0 {
            return Err(error);
        }
        pid
    };
    Ok(pid)
}

/// The shell's process, from its fork to its exec. Without a sandbox it allocates
/// nothing and makes only async-signal-safe calls (setpgid, setrlimit, fcntl, dup2,
/// send, sigprocmask, execve, write, _exit) on memory prepared before, so it may run
/// as a `CLONE_VM` child; the sandbox's setup allocates, so a sandboxed job's shell is
/// a forked copy.
///
/// # Safety
/// Call only in the child of a fork or clone of the single-threaded resident.
unsafe fn exec_shell(shell: &Shell) -> ! {
    // SAFETY: in the child, as the function's contract says; every pointer is into
    // memory prepared before the fork and alive until the exec.
    unsafe {
        // The shell tells its own start, just before its exec: reported by the
        // resident after the fork, it raced a job whose first command kills the
        // resident (`kill -9 $PPID`, which an unsandboxed job may do), and the
        // daemon was told the resident died before it started the shell.
        let mut started = [0u8; 64];
        let started_len = {
            use std::io::Write;
            let mut cursor = io::Cursor::new(&mut started[..]);
            let report = Report::Started {
                pid: libc::getpid(),
                resident: shell.resident_pid,
            };
            // Two numbers and a word: 64 bytes hold them.
            let _ = write!(cursor, "{report}");
            cursor.position() as usize
        };
        if shell.pty {
            crate::pty::take_terminal();
        } else {
            libc::setpgid(0, 0);
        }
        // In the cgroup and the workdir already, before the address space limit,
        // which the sandbox's setup must not hit.
        if let Some((spec, failed)) = shell.sandbox
            && let Err(failure) = confine::apply(
                spec,
                shell.pty,
                shell.in_cgroup,
                shell.kit,
                shell.filtered,
                shell.reads,
                shell.network,
            )
        {
            let text = failure.to_string();
            libc::write(failed, text.as_ptr().cast(), text.len());
            libc::_exit(crate::EXIT_SETUP);
        }
        // The shell's, not the resident's: the resident must keep working whatever
        // the job does to its memory.
        if let Some(limit) = &shell.address_space
            && libc::setrlimit(libc::RLIMIT_AS, limit) != 0
        {
            let message = b"bashd-resident: cannot set the job's memory limit\n";
            libc::write(2, message.as_ptr().cast(), message.len());
            libc::_exit(126);
        }
        // The channel is the one descriptor beyond the stdio that the shell
        // inherits: a copy at its number (dup2 clears close-on-exec), or the
        // descriptor itself made inheritable where it landed there.
        if let Some(fd) = shell.channel_fd {
            if fd == wire::CHANNEL_FD {
                libc::fcntl(fd, libc::F_SETFD, 0);
            } else {
                libc::dup2(fd, wire::CHANNEL_FD);
            }
        }
        send_bytes(shell.control_fd, &started[..started_len]);
        libc::sigprocmask(libc::SIG_SETMASK, &shell.empty, std::ptr::null_mut());
        libc::execve(shell.argv[0], shell.argv.as_ptr(), shell.envp.as_ptr());
        let message = b"bashd-resident: cannot run the job's shell\n";
        libc::write(2, message.as_ptr().cast(), message.len());
        libc::_exit(127);
    }
}

struct Resident {
    /// The job's namespaces, made ahead by the zygote: let go when the resident exits,
    /// after its `done` report, however quickly the shell went.
    _kit: Option<confine::Kit>,
    control: OwnedFd,
    control_open: bool,
    /// Bytes of an order whose newline has not come yet.
    inbox: Vec<u8>,
    leader: i32,
    reaped: u64,
    /// The shell's exit, reaped and not yet reported: sent with `done` in one message
    /// when the shell was the job's last process, so the daemon learns both at once.
    leader_exit: Option<i32>,
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
            if let Some(status) = self.leader_exit.take() {
                self.send(Report::Leader { status });
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
            // SAFETY: two pollfds of this frame, as counted.
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
            // SAFETY: `status` is a local the call writes.
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
                        self.leader_exit = Some(status);
                    }
                }
            }
        }
    }

    fn read_orders(&mut self) {
        let mut buf = [0u8; 256];
        // SAFETY: reads into `buf`, at most its length.
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

    /// Reports the shell's exit if it was not yet, then what the job used, in one
    /// message, and exits: the job is over.
    fn finish(&mut self) -> ! {
        // SAFETY: rusage is plain data, valid all zeros.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a local the call writes.
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
        let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        let done = Report::Done(Usage {
            user_us: micros(usage.ru_utime),
            system_us: micros(usage.ru_stime),
            max_rss_kb: usage.ru_maxrss as u64,
            reaped: self.reaped,
        });
        let lines = match self.leader_exit.take() {
            Some(status) => format!("{}{done}", Report::Leader { status }),
            None => done.to_string(),
        };
        self.send_text(&lines);
        std::process::exit(0);
    }

    fn send(&mut self, report: Report) {
        self.send_text(&report.to_string());
    }

    fn send_text(&mut self, lines: &str) {
        if !self.control_open {
            return;
        }
        // MSG_NOSIGNAL: a daemon that died must not kill the resident with SIGPIPE
        // before it has ended the job.
        // SAFETY: `lines` outlives the call; MSG_NOSIGNAL keeps a closed socket from raising SIGPIPE.
        let sent = unsafe {
            libc::send(
                self.control.as_raw_fd(),
                lines.as_ptr().cast(),
                lines.len(),
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
            // SAFETY: a pidfd this function holds, a null siginfo and no flags.
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

/// Field 4 of `/proc/PID/stat`. The one reader of it outside `bashd_protocol::ProcStat`:
/// the resident links no daemon or protocol code (that would bring tokio-util, serde
/// and toml into the process forked for every job), and needs this one field.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.get(stat.rfind(')')? + 2..)?
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a descriptor pidfd_open just returned, owned by nothing else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Empties a non-blocking signalfd.
pub fn drain(fd: RawFd) {
    let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
    // SAFETY: reads into `info`, at most its length.
    while unsafe { libc::read(fd, info.as_mut_ptr().cast(), info.len()) } > 0 {}
}

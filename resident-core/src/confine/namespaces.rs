//! The namespaces of a confined job: the user namespace that lets an unprivileged
//! process make the others, with an IPC namespace and a cgroup namespace of its own;
//! the mounts that make everything read-only but the writable roots, every `.git`
//! inside them read-only (`git.rs` finds them), `deny_read` paths hidden and a devpts
//! of the job's own over `/dev/pts`; the network namespace with only its loopback;
//! and the capabilities the job's processes must not keep.
//!
//! Over 600 lines: the namespaces, the mounts, the kit and the capabilities are one
//! sequence the shell's process runs before exec, in the order the kernel needs, each
//! step a few raw system calls.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{CWD, Mode, OFlags};
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MountFlags, MountPropagationFlags, MoveMountFlags,
    OpenTreeFlags,
};

use super::reads::Looks;
use super::{Failure, Spec, git};

const FIX_MOUNTS: &str = "the user namespace cannot mount here (an AppArmor or seccomp policy may forbid it): allow mounts in unprivileged user namespaces, set [sandbox] deny_read = [] in the daemon's config if nothing is to be hidden, or run the job with sandbox off";
pub(super) const FIX_NETWORK: &str =
    "network namespaces cannot be made here: allow them, or run the job with the network on";

/// What must be mounted for a job whose file system is confined: found before any
/// namespace is made.
#[derive(Debug, Default)]
pub(super) struct Hidden {
    /// The writable roots that exist (directories or files): bound read-write over a
    /// tree made read-only.
    /// Landlock holds writes of contents too, but not `chmod`, `chown` or `utimes`,
    /// which a read-only mount refuses.
    writable: Vec<PathBuf>,
    /// Every `.git` beneath a writable root (and what a `.git` file names), and the
    /// workdir's repository: bound read-only.
    read_only: Vec<PathBuf>,
    /// The job's own terminal (`/dev/pts/N` as the host names it), for a terminal job:
    /// bound over `/dev/console` before the job's devpts hides it, so `tty` and
    /// `ttyname` still find a name for it.
    terminal: Option<PathBuf>,
    /// `deny_read` directories that exist: under an empty tmpfs nobody may enter.
    dirs: Vec<PathBuf>,
    /// `deny_read` files that exist: under an empty file nobody may read.
    files: Vec<PathBuf>,
    /// bashd's runtime dir, when it exists: under an empty tmpfs, with only the
    /// writable roots beneath it (the session's temp dir) bound back in.
    runtime_dir: Option<PathBuf>,
}

impl Hidden {
    /// Looks at the paths of `spec`, at the repository of the current directory (the
    /// job's workdir), at every `.git` a bounded walk of the writable roots finds, and
    /// at what the job's stdin is, when `terminal` says it is the job's terminal.
    pub(super) fn find(spec: &Spec, terminal: bool) -> Hidden {
        Hidden::find_with(spec, terminal, None, &mut None)
    }

    /// What [`Hidden::find`] finds for a job without a terminal whose workdir resolves
    /// to `workdir`, each path it depends on looked at in `looks` before it is read
    /// (`staged.rs`). `None` where the looks cannot tell all it depends on.
    pub(super) fn find_looked(spec: &Spec, workdir: &Path, looks: &mut Looks) -> Option<Hidden> {
        for path in spec
            .writable
            .iter()
            .chain(&spec.deny_read)
            .chain(&spec.runtime_dir)
        {
            looks.push(path.clone(), true);
        }
        let hidden = Hidden::find_with(spec, false, Some(workdir), &mut Some(looks));
        (!looks.racy()).then_some(hidden)
    }

    fn find_with(
        spec: &Spec,
        terminal: bool,
        workdir: Option<&Path>,
        looks: &mut Option<&mut Looks>,
    ) -> Hidden {
        let mut hidden = Hidden {
            writable: spec
                .writable
                .iter()
                .filter(|root| root.exists())
                .cloned()
                .collect(),
            ..Hidden::default()
        };
        hidden.read_only = match (workdir, looks.is_some()) {
            (None, false) => git::read_only(&hidden.writable, &spec.unwalked),
            _ => git::read_only_in(&hidden.writable, &spec.unwalked, workdir, looks),
        };
        if spec.git_write {
            hidden.read_only = git::writable_roots_git(hidden.read_only, &hidden.writable);
        }
        hidden.terminal = terminal
            .then(|| fs::read_link("/proc/self/fd/0").ok())
            .flatten()
            .filter(|path| path.starts_with("/dev/pts/"));
        hidden.runtime_dir = spec.runtime_dir.clone().filter(|dir| dir.is_dir());
        for path in &spec.deny_read {
            // Follows symlinks, as the mount does: what is hidden is what they name.
            match fs::metadata(path) {
                Ok(meta) if meta.is_dir() => hidden.dirs.push(path.clone()),
                Ok(_) => hidden.files.push(path.clone()),
                // Nothing there, or nothing the user may look at: nothing to hide.
                Err(_) => {}
            }
        }
        hidden
    }

    /// Makes the mounts, in the mount namespace [`enter`] made.
    pub(super) fn mount(&self) -> Result<(), Failure> {
        // A mount namespace made in a new user namespace already receives the host's
        // mounts without sending its own back; said here rather than relied on.
        rustix::mount::mount_change(
            "/",
            MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC,
        )
        .map_err(|e| failure("keep the job's mounts to itself", e.into(), FIX_MOUNTS))?;
        set_read_only(Path::new("/"), true, true)
            .map_err(|e| failure("make the file system read-only", e, FIX_MOUNTS))?;
        let (kept, cover_file) = self.cover_runtime_dir()?;
        for root in &self.writable {
            // A root beneath the covered runtime dir is bound from the descriptor
            // opened before the cover: its path now names the empty directory made
            // for it.
            let source = match kept.iter().find(|(path, _)| path == root) {
                Some((_, fd)) => PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())),
                None => root.clone(),
            };
            rustix::mount::mount_bind_recursive(&source, root)
                .map_err(io::Error::from)
                .and_then(|()| {
                    // A mount below the root that the host has read-only stays so.
                    set_read_only(root, false, true).or_else(|_| set_read_only(root, false, false))
                })
                .map_err(|e| {
                    failure(&format!("make {} writable", root.display()), e, FIX_MOUNTS)
                })?;
        }
        for git in &self.read_only {
            rustix::mount::mount_bind_recursive(git, git)
                .map_err(io::Error::from)
                .and_then(|()| set_read_only(git, true, true))
                .map_err(|e| {
                    failure(&format!("make {} read-only", git.display()), e, FIX_MOUNTS)
                })?;
        }
        if let Some(runtime_dir) = &self.runtime_dir {
            // Not recursive: the roots bound into it stay writable.
            set_read_only(runtime_dir, true, false).map_err(|e| {
                failure(
                    &format!("make the cover of {} read-only", runtime_dir.display()),
                    e,
                    FIX_MOUNTS,
                )
            })?;
        }
        drop(kept);
        for dir in &self.dirs {
            rustix::mount::mount(
                "none",
                dir,
                "tmpfs",
                MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
                Some(c"mode=000,size=4k"),
            )
            .map_err(|e| failure(&format!("hide {}", dir.display()), e.into(), FIX_MOUNTS))?;
        }
        if !self.files.is_empty() {
            let empty = match cover_file {
                Some(path) => EmptyFile::Attached(path),
                None => EmptyFile::make()
                    .map_err(|e| failure("make the empty file that hides files", e, FIX_MOUNTS))?,
            };
            for file in &self.files {
                empty
                    .mount_over(file)
                    .map_err(|e| failure(&format!("hide {}", file.display()), e, FIX_MOUNTS))?;
            }
        }
        self.own_terminal()?;
        // The working directory still names the directory on the mount beneath the
        // new ones (read-only now): entered again by its path, it is the one on top.
        std::env::current_dir()
            .and_then(std::env::set_current_dir)
            .map_err(|e| failure("enter the workdir again", e, FIX_MOUNTS))
    }
}

impl Hidden {
    /// Covers bashd's runtime dir with an empty tmpfs: its journal (every job's
    /// command), the relay's and ssh's sockets and other sessions' spill files are not
    /// the job's to read or reach. The writable roots beneath it are opened first and
    /// an empty directory is made at each of their paths in the cover, for `mount` to
    /// bind them back; their descriptors are returned for that. With `deny_read`
    /// files to hide, the empty file that hides them is made in the cover too
    /// ([`COVER_FILE`]), and its path returned.
    fn cover_runtime_dir(&self) -> Result<(Kept, Option<PathBuf>), Failure> {
        let Some(runtime_dir) = &self.runtime_dir else {
            return Ok((Vec::new(), None));
        };
        let mut kept = Vec::new();
        for root in self
            .writable
            .iter()
            .filter(|root| root.starts_with(runtime_dir))
        {
            let fd = rustix::fs::open(
                root,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| failure(&format!("open {}", root.display()), e.into(), FIX_MOUNTS))?;
            kept.push((root.clone(), fd));
        }
        rustix::mount::mount(
            "none",
            runtime_dir,
            "tmpfs",
            MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
            Some(c"mode=0700,size=64k"),
        )
        .map_err(|e| {
            failure(
                &format!("hide bashd's runtime dir {}", runtime_dir.display()),
                e.into(),
                FIX_MOUNTS,
            )
        })?;
        for (root, _) in &kept {
            make_below(runtime_dir, root).map_err(|e| {
                failure(
                    &format!("make room for {} in the cover", root.display()),
                    e,
                    FIX_MOUNTS,
                )
            })?;
        }
        let cover_file = if self.files.is_empty() {
            None
        } else {
            let path = runtime_dir.join(COVER_FILE);
            rustix::fs::open(
                &path,
                OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| failure("make the empty file that hides files", e.into(), FIX_MOUNTS))?;
            Some(path)
        };
        Ok((kept, cover_file))
    }

    /// A devpts instance of the job's own over `/dev/pts`: the host's terminals (other
    /// sessions' jobs, the person's own) have no name in the job's file system, and the
    /// terminals the job opens are its own. `/dev/ptmx` needs no mount: since Linux 4.7
    /// it opens the devpts found at `pts` beside it. The job's own terminal stays open
    /// as its stdin, stdout and stderr; its name is bound over `/dev/console` first, so
    /// `ttyname` (which looks through `/dev` for a device whose name is gone) finds it.
    fn own_terminal(&self) -> Result<(), Failure> {
        let console = Path::new("/dev/console");
        if let Some(terminal) = &self.terminal
            && console.exists()
        {
            rustix::mount::mount_bind(terminal, console).map_err(|e| {
                failure(
                    &format!("keep the job's terminal {}", terminal.display()),
                    e.into(),
                    FIX_MOUNTS,
                )
            })?;
        }
        rustix::mount::mount(
            "devpts",
            "/dev/pts",
            "devpts",
            MountFlags::NOSUID | MountFlags::NOEXEC,
            Some(c"newinstance,ptmxmode=0666,mode=0620"),
        )
        .map_err(|e| failure("give the job a devpts of its own", e.into(), FIX_MOUNTS))
    }
}

/// The writable roots beneath the runtime dir, each with a descriptor opened before
/// the cover hid it.
type Kept = Vec<(PathBuf, OwnedFd)>;

/// The directories from `top` (exclusive, the cover's root) down to `dir`, made in
/// that order: each `mkdir` succeeds at once in the empty cover, where
/// `create_dir_all`, which tries the deepest first, failed once a level before.
fn make_below(top: &Path, dir: &Path) -> io::Result<()> {
    let mut levels: Vec<&Path> = dir
        .ancestors()
        .take_while(|level| *level != top && level.starts_with(top))
        .collect();
    levels.reverse();
    for level in levels {
        match fs::create_dir(level) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// The name of the empty file made in the runtime dir's cover, which hides each
/// `deny_read` file: mode 000, on the cover's tmpfs (read-only once the roots are
/// bound), seen by the job as that and nothing more.
const COVER_FILE: &str = ".bashd-hidden";

/// An empty file with mode 000 that each hidden file is replaced by, so reading one
/// fails as a denied permission: the one in the runtime dir's cover, or, where the job
/// has no runtime dir to cover, one on a tmpfs of its own that is mounted nowhere. The
/// cover's is preferred: a tmpfs mounted nowhere is unmounted when its last descriptor
/// closes, and that waits for an RCU grace period on the job's path (measured: 0.05 ms
/// mostly, 0.3 to 7 ms one job in three on the loaded 2-core machine).
enum EmptyFile {
    Attached(PathBuf),
    Detached { mount: OwnedFd },
}

const EMPTY_NAME: &str = "hidden";

impl EmptyFile {
    fn make() -> io::Result<EmptyFile> {
        let fs = rustix::mount::fsopen("tmpfs", FsOpenFlags::FSOPEN_CLOEXEC)?;
        rustix::mount::fsconfig_set_string(&fs, "size", "4k")?;
        rustix::mount::fsconfig_create(&fs)?;
        let mount = rustix::mount::fsmount(
            &fs,
            FsMountFlags::FSMOUNT_CLOEXEC,
            MountAttrFlags::MOUNT_ATTR_NOSUID
                | MountAttrFlags::MOUNT_ATTR_NODEV
                | MountAttrFlags::MOUNT_ATTR_NOEXEC,
        )?;
        rustix::fs::openat(
            &mount,
            EMPTY_NAME,
            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(EmptyFile::Detached { mount })
    }

    fn mount_over(&self, target: &Path) -> io::Result<()> {
        let mount = match self {
            EmptyFile::Attached(path) => {
                rustix::mount::mount_bind(path, target)?;
                return set_read_only(target, true, false);
            }
            EmptyFile::Detached { mount } => mount,
        };
        let tree = rustix::mount::open_tree(
            mount,
            EMPTY_NAME,
            OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
        );
        match tree {
            Ok(tree) => rustix::mount::move_mount(
                &tree,
                "",
                CWD,
                target,
                MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
            )?,
            // Kernels before 6.15 clone nothing out of a mount that is attached
            // nowhere: the file reads as empty instead of failing, and hides as well.
            Err(rustix::io::Errno::INVAL) => rustix::mount::mount_bind("/dev/null", target)?,
            Err(e) => return Err(e.into()),
        }
        set_read_only(target, true, false)
    }
}

/// `mount_setattr` setting (`read_only`) or clearing `MOUNT_ATTR_RDONLY` on the mount
/// at `path` (and those below it with `recursive`): only that attribute changes, so
/// the flags a less privileged mount namespace may not clear (nosuid, nodev, ...)
/// stay as they were.
fn set_read_only(path: &Path, read_only: bool, recursive: bool) -> io::Result<()> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let (attr_set, attr_clr) = if read_only {
        (libc::MOUNT_ATTR_RDONLY, 0)
    } else {
        (0, libc::MOUNT_ATTR_RDONLY)
    };
    let attr = MountAttr {
        attr_set,
        attr_clr,
        propagation: 0,
        userns_fd: 0,
    };
    let path = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: `path` is a NUL-terminated string and `attr` a mount_attr of the size passed, both alive for the call.
    let done = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if done < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Enters a new user namespace, mapping the user and group to themselves, with an IPC
/// namespace (System V shared memory, semaphores and message queues, POSIX message
/// queues: the host's are out of reach) and a cgroup namespace rooted at the cgroup
/// the process is in (the job's, under cgroup containment: the kernel refuses a move
/// to a cgroup outside the namespace's root, so no process of the job leaves it); then
/// a new mount namespace (`mounts`) and a new network namespace (`network_off`) owned
/// by it.
pub(super) fn enter(mounts: bool, network_off: bool) -> Result<(), Failure> {
    enter_user()?;
    unshare(libc::CLONE_NEWIPC | libc::CLONE_NEWCGROUP).map_err(|e| {
        failure(
            "make the job's IPC and cgroup namespaces",
            e,
            super::FIX_USER_NAMESPACES,
        )
    })?;
    if mounts {
        unshare(libc::CLONE_NEWNS)
            .map_err(|e| failure("make the job's mount namespace", e, FIX_MOUNTS))?;
    }
    if network_off {
        enter_network()?;
    }
    Ok(())
}

/// A new user namespace where the user and group are themselves.
pub(super) fn enter_user() -> Result<(), Failure> {
    // SAFETY: getuid and getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    unshare(libc::CLONE_NEWUSER).map_err(|e| {
        failure(
            "make the job's user namespace",
            e,
            super::FIX_USER_NAMESPACES,
        )
    })?;
    // setgroups must be denied before an unprivileged process may map its group.
    fs::write("/proc/self/setgroups", "deny")
        .and_then(|()| fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")))
        .and_then(|()| fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")))
        .map_err(|e| {
            failure(
                "map the user into the job's user namespace",
                e,
                super::FIX_USER_NAMESPACES,
            )
        })
}

/// The namespaces of one job made ahead of it, by a process of their own that the
/// zygote forks while no job waits (`resident/src/kit.rs`): a user namespace
/// with the user mapped, and owned by it an IPC namespace, a mount namespace (a copy of
/// the host's, nothing mounted yet) and, for a job with the network off, a network
/// namespace with its loopback up. Making a network namespace is the dearest step of a
/// job's confinement (about a millisecond), and tearing a mount namespace down at the
/// shell's exit the next: with a kit, the shell's process enters them (`setns`, a few
/// microseconds each), and its resident, which holds the kit until the job's last
/// report is sent, is the one that lets them go. A kit serves one job only, so no two
/// jobs share a namespace.
#[derive(Debug)]
pub struct Kit {
    user: OwnedFd,
    ipc: OwnedFd,
    mnt: OwnedFd,
    net: Option<OwnedFd>,
    /// Its mount namespace holds a job's mounts already (`staged.rs`), made for the
    /// spec and workdir of the job it is handed to.
    staged: bool,
}

impl Kit {
    /// Makes the namespaces of a kit on the calling process, which must be
    /// single-threaded and then wait, in them, for [`Kit::open`].
    pub fn make(network_off: bool) -> Result<(), Failure> {
        enter_user()?;
        unshare(libc::CLONE_NEWIPC | libc::CLONE_NEWNS).map_err(|e| {
            failure(
                "make the job's IPC and mount namespaces",
                e,
                super::FIX_USER_NAMESPACES,
            )
        })?;
        if network_off {
            enter_network()?;
        }
        Ok(())
    }

    /// What [`Kit::make`] does, inside the user namespace `user` of a session network
    /// (`network.rs`): the kit's user namespace is then nested in it, where a job that
    /// entered the session network can enter it. The network is the session's, so the
    /// kit has none.
    pub fn make_in(user: &OwnedFd) -> Result<(), Failure> {
        setns(user, libc::CLONE_NEWUSER)
            .map_err(|e| failure("enter the session network's user namespace", e, FIX_NETWORK))?;
        Kit::make(false)
    }

    /// Holds the namespaces process `pid` made with [`Kit::make`]; it must still be
    /// alive and not reaped, so that `pid` is still its.
    pub fn open(pid: libc::pid_t, network_off: bool) -> io::Result<Kit> {
        let open = |name: &str| -> io::Result<OwnedFd> {
            Ok(rustix::fs::open(
                format!("/proc/{pid}/ns/{name}"),
                OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )?)
        };
        Ok(Kit {
            user: open("user")?,
            ipc: open("ipc")?,
            mnt: open("mnt")?,
            net: if network_off {
                Some(open("net")?)
            } else {
                None
            },
            staged: false,
        })
    }

    /// The kit marked as holding a job's mounts (`staged.rs`), or not.
    pub fn set_staged(&mut self, staged: bool) {
        self.staged = staged;
    }

    /// Whether its mount namespace holds a job's mounts already.
    pub fn staged(&self) -> bool {
        self.staged
    }

    /// The most descriptors a kit is made of.
    pub const MOST_FDS: usize = 4;

    /// The kit's descriptors, to send it to the one resident it is handed to: the
    /// user, IPC and mount namespaces, then the network namespace where it has one.
    pub fn raw_fds(&self) -> Vec<std::os::fd::RawFd> {
        let mut fds = vec![
            self.user.as_raw_fd(),
            self.ipc.as_raw_fd(),
            self.mnt.as_raw_fd(),
        ];
        fds.extend(self.net.as_ref().map(|net| net.as_raw_fd()));
        fds
    }

    /// A kit received as [`Kit::raw_fds`] listed it; `None` for another count.
    pub fn from_fds(fds: Vec<OwnedFd>) -> Option<Kit> {
        let mut fds = fds.into_iter();
        let (user, ipc, mnt, net) = (fds.next()?, fds.next()?, fds.next()?, fds.next());
        fds.next().is_none().then_some(Kit {
            user,
            ipc,
            mnt,
            net,
            staged: false,
        })
    }

    /// Whether the kit has a network namespace.
    pub fn network_off(&self) -> bool {
        self.net.is_some()
    }

    /// What [`enter`] does, with the kit's namespaces entered rather than made: the
    /// user namespace, its IPC namespace, its mount namespace (`mounts`; the working
    /// directory entered again, since entering a mount namespace leaves it at the
    /// root), its network namespace (`network_off`, made here when the kit has none).
    /// The cgroup namespace is still made here, rooted at the job's cgroup. Where the
    /// kit's user namespace cannot be entered, everything is made afresh. True when
    /// the kit's namespaces were entered.
    pub(super) fn enter(&self, mounts: bool, network_off: bool) -> Result<bool, Failure> {
        let workdir = std::env::current_dir()
            .map_err(|e| failure("read the workdir", e, super::FIX_USER_NAMESPACES))?;
        if setns(&self.user, libc::CLONE_NEWUSER).is_err() {
            return enter(mounts, network_off).map(|()| false);
        }
        setns(&self.ipc, libc::CLONE_NEWIPC)
            .and_then(|()| unshare(libc::CLONE_NEWCGROUP))
            .map_err(|e| {
                failure(
                    "enter the job's IPC and cgroup namespaces",
                    e,
                    super::FIX_USER_NAMESPACES,
                )
            })?;
        if mounts {
            setns(&self.mnt, libc::CLONE_NEWNS)
                .map_err(|e| failure("enter the job's mount namespace", e, FIX_MOUNTS))?;
            std::env::set_current_dir(&workdir)
                .map_err(|e| failure("enter the workdir again", e, FIX_MOUNTS))?;
        }
        if network_off {
            match &self.net {
                Some(net) => setns(net, libc::CLONE_NEWNET)
                    .map_err(|e| failure("enter the job's network namespace", e, FIX_NETWORK))?,
                None => enter_network()?,
            }
        }
        Ok(true)
    }
}

pub(super) fn setns(fd: &OwnedFd, kind: libc::c_int) -> io::Result<()> {
    // SAFETY: setns reads nothing of this process's memory; the descriptor is open.
    if unsafe { libc::setns(fd.as_raw_fd(), kind) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// What the mount namespace [`enter`] made holds for a job whose files are otherwise
/// its own (a network-only job): the kernel's settings, `/proc/sys` and `/sys`,
/// read-only, and with `cgroup` every cgroup file system too. In its user namespace a
/// job run by root is still root to the files it owns, those settings included:
/// without this it could set `kernel.core_pattern` or `kernel.modprobe` to a program
/// the kernel then starts as root outside every namespace of the job, with the host's
/// network (issue 42). An ordinary user may write none of them anyway, so nothing a
/// job of theirs does changes. With the cgroup file system read-only no process of
/// the job can move itself to another cgroup (out of the job's) or change the job's
/// limits.
pub(super) fn host_settings_read_only(cgroup: bool) -> Result<(), Failure> {
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC,
    )
    .map_err(|e| failure("keep the job's mounts to itself", e.into(), FIX_MOUNTS))?;
    for settings in ["/proc/sys", "/sys"] {
        let path = Path::new(settings);
        if !path.is_dir() {
            continue;
        }
        // Bound over itself first: `/proc/sys` is no mount of its own, and read-only
        // on the mount that holds it would be read-only on all of `/proc`.
        rustix::mount::mount_bind_recursive(path, path)
            .map_err(io::Error::from)
            .and_then(|()| set_read_only(path, true, true))
            .map_err(|e| failure(&format!("make {settings} read-only"), e, FIX_MOUNTS))?;
    }
    if cgroup {
        cgroupfs_read_only()?;
    }
    Ok(())
}

/// Every cgroup file system read-only.
fn cgroupfs_read_only() -> Result<(), Failure> {
    let fail = |e: io::Error| failure("make the cgroup file system read-only", e, FIX_MOUNTS);
    let mounts = fs::read_to_string("/proc/self/mountinfo").map_err(fail)?;
    for line in mounts.lines() {
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let kind = after.split(' ').next().unwrap_or("");
        if kind != "cgroup2" && kind != "cgroup" {
            continue;
        }
        // Field 5, octal escapes (a space is \040) as the kernel writes them.
        let Some(point) = before.split(' ').nth(4) else {
            continue;
        };
        set_read_only(&unescape_mount_point(point), true, false).map_err(fail)?;
    }
    Ok(())
}

fn unescape_mount_point(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'\\'
            && let Some(code) = field
                .get(at + 1..at + 4)
                .and_then(|octal| u8::from_str_radix(octal, 8).ok())
        {
            out.push(code);
            at += 4;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    PathBuf::from(std::ffi::OsString::from(
        <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&out),
    ))
}

/// A new network namespace with its loopback up: the job's own servers answer it,
/// and nothing outside is reachable, the host's loopback included.
pub(super) fn enter_network() -> Result<(), Failure> {
    unshare(libc::CLONE_NEWNET)
        .map_err(|e| failure("make the job's network namespace", e, FIX_NETWORK))?;
    loopback_up().map_err(|e| failure("bring up the job's loopback", e, FIX_NETWORK))
}

/// Whether a mount namespace can be made and mounted in (after [`enter`]).
pub(super) fn probe_mount() -> Result<(), Failure> {
    unshare(libc::CLONE_NEWNS)
        .map_err(|e| failure("make the job's mount namespace", e, FIX_MOUNTS))?;
    EmptyFile::make()
        .map(drop)
        .map_err(|e| failure("mount a tmpfs in the job's namespace", e, FIX_MOUNTS))
}

fn loopback_up() -> io::Result<()> {
    // SAFETY: socket takes no pointer.
    let socket = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if socket < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `socket` was just returned by socket and is owned by nothing else.
    let socket = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(socket) };
    // SAFETY: ifreq is plain data, valid all zeros.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in request.ifr_name.iter_mut().zip(b"lo") {
        *to = *from as libc::c_char;
    }
    request.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads the ifreq it is given, which outlives the call, on an open socket.
    let done = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&socket),
            libc::SIOCSIFFLAGS,
            &request,
        )
    };
    if done < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `no_new_privs`, which Landlock sets itself when the file system is confined: no
/// set-uid program or file capability gives a job's process more than it has.
pub(super) fn no_new_privs() -> Result<(), Failure> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(failure(
            "set no_new_privs",
            io::Error::last_os_error(),
            "this kernel is older than Linux 3.5: upgrade it, or run the job unsandboxed (sandbox off, network on)",
        ));
    }
    Ok(())
}

/// The kernel's last capability, read once in the zygote ([`prepare`]).
static LAST_CAP: std::sync::OnceLock<libc::c_ulong> = std::sync::OnceLock::new();

fn last_cap() -> libc::c_ulong {
    fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(63)
}

/// Reads ahead what [`drop_capabilities`] needs.
pub(super) fn prepare() {
    LAST_CAP.get_or_init(last_cap);
}

/// Gives up every capability the user namespace gave, for good: the bounding set
/// first (so that even a job that runs as root inside gets none at `exec`), then the
/// ambient, effective, permitted and inheritable sets.
pub(super) fn drop_capabilities() -> Result<(), Failure> {
    for cap in 0..=*LAST_CAP.get_or_init(last_cap) {
        // EINVAL past the kernel's last capability: nothing left to drop.
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
    }
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a version 3 header and two data structs, as passed, alive for the call.
    if unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } != 0 {
        return Err(failure(
            "drop the capabilities of the job's user namespace",
            io::Error::last_os_error(),
            super::FIX_USER_NAMESPACES,
        ));
    }
    Ok(())
}

fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes flags only.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn failure(step: &str, error: io::Error, fix: &'static str) -> Failure {
    Failure {
        step: step.to_owned(),
        error,
        fix,
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::RawFd;

    use super::*;

    fn descriptors(n: usize) -> Vec<OwnedFd> {
        (0..n)
            .map(|_| {
                rustix::fs::open("/dev/null", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
                    .unwrap()
            })
            .collect()
    }

    /// A kit sent to a spare as its descriptors (`raw_fds`, after the job's) is read back
    /// from them (`from_fds`) as the same namespaces in the same places: the network
    /// namespace only where it has one, and any other count is no kit.
    #[test]
    fn a_kit_reads_back_from_its_descriptors_in_their_order() {
        for count in [3, 4] {
            let fds = descriptors(count);
            let numbers: Vec<RawFd> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
            let kit = Kit::from_fds(fds).expect("a kit of three or four");
            assert_eq!(kit.network_off(), count == 4);
            assert_eq!(kit.raw_fds(), numbers);
            assert_eq!(kit.user.as_raw_fd(), numbers[0]);
            assert_eq!(kit.ipc.as_raw_fd(), numbers[1]);
            assert_eq!(kit.mnt.as_raw_fd(), numbers[2]);
            assert_eq!(
                kit.net.as_ref().map(|net| net.as_raw_fd()),
                numbers.get(3).copied()
            );
            let again = Kit::from_fds(kit.into_fds());
            assert_eq!(again.map(|kit| kit.raw_fds()), Some(numbers));
        }
        for count in [0, 1, 2, 5] {
            assert!(
                Kit::from_fds(descriptors(count)).is_none(),
                "{count} descriptors"
            );
        }
        const { assert!(Kit::MOST_FDS >= 4) };
    }

    impl Kit {
        fn into_fds(self) -> Vec<OwnedFd> {
            [Some(self.user), Some(self.ipc), Some(self.mnt), self.net]
                .into_iter()
                .flatten()
                .collect()
        }
    }
}

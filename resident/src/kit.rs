//! The zygote's store of namespaces made ahead ([`Kit`]): at most one kit
//! ready for a confined job with the network off and one for a job with it on, each
//! made by a short-lived process the zygote forks (a maker) while no job waits on it,
//! and each handed to one job's resident only. The first confined job of each kind
//! makes its own namespaces and asks for the next kit; a kit older than [`MAX_AGE`] is
//! thrown away rather than used, so that a job sees the host's mounts as they are, not
//! as they were long ago (a mount the host makes later reaches a kit's copy only where
//! the host's mount point is shared). A maker that fails stops the store: every job
//! then makes its own, as without it, and reports what fails there.
//!
//! The store also keeps the read rules of the last `deny_read` list a confined job
//! had ([`confine::Prepared`]), made by the zygote itself after a job was handed on,
//! and handed to each next job with that list while its parents are as they were;
//! when one changed, that job lists them itself and the rules are made again.
//! A job in a session network (issue 43, `confine/network.rs`) enters that network's
//! user namespace first, from where a kit made in the host's cannot be entered: its
//! kits are made inside the session network's user namespace (`Kit::make_in`), one
//! ready for each of the last [`SESSIONS`] session networks jobs came from. The store
//! keeps only their user namespace, never the network, so a session network it
//! remembers still goes when its holder does.

use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use std::path::PathBuf;

use bashd_resident_core::confine::{self, Kit, Prepared, ReadRules, Unprepared};

/// How old a kit may be when a job takes it.
const MAX_AGE: Duration = Duration::from_secs(10);
/// How many session networks have a kit made for them.
const SESSIONS: usize = 4;
/// How long a session network no job came from is remembered.
const SESSION_IDLE: Duration = Duration::from_secs(60);

/// A session network's user namespace, as device and inode.
type Key = (u64, u64);

/// A session network the store makes kits for.
struct SessionSlot {
    key: Key,
    /// Its user namespace, where the maker makes the kit.
    user: OwnedFd,
    ready: Option<(Kit, Instant)>,
    used: Instant,
}

/// What a maker makes a kit for.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// The host's user namespace, the network off or on.
    Host { network_off: bool },
    /// A session network's user namespace.
    Session(Key),
}

/// The store, owned by the zygote's loop.
#[derive(Default)]
pub struct Store {
    /// The kit ready for a job with the network on (0) and off (1), and when it was
    /// made.
    ready: [Option<(Kit, Instant)>; 2],
    /// Which kinds a job has asked for: only those are made.
    wanted: [bool; 2],
    /// The session networks' kits, the last used first.
    sessions: Vec<SessionSlot>,
    maker: Option<Maker>,
    /// A maker failed: no more are started.
    stopped: bool,
    /// The read rules made ahead, and the `deny_read` list to make them for next.
    reads: Option<Prepared>,
    reads_wanted: Option<Vec<PathBuf>>,
    /// A list whose rules cannot be made ahead (a path on it resolves elsewhere).
    reads_never: Option<Vec<PathBuf>>,
}

/// A process making a kit: it writes one byte on `ready` once its namespaces are
/// made, then waits, in them, until `release` closes.
struct Maker {
    pid: libc::pid_t,
    ready: OwnedFd,
    /// Held, never written: its close lets the maker exit.
    _release: OwnedFd,
    kind: Kind,
}

impl Store {
    /// The kit for a job with the network `network_off`, if one is ready and fresh;
    /// either way, such kits are made from now on.
    pub fn take(&mut self, network_off: bool) -> Option<Kit> {
        let kind = usize::from(network_off);
        self.wanted[kind] = true;
        let (kit, made) = self.ready[kind].take()?;
        (made.elapsed() < MAX_AGE).then_some(kit)
    }

    /// The read rules for a job with `spec`, if the ones ready are its and fresh; when
    /// not, the rules of its list are made next ([`Store::refill`]).
    pub fn take_reads(&mut self, spec: &confine::Spec) -> Option<ReadRules> {
        if !spec.files || spec.deny_read.is_empty() {
            return None;
        }
        match &self.reads {
            Some(ready) if ready.of(&spec.deny_read) => {
                if ready.fresh() {
                    return ReadRules::of(ready, spec);
                }
                self.reads = None;
            }
            _ => {}
        }
        if self.reads_never.as_deref() != Some(&spec.deny_read[..]) {
            self.reads_wanted = Some(spec.deny_read.clone());
        }
        None
    }

    /// The kit for a job in the session network whose user namespace is `user`, if
    /// one is ready and fresh; either way, its kits are made from now on.
    pub fn take_in(&mut self, user: &impl AsFd) -> Option<Kit> {
        let key = key_of(user)?;
        let now = Instant::now();
        self.sessions
            .retain(|slot| slot.key == key || now.duration_since(slot.used) < SESSION_IDLE);
        let at = match self.sessions.iter().position(|slot| slot.key == key) {
            Some(at) => at,
            None => {
                let user = user.as_fd().try_clone_to_owned().ok()?;
                self.sessions.insert(
                    0,
                    SessionSlot {
                        key,
                        user,
                        ready: None,
                        used: now,
                    },
                );
                self.sessions.truncate(SESSIONS);
                0
            }
        };
        let slot = &mut self.sessions[at];
        slot.used = now;
        let (kit, made) = slot.ready.take()?;
        (made.elapsed() < MAX_AGE).then_some(kit)
    }

    /// The descriptor to poll for a maker's word, or -1.
    pub fn poll_fd(&self) -> RawFd {
        self.maker.as_ref().map_or(-1, |m| m.ready.as_raw_fd())
    }

    /// Takes the kit of the maker whose word came (or its end), and lets it exit.
    /// Called before the zygote reaps, so the maker, not yet reaped, still owns its
    /// pid.
    pub fn collect(&mut self) {
        let Some(maker) = self.maker.take() else {
            return;
        };
        let mut byte = 0u8;
        // SAFETY: one byte into a local, from a descriptor the maker owns.
        let got = unsafe { libc::read(maker.ready.as_raw_fd(), (&raw mut byte).cast(), 1) };
        let network_off = maker.kind == Kind::Host { network_off: true };
        let kit = (got == 1)
            .then(|| Kit::open(maker.pid, network_off).ok())
            .flatten();
        let made = Instant::now();
        match (kit, maker.kind) {
            (Some(kit), Kind::Host { network_off }) => {
                self.ready[usize::from(network_off)] = Some((kit, made))
            }
            (Some(kit), Kind::Session(key)) => {
                // A session network forgotten meanwhile lets its kit go.
                if let Some(slot) = self.sessions.iter_mut().find(|slot| slot.key == key) {
                    slot.ready = Some((kit, made));
                }
            }
            (None, Kind::Host { .. }) => self.stopped = true,
            // Its holder may be gone: that session network is forgotten, not the store.
            (None, Kind::Session(key)) => self.sessions.retain(|slot| slot.key != key),
        }
        // Closing `_release` lets the maker exit; the zygote reaps it with the rest.
        drop(maker);
    }

    /// Starts a maker for a kind that is wanted and not ready, unless one runs.
    /// `close` are the zygote's descriptors, which the maker closes first.
    pub fn refill(&mut self, close: &[RawFd]) {
        if let Some(deny_read) = self.reads_wanted.take() {
            match Prepared::make(&deny_read) {
                Ok(prepared) => self.reads = Some(prepared),
                Err(Unprepared::Unresolved) => self.reads_never = Some(deny_read),
                // Made again after the next job with this list.
                Err(Unprepared::NotNow) => {}
            }
        }
        if self.stopped || self.maker.is_some() {
            return;
        }
        let host = (0..2)
            .find(|&k| self.wanted[k] && self.ready[k].is_none())
            .map(|k| Kind::Host {
                network_off: k == 1,
            });
        let session = || {
            self.sessions
                .iter()
                .find(|slot| slot.ready.is_none() && slot.used.elapsed() < SESSION_IDLE)
                .map(|slot| Kind::Session(slot.key))
        };
        let Some(kind) = host.or_else(session) else {
            return;
        };
        let user = match kind {
            Kind::Session(key) => self
                .sessions
                .iter()
                .find(|slot| slot.key == key)
                .and_then(|slot| slot.user.try_clone().ok()),
            Kind::Host { .. } => None,
        };
        if matches!(kind, Kind::Session(_)) && user.is_none() {
            return;
        }
        let (Ok((ready_read, ready_write)), Ok((release_read, release_write))) = (
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC),
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC),
        ) else {
            self.stopped = true;
            return;
        };
        // SAFETY: the zygote is single-threaded, so the child is a whole copy of it and
        // may allocate.
        match unsafe { libc::fork() } {
            0 => {
                for &fd in close {
                    // SAFETY: the zygote's own descriptors, not the maker's to use.
                    unsafe { libc::close(fd) };
                }
                self.forget();
                drop((ready_read, release_write));
                crate::set_name(c"bashd-kit");
                // A session's kind always has its user namespace here (checked above).
                let network_off = kind == Kind::Host { network_off: true };
                let made = user
                    .as_ref()
                    .map_or_else(|| Kit::make(network_off), Kit::make_in);
                if made.is_ok() {
                    // SAFETY: one byte from a static, on a descriptor this process owns.
                    unsafe { libc::write(ready_write.as_raw_fd(), b"k".as_ptr().cast(), 1) };
                    let mut byte = 0u8;
                    // Returns at end of file: the zygote holds the kit, or is gone.
                    // SAFETY: one byte into a local.
                    unsafe { libc::read(release_read.as_raw_fd(), (&raw mut byte).cast(), 1) };
                }
                // SAFETY: _exit ends this process and nothing else.
                unsafe { libc::_exit(0) }
            }
            -1 => self.stopped = true,
            pid => {
                self.maker = Some(Maker {
                    pid,
                    ready: ready_read,
                    _release: release_write,
                    kind,
                })
            }
        }
    }

    /// Closes every descriptor of the store in a child of the zygote (a resident, a
    /// maker): only the zygote hands kits out.
    pub fn forget(&mut self) {
        *self = Store::default();
    }
}

/// The device and inode of a namespace's descriptor.
fn key_of(fd: &impl AsFd) -> Option<Key> {
    let stat = rustix::fs::fstat(fd).ok()?;
    Some((stat.st_dev, stat.st_ino))
}

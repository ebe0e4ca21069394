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
//!
//! Kits are also staged (`confine::Staged`): for each of the last [`STAGED`] specs
//! and workdirs confined jobs came with, the zygote finds what such a job mounts
//! (after that job was handed on) and a maker makes a kit with those mounts made in
//! its mount namespace; the next job with that spec and workdir takes it while every
//! path the finding depends on is unchanged, and enters its file system confined.
//! Otherwise it takes a plain kit, as before, and that spec is staged again.

use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use std::path::PathBuf;

use bashd_resident_core::confine::{self, Kit, Prepared, ReadRules, Staged, Unprepared};

/// How old a kit may be when a job takes it.
const MAX_AGE: Duration = Duration::from_secs(10);
/// How many session networks have a kit made for them.
const SESSIONS: usize = 4;
/// How long a session network no job came from is remembered.
const SESSION_IDLE: Duration = Duration::from_secs(60);
/// How many specs and workdirs have a kit staged for them: the profiles and network
/// settings a session's agent switches between.
const STAGED: usize = 4;

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
    /// The staged slot of this number.
    Staged(u64),
}

/// Where a staged kit's namespaces are made: as a plain kit's.
enum Base {
    Host {
        network_off: bool,
    },
    /// A session network's user namespace (a copy of the job's descriptor).
    Session(Key, OwnedFd),
}

impl Base {
    fn same(&self, other: &Base) -> bool {
        match (self, other) {
            (Base::Host { network_off: a }, Base::Host { network_off: b }) => a == b,
            (Base::Session(a, _), Base::Session(b, _)) => a == b,
            _ => false,
        }
    }
}

/// The kit staged for one spec and workdir, or to be.
struct StagedSlot {
    number: u64,
    base: Base,
    spec: confine::Spec,
    workdir: Vec<u8>,
    /// What such a job mounts, found by the zygote; `None` until found.
    staged: Option<Staged>,
    ready: Option<(Kit, Instant)>,
    /// Found unstageable (or its maker is out): not tried again until a job of it
    /// comes.
    tried: bool,
    /// How many of its jobs in a row found its kit stale (their workspace changed in
    /// between: a build, an edit saved by rename), and how many jobs came.
    stale: u32,
    jobs: u32,
    /// When a job of it last came.
    used: Instant,
}

/// After this many stale kits in a row, a slot is staged again only every
/// [`STALE_EVERY`]th job: staging for jobs that change their workspace each time is
/// work for nothing.
const STALE_STREAK: u32 = 3;
const STALE_EVERY: u32 = 8;

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
    /// The staged kits, the last used first.
    staged: Vec<StagedSlot>,
    /// The number of the next staged slot.
    staged_next: u64,
    /// Kits taken too old or stale, closed once no spawn waits (`refill`): the last
    /// descriptor of a mount namespace unmounts its mounts, milliseconds.
    graveyard: Vec<Kit>,
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
        self.young(kit, made)
    }

    /// `kit` if it is not older than [`MAX_AGE`]; an older one goes to the graveyard.
    fn young(&mut self, kit: Kit, made: Instant) -> Option<Kit> {
        if made.elapsed() < MAX_AGE {
            return Some(kit);
        }
        self.graveyard.push(kit);
        None
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
        self.young(kit, made)
    }

    /// The kit staged for a confined job with `spec` in `workdir` (`terminal`: with
    /// its own terminal), if one is ready, fresh and still what the job would mount;
    /// either way, such kits are staged from now on. `session`: the user namespace of
    /// the session network the job enters, else the job's network setting tells
    /// which host kit.
    pub fn take_staged(
        &mut self,
        spec: &confine::Spec,
        workdir: &[u8],
        terminal: bool,
        session: Option<&impl AsFd>,
    ) -> Option<Kit> {
        if self.stopped || !Staged::stageable(spec, terminal) {
            return None;
        }
        let base = match session {
            Some(user) => Base::Session(key_of(user)?, user.as_fd().try_clone_to_owned().ok()?),
            None => Base::Host {
                network_off: spec.network_off,
            },
        };
        let at = self.staged.iter().position(|slot| {
            slot.base.same(&base) && slot.spec == *spec && slot.workdir == workdir
        });
        let mut slot = match at {
            Some(at) => self.staged.remove(at),
            None => {
                self.staged_next += 1;
                StagedSlot {
                    number: self.staged_next,
                    base,
                    spec: spec.clone(),
                    workdir: workdir.to_vec(),
                    staged: None,
                    ready: None,
                    tried: false,
                    stale: 0,
                    jobs: 0,
                    used: Instant::now(),
                }
            }
        };
        slot.jobs = slot.jobs.wrapping_add(1);
        slot.used = Instant::now();
        let kit = slot.ready.take().and_then(|(mut kit, made)| {
            let fresh = made.elapsed() < MAX_AGE
                && slot
                    .staged
                    .as_ref()
                    .is_some_and(|staged| staged.fits(spec, workdir) && staged.fresh());
            kit.set_staged(true);
            slot.stale = if fresh { 0 } else { slot.stale + 1 };
            if fresh {
                Some(kit)
            } else {
                // Its teardown (the mounts' unmounting waits for the RCU) is not
                // for this job's path: dropped after the job is handed on.
                self.graveyard.push(kit);
                None
            }
        });
        if kit.is_none() {
            // Found again from what is there now, before the next kit is staged.
            slot.staged = None;
        }
        slot.tried = slot.stale >= STALE_STREAK && slot.jobs % STALE_EVERY != 0;
        self.staged.insert(0, slot);
        self.staged.truncate(STAGED);
        kit
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
        let network_off = match maker.kind {
            Kind::Host { network_off } => network_off,
            Kind::Staged(number) => self.staged.iter().any(|slot| {
                slot.number == number && matches!(slot.base, Base::Host { network_off: true })
            }),
            Kind::Session(_) => false,
        };
        let kit = (got == 1)
            .then(|| Kit::open(maker.pid, network_off).ok())
            .flatten();
        let made = Instant::now();
        match (kit, maker.kind) {
            (kit, Kind::Staged(number)) => {
                // A slot forgotten meanwhile lets its kit go. One whose maker failed
                // (a path it mounts went away since it was found) is found again
                // when a job of it comes.
                if let Some(slot) = self.staged.iter_mut().find(|slot| slot.number == number) {
                    match kit {
                        Some(kit) => slot.ready = Some((kit, made)),
                        None => slot.staged = None,
                    }
                }
            }
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
        self.expire();
        self.graveyard.clear();
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
        let Some(kind) = host.or_else(session).or_else(|| self.stage_next()) else {
            return;
        };
        let user = match kind {
            Kind::Session(key) => self
                .sessions
                .iter()
                .find(|slot| slot.key == key)
                .and_then(|slot| slot.user.try_clone().ok()),
            Kind::Host { .. } => None,
            Kind::Staged(number) => self
                .staged
                .iter()
                .find(|slot| slot.number == number)
                .and_then(|slot| match &slot.base {
                    Base::Session(_, user) => user.try_clone().ok(),
                    Base::Host { .. } => None,
                }),
        };
        // What the maker makes: the namespaces where the kind says, then, for a
        // staged kit, the mounts of its slot.
        let (network_off, staged) = match kind {
            Kind::Host { network_off } => (network_off, false),
            Kind::Session(_) => (false, false),
            Kind::Staged(number) => {
                let slot = self.staged.iter().find(|slot| slot.number == number);
                (
                    slot.is_some_and(|slot| matches!(slot.base, Base::Host { network_off: true })),
                    slot.is_some_and(|slot| slot.staged.is_some()),
                )
            }
        };
        let in_session = match kind {
            Kind::Session(_) => true,
            Kind::Staged(_) => user.is_some(),
            Kind::Host { .. } => false,
        };
        if in_session && user.is_none() || matches!(kind, Kind::Staged(_)) && !staged {
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
                // The mounts of a staged kit, taken before the store is forgotten.
                let staged = match kind {
                    Kind::Staged(number) => self
                        .staged
                        .iter_mut()
                        .find(|slot| slot.number == number)
                        .and_then(|slot| slot.staged.take()),
                    _ => None,
                };
                self.forget();
                drop((ready_read, release_write));
                crate::set_name(c"bashd-kit");
                if staged.is_some() {
                    // What it makes is a job's work moved off that job's path: it
                    // yields to the jobs running meanwhile, rather than slow them.
                    // SAFETY: setpriority takes integers only.
                    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 10) };
                }
                // A session's kind always has its user namespace here (checked above).
                let made = user
                    .as_ref()
                    .map_or_else(|| Kit::make(network_off), Kit::make_in)
                    .and_then(|()| staged.as_ref().map_or(Ok(()), Staged::mount));
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

    /// Lets go of what only waits, held past its use: a staged kit older than
    /// [`MAX_AGE`] (a job would not take it; its mount namespace holds binds of a
    /// workspace and a session's temp dir, so a filesystem unmounted or a directory
    /// removed stays pinned), and a session network's or a staged slot no job came
    /// from for [`SESSION_IDLE`] (its user namespace, its kits). Plain host kits
    /// are kept: made again at once, they would be made every [`MAX_AGE`] for ever.
    fn expire(&mut self) {
        for slot in &mut self.staged {
            if slot
                .ready
                .as_ref()
                .is_some_and(|(_, made)| made.elapsed() >= MAX_AGE)
                && let Some((kit, _)) = slot.ready.take()
            {
                self.graveyard.push(kit);
                // Staged again when a job of it comes, from what is there then.
                slot.staged = None;
                slot.tried = true;
            }
        }
        let idle = |used: Instant| used.elapsed() >= SESSION_IDLE;
        let (sessions, staged) = (
            std::mem::take(&mut self.sessions),
            std::mem::take(&mut self.staged),
        );
        for slot in sessions {
            if idle(slot.used) {
                self.graveyard.extend(slot.ready.map(|(kit, _)| kit));
            } else {
                self.sessions.push(slot);
            }
        }
        for slot in staged {
            if idle(slot.used) {
                self.graveyard.extend(slot.ready.map(|(kit, _)| kit));
            } else {
                self.staged.push(slot);
            }
        }
    }

    /// How long the zygote may wait for a spawn before [`Store::expire`] has work:
    /// `None` when nothing waits to expire.
    pub fn next_expiry(&self) -> Option<Duration> {
        let staged_kits = self
            .staged
            .iter()
            .filter_map(|slot| slot.ready.as_ref().map(|(_, made)| *made + MAX_AGE));
        let slots = self
            .sessions
            .iter()
            .map(|slot| slot.used)
            .chain(self.staged.iter().map(|slot| slot.used))
            .map(|used| used + SESSION_IDLE);
        staged_kits
            .chain(slots)
            .min()
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// The staged slot whose kit is to be made next, its mounts found now (in the
    /// zygote, off every job's path); `None` when none is wanted.
    fn stage_next(&mut self) -> Option<Kind> {
        let slot = self
            .staged
            .iter_mut()
            .find(|slot| slot.ready.is_none() && !slot.tried)?;
        if slot.staged.is_none() {
            slot.staged = Staged::find(&slot.spec, &slot.workdir);
        }
        // Tried once until a job of it comes again, found or not.
        slot.tried = true;
        slot.staged.as_ref().map(|_| Kind::Staged(slot.number))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(number: u64, used: Instant) -> StagedSlot {
        StagedSlot {
            number,
            base: Base::Host { network_off: true },
            spec: confine::Spec::default(),
            workdir: b"/".to_vec(),
            staged: None,
            ready: None,
            tried: false,
            stale: 0,
            jobs: 1,
            used,
        }
    }

    #[test]
    fn a_staged_slot_no_job_came_from_for_a_while_is_let_go() {
        let mut store = Store::default();
        assert_eq!(store.next_expiry(), None);
        let now = Instant::now();
        let Some(long_ago) = now.checked_sub(SESSION_IDLE + Duration::from_secs(1)) else {
            return;
        };
        store.staged = vec![slot(1, now), slot(2, long_ago)];
        assert_eq!(store.next_expiry(), Some(Duration::ZERO));
        store.expire();
        let kept: Vec<u64> = store.staged.iter().map(|slot| slot.number).collect();
        assert_eq!(kept, [1]);
        let wait = store.next_expiry().unwrap();
        assert!(wait > SESSION_IDLE - Duration::from_secs(5), "{wait:?}");
    }
}

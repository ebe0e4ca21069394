//! `/proc/PID/stat`, read one way for the daemon (containment, `top`, the input probe,
//! session owners), the client (finding its agent) and the tests.
//!
//! It lives here, beside the messages, because both sides read it: the client names
//! an owner by its pid and start time, and the daemon checks that same pair
//! ([`process_start_time`]). One parser keeps the two from disagreeing on a process.
//!
//! The file is `PID (COMM) STATE PPID ...`, where COMM is the process's name, up to 15
//! bytes that the process chose: it may hold spaces, parentheses and bytes that are
//! not UTF-8. The fields after it are numbers and one state letter, so the name ends at
//! the file's *last* `)`; the file is read as bytes, so that an odd name never hides a
//! process.

use std::fs;

/// What `/proc/PID/stat` says of one process; the fields its readers need, named as
/// proc(5) names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// The name (field 2), without its parentheses; bytes that are not UTF-8 read as
    /// U+FFFD.
    pub comm: String,
    /// Field 3: `R` running, `S` sleeping, `D` waiting on a disk, `Z` zombie, `T`
    /// stopped, `t` stopped by a tracer, `X` dead, `I` idle (a kernel thread).
    pub state: char,
    /// Field 4; 0 for the first process of a pid namespace.
    pub ppid: u32,
    /// Field 5: the process group.
    pub pgrp: u32,
    /// Field 6: the session.
    pub session: u32,
    /// Field 7: the controlling terminal's device number, 0 for none.
    pub tty_nr: i32,
    /// Field 9: the kernel's `PF_*` flags.
    pub flags: u32,
    /// Field 14: time spent in user mode, in clock ticks.
    pub utime: u64,
    /// Field 15: time spent in the kernel, in clock ticks.
    pub stime: u64,
    /// Field 22: when the process started, in clock ticks after boot. With the pid it
    /// names one process for the whole life of the system.
    pub starttime: u64,
    /// Field 24: resident set size, in pages.
    pub rss: u64,
    /// Field 51: where the environment ends in the process's memory. `None` before
    /// Linux 3.5, which does not show it. 0 for a kernel thread, for a process this one
    /// may not trace, and for a process in the middle of an exec, between the switch to
    /// the new program's memory and the copying of its environment.
    pub env_end: Option<u64>,
}

/// `PF_KTHREAD` of the kernel's process flags.
const PF_KTHREAD: u32 = 0x0020_0000;

impl ProcStat {
    /// The stat of `pid`; `None` when it is gone (or the file reads as no stat).
    /// Blocking: reads `/proc`.
    pub fn read(pid: u32) -> Option<ProcStat> {
        ProcStat::read_from(fs::File::open(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Reads a stat line from `file` and parses it. The line is a few hundred bytes
    /// and the kernel gives it whole to one read: `fs::read` asked for the file's size,
    /// then grew its buffer from 32 bytes, six system calls where two do (the daemon
    /// reads each job's shell, bashc its agent, on every call; issue 31).
    fn read_from(mut file: impl std::io::Read) -> Option<ProcStat> {
        let mut line = [0u8; 1024];
        let mut len = 0;
        loop {
            match file.read(&mut line[len..]) {
                Ok(0) => return ProcStat::parse(&line[..len]),
                Ok(n) => len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
            if len == line.len() {
                let mut whole = line.to_vec();
                file.read_to_end(&mut whole).ok()?;
                return ProcStat::parse(&whole);
            }
        }
    }

    /// Parses the contents of a `/proc/PID/stat`; `None` when a field this struct
    /// holds is missing or not a number.
    pub fn parse(stat: &[u8]) -> Option<ProcStat> {
        let open = stat.iter().position(|&b| b == b'(')?;
        let close = stat.iter().rposition(|&b| b == b')')?;
        let comm = String::from_utf8_lossy(stat.get(open + 1..close)?).into_owned();
        // After the name, only numbers and the state letter: ASCII.
        let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
        let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
        // proc(5) counts from 1 with the pid; the name is field 2, so field N is
        // `fields[N - 3]`.
        let field = |n: usize| fields.get(n - 3).copied();
        let mut state = field(3)?.chars();
        Some(ProcStat {
            comm,
            state: state.next().filter(|_| state.next().is_none())?,
            ppid: field(4)?.parse().ok()?,
            pgrp: field(5)?.parse().ok()?,
            session: field(6)?.parse().ok()?,
            tty_nr: field(7)?.parse().ok()?,
            flags: field(9)?.parse().ok()?,
            utime: field(14)?.parse().ok()?,
            stime: field(15)?.parse().ok()?,
            starttime: field(22)?.parse().ok()?,
            rss: field(24)?.parse().ok()?,
            env_end: field(51).and_then(|end| end.parse().ok()),
        })
    }

    /// Whether it still runs: neither a zombie (it exited and waits to be reaped) nor
    /// dead.
    pub fn alive(&self) -> bool {
        self.state != 'Z' && self.state != 'X'
    }

    /// Whether it is a kernel thread, which has no memory of its own, so no
    /// environment, and is never in an exec.
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }

    /// User and kernel time together, in clock ticks.
    pub fn cpu_ticks(&self) -> u64 {
        self.utime + self.stime
    }
}

/// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks since
/// boot; `None` when it is gone. With the pid it names one process for the whole life
/// of the system.
pub fn process_start_time(pid: u32) -> Option<u64> {
    ProcStat::read(pid).map(|stat| stat.starttime)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line as Linux 6 writes it, of a process named `name`: pid 4242, parent 17,
    /// group 4242, session 17, terminal 34816, flags 4194560, utime 31, stime 7,
    /// started at 123456, 812 pages resident, environment ending at 140737488350000.
    fn line(name: &[u8]) -> Vec<u8> {
        let mut line = b"4242 (".to_vec();
        line.extend_from_slice(name);
        line.extend_from_slice(
            b") S 17 4242 17 34816 4242 4194560 1024 0 0 0 31 7 0 0 20 0 1 0 123456 \
              8957952 812 18446744073709551615 94000000000000 94000000100000 \
              140737488340000 0 0 0 65536 4 65538 1 0 0 17 3 0 0 0 0 0 \
              94000000200000 94000000210000 94000000300000 140737488345000 \
              140737488346000 140737488346000 140737488350000 0\n",
        );
        line
    }

    #[test]
    fn reads_every_field_by_its_name() {
        let stat = ProcStat::parse(&line(b"sleep")).unwrap();
        assert_eq!(
            stat,
            ProcStat {
                comm: "sleep".to_owned(),
                state: 'S',
                ppid: 17,
                pgrp: 4242,
                session: 17,
                tty_nr: 34816,
                flags: 4194560,
                utime: 31,
                stime: 7,
                starttime: 123456,
                rss: 812,
                env_end: Some(140737488350000),
            }
        );
        assert_eq!(stat.cpu_ticks(), 38);
        assert!(stat.alive() && !stat.is_kernel_thread());
    }

    #[test]
    fn a_name_with_spaces_and_parentheses_ends_at_the_last_one() {
        for name in [&b"a) b (c"[..], b"x) S 1 2 3", b")", b"(", b"", b"a  b"] {
            let stat = ProcStat::parse(&line(name)).unwrap();
            assert_eq!(stat.comm.as_bytes(), name);
            assert_eq!((stat.state, stat.ppid, stat.starttime), ('S', 17, 123456));
        }
    }

    #[test]
    fn the_kernel_shows_such_a_name_as_the_parser_reads_it() {
        // A thread's name is its comm; the kernel writes the line.
        let named = std::thread::Builder::new().name("a) b (c".to_owned());
        let stat = named
            .spawn(|| ProcStat::parse(&fs::read("/proc/thread-self/stat").unwrap()))
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(stat.comm, "a) b (c");
        assert_eq!(
            stat.pgrp,
            rustix::process::getpgrp().as_raw_nonzero().get() as u32
        );
        assert!(stat.alive());
    }

    #[test]
    fn a_name_that_is_not_utf8_still_gives_the_fields() {
        let stat = ProcStat::parse(&line(b"\xff\xfe)")).unwrap();
        assert_eq!(stat.comm, "\u{fffd}\u{fffd})");
        assert_eq!(stat.pgrp, 4242);
    }

    #[test]
    fn a_kernel_before_3_5_has_no_env_end() {
        let full = line(b"old");
        let cut = full
            .split(|&b| b == b' ')
            .take(44)
            .collect::<Vec<_>>()
            .join(&b' ');
        let stat = ProcStat::parse(&cut).unwrap();
        assert_eq!((stat.env_end, stat.rss), (None, 812));
    }

    #[test]
    fn a_broken_line_is_no_stat() {
        let bad: [&[u8]; 6] = [
            b"",
            b"4242 sleep S 17",
            b"4242 (sleep) S 17 4242",
            b"4242 (sleep) S x 4242 17 0 0 0 0 0 0 0 1 1 0 0 0 0 0 0 1 0 1",
            b"4242 (sleep) SS 17 4242 17 0 0 0 0 0 0 0 1 1 0 0 0 0 0 0 1 0 1",
            b"4242 )sleep( S 17 4242 17 0 0 0 0 0 0 0 1 1 0 0 0 0 0 0 1 0 1",
        ];
        for line in bad {
            assert_eq!(ProcStat::parse(line), None, "{}", line.escape_ascii());
        }
        let good = b"4242 (sleep) S 17 4242 17 0 0 0 0 0 0 0 1 1 0 0 0 0 0 0 1 0 1";
        assert!(ProcStat::parse(good).is_some());
    }

    #[test]
    fn states_that_are_not_alive() {
        let mut stat = ProcStat::parse(&line(b"z")).unwrap();
        for (state, alive) in [('Z', false), ('X', false), ('T', true), ('R', true)] {
            stat.state = state;
            assert_eq!(stat.alive(), alive, "{state}");
        }
    }

    #[test]
    fn a_line_longer_than_the_first_buffer_or_given_in_pieces_reads_whole() {
        /// Gives its bytes seven at a time, as a slow reader would.
        struct Trickle<'a>(&'a [u8]);
        impl std::io::Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(buf.len()).min(7);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let name = "x".repeat(1500);
        let long = line(name.as_bytes());
        assert!(long.len() > 1024);
        let read = ProcStat::read_from(Trickle(&long)).unwrap();
        assert_eq!(read, ProcStat::parse(&long).unwrap());
        assert_eq!(read.comm, name);
        let short = line(b"sleep");
        assert_eq!(
            ProcStat::read_from(Trickle(&short)),
            ProcStat::parse(&short)
        );
    }

    #[test]
    fn reads_this_process() {
        let me = ProcStat::read(std::process::id()).unwrap();
        let parent = rustix::process::getppid().unwrap().as_raw_nonzero().get();
        assert_eq!(me.ppid, parent as u32);
        assert_eq!(
            me.pgrp,
            rustix::process::getpgrp().as_raw_nonzero().get() as u32
        );
        assert!(me.alive() && !me.is_kernel_thread());
        assert!(me.starttime > 0 && me.env_end.is_some_and(|end| end > 0));
        assert_eq!(process_start_time(std::process::id()), Some(me.starttime));
        // kthreadd, where this system shows it: a kernel thread.
        if let Some(kthreadd) = ProcStat::read(2).filter(|stat| stat.ppid == 0) {
            assert!(kthreadd.is_kernel_thread());
        }
    }
}

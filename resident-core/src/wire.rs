//! What the daemon and a job's resident (`bashd-resident`) say to each other over the
//! control socket that is the resident's stdin: one line per message, text, so a
//! person can read it in `strace` and a torn read costs only the line.
//!
//! Resident to daemon: `started PID RESIDENT` (the shell's pid and the resident's own), `leader STATUS` (the raw wait status of the
//! job's shell), `done USER_US SYSTEM_US MAXRSS_KB REAPED`, `error TEXT` (the
//! setup failed; the shell never ran).
//! Daemon to resident: `signal N` (to every process of the job), `kill` (SIGKILL to
//! every process of the job, again until none is left).
//! The daemon closing its end (it died) means `kill`.
//!
//! Before that, the daemon asks the zygote (`bashd-resident --zygote`, started once) for
//! each job's resident with a [`Spawn`]: one frame on the zygote's socket, a 4-byte
//! length and the fields, with the job's descriptors ([`SpawnFds`]) attached. The
//! zygote forks the resident from itself, so a job pays no exec or dynamic link for
//! its resident.

use std::fmt;

/// A message from the resident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// The job's shell was forked with pid `pid`, which is also its process group;
    /// `resident` is the resident's own pid, the root of the job's processes. Sent by
    /// the shell's own process just before its exec, so that it is always the first
    /// report, even of a job whose first command kills its resident.
    Started { pid: i32, resident: i32 },
    /// The job's shell exited; `status` is as `waitpid` gave it.
    Leader { status: i32 },
    /// The last process of the job is gone; the resident exits next.
    Done(Usage),
    /// The resident could not set the job up (join its cgroup, fork the shell); it
    /// exits next, and the shell never ran.
    Error(String),
}

/// What the job's processes used, as the resident's `RUSAGE_CHILDREN` counts it: every
/// process of the job that was reaped, by the resident or by a parent of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub user_us: u64,
    pub system_us: u64,
    /// The largest resident set of any one of those processes.
    pub max_rss_kb: u64,
    /// Processes the resident reaped: the shell and every orphan reparented to it.
    pub reaped: u64,
}

/// A message to the resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Signal(i32),
    Kill,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Report::Started { pid, resident } => writeln!(f, "started {pid} {resident}"),
            Report::Leader { status } => writeln!(f, "leader {status}"),
            Report::Done(u) => writeln!(
                f,
                "done {} {} {} {}",
                u.user_us, u.system_us, u.max_rss_kb, u.reaped
            ),
            // One line: a newline in the text would end the message early.
            Report::Error(text) => writeln!(f, "error {}", text.replace('\n', " ")),
        }
    }
}

impl Report {
    /// One line, without its newline.
    pub fn parse(line: &str) -> Option<Report> {
        if let Some(text) = line.strip_prefix("error ") {
            return Some(Report::Error(text.to_owned()));
        }
        let mut words = line.split(' ');
        let report = match words.next()? {
            "started" => Report::Started {
                pid: words.next()?.parse().ok()?,
                resident: words.next()?.parse().ok()?,
            },
            "leader" => Report::Leader {
                status: words.next()?.parse().ok()?,
            },
            "done" => {
                let mut number = || words.next()?.parse::<u64>().ok();
                Report::Done(Usage {
                    user_us: number()?,
                    system_us: number()?,
                    max_rss_kb: number()?,
                    reaped: number()?,
                })
            }
            _ => return None,
        };
        words.next().is_none().then_some(report)
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Order::Signal(n) => writeln!(f, "signal {n}"),
            Order::Kill => writeln!(f, "kill"),
        }
    }
}

impl Order {
    /// One line, without its newline.
    pub fn parse(line: &str) -> Option<Order> {
        match line.split_once(' ') {
            None if line == "kill" => Some(Order::Kill),
            Some(("signal", n)) => n.parse().ok().map(Order::Signal),
            _ => None,
        }
    }
}

/// What the zygote needs to start one job's resident, besides its descriptors.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Spawn {
    /// The job's cgroup, into which the resident clones the shell.
    pub cgroup: Option<Vec<u8>>,
    /// `RLIMIT_NOFILE` (soft, hard) for the job.
    pub nofile: Option<(u64, u64)>,
    /// `RLIMIT_AS` for the shell, where no cgroup holds the job's memory.
    pub rlimit_as: Option<u64>,
    pub oom_score_adj: Option<i32>,
    pub workdir: Vec<u8>,
    /// The shell and its arguments; the first is the path run.
    pub program: Vec<Vec<u8>>,
    /// The job's whole environment, `KEY=VALUE` each.
    pub env: Vec<Vec<u8>>,
    /// A fourth descriptor comes with the spawn: the read end of the job's stdin pipe,
    /// which the shell gets instead of /dev/null (`bashc exec --stdin pipe`).
    pub stdin_pipe: bool,
    /// What confines the job ([`crate::confine::Spec`], encoded): the shell's
    /// process applies it to itself before `exec`, in namespaces the zygote made
    /// ahead where it has them, under the seccomp filter its resident installed.
    pub sandbox: Option<Vec<u8>>,
    /// The job's descriptors are the slave of a terminal (`exec --pty`): the shell
    /// leads a session of its own with that terminal as its controlling terminal.
    pub pty: bool,
    /// One more descriptor comes last: the job's end of its channel to the daemon
    /// (the daemon's `sandbox/channel.rs`), which the shell inherits as [`CHANNEL_FD`].
    pub channel: bool,
    /// Two more descriptors come after the channel: the user and network namespaces of
    /// the session network the job shares (`confine::network`), which the shell's
    /// process enters before it makes its own namespaces.
    pub network: bool,
}

/// Where a job's shell finds its channel to the daemon; the daemon names it in the
/// job's environment (`BASHD_CHANNEL`). High enough that a script's own redirections
/// (3 to 9) and bash's saved descriptors (10 and up, lowest free first) leave it be.
pub const CHANNEL_FD: i32 = 63;

/// The descriptors that go with a [`Spawn`], in this order: the resident's end of its
/// control socket, then the job's stdout and stderr pipes (the same pipe twice when
/// stderr is merged), then, with `stdin_pipe`, the job's stdin pipe, then, with
/// `channel`, the job's channel, then, with `network`, the session network's user and
/// network namespaces.
pub const SPAWN_FDS: usize = 3;
/// The most descriptors a spawn carries.
pub const MAX_SPAWN_FDS: usize = SPAWN_FDS + 4;

/// The longest frame the zygote takes: a command and an environment of a few MiB.
pub const MAX_SPAWN_BYTES: usize = 64 * 1024 * 1024;

// One tag byte and a 4-byte little-endian length before each field's bytes; numbers
// are decimal text. Both ends are built together, so an unknown tag is an error.
const CGROUP: u8 = 1;
const NOFILE: u8 = 2;
const RLIMIT_AS: u8 = 3;
const OOM_SCORE_ADJ: u8 = 4;
const WORKDIR: u8 = 5;
const ARG: u8 = 6;
const ENV: u8 = 7;
const STDIN_PIPE: u8 = 8;
const SANDBOX: u8 = 9;
const PTY: u8 = 10;
const CHANNEL: u8 = 11;
const NETWORK: u8 = 12;

impl Spawn {
    /// How many descriptors come with this spawn.
    pub fn descriptors(&self) -> usize {
        SPAWN_FDS
            + usize::from(self.stdin_pipe)
            + usize::from(self.channel)
            + 2 * usize::from(self.network)
    }

    /// The frame: its length, then its fields.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        let mut field = |tag: u8, bytes: &[u8]| {
            body.push(tag);
            body.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            body.extend_from_slice(bytes);
        };
        if let Some(dir) = &self.cgroup {
            field(CGROUP, dir);
        }
        if let Some((soft, hard)) = self.nofile {
            field(NOFILE, format!("{soft}:{hard}").as_bytes());
        }
        if let Some(bytes) = self.rlimit_as {
            field(RLIMIT_AS, bytes.to_string().as_bytes());
        }
        if let Some(adj) = self.oom_score_adj {
            field(OOM_SCORE_ADJ, adj.to_string().as_bytes());
        }
        field(WORKDIR, &self.workdir);
        for arg in &self.program {
            field(ARG, arg);
        }
        for entry in &self.env {
            field(ENV, entry);
        }
        if self.stdin_pipe {
            field(STDIN_PIPE, &[]);
        }
        if let Some(spec) = &self.sandbox {
            field(SANDBOX, spec);
        }
        if self.pty {
            field(PTY, &[]);
        }
        if self.channel {
            field(CHANNEL, &[]);
        }
        if self.network {
            field(NETWORK, &[]);
        }
        let mut frame = (body.len() as u32).to_le_bytes().to_vec();
        frame.append(&mut body);
        frame
    }

    /// A frame's body (without its length), or what is wrong with it.
    pub fn decode(mut body: &[u8]) -> Result<Spawn, String> {
        let mut spawn = Spawn::default();
        while let [tag, rest @ ..] = body {
            let (len, rest) = rest.split_first_chunk::<4>().ok_or("a field cut short")?;
            let len = u32::from_le_bytes(*len) as usize;
            if rest.len() < len {
                return Err("a field cut short".into());
            }
            let (bytes, rest) = rest.split_at(len);
            body = rest;
            let text =
                || std::str::from_utf8(bytes).map_err(|_| format!("field {tag} is not text"));
            let number = |what: &str| -> Result<u64, String> {
                text()?
                    .parse()
                    .map_err(|_| format!("{what} is not a number"))
            };
            match *tag {
                CGROUP => spawn.cgroup = Some(bytes.to_vec()),
                NOFILE => {
                    let (soft, hard) = text()?
                        .split_once(':')
                        .and_then(|(s, h)| Some((s.parse().ok()?, h.parse().ok()?)))
                        .ok_or("the open-file limit is not SOFT:HARD")?;
                    spawn.nofile = Some((soft, hard));
                }
                RLIMIT_AS => spawn.rlimit_as = Some(number("the memory limit")?),
                OOM_SCORE_ADJ => {
                    spawn.oom_score_adj = Some(
                        text()?
                            .parse()
                            .map_err(|_| "the OOM score adjustment is not a number")?,
                    )
                }
                WORKDIR => spawn.workdir = bytes.to_vec(),
                ARG => spawn.program.push(bytes.to_vec()),
                ENV => spawn.env.push(bytes.to_vec()),
                STDIN_PIPE => spawn.stdin_pipe = true,
                SANDBOX => spawn.sandbox = Some(bytes.to_vec()),
                PTY => spawn.pty = true,
                CHANNEL => spawn.channel = true,
                NETWORK => spawn.network = true,
                other => return Err(format!("unknown field {other}")),
            }
        }
        if spawn.program.is_empty() {
            return Err("no program to run".into());
        }
        Ok(spawn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawn_reads_back_as_written() {
        let spawn = Spawn {
            cgroup: Some(b"/sys/fs/cgroup/bashd/i-j1".to_vec()),
            nofile: Some((1024, 524288)),
            rlimit_as: Some(1 << 30),
            oom_score_adj: Some(500),
            workdir: b"/tmp/w \xff".to_vec(),
            program: vec![
                b"/bin/bash".to_vec(),
                b"-c".to_vec(),
                b"echo 'a\nb'".to_vec(),
            ],
            env: vec![b"A=1".to_vec(), b"EMPTY=".to_vec()],
            stdin_pipe: true,
            sandbox: Some(b"files=1".to_vec()),
            pty: true,
            channel: true,
            network: true,
        };
        assert_eq!(spawn.descriptors(), MAX_SPAWN_FDS);
        let frame = spawn.encode();
        let (len, body) = frame.split_first_chunk::<4>().unwrap();
        assert_eq!(u32::from_le_bytes(*len) as usize, body.len());
        assert_eq!(Spawn::decode(body), Ok(spawn.clone()));
        let bare = Spawn {
            program: vec![b"/bin/true".to_vec()],
            ..Spawn::default()
        };
        assert_eq!(Spawn::decode(&bare.encode()[4..]), Ok(bare));
        // Cut anywhere, or with a stray tag, it is refused, never misread.
        let body = &frame[4..];
        for end in 0..body.len() {
            if let Ok(decoded) = Spawn::decode(&body[..end]) {
                assert_ne!(decoded, spawn, "a cut at {end} read as whole");
            }
        }
        assert!(Spawn::decode(&[99, 0, 0, 0, 0]).is_err());
        assert!(Spawn::decode(&[]).is_err(), "no program");
    }

    #[test]
    fn every_message_reads_back_as_written() {
        let reports = [
            Report::Started {
                pid: 42,
                resident: 41,
            },
            Report::Leader { status: 256 },
            Report::Done(Usage {
                user_us: 1,
                system_us: 2,
                max_rss_kb: 3,
                reaped: 4,
            }),
            Report::Error("cannot join the cgroup /x: permission denied".into()),
        ];
        for report in reports {
            let line = report.to_string();
            assert_eq!(
                Report::parse(line.trim_end()),
                Some(report.clone()),
                "{line}"
            );
        }
        for order in [Order::Signal(15), Order::Kill] {
            let line = order.to_string();
            assert_eq!(Order::parse(line.trim_end()), Some(order), "{line}");
        }
        for bad in [
            "",
            "started",
            "started x",
            "started 42",
            "leader 1 2",
            "done 1 2 3",
            "kil",
        ] {
            assert_eq!(Report::parse(bad), None, "{bad}");
            assert_eq!(Order::parse(bad), None, "{bad}");
        }
    }
}

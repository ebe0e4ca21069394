//! The job journal `R/journal` (DESIGN §6): one line per event, appended before the
//! event is acknowledged, so that a daemon that dies without stopping its jobs (SIGKILL,
//! the OOM killer, a panic) leaves behind what the next one needs to end them, and the
//! job counter, so that ids are never reused within a runtime dir.
//!
//! ```text
//! bashd-journal 1
//! next 42                             ids below 42 are taken
//! job 42 <instance> <session>         written before its id is sent (`Recorded`)
//!                                     and its shell is spawned
//! info 42 <ms> <mode> <merged> <workdir> <command> <description>
//!                                     what `jobs` lists of it, should the daemon die
//! pid 42 <pid> <pgid> <start time>    written once it is, before `Started` is sent
//! lost 42                             its daemon died while it ran; its output is kept
//! end 42                              its last process is gone (a lost job: forgotten)
//! ask <what> <id> <field>...          an ask, grant, refusal, expiry or revocation
//!                                     (issue 44), for the person's audit; replay skips
//!                                     it and compaction drops it
//! ```
//!
//! An `info` line's text fields are percent-escaped (every byte but `A-Z a-z 0-9 / . _
//! , : = + @`), and a lone `-` is an empty description.
//!
//! Lines are written with one `write` each (a job's `job` and `info` lines with one
//! together) and no buffering in between: a line in the page cache survives the death
//! of the process, which is the crash this is for. They
//! are not fsynced: a machine that goes down takes every job with it, and the usual
//! runtime dir (`$XDG_RUNTIME_DIR`) does not survive a reboot anyway.
//!
//! The jobs actor owns the journal once the daemon serves; before that, recovery reads
//! it and compacts it.
//!
//! Over 600 lines with its unit tests, which sit at its end; the code is under 470.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use bashd_protocol::{JobId, Mode, is_valid_session_id};

const HEADER: &str = "bashd-journal 1";
/// Lines appended since the last compaction before the journal is rewritten with
/// only the jobs still running.
const COMPACT_AFTER_LINES: usize = 20_000;

/// A job that started and has not ended, as the journal tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenJob {
    pub job: u64,
    /// The daemon instance that ran it: its cookie is `BASHD_JOB=<instance>/j<job>`.
    pub instance: String,
    pub session: String,
    /// Its shell, once it was spawned.
    pub leader: Option<Leader>,
    /// What `jobs` lists of it, when its `info` line was written.
    pub info: Option<JobRecord>,
}

/// What the journal keeps of a job for `jobs` to list after a crash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// When it started, in milliseconds since the epoch.
    pub started_ms: u64,
    pub mode: Mode,
    /// Its stderr went to its stdout.
    pub merged: bool,
    pub workdir: String,
    /// As `jobs` shows it: cut.
    pub command: String,
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leader {
    pub pid: u32,
    pub pgid: u32,
    /// Field 22 of `/proc/<pid>/stat`; with the pid it names one process.
    pub start_time: u64,
}

impl OpenJob {
    /// The environment entry every process of the job carries.
    pub fn cookie(&self) -> Vec<u8> {
        cookie(&self.instance, JobId(self.job))
    }
}

/// The environment variable that marks a job's processes.
pub const COOKIE_VAR: &str = "BASHD_JOB";

/// `BASHD_JOB=<instance>/<job>`: the environment entry every process of a job carries.
/// The journal records the instance and the job, so it owns the spelling that recovery
/// looks for and the spawn puts in each job's environment.
pub fn cookie(instance: &str, job: JobId) -> Vec<u8> {
    format!("{COOKIE_VAR}={instance}/{job}").into_bytes()
}

/// What reading a journal found.
#[derive(Debug, Default)]
pub struct Replay {
    /// Jobs that started and never ended, by id.
    pub open: BTreeMap<u64, OpenJob>,
    /// Jobs of a daemon that died, ended since, whose output a later daemon kept.
    pub lost: BTreeMap<u64, OpenJob>,
    /// The first id not taken.
    pub next: u64,
    /// Lines that could not be used, each named by its line number.
    pub problems: Vec<String>,
}

#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    open: BTreeMap<u64, OpenJob>,
    /// Lost jobs kept listed: compaction keeps them until [`Journal::end`].
    lost: BTreeMap<u64, OpenJob>,
    next: u64,
    appended: usize,
}

/// The journal's path in runtime dir `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join("journal")
}

impl Journal {
    /// Reads the journal of runtime dir `dir` (a missing one is empty) and opens it for
    /// appending. The jobs it names as open stay open until [`Journal::close`] or
    /// [`Journal::end`]; [`Journal::compact`] rewrites the file.
    pub fn open(dir: &Path) -> io::Result<(Journal, Replay)> {
        let path = path(dir);
        let text = match OpenOptions::new()
            .read(true)
            .custom_flags(crate::runtime::o_nofollow())
            .open(&path)
        {
            Ok(mut file) => {
                let mut text = Vec::new();
                io::Read::read_to_end(&mut file, &mut text)?;
                text
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let replay = parse(&text);
        let file = append_to(&path)?;
        let journal = Journal {
            path,
            file,
            open: replay.open.clone(),
            lost: replay.lost.clone(),
            next: replay.next,
            appended: 0,
        };
        Ok((journal, replay))
    }

    /// The first job id not taken.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// Takes the next job id and records the job, before its shell is spawned, with
    /// what `jobs` lists of it when it is to run (`info`), in the same write. An error
    /// means the job must not start: nothing could end it after a crash.
    pub fn job(
        &mut self,
        instance: &str,
        session: &str,
        info: Option<JobRecord>,
    ) -> io::Result<u64> {
        let n = self.next;
        let mut lines = format!("job {n} {instance} {session}\n");
        if let Some(info) = &info {
            lines.push_str(&info_line(n, info));
        }
        self.append(&lines)?;
        self.appended += usize::from(info.is_some());
        self.next += 1;
        self.open.insert(
            n,
            OpenJob {
                job: n,
                instance: instance.to_owned(),
                session: session.to_owned(),
                leader: None,
                info,
            },
        );
        Ok(n)
    }

    /// Job `n` of a daemon that died was ended by recovery, and its output is kept:
    /// it stays in the journal, as lost, until [`Journal::end`].
    pub fn keep_lost(&mut self, n: u64) {
        if let Some(mut job) = self.open.remove(&n) {
            job.leader = None;
            self.lost.insert(n, job);
        }
    }

    /// Records the shell of job `n`.
    pub fn leader(&mut self, n: u64, leader: Leader) -> io::Result<()> {
        if let Some(job) = self.open.get_mut(&n) {
            job.leader = Some(leader);
        }
        self.append(&leader_line(n, leader))
    }

    /// Records what befell an ask or a grant (issue 44): `what` (`asked`, `granted`,
    /// `refused`, `expired`, `withdrawn`, `revoked`, `host`), its id and its fields,
    /// each escaped as an `info` line's.
    pub fn ask(&mut self, what: &str, id: &str, fields: &[&str]) -> io::Result<()> {
        let mut line = format!("ask {what} {id}");
        for field in fields {
            line.push(' ');
            line.push_str(&escape(field));
        }
        line.push('\n');
        self.append(&line)
    }

    /// Records that job `n` has ended: none of its processes is left.
    pub fn end(&mut self, n: u64) -> io::Result<()> {
        self.open.remove(&n);
        self.lost.remove(&n);
        self.append(&format!("end {n}\n"))?;
        if self.appended > COMPACT_AFTER_LINES && self.appended > 4 * self.open.len() {
            self.compact()?;
        }
        Ok(())
    }

    /// Forgets an open job without a line: recovery ended it, and the compaction that
    /// follows drops it.
    pub fn close(&mut self, n: u64) {
        self.open.remove(&n);
    }

    /// Rewrites the journal as the counter and the jobs still open, through a new
    /// file renamed over the old one, so a crash at any point leaves one or the other.
    pub fn compact(&mut self) -> io::Result<()> {
        let mut text = format!("{HEADER}\nnext {}\n", self.next);
        for job in self.open.values().chain(self.lost.values()) {
            text.push_str(&format!(
                "job {} {} {}\n",
                job.job, job.instance, job.session
            ));
            if let Some(info) = &job.info {
                text.push_str(&info_line(job.job, info));
            }
            if let Some(leader) = job.leader {
                text.push_str(&leader_line(job.job, leader));
            }
            if self.lost.contains_key(&job.job) {
                text.push_str(&format!("lost {}\n", job.job));
            }
        }
        let tmp = self.path.with_file_name("journal.tmp");
        // Whatever is there is a leftover of a compaction that died; a symlink is
        // removed, not followed.
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(crate::runtime::o_nofollow())
            .open(&tmp)?;
        file.write_all(text.as_bytes())?;
        drop(file);
        fs::rename(&tmp, &self.path)?;
        self.file = append_to(&self.path)?;
        self.appended = 0;
        Ok(())
    }

    fn append(&mut self, line: &str) -> io::Result<()> {
        self.file.write_all(line.as_bytes())?;
        self.appended += 1;
        Ok(())
    }
}

fn leader_line(n: u64, leader: Leader) -> String {
    format!(
        "pid {n} {} {} {}\n",
        leader.pid, leader.pgid, leader.start_time
    )
}

fn info_line(n: u64, info: &JobRecord) -> String {
    let mode = match info.mode {
        Mode::Default => "default",
        Mode::Slow => "slow",
        Mode::Background => "background",
    };
    let description = info.description.as_deref().map_or("-".to_owned(), escape);
    format!(
        "info {n} {} {mode} {} {} {} {description}\n",
        info.started_ms,
        u8::from(info.merged),
        escape(&info.workdir),
        escape(&info.command),
    )
}

/// Percent-escapes every byte but a few plain ones, so a field has no space, newline
/// or `-` alone.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"/._,:=+@".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn unescape(field: &str) -> Option<String> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn parse_info(fields: &[&str]) -> Option<JobRecord> {
    let [started_ms, mode, merged, workdir, command, description] = fields else {
        return None;
    };
    Some(JobRecord {
        started_ms: started_ms.parse().ok()?,
        mode: match *mode {
            "default" => Mode::Default,
            "slow" => Mode::Slow,
            "background" => Mode::Background,
            _ => return None,
        },
        merged: match *merged {
            "0" => false,
            "1" => true,
            _ => return None,
        },
        workdir: unescape(workdir)?,
        command: unescape(command)?,
        description: match *description {
            "-" => None,
            text => Some(unescape(text)?),
        },
    })
}

fn append_to(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(crate::runtime::o_nofollow())
        .open(path)
}

/// Reads what can be read of a journal; every line that cannot is named in
/// `problems` and skipped.
pub fn parse(text: &[u8]) -> Replay {
    let mut replay = Replay {
        next: 1,
        ..Replay::default()
    };
    let mut highest = 0;
    for (index, line) in text.split_inclusive(|&b| b == b'\n').enumerate() {
        let number = index + 1;
        let Some(line) = line.strip_suffix(b"\n") else {
            replay.problems.push(format!(
                "line {number}: torn last line of {} bytes (the daemon died while writing it), ignored",
                line.len()
            ));
            break;
        };
        let line = String::from_utf8_lossy(line);
        let fields: Vec<&str> = line.split(' ').collect();
        let record = match fields.as_slice() {
            [] | [""] => Ok(()),
            ["bashd-journal", "1"] => Ok(()),
            ["bashd-journal", version] => Err(format!("written by a bashd of format {version}")),
            ["next", n] => id(n).map(|n| replay.next = replay.next.max(n)),
            ["job", n, instance, session] => {
                id(n).and_then(
                    |n| match (valid_instance(instance), is_valid_session_id(session)) {
                        (true, true) => {
                            highest = highest.max(n);
                            replay.open.insert(
                                n,
                                OpenJob {
                                    job: n,
                                    instance: (*instance).to_owned(),
                                    session: (*session).to_owned(),
                                    leader: None,
                                    info: None,
                                },
                            );
                            Ok(())
                        }
                        _ => Err("not a valid instance or session".to_owned()),
                    },
                )
            }
            ["pid", n, pid, pgid, start_time] => {
                let leader = (|| {
                    Some(Leader {
                        pid: pid.parse().ok().filter(|&p| p > 1)?,
                        pgid: pgid.parse().ok().filter(|&p| p > 1)?,
                        start_time: start_time.parse().ok()?,
                    })
                })();
                match (id(n), leader) {
                    (Ok(n), Some(leader)) => match replay.open.get_mut(&n) {
                        Some(job) => {
                            job.leader = Some(leader);
                            Ok(())
                        }
                        None => Err(format!("pid of job j{n}, which has no job line")),
                    },
                    _ => Err("not a valid pid record".to_owned()),
                }
            }
            ["info", n, rest @ ..] => match (id(n), parse_info(rest)) {
                (Ok(n), Some(info)) => match replay.open.get_mut(&n) {
                    Some(job) => {
                        job.info = Some(info);
                        Ok(())
                    }
                    None => Err(format!("info of job j{n}, which has no job line")),
                },
                _ => Err("not a valid info record".to_owned()),
            },
            ["lost", n] => id(n).and_then(|n| match replay.open.remove(&n) {
                Some(job) => {
                    replay.lost.insert(n, job);
                    Ok(())
                }
                None => Err(format!("lost job j{n}, which has no job line")),
            }),
            // The audit of asks and grants: nothing to replay.
            ["ask", ..] => Ok(()),
            ["end", n] => id(n).map(|n| {
                highest = highest.max(n);
                replay.open.remove(&n);
                replay.lost.remove(&n);
            }),
            _ => Err("not a journal record".to_owned()),
        };
        if let Err(why) = record {
            let shown: String = line.chars().take(80).collect();
            replay
                .problems
                .push(format!("line {number}: {why}, ignored: {shown:?}"));
        }
    }
    replay.next = replay.next.max(highest + 1);
    replay
}

fn id(text: &str) -> Result<u64, String> {
    text.parse::<u64>()
        .ok()
        .filter(|&n| n > 0 && n < u64::MAX / 2)
        .ok_or_else(|| format!("{text:?} is not a job number"))
}

/// Instance ids are `<hex pid>-<hex nanoseconds>`.
fn valid_instance(text: &str) -> bool {
    !text.is_empty() && text.len() <= 64 && text.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_jobs_and_the_counter_come_back() {
        let replay = parse(
            b"bashd-journal 1\nnext 5\njob 5 1a-2b s1\npid 5 100 100 777\njob 6 1a-2b s2\nend 6\njob 7 1a-2b s1\n",
        );
        assert!(replay.problems.is_empty(), "{:?}", replay.problems);
        assert_eq!(replay.next, 8);
        assert_eq!(replay.open.len(), 2);
        let five = &replay.open[&5];
        assert_eq!(five.cookie(), b"BASHD_JOB=1a-2b/j5");
        assert_eq!(
            five.leader,
            Some(Leader {
                pid: 100,
                pgid: 100,
                start_time: 777
            })
        );
        assert_eq!(replay.open[&7].leader, None);
    }

    #[test]
    fn lost_jobs_and_their_records_outlive_compaction_until_they_end() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) = Journal::open(dir.path()).unwrap();
        let info = JobRecord {
            started_ms: 1_700_000_000_123,
            mode: Mode::Background,
            merged: false,
            workdir: "/tmp/a dir-x".to_owned(),
            command: "echo 'hi there' %20\nnext line -".to_owned(),
            description: Some("-".to_owned()),
        };
        let n = journal.job("ab", "s", Some(info.clone())).unwrap();
        let other = JobRecord {
            description: None,
            ..info.clone()
        };
        let other = journal.job("ab", "s", Some(other)).unwrap();

        let (mut again, replay) = Journal::open(dir.path()).unwrap();
        assert_eq!(replay.open[&n].info.as_ref(), Some(&info));
        assert_eq!(replay.open[&other].info.as_ref().unwrap().description, None);
        again.keep_lost(n);
        again.close(other);
        again.compact().unwrap();
        let replay = parse(&fs::read(path(dir.path())).unwrap());
        assert!(replay.open.is_empty(), "{:?}", replay.open);
        assert_eq!(replay.lost[&n].info.as_ref(), Some(&info));
        assert!(replay.problems.is_empty(), "{:?}", replay.problems);

        let (mut last, _) = Journal::open(dir.path()).unwrap();
        last.end(n).unwrap();
        last.compact().unwrap();
        let replay = parse(&fs::read(path(dir.path())).unwrap());
        assert!(replay.lost.is_empty() && replay.open.is_empty());
        assert_eq!(replay.next, other + 1);
    }

    #[test]
    fn a_torn_line_and_garbage_are_reported_and_the_rest_used() {
        let replay = parse(
            b"bashd-journal 1\njob 3 ab s\n\x00\xffgarbage here\nend 2\njob 4 ab s\npid 4 12",
        );
        assert_eq!(replay.open.keys().copied().collect::<Vec<_>>(), [3, 4]);
        assert_eq!(replay.next, 5);
        assert_eq!(replay.problems.len(), 2, "{:?}", replay.problems);
        assert!(replay.problems[0].starts_with("line 3: not a journal record"));
        assert!(replay.problems[1].starts_with("line 6: torn last line"));
    }

    #[test]
    fn records_with_bad_fields_are_refused() {
        let replay = parse(b"job 0 ab s\njob 1 zz s\njob 2 ab ../x\npid 9 1 1 1\nnext x\n");
        assert!(replay.open.is_empty());
        assert_eq!(replay.problems.len(), 5, "{:?}", replay.problems);
    }

    #[test]
    fn a_long_running_journal_compacts_itself() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) = Journal::open(dir.path()).unwrap();
        let running = journal.job("ab", "s", None).unwrap();
        for _ in 0..COMPACT_AFTER_LINES {
            let n = journal.job("ab", "s", None).unwrap();
            journal.end(n).unwrap();
        }
        // 40,000 lines appended; without compaction the file would hold them all.
        let text = fs::read_to_string(path(dir.path())).unwrap();
        let lines = text.lines().count();
        assert!(lines <= COMPACT_AFTER_LINES + 4, "{lines} lines");
        let replay = parse(text.as_bytes());
        assert_eq!(replay.open.keys().copied().collect::<Vec<_>>(), [running]);
        assert_eq!(replay.next, journal.next());
    }

    #[test]
    fn a_journal_is_written_reread_and_compacted() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, replay) = Journal::open(dir.path()).unwrap();
        assert_eq!(replay.next, 1);
        let a = journal.job("ab-cd", "s", None).unwrap();
        let leader = Leader {
            pid: 4242,
            pgid: 4242,
            start_time: 99,
        };
        journal.leader(a, leader).unwrap();
        let b = journal.job("ab-cd", "s", None).unwrap();
        journal.end(b).unwrap();
        assert_eq!((a, b), (1, 2));

        let (mut again, replay) = Journal::open(dir.path()).unwrap();
        assert_eq!(replay.next, 3);
        assert_eq!(replay.open[&1].leader, Some(leader));
        again.compact().unwrap();
        let text = fs::read_to_string(path(dir.path())).unwrap();
        assert_eq!(
            text,
            "bashd-journal 1\nnext 3\njob 1 ab-cd s\npid 1 4242 4242 99\n"
        );
        again.close(1);
        again.compact().unwrap();
        assert_eq!(again.job("ab-cd", "s", None).unwrap(), 3);
        let replay = parse(&fs::read(path(dir.path())).unwrap());
        assert_eq!(replay.next, 4);
        assert_eq!(replay.open.keys().copied().collect::<Vec<_>>(), [3]);
    }
}

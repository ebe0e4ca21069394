//! What bashd keeps of one sanitized stream (DESIGN §5): exact totals, the first
//! `max_bytes` bytes, the last `max_bytes + 1`, and, once the stream passes a limit,
//! the whole of it in a spill file. Memory stays bounded by the limits whatever the
//! stream's size.
//!
//! Over 600 lines with its unit tests, which sit at its end; the code is about 420.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The limits a stream is kept and shown by.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_lines: u64,
    pub max_bytes: usize,
    pub max_spill_bytes: u64,
}

#[derive(Debug)]
pub struct Store {
    limits: Limits,
    total_bytes: u64,
    newlines: u64,
    last_byte: Option<u8>,
    /// The first `max_bytes` bytes: the whole stream until it passes a limit.
    head: Vec<u8>,
    /// The last `max_bytes + 1` bytes: one more than can be shown, so that a cut can
    /// tell whether it starts on a line start.
    tail: VecDeque<u8>,
    spill: Spill,
}

impl Store {
    /// `spill_path` is where the whole stream goes once it passes a limit, or at once
    /// when `spill_from_start` (background jobs, whose output nobody reads live).
    pub fn new(limits: Limits, spill_path: PathBuf, spill_from_start: bool) -> Store {
        let limits = Limits {
            max_lines: limits.max_lines.max(1),
            max_bytes: limits.max_bytes.max(1),
            ..limits
        };
        let mut store = Store {
            limits,
            total_bytes: 0,
            newlines: 0,
            last_byte: None,
            head: Vec::new(),
            tail: VecDeque::new(),
            spill: Spill::new(spill_path, limits.max_spill_bytes),
        };
        if spill_from_start {
            store.spill.start(&[]);
        }
        store
    }

    /// Keeps one piece of sanitized text.
    pub fn push(&mut self, text: &[u8]) {
        let Some(&last) = text.last() else {
            return;
        };
        let newlines = self.newlines + memchr::memchr_iter(b'\n', text).count() as u64;
        let total_bytes = self.total_bytes + text.len() as u64;
        let total_lines = newlines + u64::from(last != b'\n');
        if !self.spill.started()
            && (total_bytes > self.limits.max_bytes as u64 || total_lines > self.limits.max_lines)
        {
            // Everything so far is in `head`, since nothing passed a limit before.
            self.spill.start(&self.head);
        }
        // Every line so far is in the file, if any of this text gets in.
        self.spill.write(text, self.newlines);

        let room = self.limits.max_bytes - self.head.len();
        self.head.extend_from_slice(&text[..room.min(text.len())]);
        let keep = self.limits.max_bytes + 1;
        let text = &text[text.len().saturating_sub(keep)..];
        let overflow = (self.tail.len() + text.len()).saturating_sub(keep);
        self.tail.drain(..overflow);
        self.tail.extend(text);

        self.newlines = newlines;
        self.total_bytes = total_bytes;
        self.last_byte = Some(last);
    }

    /// The line the next text pushed starts on (or goes on), counting from 1.
    pub fn next_line(&self) -> u64 {
        self.newlines + 1
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Every line, a last one without a newline included.
    pub fn total_lines(&self) -> u64 {
        self.newlines + u64::from(self.last_byte.is_some_and(|b| b != b'\n'))
    }

    /// The last line kept has no newline yet.
    pub fn ends_mid_line(&self) -> bool {
        self.last_byte.is_some_and(|b| b != b'\n')
    }

    /// The first bytes of the stream, and whether they are all of it.
    pub fn head(&self) -> (&[u8], bool) {
        (&self.head, self.head.len() as u64 == self.total_bytes)
    }

    /// The last bytes of the stream, and whether they start at its beginning.
    pub fn tail(&self) -> (Vec<u8>, bool) {
        let (a, b) = self.tail.as_slices();
        ([a, b].concat(), self.tail.len() as u64 == self.total_bytes)
    }

    pub fn spill(&self) -> &Spill {
        &self.spill
    }

    /// Charges the spill file's bytes to `budget` from now on.
    pub fn set_budget(&mut self, budget: super::budget::Charge) {
        self.spill.budget = Some(budget);
    }
}

/// The file that holds a whole stream, and how far it got.
#[derive(Debug)]
pub struct Spill {
    path: PathBuf,
    cap: u64,
    written: u64,
    state: SpillState,
    /// A line start about every [`MARK_EVERY`] bytes.
    marks: Vec<LineMark>,
    /// The byte from which the next line start is marked.
    next_mark: u64,
    /// Where its bytes are charged against the disk budgets, when they are.
    budget: Option<super::budget::Charge>,
}

/// Line `line` (counted from 1) starts at byte `byte` of the spill file: a page far
/// into a big file starts reading there instead of at the top. A mark every 1 MiB
/// costs 16 bytes a MiB and bounds what a page reads before its first line to about
/// 1 MiB and a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineMark {
    pub line: u64,
    pub byte: u64,
}

const MARK_EVERY: u64 = 1 << 20;

#[derive(Debug)]
enum SpillState {
    NotStarted,
    Writing(File),
    /// The file reached `max_spill_bytes` and ends there.
    Capped,
    /// The file could not be created or written; the job goes on without it.
    Failed(String),
}

impl Spill {
    fn new(path: PathBuf, cap: u64) -> Spill {
        Spill {
            path,
            cap,
            written: 0,
            state: SpillState::NotStarted,
            marks: Vec::new(),
            next_mark: MARK_EVERY,
            budget: None,
        }
    }

    /// The line starts marked so far.
    pub fn marks(&self) -> &[LineMark] {
        &self.marks
    }

    /// Marks the first line start at or past `next_mark` in `text`, just written at
    /// byte `at` after `lines_before` lines. Counts newlines only up to a mark.
    fn index(&mut self, text: &[u8], at: u64, lines_before: u64) {
        let mut lines = lines_before;
        let mut counted = 0;
        loop {
            // A line starts at `next_mark` or later after a newline at `next_mark - 1`
            // or later; `counted` never passes that point.
            let from = (self.next_mark - 1).saturating_sub(at) as usize;
            if from >= text.len() {
                break;
            }
            let Some(i) = memchr::memchr(b'\n', &text[from..]) else {
                break;
            };
            let newline = from + i;
            lines += memchr::memchr_iter(b'\n', &text[counted..=newline]).count() as u64;
            counted = newline + 1;
            let byte = at + counted as u64;
            self.marks.push(LineMark {
                line: lines + 1,
                byte,
            });
            self.next_mark = byte + MARK_EVERY;
        }
    }

    pub fn started(&self) -> bool {
        !matches!(self.state, SpillState::NotStarted)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the file.
    pub fn written(&self) -> u64 {
        self.written
    }

    pub fn capped(&self) -> bool {
        matches!(self.state, SpillState::Capped)
    }

    pub fn error(&self) -> Option<&str> {
        match &self.state {
            SpillState::Failed(e) => Some(e),
            _ => None,
        }
    }

    fn start(&mut self, already: &[u8]) {
        self.state = match create_spill_file(&self.path) {
            Ok(file) => SpillState::Writing(file),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), "cannot create spill file: {e}");
                SpillState::Failed(e.to_string())
            }
        };
        self.write(already, 0);
    }

    fn write(&mut self, text: &[u8], lines_before: u64) {
        let SpillState::Writing(file) = &mut self.state else {
            return;
        };
        let room = self.cap - self.written;
        let fits = if text.len() as u64 > room {
            char_floor(text, room as usize)
        } else {
            text.len()
        };
        if fits > 0
            && let Some(budget) = &self.budget
            && let Err(why) = budget.reserve(fits as u64)
        {
            tracing::warn!(path = %self.path.display(), "spill file stops: {why}");
            self.state = SpillState::Failed(why);
            return;
        }
        // A synchronous write: it lands in the page cache, and a disk too slow for
        // that stalls only this job's supervisor.
        if let Err(e) = file.write_all(&text[..fits]) {
            tracing::warn!(path = %self.path.display(), "cannot write spill file: {e}");
            self.state = SpillState::Failed(e.to_string());
            return;
        }
        self.index(&text[..fits], self.written, lines_before);
        self.written += fits as u64;
        if fits < text.len() {
            self.state = SpillState::Capped;
        }
    }
}

/// What a spill file left by a daemon that died holds, read again.
#[derive(Debug)]
pub struct ScannedSpill {
    pub len: u64,
    pub newlines: u64,
    pub ends_mid_line: bool,
    pub marks: Vec<LineMark>,
    pub modified: std::time::SystemTime,
}

/// Reads a spill file a dead daemon left, for its length, lines and line marks;
/// `None` when there is none. Blocking. Never follows a symlink, and takes only a
/// regular file.
pub fn scan_spill_file(path: &Path) -> io::Result<Option<ScannedSpill>> {
    use std::io::Read;
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(crate::runtime::o_nofollow())
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let mut spill = Spill::new(path.to_owned(), u64::MAX);
    let mut newlines = 0;
    let mut last = None;
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        let text = &chunk[..n];
        spill.index(text, spill.written, newlines);
        spill.written += n as u64;
        newlines += memchr::memchr_iter(b'\n', text).count() as u64;
        last = text.last().copied();
    }
    Ok(Some(ScannedSpill {
        len: spill.written,
        newlines,
        ends_mid_line: last.is_some_and(|b| b != b'\n'),
        marks: spill.marks,
        modified: meta.modified()?,
    }))
}

/// Creates `sessions/<session>/` (0700) as needed and the file in it (0600). The file
/// must not exist: `O_CREAT | O_EXCL | O_NOFOLLOW` neither follows a symlink nor opens
/// a hard link planted at its name (issue 18: one truncated a file outside), and the
/// directories must be real directories of the daemon's user.
fn create_spill_file(path: &Path) -> io::Result<File> {
    if let Some(session_dir) = path.parent() {
        if let Some(sessions) = session_dir.parent() {
            create_private_dir(sessions)?;
        }
        create_private_dir(session_dir)?;
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(crate::runtime::o_nofollow())
        .open(path)
        .map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                io::Error::other(format!(
                    "{} exists already, and bashd writes output only to a file it creates (something else put it there; remove it)",
                    path.display()
                ))
            } else {
                e
            }
        })
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let meta = fs::symlink_metadata(dir)?;
            let me = rustix::process::getuid().as_raw();
            if meta.is_dir() && meta.uid() == me && meta.mode() & 0o022 == 0 {
                Ok(())
            } else {
                Err(io::Error::other(format!(
                    "{} is not a directory bashd made (a symlink, a file, another user's, or writable by others)",
                    dir.display()
                )))
            }
        }
        Err(e) => Err(e),
    }
}

/// The largest index `<= at` such that `text[..index]` ends on a whole code point,
/// even when `text` itself was cut in the middle of one.
pub fn char_floor(text: &[u8], at: usize) -> usize {
    let at = at.min(text.len());
    let Some(lead) = (0..at).rev().take(4).find(|&i| text[i] & 0xC0 != 0x80) else {
        return at;
    };
    if lead + utf8_len(text[lead]) <= at {
        at
    } else {
        lead
    }
}

/// The length of the code point that starts with `lead`.
pub fn utf8_len(lead: u8) -> usize {
    match lead {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

/// The smallest index `>= at` that starts a code point of `text`.
pub fn char_ceil(text: &[u8], at: usize) -> usize {
    let mut at = at;
    while at < text.len() && text[at] & 0xC0 == 0x80 {
        at += 1;
    }
    at
}

#[cfg(test)]
pub(crate) mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn limits(max_lines: u64, max_bytes: usize) -> Limits {
        Limits {
            max_lines,
            max_bytes,
            max_spill_bytes: 1 << 20,
        }
    }

    #[test]
    fn char_floor_never_ends_inside_a_code_point() {
        let text = "aé🦀".as_bytes();
        let floors: Vec<usize> = (0..=text.len()).map(|at| char_floor(text, at)).collect();
        assert_eq!(floors, [0, 1, 1, 3, 3, 3, 3, 7]);
        // A buffer cut inside its last code point.
        assert_eq!(char_floor(&text[..5], 5), 3);
    }

    #[test]
    fn small_output_stays_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions/s/j1.stdout");
        let mut store = Store::new(limits(10, 100), path.clone(), false);
        store.push(b"a\nb\n");
        store.push(b"c");
        assert_eq!(store.head(), (&b"a\nb\nc"[..], true));
        assert_eq!((store.total_lines(), store.total_bytes()), (3, 5));
        assert!(!store.spill().started());
        assert!(!path.exists());
    }

    #[test]
    fn passing_a_limit_spills_everything_kept_so_far() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions/s/j1.stdout");
        let mut store = Store::new(limits(3, 100), path.clone(), false);
        store.push(b"1\n2\n");
        store.push(b"3\n");
        assert!(!store.spill().started(), "3 lines is within a 3-line limit");
        store.push(b"4\n5");
        assert_eq!(fs::read(&path).unwrap(), b"1\n2\n3\n4\n5");
        let (tail, from_start) = store.tail();
        assert_eq!((tail.as_slice(), from_start), (&b"1\n2\n3\n4\n5"[..], true));
    }

    #[test]
    fn the_spill_file_ends_at_its_cap_on_a_char_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions/s/j1.stdout");
        let limits = Limits {
            max_spill_bytes: 9,
            ..limits(1, 4)
        };
        let mut store = Store::new(limits, path.clone(), false);
        store.push("abcdefghé\nmore\n".as_bytes());
        // The ninth byte is the first half of the é: the file stops before it.
        assert_eq!(fs::read(&path).unwrap(), b"abcdefgh");
        assert!(store.spill().capped());
        assert_eq!(store.total_bytes(), 16);
    }

    #[test]
    fn a_spill_file_that_cannot_be_made_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("sessions"), b"a file, not a dir").unwrap();
        let path = dir.path().join("sessions/s/j1.stdout");
        let mut store = Store::new(limits(1, 100), path, false);
        store.push(b"1\n2\n3\n");
        assert!(store.spill().error().is_some());
        assert_eq!(store.total_lines(), 3);
    }

    /// About 6 MiB of lines of many lengths, one of them longer than a mark's span.
    pub(crate) fn varied_lines() -> Vec<u8> {
        let mut text = Vec::new();
        for i in 0..20_000u64 {
            let len = if i == 7_000 {
                1_500_000
            } else {
                (i * 7_919) % 600
            };
            text.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len as usize));
            text.push(b'\n');
        }
        text.extend_from_slice(b"no newline at the end");
        text
    }

    #[test]
    fn marks_are_the_first_line_starts_past_each_mebibyte_whatever_the_pieces() {
        let text = varied_lines();
        // The last one keeps its first line in memory and spills it when the limit is
        // passed, as a foreground job does.
        for (piece, from_start) in [
            (1 << 20, true),
            (65_536, true),
            (4_093, true),
            (65_536, false),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("sessions/s/j1.stdout");
            let mut store = Store::new(
                Limits {
                    max_spill_bytes: 1 << 30,
                    ..limits(10, 100)
                },
                path.clone(),
                from_start,
            );
            let mut rest = &text[..];
            if !from_start {
                store.push(&text[..1]);
                assert!(!store.spill().started());
                rest = &text[1..];
            }
            for chunk in rest.chunks(piece) {
                store.push(chunk);
            }
            assert_eq!(fs::read(&path).unwrap(), text);
            let marks = store.spill().marks();
            assert!(marks.len() >= 4, "{marks:?}");
            let mut from = MARK_EVERY;
            for mark in marks {
                let byte = mark.byte as usize;
                let first_start =
                    from as usize + memchr::memchr(b'\n', &text[from as usize - 1..]).unwrap();
                assert_eq!(byte, first_start, "piece {piece}: {mark:?}");
                let lines_before = memchr::memchr_iter(b'\n', &text[..byte]).count() as u64;
                assert_eq!(mark.line, lines_before + 1, "piece {piece}: {mark:?}");
                from = mark.byte + MARK_EVERY;
            }
            assert!(
                text.get(from as usize - 1..)
                    .is_none_or(|rest| memchr::memchr(b'\n', rest).is_none()),
                "piece {piece}: a line start past {from} is not marked"
            );
        }
    }

    #[test]
    fn a_line_that_starts_on_the_mebibyte_is_marked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions/s/j1.stdout");
        let limits = Limits {
            max_spill_bytes: 1 << 30,
            ..limits(10, 100)
        };
        let mut store = Store::new(limits, path, true);
        let mut text = vec![b'a'; MARK_EVERY as usize - 1];
        text.extend_from_slice(b"\nb\n");
        store.push(&text);
        assert_eq!(
            store.spill().marks(),
            [LineMark {
                line: 2,
                byte: MARK_EVERY
            }]
        );
    }

    /// Issue 18: `ln OUTSIDE R/sessions/s/j6.stdout` before j6 spilled made the spill
    /// truncate and overwrite the outside file.
    #[test]
    fn a_hard_link_at_the_spill_path_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::write(&outside, b"precious").unwrap();
        let session = dir.path().join("sessions/s");
        fs::create_dir_all(&session).unwrap();
        fs::set_permissions(&session, fs::Permissions::from_mode(0o700)).unwrap();
        let path = session.join("j1.stdout");
        fs::hard_link(&outside, &path).unwrap();
        let mut store = Store::new(limits(1, 100), path.clone(), false);
        store.push(b"1\n2\n");
        let error = store.spill().error().expect("the spill must fail");
        assert!(error.contains("exists already"), "{error}");
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert_eq!(fs::read(&outside).unwrap(), b"precious");
        assert_eq!(store.total_lines(), 2);
    }

    #[test]
    fn a_scanned_spill_file_has_the_figures_and_marks_of_the_one_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions/s/j1.stdout");
        let text = varied_lines();
        let mut store = Store::new(
            Limits {
                max_spill_bytes: 1 << 30,
                ..limits(10, 100)
            },
            path.clone(),
            true,
        );
        for chunk in text.chunks(65_536) {
            store.push(chunk);
        }
        let scanned = scan_spill_file(&path).unwrap().unwrap();
        assert_eq!(scanned.len, text.len() as u64);
        assert_eq!(scanned.newlines + 1, store.total_lines());
        assert!(scanned.ends_mid_line);
        assert_eq!(scanned.marks, store.spill().marks());
        assert!(scan_spill_file(&dir.path().join("none")).unwrap().is_none());
    }

    #[test]
    fn a_symlinked_spill_file_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::write(&outside, b"precious").unwrap();
        fs::create_dir_all(dir.path().join("sessions/s")).unwrap();
        let path = dir.path().join("sessions/s/j1.stdout");
        std::os::unix::fs::symlink(&outside, &path).unwrap();
        let mut store = Store::new(limits(1, 100), path, false);
        store.push(b"1\n2\n");
        assert!(store.spill().error().is_some());
        assert_eq!(fs::read(&outside).unwrap(), b"precious");
    }
}

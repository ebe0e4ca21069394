//! Pages through the whole of a stream (`bashc output`): 1-based line offsets, as file
//! viewers count them, over the spill file or the text kept in memory. A page holds
//! whole lines within its byte limit; only a first line longer than the whole page is
//! cut (and the page says so), and the next page starts right after the last line
//! shown, so paging shows every line exactly once.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use bashd_protocol::{ErrorKind, ErrorReply, JobId, Notice, OutputPage, StreamName};

use super::store::{LineMark, char_floor};

/// What a page request asks for.
#[derive(Debug, Clone, Copy)]
pub struct Ask {
    pub job: JobId,
    pub stream: StreamName,
    /// The first line, 1-based.
    pub offset: u64,
    /// Most lines.
    pub limit: u64,
    /// Most bytes of text; a first line longer than this is cut to it.
    pub max_bytes: u64,
}

/// A snapshot of one stream to read pages from.
#[derive(Debug, Clone)]
pub struct OutputSource {
    pub content: Content,
    pub total_lines: u64,
    /// Lines that ended with a newline, or all of them once the stream has ended.
    pub complete_lines: u64,
    pub total_bytes: u64,
    /// The stream has ended.
    pub complete: bool,
}

#[derive(Debug, Clone)]
pub enum Content {
    /// The whole stream, which never passed a limit.
    Memory(Vec<u8>),
    /// The spill file, of which `len` bytes were written when the snapshot was taken.
    File {
        path: PathBuf,
        len: u64,
        /// Where some lines start, in order, for a page to start reading near its own.
        marks: Vec<LineMark>,
        capped: bool,
        error: Option<String>,
    },
}

/// Reads lines `offset .. offset + limit` of `source`. Blocking: run it off the
/// async workers.
pub fn page(source: OutputSource, ask: Ask) -> Result<OutputPage, ErrorReply> {
    let Ask {
        job,
        stream,
        offset,
        limit,
        max_bytes,
    } = ask;
    let offset = offset.max(1);
    let max_bytes = usize::try_from(max_bytes).unwrap_or(usize::MAX).max(1);
    let cannot_read = |path: &std::path::Path, e: io::Error, earlier: Option<&str>| {
        let earlier = earlier.map_or(String::new(), |w| format!("; writing it had failed: {w}"));
        ErrorReply::new(
            ErrorKind::Internal,
            format!(
                "cannot read the output of {job} from {}: {e}{earlier}",
                path.display()
            ),
        )
    };
    let (lines, full_output, capped) = match &source.content {
        Content::Memory(text) => {
            let lines = read_lines(&text[..], 1, offset, limit, max_bytes).map_err(|e| {
                ErrorReply::new(
                    ErrorKind::Internal,
                    format!("cannot page the output of {job}: {e}"),
                )
            })?;
            (lines, None, false)
        }
        Content::File {
            path,
            len,
            marks,
            capped,
            error,
        } => {
            let start = marks[..marks.partition_point(|m| m.line <= offset && m.byte <= *len)]
                .last()
                .copied()
                .unwrap_or(LineMark { line: 1, byte: 0 });
            let read = || {
                let mut file = File::options()
                    .read(true)
                    .custom_flags(crate::runtime::o_nofollow())
                    .open(path)?;
                file.seek(SeekFrom::Start(start.byte))?;
                let reader =
                    BufReader::with_capacity(256 * 1024, file.take(len.saturating_sub(start.byte)));
                read_lines(reader, start.line, offset, limit, max_bytes)
            };
            let mut lines = read().map_err(|e| cannot_read(path, e, error.as_deref()))?;
            if *capped && lines.next.is_none() && !lines.text.ends_with(b"\n") {
                // The cap cut the file inside a line: that line was not kept whole,
                // so no page shows it and every message says the line before it is
                // the last kept.
                let kept = lines
                    .text
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1);
                if kept < lines.text.len() {
                    lines.text.truncate(kept);
                    lines.count = lines.count.saturating_sub(1);
                    if lines.cut_line == Some(offset + lines.count) {
                        lines.cut_line = None;
                    }
                }
            }
            (lines, Some(path.to_string_lossy().into_owned()), *capped)
        }
    };
    let mut notices = Vec::new();
    if let Some(line) = lines.cut_line {
        notices.push(Notice::LineCut {
            line,
            page_bytes: max_bytes as u64,
            path: full_output.clone(),
        });
    }
    if lines.full {
        notices.push(Notice::PageFull {
            max_bytes: max_bytes as u64,
        });
    }
    let end = offset + lines.count;
    if lines.next.is_none() && capped && end <= source.total_lines {
        // `end - 1` is the last line the file holds whole.
        notices.push(Notice::PageCapped {
            last_line: end - 1,
            lost_lines: source.total_lines - (end - 1),
        });
    }
    Ok(OutputPage {
        job,
        stream,
        offset,
        lines: lines.count,
        text: String::from_utf8_lossy(&lines.text).into_owned(),
        next_offset: lines.next,
        total_lines: source.total_lines,
        total_bytes: source.total_bytes,
        complete: source.complete,
        full_output,
        notices,
    })
}

#[derive(Debug, PartialEq, Eq)]
struct Lines {
    text: Vec<u8>,
    count: u64,
    /// The line to read next, when there is more.
    next: Option<u64>,
    /// The line that was cut at the page's byte limit.
    cut_line: Option<u64>,
    /// The page stopped at its byte limit before `limit` lines: the next line did
    /// not fit whole.
    full: bool,
}

/// Skips to line `offset` (1-based) of a reader that starts at line `start_line`, and
/// takes up to `limit` whole lines within `max_bytes`, without ever holding more than
/// that in memory. Only a first line longer than `max_bytes` is cut.
fn read_lines(
    mut reader: impl BufRead,
    start_line: u64,
    offset: u64,
    limit: u64,
    max_bytes: usize,
) -> io::Result<Lines> {
    let mut line = start_line;
    while line < offset {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let skip = offset - line;
        match memchr::memchr_iter(b'\n', buf).nth((skip - 1) as usize) {
            Some(i) => {
                reader.consume(i + 1);
                line = offset;
            }
            None => {
                line += memchr::memchr_iter(b'\n', buf).count() as u64;
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
    let mut text = Vec::new();
    let mut count = 0;
    let mut cut_line = None;
    let mut full = false;
    let mut in_line = false;
    // Where the line being read starts in `text`.
    let mut line_start = 0;
    while count < limit {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let (take, ends_line) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = max_bytes - text.len();
        if take > room {
            if count > 0 {
                // The line does not fit whole: it starts the next page, whole, even
                // when part of it was read already.
                text.truncate(line_start);
                in_line = false;
                full = true;
                break;
            }
            // The page's first line is longer than the page: cut on a character
            // boundary and marked; the next page starts at the next line.
            let fits = char_floor(&buf[..take], room.saturating_sub(1));
            text.extend_from_slice(&buf[..fits]);
            text.push(b'\n');
            reader.consume(take);
            skip_rest_of_line(&mut reader, ends_line)?;
            cut_line = Some(offset);
            count = 1;
            in_line = false;
            break;
        }
        text.extend_from_slice(&buf[..take]);
        reader.consume(take);
        in_line = !ends_line;
        if ends_line {
            count += 1;
            line_start = text.len();
        }
    }
    if in_line {
        // The stream ended on a line without a newline.
        count += 1;
    }
    let more = !reader.fill_buf()?.is_empty();
    Ok(Lines {
        text,
        count,
        next: more.then_some(offset + count),
        cut_line,
        full,
    })
}

fn skip_rest_of_line(reader: &mut impl BufRead, already_ended: bool) -> io::Result<()> {
    if already_ended {
        return Ok(());
    }
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match memchr::memchr(b'\n', buf) {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                reader.consume(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE_MAX_BYTES: usize = bashd_protocol::limits::MAX_PAGE_BYTES as usize;

    fn lines(text: &str, offset: u64, limit: u64) -> Lines {
        read_lines(text.as_bytes(), 1, offset, limit, PAGE_MAX_BYTES).unwrap()
    }

    fn ask(offset: u64, limit: u64) -> Ask {
        Ask {
            job: JobId(1),
            stream: StreamName::Stdout,
            offset,
            limit,
            max_bytes: PAGE_MAX_BYTES as u64,
        }
    }

    #[test]
    fn pages_count_lines_from_one() {
        let text: String = (1..=10).map(|i| format!("{i}\n")).collect();
        let page = lines(&text, 1, 3);
        assert_eq!(
            (page.text.as_slice(), page.count, page.next),
            (&b"1\n2\n3\n"[..], 3, Some(4))
        );
        let page = lines(&text, 9, 5);
        assert_eq!(
            (page.text.as_slice(), page.count, page.next),
            (&b"9\n10\n"[..], 2, None)
        );
        let page = lines(&text, 11, 5);
        assert_eq!((page.count, page.next), (0, None));
    }

    #[test]
    fn a_last_line_without_newline_counts() {
        let page = lines("a\nb", 2, 10);
        assert_eq!(
            (page.text.as_slice(), page.count, page.next),
            (&b"b"[..], 1, None)
        );
    }

    #[test]
    fn pages_are_bounded_in_bytes() {
        let long = "x".repeat(PAGE_MAX_BYTES + 10);
        let text = format!("short\n{long}\nafter\n");
        let page = lines(&text, 1, 10);
        assert_eq!(
            (page.count, page.next),
            (1, Some(2)),
            "the long line starts the next page"
        );
        let page = lines(&text, 2, 10);
        assert_eq!(
            (page.count, page.next, page.cut_line),
            (1, Some(3), Some(2))
        );
        assert_eq!(page.text.len(), PAGE_MAX_BYTES);
        let page = lines(&text, 3, 10);
        assert_eq!(page.text, b"after\n");
    }

    #[test]
    fn reading_a_spill_file_stops_at_the_snapshot_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j1.stdout");
        std::fs::write(&path, "1\n2\n3\n4\n").unwrap();
        let source = OutputSource {
            content: Content::File {
                path: path.clone(),
                len: 4,
                marks: Vec::new(),
                capped: false,
                error: None,
            },
            total_lines: 2,
            complete_lines: 2,
            total_bytes: 4,
            complete: false,
        };
        let page = page(source, ask(1, 100)).unwrap();
        assert_eq!(
            (page.text.as_str(), page.lines, page.next_offset),
            ("1\n2\n", 2, None)
        );
        assert_eq!(page.full_output.as_deref(), path.to_str());
    }

    #[test]
    fn a_page_read_from_a_mark_is_the_page_read_from_the_top() {
        let text = crate::output::store::tests::varied_lines();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions/s/j1.stdout");
        let limits = crate::output::Limits {
            max_lines: 10,
            max_bytes: 100,
            max_spill_bytes: 1 << 30,
        };
        let mut store = crate::output::store::Store::new(limits, path.clone(), true);
        for chunk in text.chunks(100_000) {
            store.push(chunk);
        }
        let marks = store.spill().marks().to_vec();
        assert!(marks.len() >= 4);
        let total_lines = store.total_lines();
        let source = |marks: Vec<LineMark>| OutputSource {
            content: Content::File {
                path: path.clone(),
                len: text.len() as u64,
                marks,
                capped: false,
                error: None,
            },
            total_lines,
            complete_lines: total_lines,
            total_bytes: text.len() as u64,
            complete: true,
        };
        let mut offsets = vec![
            1,
            2,
            6_999,
            7_000,
            7_001,
            7_002,
            total_lines,
            total_lines + 1,
        ];
        for mark in &marks {
            offsets.extend([mark.line - 1, mark.line, mark.line + 1]);
        }
        for offset in offsets {
            for limit in [1, 3, 1_000] {
                let read = |marks| {
                    let page = page(source(marks), ask(offset, limit)).unwrap();
                    (page.text, page.lines, page.next_offset, page.notices)
                };
                assert_eq!(
                    read(marks.clone()),
                    read(Vec::new()),
                    "offset {offset}, limit {limit}"
                );
            }
        }
    }
}

#[cfg(test)]
mod capped_tests {
    use super::*;

    /// Issue 15: a file cut by its cap inside a line shows the lines before it, and
    /// the page says the one before the cut is the last kept.
    #[test]
    fn a_capped_file_ends_at_its_last_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j1.stdout");
        std::fs::write(&path, "1\n2\n3\npart").unwrap();
        let source = OutputSource {
            content: Content::File {
                path,
                len: 10,
                marks: Vec::new(),
                capped: true,
                error: None,
            },
            total_lines: 9,
            complete_lines: 9,
            total_bytes: 100,
            complete: true,
        };
        let ask = Ask {
            job: JobId(1),
            stream: StreamName::Stdout,
            offset: 2,
            limit: 100,
            max_bytes: 1000,
        };
        let page = page(source, ask).unwrap();
        assert_eq!((page.text.as_str(), page.lines), ("2\n3\n", 2));
        assert_eq!(
            page.notices,
            [Notice::PageCapped {
                last_line: 3,
                lost_lines: 6
            }]
        );
    }
}

#[cfg(test)]
mod byte_limit_tests {
    use super::*;

    /// Every page of `text` under `max_bytes`, read as a client pages: from line 1,
    /// each at the last page's `next`.
    fn pages(text: &[u8], max_bytes: usize, chunk: usize) -> Vec<Lines> {
        let mut pages = Vec::new();
        let mut offset = 1;
        loop {
            let reader = BufReader::with_capacity(chunk, text);
            let page = read_lines(reader, 1, offset, 2000, max_bytes).unwrap();
            let next = page.next;
            pages.push(page);
            match next {
                Some(next) => offset = next,
                None => return pages,
            }
        }
    }

    /// Issue 15: pages under a byte limit show every line once, whole, whatever the
    /// reader's chunks; only a line longer than the page is cut.
    #[test]
    fn paging_under_a_byte_limit_shows_every_line_exactly_once() {
        let mut text = Vec::new();
        for i in 0..2000u32 {
            let len = [600usize, 5, 1300, 80][i as usize % 4];
            text.extend(
                format!("{i:05}")
                    .bytes()
                    .chain(std::iter::repeat_n(b'x', len)),
            );
            text.push(b'\n');
        }
        for chunk in [64, 1000, 8192] {
            let pages = pages(&text, 4096, chunk);
            let joined: Vec<u8> = pages.iter().flat_map(|p| p.text.clone()).collect();
            assert_eq!(joined, text, "chunk {chunk}");
            assert_eq!(pages.iter().map(|p| p.count).sum::<u64>(), 2000);
            for page in &pages {
                assert!(page.text.len() <= 4096);
                assert_eq!(page.cut_line, None);
                assert!(page.text.ends_with(b"\n"));
            }
            assert!(pages[..pages.len() - 1].iter().all(|p| p.full));
        }
    }

    #[test]
    fn a_line_longer_than_the_page_is_cut_alone_and_the_next_page_is_the_next_line() {
        let text = format!("short\n{}\nafter\n", "é".repeat(3000));
        let pages = pages(text.as_bytes(), 1001, 100);
        let counts: Vec<(u64, Option<u64>, Option<u64>)> = pages
            .iter()
            .map(|p| (p.count, p.cut_line, p.next))
            .collect();
        assert_eq!(
            counts,
            [(1, None, Some(2)), (1, Some(2), Some(3)), (1, None, None)]
        );
        // Cut on a character boundary: 500 of the 2-byte characters, and the newline.
        assert_eq!(pages[1].text.len(), 1001);
        assert!(std::str::from_utf8(&pages[1].text).is_ok());
    }
}

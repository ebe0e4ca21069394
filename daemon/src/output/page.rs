//! Pages through the whole of a stream (`bashc output`): 1-based line offsets, as file
//! viewers count them, over the spill file or the text kept in memory.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use bashd_protocol::{ErrorKind, ErrorReply, JobId, Notice, OutputPage, StreamName};

use super::store::{LineMark, char_floor};

/// The most text one page carries, whatever the line count asked for: a line longer
/// than this is cut, and the page says so.
pub const PAGE_MAX_BYTES: usize = 1024 * 1024;

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
pub fn page(
    source: OutputSource,
    job: JobId,
    stream: StreamName,
    offset: u64,
    limit: u64,
) -> Result<OutputPage, ErrorReply> {
    let offset = offset.max(1);
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
            let lines = read_lines(&text[..], 1, offset, limit).map_err(|e| {
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
                read_lines(reader, start.line, offset, limit)
            };
            let lines = read().map_err(|e| cannot_read(path, e, error.as_deref()))?;
            (lines, Some(path.to_string_lossy().into_owned()), *capped)
        }
    };
    let mut notices = Vec::new();
    if let Some(line) = lines.cut_line {
        notices.push(Notice::LineCut {
            line,
            page_bytes: PAGE_MAX_BYTES as u64,
            path: full_output.clone(),
        });
    }
    let end = offset + lines.count;
    if lines.next.is_none() && capped && end <= source.total_lines {
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
    /// The line that was cut at [`PAGE_MAX_BYTES`].
    cut_line: Option<u64>,
}

/// Skips to line `offset` (1-based) of a reader that starts at line `start_line`, and
/// takes up to `limit` lines and at most [`PAGE_MAX_BYTES`], without ever holding more
/// than that in memory.
fn read_lines(
    mut reader: impl BufRead,
    start_line: u64,
    offset: u64,
    limit: u64,
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
    let mut in_line = false;
    while count < limit {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let (take, ends_line) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = PAGE_MAX_BYTES - text.len();
        if take > room {
            if count > 0 && !in_line {
                // The next line would not fit: it starts the next page.
                break;
            }
            let fits = char_floor(&buf[..take], room);
            text.extend_from_slice(&buf[..fits]);
            text.push(b'\n');
            reader.consume(take);
            skip_rest_of_line(&mut reader, ends_line)?;
            cut_line = Some(offset + count);
            count += 1;
            break;
        }
        text.extend_from_slice(&buf[..take]);
        reader.consume(take);
        in_line = !ends_line;
        if ends_line {
            count += 1;
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

    fn lines(text: &str, offset: u64, limit: u64) -> Lines {
        read_lines(text.as_bytes(), 1, offset, limit).unwrap()
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
        assert_eq!(page.text.len(), PAGE_MAX_BYTES + 1);
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
        let page = page(source, JobId(1), StreamName::Stdout, 1, 100).unwrap();
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
                    let page =
                        page(source(marks), JobId(1), StreamName::Stdout, offset, limit).unwrap();
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

//! Searches the whole of a stream (`bashc output --grep`): the lines that match a regex,
//! with context, as `grep -n` shows them (`12:match`, `11-context`, `--` between
//! groups), paged and capped like `bashc output`. Blocking: run it off the async
//! workers.
//!
//! The stream is read in blocks of about 1 MiB of whole lines; a block the regex does
//! not match anywhere is only counted (its newlines) and passed, so a search far into a
//! big spill file costs about one regex scan of it.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;

use bashd_protocol::{ErrorKind, ErrorReply, JobId, Notice, OutputPage, StreamName};
use regex::bytes::Regex;

use super::page::{Content, OutputSource};

/// The most text one page of matches carries.
const PAGE_MAX_BYTES: usize = bashd_protocol::limits::MAX_PAGE_BYTES as usize;
use super::store::{LineMark, char_floor};

/// How much is read at once.
const BLOCK: usize = 1024 * 1024;

/// The lines of `source` from line `offset` on that match `regex`, at most `limit` of
/// them, each with `context` lines before and after.
pub fn grep(
    source: OutputSource,
    job: JobId,
    stream: StreamName,
    regex: &Regex,
    context: u32,
    offset: u64,
    limit: u64,
) -> Result<OutputPage, ErrorReply> {
    let offset = offset.max(1);
    let (reader, start, full_output): (Box<dyn Read>, LineMark, Option<String>) =
        match &source.content {
            Content::Memory(text) => (
                Box::new(io::Cursor::new(text.clone())),
                LineMark { line: 1, byte: 0 },
                None,
            ),
            Content::File {
                path, len, marks, ..
            } => {
                let start = marks[..marks.partition_point(|m| m.line <= offset && m.byte <= *len)]
                    .last()
                    .copied()
                    .unwrap_or(LineMark { line: 1, byte: 0 });
                let open = || -> io::Result<File> {
                    let mut file = File::options()
                        .read(true)
                        .custom_flags(crate::runtime::o_nofollow())
                        .open(path)?;
                    file.seek(SeekFrom::Start(start.byte))?;
                    Ok(file)
                };
                let file = open().map_err(|e| {
                    ErrorReply::new(
                        ErrorKind::Internal,
                        format!(
                            "cannot read the output of {job} from {}: {e}",
                            path.display()
                        ),
                    )
                })?;
                (
                    Box::new(file.take(len.saturating_sub(start.byte))),
                    start,
                    Some(path.to_string_lossy().into_owned()),
                )
            }
        };
    // A block is looked at whole first: `^` and `$` must still mean a line's ends.
    let block_regex = regex::bytes::RegexBuilder::new(regex.as_str())
        .multi_line(true)
        .build()
        .map_err(|e| ErrorReply::new(ErrorKind::InvalidRequest, format!("bad regex: {e}")))?;
    let mut search = Search {
        regex,
        block_regex: &block_regex,
        context: context as usize,
        offset,
        limit: limit.max(1),
        before: VecDeque::new(),
        after_left: 0,
        last_shown: 0,
        matches: 0,
        text: Vec::new(),
        next: None,
        cut_line: None,
    };
    search.run(reader, start.line).map_err(|e| {
        ErrorReply::new(
            ErrorKind::Internal,
            format!("cannot search the output of {job}: {e}"),
        )
    })?;
    let mut notices = Vec::new();
    if let Some(line) = search.cut_line {
        notices.push(Notice::LineCut {
            line,
            page_bytes: PAGE_MAX_BYTES as u64,
            path: full_output.clone(),
        });
    }
    Ok(OutputPage {
        job,
        stream,
        offset,
        lines: search.matches,
        text: String::from_utf8_lossy(&search.text).into_owned(),
        next_offset: search.next,
        total_lines: source.total_lines,
        total_bytes: source.total_bytes,
        complete: source.complete,
        full_output,
        notices,
    })
}

struct Search<'a> {
    regex: &'a Regex,
    /// `regex` in multi-line mode, for a whole block.
    block_regex: &'a Regex,
    context: usize,
    /// Lines before this one are not searched.
    offset: u64,
    limit: u64,
    /// The last `context` lines passed, for the context before a match.
    before: VecDeque<(u64, Vec<u8>)>,
    /// Lines of context still to show after the last match.
    after_left: usize,
    /// The last line put in the page, for the `--` between groups.
    last_shown: u64,
    matches: u64,
    text: Vec<u8>,
    /// Where the next page starts, when this one stopped early.
    next: Option<u64>,
    cut_line: Option<u64>,
}

enum Step {
    Go,
    Stop,
}

impl Search<'_> {
    fn run(&mut self, mut reader: impl Read, mut line: u64) -> io::Result<()> {
        let mut buf = vec![0u8; BLOCK];
        let mut filled = 0;
        loop {
            let n = reader.read(&mut buf[filled..])?;
            let ended = n == 0;
            filled += n;
            // Whole lines only, but the last line at the end of the stream.
            let usable = match memchr::memrchr(b'\n', &buf[..filled]) {
                Some(i) => i + 1,
                None if ended || filled == buf.len() => filled,
                None => continue,
            };
            if usable == 0 {
                return Ok(());
            }
            let block = &buf[..usable];
            let skip = self.after_left == 0 && !self.block_regex.is_match(block);
            if skip {
                line = self.pass(block, line);
            } else {
                let mut at = 0;
                while at < block.len() {
                    let end = memchr::memchr(b'\n', &block[at..]).map_or(block.len(), |i| at + i);
                    if let Step::Stop = self.line(line, &block[at..end]) {
                        return Ok(());
                    }
                    line += 1;
                    at = end + 1;
                }
            }
            buf.copy_within(usable..filled, 0);
            filled -= usable;
            if ended && filled == 0 {
                return Ok(());
            }
        }
    }

    /// A block with no match and no context to show: counted, its last lines kept.
    fn pass(&mut self, block: &[u8], line: u64) -> u64 {
        let lines =
            memchr::memchr_iter(b'\n', block).count() as u64 + u64::from(!block.ends_with(b"\n"));
        if self.context > 0 {
            let mut end = block.len() - usize::from(block.ends_with(b"\n"));
            let mut kept = Vec::new();
            let mut number = line + lines;
            while kept.len() < self.context && number > line {
                number -= 1;
                let start = memchr::memrchr(b'\n', &block[..end]).map_or(0, |i| i + 1);
                kept.push((number, block[start..end].to_vec()));
                if start == 0 {
                    break;
                }
                end = start - 1;
            }
            for entry in kept.into_iter().rev() {
                self.remember(entry);
            }
        }
        line + lines
    }

    fn remember(&mut self, entry: (u64, Vec<u8>)) {
        if self.context == 0 {
            return;
        }
        if self.before.len() == self.context {
            self.before.pop_front();
        }
        self.before.push_back(entry);
    }

    fn line(&mut self, number: u64, text: &[u8]) -> Step {
        if number < self.offset {
            self.remember((number, text.to_vec()));
            return Step::Go;
        }
        if self.regex.is_match(text) {
            if self.matches == self.limit {
                self.next = Some(number);
                return Step::Stop;
            }
            let before: Vec<(u64, Vec<u8>)> = self.before.drain(..).collect();
            for (n, context) in before {
                if n > self.last_shown
                    && let Step::Stop = self.show(n, b'-', &context)
                {
                    return Step::Stop;
                }
            }
            if let Step::Stop = self.show(number, b':', text) {
                return Step::Stop;
            }
            self.matches += 1;
            self.after_left = self.context;
        } else if self.after_left > 0 {
            self.after_left -= 1;
            if let Step::Stop = self.show(number, b'-', text) {
                return Step::Stop;
            }
        } else {
            self.remember((number, text.to_vec()));
        }
        Step::Go
    }

    /// Puts one line in the page, `N:` for a match and `N-` for context, unless the
    /// page is full: then the page ends before it.
    fn show(&mut self, number: u64, mark: u8, text: &[u8]) -> Step {
        let separator = self.context > 0 && self.last_shown > 0 && number > self.last_shown + 1;
        let prefix = format!(
            "{}{number}{}",
            if separator { "--\n" } else { "" },
            mark as char
        );
        let room = PAGE_MAX_BYTES.saturating_sub(self.text.len() + prefix.len() + 1);
        if text.len() > room {
            if !self.text.is_empty() {
                self.next = Some(number);
                return Step::Stop;
            }
            // One line alone longer than a page: shown cut.
            self.cut_line = Some(number);
            self.text.extend_from_slice(prefix.as_bytes());
            self.text.extend_from_slice(&text[..char_floor(text, room)]);
            self.text.push(b'\n');
            self.last_shown = number;
            self.next = Some(number + 1);
            return Step::Stop;
        }
        self.text.extend_from_slice(prefix.as_bytes());
        self.text.extend_from_slice(text);
        self.text.push(b'\n');
        self.last_shown = number;
        Step::Go
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(text: &str, pattern: &str, context: u32, offset: u64, limit: u64) -> OutputPage {
        let source = OutputSource {
            content: Content::Memory(text.as_bytes().to_vec()),
            total_lines: text.lines().count() as u64,
            complete_lines: text.lines().count() as u64,
            total_bytes: text.len() as u64,
            complete: true,
        };
        let regex = Regex::new(pattern).unwrap();
        grep(
            source,
            JobId(1),
            StreamName::Stdout,
            &regex,
            context,
            offset,
            limit,
        )
        .unwrap()
    }

    #[test]
    fn matches_come_with_their_numbers_and_context() {
        let text: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let page = search(&text, r"^line (5|7|15)$", 1, 1, 100);
        assert_eq!(
            page.text,
            "4-line 4\n5:line 5\n6-line 6\n7:line 7\n8-line 8\n--\n14-line 14\n15:line 15\n16-line 16\n"
        );
        assert_eq!((page.lines, page.next_offset), (3, None));
    }

    #[test]
    fn pages_stop_at_the_limit_and_say_where_to_go_on() {
        let text: String = (1..=20).map(|i| format!("x{i}\n")).collect();
        let page = search(&text, "x1", 0, 1, 3);
        assert_eq!(page.text, "1:x1\n10:x10\n11:x11\n");
        assert_eq!(page.next_offset, Some(12));
        let page = search(&text, "x1", 0, 12, 3);
        assert_eq!(page.text, "12:x12\n13:x13\n14:x14\n");
        let page = search(&text, "nothing", 2, 1, 3);
        assert_eq!(
            (page.text.as_str(), page.lines, page.next_offset),
            ("", 0, None)
        );
    }

    #[test]
    fn a_match_past_many_blocks_is_found_with_its_line_number() {
        let mut text = String::new();
        for i in 1..=300_000 {
            text.push_str(&format!("filler line number {i}\n"));
        }
        text.push_str("the needle\nafter\n");
        let page = search(&text, "needle", 1, 1, 10);
        assert_eq!(
            page.text,
            "300000-filler line number 300000\n300001:the needle\n300002-after\n"
        );
    }
}

//! Capture of one output stream with memory bounded by the shown-output limits.
//!
//! This keeps the tail of the stream, up to `max_bytes`, and counts everything. The
//! full pipeline of DESIGN §5 (sanitizer, directions, spill files) replaces it.

use std::collections::VecDeque;

use bashd_protocol::{Direction, StreamResult, TruncatedBy};

#[derive(Debug)]
pub struct Capture {
    max_lines: usize,
    max_bytes: usize,
    tail: VecDeque<u8>,
    total_bytes: u64,
    newlines: u64,
    ends_with_newline: bool,
}

impl Capture {
    pub fn new(max_lines: u32, max_bytes: u32) -> Capture {
        Capture {
            max_lines: max_lines as usize,
            max_bytes: max_bytes as usize,
            tail: VecDeque::new(),
            total_bytes: 0,
            newlines: 0,
            ends_with_newline: true,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.total_bytes += chunk.len() as u64;
        self.newlines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
        self.ends_with_newline = chunk.last() == Some(&b'\n');
        // One byte more than shown, so a cut can tell whether it landed on a line start.
        let keep = self.max_bytes + 1;
        let chunk = &chunk[chunk.len().saturating_sub(keep)..];
        let overflow = (self.tail.len() + chunk.len()).saturating_sub(keep);
        self.tail.drain(..overflow);
        self.tail.extend(chunk);
    }

    pub fn total_lines(&self) -> u64 {
        self.newlines + u64::from(!self.ends_with_newline)
    }

    /// The last lines of the stream that fit both limits, cut on line boundaries.
    pub fn render(&self) -> StreamResult {
        let kept: Vec<u8> = self.tail.iter().copied().collect();
        let dropped_bytes = self.total_bytes - kept.len() as u64;
        let mut start = 0;
        let mut truncated_by = None;
        // The kept bytes may start mid-line, or run over the byte limit: skip to the
        // first whole line that leaves at most max_bytes.
        if dropped_bytes > 0 || kept.len() > self.max_bytes {
            truncated_by = Some(TruncatedBy::Bytes);
            let must_skip = kept.len().saturating_sub(self.max_bytes);
            let at_line_start = dropped_bytes == 0 || kept.first() == Some(&b'\n');
            start = if at_line_start && must_skip == 0 {
                0
            } else {
                match kept[must_skip.saturating_sub(1)..]
                    .iter()
                    .position(|&b| b == b'\n')
                {
                    Some(i) if must_skip.saturating_sub(1) + i + 1 < kept.len() => {
                        must_skip.saturating_sub(1) + i + 1
                    }
                    // One line longer than the limit: show its last max_bytes.
                    _ => must_skip,
                }
            };
        }
        let mut shown = &kept[start..];
        let shown_newlines = shown.iter().filter(|&&b| b == b'\n').count();
        let shown_lines =
            shown_newlines + usize::from(!self.ends_with_newline && !shown.is_empty());
        if shown_lines > self.max_lines {
            truncated_by = Some(TruncatedBy::Lines);
            let mut skip = shown_lines - self.max_lines;
            let mut cut = 0;
            for (i, &b) in shown.iter().enumerate() {
                if b == b'\n' {
                    skip -= 1;
                    if skip == 0 {
                        cut = i + 1;
                        break;
                    }
                }
            }
            shown = &shown[cut..];
        }
        let text = String::from_utf8_lossy(shown).into_owned();
        let shown_lines = text.matches('\n').count() as u64
            + u64::from(!text.is_empty() && !text.ends_with('\n'));
        StreamResult {
            shown_bytes: text.len() as u64,
            shown_lines,
            text,
            truncated: truncated_by.is_some(),
            truncated_by,
            direction: Direction::Tail,
            total_lines: self.total_lines(),
            total_bytes: self.total_bytes,
            full_output: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(input: &[u8], lines: u32, bytes: u32) -> StreamResult {
        let mut c = Capture::new(lines, bytes);
        for chunk in input.chunks(7) {
            c.push(chunk);
        }
        c.render()
    }

    #[test]
    fn small_output_is_whole() {
        let r = capture(b"a\nb\n", 10, 100);
        assert_eq!(r.text, "a\nb\n");
        assert!(!r.truncated);
        assert_eq!((r.total_lines, r.shown_lines), (2, 2));
    }

    #[test]
    fn line_limit_keeps_last_lines() {
        let input: String = (1..=100).map(|i| format!("{i}\n")).collect();
        let r = capture(input.as_bytes(), 10, 10_000);
        assert_eq!(
            r.text,
            (91..=100).map(|i| format!("{i}\n")).collect::<String>()
        );
        assert_eq!(r.truncated_by, Some(TruncatedBy::Lines));
        assert_eq!(r.total_lines, 100);
    }

    #[test]
    fn byte_limit_cuts_on_a_line_start() {
        let input: String = (1..=100).map(|i| format!("line{i:03}\n")).collect();
        let r = capture(input.as_bytes(), 1000, 25);
        assert_eq!(r.text, "line098\nline099\nline100\n");
        assert_eq!(r.truncated_by, Some(TruncatedBy::Bytes));
    }

    #[test]
    fn unterminated_last_line_counts() {
        let r = capture(b"a\nb", 10, 100);
        assert_eq!((r.total_lines, r.shown_lines), (2, 2));
    }
}

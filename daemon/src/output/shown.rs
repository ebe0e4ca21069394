//! Turns what a [`Store`] kept into the stream of a result (DESIGN §5, §9): whole lines
//! that fit both limits, from the end, the start or both, and the counts that say what
//! was left out.

use std::ops::Range;

use bashd_protocol::{Direction, OutputOptions, StreamResult, TruncatedBy};

use super::store::{Store, char_ceil, char_floor};

/// Room kept in a `head_tail` result for the omitted-lines marker, so that the whole
/// text stays within `max_bytes`.
const MARKER_ROOM: usize = 64;

/// Which part of a stream a result shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub direction: Direction,
    /// Lines from the start, narrowing `max_lines`.
    pub head: Option<u64>,
    /// Lines from the end, narrowing `max_lines`.
    pub tail: Option<u64>,
}

impl Shape {
    /// `--head N` alone means the first lines, `--tail N` the last, both mean both;
    /// an explicit direction wins.
    pub fn from_options(options: &OutputOptions) -> Shape {
        let (head, tail) = (options.head.map(u64::from), options.tail.map(u64::from));
        let direction = options.direction.unwrap_or(match (head, tail) {
            (Some(_), Some(_)) => Direction::HeadTail,
            (Some(_), None) => Direction::Head,
            _ => Direction::Tail,
        });
        Shape {
            direction,
            head,
            tail,
        }
    }
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            direction: Direction::Tail,
            head: None,
            tail: None,
        }
    }
}

pub fn stream_result(store: &Store, shape: Shape, full_output: Option<String>) -> StreamResult {
    let limits = store.limits();
    let (max_lines, max_bytes) = (limits.max_lines, limits.max_bytes);
    let narrow = |n: Option<u64>, default: u64| n.map_or(default, |n| n.min(max_lines));
    let total_lines = store.total_lines();
    let total_bytes = store.total_bytes();
    let result = |text: String, shown_lines, cut_by: Option<TruncatedBy>, partial| {
        let truncated = (text.len() as u64) < total_bytes || partial;
        StreamResult {
            shown_bytes: text.len() as u64,
            shown_lines,
            text,
            truncated,
            truncated_by: if truncated {
                cut_by.or(Some(TruncatedBy::Bytes))
            } else {
                None
            },
            partial,
            direction: shape.direction,
            total_lines,
            total_bytes,
            full_output: full_output.clone(),
        }
    };
    match shape.direction {
        Direction::Tail => {
            let (buf, from_start) = store.tail();
            let cut = tail_cut(&buf, from_start, narrow(shape.tail, max_lines), max_bytes);
            result(text_of(&buf, cut.range), cut.lines, cut.by, cut.partial)
        }
        Direction::Head => {
            let (buf, whole) = store.head();
            let cut = head_cut(buf, whole, narrow(shape.head, max_lines), max_bytes);
            result(text_of(buf, cut.range), cut.lines, cut.by, cut.partial)
        }
        Direction::HeadTail => {
            let head_lines = narrow(shape.head, max_lines / 2);
            let tail_lines = narrow(shape.tail, max_lines - max_lines / 2);
            let (head, whole) = store.head();
            if whole && total_lines <= head_lines + tail_lines {
                // Everything fits: nothing to leave out in the middle.
                return result(text_of(head, 0..head.len()), total_lines, None, false);
            }
            let head_bytes = max_bytes / 2;
            let tail_bytes = (max_bytes - head_bytes).saturating_sub(MARKER_ROOM).max(1);
            let first = head_cut(head, whole, head_lines, head_bytes);
            let (tail, from_start) = store.tail();
            let last = tail_cut(&tail, from_start, tail_lines, tail_bytes);
            let shown = (first.range.len() + last.range.len()) as u64;
            let omitted_lines = total_lines.saturating_sub(first.lines + last.lines);
            let marker = if omitted_lines > 0 && !first.partial && !last.partial {
                format!("... [{omitted_lines} lines omitted] ...\n")
            } else {
                format!(
                    "... [{} bytes omitted] ...\n",
                    total_bytes.saturating_sub(shown)
                )
            };
            let mut text = text_of(head, first.range);
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&marker);
            text.push_str(&text_of(&tail, last.range));
            let by = first.by.or(last.by);
            let mut result = result(
                text,
                first.lines + last.lines,
                by,
                first.partial || last.partial,
            );
            result.truncated = true;
            result.truncated_by = by.or(Some(TruncatedBy::Bytes));
            result
        }
    }
}

fn text_of(buf: &[u8], range: Range<usize>) -> String {
    let bytes = &buf[range];
    debug_assert!(
        std::str::from_utf8(bytes).is_ok(),
        "a cut split a code point"
    );
    String::from_utf8_lossy(bytes).into_owned()
}

/// A part of a buffer to show.
#[derive(Debug, PartialEq, Eq)]
struct Cut {
    range: Range<usize>,
    lines: u64,
    /// One line alone was longer than the byte limit and is shown cut.
    partial: bool,
    /// Which limit ended the cut, when one did.
    by: Option<TruncatedBy>,
}

/// The first whole lines of `buf` within both limits. `whole`: `buf` is the entire
/// stream, so a last line without a newline is complete.
fn head_cut(buf: &[u8], whole: bool, max_lines: u64, max_bytes: usize) -> Cut {
    let mut end = 0;
    let mut lines = 0;
    let mut by = None;
    while end < buf.len() {
        if lines == max_lines {
            by = Some(TruncatedBy::Lines);
            break;
        }
        let line_end = match memchr::memchr(b'\n', &buf[end..]) {
            Some(i) => end + i + 1,
            None if whole => buf.len(),
            None => usize::MAX,
        };
        if line_end > max_bytes {
            by = Some(TruncatedBy::Bytes);
            break;
        }
        end = line_end;
        lines += 1;
    }
    if lines == 0 && by == Some(TruncatedBy::Bytes) {
        let end = char_floor(buf, max_bytes);
        return Cut {
            range: 0..end,
            lines: 1,
            partial: true,
            by,
        };
    }
    Cut {
        range: 0..end,
        lines,
        partial: false,
        by,
    }
}

/// The last whole lines of `buf` within both limits. `from_start`: `buf` begins at the
/// start of the stream, so its first line is complete.
fn tail_cut(buf: &[u8], from_start: bool, max_lines: u64, max_bytes: usize) -> Cut {
    let end = buf.len();
    let mut start = end;
    let mut lines = 0;
    let mut by = None;
    while start > 0 {
        if lines == max_lines {
            by = Some(TruncatedBy::Lines);
            break;
        }
        // The line ending at `start` begins after the newline before its own.
        let line_start = match memchr::memrchr(b'\n', &buf[..start - 1]) {
            Some(i) => i + 1,
            None if from_start => 0,
            // Its start is not kept, so it is longer than any cut can show.
            None => usize::MAX,
        };
        if line_start == usize::MAX || end - line_start > max_bytes {
            by = Some(TruncatedBy::Bytes);
            break;
        }
        start = line_start;
        lines += 1;
    }
    if lines == 0 && by == Some(TruncatedBy::Bytes) {
        let start = char_ceil(buf, end.saturating_sub(max_bytes));
        return Cut {
            range: start..end,
            lines: 1,
            partial: true,
            by,
        };
    }
    Cut {
        range: start..end,
        lines,
        partial: false,
        by,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use proptest::prelude::*;

    use super::*;
    use crate::output::store::Limits;

    fn store_of(text: &[u8], max_lines: u64, max_bytes: usize) -> Store {
        // Never spills in these tests: the path is never created.
        let limits = Limits {
            max_lines,
            max_bytes,
            max_spill_bytes: 0,
        };
        let mut store = Store::new(limits, PathBuf::from("/nonexistent/bashd-test"), false);
        for chunk in text.chunks(5) {
            store.push(chunk);
        }
        store
    }

    fn shape(direction: Direction) -> Shape {
        Shape {
            direction,
            ..Shape::default()
        }
    }

    fn numbered(n: u64) -> String {
        (1..=n).map(|i| format!("{i}\n")).collect()
    }

    #[test]
    fn tail_shows_the_last_lines() {
        let r = stream_result(
            &store_of(numbered(100).as_bytes(), 10, 10_000),
            Shape::default(),
            None,
        );
        assert_eq!(
            r.text,
            (91..=100).map(|i| format!("{i}\n")).collect::<String>()
        );
        assert_eq!(r.truncated_by, Some(TruncatedBy::Lines));
        assert_eq!((r.total_lines, r.shown_lines), (100, 10));
    }

    #[test]
    fn small_output_is_whole_in_every_direction() {
        for direction in [Direction::Tail, Direction::Head, Direction::HeadTail] {
            let r = stream_result(&store_of(b"a\nb", 10, 100), shape(direction), None);
            assert_eq!(r.text, "a\nb", "{direction:?}");
            assert!(!r.truncated);
            assert_eq!((r.total_lines, r.shown_lines), (2, 2));
        }
    }

    #[test]
    fn byte_limit_cuts_on_a_line_start() {
        let input: String = (1..=100).map(|i| format!("line{i:03}\n")).collect();
        let r = stream_result(
            &store_of(input.as_bytes(), 1000, 25),
            Shape::default(),
            None,
        );
        assert_eq!(r.text, "line098\nline099\nline100\n");
        assert_eq!(r.truncated_by, Some(TruncatedBy::Bytes));
        let r = stream_result(
            &store_of(input.as_bytes(), 1000, 25),
            shape(Direction::Head),
            None,
        );
        assert_eq!(r.text, "line001\nline002\nline003\n");
    }

    #[test]
    fn one_long_line_is_cut_on_a_char_boundary_and_marked_partial() {
        let line = "é".repeat(100);
        let tail = stream_result(&store_of(line.as_bytes(), 10, 51), Shape::default(), None);
        assert_eq!(tail.text, "é".repeat(25));
        assert!(tail.partial && tail.truncated);
        assert_eq!(tail.shown_lines, 1);
        let head = stream_result(
            &store_of(line.as_bytes(), 10, 51),
            shape(Direction::Head),
            None,
        );
        assert_eq!(head.text, "é".repeat(25));
        assert!(head.partial);
    }

    #[test]
    fn head_tail_shows_both_ends_and_what_is_omitted() {
        let r = stream_result(
            &store_of(numbered(100).as_bytes(), 10, 10_000),
            shape(Direction::HeadTail),
            None,
        );
        assert_eq!(
            r.text,
            "1\n2\n3\n4\n5\n... [90 lines omitted] ...\n96\n97\n98\n99\n100\n"
        );
        assert_eq!(r.shown_lines, 10);
        assert_eq!(r.truncated_by, Some(TruncatedBy::Lines));
    }

    #[test]
    fn head_and_tail_counts_narrow_what_is_shown() {
        let options = OutputOptions {
            head: Some(5),
            ..OutputOptions::default()
        };
        let store = store_of(numbered(100).as_bytes(), 2000, 51_200);
        let r = stream_result(&store, Shape::from_options(&options), None);
        assert_eq!(r.text, numbered(5));
        assert_eq!(
            (r.direction, r.total_lines, r.truncated),
            (Direction::Head, 100, true)
        );
        let options = OutputOptions {
            head: Some(1),
            tail: Some(2),
            ..OutputOptions::default()
        };
        let r = stream_result(&store, Shape::from_options(&options), None);
        assert_eq!(r.text, "1\n... [97 lines omitted] ...\n99\n100\n");
    }

    fn check_shown(r: &StreamResult, max_lines: u64, max_bytes: usize, input: &str) {
        assert!(r.text.len() <= max_bytes, "{} bytes shown", r.text.len());
        if r.direction != Direction::HeadTail {
            assert!(
                input.contains(&r.text),
                "shown text is not a piece of the input"
            );
        }
        assert!(r.shown_lines <= max_lines);
        if !r.partial && r.direction == Direction::Tail {
            // Whole lines: the shown text starts on a line start.
            let at = input.len() - r.text.len();
            assert!(at == 0 || input.as_bytes()[at - 1] == b'\n');
        }
    }

    proptest! {
        #[test]
        fn shown_text_keeps_to_the_limits(
            lines in proptest::collection::vec("[a-zé🦀]{0,30}", 0..60),
            unterminated in any::<bool>(),
            max_lines in 1u64..20,
            max_bytes in 130usize..400,
        ) {
            let mut input = lines.join("\n");
            if !unterminated && !input.is_empty() {
                input.push('\n');
            }
            let store = store_of(input.as_bytes(), max_lines, max_bytes);
            for direction in [Direction::Tail, Direction::Head, Direction::HeadTail] {
                let r = stream_result(&store, shape(direction), None);
                check_shown(&r, max_lines, max_bytes, &input);
                prop_assert_eq!(r.total_bytes, input.len() as u64);
                prop_assert_eq!(r.total_lines, input.lines().count() as u64);
                prop_assert_eq!(r.truncated, r.text != input);
            }
        }
    }
}

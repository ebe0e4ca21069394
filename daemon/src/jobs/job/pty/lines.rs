//! The fast path of a terminal job's output: lines printed one after another at the
//! bottom of the primary screen, as a build log or `yes` prints them.
//!
//! Such a line starts at column 0 of an empty row and scrolls off as the next ones
//! arrive, so what it leaves in stdout depends only on its own bytes: [`render_run`]
//! renders it the way `vt100` would render its rows when they scroll off, without
//! the emulator's cells. [`super::screen::Screen`] then feeds the emulator only the
//! last screenful of a run (what stays visible). The emulator costs about a
//! microsecond per row that scrolls; this path costs a copy per plain line.
//!
//! A line is *simple* when every byte is one whose effect on a row is known here:
//! printable characters one cell wide, `\r`, `\t`, backspace, SGR (colour, ignored)
//! and `ESC [ K` (erase in line), and the line ends with the cursor back at column 0
//! (`\r\n`, which the terminal's `onlcr` makes of `\n`). Anything else (cursor
//! movement, modes, OSC, wide or combining characters, other controls) ends the run,
//! and the emulator takes the bytes from there.

use std::collections::VecDeque;

use unicode_width::UnicodeWidthChar;

/// A cell never written or erased with the default attributes.
const BLANK: char = '\0';

/// Where a line of a run ends, in the input and in the rendered text, how many rows
/// of the screen it takes, and the last character it printed (which `ESC [ b`
/// repeats).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LineEnd {
    pub input: usize,
    pub text: usize,
    pub rows: usize,
    pub last_char: Option<char>,
}

/// The cells of the row being written, reused from line to line.
pub struct LineRenderer {
    row: Vec<char>,
}

impl LineRenderer {
    pub fn new() -> LineRenderer {
        LineRenderer { row: Vec::new() }
    }

    /// Renders the simple lines at the start of `bytes` into `text`, each preceded by
    /// `\n` (the newline of the row that scrolled off before it), for a screen `cols`
    /// wide. `attrs_default`: the emulator draws with the default attributes (an
    /// erase then leaves empty cells, not coloured blanks); kept up to date by the
    /// SGRs of the run. Pushes the end of each line onto `ends`, its input end
    /// counted from `base`; returns the bytes taken. Stops at the first line that is
    /// not simple, not complete or longer than `longest`.
    #[allow(clippy::too_many_arguments)]
    pub fn render_run(
        &mut self,
        bytes: &[u8],
        base: usize,
        cols: u16,
        longest: usize,
        attrs_default: &mut bool,
        text: &mut Vec<u8>,
        ends: &mut VecDeque<LineEnd>,
    ) -> usize {
        let cols = usize::from(cols.max(1));
        let mut at = 0;
        while let Some(found) = memchr::memchr(b'\n', &bytes[at..]) {
            if found > longest {
                break;
            }
            let line = &bytes[at..at + found];
            let before = text.len();
            let Some((rows, last_char)) = self.render_line(line, cols, attrs_default, text) else {
                text.truncate(before);
                break;
            };
            at += found + 1;
            ends.push_back(LineEnd {
                input: base + at,
                text: text.len(),
                rows,
                last_char,
            });
        }
        at
    }

    /// One line, without its `\n`: the rows it takes and the last character it
    /// printed, `None` when it is not simple.
    fn render_line(
        &mut self,
        line: &[u8],
        cols: usize,
        attrs_default: &mut bool,
        text: &mut Vec<u8>,
    ) -> Option<(usize, Option<char>)> {
        text.push(b'\n');
        // The bulk: printable ASCII then `\r` (or nothing at all), which the rows
        // hold exactly as written, however they wrap.
        let body = line.strip_suffix(b"\r").unwrap_or(line);
        if (body.len() < line.len() || line.is_empty())
            && body.iter().all(|b| PRINTABLE[*b as usize])
        {
            text.extend_from_slice(body);
            let last_char = body.last().map(|b| *b as char);
            return Some((body.len().div_ceil(cols).max(1), last_char));
        }
        // Next: colours and tabs on one row (a compiler's or a logger's line).
        if body.len() < line.len() {
            let start = text.len();
            let mut attrs = *attrs_default;
            if let Some(last_char) = one_row_with_colours(body, cols, &mut attrs, text) {
                *attrs_default = attrs;
                return Some((1, last_char));
            }
            text.truncate(start);
        }
        let (rows, col, last_char) = self.render_cells(line, cols, attrs_default, text)?;
        // A line that leaves the cursor elsewhere would start the next one there.
        (col == 0).then_some((rows, last_char))
    }

    /// The rows that the start of a line (a read cut it) takes so far, when it is
    /// simple so far.
    pub fn rows_so_far(&mut self, partial: &[u8], cols: u16, attrs_default: bool) -> Option<usize> {
        let cols = usize::from(cols.max(1));
        if partial.iter().all(|b| PRINTABLE[*b as usize]) {
            return Some(partial.len().div_ceil(cols).max(1));
        }
        let mut scratch = Vec::new();
        let (rows, ..) = self.render_cells(partial, cols, &mut { attrs_default }, &mut scratch)?;
        Some(rows)
    }

    /// The general case, cell by cell, as `vt100` does it (the rows taken, the
    /// cursor's column at the end, the last character printed): a character written past
    /// the last column wraps to a new row (marked wrapped when that last cell holds
    /// something, so the two rows stay one line), `\r` goes back to column 0 of the
    /// current row, an erase clears cells of the current row.
    fn render_cells(
        &mut self,
        line: &[u8],
        cols: usize,
        attrs_default: &mut bool,
        text: &mut Vec<u8>,
    ) -> Option<(usize, usize, Option<char>)> {
        self.row.clear();
        self.row.resize(cols, BLANK);
        let mut col = 0usize;
        let mut rows = 1;
        let mut last_char = None;
        let mut at = 0;
        while at < line.len() {
            let b = line[at];
            let c = match b {
                0x20..=0x7E => {
                    at += 1;
                    b as char
                }
                b'\r' => {
                    col = 0;
                    at += 1;
                    continue;
                }
                b'\t' => {
                    col = (col - col % 8 + 8).min(cols - 1);
                    at += 1;
                    continue;
                }
                0x08 => {
                    col = col.saturating_sub(1);
                    at += 1;
                    continue;
                }
                0x1B => {
                    let (len, sequence) = csi(&line[at..])?;
                    match sequence {
                        Csi::Sgr { reset } => *attrs_default = reset,
                        // Under colours an erase leaves coloured blanks, which the
                        // emulator writes as spaces: not done here.
                        Csi::Erase(_) if !*attrs_default => return None,
                        Csi::Erase(0) => self.row[col.min(cols)..].fill(BLANK),
                        Csi::Erase(1) => self.row[..=col.min(cols - 1)].fill(BLANK),
                        Csi::Erase(_) => self.row.fill(BLANK),
                    }
                    at += len;
                    continue;
                }
                0x80.. => {
                    let (c, len) = one_cell_char(&line[at..])?;
                    at += len;
                    c
                }
                _ => return None,
            };
            if col >= cols {
                let wrapped = self.row[cols - 1] != BLANK;
                push_row(&self.row, text);
                if !wrapped {
                    text.push(b'\n');
                }
                self.row.fill(BLANK);
                col = 0;
                rows += 1;
            }
            self.row[col] = c;
            col += 1;
            last_char = Some(c);
        }
        push_row(&self.row, text);
        Some((rows, col, last_char))
    }
}

impl Default for LineRenderer {
    fn default() -> Self {
        LineRenderer::new()
    }
}

/// A line of printable ASCII, SGRs and tabs that stays on one row and short of its
/// last column (where a tab would stop and the next character overwrite): its text,
/// tabs as the spaces up to the next stop when something follows them. Returns the
/// last character printed (`Some(None)` when none); `None` when the line is not such
/// a line.
fn one_row_with_colours(
    line: &[u8],
    cols: usize,
    attrs_default: &mut bool,
    text: &mut Vec<u8>,
) -> Option<Option<char>> {
    let mut col = 0;
    let mut spaces = 0;
    let mut last_char = None;
    let mut at = 0;
    while at < line.len() {
        let run = line[at..]
            .iter()
            .take_while(|b| PRINTABLE[**b as usize])
            .count();
        if run > 0 {
            col += spaces + run;
            if col >= cols {
                return None;
            }
            text.extend(std::iter::repeat_n(b' ', std::mem::take(&mut spaces)));
            text.extend_from_slice(&line[at..at + run]);
            last_char = Some(line[at + run - 1] as char);
            at += run;
            continue;
        }
        match line[at] {
            b'\t' => {
                let stop = (col + spaces) - (col + spaces) % 8 + 8;
                if stop >= cols - 1 {
                    return None;
                }
                spaces = stop - col;
                at += 1;
            }
            0x1B => match csi(&line[at..])? {
                (len, Csi::Sgr { reset }) => {
                    *attrs_default = reset;
                    at += len;
                }
                _ => return None,
            },
            _ => return None,
        }
    }
    Some(last_char)
}

/// A row as `vt100` writes it: blanks before a written cell are spaces, blanks at the
/// end are nothing.
fn push_row(row: &[char], text: &mut Vec<u8>) {
    let Some(last) = row.iter().rposition(|c| *c != BLANK) else {
        return;
    };
    text.reserve(last + 1);
    let mut buf = [0; 4];
    for &c in &row[..=last] {
        match c {
            BLANK => text.push(b' '),
            c if c.is_ascii() => text.push(c as u8),
            c => text.extend_from_slice(c.encode_utf8(&mut buf).as_bytes()),
        }
    }
}

const PRINTABLE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0x20;
    while b < 0x7F {
        table[b] = true;
        b += 1;
    }
    table
};

/// The control sequences a simple line may hold.
#[derive(Debug, PartialEq)]
enum Csi {
    /// Colours and text attributes; `reset`: they are back to the defaults (`ESC [ m`,
    /// `ESC [ 0 m`). Other SGRs count as not default, even those that happen to
    /// restore them.
    Sgr { reset: bool },
    /// `ESC [ n K`, n in 0..=2.
    Erase(u8),
}

/// The SGR or erase-in-line at the start of `bytes` (an ESC), and its length.
fn csi(bytes: &[u8]) -> Option<(usize, Csi)> {
    if bytes.get(1) != Some(&b'[') {
        return None;
    }
    let params_len = bytes[2..]
        .iter()
        .take_while(|b| b.is_ascii_digit() || **b == b';' || **b == b':')
        .count();
    // Long parameter lists are left to the emulator.
    if params_len > 64 {
        return None;
    }
    let params = &bytes[2..2 + params_len];
    let sequence = match bytes.get(2 + params_len)? {
        b'm' => Csi::Sgr {
            reset: params.iter().all(|b| *b == b'0' || *b == b';'),
        },
        b'K' => match params {
            b"" | b"0" => Csi::Erase(0),
            b"1" => Csi::Erase(1),
            b"2" => Csi::Erase(2),
            _ => return None,
        },
        _ => return None,
    };
    Some((2 + params_len + 1, sequence))
}

/// The character at the start of `bytes` when it is valid UTF-8 and takes one cell as
/// `vt100` counts it (no C1 control, no U+FFFD, nothing wide or combining).
fn one_cell_char(bytes: &[u8]) -> Option<(char, usize)> {
    let len = match bytes[0] {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return None,
    };
    let c = std::str::from_utf8(bytes.get(..len)?)
        .ok()?
        .chars()
        .next()?;
    let plain = !('\u{80}'..'\u{a0}').contains(&c) && c != char::REPLACEMENT_CHARACTER;
    (plain && c.width() == Some(1)).then_some((c, len))
}

/// The SGR sequences in `bytes` that decide the attributes at its end: those after the
/// last reset, which is kept as `ESC [ 0 m`. Fed to the emulator in place of the lines
/// it skipped, so that it draws the next ones in the colours the job chose.
pub fn attributes_at_end(bytes: &[u8]) -> Vec<u8> {
    let mut replay = Vec::new();
    let mut at = 0;
    while let Some(found) = memchr::memchr(0x1B, &bytes[at..]) {
        let start = at + found;
        match csi(&bytes[start..]) {
            Some((len, Csi::Sgr { reset })) => {
                if reset {
                    replay.clear();
                }
                replay.extend_from_slice(&bytes[start..start + len]);
                at = start + len;
            }
            _ => at = start + 1,
        }
    }
    replay
}

/// Whether the parser is back in its ground state after `bytes`, when it was in it
/// before (`was_ground`): the last escape sequence in them is complete. Conservative:
/// false when unsure, which only keeps the slow path.
pub fn ends_in_ground(was_ground: bool, bytes: &[u8]) -> bool {
    let Some(last) = memchr::memrchr(0x1B, bytes) else {
        // No escape: the state is unchanged (an LF or a stray byte does not leave
        // a sequence; the reads are cut at newlines, not inside a character).
        return was_ground;
    };
    let rest = &bytes[last + 1..];
    // CAN and SUB abort any sequence.
    if rest.iter().any(|b| *b == 0x18 || *b == 0x1A) {
        return true;
    }
    match rest.first() {
        None => false,
        // CSI: parameters and intermediates, then a final byte; C0 controls inside
        // are executed without ending it.
        Some(b'[') => rest[1..]
            .iter()
            .find(|b| !matches!(b, 0x00..=0x3F))
            .is_some_and(|b| (0x40..=0x7E).contains(b)),
        // OSC: ended by BEL (ST would be the last ESC).
        Some(b']') => rest.contains(&0x07),
        // DCS, SOS, PM, APC: only ST ends them.
        Some(b'P' | b'X' | b'^' | b'_') => false,
        // ESC with intermediates then a final byte, or a final byte alone (ST is
        // `ESC \`).
        Some(_) => rest
            .iter()
            .find(|b| !(0x20..=0x2F).contains(*b))
            .is_some_and(|b| (0x30..=0x7E).contains(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(bytes: &[u8], cols: u16) -> (usize, String) {
        let mut text = Vec::new();
        let mut ends = VecDeque::new();
        LineRenderer::new().render_run(bytes, 0, cols, 100, &mut true, &mut text, &mut ends);
        (ends.len(), String::from_utf8(text).unwrap())
    }

    #[test]
    fn plain_and_edited_lines_render_as_their_rows_would() {
        assert_eq!(render(b"one\r\ntwo\r\n", 10), (2, "\none\ntwo".into()));
        assert_eq!(
            render(b"\x1b[31mred\x1b[0m 50%\r100%\x1b[K\r\n", 20),
            (1, "\n100%".into())
        );
        // `\r` goes back to the start of the row, not of the line.
        assert_eq!(render(b"abcdefgh\rX\r\n", 5), (1, "\nabcdeXgh".into()));
        assert_eq!(render(b"a\tb\r\n", 20), (1, "\na       b".into()));
        // An erase that empties the last cell unwraps the row.
        assert_eq!(render(b"abcde\x1b[2Kfg\r\n", 5), (1, "\n\nfg".into()));
        assert_eq!(render("héllo\r\n".as_bytes(), 20), (1, "\nhéllo".into()));
    }

    #[test]
    fn each_line_counts_its_rows() {
        let mut ends = VecDeque::new();
        let input = b"\r\n12345\r\n123456\r\nab\x1b[Kcdefghijk\r\n";
        let taken =
            LineRenderer::new().render_run(input, 7, 5, 100, &mut true, &mut Vec::new(), &mut ends);
        assert_eq!(taken, input.len());
        let rows: Vec<usize> = ends.iter().map(|e| e.rows).collect();
        assert_eq!(rows, [1, 1, 2, 3]);
        assert_eq!(ends[0].input, 7 + 2);
    }

    #[test]
    fn anything_else_ends_the_run() {
        assert_eq!(render(b"one\r\n\x1b[Aup\r\n", 10), (1, "\none".into()));
        assert_eq!(render(b"one\r\nno return\n", 10).0, 1);
        assert_eq!(render(b"one\r\nnot ended", 10).0, 1);
        assert_eq!(render("wide 漢\r\n".as_bytes(), 10).0, 0);
        assert_eq!(render(b"\x1b[41m\x1b[K\r\n", 10).0, 0);
        assert_eq!(render(b"\x1b]0;title\x07\r\n", 10).0, 0);
    }

    #[test]
    fn the_attributes_at_the_end_start_from_the_last_reset() {
        assert_eq!(
            attributes_at_end(b"\x1b[31ma\x1b[0m b \x1b[1mc\x1b[Kd"),
            b"\x1b[0m\x1b[1m"
        );
        assert_eq!(attributes_at_end(b"a\x1b[32mb"), b"\x1b[32m");
    }

    #[test]
    fn ground_is_known_after_complete_sequences_only() {
        assert!(ends_in_ground(true, b"plain\r\n"));
        assert!(!ends_in_ground(false, b"plain\r\n"));
        assert!(ends_in_ground(false, b"\x1b[1;2Hx\r\n"));
        assert!(!ends_in_ground(true, b"\x1b[1;2\n"));
        assert!(ends_in_ground(true, b"\x1b]0;t\x07\n"));
        assert!(!ends_in_ground(true, b"\x1b]0;t\n"));
        assert!(!ends_in_ground(true, b"\x1bP data\n"));
        assert!(ends_in_ground(false, b"\x1bP data\x1b\\\n"));
        assert!(ends_in_ground(true, b"\x1b(B\n"));
        assert!(!ends_in_ground(true, b"\x1b(\n"));
    }
}

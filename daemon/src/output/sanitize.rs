//! The streaming sanitizer (DESIGN §5): raw pipe bytes in, plain UTF-8 text out, with
//! the same result however the input is split into reads.
//!
//! The output holds no control character but `\t` and `\n`, no bidirectional
//! control or mark (`bashd_protocol::text`: they reorder what a terminal shows after
//! them), and no line or paragraph separator (U+2028, U+2029), which becomes `\n`. Escape sequences (CSI,
//! OSC, DCS and the rest) are parsed by `vte`, the parser of the Alacritty terminal, and
//! dropped, except the few that edit the current line the way progress bars use them.
//! The current line is kept as a terminal keeps its row, so `\r`, backspace and
//! `ESC [ K` overwrite it: `10%\r50%\r100%\n` becomes `100%\n`. Invalid UTF-8 becomes
//! U+FFFD, one per maximal invalid subpart, as `String::from_utf8_lossy` does.
//!
//! Plain text, the bulk of any output, never goes through `vte`: a run of printable
//! ASCII and newlines is copied as it is. Only from an ESC on is `vte` fed, until it
//! is back in its ground state.
//!
//! Over 600 lines with its unit tests, which sit at its end; the code is about 450.

use std::ops::Range;

use bashd_protocol::text::{is_bidi_control, is_c1_control, is_line_separator};

use super::store::utf8_len;

/// A line longer than this is handed on in pieces, so one endless line cannot grow
/// memory; a `\r` in such a line rewinds only to the start of the piece not yet handed
/// on.
pub const LINE_CAP: usize = 64 * 1024;

const REPLACEMENT: char = char::REPLACEMENT_CHARACTER;

/// Bytes the fast path copies as they are while the cursor is at the end of the line.
const PLAIN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0x20;
    while b < 0x7F {
        table[b] = true;
        b += 1;
    }
    table[b'\t' as usize] = true;
    table[b'\n' as usize] = true;
    table
};

#[derive(Default)]
pub struct Sanitizer {
    screen: Screen,
    vte: vte::Parser,
    /// `vte` is inside an escape sequence: feed it until it is back in ground state.
    in_escape: bool,
    /// The first bytes of a code point cut off by the end of the last read.
    carry: Vec<u8>,
}

impl Sanitizer {
    pub fn new() -> Sanitizer {
        Sanitizer::default()
    }

    /// Sanitizes `input` and hands every finished piece of text to `sink`. Text of the
    /// current line is held back until its newline (or until it passes [`LINE_CAP`]),
    /// since a later `\r` may still overwrite it.
    pub fn feed(&mut self, mut input: &[u8], sink: impl FnMut(&[u8])) {
        let input_len = input.len();
        if !self.carry.is_empty() {
            let used = self.finish_carried_code_point(input);
            input = &input[used..];
        }
        while !input.is_empty() {
            let used = if self.in_escape {
                self.feed_vte(input)
            } else {
                self.feed_ground(input)
            };
            input = &input[used..];
        }
        self.screen.hand_on(sink, false);
        self.screen.release_if_quiet(input_len);
    }

    /// Ends the stream: an incomplete code point becomes U+FFFD, an unfinished escape
    /// sequence is dropped, and the last line is handed on without a newline.
    pub fn finish(&mut self, sink: impl FnMut(&[u8])) {
        if !self.carry.is_empty() {
            self.carry.clear();
            self.screen.put_char(REPLACEMENT);
        }
        self.in_escape = false;
        self.vte = vte::Parser::new();
        self.screen.hand_on(sink, true);
        self.screen.small_reads = QUIET_READS;
        self.screen.release_if_quiet(0);
    }

    /// The current line, not handed on yet: shown in snapshots of a running job.
    pub fn pending(&self) -> &[u8] {
        self.screen.pending()
    }

    /// Ground state: plain text, controls and UTF-8. Returns the bytes used.
    fn feed_ground(&mut self, input: &[u8]) -> usize {
        if self.screen.cursor_at_end() {
            let plain = plain_prefix(input);
            if plain > 0 {
                self.screen.append_plain(&input[..plain]);
                return plain;
            }
        }
        match input[0] {
            0x1B => {
                self.in_escape = true;
                0
            }
            0x80.. => self.feed_utf8(input),
            b => {
                self.screen.ascii(b);
                1
            }
        }
    }

    /// A run of non-ASCII bytes: valid code points are written, invalid ones become
    /// U+FFFD, an incomplete one at the end of the read waits for the next.
    fn feed_utf8(&mut self, input: &[u8]) -> usize {
        let end = input.iter().position(|&b| b < 0x80).unwrap_or(input.len());
        let run = &input[..end];
        match std::str::from_utf8(run) {
            Ok(text) => {
                self.screen.put_str(text);
                end
            }
            Err(e) => {
                let valid = e.valid_up_to();
                if let Ok(text) = std::str::from_utf8(&run[..valid]) {
                    self.screen.put_str(text);
                }
                match e.error_len() {
                    Some(len) => {
                        self.screen.put_char(REPLACEMENT);
                        valid + len
                    }
                    // Cut off by an ASCII byte: it will never be completed.
                    None if end < input.len() => {
                        self.screen.put_char(REPLACEMENT);
                        end
                    }
                    None => {
                        self.carry.extend_from_slice(&run[valid..]);
                        end
                    }
                }
            }
        }
    }

    /// Completes the code point carried over from the last read with the first bytes
    /// of this one. Returns the bytes of `input` used.
    fn finish_carried_code_point(&mut self, input: &[u8]) -> usize {
        let had = self.carry.len();
        let take = input.len().min(4 - had);
        let mut buf = [0u8; 4];
        buf[..had].copy_from_slice(&self.carry);
        buf[had..had + take].copy_from_slice(&input[..take]);
        let bytes = &buf[..had + take];
        let (first, len) = match std::str::from_utf8(bytes) {
            Ok(text) => first_char(text),
            Err(e) if e.valid_up_to() > 0 => first_char(&String::from_utf8_lossy(bytes)),
            Err(e) => match e.error_len() {
                Some(len) => (REPLACEMENT, len),
                None => {
                    // Still incomplete: the read was shorter than the code point.
                    self.carry.extend_from_slice(&input[..take]);
                    return take;
                }
            },
        };
        self.carry.clear();
        self.screen.put_char(first);
        len.saturating_sub(had)
    }

    /// Inside an escape sequence: feeds `vte` a run of ASCII bytes holding no ESC but
    /// its first, or a single byte of any other kind, so that when `vte` reports it is
    /// back in ground state it holds no partial code point and the rest of the run is
    /// plain text. Returns the bytes used.
    fn feed_vte(&mut self, input: &[u8]) -> usize {
        let len = if input[0] >= 0x80 {
            1
        } else {
            1 + input[1..]
                .iter()
                .position(|&b| b >= 0x80 || b == 0x1B)
                .unwrap_or(input.len() - 1)
        };
        let mut performer = Performer {
            screen: &mut self.screen,
            in_ground: false,
        };
        self.vte.advance(&mut performer, &input[..len]);
        if performer.in_ground {
            self.in_escape = false;
        }
        len
    }
}

/// How many bytes at the start of `input` are [`PLAIN`]: eight at a time, since this is
/// where nearly every byte of a big output goes.
fn plain_prefix(input: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Per byte, the high bit set when the byte (below 0x80) equals `b`.
    let equals = |low7: u64, b: u8| {
        let diff = low7 ^ (ONES * u64::from(b));
        !((diff + ONES * 0x7F) | diff) & HIGH
    };
    let mut at = 0;
    for word in input.chunks_exact(8) {
        let w = u64::from_le_bytes(word.try_into().expect("chunks of 8"));
        let low7 = w & (ONES * 0x7F);
        let printable = ((low7 + ONES * 0x60) & HIGH) & !equals(low7, 0x7F);
        let plain = (printable | equals(low7, b'\t') | equals(low7, b'\n')) & !(w & HIGH);
        if plain != HIGH {
            return at + ((!plain & HIGH).trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + input[at..]
        .iter()
        .position(|&b| !PLAIN[b as usize])
        .unwrap_or(input.len() - at)
}

fn first_char(text: &str) -> (char, usize) {
    let c = text.chars().next().unwrap_or(REPLACEMENT);
    (c, c.len_utf8())
}

/// The text so far, with the current line kept as a terminal row: a cursor in it, so
/// that `\r` and friends can overwrite. `out[..line_start]` is finished text not handed
/// on yet; `out[line_start..]` is the current line. `out` only ever holds whole code
/// points.
#[derive(Default)]
struct Screen {
    out: Vec<u8>,
    line_start: usize,
    cursor: usize,
    /// Reads in a row smaller than [`LINE_CAP`].
    small_reads: u8,
}

/// Small reads in a row after which the line buffer is given back.
const QUIET_READS: u8 = 16;

impl Screen {
    fn cursor_at_end(&self) -> bool {
        self.cursor == self.out.len()
    }

    fn pending(&self) -> &[u8] {
        &self.out[self.line_start..]
    }

    /// Printable ASCII, tabs and newlines, written at the end of the line.
    fn append_plain(&mut self, run: &[u8]) {
        self.out.extend_from_slice(run);
        if let Some(i) = memchr::memrchr(b'\n', run) {
            self.line_start = self.out.len() - run.len() + i + 1;
        }
        self.cursor = self.out.len();
    }

    /// One ASCII byte that is not an ESC.
    fn ascii(&mut self, b: u8) {
        match b {
            b'\n' => self.newline(),
            b'\r' => self.cursor = self.line_start,
            0x08 => self.backspace(),
            b'\t' | 0x20..=0x7E => self.put_char(b as char),
            // Other C0 controls and DEL show nothing.
            _ => {}
        }
    }

    fn put_str(&mut self, text: &str) {
        if self.cursor_at_end() && !has_special_char(text) {
            self.out.extend_from_slice(text.as_bytes());
            self.cursor = self.out.len();
        } else {
            text.chars().for_each(|c| self.put_char(c));
        }
    }

    /// Writes a printable character at the cursor, over what is there.
    fn put_char(&mut self, c: char) {
        if is_c1_control(c) || is_bidi_control(c) {
            return;
        }
        if is_line_separator(c) {
            return self.newline();
        }
        let mut buf = [0u8; 4];
        let bytes = c.encode_utf8(&mut buf).as_bytes();
        if self.cursor_at_end() {
            self.out.extend_from_slice(bytes);
        } else {
            let old = utf8_len(self.out[self.cursor]);
            let end = (self.cursor + old).min(self.out.len());
            if end - self.cursor == bytes.len() {
                // The common case, ASCII over ASCII: no need to move the rest of the line.
                self.out[self.cursor..end].copy_from_slice(bytes);
            } else {
                self.out.splice(self.cursor..end, bytes.iter().copied());
            }
        }
        self.cursor += bytes.len();
    }

    fn newline(&mut self) {
        self.out.push(b'\n');
        self.line_start = self.out.len();
        self.cursor = self.out.len();
    }

    fn backspace(&mut self) {
        if self.cursor > self.line_start {
            self.cursor -= 1;
            while self.cursor > self.line_start && self.out[self.cursor] & 0xC0 == 0x80 {
                self.cursor -= 1;
            }
        }
    }

    /// `ESC [ K` and `ESC [ 2 K`; `ESC [ 1 K` (erase to the left) is left alone, as the
    /// cells it blanks would show as spaces.
    fn erase_in_line(&mut self, mode: u16) {
        match mode {
            0 => self.out.truncate(self.cursor),
            2 => {
                self.out.truncate(self.line_start);
                self.cursor = self.line_start;
            }
            _ => {}
        }
    }

    /// Hands on everything finished; the current line too when it passed [`LINE_CAP`]
    /// or when `all` (the end of the stream).
    fn hand_on(&mut self, mut sink: impl FnMut(&[u8]), all: bool) {
        let line_len = self.out.len() - self.line_start;
        let upto: Range<usize> = if all || line_len > LINE_CAP {
            0..self.out.len()
        } else {
            0..self.line_start
        };
        if upto.is_empty() {
            return;
        }
        sink(&self.out[upto.clone()]);
        self.out.drain(upto.clone());
        self.line_start -= upto.end.min(self.line_start);
        self.cursor = self.cursor.saturating_sub(upto.end);
    }

    /// Gives back what a loud stretch grew the line buffer to, once reads have been
    /// small for a while: a loud job keeps its buffer (regrowing it on every read cost
    /// a page fault per 4 KiB, and a loud job's reads are not all large), a quiet one
    /// holds little.
    fn release_if_quiet(&mut self, input_len: usize) {
        if input_len >= LINE_CAP {
            self.small_reads = 0;
            return;
        }
        self.small_reads = self.small_reads.saturating_add(1);
        if self.small_reads >= QUIET_READS && self.out.capacity() > 4 * LINE_CAP {
            self.out.shrink_to(LINE_CAP);
        }
    }
}

/// Whether `text` holds a character [`Screen::put_char`] drops or turns into a
/// newline. C1 controls are encoded as C2 80 ..= C2 9F, U+061C as D8 9C; the other
/// bidirectional controls as E2 80 8E ..= E2 80 8F, E2 80 AA ..= E2 80 AE and E2 81 A6
/// ..= E2 81 A9; the line and paragraph separators as E2 80 A8 ..= E2 80 A9.
fn has_special_char(text: &str) -> bool {
    text.as_bytes().windows(3).any(|w| {
        (w[0] == 0xE2 && w[1] == 0x80 && matches!(w[2], 0x8E..=0x8F | 0xA8..=0xAE))
            || (w[0] == 0xE2 && w[1] == 0x81 && (0xA6..=0xA9).contains(&w[2]))
    }) || text
        .as_bytes()
        .windows(2)
        .any(|w| (w[0] == 0xC2 && (0x80..=0x9F).contains(&w[1])) || (w[0] == 0xD8 && w[1] == 0x9C))
}

/// What `vte` drives while an escape sequence is being read.
struct Performer<'a> {
    screen: &'a mut Screen,
    /// Set on every action that leaves `vte` in its ground state.
    in_ground: bool,
}

impl vte::Perform for Performer<'_> {
    fn print(&mut self, c: char) {
        // vte prints DEL; a terminal shows nothing for it.
        if c != '\u{7F}' {
            self.screen.put_char(c);
        }
        self.in_ground = true;
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            0x18 | 0x1A => self.in_ground = true,
            0x00..=0x7F => self.screen.ascii(byte),
            _ => {}
        }
    }

    fn csi_dispatch(
        &mut self,
        params: &vte::Params,
        intermediates: &[u8],
        ignore: bool,
        action: char,
    ) {
        self.in_ground = true;
        if ignore || !intermediates.is_empty() {
            return;
        }
        let first = params
            .iter()
            .next()
            .and_then(|p| p.first().copied())
            .unwrap_or(0);
        match action {
            'K' => self.screen.erase_in_line(first),
            // Cursor to column 1: the way some progress bars return to the line start.
            'G' if first <= 1 => self.screen.cursor = self.screen.line_start,
            _ => {}
        }
    }

    fn esc_dispatch(&mut self, _intermediates: &[u8], _ignore: bool, _byte: u8) {
        self.in_ground = true;
    }

    fn osc_dispatch(&mut self, _params: &[&[u8]], bell_terminated: bool) {
        // Ended by ESC, the parser still waits for the `\` of the string terminator.
        if bell_terminated {
            self.in_ground = true;
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sanitize_in(chunks: &[&[u8]]) -> String {
        let mut s = Sanitizer::new();
        let mut out = Vec::new();
        for chunk in chunks {
            s.feed(chunk, |b| out.extend_from_slice(b));
        }
        s.finish(|b| out.extend_from_slice(b));
        String::from_utf8(out).expect("sanitized output is UTF-8")
    }

    fn sanitize(input: &[u8]) -> String {
        sanitize_in(&[input])
    }

    #[test]
    fn plain_text_is_unchanged() {
        assert_eq!(
            sanitize(b"hello\n\tworld\nno newline"),
            "hello\n\tworld\nno newline"
        );
        assert_eq!(sanitize("grüße, 世界 🦀\n".as_bytes()), "grüße, 世界 🦀\n");
    }

    /// Issue 30: a bidirectional control would reorder what a person's terminal shows
    /// (`\u{202e}` turns `exe.txt` into `txt.exe`); right-to-left text and its marks
    /// stay, cut or whole, in the fast path and after an escape.
    #[test]
    fn bidi_controls_are_dropped_and_right_to_left_text_stays() {
        let trojan = "ok \u{202e}txt.exe\u{202c} \u{2066}x\u{2069}\n";
        assert_eq!(sanitize(trojan.as_bytes()), "ok txt.exe x\n");
        let bytes = trojan.as_bytes();
        for cut in 1..bytes.len() {
            assert_eq!(
                sanitize_in(&[&bytes[..cut], &bytes[cut..]]),
                "ok txt.exe x\n"
            );
        }
        assert_eq!(
            sanitize("\u{1b}[1m\u{202b}a\u{1b}[0m\u{202a}b\n".as_bytes()),
            "ab\n"
        );
        let hebrew = "שלום עולם\n";
        assert_eq!(sanitize(hebrew.as_bytes()), hebrew);
    }

    /// Issue 42: the bidi marks RLM, LRM and ALM go as the other bidi controls do, and
    /// a line or paragraph separator becomes `\n`, so what a viewer shows as two lines
    /// is two lines to bashd's count too; whole or cut between reads, in the fast path
    /// and after an escape.
    #[test]
    fn bidi_marks_go_and_line_separators_become_newlines() {
        let text = "a.txt\u{200f}.exe \u{61c}x\u{200e}y\nls\u{2028}rm -rf\u{2029}end\n";
        let want = "a.txt.exe xy\nls\nrm -rf\nend\n";
        assert_eq!(sanitize(text.as_bytes()), want);
        let bytes = text.as_bytes();
        for cut in 1..bytes.len() {
            assert_eq!(sanitize_in(&[&bytes[..cut], &bytes[cut..]]), want);
        }
        assert_eq!(
            sanitize("\u{1b}[1mx\u{200f}\u{2028}y\u{1b}[0m\n".as_bytes()),
            "x\ny\n"
        );
        assert_eq!(sanitize("é\u{85}\u{9b}2Jz\n".as_bytes()), "é2Jz\n");
    }

    #[test]
    fn carriage_returns_overwrite_the_line() {
        assert_eq!(sanitize(b"10%\r50%\r100%\n"), "100%\n");
        assert_eq!(sanitize(b"abcdef\rXY\n"), "XYcdef\n");
        assert_eq!(sanitize(b"a\r\nb\r\n"), "a\nb\n");
        assert_eq!(sanitize(b"done\r"), "done");
        assert_eq!(sanitize("ü\rx\n".as_bytes()), "x\n");
    }

    #[test]
    fn backspace_overstrikes_as_man_pages_use_it() {
        assert_eq!(sanitize(b"B\x08Bo\x08ol\x08ld\x08d\n"), "Bold\n");
        assert_eq!(sanitize(b"\x08\x08x\n"), "x\n");
    }

    #[test]
    fn escape_sequences_are_stripped() {
        assert_eq!(sanitize(b"\x1b[1;31mred\x1b[0m plain\n"), "red plain\n");
        assert_eq!(sanitize(b"\x1b]0;title\x07text\n"), "text\n");
        assert_eq!(
            sanitize(b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n"),
            "link\n"
        );
        assert_eq!(
            sanitize(b"\x1b(Bcharset \x1b7saved\x1b8\n"),
            "charset saved\n"
        );
        assert_eq!(sanitize(b"\x1bP1$r0m\x1b\\dcs gone\n"), "dcs gone\n");
        assert_eq!(
            sanitize(b"\x1b[?25lhidden cursor\x1b[?25h\n"),
            "hidden cursor\n"
        );
    }

    #[test]
    fn progress_bars_collapse_to_their_last_state() {
        let bar = b"\r\x1b[K[==  ] 50%\r\x1b[K[====] 100%\n";
        assert_eq!(sanitize(bar), "[====] 100%\n");
        assert_eq!(sanitize(b"long text\x1b[2Kshort\n"), "short\n");
        assert_eq!(sanitize(b"abc\x1b[Gx\n"), "xbc\n");
    }

    #[test]
    fn controls_other_than_tab_and_newline_are_dropped() {
        assert_eq!(sanitize(b"a\x00b\x07c\x0bd\x0ce\x7ff\n"), "abcdef\n");
        // C1 controls, encoded as UTF-8, are dropped too.
        assert_eq!(sanitize("x\u{85}y\u{9b}z\n".as_bytes()), "xyz\n");
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(sanitize(b"a\xffb\n"), "a\u{FFFD}b\n");
        assert_eq!(sanitize(b"\xe2\x28\xa1\n"), "\u{FFFD}(\u{FFFD}\n");
        assert_eq!(sanitize(b"cut \xf0\x9f"), "cut \u{FFFD}");
        assert_eq!(
            sanitize(b"\xf0\x9f\x98A\n"),
            String::from_utf8_lossy(b"\xf0\x9f\x98A\n")
        );
    }

    #[test]
    fn sequences_and_code_points_split_between_reads() {
        let crab = "🦀".as_bytes();
        assert_eq!(sanitize_in(&[&crab[..1], &crab[1..3], &crab[3..]]), "🦀");
        assert_eq!(
            sanitize_in(&[b"\x1b", b"[3", b"1mred\x1b[", b"0m\n"]),
            "red\n"
        );
        assert_eq!(
            sanitize_in(&[b"\x1b]0;ti", b"tle\x1b", b"\\after\n"]),
            "after\n"
        );
        assert_eq!(sanitize_in(&[b"10%\r", b"100%", b"\n"]), "100%\n");
    }

    #[test]
    fn an_endless_line_is_handed_on_in_pieces() {
        let mut s = Sanitizer::new();
        let mut handed = 0;
        for _ in 0..100 {
            s.feed(&[b'x'; 4096], |b| handed += b.len());
        }
        assert!(
            handed >= 400 * 1024 - LINE_CAP - 4096,
            "only {handed} bytes handed on"
        );
        assert!(s.pending().len() <= LINE_CAP);
    }

    /// Bytes that exercise every path: text, controls, escapes, UTF-8 good and bad.
    pub fn interesting_bytes() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"\x1b[31m".to_vec()),
            Just(b"\x1b]0;t\x07".to_vec()),
            Just(b"\x1b]8;;u\x1b\\".to_vec()),
            Just(b"\x1bP1$r\x1b\\".to_vec()),
            Just(b"\x1b[K".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"\x08".to_vec()),
            Just("é🦀".as_bytes().to_vec()),
            Just(b"\xf0\x9f".to_vec()),
            Just(b"\xc2\x85".to_vec()),
            Just("\u{202e}".as_bytes().to_vec()),
            Just("\u{2068}".as_bytes().to_vec()),
            Just("\u{200f}".as_bytes().to_vec()),
            Just("\u{61c}".as_bytes().to_vec()),
            Just("\u{2028}".as_bytes().to_vec()),
            "[a-z ]{0,12}".prop_map(String::into_bytes),
            proptest::collection::vec(any::<u8>(), 0..8),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #[test]
        fn the_word_scan_agrees_with_the_table(input in proptest::collection::vec(any::<u8>(), 0..40), plain in "[ -~\t\n]{0,40}") {
            let input = [plain.as_bytes(), &input].concat();
            let by_table = input.iter().position(|&b| !PLAIN[b as usize]).unwrap_or(input.len());
            prop_assert_eq!(plain_prefix(&input), by_table);
        }

        #[test]
        fn any_split_gives_the_same_text(
            input in interesting_bytes(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let whole = sanitize(&input);
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
            at.sort_unstable();
            let mut chunks = Vec::new();
            let mut start = 0;
            for end in at {
                chunks.push(&input[start..end]);
                start = end;
            }
            chunks.push(&input[start..]);
            prop_assert_eq!(sanitize_in(&chunks), whole);
        }

        #[test]
        fn output_is_text_without_controls(input in interesting_bytes()) {
            let text = sanitize(&input);
            prop_assert!(text.chars().all(|c| c == '\n' || c == '\t' || !c.is_control()), "{text:?}");
            prop_assert!(!text.chars().any(is_bidi_control), "{text:?}");
            prop_assert!(!text.chars().any(is_line_separator), "{text:?}");
        }

        #[test]
        fn sanitized_text_is_a_fixed_point(input in interesting_bytes()) {
            let once = sanitize(&input);
            prop_assert_eq!(sanitize(once.as_bytes()), once.clone());
        }
    }
}

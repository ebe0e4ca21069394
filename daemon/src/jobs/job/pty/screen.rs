//! The screen of a terminal job, rendered by a terminal emulator (the `vt100` crate)
//! from everything the job writes to its terminal. Owned by the job's supervisor,
//! which feeds it the bytes read from the master.
//!
//! Lines that scroll off the top of the primary screen come back from [`Screen::feed`]
//! as plain text, without escapes: they are the job's stdout, for the output store,
//! pages, `follow` and `--grep`. What is still on the screen when the job ends is
//! handed over by [`Screen::finish`]. The alternate screen of a full-screen program
//! (vim, less, top) is never written to stdout: it is shown by `bashc screen`.
//!
//! Lines printed one after another at the bottom of the screen (a build log) take a
//! fast path, `lines.rs`: a run of them is rendered there, and the emulator is given
//! only its last screenful, which is all that stays visible, when the run ends or the
//! screen is looked at. The text and the screen are the same as the emulator's alone
//! (a test compares them on random input).
//!
//! Over 600 lines with its unit tests, which sit at its end; the code is under 500.

use std::collections::VecDeque;

use bashd_protocol::{JobId, JobState, PtySize, ScreenInfo};
use vt100::capture::{BasicFormattedCaptureState, RowContents, basic_formatted_to_plain};

use super::lines::{self, LineEnd, LineRenderer};

/// The emulator of one job's terminal.
pub struct Screen {
    parser: vt100::Parser<Collect>,
    /// The program moved the cursor itself or used the alternate screen.
    drawn: bool,
    /// An escape sequence that a read cut, kept to look for cursor addressing.
    tail: Vec<u8>,
    /// The emulator's parser is outside any escape sequence (as far as is known).
    ground: bool,
    /// The fast path for runs of plain lines; off in the tests that compare with the
    /// emulator alone.
    line_mode: bool,
    renderer: LineRenderer,
    /// A run of the fast path in progress.
    run: Option<Box<Run>>,
    /// Lines written by the fast path, not the emulator.
    fast_lines: u64,
}

/// A line longer than this, or an unfinished line that grows past it, ends a run (the
/// emulator takes it). It bounds what a run holds: a screenful of such lines at most,
/// as written and rendered, about 1 MiB at 40 rows.
const LONGEST_LINE: usize = 16 * 1024;

/// A run of the fast path in progress: its last lines, which the emulator has not
/// been given yet.
struct Run {
    /// Rows of what the screen held before the run that its lines have pushed off:
    /// the emulator scrolled them, and `held` is to be drawn in the blank rows left
    /// at the bottom. At most the rows above the cursor.
    scrolled: usize,
    /// The attributes the run's lines leave are the default ones.
    attrs_default: bool,
    /// The run's last lines as written: the fewest that fill the rows above the
    /// cursor, once there are enough (what is still on the screen).
    held: Vec<u8>,
    /// The rows they take.
    held_rows: usize,
    /// Those lines as the fast path renders them.
    held_text: Vec<u8>,
    /// Where each held line ends, in `held` and `held_text`.
    held_ends: VecDeque<LineEnd>,
    /// The start of a line that the last read cut.
    partial: Vec<u8>,
    /// The rows above the cursor that `partial` takes (it wraps), counted in
    /// `scrolled` already.
    partial_rows: usize,
    /// The attributes and the last character the lines let go of leave, which the
    /// emulator is given when the run ends.
    attributes: Vec<u8>,
    last_char: Option<char>,
}

/// What the emulator reports besides the screen: the lines scrolled off, the title.
struct Collect {
    scrolled: Vec<u8>,
    /// A line scrolled off since the output was last taken, whose newline is owed.
    any_scrolled: bool,
    capture: BasicFormattedCaptureState,
    title: String,
}

impl vt100::Callbacks for Collect {
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.title = String::from_utf8_lossy(title).into_owned();
    }

    fn on_scroll(&mut self, row: RowContents<'_>, alternate_screen: bool) {
        if alternate_screen {
            return;
        }
        let mut formatted = String::new();
        // The capture state writes the newline of the row before (unless that row
        // wrapped into this one), so a long line stays one line of the output.
        let _ = row.write_formatted_basic(&mut formatted, &mut self.capture);
        for piece in basic_formatted_to_plain(&formatted) {
            self.scrolled.extend_from_slice(piece.as_bytes());
        }
        self.any_scrolled = true;
    }
}

impl Screen {
    pub fn new(size: PtySize) -> Screen {
        let rows = std::num::NonZeroU16::new(size.rows.max(1)).expect("at least one row");
        let cols = std::num::NonZeroU16::new(size.cols.max(1)).expect("at least one column");
        let collect = Collect {
            scrolled: Vec::new(),
            any_scrolled: false,
            capture: BasicFormattedCaptureState::new(),
            title: String::new(),
        };
        Screen {
            // No scrollback: a line that leaves the screen is reported, then dropped.
            parser: vt100::Parser::new_with_callbacks(rows, cols, 0, collect),
            drawn: false,
            tail: Vec::new(),
            ground: true,
            line_mode: true,
            renderer: LineRenderer::new(),
            run: None,
            fast_lines: 0,
        }
    }

    /// A screen that feeds every byte to the emulator, without the fast path: the
    /// benchmark's figure to compare with.
    pub fn emulator_only(size: PtySize) -> Screen {
        let mut screen = Screen::new(size);
        screen.line_mode = false;
        screen
    }

    /// Takes what the job wrote; returns the text of the lines it pushed off the
    /// primary screen, without escapes.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut rest = bytes;
        while !rest.is_empty() {
            if self.run.is_none() && (self.drawn || !self.line_mode) {
                // A program that draws never prints runs again: all of it at once.
                self.feed_emulator(rest);
                break;
            }
            if self.run.is_none() {
                let Some(attrs_default) = self.run_start() else {
                    // Up to the next line that could start a run: the next newline.
                    let end = memchr::memchr(b'\n', rest).map_or(rest.len(), |at| at + 1);
                    self.feed_emulator(&rest[..end]);
                    rest = &rest[end..];
                    continue;
                };
                self.run = Some(Box::new(Run {
                    scrolled: 0,
                    attrs_default,
                    held: Vec::new(),
                    held_rows: 0,
                    held_text: Vec::new(),
                    held_ends: VecDeque::new(),
                    partial: Vec::new(),
                    partial_rows: 0,
                    attributes: Vec::new(),
                    last_char: None,
                }));
            }
            let used = self.continue_run(rest);
            rest = &rest[used..];
        }
        std::mem::take(&mut self.parser.callbacks_mut().scrolled)
    }

    /// Gives the emulator what the fast path holds, for a look at the screen; returns
    /// the text that scrolled off doing so (rows of the held lines, when they wrap).
    pub fn settle(&mut self) -> Vec<u8> {
        self.settle_run();
        std::mem::take(&mut self.parser.callbacks_mut().scrolled)
    }

    /// Hands `bytes` to the emulator.
    fn feed_emulator(&mut self, bytes: &[u8]) {
        if !self.drawn {
            self.drawn = self.addresses_cursor(bytes);
        }
        self.parser.process(bytes);
        self.ground = lines::ends_in_ground(self.ground, bytes);
        if self.parser.screen().alternate_screen() {
            self.drawn = true;
        }
    }

    /// Whether the next line written would start a run of the fast path: the job only
    /// prints (no cursor addressing, primary screen), the cursor waits at column 0 of
    /// an empty bottom row, the row above it ends its line and the parser is between
    /// sequences. Then `Some`: whether it draws with the default attributes.
    fn run_start(&self) -> Option<bool> {
        if !self.line_mode || self.drawn || !self.ground {
            return None;
        }
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        let bottom = rows.get() - 1;
        let ready = bottom > 0
            && screen.cursor_position() == (bottom, 0)
            && !screen.row_wrapped(bottom - 1)
            && (0..cols.get()).all(|col| screen.cell(bottom, col).is_none_or(is_default));
        ready.then(|| {
            screen.fgcolor() == vt100::Color::Default
                && screen.bgcolor() == vt100::Color::Default
                && !(screen.bold()
                    || screen.dim()
                    || screen.italic()
                    || screen.underline()
                    || screen.inverse())
        })
    }

    /// Takes the lines at the start of `bytes` into the run, as long as they are
    /// simple; returns the bytes used. A line that is not ends the run: the emulator
    /// is given what the run holds, then that line.
    fn continue_run(&mut self, bytes: &[u8]) -> usize {
        let Some(mut run) = self.run.take() else {
            return 0;
        };
        let joined;
        let (input, carried) = if run.partial.is_empty() {
            (bytes, 0)
        } else {
            joined = [&run.partial[..], bytes].concat();
            (&joined[..], run.partial.len())
        };
        run.partial.clear();
        let (rows, cols) = self.parser.screen().size();
        let first_new = run.held_ends.len();
        let end = self.renderer.render_run(
            input,
            run.held.len(),
            cols.get(),
            LONGEST_LINE,
            &mut run.attrs_default,
            &mut run.held_text,
            &mut run.held_ends,
        );
        run.held.extend_from_slice(&input[..end]);
        run.held_rows += run
            .held_ends
            .range(first_new..)
            .map(|e| e.rows)
            .sum::<usize>();
        if carried > 0 && end > 0 {
            // The cut line is finished, one of the held lines now.
            run.partial_rows = 0;
        }
        let above = usize::from(rows.get()) - 1;
        let after = &input[end..];
        let next_line = memchr::memchr(b'\n', after);
        let unfinished = match next_line {
            None if after.len() <= LONGEST_LINE => {
                self.renderer
                    .rows_so_far(after, cols.get(), run.attrs_default)
            }
            _ => None,
        };
        if let Some(partial_rows) = unfinished {
            // An unfinished line: the next read may finish it. Its rows above the
            // cursor push the screen up already.
            run.partial.extend_from_slice(after);
            run.partial_rows = run.partial_rows.max(partial_rows - 1);
            self.let_go(&mut run, above);
            self.run = Some(run);
            return bytes.len();
        }
        self.let_go(&mut run, above);
        self.run = Some(run);
        self.settle_run();
        let line_end = end + next_line.map_or(after.len(), |at| at + 1);
        self.feed_emulator(&input[end..line_end]);
        line_end - carried
    }

    /// Scrolls off the rows of the screen that the run's lines have pushed off, as
    /// they did: one line feed each (the held lines will be drawn in the blank rows
    /// this leaves). Then lets go of the run's first lines once the rest fill the
    /// `above` rows above the cursor: they have left the screen too.
    fn let_go(&mut self, run: &mut Run, above: usize) {
        let taken = run.held_rows + run.partial_rows;
        let pushed = taken.min(above);
        if pushed > run.scrolled {
            self.parser.process(&vec![b'\n'; pushed - run.scrolled]);
            run.scrolled = pushed;
        }
        if taken < above {
            return;
        }
        let mut gone = 0;
        while run
            .held_ends
            .get(gone)
            .is_some_and(|line| run.held_rows + run.partial_rows - line.rows >= above)
        {
            run.held_rows -= run.held_ends[gone].rows;
            gone += 1;
        }
        if gone == 0 {
            return;
        }
        let cut = run.held_ends[gone - 1];
        // Their text goes to the output, their colours and last character to the
        // emulator when the run ends.
        let attributes = lines::attributes_at_end(&run.held[..cut.input]);
        if attributes.starts_with(b"\x1b[0m") {
            run.attributes.clear();
        }
        run.attributes.extend_from_slice(&attributes);
        if let Some(c) = run
            .held_ends
            .range(..gone)
            .rev()
            .find_map(|line| line.last_char)
        {
            run.last_char = Some(c);
        }
        self.parser
            .callbacks_mut()
            .scrolled
            .extend_from_slice(&run.held_text[..cut.text]);
        run.held.drain(..cut.input);
        run.held_text.drain(..cut.text);
        run.held_ends.drain(..gone);
        for line in &mut run.held_ends {
            line.input -= cut.input;
            line.text -= cut.text;
        }
        self.fast_lines += gone as u64;
    }

    /// Ends the run: the emulator draws its held lines, from the first of the blank
    /// rows left for them, and gets its unfinished one.
    fn settle_run(&mut self) {
        if let Some(run) = self.run.take() {
            if run.scrolled > 0 {
                let (rows, _) = self.parser.screen().size();
                let first_row = usize::from(rows.get()) - 1 - run.scrolled;
                let start = format!("\x1b[{};1H", first_row + 1);
                if let Some(c) = run.last_char {
                    // What `ESC [ b` repeats: printed in the first blank row, then
                    // deleted (which leaves default cells, whatever the colours).
                    self.parser
                        .process(format!("{start}{c}\r\x1b[P").as_bytes());
                }
                self.parser.process(&run.attributes);
                self.parser.process(start.as_bytes());
            }
            self.parser.process(&run.held);
            if !run.partial.is_empty() {
                self.feed_emulator(&run.partial);
            }
        }
    }

    /// The job's terminal is closed: the text still on the primary screen, down to its
    /// last line with text, each line ended.
    pub fn finish(&mut self) -> Vec<u8> {
        self.settle_run();
        let collect = self.parser.callbacks_mut();
        let mut text = std::mem::take(&mut collect.scrolled);
        let owed_newline = std::mem::take(&mut collect.any_scrolled);
        if owed_newline {
            text.push(b'\n');
        }
        let screen = self.parser.screen();
        if screen.alternate_screen() {
            return text;
        }
        let (_, cols) = screen.size();
        let rows: Vec<String> = screen.rows(0, cols.get()).collect();
        let Some(last) = rows.iter().rposition(|row| !row.trim_end().is_empty()) else {
            return text;
        };
        for (n, row) in rows[..=last].iter().enumerate() {
            text.extend_from_slice(row.trim_end().as_bytes());
            if !screen.row_wrapped(n as u16) || n == last {
                text.push(b'\n');
            }
        }
        text
    }

    /// Whether a cursor-key press should be sent as the application mode spells it
    /// (`ESC O A`: vim, less) rather than as the normal one (`ESC [ A`).
    pub fn application_cursor(&self) -> bool {
        self.parser.screen().application_cursor()
    }

    pub fn resize(&mut self, size: PtySize) {
        self.settle_run();
        let rows = std::num::NonZeroU16::new(size.rows.max(1)).expect("at least one row");
        let cols = std::num::NonZeroU16::new(size.cols.max(1)).expect("at least one column");
        self.parser.set_size(rows, cols);
    }

    /// The line the cursor is on: a prompt, when the job waits for input.
    pub fn cursor_line(&mut self) -> String {
        self.settle_run();
        let screen = self.parser.screen();
        let (row, _) = screen.cursor_position();
        let (_, cols) = screen.size();
        screen
            .rows(0, cols.get())
            .nth(row as usize)
            .map(|line| visible(line.trim_end()))
            .unwrap_or_default()
    }

    /// The screen as `bashc screen` shows it, once [`Screen::settle`] has drawn what
    /// the fast path holds (or [`Screen::finish`] has).
    pub fn info(&self, job: JobId, state: JobState, waiting_for_input: bool) -> ScreenInfo {
        debug_assert!(self.run.is_none(), "a look at a screen not settled");
        let screen = self.parser.screen();
        let (rows, cols) = screen.size();
        let (cursor_row, cursor_col) = screen.cursor_position();
        ScreenInfo {
            job,
            cols: cols.get(),
            rows: rows.get(),
            cursor_row,
            cursor_col,
            lines: screen
                .rows(0, cols.get())
                .map(|line| visible(line.trim_end()))
                .collect(),
            alternate: screen.alternate_screen(),
            title: visible(&self.parser.callbacks().title),
            waiting_for_input,
            state,
            drawn: self.drawn,
        }
    }

    /// Whether `bytes` move the cursor to a place (CUP `ESC [ row ; col H` or `f`,
    /// VPA `d`, or a scroll region `r`): a program that draws rather than prints. A
    /// sequence cut by a read is joined with the next read's start.
    fn addresses_cursor(&mut self, bytes: &[u8]) -> bool {
        let joined;
        let bytes = if self.tail.is_empty() {
            bytes
        } else {
            // The whole read after the cut sequence: only its real end may cut one.
            joined = [&std::mem::take(&mut self.tail)[..], bytes].concat();
            &joined[..]
        };
        let mut at = 0;
        while let Some(found) = memchr::memchr(0x1b, &bytes[at..]) {
            let start = at + found;
            let rest = &bytes[start + 1..];
            if rest.first() == Some(&b'[') {
                let params = rest[1..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit() || **b == b';' || **b == b'?')
                    .count();
                match rest.get(1 + params) {
                    Some(b'H' | b'f' | b'd' | b'r') => return true,
                    None if params < 16 => self.tail = bytes[start..].to_vec(),
                    _ => {}
                }
            } else if rest.is_empty() {
                self.tail = vec![0x1b];
            }
            at = start + 1;
        }
        false
    }
}

/// A cell never written, or erased with the default attributes.
fn is_default(cell: &vt100::Cell) -> bool {
    !cell.has_contents()
        && cell.fgcolor() == vt100::Color::Default
        && cell.bgcolor() == vt100::Color::Default
        && !(cell.bold() || cell.dim() || cell.italic() || cell.underline() || cell.inverse())
}

/// A row or title as a person is shown it: the emulator keeps a bidirectional
/// control in a cell like a letter, and a title is the job's bytes; neither may
/// reorder or drive the person's terminal (issue 30).
fn visible(text: &str) -> String {
    text.chars()
        .filter(|&c| !bashd_protocol::text::is_unsafe_for_terminal(c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(cols: u16, rows: u16) -> PtySize {
        PtySize { cols, rows }
    }

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn lines_that_scroll_off_come_out_plain_and_the_rest_at_the_end() {
        let mut screen = Screen::new(size(20, 3));
        let mut out = text(screen.feed(b"\x1b[31mred\x1b[0m one\r\ntwo\r\nthree\r\nfour\r\n"));
        assert_eq!(out, "red one\ntwo");
        out.push_str(&text(screen.finish()));
        assert_eq!(out, "red one\ntwo\nthree\nfour\n");
        assert!(!screen.info(JobId(1), JobState::Running, false).drawn);
    }

    #[test]
    fn a_long_line_stays_one_line_and_a_progress_bar_leaves_its_last_state() {
        let mut screen = Screen::new(size(10, 2));
        let long = "abcdefghijklmnopqrstuvwxy";
        let mut out = text(screen.feed(format!("{long}\r\n").as_bytes()));
        for percent in [10, 50, 100] {
            out.push_str(&text(screen.feed(format!("\r{percent}%").as_bytes())));
        }
        out.push_str(&text(screen.feed(b"\r\ndone\r\n")));
        out.push_str(&text(screen.finish()));
        assert_eq!(out, format!("{long}\n100%\ndone\n"));
    }

    #[test]
    fn the_alternate_screen_is_shown_not_written() {
        let mut screen = Screen::new(size(20, 4));
        let out = screen.feed(b"before\r\n\x1b[?1049h\x1b[H\x1b[2Jvim here\x1b]2;the title\x07");
        assert_eq!(text(out), "");
        let info = screen.info(JobId(1), JobState::Running, false);
        assert!(info.alternate && info.drawn);
        assert_eq!(info.lines[0], "vim here");
        assert_eq!(info.title, "the title");
        screen.feed(b"\x1b[?1049l");
        assert_eq!(text(screen.finish()), "before\n");
    }

    #[test]
    fn cursor_addressing_cut_between_reads_is_seen() {
        let mut screen = Screen::new(size(20, 4));
        screen.feed(b"x\x1b[1");
        screen.feed(b";1Hy");
        assert!(screen.info(JobId(1), JobState::Running, false).drawn);
    }

    /// Everything the emulator shows and writes: its output, its screen. `looks`:
    /// after which reads the screen is looked at.
    fn shown(
        line_mode: bool,
        size: PtySize,
        chunks: &[Vec<u8>],
        looks: &[bool],
    ) -> (String, ScreenInfo) {
        let mut screen = Screen::new(size);
        screen.line_mode = line_mode;
        let mut out = Vec::new();
        for (n, chunk) in chunks.iter().enumerate() {
            out.extend(screen.feed(chunk));
            if looks.get(n) == Some(&true) {
                out.extend(screen.settle());
            }
        }
        out.extend(screen.settle());
        let info = screen.info(JobId(1), JobState::Running, false);
        out.extend(screen.finish());
        (text(out), info)
    }

    #[test]
    fn a_run_longer_than_the_screen_takes_the_fast_path_and_shows_the_same() {
        let mut input = b"\x1b[32mstart\x1b[0m\r\n".to_vec();
        for n in 0..500 {
            input.extend(format!("line {n} \x1b[1;31m{}\x1b[0m\r\n", "x".repeat(n % 37)).bytes());
        }
        input.extend(b"\x1b[33mstill yellow\r\n\x1b[2Kerased\r\nlast");
        let size = size(30, 5);
        let chunks = [input];
        assert_eq!(
            shown(true, size, &chunks, &[]),
            shown(false, size, &chunks, &[])
        );
        let mut screen = Screen::new(size);
        screen.feed(&chunks[0]);
        // From `line 3` on (the cursor reached the bottom row) to `still yellow`,
        // less the four lines left above the cursor; the erase under yellow ends the
        // run.
        assert_eq!(screen.fast_lines, 498 - 4);
        let (out, _) = shown(true, size, &chunks, &[]);
        assert!(out.starts_with("start\nline 0 \nline 1 x\n"), "{out}");
        assert!(
            out.ends_with("line 499 xxxxxxxxxxxxxxxxxx\nstill yellow\nerased\nlast\n"),
            "{out}"
        );
    }

    mod equivalence {
        use super::*;
        use proptest::prelude::*;

        /// Pieces of terminal output that the fast path takes.
        fn simple_piece() -> impl Strategy<Value = Vec<u8>> {
            prop_oneof![
                8 => "[a-z ]{0,30}".prop_map(String::into_bytes),
                4 => Just(b"\r\n".to_vec()),
                1 => Just(b"\r".to_vec()),
                1 => Just(b"\t".to_vec()),
                1 => Just(b"\x08".to_vec()),
                1 => Just(b"\x1b[31m".to_vec()),
                1 => Just(b"\x1b[0m".to_vec()),
                1 => Just(b"\x1b[m".to_vec()),
                1 => Just(b"\x1b[K".to_vec()),
                1 => Just(b"\x1b[1K".to_vec()),
                1 => Just(b"\x1b[2K".to_vec()),
                1 => Just("é─█".as_bytes().to_vec()),
            ]
        }

        /// Those, and now and then something that ends a run.
        fn piece() -> impl Strategy<Value = Vec<u8>> {
            prop_oneof![
                60 => simple_piece(),
                1 => Just(b"\n".to_vec()),
                1 => Just(b"\x1b[41m".to_vec()),
                1 => Just("漢".as_bytes().to_vec()),
                1 => Just(b"\xff".to_vec()),
                1 => Just(b"\x1b[A".to_vec()),
                1 => Just(b"\x1b[2J".to_vec()),
                1 => Just(b"\x1b]0;t\x07".to_vec()),
                1 => Just(b"\x1b[".to_vec()),
                1 => Just(b"\x1b".to_vec()),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(400))]
            #[test]
            fn the_fast_path_writes_and_shows_what_the_emulator_would(
                pieces in proptest::collection::vec(piece(), 0..400),
                cols in 1u16..12,
                rows in 1u16..6,
                cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
                looks in proptest::collection::vec(any::<bool>(), 6),
            ) {
                let input = pieces.concat();
                let mut at: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
                at.sort();
                let mut chunks = Vec::new();
                let mut from = 0;
                for to in at.into_iter().chain([input.len()]) {
                    chunks.push(input[from..to].to_vec());
                    from = to;
                }
                let size = size(cols, rows);
                let fast = shown(true, size, &chunks, &looks);
                prop_assert_eq!(fast, shown(false, size, &chunks, &[]));
                // And read by read, the fast path's output lags the emulator's by one
                // line at most: the rows of a line held whose top rows have scrolled
                // off (a line's text is at most 8 times its bytes, for tabs).
                let longest = input.split(|b| *b == b'\n').map(<[u8]>::len).max().unwrap_or(0);
                let (mut fast, mut alone) = (Screen::new(size), Screen::new(size));
                alone.line_mode = false;
                let (mut fast_out, mut alone_out) = (Vec::new(), Vec::new());
                for chunk in &chunks {
                    fast_out.extend(fast.feed(chunk));
                    alone_out.extend(alone.feed(chunk));
                    prop_assert!(alone_out.starts_with(&fast_out));
                    let lag = &alone_out[fast_out.len()..];
                    prop_assert!(lag.len() <= 8 * longest, "{:?}", text(lag.to_vec()));
                }
            }
        }
    }
}

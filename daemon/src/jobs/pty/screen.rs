//! The screen of a terminal job, rendered by a terminal emulator (the `vt100` crate)
//! from everything the job writes to its terminal. Owned by the job's supervisor,
//! which feeds it the bytes read from the master.
//!
//! Lines that scroll off the top of the primary screen come back from [`Screen::feed`]
//! as plain text, without escapes: they are the job's stdout, for the output store,
//! pages, `follow` and `--grep`. What is still on the screen when the job ends is
//! handed over by [`Screen::finish`]. The alternate screen of a full-screen program
//! (vim, less, top) is never written to stdout: it is shown by `bashc screen`.

use bashd_protocol::{JobId, JobState, PtySize, ScreenInfo};
use vt100::capture::{BasicFormattedCaptureState, RowContents, basic_formatted_to_plain};

/// The emulator of one job's terminal.
pub struct Screen {
    parser: vt100::Parser<Collect>,
    /// The program moved the cursor itself or used the alternate screen.
    drawn: bool,
    /// An escape sequence that a read cut, kept to look for cursor addressing.
    tail: Vec<u8>,
}

/// What the emulator reports besides the screen: the lines scrolled off, the title.
struct Collect {
    scrolled: String,
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
        self.scrolled.extend(basic_formatted_to_plain(&formatted));
        self.any_scrolled = true;
    }
}

impl Screen {
    pub fn new(size: PtySize) -> Screen {
        let rows = std::num::NonZeroU16::new(size.rows.max(1)).expect("at least one row");
        let cols = std::num::NonZeroU16::new(size.cols.max(1)).expect("at least one column");
        let collect = Collect {
            scrolled: String::new(),
            any_scrolled: false,
            capture: BasicFormattedCaptureState::new(),
            title: String::new(),
        };
        Screen {
            // No scrollback: a line that leaves the screen is reported, then dropped.
            parser: vt100::Parser::new_with_callbacks(rows, cols, 0, collect),
            drawn: false,
            tail: Vec::new(),
        }
    }

    /// Takes what the job wrote; returns the text of the lines it pushed off the
    /// primary screen, without escapes.
    pub fn feed(&mut self, bytes: &[u8]) -> String {
        if !self.drawn {
            self.drawn = self.addresses_cursor(bytes);
        }
        self.parser.process(bytes);
        if self.parser.screen().alternate_screen() {
            self.drawn = true;
        }
        std::mem::take(&mut self.parser.callbacks_mut().scrolled)
    }

    /// The job's terminal is closed: the text still on the primary screen, down to its
    /// last line with text, each line ended.
    pub fn finish(&mut self) -> String {
        let collect = self.parser.callbacks_mut();
        let mut text = std::mem::take(&mut collect.scrolled);
        let owed_newline = std::mem::take(&mut collect.any_scrolled);
        let screen = self.parser.screen();
        if screen.alternate_screen() {
            if owed_newline {
                text.push('\n');
            }
            return text;
        }
        let (_, cols) = screen.size();
        let rows: Vec<String> = screen.rows(0, cols.get()).collect();
        let Some(last) = rows.iter().rposition(|row| !row.trim_end().is_empty()) else {
            if owed_newline {
                text.push('\n');
            }
            return text;
        };
        if owed_newline {
            text.push('\n');
        }
        for (n, row) in rows[..=last].iter().enumerate() {
            text.push_str(row.trim_end());
            if !screen.row_wrapped(n as u16) || n == last {
                text.push('\n');
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
        let rows = std::num::NonZeroU16::new(size.rows.max(1)).expect("at least one row");
        let cols = std::num::NonZeroU16::new(size.cols.max(1)).expect("at least one column");
        self.parser.set_size(rows, cols);
    }

    /// The line the cursor is on: a prompt, when the job waits for input.
    pub fn cursor_line(&self) -> String {
        let screen = self.parser.screen();
        let (row, _) = screen.cursor_position();
        let (_, cols) = screen.size();
        screen
            .rows(0, cols.get())
            .nth(row as usize)
            .map(|line| line.trim_end().to_owned())
            .unwrap_or_default()
    }

    /// The screen as `bashc screen` shows it.
    pub fn info(&self, job: JobId, state: JobState, waiting_for_input: bool) -> ScreenInfo {
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
                .map(|line| line.trim_end().to_owned())
                .collect(),
            alternate: screen.alternate_screen(),
            title: self.parser.callbacks().title.clone(),
            waiting_for_input,
            state,
            drawn: self.drawn,
        }
    }

    /// Whether `bytes` move the cursor to a place (CUP `ESC [ row ; col H` or `f`,
    /// VPA `d`, or a scroll region `r`): a program that draws rather than prints. A
    /// sequence cut by a read is joined with the next read's start.
    fn addresses_cursor(&mut self, bytes: &[u8]) -> bool {
        let mut joined;
        let bytes = if self.tail.is_empty() {
            bytes
        } else {
            joined = std::mem::take(&mut self.tail);
            joined.extend_from_slice(&bytes[..bytes.len().min(32)]);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn size(cols: u16, rows: u16) -> PtySize {
        PtySize { cols, rows }
    }

    #[test]
    fn lines_that_scroll_off_come_out_plain_and_the_rest_at_the_end() {
        let mut screen = Screen::new(size(20, 3));
        let mut out = screen.feed(b"\x1b[31mred\x1b[0m one\r\ntwo\r\nthree\r\nfour\r\n");
        assert_eq!(out, "red one\ntwo");
        out.push_str(&screen.finish());
        assert_eq!(out, "red one\ntwo\nthree\nfour\n");
        assert!(!screen.info(JobId(1), JobState::Running, false).drawn);
    }

    #[test]
    fn a_long_line_stays_one_line_and_a_progress_bar_leaves_its_last_state() {
        let mut screen = Screen::new(size(10, 2));
        let long = "abcdefghijklmnopqrstuvwxy";
        let mut out = screen.feed(format!("{long}\r\n").as_bytes());
        for percent in [10, 50, 100] {
            out.push_str(&screen.feed(format!("\r{percent}%").as_bytes()));
        }
        out.push_str(&screen.feed(b"\r\ndone\r\n"));
        out.push_str(&screen.finish());
        assert_eq!(out, format!("{long}\n100%\ndone\n"));
    }

    #[test]
    fn the_alternate_screen_is_shown_not_written() {
        let mut screen = Screen::new(size(20, 4));
        let out = screen.feed(b"before\r\n\x1b[?1049h\x1b[H\x1b[2Jvim here\x1b]2;the title\x07");
        assert_eq!(out, "");
        let info = screen.info(JobId(1), JobState::Running, false);
        assert!(info.alternate && info.drawn);
        assert_eq!(info.lines[0], "vim here");
        assert_eq!(info.title, "the title");
        screen.feed(b"\x1b[?1049l");
        assert_eq!(screen.finish(), "before\n");
    }

    #[test]
    fn cursor_addressing_cut_between_reads_is_seen() {
        let mut screen = Screen::new(size(20, 4));
        screen.feed(b"x\x1b[1");
        screen.feed(b";1Hy");
        assert!(screen.info(JobId(1), JobState::Running, false).drawn);
    }
}

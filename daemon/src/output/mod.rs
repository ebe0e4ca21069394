//! The output pipeline of one job (DESIGN §5):
//!
//! ```text
//! pipe chunks -> sanitize -> count -> head + tail -> spill file -> render
//! ```
//!
//! [`StreamCapture`] runs it for one stream and is owned by the job's supervisor;
//! [`render`] makes a result of it, [`page`] reads pages of the whole stream.

mod budget;
mod grep;
mod page;
mod sanitize;
mod shown;
mod store;

use std::path::PathBuf;

use bashd_protocol::{Notice, StreamName, StreamResult};

pub use budget::{Charge, SpillLedger};
pub use grep::grep;
pub use page::{Ask, Content, OutputSource, page};
pub use shown::Shape;
pub use store::Limits;

use sanitize::Sanitizer;
use store::Store;

/// One stream of one job, from raw pipe bytes to what a result shows.
pub struct StreamCapture {
    sanitizer: Sanitizer,
    store: Store,
    finished: bool,
}

impl StreamCapture {
    pub fn new(limits: Limits, spill_path: PathBuf, spill_from_start: bool) -> StreamCapture {
        StreamCapture {
            sanitizer: Sanitizer::new(),
            store: Store::new(limits, spill_path, spill_from_start),
            finished: false,
        }
    }

    /// Charges the spill file to a disk budget, when there is one.
    pub fn with_budget(mut self, budget: Option<Charge>) -> StreamCapture {
        if let Some(budget) = budget {
            self.store.set_budget(budget);
        }
        self
    }

    pub fn push(&mut self, raw: &[u8]) {
        self.push_live(raw, |_, _| {});
    }

    /// Like [`StreamCapture::push`], and hands each piece of sanitized text the store
    /// takes to `live` too, with the line it starts on: whole lines, as they end.
    pub fn push_live(&mut self, raw: &[u8], mut live: impl FnMut(u64, &[u8])) {
        let store = &mut self.store;
        self.sanitizer.feed(raw, |text| {
            let line = store.next_line();
            store.push(text);
            live(line, text);
        });
    }

    /// The line the next text handed on starts on (or goes on), counting from 1.
    pub fn next_line(&self) -> u64 {
        self.store.next_line()
    }

    /// The line being written, not ended yet (sanitized): a prompt, when the job
    /// waits for input.
    pub fn pending_line(&self) -> &[u8] {
        self.sanitizer.pending()
    }

    /// The pipe is closed: what the sanitizer still holds is the last line.
    pub fn finish(&mut self) {
        self.finish_live(|_, _| {});
    }

    /// Like [`StreamCapture::finish`], handing the last line to `live` too.
    pub fn finish_live(&mut self, mut live: impl FnMut(u64, &[u8])) {
        if !self.finished {
            let store = &mut self.store;
            self.sanitizer.finish(|text| {
                let line = store.next_line();
                store.push(text);
                live(line, text);
            });
            self.finished = true;
        }
    }

    /// The spill file, once the stream has one.
    pub fn full_output(&self) -> Option<String> {
        let spill = self.store.spill();
        spill
            .started()
            .then(|| spill.path().to_string_lossy().into_owned())
    }

    pub fn result(&self, shape: Shape) -> StreamResult {
        let spill = self.store.spill();
        let full_output = spill
            .started()
            .then(|| spill.path().to_string_lossy().into_owned());
        shown::stream_result(&self.store, shape, full_output)
    }

    /// What a result must say about the spill file beyond its path: that it stopped at
    /// its cap, or could not be written.
    pub fn notice(&self, stream: StreamName) -> Option<Notice> {
        let spill = self.store.spill();
        let path = spill.path().to_string_lossy().into_owned();
        if let Some(error) = spill.error() {
            return Some(Notice::SpillIncomplete {
                stream,
                path,
                error: error.to_owned(),
            });
        }
        spill.capped().then(|| Notice::SpillCapped {
            stream,
            path,
            cap_bytes: self.store.limits().max_spill_bytes,
            written_bytes: spill.written(),
            total_bytes: self.store.total_bytes(),
        })
    }

    /// Lines that have ended, so far: what `bashc check` can hand on without cutting
    /// a line that is still being written.
    pub fn complete_lines(&self) -> u64 {
        // Once finished, the sanitizer holds nothing more and the last line counts.
        let open_line = !self.finished && self.store.ends_mid_line();
        self.store.total_lines() - u64::from(open_line)
    }

    /// A snapshot to page through: the spill file when there is one, else the text
    /// itself, which is then within the limits.
    pub fn source(&self) -> OutputSource {
        let spill = self.store.spill();
        let pending = self.sanitizer.pending();
        let content = if spill.started() {
            Content::File {
                path: spill.path().to_owned(),
                len: spill.written(),
                marks: spill.marks().to_vec(),
                capped: spill.capped(),
                error: spill.error().map(str::to_owned),
            }
        } else {
            let (head, _) = self.store.head();
            Content::Memory([head, pending].concat())
        };
        // A line longer than the sanitizer's cap was handed on in part already.
        let pending_line = u64::from(!pending.is_empty() && !self.store.ends_mid_line());
        let total_lines = self.store.total_lines() + pending_line;
        OutputSource {
            content,
            complete_lines: self.complete_lines(),
            total_lines,
            total_bytes: self.store.total_bytes() + pending.len() as u64,
            complete: self.finished,
        }
    }
}

/// The stream a dead daemon's job wrote to `path`, read back from its spill file, with
/// when the file was last written; `None` when it has none. Blocking.
pub fn recovered_source(
    path: &std::path::Path,
) -> std::io::Result<Option<(OutputSource, std::time::SystemTime)>> {
    let Some(scanned) = store::scan_spill_file(path)? else {
        return Ok(None);
    };
    let total_lines = scanned.newlines + u64::from(scanned.ends_mid_line);
    let source = OutputSource {
        content: Content::File {
            path: path.to_owned(),
            len: scanned.len,
            marks: scanned.marks,
            capped: false,
            error: None,
        },
        total_lines,
        complete_lines: total_lines,
        total_bytes: scanned.len,
        complete: true,
    };
    Ok(Some((source, scanned.modified)))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn capture(input: &[u8], cuts: &[usize], limits: Limits, path: PathBuf) -> StreamCapture {
        let mut capture = StreamCapture::new(limits, path, false);
        let mut start = 0;
        for &end in cuts {
            capture.push(&input[start..end]);
            start = end;
        }
        capture.push(&input[start..]);
        capture.finish();
        capture
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_result_and_the_spill_file_is_the_sanitized_whole(
            input in sanitize::tests::interesting_bytes(),
            repeat in 1usize..40,
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            // Repeated so that some inputs pass the limits and spill, some do not.
            let input = input.repeat(repeat);
            let dir = tempfile::tempdir().unwrap();
            let limits = Limits { max_lines: 20, max_bytes: 300, max_spill_bytes: 1 << 20 };
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
            at.sort_unstable();
            let whole = capture(&input, &[], limits, dir.path().join("sessions/s/whole"));
            let split = capture(&input, &at, limits, dir.path().join("sessions/s/split"));
            let shape = Shape::default();
            let (a, b) = (whole.result(shape), split.result(shape));
            prop_assert_eq!(&a.text, &b.text);
            prop_assert_eq!((a.total_lines, a.total_bytes, a.truncated), (b.total_lines, b.total_bytes, b.truncated));
            prop_assert!(a.text.len() <= 300 && a.shown_lines <= 20);

            let mut sanitizer = Sanitizer::new();
            let mut sanitized = Vec::new();
            sanitizer.feed(&input, |t| sanitized.extend_from_slice(t));
            sanitizer.finish(|t| sanitized.extend_from_slice(t));
            prop_assert_eq!(a.total_bytes, sanitized.len() as u64);
            if a.truncated {
                let file = std::fs::read(dir.path().join("sessions/s/split")).unwrap();
                prop_assert_eq!(file, sanitized);
            } else {
                prop_assert_eq!(a.text.as_bytes(), &sanitized[..]);
                prop_assert!(!dir.path().join("sessions/s/split").exists());
            }
        }
    }
}

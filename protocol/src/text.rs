//! Text that a job chose, made safe to show a person: one rule for the daemon's output
//! sanitizer and every front end's words (`bashc jobs`, MCP `bash_jobs`).
//!
//! A terminal acts on control characters (an escape sequence can set the clipboard
//! with OSC 52, retitle the window, clear the screen), and bidirectional controls
//! reorder what is shown after them, so text that reads one way runs another (Trojan
//! Source, CVE-2021-42574). Job output drops them; a job's command and description,
//! which a person reads to judge what runs, show them as visible escapes instead.

use std::borrow::Cow;

/// Whether `c` is a C1 control (U+0080 to U+009F): `U+009B` is a CSI to a terminal
/// that reads 8-bit controls.
pub fn is_c1_control(c: char) -> bool {
    ('\u{80}'..='\u{9F}').contains(&c)
}

/// Whether `c` is a bidirectional control: the embeddings and overrides U+202A to
/// U+202E and the isolates U+2066 to U+2069, the characters Trojan Source reorders code
/// with (and rustc's lint names), and the marks U+200E, U+200F and U+061C (issue 42):
/// a mark opens no stretch, but it still moves the neutral characters beside it
/// (`a.txt\u{200f}.exe` can read as something else), and right-to-left text shows in
/// its own order without one.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}'
    )
}

/// Whether `c` is U+2028 LINE SEPARATOR or U+2029 PARAGRAPH SEPARATOR: a viewer may
/// break the line there, or not, so one line to bashd's count can show as two to a
/// person or a model (issue 42). Job output turns each into `\n`.
pub fn is_line_separator(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}')
}

/// Whether a person's terminal may act on `c` rather than show it: a C0 or C1
/// control, DEL, a bidirectional control, or a line or paragraph separator. Tab and
/// newline are text.
pub fn is_unsafe_for_terminal(c: char) -> bool {
    (c.is_control() && c != '\t' && c != '\n') || is_bidi_control(c) || is_line_separator(c)
}

/// `text` as a person may be shown it: each character a terminal would act on (an
/// escape sequence's ESC, a C0 or C1 control, DEL, a bidirectional control) becomes
/// a visible escape (`\x1b`, `\u{202e}`), as bash's `$'...'` and Rust spell it, so the
/// person sees that it is there and nothing acts on it. Tab and newline stay.
pub fn for_person(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe_for_terminal) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !is_unsafe_for_terminal(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 42: the bidi marks, the line and paragraph separators and the C1
    /// controls NEL (U+0085) and CSI (U+009B) show as escapes in a command.
    #[test]
    fn marks_separators_and_c1_controls_show_as_escapes() {
        assert_eq!(
            for_person("a\u{200f}b\u{61c}c\u{200e}d"),
            "a\\u{200f}b\\u{61c}c\\u{200e}d"
        );
        assert_eq!(
            for_person("ls\u{2028}rm -rf x\u{2029}"),
            "ls\\u{2028}rm -rf x\\u{2029}"
        );
        assert_eq!(for_person("a\u{85}b\u{9b}2J"), "a\\u{85}b\\u{9b}2J");
        let once = for_person("x\u{2028}\u{9b}y").into_owned();
        assert_eq!(for_person(&once), once, "escaping twice changes nothing");
    }

    /// Issue 30: what a job's command may hold reaches no terminal as a control.
    #[test]
    fn escapes_controls_and_bidi_show_as_text() {
        let osc52 = "printf ok\u{1b}]52;c;ZWNobyBwd25lZA==\u{7}";
        assert_eq!(
            for_person(osc52),
            "printf ok\\x1b]52;c;ZWNobyBwd25lZA==\\x07"
        );
        assert_eq!(
            for_person("a\u{1b}[2Jb\u{9b}c\u{7f}"),
            "a\\x1b[2Jb\\u{9b}c\\x7f"
        );
        assert_eq!(
            for_person("rm -rf /tmp/x \u{202e}gnp.txt"),
            "rm -rf /tmp/x \\u{202e}gnp.txt"
        );
        for c in ['\u{202a}', '\u{202c}', '\u{2066}', '\u{2069}'] {
            assert!(!for_person(&format!("x{c}y")).contains(c));
        }
        // Plain text, tabs, newlines and right-to-left words stay.
        for plain in ["cargo test\t--all\nmake", "echo שלום עולם", "ls é ✓"] {
            assert!(matches!(for_person(plain), Cow::Borrowed(_)), "{plain:?}");
        }
        for shown in [osc52, "\u{1b}[2J", "x\u{202e}y\u{2067}z"] {
            assert!(!for_person(shown).chars().any(is_unsafe_for_terminal));
        }
    }
}

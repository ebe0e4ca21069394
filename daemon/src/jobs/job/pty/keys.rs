//! The keys `send --keys` names, as `tmux send-keys` spells them, and the bytes an
//! xterm sends for each.

/// The bytes for `words`: each a key name (`Enter`, `C-c`, `M-x`, `Up`, `F5`) or else
/// text sent as it is; with `literal`, every word is text. `application_cursor`: the
/// program asked for the cursor keys' application mode (vim, less).
pub fn encode(words: &[String], literal: bool, application_cursor: bool) -> Vec<u8> {
    let mut bytes = Vec::new();
    for word in words {
        match (!literal).then(|| key(word, application_cursor)).flatten() {
            Some(key) => bytes.extend_from_slice(&key),
            None => bytes.extend_from_slice(word.as_bytes()),
        }
    }
    bytes
}

/// The bytes of one named key, or `None` when `name` names none.
fn key(name: &str, application_cursor: bool) -> Option<Vec<u8>> {
    let cursor = |c: u8| {
        if application_cursor {
            vec![0x1b, b'O', c]
        } else {
            vec![0x1b, b'[', c]
        }
    };
    let csi = |s: &str| [b"\x1b[".as_slice(), s.as_bytes()].concat();
    let named = match name {
        "Enter" => vec![b'\r'],
        "Tab" => vec![b'\t'],
        "BTab" => csi("Z"),
        "Escape" | "Esc" => vec![0x1b],
        "BSpace" => vec![0x7f],
        "Space" => vec![b' '],
        "Up" => cursor(b'A'),
        "Down" => cursor(b'B'),
        "Right" => cursor(b'C'),
        "Left" => cursor(b'D'),
        "Home" => cursor(b'H'),
        "End" => cursor(b'F'),
        "PgUp" | "PageUp" | "PPage" => csi("5~"),
        "PgDn" | "PageDown" | "NPage" => csi("6~"),
        "IC" | "Insert" => csi("2~"),
        "DC" | "Delete" => csi("3~"),
        "F1" => b"\x1bOP".to_vec(),
        "F2" => b"\x1bOQ".to_vec(),
        "F3" => b"\x1bOR".to_vec(),
        "F4" => b"\x1bOS".to_vec(),
        "F5" => csi("15~"),
        "F6" => csi("17~"),
        "F7" => csi("18~"),
        "F8" => csi("19~"),
        "F9" => csi("20~"),
        "F10" => csi("21~"),
        "F11" => csi("23~"),
        "F12" => csi("24~"),
        _ => {
            if let Some(rest) = name.strip_prefix("C-") {
                return control(rest);
            }
            if let Some(rest) = name.strip_prefix("M-") {
                let mut chars = rest.chars();
                let (Some(c), None) = (chars.next(), chars.next()) else {
                    return None;
                };
                let mut meta = vec![0x1b];
                meta.extend_from_slice(c.to_string().as_bytes());
                return Some(meta);
            }
            return None;
        }
    };
    Some(named)
}

/// `C-a`..`C-z`, `C-@`, `C-[`, `C-\`, `C-]`, `C-^`, `C-_`, `C-Space`.
fn control(rest: &str) -> Option<Vec<u8>> {
    if rest == "Space" {
        return Some(vec![0]);
    }
    let &[c] = rest.as_bytes() else {
        return None;
    };
    match c.to_ascii_lowercase() {
        c @ b'a'..=b'z' => Some(vec![c - b'a' + 1]),
        c @ (b'@' | b'[' | b'\\' | b']' | b'^' | b'_') => Some(vec![c & 0x1f]),
        b'?' => Some(vec![0x7f]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn keys_read_as_tmux_names_them_and_other_words_as_text() {
        assert_eq!(encode(&words(&["6*7", "Enter"]), false, false), b"6*7\r");
        assert_eq!(
            encode(&words(&["C-c", "C-d", "M-x"]), false, false),
            b"\x03\x04\x1bx"
        );
        assert_eq!(encode(&words(&["Up"]), false, false), b"\x1b[A");
        assert_eq!(encode(&words(&["Up"]), false, true), b"\x1bOA");
        assert_eq!(
            encode(&words(&["i", "hello", "Esc", ":wq", "Enter"]), false, false),
            b"ihello\x1b:wq\r"
        );
        assert_eq!(
            encode(&words(&["F1", "F12", "PgDn", "BSpace"]), false, false),
            b"\x1bOP\x1b[24~\x1b[6~\x7f"
        );
        // `--literal`: every word is text.
        assert_eq!(encode(&words(&["Enter", "C-c"]), true, false), b"EnterC-c");
        // Not a key: text.
        assert_eq!(
            encode(&words(&["C-", "M-xy", "Enterprise"]), false, false),
            b"C-M-xyEnterprise"
        );
    }
}

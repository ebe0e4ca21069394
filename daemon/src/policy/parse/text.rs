//! Text as commands print it and quotes read it: what `echo`, `printf`, `cat` and `tee`
//! print when the source says, escapes, and heredoc bodies.

use super::Command;
use crate::policy::words::Word;

/// What a command prints when that is plain from the source: `echo` and `printf` of
/// their words, `cat` and `tee` of their stdin. Expansions are spelled as written (`$HOME`), so a
/// shell reading the text sees them as the outer shell would have expanded them.
pub fn literal_output(command: &Command) -> Option<String> {
    let name = command.words.first()?.literal()?;
    let args: Vec<String> = command.words[1..].iter().map(Word::spelled).collect();
    match name.rsplit('/').next().unwrap_or(&name) {
        "echo" => {
            let mut newline = true;
            let mut escapes = false;
            let mut rest = args.as_slice();
            while let Some(flag) = rest.first().filter(|a| {
                a.len() > 1 && a.starts_with('-') && a[1..].bytes().all(|b| b"neE".contains(&b))
            }) {
                newline &= !flag.contains('n');
                if flag.contains('e') {
                    escapes = true;
                }
                if flag.contains('E') {
                    escapes = false;
                }
                rest = &rest[1..];
            }
            let mut text = rest.join(" ");
            if escapes {
                text = ansi_c(&text);
            }
            if newline {
                text.push('\n');
            }
            Some(text)
        }
        "printf" => {
            let rest = match args.first().map(String::as_str) {
                Some("--") => &args[1..],
                Some(flag) if flag.starts_with('-') => return None,
                _ => &args[..],
            };
            let (format, values) = rest.split_first()?;
            printf(format, values)
        }
        "cat" if args.iter().all(|a| a == "-") => command.stdin.clone(),
        // tee copies its stdin to stdout as well as to its files.
        "tee" => command.stdin.clone(),
        _ => None,
    }
}

/// `printf FORMAT ARGS...` for `%s`, `%b`, `%d`, `%%` and escapes; the format is reused
/// while arguments remain, as printf does. `None` for conversions it does not know.
fn printf(format: &str, values: &[String]) -> Option<String> {
    let format = ansi_c(format);
    let mut out = String::new();
    let mut values = values.iter();
    loop {
        let mut used = false;
        let mut chars = format.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            // Flags and width are allowed and ignored.
            while chars
                .peek()
                .is_some_and(|c| c.is_ascii_digit() || "-+ #.".contains(*c))
            {
                chars.next();
            }
            match chars.next()? {
                '%' => out.push('%'),
                's' | 'd' | 'i' | 'u' => {
                    used = true;
                    out.push_str(values.next().map_or("", String::as_str));
                }
                'b' => {
                    used = true;
                    out.push_str(&ansi_c(values.next().map_or("", String::as_str)));
                }
                _ => return None,
            }
        }
        if !used || values.len() == 0 {
            return Some(out);
        }
    }
}

/// Backslash escapes as `$'...'`, `echo -e` and `printf` read them.
pub fn ansi_c(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(next) = chars.next() else {
            out.push('\\');
            break;
        };
        let mut number = |radix: u32, max: usize, first: Option<char>| {
            let mut value = first.and_then(|d| d.to_digit(radix)).unwrap_or(0);
            for _ in 0..max {
                match chars.peek().and_then(|d| d.to_digit(radix)) {
                    Some(digit) => {
                        value = value * radix + digit;
                        chars.next();
                    }
                    None => break,
                }
            }
            char::from_u32(value).unwrap_or('\u{fffd}')
        };
        match next {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'e' | 'E' => out.push('\u{1b}'),
            'f' => out.push('\u{c}'),
            'v' => out.push('\u{b}'),
            'x' => out.push(number(16, 2, None)),
            'u' => out.push(number(16, 4, None)),
            'U' => out.push(number(16, 8, None)),
            '0'..='7' => out.push(number(8, 2, Some(next))),
            'c' => {
                if let Some(control) = chars.next() {
                    out.push(char::from((control as u8) & 0x1f));
                }
            }
            '\\' | '\'' | '"' | '?' => out.push(next),
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

/// Inside double quotes a backslash escapes only `$`, `` ` ``, `"`, `\` and newline.
pub(super) fn unescape_double_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some(&next)) if matches!(next, '$' | '`' | '"' | '\\' | '\n') => {
                chars.next();
                if next != '\n' {
                    out.push(next);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

//! Words as bash sees them before expansion, and what they expand to. `parse.rs` makes
//! them; `scope.rs` expands them; the rules read the results as *patterns*.
//!
//! A pattern is the text of one field after expansion, in which a glob character or
//! brace that bash would treat literally (it was quoted, or escaped) is escaped with a
//! backslash, and a leading `~` that bash would expand stays bare. Two markers stand for
//! what bashd cannot know: [`UNKNOWN`] starts the text of an expansion it could not
//! resolve (`$X` of the environment, `$(cat file)`), and [`FILE_TEXT`] starts the literal
//! text of a file made by a process substitution (`<(echo ...)`), so that a shell or
//! `source` given it can check it as code.

/// Starts the spelling of an expansion bashd could not resolve: `\u{1}$NAME`.
pub const UNKNOWN: char = '\u{1}';
/// Starts the literal content of a file a process substitution makes.
pub const FILE_TEXT: char = '\u{2}';

/// One shell word before expansion.
#[derive(Debug, Clone, Default)]
pub struct Word {
    pub parts: Vec<Part>,
}

/// A piece of a word. `quoted` says whether bash would glob, split and brace-expand it.
#[derive(Debug, Clone)]
pub enum Part {
    /// Literal text as a pattern: quotes removed, and every character that was quoted
    /// or escaped kept escaped (`\*`), so it stays literal.
    Text(String),
    /// `$NAME`, `${NAME}`, `$1`, `$@`, and `${NAME:-default}` (also `-`, `:=`, `=`).
    Var {
        name: String,
        quoted: bool,
        default: Option<Box<Word>>,
    },
    /// `${NAME:+word}` and `${NAME+word}`: nothing, or the word.
    Alternate { word: Box<Word>, quoted: bool },
    /// `$(...)` or backquotes: the text it prints when that is literal (`$(echo rm)`),
    /// `None` when bashd cannot know it. `$(pwd)` prints the working directory (`~+`).
    Output { text: Option<String>, quoted: bool },
    /// `$(pwd)`: the working directory, as `~+`.
    Workdir,
    /// `<(...)`: a file whose content is the literal text, when it is literal.
    File { text: Option<String> },
    /// Anything else (arithmetic, `${x%%pat}`, `$$`): spelled as written.
    Unknown { text: String },
}

impl Word {
    /// A word that is exactly `text`, all of it literal.
    pub fn literal_text(text: &str) -> Word {
        let mut pattern = String::new();
        push_literal(&mut pattern, text);
        Word {
            parts: vec![Part::Text(pattern)],
        }
    }

    /// The word's text when it is literal (no expansion in it), quoting removed.
    pub fn literal(&self) -> Option<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(&plain(text)),
                _ => return None,
            }
        }
        Some(out)
    }

    /// The word as bash would see it if this text were parsed again, with expansions
    /// spelled as written (`$HOME`) or as the literal text they print: what `echo`
    /// would hand a shell in `echo "rm $x" | bash`, close enough to judge.
    pub fn spelled(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => out.push_str(&plain(text)),
                Part::Var { name, .. } => {
                    out.push('$');
                    out.push_str(name);
                }
                Part::Alternate { word, .. } => out.push_str(&word.spelled()),
                Part::Output {
                    text: Some(text), ..
                } => out.push_str(text.trim_end_matches('\n')),
                Part::Output { text: None, .. } => out.push_str("$(:)"),
                Part::Workdir => out.push_str("$PWD"),
                Part::File { .. } => out.push_str("/dev/fd/63"),
                Part::Unknown { text } => out.push_str(text),
            }
        }
        out
    }

    /// Whether any part reads positional parameters (`$1`, `$@`, `$*`).
    pub fn uses_positional(&self) -> bool {
        self.parts.iter().any(|part| match part {
            Part::Var { name, default, .. } => {
                is_positional(name) || default.as_ref().is_some_and(|d| d.uses_positional())
            }
            Part::Alternate { word, .. } => word.uses_positional(),
            _ => false,
        })
    }
}

/// `$0`...`$9`, `${10}`, `$@`, `$*`.
pub fn is_positional(name: &str) -> bool {
    name == "@" || name == "*" || (!name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()))
}

/// The pattern of an expansion bashd cannot resolve.
pub fn unknown(spelling: &str) -> String {
    let mut pattern = String::from(UNKNOWN);
    push_literal(&mut pattern, spelling);
    pattern
}

/// Positional parameters whose `$0` bashd does not know, followed by `args`.
pub fn with_unknown_zero(args: &[String]) -> Vec<String> {
    let mut all = vec![unknown("$0")];
    all.extend(args.iter().cloned());
    all
}

/// Characters a quoted piece of text escapes so that they stay literal.
const SPECIAL: &[char] = &['\\', '*', '?', '[', ']', '{', '}', ',', '~'];

/// Appends `text` to a pattern, escaped so that none of it is a glob, brace or tilde.
pub fn push_literal(pattern: &mut String, text: &str) {
    for c in text.chars() {
        if SPECIAL.contains(&c) {
            pattern.push('\\');
        }
        pattern.push(c);
    }
}

/// A pattern's text with its escapes and markers removed: what the program receives.
pub fn plain(pattern: &str) -> std::borrow::Cow<'_, str> {
    if !pattern.contains(['\\', UNKNOWN, FILE_TEXT]) {
        return std::borrow::Cow::Borrowed(pattern);
    }
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            UNKNOWN | FILE_TEXT => {}
            _ => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether a pattern holds an expansion bashd could not resolve.
pub fn is_unknown(pattern: &str) -> bool {
    pattern.contains(UNKNOWN)
}

/// A value used unquoted: bash globs it (a quoted `*` in `x='*'` is live in `$x`), but
/// does not expand a tilde or braces in it. git reads pathspecs the same way.
pub fn live_globs(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(next @ ('*' | '?' | '[' | ']')) => out.push(next),
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Shell text that a new parse reads back as this pattern: escaped characters and
/// shell syntax get a backslash, live globs and a leading tilde stay bare.
pub fn to_shell(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 2);
    let mut chars = pattern.chars();
    let mut first = true;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    out.push('\\');
                    out.push(next);
                }
            }
            '\n' => out.push_str("$'\\n'"),
            '*' | '?' | '[' | ']' | '{' | '}' => out.push(c),
            '~' if first => out.push(c),
            _ if c.is_alphanumeric() || "-_./:=,+@%^".contains(c) => out.push(c),
            _ => {
                out.push('\\');
                out.push(c);
            }
        }
        first = false;
    }
    if out.is_empty() {
        out.push_str("''");
    }
    out
}

/// Brace expansion of a pattern (`/{usr,etc}`, `{a..c}`); escaped braces stay. Numeric
/// ranges stand for themselves by their first value (digits name nothing protected);
/// `None` when the expansion would give more than `limit` words.
pub fn braces(pattern: &str, limit: usize) -> Option<Vec<String>> {
    let mut done = Vec::new();
    let mut todo = vec![pattern.to_owned()];
    while let Some(word) = todo.pop() {
        match split_brace(&word) {
            None => done.push(word),
            Some((prefix, items, suffix)) => {
                for item in items {
                    todo.push(format!("{prefix}{item}{suffix}"));
                }
            }
        }
        if done.len() + todo.len() > limit {
            return None;
        }
    }
    done.reverse();
    Some(done)
}

/// The first brace expression of a word: text before, the alternatives, text after.
fn split_brace(word: &str) -> Option<(&str, Vec<String>, &str)> {
    let bytes = word.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'{' => {
                if let Some((end, items)) = brace_items(word, i) {
                    return Some((&word[..i], items, &word[end + 1..]));
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

/// The alternatives of the brace expression opening at `open`, and where it closes.
fn brace_items(word: &str, open: usize) -> Option<(usize, Vec<String>)> {
    let bytes = word.as_bytes();
    let mut depth = 0;
    let mut commas = Vec::new();
    let mut i = open;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    let inner = &word[open + 1..i];
                    if commas.is_empty() {
                        return range(inner).map(|items| (i, items));
                    }
                    let mut items = Vec::new();
                    let mut start = open + 1;
                    for &comma in &commas {
                        items.push(word[start..comma].to_owned());
                        start = comma + 1;
                    }
                    items.push(word[start..i].to_owned());
                    return Some((i, items));
                }
            }
            b',' if depth == 1 => commas.push(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// `a..e` (letters, every one) or `1..100` (numbers, the first stands for all).
fn range(inner: &str) -> Option<Vec<String>> {
    let (from, rest) = inner.split_once("..")?;
    let to = rest.split("..").next()?;
    if let (Ok(from), Ok(_)) = (from.parse::<i64>(), to.parse::<i64>()) {
        return Some(vec![from.to_string()]);
    }
    let (&[from], &[to]) = (from.as_bytes(), to.as_bytes()) else {
        return None;
    };
    if !from.is_ascii_alphabetic() || !to.is_ascii_alphabetic() {
        return None;
    }
    let (low, high) = (from.min(to), from.max(to));
    Some(
        (low..=high)
            .filter(u8::is_ascii_alphabetic)
            .map(|b| (b as char).to_string())
            .collect(),
    )
}

/// Shell-style wildcard match of one pattern against literal text: `*`, `?`, `[...]`
/// (with `!` or `^` to negate), and backslash escapes. Iterative, so a long pattern
/// cannot blow the stack.
pub fn glob(pattern: &str, text: &str) -> bool {
    if !pattern.contains(['*', '?', '[', '\\']) {
        return pattern == text;
    }
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        let step = match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
                continue;
            }
            Some('?') => Some(1),
            Some('[') => match class(&pattern[p..], text[t]) {
                Some((true, len)) => Some(len),
                Some((false, _)) => None,
                None => (text[t] == '[').then_some(1),
            },
            Some('\\') if p + 1 < pattern.len() => (pattern[p + 1] == text[t]).then_some(2),
            Some(&c) => (c == text[t]).then_some(1),
            None => None,
        };
        match step {
            Some(len) => {
                p += len;
                t += 1;
            }
            None => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == '*')
}

/// [`glob`] for one file name as bash expands it: a leading `.` must be matched by a
/// literal `.` (`*` does not take `.git`; `.*` does).
pub fn glob_name(pattern: &str, name: &str) -> bool {
    if name.starts_with('.') && !(pattern.starts_with('.') || pattern.starts_with("\\.")) {
        return false;
    }
    glob(pattern, name)
}

/// A bracket expression at the start of `pattern`: whether `c` matches, and its length;
/// `None` if it is not closed (then `[` is literal).
fn class(pattern: &[char], c: char) -> Option<(bool, usize)> {
    let mut i = 1;
    let negated = matches!(pattern.get(i), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < pattern.len() {
        let here = pattern[i];
        if here == ']' && !first {
            return Some((matched != negated, i + 1));
        }
        first = false;
        if pattern.get(i + 1) == Some(&'-') && pattern.get(i + 2).is_some_and(|&e| e != ']') {
            if here <= c && c <= pattern[i + 2] {
                matched = true;
            }
            i += 3;
        } else {
            if here == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

/// Whether a pattern holds an active glob character.
pub fn has_glob(pattern: &str) -> bool {
    let mut escaped = false;
    for c in pattern.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '*' | '?' | '[' => return true,
            _ => {}
        }
    }
    false
}

/// Ordinary names a glob must match to count as "every entry" (`*`, `?*`, `[!.]*`).
const SAMPLE_NAMES: &[&str] = &[
    "src",
    "a",
    "README.md",
    "Cargo.toml",
    "x_1",
    "node-modules",
    "Z",
];

/// Whether a glob matches every ordinary name, so that `DIR/GLOB` is all of `DIR`.
pub fn matches_everything(pattern: &str) -> bool {
    has_glob(pattern) && SAMPLE_NAMES.iter().all(|name| glob(pattern, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_like_a_shell() {
        assert!(glob("publish", "publish"));
        assert!(glob("pub*", "publish"));
        assert!(glob("*lish", "publish"));
        assert!(glob("p?blish", "publish"));
        assert!(!glob("pub", "publish"));
        assert!(glob("*", ""));
        assert!(glob("[u]sr", "usr"));
        assert!(glob("[!a]sr", "usr"));
        assert!(glob("[a-z]sr", "usr"));
        assert!(!glob("\\*", "usr"));
        assert!(glob("\\*", "*"));
        assert!(glob(".*", ".git"));
    }

    #[test]
    fn braces_expand_and_escaped_ones_stay() {
        assert_eq!(braces("/{usr,etc}", 10).unwrap(), ["/usr", "/etc"]);
        assert_eq!(braces("{a,b}{c,d}", 10).unwrap(), ["ac", "ad", "bc", "bd"]);
        assert_eq!(braces("\\{a,b}", 10).unwrap(), ["\\{a,b}"]);
        assert_eq!(braces("x{1..100000}", 10).unwrap(), ["x1"]);
        assert_eq!(braces("/{t..v}sr", 10).unwrap(), ["/tsr", "/usr", "/vsr"]);
        assert_eq!(braces("{}", 10).unwrap(), ["{}"]);
        assert!(braces("{a,b}{a,b}{a,b}{a,b}", 10).is_none());
    }

    #[test]
    fn everything_is_a_glob_that_takes_every_name() {
        assert!(matches_everything("*"));
        assert!(matches_everything("?*"));
        assert!(matches_everything("[!.]*"));
        assert!(!matches_everything("*.o"));
        assert!(!matches_everything("\\*"));
        assert!(!matches_everything("src"));
    }
}

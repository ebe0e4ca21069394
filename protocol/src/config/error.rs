//! A bad config file's error in the user's words: the file, the line, the key and
//! the fix. serde's own wording (`unknown field`, `invalid type`) is rewritten here
//! into the file's terms (`unknown key limits.max_linez; known keys of [limits]: ...`).

use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Invalid {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// More than one thing wrong: each on its own line, in the file's order, so one
    /// edit fixes them all (issue 45).
    #[error("{}", lines(.0))]
    Several(Vec<ConfigError>),
}

fn lines(errors: &[ConfigError]) -> String {
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    lines.join("\n")
}

impl ConfigError {
    /// One error as itself, several as [`ConfigError::Several`] in the order of their
    /// lines.
    pub(super) fn all(mut errors: Vec<ConfigError>) -> ConfigError {
        let line = |e: &ConfigError| match e {
            ConfigError::Invalid { line, .. } => *line,
            _ => 0,
        };
        errors.sort_by_key(line);
        errors.dedup_by(|a, b| a.to_string() == b.to_string());
        match errors.len() {
            1 => errors.remove(0),
            _ => ConfigError::Several(errors),
        }
    }
}

/// A check across keys that failed: the key the error is placed at (its line; the
/// section's when the key is not written) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub key: Vec<String>,
    pub message: String,
}

impl Refusal {
    pub fn at(key: &[&str], message: String) -> Refusal {
        Refusal {
            key: key.iter().map(|part| part.to_string()).collect(),
            message,
        }
    }
}

/// The text being read and the file it came from.
pub(super) struct Source<'a> {
    pub text: &'a str,
    pub path: &'a Path,
}

impl Source<'_> {
    fn line_of(&self, offset: usize) -> usize {
        let before = &self.text[..offset.min(self.text.len())];
        before.matches('\n').count() + 1
    }

    fn error(&self, line: usize, message: String) -> ConfigError {
        ConfigError::Invalid {
            path: self.path.to_owned(),
            line,
            message,
        }
    }

    /// Every syntax error of the text, read past each with toml's recovery.
    pub fn syntax_all(&self, errors: &[toml::de::Error]) -> ConfigError {
        ConfigError::all(errors.iter().map(|e| self.syntax(e)).collect())
    }

    pub fn syntax(&self, e: &toml::de::Error) -> ConfigError {
        let line = e.span().map_or(1, |span| self.line_of(span.start));
        self.error(line, e.message().trim_end().to_owned())
    }

    /// A value the types refused: toml's error carries the span of the key or value
    /// it was reading, which names the key in `document`.
    pub fn typed(&self, document: &DeTable<'_>, e: &toml::de::Error) -> ConfigError {
        let line = e.span().map_or(1, |span| self.line_of(span.start));
        let mut place = Place::default();
        if let Some(span) = e.span() {
            place.find(document, &span, &mut Vec::new(), false);
        }
        self.error(
            line,
            reworded(&place.keys, place.in_list, e.message().trim_end()),
        )
    }

    pub fn refused(&self, document: &DeTable<'_>, refusal: Refusal) -> ConfigError {
        self.error(
            self.line_of(key_offset(document, &refusal.key)),
            refusal.message,
        )
    }
}

/// The key an error names, found from toml's span of what it was reading (not by
/// wrapping the deserializer, which doubled the code of every type read): the deepest
/// key or value written at exactly that span, and whether it is in a list (a
/// `[[policy.deny]]` rule). A list of tables has the span of its first header, and so
/// has the first table in it; that table, found after its list, is kept.
#[derive(Default)]
struct Place {
    keys: Vec<String>,
    in_list: bool,
}

impl Place {
    fn find(
        &mut self,
        table: &DeTable<'_>,
        span: &Range<usize>,
        at: &mut Vec<String>,
        in_list: bool,
    ) {
        for (key, value) in table.iter() {
            at.push(key.get_ref().to_string());
            if key.span() == *span {
                self.take(at, in_list);
            }
            self.find_in(value, span, at, in_list);
            at.pop();
        }
    }

    fn find_in(
        &mut self,
        value: &toml::Spanned<DeValue<'_>>,
        span: &Range<usize>,
        at: &mut Vec<String>,
        in_list: bool,
    ) {
        if value.span() == *span {
            self.take(at, in_list);
        }
        match value.get_ref() {
            DeValue::Table(table) => self.find(table, span, at, in_list),
            DeValue::Array(items) => {
                for item in items {
                    self.find_in(item, span, at, true);
                }
            }
            _ => {}
        }
    }

    /// Keeps `at` when it is as deep as the place found so far: a later find at the
    /// same depth is within the earlier one (a header's table within its list).
    fn take(&mut self, at: &[String], in_list: bool) {
        if at.len() >= self.keys.len() {
            self.keys = at.to_vec();
            self.in_list = in_list;
        }
    }
}

/// Where the last of `keys` that the document has is written.
fn key_offset(document: &DeTable<'_>, keys: &[String]) -> usize {
    let mut table = document;
    let mut offset = 0;
    for key in keys {
        let Some((found, value)) = table.get_key_value(key.as_str()) else {
            break;
        };
        offset = found.span().start;
        match value.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ => break,
        }
    }
    offset
}

/// `keys` as the file writes them: `mcp.clients."codex-mcp-client".result_bytes`.
fn dotted(keys: &[String]) -> String {
    let parts: Vec<String> = keys.iter().map(|key| bare_key(key)).collect();
    parts.join(".")
}

/// `name` as a TOML key: bare when it can be, quoted otherwise.
pub fn bare_key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        name.to_owned()
    } else {
        super::quoted(name)
    }
}

/// serde's words for what went wrong at `keys` in the file's terms. The value types
/// word their own errors to follow the key ("must be ...", or ": ..." after it).
fn reworded(keys: &[String], in_list: bool, message: &str) -> String {
    let at = dotted(keys);
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (field, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let known = backticked(expected);
        // The path ends with the unknown key itself.
        let keys = keys.strip_suffix(&[field.to_owned()]).unwrap_or(keys);
        let at = dotted(keys);
        if keys.is_empty() {
            let known: Vec<String> = known.iter().map(|k| format!("[{k}]")).collect();
            return format!("unknown section [{field}]; known: {}", known.join(", "));
        }
        return format!(
            "unknown key {at}.{}; known keys of [{at}]: {}",
            bare_key(field),
            known.join(", ")
        );
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.trim_end_matches('`');
        return match in_list {
            true => format!("a [[{at}]] rule needs `{field}`"),
            false => format!("{at} needs `{field}`"),
        };
    }
    for kind in ["invalid type: ", "invalid value: ", "invalid length "] {
        if message.starts_with(kind)
            && let Some((_, expected)) = message.rsplit_once(", expected ")
        {
            return format!("{at} must be {expected}");
        }
    }
    if message.starts_with("must ") {
        format!("{at} {message}")
    } else if message.starts_with(':') {
        format!("{at}{message}")
    } else if at.is_empty() {
        message.to_owned()
    } else {
        format!("{at}: {message}")
    }
}

/// The names in serde's list of what it expected: "one of `a`, `b`", "`a` or `b`".
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

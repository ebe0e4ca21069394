//! From shell source to the argument vectors of every simple command in it, with the
//! quoting removed, as `bash` would run them. tree-sitter-bash does the parsing; a
//! parse with errors still yields every command node it recovered.

use std::cell::RefCell;

use tree_sitter::{Node, Parser, Tree};

thread_local! {
    /// One parser per thread, reused: creating one costs more than parsing a line.
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Parses `source`; `None` only if tree-sitter gives up, which the caller must treat
/// as a command it could not check.
pub fn parse(source: &str) -> Option<Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let parser = slot.get_or_insert_with(|| {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .expect("the bash grammar matches the tree-sitter version");
            parser
        });
        parser.parse(source, None)
    })
}

/// Every simple command in the tree, outermost first, as its words with quoting
/// removed. Walks without recursion, so deep nesting cannot overflow the stack.
pub fn commands(tree: &Tree, source: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut cursor = tree.walk();
    loop {
        let node = cursor.node();
        if node.kind() == "command" {
            found.push(argv(node, source));
        }
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return found;
            }
        }
    }
}

fn argv(command: Node<'_>, source: &str) -> Vec<String> {
    let mut words = Vec::new();
    if let Some(name) = command.child_by_field_name("name") {
        words.push(word(name, source));
    }
    let mut cursor = command.walk();
    words.extend(
        command
            .children_by_field_name("argument", &mut cursor)
            .map(|arg| word(arg, source)),
    );
    words
}

/// The text `bash` would pass for one word: quotes removed, backslash escapes
/// resolved, and variables kept as `$NAME` (so `"$HOME"` and `${HOME}` are `$HOME`).
pub fn word(node: Node<'_>, source: &str) -> String {
    let text = node.utf8_text(source.as_bytes()).unwrap_or_default();
    match node.kind() {
        "command_name" | "concatenation" => {
            let mut cursor = node.walk();
            let parts: Vec<Node<'_>> = node.children(&mut cursor).collect();
            if parts.is_empty() {
                return unescape(text);
            }
            parts.into_iter().map(|part| word(part, source)).collect()
        }
        "raw_string" => text
            .strip_prefix('\'')
            .and_then(|t| t.strip_suffix('\''))
            .unwrap_or(text)
            .to_owned(),
        "ansi_c_string" => text
            .strip_prefix("$'")
            .and_then(|t| t.strip_suffix('\''))
            .unwrap_or(text)
            .to_owned(),
        "string" => {
            let inner = text
                .strip_prefix('"')
                .and_then(|t| t.strip_suffix('"'))
                .unwrap_or(text);
            normalize_braces(&unescape_double_quoted(inner))
        }
        "expansion" | "simple_expansion" => normalize_braces(text),
        "word" => unescape(text),
        _ => text.to_owned(),
    }
}

/// `${NAME}` -> `$NAME`, for plain variable names.
fn normalize_braces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        match after.find('}') {
            Some(end)
                if end > 0
                    && after[..end]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                out.push('$');
                out.push_str(&after[..end]);
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// An unquoted word: a backslash keeps the character after it.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Inside double quotes a backslash escapes only `$`, `` ` ``, `"`, `\` and newline.
fn unescape_double_quoted(text: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn all(source: &str) -> Vec<Vec<String>> {
        commands(&parse(source).unwrap(), source)
    }

    #[test]
    fn quoting_is_removed() {
        assert_eq!(all("'rm' -rf \"$HOME\""), [["rm", "-rf", "$HOME"]]);
        assert_eq!(all("r\\m -r ${HOME}/"), [["rm", "-r", "$HOME/"]]);
        assert_eq!(all("git add '-'A"), [["git", "add", "-A"]]);
    }

    #[test]
    fn every_nested_command_is_found() {
        let found = all("a | b && (c; d) & e $(f) <(g); h() { i; }");
        let names: Vec<&str> = found.iter().map(|argv| argv[0].as_str()).collect();
        for name in ["a", "b", "c", "d", "e", "f", "g", "i"] {
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
    }

    #[test]
    fn data_is_not_a_command() {
        assert_eq!(
            all("echo \"rm -rf /\" # git add -A"),
            [["echo", "rm -rf /"]]
        );
    }
}

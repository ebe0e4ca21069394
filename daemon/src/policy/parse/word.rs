//! One word of the tree as a [`Word`]: quoting removed, every literal character that
//! was quoted or escaped kept escaped, expansions kept as parts.

use tree_sitter::Node;

use super::text::{ansi_c, literal_output, unescape_double_quoted};
use super::{Command, Fields, MAX_WORD_NESTING, Walk};
use crate::policy::words::{Part, Word, push_literal};

impl Walk<'_> {
    /// One word, quoting removed, its expansions kept as parts.
    pub(super) fn word(&self, node: Node<'_>) -> Word {
        let mut word = Word::default();
        self.parts(node, false, &mut word.parts);
        word
    }

    fn parts(&self, node: Node<'_>, quoted: bool, parts: &mut Vec<Part>) {
        let text = self.text(node);
        if self.nesting.get() >= MAX_WORD_NESTING {
            parts.push(Part::Unknown {
                text: text.to_owned(),
            });
            return;
        }
        self.nesting.set(self.nesting.get() + 1);
        self.parts_of(node, text, quoted, parts);
        self.nesting.set(self.nesting.get() - 1);
    }

    fn parts_of(&self, node: Node<'_>, text: &str, quoted: bool, parts: &mut Vec<Part>) {
        match node.kind() {
            "command_name" | "concatenation" => {
                let mut cursor = node.walk();
                let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
                if children.is_empty() {
                    push_text(parts, &unquoted(text));
                }
                for child in children {
                    self.parts(child, quoted, parts);
                }
            }
            "word" | "number" | "brace_expression" | "$" if quoted => {
                let mut pattern = String::new();
                push_literal(&mut pattern, text);
                push_text(parts, &pattern);
            }
            "word" | "number" | "brace_expression" | "$" => push_text(parts, &unquoted(text)),
            "raw_string" => {
                let mut pattern = String::new();
                push_literal(&mut pattern, strip(text, "'", "'"));
                push_text(parts, &pattern);
            }
            "ansi_c_string" => {
                let mut pattern = String::new();
                push_literal(&mut pattern, &ansi_c(strip(text, "$'", "'")));
                push_text(parts, &pattern);
            }
            "string" | "translated_string" => {
                let mut cursor = node.walk();
                for child in node.children(&mut cursor) {
                    match child.kind() {
                        "\"" | "$\"" => {}
                        "string_content" => {
                            let mut pattern = String::new();
                            push_literal(&mut pattern, &unescape_double_quoted(self.text(child)));
                            push_text(parts, &pattern);
                        }
                        _ => self.parts(child, true, parts),
                    }
                }
            }
            "simple_expansion" => {
                let name = node
                    .named_child(0)
                    .map(|n| self.text(n))
                    .unwrap_or_default();
                if name == "@"
                    || name == "*"
                    || name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                        && !name.is_empty()
                {
                    parts.push(Part::Var {
                        name: name.to_owned(),
                        quoted,
                        default: None,
                    });
                } else {
                    parts.push(Part::Unknown {
                        text: text.to_owned(),
                    });
                }
            }
            "expansion" => parts.push(self.expansion(node, quoted)),
            "command_substitution" => parts.push(match self.single_command(node) {
                Some(inner) if is_pwd(&inner) => Part::Workdir,
                Some(inner) => Part::Output {
                    text: literal_output(&inner),
                    quoted,
                },
                None => Part::Output { text: None, quoted },
            }),
            "process_substitution" => parts.push(Part::File {
                text: self.single_command(node).and_then(|c| literal_output(&c)),
            }),
            _ => parts.push(Part::Unknown {
                text: text.to_owned(),
            }),
        }
    }

    /// `${NAME}`, `${NAME:-default}`, `${a[@]}`, `${NAME:?message}` (the value, or
    /// nothing runs), `${NAME:+word}` (nothing or the word), and the operators that
    /// change a value (`${NAME%/}`, `${NAME/a/b}`, `${NAME:0:3}`, `${NAME^^}`), which
    /// are read as the value itself or an unknown: the policy fails closed, and a
    /// value cut from a protected path (`${HOME%/}`, `${PWD%/*}`) is one still. Anything
    /// else (`${#NAME}`, `${!NAME}`) is unknown.
    fn expansion(&self, node: Node<'_>, quoted: bool) -> Part {
        let unknown = || Part::Unknown {
            text: self.text(node).to_owned(),
        };
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node
            .children(&mut cursor)
            .filter(|c| !matches!(c.kind(), "${" | "}"))
            .collect();
        let Some(first) = children.first() else {
            return unknown();
        };
        let name = match first.kind() {
            "variable_name" | "special_variable_name" => self.text(*first).to_owned(),
            "subscript" => match first.child_by_field_name("name") {
                Some(name) => self.text(name).to_owned(),
                None => return unknown(),
            },
            _ => return unknown(),
        };
        let rest = || {
            let mut word = Word::default();
            for child in &children[2..] {
                self.parts(*child, quoted, &mut word.parts);
            }
            Box::new(word)
        };
        let default = match children.get(1).map(|operator| self.text(*operator)) {
            None | Some(":?" | "?") => None,
            Some(":-" | "-" | ":=" | "=") => Some(rest()),
            Some(":+" | "+") => {
                return Part::Alternate {
                    word: rest(),
                    quoted,
                };
            }
            Some(
                "%" | "%%" | "#" | "##" | "/" | "//" | "/#" | "/%" | "^" | "^^" | "," | ",," | ":"
                | "@",
            ) => Some(Box::new(Word {
                parts: vec![unknown()],
            })),
            Some(_) => return unknown(),
        };
        Part::Var {
            name,
            quoted,
            default,
        }
    }

    /// The one command a substitution runs, when it runs exactly one.
    fn single_command(&self, node: Node<'_>) -> Option<Command> {
        let mut cursor = node.walk();
        let mut statements = node.named_children(&mut cursor);
        let only = statements.next()?;
        if statements.next().is_some() {
            return None;
        }
        let (command, statement) = match only.kind() {
            "command" => (only, None),
            "redirected_statement" => (
                only.child_by_field_name("body")
                    .filter(|b| b.kind() == "command")?,
                Some(only),
            ),
            _ => return None,
        };
        let fields = Fields::of(command);
        // Only these print text bashd reads; the rest need not be built again.
        let name = fields.name.and_then(|name| self.word(name).literal())?;
        let base = name.rsplit('/').next().unwrap_or(&name);
        if !matches!(base, "echo" | "printf" | "cat" | "tee" | "pwd") {
            return None;
        }
        let mut stdin = None;
        let mut redirects: Vec<Node<'_>> = Vec::new();
        if let Some(statement) = statement {
            let mut cursor = statement.walk();
            redirects.extend(statement.children_by_field_name("redirect", &mut cursor));
        }
        redirects.extend(fields.redirects.iter().copied());
        for redirect in redirects {
            if let Some(input) = self.stdin_of(redirect) {
                stdin = input;
            }
        }
        Some(Command {
            words: self.words_of(&fields),
            stdin,
        })
    }
}

fn push_text(parts: &mut Vec<Part>, pattern: &str) {
    if let Some(Part::Text(last)) = parts.last_mut() {
        last.push_str(pattern);
    } else {
        parts.push(Part::Text(pattern.to_owned()));
    }
}

fn strip<'t>(text: &'t str, prefix: &str, suffix: &str) -> &'t str {
    let inner = text.strip_prefix(prefix).unwrap_or(text);
    inner.strip_suffix(suffix).unwrap_or(inner)
}

fn is_pwd(command: &Command) -> bool {
    command.words.first().and_then(Word::literal).as_deref() == Some("pwd")
        && command.words[1..]
            .iter()
            .all(|w| matches!(w.literal().as_deref(), Some("-L" | "-P")))
}

/// An unquoted word as a pattern: a backslash makes the character after it literal.
fn unquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => {}
                Some(next) => push_literal(&mut out, &next.to_string()),
            }
        } else {
            out.push(c);
        }
    }
    out
}

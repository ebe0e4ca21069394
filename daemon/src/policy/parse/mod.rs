//! From shell source to a [`Script`]: every simple command in it as structured words
//! (`words.rs`), with the literal text its stdin gets when the source says it (a
//! heredoc, a here-string, `< <(echo ...)`, or `echo ... |` before it), plus the
//! variable assignments and function definitions the source makes. tree-sitter-bash
//! does the parsing; a parse with errors still yields every command node it recovered,
//! and [`Script::hidden`] says when an error hides words that are in no command.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::{ControlFlow, Range};
use std::time::Instant;

use tree_sitter::{Node, ParseOptions, Parser, Tree};

use super::words::{Part, Word};
use text::{literal_output, unescape_double_quoted};

mod text;
mod word;

thread_local! {
    /// One parser per thread, reused: creating one costs more than parsing a line.
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Why a source could not be parsed.
#[derive(Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The deadline passed first.
    Timeout,
    /// tree-sitter gave up.
    Failed,
}

/// Parses `source`, giving up at `deadline`.
pub fn parse(source: &str, deadline: Instant) -> Result<Tree, ParseError> {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let parser = slot.get_or_insert_with(|| {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .expect("the bash grammar matches the tree-sitter version");
            parser
        });
        let bytes = source.as_bytes();
        let mut timed_out = false;
        let mut progress = |_: &tree_sitter::ParseState| {
            if Instant::now() >= deadline {
                timed_out = true;
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let tree = parser.parse_with_options(
            &mut |at, _| bytes.get(at..).unwrap_or_default(),
            None,
            Some(ParseOptions::new().progress_callback(&mut progress)),
        );
        match tree {
            Some(tree) => Ok(tree),
            None => {
                // A cancelled parse would otherwise resume on the next call.
                parser.reset();
                Err(if timed_out {
                    ParseError::Timeout
                } else {
                    ParseError::Failed
                })
            }
        }
    })
}

/// What one source holds, in the order bash would meet it.
#[derive(Debug, Default)]
pub struct Script {
    /// Every simple command, outermost first.
    pub commands: Vec<Command>,
    /// Every `NAME=value`, `NAME+=value`, `local NAME=value`, and `for NAME in ...`.
    pub assignments: Vec<Assignment>,
    /// Every `NAME() { ...; }` and `function NAME { ...; }`.
    pub functions: Vec<Function>,
    /// Text a parse error left outside every command (`case x in ) rm -rf / ;; esac`).
    pub hidden: Option<String>,
}

/// One simple command.
#[derive(Debug, Default)]
pub struct Command {
    /// The name first, then the arguments; prefix assignments are in `assignments`.
    pub words: Vec<Word>,
    /// The literal text on its stdin, when the source gives it.
    pub stdin: Option<String>,
}

#[derive(Debug)]
pub struct Assignment {
    pub name: String,
    /// One word for a scalar; every element for an array.
    pub values: Vec<Word>,
}

#[derive(Debug)]
pub struct Function {
    pub name: String,
    /// Its body's commands, as indices into [`Script::commands`].
    pub commands: Range<usize>,
}

/// Walks the tree without recursion (deep nesting cannot overflow the stack) and
/// collects the script.
pub fn script(tree: &Tree, source: &str) -> Script {
    let mut walk = Walk {
        source,
        nesting: std::cell::Cell::new(0),
        script: Script::default(),
        command_of: HashMap::new(),
        piped_from: HashMap::new(),
    };
    // Open function definitions and error nodes, by the byte where each ends.
    let mut functions: Vec<(usize, usize)> = Vec::new();
    let mut errors: Vec<usize> = Vec::new();
    let mut in_command: Vec<usize> = Vec::new();
    // The path from the root: tree-sitter's `Node::parent` searches from the root each
    // time, which made a long script quadratic.
    let mut ancestors: Vec<Node<'_>> = Vec::new();
    let mut cursor = tree.walk();
    loop {
        let node = cursor.node();
        let start = node.start_byte();
        while functions.last().is_some_and(|&(end, _)| start >= end) {
            let (_, index) = functions.pop().expect("checked by last");
            walk.script.functions[index].commands.end = walk.script.commands.len();
        }
        errors.retain(|&end| start < end);
        in_command.retain(|&end| start < end);
        match node.kind() {
            "command" => {
                walk.command(node, &ancestors);
                in_command.push(node.end_byte());
            }
            "variable_assignment" => walk.assignment(node),
            "for_statement" => walk.for_loop(node),
            "function_definition" => {
                if let Some(name) = node.child_by_field_name("name") {
                    let at = walk.script.commands.len();
                    walk.script.functions.push(Function {
                        name: walk.text(name).to_owned(),
                        commands: at..at,
                    });
                    functions.push((node.end_byte(), walk.script.functions.len() - 1));
                }
            }
            "pipeline" => walk.pipeline(node, &ancestors),
            "ERROR" => errors.push(node.end_byte()),
            "word"
                if !errors.is_empty() && in_command.is_empty() && walk.script.hidden.is_none() =>
            {
                walk.script.hidden = Some(walk.text(node).to_owned());
            }
            _ => {}
        }
        if cursor.goto_first_child() {
            ancestors.push(node);
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            ancestors.pop();
            if !cursor.goto_parent() {
                let end = walk.script.commands.len();
                for (_, index) in functions {
                    walk.script.functions[index].commands.end = end;
                }
                return walk.script;
            }
        }
    }
}

/// Words inside words (`$(echo $(echo ...))`, `${a:-${b:-...}}`) are read this deep;
/// deeper ones are unknown. Their commands are still found by the walk.
const MAX_WORD_NESTING: usize = 16;

struct Walk<'s> {
    source: &'s str,
    /// How deep [`Walk::parts`] is in words inside words.
    nesting: std::cell::Cell<usize>,
    script: Script,
    /// Command index by the id of its node (and of the redirected statement around it).
    command_of: HashMap<usize, usize>,
    /// The node whose output each pipeline stage reads, by the stage's node id.
    piped_from: HashMap<usize, usize>,
}

impl Walk<'_> {
    fn text(&self, node: Node<'_>) -> &str {
        node.utf8_text(self.source.as_bytes()).unwrap_or_default()
    }

    fn command(&mut self, node: Node<'_>, ancestors: &[Node<'_>]) {
        let fields = Fields::of(node);
        let mut command = Command {
            words: self.words_of(&fields),
            stdin: None,
        };
        let parent = ancestors.last().copied();
        let grandparent = ancestors.len().checked_sub(2).map(|at| ancestors[at]);
        let statement = parent.and_then(|parent| match parent.kind() {
            "redirected_statement" => Some(parent),
            // tree-sitter hangs `a | b < f` on the pipeline; bash gives it to `b`.
            "pipeline" if last_named_child(parent) == Some(node) => {
                grandparent.filter(|p| p.kind() == "redirected_statement")
            }
            _ => None,
        });
        let mut redirects = fields.redirects;
        if let Some(statement) = statement {
            let mut cursor = statement.walk();
            redirects.extend(statement.children_by_field_name("redirect", &mut cursor));
        }
        // A pipe feeds it unless a redirect replaces its stdin.
        let producer = std::iter::once(node.id())
            .chain(statement.map(|s| s.id()))
            .find_map(|id| self.piped_from.get(&id))
            .and_then(|producer| self.command_of.get(producer));
        if let Some(&producer) = producer {
            command.stdin = literal_output(&self.script.commands[producer]);
        }
        for redirect in redirects {
            if let Some(input) = self.stdin_of(redirect) {
                command.stdin = input;
            }
        }
        let index = self.script.commands.len();
        self.command_of.insert(node.id(), index);
        if let Some(statement) = statement {
            self.command_of.insert(statement.id(), index);
        }
        self.script.commands.push(command);
    }

    /// The command's words: its name and arguments (assignments before the name are
    /// collected by the walk, redirects are not words). Nodes with nothing between
    /// them are one word, as bash reads them: tree-sitter splits some words bash does
    /// not (`rm$IFS-rf$IFS/` into `rm$IFS-rf$` and `IFS/`, `--arg-file=<(...)` into
    /// `--arg-file=` and `<(...)`).
    fn words_of(&self, fields: &Fields<'_>) -> Vec<Word> {
        let mut words: Vec<Word> = Vec::with_capacity(fields.arguments.len() + 1);
        let mut end = None;
        for node in fields.name.iter().chain(&fields.arguments) {
            let word = self.word(*node);
            match words.last_mut() {
                Some(last) if end == Some(node.start_byte()) => {
                    for part in word.parts {
                        join_part(&mut last.parts, part);
                    }
                }
                _ => words.push(word),
            }
            end = Some(node.end_byte());
        }
        words
    }

    /// `Some(text)` or `Some(None)` (stdin from somewhere unknown) for an input
    /// redirect; `None` for one that leaves stdin alone.
    fn stdin_of(&self, redirect: Node<'_>) -> Option<Option<String>> {
        match redirect.kind() {
            "heredoc_redirect" => {
                let mut cursor = redirect.walk();
                let children: Vec<Node<'_>> = redirect.children(&mut cursor).collect();
                let start = children.iter().find(|c| c.kind() == "heredoc_start")?;
                let delimiter = self.text(*start);
                let quoted = delimiter.contains(['\'', '"', '\\']);
                let delimiter: String = delimiter
                    .chars()
                    .filter(|c| !matches!(c, '\'' | '"' | '\\'))
                    .collect();
                let strip_tabs = children.iter().any(|c| self.text(*c) == "<<-");
                let at = self.heredoc_start(*start, &children, redirect);
                let text = heredoc_body(&self.source[at..], &delimiter, strip_tabs);
                Some(Some(if quoted {
                    text.to_owned()
                } else {
                    unescape_double_quoted(text)
                }))
            }
            "herestring_redirect" => {
                let mut cursor = redirect.walk();
                let word = redirect.named_children(&mut cursor).last()?;
                Some(Some(format!("{}\n", self.word(word).spelled())))
            }
            "file_redirect" => {
                let operator = redirect.child(0).map(|c| self.text(c)).unwrap_or_default();
                let reads =
                    operator == "<" || redirect.child(1).is_some_and(|c| self.text(c) == "<");
                if !reads {
                    return None;
                }
                let destination = redirect.child_by_field_name("destination")?;
                let file = self.word(destination);
                Some(match file.parts.as_slice() {
                    [Part::File { text }] => text.clone(),
                    _ => None,
                })
            }
            _ => None,
        }
    }

    /// Where a heredoc's body starts. The first heredoc of a line starts on the next
    /// line, whatever tree-sitter says (it can take `\\rm` on that line for arguments of
    /// the redirect); later ones on the same line start where tree-sitter puts them.
    fn heredoc_start(&self, start: Node<'_>, children: &[Node<'_>], redirect: Node<'_>) -> usize {
        let parsed = children
            .iter()
            .find(|c| matches!(c.kind(), "heredoc_body" | "heredoc_end"))
            .map_or(redirect.end_byte(), |c| c.start_byte());
        let line_start = self.source[..start.start_byte()]
            .rfind('\n')
            .map_or(0, |at| at + 1);
        let before = &self.source[line_start..start.start_byte()];
        // A here-string `<<<` holds one `<<` of the count (matches do not overlap);
        // saturating, since no text before the redirect may panic the daemon.
        let earlier = before
            .matches("<<")
            .count()
            .saturating_sub(before.matches("<<<").count());
        let next_line = self.source[start.end_byte()..]
            .find('\n')
            .map(|at| start.end_byte() + at + 1);
        match next_line {
            Some(next_line) if earlier <= 1 => next_line,
            _ => parsed,
        }
    }

    fn assignment(&mut self, node: Node<'_>) {
        let Some(name) = node.child_by_field_name("name") else {
            return;
        };
        let name = match name.kind() {
            // `a[0]=x`: an element of `a`.
            "subscript" => name
                .child_by_field_name("name")
                .map(|n| self.text(n).to_owned()),
            _ => Some(self.text(name).to_owned()),
        };
        let Some(name) = name else { return };
        let values = match node.child_by_field_name("value") {
            Some(value) if value.kind() == "array" => {
                let mut cursor = value.walk();
                value
                    .named_children(&mut cursor)
                    .map(|element| self.word(element))
                    .collect()
            }
            Some(value) => vec![self.word(value)],
            None => vec![Word::default()],
        };
        self.script.assignments.push(Assignment { name, values });
    }

    /// `for NAME in WORDS`: NAME takes each word. Without `in`, the positional
    /// parameters, which a function call may know.
    fn for_loop(&mut self, node: Node<'_>) {
        let Some(variable) = node.child_by_field_name("variable") else {
            return;
        };
        let mut cursor = node.walk();
        let mut values: Vec<Word> = node
            .children_by_field_name("value", &mut cursor)
            .map(|value| self.word(value))
            .collect();
        if values.is_empty() && !node.children(&mut node.walk()).any(|c| c.kind() == "in") {
            values.push(Word {
                parts: vec![Part::Var {
                    name: "@".into(),
                    quoted: true,
                    default: None,
                }],
            });
        }
        for value in values {
            self.script.assignments.push(Assignment {
                name: self.text(variable).to_owned(),
                values: vec![value],
            });
        }
    }

    /// Each stage of a pipeline reads what the stage before it prints. A heredoc's
    /// redirect can hold the rest of the pipeline (`cat <<EOF | bash`): its first stage
    /// then reads the statement the heredoc belongs to.
    fn pipeline(&mut self, node: Node<'_>, ancestors: &[Node<'_>]) {
        let mut cursor = node.walk();
        let stages: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        for pair in stages.windows(2) {
            self.piped_from.insert(pair[1].id(), pair[0].id());
        }
        let statement = match ancestors {
            [.., statement, redirect]
                if redirect.kind() == "heredoc_redirect"
                    && statement.kind() == "redirected_statement" =>
            {
                Some(*statement)
            }
            _ => None,
        };
        if let (Some(statement), Some(first)) = (statement, stages.first()) {
            self.piped_from.insert(first.id(), statement.id());
        }
    }
}

/// A command node's children by field, found in one pass (tree-sitter's
/// `children_by_field_name` walks the children once per field).
/// Appends a part of a word tree-sitter split off. A bare `$` it left at the end of
/// the text before and the name that starts the text after are an expansion.
fn join_part(parts: &mut Vec<Part>, part: Part) {
    let Some(Part::Text(text)) = parts.last_mut() else {
        parts.push(part);
        return;
    };
    let Part::Text(more) = part else {
        parts.push(part);
        return;
    };
    // `$1x` is `$1` and `x`; `$ab_1x` is one name.
    let name_len = match more.bytes().next() {
        Some(b'0'..=b'9') => 1,
        _ => more
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
            .count(),
    };
    let escapes = text
        .bytes()
        .rev()
        .skip(1)
        .take_while(|b| *b == b'\\')
        .count();
    if text.ends_with('$') && escapes % 2 == 0 && name_len > 0 {
        text.pop();
        if text.is_empty() {
            parts.pop();
        }
        parts.push(Part::Var {
            name: more[..name_len].to_owned(),
            quoted: false,
            default: None,
        });
        if name_len < more.len() {
            parts.push(Part::Text(more[name_len..].to_owned()));
        }
    } else {
        text.push_str(&more);
    }
}

struct Fields<'t> {
    name: Option<Node<'t>>,
    arguments: Vec<Node<'t>>,
    redirects: Vec<Node<'t>>,
}

impl<'t> Fields<'t> {
    fn of(command: Node<'t>) -> Fields<'t> {
        let mut fields = Fields {
            name: None,
            arguments: Vec::new(),
            redirects: Vec::new(),
        };
        let mut cursor = command.walk();
        if cursor.goto_first_child() {
            loop {
                match cursor.field_name() {
                    Some("name") => fields.name = Some(cursor.node()),
                    Some("argument") => fields.arguments.push(cursor.node()),
                    Some("redirect") => fields.redirects.push(cursor.node()),
                    _ => {}
                }
                if !cursor.goto_next_sibling() {
                    break;
                }
            }
        }
        fields
    }
}

/// A heredoc's body as bash reads it: the lines up to the first that is exactly the
/// delimiter (after leading tabs, for `<<-`), or to the end of the source. tree-sitter
/// ends a body at a line that only starts with the delimiter (`EOF'`), so bashd finds
/// the end itself.
fn heredoc_body<'t>(rest: &'t str, delimiter: &str, strip_tabs: bool) -> &'t str {
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        let bare = line.strip_suffix('\n').unwrap_or(line);
        let bare = if strip_tabs {
            bare.trim_start_matches('\t')
        } else {
            bare
        };
        if bare == delimiter {
            return &rest[..at];
        }
        at += line.len();
    }
    rest
}

fn last_named_child(node: Node<'_>) -> Option<Node<'_>> {
    node.named_child(u32::try_from(node.named_child_count().checked_sub(1)?).ok()?)
}

#[cfg(test)]
mod tests;

//! What a source defines and what its words expand to. A [`Scope`] is built once per
//! parsed source from everything the source assigns or defines anywhere in it (flow
//! does not matter: a value assigned after a use still counts), and a nested source
//! (`bash -c`, a heredoc fed to a shell, a function called with arguments) sees its
//! outer scopes too. Expansion yields every reading of a command's words whose values
//! are literal in the command; what is not literal is marked unknown, never guessed.

use std::collections::HashMap;

use super::parse::Script;
use super::words::{self, Part, Word, plain, push_literal, unknown};

/// More readings than this of one word, and the command is not checked but refused.
pub const MAX_READINGS: usize = 1024;
/// Variables that name variables are followed this deep.
const MAX_VARIABLE_DEPTH: usize = 8;
/// Words expanded in one scope, values of values included (`a=$b$b; b=$c$c; ...` would
/// otherwise double at each level); past it the command is refused, not checked.
const MAX_EXPANSIONS: usize = 1 << 16;

/// The definitions one source makes, over those of the sources around it.
#[derive(Default)]
pub struct Scope<'a> {
    parent: Option<&'a Scope<'a>>,
    vars: HashMap<&'a str, Vec<&'a [Word]>>,
    functions: HashMap<&'a str, Function<'a>>,
    aliases: HashMap<String, Vec<String>>,
    /// Positional parameters of a function call or `bash -c CODE NAME ARGS`, `$0` first.
    positional: Option<Vec<String>>,
    /// What `set -- ARGS` in the source makes them, `$0` first.
    set_args: Option<Vec<String>>,
    /// Directories a `cd` or `pushd` in the source can move to (patterns).
    pub cwds: Vec<String>,
    /// `git config KEY VALUE` settings the source makes (key lowercased, plain value).
    pub git_config: Vec<(String, String)>,
    /// Words expanded so far, against [`MAX_EXPANSIONS`].
    expansions: std::cell::Cell<usize>,
    /// The separators this source's own `IFS` assignments can make besides blanks
    /// (`IFS=,`), each as plain text: unquoted values split at them too.
    ifs: Vec<String>,
    /// Whether this source assigns `IFS` a value bashd cannot know (`IFS=$1`).
    ifs_unknown: bool,
    /// Whether a value bashd knows was split while `IFS` may be unknown: how it splits
    /// cannot be known, and the command is refused (`Scope::split_blind`).
    split_blind: std::cell::Cell<bool>,
}

/// What bash splits unquoted expansions at when the source does not set `IFS`: bash
/// does not take it from the environment.
const DEFAULT_IFS: &str = " \t\n";

/// A shell function: its body's commands.
#[derive(Clone, Copy)]
pub struct Function<'a> {
    pub script: &'a Script,
    pub commands: &'a [super::parse::Command],
    /// Whether its body reads `$1`, `$@`, ...: only then does a call need a new check.
    pub uses_positional: bool,
}

impl<'a> Scope<'a> {
    /// The scope of `script`, inside `parent`. Aliases, `cd`s and git settings need
    /// expanded words, so they are read after the variables are known.
    pub fn new(script: &'a Script, parent: Option<&'a Scope<'a>>) -> Scope<'a> {
        let mut scope = Scope {
            parent,
            ..Scope::default()
        };
        for assignment in &script.assignments {
            scope
                .vars
                .entry(assignment.name.as_str())
                .or_default()
                .push(&assignment.values);
        }
        for function in &script.functions {
            let commands = &script.commands[function.commands.clone()];
            let uses_positional = commands
                .iter()
                .any(|c| c.words.iter().any(Word::uses_positional));
            scope.functions.insert(
                function.name.as_str(),
                Function {
                    script,
                    commands,
                    uses_positional,
                },
            );
        }
        for command in &script.commands {
            let Some(name) = command.words.first().and_then(Word::literal) else {
                continue;
            };
            match name.as_str() {
                "alias" | "cd" | "pushd" | "git" | "set" | "env" | "sudo" => {}
                _ => continue,
            }
            let (argvs, _) = scope.argvs(&command.words);
            for argv in argvs {
                scope.learn(&name, &argv);
            }
        }
        (scope.ifs, scope.ifs_unknown) = scope.own_ifs();
        scope
    }

    /// The separators this source's `IFS` assignments make, and whether one of them
    /// cannot be known. Flow is not followed, so every value counts everywhere, and
    /// the default too.
    fn own_ifs(&self) -> (Vec<String>, bool) {
        let mut separators = Vec::new();
        let mut unknown = false;
        for elements in self.vars.get("IFS").into_iter().flatten() {
            for element in elements.iter() {
                let (readings, _) = self.expand(element, 1);
                for fields in readings {
                    let value = fields.join(" ");
                    if words::is_unknown(&value) {
                        unknown = true;
                        continue;
                    }
                    let value: String = plain(&value)
                        .chars()
                        .filter(|c| !c.is_whitespace())
                        .collect();
                    if !value.is_empty() && !separators.contains(&value) {
                        separators.push(value);
                    }
                }
            }
        }
        (separators, unknown)
    }

    /// Every `IFS` separator of this source and those around it, and whether one is
    /// unknown.
    fn all_ifs(&self) -> (Vec<&str>, bool) {
        let mut found: Vec<&str> = self.ifs.iter().map(String::as_str).collect();
        let mut unknown = self.ifs_unknown;
        if let Some(parent) = self.parent {
            let (outer, outer_unknown) = parent.all_ifs();
            found.extend(outer);
            unknown |= outer_unknown;
        }
        (found, unknown)
    }

    /// Whether a known value was split while `IFS` could be anything: the command's
    /// words cannot be known, and the policy fails closed.
    pub fn split_blind(&self) -> bool {
        self.split_blind.get()
    }

    /// A scope that binds the positional parameters (`$0` first), for a function call
    /// or `sh -c`.
    pub fn with_positional(parent: Option<&'a Scope<'a>>, args: Vec<String>) -> Scope<'a> {
        Scope {
            parent,
            positional: Some(args),
            ..Scope::default()
        }
    }

    fn learn(&mut self, name: &str, argv: &[String]) {
        let args = &argv[1..];
        match name {
            "alias" => {
                for arg in args {
                    if let Some((alias, value)) = plain(arg).split_once('=') {
                        self.aliases
                            .entry(alias.to_owned())
                            .or_default()
                            .push(value.to_owned());
                    }
                }
            }
            "cd" | "pushd" => {
                match args
                    .iter()
                    .find(|a| !a.starts_with('-') || a.as_str() == "-")
                {
                    Some(dir) if dir == "-" => {}
                    Some(dir) => self.cwds.push(dir.clone()),
                    None if args.is_empty() => self.cwds.push("~".into()),
                    None => {}
                }
            }
            "git" => {
                if let Some(setting) = super::git::config_setting(args) {
                    self.git_config.push(setting);
                }
            }
            // `set -- ARGS` sets the positional parameters.
            "set" if args.first().is_some_and(|a| a == "--") => {
                self.set_args = Some(words::with_unknown_zero(&args[1..]));
            }
            // `env -C DIR` and `sudo -D DIR` run their command in DIR.
            "env" | "sudo" => {
                let short = if name == "env" { "-C" } else { "-D" };
                for (at, arg) in args.iter().enumerate() {
                    let text = plain(arg);
                    if text == short || text == "--chdir" {
                        self.cwds.extend(args.get(at + 1).cloned());
                    } else if let Some(dir) = text
                        .strip_prefix("--chdir=")
                        .or_else(|| text.strip_prefix(short).filter(|d| !d.is_empty()))
                    {
                        self.cwds.push(dir.to_owned());
                    }
                }
            }
            _ => {}
        }
    }

    pub fn function(&self, name: &str) -> Option<Function<'a>> {
        match self.functions.get(name) {
            Some(function) => Some(*function),
            None => self.parent.and_then(|p| p.function(name)),
        }
    }

    pub fn aliases(&self, name: &str) -> Vec<&str> {
        let mut found: Vec<&str> = self
            .aliases
            .get(name)
            .map(|values| values.iter().map(String::as_str).collect())
            .unwrap_or_default();
        if let Some(parent) = self.parent {
            found.extend(parent.aliases(name));
        }
        found
    }

    /// Every directory the source may have moved to, innermost scope first.
    pub fn all_cwds(&self) -> Vec<&str> {
        let mut found: Vec<&str> = self.cwds.iter().map(String::as_str).collect();
        if let Some(parent) = self.parent {
            found.extend(parent.all_cwds());
        }
        found
    }

    /// Every `git config` setting of this source and those around it.
    pub fn all_git_config(&self) -> Vec<(&str, &str)> {
        let mut found: Vec<(&str, &str)> = self
            .git_config
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some(parent) = self.parent {
            found.extend(parent.all_git_config());
        }
        found
    }

    fn assigned(&self, name: &str) -> Vec<&'a [Word]> {
        let mut found = self.vars.get(name).cloned().unwrap_or_default();
        if let Some(parent) = self.parent {
            found.extend(parent.assigned(name));
        }
        found
    }

    fn positional(&self) -> Option<&[String]> {
        match (&self.positional, &self.set_args) {
            (Some(args), _) | (None, Some(args)) => Some(args),
            (None, None) => self.parent.and_then(|p| p.positional()),
        }
    }

    /// Every reading of a command's words, each an argv of patterns, and whether some
    /// word had more readings than [`MAX_READINGS`]. When the readings of all words
    /// together would be too many, each word's readings are tried with the others at
    /// their first, which still tries every value of every word.
    pub fn argvs(&self, words: &[Word]) -> (Vec<Vec<String>>, bool) {
        let mut too_many = false;
        let readings: Vec<Vec<Vec<String>>> = words
            .iter()
            .map(|word| {
                let (alternatives, over) = self.expand(word, 0);
                too_many |= over;
                alternatives
            })
            .collect();
        let total = readings
            .iter()
            .try_fold(1usize, |n, r| n.checked_mul(r.len().max(1)))
            .unwrap_or(usize::MAX);
        let mut argvs: Vec<Vec<String>> = Vec::new();
        if total <= MAX_READINGS {
            // Odometer over the readings of each word; each argv is built once.
            let mut chosen = vec![0usize; readings.len()];
            loop {
                let mut argv = Vec::with_capacity(readings.len());
                for (word, &at) in readings.iter().zip(&chosen) {
                    if let Some(fields) = word.get(at) {
                        argv.extend(fields.iter().cloned());
                    }
                }
                argvs.push(argv);
                let mut digit = 0;
                loop {
                    if digit == chosen.len() {
                        break;
                    }
                    chosen[digit] += 1;
                    if chosen[digit] < readings[digit].len() {
                        break;
                    }
                    chosen[digit] = 0;
                    digit += 1;
                }
                if digit == chosen.len() {
                    break;
                }
            }
        } else {
            let first = |word: &Vec<Vec<String>>| word.first().cloned().unwrap_or_default();
            argvs.clear();
            for (at, word) in readings.iter().enumerate() {
                for fields in word {
                    let mut argv = Vec::new();
                    for (other, words) in readings.iter().enumerate() {
                        if other == at {
                            argv.extend(fields.iter().cloned());
                        } else {
                            argv.extend(first(words));
                        }
                    }
                    argvs.push(argv);
                }
            }
        }
        argvs.retain(|argv| !argv.is_empty());
        (argvs, too_many || self.expansions.get() > MAX_EXPANSIONS)
    }

    /// The readings of one word: each a list of fields (a word can split into several,
    /// or vanish). The flag says the readings were cut at [`MAX_READINGS`].
    pub fn expand(&self, word: &Word, depth: usize) -> (Vec<Vec<String>>, bool) {
        if let [Part::Text(text)] = word.parts.as_slice() {
            return (vec![vec![text.clone()]], false);
        }
        self.expansions.set(self.expansions.get() + 1);
        if self.expansions.get() > MAX_EXPANSIONS {
            return (vec![vec![unknown("...")]], true);
        }
        let mut alternatives = vec![Fields::default()];
        let mut over = false;
        for part in &word.parts {
            let pieces = self.pieces(part, depth);
            if pieces.len() == 1 {
                for fields in &mut alternatives {
                    fields.add(&pieces[0]);
                }
                continue;
            }
            let mut next = Vec::new();
            for fields in &alternatives {
                for piece in &pieces {
                    if next.len() >= MAX_READINGS {
                        over = true;
                        break;
                    }
                    let mut longer = fields.clone();
                    longer.add(piece);
                    next.push(longer);
                }
            }
            alternatives = next;
        }
        let readings = alternatives.into_iter().map(Fields::finish).collect();
        (readings, over)
    }

    /// The alternatives one part can expand to: an unquoted value also split at each
    /// `IFS` separator the source can set.
    fn pieces(&self, part: &Part, depth: usize) -> Vec<Piece> {
        let pieces = self.unsplit_pieces(part, depth);
        let (separators, unknown) = self.all_ifs();
        if separators.is_empty() && !unknown {
            return pieces;
        }
        let mut all = Vec::with_capacity(pieces.len());
        for piece in pieces {
            if let Piece::Value {
                elements,
                quoted: false,
                separate,
            } = &piece
            {
                let known = elements
                    .iter()
                    .any(|e| !e.is_empty() && !words::is_unknown(e));
                if unknown && known {
                    self.split_blind.set(true);
                }
                for separator in &separators {
                    let split: Vec<String> =
                        elements.iter().map(|e| split_at(e, separator)).collect();
                    if split != *elements {
                        all.push(Piece::value(split, false, *separate));
                    }
                }
            }
            all.push(piece);
        }
        all
    }

    fn unsplit_pieces(&self, part: &Part, depth: usize) -> Vec<Piece> {
        match part {
            Part::Text(pattern) => vec![Piece::Text(pattern.clone())],
            Part::Workdir => vec![Piece::Text("~+".into())],
            Part::Unknown { text } => vec![Piece::Text(unknown(text))],
            Part::File { text: Some(text) } => {
                vec![Piece::Text(format!("{}{text}", words::FILE_TEXT))]
            }
            Part::File { text: None } => vec![Piece::Text(unknown("<(...)"))],
            Part::Output { text, quoted } => {
                let value = match text {
                    Some(text) => {
                        let mut pattern = String::new();
                        push_literal(&mut pattern, text.trim_end_matches('\n'));
                        pattern
                    }
                    None => unknown("$(...)"),
                };
                vec![Piece::value(vec![value], *quoted, false)]
            }
            Part::Alternate { word, quoted } => {
                let (readings, _) = self.expand(word, depth + 1);
                let mut pieces = vec![Piece::value(Vec::new(), *quoted, false)];
                pieces.extend(
                    readings
                        .into_iter()
                        .map(|fields| Piece::value(vec![fields.join(" ")], *quoted, false)),
                );
                pieces
            }
            Part::Var {
                name,
                quoted,
                default,
            } => {
                let mut pieces: Vec<Piece> = self
                    .values(name, depth)
                    .into_iter()
                    .map(|(elements, separate)| Piece::value(elements, *quoted, separate))
                    .collect();
                if let Some(default) = default {
                    let (readings, _) = self.expand(default, depth + 1);
                    pieces.extend(
                        readings
                            .into_iter()
                            .map(|fields| Piece::value(vec![fields.join(" ")], *quoted, false)),
                    );
                }
                pieces
            }
        }
    }

    /// The values a variable can have: each a list of elements, and whether quoting
    /// keeps them separate words (`"$@"`, `"${a[@]}"`).
    fn values(&self, name: &str, depth: usize) -> Vec<(Vec<String>, bool)> {
        if words::is_positional(name) {
            return match self.positional() {
                Some(args) if name == "@" || name == "*" => {
                    vec![(args.get(1..).unwrap_or_default().to_vec(), name == "@")]
                }
                Some(args) => {
                    let at: usize = name.parse().unwrap_or(usize::MAX);
                    vec![(args.get(at).cloned().into_iter().collect(), false)]
                }
                None => vec![(vec![unknown(&format!("${name}"))], false)],
            };
        }
        let assigned = self.assigned(name);
        if assigned.is_empty() || depth >= MAX_VARIABLE_DEPTH {
            let value = match name {
                // Bare, so the path rules read them as the home and working directories.
                "HOME" if depth < MAX_VARIABLE_DEPTH => "~".to_owned(),
                "PWD" if depth < MAX_VARIABLE_DEPTH => "~+".to_owned(),
                // bash starts with this IFS whatever the environment says; past the
                // depth limit it is a cycle (`old=$IFS; IFS=$old`), whose other values
                // are counted where the cycle starts.
                "IFS" => DEFAULT_IFS.to_owned(),
                _ => unknown(&format!("${name}")),
            };
            return vec![(vec![value], false)];
        }
        let mut values = Vec::new();
        // The environment's value stays possible: an assignment may come after the use,
        // or be a prefix that does not reach the command's own words.
        match name {
            "HOME" => values.push((vec!["~".to_owned()], false)),
            "PWD" => values.push((vec!["~+".to_owned()], false)),
            "IFS" => values.push((vec![DEFAULT_IFS.to_owned()], false)),
            _ => {}
        }
        for elements in assigned {
            let mut readings: Vec<Vec<String>> = vec![Vec::new()];
            for element in elements {
                let (alternatives, _) = self.expand(element, depth + 1);
                let mut next = Vec::new();
                for reading in &readings {
                    for fields in &alternatives {
                        let mut longer = reading.clone();
                        // An assignment does not split: a scalar is one value.
                        if elements.len() == 1 {
                            longer.push(fields.join(" "));
                        } else {
                            longer.extend(fields.iter().cloned());
                        }
                        next.push(longer);
                    }
                    if next.len() >= MAX_READINGS {
                        break;
                    }
                }
                readings = next;
            }
            values.extend(readings.into_iter().map(|r| (r, elements.len() > 1)));
        }
        values
    }
}

/// What one part adds to a word being expanded.
enum Piece {
    /// Literal text: never split.
    Text(String),
    /// The value of an expansion: quoted, it joins the word (or, `"$@"`, several
    /// words); unquoted, it splits at whitespace and its globs are live.
    Value {
        elements: Vec<String>,
        quoted: bool,
        separate: bool,
    },
}

impl Piece {
    fn value(elements: Vec<String>, quoted: bool, separate: bool) -> Piece {
        Piece::Value {
            elements,
            quoted,
            separate,
        }
    }
}

/// The fields of one reading of a word, the last still open.
#[derive(Clone, Default)]
struct Fields {
    done: Vec<String>,
    current: String,
    /// Whether `current` is a field even when empty (`''`, `"$x"`).
    open: bool,
}

impl Fields {
    fn add(&mut self, piece: &Piece) {
        match piece {
            Piece::Text(text) => {
                self.current.push_str(text);
                self.open = true;
            }
            Piece::Value {
                elements,
                quoted: true,
                separate,
            } => {
                let mut elements = elements.iter().map(|e| quote(e));
                if *separate {
                    if let Some(first) = elements.next() {
                        self.current.push_str(&first);
                        self.open = true;
                    }
                    for element in elements {
                        self.close();
                        self.current = element;
                        self.open = true;
                    }
                } else {
                    let joined: Vec<String> = elements.collect();
                    self.current.push_str(&joined.join(" "));
                    self.open = true;
                }
            }
            Piece::Value {
                elements,
                quoted: false,
                ..
            } => {
                for (i, element) in elements.iter().enumerate() {
                    let live = words::live_globs(element);
                    if i > 0 {
                        self.close();
                    }
                    let starts_blank = live.starts_with(char::is_whitespace);
                    let ends_blank = live.ends_with(char::is_whitespace);
                    let mut fields = live.split_whitespace();
                    if starts_blank {
                        self.close();
                    }
                    if let Some(first) = fields.next() {
                        self.current.push_str(first);
                        self.open = true;
                    }
                    for field in fields {
                        self.close();
                        self.current.push_str(field);
                        self.open = true;
                    }
                    if ends_blank {
                        self.close();
                    }
                }
            }
        }
    }

    fn close(&mut self) {
        if self.open || !self.current.is_empty() {
            self.done.push(std::mem::take(&mut self.current));
        }
        self.open = false;
    }

    fn finish(mut self) -> Vec<String> {
        self.close();
        self.done
    }
}

/// A value's pattern with each character of `separator` (bare or escaped) made a
/// blank, so that [`Fields::add`] splits there as bash does with that `IFS`.
fn split_at(pattern: &str, separator: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(next) if separator.contains(next) => out.push(' '),
                Some(next) => {
                    out.push('\\');
                    out.push(next);
                }
                None => out.push('\\'),
            }
        } else if separator.contains(c) {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// A value used inside double quotes: its globs become literal.
fn quote(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut escaped = false;
    for c in pattern.chars() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if matches!(c, '*' | '?' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::parse;
    use super::*;

    fn argvs(source: &str) -> Vec<Vec<String>> {
        let tree = parse::parse(source, Instant::now() + Duration::from_secs(10)).unwrap();
        let script = parse::script(&tree, source);
        let scope = Scope::new(&script, None);
        scope.argvs(&script.commands[0].words).0
    }

    #[test]
    fn literal_values_are_every_reading() {
        assert_eq!(argvs("c=rm; $c -rf /"), [["rm", "-rf", "/"]]);
        assert_eq!(argvs("c='rm -rf'; $c /"), [["rm", "-rf", "/"]]);
        assert_eq!(argvs("c='rm -rf'; \"$c\" /"), [["rm -rf", "/"]]);
        assert_eq!(argvs("a=(rm -rf /); \"${a[@]}\""), [["rm", "-rf", "/"]]);
        assert_eq!(argvs("c=ls; c=rm; $c"), [["ls"], ["rm"]]);
        assert_eq!(argvs("for c in ls rm; do $c; done"), [["ls"], ["rm"]]);
        assert_eq!(argvs("$(echo rm) -rf"), [["rm", "-rf"]]);
    }

    #[test]
    fn home_and_workdir_stay_symbolic_and_unknowns_are_marked() {
        assert_eq!(
            argvs("rm \"$HOME\" ${HOME} $PWD/x \"$(pwd)\""),
            [["rm", "~", "~", "~+/x", "~+"]]
        );
        assert_eq!(argvs("rm \"$X\""), [["rm", "\u{1}$X"]]);
        assert_eq!(argvs("rm ${X:-/}"), [["rm", "\u{1}$X"], ["rm", "/"]]);
    }

    #[test]
    fn quoting_decides_whether_a_glob_is_live() {
        assert_eq!(argvs("x='*'; rm $x \"$x\""), [["rm", "*", "\\*"]]);
        assert_eq!(argvs("x=; rm $x \"$x\""), [["rm", ""]]);
    }
}

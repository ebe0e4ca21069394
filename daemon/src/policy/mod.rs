//! The command policy (DESIGN §10): every command is parsed before it runs, and one
//! that matches a rule is refused with a message that names the rule and a safer way.
//! Rules see through wrappers (`sudo`, `env`, `timeout`, `xargs`, ...), nesting
//! (pipelines, lists, subshells, substitutions, function bodies) and the strings
//! run by `bash -c`, `sh -c` and `eval`, which are parsed again.

mod parse;
mod rules;

use std::collections::HashSet;

pub use rules::{BUILTIN_RULES, CustomRule};

/// How many times a string run by `bash -c` or `eval` is parsed again, nested.
const MAX_DEPTH: usize = 8;
/// How many wrappers are peeled off one command (`sudo env nice timeout 5 ...`).
const MAX_WRAPPERS: usize = 16;

/// A refusal: the rule and what to tell the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub rule: String,
    /// Starts with `permission denied: <rule>:`.
    pub message: String,
}

impl Denial {
    fn new(rule: &str, why: &str) -> Denial {
        Denial {
            rule: rule.to_owned(),
            message: format!("permission denied: {rule}: {why}"),
        }
    }
}

/// The rules in force: the built-in ones less those the config disables, plus the
/// config's own. Only the daemon's config changes it; a client cannot.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    disabled: HashSet<String>,
    custom: Vec<CustomRule>,
}

impl Policy {
    pub fn new(disabled: impl IntoIterator<Item = String>, custom: Vec<CustomRule>) -> Policy {
        Policy {
            disabled: disabled.into_iter().collect(),
            custom,
        }
    }

    /// Checks a whole command line; `Err` names the first rule it breaks.
    pub fn check(&self, command: &str) -> Result<(), Denial> {
        self.check_source(command, 0)
    }

    fn check_source(&self, source: &str, depth: usize) -> Result<(), Denial> {
        if depth > MAX_DEPTH {
            return Err(Denial::new(
                "nesting",
                &format!(
                    "the command nests bash -c or eval more than {MAX_DEPTH} levels deep, too deep to check; run the inner command directly"
                ),
            ));
        }
        let Some(tree) = parse::parse(source) else {
            return Err(Denial::new(
                "unparsable",
                "bashd could not parse the command to check it; simplify it or put it in a script file",
            ));
        };
        for argv in parse::commands(&tree, source) {
            self.check_argv(&argv, depth)?;
        }
        Ok(())
    }

    /// One simple command: peel wrappers off, follow nested shells, then apply rules.
    fn check_argv(&self, argv: &[String], depth: usize) -> Result<(), Denial> {
        let mut argv = argv;
        for _ in 0..MAX_WRAPPERS {
            let Some(first) = argv.first() else {
                return Ok(());
            };
            match rules::step(command_name(first), &argv[1..]) {
                rules::Step::Run(inner) => argv = inner,
                rules::Step::Source(source) => return self.check_source(&source, depth + 1),
                rules::Step::Commands(commands) => {
                    for inner in commands {
                        self.check_argv(inner, depth)?;
                    }
                    return Ok(());
                }
                rules::Step::Final => return self.apply_rules(argv),
            }
        }
        Ok(())
    }

    fn apply_rules(&self, argv: &[String]) -> Result<(), Denial> {
        let name = command_name(&argv[0]);
        let args = &argv[1..];
        for rule in BUILTIN_RULES {
            if !self.disabled.contains(rule.id) && (rule.matches)(name, args) {
                return Err(Denial::new(rule.id, rule.message));
            }
        }
        for rule in &self.custom {
            if rule.matches(name, args) {
                return Err(Denial::new(&rule.id, &rule.message));
            }
        }
        Ok(())
    }
}

/// `/usr/bin/git` is `git`.
fn command_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

#[cfg(test)]
mod tests;

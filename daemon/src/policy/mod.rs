//! The command policy (DESIGN §10): every command is parsed before it runs, and one
//! that matches a rule is refused with a message that names the rule and a safer way.
//! The request task calls [`Policy::check_in`] with the job's workdir (`bashc policy
//! check` with the caller's; [`Policy::check`] when there is none) before the actor
//! sees the request.
//!
//! How a command is read: `parse/` turns the source into a script of simple commands
//! with structured words (`words.rs`) and the literal text on their stdin; `scope.rs`
//! knows what the source assigns and defines and expands words into every reading they
//! can have; `wrappers/` says what each command runs besides itself (wrappers and their
//! option tables, shells and the code they are given, `xargs`, `find`, `parallel`);
//! `git.rs` reads git; `paths.rs` says what a path means; `rules.rs` holds the rules;
//! `corpus.txt` holds the cases that pin all of it down, each with its reason.
//!
//! Decisions:
//!
//! - **It fails closed.** Every limit denies with a rule of its own and says what could
//!   not be checked and how to write the command plainly: `nesting` (code run by code
//!   more than [`MAX_DEPTH`] levels deep, or functions calling functions more than 32
//!   deep), `wrapper-depth` (more than 1,024 wrappers on one command, or 128 nested
//!   commands that each run several), `parse-error` (a syntax error that leaves words
//!   outside every command), `nul-byte`, `parse-timeout` (parsing took over 5 s in
//!   all), `too-complex` (more commands to check than [`MIN_CHECKS`] plus one for
//!   every two bytes of the command, a word with more than 1,024 readings, or braces
//!   that expand to more than 4,096 words), `dynamic-ifs` (the command sets `IFS` to a
//!   value bashd cannot know and splits a known value with it), and `unparsable`.
//!   These cannot be
//!   switched off with `disable`. An unterminated quote is still allowed when the only
//!   commands are inside the broken string, since bash runs none of it.
//! - **Meaning, not spelling.** Quoting is removed as bash removes it, and a quoted or
//!   escaped `*` stays a literal `*`. Path arguments are normalised lexically (`.`,
//!   `..`, `//`, trailing slashes, `~`, `~user`, `$HOME`, `${HOME:-...}`,
//!   `${HOME:?}`, `${x:+word}`, and a value an operator changes (`${HOME%/}`) as the
//!   value or an unknown; `$PWD`,
//!   `$(pwd)` and `~+` are the job's workdir), brace expansions are expanded, and
//!   globs are matched against the protected set (`/u*` can be `/usr`), as `paths.rs`
//!   says. A `cd`, `pushd`, `env -C` or `sudo -D` to a literal directory anywhere in
//!   the command adds that directory to those relative paths are judged from. The home
//!   is the daemon's `HOME` (jobs run as the same user); every user's home is
//!   protected anyway.
//! - **Literal values are followed, the rest is not guessed.** A variable, array,
//!   `for` variable, `set --`, alias or function defined in the same command is
//!   expanded to every literal value it is given anywhere in it (flow is not followed:
//!   a value assigned later counts too), and so is `$(echo ...)`. Unquoted values
//!   split at blanks and at every `IFS` the command sets (bash never takes `IFS` from
//!   the environment, so `$IFS` alone is a blank). An expansion whose
//!   value is not in the command (`$X` from the environment, `$(cat file)`, code in a
//!   script file, `curl ... | bash`) is an opaque word: nothing is assumed about it,
//!   except that a command *named* by one is denied (`dynamic-command`, a built-in
//!   rule) when its arguments alone would make rm destroy a protected path, and that
//!   one given `-c CODE` or literal stdin may be a shell (`$SHELL -c ...`): the code
//!   is checked (a syntax error in it is not held against it: it may be Python's).
//! - **Code fed to a shell is code.** The code of `bash -c` (with its `$0`, `$1`...),
//!   `eval`, `env -S`, `trap`, `su -c`, `flock -c`, `script -c`, `watch`, `parallel`,
//!   git `!` aliases and git settings that run commands (`core.pager`, ...) is parsed
//!   and checked, and so is the stdin of a shell when the command makes it literal (a
//!   heredoc, a here-string, `echo`/`printf`/`cat <<`/`tee` piped in), and the file of
//!   `source <(echo ...)` or `bash <(echo ...)`. An unquoted heredoc is read as the
//!   shell hands it over, its expansions spelled as written. `xargs` with literal
//!   input (stdin, `-a <(...)`, `-a /dev/stdin`) runs its command with that input, a
//!   leading `~`, `$HOME` or `$PWD` in it read as the outer shell expands them; `find -exec ... {}` and `-delete` act on
//!   each path find can hand over (see `wrappers/builders.rs`).
//! - **Rules apply at every level**: to a wrapper as well as to the command it runs, so
//!   a custom rule on `find` or `sudo` matches. A function called with arguments is
//!   checked again with them (`f(){ rm -rf "$1"; }; f /`), once per call chain: a
//!   function that calls itself is not expanded again.
//! - **Known blind spots**: other languages' code (`python -c`, `perl -e`), remote
//!   commands (`ssh host ...`), what a script file or a variable from the environment
//!   holds, and what commands other than `echo`, `printf`, `cat` and `tee` print. The
//!   policy is a guard against mistakes and casual evasion, not a sandbox; DESIGN §15's
//!   sandbox is that.

mod git;
mod parse;
mod paths;
mod rules;
mod scope;
mod verdicts;
mod words;
mod wrappers;

use std::collections::HashSet;
use std::time::{Duration, Instant};

pub use rules::{BUILTIN_RULES, CustomRule};

use parse::ParseError;
use paths::{Places, Target};
use rules::Call;
use scope::Scope;
use words::{is_unknown, plain, to_shell};
use wrappers::{Next, Step};

/// How many times code run by code (`bash -c`, `eval`, a heredoc fed to a shell, an
/// alias) is parsed again, nested.
pub const MAX_DEPTH: usize = 8;
/// How many wrappers one command may have before the check gives up (and denies).
const MAX_WRAPPERS: usize = 1024;
/// How many nested commands that each run several (`find -exec`, `flock`, a wrapper
/// with an option it does not know) one command may have.
const MAX_BRANCHES: usize = 128;
/// How many simple commands one check may look at, counting every reading, wrapper and
/// function call, is this plus one for every two bytes of the command: a 1 MiB command
/// of short lines has about 100,000, and a short one cannot make the check run long
/// (it is checked on the request's async task).
pub const MIN_CHECKS: usize = 4096;
/// How long all the parsing of one check may take.
const PARSE_BUDGET: Duration = Duration::from_secs(5);

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
#[derive(Debug, Clone)]
pub struct Policy {
    disabled: HashSet<String>,
    custom: Vec<CustomRule>,
    /// The daemon's home: jobs run as the same user. `None` if `HOME` is not set, and
    /// then `~` still counts as some user's home.
    home: Option<String>,
    /// The verdicts given lately (`verdicts.rs`); a clone starts with none.
    verdicts: verdicts::Verdicts,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy::new(Vec::new(), Vec::new())
    }
}

impl Policy {
    pub fn new(disabled: impl IntoIterator<Item = String>, custom: Vec<CustomRule>) -> Policy {
        Policy {
            disabled: disabled.into_iter().collect(),
            custom,
            home: std::env::var("HOME").ok().filter(|h| h.starts_with('/')),
            verdicts: verdicts::Verdicts::default(),
        }
    }

    /// The same rules, with `home` as the user's home.
    pub fn with_home(mut self, home: Option<&str>) -> Policy {
        self.home = home.map(str::to_owned);
        self.verdicts = verdicts::Verdicts::default();
        self
    }

    /// Checks a whole command line whose working directory is not known; `Err` names
    /// the first rule it breaks.
    pub fn check(&self, command: &str) -> Result<(), Denial> {
        self.check_in(command, None)
    }

    /// [`Policy::check_in`], remembering the verdict: a command checked before in the
    /// same workdir, under this policy, gets the same verdict without being parsed
    /// again (`verdicts.rs` says why that is the same).
    pub fn verdict(&self, command: String, workdir: Option<String>) -> Result<(), Denial> {
        self.verdicts
            .get_or_check(command, workdir, |command, workdir| {
                self.check_in(command, workdir)
            })
    }

    /// Checks a command that runs in `workdir` (an absolute path), against which
    /// relative paths, `$PWD` and `$(pwd)` are read.
    pub fn check_in(&self, command: &str, workdir: Option<&str>) -> Result<(), Denial> {
        let mut checker = Checker {
            policy: self,
            places: Places::new(self.home.as_deref(), workdir),
            deadline: Instant::now() + PARSE_BUDGET,
            checks: 0,
            max_checks: MIN_CHECKS + command.len() / 2,
            calls: Vec::new(),
            aliases: Vec::new(),
            branches: 0,
        };
        checker.source(command, 0, None, None, None)
    }
}

/// The state of one check.
struct Checker<'p> {
    policy: &'p Policy,
    places: Places,
    deadline: Instant,
    /// Simple commands looked at so far, against `max_checks`.
    checks: usize,
    max_checks: usize,
    /// Functions being expanded, innermost last.
    calls: Vec<String>,
    /// Aliases being expanded: bash does not expand an alias inside itself.
    aliases: Vec<String>,
    /// Nested commands that each run several, against [`MAX_BRANCHES`].
    branches: usize,
}

impl Checker<'_> {
    /// Checks one source: the command, or code a command in it runs. `stdin` is the
    /// literal text the code's own stdin gets, if known, for the commands in it that
    /// do not redirect theirs (`bash -c 'bash -s' <<< CODE`).
    fn source(
        &mut self,
        source: &str,
        depth: usize,
        outer: Option<&Scope<'_>>,
        positional: Option<Vec<String>>,
        stdin: Option<&str>,
    ) -> Result<(), Denial> {
        if depth > MAX_DEPTH {
            return Err(Denial::new(
                "nesting",
                &format!(
                    "the command runs code that runs code (bash -c, eval, a heredoc or pipe into a shell, an alias) more than {MAX_DEPTH} levels deep, too deep to check; run the inner command directly"
                ),
            ));
        }
        if source.contains('\0') {
            return Err(Denial::new(
                "nul-byte",
                "the command holds a NUL byte, which bash cannot be given and bashd cannot check; remove it, or write it as $'\\0' in the command's text",
            ));
        }
        let tree = parse::parse(source, self.deadline).map_err(|error| match error {
            ParseError::Timeout => Denial::new(
                "parse-timeout",
                &format!(
                    "parsing the command to check it took longer than {} s; put it in a script file and run that, or split it into smaller commands",
                    PARSE_BUDGET.as_secs()
                ),
            ),
            ParseError::Failed => Denial::new(
                "unparsable",
                "bashd could not parse the command to check it; simplify it or put it in a script file",
            ),
        })?;
        let script = parse::script(&tree, source);
        if let Some(hidden) = &script.hidden {
            return Err(Denial::new(
                "parse-error",
                &format!(
                    "the command has a syntax error that leaves words outside any command bashd can check (near {:?}); fix the syntax or split the command",
                    cut(hidden, 40)
                ),
            ));
        }
        let bound;
        let outer = match positional {
            Some(args) => {
                bound = Scope::with_positional(outer, args);
                Some(&bound)
            }
            None => outer,
        };
        let scope = Scope::new(&script, outer);
        self.commands(&script.commands, &scope, depth, stdin)
    }

    fn commands(
        &mut self,
        commands: &[parse::Command],
        scope: &Scope<'_>,
        depth: usize,
        stdin: Option<&str>,
    ) -> Result<(), Denial> {
        let cwds = paths::cwds(&self.places, &scope.all_cwds());
        for command in commands {
            let (mut argvs, too_many) = scope.argvs(&command.words);
            if too_many {
                return Err(too_complex());
            }
            if scope.split_blind() {
                return Err(Denial::new(
                    "dynamic-ifs",
                    "the command sets IFS to a value bashd cannot know (IFS=$1, IFS=$(...)), so how its unquoted expansions split into words cannot be checked; set IFS to a literal value, or quote the expansions",
                ));
            }
            // Readings with a known name first, so a command that is rm by one reading
            // is refused as rm rather than as an unknown name.
            argvs.sort_by_key(|argv| argv.first().is_some_and(|name| is_unknown(name)));
            let stdin = command.stdin.as_deref().or(stdin);
            for argv in argvs {
                self.argv(&argv, stdin, scope, &cwds, depth, 0)?;
            }
        }
        Ok(())
    }

    /// One simple command: rules, then what it runs, through wrappers, functions and
    /// aliases. A wrapper that runs one command is followed in this loop; one that runs
    /// several (find -exec, an ambiguous option) recurses, at most [`MAX_BRANCHES`]
    /// deep, so no command can exhaust the stack.
    fn argv(
        &mut self,
        mut argv: &[String],
        stdin: Option<&str>,
        scope: &Scope<'_>,
        cwds: &[Target],
        depth: usize,
        mut wrappers: usize,
    ) -> Result<(), Denial> {
        loop {
            self.checks += 1;
            if self.checks > self.max_checks {
                return Err(too_complex());
            }
            if wrappers > MAX_WRAPPERS || self.branches > MAX_BRANCHES {
                return Err(Denial::new(
                    "wrapper-depth",
                    &format!(
                        "the command is wrapped in more than {MAX_WRAPPERS} commands (sudo, nice, env, ...), or in {MAX_BRANCHES} that each run several, too many to check; run the inner command directly"
                    ),
                ));
            }
            let Some((first, args)) = argv.split_first() else {
                return Ok(());
            };
            if is_unknown(first) {
                self.rules(None, args, scope, cwds)?;
                return self.maybe_shell(args, stdin, scope, cwds, depth, wrappers);
            }
            let full = plain(first);
            let name = full.rsplit('/').next().unwrap_or(&full);
            self.rules(Some(name), args, scope, cwds)?;
            self.call(name, args, scope, depth)?;
            for alias in scope.aliases(name) {
                if self.aliases.iter().any(|a| a == name) {
                    continue;
                }
                // bash replaces the name with the alias's text and reads the line again.
                let rest: Vec<String> = args.iter().map(|a| to_shell(a)).collect();
                let line = format!("{alias} {}", rest.join(" "));
                self.aliases.push(name.to_owned());
                let result = self.source(&line, depth + 1, Some(scope), None, stdin);
                self.aliases.pop();
                result?;
            }
            match wrappers::step(name, args, stdin, scope) {
                Step::Run(inner) => {
                    argv = inner;
                    wrappers += 1;
                }
                Step::Many(next) => {
                    self.branches += 1;
                    let result = self.each(next, stdin, scope, cwds, depth, wrappers + 1);
                    self.branches -= 1;
                    return result;
                }
                Step::Final => return Ok(()),
            }
        }
    }

    fn each(
        &mut self,
        next: Vec<Next>,
        stdin: Option<&str>,
        scope: &Scope<'_>,
        cwds: &[Target],
        depth: usize,
        wrappers: usize,
    ) -> Result<(), Denial> {
        for next in next {
            match next {
                Next::Argv(inner) => self.argv(&inner, stdin, scope, cwds, depth, wrappers)?,
                Next::Code {
                    code,
                    args,
                    shares_stdin,
                } => {
                    let stdin = stdin.filter(|_| shares_stdin);
                    self.source(&code, depth + 1, Some(scope), args, stdin)?
                }
            }
        }
        Ok(())
    }

    /// A command whose name bashd cannot know may be a shell (`$SHELL -c CODE`,
    /// `echo CODE | $BASH`): the code a shell would run is checked as code. A syntax
    /// error in it is not held against the command, which may be another language's
    /// (`$PYTHON -c 'print(1)'`); every other denial is.
    fn maybe_shell(
        &mut self,
        args: &[String],
        stdin: Option<&str>,
        scope: &Scope<'_>,
        cwds: &[Target],
        depth: usize,
        wrappers: usize,
    ) -> Result<(), Denial> {
        let Step::Many(next) = wrappers::shell_step(args, stdin) else {
            return Ok(());
        };
        self.branches += 1;
        let mut result = Ok(());
        for one in next {
            match self.each(vec![one], stdin, scope, cwds, depth, wrappers + 1) {
                Err(denial) if matches!(denial.rule.as_str(), "parse-error" | "unparsable") => {}
                other => result = result.and(other),
            }
        }
        self.branches -= 1;
        result
    }

    /// A shell function defined in the command, called with arguments its body reads:
    /// its body is checked again with them. A function already being expanded is not
    /// expanded again (its body was checked at the first call, and a recursion that
    /// builds new arguments would not end); a chain of more than [`MAX_DEPTH`] * 4
    /// different functions is refused.
    fn call(
        &mut self,
        name: &str,
        args: &[String],
        scope: &Scope<'_>,
        depth: usize,
    ) -> Result<(), Denial> {
        let Some(function) = scope.function(name) else {
            return Ok(());
        };
        if !function.uses_positional || self.calls.iter().any(|called| called == name) {
            return Ok(());
        }
        if self.calls.len() >= MAX_DEPTH * 4 {
            return Err(Denial::new(
                "nesting",
                &format!(
                    "the command's functions call each other more than {} deep, too deep to check; call the inner commands directly",
                    MAX_DEPTH * 4
                ),
            ));
        }
        self.calls.push(name.to_owned());
        let call = Scope::with_positional(Some(scope), words::with_unknown_zero(args));
        let result = self.commands(function.commands, &call, depth, None);
        self.calls.pop();
        result
    }

    fn rules(
        &self,
        name: Option<&str>,
        args: &[String],
        scope: &Scope<'_>,
        cwds: &[Target],
    ) -> Result<(), Denial> {
        // A rule on paths expands braces; one that expands past the limit is refused
        // rather than checked in part.
        if matches!(name, None | Some("rm"))
            && args.iter().any(|arg| {
                arg.contains('{') && words::braces(arg, rules::MAX_BRACE_WORDS).is_none()
            })
        {
            return Err(too_complex());
        }
        let call = Call {
            name,
            args,
            places: &self.places,
            cwds,
            scope,
        };
        for rule in BUILTIN_RULES {
            if !self.policy.disabled.contains(rule.id) && (rule.matches)(&call) {
                return Err(Denial::new(rule.id, rule.message));
            }
        }
        if let Some(name) = name {
            for rule in &self.policy.custom {
                if rule.matches(name, args) {
                    return Err(Denial::new(&rule.id, &rule.message));
                }
            }
        }
        Ok(())
    }
}

fn too_complex() -> Denial {
    Denial::new(
        "too-complex",
        "checking the command means looking at too many commands or readings of its words (values of values, functions calling functions, wrappers with options bashd does not know); write it plainly or put it in a script file",
    )
}

fn cut(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests;

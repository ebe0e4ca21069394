//! Commands that build other commands from their input: `xargs`, `find -exec` and
//! `-delete`, `parallel`.

use super::options::{PARALLEL, XARGS};
use super::{Next, Step, command_starts, wrapped};
use crate::policy::words::{FILE_TEXT, live_globs, plain, push_literal, to_shell, unknown};

/// `xargs [options] COMMAND ARGS`: with literal input, the command with the input's
/// words appended (or put in place of `-I`'s string); otherwise the command alone.
pub(super) fn xargs<'a>(args: &'a [String], stdin: Option<&str>) -> Step<'a> {
    let starts = command_starts(args, &XARGS);
    let Some(&start) = starts.first() else {
        return Step::Final;
    };
    // `-a FILE` (`-aFILE`, `--arg-file=FILE`) reads the input from a file instead:
    // literal if it is `<(echo ...)`, and the literal stdin if it is /dev/stdin.
    let mut file_input = None;
    for (at, arg) in args[..start].iter().enumerate() {
        let file = match plain(arg).as_ref() {
            "-a" | "--arg-file" => args.get(at + 1).map(String::as_str),
            _ => arg
                .strip_prefix("--arg-file=")
                .or_else(|| arg.strip_prefix("-a").filter(|file| !file.is_empty())),
        };
        if let Some(file) = file {
            file_input = Some(match plain(file).as_ref() {
                "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0" => stdin,
                _ => file.strip_prefix(FILE_TEXT),
            });
        }
    }
    let input = match file_input {
        Some(text) => text,
        None => stdin,
    };
    let Some(input) = input else {
        return wrapped(args, &XARGS);
    };
    let options: Vec<String> = args[..start]
        .iter()
        .map(|a| plain(a).into_owned())
        .collect();
    let mut replace: Option<String> = None;
    let mut separator: Option<char> = None;
    for (i, option) in options.iter().enumerate() {
        match option.as_str() {
            "-I" | "--replace" => replace = options.get(i + 1).cloned().or(Some("{}".into())),
            "-i" => replace = Some("{}".into()),
            "-0" | "--null" => separator = Some('\0'),
            "-d" | "--delimiter" => separator = options.get(i + 1).and_then(|d| d.chars().next()),
            _ if option.starts_with("-I") => replace = Some(option[2..].to_owned()),
            _ if option.starts_with("-i") => replace = Some(option[2..].to_owned()),
            _ if option.starts_with("--replace=") => replace = Some(option[10..].to_owned()),
            _ => {}
        }
    }
    let template = &args[start..];
    let items: Vec<String> = match (separator, &replace) {
        (Some(separator), _) => input.split(separator).map(str::to_owned).collect(),
        (None, Some(_)) => input.lines().map(|l| l.trim_start().to_owned()).collect(),
        (None, None) => split_xargs(input),
    };
    let items: Vec<String> = items
        .into_iter()
        .filter(|item| !item.is_empty())
        .map(|item| input_item(&item))
        .collect();
    let mut next = Vec::new();
    match replace {
        Some(replace) => {
            for item in &items {
                let argv = template.iter().map(|w| w.replace(&replace, item)).collect();
                next.push(Next::Argv(argv));
            }
        }
        None => {
            let mut argv = template.to_vec();
            argv.extend(items);
            next.push(Next::Argv(argv));
        }
    }
    if next.is_empty() {
        next.push(Next::Argv(template.to_vec()));
    }
    Step::Many(next)
}

/// One item of xargs's literal input as a pattern. The input is text as the source
/// spells it (`echo ~`, `<<< $HOME`, an unquoted heredoc), so what the outer shell
/// expands in it is read as expanded: a leading `~`, `$HOME` and `$PWD` are the home
/// and the workdir, and any other expansion is unknown. A `~` or `$HOME` that was
/// quoted reads the same: the policy fails closed.
fn input_item(item: &str) -> String {
    let mut pattern = String::new();
    let rest = if let Some(rest) = item.strip_prefix('~') {
        pattern.push('~');
        rest
    } else if let Some(rest) = ["$HOME", "${HOME}"]
        .iter()
        .find_map(|home| item.strip_prefix(home))
        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
    {
        pattern.push('~');
        rest
    } else if let Some(rest) = ["$PWD", "${PWD}"]
        .iter()
        .find_map(|pwd| item.strip_prefix(pwd))
        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
    {
        pattern.push_str("~+");
        rest
    } else {
        item
    };
    if rest.contains('$') {
        return unknown(item);
    }
    push_literal(&mut pattern, rest);
    pattern
}

/// xargs's own splitting: blanks and newlines, with quotes and backslashes.
fn split_xargs(input: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut chars = input.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, '\\') => current.extend(chars.next()),
            (None, c) if c.is_whitespace() => items.push(std::mem::take(&mut current)),
            (None, c) => current.push(c),
        }
    }
    items.push(current);
    items
}

/// Tests that keep `find` from handing over every path under its start points.
const NARROWING_TESTS: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-empty",
    "-newer",
    "-anewer",
    "-cnewer",
    "-newermt",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-size",
    "-links",
    "-inum",
    "-samefile",
    "-used",
    "-lname",
    "-ilname",
];

/// `find START... EXPR`: what `-exec`/`-execdir`/`-ok` run, with `{}` as each path find
/// can hand over, and `-delete` as `rm -rf` of those paths. Each `-o` branch is read on
/// its own, so `-path ./.git -prune -o ... -exec` judges only the paths of its branch.
/// The paths: those named by a `-name`/`-path` pattern (`START/NAME`), else, when no
/// test narrows the match, the start points themselves (unless `-mindepth 1`) and
/// everything in them (`START/*`).
pub(super) fn find(args: &[String]) -> Step<'_> {
    let mut i = 0;
    while i < args.len() && matches!(plain(&args[i]).as_ref(), "-H" | "-L" | "-P") {
        i += 1;
    }
    let starts_at = i;
    while i < args.len() && {
        let arg = plain(&args[i]);
        !(arg.starts_with('-') || arg == "(" || arg == "!")
    } {
        i += 1;
    }
    let mut starts: Vec<&String> = args[starts_at..i].iter().collect();
    let dot = ".".to_owned();
    if starts.is_empty() {
        starts.push(&dot);
    }
    let expression = &args[i..];
    let mut min_depth = 0;
    let mut max_depth = usize::MAX;
    for pair in expression.windows(2) {
        match plain(&pair[0]).as_ref() {
            "-mindepth" => min_depth = plain(&pair[1]).parse().unwrap_or(0),
            "-maxdepth" => max_depth = plain(&pair[1]).parse().unwrap_or(usize::MAX),
            _ => {}
        }
    }
    let mut next = Vec::new();
    for branch in expression.split(|a| matches!(plain(a).as_ref(), "-o" | "-or")) {
        let mut names: Vec<String> = Vec::new();
        let mut narrowed = false;
        let mut negated = false;
        let mut j = 0;
        while j < branch.len() {
            let arg = plain(&branch[j]);
            match arg.as_ref() {
                "!" | "-not" => {
                    negated = true;
                    j += 1;
                    continue;
                }
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    let command_start = j + 1;
                    let end = branch[command_start..]
                        .iter()
                        .position(|a| matches!(plain(a).as_ref(), ";" | "+"))
                        .map_or(branch.len(), |p| command_start + p);
                    let command = &branch[command_start..end];
                    let paths = found_paths(&starts, &names, narrowed, min_depth, max_depth);
                    for argv in substitute(command, &paths) {
                        next.push(Next::Argv(argv));
                    }
                    j = end + 1;
                    continue;
                }
                "-delete" => {
                    let paths = found_paths(&starts, &names, narrowed, min_depth, max_depth);
                    let mut argv = vec!["rm".to_owned(), "-rf".to_owned(), "--".to_owned()];
                    argv.extend(paths);
                    next.push(Next::Argv(argv));
                }
                test if NARROWING_TESTS.contains(&test) => {
                    if !negated {
                        narrowed = true;
                        if let Some(value) = branch.get(j + 1) {
                            match test {
                                // find globs these itself, quoted or not.
                                "-name" | "-iname" => names.push(format!("/{}", live_globs(value))),
                                "-path" | "-ipath" | "-wholename" | "-iwholename" => {
                                    names.push(live_globs(value))
                                }
                                _ => {}
                            }
                        }
                    }
                    j += 1;
                }
                _ => {}
            }
            negated = false;
            j += 1;
        }
    }
    if next.is_empty() {
        Step::Final
    } else {
        Step::Many(next)
    }
}

/// The paths `{}` can stand for (see [`find`]). A `-name` pattern is kept as `/NAME`
/// and put under each start point.
fn found_paths(
    starts: &[&String],
    names: &[String],
    narrowed: bool,
    min_depth: usize,
    max_depth: usize,
) -> Vec<String> {
    let mut paths = Vec::new();
    if !names.is_empty() {
        for name in names {
            match name.strip_prefix('/') {
                Some(base) => {
                    for start in starts {
                        paths.push(format!("{}/{base}", start.trim_end_matches('/')));
                    }
                }
                None => paths.push(name.clone()),
            }
        }
        return paths;
    }
    if narrowed {
        return paths;
    }
    for start in starts {
        if min_depth == 0 {
            paths.push((*start).clone());
        }
        if max_depth > 0 {
            paths.push(format!("{}/*", start.trim_end_matches('/')));
        }
    }
    paths
}

/// A command with `{}` (quoted or not) replaced by each path, or as it is without one.
fn substitute(command: &[String], paths: &[String]) -> Vec<Vec<String>> {
    const MARKS: [&str; 2] = ["{}", "\\{\\}"];
    if command.is_empty() {
        return Vec::new();
    }
    let has_mark = |w: &String| MARKS.iter().any(|m| w.contains(m));
    if !command.iter().any(has_mark) || paths.is_empty() {
        return vec![command.to_vec()];
    }
    paths
        .iter()
        .map(|path| {
            command
                .iter()
                .map(|w| MARKS.iter().fold(w.clone(), |w, m| w.replace(m, path)))
                .collect()
        })
        .collect()
}

/// `parallel [options] COMMAND ::: ARGS`: each argument put in place of `{}` (or
/// appended), and the line run by a shell; with no command, each argument is a
/// command line. Without `:::`, the arguments are stdin's lines when literal.
pub(super) fn parallel<'a>(args: &'a [String], stdin: Option<&str>) -> Step<'a> {
    let separator = args.iter().position(|a| plain(a).starts_with(":::"));
    let (before, inputs): (&[String], Vec<String>) = match separator {
        Some(at) => (
            &args[..at],
            args[at + 1..]
                .iter()
                .filter(|a| !plain(a).starts_with(":::"))
                .map(|a| plain(a).into_owned())
                .collect(),
        ),
        None => (
            args,
            stdin
                .map(|s| s.lines().map(str::to_owned).collect())
                .unwrap_or_default(),
        ),
    };
    let templates: Vec<&[String]> = match command_starts(before, &PARALLEL).as_slice() {
        [] => vec![&[]],
        starts => starts.iter().map(|&at| &before[at..]).collect(),
    };
    let mut next = Vec::new();
    for template in templates {
        let line: Vec<String> = template.iter().map(|w| to_shell(w)).collect();
        let line = line.join(" ");
        if inputs.is_empty() && !line.is_empty() {
            next.push(Next::code(line.clone()));
        }
        for input in &inputs {
            next.push(Next::code(if line.is_empty() {
                input.clone()
            } else if line.contains("{}") {
                line.replace("{}", input)
            } else {
                format!("{line} {input}")
            }));
        }
    }
    Step::Many(next)
}

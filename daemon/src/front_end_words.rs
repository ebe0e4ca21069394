//! A test that keeps the daemon's words free of any front end's (issue 31): no string
//! literal in `daemon/src` names a `bashc` command or a command-line flag. What a
//! person can do about a refusal travels as data (`ErrorHint`, `Notice`), and the CLI
//! and `bashc mcp` each spell it (`--net on`, `net="on"`); a flag in a daemon string
//! is a sentence one front end reads wrong.

use std::fs;
use std::path::{Path, PathBuf};

use regex::Regex;

/// Words in daemon strings that name a command line and are meant to: each is a
/// program's own argument or a shell command a person runs, the same whatever front
/// end they came through.
const MEANT: &[(&str, &str)] = &[
    ("bashd --check-config", "bashd's own option, run in a shell"),
    (
        "--check-config",
        "bashd's own argument (main.rs), named in its messages",
    ),
    (
        "--config",
        "bashd's own argument (main.rs), named in its messages",
    ),
    (
        "systemctl --user",
        "the systemd command that reloads bashd, run in a shell",
    ),
    (
        "--probe-sandbox",
        "bashd-resident's private argument, given by bashd",
    ),
    (
        "--zygote",
        "bashd-resident's private argument, given by bashd",
    ),
    (
        "bashc allow --ask",
        "the person's own answer to a host ask the proxy opened (issue 44), the same whatever the agent's front end",
    ),
    (
        "bashc allow --revoke",
        "the person's own command that takes a grant back (issue 44), the same whatever the agent's front end",
    ),
    (
        "bashc allow",
        "the person's own command that answers asks (issue 44), the same whatever the agent's front end: the agent passes it on, and no tool answers",
    ),
    (
        "--network-holder",
        "bashd-resident's private argument, given by bashd (a session network's holder)",
    ),
    (
        "HOST bashc bridge",
        "the command `[remote]` runs on the far host over ssh, shown as the config's default",
    ),
];

/// Directories whose strings are advice about the shell itself (`git add <paths>`,
/// `git push --force-with-lease`): the policy speaks of the command the agent typed,
/// which is the same in every front end.
const SHELL_ADVICE: &[&str] = &["policy"];

#[test]
fn no_daemon_string_names_a_front_ends_command_or_flag() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let front_end = Regex::new(r"\bbashc [a-z]+|(^|[^A-Za-z0-9_-])--[a-z][a-z-]+").unwrap();
    let mut found = Vec::new();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 50,
        "found only {} files in {src:?}",
        files.len()
    );
    for file in files {
        let relative = file.strip_prefix(&src).unwrap();
        if SHELL_ADVICE.iter().any(|dir| relative.starts_with(dir)) {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        for (line, literal) in string_literals(production_part(&text)) {
            let mut rest = literal.clone();
            for (meant, _why) in MEANT {
                rest = rest.replace(meant, "");
            }
            if front_end.is_match(&rest) {
                found.push(format!("{}:{line}: {literal:?}", relative.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "daemon strings that speak one front end's words (give the front end data to spell, an ErrorHint, or use words of neither):\n{}",
        found.join("\n")
    );
}

/// The lexer finds what it must: a flag inside a string, and nothing in comments,
/// char literals or lifetimes.
#[test]
fn the_lexer_finds_strings_and_skips_the_rest() {
    let code = r##"
        // "--in-a-comment"
        /* "--in-a-block" */
        fn f<'a>(x: &'a str) -> char { let _ = "run it with --pty"; let _ = r#"a "bashc check" b"#; '"' }
        let _ = "two\
            lines --net on";
        let _ = "escaped \" --quote";
    "##;
    let literals: Vec<String> = string_literals(code).into_iter().map(|(_, s)| s).collect();
    assert_eq!(
        literals,
        [
            "run it with --pty",
            "a \"bashc check\" b",
            "two\\\n            lines --net on",
            "escaped \\\" --quote",
        ]
    );
    assert_eq!(
        production_part("a\n#[cfg(test)]\nmod tests {\n\"--x\"\n}\n"),
        "a\n"
    );
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs")
            && !path.ends_with("tests.rs")
            && !path.ends_with("front_end_words.rs")
        {
            files.push(path);
        }
    }
}

/// The file before its test module: tests may quote anything, and house style puts
/// the test module last.
fn production_part(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// Each string literal of `code` (plain, byte or raw) with the line it starts on, its
/// escapes left as written; comments, char literals and lifetimes skipped.
fn string_literals(code: &str) -> Vec<(usize, String)> {
    let bytes = code.as_bytes();
    let mut literals = Vec::new();
    let mut i = 0;
    let line_at = |i: usize| code[..i].matches('\n').count() + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < bytes.len() {
                    if bytes[i..].starts_with(b"/*") {
                        depth += 1;
                        i += 2;
                    } else if bytes[i..].starts_with(b"*/") {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'\'' => {
                // A char literal ('x', '\n', '"') or a lifetime ('a).
                if bytes.get(i + 1) == Some(&b'\\') {
                    i += 2;
                    while i < bytes.len() && bytes[i] != b'\'' {
                        i += 1;
                    }
                    i += 1;
                } else if bytes.get(i + 2) == Some(&b'\'') {
                    i += 3;
                } else {
                    // A char of several bytes, or a lifetime.
                    let end = code[i + 1..]
                        .char_indices()
                        .nth(1)
                        .map(|(at, c)| (i + 1 + at, c));
                    match end {
                        Some((at, '\'')) => i = at + 1,
                        _ => i += 1,
                    }
                }
            }
            b if is_ident(b) => {
                // A whole identifier, so that the `r` of `for"` starts no raw string;
                // `r` or `br` before `#` or `"` starts one.
                let start = i;
                while i < bytes.len() && is_ident(bytes[i]) {
                    i += 1;
                }
                let word = &code[start..i];
                let hashes = bytes[i..].iter().take_while(|&&b| b == b'#').count();
                if matches!(word, "r" | "br") && bytes.get(i + hashes) == Some(&b'"') {
                    let open = i + hashes + 1;
                    let close = format!("\"{}", "#".repeat(hashes));
                    let end = code[open..]
                        .find(&close)
                        .map_or(bytes.len(), |at| open + at);
                    literals.push((line_at(start), code[open..end].to_owned()));
                    i = end + close.len();
                }
            }
            b'"' => {
                let start = i + 1;
                let mut end = start;
                while end < bytes.len() && bytes[end] != b'"' {
                    end += if bytes[end] == b'\\' { 2 } else { 1 };
                }
                let end = end.min(bytes.len());
                literals.push((line_at(i), code[start..end].to_owned()));
                i = end + 1;
            }
            _ => i += 1,
        }
    }
    literals
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

use std::time::Duration;

use super::*;

fn script_of(source: &str) -> Script {
    let tree = parse(source, Instant::now() + Duration::from_secs(10)).unwrap();
    script(&tree, source)
}

fn spelled(source: &str) -> Vec<Vec<String>> {
    script_of(source)
        .commands
        .iter()
        .map(|c| c.words.iter().map(Word::spelled).collect())
        .collect()
}

#[test]
fn quoting_is_removed() {
    assert_eq!(spelled("'rm' -rf \"$HOME\""), [["rm", "-rf", "$HOME"]]);
    assert_eq!(spelled("r\\m -r ${HOME}/"), [["rm", "-r", "$HOME/"]]);
    assert_eq!(spelled("git add '-'A"), [["git", "add", "-A"]]);
    assert_eq!(spelled("$'\\x72m' -rf"), [["rm", "-rf"]]);
}

#[test]
fn quoted_globs_stay_literal() {
    let script = script_of("rm -rf '*' \"./*\" * \\* ~ '~'");
    let words: Vec<String> = script.commands[0].words[2..]
        .iter()
        .map(|w| match w.parts.as_slice() {
            [Part::Text(t)] => t.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(words, ["\\*", "./\\*", "*", "\\*", "~", "\\~"]);
}

#[test]
fn every_nested_command_is_found() {
    let script = script_of("a | b && (c; d) & e $(f) <(g); h() { i; }");
    let names: Vec<String> = script
        .commands
        .iter()
        .map(|c| c.words[0].spelled())
        .collect();
    for name in ["a", "b", "c", "d", "e", "f", "g", "i"] {
        assert!(
            names.iter().any(|n| n == name),
            "{name} missing from {names:?}"
        );
    }
    assert_eq!(script.functions[0].name, "h");
    assert_eq!(script.functions[0].commands.len(), 1);
}

#[test]
fn data_is_not_a_command() {
    assert_eq!(
        spelled("echo \"rm -rf /\" # git add -A"),
        [["echo", "rm -rf /"]]
    );
}

#[test]
fn stdin_text_comes_from_heredocs_strings_and_pipes() {
    let stdin = |source: &str| {
        let script = script_of(source);
        let shell = script
            .commands
            .iter()
            .rev()
            .find(|c| matches!(c.words[0].literal().as_deref(), Some("bash" | "sh")));
        shell.unwrap().stdin.clone()
    };
    assert_eq!(
        stdin("bash <<'EOF'\nrm $x\nEOF").as_deref(),
        Some("rm $x\n")
    );
    assert_eq!(
        stdin("bash <<EOF\nrm \\$x\nEOF").as_deref(),
        Some("rm $x\n")
    );
    assert_eq!(stdin("bash <<< 'ls /'").as_deref(), Some("ls /\n"));
    assert_eq!(stdin("echo 'ls /' | bash").as_deref(), Some("ls /\n"));
    assert_eq!(stdin("printf 'ls %s\\n' / | sh").as_deref(), Some("ls /\n"));
    assert_eq!(stdin("echo -e 'a\\nb' | sh").as_deref(), Some("a\nb\n"));
    assert_eq!(stdin("cat <<EOF | bash\nls\nEOF").as_deref(), Some("ls\n"));
    assert_eq!(stdin("bash < <(echo ls)").as_deref(), Some("ls\n"));
    assert_eq!(stdin("cat f | bash"), None);
    assert_eq!(stdin("echo ls | bash < f"), None);
}

#[test]
fn a_parse_error_that_hides_words_is_reported() {
    assert!(script_of("case x in ) rm -rf / ;; esac").hidden.is_some());
    assert!(script_of("git add -A (").hidden.is_none());
    assert!(
        script_of("echo \"unterminated && git add -A")
            .hidden
            .is_none()
    );
}

#[test]
fn a_parse_past_its_deadline_gives_up_and_the_parser_recovers() {
    let big = "echo hi; ".repeat(200_000);
    assert_eq!(
        parse(&big, Instant::now()).unwrap_err(),
        ParseError::Timeout
    );
    let tree = parse("echo ok", Instant::now() + Duration::from_secs(10)).unwrap();
    assert_eq!(script(&tree, "echo ok").commands.len(), 1);
}

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

const CORPUS: &str = include_str!("corpus.txt");
const HOME: &str = "/home/agent";
const WORKDIR: &str = "/home/agent/project";

/// One corpus line: the verdict wanted, the command, why, and the workdir it needs.
struct Case<'c> {
    line: usize,
    want: Option<&'c str>,
    command: String,
    why: &'c str,
    workdir: Option<&'c str>,
}

fn corpus() -> Vec<Case<'static>> {
    let mut cases = Vec::new();
    for (n, line) in CORPUS.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.split(" ⇒ ").collect();
        let (verdict, command, why, workdir) = match parts[..] {
            [verdict, command, why] => (verdict, command, why, None),
            [verdict, command, why, place] => {
                let dir = place.strip_prefix("in ");
                assert!(
                    dir.is_some(),
                    "corpus.txt:{}: the fourth field is `in DIR`",
                    n + 1
                );
                (verdict, command, why, dir)
            }
            _ => panic!(
                "corpus.txt:{}: want VERDICT ⇒ COMMAND ⇒ WHY [⇒ in DIR]",
                n + 1
            ),
        };
        assert!(!why.trim().is_empty(), "corpus.txt:{}: say why", n + 1);
        cases.push(Case {
            line: n + 1,
            want: (verdict != "allow").then_some(verdict),
            command: command.replace('⏎', "\n"),
            why,
            workdir,
        });
    }
    cases
}

#[test]
fn the_corpus_gets_the_verdict_each_case_names() {
    let known = Policy::default().with_home(Some(HOME));
    let unknown = Policy::default().with_home(None);
    let mut failures = Vec::new();
    let cases = corpus();
    for case in &cases {
        let contexts: Vec<(&Policy, Option<&str>)> = match case.workdir {
            Some(dir) => vec![(&known, Some(dir))],
            None => vec![(&known, Some(WORKDIR)), (&unknown, None)],
        };
        for (policy, workdir) in contexts {
            let got = policy
                .check_in(&case.command, workdir)
                .err()
                .map(|d| d.rule);
            if got.as_deref() != case.want {
                failures.push(format!(
                    "corpus.txt:{}: {:?} ({}) in {workdir:?}: want {:?}, got {got:?}",
                    case.line, case.command, case.why, case.want
                ));
            }
        }
    }
    assert!(cases.len() >= 330, "only {} cases", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_denial_names_the_rule_and_a_safer_way() {
    let denial = Policy::default().check("git push --force").unwrap_err();
    assert!(
        denial
            .message
            .starts_with("permission denied: git-push-force: ")
    );
    assert!(denial.message.contains("--force-with-lease"));
}

/// The config file's list of built-in rule names, which bashc checks `[policy]
/// disable` against too, is this daemon's rules'.
#[test]
fn the_files_names_of_built_in_rules_are_the_rules() {
    let ids: Vec<&str> = BUILTIN_RULES.iter().map(|rule| rule.id).collect();
    assert_eq!(ids, bashd_protocol::config::BUILTIN_RULE_IDS);
}

#[test]
fn config_disables_builtins_and_adds_rules() {
    let policy = Policy::new(
        ["git-add-blind".to_owned()],
        vec![CustomRule {
            id: "no-publish".into(),
            command: "npm".into(),
            args: vec!["publish".into()],
            message: "releases are made by CI".into(),
        }],
    );
    assert_eq!(policy.check("git add -A"), Ok(()));
    let denial = policy
        .check("cd pkg && sudo npm publish --tag next")
        .unwrap_err();
    assert_eq!(denial.rule, "no-publish");
    assert_eq!(
        denial.message,
        "permission denied: no-publish: releases are made by CI"
    );
    assert_eq!(policy.check("npm install"), Ok(()));
    assert!(policy.check("rm -rf /").is_err(), "other built-ins stay on");
}

#[test]
fn custom_rules_see_code_fed_to_a_shell_and_wrappers_themselves() {
    let rule = |command: &str, args: &[&str]| CustomRule {
        id: "no-marker".into(),
        command: command.into(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        message: "not here".into(),
    };
    let policy = Policy::new([], vec![rule("touch", &["MARK*"])]);
    for command in [
        "echo 'touch MARK' | bash",
        "bash <<< 'touch MARKER'",
        "c=touch; $c MARK",
        "sudo -u x touch MARK",
    ] {
        assert_eq!(
            policy.check(command).map_err(|d| d.rule),
            Err("no-marker".into()),
            "{command}"
        );
    }
    assert_eq!(policy.check("touch other"), Ok(()));
    let policy = Policy::new([], vec![rule("find", &["-delete"])]);
    assert!(
        policy.check("find . -name '*.o' -delete").is_err(),
        "a rule on a wrapper"
    );
}

#[test]
fn the_dynamic_rule_can_be_switched_off_like_any_built_in() {
    let policy = Policy::new(["dynamic-command".to_owned()], Vec::new());
    assert_eq!(policy.check("$c -rf /"), Ok(()));
    assert!(policy.check("c=rm; $c -rf /").is_err());
}

#[test]
fn nesting_past_the_cap_is_refused() {
    let mut command = "git status".to_owned();
    for _ in 0..=MAX_DEPTH {
        command = format!("eval {}", shell_quote(&command));
    }
    assert_eq!(
        Policy::default().check(&command).unwrap_err().rule,
        "nesting"
    );
}

#[test]
fn every_limit_denies_with_its_own_rule() {
    let rule = |command: &str| Policy::default().check(command).err().map(|d| d.rule);
    assert_eq!(rule("ls\0 -la").as_deref(), Some("nul-byte"));
    let wrappers = format!("{}ls", "nice ".repeat(MAX_WRAPPERS + 1));
    assert_eq!(rule(&wrappers).as_deref(), Some("wrapper-depth"));
    assert_eq!(
        rule("rm -rf x{1,2}{a,b,c,d,e,f,g,h}{a,b,c,d,e,f,g,h}{a,b,c,d,e,f,g,h}{a,b,c,d,e,f,g,h}")
            .as_deref(),
        Some("too-complex")
    );
    let values: String = (0..1100).map(|i| format!("x=v{i}; ")).collect();
    assert_eq!(
        rule(&format!("{values}echo $x")).as_deref(),
        Some("too-complex")
    );
    assert_eq!(
        rule("case x in ) ls ;; esac").as_deref(),
        Some("parse-error")
    );
    // The parse of one check shares one deadline; a check that starts past it stops.
    let mut checker = Checker {
        policy: &Policy::default(),
        places: Places::new(None, None),
        deadline: Instant::now(),
        checks: 0,
        max_checks: MIN_CHECKS,
        calls: Vec::new(),
        aliases: Vec::new(),
        branches: 0,
    };
    let denial = checker.source("echo hi; ".repeat(20_000).as_str(), 0, None, None, None);
    assert_eq!(denial.unwrap_err().rule, "parse-timeout");
}

#[test]
fn a_limit_message_says_what_could_not_be_checked_and_what_to_do() {
    let denial = Policy::default()
        .check(&format!("{}ls", "nice ".repeat(MAX_WRAPPERS + 1)))
        .unwrap_err();
    assert!(
        denial.message.contains("too many to check"),
        "{}",
        denial.message
    );
    assert!(denial.message.contains("run the inner command directly"));
}

#[test]
fn the_workdir_decides_relative_paths() {
    let policy = Policy::default().with_home(Some(HOME));
    assert!(policy.check_in("rm -rf usr", Some("/")).is_err());
    assert!(policy.check_in("rm -rf usr", Some(WORKDIR)).is_ok());
    assert!(policy.check_in("rm -rf usr", None).is_ok());
    assert!(policy.check_in("rm -rf agent", Some("/home")).is_err());
    assert!(policy.check_in("rm -rf project", Some(HOME)).is_ok());
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Generous: the check of a one-liner takes microseconds; this catches blow-ups.
fn assert_quick(command: &str, limit: Duration) {
    let start = Instant::now();
    let _ = Policy::default().check(command);
    let took = start.elapsed();
    assert!(
        took < limit,
        "checking {} bytes took {took:?}",
        command.len()
    );
}

#[test]
fn a_one_mebibyte_command_and_deep_nesting_are_checked_in_bounded_time() {
    let line = "ls -la /tmp && echo \"$(date)\" | grep -v foo; ";
    let big = line.repeat((1 << 20) / line.len());
    assert_quick(&big, Duration::from_secs(20));
    let deep = format!("{}true{}", "$(".repeat(5000), ")".repeat(5000));
    assert_quick(&deep, Duration::from_secs(20));
    let parens = format!("{}true{}", "(".repeat(20000), ")".repeat(20000));
    assert_quick(&parens, Duration::from_secs(20));
    let defaults = format!("echo {}x{}", "${a:-".repeat(5000), "}".repeat(5000));
    assert_quick(&defaults, Duration::from_secs(20));
    let calls: String = (0..12)
        .map(|i| format!("f{i}() {{ f{} \"$1\"; f{} \"$1\"; }}; ", i + 1, i + 1))
        .collect();
    assert_quick(&format!("{calls}f0 /"), Duration::from_secs(20));
    let doubling: String = (b'a'..b'p')
        .map(|c| {
            format!(
                "{}=${}${}${}; ",
                c as char,
                (c + 1) as char,
                (c + 1) as char,
                (c + 1) as char
            )
        })
        .collect();
    assert_quick(&format!("{doubling}p=x; echo $a"), Duration::from_secs(20));
    assert_quick(
        &format!("rm -rf {}", "*/".repeat(200_000)),
        Duration::from_secs(20),
    );
    assert_quick(
        &format!("{}rm -rf /", "sudo --frob ".repeat(40)),
        Duration::from_secs(20),
    );
}

/// Denied commands that are one simple command, with how each word may be quoted
/// without changing what bash runs: `$` words only in double quotes, `~`, globs and
/// braces never.
const DENIED_CORES: &[(&str, &[&str])] = &[
    ("rm-dangerous", &["rm", "-rf", "/"]),
    ("rm-dangerous", &["rm", "-rf", "/."]),
    ("rm-dangerous", &["rm", "-r", "/usr/../"]),
    ("rm-dangerous", &["rm", "-fr", "$HOME"]),
    ("rm-dangerous", &["rm", "-rf", "~"]),
    ("rm-dangerous", &["rm", "-rf", ".git"]),
    ("rm-dangerous", &["rm", "-rf", "/u*"]),
    ("rm-dangerous", &["rm", "-rf", "/{usr,etc}"]),
    ("rm-dangerous", &["rm", "--recursive", "--", "/etc"]),
    ("git-add-blind", &["git", "add", "-A"]),
    ("git-add-blind", &["git", "add", "."]),
    ("git-add-blind", &["git", "-C", "repo", "add", "--all"]),
    ("git-push-force", &["git", "push", "--force"]),
    ("git-push-force", &["git", "push", "origin", "+main"]),
    ("git-push-force", &["git", "push", "--mirror"]),
];

/// Wrappers that run the rest of the line, with their options.
const WRAPPERS: &[&str] = &[
    "sudo",
    "sudo -u root",
    "sudo -Eu root",
    "env",
    "env A=1",
    "env -i PATH=/bin",
    "command",
    "builtin",
    "exec",
    "nice",
    "nice -n 5",
    "nohup",
    "timeout 5",
    "timeout -k 1 5",
    "timeout --kill-after 1 5",
    "stdbuf -oL",
    "setsid",
    "ionice -c3",
    "chrt 10",
    "taskset 0x1",
    "unshare -r",
    "flock /tmp/l",
    "strace -f",
    "cgexec -g cpu:x",
    "firejail --quiet",
    "fakeroot",
    "systemd-run --user",
    "time -p",
    "xargs",
    "busybox",
    "doas",
    "chronic",
    "runuser -u root --",
    "exec -a x",
];

/// How one word is written.
#[derive(Debug, Clone, Copy)]
enum Quote {
    Bare,
    Single,
    Double,
    Backslash,
}

fn quote(word: &str, how: Quote) -> String {
    let plain_word = !word.contains(['$', '~', '*', '{', '?', '[']);
    match how {
        Quote::Single if plain_word => shell_quote(word),
        Quote::Double if !word.contains(['~', '*', '{', '?', '[']) => format!("\"{word}\""),
        Quote::Backslash if plain_word && !word.is_empty() => {
            let mut chars = word.chars();
            let first = chars.next().expect("not empty");
            format!("\\{first}{}", chars.as_str())
        }
        _ => word.to_owned(),
    }
}

/// Ways to hand a line to a shell.
#[derive(Debug, Clone, Copy)]
enum Embed {
    BashC,
    Eval,
    Heredoc,
    QuotedHeredoc,
    PipeToBash,
    HereString,
}

/// `level` tells nested heredocs apart: each needs its own delimiter.
fn embed(line: &str, how: Embed, level: usize) -> String {
    match how {
        Embed::BashC => format!("bash -c {}", shell_quote(line)),
        Embed::Eval => format!("eval {}", shell_quote(line)),
        Embed::Heredoc => {
            let escaped = line
                .replace('\\', "\\\\")
                .replace('$', "\\$")
                .replace('`', "\\`");
            format!("bash <<EOF{level}\n{escaped}\nEOF{level}")
        }
        Embed::QuotedHeredoc => format!("bash <<'EOF{level}'\n{line}\nEOF{level}"),
        Embed::PipeToBash => format!("echo {} | bash", shell_quote(line)),
        Embed::HereString => format!("bash <<< {}", shell_quote(line)),
    }
}

fn quote_strategy() -> impl Strategy<Value = Quote> {
    prop_oneof![
        Just(Quote::Bare),
        Just(Quote::Single),
        Just(Quote::Double),
        Just(Quote::Backslash)
    ]
}

fn embed_strategy() -> impl Strategy<Value = Embed> {
    prop_oneof![
        Just(Embed::BashC),
        Just(Embed::Eval),
        Just(Embed::QuotedHeredoc),
        Just(Embed::PipeToBash),
        Just(Embed::HereString)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn the_checker_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = Policy::default().check(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn shell_like_text_never_panics(text in "[a-z \\-'\"$(){};|&<>`\\\\\n=*~/.]{0,200}") {
        let _ = Policy::default().check(&text);
    }

    /// Issue 17: a denied command keeps its verdict, rule and all, when wrapped in up
    /// to 64 wrappers, its words quoted in any way that keeps their meaning, and the
    /// line handed to a shell (a heredoc, a pipe, a here-string, bash -c, eval) up to
    /// three times.
    #[test]
    fn a_denied_core_stays_denied_wrapped_quoted_or_fed_to_a_shell(
        core in 0..DENIED_CORES.len(),
        wrappers in proptest::collection::vec(0..WRAPPERS.len(), 0..=64),
        quotes in proptest::collection::vec(quote_strategy(), 8),
        embeds in proptest::collection::vec(embed_strategy(), 0..=3),
    ) {
        let (rule, words) = DENIED_CORES[core];
        let mut line: Vec<String> = wrappers.iter().map(|&w| WRAPPERS[w].to_owned()).collect();
        line.extend(words.iter().zip(quotes.iter().cycle()).map(|(word, &how)| quote(word, how)));
        let mut command = line.join(" ");
        for (level, &how) in embeds.iter().enumerate() {
            command = embed(&command, how, level);
        }
        for workdir in [None, Some(WORKDIR)] {
            let got = Policy::default().with_home(Some(HOME)).check_in(&command, workdir);
            prop_assert_eq!(got.map_err(|d| d.rule), Err(rule.to_owned()), "{}", command);
        }
    }

    /// An unquoted heredoc hands bash its text with `\$` made `$`: the same holds.
    #[test]
    fn a_denied_core_stays_denied_in_an_unquoted_heredoc(
        core in 0..DENIED_CORES.len(),
        wrappers in proptest::collection::vec(0..WRAPPERS.len(), 0..=8),
    ) {
        let (rule, words) = DENIED_CORES[core];
        let mut line: Vec<String> = wrappers.iter().map(|&w| WRAPPERS[w].to_owned()).collect();
        line.extend(words.iter().map(|w| (*w).to_owned()));
        let command = embed(&line.join(" "), Embed::Heredoc, 0);
        let got = Policy::default().check(&command);
        prop_assert_eq!(got.map_err(|d| d.rule), Err(rule.to_owned()), "{}", command);
    }
}

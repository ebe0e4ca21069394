use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

const CORPUS: &str = include_str!("corpus.txt");

#[test]
fn the_corpus_gets_the_verdict_each_case_names() {
    let policy = Policy::default();
    let mut failures = Vec::new();
    let mut cases = 0;
    for (n, line) in CORPUS.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.split(" ⇒ ").collect();
        let [verdict, command, why] = parts[..] else {
            panic!("corpus.txt:{}: want VERDICT ⇒ COMMAND ⇒ WHY", n + 1);
        };
        assert!(!why.trim().is_empty(), "corpus.txt:{}: say why", n + 1);
        cases += 1;
        let got = policy.check(command).err().map(|d| d.rule);
        let want = (verdict != "allow").then(|| verdict.to_owned());
        if got != want {
            failures.push(format!(
                "corpus.txt:{}: {command:?} ({why}): want {want:?}, got {got:?}",
                n + 1
            ));
        }
    }
    assert!(cases >= 150, "only {cases} cases");
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
}

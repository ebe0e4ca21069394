//! The docs against what the binaries print (issue 33), so that the two cannot drift
//! apart again: the MCP tools and their arguments (`tools/list` of a real `bashc mcp`,
//! docs/MCP.md), the keys of `--json` results and of `screen --json` (a real terminal
//! job, docs/CLI.md), the built-in policy rules (docs/POLICY.md) and the config's
//! sections and keys (`bashd --check-config`, docs/CONFIG.md), and `bashc`'s commands
//! (`bashc --help`, docs/CLI.md). The reference lived in the README until issue 46 moved
//! it to docs/; the README keeps what a newcomer reads first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use bashd_tests::{Daemon, bin_path, wait_until};
use serde_json::Value;

use crate::{json, show, stdout};

fn readme() -> String {
    read_repo_file("README.md")
}

/// A reference page under docs/, by its file name (`CLI.md`).
fn doc(name: &str) -> String {
    read_repo_file(&format!("docs/{name}"))
}

fn read_repo_file(path: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A page from the heading that starts with `heading` to the next heading of the same
/// or a higher level.
fn section<'a>(page: &'a str, heading: &str) -> &'a str {
    let start = page
        .find(&format!("\n{heading}"))
        .unwrap_or_else(|| panic!("the page has no heading {heading:?}"))
        + 1;
    let level = heading.chars().take_while(|c| *c == '#').count();
    let rest = &page[start..];
    let end = rest
        .match_indices('\n')
        .map(|(at, _)| at + 1)
        .find(|&at| {
            let hashes = rest[at..].chars().take_while(|c| *c == '#').count();
            hashes > 0 && hashes <= level && rest[at + hashes..].starts_with(' ')
        })
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The words between backticks, in order.
fn backticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The text from the first line that contains `from` to the first after it that
/// contains `to` (not included).
fn span<'a>(text: &'a str, from: &str, to: &str) -> &'a str {
    let start = text
        .find(from)
        .unwrap_or_else(|| panic!("the page has no {from:?}"));
    let end = text[start..].find(to).map_or(text.len(), |at| start + at);
    &text[start..end]
}

/// The indented block (a code block of 4 spaces) that starts at the first line equal
/// to `first`, up to the first line that is neither blank nor indented.
fn block<'a>(text: &'a str, first: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|line| *line != first);
    let mut block: Vec<&str> = lines
        .by_ref()
        .take_while(|line| line.trim().is_empty() || line.starts_with("    "))
        .collect();
    assert!(
        !block.is_empty(),
        "the page has no block starting {first:?}"
    );
    while block.last().is_some_and(|line| line.trim().is_empty()) {
        block.pop();
    }
    block
}

/// A JSON value's shape: its keys, recursively, and the kind of each leaf; an array
/// is the shape of its first item.
fn shape(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
        }
        Value::Array(items) => Value::Array(items.first().map(shape).into_iter().collect()),
        Value::String(_) => "string".into(),
        Value::Number(_) => "number".into(),
        Value::Bool(_) => "bool".into(),
        Value::Null => "null".into(),
    }
}

/// Issue 33.
#[tokio::test]
async fn the_mcp_reference_lists_every_tool_with_its_arguments() {
    let daemon = Daemon::start();
    let client = crate::mcp::connect(&daemon).await;
    let tools = client.list_all_tools().await.unwrap();
    client.cancel().await.unwrap();
    assert!(!tools.is_empty());

    let page = doc("MCP.md");
    let mcp = section(&page, "## Tools");
    // `- `tool` (`arg`, ...), read-only: what it does`, one line a tool.
    let mut listed: BTreeMap<&str, (BTreeSet<&str>, &str)> = BTreeMap::new();
    for line in mcp.lines().filter(|line| line.starts_with("- `bash")) {
        let name = backticked(line)[0];
        let open = line.find('(').unwrap_or_else(|| panic!("no ( in {line:?}"));
        let close = open + line[open..].find(')').unwrap();
        let args = backticked(&line[open..=close]).into_iter().collect();
        let marks = line[close..].split(':').next().unwrap();
        assert!(listed.insert(name, (args, marks)).is_none(), "{name} twice");
    }
    let names: BTreeSet<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        listed.keys().copied().collect::<BTreeSet<_>>(),
        names,
        "docs/MCP.md's tool list (left) is not what tools/list gives (right)"
    );
    for tool in &tools {
        let (args, marks) = &listed[tool.name.as_ref()];
        let properties: BTreeSet<&str> = tool.input_schema["properties"]
            .as_object()
            .map(|properties| properties.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(
            *args, properties,
            "{}: docs/MCP.md's arguments (left) are not the schema's (right)",
            tool.name
        );
        let annotations = tool.annotations.clone().unwrap_or_default();
        assert_eq!(
            marks.contains("read-only"),
            annotations.read_only_hint == Some(true),
            "{}: docs/MCP.md says {marks:?}, the annotations {annotations:?}",
            tool.name
        );
        assert_eq!(
            marks.contains("destructive"),
            annotations.destructive_hint == Some(true),
            "{}: docs/MCP.md says {marks:?}, the annotations {annotations:?}",
            tool.name
        );
    }
    // `bashc mcp --help` names them all too.
    let help = daemon.run_bashc(&["mcp", "--help"]);
    let help = stdout(&help).replace(['\n', ','], " ");
    for name in &names {
        assert!(
            help.split_whitespace()
                .any(|word| word.trim_end_matches('.') == *name),
            "bashc mcp --help does not name {name}:\n{help}"
        );
    }
}

/// Issue 33.
#[test]
fn the_cli_reference_shows_the_json_that_screen_and_results_print() {
    let daemon = Daemon::start();
    let started = json(&daemon.run_bashc(&[
        "exec",
        "--pty",
        "--mode",
        "background",
        "--json",
        "--",
        "read -s -p 'Password: ' p; echo got ${#p}",
    ]));
    let job = started["job"].as_str().unwrap().to_owned();
    let mut screen = Value::Null;
    assert!(
        wait_until(Duration::from_secs(20), || {
            screen = json(&daemon.run_bashc(&["screen", &job, "--json"]));
            screen["waiting_for_input"] == true
        }),
        "the job never waited for input: {screen}"
    );
    let page = doc("CLI.md");
    let live = section(&page, "## Live jobs");
    let shown: String = block(live, "    {").join("\n");
    let shown: Value = serde_json::from_str(&shown)
        .unwrap_or_else(|e| panic!("docs/CLI.md's screen JSON does not parse ({e}):\n{shown}"));
    assert_eq!(
        shape(&shown),
        shape(&screen),
        "docs/CLI.md's screen JSON (left) is not what screen --json prints (right)"
    );
    daemon.run_bashc(&["kill", &job]);

    // A result whose program drew carries the same screen; every key of it, and of its
    // streams, is named where docs/CLI.md says what --json prints.
    let out = daemon.run_bashc(&[
        "exec",
        "--pty",
        "--json",
        "--",
        "printf '\\033[?1049h\\033[2;3Hdrawn'; sleep 0.5; echo oops >&2; exit 3",
    ]);
    let result = json(&out);
    assert_eq!(
        shape(&result["screen"]),
        shape(&screen),
        "a result's screen is not shaped as screen --json: {}",
        show(&out)
    );
    let said = span(
        &page,
        "`--json` prints the result as one object",
        "`bashc jobs --json` prints",
    );
    let named: BTreeSet<&str> = backticked(said).into_iter().collect();
    let mut keys: Vec<&String> = result.as_object().unwrap().keys().collect();
    keys.extend(result["stdout"].as_object().unwrap().keys());
    for key in keys {
        assert!(
            named.contains(key.as_str()),
            "docs/CLI.md does not name the --json key `{key}` in:\n{said}"
        );
    }
}

/// `bashd --check-config` of an empty file: the config in force with every default.
fn check_config(daemon: &Daemon) -> String {
    let empty = daemon.scratch().join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let out = Command::new(bin_path("bashd"))
        .arg("--check-config")
        .arg("--config")
        .arg(&empty)
        .env_remove("BASHD_BRIDGE_COMMAND")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    stdout(&out)
}

/// Issue 33.
#[test]
fn the_policy_reference_lists_every_built_in_rule() {
    let daemon = Daemon::unstarted();
    let printed = check_config(&daemon);
    let rules: BTreeSet<&str> = printed
        .lines()
        .filter_map(|line| line.strip_prefix("# built-in rule "))
        .map(|rest| rest.split(':').next().unwrap())
        .collect();
    assert!(rules.len() >= 4, "{printed}");
    let page = doc("POLICY.md");
    let table: BTreeSet<&str> = section(&page, "## Rules")
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| backticked(line)[0])
        .collect();
    assert_eq!(
        table, rules,
        "docs/POLICY.md's table (left) is not bashd's built-in rules (right)"
    );
}

/// The `[section]`s of a config text, each with its keys: `key = ...`, and keys said
/// in comments (`# key = ...`, `# key: ...`).
fn sections_and_keys<'a>(
    lines: impl Iterator<Item = &'a str>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut sections: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current = String::new();
    for line in lines {
        let line = line.trim();
        if line.starts_with('[') {
            current = line[..=line.find(']').unwrap()]
                .trim_matches(['[', ']'])
                .to_owned();
            if !line.starts_with("[[") {
                sections.entry(current.clone()).or_default();
            }
            continue;
        }
        let text = line.trim_start_matches('#').trim_start();
        let key: String = text
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let after = text[key.len()..].trim_start();
        if !key.is_empty()
            && (after.starts_with('=') || after.starts_with(':'))
            && let Some(keys) = sections.get_mut(&current)
        {
            keys.insert(key);
        }
    }
    sections
}

/// Issue 33.
#[test]
fn the_config_reference_shows_every_section_and_key_check_config_prints() {
    let daemon = Daemon::unstarted();
    let printed = check_config(&daemon);
    let printed = sections_and_keys(
        printed
            .lines()
            .filter(|line| !line.starts_with("# built-in rule") && !line.starts_with("# $")),
    );
    let page = doc("CONFIG.md");
    let configuration = section(&page, "## The file");
    let example = sections_and_keys(block(configuration, "    [limits]").into_iter());
    assert_eq!(
        example.keys().collect::<Vec<_>>(),
        printed.keys().collect::<Vec<_>>(),
        "docs/CONFIG.md's example config (left) and --check-config (right) have other sections"
    );
    for (name, keys) in &printed {
        // [env] is the hardening set, which docs/CONFIG.md lists in prose.
        if name == "env" {
            continue;
        }
        let missing: Vec<&String> = keys.difference(&example[name]).collect();
        assert!(
            missing.is_empty(),
            "docs/CONFIG.md's example config lacks [{name}] {missing:?}, which --check-config prints"
        );
    }
    // The sentence that says what --check-config prints names every section.
    let said = span(configuration, "`bashd --check-config` checks", "SIGHUP");
    let named: BTreeSet<String> = backticked(said)
        .into_iter()
        .filter(|word| word.starts_with('['))
        .map(|word| word.trim_matches(['[', ']']).to_owned())
        .collect();
    assert_eq!(
        named,
        printed.keys().cloned().collect::<BTreeSet<_>>(),
        "docs/CONFIG.md's words on --check-config (left) name other sections than it prints (right)"
    );
}

/// Issue 33.
#[test]
fn the_cli_reference_lists_every_command_of_bashc() {
    let daemon = Daemon::unstarted();
    let help = daemon.run_bashc(&["--help"]);
    let help = stdout(&help);
    let commands: BTreeSet<&str> = help
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert!(commands.contains("exec"), "{help}");
    let page = doc("CLI.md");
    let using = section(&page, "## Commands");
    let listed: BTreeSet<&str> = block(
        using,
        "    bashc exec [--timeout SECS] [--mode default|slow|background]",
    )
    .into_iter()
    .filter_map(|line| line.trim_start().strip_prefix("bashc "))
    .filter_map(|rest| rest.split_whitespace().next())
    .collect();
    assert_eq!(
        listed, commands,
        "docs/CLI.md's command list (left) is not what bashc --help lists (right)"
    );
}

/// Issue 46: the README is what a newcomer reads in five minutes: it opens with the
/// two commands, stays short, and links every reference page under docs/, whose
/// install lines (like its own) take `--locked`.
#[test]
fn the_readme_opens_with_build_and_test_and_links_every_reference_page() {
    let readme = readme();
    let opening: Vec<&str> = readme.lines().skip(2).take(2).collect();
    assert_eq!(
        opening,
        [
            "    cargo build --release && ./target/release/bashc exec -- 'echo hello from bashd; uname -a'",
            "    cargo test --workspace",
        ],
        "the README no longer opens with the build and the tests"
    );
    assert!(
        readme.len() <= 15 * 1024,
        "the README is {} bytes, over 15 KiB: move reference to docs/",
        readme.len()
    );
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut pages: Vec<String> = std::fs::read_dir(&docs)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .collect();
    pages.sort();
    assert!(pages.contains(&"CLI.md".to_owned()), "{pages:?}");
    for name in &pages {
        assert!(
            readme.contains(&format!("](docs/{name})")),
            "the README does not link docs/{name}"
        );
        let page = doc(name);
        for text in [readme.as_str(), page.as_str()] {
            for line in text.lines().filter(|line| line.contains("cargo install ")) {
                assert_eq!(
                    line.matches("cargo install ").count(),
                    line.matches("cargo install --locked ").count(),
                    "an install line without --locked (README or docs/{name}): {line}"
                );
            }
        }
    }
}

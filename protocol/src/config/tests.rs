//! The file's types and their errors, as a person meets them.

use std::path::Path;

use super::*;

fn parse(text: &str) -> Result<ConfigFile, String> {
    ConfigFile::parse(text, Path::new("/c.toml")).map_err(|e| e.to_string())
}

fn error(text: &str) -> String {
    parse(text).expect_err(text)
}

#[test]
fn an_unknown_key_is_refused_with_its_name_and_the_valid_ones() {
    assert_eq!(
        error("[remote]\nbashc_path = \"/b\"\nrelay_idle = 5\n"),
        "/c.toml:3: unknown key remote.relay_idle; known keys of [remote]: bridge_command, bashc_path, relay_idle_secs"
    );
    assert_eq!(
        error("[limits]\nmax_lines = 10\nmax_linez = 3\n"),
        "/c.toml:3: unknown key limits.max_linez; known keys of [limits]: max_lines, max_bytes, max_spill_bytes, max_frame_bytes, max_command_bytes, memory, cpu, pids, max_session_spill_bytes, max_total_spill_bytes, max_connections"
    );
    assert_eq!(
        error("\n[limitz]\n"),
        "/c.toml:2: unknown section [limitz]; known: [limits], [timeouts], [sessions], [containment], [env], [policy], [sandbox], [mcp], [remote]"
    );
    assert_eq!(
        error("[mcp.clients.\"a b\"]\nresult_byte = 5000\n"),
        "/c.toml:2: unknown key mcp.clients.\"a b\".result_byte; known keys of [mcp.clients.\"a b\"]: result_lines, result_bytes, error_result_bytes"
    );
    assert_eq!(
        error("[[policy.deny]]\nid = \"x\"\ncmd = \"npm\"\n"),
        "/c.toml:3: unknown key policy.deny.cmd; known keys of [policy.deny]: id, command, args, message"
    );
}

#[test]
fn a_range_error_reads_as_before() {
    assert_eq!(
        error("[timeouts]\ndefault_secs = 0\n"),
        "/c.toml:2: timeouts.default_secs must be a whole number from 1 to 86400"
    );
    assert_eq!(
        error("[limits]\nmax_lines = \"many\"\n"),
        "/c.toml:2: limits.max_lines must be a whole number from 1 to 4294967295"
    );
    assert_eq!(
        error("[sessions]\nlinger_secs = -1\n"),
        "/c.toml:2: sessions.linger_secs must be a whole number from 0 to 604800"
    );
    assert_eq!(
        error("[limits]\nmemory = \"lots\"\n"),
        "/c.toml:2: limits.memory: \"lots\" is not a size: write it like 512M or 2G"
    );
    assert_eq!(
        error("[sessions]\non_straggler = \"ignore\"\n"),
        "/c.toml:2: sessions.on_straggler must be one of \"background\", \"kill\""
    );
    assert_eq!(
        error("[mcp]\non_cancel = 3\n"),
        "/c.toml:2: mcp.on_cancel must be one of \"kill\", \"background\""
    );
    assert_eq!(
        error("[remote]\nbashc_path = 3\n"),
        "/c.toml:2: remote.bashc_path must be a string"
    );
    assert_eq!(
        error("[env]\nunset = [\"A\", 3]\n"),
        "/c.toml:2: env.unset must be a list of strings, like [\"a\", \"b\"]"
    );
    assert_eq!(
        error("[env]\nNO_COLOR = 1\n"),
        "/c.toml:2: env.NO_COLOR must be a string (`unset = [\"NAME\"]` removes a variable)"
    );
    assert_eq!(
        error("[containment]\ncgroup = \"relative\"\n"),
        "/c.toml:2: containment.cgroup must be an absolute path, like \"/sys/fs/cgroup/user.slice/bashd\""
    );
    assert_eq!(
        error("[[policy.deny]]\nid = \"x\"\ncommand = \"npm\"\n"),
        "/c.toml:1: a [[policy.deny]] rule needs `message`"
    );
    assert_eq!(
        error("[policy]\ndeny = 3\n"),
        "/c.toml:2: policy.deny must be written as [[policy.deny]] tables"
    );
    assert_eq!(
        error("limits = 3\n"),
        "/c.toml:1: limits must be a section ([limits])"
    );
    assert_eq!(
        error("[mcp]\nclients = 3\n"),
        "/c.toml:2: mcp.clients must be a table of clients, like [mcp.clients.\"codex-mcp-client\"]"
    );
}

/// Issue 31: bashc clamped an idle time below 5 s that the daemon refused; both read
/// `[remote]` through this one type now.
#[test]
fn a_relay_idle_time_below_the_floor_is_refused() {
    for secs in [0, 3, 4] {
        let err = error(&format!("[remote]\nrelay_idle_secs = {secs}\n"));
        assert!(
            err.starts_with(
                "/c.toml:2: remote.relay_idle_secs must be a whole number from 5 to 86400: "
            ) && err.contains("0 cannot turn relays off"),
            "{err}"
        );
    }
    let remote = parse("[remote]\nrelay_idle_secs = 5\n").unwrap().remote;
    assert_eq!(remote.relay_idle(), std::time::Duration::from_secs(5));
    assert_eq!(
        ConfigFile::default().remote.relay_idle(),
        std::time::Duration::from_secs(600)
    );
}

#[test]
fn keys_across_sections_are_checked_at_their_line() {
    assert_eq!(
        error("[env]\nTERM = \"xterm\"\nunset = [\"TERM\"]\n"),
        "/c.toml:2: env.TERM is both set and in env.unset; keep one"
    );
    // Both written (issue 44: an unset default follows the floor).
    let err = error("\n[sandbox]\ndefault = \"off\"\nfloor = \"read-only\"\n");
    assert!(
        err.starts_with("/c.toml:2: sandbox.default = \"off\" is looser than sandbox.floor"),
        "{err}"
    );
}

#[test]
fn the_effective_section_shows_every_key_and_what_differs() {
    let file = parse("[limits]\nmax_lines = 10\ncpu = 1.5\n").unwrap();
    let text = section_text("limits", &file.limits, &Limits::default(), &|_| None);
    assert!(
        text.starts_with("[limits]\nmax_lines = 10  # default: 2000\nmax_bytes = 51200\n"),
        "{text}"
    );
    assert!(
        text.contains("\n# memory: none\ncpu = 1.5  # default: none\n# pids: none\n"),
        "{text}"
    );
}

/// Issue 31: the names of built-in rules and the form of sandbox paths are the file's
/// checks, so bashc refuses what bashd refuses, in the same words at the same line.
#[test]
fn a_rule_name_or_a_sandbox_path_is_refused_by_every_reader() {
    assert_eq!(
        error("[policy]\ndisable = [\"git-add-blnd\"]\n"),
        "/c.toml:2: policy.disable names \"git-add-blnd\", which is no built-in rule; built-in rules: git-add-blind, git-push-force, rm-dangerous, dynamic-command"
    );
    assert_eq!(
        error("[sandbox]\ndefault = \"off\"\nwritable = [\"/data\", \"cache\"]\n"),
        "/c.toml:3: sandbox.writable: \"cache\" is neither absolute nor under ~: write it like \"/data/cache\" or \"~/.cache\""
    );
    assert_eq!(
        error("[sandbox]\nunix_sockets = [\"~user/s\"]\n"),
        "/c.toml:2: sandbox.unix_sockets: \"~user/s\" is neither absolute nor under ~: write it like \"/data/cache\" or \"~/.cache\""
    );
    // Positive control: every built-in rule, `~`, `~/...` and absolute paths.
    let names: Vec<String> = BUILTIN_RULE_IDS.iter().map(|id| quoted(id)).collect();
    let file = parse(&format!(
        "[policy]\ndisable = [{}]\n[sandbox]\nwritable = [\"~\", \"~/.cache\", \"/data\"]\ndeny_read = [\"~/.ssh\"]\n",
        names.join(", ")
    ))
    .unwrap();
    assert_eq!(file.policy.disable.0.len(), BUILTIN_RULE_IDS.len());
    assert_eq!(sandbox_path("~"), Ok(SandboxPath::Home("")));
    assert_eq!(sandbox_path("~/.cache"), Ok(SandboxPath::Home(".cache")));
    assert_eq!(sandbox_path("/data"), Ok(SandboxPath::Absolute("/data")));
}

/// Issue 31: the key an error names is found from where toml read it (`error.rs`'s
/// `Place`), through headers that open a table within a list, implicit tables and
/// inline ones; these read as they did when serde_path_to_error kept the path.
#[test]
fn an_error_names_its_key_wherever_the_file_writes_it() {
    for (text, expected) in [
        (
            "[sandbox.writable.x]\nresult_lines = 5\n",
            "/c.toml:1: sandbox.writable must be a list of strings, like [\"a\", \"b\"]",
        ),
        (
            "[[policy.deny]]\nid = \"x\"\ncommand = \"y\"\nmessage = \"z\"\n\n[[policy.deny]]\nid = \"x\"\n",
            "/c.toml:6: a [[policy.deny]] rule needs `command`",
        ),
        (
            "[policy]\ndeny = [{ id = \"x\", command = \"npm\" }, 3]\n",
            "/c.toml:2: a [[policy.deny]] rule needs `message`",
        ),
        (
            "[policy]\ndeny = [[\"a\"]]\n",
            "/c.toml:2: policy.deny must be a [[policy.deny]] table",
        ),
        (
            "[mcp]\nclients.a.bogus = 1\n",
            "/c.toml:2: unknown key mcp.clients.a.bogus; known keys of [mcp.clients.a]: result_lines, result_bytes, error_result_bytes",
        ),
        (
            "[mcp.clients]\na = 1\n",
            "/c.toml:2: mcp.clients.a must be a table of result_lines, result_bytes, error_result_bytes",
        ),
        (
            "[env]\nA = \"x\"\n\"A=B\" = \"x\"\n",
            "/c.toml:1: env: \"A=B\" is not a variable name",
        ),
        (
            "[[env.unset]]\n",
            "/c.toml:1: env.unset must be a list of strings, like [\"a\", \"b\"]",
        ),
        (
            "limits = { max_lines = 0 }\n",
            "/c.toml:1: limits.max_lines must be a whole number from 1 to 4294967295",
        ),
    ] {
        assert_eq!(error(text), expected, "{text:?}");
    }
}

#[test]
fn every_bad_key_of_a_file_is_told_at_once_in_the_order_of_its_lines() {
    let said = error(
        "[limits]\nmax_lines = 0\nmax_linez = 3\n\n[sandbox]\nfloor = \"nope\"\n\n[limitz]\n",
    );
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 4, "{said}");
    assert!(
        lines[0].starts_with("/c.toml:2: limits.max_lines"),
        "{said}"
    );
    assert!(
        lines[1].starts_with("/c.toml:3: unknown key limits.max_linez"),
        "{said}"
    );
    assert!(lines[2].starts_with("/c.toml:6: sandbox.floor"), "{said}");
    assert!(
        lines[3].starts_with("/c.toml:8: unknown section [limitz]"),
        "{said}"
    );
    // One bad key is one line, as before.
    assert_eq!(error("[limits]\nmax_lines = 0\n").lines().count(), 1);
}

#[test]
fn every_syntax_error_of_a_file_is_told_at_once() {
    let said = error("[limits\nmax_lines = 10\n\n[sandbox]\nfloor = \n");
    let lines: Vec<&str> = said.lines().collect();
    assert!(lines.len() >= 2, "{said}");
    assert!(lines[0].starts_with("/c.toml:1: "), "{said}");
    assert!(lines.iter().any(|l| l.starts_with("/c.toml:5: ")), "{said}");
}

/// `[sandbox] allow_hosts` (issue 43): each form the issue names is read, and a
/// malformed entry is refused at its own line, in a list written over several lines.
#[test]
fn allow_hosts_reads_each_form_and_refuses_a_malformed_entry_at_its_line() {
    let file = parse(
        "[sandbox]\nallow_hosts = [\"Example.org.\", \"*.example.org\", \"example.org:8443\", \"192.0.2.7\", \"192.0.2.7:8080\", \"[2001:db8::1]\", \"[::1]:3000\"]\n",
    )
    .unwrap();
    let entries: Vec<String> = file
        .sandbox
        .allow_hosts
        .0
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        entries,
        [
            "example.org",
            "*.example.org",
            "example.org:8443",
            "192.0.2.7",
            "192.0.2.7:8080",
            "[2001:db8::1]",
            "[::1]:3000"
        ]
    );
    assert_eq!(
        file.sandbox.allow_hosts.0[2],
        AllowHost {
            host: HostPattern::Name("example.org".into()),
            port: Some(8443)
        }
    );
    assert_eq!(
        file.sandbox.allow_hosts.0[1].host,
        HostPattern::Subdomains("example.org".into())
    );
    let at_line_4 = |entry: &str| {
        error(&format!(
            "[sandbox]\nallow_hosts = [\n  \"example.org\",\n  {entry},\n]\n"
        ))
    };
    let form = "write a name (\"example.org\"), a wildcard (\"*.example.org\") or an IP address (\"192.0.2.7\", \"[2001:db8::1]\"), each with an optional \":PORT\"";
    for (entry, why) in [
        (
            "\"exa mple.org\"",
            "a name is labels of letters, digits, - and _ between dots",
        ),
        (
            "\"example.org:0\"",
            "the port \"0\" is not a number from 1 to 65535",
        ),
        (
            "\"example.org:http\"",
            "the port \"http\" is not a number from 1 to 65535",
        ),
        (
            "\"ex*.org\"",
            "a * only as the whole first label, \"*.example.org\"",
        ),
        (
            "\"*\"",
            "a * only as the whole first label, \"*.example.org\"",
        ),
        (
            "\"2001:db8::1\"",
            "an IPv6 address goes in brackets, like \"[2001:db8::1]\"",
        ),
        ("\"[2001:db8::1\"", "a [ with no ]"),
        ("\"\"", "it is empty"),
        (
            "\"a..b\"",
            "a name is labels of letters, digits, - and _ between dots",
        ),
    ] {
        let shown = entry.trim_matches('"').replace('"', "\\\"");
        assert_eq!(
            at_line_4(entry),
            format!(
                "/c.toml:4: sandbox.allow_hosts: \"{shown}\" is not a host entry ({why}): {form}"
            ),
            "{entry}"
        );
    }
    assert_eq!(
        at_line_4("3"),
        "/c.toml:4: sandbox.allow_hosts must be a list of hosts, like [\"example.org\", \"*.example.org:8443\"]"
    );
}

//! The daemon's settings from a config file, and `--check-config` loading to itself.

use std::path::Path;
use std::time::Duration;

use bashd_protocol::config::{ClientBudget, Whole};
use bashd_protocol::{OnTimeout, limits};

use super::*;

fn parse(text: &str) -> Result<Config, String> {
    Config::parse(text, Path::new("/c.toml")).map_err(|e| e.to_string())
}

#[test]
fn empty_file_means_defaults() {
    let config = parse("").unwrap();
    assert_eq!(config.limits.max_lines, limits::DEFAULT_MAX_LINES);
    assert!(config.env.iter().any(|(k, v)| k == "PAGER" && v == "cat"));
}

#[test]
fn keys_override_defaults() {
    let config = parse(
        "[limits]\nmax_lines = 10\n[timeouts]\nkill_grace_ms = 50\n[env]\nPAGER = \"more\"\n",
    )
    .unwrap();
    assert_eq!(config.limits.max_lines, 10);
    assert_eq!(config.timeouts.kill_grace, Duration::from_millis(50));
    let pager: Vec<_> = config.env.iter().filter(|(k, _)| k == "PAGER").collect();
    assert_eq!(pager, [&("PAGER".to_owned(), "more".to_owned())]);
}

/// Issue 19: `[remote]` is bashc's, but checked here like any other section.
#[test]
fn remote_keys_are_checked() {
    assert!(parse("[remote]\nbashc_path = \"/opt/bashc\"\nrelay_idle_secs = 60\n").is_ok());
    let err = parse("[remote]\nrelay_idle_secs = 0\n").unwrap_err();
    assert!(
        err.contains("remote.relay_idle_secs must be a whole number from 5")
            && err.contains("0 cannot turn relays off"),
        "{err}"
    );
    assert!(parse("[remote]\nrelay_idle_secs = 4\n").is_err());
    assert!(parse("[remote]\nrelay_idle_secs = 5\n").is_ok());
    let err = parse("[remote]\nrelay_idle = 5\n").unwrap_err();
    assert!(err.contains("relay_idle_secs"), "{err}");
}

/// Issue 33: `--check-config` shows `[remote]` too, and it loads back.
#[test]
fn the_effective_config_shows_remote() {
    let defaults = parse("").unwrap().effective_toml();
    assert!(
        defaults.contains("\n[remote]\n# bridge_command: none")
            && defaults.contains("# bashc_path: none")
            && defaults.contains("relay_idle_secs = 600\n"),
        "{defaults}"
    );
    let config = parse("[remote]\nbashc_path = \"/opt/bashc\"\nrelay_idle_secs = 60\n").unwrap();
    let effective = config.effective_toml();
    assert!(
        effective.contains("bashc_path = \"/opt/bashc\"  # default: none\n")
            && effective.contains("relay_idle_secs = 60  # default: 600\n"),
        "{effective}"
    );
    assert_eq!(parse(&effective).unwrap().file.remote, config.file.remote);
}

/// Issue 34: the budgets of MCP clients and the credentials passed into jobs,
/// read by `bashc mcp`, are checked here like every other key.
#[test]
fn mcp_clients_and_env_pass_are_checked() {
    let text = "[env]\npass = [\"OPENAI_API_KEY\"]\n\n[mcp.clients.\"codex-mcp-client\"]\nresult_bytes = 20000\n";
    let config = parse(text).unwrap();
    assert_eq!(config.file.env.pass, ["OPENAI_API_KEY"]);
    let clients: Vec<_> = config.file.mcp.clients.clone().into_iter().collect();
    assert_eq!(
        clients,
        [(
            "codex-mcp-client".to_owned(),
            ClientBudget {
                result_bytes: Whole::new(20_000),
                ..ClientBudget::default()
            }
        )]
    );
    let effective = parse(&config.effective_toml()).unwrap();
    assert_eq!(effective.file.mcp.clients, config.file.mcp.clients);
    assert_eq!(effective.file.env.pass, config.file.env.pass);
    let err = parse("[mcp.clients.x]\nresult_byte = 5000\n").unwrap_err();
    assert!(
        err.contains("unknown key") && err.contains("result_bytes"),
        "{err}"
    );
    let err = parse("[mcp.clients.x]\nresult_bytes = 5\n").unwrap_err();
    assert!(err.contains("must be a whole number from 1000"), "{err}");
    assert!(parse("[env]\npass = \"OPENAI_API_KEY\"\n").is_err());
}

/// Issue 15: `[mcp]` bounds MCP calls; its values are checked like any other.
#[test]
fn the_mcp_section_sets_the_call_budget_and_what_a_cancel_does() {
    let defaults = parse("").unwrap();
    assert_eq!(defaults.mcp.max_call, Duration::from_secs(50));
    assert_eq!(defaults.mcp.on_cancel, OnCancel::Kill);
    let config = parse("[mcp]\nmax_call_secs = 3\non_cancel = \"background\"\n").unwrap();
    assert_eq!(config.mcp.max_call, Duration::from_secs(3));
    assert_eq!(config.mcp.on_cancel, OnCancel::Background);
    let effective = config.effective_toml();
    assert!(
        effective.contains("[mcp]\nmax_call_secs = 3  # default: 50\non_cancel = \"background\"  # default: \"kill\"\n"),
        "{effective}"
    );
    assert_eq!(parse(&effective).unwrap().mcp, config.mcp);
    let err = parse("[mcp]\nmax_call_secs = 0\n").unwrap_err();
    assert!(
        err.contains("mcp.max_call_secs must be a whole number from 1 to 86400"),
        "{err}"
    );
    let err = parse("[mcp]\non_cancel = \"ignore\"\n").unwrap_err();
    assert!(
        err.contains("mcp.on_cancel must be one of \"kill\", \"background\""),
        "{err}"
    );
    let err = parse("[mcp]\nbudget = 3\n").unwrap_err();
    assert!(err.contains("unknown key mcp.budget"), "{err}");
}

fn env_of<'c>(config: &'c Config, name: &str) -> Option<&'c str> {
    let found = config.env.iter().find(|(k, _)| k == name);
    found.map(|(_, v)| v.as_str())
}

/// Issue 24: an `[env]` that names a few variables must not drop the others.
#[test]
fn env_adds_to_the_hardening_set_and_only_unset_removes() {
    let config =
        parse("[env]\nPAGER = \"less\"\nPIP_NO_INPUT = \"1\"\nunset = [\"TERM\"]\n").unwrap();
    assert_eq!(env_of(&config, "PAGER"), Some("less"));
    assert_eq!(env_of(&config, "PIP_NO_INPUT"), Some("1"));
    assert_eq!(env_of(&config, "TERM"), None);
    for (name, value) in Config::default().env {
        if name != "PAGER" && name != "TERM" {
            assert_eq!(env_of(&config, &name), Some(value.as_str()), "{name}");
        }
    }
    let err = parse("[env]\nTERM = \"xterm\"\nunset = [\"TERM\"]\n").unwrap_err();
    assert!(
        err.starts_with("/c.toml:2: env.TERM is both set and in env.unset"),
        "{err}"
    );
    let err = parse("[env]\nunset = \"TERM\"\n").unwrap_err();
    assert!(err.contains("env.unset must be a list of strings"), "{err}");
    let err = parse("[env]\nNO_COLOR = 1\n").unwrap_err();
    assert!(err.contains("env.NO_COLOR must be a string"), "{err}");
}

/// The example config of docs/CONFIG.md (the README's until issue 46), as a user copies it.
fn documented_example() -> String {
    let page = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/CONFIG.md"));
    let section = page
        .split("\n## The file\n")
        .nth(1)
        .expect("docs/CONFIG.md has a section \"The file\"");
    let mut lines = section.lines().skip_while(|line| *line != "    [limits]");
    let mut example = String::new();
    for line in lines.by_ref() {
        match line.strip_prefix("    ") {
            Some(line) => example.push_str(line),
            None if line.is_empty() => {}
            None => break,
        }
        example.push('\n');
    }
    assert!(!example.is_empty(), "no example config in docs/CONFIG.md");
    example
}

/// Issue 24: copying the documented example must keep every safety default.
#[test]
fn the_documented_example_config_leaves_every_rule_on_and_every_hardening_variable_set() {
    let example = documented_example();
    let config = Config::parse(&example, Path::new("docs/CONFIG.md")).unwrap();
    assert_eq!(config.file.policy.disable.0, Vec::<String>::new());
    for command in ["git add -A", "git push --force", "rm -rf ~"] {
        assert!(config.policy.check(command).is_err(), "{command} passes");
    }
    for (name, value) in Config::default().env {
        assert_eq!(env_of(&config, &name), Some(value.as_str()), "{name}");
    }
    let effective = config.effective_toml();
    assert!(!effective.contains("OFF"), "{effective}");
}

/// `bashd --check-config` prints a file that loads to the config it describes.
#[test]
fn the_effective_config_loads_to_itself_and_shows_what_is_off() {
    let config = parse(
        "[limits]\nmax_lines = 10\n[containment]\ncgroup = \"/sys/fs/cgroup/b\"\n[env]\nTERM = \"xterm\"\nA_B = \"x\\\"y\"\nunset = [\"NO_COLOR\"]\n[policy]\ndisable = [\"git-add-blind\"]\n[[policy.deny]]\nid = \"no-publish\"\ncommand = \"npm\"\nargs = [\"publish\"]\nmessage = \"CI\"\n",
    )
    .unwrap();
    let effective = config.effective_toml();
    for line in [
        "max_lines = 10  # default: 2000\n",
        "max_bytes = 51200\n",
        "cgroup = \"/sys/fs/cgroup/b\"  # default: none\n",
        "TERM = \"xterm\"  # default: \"dumb\"\n",
        "A_B = 'x\"y'  # added\n",
        "unset = [\"NO_COLOR\"]  # removed from the hardening set\n",
        "# built-in rule git-add-blind: OFF\n",
        "# built-in rule rm-dangerous: on\n",
        "disable = [\"git-add-blind\"]\n",
        "[[policy.deny]]\nid = \"no-publish\"\ncommand = \"npm\"\nargs = [\"publish\"]\nmessage = \"CI\"\n",
    ] {
        assert!(effective.contains(line), "no {line:?} in:\n{effective}");
    }
    let again = parse(&effective).unwrap();
    assert_eq!(again.effective_toml(), effective);
    assert_eq!(again.env, config.env);
    assert_eq!(again.file.policy, config.file.policy);
}

#[test]
fn an_unknown_key_names_file_line_and_key() {
    let err = parse("[limits]\nmax_lines = 10\nmax_linez = 3\n").unwrap_err();
    assert!(
        err.starts_with("/c.toml:3: unknown key limits.max_linez"),
        "{err}"
    );
    let err = parse("\n[limitz]\n").unwrap_err();
    assert!(
        err.starts_with("/c.toml:2: unknown section [limitz]"),
        "{err}"
    );
}

#[test]
fn a_bad_value_names_its_range() {
    let err = parse("[timeouts]\ndefault_secs = 0\n").unwrap_err();
    assert!(
        err.contains("/c.toml:2: timeouts.default_secs must be a whole number from 1"),
        "{err}"
    );
    let err = parse("[limits]\nmax_lines = \"many\"\n").unwrap_err();
    assert!(
        err.contains("limits.max_lines must be a whole number"),
        "{err}"
    );
    let err = parse("[limits]\nmemory = \"lots\"\n").unwrap_err();
    assert!(
        err.contains("/c.toml:2: limits.memory: \"lots\" is not a size"),
        "{err}"
    );
    let err = parse("[limits]\ncpu = 0\n").unwrap_err();
    assert!(err.contains("limits.cpu: \"0\" cores"), "{err}");
}

/// Job limits are written as on the command line, and shown back so they load to
/// the same.
#[test]
fn job_limits_read_as_people_write_them() {
    let config = parse("[limits]\nmemory = \"1.5G\"\ncpu = 1.5\npids = 512\n").unwrap();
    let job = config.limits.job;
    assert_eq!(job.memory_bytes, Some(3 << 29));
    assert_eq!(job.cpu_millicores, Some(1500));
    assert_eq!(job.pids, Some(512));
    assert_eq!(
        parse("[limits]\ncpu = 2\n")
            .unwrap()
            .limits
            .job
            .cpu_millicores,
        Some(2000)
    );
    let effective = config.effective_toml();
    assert!(
        effective.contains("cpu = 1.5  # default: none\n"),
        "{effective}"
    );
    assert_eq!(parse(&effective).unwrap().limits.job, job);
    assert!(
        Config::default()
            .effective_toml()
            .contains("# memory: none\n")
    );
}

#[test]
fn policy_rules_come_from_the_config() {
    let config = parse(
        "[policy]\ndisable = [\"git-add-blind\"]\n\n[[policy.deny]]\nid = \"no-publish\"\ncommand = \"npm\"\nargs = [\"publish\"]\nmessage = \"CI releases\"\n",
    )
    .unwrap();
    assert!(config.policy.check("git add -A").is_ok());
    assert_eq!(
        config.policy.check("npm publish").unwrap_err().rule,
        "no-publish"
    );

    let err = parse("[policy]\ndisable = [\"git-add-blnd\"]\n").unwrap_err();
    assert!(
        err.starts_with("/c.toml:2: policy.disable names \"git-add-blnd\""),
        "{err}"
    );
    let err = parse("[[policy.deny]]\nid = \"x\"\ncommand = \"npm\"\n").unwrap_err();
    assert!(err.contains("needs `message`"), "{err}");
    let err = parse("[[policy.deny]]\nid = \"x\"\ncmd = \"npm\"\n").unwrap_err();
    assert!(
        err.starts_with("/c.toml:3: unknown key policy.deny.cmd"),
        "{err}"
    );
}

#[test]
fn sessions_and_on_timeout() {
    let config = parse(
        "[sessions]\nlinger_secs = 3\non_straggler = \"kill\"\nkeep_finished = 5\n[timeouts]\non_timeout = \"kill\"\n",
    )
    .unwrap();
    assert_eq!(config.sessions.linger, Duration::from_secs(3));
    assert_eq!(config.sessions.on_straggler, OnStraggler::Kill);
    assert_eq!(config.sessions.keep_finished, 5);
    assert_eq!(config.timeouts.on_timeout, OnTimeout::Kill);
    let err = parse("[sessions]\non_straggler = \"ignore\"\n").unwrap_err();
    assert!(
        err.contains("/c.toml:2: sessions.on_straggler must be one of \"background\", \"kill\""),
        "{err}"
    );
}

#[test]
fn a_syntax_error_names_the_line() {
    let err = parse("[limits]\nmax_lines = = 3\n").unwrap_err();
    assert!(err.starts_with("/c.toml:2:"), "{err}");
}

#[test]
fn containment_takes_a_mechanism_and_an_absolute_cgroup() {
    let config =
        parse("[containment]\nmechanism = \"scan\"\ncgroup = \"/sys/fs/cgroup/x\"\n").unwrap();
    assert_eq!(config.containment.mechanism, Mechanism::Scan);
    assert_eq!(
        config.containment.cgroup.as_deref(),
        Some(Path::new("/sys/fs/cgroup/x"))
    );
    let err = parse("[containment]\ncgroup = \"relative\"\n").unwrap_err();
    assert!(err.contains("must be an absolute path"), "{err}");
    let err = parse("[containment]\nmechanism = \"magic\"\n").unwrap_err();
    assert!(err.contains("must be one of \"auto\", \"scan\""), "{err}");
}

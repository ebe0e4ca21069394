//! The tools' arguments and schemas, as clients send them.

use super::*;

fn parse_as<T: for<'de> Deserialize<'de>>(
    tool: &str,
    arguments: serde_json::Value,
) -> Result<T, CallError> {
    let serde_json::Value::Object(mut arguments) = arguments else {
        panic!("arguments are an object")
    };
    prepare(&mut arguments, schema_of(tool).unwrap());
    parse(serde_json::Value::Object(arguments))
}

/// Issue 34: Gemini CLI adds `wait_for_previous` to every call of every tool; a
/// model's own typo is still refused, naming the arguments there are.
#[test]
fn arguments_clients_add_are_taken_and_typos_refused() {
    let calls = [
        ("bash", serde_json::json!({"command": "ls"})),
        ("bash_check", serde_json::json!({"job": "j1"})),
        ("bash_wait", serde_json::json!({"job": "j1"})),
        ("bash_kill", serde_json::json!({"job": "j1"})),
        ("bash_jobs", serde_json::json!({})),
        ("bash_output", serde_json::json!({"job": "j1"})),
        ("bash_send", serde_json::json!({"job": "j1", "text": "y\n"})),
        ("bash_screen", serde_json::json!({"job": "j1"})),
    ];
    for (tool, mut arguments) in calls {
        arguments["wait_for_previous"] = serde_json::json!(true);
        let parsed = match tool {
            "bash" => parse_as::<BashArgs>(tool, arguments).map(drop),
            "bash_wait" => parse_as::<WaitArgs>(tool, arguments).map(drop),
            "bash_kill" => parse_as::<KillArgs>(tool, arguments).map(drop),
            "bash_jobs" => parse_as::<NoArgs>(tool, arguments).map(drop),
            "bash_output" => parse_as::<OutputArgs>(tool, arguments).map(drop),
            "bash_send" => parse_as::<SendArgs>(tool, arguments).map(drop),
            _ => parse_as::<JobArgs>(tool, arguments).map(drop),
        };
        if let Err(e) = parsed {
            panic!("{tool}: {}", e.0);
        }
    }
    let err = parse_as::<BashArgs>(
        "bash",
        serde_json::json!({"command": "ls", "wait_for_previus": true}),
    )
    .unwrap_err();
    assert!(
        err.0.contains("unknown field `wait_for_previus`")
            && err.0.contains("`command`")
            && err.0.contains("`timeout_secs`"),
        "{}",
        err.0
    );
}

#[test]
fn a_wrong_argument_is_named() {
    let err = parse_as::<BashArgs>(
        "bash",
        serde_json::json!({"command": "ls", "timeout_secs": "soon"}),
    )
    .unwrap_err();
    assert!(
        err.0
            .starts_with("bad argument `timeout_secs`: invalid type"),
        "{}",
        err.0
    );
    let err = parse_as::<BashArgs>("bash", serde_json::json!({"comand": "ls"})).unwrap_err();
    assert!(err.0.contains("unknown field `comand`"), "{}", err.0);
    let err = parse_as::<JobArgs>("bash_check", serde_json::json!({})).unwrap_err();
    assert!(err.0.contains("missing field `job`"), "{}", err.0);
    let err = parse_as::<BashArgs>("bash", serde_json::json!({"command": "ls", "mode": "fast"}))
        .unwrap_err();
    assert!(
        err.0
            .starts_with("bad argument `mode`: unknown variant `fast`"),
        "{}",
        err.0
    );
}

/// Issue 15: what Python and form-based clients send is taken.
#[test]
fn numbers_and_booleans_come_in_the_forms_clients_write() {
    let args = parse_as::<BashArgs>(
        "bash",
        serde_json::json!({"command": "ls", "timeout_secs": 30.0, "max_lines": "20", "merge_stderr": "true", "cpu": "1.5"}),
    )
    .unwrap_or_else(|e| panic!("{}", e.0));
    assert_eq!(args.timeout_secs, Some(30));
    assert_eq!(args.max_lines, Some(20));
    assert_eq!(args.merge_stderr, Some(true));
    assert_eq!(args.cpu, Some(1.5));
    let args = parse_as::<WaitArgs>(
        "bash_wait",
        serde_json::json!({"job": "j1", "timeout_secs": "2.5"}),
    )
    .unwrap_or_else(|e| panic!("{}", e.0));
    assert_eq!(args.timeout_secs, Some(2.5));
    let err = parse_as::<BashArgs>(
        "bash",
        serde_json::json!({"command": "ls", "timeout_secs": 2.5}),
    )
    .unwrap_err();
    assert!(
        err.0.starts_with("bad argument `timeout_secs`"),
        "{}",
        err.0
    );
}

/// Issue 34: a client that hides tools behind a search (Claude Code) finds each
/// tool by what an agent asks for, in its name and description, and the server's
/// instructions say them all.
#[test]
fn tools_are_found_by_what_an_agent_searches_for() {
    let searches = [
        ("run a shell command", "bash"),
        ("start a dev server", "bash"),
        ("wait for output", "bash_wait"),
        ("type into a program", "bash_send"),
    ];
    for (search, tool) in searches {
        let found = TOOLS
            .iter()
            .find(|t| t.name == tool)
            .and_then(|t| t.description.as_deref())
            .is_some_and(|d| d.to_lowercase().contains(search));
        assert!(found, "{tool}'s description does not say {search:?}");
        assert!(
            INSTRUCTIONS.to_lowercase().contains(search),
            "the instructions do not say {search:?}"
        );
    }
}

/// Issue 15: every tool's schema is flat.
#[test]
fn every_schema_keeps_the_flat_rules() {
    for tool in TOOLS.iter() {
        assert_eq!(
            schema::flat_rule_breaks(&tool.input_schema),
            Vec::<String>::new(),
            "{}: {:?}",
            tool.name,
            tool.input_schema
        );
    }
}

//! The four pinned agent programs (Claude Code, Codex, Gemini CLI, OpenCode) driving
//! `bashc mcp` offline against the fake model of `bashd_tests::fake_model` (issue 34):
//! each is set up with the README's snippet for it, as written, and the test asserts
//! what its model saw. Opt-in, since it needs the programs: `tests/agents/install.sh`,
//! then `BASHD_AGENTS=1 cargo test -p bashd-tests --test agents`. Without both it says
//! why it skipped and passes, so `cargo test --workspace` stays as it is.
//!
//! Each test prints a result line per assertion (`agents: CLIENT: ...`) and the limits
//! it measured; docs/AGENTS.md holds the last run's.

mod setup;

use std::time::Instant;

use bashd_tests::fake_model::{FakeModel, Turn};
use serde_json::{Value, json};
use setup::{Agent, Run};

/// A conversation that checks every assertion of issue 34 in one run of a program
/// (each run costs seconds of node start-up). `first_turns` loads the tools where the
/// program hides them (Claude Code's tool search); `whole_lines` is a `seq` whose result
/// is under the client's limit; `extra` goes into every `bash` call (Gemini's model
/// sets `wait_for_previous`, which its CLI adds to every tool).
fn script(run: &Run, first_turns: Vec<Turn>, whole_lines: u32, extra: Value) -> Vec<Turn> {
    let bash = |command: &str, more: Value| {
        let mut args = json!({"command": command});
        for source in [&extra, &more] {
            for (k, v) in source.as_object().into_iter().flatten() {
                args[k] = v.clone();
            }
        }
        Turn::call("bash", args)
    };
    let other = run.other_session_job();
    let mut turns = first_turns;
    turns.extend([
        // (a) under the limit: whole, with its status first and last.
        bash(&format!("seq 1 {whole_lines}"), json!({})),
        // (b) over it: the exit code, and the call that reads the rest ...
        bash("seq 1 100000", json!({})),
        // ... followed as a model would, while another session's job starts (d).
        Turn::with(move |results| {
            other();
            match next_page_call(results.last().map(String::as_str).unwrap_or("")) {
                Some(args) => Turn::call("bash_output", args),
                None => Turn::text("the result named no next call"),
            }
        }),
        // (f) the agent's credentials are not in jobs; another variable is.
        bash(
            "env | grep -E '^(BASHD_AGENTS_CONTROL|[A-Z_]*(API_KEY|TOKEN))=' | cut -d= -f1 | sort",
            json!({}),
        ),
        // The client's own cut, measured: a call's own max_lines/max_bytes win, so
        // bashd sends the whole 168,894 bytes and the client cuts as it does.
        bash(
            "seq 1 30000",
            json!({"max_lines": 40000, "max_bytes": 1000000}),
        ),
        // And of an error (isError), which some clients cut elsewhere.
        bash(
            "seq 1 30000; exit 3",
            json!({"max_lines": 40000, "max_bytes": 1000000}),
        ),
        // Issue 32: the probe server pushes every kind of notification now and
        // after its result; the two requests after show what reached the model.
        Turn::call("probe", json!({})),
        bash("sleep 1; echo after", json!({})),
        // A background job of the program's own session, which must outlive the call
        // (OpenCode cancels each call after its result) and the program (it lingers).
        bash("sleep 301", json!({"mode": "background"})),
        // Issue 44: under the default an MCP job is confined to its workspace ...
        bash(
            "touch \"$HOME/written-by-a-job\" 2>/dev/null && echo wrote-home || echo confined",
            json!({}),
        ),
        // ... and a request for no sandbox is an ask that only the person answers.
        bash("echo unconfined", json!({"sandbox": "off"})),
        Turn::text("all done"),
    ]);
    turns
}

/// The arguments of the `bash_output(...)` call a result names.
fn next_page_call(result: &str) -> Option<Value> {
    let start = result.find("bash_output(")? + "bash_output(".len();
    let inner = &result[start..start + result[start..].find(')')?];
    let mut args = json!({});
    for pair in inner.split(", ") {
        let (key, value) = pair.split_once('=')?;
        args[key] = match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            Some(text) => json!(text),
            None => json!(value.parse::<u64>().ok()?),
        };
    }
    Some(args)
}

/// What a result of `seq 1 N` must be to have arrived whole: the status line first and
/// last, and every number in order.
fn check_whole(result: &str, lines: u32) -> Result<(), String> {
    let body: Vec<&str> = result.lines().filter(|l| !l.is_empty()).collect();
    if body.first() != Some(&"exit code: 0") || body.last() != Some(&"exit code: 0") {
        return Err(format!(
            "the status is not first and last: starts {:?}, ends {:?}",
            body.first(),
            body.last()
        ));
    }
    let numbers: Vec<&str> = body
        .iter()
        .copied()
        .filter(|l| l.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    let want: Vec<String> = (1..=lines).map(|n| n.to_string()).collect();
    if numbers != want {
        return Err(format!(
            "{} of {lines} lines arrived, or not in order",
            numbers.len()
        ));
    }
    Ok(())
}

/// Where and how the client cut the `seq 1 30000` result it was given whole: the
/// run of lines kept from the start, the run kept at the end, and what it put between.
fn describe_cut(result: &str) -> String {
    let lines: Vec<&str> = result.lines().collect();
    let number = |l: &str| l.trim().parse::<u32>().ok();
    let Some(first) = lines.iter().position(|l| number(l) == Some(1)) else {
        return format!(
            "{} characters passed on, without the first line: {:?}",
            result.chars().count(),
            result.chars().take(300).collect::<String>()
        );
    };
    let mut head_end = first;
    while lines.get(head_end + 1).and_then(|l| number(l)) == number(lines[head_end]).map(|n| n + 1)
    {
        head_end += 1;
    }
    let last = lines
        .iter()
        .rposition(|l| number(l).is_some())
        .unwrap_or(head_end);
    let mut tail_start = last;
    while tail_start > head_end + 1
        && number(lines[tail_start - 1]).map(|n| n + 1) == number(lines[tail_start])
    {
        tail_start -= 1;
    }
    let head = number(lines[head_end]).unwrap_or(0);
    let between: String = lines[head_end + 1..tail_start.max(head_end + 1)]
        .iter()
        .filter(|l| number(l).is_none())
        .copied()
        .collect::<Vec<_>>()
        .join(" / ");
    let tail = if tail_start > head_end {
        format!(
            ", then {}..{}",
            number(lines[tail_start]).unwrap_or(0),
            number(lines[last]).unwrap_or(0)
        )
    } else {
        String::new()
    };
    format!(
        "{} characters passed on (bashd sent about 168,930): lines 1..{head}{tail}; between: {:?}",
        result.chars().count(),
        between.chars().take(200).collect::<String>()
    )
}

/// One assertion's verdict, printed and kept, so one failure does not hide the rest.
struct Verdicts {
    client: &'static str,
    failed: Vec<String>,
}

impl Verdicts {
    fn check(&mut self, what: &str, verdict: Result<(), String>) {
        match verdict {
            Ok(()) => eprintln!("agents: {}: pass: {what}", self.client),
            Err(why) => {
                eprintln!("agents: {}: FAIL: {what}: {why}", self.client);
                self.failed.push(format!("{what}: {why}"));
            }
        }
    }

    fn note(&self, what: &str) {
        eprintln!("agents: {}: {what}", self.client);
    }

    fn finish(self) {
        assert!(
            self.failed.is_empty(),
            "{}: {} failed:\n{}",
            self.client,
            self.failed.len(),
            self.failed.join("\n")
        );
    }
}

/// Runs `agent` through the script and checks what its model saw.
fn drive(agent: Agent) {
    let Some(mut run) = Run::prepare(agent) else {
        return;
    };
    let first = match agent {
        // Claude Code offers MCP tools through its tool search only: the model loads
        // them as it would after finding them: by what the README says it searches for,
        // then by name.
        Agent::Claude => vec![
            Turn::call("ToolSearch", json!({"query": "run a shell command"})),
            Turn::call(
                "ToolSearch",
                json!({"query": "select:mcp__bashd__bash,mcp__bashd__bash_output,mcp__probe__probe"}),
            ),
        ],
        _ => Vec::new(),
    };
    // Under bashd's budget for the client (docs/MCP.md): Codex's 10,000 bytes, OpenCode's
    // 1,900 lines, the others' 4,000 lines.
    let whole = match agent {
        Agent::Codex => 1_500,
        Agent::OpenCode => 1_800,
        _ => 3_500,
    };
    let extra = match agent {
        Agent::Gemini => json!({"wait_for_previous": true}),
        _ => json!({}),
    };
    let turns = script(&run, first, whole, extra);
    let expected_turns = turns.len();
    let model = FakeModel::start(turns);
    let started = Instant::now();
    let exit = run.run(&model);
    let took = started.elapsed();
    let mut v = Verdicts {
        client: agent.name(),
        failed: Vec::new(),
    };
    v.note(&format!(
        "{} exited {exit} after {:.1} s, {} requests to the model, {} of {expected_turns} turns",
        agent.program(),
        took.as_secs_f64(),
        model.requests().len(),
        model.turns_served()
    ));

    let results: Vec<String> = model
        .tool_results()
        .iter()
        .map(|r| agent.unwrap(r))
        .collect();
    let skip = if agent == Agent::Claude { 2 } else { 0 };
    let at = |i: usize| results.get(skip + i).cloned().unwrap_or_default();

    v.check(
        "the script ran to its end",
        if model.turns_served() >= expected_turns {
            Ok(())
        } else {
            Err(format!(
                "{} of {expected_turns} turns; results: {:?}",
                model.turns_served(),
                results
                    .iter()
                    .map(|r| r.chars().take(200).collect::<String>())
                    .collect::<Vec<_>>()
            ))
        },
    );
    if agent == Agent::Claude {
        let found = results.first().cloned().unwrap_or_default();
        v.check(
            "Claude Code's tool search for \"run a shell command\" finds mcp__bashd__bash",
            if found.lines().any(|l| l == "mcp__bashd__bash") {
                Ok(())
            } else {
                Err(format!("it found {found:?}"))
            },
        );
    }
    // (a)
    v.check(
        &format!("(a) seq 1 {whole} arrives whole, exit code first and last"),
        check_whole(&at(0), whole),
    );
    // (b)
    let long = at(1);
    let status_ends = {
        let body: Vec<&str> = long.lines().filter(|l| !l.is_empty()).collect();
        body.first() == Some(&"exit code: 0") && body.last() == Some(&"exit code: 0")
    };
    v.check(
        "(b) seq 1 100000: the exit code first and last, and the call that reads the rest",
        match next_page_call(&long) {
            Some(args) if status_ends => {
                v.note(&format!(
                    "(b) {} characters; next call bash_output {args}",
                    long.chars().count()
                ));
                Ok(())
            }
            Some(_) => Err(format!(
                "the status is not first and last: {:?} .. {:?}",
                long.lines().next(),
                long.lines().last()
            )),
            None => Err(format!(
                "no bash_output call in: {:?}",
                long.chars()
                    .rev()
                    .take(400)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect::<String>()
            )),
        },
    );
    let page = at(2);
    v.check(
        "(b) following that call returns the first lines",
        if page.lines().any(|l| l == "1") && page.lines().any(|l| l == "2") {
            Ok(())
        } else {
            Err(format!("{:?}", page.chars().take(300).collect::<String>()))
        },
    );
    // (c) Gemini CLI adds wait_for_previous to every tool; its model sets it.
    if agent == Agent::Gemini {
        let offered = model
            .tool_schema("bash")
            .is_some_and(|s| s["properties"].get("wait_for_previous").is_some());
        v.check(
            "(c) bash is offered with wait_for_previous, and the calls that set it ran",
            if offered && check_whole(&at(0), whole).is_ok() {
                Ok(())
            } else {
                Err(format!(
                    "offered: {offered}; first result: {:?}",
                    at(0).chars().take(200).collect::<String>()
                ))
            },
        );
    }
    // (d) after the program exited, however it ended its servers.
    v.check(
        "(d) bashd and another session's background job are alive after the program exited",
        run.daemon_and_other_alive(),
    );
    v.check(
        "the session's own background job outlives the call and the program",
        run.own_background_job_alive(),
    );
    // (e)
    v.check(
        &format!(
            "(e) clientInfo.name is {:?}, the key of cli/src/mcp/clients.rs",
            agent.client_name()
        ),
        match run.client_info() {
            Some(name) if name == agent.client_name() => Ok(()),
            other => Err(format!("the probe server was introduced to {other:?}")),
        },
    );
    // (f)
    let env = at(3);
    let names: Vec<&str> = env.lines().map(str::trim).collect();
    let leaked: Vec<&&str> = names
        .iter()
        .filter(|n| agent.credentials().contains(n))
        .collect();
    v.check(
        &format!("(f) no job sees {}", agent.credentials().join(", ")),
        if !leaked.is_empty() {
            Err(format!("a job sees {leaked:?}"))
        } else if agent.passes_environment() && !names.contains(&"BASHD_AGENTS_CONTROL") {
            // The positive control: a variable that is no credential reaches jobs.
            Err(format!(
                "not even BASHD_AGENTS_CONTROL reached the job: {env:?}"
            ))
        } else {
            Ok(())
        },
    );
    // Issue 44: confined by default, and an ask told in words a model passes on.
    let confined = at(9);
    v.check(
        "a job of the default sandbox cannot write the person's home",
        if confined.lines().any(|l| l == "confined") && !run.job_wrote_home() {
            Ok(())
        } else {
            Err(format!(
                "{:?}",
                confined.chars().take(300).collect::<String>()
            ))
        },
    );
    let asked = at(10);
    v.check(
        "sandbox \"off\" is an ask the result names, with what the person can do",
        if asked.contains("ask a")
            && (asked.contains("bashc allow") || asked.contains("refused by the person"))
            && !asked.lines().any(|l| l == "unconfined")
        {
            Ok(())
        } else {
            Err(format!("{:?}", asked.chars().take(400).collect::<String>()))
        },
    );
    v.note(&format!(
        "the ask's result: {:?}; the ask: {}",
        asked.chars().take(300).collect::<String>(),
        run.asks()
    ));
    v.note(&format!("the client's own cut: {}", describe_cut(&at(4))));
    v.note(&format!(
        "the client's own cut of an error: {}",
        describe_cut(&at(5))
    ));
    let history = model.last_tool_results();
    let changed = history
        .iter()
        .zip(model.tool_results())
        .filter(|(last, first)| **last != *first)
        .count();
    v.note(&format!(
        "results the last request carries otherwise than the model first saw them: {changed} of {}{}",
        history.len(),
        history
            .iter()
            .find(|r| r.contains("masked"))
            .map(|r| format!(", e.g. {:?}", r.chars().take(160).collect::<String>()))
            .unwrap_or_default()
    ));
    let pushed = run.pushed_kinds(&model);
    v.note(&format!(
        "notifications that reached the model: {}",
        if pushed.is_empty() {
            "none".to_owned()
        } else {
            pushed.join(", ")
        }
    ));
    v.note(&format!(
        "initialize capabilities: {}",
        run.client_capabilities()
    ));
    v.note(&format!("the _meta of its tools/call: {}", run.call_meta()));
    if let Some(cancel) = run.probe_cancel() {
        v.note(&format!("its call of the probe: {cancel}"));
    }
    v.note(&format!(
        "methods it sent the probe server: {}",
        run.probe_methods().join(", ")
    ));
    drop(model);
    run.finish();
    v.finish();
}

#[test]
fn claude_code() {
    drive(Agent::Claude);
}

#[test]
fn codex() {
    drive(Agent::Codex);
}

#[test]
fn gemini_cli() {
    drive(Agent::Gemini);
}

#[test]
fn opencode() {
    drive(Agent::OpenCode);
}

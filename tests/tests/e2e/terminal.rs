//! Terminal jobs (issue 25): `exec --pty`, the screen rendered by the daemon, `send
//! --keys`, `resize`, and waiting for input read from the kernel, on a real daemon.

use std::time::Duration;

use bashd_tests::{Daemon, pids_running, wait_until};

use crate::{json, show, stdout};

const SESSION: &str = "i25";

/// Starts `command` on a terminal in the background; its job id.
fn background_pty(daemon: &Daemon, extra: &[&str], command: &str) -> String {
    daemon.background_in(SESSION, &[&["--pty"][..], extra].concat(), command)
}

fn screen(daemon: &Daemon, job: &str) -> serde_json::Value {
    let out = daemon.run_bashc_in(SESSION, &["screen", job, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    json(&out)
}

fn screen_text(screen: &serde_json::Value) -> String {
    screen["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Polls the screen until `condition` holds; the last screen.
fn screen_until(
    daemon: &Daemon,
    job: &str,
    condition: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    let met = wait_until(Duration::from_secs(10), || {
        last = screen(daemon, job);
        condition(&last)
    });
    assert!(met, "the screen never got there:\n{last:#}");
    last
}

fn send_keys(daemon: &Daemon, job: &str, keys: &[&str]) {
    let args = [&["send", job, "--keys"][..], keys].concat();
    let out = daemon.run_bashc_in(SESSION, &args);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

fn wait_job(daemon: &Daemon, job: &str) -> serde_json::Value {
    let out = daemon.run_bashc_in(SESSION, &["wait", job, "--json", "--timeout", "20"]);
    json(&out)
}

/// Issue 25.
#[test]
fn a_pty_job_has_a_terminal_of_its_size_and_a_pipe_job_none() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc_in(SESSION, &["exec", "--json",
            "--pty",
            "--",
            "tty; stty size; echo TERM=$TERM NO_COLOR=${NO_COLOR-unset}; printf '\\033[31mred\\033[0m\\n'",
        ],
    );
    let result = json(&out);
    let text = result["stdout"]["text"].as_str().unwrap();
    assert!(text.starts_with("/dev/pts/"), "{text}");
    assert!(text.contains("\n40 120\n"), "{text}");
    assert!(
        text.contains("TERM=xterm-256color NO_COLOR=unset"),
        "{text}"
    );
    // The colour went through the emulator: plain text, no escape left.
    assert!(
        text.contains("\nred\n") && !text.contains('\x1b'),
        "{text:?}"
    );
    assert_eq!(result["exit_code"], 0);
    let sized = daemon.run_bashc_in(
        SESSION,
        &["exec", "--pty", "--size", "80x24", "--", "stty size"],
    );
    assert!(stdout(&sized).contains("24 80"), "{}", show(&sized));
    let pipe = daemon.run_bashc_in(
        SESSION,
        &["exec", "--", "test -t 1 && echo tty || echo notty"],
    );
    assert!(stdout(&pipe).contains("notty"), "{}", show(&pipe));
    let bad = daemon.run_bashc_in(SESSION, &["exec", "--pty", "--size", "80", "--", "true"]);
    assert_ne!(bad.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("COLSxROWS"),
        "{}",
        show(&bad)
    );
}

/// Issue 25.
#[test]
fn a_python_repl_is_driven_with_keys_and_read_on_its_screen() {
    let daemon = Daemon::start();
    let job = background_pty(&daemon, &[], "python3 -q");
    screen_until(&daemon, &job, |s| screen_text(s).contains(">>>"));
    let out = daemon.run_bashc_in(
        SESSION,
        &["send", &job, "--keys", "6*7", "Enter", "--screen", "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let shown = json(&out);
    assert!(screen_text(&shown).contains("\n42\n"), "{shown:#}");
    send_keys(&daemon, &job, &["C-d"]);
    let result = wait_job(&daemon, &job);
    assert_eq!(result["exit_code"], 0, "{result:#}");
    assert!(
        result["stdout"]["text"].as_str().unwrap().contains("42"),
        "{result:#}"
    );
}

/// `send --screen` answers with the screen the keys changed, not the one before them:
/// a program slower to draw than the settle time (python on a loaded machine; here a
/// prompt without echo that answers after 0.8 s) still has its answer shown.
#[test]
fn send_screen_waits_for_the_answer_of_a_program_slower_than_the_settle_time() {
    let daemon = Daemon::start();
    let job = background_pty(
        &daemon,
        &[],
        "stty -echo; echo ready; read -r x; sleep 0.8; echo \"got $x\"; sleep 60",
    );
    screen_until(&daemon, &job, |s| s["waiting_for_input"] == true);
    let out = daemon.run_bashc_in(
        SESSION,
        &["send", &job, "--keys", "hi", "Enter", "--screen", "--json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let shown = json(&out);
    assert!(screen_text(&shown).contains("got hi"), "{shown:#}");
}

/// Issue 25.
#[test]
fn a_password_prompt_is_seen_waiting_and_the_secret_is_not_echoed() {
    let daemon = Daemon::start();
    let job = background_pty(
        &daemon,
        &[],
        "read -s -p 'Password: ' p; echo; echo got ${#p}",
    );
    let started = std::time::Instant::now();
    let waiting = screen_until(&daemon, &job, |s| s["waiting_for_input"] == true);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let row = waiting["cursor"]["row"].as_u64().unwrap() as usize;
    assert!(
        waiting["lines"][row]
            .as_str()
            .unwrap()
            .starts_with("Password:"),
        "{waiting:#}"
    );
    send_keys(&daemon, &job, &["hunter22", "Enter"]);
    let result = wait_job(&daemon, &job);
    let text = result["stdout"]["text"].as_str().unwrap();
    assert!(text.contains("got 8"), "{result:#}");
    assert!(!text.contains("hunter22"), "{result:#}");
    let all = daemon.run_bashc_in(SESSION, &["output", &job]);
    assert!(!stdout(&all).contains("hunter22"), "{}", show(&all));
}

/// Issue 25.
#[test]
fn vim_draws_on_the_alternate_screen_and_writes_the_file() {
    let daemon = Daemon::start();
    let file = daemon.scratch().join("i25-vim.txt");
    std::fs::write(&file, "first line of i25\n").unwrap();
    let command = format!("vim -u NONE -N {}", file.display());
    let job = background_pty(&daemon, &[], &command);
    let shown = screen_until(&daemon, &job, |s| {
        screen_text(s).contains("first line of i25")
    });
    assert_eq!(shown["alternate"], true, "{shown:#}");
    send_keys(&daemon, &job, &["i", "hello", "Esc", ":wq", "Enter"]);
    let result = wait_job(&daemon, &job);
    assert_eq!(result["exit_code"], 0, "{result:#}");
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.starts_with("hellofirst line of i25"), "{written:?}");
}

/// Issue 25.
#[test]
fn less_pages_a_file_on_the_screen() {
    let daemon = Daemon::start();
    let file = daemon.scratch().join("i25-less.txt");
    let lines: String = (1..=200).map(|n| format!("line {n}\n")).collect();
    std::fs::write(&file, lines).unwrap();
    // The hardening sets LESS and PAGER; a plain `less FILE` still pages on a terminal.
    let job = background_pty(&daemon, &[], &format!("less {}", file.display()));
    screen_until(&daemon, &job, |s| s["lines"][0] == "line 1");
    send_keys(&daemon, &job, &["G"]);
    screen_until(&daemon, &job, |s| screen_text(s).contains("line 200"));
    send_keys(&daemon, &job, &["q"]);
    let result = wait_job(&daemon, &job);
    assert_eq!(result["exit_code"], 0, "{result:#}");
}

/// Issue 25.
#[test]
fn ctrl_c_interrupts_the_foreground_program() {
    let daemon = Daemon::start();
    let job = background_pty(&daemon, &[], "sleep 25301");
    assert!(wait_until(Duration::from_secs(10), || !pids_running(
        "sleep 25301"
    )
    .is_empty()));
    send_keys(&daemon, &job, &["C-c"]);
    let result = wait_job(&daemon, &job);
    assert_eq!(result["signal"], 2, "{result:#}");
    assert!(
        wait_until(Duration::from_secs(3), || pids_running("sleep 25301")
            .is_empty()),
        "sleep 25301 is still alive"
    );
}

/// Issue 25.
#[test]
fn resize_delivers_sigwinch_and_the_new_size() {
    let daemon = Daemon::start();
    let script = "trap 'echo size $(stty size)' WINCH; echo ready; while :; do sleep 0.1; done";
    let job = background_pty(&daemon, &[], script);
    screen_until(&daemon, &job, |s| screen_text(s).contains("ready"));
    let out = daemon.run_bashc_in(SESSION, &["resize", &job, "100x30", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(json(&out)["cols"], 100);
    let shown = screen_until(&daemon, &job, |s| screen_text(s).contains("size 30 100"));
    assert_eq!(shown["rows"], 30, "{shown:#}");
    let killed = daemon.run_bashc_in(SESSION, &["kill", &job]);
    assert!(
        killed.status.success() || killed.status.code().is_some(),
        "{}",
        show(&killed)
    );
    // A job on pipes has no screen, and says how to get one.
    let plain = daemon.run_bashc_in(
        SESSION,
        &[
            "exec",
            "--json",
            "--mode",
            "background",
            "--",
            "sleep 25302",
        ],
    );
    let plain = json(&plain)["job"].as_str().unwrap().to_owned();
    let refused = daemon.run_bashc_in(SESSION, &["screen", &plain]);
    assert_ne!(refused.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--pty"),
        "{}",
        show(&refused)
    );
    daemon.run_bashc_in(SESSION, &["kill", &plain]);
}

/// Issue 25.
#[test]
fn lines_that_scroll_off_are_the_output_and_a_progress_bar_its_last_state() {
    let daemon = Daemon::start();
    let script = "for i in $(seq 1 100); do echo \"row $i\"; done; for p in 10 50 100; do printf '\\r%s%%' $p; done; echo";
    let out = daemon.run_bashc_in(
        SESSION,
        &["exec", "--json", "--pty", "--size", "40x10", "--", script],
    );
    let result = json(&out);
    let text = result["stdout"]["text"].as_str().unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 101, "{text}");
    assert_eq!(rows[0], "row 1");
    assert_eq!(rows[99], "row 100");
    assert_eq!(rows[100], "100%");
    let grep = daemon.run_bashc_in(
        SESSION,
        &[
            "output",
            result["job"].as_str().unwrap(),
            "--grep",
            "^row 77$",
        ],
    );
    assert!(stdout(&grep).contains("row 77"), "{}", show(&grep));
}

/// Issue 25.
#[test]
fn a_long_coloured_log_through_the_terminal_is_its_output_once_and_in_order() {
    let daemon = Daemon::start();
    // 20,000 lines, coloured, some wrapping, a progress bar half-way and a status
    // line redrawn by moving the cursor up: the fast path and the emulator both.
    let script = r#"for i in $(seq 1 20000); do
        if [ $i = 10000 ]; then for p in 10 50 100; do printf '\r[%s%%]\e[K' $p; done; echo; fi
        if [ $i = 15000 ]; then printf 'status a\nstatus b\n\e[2A\e[2Kstatus A\n\e[2Kstatus B\n'; fi
        if [ $((i % 100)) = 0 ]; then printf '\e[31mline %d %0200d\e[0m\n' $i 0; else printf '\e[32mline\e[0m %d\n' $i; fi
    done"#;
    let out = daemon.run_bashc_in(
        SESSION,
        &["exec", "--json", "--pty", "--timeout", "120", "--", script],
    );
    let result = json(&out);
    assert_eq!(result["exit_code"], 0, "{result:#}");
    let job = result["job"].as_str().unwrap();
    let page = daemon.run_bashc_in(
        SESSION,
        &["output", job, "--limit", "30000", "--max-bytes", "4000000"],
    );
    let text = stdout(&page);
    assert!(!text.contains('\x1b'), "escapes reached the output");
    let mut expected = Vec::new();
    for i in 1..=20000 {
        if i == 10000 {
            expected.push("[100%]".to_owned());
        }
        if i == 15000 {
            expected.extend(["status A".to_owned(), "status B".to_owned()]);
        }
        expected.push(if i % 100 == 0 {
            format!("line {i} {}", "0".repeat(200))
        } else {
            format!("line {i}")
        });
    }
    let lines: Vec<&str> = text.lines().collect();
    let first_wrong = lines
        .iter()
        .zip(&expected)
        .position(|(got, want)| got != want);
    assert_eq!(
        first_wrong,
        None,
        "{:?}",
        first_wrong.map(|n| (&lines[n], &expected[n]))
    );
    assert_eq!(
        lines.len(),
        expected.len(),
        "{}",
        &text[text.len().saturating_sub(500)..]
    );
}

/// Issue 25.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_runs_a_repl_on_a_terminal_with_keys_and_screen() {
    use crate::mcp::{call, connect};
    use serde_json::json;
    let daemon = Daemon::start();
    let client = connect(&daemon).await;
    let started = call(
        &client,
        "bash",
        json!({"command": "python3 -q", "pty": true, "mode": "background"}),
    )
    .await;
    let job = crate::mcp::job_in(&crate::mcp::text_of(&started));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let shown = call(&client, "bash_screen", json!({"job": job})).await;
        let screen = crate::mcp::text_of(&shown);
        if screen.contains("waiting for input") {
            assert!(screen.starts_with(">>>"), "{screen}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{screen}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sent = call(
        &client,
        "bash_send",
        json!({"job": job, "keys": ["6*7", "Enter"]}),
    )
    .await;
    let text = crate::mcp::text_of(&sent);
    assert!(text.lines().any(|l| l == "42"), "{text}");
    call(&client, "bash_send", json!({"job": job, "keys": ["C-d"]})).await;
    let ended = call(
        &client,
        "bash_wait",
        json!({"job": job, "timeout_secs": 10}),
    )
    .await;
    let text = crate::mcp::text_of(&ended);
    assert!(text.ends_with("exit code: 0\n"), "{text}");
}

/// Issue 25.
#[test]
fn a_program_that_wants_a_terminal_on_pipes_is_told_to_use_pty() {
    let daemon = Daemon::start();
    let wants_tty = "python3 -c 'import os; os.open(\"/dev/tty\", os.O_RDWR)'";
    let out = daemon.run_bashc_in(SESSION, &["exec", "--json", "--", wants_tty]);
    let result = json(&out);
    assert_ne!(result["exit_code"], 0, "{result:#}");
    let notices = result["notices"].as_array().unwrap();
    assert!(
        notices.iter().any(|n| n.get("terminal_wanted").is_some()),
        "{result:#}"
    );
    assert!(
        result["notice"].as_str().unwrap_or("").contains("--pty"),
        "{result:#}"
    );
    // The text a person reads says the same.
    let out = daemon.run_bashc_in(SESSION, &["exec", "--", wants_tty]);
    assert!(
        show(&out).contains("run it again with --pty"),
        "{}",
        show(&out)
    );
    // On a terminal the same program opens /dev/tty and nothing is said.
    let out = daemon.run_bashc_in(SESSION, &["exec", "--json", "--pty", "--", wants_tty]);
    let result = json(&out);
    assert_eq!(result["exit_code"], 0, "{result:#}");
    assert!(
        !result["notices"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.get("terminal_wanted").is_some()),
        "{result:#}"
    );
    // A failure that does not ask for a terminal is not told to use one.
    let out = daemon.run_bashc_in(SESSION, &["exec", "--json", "--", "ls /nonexistent-i25b"]);
    let result = json(&out);
    assert!(
        !result["notices"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.get("terminal_wanted").is_some()),
        "{result:#}"
    );
}

/// Issue 25.
#[test]
fn wait_and_check_of_a_drawing_program_show_its_screen() {
    let daemon = Daemon::start();
    let file = daemon.scratch().join("i25b-vim.txt");
    std::fs::write(&file, "first line of i25b\n").unwrap();
    let job = background_pty(&daemon, &[], &format!("vim -u NONE -N {}", file.display()));
    screen_until(&daemon, &job, |s| {
        screen_text(s).contains("first line of i25b")
    });
    // A wait that gives up shows the screen, not vim's escapes or an empty stdout.
    let out = daemon.run_bashc_in(SESSION, &["wait", &job, "--timeout", "1"]);
    let text = stdout(&out);
    assert!(text.starts_with("screen:\nfirst line of i25b\n"), "{text}");
    assert!(text.contains(", alternate screen"), "{text}");
    assert!(!text.contains('\x1b'), "{text:?}");
    let out = daemon.run_bashc_in(SESSION, &["wait", &job, "--timeout", "1", "--json"]);
    let result = json(&out);
    assert_eq!(result["screen"]["alternate"], true, "{result:#}");
    assert_eq!(
        result["screen"]["lines"][0], "first line of i25b",
        "{result:#}"
    );
    // In the shape `screen --json` gives.
    assert!(result["screen"]["cursor"]["row"].is_u64(), "{result:#}");
    assert!(result["screen"]["cursor"]["col"].is_u64(), "{result:#}");
    assert_eq!(result["screen"]["cursor_row"], serde_json::Value::Null);
    // So does a check.
    let out = daemon.run_bashc_in(SESSION, &["check", &job]);
    let text = stdout(&out);
    assert!(text.contains("screen:\nfirst line of i25b\n"), "{text}");
    send_keys(&daemon, &job, &["Esc", ":q!", "Enter"]);
    let result = wait_job(&daemon, &job);
    assert_eq!(result["exit_code"], 0, "{result:#}");
    // Back on the primary screen, which is the end of stdout: no screen.
    assert_eq!(result["screen"], serde_json::Value::Null, "{result:#}");
    // A terminal job that only prints has its output as ever, and no screen.
    let out = daemon.run_bashc_in(
        SESSION,
        &["exec", "--json", "--pty", "--", "echo plain i25b"],
    );
    let result = json(&out);
    assert_eq!(result["screen"], serde_json::Value::Null, "{result:#}");
    assert_eq!(result["stdout"]["text"], "plain i25b\n", "{result:#}");
}

/// Issue 25.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_wait_of_a_drawing_program_shows_its_screen() {
    use crate::mcp::{call, connect, text_of};
    use serde_json::json;
    let daemon = Daemon::start_agents_unconfined();
    let file = daemon.scratch().join("i25b-mcp-vim.txt");
    std::fs::write(&file, "a line of i25b for mcp\n").unwrap();
    let client = connect(&daemon).await;
    let command = format!("vim -u NONE -N {}", file.display());
    let started = call(
        &client,
        "bash",
        json!({"command": command, "pty": true, "mode": "background"}),
    )
    .await;
    let job = crate::mcp::job_in(&text_of(&started));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let shown = text_of(&call(&client, "bash_screen", json!({"job": job})).await);
        if shown.contains("a line of i25b for mcp") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{shown}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let waited = call(&client, "bash_wait", json!({"job": job, "timeout_secs": 1})).await;
    let text = text_of(&waited);
    // After the status line every result starts with (issue 34).
    assert!(
        text.lines().nth(1) == Some("screen:")
            && text.lines().nth(2) == Some("a line of i25b for mcp"),
        "{text}"
    );
    assert!(!text.contains('\x1b'), "{text:?}");
    call(
        &client,
        "bash_send",
        json!({"job": job, "keys": ["Esc", ":q!", "Enter"]}),
    )
    .await;
    let ended = call(
        &client,
        "bash_wait",
        json!({"job": job, "timeout_secs": 10}),
    )
    .await;
    let text = text_of(&ended);
    assert!(text.contains("exit code: 0\n"), "{text}");
    assert!(!text.contains("screen:"), "{text}");
}

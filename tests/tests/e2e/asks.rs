//! Asks (issue 44): a request looser than its session's floor is not refused outright
//! but waits as an ask (`a1`) that only a person answers, with `bashc allow`; a yes
//! runs it as asked, a no or no answer refuses it in words that say what to do;
//! nothing a job runs can answer; grants hold for their session only, lapse, and are
//! revoked for new jobs.

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use bashd_tests::{Daemon, bin_path, wait_until};
use serde_json::Value;

use crate::{json, show};

/// Jobs get `workspace-write`, and nothing looser without a person's yes.
const FLOORED: &str = "[sandbox]\ndefault = \"workspace-write\"\nfloor = \"workspace-write\"\n";

const SOON: Duration = Duration::from_secs(20);

fn floored(ask_secs: u64) -> Daemon {
    Daemon::start_with_config(&format!("{FLOORED}ask_secs = {ask_secs}\n"))
}

/// A directory of the daemon's scratch, the clients' directory (their writable root).
fn workspace(daemon: &Daemon) -> PathBuf {
    let ws = daemon.scratch().join("ws-i44");
    std::fs::create_dir_all(&ws).unwrap();
    ws
}

/// `bashc exec --json ARGS -- COMMAND` of `session`, started and not waited for.
fn exec_started(daemon: &Daemon, session: &str, args: &[&str], command: &str) -> Child {
    daemon
        .bashc_in(session)
        .current_dir(workspace(daemon))
        .arg("exec")
        .arg("--json")
        .args(args)
        .arg("--")
        .arg(command)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run bashc")
}

/// `bashc allow --json ARGS`, as the person runs it.
fn allow(daemon: &Daemon, args: &[&str]) -> Output {
    daemon
        .bashc()
        .arg("allow")
        .args(args)
        .output()
        .expect("cannot run bashc allow")
}

/// The asks and grants, as `bashc allow --list --json` gives them.
fn listing(daemon: &Daemon) -> Value {
    let out = allow(daemon, &["--list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    json(&out)
}

/// The pending asks of `session`, by id.
fn pending(daemon: &Daemon, session: &str) -> Vec<String> {
    listing(daemon)["asks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|ask| ask["state"] == "pending" && ask["session"] == session)
        .map(|ask| ask["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits for `session`'s one pending ask; its id.
fn the_ask(daemon: &Daemon, session: &str) -> String {
    let mut asks = Vec::new();
    assert!(
        wait_until(SOON, || {
            asks = pending(daemon, session);
            !asks.is_empty()
        }),
        "no ask of session {session} came: {}",
        listing(daemon)
    );
    assert_eq!(asks.len(), 1, "{asks:?}");
    asks.remove(0)
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn touched(daemon: &Daemon, name: &str) -> PathBuf {
    daemon.scratch().join(name)
}

fn touch(path: &Path) -> String {
    format!("touch {}", path.display())
}

/// A `sandbox: off` request under a `workspace-write` floor waits as an ask, whose id
/// its client is told on stderr with where to answer; `bashc allow --ask` runs it as
/// asked, unconfined. Positive control: a request at the floor runs at once, asking
/// nothing. On main, the request was refused at once and `bashc allow` did not exist.
#[test]
fn issue_44_a_request_looser_than_the_floor_waits_for_bashc_allow_and_then_runs() {
    let daemon = Daemon::start_with_config(FLOORED);
    let at_floor = daemon.run_bashc_at(&workspace(&daemon), &["exec", "--json", "--", "true"]);
    assert_eq!(at_floor.status.code(), Some(0), "{}", show(&at_floor));
    assert!(pending(&daemon, "test").is_empty());

    let ran = touched(&daemon, "ran-i44");
    let client = exec_started(&daemon, "test", &["--sandbox", "off"], &touch(&ran));
    let ask = the_ask(&daemon, "test");
    assert_eq!(ask, "a1");
    assert!(!ran.exists(), "the request ran before anyone answered");

    let granted = allow(&daemon, &["--ask", &ask]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    assert!(
        String::from_utf8_lossy(&granted.stdout).contains("granted a1 once"),
        "{}",
        show(&granted)
    );
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains("ask a1") && stderr.contains("bashc allow --ask a1"),
        "the client was not told where to answer: {stderr}"
    );
    assert_eq!(json(&out)["sandbox"], Value::Null, "{}", show(&out));
    assert!(ran.exists(), "the granted request did not run");

    // Once means once: the next such request asks again.
    let again = exec_started(&daemon, "test", &["--sandbox", "off"], "true");
    assert_eq!(the_ask(&daemon, "test"), "a2");
    let refused = allow(&daemon, &["--refuse", "a2"]);
    assert_eq!(refused.status.code(), Some(0), "{}", show(&refused));
    assert_ne!(again.wait_with_output().unwrap().status.code(), Some(0));

    // The journal has every ask and answer.
    let journal = std::fs::read_to_string(daemon.runtime_dir().join("journal")).unwrap();
    for line in [
        "ask asked a1",
        "ask granted a1 once",
        "ask asked a2",
        "ask refused a2",
    ] {
        assert!(
            journal.contains(line),
            "no {line:?} in the journal:\n{journal}"
        );
    }
}

/// A no, and no answer within `[sandbox] ask_secs`, refuse the request with words that
/// say what happened and what the person can do, and nothing runs.
#[test]
fn issue_44_a_refused_or_expired_ask_runs_nothing_and_says_what_to_do() {
    let daemon = floored(2);
    let ran = touched(&daemon, "refused-i44");
    let client = exec_started(&daemon, "test", &["--sandbox", "off"], &touch(&ran));
    let ask = the_ask(&daemon, "test");
    let refused = allow(&daemon, &["--deny", &ask]);
    assert_eq!(refused.status.code(), Some(0), "{}", show(&refused));
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains(&format!(
            "ask {ask} was refused by the person, so nothing ran"
        )) && stderr.contains("floor = \"workspace-write\"")
            && stderr.contains("ask for workspace-write or read-only"),
        "{stderr}"
    );

    let client = exec_started(&daemon, "test", &["--sandbox", "off"], &touch(&ran));
    let out = client.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    let stderr = stderr_of(&out);
    assert!(
        stderr.contains(
            "expired: nobody answered it within 2 s ([sandbox] ask_secs), so nothing ran"
        ) && stderr.contains("have the person grant it"),
        "{stderr}"
    );
    assert!(!ran.exists(), "a refused request ran");
    // Answering it late does nothing.
    let late = allow(&daemon, &["--ask", "a2"]);
    assert_ne!(late.status.code(), Some(0), "{}", show(&late));
    assert!(
        stderr_of(&late).contains("a2 is expired already"),
        "{}",
        show(&late)
    );
    assert!(!ran.exists(), "a late yes ran an expired request");
}

/// Nothing a job runs can answer: `bashc allow` from a confined job (through its
/// channel) and from an unconfined one (a process bashd finds among its jobs') is
/// refused, the ask stays pending, and the person's answer still works.
#[test]
fn issue_44_bashc_allow_from_inside_a_job_is_refused() {
    let daemon = Daemon::start_with_config(FLOORED);
    let ws = workspace(&daemon);
    let bashc = bin_path("bashc");
    let ran = touched(&daemon, "asked-i44");
    let asker = exec_started(&daemon, "test", &["--sandbox", "off"], &touch(&ran));
    let ask = the_ask(&daemon, "test");

    // A confined job: through its channel.
    let confined = daemon.run_bashc_at(
        &ws,
        &[
            "exec",
            "--json",
            "--",
            &format!("{} allow --ask {ask}", bashc.display()),
        ],
    );
    let result = json(&confined);
    assert_ne!(result["exit_code"], 0, "{}", show(&confined));
    let said = format!("{}", result["stderr"]["text"]);
    assert!(
        said.contains("only the person answers asks") && said.contains("channel of job"),
        "{said}"
    );
    assert_eq!(pending(&daemon, "test"), vec![ask.clone()]);

    // An unconfined job, of a session the person let run unconfined.
    let other = exec_started(&daemon, "free", &["--sandbox", "off"], "true");
    let free_ask = the_ask(&daemon, "free");
    let granted = allow(&daemon, &["--ask", &free_ask, "--session-wide"]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    assert_eq!(other.wait_with_output().unwrap().status.code(), Some(0));
    let unconfined = daemon
        .bashc_in("free")
        .current_dir(&ws)
        .args(["exec", "--json", "--sandbox", "off", "--"])
        .arg(format!(
            "{} allow --ask {ask}; {} allow --list",
            bashc.display(),
            bashc.display()
        ))
        .output()
        .unwrap();
    let result = json(&unconfined);
    assert_eq!(result["sandbox"], Value::Null, "{}", show(&unconfined));
    let said = format!("{}", result["stderr"]["text"]);
    assert_eq!(
        said.matches("only the person answers asks").count(),
        2,
        "{said}"
    );
    assert_eq!(pending(&daemon, "test"), vec![ask.clone()]);
    assert!(!ran.exists());

    // Positive control: the person's answer.
    let granted = allow(&daemon, &["--ask", &ask]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    assert_eq!(asker.wait_with_output().unwrap().status.code(), Some(0));
    assert!(ran.exists());
}

/// A grant for the session holds for that session's later requests, which run
/// without asking, and for no other session, whose request asks.
#[test]
fn issue_44_a_session_grant_does_not_reach_another_session() {
    let daemon = Daemon::start_with_config(FLOORED);
    let first = exec_started(&daemon, "one", &["--sandbox", "off"], "true");
    let ask = the_ask(&daemon, "one");
    let granted = allow(&daemon, &["--ask", &ask, "--session-wide"]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    assert_eq!(first.wait_with_output().unwrap().status.code(), Some(0));

    let again = daemon
        .bashc_in("one")
        .current_dir(workspace(&daemon))
        .args(["exec", "--json", "--sandbox", "off", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", show(&again));
    assert!(!stderr_of(&again).contains("ask"), "{}", show(&again));

    let other = exec_started(&daemon, "two", &["--sandbox", "off"], "true");
    let other_ask = the_ask(&daemon, "two");
    assert_ne!(other_ask, ask);
    let refused = allow(&daemon, &["--refuse", &other_ask]);
    assert_eq!(refused.status.code(), Some(0), "{}", show(&refused));
    assert_ne!(other.wait_with_output().unwrap().status.code(), Some(0));

    let grants = listing(&daemon)["grants"].clone();
    assert_eq!(grants.as_array().unwrap().len(), 1, "{grants}");
    assert_eq!(grants[0]["session"], "one", "{grants}");
    assert_eq!(grants[0]["scope"], "session", "{grants}");
    assert!(
        grants[0]["granted_by"]
            .as_str()
            .unwrap()
            .starts_with("bashc allow (pid "),
        "{grants}"
    );
}

/// `bashc allow HOST --secs N` holds for every session (never `$BASHD_SESSION`'s
/// alone) and lapses after N seconds; without `--secs` it stays.
#[test]
fn issue_44_a_host_grant_holds_for_every_session_and_secs_expire_it() {
    let daemon = Daemon::start_with_config(FLOORED);
    let short = allow(&daemon, &["pypi.example:443", "--secs", "2"]);
    assert_eq!(short.status.code(), Some(0), "{}", show(&short));
    let kept = allow(&daemon, &["files.example", "--session", "s1"]);
    assert_eq!(kept.status.code(), Some(0), "{}", show(&kept));
    let grants = listing(&daemon)["grants"].clone();
    assert_eq!(grants.as_array().unwrap().len(), 2, "{grants}");
    assert_eq!(grants[0]["session"], Value::Null, "{grants}");
    assert_eq!(grants[0]["kind"]["host"]["port"], 443, "{grants}");
    assert_eq!(grants[1]["session"], "s1", "{grants}");

    let mut grants = Value::Null;
    assert!(
        wait_until(Duration::from_secs(10), || {
            grants = listing(&daemon)["grants"].clone();
            grants.as_array().unwrap().len() == 1
        }),
        "the --secs 2 grant did not lapse: {grants}"
    );
    assert_eq!(grants[0]["kind"]["host"]["host"], "files.example");
    let revoked = allow(&daemon, &["--revoke", "files.example"]);
    assert_eq!(revoked.status.code(), Some(0), "{}", show(&revoked));
    assert_eq!(listing(&daemon)["grants"], serde_json::json!([]));
}

/// A revoked session grant holds for new jobs, which ask again; the running job it
/// started is named, and ended with `--kill`.
#[test]
fn issue_44_revoke_holds_for_new_jobs_and_kill_ends_the_running_ones() {
    let daemon = Daemon::start_with_config(FLOORED);
    let long = exec_started(&daemon, "test", &["--sandbox", "off"], "sleep 300");
    let ask = the_ask(&daemon, "test");
    let granted = allow(&daemon, &["--ask", &ask, "--session-wide"]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    let job = String::from_utf8_lossy(&granted.stdout)
        .split_whitespace()
        .find(|word| word.starts_with('j'))
        .unwrap()
        .trim_end_matches(':')
        .to_owned();

    let revoked = allow(&daemon, &["--revoke", &ask]);
    assert_eq!(revoked.status.code(), Some(0), "{}", show(&revoked));
    let said = String::from_utf8_lossy(&revoked.stdout).into_owned();
    assert!(
        said.contains("new jobs ask again") && said.contains(&job) && said.contains("--kill"),
        "{said}"
    );
    let new = exec_started(&daemon, "test", &["--sandbox", "off"], "true");
    let new_ask = the_ask(&daemon, "test");
    assert_ne!(new_ask, ask);
    allow(&daemon, &["--refuse", &new_ask]);
    assert_ne!(new.wait_with_output().unwrap().status.code(), Some(0));

    let killed = allow(&daemon, &["--revoke", &ask, "--kill"]);
    assert_eq!(killed.status.code(), Some(0), "{}", show(&killed));
    assert!(
        String::from_utf8_lossy(&killed.stdout).contains("ending the jobs it started"),
        "{}",
        show(&killed)
    );
    let out = long.wait_with_output().unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
}

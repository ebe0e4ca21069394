//! The daemon as a boundary (issue 30 points 1 and 3, issue 33 points 1 to 3): a
//! sandboxed job's requests are known as that job's by the channel it was started
//! with, never guessed, so a nested `bashc` gets no looser sandbox and reaches only
//! its own session's jobs that are as tight; a process of the job that shed the
//! channel is refused; an ended job lends no one its identity. Every request that
//! names a job goes through one session rule, on the CLI and MCP; looking at a session
//! never adopts it. Each test tries the attack from inside a `read-only --net off` job
//! and, as its positive control, the same action where it is allowed.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bashd_tests::output::shown;
use bashd_tests::{Daemon, KillOnDrop, alive, bashc_path, wait_for_running, wait_until};
use serde_json::{Value, json};

use super::mcp::{call, connect, is_error, text};
use super::{json, show, stderr, stdout};

const WITHIN: Duration = Duration::from_secs(30);

/// What a sandboxed job may not do to others, and the words that refuse it.
const NOT_LOOSER: &str =
    "runs under read-only with the network off; a job it starts can be as tight, not looser";

/// A daemon, a workspace and a directory outside it that only an unconfined job may
/// write.
struct Bounds {
    daemon: Daemon,
    ws: PathBuf,
    out: PathBuf,
}

impl Bounds {
    fn start(config: &str) -> Bounds {
        Bounds::around(Daemon::start_with_config(config))
    }

    /// A daemon whose `[sandbox] unix_sockets` names its own socket, so a job with the
    /// network on may make unix sockets (seccomp lets it), and what refuses a process
    /// that shed its channel is the daemon's own check, not the filter.
    fn start_naming_its_socket() -> Bounds {
        let daemon = Daemon::unstarted();
        let socket = daemon.socket_path();
        daemon.write_config(&format!(
            "[sandbox]\nunix_sockets = [\"{}\"]\n",
            socket.display()
        ));
        Bounds::around(daemon.spawn_and_wait())
    }

    fn around(daemon: Daemon) -> Bounds {
        let (ws, out) = (daemon.scratch().join("ws"), daemon.scratch().join("out"));
        for dir in [&ws, &out] {
            std::fs::create_dir_all(dir).unwrap();
        }
        Bounds { daemon, ws, out }
    }

    /// `bashc exec --json` of `command` in `workdir`, as a client of `session` that
    /// runs there (so `workdir` is the job's writable root).
    fn exec_in(&self, session: &str, workdir: &Path, args: &[&str], command: &str) -> Output {
        let workdir_text = workdir.display().to_string();
        let head = ["exec", "--json", "--workdir", &workdir_text];
        self.daemon
            .bashc_at(workdir)
            .env("BASHD_SESSION", session)
            .args([&head[..], args, &["--", command]].concat())
            .output()
            .expect("cannot run bashc")
    }

    fn exec(&self, session: &str, args: &[&str], command: &str) -> Output {
        self.exec_in(session, &self.ws, args, command)
    }

    /// A background job of `session`; its id.
    fn background(&self, session: &str, args: &[&str], command: &str) -> String {
        let args = [&["--mode", "background"][..], args].concat();
        let out = self.exec(session, &args, command);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        json(&out)["job"].as_str().unwrap().to_owned()
    }

    /// What is in the outside directory.
    fn outside(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.out)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A job's state, asked from outside with `--any-session`.
    fn state(&self, job: &str) -> String {
        let out = self
            .daemon
            .run_bashc_in("test", &["check", job, "--any-session", "--json"]);
        json(&out)["state"].as_str().unwrap_or_default().to_owned()
    }
}

/// Issue 30.1: many nested execs asking for more than a `read-only --net off` job,
/// while looser jobs of another session (with namespaces of their own) end before and
/// meanwhile, none runs looser; one as tight runs.
#[test]
fn nested_execs_never_run_looser_than_their_job() {
    let bounds = Arc::new(Bounds::start(""));
    let out = bounds.out.display().to_string();
    // Control: the outside directory is writable by an unconfined job.
    let made = bounds.exec(
        "loose",
        &["--sandbox", "off"],
        &format!("touch {out}/control"),
    );
    assert_eq!(bounds.outside(), ["control"], "{}", show(&made));
    std::fs::remove_file(bounds.out.join("control")).unwrap();

    // Looser jobs come and go all along: their namespaces are made and freed.
    let stop = Arc::new(AtomicBool::new(false));
    let _stops = StopOnDrop(Arc::clone(&stop));
    let churn = {
        let (bounds, stop) = (Arc::clone(&bounds), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                bounds.exec("loose", &["--sandbox", "off", "--net", "off"], "true");
                let out = bounds.out.clone();
                bounds.exec_in("loose", &out, &["--sandbox", "workspace-write"], "true");
            }
        })
    };
    let bashc = bashc_path();
    for round in 1..=3 {
        for _ in 0..4 {
            bounds.exec("loose", &["--sandbox", "off", "--net", "off"], "true");
        }
        let command = format!(
            "for i in 1 2 3; do \
               {bashc} exec --sandbox off -- touch {out}/off-{round}-$i; echo \"off $i: $?\"; \
               {bashc} exec --net on -- touch {out}/net-{round}-$i; echo \"net $i: $?\"; \
               {bashc} exec --sandbox workspace-write --workdir {out} -- touch {out}/ws-{round}-$i; echo \"workspace $i: $?\"; \
               {bashc} exec -- touch {out}/inherit-{round}-$i; echo \"inherit $i: $?\"; \
             done; \
             {bashc} exec --json -- echo as-tight-ok; echo \"tight: $?\""
        );
        let run = bounds.exec(
            "tight",
            &["--sandbox", "read-only", "--net", "off", "--timeout", "300"],
            &command,
        );
        let result = json(&run);
        let words = shown(&result);
        for i in 1..=3 {
            for refused in ["off", "net", "workspace"] {
                assert!(
                    words.contains(&format!("{refused} {i}: 255")),
                    "round {round}: {refused} {i} was not refused:\n{words}"
                );
            }
            assert!(
                words.contains(&format!("inherit {i}: 1")),
                "round {round}: the inherited sandbox let a write out:\n{words}"
            );
        }
        assert!(words.contains(NOT_LOOSER), "{words}");
        // The positive control: as tight runs, under the job's own sandbox.
        assert!(
            words.contains("as-tight-ok") && words.contains("tight: 0"),
            "{words}"
        );
        assert!(
            words.contains("\"profile\": \"read-only\"") && words.contains("\"network\": \"off\""),
            "{words}"
        );
        assert!(
            bounds.outside().is_empty(),
            "round {round}: a nested exec wrote outside: {:?}\n{words}",
            bounds.outside()
        );
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
}

/// Sets its flag when dropped, a failed test's too, so a helper thread ends.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Issue 30.1: a job started from a `workspace-write` job writes where that job may,
/// whatever workdir it names: its roots, not the workdir outside them (where it runs
/// read-only, issue 42).
#[test]
fn a_nested_job_writes_in_its_starters_workspace_only() {
    let bounds = Bounds::start("");
    let (ws, out) = (bounds.ws.display(), bounds.out.display());
    let bashc = bashc_path();
    let command = format!(
        "{bashc} exec --workdir {out} -- touch {out}/escaped; echo \"outside: $?\"; \
         {bashc} exec --workdir {out} --sandbox workspace-write -- touch {out}/escaped-too; echo \"named: $?\"; \
         {bashc} exec --workdir /tmp -- touch {ws}/nested-elsewhere; echo \"elsewhere: $?\"; \
         {bashc} exec --workdir {ws} -- touch {ws}/nested-ok; echo \"inside: $?\""
    );
    let run = bounds.exec("tight", &["--sandbox", "workspace-write"], &command);
    let words = shown(&json(&run));
    assert!(
        words.contains("outside: 1") && words.contains("named: 1"),
        "{words}"
    );
    assert!(
        bounds.outside().is_empty(),
        "{:?}\n{words}",
        bounds.outside()
    );
    // A workdir outside the roots runs read-only: not even the workspace is written.
    assert!(words.contains("elsewhere: 1"), "{words}");
    assert!(!bounds.ws.join("nested-elsewhere").exists(), "{words}");
    // The positive control: the nested job writes in the workspace.
    assert!(words.contains("inside: 0"), "{words}");
    assert!(bounds.ws.join("nested-ok").exists(), "{words}");
}

/// Issue 30.3: a sandboxed job cannot send to, read, wait on, kill or close another
/// session's job, nor drive an unconfined job of its own session; the same works from
/// outside, and on a job of its session as tight as it is.
#[test]
fn a_sandboxed_job_drives_no_job_looser_than_itself() {
    let bounds = Bounds::start("");
    let out = bounds.out.display().to_string();
    let reader = |label: &str, file: &str| {
        format!(
            "echo secret-i30-{label}; while read -r line; do echo \"{label} typed: $line\" >> {out}/{file}; done"
        )
    };
    let pipe = ["--stdin", "pipe"];
    let victim = bounds.background("victim", &pipe, &reader("victim", "victim-typed"));
    let sibling = bounds.background("tight", &pipe, &reader("sibling", "sibling-typed"));
    let tight = ["--sandbox", "read-only", "--net", "off"];
    let peer = bounds.background(
        "tight",
        &[&pipe[..], &tight[..]].concat(),
        "while read -r line; do echo \"peer typed: $line\"; done",
    );
    let bashc = bashc_path();
    let attempts = [
        (
            "send victim",
            format!("send --session victim {victim} pwned --newline"),
        ),
        (
            "send any",
            format!("send --any-session {victim} pwned --newline"),
        ),
        ("output any", format!("output --any-session {victim}")),
        ("output victim", format!("output --session victim {victim}")),
        (
            "grep any",
            format!("output --any-session {victim} --grep secret"),
        ),
        (
            "wait any",
            format!("wait --any-session {victim} --until secret --timeout 2"),
        ),
        ("check any", format!("check --any-session {victim}")),
        ("kill any", format!("kill --any-session {victim}")),
        ("close victim", "session close victim".to_owned()),
        ("send sibling", format!("send {sibling} pwned --newline")),
        ("output sibling", format!("output {sibling}")),
        ("kill sibling", format!("kill {sibling}")),
        ("close own", "session close tight".to_owned()),
        ("jobs all", "jobs --all".to_owned()),
    ];
    let mut command = String::new();
    for (label, args) in &attempts {
        command.push_str(&format!("{bashc} {args}; echo \"{label}: $?\"; "));
    }
    command.push_str(&format!(
        "{bashc} send {peer} hello-peer --newline; echo \"send peer: $?\"; echo listing:; {bashc} jobs"
    ));
    let run = bounds.exec("tight", &tight, &command);
    let words = shown(&json(&run));
    for (label, _) in &attempts {
        assert!(
            words.contains(&format!("{label}: 255")),
            "{label} was not refused:\n{words}"
        );
    }
    assert!(
        !words.contains("secret-i30-victim") && !words.contains("secret-i30-sibling"),
        "a looser job's output reached the sandbox:\n{words}"
    );
    assert!(
        words.contains("looser than this job")
            && words.contains("reaches only the jobs of its own session"),
        "{words}"
    );
    assert!(
        bounds.outside().is_empty(),
        "{:?}\n{words}",
        bounds.outside()
    );
    assert_eq!(bounds.state(&victim), "running");
    assert_eq!(bounds.state(&sibling), "running");
    // Its own session's jobs it may reach are listed; the looser one is not.
    let listing = words.split("listing:").nth(1).unwrap_or_default();
    let listed: Vec<&str> = listing
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(
        listed.contains(&peer.as_str()) && !listed.contains(&sibling.as_str()),
        "{listing}"
    );

    // Positive controls: as tight inside, and anything from outside.
    assert!(words.contains("send peer: 0"), "{words}");
    let waited = bounds.daemon.run_bashc_in(
        "tight",
        &[
            "wait",
            &peer,
            "--until",
            "peer typed: hello-peer",
            "--timeout",
            "20",
        ],
    );
    assert_eq!(waited.status.code(), Some(0), "{}", show(&waited));
    let sent = bounds
        .daemon
        .run_bashc_in("victim", &["send", &victim, "hello", "--newline"]);
    assert_eq!(sent.status.code(), Some(0), "{}", show(&sent));
    assert!(
        wait_until(WITHIN, || bounds.outside() == ["victim-typed"]),
        "{:?}",
        bounds.outside()
    );
    let read = bounds
        .daemon
        .run_bashc_in("other", &["output", "--any-session", &victim]);
    assert!(
        stdout(&read).contains("secret-i30-victim"),
        "{}",
        show(&read)
    );
    let closed = bounds
        .daemon
        .run_bashc_in("other", &["session", "close", "victim"]);
    assert_eq!(closed.status.code(), Some(0), "{}", show(&closed));
    let killed = bounds
        .daemon
        .run_bashc_in("other", &["kill", "--any-session", &sibling]);
    assert_eq!(killed.status.code(), Some(143), "{}", show(&killed));
}

/// Issue 30: a process of a sandboxed job that closed its channel, cleared it from
/// its environment or names another descriptor is refused at the daemon's socket,
/// never served as if it came from outside; through the channel, the same runs.
#[test]
fn a_process_that_shed_its_channel_is_refused() {
    let bounds = Bounds::start_naming_its_socket();
    let out = bounds.out.display().to_string();
    let victim = bounds.background("victim", &[], "echo secret-i30-shed; sleep 3030.3");
    let bashc = bashc_path();
    let command = format!(
        "(exec 63<&-; {bashc} exec --sandbox off -- touch {out}/closed; echo \"closed: $?\"); \
         env -u BASHD_CHANNEL {bashc} exec --sandbox off -- touch {out}/no-env; echo \"no env: $?\"; \
         env -u BASHD_CHANNEL {bashc} kill --any-session {victim}; echo \"no env kill: $?\"; \
         env -u BASHD_CHANNEL {bashc} output --any-session {victim}; echo \"no env output: $?\"; \
         BASHD_CHANNEL=1 {bashc} exec -- true; echo \"stdout as channel: $?\"; \
         {bashc} exec -- echo through-the-channel; echo \"channel: $?\""
    );
    let run = bounds.exec(
        "tight",
        &["--sandbox", "read-only", "--net", "on"],
        &command,
    );
    let words = shown(&json(&run));
    for refused in [
        "closed",
        "no env",
        "no env kill",
        "no env output",
        "stdout as channel",
    ] {
        assert!(
            words.contains(&format!("{refused}: 255")),
            "{refused} was not refused:\n{words}"
        );
    }
    // The runtime dir is covered in the job's mount namespace, so the socket is not
    // even there to try.
    assert!(words.contains("is not open here"), "{words}");
    assert!(!words.contains("secret-i30-shed"), "{words}");
    // The daemon's own check behind it: a client in another user namespace than the
    // daemon's, on the socket, is refused, and nothing runs.
    let unshared = in_user_namespace(bounds.daemon.bashc())
        .env("BASHD_SESSION", "tight")
        .env_remove(bashc::protocol::channel::CHANNEL_ENV)
        .args(["exec", "--sandbox", "off", "--", "touch"])
        .arg(bounds.out.join("unshared"))
        .output();
    let unshared = unshared.expect("cannot run unshare");
    assert_eq!(unshared.status.code(), Some(255), "{}", show(&unshared));
    assert!(
        stderr(&unshared).contains("comes from inside a sandbox"),
        "{}",
        show(&unshared)
    );
    assert!(bounds.outside().is_empty(), "{:?}", bounds.outside());
    assert_eq!(bounds.state(&victim), "running");
    // The positive control: through the channel it runs.
    assert!(
        words.contains("through-the-channel") && words.contains("channel: 0"),
        "{words}"
    );
    let killed = bounds.daemon.run_bashc_in("victim", &["kill", &victim]);
    assert_eq!(killed.status.code(), Some(143), "{}", show(&killed));
}

/// `command` (a `bashc` with its environment) run in a new user namespace of its own,
/// as a container of the user's, or a sandboxed process that shed its channel, is.
pub(crate) fn in_user_namespace(command: std::process::Command) -> std::process::Command {
    let mut unshared = std::process::Command::new("unshare");
    unshared
        .args(["--user", "--map-current-user"])
        .arg(command.get_program())
        .args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => unshared.env(key, value),
            None => unshared.env_remove(key),
        };
    }
    unshared
}

/// `pidfd_getfd`: a copy of descriptor `fd` of process `pid`, or why not.
fn steal_fd(pid: u32, fd: i32) -> Result<OwnedFd, std::io::Error> {
    use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags, pidfd_getfd, pidfd_open};
    let pid = Pid::from_raw(pid as i32).ok_or(std::io::ErrorKind::InvalidInput)?;
    let pidfd = pidfd_open(pid, PidfdFlags::empty())?;
    Ok(pidfd_getfd(pidfd, fd, PidfdGetfdFlags::empty())?)
}

/// Issue 30: a job's identity ends with the job. A copy of its channel, taken from
/// outside while it runs, speaks as that job (its sandbox, its session) and no more;
/// once the job has ended, the copy is refused and a connection made through it is
/// closed, though the job it waits for runs on.
#[test]
fn an_ended_job_lends_no_identity() {
    let bounds = Bounds::start("");
    let tight = ["--sandbox", "read-only", "--net", "off"];
    let lender = bounds.background("tight", &tight, "sleep 3030.4");
    let other = bounds.background("tight", &tight, "sleep 3030.5");
    let pid = wait_for_running("sleep 3030.4")[0];
    let channel = match steal_fd(pid, 63) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            eprintln!("skipped: this test may not copy a job's descriptor (pidfd_getfd: {e})");
            return;
        }
        Err(e) => panic!("the job holds no channel at descriptor 63: {e}"),
    };
    let through = |args: &[&str]| {
        use std::os::unix::process::CommandExt;
        let raw = channel.as_raw_fd();
        let mut command = bounds.daemon.bashc();
        command
            .env("BASHD_SESSION", "tight")
            .env("BASHD_CHANNEL", "63")
            .current_dir(&bounds.ws)
            .args(args);
        // SAFETY: only dup2 between fork and exec.
        unsafe {
            command.pre_exec(move || {
                let done = if raw == 63 {
                    libc::fcntl(63, libc::F_SETFD, 0)
                } else {
                    libc::dup2(raw, 63)
                };
                if done < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        command
    };
    // While the job runs, its channel speaks as the job: its sandbox, no looser.
    let out = through(&["exec", "--json", "--", "echo lent"])
        .output()
        .unwrap();
    assert_eq!(
        json(&out)["sandbox"]["profile"],
        "read-only",
        "{}",
        show(&out)
    );
    let out = through(&["exec", "--sandbox", "off", "--", "true"])
        .output()
        .unwrap();
    assert!(stderr(&out).contains(NOT_LOOSER), "{}", show(&out));
    let mut waiting = through(&["wait", &other])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "the wait ended early"
    );

    let killed = bounds.daemon.run_bashc_in("tight", &["kill", &lender]);
    assert_eq!(killed.status.code(), Some(143), "{}", show(&killed));
    // The connection that came through the ended job's channel closes with it...
    assert!(
        wait_until(WITHIN, || waiting.try_wait().unwrap().is_some()),
        "a connection through an ended job's channel stayed open"
    );
    let waited = waiting.wait_with_output().unwrap();
    assert_eq!(waited.status.code(), Some(255), "{}", show(&waited));
    assert_eq!(bounds.state(&other), "running");
    // ... and the channel takes no new one.
    let out = through(&["exec", "--", "echo borrowed"]).output().unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    assert!(stderr(&out).contains("is closed"), "{}", show(&out));
    assert!(!stdout(&out).contains("borrowed"), "{}", show(&out));
    let killed = bounds.daemon.run_bashc_in("tight", &["kill", &other]);
    assert_eq!(killed.status.code(), Some(143), "{}", show(&killed));
}

/// Issue 33.1: every request that names a job, from a client of another session, is
/// refused with the one rule's words, on the CLI and over MCP; `--any-session` and
/// `--session` are the ways across.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_job_request_of_another_session_is_refused() {
    let bounds = Bounds::start("");
    let out = bounds.out.display().to_string();
    let piped = bounds.background(
        "test",
        &["--stdin", "pipe"],
        &format!("echo mine-i33; while read -r l; do echo \"typed: $l\" >> {out}/typed; done"),
    );
    let terminal = bounds.background(
        "test",
        &["--pty"],
        &format!("echo mine-i33-pty; read -r l; echo \"$l\" > {out}/pty-typed; sleep 3033"),
    );
    let asked: Vec<Vec<String>> = [
        vec!["wait", &piped, "--until", "mine", "--timeout", "5"],
        vec!["wait", &piped, "--idle", "0.2", "--timeout", "5"],
        vec!["wait", &piped, "--port", "1", "--timeout", "1"],
        vec!["follow", &piped],
        vec!["send", &piped, "crossed", "--newline"],
        vec!["output", &piped, "--grep", "mine"],
        vec!["check", &piped],
        vec!["screen", &terminal],
        vec!["resize", &terminal, "100x30"],
        vec!["send", &terminal, "--keys", "crossed", "Enter"],
    ]
    .into_iter()
    .map(|args| args.into_iter().map(str::to_owned).collect())
    .collect();
    for args in &asked {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = bounds.daemon.run_bashc_in("other", &args);
        assert_eq!(out.status.code(), Some(255), "{args:?}: {}", show(&out));
        assert!(
            stderr(&out).contains("is a job of session test, not of this session (other)"),
            "{args:?}: {}",
            show(&out)
        );
        assert!(
            !stdout(&out).contains("mine-i33"),
            "{args:?}: {}",
            show(&out)
        );
    }

    // MCP: the server's session is its agent's, not `test`.
    let client = connect(&bounds.daemon).await;
    for (tool, arguments) in [
        (
            "bash_wait",
            json!({"job": piped, "until": "mine", "timeout_secs": 5}),
        ),
        (
            "bash_wait",
            json!({"job": piped, "idle_secs": 0.2, "timeout_secs": 5}),
        ),
        (
            "bash_wait",
            json!({"job": piped, "port": 1, "timeout_secs": 1}),
        ),
        ("bash_send", json!({"job": piped, "text": "crossed-mcp\n"})),
        ("bash_screen", json!({"job": terminal})),
        (
            "bash_send",
            json!({"job": terminal, "keys": ["crossed", "Enter"]}),
        ),
    ] {
        let result = call(&client, tool, arguments.clone()).await;
        let words = text(&result);
        assert!(is_error(&result), "{tool} {arguments}: {words}");
        assert!(
            words.contains("is a job of session test"),
            "{tool} {arguments}: {words}"
        );
        assert!(!words.contains("mine-i33"), "{tool} {arguments}: {words}");
    }
    client.cancel().await.unwrap();
    assert!(bounds.outside().is_empty(), "{:?}", bounds.outside());

    // The ways across, each on purpose.
    let across = |args: &[&str]| {
        let out = bounds.daemon.run_bashc_in("other", args);
        assert!(
            out.status.code() == Some(0),
            "{args:?} across sessions: {}",
            show(&out)
        );
        out
    };
    let out = across(&[
        "wait",
        &piped,
        "--until",
        "mine",
        "--any-session",
        "--timeout",
        "20",
    ]);
    assert!(stdout(&out).contains("mine-i33"), "{}", show(&out));
    across(&[
        "wait",
        &piped,
        "--idle",
        "0.2",
        "--session",
        "test",
        "--timeout",
        "20",
    ]);
    let out = across(&["output", &piped, "--grep", "mine", "--any-session"]);
    assert!(stdout(&out).contains("mine-i33"), "{}", show(&out));
    across(&["send", &piped, "across", "--newline", "--any-session"]);
    assert!(wait_until(WITHIN, || {
        std::fs::read_to_string(bounds.out.join("typed")).unwrap_or_default() == "typed: across\n"
    }));
    let out = across(&["screen", &terminal, "--any-session"]);
    assert!(stdout(&out).contains("mine-i33-pty"), "{}", show(&out));
    across(&["resize", &terminal, "100x30", "--session", "test"]);
    across(&["send", &piped, "--eof", "--any-session"]);
    let out = across(&["follow", &piped, "--any-session"]);
    assert!(stdout(&out).contains("mine-i33"), "{}", show(&out));
    let out = bounds
        .daemon
        .run_bashc_in("other", &["kill", &terminal, "--any-session"]);
    assert_eq!(out.status.code(), Some(143), "{}", show(&out));
}

/// Issue 33.3: looking at a lingering session (`jobs --session`, `check`, `output`,
/// `wait`, `screen`) does not adopt it; acting for it (`exec`) does.
#[test]
fn looking_at_a_session_does_not_adopt_it() {
    let bounds = Bounds::start("[sessions]\nlinger_secs = 600\n");
    let mut owner = KillOnDrop::sleeper();
    let looker = KillOnDrop::sleeper();
    let owner_pid = owner.pid().to_string();
    let out = bounds.daemon.run_bashc_in(
        "look",
        &[
            "exec",
            "--json",
            "--owner-pid",
            &owner_pid,
            "--mode",
            "background",
            "--",
            "echo seen-i33; sleep 3033.3",
        ],
    );
    let job = json(&out)["job"].as_str().unwrap().to_owned();
    let sleep = wait_for_running("sleep 3033.3");
    owner.kill();
    let session = || {
        let listed = json(&bounds.daemon.run_bashc_in("other", &["sessions", "--json"]));
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["session"] == "look")
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert!(
        wait_until(WITHIN, || session()["state"] == "lingering"),
        "{}",
        session()
    );
    let looker_pid = looker.pid().to_string();
    let mine = ["--session", "look", "--owner-pid", &looker_pid];
    for look in [
        vec!["jobs"],
        vec!["check", &job],
        vec!["output", &job],
        vec!["output", &job, "--grep", "seen"],
        vec!["wait", &job, "--timeout", "0.2"],
        vec!["wait", &job, "--until", "seen", "--timeout", "5"],
        vec!["screen", &job],
    ] {
        let args = [&look[..], &mine[..]].concat();
        bounds.daemon.run_bashc_in("other", &args);
        let now = session();
        assert_eq!(now["state"], "lingering", "{look:?} adopted it: {now}");
        assert_eq!(now["owners"], json!([]), "{look:?}: {now}");
    }
    assert!(sleep.iter().all(|&pid| alive(pid)));
    // Acting for the session adopts it.
    let out = bounds.daemon.run_bashc_in(
        "other",
        &[&["exec"][..], &mine[..], &["--", "true"]].concat(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let now = session();
    assert_eq!(now["state"], "active", "{now}");
    assert_eq!(now["owners"], json!([looker.pid()]), "{now}");
}

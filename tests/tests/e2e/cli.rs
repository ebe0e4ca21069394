//! `bashc` as a Unix tool (issue 24): a reader that closes early, a filter that
//! matches nothing, a mistyped flag, an empty stream, errors in the user's words, a
//! user of another uid, and the short commands' lean path (issue 46).

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use bashd_tests::{Daemon, bin_path, wait_until};

use crate::{json, show, stderr, stdout};

/// Issue 24.
#[test]
fn a_reader_that_closes_early_ends_bashc_quietly() {
    let daemon = Daemon::start();
    for _ in 0..3 {
        let out = daemon.run_bashc(&["exec", "--", "true"]);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    }
    // The read end is gone before bashc writes: every write fails with EPIPE.
    let mut child = daemon
        .bashc()
        .args(["jobs", "--all"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(stderr(&out), "", "{}", show(&out));

    // As a shell runs it.
    let mut shell = Command::new("bash");
    for (key, value) in daemon.bashc().get_envs() {
        match value {
            Some(value) => shell.env(key, value),
            None => shell.env_remove(key),
        };
    }
    let out = shell
        .arg("-c")
        .arg(format!(
            "{} jobs | head -1; exit ${{PIPESTATUS[0]}}",
            bin_path("bashc").display()
        ))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(stderr(&out), "", "{}", show(&out));
    assert!(stdout(&out).starts_with("JOB  "), "{}", show(&out));
}

/// Issue 24.
#[test]
fn a_filter_that_matches_nothing_is_an_empty_list() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&["jobs", "--session", "never-used", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(stdout(&out), "[]\n");
    let out = daemon.run_bashc(&["jobs", "--session", "never-used"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(stdout(&out), "no jobs\n");
}

/// Issue 24.
#[test]
fn a_mistyped_flag_is_a_usage_error_and_nothing_runs() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&["exec", "--tiemout", "5", "--", "echo", "hi"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let said = stderr(&out);
    assert!(
        said.contains("unexpected argument '--tiemout'") && said.contains("'--timeout'"),
        "{}",
        show(&out)
    );
    // BASHD_SESSION is set, but the user did not type --session.
    assert!(!said.contains("--session"), "{}", show(&out));
    // `--pty` is a flag since issue 25; a near miss of it is not.
    let out = daemon.run_bashc(&["exec", "--ptty", "echo", "hi"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(stderr(&out).contains("'--ptty'"), "{}", show(&out));
    let out = daemon.run_bashc(&["jobs", "--all", "--json"]);
    assert_eq!(json(&out), serde_json::json!([]), "a job was started");

    // What comes after the command's first word is the command's, flags and all.
    let out = daemon.run_bashc(&["exec", "echo", "--tiemout", "-n"]);
    assert_eq!(stdout(&out), "stdout:\n--tiemout -n\n\nexit code: 0\n");
}

/// Issue 24.
#[test]
fn output_says_where_the_output_is_and_speaks_the_users_words() {
    let daemon = Daemon::start();
    let result = json(&daemon.run_bashc(&["exec", "--json", "--", "echo oops >&2"]));
    let job = result["job"].as_str().unwrap();

    let out = daemon.run_bashc(&["output", job]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        format!(
            "bashc: {job}'s stdout is empty; its stderr has 1 line: bashc output {job} --stream stderr\n"
        )
    );
    let out = daemon.run_bashc(&["output", job, "--stream", "stderr", "--offset", "5"]);
    assert_eq!(
        stderr(&out),
        format!("bashc: {job}'s stderr has 1 line; --offset 5 is past its end\n")
    );
    let out = daemon.run_bashc(&["output", job, "--offset", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(
        stderr(&out).contains("--offset starts at 1"),
        "{}",
        show(&out)
    );

    // `output` takes --session and --owner-pid like every job command.
    let owner = std::process::id().to_string();
    let out = daemon.run_bashc(&[
        "output",
        job,
        "--stream",
        "stderr",
        "--session",
        "test",
        "--owner-pid",
        &owner,
    ]);
    assert_eq!(stdout(&out), "oops\n", "{}", show(&out));
}

/// Issue 24.
#[test]
fn another_uid_is_told_which_uid_the_daemon_serves() {
    if !rustix::process::getuid().is_root() {
        eprintln!("skipped: only root can run a client as another uid");
        return;
    }
    let daemon = Daemon::start();
    // A runtime dir opened up by mistake: another user can reach the socket.
    let open = |path: &std::path::Path, mode| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    open(daemon.scratch(), 0o711);
    open(daemon.runtime_dir(), 0o711);
    open(&daemon.socket_path(), 0o666);
    // A copy of bashc that the other user may run, wherever the build is.
    let bin = daemon.scratch().join("bin");
    std::fs::create_dir(&bin).unwrap();
    open(&bin, 0o755);
    std::fs::copy(bin_path("bashc"), bin.join("bashc")).unwrap();
    open(&bin.join("bashc"), 0o755);

    let nobody = 65534;
    let out = {
        use std::os::unix::process::CommandExt;
        bashd_tests::output_of_new_file(
            Command::new(bin.join("bashc"))
                .arg("status")
                .env_clear()
                .env("BASHD_RUNTIME_DIR", daemon.runtime_dir())
                .env("BASHD_NO_AUTOSTART", "1")
                .current_dir("/")
                .uid(nobody)
                .gid(nobody)
                .stdin(Stdio::null()),
        )
    };
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    // Since issue 30 bashc checks the directory before it connects, so it is the
    // client that names whose it is (the daemon still refuses another uid that
    // connects without checking: `server.rs`).
    assert!(
        stderr(&out).starts_with(&format!(
            "bashc: runtime dir {} belongs to uid 0 (root), not to you (uid {nobody}); set BASHD_RUNTIME_DIR to a directory of your own",
            daemon.runtime_dir().display()
        )) && stderr(&out).contains("bashc sent nothing there"),
        "{}",
        show(&out)
    );
}

/// Several words after `--` are a program and its arguments, each word kept whole;
/// one word is a shell command as written (issue 45).
#[test]
fn words_after_the_separator_keep_their_quoting_and_one_word_is_a_shell_command() {
    let daemon = Daemon::start();
    let out = daemon.run_bashc(&[
        "exec",
        "--",
        "printf",
        "[%s]",
        "TODO: fix",
        "$HOME",
        "it's",
        "",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        stdout(&out).contains("[TODO: fix][$HOME][it's][]"),
        "{}",
        show(&out)
    );
    let out = daemon.run_bashc(&["exec", "echo", "$HOME"]);
    assert!(stdout(&out).contains("$HOME\n"), "{}", show(&out));
    // Positive control: one word is the shell's to read.
    let out = daemon.run_bashc(&["exec", "--", "echo $((1+1)) A=1"]);
    assert!(stdout(&out).contains("2 A=1\n"), "{}", show(&out));
    // A first word with `=` stays a word, not an assignment.
    let out = daemon.run_bashc(&["exec", "--", "A=1", "true"]);
    assert_eq!(out.status.code(), Some(127), "{}", show(&out));
}

/// What would run nothing, show nothing or can never match is a usage error: exit 2,
/// the argument named, nothing run (issue 45).
#[test]
fn arguments_that_cannot_work_are_usage_errors_with_exit_2() {
    let daemon = Daemon::start();
    let job = daemon.background_in("i45-usage", &[], "sleep 1606");
    let cases: &[(&[&str], &str)] = &[
        (&["exec", "--", ""], "the command is empty"),
        (
            &["exec", "-", "echo", "hi"],
            "`-` reads the command from stdin",
        ),
        (&["exec", "--max-lines", "0", "--", "true"], "--max-lines"),
        (&["exec", "--head", "0", "--", "seq 3"], "--head"),
        (&["exec", "--tail", "0", "--", "seq 3"], "--tail"),
        (&["exec", "--notify", "(", "--", "true"], "--notify"),
        (&["wait", &job, "--until", "(", "--timeout", "1"], "--until"),
        (&["output", &job, "--grep", "("], "--grep"),
        (&["wait", &job, "--port", "0"], "--port"),
        (&["send", &job], "give TEXT to send"),
        (&["top", "--interval", "0"], "--interval"),
        (&["top"], "bashc top --once"),
    ];
    for (args, said) in cases {
        let out = daemon.run_bashc_in("i45-usage", args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", show(&out));
        assert!(stderr(&out).contains(said), "{args:?}: {}", show(&out));
    }
    // Nothing ran: the only job of the session is the sleep.
    let jobs = daemon.run_bashc_in("i45-usage", &["jobs", "--json"]);
    assert_eq!(
        json(&jobs).as_array().map(Vec::len),
        Some(1),
        "{}",
        show(&jobs)
    );
    // An empty command on stdin is refused the same way.
    let out = daemon
        .bashc_in("i45-usage")
        .args(["exec", "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
}

/// Killing a job that already ended says so, with its exit and where its output is,
/// and does not print its output again (issue 45).
#[test]
fn killing_an_ended_job_says_it_ended_without_its_output_again() {
    let daemon = Daemon::start();
    let done = daemon.run_bashc(&["exec", "--json", "--", "seq 2000; exit 3"]);
    let job = json(&done)["job"].as_str().unwrap().to_owned();
    let out = daemon.run_bashc(&["kill", &job]);
    let said = stdout(&out);
    assert!(
        said.contains(&format!(
            "{job} had already ended; nothing was killed. Its output: bashc output {job}"
        )),
        "{}",
        show(&out)
    );
    assert!(said.contains("exit code: 3"), "{}", show(&out));
    assert!(!said.contains("1999\n"), "{}", show(&out));
    assert!(said.len() < 1000, "{}", show(&out));
    // Positive control: the output is all there to read.
    let page = daemon.run_bashc(&["output", &job, "--offset", "1999"]);
    assert_eq!(stdout(&page), "1999\n2000\n", "{}", show(&page));
}

/// A running job's empty stream is empty so far: `bashc output` says it runs on, as
/// `bash_output` did (issue 46, step 4: one sentence for both).
#[test]
fn output_of_a_running_jobs_empty_stream_says_it_is_still_running() {
    let daemon = Daemon::start();
    let job = daemon.background_in("test", &[], "sleep 4601");
    let out = daemon.run_bashc(&["output", &job]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "bashc: {job}'s stdout is empty so far (it is still running), and so is its stderr\n"
        )
    );
    daemon.run_bashc(&["kill", &job]);
}

/// The descriptors and the threads of the running process `pid`.
fn fds_and_threads(pid: u32) -> (Vec<String>, usize) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .map(|target| target.display().to_string())
        .collect();
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count();
    (fds, threads)
}

/// Issue 46: a short command on this machine (`exec` in the foreground, `check`, `kill`,
/// `jobs`) goes through the blocking client: while its job runs, bashc holds no event
/// loop and one thread. `exec --stream` keeps the async runtime: the control.
#[test]
fn a_foreground_exec_waits_without_an_async_runtime() {
    let daemon = Daemon::start();
    for (stream, lean) in [(false, true), (true, false)] {
        let started = daemon.scratch().join(format!("started-{stream}"));
        let mut args = vec!["exec".to_owned()];
        if stream {
            args.push("--stream".to_owned());
        }
        args.push(format!("touch {}; sleep 30", started.display()));
        let mut bashc = daemon
            .bashc()
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let ran = wait_until(Duration::from_secs(20), || started.exists());
        let (fds, threads) = fds_and_threads(bashc.id());
        // Its job ends with the connection.
        let _ = bashc.kill();
        let _ = bashc.wait();
        assert!(ran, "the job of {args:?} did not start");
        let event_loop = fds.iter().any(|fd| fd.contains("eventpoll"));
        assert_eq!(event_loop, !lean, "{args:?}: {fds:?}");
        if lean {
            assert_eq!(threads, 1, "{args:?}");
        }
    }
}

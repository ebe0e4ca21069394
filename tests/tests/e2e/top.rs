//! `bashc top` (issue 32) in a real terminal: tmux runs it, `send-keys` presses its
//! keys and `capture-pane` reads the screen. The table shows two sessions' jobs, follows
//! one, types into a job waiting for input, and kills one. Skips, saying so, without
//! tmux.

use std::process::Command;
use std::time::Duration;

use bashd_tests::{Daemon, bin_path, wait_until};

use crate::{json, show, stdout};

const WITHIN: Duration = Duration::from_secs(20);

/// A tmux server of its own, killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(command: &str) -> Tmux {
        Tmux::start_sized(command, 200)
    }

    /// A terminal `width` columns wide.
    fn start_sized(command: &str, width: u16) -> Tmux {
        // A server per test: tests run side by side in one process.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmux = Tmux {
            socket: format!("bashd-top-test-{}-{n}", std::process::id()),
        };
        let out = tmux
            .run(&[
                "new-session",
                "-d",
                "-x",
                &width.to_string(),
                "-y",
                "50",
                command,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", show(&out));
        tmux
    }

    fn run(&self, args: &[&str]) -> Command {
        let mut command = Command::new("tmux");
        command.args(["-L", &self.socket]).args(args);
        command
    }

    fn keys(&self, keys: &[&str]) {
        let args = [&["send-keys", "-t", "0"][..], keys].concat();
        let out = self.run(&args).output().unwrap();
        assert!(out.status.success(), "{}", show(&out));
    }

    fn screen(&self) -> String {
        let out = self
            .run(&["capture-pane", "-p", "-t", "0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the screen satisfies `ok`; the screen last seen.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let mut seen = String::new();
        let found = wait_until(WITHIN, || {
            seen = self.screen();
            ok(&seen)
        });
        assert!(found, "the screen never showed {what}:\n{seen}");
        seen
    }

    /// Moves the selection until the lower pane names `job`.
    fn select(&self, job: &str) {
        let title = format!(" of {job} ");
        for key in ["Up"; 10].into_iter().chain(["Down"; 20]) {
            if self.screen().contains(&title) {
                return;
            }
            self.keys(&[key]);
            std::thread::sleep(Duration::from_millis(150));
        }
        self.wait_for(&title, |s| s.contains(&title));
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]).output();
    }
}

/// The shell command that runs this build's `bashc top` on `daemon`, looking every
/// `interval` seconds.
fn top_command(daemon: &Daemon, interval: &str) -> String {
    format!(
        "env BASHD_RUNTIME_DIR={} XDG_CONFIG_HOME={} BASHD_NO_AUTOSTART=1 {} top --interval {interval}",
        daemon.runtime_dir().display(),
        daemon.config_home().display(),
        bin_path("bashc").display()
    )
}

fn tmux_missing() -> bool {
    Command::new("tmux").arg("-V").output().is_err()
}

/// Issue 32.
#[test]
fn top_shows_follows_types_into_and_kills_jobs_in_a_terminal() {
    if tmux_missing() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let daemon = Daemon::start();
    let ticker = daemon.background_in(
        "agent-one",
        &[],
        "while true; do echo tick; sleep 0.3; done",
    );
    let asker = daemon.background_in(
        "agent-two",
        &["--stdin", "pipe"],
        "printf 'Your name? '; read name; echo \"hello $name\"; sleep 60",
    );
    let command = top_command(&daemon, "0.3");
    let tmux = Tmux::start(&command);
    let table = tmux.wait_for("both sessions' jobs", |s| {
        s.contains("agent-one") && s.contains("agent-two") && s.contains("asks: Your name?")
    });
    assert!(table.contains(&ticker) && table.contains(&asker), "{table}");

    // Follow the ticker: its lines show under the table.
    tmux.keys(&["f"]);
    tmux.select(&ticker);
    tmux.wait_for("the ticker's output", |s| {
        s.contains(&format!("output of {ticker}")) && s.matches("tick").count() >= 3
    });

    // Type into the job that waits.
    tmux.select(&asker);
    tmux.keys(&["i"]);
    tmux.wait_for("the input line", |s| s.contains("Enter sends"));
    tmux.keys(&["-l", "Ada"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the answer", |s| s.contains("hello Ada"));

    // Kill the ticker.
    tmux.select(&ticker);
    tmux.keys(&["k"]);
    tmux.wait_for("the question", |s| {
        s.contains(&format!("kill {ticker}? y/n"))
    });
    tmux.keys(&["y"]);
    let screen = tmux.wait_for("the ticker killed", |s| {
        s.lines()
            .any(|line| line.contains(&format!(" {ticker} ")) && line.contains("killed"))
    });
    eprintln!("{screen}");
    let out = daemon.run_bashc(&["jobs", "--all", "--json"]);
    let jobs = json(&out);
    let state = |job: &str| {
        jobs.as_array()
            .unwrap()
            .iter()
            .find(|j| j["job"] == job)
            .map(|j| j["state"].clone())
    };
    assert_eq!(state(&ticker), Some("killed".into()), "{jobs}");
    assert_eq!(state(&asker), Some("running".into()), "{jobs}");
    tmux.keys(&["q"]);
}

/// The view learns of a job started after it opened, and of a line that job prints,
/// from the daemon's watch: it looks at the table only every hour here, so polling
/// would show neither.
/// (Issue 32.)
#[test]
fn top_redraws_from_the_watch_without_polling() {
    if tmux_missing() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let daemon = Daemon::start();
    let first = daemon.background_in("agent-early", &[], "sleep 60");
    let command = top_command(&daemon, "3600");
    let tmux = Tmux::start(&command);
    tmux.wait_for("the first job", |s| s.contains(&first));
    let late = daemon.background_in(
        "agent-late",
        &[],
        "sleep 1; echo late-marker-line; sleep 60",
    );
    tmux.wait_for("the job started after the view opened", |s| {
        s.lines()
            .any(|line| line.contains(&format!(" {late} ")) && line.contains("agent-late"))
    });
    tmux.wait_for("its line", |s| s.contains("late-marker-line"));
    let out = daemon.run_bashc(&["kill", "--any-session", &first]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("killed"),
        "{}",
        show(&out)
    );
    let screen = tmux.wait_for("the first job killed", |s| {
        s.lines()
            .any(|line| line.contains(&format!(" {first} ")) && line.contains("killed"))
    });
    eprintln!("{screen}");
    tmux.keys(&["q"]);
}

/// Issue 32.
#[test]
fn top_once_prints_the_table() {
    let daemon = Daemon::start();
    let job = daemon.background_in("agent-one", &[], "echo '\x1b[31mred\x1b[0m'; sleep 60");
    let mut out = daemon.run_bashc(&["top", "--once"]);
    wait_until(WITHIN, || {
        out = daemon.run_bashc(&["top", "--once"]);
        String::from_utf8_lossy(&out.stdout).contains("red")
    });
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.starts_with("SESSION"), "{}", show(&out));
    let row = text
        .lines()
        .find(|l| l.contains(&job))
        .unwrap_or_else(|| panic!("{}", show(&out)));
    assert!(
        row.starts_with("agent-one") && row.contains("running"),
        "{row}"
    );
    // The escape the job printed and the one its command holds never reach the
    // terminal.
    assert!(!text.contains('\x1b'), "{text:?}");
    daemon.run_bashc(&["kill", "--any-session", &job]);
}

/// Issue 45, item 7: after `k y` on the top row, the killed job sinks below the
/// session that still runs; the highlight follows it, so a second `k` asks about the
/// killed job, never the server that rose into row 0 (which runs on: the control).
#[test]
fn the_selection_follows_the_job_not_the_row() {
    if tmux_missing() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let daemon = Daemon::start();
    let server = daemon.background_in("agent-server", &[], "sleep 18041");
    // `started_at` counts whole seconds: a second apart, the later session sorts
    // first, on row 0.
    std::thread::sleep(Duration::from_millis(1100));
    let victim = daemon.background_in("agent-victim", &[], "sleep 18042");
    let command = top_command(&daemon, "0.3");
    let tmux = Tmux::start(&command);
    tmux.wait_for("both jobs", |s| s.contains(&server) && s.contains(&victim));
    tmux.keys(&["k"]);
    tmux.wait_for("the question on row 0", |s| {
        s.contains(&format!("kill {victim}? y/n"))
    });
    tmux.keys(&["y"]);
    tmux.wait_for("the victim killed", |s| {
        s.lines()
            .any(|line| line.contains(&format!(" {victim} ")) && line.contains("killed"))
    });
    tmux.keys(&["k"]);
    let asked = tmux.wait_for("a second question", |s| s.contains("? y/n"));
    tmux.keys(&["n"]);
    assert!(
        asked.contains(&format!("kill {victim}? y/n")),
        "the highlight moved to another job:\n{asked}"
    );
    let jobs = json(&daemon.run_bashc(&["jobs", "--all", "--json"]));
    let running = jobs
        .as_array()
        .unwrap()
        .iter()
        .any(|j| j["job"] == server.as_str() && j["state"] == "running");
    tmux.keys(&["q"]);
    daemon.run_bashc(&["kill", "--any-session", &server]);
    assert!(running, "{jobs}");
}

/// Issue 45, item 6: the follow pane shows what a job writes to stderr too (a dev
/// server's request log), marked, after its stdout (which still shows: the control).
#[test]
fn the_follow_pane_shows_stderr_too() {
    if tmux_missing() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let daemon = Daemon::start();
    let server = daemon.background_in(
        "agent-dev",
        &[],
        "echo listening-on-out; echo 'GET /err-log 200' >&2; sleep 18051",
    );
    let command = top_command(&daemon, "0.3");
    let tmux = Tmux::start(&command);
    tmux.wait_for("the job", |s| s.contains(&server));
    tmux.keys(&["f"]);
    tmux.select(&server);
    let screen = tmux.wait_for("its stderr in the pane", |s| {
        s.contains("stderr│ GET /err-log 200")
    });
    assert!(screen.contains("listening-on-out"), "{screen}");
    tmux.keys(&["q"]);
    daemon.run_bashc(&["kill", "--any-session", &server]);
}

/// Issue 45, item 7: at 80 columns COMMAND shows more than 7 characters and LAST LINE
/// shows; at 200 every column does (the control).
#[test]
fn at_80_columns_command_and_last_line_keep_room() {
    if tmux_missing() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let daemon = Daemon::start();
    let job = daemon.background_in(
        "agent-narrow",
        &[],
        "echo narrow-last-line; sleep 18061 # commandtail",
    );
    let command = top_command(&daemon, "0.3");
    for width in [80, 200] {
        let tmux = Tmux::start_sized(&command, width);
        // Its command and its last line both hold the words: twice on its row.
        let screen = tmux.wait_for("the job with its last line", |s| {
            s.lines()
                .any(|l| l.contains(&format!(" {job} ")) && l.matches("narrow-last").count() == 2)
        });
        let row = screen
            .lines()
            .find(|l| l.contains(&format!(" {job} ")))
            .unwrap_or_default();
        assert!(row.contains("echo narrow-las"), "{width} columns: {row}");
        eprintln!("{width} columns: {row}");
        if width == 200 {
            assert!(screen.contains("MEM"), "{screen}");
        }
        tmux.keys(&["q"]);
    }
    daemon.run_bashc(&["kill", "--any-session", &job]);
}

/// Issue 45, item 6: LAST LINE is the last line printed on either stream. A dev server's
/// request log on stderr after its banner on stdout shows the log line; the control, a
/// job whose stdout printed last, shows its stdout line and not its older stderr one.
#[test]
fn last_line_is_the_last_printed_on_either_stream() {
    let daemon = Daemon::start();
    let server = daemon.background_in(
        "agent-one",
        &[],
        // The lines are worked out by the shell: the command in its row never holds them.
        "echo \"banner $((2+3))\"; sleep 0.3; echo \"GET /$((6*7))\" >&2; sleep 60",
    );
    let control = daemon.background_in(
        "agent-one",
        &[],
        "echo \"early $((1+1))\" >&2; sleep 0.3; echo \"late $((40+3))\"; sleep 60",
    );
    let row = |text: &str, job: &str| {
        text.lines()
            .find(|line| line.split_whitespace().any(|word| word == job))
            .unwrap_or_default()
            .to_owned()
    };
    let mut text = String::new();
    let shown = wait_until(WITHIN, || {
        text = stdout(&daemon.run_bashc(&["top", "--once"]));
        row(&text, &server).contains("GET /42") && row(&text, &control).contains("late 43")
    });
    assert!(shown, "{text}");
    assert!(!row(&text, &server).contains("banner 5"), "{text}");
    assert!(!row(&text, &control).contains("early 2"), "{text}");
    for job in [&server, &control] {
        daemon.run_bashc(&["kill", "--any-session", job]);
    }
}

/// Issue 44: pending asks are on top of `bashc top` (and of `--once`), and the person
/// answers the first with a key: `a` grants it once, and its request runs; `r`
/// refuses the next, and its request is refused. Positive control: with no ask
/// waiting, the view shows no asks block.
#[test]
fn top_shows_pending_asks_on_top_and_answers_them_with_a_key() {
    if tmux_missing() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let daemon = Daemon::start_with_config(
        "[sandbox]\ndefault = \"workspace-write\"\nfloor = \"workspace-write\"\n",
    );
    let asking = |command: &str| {
        daemon
            .bashc_in("agent-i44")
            .current_dir(daemon.scratch())
            .args(["exec", "--json", "--sandbox", "off", "--", command])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let tmux = Tmux::start(&top_command(&daemon, "0.2"));
    let calm = tmux.wait_for("the empty table", |s| s.contains("bashd:"));
    assert!(!calm.contains("asks wait for you"), "{calm}");

    let ran = daemon.scratch().join("top-granted-i44");
    let granted = asking(&format!("touch {}", ran.display()));
    // The ask's block and its keys come in one frame, which the terminal may show
    // half drawn: wait for both.
    let screen = tmux.wait_for("the ask on top and its keys", |s| {
        s.contains("ASK a1") && s.contains("a1: a grant once")
    });
    assert!(
        screen.contains("1 asks wait for you") && screen.contains("a1: a grant once"),
        "{screen}"
    );
    let once = daemon.run_bashc(&["top", "--once"]);
    let text = String::from_utf8_lossy(&once.stdout);
    assert!(
        text.lines().next().unwrap_or("").starts_with("ASK a1"),
        "{}",
        show(&once)
    );
    tmux.keys(&["a"]);
    let out = granted.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(ran.exists(), "the request granted in top did not run");
    tmux.wait_for("the answer said", |s| s.contains("granted a1 once"));

    let refused = asking("true");
    tmux.wait_for("the next ask on top", |s| s.contains("ASK a2"));
    tmux.keys(&["r"]);
    let out = refused.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ask a2 was refused"),
        "{}",
        show(&out)
    );
    let listed = json(&daemon.run_bashc(&["allow", "--json"]));
    assert_eq!(
        listed["asks"][0]["answered_by"]
            .as_str()
            .map(|by| by.starts_with("bashc top")),
        Some(true),
        "{listed}"
    );
    tmux.keys(&["q"]);
}

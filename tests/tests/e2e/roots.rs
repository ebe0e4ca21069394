//! Where a confined job may write is the person's decision, never the request's
//! (issue 42): a session's writable roots are the directory its client runs in and
//! `[sandbox] writable`, resolved once and carried to nested jobs; a workdir outside
//! them runs read-only and says so; `/` and `$HOME` are never roots; each root's own
//! `.git` stays read-only however crowded the root; a job drives no sibling that
//! writes another workspace; and from inside a job a hidden name that is a file reads
//! the same as a missing one. Each test tries the hole and, beside it, the write that
//! is allowed.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use bashd_tests::output::shown;
use bashd_tests::{Daemon, bashc_path, wait_until};
use serde_json::{Value, json};

use super::mcp::{call, is_error, mcp_command, serve, text};
use super::{json, show, stderr};

/// More entries than the bounded `.git` walk reads in all (`confine/git.rs`, 20,000).
const CROWD: usize = 20_001;

/// A daemon whose `HOME` is a fake one, a project to run in and a directory outside.
struct Roots {
    daemon: Daemon,
    /// The project: a git repository, where the client runs.
    ws: PathBuf,
    /// Beside the project, writable by the user, not by a confined job.
    outside: PathBuf,
    /// The daemon's (and the clients') `HOME`.
    home: PathBuf,
}

impl Roots {
    fn start(config: &str) -> Roots {
        let mut daemon = Daemon::unstarted();
        let base = daemon.scratch().join("i42");
        let (ws, outside, home) = (base.join("ws"), base.join("outside"), base.join("home"));
        for dir in [&ws, &outside, &home.join(".ssh")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        git_init(&ws);
        daemon.write_config(config);
        let mut command = daemon.bashd_command();
        command.env("HOME", &home);
        daemon.start_with(command);
        Roots {
            daemon,
            ws,
            outside,
            home,
        }
    }

    /// `bashc exec --json ARGS -- COMMAND` run from `dir` (the client's directory),
    /// in session `session`.
    fn exec_from(&self, dir: &Path, session: &str, args: &[&str], command: &str) -> Output {
        self.daemon
            .bashc_at(dir)
            .env("HOME", &self.home)
            .env("BASHD_SESSION", session)
            .args(["exec", "--json"])
            .args(args)
            .arg("--")
            .arg(command)
            .output()
            .expect("cannot run bashc")
    }
}

fn git_init(dir: &Path) {
    let out = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .output()
        .expect("cannot run git");
    assert!(out.status.success(), "{}", show(&out));
}

/// `n` empty files in `dir`, made as fast as the file system allows.
fn crowd(dir: &Path, n: usize) {
    for i in 0..n {
        std::fs::File::create(dir.join(format!("f{i}"))).unwrap();
    }
}

/// The kinds of a result's notices (`outside_roots`, `no_writable_root`, ...).
fn notice_kinds(result: &Value) -> Vec<String> {
    result["notices"]
        .as_array()
        .map(|notices| {
            notices
                .iter()
                .filter_map(|n| n.as_object()?.keys().next().cloned())
                .collect()
        })
        .unwrap_or_default()
}

/// Hole 1: with `floor = "workspace-write"`, a request that names `/` or `~` as its
/// workdir gets no root there: it runs read-only and is told why; a client in `$HOME`
/// has no root at all. The control: the same write in the project works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workdir_of_slash_or_home_runs_read_only_under_a_workspace_write_floor() {
    let roots = Roots::start(
        "[sandbox]\ndefault = \"workspace-write\"\nfloor = \"workspace-write\"\nnetwork = \"off\"\n",
    );
    let (ws, outside, home) = (&roots.ws, &roots.outside, &roots.home);
    let description = std::fs::read(ws.join(".git/description")).unwrap();

    // MCP, started in the project, asks for `/`.
    let mut command = mcp_command(&roots.daemon, ws);
    command.env("HOME", home).env("BASHD_NO_AUTOSTART", "1");
    let client = serve((), command).await;
    let slash = call(
        &client,
        "bash",
        json!({
            "command": format!(
                "echo x > {out}/from-slash; echo x >> {ws}/.git/description",
                out = outside.display(),
                ws = ws.display()
            ),
            "workdir": "/",
        }),
    )
    .await;
    let said = text(&slash);
    assert!(is_error(&slash), "{said}");
    assert!(!outside.join("from-slash").exists(), "{said}");
    assert_eq!(
        std::fs::read(ws.join(".git/description")).unwrap(),
        description
    );
    assert!(said.contains("sandbox: read-only"), "{said}");
    assert!(
        said.contains("its working directory / is outside this session's writable roots")
            && said.contains(&ws.display().to_string())
            && said.contains("workdir inside one of them"),
        "{said}"
    );
    // The control: the project itself is written.
    let inside = call(&client, "bash", json!({"command": "echo in > made-by-mcp"})).await;
    assert!(!is_error(&inside), "{}", text(&inside));
    assert!(ws.join("made-by-mcp").is_file());
    client.cancel().await.unwrap();

    // The CLI, from the project, asks for `~`.
    let write_home = "echo x >> .bashrc; echo x >> .gitconfig";
    let out = roots.exec_from(
        ws,
        "cli",
        &["--workdir", &home.display().to_string()],
        write_home,
    );
    let result = json(&out);
    assert_eq!(result["sandbox"]["profile"], "read-only", "{}", show(&out));
    assert!(
        notice_kinds(&result).contains(&"outside_roots".to_owned()),
        "{}",
        show(&out)
    );
    assert!(
        !home.join(".bashrc").exists() && !home.join(".gitconfig").exists(),
        "{}",
        show(&out)
    );
    // A client in `$HOME` has no root: its jobs write nothing, and are told why.
    let out = roots.exec_from(home, "cli", &[], write_home);
    let result = json(&out);
    assert_eq!(result["sandbox"]["profile"], "read-only", "{}", show(&out));
    assert!(
        notice_kinds(&result).contains(&"no_writable_root".to_owned()),
        "{}",
        show(&out)
    );
    assert!(
        result["notice"]
            .as_str()
            .unwrap_or_default()
            .contains("run bashc from inside the project's directory"),
        "{}",
        show(&out)
    );
    assert!(!home.join(".bashrc").exists(), "{}", show(&out));
    // The control: from the project, the project is written, and nothing is said.
    let out = roots.exec_from(ws, "cli", &[], "echo in > made-by-cli");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(notice_kinds(&json(&out)).is_empty(), "{}", show(&out));
    assert!(ws.join("made-by-cli").is_file());
}

/// Hole 7: a `..` in a workdir, and a symlink planted where it pointed, do not move
/// a nested job's root: the roots were resolved when the outer job was asked for.
#[test]
fn a_dotdot_in_a_workdir_widens_no_nested_jobs_root() {
    let roots = Roots::start("");
    let (ws, elsewhere) = (&roots.ws, roots.outside.join("elsewhere"));
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let bashc = bashc_path();
    let command = format!(
        "rmdir sub && ln -s {elsewhere} sub && echo planted; \
         {bashc} exec -- 'echo x > {elsewhere}/escaped'; echo \"nested: $?\"; \
         {bashc} exec -- 'echo x > {ws}/nested-ok'; echo \"control: $?\"",
        elsewhere = elsewhere.display(),
        ws = ws.display(),
    );
    let workdir = ws.join("sub/..").display().to_string();
    let out = roots.exec_from(
        ws,
        "i42",
        &["--workdir", &workdir, "--sandbox", "workspace-write"],
        &command,
    );
    let words = shown(&json(&out));
    assert!(words.contains("planted"), "{}", show(&out));
    assert!(words.contains("nested: 1"), "{words}");
    assert!(!elsewhere.join("escaped").exists(), "{words}");
    // The control: the nested job writes its roots.
    assert!(words.contains("control: 0"), "{words}");
    assert!(ws.join("nested-ok").is_file(), "{words}");
}

/// Hole 8: a job reaches no job of its session that writes outside its own roots
/// (send, kill, output, wait); a sibling in the same workspace reaches it.
#[test]
fn a_job_drives_no_sibling_that_writes_another_workspace() {
    let roots = Roots::start("");
    let base = roots.outside.clone();
    let (ws_a, ws_b) = (base.join("ws-a"), base.join("ws-b"));
    for dir in [&ws_a, &ws_b] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let ww = ["--sandbox", "workspace-write"];
    // The victim: a shell that writes ws-b and reads its stdin.
    let started = roots.exec_from(
        &ws_b,
        "i42",
        &[&ww[..], &["--mode", "background", "--stdin", "pipe"]].concat(),
        "bash -s",
    );
    let victim = json(&started)["job"].as_str().unwrap().to_owned();
    let bashc = bashc_path();
    let b = ws_b.display();
    let attack = format!(
        "{bashc} send {victim} --newline 'echo x > {b}/pwned'; echo \"send: $?\"; \
         {bashc} output {victim}; echo \"output: $?\"; \
         {bashc} wait {victim} --timeout 1; echo \"wait: $?\"; \
         {bashc} kill {victim}; echo \"kill: $?\""
    );
    let out = roots.exec_from(&ws_a, "i42", &ww, &attack);
    let words = shown(&json(&out));
    for verb in ["send", "output", "wait", "kill"] {
        assert!(words.contains(&format!("{verb}: 255")), "{verb}: {words}");
    }
    assert!(
        words.contains("writes where this job") && words.contains("within its own roots"),
        "{words}"
    );
    // The control: a job in the victim's own workspace drives it; the victim was
    // alive and would have written what it was sent.
    let control =
        format!("{bashc} send {victim} --newline 'echo x > {b}/from-sibling'; echo \"send: $?\"");
    let out = roots.exec_from(&ws_b, "i42", &ww, &control);
    assert!(shown(&json(&out)).contains("send: 0"), "{}", show(&out));
    assert!(
        wait_until(Duration::from_secs(10), || ws_b
            .join("from-sibling")
            .is_file()),
        "the sibling's send never ran"
    );
    assert!(!ws_b.join("pwned").exists());
    let _ = roots.daemon.run_bashc(&["session", "close", "i42"]);
}

/// Hole 10: from inside a job, a workdir that is a hidden file, a hidden directory or
/// a name that does not exist get the same answer; from outside, DESIGN §8's two
/// messages stay. The control: a directory that is not hidden runs the job.
#[test]
fn a_nested_workdir_does_not_tell_a_hidden_file_from_a_missing_name() {
    let roots = Roots::start("");
    let (ssh, ws) = (roots.home.join(".ssh"), &roots.ws);
    std::fs::write(ssh.join("id_test"), "fake key\n").unwrap();
    std::fs::create_dir(ssh.join("keys")).unwrap();
    let bashc = bashc_path();
    let mut command = String::new();
    for name in ["id_test", "keys", "nope"] {
        command.push_str(&format!(
            "{bashc} exec --workdir {ssh}/{name} -- true 2>&1 | sed 's|{ssh}/{name}|NAME|'; ",
            ssh = ssh.display()
        ));
    }
    command.push_str(&format!(
        "{bashc} exec --workdir {} -- echo control-ran",
        roots.outside.display()
    ));
    let out = roots.exec_from(ws, "i42", &["--sandbox", "read-only"], &command);
    let words = shown(&json(&out));
    let lines: Vec<&str> = words.lines().filter(|l| l.contains("NAME")).collect();
    assert_eq!(lines.len(), 3, "{words}");
    assert!(lines.iter().all(|l| *l == lines[0]), "{words}");
    assert!(words.contains("control-ran"), "{words}");
    // From outside, the contract's two messages.
    let file = roots.exec_from(
        ws,
        "i42",
        &["--workdir", &format!("{}/id_test", ssh.display())],
        "true",
    );
    assert!(
        stderr(&file).contains("Working directory is not a directory"),
        "{}",
        show(&file)
    );
    let missing = roots.exec_from(
        ws,
        "i42",
        &["--workdir", &format!("{}/nope", ssh.display())],
        "true",
    );
    assert!(
        stderr(&missing).contains("Working directory does not exist"),
        "{}",
        show(&missing)
    );
}

/// A directory on a tmpfs when there is one (`/dev/shm`), where a directory lists
/// its newest entries first: a `.git` made before the crowd is read last.
fn crowded_repository() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::Builder::new()
            .prefix("bashd-i42-")
            .tempdir_in(shm)
    } else {
        tempfile::Builder::new().prefix("bashd-i42-").tempdir()
    }
    .unwrap();
    git_init(dir.path());
    crowd(dir.path(), CROWD);
    dir
}

/// Hole 2: a workspace with more entries than the `.git` walk reads keeps its own
/// `.git` read-only for a nested job, whatever workdir that job names. The control:
/// the nested job writes the workspace.
#[test]
fn a_crowded_workspace_keeps_its_own_git_read_only_for_nested_jobs() {
    let other_dir = tempfile::tempdir().unwrap();
    let other = other_dir.path().canonicalize().unwrap();
    let roots = Roots::start(&format!(
        "[sandbox]\nwritable = [\"{}\"]\n",
        other.display()
    ));
    let repo = crowded_repository();
    let ws = repo.path().canonicalize().unwrap();
    let config = std::fs::read(ws.join(".git/config")).unwrap();
    let bashc = bashc_path();
    let w = ws.display();
    let command = format!(
        "{bashc} exec --workdir /tmp -- 'echo x >> {w}/.git/config'; echo \"tmp: $?\"; \
         {bashc} exec --workdir {o} -- 'echo x >> {w}/.git/config'; echo \"other: $?\"; \
         {bashc} exec --workdir {o} -- 'echo x > {w}/nested-ok'; echo \"control: $?\"",
        o = other.display()
    );
    let out = roots.exec_from(
        &ws,
        "i42",
        &["--sandbox", "workspace-write", "--net", "off"],
        &command,
    );
    let words = shown(&json(&out));
    assert_eq!(
        std::fs::read(ws.join(".git/config")).unwrap(),
        config,
        "{words}"
    );
    assert!(
        words.contains("tmp: 1") && words.contains("other: 1"),
        "{words}"
    );
    assert!(words.contains("control: 0"), "{words}");
    assert!(ws.join("nested-ok").is_file(), "{words}");
}

/// Hole 3: a `[sandbox] writable` repository's `.git` stays read-only beside a
/// workspace with more entries than the `.git` walk reads. The control: that
/// repository's work tree is written.
#[test]
fn a_writable_repositorys_git_stays_read_only_beside_a_crowded_workspace() {
    let repo_dir = tempfile::tempdir().unwrap();
    let repo = repo_dir.path().canonicalize().unwrap();
    git_init(&repo);
    let roots = Roots::start(&format!("[sandbox]\nwritable = [\"{}\"]\n", repo.display()));
    crowd(&roots.ws, CROWD);
    let config = std::fs::read(repo.join(".git/config")).unwrap();
    let r = repo.display();
    let out = roots.exec_from(
        &roots.ws,
        "i42",
        &["--sandbox", "workspace-write"],
        &format!(
            "echo x >> {r}/.git/config; echo \"git: $?\"; echo x > {r}/ok; echo \"control: $?\""
        ),
    );
    let words = shown(&json(&out));
    assert_eq!(
        std::fs::read(repo.join(".git/config")).unwrap(),
        config,
        "{words}"
    );
    assert!(words.contains("git: 1"), "{words}");
    assert!(
        words.contains("control: 0") && repo.join("ok").is_file(),
        "{words}"
    );
}

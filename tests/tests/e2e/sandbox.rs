//! The sandbox (issue 23): a job under `workspace-write` or `read-only` writes only
//! where its profile says, reads no `deny_read` path, and with the network off reaches
//! no listener of the host, however it forks, detaches or unshares; a client cannot ask
//! for less than the floor. Each test makes its own workspace, outside dir and fake
//! secrets (a home of its own, the daemon's `HOME`) under its daemon's scratch dir, and
//! never touches the real home.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use bashd_tests::{Daemon, bin_path, wait_until};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::mcp::{mcp_command, serve};
use crate::{json, show};

const SECRET_KEY: &str = "i23-fake-private-key-do-not-show";
const SECRET_NETRC: &str = "i23-fake-netrc-password";
const OUTSIDE_TEXT: &str = "outside-i23, untouched\n";

/// A daemon whose `HOME` is a fake one, and the directories a job is tried against.
struct Sandbox {
    daemon: Daemon,
    /// The job's workdir: a git repository.
    ws: PathBuf,
    /// Beside the workspace, writable by the user, not by a sandboxed job.
    outside: PathBuf,
    /// The daemon's `HOME`: `.ssh/id_rsa` and `.netrc` hold fake secrets, which the
    /// default `deny_read` hides.
    home: PathBuf,
}

impl Sandbox {
    fn start(config: &str) -> Sandbox {
        let mut daemon = Daemon::unstarted();
        let root = daemon.scratch().join("i23");
        let (ws, outside, home) = fresh_tree(&root);
        daemon.write_config(config);
        let mut command = daemon.bashd_command();
        command.env("HOME", &home);
        daemon.start_with(command);
        Sandbox {
            daemon,
            ws,
            outside,
            home,
        }
    }

    /// `bashc exec --json ARGS -- COMMAND` in the workspace, as a client whose `HOME`
    /// is the fake one.
    fn exec(&self, args: &[&str], command: &str) -> Output {
        self.exec_in(&self.ws, args, command)
    }

    /// Run from `workdir`, which is then the job's writable root.
    fn exec_in(&self, workdir: &Path, args: &[&str], command: &str) -> Output {
        self.daemon
            .bashc_at(workdir)
            .env("HOME", &self.home)
            .arg("exec")
            .arg("--json")
            .arg("--workdir")
            .arg(workdir)
            .args(args)
            .arg("--")
            .arg(command)
            .output()
            .expect("cannot run bashc")
    }
}

/// `ws` (a git repository with one file), `outside` (one file) and `home` (fake
/// secrets) under `root`.
fn fresh_tree(root: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let (ws, outside, home) = (root.join("ws"), root.join("outside"), root.join("home"));
    for dir in [&ws, &outside, &home.join(".ssh")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .output()
        .expect("cannot run git");
    assert!(git.status.success(), "{}", show(&git));
    std::fs::write(ws.join("seed"), "seed\n").unwrap();
    std::fs::write(outside.join("keep"), OUTSIDE_TEXT).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), SECRET_KEY).unwrap();
    std::fs::write(home.join(".netrc"), SECRET_NETRC).unwrap();
    (ws, outside, home)
}

/// Every entry below `dir` (not following symlinks): its kind, mode, size, mtime and
/// contents or target, by relative path.
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    let mut entries = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        let Ok(listing) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in listing.flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let what = if meta.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(&path).unwrap())
            } else if meta.is_dir() {
                stack.push(path.clone());
                "dir".to_owned()
            } else {
                format!("file {:?}", std::fs::read(&path).unwrap_or_default())
            };
            let name = path.strip_prefix(dir).unwrap().display().to_string();
            entries.insert(
                name,
                format!(
                    "{what} mode {:o} size {} mtime {}.{}",
                    meta.mode(),
                    meta.len(),
                    meta.mtime(),
                    meta.mtime_nsec()
                ),
            );
        }
    }
    entries
}

/// The result's streams, as shown.
fn streams(result: &Value) -> String {
    format!(
        "{}{}",
        result["stdout"]["text"].as_str().unwrap_or(""),
        result["stderr"]["text"].as_str().unwrap_or("")
    )
}

fn wait_for_file(path: &Path) -> String {
    assert!(
        wait_until(Duration::from_secs(10), || path.is_file()),
        "{} never appeared",
        path.display()
    );
    let mut text = String::new();
    wait_until(Duration::from_secs(5), || {
        text = std::fs::read_to_string(path).unwrap_or_default();
        text.ends_with('\n')
    });
    text
}

/// Issue 23.
#[test]
fn workspace_write_keeps_writes_in_the_workspace_and_secrets_hidden() {
    let sandbox = Sandbox::start("");
    let (ws, out, home) = (&sandbox.ws, &sandbox.outside, &sandbox.home);
    let git_config = std::fs::read(ws.join(".git/config")).unwrap();
    let outside_before = snapshot(out);
    let command = format!(
        "echo inside > made.txt; \
         touch {out}/x; \
         echo x >> .git/config; \
         cat {home}/.ssh/id_rsa; cat {home}/.netrc; cat /proc/self/root{home}/.ssh/id_rsa; \
         grep -rs i23-fake {home}; \
         setsid -f sh -c 'echo s > {out}/setsid; echo $? > {ws}/setsid.done'; \
         sh -c '(sh -c \"echo d > {out}/double; echo \\$? > {ws}/double.done\" &) &'; \
         unshare -r sh -c 'echo u > {out}/unshare'; echo $? > {ws}/unshare.done; \
         exit 3",
        out = out.display(),
        home = home.display(),
        ws = ws.display(),
    );
    let output = sandbox.exec(&["--sandbox", "workspace-write"], &command);
    let result = json(&output);
    assert_eq!(output.status.code(), Some(3), "{}", show(&output));
    assert_eq!(
        result["sandbox"],
        json!({"profile": "workspace-write", "network": "on"})
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("made.txt")).unwrap(),
        "inside\n"
    );
    for escape in ["setsid", "double", "unshare"] {
        let status = wait_for_file(&ws.join(format!("{escape}.done")));
        assert_ne!(status.trim(), "0", "the {escape} escape wrote outside");
    }
    assert_eq!(snapshot(out), outside_before, "{}", show(&output));
    assert!(!out.join("x").exists());
    assert_eq!(std::fs::read(ws.join(".git/config")).unwrap(), git_config);
    let everything = String::from_utf8_lossy(&output.stdout);
    assert!(
        !everything.contains(SECRET_KEY) && !everything.contains(SECRET_NETRC),
        "a hidden secret shows in the result:\n{}",
        show(&output)
    );
    assert!(
        streams(&result).contains("Permission denied"),
        "{}",
        show(&output)
    );
    // The failure reads like a refusal: the result says so and how to ask for more.
    assert!(
        result["notices"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["sandbox_denied"]["denied"] == "files"),
        "{}",
        show(&output)
    );
    assert!(
        result["notice"].as_str().unwrap().contains("--sandbox off"),
        "{}",
        show(&output)
    );

    // The text result names the profile, so a refusal is not taken for a permission.
    let text = sandbox
        .daemon
        .bashc_at(ws)
        .env("HOME", &sandbox.home)
        .args(["exec", "--sandbox", "workspace-write", "--workdir"])
        .arg(ws)
        .arg("--")
        .arg(format!("touch {}/y", out.display()))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("sandbox: workspace-write, network on"),
        "{}",
        show(&text)
    );
    assert!(stdout.contains("not a file permission"), "{}", show(&text));
}

/// Issue 23.
#[test]
fn read_only_writes_nothing_but_its_tmpdir() {
    let sandbox = Sandbox::start("");
    let before = snapshot(&sandbox.ws);
    let output = sandbox.exec(
        &["--sandbox", "read-only"],
        "echo x > in-workspace; echo t > \"$TMPDIR/i23-temp\" && cat \"$TMPDIR/i23-temp\" && echo \"$TMPDIR\"",
    );
    let result = json(&output);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let stdout = result["stdout"]["text"].as_str().unwrap();
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("t"), "{}", show(&output));
    let tmpdir = lines.next().expect("the job printed its TMPDIR");
    assert!(
        tmpdir.starts_with(&sandbox.daemon.runtime_dir().display().to_string()),
        "TMPDIR {tmpdir} is not the session's temp dir"
    );
    assert!(
        streams(&result).contains("Read-only file system"),
        "{}",
        show(&output)
    );
    assert_eq!(snapshot(&sandbox.ws), before);
    assert_eq!(
        result["sandbox"],
        json!({"profile": "read-only", "network": "on"})
    );
}

/// Issue 23.
#[test]
fn network_off_reaches_no_listener_of_the_host() {
    let sandbox = Sandbox::start("");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected-i23");

    let off = sandbox.exec(&["--net", "off"], &connect);
    let result = json(&off);
    assert_ne!(off.status.code(), Some(0), "{}", show(&off));
    assert!(
        !streams(&result).contains("connected-i23"),
        "{}",
        show(&off)
    );
    assert_eq!(
        result["sandbox"],
        json!({"profile": "off", "network": "off"})
    );
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "the listener saw a connection from a job with the network off"
    );

    let on = sandbox.exec(&["--net", "on"], &connect);
    assert_eq!(on.status.code(), Some(0), "{}", show(&on));
    assert!(streams(&json(&on)).contains("connected-i23"));
    assert!(json(&on)["sandbox"].is_null());
    let mut accepted = false;
    wait_until(Duration::from_secs(5), || {
        accepted = listener.accept().is_ok();
        accepted
    });
    assert!(accepted, "the job with the network on never connected");

    // A server in a job with the network off answers its session's jobs and the host's
    // loopback, where bashd publishes it: the listing says so (issue 43).
    let server = sandbox.exec(&["--net", "off", "--mode", "background"], "sleep 23001");
    assert_eq!(server.status.code(), Some(0), "{}", show(&server));
    let job = json(&server)["job"].as_str().unwrap().to_owned();
    let jobs = sandbox.daemon.run_bashc(&["jobs"]);
    let listing = String::from_utf8_lossy(&jobs.stdout);
    assert!(
        listing.contains(
            "network off: its ports answer its session's jobs, and on the host's 127.0.0.1"
        ),
        "{}",
        show(&jobs)
    );
    let killed = sandbox.daemon.run_bashc(&["kill", &job]);
    assert!(
        String::from_utf8_lossy(&killed.stdout).contains("killed on request"),
        "{}",
        show(&killed)
    );
}

/// Issue 23.
#[test]
fn the_floor_refuses_a_looser_profile_and_runs_nothing() {
    // Unanswered, the ask (issue 44) expires: refused.
    let sandbox = Sandbox::start(
        "[sandbox]\ndefault = \"workspace-write\"\nfloor = \"workspace-write\"\nask_secs = 1\n",
    );
    let ran = sandbox.ws.join("ran");
    let output = sandbox.exec(&["--sandbox", "off"], &format!("touch {}", ran.display()));
    assert_ne!(output.status.code(), Some(0), "{}", show(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("floor = \"workspace-write\"") && stderr.contains("[sandbox]"),
        "{}",
        show(&output)
    );
    assert!(!ran.exists(), "a refused job ran");

    // Without a word, the default applies; tighter is allowed.
    let default = sandbox.exec(&[], "true");
    assert_eq!(
        json(&default)["sandbox"],
        json!({"profile": "workspace-write", "network": "on"})
    );
    let tighter = sandbox.exec(&["--sandbox", "read-only", "--net", "off"], "true");
    assert_eq!(tighter.status.code(), Some(0), "{}", show(&tighter));

    let status = sandbox.daemon.run_bashc(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        // The network is unset, so each front end's own (issue 44): the command
        // line's is on.
        text.contains(
            "  bashc (command line): workspace-write, network on by default; floor workspace-write"
        ) && text.contains("landlock: available"),
        "{}",
        show(&status)
    );
}

/// Issue 23.
#[test]
fn the_scan_path_refuses_a_sandboxed_job() {
    let sandbox = Sandbox::start("[containment]\nmechanism = \"scan\"\n");
    let ran = sandbox.ws.join("ran");
    let output = sandbox.exec(
        &["--sandbox", "workspace-write"],
        &format!("touch {}", ran.display()),
    );
    assert_ne!(output.status.code(), Some(0), "{}", show(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("bashd-resident"),
        "{}",
        show(&output)
    );
    assert!(
        !ran.exists(),
        "a job the daemon cannot confine ran unconfined"
    );
}

/// Issue 23.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_bash_with_a_sandbox_names_it_and_is_held_to_it() {
    let sandbox = Sandbox::start("");
    let mut command = mcp_command(&sandbox.daemon, &sandbox.ws);
    command
        .env("HOME", &sandbox.home)
        .env("BASHD_NO_AUTOSTART", "1");
    let client = serve((), command).await;
    let outside = sandbox.outside.join("from-mcp");
    let args = json!({
        "command": format!("echo in > mcp.txt; touch {}", outside.display()),
        "sandbox": "workspace-write",
        "net": "off",
    });
    let Value::Object(args) = args else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new("bash".to_owned()).with_arguments(args))
        .await
        .expect("bash failed as a protocol error");
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    assert_eq!(result.is_error, Some(true), "{text}");
    assert!(
        text.contains("sandbox: workspace-write, network off"),
        "{text}"
    );
    assert!(text.contains("bash(sandbox=\"off\")"), "{text}");
    // One result, its text (issue 15): no structured copy of it.
    assert!(result.structured_content.is_none(), "{result:?}");
    assert!(sandbox.ws.join("mcp.txt").is_file());
    assert!(!outside.exists());
    client.cancel().await.unwrap();
}

/// Write attempts that reach outside the workspace by every road a path offers: `..`,
/// symlinks planted in the workspace, hard links, `/proc/self/root` and
/// `/proc/self/cwd`, renames in and out, metadata changes, and processes that leave the
/// job's session or environment. Each path form is crossed with each operation.
fn escape_attempts(ws: &Path, out: &Path) -> (String, usize) {
    let (ws, out) = (ws.display(), out.display());
    // Each names the outside dir another way.
    let forms = [
        format!("{out}"),
        format!("{ws}/../outside"),
        format!("/proc/self/root{out}"),
        "/proc/self/cwd/../outside".to_owned(),
        format!("{ws}/dirlink"),
        "deep/er/../../../outside".to_owned(),
    ];
    let mut script = format!(
        "ln -s {out} {ws}/dirlink; mkdir -p {ws}/deep/er; ln -s {out}/keep {ws}/keeplink; \n"
    );
    let mut n = 0;
    let mut attempt = |script: &mut String, line: String| {
        n += 1;
        script.push_str(&format!("( {line} ) >/dev/null 2>&1\n"));
    };
    for (i, form) in forms.iter().enumerate() {
        let keep = format!("{form}/keep");
        let new = |what: &str| format!("{form}/{what}-{i}");
        attempt(&mut script, format!("echo x > {}", new("created")));
        attempt(&mut script, format!("echo x >> {keep}"));
        attempt(&mut script, format!("truncate -s 0 {keep}"));
        attempt(&mut script, format!("mkdir {}", new("dir")));
        attempt(&mut script, format!("ln -s /tmp {}", new("symlink")));
        attempt(&mut script, format!("ln {ws}/seed {}", new("hardlink")));
        attempt(
            &mut script,
            format!(
                "cp {ws}/seed {ws}/seed-{i} && mv {ws}/seed-{i} {}",
                new("moved-out")
            ),
        );
        attempt(&mut script, format!("chmod 000 {keep}"));
        attempt(&mut script, format!("touch -d 2001-01-01 {keep}"));
        attempt(&mut script, format!("rm -f {keep}"));
    }
    for line in [
        format!("mv {out}/keep {ws}/moved-in"),
        format!("ln {out}/keep {ws}/hard && echo x >> {ws}/hard"),
        format!("echo x >> {ws}/keeplink"),
        format!("python3 -c \"open('{out}/py', 'w').write('x')\""),
        format!("dd if=/dev/zero of={out}/keep bs=1 count=1 conv=notrunc"),
        format!("find {out} -name keep -delete"),
        format!("env -i /bin/sh -c 'echo x > {out}/env-i'"),
        format!("unshare -r sh -c 'echo x > {out}/unshare'"),
        format!("ln -s {ws}/seed {out}/../planted"),
        format!("mv {out} {out}-moved"),
    ] {
        attempt(&mut script, line);
    }
    // Processes that leave the job's session: each says when it has tried.
    script.push_str(&format!(
        "setsid -f sh -c 'echo x > {out}/setsid; echo done > {ws}/setsid.done'\n\
         nohup sh -c 'echo x > {out}/nohup; echo done > {ws}/nohup.done' >/dev/null 2>&1 &\n"
    ));
    (script, n + 2)
}

/// Issue 23.
#[test]
fn no_write_attempt_reaches_outside_the_workspace() {
    let sandbox = Sandbox::start("");
    let root = sandbox.ws.parent().unwrap().to_owned();
    let before = snapshot(&root);

    // The control: unconfined, the same attempts change the outside dir many ways, so
    // the test below would see an escape.
    let control_root = sandbox.daemon.scratch().join("i23-control");
    let (control_ws, control_out, _) = fresh_tree(&control_root);
    let control_before = snapshot(&control_root);
    let (script, attempts) = escape_attempts(&control_ws, &control_out);
    assert!(attempts >= 60, "only {attempts} attempts");
    let control = sandbox.exec_in(&control_ws, &["--sandbox", "off"], &script);
    assert_eq!(control.status.code(), Some(0), "{}", show(&control));
    wait_for_file(&control_ws.join("setsid.done"));
    wait_for_file(&control_ws.join("nohup.done"));
    let control_after = snapshot(&control_root);
    let changed = control_after
        .iter()
        .filter(|(name, _)| !name.starts_with("ws/"))
        .filter(|(name, what)| control_before.get(*name) != Some(*what))
        .count();
    assert!(
        changed >= 20,
        "unconfined, only {changed} entries changed outside: {control_after:#?}"
    );

    let (script, _) = escape_attempts(&sandbox.ws, &sandbox.outside);
    let output = sandbox.exec(&["--sandbox", "workspace-write"], &script);
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    wait_for_file(&sandbox.ws.join("setsid.done"));
    wait_for_file(&sandbox.ws.join("nohup.done"));
    let after = snapshot(&root);
    let escaped: Vec<String> = after
        .iter()
        .filter(|(name, _)| !name.starts_with("ws/") && name.as_str() != "ws")
        .filter(|(name, what)| before.get(*name) != Some(*what))
        .map(|(name, what)| format!("{name}: {what}"))
        .chain(
            before
                .keys()
                .filter(|name| !name.starts_with("ws/") && !after.contains_key(*name))
                .map(|name| format!("{name}: removed")),
        )
        .collect();
    assert!(
        escaped.is_empty(),
        "writes reached outside the workspace: {escaped:#?}"
    );
}

/// Issue 23.
#[test]
fn a_job_started_from_inside_a_sandbox_is_no_looser() {
    let sandbox = Sandbox::start("");
    let bashc = bin_path("bashc");
    let (loose, inherited) = (
        sandbox.outside.join("nested-off"),
        sandbox.outside.join("nested-default"),
    );
    let command = format!(
        "{bashc} exec --sandbox off -- touch {loose}; echo \"loose: $?\"; \
         {bashc} exec --json -- touch {inherited}; echo \"inherited: $?\"",
        bashc = bashc.display(),
        loose = loose.display(),
        inherited = inherited.display(),
    );
    let output = sandbox.exec(&["--sandbox", "workspace-write"], &command);
    let result = json(&output);
    let shown = streams(&result);
    assert!(
        shown.contains("this job (j1) runs under workspace-write with the network on; a job it starts can be as tight, not looser")
            && shown.contains("loose: 255"),
        "{}",
        show(&output)
    );
    assert!(
        shown.contains("\"profile\": \"workspace-write\"")
            || shown.contains("\"profile\":\"workspace-write\""),
        "the inner job did not inherit the sandbox:\n{}",
        show(&output)
    );
    assert!(!loose.exists() && !inherited.exists(), "{}", show(&output));
}

/// The user every other test is not: these tests run as root on the development
/// machines and in CI, and the sandbox must hold for the unprivileged user it is for.
const NOBODY: u32 = 65534;

/// Issue 23.
#[test]
fn an_unprivileged_daemon_confines_its_jobs_too() {
    use std::os::unix::process::CommandExt;
    if !rustix::process::getuid().is_root() {
        eprintln!("skipped: the other tests of the sandbox run unprivileged already");
        return;
    }
    let mut daemon = Daemon::unstarted();
    let root = daemon.scratch().join("i23");
    let (ws, outside, home) = fresh_tree(&root);
    daemon.write_config("");
    daemon.make_runtime_dir();
    // The build may sit where the other user cannot enter (issue 33: a clone in a
    // `mktemp -d` directory): it runs copies, which go with the scratch dir.
    let bin = bashd_tests::copy_bins(&daemon.scratch().join("bin"));
    let chown = Command::new("chown")
        .args(["-R", &format!("{NOBODY}:{NOBODY}")])
        .arg(daemon.scratch())
        .output()
        .unwrap();
    assert!(chown.status.success(), "{}", show(&chown));
    let mut command = daemon.bashd_command_from(&bin.join("bashd"));
    command
        .env("HOME", &home)
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY);
    daemon.start_with(command);

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        "id -u; echo inside > made.txt; touch {out}/x; chmod 000 {out}/keep; cat {home}/.ssh/id_rsa; \
         exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected-i23",
        out = outside.display(),
        home = home.display(),
    );
    let before = snapshot(&outside);
    let output = daemon
        .bashc_from(&bin.join("bashc"))
        // The workspace is where its client runs: its writable root.
        .current_dir(&ws)
        .uid(NOBODY)
        .gid(NOBODY)
        .env("HOME", &home)
        .args([
            "exec",
            "--json",
            "--sandbox",
            "workspace-write",
            "--net",
            "off",
        ])
        .arg("--workdir")
        .arg(&ws)
        .arg("--")
        .arg(&script)
        .output()
        .unwrap();
    let result = json(&output);
    let shown = streams(&result);
    assert!(
        shown.starts_with(&format!("{NOBODY}\n")),
        "{}",
        show(&output)
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("made.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(snapshot(&outside), before, "{}", show(&output));
    assert!(
        !shown.contains(SECRET_KEY) && !shown.contains("connected-i23"),
        "{}",
        show(&output)
    );
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
}

/// Issue 14's containment holds inside the sandbox's namespaces: processes that leave
/// the job's session and environment keep it running and die with it.
#[test]
fn a_sandboxed_job_is_still_contained_and_killed_whole() {
    use bashd_tests::{pids_running, wait_for_running};
    let sandbox = Sandbox::start("");
    let sleeps = ["sleep 23002", "sleep 23003"];
    let output = sandbox.exec(
        &[
            "--sandbox",
            "workspace-write",
            "--net",
            "off",
            "--mode",
            "background",
        ],
        "env -i setsid sleep 23002 & (env -i setsid -f sleep 23003); wait",
    );
    assert_eq!(output.status.code(), Some(0), "{}", show(&output));
    let job = json(&output)["job"].as_str().unwrap().to_owned();
    for sleep in sleeps {
        wait_for_running(sleep);
    }
    let killed = sandbox.daemon.run_bashc(&["kill", "--json", &job]);
    assert_eq!(json(&killed)["state"], "killed", "{}", show(&killed));
    for sleep in sleeps {
        assert!(
            wait_until(Duration::from_secs(10), || pids_running(sleep).is_empty()),
            "`{sleep}` outlived its sandboxed job"
        );
    }
}

/// The namespaces of a confined job are its own, whether the job's process made them
/// or took those the zygote made ahead (the first job of a kind makes its own, the
/// next ones take a kit): no two jobs share a user, IPC or mount namespace, two
/// running at once included; their network namespace is their session's, one for all
/// of them (issue 43), and not the host's; its loopback is up; each starts in its
/// workdir. The control: an unsandboxed job is in the host's namespaces, read the
/// same way.
/// (Issue 30.)
#[test]
fn namespaces_made_ahead_are_each_jobs_own() {
    let sandbox = Sandbox::start("");
    let ws = &sandbox.ws;
    let report = "readlink /proc/self/ns/user /proc/self/ns/ipc /proc/self/ns/mnt /proc/self/ns/net; pwd; exec 3<>/dev/tcp/127.0.0.1/1";
    let namespaces = |text: &str| -> Vec<String> {
        let lines: Vec<String> = text
            .lines()
            .filter(|line| line.contains(":["))
            .map(str::to_owned)
            .collect();
        assert_eq!(lines.len(), 4, "{text}");
        lines
    };
    let host: Vec<String> = ["user", "ipc", "mnt", "net"]
        .iter()
        .map(|ns| {
            std::fs::read_link(format!("/proc/self/ns/{ns}"))
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let open = sandbox.exec(&["--sandbox", "off", "--net", "on"], report);
    assert_eq!(namespaces(&streams(&json(&open))), host, "{}", show(&open));

    // They run at once, so that no namespace of one has been freed (and its number
    // reused) when another reads its own.
    let mut seen = Vec::new();
    let mut jobs = Vec::new();
    for i in 0..4 {
        let held = ws.join(format!("held-i30-{i}"));
        let background = sandbox.exec(
            &[
                "--sandbox",
                "workspace-write",
                "--net",
                "off",
                "--mode",
                "background",
            ],
            &format!("({report}) > {} 2>&1; sleep 30", held.display()),
        );
        assert_eq!(background.status.code(), Some(0), "{}", show(&background));
        jobs.push(json(&background)["job"].as_str().unwrap().to_owned());
        // The last line is bash's word on the connection.
        let mut text = String::new();
        wait_until(Duration::from_secs(10), || {
            text = std::fs::read_to_string(&held).unwrap_or_default();
            text.contains("127.0.0.1/1")
        });
        assert!(
            text.contains(&format!("{}\n", ws.display())),
            "not in its workdir:\n{text}"
        );
        // Refused, not unreachable: the job's own loopback is up.
        assert!(text.contains("Connection refused"), "{text}");
        seen.push(namespaces(&text));
    }
    let run = sandbox.exec(&["--sandbox", "workspace-write", "--net", "off"], report);
    seen.push(namespaces(&streams(&json(&run))));
    for (i, one) in seen.iter().enumerate() {
        for (ns, host_ns) in one.iter().zip(&host) {
            assert_ne!(ns, host_ns, "a job is in the host's namespace: {seen:?}");
        }
        for other in &seen[i + 1..] {
            // The first three: user, IPC, mount; the last, the network, is shared.
            for (a, b) in one.iter().zip(other).take(3) {
                assert_ne!(a, b, "two jobs share a namespace: {seen:?}");
            }
            assert_eq!(
                one[3], other[3],
                "the session's jobs have two networks: {seen:?}"
            );
        }
    }
    for job in jobs {
        let killed = sandbox.daemon.run_bashc(&["kill", &job]);
        assert!(
            String::from_utf8_lossy(&killed.stdout).contains("killed on request"),
            "{}",
            show(&killed)
        );
    }
}

//! The doors around the sandbox (issue 30, points 2, 6, 7, 8 and 9): a sandboxed job
//! cannot kill its resident nor leave a process behind, reaches no unix socket of the
//! host, no other terminal, no IPC object of the host and no `.git` beneath its
//! writable roots. Each test has its positive control beside it: the same action works
//! where it is allowed (an unsandboxed job, the job's own files), so none passes
//! because its setup broke.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use bashd_tests::{Daemon, pids_running, wait_for_running, wait_until};

use crate::contain::TestCgroup;
use crate::{json, show};

/// A daemon and a workspace (a git repository) to run jobs in.
struct Doors {
    daemon: Daemon,
    ws: PathBuf,
}

impl Doors {
    fn start(config: &str) -> Doors {
        let daemon = Daemon::start_with_config(config);
        let ws = daemon.scratch().join("i30-ws");
        std::fs::create_dir_all(&ws).unwrap();
        git(&ws, &["init", "-q"]);
        Doors { daemon, ws }
    }

    /// `bashc exec --json --session S ARGS -- COMMAND` in the workspace, run from
    /// there (its writable root).
    fn exec(&self, session: &str, args: &[&str], command: &str) -> Output {
        self.daemon
            .bashc_at(&self.ws)
            .args(["exec", "--json", "--session", session, "--workdir"])
            .arg(&self.ws)
            .args(args)
            .arg("--")
            .arg(command)
            .output()
            .expect("cannot run bashc")
    }

    /// The job's stdout and stderr, as shown, of a job run in the foreground.
    fn run(&self, args: &[&str], command: &str) -> String {
        let output = self.exec("i30", args, command);
        let result = json(&output);
        format!(
            "{}{}",
            result["stdout"]["text"].as_str().unwrap_or(""),
            result["stderr"]["text"].as_str().unwrap_or("")
        )
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("cannot run git");
    assert!(out.status.success(), "git {args:?}: {}", show(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The sandboxes every door must be closed in.
const SANDBOXED: &[&[&str]] = &[
    &["--sandbox", "read-only"],
    &["--sandbox", "workspace-write"],
    &["--sandbox", "workspace-write", "--net", "off"],
    &["--sandbox", "off", "--net", "off"],
];

/// Point 2: the job's resident is out of the job's reach, and a process that escaped
/// a resident that died (the user's own job may kill its resident) ends with its job.
fn resident_out_of_reach(config: &str, tag: &str) {
    let doors = Doors::start(config);
    for (n, (args, killable)) in [
        (&["--sandbox", "workspace-write", "--net", "off"][..], false),
        (&["--sandbox", "workspace-write"][..], false),
        (&["--sandbox", "off", "--net", "off"][..], false),
        // The control: an unsandboxed job may kill its resident, as the user may.
        (&["--sandbox", "off"][..], true),
    ]
    .into_iter()
    .enumerate()
    {
        let sleep = format!("sleep 30{tag}{n}");
        let report = doors.ws.join(format!("kill-{n}"));
        let session = format!("i30-{n}");
        let command = format!(
            "kill -9 $PPID; echo \"kill: $?\" > {report}; setsid env -i {sleep} & wait",
            report = report.display()
        );
        let mut job_args = args.to_vec();
        job_args.extend(["--mode", "background"]);
        let started = doors.exec(&session, &job_args, &command);
        assert_eq!(started.status.code(), Some(0), "{}", show(&started));
        wait_for_running(&sleep);
        assert!(
            wait_until(Duration::from_secs(10), || {
                std::fs::read_to_string(&report).is_ok_and(|t| t.ends_with('\n'))
            }),
            "{args:?}: the job never said how its kill went"
        );
        let said = std::fs::read_to_string(&report).unwrap();
        let expected = if killable { "kill: 0\n" } else { "kill: 1\n" };
        assert_eq!(said, expected, "{args:?}: kill -9 $PPID");
        let closed = doors.daemon.run_bashc(&["session", "close", &session]);
        assert_eq!(closed.status.code(), Some(0), "{}", show(&closed));
        assert!(
            wait_until(Duration::from_secs(10), || pids_running(&sleep).is_empty()),
            "{args:?}: `{sleep}`, started with setsid env -i, outlived its job and its session"
        );
    }
    assert!(doors.daemon.job_processes().is_empty());
}

/// Issue 30.
#[test]
fn a_sandboxed_job_cannot_kill_its_resident_nor_leave_a_process_behind() {
    resident_out_of_reach("", "1");
}

/// Issue 30.
#[test]
fn under_cgroups_no_job_process_outlives_its_job_nor_leaves_its_cgroup() {
    let Some(cgroup) = TestCgroup::new("i30") else {
        return;
    };
    resident_out_of_reach(&cgroup.config(), "2");
    // A sandboxed job cannot move itself out of its cgroup, to the root of the
    // hierarchy here; an unsandboxed one can (these tests run as root; a user's job
    // can move to any cgroup of the subtree delegated to the user).
    let doors = Doors::start(&cgroup.config());
    let procs = cgroup.dir().parent().unwrap().join("cgroup.procs");
    let command = format!(
        "sh -c 'echo $$ > {procs} && echo moved-out || echo stayed'",
        procs = procs.display()
    );
    for args in SANDBOXED {
        let shown = doors.run(args, &command);
        assert!(shown.contains("stayed"), "{args:?}: {shown}");
    }
    let shown = doors.run(&["--sandbox", "off"], &command);
    assert!(shown.contains("moved-out"), "the control: {shown}");
}

/// A listener of the host on a unix socket, answering `hello` to each connection.
fn unix_listener(path: &Path) -> std::thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let _ = stream.write_all(b"hello\n");
        }
    })
}

fn connect_command(path: &Path) -> String {
    format!(
        "/usr/bin/python3 -c 'import socket\ntry:\n s=socket.socket(socket.AF_UNIX); s.connect(\"{}\"); print(\"got\", s.recv(9).decode().strip())\nexcept OSError as e: print(\"refused\", e)\na,b=socket.socketpair(); a.send(b\"p\"); print(\"pair\", b.recv(1).decode())'",
        path.display()
    )
}

/// Issue 30.
#[test]
fn a_sandboxed_job_reaches_no_unix_socket_of_the_host() {
    let doors = Doors::start("");
    let path = doors.daemon.scratch().join("i30-host.sock");
    let _listener = unix_listener(&path);
    let command = connect_command(&path);
    for args in SANDBOXED {
        let shown = doors.run(args, &command);
        assert!(
            shown.contains("refused") && !shown.contains("got hello"),
            "{args:?}: {shown}"
        );
        // A pair of its own still works.
        assert!(shown.contains("pair p"), "{args:?}: {shown}");
    }
    // Bashd's own socket too.
    let own = connect_command(&doors.daemon.socket_path());
    let shown = doors.run(&["--sandbox", "read-only"], &own);
    assert!(shown.contains("refused"), "{shown}");
    let shown = doors.run(&["--sandbox", "off"], &command);
    assert!(shown.contains("got hello"), "the control: {shown}");
}

/// Issue 30.
#[test]
fn unix_sockets_in_the_config_open_them_to_a_file_sandbox_with_the_network_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i30-allowed.sock");
    let doors = Doors::start(&format!(
        "[sandbox]\nunix_sockets = [\"{}\"]\n",
        path.display()
    ));
    let _listener = unix_listener(&path);
    let command = connect_command(&path);
    let shown = doors.run(&["--sandbox", "read-only"], &command);
    assert!(shown.contains("got hello"), "{shown}");
    for args in [
        &["--sandbox", "read-only", "--net", "off"][..],
        &["--sandbox", "off", "--net", "off"][..],
    ] {
        let shown = doors.run(args, &command);
        assert!(shown.contains("refused"), "{args:?}: {shown}");
    }
}

/// Issue 30.
#[test]
fn a_sandboxed_job_reaches_no_other_terminal_and_keeps_its_own() {
    let doors = Doors::start("");
    let victim = doors.exec(
        "i30-victim",
        &["--pty", "--mode", "background"],
        "sleep 300",
    );
    assert_eq!(victim.status.code(), Some(0), "{}", show(&victim));
    let pid = json(&victim)["pid"].as_u64().unwrap();
    let pty = std::fs::read_link(format!("/proc/{pid}/fd/0")).unwrap();
    assert!(pty.starts_with("/dev/pts/"), "{}", pty.display());
    let command = format!(
        "echo typed > {pty}; echo \"write: $?\"; cat {pty} </dev/null & sleep 0.2; kill $! 2>/dev/null; ls /dev/pts | tr '\\n' ' '",
        pty = pty.display()
    );
    for args in SANDBOXED.iter().filter(|args| args[1] != "off") {
        let shown = doors.run(args, &command);
        assert!(
            shown.contains("write: 1") && !shown.contains("write: 0"),
            "{args:?}: {shown}"
        );
        let name = pty.file_name().unwrap().to_string_lossy();
        assert!(!shown.contains(&format!(" {name} ")), "{args:?}: {shown}");
    }
    let shown = doors.run(&["--sandbox", "off"], &command);
    assert!(shown.contains("write: 0"), "the control: {shown}");
    // A terminal job keeps its own terminal: a name for it, /dev/tty, job control, and
    // new terminals of its own.
    let own = doors.run(
        &["--pty", "--sandbox", "read-only"],
        "tty; echo via-tty > /dev/tty && echo devtty-ok; set -m; sleep 0.1 & fg %1 >/dev/null && echo fg-ok; /usr/bin/python3 -c 'import os; m,s=os.openpty(); os.write(s,b\"x\"); print(\"new-pty\", os.read(m,1).decode())'",
    );
    for want in ["/dev/console", "devtty-ok", "fg-ok", "new-pty x"] {
        assert!(own.contains(want), "{want}: {own}");
    }
    let killed = doors.daemon.run_bashc(&["session", "close", "i30-victim"]);
    assert_eq!(killed.status.code(), Some(0), "{}", show(&killed));
}

/// A System V shared memory segment of the host, removed on drop.
struct Segment(String);

impl Drop for Segment {
    fn drop(&mut self) {
        let _ = Command::new("ipcrm").args(["-m", &self.0]).output();
    }
}

/// Issue 30.
#[test]
fn a_sandboxed_job_reaches_no_ipc_object_of_the_host() {
    let made = Command::new("ipcmk").args(["-M", "4096"]).output().unwrap();
    let text = String::from_utf8_lossy(&made.stdout).into_owned();
    let id = text.trim().rsplit(' ').next().unwrap().to_owned();
    assert!(id.parse::<u32>().is_ok(), "ipcmk said {text:?}");
    let segment = Segment(id);
    let doors = Doors::start("");
    let command = format!(
        "ipcs -m | awk '{{print $2}}' | grep -qx {id}; echo \"seen: $?\"",
        id = segment.0
    );
    for args in SANDBOXED {
        let shown = doors.run(args, &format!("{command}; ipcrm -m {} 2>&1", segment.0));
        assert!(shown.contains("seen: 1"), "{args:?}: {shown}");
    }
    let table = std::fs::read_to_string("/proc/sysvipc/shm").unwrap();
    assert!(
        table
            .lines()
            .any(|line| line.split_whitespace().nth(1) == Some(segment.0.as_str())),
        "a sandboxed job removed the host's segment {}: {table}",
        segment.0
    );
    let shown = doors.run(&["--sandbox", "off"], &command);
    assert!(shown.contains("seen: 0"), "the control: {shown}");
}

/// Issue 30.
#[test]
fn every_git_beneath_a_writable_root_is_read_only() {
    let doors = Doors::start("");
    let ws = &doors.ws;
    for nested in ["proj", "a/b/c/deep"] {
        std::fs::create_dir_all(ws.join(nested)).unwrap();
        git(&ws.join(nested), &["init", "-q"]);
    }
    // A submodule-like `.git` file naming a gitdir elsewhere in the workspace.
    std::fs::create_dir_all(ws.join("store")).unwrap();
    git(&ws.join("store"), &["init", "-q", "--bare", "m.git"]);
    std::fs::create_dir_all(ws.join("mods/m")).unwrap();
    std::fs::write(
        ws.join("mods/m/.git"),
        format!("gitdir: {}\n", ws.join("store/m.git").display()),
    )
    .unwrap();
    let configs: Vec<PathBuf> = [
        ".git/config",
        "proj/.git/config",
        "a/b/c/deep/.git/config",
        "store/m.git/config",
    ]
    .iter()
    .map(|c| ws.join(c))
    .collect();
    let before: Vec<String> = configs
        .iter()
        .map(|c| std::fs::read_to_string(c).unwrap())
        .collect();
    let command = "for r in . proj a/b/c/deep mods/m; do git -C $r config core.fsmonitor 'touch /tmp/i30-pwned'; echo \"$r: $?\"; done; \
                   echo work > proj/file && echo a > a/b/c/deep/file && echo work-tree-ok";
    let shown = doors.run(&["--sandbox", "workspace-write"], command);
    assert!(shown.contains("work-tree-ok"), "the control: {shown}");
    for repo in [".", "proj", "a/b/c/deep", "mods/m"] {
        assert!(
            !shown.contains(&format!("{repo}: 0")),
            "{repo}: its config was written: {shown}"
        );
    }
    for (config, before) in configs.iter().zip(&before) {
        assert_eq!(
            &std::fs::read_to_string(config).unwrap(),
            before,
            "{}",
            config.display()
        );
    }
    // The same job unsandboxed writes them: the repositories are real.
    let shown = doors.run(
        &["--sandbox", "off"],
        "git -C proj config i30.x y; echo \"proj: $?\"",
    );
    assert!(shown.contains("proj: 0"), "the control: {shown}");
}

/// Issue 30, point 3: bashd's runtime dir holds the journal (every job's command),
/// the relay's and ssh's sockets and every session's spill files: a secret another
/// session's job printed was one `cat` away from a sandboxed job. The job sees an
/// empty runtime dir but for its own session's temp dir, which it still writes. The
/// control: an unsandboxed job reads the same files.
#[test]
fn a_sandboxed_job_reads_nothing_of_the_runtime_dir_but_its_temp_dir() {
    let doors = Doors::start("");
    let runtime = doors.daemon.runtime_dir().display().to_string();
    // A job of another session whose output spills to a file (background jobs spill
    // from their first byte).
    let victim = doors.exec(
        "victim",
        &["--mode", "background"],
        "echo secret-i30-spill; sleep 3030.7",
    );
    let victim_job = json(&victim)["job"].as_str().unwrap().to_owned();
    let spill = format!("{runtime}/sessions/victim/{victim_job}.stdout");
    assert!(
        wait_until(Duration::from_secs(30), || std::fs::read_to_string(&spill)
            .is_ok_and(|text| text.contains("secret-i30-spill"))),
        "{}",
        show(&victim)
    );
    let look = format!(
        "cat {spill}; cat {runtime}/journal | head -c 300; ls -A {runtime}; \
         echo written > \"$TMPDIR/mine\" && cat \"$TMPDIR/mine\""
    );
    let confined = doors.run(&["--sandbox", "read-only", "--net", "off"], &look);
    assert!(!confined.contains("secret-i30-spill"), "{confined}");
    assert!(!confined.contains("sleep 3030.7"), "{confined}");
    assert!(!confined.contains("bashd.sock"), "{confined}");
    assert!(confined.contains("written"), "{confined}");
    let workspace = doors.run(&["--sandbox", "workspace-write"], &look);
    assert!(!workspace.contains("secret-i30-spill"), "{workspace}");
    assert!(workspace.contains("written"), "{workspace}");
    // The control: without a sandbox, the same command reads them.
    let open = doors.run(&["--sandbox", "off"], &look);
    assert!(
        open.contains("secret-i30-spill") && open.contains("bashd.sock"),
        "{open}"
    );
    let killed = doors
        .daemon
        .bashc()
        .args(["kill", "--session", "victim", &victim_job])
        .output()
        .unwrap();
    assert_eq!(killed.status.code(), Some(143), "{}", show(&killed));
}

/// Issue 30.
#[test]
fn status_names_the_doors_each_mechanism_closes() {
    let doors = Doors::start("");
    let status = doors.daemon.run_bashc(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    for door in [
        "signals to the job's resident",
        "unix sockets (socket(AF_UNIX))",
        "other terminals",
        "System V IPC",
        "every .git beneath a writable root",
    ] {
        assert!(text.contains(door), "{door}: {}", show(&status));
    }
    let json_status = doors.daemon.run_bashc(&["status", "--json"]);
    let mechanisms = json(&json_status)["sandbox"]["mechanisms"].clone();
    let seccomp = mechanisms
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "seccomp")
        .unwrap_or_else(|| panic!("no seccomp in {mechanisms:#}"));
    assert_eq!(seccomp["available"], true, "{seccomp:#}");
    assert!(!seccomp["closes"].as_array().unwrap().is_empty());
}

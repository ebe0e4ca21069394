//! Issue 30's edges: a client that checks before it speaks (a runtime dir planted by
//! another user, a listener of another uid), a relay that checks its peer (a sandboxed
//! job's `bashc --host`) and counts what a far side sends it (a bridge that floods a
//! client that never reads), and a job's command shown to a person as inert text.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use bashd_tests::sshd::relay_pids;
use bashd_tests::{Daemon, bin_path, wait_until};

use crate::{show, stderr, stdout};

/// A user made for one test with `useradd`, removed with `userdel` when dropped, even
/// when the test fails.
struct TestUser {
    name: String,
    uid: u32,
    gid: u32,
}

impl TestUser {
    /// A new user named `bashd-i30-<role>-<pid>`, or why not (not root, no useradd).
    fn create(role: &str) -> Result<TestUser, String> {
        if !rustix::process::getuid().is_root() {
            return Err("only root can make a second user".to_owned());
        }
        let name = format!("bashd-i30-{role}-{}", std::process::id());
        let made = Command::new("useradd")
            .args(["-M", "-U", "-s", "/usr/sbin/nologin", &name])
            .output()
            .map_err(|e| format!("cannot run useradd: {e}"))?;
        if !made.status.success() {
            return Err(format!("useradd {name} failed: {}", show(&made)));
        }
        // Made first, so that a failure below still removes the user.
        let mut user = TestUser {
            name,
            uid: 0,
            gid: 0,
        };
        let id = |flag: &str, name: &str| -> Result<u32, String> {
            let out = Command::new("id")
                .args([flag, name])
                .output()
                .map_err(|e| e.to_string())?;
            stdout(&out)
                .trim()
                .parse()
                .map_err(|e| format!("id {flag} {name}: {e}"))
        };
        user.uid = id("-u", &user.name)?;
        user.gid = id("-g", &user.name)?;
        Ok(user)
    }

    /// `program` run as this user, with an empty environment but `PATH`.
    fn command(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .current_dir("/")
            // std drops root's supplementary groups when it sets the uid.
            .uid(self.uid)
            .gid(self.gid);
        command
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        // Its processes first: userdel refuses a user that still runs one. Never
        // those of uid 0, which an id not read yet would name.
        if self.uid == 0 {
            let _ = Command::new("userdel").arg(&self.name).status();
            return;
        }
        let _ = Command::new("pkill")
            .args(["-KILL", "-U", &self.uid.to_string()])
            .status();
        let _ = wait_until(Duration::from_secs(5), || {
            Command::new("pgrep")
                .args(["-U", &self.uid.to_string()])
                .output()
                .is_ok_and(|out| !out.status.success())
        });
        let _ = Command::new("userdel").arg(&self.name).status();
    }
}

/// A listener on a unix socket that counts what it is sent: `python3 LISTENER SOCKET
/// COUNT` binds SOCKET, and after every read writes the bytes read so far to COUNT.
const LISTENER: &str = r#"
import os, socket, sys
path, count = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
s.listen(8)
total = 0
def note():
    with open(count + ".tmp", "w") as f:
        f.write(str(total))
    os.rename(count + ".tmp", count)
note()
while True:
    c, _ = s.accept()
    c.settimeout(2)
    try:
        while True:
            d = c.recv(65536)
            if not d:
                break
            total += len(d)
            note()
    except socket.timeout:
        pass
    c.close()
"#;

/// Everything the planted-directory test made, undone on drop: the listeners, the
/// planted directories.
struct Planted {
    listeners: Vec<Child>,
    dirs: Vec<PathBuf>,
}

impl Drop for Planted {
    fn drop(&mut self) {
        for child in &mut self.listeners {
            let _ = child.kill();
            let _ = child.wait();
        }
        for dir in &self.dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Starts [`LISTENER`] as `user` on `socket`, counting into `count`; waits for it.
fn listen_as(user: &TestUser, script: &Path, socket: &Path, count: &Path) -> Child {
    let child = user
        .command(Path::new("/usr/bin/python3"))
        .arg(script)
        .arg(socket)
        .arg(count)
        .stdin(Stdio::null())
        .spawn()
        .expect("cannot run python3");
    assert!(
        wait_until(Duration::from_secs(10), || count.exists()
            && socket.exists()),
        "the listener did not start on {}",
        socket.display()
    );
    child
}

/// The bytes the [`LISTENER`] on `socket` was sent by anyone before this call: it reads
/// its connections one after the other, so once a probe connected now has been counted,
/// what came before it has been too.
fn bytes_read_before_a_probe(socket: &Path, count: &Path) -> u64 {
    const PROBE: &[u8] = b"probe";
    let before = bytes_read(count);
    let mut probe = UnixStream::connect(socket).expect("cannot probe");
    probe.write_all(PROBE).unwrap();
    drop(probe);
    let mut total = before;
    assert!(
        wait_until(Duration::from_secs(10), || {
            total = bytes_read(count);
            total >= before + PROBE.len() as u64
        }),
        "the listener on {} never read the probe",
        socket.display()
    );
    total - PROBE.len() as u64
}

fn bytes_read(count: &Path) -> u64 {
    std::fs::read_to_string(count)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}

/// Issue 30, point 5: without `XDG_RUNTIME_DIR` a client falls back to
/// `/tmp/bashd-$UID`, which any user may make first. A listener planted there by
/// another user gets not one byte (no `Hello`, no environment with its token): bashc
/// refuses and names the directory, its owner and the fix. Nor does a listener of
/// another uid in the caller's own directory. The control: the caller's own directory
/// and listener are spoken to.
#[test]
fn a_runtime_dir_or_listener_of_another_user_gets_nothing() {
    let users = TestUser::create("victim")
        .and_then(|victim| TestUser::create("planter").map(|planter| (victim, planter)));
    let (victim, planter) = match users {
        Ok(users) => users,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    // A copy of bashc and the listener that both users may run.
    let scratch = tempfile::tempdir().unwrap();
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let bashc = scratch.path().join("bashc");
    std::fs::copy(bin_path("bashc"), &bashc).unwrap();
    std::fs::set_permissions(&bashc, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = scratch.path().join("listener.py");
    std::fs::write(&script, LISTENER).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();

    let fallback = PathBuf::from(format!("/tmp/bashd-{}", victim.uid));
    let mut planted = Planted {
        listeners: Vec::new(),
        dirs: vec![fallback.clone()],
    };
    let _ = std::fs::remove_dir_all(&fallback);
    let secret = "TOKEN=sk-i30-do-not-send";
    let victims_bashc = || {
        let out = victim
            .command(&bashc)
            .env(
                secret.split_once('=').unwrap().0,
                secret.split_once('=').unwrap().1,
            )
            .env("BASHD_NO_AUTOSTART", "1")
            .args(["exec", "--", "echo", "ran"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_ne!(stdout(&out), "ran\n", "{}", show(&out));
        out
    };

    // The planter makes the victim's fallback directory, open to all, and listens.
    let made = planter
        .command(Path::new("/bin/mkdir"))
        .args(["-m", "0777"])
        .arg(&fallback)
        .status()
        .unwrap();
    assert!(made.success());
    let count = scratch.path().join("planted.count");
    planted.listeners.push(listen_as(
        &planter,
        &script,
        &fallback.join("bashd.sock"),
        &count,
    ));
    let out = victims_bashc();
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    assert_eq!(
        bytes_read_before_a_probe(&fallback.join("bashd.sock"), &count),
        0,
        "the planted listener was sent bytes: {}",
        show(&out)
    );
    let said = stderr(&out);
    assert!(
        said.contains(&format!(
            "runtime dir {} belongs to uid {} ({}), not to you (uid {})",
            fallback.display(),
            planter.uid,
            planter.name,
            victim.uid
        )) && said.contains("set BASHD_RUNTIME_DIR to a directory of your own")
            && said.contains("bashc sent nothing there"),
        "{said}"
    );

    // The victim's own directory, 0700, but a listener of the planter's moved into it.
    for mut child in planted.listeners.drain(..) {
        let _ = child.kill();
        let _ = child.wait();
    }
    std::fs::remove_dir_all(&fallback).unwrap();
    let made = victim
        .command(Path::new("/bin/mkdir"))
        .args(["-m", "0700"])
        .arg(&fallback)
        .status()
        .unwrap();
    assert!(made.success());
    let planters = scratch.path().join("planters");
    let made = planter
        .command(Path::new("/bin/mkdir"))
        .args(["-m", "0755"])
        .arg(&planters)
        .status()
        .unwrap();
    assert!(made.success());
    let count = scratch.path().join("moved.count");
    planted.listeners.push(listen_as(
        &planter,
        &script,
        &planters.join("s.sock"),
        &count,
    ));
    std::fs::rename(planters.join("s.sock"), fallback.join("bashd.sock")).unwrap();
    let out = victims_bashc();
    assert_eq!(out.status.code(), Some(255), "{}", show(&out));
    assert_eq!(
        bytes_read_before_a_probe(&fallback.join("bashd.sock"), &count),
        0,
        "the moved listener was sent bytes: {}",
        show(&out)
    );
    let said = stderr(&out);
    assert!(
        said.contains(&format!(
            "the process listening on {} runs as uid {} ({}), not as you (uid {}), so it is not your bashd; bashc sent it nothing",
            fallback.join("bashd.sock").display(),
            planter.uid,
            planter.name,
            victim.uid
        )),
        "{said}"
    );

    // The control: the victim's own listener in its own directory is spoken to.
    for mut child in planted.listeners.drain(..) {
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = std::fs::remove_file(fallback.join("bashd.sock"));
    let count = scratch.path().join("own.count");
    planted.listeners.push(listen_as(
        &victim,
        &script,
        &fallback.join("bashd.sock"),
        &count,
    ));
    let _ = victims_bashc();
    assert!(
        wait_until(Duration::from_secs(10), || bytes_read(&count) > 0),
        "the victim's own listener was sent nothing: the setup is broken"
    );
    drop(planted);
    drop(planter);
    drop(victim);
}

/// A fake `bashc bridge`: greets the relay as `fake bridge i30`, then for the n-th
/// connection the relay opens sends `FLOOD` bytes, its n-th comma-separated figure,
/// without waiting for a window, and notes each finished flood in `$DONE.<n>`.
const FLOODING_BRIDGE: &str = r#"
import os, struct, sys, threading, queue
inp, out = sys.stdin.buffer, sys.stdout.buffer
def exact(n):
    data = b""
    while len(data) < n:
        more = inp.read(n - len(data))
        if not more:
            sys.exit(0)
        data += more
    return data
exact(8)
kind, ident, n = struct.unpack(">BII", exact(9)); exact(n)
speaker = b"fake bridge i30"
out.write(struct.pack(">BII", 0, 1, len(speaker)) + speaker); out.flush()
opens = queue.Queue()
def read_frames():
    while True:
        kind, ident, n = struct.unpack(">BII", exact(9)); exact(n)
        if kind == 1:
            opens.put(ident)
threading.Thread(target=read_frames, daemon=True).start()
floods = [int(x) for x in os.environ["FLOOD"].split(",")]
chunk = b"x" * 65536
for nth, amount in enumerate(floods):
    ident = opens.get()
    sent = 0
    while sent < amount:
        piece = chunk[: min(len(chunk), amount - sent)]
        out.write(struct.pack(">BII", 2, ident, len(piece)) + piece)
        sent += len(piece)
    out.flush()
    open(os.environ["DONE"] + "." + str(nth), "w").close()
threading.Event().wait()
"#;

/// The relay's flow-control window (`mux::WINDOW`).
const WINDOW: usize = 1024 * 1024;

/// `VmHWM` of `pid` (its peak resident memory), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// Kills a process group when dropped.
struct KillGroup(Child);

impl Drop for KillGroup {
    fn drop(&mut self) {
        let _ = rustix::process::kill_process_group(
            rustix::process::Pid::from_raw(self.0.id() as i32).expect("a child's pid"),
            rustix::process::Signal::KILL,
        );
        let _ = self.0.wait();
    }
}

/// Issue 30, point 10: a far side that ignores the window and floods a client that
/// never reads. The relay holds at most a window of it: the client is cut off with a
/// word naming its connection and the far side, and the relay's memory stays flat
/// (read from /proc). The control: a client sent exactly its window by the same
/// bridge keeps its connection and reads every byte.
#[test]
fn a_bridge_that_floods_a_client_that_never_reads_is_cut_off() {
    let near = Daemon::unstarted();
    let scratch = near.scratch().join("i30-flood");
    std::fs::create_dir_all(&scratch).unwrap();
    let script = scratch.join("bridge.py");
    std::fs::write(&script, FLOODING_BRIDGE).unwrap();
    let done = scratch.join("done");
    let flood: u64 = 512 * 1024 * 1024;
    let bridge = format!(
        "env FLOOD={WINDOW},{flood} DONE={} /usr/bin/python3 {}",
        done.display(),
        script.display()
    );
    // Made as a client that starts a relay makes them.
    for dir in [
        near.runtime_dir().to_owned(),
        near.runtime_dir().join("remote"),
    ] {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let log = scratch.join("relay.log");
    let mut relay = near.bashc();
    relay
        .env(bashc::BRIDGE_COMMAND_ENV, &bridge)
        .arg("--runtime-dir")
        .arg(near.runtime_dir())
        .args(["relay", "--", "fake-i30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .process_group(0);
    let mut relay = KillGroup(relay.spawn().unwrap());
    let mut ready = String::new();
    let mut stdout_of_relay = relay.0.stdout.take().unwrap();
    let _ = stdout_of_relay.read_to_string(&mut ready);
    assert_eq!(
        ready.trim(),
        "ready",
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let socket = std::fs::read_dir(near.runtime_dir().join("remote"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|e| e == "sock"))
        .expect("the relay's socket");
    let relay_pid = relay.0.id();
    let before = peak_rss(relay_pid);

    // The control first: exactly a window, to a client that reads it later.
    let mut within = UnixStream::connect(&socket).unwrap();
    assert!(
        wait_until(Duration::from_secs(30), || done
            .with_extension("0")
            .exists()),
        "the bridge did not send the first client its window"
    );
    // Then a client that never reads, flooded.
    let mut flooded = UnixStream::connect(&socket).unwrap();
    assert!(
        wait_until(Duration::from_secs(120), || done
            .with_extension("1")
            .exists()),
        "the bridge did not finish its flood (the relay stopped reading the channel?)"
    );
    let peak = peak_rss(relay_pid);
    eprintln!("relay peak RSS: {before} bytes before, {peak} after a flood of {flood}");
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        said.contains("connection 1: fake bridge i30 sent")
            && said.contains("that its end has not taken yet, over the window of 1048576 it may send unacknowledged; the connection is closed"),
        "{said}"
    );
    assert!(
        peak < before + 64 * 1024 * 1024,
        "the relay grew from {before} to {peak} bytes under a flood of {flood}"
    );
    // The flooded client is closed: what reached its socket, then the end.
    flooded
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    flooded
        .read_to_end(&mut got)
        .expect("the flooded client's connection was not closed");
    assert!(got.len() <= WINDOW, "{} bytes", got.len());
    // The control reads its whole window, and its connection stays open.
    within
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut total = 0;
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match within.read(&mut buffer) {
            Ok(0) => panic!("the client within its window was closed after {total} bytes"),
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(total, WINDOW);
    assert!(!said.contains("connection 0:"), "{said}");
    let _ = within.write_all(b"");
    drop(relay);
}

/// Issue 30, point 4: the relay's socket is in the runtime dir, which a sandboxed job
/// can reach; a call from inside a `read-only --net off` job through the relay to a
/// host would run there unsandboxed. The relay refuses a client in another user
/// namespace than its own, and says why. The control: the same call from outside the
/// sandbox runs. The far side is this machine's `bashc bridge` run directly by the
/// relay (no sshd needed: what is checked is the relay's socket, not the link).
#[test]
fn a_sandboxed_job_cannot_reach_another_host_through_the_relay() {
    // The config lets a file-sandboxed job with the network on make unix sockets, so
    // the relay's own check is what refuses it; with the network off the seccomp filter
    // refuses first (checked at the end).
    let near = Daemon::unstarted();
    near.write_config(&format!(
        "[sandbox]\nunix_sockets = [\"{}\"]\n",
        near.runtime_dir().join("remote").display()
    ));
    let near = near.spawn_and_wait();
    let far = Daemon::unstarted();
    let _relays = KillRelays(near.runtime_dir().to_owned());
    let bashc = bin_path("bashc");
    let bridge = format!(
        "env -u BASHD_NO_AUTOSTART BASHD_RUNTIME_DIR={} XDG_CONFIG_HOME={} {} bridge",
        far.runtime_dir().display(),
        far.config_home().display(),
        bashc.display()
    );
    let outside = near.scratch().join("i30-outside");
    std::fs::create_dir_all(&outside).unwrap();
    let run = |args: &[&str]| -> Output {
        near.bashc()
            .env(bashc::BRIDGE_COMMAND_ENV, &bridge)
            .args(args)
            .output()
            .unwrap()
    };
    let host = "far-i30";

    // The control: from outside any sandbox, the relay carries the call.
    let from_outside = outside.join("from-outside");
    let out = run(&[
        "--host",
        host,
        "exec",
        "--sandbox",
        "off",
        "--",
        &format!("touch {}", from_outside.display()),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(from_outside.exists(), "{}", show(&out));
    assert_eq!(relay_pids(near.runtime_dir()).len(), 1);

    // From inside a read-only job with the network off, through the same relay.
    let from_inside = outside.join("from-inside");
    let nested = format!(
        "{} --host {host} exec --sandbox off -- touch {}",
        bashc.display(),
        from_inside.display()
    );
    let out = run(&[
        "exec",
        "--sandbox",
        "read-only",
        "--net",
        "on",
        "--",
        &nested,
    ]);
    assert!(
        !from_inside.exists(),
        "the sandboxed job ran a command on {host}: {}",
        show(&out)
    );
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
    // The runtime dir, and so the relay's socket, is covered in a confined job's mount
    // namespace: that call did not get as far as the relay. The relay's own check
    // behind it: a client in another user namespace than the relay's is refused, and
    // the far side runs nothing.
    let mut unshared = near.bashc();
    unshared
        .env(bashc::BRIDGE_COMMAND_ENV, &bridge)
        .args(["--host", host, "exec", "--sandbox", "off", "--"])
        .arg(format!("touch {}", from_inside.display()));
    let out = crate::boundary::in_user_namespace(unshared)
        .output()
        .expect("cannot run unshare");
    assert!(!from_inside.exists(), "{}", show(&out));
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
    let said = stdout(&out) + &stderr(&out);
    assert!(
        said.contains(&format!(
            "this bashc runs inside a sandboxed job, and the relay to {host} carries no call from a sandbox"
        )),
        "{said}"
    );
    // The relay serves on: the control again.
    let again = outside.join("again");
    let out = run(&[
        "--host",
        host,
        "exec",
        "--",
        &format!("touch {}", again.display()),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(again.exists());
    // With the network off, no unix socket at all, nor the relay's directory.
    let out = run(&[
        "exec",
        "--sandbox",
        "read-only",
        "--net",
        "off",
        "--",
        &nested,
    ]);
    assert!(!from_inside.exists(), "{}", show(&out));
    assert_ne!(out.status.code(), Some(0), "{}", show(&out));
}

/// Kills the relays of a runtime dir when dropped, even when a test fails: a relay
/// otherwise waits out its idle time.
struct KillRelays(PathBuf);

impl Drop for KillRelays {
    fn drop(&mut self) {
        for pid in relay_pids(&self.0) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Issue 30, point 11: `bashc jobs` printed a job's command and description as they
/// were, so an agent's command could set the person's clipboard (OSC 52), retitle or
/// clear their terminal, or reorder the line with a bidi override. They are shown as
/// visible escapes; a plain command is shown as it is.
#[test]
fn jobs_shows_a_commands_escapes_as_text() {
    let daemon = Daemon::start();
    let command = "sleep 0 # \u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{1b}[2J \u{202e}gpj.exe";
    let out = daemon
        .bashc()
        .args([
            "exec",
            "--description",
            "build \u{1b}]0;owned\u{7}\u{2066}x",
            "--",
            command,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let plain = daemon
        .bashc()
        .args(["exec", "--", "true # plain-i30"])
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(0), "{}", show(&plain));
    let jobs = daemon.bashc().arg("jobs").output().unwrap();
    let text = stdout(&jobs);
    assert!(
        !text.contains('\u{1b}')
            && !text.contains('\u{7}')
            && !text.contains('\u{202e}')
            && !text.contains('\u{2066}'),
        "{text:?}"
    );
    assert!(
        text.contains("sleep 0 # \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J \\u{202e}gpj.exe  # build \\x1b]0;owned\\x07\\u{2066}x"),
        "{text}"
    );
    assert!(text.contains("true # plain-i30"), "{text}");
}

/// Issue 30, point 11, for an agent's person: `bash_jobs` lists a job's command and
/// description through the same rule as `bashc jobs`, so a job started with escapes
/// in them reaches an MCP host's screen as text.
#[tokio::test]
async fn bash_jobs_shows_a_commands_escapes_as_text() {
    use crate::mcp::{call, connect, text_of};
    let daemon = Daemon::start();
    let client = connect(&daemon).await;
    let started = call(
        &client,
        "bash",
        serde_json::json!({
            "command": "true # \u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{202e}gpj.exe",
            "description": "lint \u{1b}[2J\u{2068}x",
        }),
    )
    .await;
    assert_ne!(started.is_error, Some(true), "{}", text_of(&started));
    let plain = call(
        &client,
        "bash",
        serde_json::json!({"command": "true # plain-i30"}),
    )
    .await;
    assert_ne!(plain.is_error, Some(true), "{}", text_of(&plain));
    let listed = text_of(&call(&client, "bash_jobs", serde_json::json!({})).await);
    assert!(
        !listed.contains('\u{1b}')
            && !listed.contains('\u{7}')
            && !listed.contains('\u{202e}')
            && !listed.contains('\u{2068}'),
        "{listed:?}"
    );
    assert!(
        listed.contains(
            "true # \\x1b]52;c;cm0gLXJmIH4=\\x07\\u{202e}gpj.exe  # lint \\x1b[2J\\u{2068}x"
        ),
        "{listed}"
    );
    assert!(listed.contains("true # plain-i30"), "{listed}");
    let _ = client.cancel().await;
}

/// Issue 30, point 11: a job's output that holds a bidi override (U+202E turns
/// `exe.txt` into what reads as `txt.exe`) or isolate reaches the person without it,
/// on pipes and on a terminal; right-to-left text stays, and since issue 42 its marks
/// (U+200F here) go as the other bidi controls do.
#[test]
fn bidi_controls_never_reach_the_person_from_a_jobs_output() {
    let daemon = Daemon::start();
    let printf = r"printf 'ok \342\200\256txt.exe\342\200\254 \342\201\246x\342\201\251 \327\251\327\234\342\200\217\n'";
    for pty in [false, true] {
        let mut args = vec!["exec"];
        if pty {
            args.push("--pty");
        }
        args.extend(["--", printf]);
        let out = daemon.run_bashc(&args);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        let shown = stdout(&out);
        assert!(shown.contains("ok txt.exe x של\n"), "pty {pty}: {shown:?}");
        for bidi in ['\u{202e}', '\u{202c}', '\u{2066}', '\u{2069}', '\u{200f}'] {
            assert!(!shown.contains(bidi), "pty {pty}: {shown:?}");
        }
    }
}

/// Issue 42: the bidi marks RLM (U+200F) and ALM (U+061C) passed the sanitizer, and so
/// did the line and paragraph separators U+2028 and U+2029, which a viewer may or may
/// not break a line at. The marks go as the other bidi controls do; each separator
/// becomes a newline, so the lines bashd counts are the lines shown. Plain and
/// right-to-left text around them stays.
#[test]
fn bidi_marks_and_line_separators_do_not_reach_the_reader() {
    let daemon = Daemon::start();
    // a.txt RLM .exe, ALM, LS, PS, then Hebrew.
    let printf = r"printf 'a.txt\342\200\217.exe \330\234x\342\200\250rm -rf y\342\200\251end \327\251\327\234\n'";
    let out = daemon.run_bashc(&["exec", "--json", "--", printf]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let result = crate::json(&out);
    let shown = result["stdout"]["text"].as_str().unwrap();
    assert_eq!(shown, "a.txt.exe x\nrm -rf y\nend של\n", "{result}");
    assert_eq!(result["stdout"]["total_lines"], 3, "{result}");
}

/// Issue 42: `bashc jobs --json` carried a job's command and description with raw C1
/// controls (U+0085 NEL, U+009B CSI, which a terminal reading 8-bit controls acts on)
/// and line separators; they are listed as visible escapes, as the text table shows
/// them. A plain command is listed as it is.
#[test]
fn jobs_json_carries_no_raw_c1_control() {
    let daemon = Daemon::start();
    let out = daemon
        .bashc()
        .args([
            "exec",
            "--description",
            "lint \u{85}\u{2028}x",
            "--",
            "true # \u{9b}2J\u{85}\u{200f}end",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let plain = daemon.run_bashc(&["exec", "--", "true # plain-i42"]);
    assert_eq!(plain.status.code(), Some(0), "{}", show(&plain));
    let jobs = daemon.run_bashc(&["jobs", "--json"]);
    assert_eq!(jobs.status.code(), Some(0), "{}", show(&jobs));
    let raw = stdout(&jobs);
    for c in ['\u{85}', '\u{9b}', '\u{2028}', '\u{200f}'] {
        assert!(!raw.contains(c), "{c:?} in {raw:?}");
    }
    let listed = crate::json(&jobs);
    let jobs = listed.as_array().expect("a list of jobs");
    let commands: Vec<&str> = jobs.iter().filter_map(|j| j["command"].as_str()).collect();
    assert!(
        commands.contains(&"true # \\u{9b}2J\\u{85}\\u{200f}end"),
        "{commands:?}"
    );
    assert!(commands.contains(&"true # plain-i42"), "{commands:?}");
    let descriptions: Vec<&str> = jobs
        .iter()
        .filter_map(|j| j["description"].as_str())
        .collect();
    assert_eq!(descriptions, ["lint \\u{85}\\u{2028}x"], "{listed}");
}

/// Issue 42: a sandboxed job of one session whose workdir was another session's temp
/// dir was refused as "bashd-resident exited before it started the shell". It is
/// refused before anything runs, saying what the directory is and why a job of this
/// session cannot use it; the session's own jobs, and an unconfined job of the other
/// session, still run there.
#[test]
fn another_sessions_temp_dir_is_refused_with_what_it_is() {
    let daemon = Daemon::start();
    let run_in = |session: &str, sandbox: &str, workdir: &str, command: &str| {
        daemon.run_bashc(&[
            "exec",
            "--json",
            "--session",
            session,
            "--sandbox",
            sandbox,
            "--workdir",
            workdir,
            "--",
            command,
        ])
    };
    let scratch = daemon.scratch().to_str().unwrap().to_owned();
    let out = run_in("i42-a", "read-only", &scratch, "echo \"$TMPDIR\"");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let tmp = crate::json(&out)["stdout"]["text"]
        .as_str()
        .unwrap()
        .trim()
        .to_owned();
    assert!(tmp.contains("/sessions/i42-a/"), "{tmp}");

    for sandbox in ["read-only", "workspace-write"] {
        let out = run_in("i42-b", sandbox, &tmp, "touch i42-ran");
        assert_ne!(out.status.code(), Some(0), "{sandbox}: {}", show(&out));
        let said = format!("{}{}", stdout(&out), stderr(&out));
        assert!(
            said.contains("of session i42-a")
                && said.contains("a job of session i42-b cannot run there")
                && !said.contains("bashd-resident"),
            "{sandbox}: {said}"
        );
    }
    assert!(!Path::new(&tmp).join("i42-ran").exists());

    // Its own session's job, and an unconfined one of the other session, run there.
    let out = run_in("i42-a", "read-only", &tmp, "pwd");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let out = run_in("i42-b", "off", &tmp, "pwd");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

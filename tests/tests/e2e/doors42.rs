//! The doors issue 42 found around the sandbox, beyond the writable roots: a datagram
//! socket pair that sends to a host socket by its path (hole 4), vsock and netlink
//! with the network off, a job that holds every connection the daemon serves (hole
//! 6), `/proc/sys` written by a network-only job run by root, and a `TMPDIR` shared by
//! jobs confined differently. Each test has its positive control beside it: what is
//! allowed still works (a stream pair, the job's own bashc, netlink routes, the
//! person's own requests), so none passes because its setup broke.

use std::io::ErrorKind;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use bashc::protocol::codec::ClientCodec;
use bashc::protocol::{ClientFrame, Hello, PROTOCOL_VERSION};
use bashd_tests::{Daemon, bin_path, wait_until};
use bytes::BytesMut;
use tokio_util::codec::Encoder;

use crate::{json, show};

/// A daemon and a workspace to run jobs in.
struct Doors {
    daemon: Daemon,
    ws: PathBuf,
}

impl Doors {
    fn start(config: &str) -> Doors {
        let daemon = Daemon::start_with_config(config);
        let ws = daemon.scratch().join("i42-ws");
        std::fs::create_dir_all(&ws).unwrap();
        Doors { daemon, ws }
    }

    /// `bashc exec --json --session S --workdir WS ARGS -- COMMAND`, run from the
    /// workspace, which makes it the session's writable root.
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

    /// The stdout and stderr, as shown, of a job run in the foreground in `session`.
    fn run_in(&self, session: &str, args: &[&str], command: &str) -> String {
        let output = self.exec(session, args, command);
        let result = json(&output);
        format!(
            "{}{}",
            result["stdout"]["text"].as_str().unwrap_or(""),
            result["stderr"]["text"].as_str().unwrap_or("")
        )
    }

    fn run(&self, args: &[&str], command: &str) -> String {
        self.run_in("i42", args, command)
    }

    /// Writes `text` to `name` in the workspace; its path.
    fn script(&self, name: &str, text: &str) -> PathBuf {
        let path = self.ws.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// The sandboxes every door must be closed in.
const SANDBOXED: &[&[&str]] = &[
    &["--sandbox", "read-only"],
    &["--sandbox", "workspace-write"],
    &["--sandbox", "workspace-write", "--net", "off"],
    &["--sandbox", "off", "--net", "off"],
];

const DATAGRAMS: &str = r#"import socket, sys
host, tag = sys.argv[1], sys.argv[2]
kinds = [("dgram", socket.SOCK_DGRAM), ("raw", socket.SOCK_RAW),
         ("dgram-flags", socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)]
for name, kind in kinds:
    try:
        a, b = socket.socketpair(socket.AF_UNIX, kind)
    except OSError as e:
        print(name, "pair refused", e.errno)
        continue
    try:
        a.sendto(f"{tag}-{name}-sendto".encode(), host)
        print(name, "sent")
    except OSError as e:
        print(name, "send failed", e)
    try:
        a.connect(host)
        a.send(f"{tag}-{name}-connect".encode())
        print(name, "connected")
    except OSError as e:
        print(name, "connect failed", e)
# A seqpacket end ignores the address: what it sends reaches its pair.
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
a.sendto(f"{tag}-seqpacket".encode(), host)
print("seqpacket pair got", b.recv(64).decode())
a, b = socket.socketpair()
a.send(b"s")
print("stream pair got", b.recv(1).decode())
"#;

/// Everything the host's datagram socket holds now.
fn drain(host: &UnixDatagram) -> Vec<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        match host.recv(&mut buf) {
            Ok(n) => got.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return got,
            Err(e) => panic!("the host's datagram socket: {e}"),
        }
    }
}

/// Hole 4: a datagram socket pair's end sends to any path `sendto` names (or
/// `connect` points it at), and seccomp cannot read that address: a confined job
/// reached a host listener (think `/dev/log`) that way, in every profile. The pair is
/// refused now (`SOCK_RAW`, which the kernel makes a datagram pair, too); a stream
/// and a seqpacket pair still work, and the job's own bashc, which speaks over a
/// stream pair, too. The control: an unconfined job reaches the listener.
/// (Issue 42.)
#[test]
fn a_confined_job_sends_no_datagram_to_a_host_socket() {
    let doors = Doors::start("");
    let path = doors.daemon.scratch().join("i42-host-dgram.sock");
    let host = UnixDatagram::bind(&path).unwrap();
    host.set_nonblocking(true).unwrap();
    let script = doors.script("dgram.py", DATAGRAMS);
    let command = |tag: &str| {
        format!(
            "/usr/bin/python3 {} {} {tag}; {} exec -- echo nested-{tag}",
            script.display(),
            path.display(),
            bin_path("bashc").display()
        )
    };
    for (n, args) in SANDBOXED.iter().enumerate() {
        let tag = format!("jail{n}");
        let shown = doors.run(args, &command(&tag));
        for kind in ["dgram", "raw", "dgram-flags"] {
            assert!(
                shown.contains(&format!("{kind} pair refused 1")),
                "{args:?}: {kind}: {shown}"
            );
        }
        assert!(
            shown.contains(&format!("seqpacket pair got {tag}-seqpacket")),
            "{args:?}: {shown}"
        );
        assert!(shown.contains("stream pair got s"), "{args:?}: {shown}");
        assert!(
            shown.contains(&format!("nested-{tag}")),
            "{args:?}: the job's own bashc: {shown}"
        );
        let got = drain(&host);
        assert!(
            got.is_empty(),
            "{args:?}: the host's socket got {got:?}: {shown}"
        );
    }
    // The control: unconfined, the same script reaches the host's socket.
    let shown = doors.run(&["--sandbox", "off"], &command("open"));
    let got = drain(&host);
    for want in ["open-dgram-sendto", "open-dgram-connect", "open-raw-sendto"] {
        assert!(got.iter().any(|g| g == want), "{want}: {got:?}: {shown}");
    }
    assert!(!got.iter().any(|g| g.contains("seqpacket")), "{got:?}");
}

const FAMILIES: &str = r#"import errno, socket
def make(name, *args):
    try:
        socket.socket(*args).close()
        print(name, "made")
    except OSError as e:
        print(name, "refused" if e.errno == errno.EPERM else "unsupported", e.errno)
make("vsock", socket.AF_VSOCK, socket.SOCK_STREAM)
make("netlink-audit", socket.AF_NETLINK, socket.SOCK_RAW, 9)
make("netlink-netfilter", socket.AF_NETLINK, socket.SOCK_RAW, 12)
make("netlink-uevent", socket.AF_NETLINK, socket.SOCK_DGRAM, 15)
make("netlink-route", socket.AF_NETLINK, socket.SOCK_RAW, 0)
make("netlink-diag", socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 4)
print("interfaces", " ".join(name for _, name in socket.if_nameindex()))
"#;

/// Issue 42: with the network off, `AF_VSOCK` (which no network namespace holds: it
/// reaches the hypervisor's and the host's services) and every netlink protocol but
/// the job's own routes and sockets are refused. The controls: `getifaddrs`-like
/// reads still work with the network off and see the job's loopback only, and with
/// the network on every family is made as before.
#[test]
fn with_the_network_off_no_vsock_and_no_netlink_but_routes() {
    let doors = Doors::start("");
    let script = doors.script("families.py", FAMILIES);
    let command = format!("/usr/bin/python3 {}", script.display());
    for args in [
        &["--sandbox", "read-only", "--net", "off"][..],
        &["--sandbox", "workspace-write", "--net", "off"][..],
        &["--sandbox", "off", "--net", "off"][..],
    ] {
        let shown = doors.run(args, &command);
        for refused in [
            "vsock refused 1",
            "netlink-audit refused 1",
            "netlink-netfilter refused 1",
            "netlink-uevent refused 1",
        ] {
            assert!(shown.contains(refused), "{args:?}: {refused}: {shown}");
        }
        for made in ["netlink-route made", "netlink-diag made", "interfaces lo\n"] {
            assert!(shown.contains(made), "{args:?}: {made}: {shown}");
        }
    }
    // `bashc status` names the doors seccomp and the mount namespace close now.
    let status = doors.daemon.run_bashc(&["status"]);
    let said = String::from_utf8_lossy(&status.stdout);
    for door in ["datagram socket pairs", "vsock, and netlink", "/proc/sys"] {
        assert!(said.contains(door), "{door}: {}", show(&status));
    }
    for args in [&["--sandbox", "read-only"][..], &["--sandbox", "off"][..]] {
        let shown = doors.run(args, &command);
        for made in [
            "netlink-audit made",
            "netlink-route made",
            "netlink-uevent made",
        ] {
            assert!(
                shown.contains(made),
                "the control {args:?}: {made}: {shown}"
            );
        }
        assert!(
            shown.contains("vsock made") || shown.contains("vsock unsupported"),
            "the control {args:?}: {shown}"
        );
    }
}

fn running_as_root() -> bool {
    let out = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// Issue 42: a job run by root with `--sandbox off --net off` wrote `/proc/sys` (a
/// `kernel.core_pattern` that pipes to a program is started by the kernel as root
/// outside every namespace of the job, the network's too). A network-only job now has
/// `/proc/sys` and `/sys` read-only; the rest stays its own: its files, its
/// `/proc/self`. The control: unconfined, root writes the same setting back (as it
/// was: the test changes nothing).
#[test]
fn a_network_only_job_cannot_set_the_kernel() {
    let doors = Doors::start("");
    let setting = "/proc/sys/kernel/printk_ratelimit";
    let command = format!(
        "v=$(cat {setting}); (echo \"$v\" > {setting}) 2>&1; echo \"sysctl: $?\"; \
         awk '$5 == \"/sys\" || $5 == \"/proc/sys\" {{ print \"mount\", $5, substr($6, 1, 2) }}' /proc/self/mountinfo; \
         printf i42-own > /proc/$$/comm && cat /proc/$$/comm; echo mine > netonly-file && cat netonly-file"
    );
    let shown = doors.run(&["--sandbox", "off", "--net", "off"], &command);
    assert!(
        shown.contains("Read-only file system") && !shown.contains("sysctl: 0"),
        "{shown}"
    );
    for mount in ["mount /proc/sys ro", "mount /sys ro"] {
        assert!(shown.contains(mount), "{mount}: {shown}");
    }
    assert!(!shown.contains("mount /proc/sys rw"), "{shown}");
    // The job's own: its /proc/self, its files.
    assert!(shown.contains("i42-own\nmine"), "{shown}");
    assert_eq!(
        std::fs::read_to_string(doors.ws.join("netonly-file")).unwrap(),
        "mine\n"
    );
    // Its network is still off.
    let offline = doors.run(
        &["--sandbox", "off", "--net", "off"],
        "awk 'NR > 2 { print $1 }' /proc/net/dev",
    );
    assert_eq!(offline.trim(), "lo:", "{offline}");
    let open = doors.run(&["--sandbox", "off"], &command);
    if running_as_root() {
        assert!(open.contains("sysctl: 0"), "the control: {open}");
    }
    assert!(!open.contains("mount /proc/sys"), "the control: {open}");
}

/// Issue 42: a confined job's `TMPDIR` was the session's one temp dir, whatever the
/// job's sandbox: a job confined `read-only` with the network off left a script there
/// that a looser job of the session ran as `$TMPDIR/...` with the network on. Each
/// sandbox of a session has a temp dir of its own now; jobs confined alike share
/// theirs (the control), an unconfined job keeps the client's `TMPDIR`, and the
/// session takes them all when it closes.
#[test]
fn a_tighter_job_leaves_nothing_in_a_looser_jobs_tmpdir() {
    let doors = Doors::start("");
    let session = "i42-tmp";
    let tight = ["--sandbox", "read-only", "--net", "off"];
    let planted = doors.run_in(
        session,
        &tight,
        "echo 'echo planted' > \"$TMPDIR/next.sh\" && echo \"tmp: $TMPDIR\"",
    );
    let tight_dir = planted
        .lines()
        .find_map(|line| line.strip_prefix("tmp: "))
        .unwrap_or_else(|| panic!("{planted}"))
        .to_owned();
    let runtime = doors.daemon.runtime_dir().display().to_string();
    assert!(tight_dir.starts_with(&runtime), "{tight_dir}");
    for looser in [
        &["--sandbox", "read-only"][..],
        &["--sandbox", "workspace-write"][..],
        &["--sandbox", "workspace-write", "--net", "off"][..],
    ] {
        let shown = doors.run_in(
            session,
            looser,
            "echo \"tmp: $TMPDIR\"; test -e \"$TMPDIR/next.sh\" && bash \"$TMPDIR/next.sh\"; echo \"found: $?\"; echo own > \"$TMPDIR/own\" && cat \"$TMPDIR/own\"",
        );
        assert!(
            shown.contains("found: 1") && !shown.contains("planted"),
            "{looser:?}: {shown}"
        );
        assert!(!shown.contains(&format!("tmp: {tight_dir}\n")), "{shown}");
        assert!(shown.contains(&format!("tmp: {runtime}")), "{shown}");
        assert!(shown.contains("own"), "{looser:?}: {shown}");
    }
    // The control: a job confined as the first finds what it left.
    let same = doors.run_in(session, &tight, "bash \"$TMPDIR/next.sh\"");
    assert!(same.contains("planted"), "the control: {same}");
    let open = doors.run_in(session, &["--sandbox", "off"], "echo \"tmp: $TMPDIR\"");
    assert!(!open.contains(&runtime), "{open}");
    let session_dir = doors.daemon.runtime_dir().join("sessions").join(session);
    assert!(session_dir.join("tmp").is_dir());
    let closed = doors.daemon.run_bashc(&["session", "close", session]);
    assert_eq!(closed.status.code(), Some(0), "{}", show(&closed));
    assert!(
        wait_until(Duration::from_secs(10), || !session_dir.exists()),
        "{} outlived its session",
        session_dir.display()
    );
}

const FLOOD: &str = r#"import os, socket, sys, time
hello = open(sys.argv[1], "rb").read()
count, told, marker = int(sys.argv[2]), sys.argv[3], sys.argv[4]
channel = socket.socket(fileno=int(os.environ["BASHD_CHANNEL"]))
held = []
for _ in range(count):
    mine, theirs = socket.socketpair()
    socket.send_fds(channel, [b"c"], [theirs.fileno()])
    theirs.close()
    try:
        mine.sendall(hello)
    except OSError:
        pass
    held.append(mine)
# Each end is answered: a Welcome, or why not and closed (or closed without a word,
# past as many refusals at once). What were the refused told?
got, closed = {}, set()
deadline = time.time() + 30
while time.time() < deadline and len(closed | set(got)) < len(held):
    for n, sock in enumerate(held):
        if n in closed:
            continue
        try:
            chunk = sock.recv(4096, socket.MSG_DONTWAIT)
        except OSError:
            continue
        if chunk:
            got[n] = got.get(n, b"") + chunk
        else:
            closed.add(n)
    time.sleep(0.1)
time.sleep(0.5)
for n, sock in enumerate(held):
    try:
        got[n] = got.get(n, b"") + sock.recv(4096, socket.MSG_DONTWAIT)
    except OSError:
        pass
open(told, "wb").write(b"\n".join(g for g in got.values() if b"already" in g))
open(marker, "w").write("holding\n")
time.sleep(600)
"#;

/// The protocol the daemon speaks, as `bashc status` says it (`... (protocol 9),
/// ...`): the test's own may be another when it runs against another build's binaries
/// (`BASHD_TEST_BIN_DIR`), and a `Hello` of another protocol is closed at once.
fn daemon_protocol(daemon: &Daemon) -> u32 {
    let status = daemon.run_bashc(&["status"]);
    let text = String::from_utf8_lossy(&status.stdout);
    text.split("(protocol ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(PROTOCOL_VERSION)
}

/// A job of `session` that sends `count` ends through its channel, each with a valid
/// `Hello`, keeps them, writes what the refused ones were told to `told-TAG` and then
/// `holding-TAG`; its job id.
fn flood(doors: &Doors, session: &str, tag: &str, count: usize) -> String {
    let mut hello = BytesMut::new();
    ClientCodec::default()
        .encode(
            ClientFrame::Hello(Hello {
                protocol: daemon_protocol(&doors.daemon),
                client: "i42 flood".into(),
                pid: std::process::id(),
            }),
            &mut hello,
        )
        .unwrap();
    let hello_path = doors.ws.join("hello.bin");
    std::fs::write(&hello_path, &hello).unwrap();
    let script = doors.script("flood.py", FLOOD);
    let command = format!(
        "{bashc} exec -- echo nested-before > before-{tag}; /usr/bin/python3 {} {} {count} told-{tag} holding-{tag} i42flood",
        script.display(),
        hello_path.display(),
        bashc = bin_path("bashc").display(),
    );
    let started = doors.exec(
        session,
        &[
            "--sandbox",
            "workspace-write",
            "--net",
            "off",
            "--mode",
            "background",
        ],
        &command,
    );
    assert_eq!(started.status.code(), Some(0), "{}", show(&started));
    json(&started)["job"].as_str().unwrap().to_owned()
}

/// Hole 6: a confined job sent more socket pair ends through its channel than the
/// daemon's `max_connections`, each with a valid `Hello`, and every client was locked
/// out for as long as the job lived: `bashc status`, other sessions' `exec`, and the
/// `bashc kill` that would have ended it. A job's channel holds 64 connections at
/// once now, and all jobs together at most `max_connections`, counted apart from the
/// socket's; the one past a limit is told which. While two such jobs hold their
/// share, the person's requests all get through, and the kills leave nothing of the
/// jobs alive.
/// (Issue 42.)
#[test]
fn a_job_that_floods_its_channel_locks_nobody_out() {
    let doors = Doors::start("[limits]\nmax_connections = 100\n");
    // One after the other: the first holds its 64, the second the 36 left.
    let mut told = String::new();
    let mut jobs = Vec::new();
    for (session, tag) in [("i42-flood-a", "a"), ("i42-flood-b", "b")] {
        jobs.push((session, flood(&doors, session, tag, 300)));
        let marker = doors.ws.join(format!("holding-{tag}"));
        assert!(
            wait_until(Duration::from_secs(60), || marker.exists()),
            "the flood {tag} never finished: {}",
            doors.daemon.log()
        );
        // Within its limit, the job's own bashc worked.
        let before = std::fs::read_to_string(doors.ws.join(format!("before-{tag}"))).unwrap();
        assert!(before.contains("nested-before"), "{tag}: {before}");
        told.push_str(&String::from_utf8_lossy(
            &std::fs::read(doors.ws.join(format!("told-{tag}"))).unwrap(),
        ));
        // The person's own requests get through while the jobs hold their
        // connections.
        let status = doors.daemon.run_bashc(&["status"]);
        assert_eq!(status.status.code(), Some(0), "{tag}: {}", show(&status));
        let other = doors.run_in("i42-other", &[], "echo other-ok");
        assert!(other.contains("other-ok"), "{tag}: {other}");
    }
    // The connections past a limit were told which: the job's own, and (the second
    // job's, past the 36 left of the 100) all jobs' together.
    for limit in [
        "already holds 64 connections to bashd through its channel",
        "already serves 100 connections from inside sandboxed jobs",
    ] {
        assert!(
            told.contains(limit),
            "{limit}: the refused were told {told:?}"
        );
    }
    let floods: Vec<u32> = doors
        .daemon
        .job_processes()
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| line.contains("i42flood"))
        })
        .collect();
    assert_eq!(floods.len(), 2, "the floods' processes are not alive");
    for (session, job) in &jobs {
        let killed = doors
            .daemon
            .bashc()
            .args(["kill", "--session", session, job])
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&killed.stderr).contains("connections"),
            "{}",
            show(&killed)
        );
        assert!(
            matches!(killed.status.code(), Some(143 | 137)),
            "{}",
            show(&killed)
        );
    }
    assert!(
        wait_until(Duration::from_secs(20), || {
            floods
                .iter()
                .all(|pid| !Path::new(&format!("/proc/{pid}")).exists())
                && doors.daemon.job_processes().is_empty()
        }),
        "the floods' processes outlived the kills: {:?}",
        doors.daemon.job_processes()
    );
    let status = doors.daemon.run_bashc(&["status"]);
    assert_eq!(status.status.code(), Some(0), "{}", show(&status));
}

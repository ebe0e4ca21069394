//! One network per session and network setting (issue 43): the confined jobs of a
//! session with `--net off` (or `allow-list`) share one network namespace, so a server
//! one call starts is reached by the next call, by `wait --port` and, published by
//! bashd, from the host; another session's jobs do not reach it. An `allow-list` job
//! gets the proxy's variables, whatever its request's environment says, and the
//! proxy's port listens. No job kills the network's holder or changes the namespace,
//! and the holders are gone after `bashc stop` and after their session is closed.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use bashd_tests::procs::{all_pids, parent_pid};
use bashd_tests::{Daemon, alive, wait_until};

use crate::{json, show};

/// A port free on the host now: the job's server takes it in the session network, and
/// bashd publishes it on the host at the same port.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The daemon's session-network holders, by their name in `/proc`.
fn holders(daemon: &Daemon) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&pid| parent_pid(pid) == Some(daemon.pid()) && alive(pid))
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "bashd-network")
        })
        .collect()
}

/// `bashc exec --json ARGS -- COMMAND` in `session`.
fn exec(daemon: &Daemon, session: &str, args: &[&str], command: &str) -> std::process::Output {
    let all = [&["exec", "--json"][..], args, &["--", command]].concat();
    daemon.run_bashc_in(session, &all)
}

/// A one-line HTTP server on `port` of the job's loopback, in the background.
fn serve(daemon: &Daemon, session: &str, net: &str, port: u16) -> String {
    daemon.background_in(
        session,
        &["--net", net],
        &format!("exec python3 -m http.server -b 127.0.0.1 {port}"),
    )
}

/// What the host gets at `127.0.0.1:port` for a GET of `/`, if anything answers.
fn get_from_host(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    (!answer.is_empty()).then_some(answer)
}

/// A bash line that prints `reached` or `unreached` for `127.0.0.1:port`.
fn probe(port: u16) -> String {
    format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo reached || echo unreached")
}

#[test]
fn a_server_one_call_starts_is_reached_by_the_next_call_by_wait_port_and_from_the_host() {
    let daemon = Daemon::start();
    let port = free_port();
    let server = serve(&daemon, "net-a", "off", port);
    let waited = daemon.run_bashc_in(
        "net-a",
        &[
            "wait",
            &server,
            "--port",
            &port.to_string(),
            "--timeout",
            "20",
        ],
    );
    assert_eq!(waited.status.code(), Some(0), "{}", show(&waited));
    // The result says where the host reaches it.
    assert!(
        String::from_utf8_lossy(&waited.stdout)
            .contains(&format!("published on the host at 127.0.0.1:{port}")),
        "{}",
        show(&waited)
    );

    // The next confined call of the session reaches it, with curl and with bash.
    let next = exec(
        &daemon,
        "net-a",
        &["--net", "off"],
        &format!(
            "curl -s -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.1:{port}/; {}",
            probe(port)
        ),
    );
    assert_eq!(
        json(&next)["stdout"]["text"],
        "200\nreached\n",
        "{}",
        show(&next)
    );

    // Another session's job with the network off has a network of its own.
    let other = exec(&daemon, "net-b", &["--net", "off"], &probe(port));
    assert_eq!(
        json(&other)["stdout"]["text"],
        "unreached\n",
        "{}",
        show(&other)
    );

    // The host reaches it where bashd published it, and `jobs --json` says where.
    assert!(
        wait_until(Duration::from_secs(10), || get_from_host(port)
            .is_some_and(|answer| answer.starts_with("HTTP/1.0 200"))),
        "the server is not published on the host's 127.0.0.1:{port}"
    );
    let jobs = daemon.run_bashc_in("net-a", &["jobs", "--json"]);
    let listing = json(&jobs);
    let job = listing
        .as_array()
        .or_else(|| listing["jobs"].as_array())
        .unwrap()
        .iter()
        .find(|job| job["job"] == server.as_str())
        .cloned()
        .unwrap_or_default();
    assert_eq!(job["ports"][0]["port"], port, "{}", show(&jobs));
    assert_eq!(job["ports"][0]["published"], port, "{}", show(&jobs));

    // Once the server is gone, so is its port on the host.
    // `kill` answers with the job's end: 143, its SIGTERM.
    let killed = daemon.run_bashc_in("net-a", &["kill", &server]);
    assert_eq!(killed.status.code(), Some(143), "{}", show(&killed));
    assert!(
        wait_until(Duration::from_secs(10), || TcpStream::connect((
            "127.0.0.1",
            port
        ))
        .is_err()),
        "127.0.0.1:{port} still answers on the host after its server ended"
    );
}

#[test]
fn an_allow_list_job_gets_the_proxy_variables_over_its_requests_and_the_proxy_port_listens() {
    let daemon = Daemon::start();
    let out = daemon
        .bashc_in("net-p")
        .env("HTTP_PROXY", "http://planted.example:1")
        .env("no_proxy", "*")
        .args(["exec", "--json", "--net", "allow-list", "--"])
        .arg(format!(
            "env | grep -i -E '^(http|https|all|no)_proxy=' | sort; {}; {}",
            probe(3128),
            probe(1080)
        ))
        .output()
        .unwrap();
    let stdout = json(&out)["stdout"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let expected = [
        "ALL_PROXY=socks5h://127.0.0.1:1080",
        "HTTPS_PROXY=http://127.0.0.1:3128",
        "HTTP_PROXY=http://127.0.0.1:3128",
        "NO_PROXY=localhost,127.0.0.1,::1",
        "all_proxy=socks5h://127.0.0.1:1080",
        "http_proxy=http://127.0.0.1:3128",
        "https_proxy=http://127.0.0.1:3128",
        "no_proxy=localhost,127.0.0.1,::1",
        // The kernel takes the connection into the listener's backlog: the holder made
        // the listeners before any job ran, and bashd holds them for the proxy.
        "reached",
        "reached",
    ];
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        expected,
        "{}",
        show(&out)
    );
    // Control: a job with the network off has none of them, and no proxy port.
    let off = exec(
        &daemon,
        "net-p",
        &["--net", "off"],
        &format!("env | grep -i -c _proxy=; {}", probe(3128)),
    );
    assert_eq!(
        json(&off)["stdout"]["text"],
        "0\nunreached\n",
        "{}",
        show(&off)
    );
}

#[test]
fn a_job_cannot_kill_the_holder_nor_change_the_network_and_an_unsharing_grandchild_stays_off_the_host()
 {
    let daemon = Daemon::start();
    let host = TcpListener::bind("127.0.0.1:0").unwrap();
    let host_port = host.local_addr().unwrap().port();
    let port = free_port();
    let server = serve(&daemon, "net-k", "off", port);
    let waited = daemon.run_bashc_in(
        "net-k",
        &[
            "wait",
            &server,
            "--port",
            &port.to_string(),
            "--timeout",
            "20",
        ],
    );
    assert_eq!(waited.status.code(), Some(0), "{}", show(&waited));
    let found = holders(&daemon);
    assert_eq!(
        found.len(),
        1,
        "one holder for the session's network: {found:?}"
    );
    let holder = found[0];
    let command = format!(
        "kill -9 {holder} 2>/dev/null && echo killed || echo not-killed; \
         ip link add bashd-t0 type dummy 2>/dev/null && echo link-added || echo no-link; \
         ip addr add 10.43.0.1/32 dev lo 2>/dev/null && echo addr-added || echo no-addr; \
         ip link set lo down 2>/dev/null && echo lo-down || echo lo-up; \
         (unshare -U -n bash -c '{host}') 2>/dev/null || echo unshare-refused; \
         bash -c '{host}' & wait; \
         {own}",
        host = probe(host_port),
        own = probe(port),
    );
    let out = exec(&daemon, "net-k", &["--net", "off"], &command);
    assert_eq!(
        json(&out)["stdout"]["text"],
        "not-killed\nno-link\nno-addr\nlo-up\nunreached\nunreached\nreached\n",
        "{}",
        show(&out)
    );
    assert!(alive(holder), "the holder died");
    // Control: the host's listener answers the host.
    assert!(TcpStream::connect(("127.0.0.1", host_port)).is_ok());
}

#[test]
fn the_holders_go_with_their_session_and_with_stop() {
    let mut daemon = Daemon::start();
    for (session, net) in [("net-x", "off"), ("net-x", "allow-list"), ("net-y", "off")] {
        let out = exec(&daemon, session, &["--net", net], "true");
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    }
    let all = holders(&daemon);
    assert_eq!(all.len(), 3, "a holder per session and setting: {all:?}");
    // Another job of the same session and setting makes no new one.
    let again = exec(&daemon, "net-x", &["--net", "off"], "true");
    assert_eq!(again.status.code(), Some(0), "{}", show(&again));
    assert_eq!(holders(&daemon).len(), 3);

    let closed = daemon.run_bashc_in("net-x", &["session", "close", "net-x"]);
    assert_eq!(closed.status.code(), Some(0), "{}", show(&closed));
    assert!(
        wait_until(Duration::from_secs(10), || holders(&daemon).len() == 1),
        "net-x's holders are still there: {:?}",
        holders(&daemon)
    );
    let left = holders(&daemon);
    let stopped = daemon.run_bashc(&["stop"]);
    assert_eq!(stopped.status.code(), Some(0), "{}", show(&stopped));
    let _ = daemon.child_mut().wait();
    assert!(
        wait_until(Duration::from_secs(10), || left
            .iter()
            .all(|&pid| !alive(pid))),
        "a holder outlived bashc stop: {left:?}"
    );
}

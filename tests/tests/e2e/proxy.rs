//! The allow-list through bashd's proxy, end to end (issue 43): a confined job with
//! `--net allow-list` reaches a listed host over HTTP forwarding, `CONNECT` and
//! SOCKS5 by the proxy variables its session network gives it; an unlisted host is
//! refused by the proxy (403, nothing reaches it) and named in the result; no way
//! around the proxy reaches even the listed host. All on loopback: the listed host is
//! 127.0.0.2, the unlisted one 127.0.0.3, each a server of the test's own.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bashd_tests::Daemon;

use crate::show;

/// A server on `ip` that answers every request with `hello from IP`, and counts the
/// connections it got.
pub(crate) fn server(ip: &str) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    (port, serve(listener, format!("hello from {ip}")))
}

/// Answers every request on `listener` with `body`, in a thread of its own; counts
/// the connections.
pub(crate) fn serve(listener: TcpListener, body: String) -> Arc<AtomicUsize> {
    let count = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&count);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counted.fetch_add(1, Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let _ = write!(
                stream,
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    count
}

#[test]
fn a_listed_host_is_reached_through_the_proxy_and_an_unlisted_one_is_refused_and_named() {
    let (listed, _) = server("127.0.0.2");
    let (unlisted, reached_unlisted) = server("127.0.0.3");
    let daemon = Daemon::start_with_config("[sandbox]\nallow_hosts = [\"127.0.0.2\"]\n");
    let run = |command: &str| {
        daemon.run_bashc_in(
            "proxied",
            &[
                "exec",
                "--sandbox",
                "workspace-write",
                "--net",
                "allow-list",
                "--",
                command,
            ],
        )
    };
    let url = format!("http://127.0.0.2:{listed}/x");
    // HTTP forwarding (http_proxy), CONNECT (a tunnel through it) and SOCKS5 with
    // the name resolved by the proxy (all_proxy).
    for (how, command) in [
        ("http", format!("curl -m 20 -sS {url}")),
        ("connect", format!("curl -m 20 -sS --proxytunnel {url}")),
        ("socks5", format!("curl -m 20 -sS -x \"$all_proxy\" {url}")),
    ] {
        let out = run(&command);
        assert_eq!(out.status.code(), Some(0), "{how}: {}", show(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("hello from 127.0.0.2"),
            "{how}: {}",
            show(&out)
        );
    }

    // An unlisted host: the proxy answers 403 and nothing reaches the host; the
    // result names it.
    let out = run(&format!(
        "curl -m 20 -s -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.3:{unlisted}/"
    ));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(said.contains("403\n"), "{}", show(&out));
    // The refusal reaches the session from the proxy, not from the job: told with
    // this result when it came first, else with the session's next call.
    let refused = format!("network: refused 127.0.0.3:{unlisted}, not on the allow-list");
    let next = daemon.run_bashc_in("proxied", &["exec", "--", "true"]);
    let told = [&out, &next].iter().any(|out| show(out).contains(&refused));
    assert!(told, "{}\n{}", show(&out), show(&next));
    // Around the proxy, even the listed host is out of reach: no route but the
    // session's loopback.
    let out = run(&format!(
        "curl -m 20 -sS --noproxy '*' {url} || echo direct refused; \
         (exec 3<>/dev/tcp/127.0.0.2/{listed}) 2>/dev/null && echo raw reached || echo raw refused"
    ));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        said.contains("direct refused") && said.contains("raw refused"),
        "{}",
        show(&out)
    );
    assert_eq!(reached_unlisted.load(Ordering::SeqCst), 0);
    // Control: the unlisted server answers a connection from the host itself.
    assert!(std::net::TcpStream::connect(("127.0.0.3", unlisted)).is_ok());
}

/// A host a person allows with `bashc allow HOST:PORT --session S` is reached by that
/// session's confined jobs through the proxy, and by no other session's; revoked, it
/// is refused again from the next connection (issue 44).
#[test]
fn a_host_the_person_allows_is_reached_by_that_session_until_revoked() {
    let (unlisted, _) = server("127.0.0.3");
    let daemon = Daemon::start_with_config("[sandbox]\nallow_hosts = [\"127.0.0.2\"]\n");
    let code = |session: &str| {
        let out = daemon.run_bashc_in(
            session,
            &[
                "exec",
                "--json",
                "--sandbox",
                "workspace-write",
                "--net",
                "allow-list",
                "--",
                &format!(
                    "curl -m 20 -s -o /dev/null -w '%{{http_code}}' http://127.0.0.3:{unlisted}/"
                ),
            ],
        );
        crate::json(&out)["stdout"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(code("granted"), "403");
    let host = format!("127.0.0.3:{unlisted}");
    let out = daemon.run_bashc(&["allow", &host, "--session", "granted"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(code("granted"), "200");
    assert_eq!(
        code("another"),
        "403",
        "a grant for one session reaches no other"
    );
    let out = daemon.run_bashc(&["allow", "--revoke", &host]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(code("granted"), "403");
}

/// A host off the list is refused at once, and the refusal opens an ask for the person
/// (issue 44): the proxy's 403 and the session's inbox name it (`ask aN`), a second
/// refusal of the same host names the same ask, and `bashc allow --ask aN` lets the
/// session reach the host from its next connection; another session stays refused.
/// Positive control: the listed host is reached all along. On main the refusal
/// opened no ask and named none.
#[test]
fn a_refused_host_opens_an_ask_and_its_grant_holds_from_the_next_connection() {
    let (listed, _) = server("127.0.0.2");
    let (unlisted, reached) = server("127.0.0.3");
    let daemon = Daemon::start_with_config("[sandbox]\nallow_hosts = [\"127.0.0.2\"]\n");
    let run = |session: &str, command: &str| {
        daemon.run_bashc_in(
            session,
            &[
                "exec",
                "--sandbox",
                "workspace-write",
                "--net",
                "allow-list",
                "--",
                command,
            ],
        )
    };
    let fetch = |session: &str| {
        run(
            session,
            &format!("curl -m 20 -s -D - http://127.0.0.3:{unlisted}/; echo"),
        )
    };
    let out = run(
        "asker",
        &format!("curl -m 20 -sS http://127.0.0.2:{listed}/"),
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("hello from 127.0.0.2"),
        "{}",
        show(&out)
    );

    let start = std::time::Instant::now();
    let out = fetch("asker");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        start.elapsed() < std::time::Duration::from_secs(15),
        "refused at once, not held for the person"
    );
    assert!(said.contains("HTTP/1.1 403 "), "{}", show(&out));
    let ask = said
        .lines()
        .find_map(|line| line.strip_prefix("X-Bashd-Ask: "))
        .unwrap_or_else(|| panic!("the refusal names no ask: {}", show(&out)))
        .trim()
        .to_owned();
    assert!(
        said.contains(&format!(
            "ask {ask} is open: the person allows it from a terminal with bashc allow --ask {ask}"
        )),
        "{}",
        show(&out)
    );
    // The session is told too, where the agent looks: with this result or the next.
    let line =
        format!("network: refused 127.0.0.3:{unlisted}, not on the allow-list; ask {ask} is open");
    let next = daemon.run_bashc_in("asker", &["exec", "--", "true"]);
    assert!(
        [&out, &next].iter().any(|out| show(out).contains(&line)),
        "{}\n{}",
        show(&out),
        show(&next)
    );
    // The person sees it pending, and a second refusal asks nothing new.
    let listed_asks = daemon.run_bashc(&["allow", "--list"]);
    let listing = String::from_utf8_lossy(&listed_asks.stdout).into_owned();
    assert!(
        listing.contains(&ask) && listing.contains(&format!("127.0.0.3:{unlisted}")),
        "{}",
        show(&listed_asks)
    );
    let again = fetch("asker");
    let named = String::from_utf8_lossy(&again.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("X-Bashd-Ask: "))
        .map(|ask| ask.trim().to_owned());
    assert_eq!(named.as_ref(), Some(&ask), "{}", show(&again));
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "nothing reached the host"
    );

    let granted = daemon.run_bashc(&["allow", "--ask", &ask]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    let out = fetch("asker");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("hello from 127.0.0.3"),
        "{}",
        show(&out)
    );
    let other = fetch("another");
    assert!(
        String::from_utf8_lossy(&other.stdout).contains("HTTP/1.1 403 "),
        "the grant is the asking session's: {}",
        show(&other)
    );
    // Taken back, it is refused again from the next connection.
    let revoked = daemon.run_bashc(&["allow", "--revoke", &ask]);
    assert_eq!(revoked.status.code(), Some(0), "{}", show(&revoked));
    let out = fetch("asker");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("HTTP/1.1 403 "),
        "{}",
        show(&out)
    );
}

/// The allow-list from an MCP agent (`bashc mcp`, `net: "allow-list"`): the listed host
/// is reached through the proxy, and an unlisted one is refused by it, the refusal
/// naming the ask it opened in the tool result the model reads. On main the refusal
/// named no ask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_bashc_mcp_the_allow_list_reaches_a_listed_host_and_names_the_ask_of_another() {
    use crate::mcp::{call, connect, is_error, text};
    let (listed, _) = server("127.0.0.2");
    let (unlisted, reached) = server("127.0.0.3");
    let daemon = Daemon::start_with_config("[sandbox]\nallow_hosts = [\"127.0.0.2\"]\n");
    let client = connect(&daemon).await;
    let bash = |command: String| {
        serde_json::json!({
            "command": command,
            "sandbox": "workspace-write",
            "net": "allow-list",
        })
    };
    let result = call(
        &client,
        "bash",
        bash(format!("curl -m 20 -sS http://127.0.0.2:{listed}/")),
    )
    .await;
    let said = text(&result);
    assert!(!is_error(&result), "{said}");
    assert!(
        said.contains("hello from 127.0.0.2") && said.contains("network allow-list"),
        "{said}"
    );
    let result = call(
        &client,
        "bash",
        bash(format!("curl -m 20 -s -D - http://127.0.0.3:{unlisted}/")),
    )
    .await;
    let said = text(&result);
    assert!(said.contains("HTTP/1.1 403 "), "{said}");
    assert!(
        said.contains("X-Bashd-Ask: a") && said.contains("bashc allow --ask a"),
        "{said}"
    );
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "nothing reached the host"
    );
    client.cancel().await.unwrap();
}

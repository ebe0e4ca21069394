//! Confined by default (issue 44): with `[sandbox]` silent, an agent's `bashc mcp`
//! jobs run `workspace-write` in their roots on the allow-list, and that is their
//! floor; the command line stays unconfined. The test is the MCP client, speaking
//! JSON-RPC over `bashc mcp`'s stdio.
//!
//! - An agent's everyday work passes with no ask: `pip install` and `npm install`
//!   from a loopback registry the daemon's own tool configuration names, a build and
//!   its tests, a dev server reached by the next call's `curl`; a commit once the
//!   person grants `.git` for the session.
//! - What an agent (or a prompt injected into it) might try is refused and told: a
//!   host off the list, writes outside its roots and into the person's caches,
//!   `sandbox: "off"` with no person to say yes, a registry planted in the workspace
//!   or the request's environment.
//! - Controls: the command line runs unconfined; `default = "off"` with
//!   `network = "on"` written turns an agent's confinement off.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bashd_tests::{Daemon, KillOnDrop, wait_until};
use serde_json::{Value, json};

use crate::{json, show};

/// Long enough for an MCP call to end by bashd's default `[mcp] max_call_secs` (50 s).
const CALL: Duration = Duration::from_secs(90);
const SOON: Duration = Duration::from_secs(30);
/// The loopback address the person's registries listen on: not `127.0.0.1`, which a
/// job's `no_proxy` sends to its own network's loopback rather than the proxy.
const REGISTRY_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
/// Where a planted registry listens: on no list of the person's.
const PLANTED_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
/// What an agent's result says its job ran under, by default.
const CONFINED: &str = "sandbox: workspace-write, network allow-list";

/// Whether `program ARGS` runs here.
fn have(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A free port on `ip`.
fn free_port(ip: Ipv4Addr) -> u16 {
    TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `python3 -m http.server` over `dir` on `ip`, once it answers; killed on drop.
fn serve(dir: &Path, ip: Ipv4Addr) -> (KillOnDrop, u16) {
    let port = free_port(ip);
    let server = KillOnDrop(
        Command::new("python3")
            .args(["-m", "http.server", &port.to_string(), "--bind"])
            .arg(ip.to_string())
            .arg("--directory")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start python3 -m http.server"),
    );
    assert!(
        wait_until(SOON, || TcpStream::connect((ip, port)).is_ok()),
        "the registry on {ip}:{port} did not answer"
    );
    (server, port)
}

/// An MCP client of `bashc mcp`, the test speaking JSON-RPC on its stdio, with no
/// elicitation: an ask reaches it only as `ask aN pending`.
struct Agent {
    _server: KillOnDrop,
    to: UnixStream,
    from: BufReader<UnixStream>,
    id: i64,
}

impl Agent {
    /// `bashc mcp` of `session`, started in `ws` (its writable root) with `env` over
    /// the test's environment.
    fn start(daemon: &Daemon, ws: &Path, session: &str, env: &[(&str, &str)]) -> Agent {
        let (server, to, from) = daemon.mcp_over_socket(session, ws, env, CALL);
        let mut agent = Agent {
            _server: server,
            to,
            from,
            id: 1,
        };
        agent.send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "i44-agent", "version": "0"}}}),
        );
        let init = agent.response(1);
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        agent.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        agent
    }

    fn send(&mut self, message: Value) {
        self.to
            .write_all(format!("{message}\n").as_bytes())
            .unwrap();
        self.to.flush().unwrap();
    }

    /// The response to request `id`, past any notification.
    fn response(&mut self, id: i64) -> Value {
        loop {
            let mut line = String::new();
            let n = self
                .from
                .read_line(&mut line)
                .expect("bashc mcp said nothing in time");
            assert!(n > 0, "bashc mcp closed its stdout");
            let message: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    }

    /// Sends a call of `tool` and returns its id, not waiting for the answer.
    fn start_call(&mut self, tool: &str, arguments: Value) -> i64 {
        self.id += 1;
        let id = self.id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
        id
    }

    /// The answer to call `id`: whether it is an error, and its text.
    fn answer(&mut self, id: i64) -> (bool, String) {
        let response = self.response(id);
        let result = &response["result"];
        let text = result["content"]
            .as_array()
            .unwrap_or_else(|| panic!("no content: {response}"))
            .iter()
            .filter_map(|c| c["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        (result["isError"] == true, text)
    }

    fn call(&mut self, tool: &str, arguments: Value) -> (bool, String) {
        let id = self.start_call(tool, arguments);
        self.answer(id)
    }

    /// A `bash` call of `command` that must succeed; its text.
    fn ok(&mut self, command: &str) -> String {
        let (error, text) = self.call("bash", json!({"command": command, "timeout_secs": 120}));
        assert!(!error, "{command}:\n{text}");
        text
    }
}

/// The asks `bashc allow --list --json` shows, pending or answered.
fn asks(daemon: &Daemon) -> Vec<Value> {
    let out = daemon.run_bashc(&["allow", "--list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    json(&out)["asks"].as_array().cloned().unwrap_or_default()
}

/// Waits until `bashc status` lists `entry` among the hosts the person's tools fetch
/// from (read off the daemon's start path).
fn wait_for_source(daemon: &Daemon, entry: &str) {
    let mut last = Value::Null;
    let listed = wait_until(SOON, || {
        last = json(&daemon.run_bashc(&["status", "--json"]));
        last["tool_sources"]
            .as_array()
            .is_some_and(|s| s.iter().any(|s| s["entry"] == entry))
    });
    assert!(listed, "{entry} is not among the tool sources: {last}");
}

/// A workspace under the daemon's scratch, resolved (jobs are told real paths).
fn workspace(daemon: &Daemon, name: &str) -> PathBuf {
    let ws = daemon.scratch().join(name);
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::canonicalize(&ws).unwrap()
}

/// A pure-Python wheel of package `i44pkg` and a packed npm package `i44npm` in a
/// registry directory served as both a simple index (`/simple/`) and an npm
/// registry (`/i44npm`, its tarball under `/tarballs/`), for the host `base` names.
fn registry(dir: &Path, base: &str) {
    let script = r#"
import base64, hashlib, io, json, os, sys, tarfile, zipfile
root, base = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(root, "simple", "i44pkg"), exist_ok=True)
files = {
    "i44pkg/__init__.py": b"VALUE = 'i44 from the loopback index'\n",
    "i44pkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: i44pkg\nVersion: 0.1\n",
    "i44pkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: i44\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = ""
for name, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += f"{name},sha256={digest},{len(data)}\n"
record += "i44pkg-0.1.dist-info/RECORD,,\n"
files["i44pkg-0.1.dist-info/RECORD"] = record.encode()
with zipfile.ZipFile(os.path.join(root, "simple", "i44pkg", "i44pkg-0.1-py3-none-any.whl"), "w") as wheel:
    for name, data in files.items():
        wheel.writestr(name, data)
os.makedirs(os.path.join(root, "tarballs"), exist_ok=True)
packed = io.BytesIO()
with tarfile.open(fileobj=packed, mode="w:gz") as tar:
    for name, data in {
        "package/package.json": json.dumps({"name": "i44npm", "version": "1.0.0", "main": "index.js"}).encode(),
        "package/index.js": b"module.exports = 'i44 from the loopback registry';\n",
    }.items():
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
tgz = packed.getvalue()
with open(os.path.join(root, "tarballs", "i44npm-1.0.0.tgz"), "wb") as f:
    f.write(tgz)
doc = {"name": "i44npm", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": {
    "name": "i44npm", "version": "1.0.0", "main": "index.js",
    "dist": {"tarball": base + "tarballs/i44npm-1.0.0.tgz",
             "shasum": hashlib.sha1(tgz).hexdigest(),
             "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()}}}}
with open(os.path.join(root, "i44npm"), "w") as f:
    json.dump(doc, f)
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(dir)
        .arg(base)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));
}

/// `pip install` and `npm install` from the registries the daemon's own environment
/// names (`PIP_INDEX_URL`, `npm_config_registry`: the tools' configuration, never the
/// request's) run under the default with no ask; each result says its job was
/// confined. On main the jobs ran unconfined.
#[test]
fn an_agent_installs_packages_from_its_tools_registries_with_no_ask() {
    let pip = have("python3", &["-m", "pip", "--version"]);
    let npm = have("npm", &["--version"]) && have("node", &["--version"]);
    if !pip && !npm {
        eprintln!("skipped: neither python3 with pip nor npm is here");
        return;
    }
    let mut daemon = Daemon::unstarted();
    let dir = daemon.scratch().join("registry");
    std::fs::create_dir_all(&dir).unwrap();
    // The server's port is known once it runs, and the packument names it: written
    // first for a port found free, then served.
    let port = free_port(REGISTRY_IP);
    let base = format!("http://{REGISTRY_IP}:{port}/");
    registry(&dir, &base);
    let _server = KillOnDrop(
        Command::new("python3")
            .args(["-m", "http.server", &port.to_string(), "--bind"])
            .arg(REGISTRY_IP.to_string())
            .arg("--directory")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(wait_until(SOON, || TcpStream::connect((REGISTRY_IP, port)).is_ok()));
    let mut command = daemon.bashd_command();
    command
        .env("PIP_INDEX_URL", format!("{base}simple/"))
        .env("npm_config_registry", &base);
    daemon.start_with(command);
    let entry = format!("{REGISTRY_IP}:{port}");
    wait_for_source(&daemon, &entry);

    // The interpreter itself, not a version manager's shim (pyenv's rehashes after
    // an install, in its own directory, which no job of the workspace may write).
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_else(|_| "python3".to_owned());
    let ws = workspace(&daemon, "ws-install");
    let mut agent = Agent::start(&daemon, &ws, "mcp-i44-install", &[]);
    if pip {
        let text = agent.ok(&format!(
            "{python} -m pip install -q --disable-pip-version-check --target ./vendor i44pkg && PYTHONPATH=vendor {python} -c 'import i44pkg; print(i44pkg.VALUE)'"
        ));
        assert!(text.contains("i44 from the loopback index"), "{text}");
        assert!(text.contains(CONFINED), "{text}");
    } else {
        eprintln!("pip part skipped: python3 has no pip here");
    }
    if npm {
        std::fs::write(
            ws.join("package.json"),
            r#"{"name": "ws", "version": "1.0.0"}"#,
        )
        .unwrap();
        let text = agent.ok(
            "npm install --no-audit --no-fund --loglevel=error i44npm && node -e 'console.log(require(\"i44npm\"))'",
        );
        assert!(text.contains("i44 from the loopback registry"), "{text}");
        assert!(text.contains(CONFINED), "{text}");
        assert!(ws.join("node_modules/i44npm/index.js").is_file());
    } else {
        eprintln!("npm part skipped: npm or node is not here");
    }
    assert_eq!(asks(&daemon), Vec::<Value>::new(), "an install asked");
}

/// A build and its tests, a dev server one call starts and the next call's `curl`
/// reaches, all with no ask; then a commit, which `.git` read-only refuses until the
/// person grants `.git` for the session (`bashc allow --ask ID --session-wide`), after
/// which the session's commits go through unasked.
#[test]
fn an_agent_builds_serves_and_commits_once_the_person_grants_git() {
    let daemon = Daemon::start();
    let ws = workspace(&daemon, "ws-build");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", show(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q"]);
    std::fs::write(
        ws.join("Makefile"),
        "hello: hello.c\n\tcc -o hello hello.c\ntest: hello\n\t./hello | grep -q 'i44 built' && echo 'tests passed'\n",
    )
    .unwrap();
    let mut agent = Agent::start(&daemon, &ws, "mcp-i44-build", &[]);

    let text = agent.ok(
        "printf '#include <stdio.h>\\nint main(void) { puts(\"i44 built\"); return 0; }\\n' > hello.c && make -s test",
    );
    assert!(text.contains("tests passed"), "{text}");
    assert!(text.contains(CONFINED), "{text}");
    assert!(ws.join("hello").is_file(), "the build wrote nothing");

    std::fs::write(ws.join("index.html"), "i44 dev server page\n").unwrap();
    let port = free_port(Ipv4Addr::LOCALHOST);
    let (error, text) = agent.call(
        "bash",
        json!({"command": format!("python3 -u -m http.server {port} --bind 127.0.0.1"),
            "wait_until": "Serving HTTP", "timeout_secs": 20}),
    );
    assert!(!error && text.contains("Serving HTTP"), "{text}");
    let server = crate::mcp::job_in(&text);
    let text = agent.ok(&format!("curl -sS http://127.0.0.1:{port}/index.html"));
    assert!(text.contains("i44 dev server page"), "{text}");
    agent.call("bash_kill", json!({"job": server}));
    assert_eq!(asks(&daemon), Vec::<Value>::new(), "everyday work asked");

    let commit = "git add hello.c Makefile && git -c user.name=t -c user.email=t@example.com commit -qm i44 && echo committed";
    let (error, text) = agent.call("bash", json!({"command": commit}));
    assert!(error && !text.contains("committed"), "{text}");
    assert!(text.contains("workspace-write"), "{text}");
    assert_eq!(asks(&daemon), Vec::<Value>::new(), "a plain commit asked");

    // The agent asks to write .git; the person grants it for the session.
    let id = agent.start_call("bash", json!({"command": commit, "git_write": true}));
    let mut ask = String::new();
    assert!(
        wait_until(SOON, || {
            let pending = asks(&daemon);
            match pending.iter().find(|a| a["state"] == "pending") {
                Some(a) => {
                    ask = a["id"].as_str().unwrap().to_owned();
                    true
                }
                None => false,
            }
        }),
        "no ask came for .git: {:?}",
        asks(&daemon)
    );
    let granted = daemon.run_bashc(&["allow", "--ask", &ask, "--session-wide"]);
    assert_eq!(granted.status.code(), Some(0), "{}", show(&granted));
    let (error, text) = agent.answer(id);
    assert!(!error && text.contains("committed"), "{text}");
    assert!(git(&["log", "--oneline"]).contains("i44"));

    // Later commits of the session go through without asking again.
    let before = asks(&daemon).len();
    let (error, text) = agent.call(
        "bash",
        json!({"command": "git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m i44-again && echo committed",
            "git_write": true}),
    );
    assert!(!error && text.contains("committed"), "{text}");
    assert_eq!(
        asks(&daemon).len(),
        before,
        "the session-wide grant asked again"
    );
}

/// The daemon's fake `HOME`, holding the person's caches, and a workspace below it.
struct Person {
    daemon: Daemon,
    home: PathBuf,
    ws: PathBuf,
}

impl Person {
    /// A daemon whose `HOME` is a fake one, its config `config` (none: the default).
    fn start(config: Option<&str>) -> Person {
        let mut daemon = Daemon::unstarted();
        let home = daemon.scratch().join("i44-home");
        for dir in ["ws", ".cargo/registry/cache", ".npm/_cacache"] {
            std::fs::create_dir_all(home.join(dir)).unwrap();
        }
        let home = std::fs::canonicalize(&home).unwrap();
        if let Some(config) = config {
            daemon.write_config(config);
        }
        let mut command = daemon.bashd_command();
        command.env("HOME", &home);
        daemon.start_with(command);
        let ws = home.join("ws");
        Person { daemon, home, ws }
    }

    fn agent(&self, session: &str, env: &[(&str, &str)]) -> Agent {
        let home = self.home.to_str().unwrap();
        let mut all = vec![("HOME", home)];
        all.extend_from_slice(env);
        Agent::start(&self.daemon, &self.ws, session, &all)
    }
}

/// What an agent, or a prompt injected into it, might try under the default is
/// refused, and its result says so in words it can pass on: a host off the list,
/// writes outside its roots and into the person's caches, a registry planted in the
/// workspace or in the request's environment. On main each of these went through.
#[test]
fn an_agent_cannot_reach_unlisted_hosts_or_write_past_its_roots() {
    let person = Person::start(None);
    let planted_dir = person.daemon.scratch().join("planted");
    std::fs::create_dir_all(&planted_dir).unwrap();
    std::fs::write(planted_dir.join("payload"), "i44 planted payload\n").unwrap();
    let (_planted, port) = serve(&planted_dir, PLANTED_IP);
    let planted = format!("http://{PLANTED_IP}:{port}/");
    // Planted in the workspace, as a cloned repository might carry them.
    std::fs::write(person.ws.join(".npmrc"), format!("registry={planted}\n")).unwrap();
    std::fs::write(
        person.ws.join("pip.conf"),
        format!("[global]\nindex-url = {planted}simple/\n"),
    )
    .unwrap();
    // And in the environment the agent's requests carry.
    let pip_url = format!("{planted}simple/");
    let mut agent = person.agent(
        "mcp-i44-exfil",
        &[
            ("npm_config_registry", &planted),
            ("PIP_INDEX_URL", &pip_url),
            ("PIP_CONFIG_FILE", "pip.conf"),
        ],
    );

    // A host off the list: the proxy refuses it, in words the agent reads.
    let text = agent.ok(&format!("curl -sS {planted}payload"));
    assert!(!text.contains("i44 planted payload"), "{text}");
    assert!(
        text.contains(&format!(
            "refused {PLANTED_IP}:{port}, not on the allow-list"
        )),
        "the refusal was not told: {text}"
    );
    assert!(text.contains(CONFINED), "{text}");

    // Outside the roots, and into the person's caches (code the person runs later).
    let outside = person.daemon.scratch().join("outside-i44");
    let cargo = person.home.join(".cargo/registry/cache/planted-i44");
    let npm = person.home.join(".npm/_cacache/planted-i44");
    for target in [&outside, &cargo, &npm] {
        let (error, text) = agent.call(
            "bash",
            json!({"command": format!("echo planted > {}", target.display())}),
        );
        assert!(error, "{}: {text}", target.display());
        assert!(
            text.contains("Read-only file system") || text.contains("Permission denied"),
            "{text}"
        );
        assert!(text.contains("workspace-write"), "{text}");
        assert!(!target.exists(), "{} was written", target.display());
    }

    // The planted registries, named by the workspace's files and the request's
    // environment, do not widen the list: a tool that follows them is refused.
    let text = agent.ok(&format!(
        "curl -sS \"${{PIP_INDEX_URL:-{planted}simple/}}\"; echo; curl -sS {planted}simple/"
    ));
    let refusals = text
        .matches(&format!(
            "refused {PLANTED_IP}:{port}, not on the allow-list"
        ))
        .count();
    assert!(refusals >= 2, "{refusals} refusals told: {text}");
    // Once the daemon has read the person's tools (where there are any to read).
    let mut status = Value::Null;
    wait_until(Duration::from_secs(10), || {
        status = json(&person.daemon.run_bashc(&["status", "--json"]));
        status["tool_sources"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
    });
    assert!(
        !status["network"]["allow_hosts"]
            .to_string()
            .contains(&PLANTED_IP.to_string()),
        "{status}"
    );
    assert!(
        !status["tool_sources"]
            .to_string()
            .contains(&PLANTED_IP.to_string()),
        "{status}"
    );
}

/// `sandbox: "off"` (or the network on) with no person at hand is an ask, not a run:
/// the call says `ask aN pending` and where the person answers; a refusal or the
/// ask's expiry runs nothing, and a later call says so. On main it simply ran.
#[test]
fn an_agent_asking_for_no_sandbox_is_refused_on_decline_and_on_silence() {
    let person = Person::start(Some(
        "[mcp]\nmax_call_secs = 1\n\n[sandbox]\nask_secs = 3\n",
    ));
    let mut agent = person.agent("mcp-i44-off", &[]);
    let ran = person.daemon.scratch().join("unsandboxed-i44");
    let touch = format!("touch {}", ran.display());

    let (_, text) = agent.call("bash", json!({"command": touch, "sandbox": "off"}));
    assert!(
        text.contains("ask a1 pending") && text.contains("bashc allow"),
        "{text}"
    );
    let refused = person.daemon.run_bashc(&["allow", "--refuse", "a1"]);
    assert_eq!(refused.status.code(), Some(0), "{}", show(&refused));
    let text = agent.ok("true");
    assert!(
        text.contains("a1") && text.contains("refused"),
        "the refusal was not told: {text}"
    );

    let (_, text) = agent.call("bash", json!({"command": touch, "net": "on"}));
    assert!(text.contains("ask a2 pending"), "{text}");
    let expired = wait_until(SOON, || {
        asks(&person.daemon)
            .iter()
            .any(|a| a["id"] == "a2" && a["state"] == "expired")
    });
    assert!(expired, "{:?}", asks(&person.daemon));
    let text = agent.ok("true");
    assert!(text.contains("a2") && text.contains("expired"), "{text}");
    assert!(!ran.exists(), "a request nobody granted ran");
}

/// Controls: the command line stays unconfined by default (it writes outside any
/// root and reaches an unlisted host), and a person who writes `default = "off"` and
/// `network = "on"` turns an agent's confinement off. `bashc status` and `bashd
/// --check-config` say what each front end gets and where it came from.
#[test]
fn the_command_line_stays_unconfined_and_a_written_off_frees_agents() {
    let person = Person::start(None);
    let served = person.daemon.scratch().join("served");
    std::fs::create_dir_all(&served).unwrap();
    std::fs::write(served.join("page"), "i44 reached\n").unwrap();
    let (_server, port) = serve(&served, PLANTED_IP);
    let outside = person.daemon.scratch().join("cli-outside-i44");
    let out = person.daemon.run_bashc_at(
        &person.ws,
        &[
            "exec",
            "--json",
            "--",
            &format!(
                "touch {} && curl -sS http://{PLANTED_IP}:{port}/page",
                outside.display()
            ),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(json(&out)["sandbox"], Value::Null, "{}", show(&out));
    assert!(show(&out).contains("i44 reached"), "{}", show(&out));
    assert!(outside.exists());

    let status = show(&person.daemon.run_bashc(&["status"]));
    assert!(
        status.contains("bashc mcp (agents): workspace-write, network allow-list by default; floor workspace-write (bashc mcp's default for default, network, floor)")
            && status.contains("bashc (command line): off, network on by default; floor off"),
        "{status}"
    );
    let check = person
        .daemon
        .bashd_command()
        .arg("--check-config")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(
        said.contains(
            "# an agent's MCP calls: default = \"workspace-write\" (the front end's default)"
        ),
        "{}",
        show(&check)
    );

    let freed = Person::start(Some(bashd_tests::AGENTS_UNCONFINED));
    let mut agent = freed.agent("mcp-i44-freed", &[]);
    let outside = freed.daemon.scratch().join("agent-outside-i44");
    let text = agent.ok(&format!("touch {} && echo wrote", outside.display()));
    assert!(
        text.contains("wrote") && !text.contains("sandbox:"),
        "{text}"
    );
    assert!(outside.exists());
    let (error, text) = agent.call("bash", json!({"command": "echo off", "sandbox": "off"}));
    assert!(!error && !text.contains("pending"), "{text}");
    let status = show(&freed.daemon.run_bashc(&["status"]));
    assert!(
        status.contains("sandbox: off, network on by default; floor off"),
        "{status}"
    );
}

//! Confined by default, the tools' part (issue 44): bashd reads where the person's
//! own tools fetch from (here an `.npmrc` in a fake `HOME`, with a registry and its
//! token) and `bashc status` lists each host with where it came from; a confined job
//! does not read the token file but gets the registry in its tools' environment
//! variable, without the token; and it writes the caches bashd owns for the person,
//! never the person's own (`~/.cargo/registry`), unless the person lists them in
//! `[sandbox] writable`. Each with a positive control beside it: an unconfined job
//! reads the file; a confined one writes its workspace.

use std::path::PathBuf;
use std::time::Duration;

use bashd_tests::{Daemon, wait_until};

use crate::{json, show};

/// The registry the fake `.npmrc` names, and its token, which no confined job may see.
const REGISTRY: &str = "http://127.0.0.2:4873/";
const ENTRY: &str = "127.0.0.2:4873";
const TOKEN: &str = "npm_i44_SECRET_TOKEN";
/// The index `~/.pip/pip.conf` names, with the token in its URL.
const PIP_ENTRY: &str = "127.0.0.3:8081";

/// Whether pip runs here: its part of the tests is checked only then.
fn have_pip() -> bool {
    std::process::Command::new("python3")
        .args(["-m", "pip", "--version"])
        .output()
        .is_ok_and(|out| out.status.success())
}

/// A daemon whose `HOME` is a fake one holding an `.npmrc` and a cargo cache, with a
/// workspace below it.
struct Home {
    daemon: Daemon,
    home: PathBuf,
    ws: PathBuf,
}

impl Home {
    fn start(config: Option<&str>) -> Home {
        let mut daemon = Daemon::unstarted();
        let home = daemon.scratch().join("i44").join("home");
        for dir in ["ws", ".cargo/registry/cache"] {
            std::fs::create_dir_all(home.join(dir)).unwrap();
        }
        // Resolved: the job is told absolute paths, and the temp dir may be a symlink.
        let home = std::fs::canonicalize(&home).unwrap();
        std::fs::write(
            home.join(".npmrc"),
            format!("registry={REGISTRY}\n//{ENTRY}/:_authToken={TOKEN}\n"),
        )
        .unwrap();
        // pip's legacy user config, which pip still reads: an index with a token in
        // its URL, as private indexes are often written.
        std::fs::create_dir_all(home.join(".pip")).unwrap();
        std::fs::write(
            home.join(".pip/pip.conf"),
            format!("[global]\nindex-url = http://__token__:{TOKEN}@{PIP_ENTRY}/simple\n"),
        )
        .unwrap();
        if let Some(config) = config {
            daemon.write_config(config);
        }
        let mut command = daemon.bashd_command();
        // The caches go beneath the fake home, never the tester's own.
        command.env("HOME", &home).env_remove("XDG_CACHE_HOME");
        daemon.start_with(command);
        let ws = home.join("ws");
        Home { daemon, home, ws }
    }

    /// `bashc status --json` once the daemon's first reading of the tools is in.
    fn status_with_sources(&self) -> serde_json::Value {
        let mut last = None;
        let read = wait_until(Duration::from_secs(30), || {
            let out = self.daemon.run_bashc(&["status", "--json"]);
            let status = json(&out);
            // A daemon without tool sources (today's main) says nothing of them: the
            // tests then fail on what a job sees, not here.
            let done = status
                .get("tool_sources")
                .is_none_or(|sources| sources.as_array().is_some_and(|s| !s.is_empty()));
            last = Some(status);
            done
        });
        let last = last.unwrap();
        assert!(read, "no tool sources in bashc status: {last}");
        last
    }

    fn confined(&self, script: &str) -> std::process::Output {
        self.run(&["--sandbox", "workspace-write"], script)
    }

    fn run(&self, sandbox: &[&str], script: &str) -> std::process::Output {
        self.daemon
            .bashc_at(&self.ws)
            .args(["exec", "--json"])
            .args(sandbox)
            .arg("--workdir")
            .arg(&self.ws)
            .arg("--")
            .arg(script)
            .output()
            .expect("cannot run bashc")
    }
}

fn stdout_of(out: &std::process::Output) -> String {
    json(out)["stdout"]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn status_lists_the_npm_registry_with_where_it_came_from() {
    let h = Home::start(None);
    let status = h.status_with_sources();
    let sources = status["tool_sources"]
        .as_array()
        .unwrap_or_else(|| panic!("bashc status says nothing of tool sources: {status}"));
    let npm = sources
        .iter()
        .find(|s| s["entry"] == ENTRY)
        .unwrap_or_else(|| panic!("{ENTRY} not among the tool sources: {status}"));
    // npm itself is asked when it is on the daemon's PATH; else the file is read.
    let origin = npm["origin"].as_str().unwrap();
    assert!(
        origin == "npm config get registry" || origin == "~/.npmrc",
        "{origin}"
    );
    // The person's text: each entry and where it came from; never the token.
    let text = h.daemon.run_bashc(&["status"]);
    let text = show(&text);
    assert!(text.contains("your tools fetch from:"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(ENTRY) && l.contains(&format!("from {origin}"))),
        "{text}"
    );
    assert!(!text.contains(TOKEN), "{text}");
    assert!(!status.to_string().contains(TOKEN), "{status}");
    if have_pip() {
        assert!(
            sources
                .iter()
                .any(|s| s["entry"] == PIP_ENTRY && s["origin"] == "pip config global.index-url"),
            "{status}"
        );
    }

    // Read again on reload: a registry changed in the person's files is in, the old
    // one out.
    std::fs::write(h.home.join(".npmrc"), "registry=http://127.0.0.4:4875/\n").unwrap();
    let pid = rustix::process::Pid::from_raw(h.daemon.pid() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).unwrap();
    let mut last = String::new();
    let reread = wait_until(Duration::from_secs(30), || {
        last = show(&h.daemon.run_bashc(&["status"]));
        last.contains("127.0.0.4:4875") && !last.contains(ENTRY)
    });
    assert!(reread, "the reload did not read the new registry:\n{last}");
}

#[test]
fn a_confined_job_reads_no_npmrc_but_gets_its_registry_without_the_token() {
    let h = Home::start(None);
    h.status_with_sources();
    let script = format!(
        "cat {}/.npmrc; echo \"registry=$npm_config_registry\"; env | grep -c {TOKEN}; true",
        h.home.display()
    );
    // The positive control: unconfined, the job reads the file, so the fixture holds.
    let open = h.run(&["--sandbox", "off"], &script);
    assert_eq!(open.status.code(), Some(0), "{}", show(&open));
    assert!(stdout_of(&open).contains(TOKEN), "{}", show(&open));

    // A registry the request's environment names is not where the job's npm goes.
    let script = format!("{script}; echo \"pip=$PIP_INDEX_URL\"");
    let confined = h
        .daemon
        .bashc_at(&h.ws)
        .env("npm_config_registry", "http://planted.example/")
        .args([
            "exec",
            "--json",
            "--sandbox",
            "workspace-write",
            "--workdir",
        ])
        .arg(&h.ws)
        .arg("--")
        .arg(&script)
        .output()
        .expect("cannot run bashc");
    assert_eq!(confined.status.code(), Some(0), "{}", show(&confined));
    let text = stdout_of(&confined);
    assert!(
        !text.contains(TOKEN),
        "the token reached a confined job:\n{text}"
    );
    assert!(
        text.contains(&format!("registry={REGISTRY}")),
        "no npm_config_registry in a confined job:\n{}",
        show(&confined)
    );
    if have_pip() {
        assert!(
            text.contains(&format!("pip=http://{PIP_ENTRY}/simple")),
            "no PIP_INDEX_URL, or one with its token:\n{}",
            show(&confined)
        );
    }
}

#[test]
fn a_confined_job_writes_bashds_caches_and_not_the_persons() {
    let h = Home::start(None);
    h.status_with_sources();
    let home = h.home.display();
    let script = format!(
        "for v in PIP_CACHE_DIR npm_config_cache GOMODCACHE GOCACHE CARGO_HOME; do\n\
           d=$(printenv $v) && touch \"$d/i44-probe\" && echo \"$v wrote $d\"\n\
         done\n\
         touch {home}/.cargo/registry/cache/planted 2>/dev/null && echo planted-person-cache\n\
         echo ws > wrote-ws && echo wrote-workspace"
    );
    let out = h.confined(&script);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout_of(&out);
    // The positive control: the job runs confined and writes its workspace.
    assert!(text.contains("wrote-workspace"), "{}", show(&out));
    let caches = h.home.join(".cache/bashd/tools");
    for var in [
        "PIP_CACHE_DIR",
        "npm_config_cache",
        "GOMODCACHE",
        "GOCACHE",
        "CARGO_HOME",
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{var} wrote ")))
            .unwrap_or_else(|| panic!("{var} not written:\n{}", show(&out)));
        let dir = PathBuf::from(line.split_once(" wrote ").unwrap().1);
        assert!(dir.starts_with(&caches), "{var} is {}", dir.display());
        assert!(dir.join("i44-probe").exists(), "{}", dir.display());
    }
    assert!(!text.contains("planted-person-cache"), "{text}");
    assert!(!h.home.join(".cargo/registry/cache/planted").exists());
}

#[test]
fn the_persons_cache_is_writable_when_the_person_lists_it() {
    let h = Home::start(Some("[sandbox]\nwritable = [\"~/.cargo/registry\"]\n"));
    let script = format!(
        "touch {}/.cargo/registry/cache/planted && echo wrote-person-cache",
        h.home.display()
    );
    let out = h.confined(&script);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        stdout_of(&out).contains("wrote-person-cache"),
        "{}",
        show(&out)
    );
    assert!(h.home.join(".cargo/registry/cache/planted").exists());
}

/// The registry the person's npm fetches from is on the allow-list with nothing
/// written in bashd's config: a confined `allow-list` job reaches it through the
/// proxy, and a port of the same host that no tool names is refused (issue 44).
#[test]
fn a_registry_of_the_persons_tools_is_reached_through_the_proxy_with_no_allow_hosts() {
    let Ok(registry) = std::net::TcpListener::bind(ENTRY) else {
        eprintln!("skipped: {ENTRY} is taken on this machine");
        return;
    };
    let reached = crate::proxy::serve(registry, "the registry".to_owned());
    let (other, _) = crate::proxy::server("127.0.0.2");
    let h = Home::start(None);
    h.status_with_sources();
    let net = ["--sandbox", "workspace-write", "--net", "allow-list"];
    let out = h.run(
        &net,
        &format!(
            "curl -m 20 -sS \"$npm_config_registry\"; echo; \
             curl -m 20 -s -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.2:{other}/"
        ),
    );
    let said = stdout_of(&out);
    assert!(said.starts_with("the registry\n"), "{}", show(&out));
    assert!(reached.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    assert!(said.ends_with("403\n"), "{}", show(&out));
}

/// A tool bashd asks where it fetches from dies with a SIGKILLed bashd rather than
/// running on (here an `npm` that never answers), as no job of bashd's outlives it
/// unowned. On main it ran until it ended by itself.
#[test]
fn a_tool_being_asked_dies_with_a_sigkilled_daemon() {
    let mut daemon = Daemon::unstarted();
    let bin = daemon.scratch().join("tools");
    std::fs::create_dir_all(&bin).unwrap();
    let pid_file = daemon.scratch().join("npm.pid");
    let npm = bin.join("npm");
    std::fs::write(
        &npm,
        format!(
            "#!/bin/sh\necho $$ > {}\nexec sleep 120\n",
            pid_file.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&npm, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut command = daemon.bashd_command();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    command.env("PATH", path);
    daemon.start_with(command);
    let asked = wait_until(Duration::from_secs(30), || {
        std::fs::read_to_string(&pid_file).is_ok_and(|pid| pid.trim().parse::<u32>().is_ok())
    });
    assert!(asked, "bashd never ran the npm on its PATH");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Running (as `sleep` now) while bashd lives.
    assert!(wait_until(Duration::from_secs(10), || {
        bashd_tests::procs::cmdline(pid).starts_with("sleep")
    }));
    daemon.kill_daemon();
    let gone = wait_until(Duration::from_secs(10), || !bashd_tests::procs::alive(pid));
    let left = bashd_tests::procs::cmdline(pid);
    if !gone && let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
    assert!(gone, "the npm bashd was asking ({pid}) outlived it: {left}");
}

//! One daemon per user whatever environment a client is given (issue 24): `bashc mcp
//! --runtime-dir`, a job's own `bashc`, and what autostart says when it starts a daemon
//! beside another. The resolution without `XDG_RUNTIME_DIR` is unit-tested in
//! `protocol/src/runtime.rs`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bashd_tests::procs::pids_with_env;
use bashd_tests::{Daemon, bin_path};
use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::{json, show, stderr, stdout};

/// Live `bashd` processes among `pids`.
fn daemons_of(pids: Vec<u32>) -> Vec<u32> {
    pids.into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "bashd")
        })
        .collect()
}

/// SIGKILLs, when dropped, every `bashd` whose environment holds `marker`: the
/// daemons a test may have started outside the harness's runtime dirs.
struct KillDaemonsWith(String);

impl Drop for KillDaemonsWith {
    fn drop(&mut self) {
        for pid in daemons_of(pids_with_env(&[&self.0])) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Issue 24.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_given_only_path_and_home_serves_through_the_daemon_of_its_runtime_dir() {
    let daemon = Daemon::start();
    let home = daemon.scratch().join("home");
    std::fs::create_dir(&home).unwrap();
    // Whatever this server starts carries HOME=<home>: a second daemon would too.
    let marker = format!("HOME={}", home.display());
    let _cleanup = KillDaemonsWith(marker.clone());

    let mut command = tokio::process::Command::new(bin_path("bashc"));
    command
        .arg("mcp")
        .arg("--runtime-dir")
        .arg(daemon.runtime_dir())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .current_dir(daemon.scratch());
    let client = crate::mcp::serve((), command).await;

    // A job's own bashc reaches the same daemon, though the server's environment named
    // no runtime dir.
    let bashc = bin_path("bashc");
    let args = json!({"command": format!("{} status", bashc.display()), "description": "issue 24"});
    let serde_json::Value::Object(args) = args else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new("bash".to_owned()).with_arguments(args))
        .await
        .expect("the bash tool answers");
    let text: String = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    assert_eq!(result.is_error, Some(false), "{text}");
    assert!(
        text.contains(&format!(
            "runtime dir: {}\n",
            daemon.runtime_dir().display()
        )),
        "{text}"
    );

    let listed = json(&daemon.run_bashc(&["jobs", "--all", "--json"]));
    let mcp_jobs: Vec<&serde_json::Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|job| job["description"] == "issue 24")
        .collect();
    assert_eq!(mcp_jobs.len(), 1, "{listed}");
    assert!(
        mcp_jobs[0]["session"].as_str().unwrap().starts_with("mcp-"),
        "{listed}"
    );
    client.cancel().await.unwrap();

    assert_eq!(daemon.daemons(), vec![daemon.pid()]);
    assert_eq!(
        daemons_of(pids_with_env(&[&marker])),
        Vec::<u32>::new(),
        "a second daemon was started"
    );
}

/// A `bashc status` with autostart on, for `runtime_dir` named by `--runtime-dir`
/// (`Some`) or found from `XDG_RUNTIME_DIR` (`None`, with `xdg`).
fn autostarting_status(config_home: &Path, named: Option<&Path>, xdg: &Path) -> Command {
    let mut command = Command::new(bin_path("bashc"));
    if let Some(dir) = named {
        command.arg("--runtime-dir").arg(dir);
    }
    command
        .arg("status")
        .env_remove("BASHD_RUNTIME_DIR")
        .env_remove("BASHD_NO_AUTOSTART")
        .env("XDG_RUNTIME_DIR", xdg)
        .env("XDG_CONFIG_HOME", config_home)
        .stdin(Stdio::null());
    command
}

/// Issue 24.
#[test]
fn a_daemon_started_while_another_runs_says_so() {
    let first = Daemon::start();
    let said = format!(
        "bashd pid {} serves {}",
        first.pid(),
        first.runtime_dir().display()
    );

    // Named on purpose: only the new daemon's log says so.
    let second = Daemon::unstarted();
    let xdg = second.scratch().join("xdg");
    std::fs::create_dir(&xdg).unwrap();
    let out = autostarting_status(&second.config_home(), Some(second.runtime_dir()), &xdg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(!stderr(&out).contains("started bashd"), "{}", show(&out));
    let log = std::fs::read_to_string(second.runtime_dir().join("bashd.log")).unwrap();
    assert!(
        log.contains("is starting bashd for") && log.contains(&said),
        "{log}"
    );

    // Found, not named (XDG_RUNTIME_DIR here): the user is told on stderr too.
    let third: PathBuf = xdg.join("bashd");
    let _cleanup = KillDaemonsWith(format!("BASHD_RUNTIME_DIR={}", third.display()));
    let out = autostarting_status(&second.config_home(), None, &xdg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let warned = stderr(&out);
    assert!(
        warned.starts_with(&format!(
            "bashc: started bashd for {} while another of yours runs (",
            third.display()
        )) && warned.contains(&said)
            && warned.contains("use --runtime-dir DIR or BASHD_RUNTIME_DIR"),
        "{}",
        show(&out)
    );
    // Once running, it is no news.
    let out = autostarting_status(&second.config_home(), None, &xdg)
        .output()
        .unwrap();
    assert_eq!(stderr(&out), "", "{}", show(&out));
}

/// A relative `BASHD_RUNTIME_DIR` names a directory below where bashc runs, for bashc
/// and for the daemon it starts (in `/`) alike: the call is served, not left waiting
/// for a daemon that serves another directory (issue 45).
#[test]
fn a_relative_runtime_dir_is_the_same_directory_for_bashc_and_its_daemon() {
    let harness = Daemon::unstarted();
    let cwd = harness.scratch().join("work");
    std::fs::create_dir(&cwd).unwrap();
    let absolute = cwd.join("relative/dir");
    let _cleanup = KillDaemonsWith(format!("BASHD_RUNTIME_DIR={}", absolute.display()));
    let bashc = |args: &[&str]| {
        Command::new(bin_path("bashc"))
            .args(args)
            .current_dir(&cwd)
            .env("BASHD_RUNTIME_DIR", "relative/dir")
            .env_remove("BASHD_NO_AUTOSTART")
            .env("XDG_CONFIG_HOME", harness.config_home())
            .env("BASHD_SESSION", "i45-relative")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = bashc(&["exec", "--", "echo served"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(stdout(&out).contains("served\n"), "{}", show(&out));
    assert!(absolute.join("bashd.sock").exists(), "{}", show(&out));
    let out = bashc(&["stop"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

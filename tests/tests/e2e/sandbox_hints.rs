//! What a sandboxed job that failed is told to do (issue 33): a fix that works for its
//! profile and the kind of access refused. A read-only job's refused write is sent to
//! `workspace-write`, never to `[sandbox] writable`, which read-only ignores; a refused
//! read of a `deny_read` path is sent to `deny_read`, never to a write setting. Each
//! hint is tried and then followed, so a hint that would not work fails the test.

use std::path::PathBuf;
use std::process::Output;

use bashd_tests::Daemon;
use serde_json::json;

use crate::mcp::{call, mcp_command, serve, text_of};
use crate::{json, show, stdout};

const WRITABLE_HINT: &str = "add the path to [sandbox] writable";

/// A daemon whose `HOME` has a fake `.ssh` key, and a workspace to run in.
struct Setup {
    daemon: Daemon,
    ws: PathBuf,
    home: PathBuf,
}

impl Setup {
    fn start(config: &str) -> Setup {
        let mut daemon = Daemon::unstarted();
        let root = daemon.scratch().join("i33");
        let (ws, home) = (root.join("ws"), root.join("home"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_ed25519"), "i33-fake-key\n").unwrap();
        std::fs::write(home.join("notes"), "i33-notes\n").unwrap();
        daemon.write_config(config);
        let mut command = daemon.bashd_command();
        command.env("HOME", &home);
        daemon.start_with(command);
        Setup { daemon, ws, home }
    }

    /// `bashc exec ARGS -- COMMAND` in the workspace, run from there (its writable
    /// root), its text result.
    fn exec(&self, args: &[&str], command: &str) -> Output {
        self.daemon
            .bashc_at(&self.ws)
            .env("HOME", &self.home)
            .arg("exec")
            .arg("--workdir")
            .arg(&self.ws)
            .args(args)
            .arg("--")
            .arg(command)
            .output()
            .expect("cannot run bashc")
    }
}

/// Issue 33.
#[test]
fn a_read_only_jobs_refused_write_is_sent_to_workspace_write() {
    let setup = Setup::start("");
    let out = setup.exec(&["--sandbox", "read-only"], "echo hi > made.txt");
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let said = stdout(&out);
    assert!(said.contains("sandbox: read-only"), "{}", show(&out));
    assert!(
        said.contains("run it with --sandbox workspace-write"),
        "{}",
        show(&out)
    );
    assert!(!said.contains(WRITABLE_HINT), "{}", show(&out));
    assert!(
        said.contains("for workspace-write jobs only, never for read-only ones"),
        "{}",
        show(&out)
    );
    // The hint works: the same write under workspace-write.
    let out = setup.exec(&["--sandbox", "workspace-write"], "echo hi > made.txt");
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert_eq!(
        std::fs::read_to_string(setup.ws.join("made.txt")).unwrap(),
        "hi\n"
    );

    // Under workspace-write, a write outside still gets `writable`, which works there.
    let outside = setup.daemon.scratch().join("i33/outside");
    std::fs::create_dir_all(&outside).unwrap();
    let write_outside = format!("echo hi > {}/made.txt", outside.display());
    let out = setup.exec(&["--sandbox", "workspace-write"], &write_outside);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(stdout(&out).contains(WRITABLE_HINT), "{}", show(&out));
}

/// Issue 33.
#[test]
fn a_refused_read_of_a_hidden_path_is_sent_to_deny_read() {
    let setup = Setup::start("");
    let key = setup.home.join(".ssh/id_ed25519");
    for profile in ["read-only", "workspace-write"] {
        let out = setup.exec(&["--sandbox", profile], &format!("cat {}", key.display()));
        assert_eq!(out.status.code(), Some(1), "{profile}: {}", show(&out));
        let said = stdout(&out);
        assert!(!said.contains("i33-fake-key"), "{profile}: {}", show(&out));
        assert!(
            said.contains("hides the paths of bashd's [sandbox] deny_read"),
            "{profile}: {}",
            show(&out)
        );
        assert!(!said.contains(WRITABLE_HINT), "{profile}: {}", show(&out));
        assert!(
            !said.contains("workspace-write if"),
            "{profile}: {}",
            show(&out)
        );
    }
    // Control: a file of the same home that is not hidden reads.
    let notes = setup.home.join("notes");
    let out = setup.exec(
        &["--sandbox", "read-only"],
        &format!("cat {}", notes.display()),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));

    // The hint works: with a deny_read that leaves it out, the same read succeeds.
    let setup = Setup::start("[sandbox]\ndeny_read = [\"~/.aws\"]\n");
    let key = setup.home.join(".ssh/id_ed25519");
    let out = setup.exec(
        &["--sandbox", "read-only"],
        &format!("cat {}", key.display()),
    );
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(stdout(&out).contains("i33-fake-key"), "{}", show(&out));
}

/// Issue 33.
#[tokio::test]
async fn mcp_words_the_hints_as_calls() {
    let setup = Setup::start("");
    let mut command = mcp_command(&setup.daemon, &setup.ws);
    command
        .env("HOME", &setup.home)
        .env("BASHD_NO_AUTOSTART", "1");
    let client = serve((), command).await;

    let write = json!({"command": "echo hi > made.txt", "sandbox": "read-only"});
    let text = text_of(&call(&client, "bash", write).await);
    assert!(
        text.contains("run it with bash(sandbox=\"workspace-write\")"),
        "{text}"
    );
    assert!(!text.contains(WRITABLE_HINT), "{text}");

    let key = setup.home.join(".ssh/id_ed25519");
    let read = json!({"command": format!("cat {}", key.display()), "sandbox": "read-only"});
    let text = text_of(&call(&client, "bash", read).await);
    assert!(text.contains("[sandbox] deny_read"), "{text}");
    assert!(!text.contains(WRITABLE_HINT), "{text}");
    client.cancel().await.unwrap();

    let listed = json(&setup.daemon.run_bashc(&["jobs", "--all", "--json"]));
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
}

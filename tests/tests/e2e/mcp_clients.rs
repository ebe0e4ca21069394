//! What four real agent CLIs do to `bashc mcp` (issue 34), done here by hand: a client
//! that ends its server's whole process tree (OpenCode), the arguments clients add to
//! every call (Gemini CLI), the result budget of each client, and the agent's own
//! credentials kept out of jobs.

use std::process::Stdio;
use std::time::Duration;

use bashd_tests::{Daemon, alive, descendants, wait_until};
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;

use crate::json;
use crate::mcp::mcp_command;

/// OpenCode ends an MCP server by SIGTERMing every descendant of it that /proc shows.
/// A daemon the server started must not be one of them: it serves every session, and
/// another agent's jobs would go with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_34_an_autostarted_daemon_outlives_a_client_that_ends_its_servers_tree() {
    let daemon = Daemon::unstarted();
    let mut command = mcp_command(&daemon, daemon.scratch());
    command.env_remove("BASHD_NO_AUTOSTART");
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start bashc mcp");
    let server = transport.id().expect("the server has a pid");
    let client = ().serve(transport).await.expect("MCP initialization failed");
    assert!(
        wait_until(Duration::from_secs(20), || daemon.daemons().len() == 1),
        "bashc mcp started no daemon"
    );
    let bashd = daemon.daemons()[0];
    let out = daemon.run_bashc(&[
        "exec",
        "--session",
        "other-agent",
        "--mode",
        "background",
        "--json",
        "--",
        "sleep 300",
    ]);
    let job_pid = json(&out)["pid"].as_u64().expect("the job has a pid") as u32;

    let mut tree = descendants(server);
    tree.push(server);
    for pid in tree {
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    assert!(
        wait_until(Duration::from_secs(10), || !alive(server)),
        "bashc mcp outlived SIGTERM"
    );
    drop(client);
    // A daemon that got the signal stops its jobs at once: give it the time to.
    let died = wait_until(Duration::from_secs(3), || !alive(bashd) || !alive(job_pid));
    assert!(
        !died,
        "ending the MCP server's tree ended bashd ({}) or another session's job ({})",
        alive(bashd),
        alive(job_pid)
    );
    let out = daemon.run_bashc(&["jobs", "--all", "--json"]);
    let jobs = json(&out);
    assert_eq!(jobs[0]["state"], "running", "{jobs}");
    assert_eq!(jobs[0]["session"], "other-agent", "{jobs}");
}

//! `bashc mcp` (DESIGN §12): bashd as the bash tool of any MCP agent. A Model Context
//! Protocol server on stdio, built on rmcp, whose tools call the daemon through one
//! client connection. One server is one session, owned by the agent that started it
//! (its parent): when the agent goes, stdin closes, the server exits, and the daemon
//! lets the session linger as for any other owner.
//!
//! `gate.rs` stands between stdio and rmcp, which `stdio.rs` reads and writes on the
//! runtime's thread; `tools/` defines the tools and makes their calls; `words.rs` says
//! results, notices and errors in the words of tool calls.

mod clients;
mod gate;
mod schema;
mod since;
mod stdio;
mod tools;
mod words;

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use bashc::protocol::{Caller, Owner};
use clap::Args;
use rmcp::ServiceExt;

use self::tools::BashTools;

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The session the agent's commands run in (default: $BASHD_SESSION, else
    /// mcp-<pid of the agent that started this server>).
    #[arg(long, value_name = "SESSION")]
    session: Option<String>,
    /// The process that owns the session (default: the agent that started this
    /// server, its parent). When it exits, the session's foreground jobs are killed,
    /// and its background jobs after the linger time (15 min) unless it comes back.
    #[arg(long, value_name = "PID", value_parser = crate::common::owner_pid)]
    owner_pid: Option<u32>,
}

/// `bashc mcp --help`: the tools named from the list the server serves.
pub fn long_about() -> &'static str {
    static LONG_ABOUT: LazyLock<String> = LazyLock::new(|| {
        format!(
            "Serve bashd to an MCP agent (Claude Code, Codex, Gemini CLI, OpenCode, ...) on stdin/stdout.

An MCP server with the tools {}. One server is one session (mcp-<agent pid> unless --session or $BASHD_SESSION), owned by the agent that started it; it exits when its stdin closes. Commands run in the directory it was started in unless a call names another. Starts bashd when none is running, as a daemon of its own that the agent's exit does not reach.

Every bash and bash_wait call returns within bashd's [mcp] max_call_secs (50 s by default; a command still running goes on in the background); a cancelled call kills its command ([mcp] on_cancel = \"background\" keeps it); a call with a progressToken gets progress notifications every 3 s. The job tools reach only this session's jobs.

Results are fitted to what the client (its clientInfo.name) shows whole, cut on lines with the call that reads the rest; [mcp.clients.\"NAME\"] in the config sets a client's budget. Jobs do not get the client's own model credentials (ANTHROPIC_API_KEY, OPENAI_API_KEY, GEMINI_API_KEY, ...) unless [env] pass names them.",
            tools::tool_names()
        )
    });
    LONG_ABOUT.as_str()
}

/// `agent` is the parent bashc had when it started: the agent, unless it has died.
pub async fn mcp(args: McpArgs, target: &bashc::Target, agent: u32) -> anyhow::Result<u8> {
    let session = args.session.unwrap_or_else(|| {
        // On another host, `<this default>@<this hostname>` (DESIGN §14).
        crate::common::remote_session(
            crate::common::session_from_env().unwrap_or_else(|| format!("mcp-{agent}")),
        )
    });
    let caller = Caller {
        session,
        owner: Some(Owner::of(args.owner_pid.unwrap_or(agent))),
    };
    let workdir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let env = Arc::new(crate::common::environment(target));
    let settings = Arc::new(clients::Settings::load());
    let tools = BashTools::new(caller, workdir, env, target.clone(), settings);
    // Start the daemon now, not at the first call; a failure is told then. stderr is
    // the MCP host's log of this server.
    match tools.client().await {
        Ok(client) => {
            if let Some(note) = crate::common::second_daemon_note(target, client.other_daemons()) {
                eprintln!("bashc mcp: {note}");
            }
        }
        Err(e) => eprintln!("bashc mcp: {e}"),
    }
    let (rmcp_end, gate_end) = tokio::io::duplex(gate::GATE_BUFFER);
    let (stdin_closed_tx, stdin_closed) = tokio::sync::oneshot::channel();
    tokio::spawn(gate::gate(gate_end, stdin_closed_tx));
    let serving = async move {
        let server = tools
            .serve(rmcp_end)
            .await
            .map_err(|e| anyhow::anyhow!("cannot start the MCP server: {e}"))?;
        let _ = server.waiting().await;
        anyhow::Ok(())
    };
    // The agent is gone or done when stdin closes: exit then, without waiting for calls
    // in flight; closing the connection to bashd ends their foreground jobs. A process
    // the agent left may hold stdin open: the agent's own end counts too. The end of
    // stdin is looked at first: rmcp's handshake fails when stdin closes before
    // `initialize`, and that is the same end, not an error (the gate says it first).
    tokio::select! {
        biased;
        _ = stdin_closed => {}
        served = serving => served?,
        () = reparented(agent) => {}
    }
    Ok(0)
}

/// How often the server looks whether its agent is still its parent.
const AGENT_POLL: std::time::Duration = std::time::Duration::from_secs(1);

pub fn parent() -> u32 {
    rustix::process::getppid().map_or(1, |pid| pid.as_raw_nonzero().get() as u32)
}

/// Resolves once the process is no longer the child of `agent`: the agent has exited.
/// (Not PR_SET_PDEATHSIG: it fires when the agent's *thread* that started the server
/// exits, which a thread-pooled agent does while alive.)
async fn reparented(agent: u32) {
    loop {
        tokio::time::sleep(AGENT_POLL).await;
        if parent() != agent {
            return;
        }
    }
}

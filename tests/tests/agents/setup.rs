//! How each agent program is installed, set up from the README's snippet for it, run
//! non-interactively against the fake model, and cleaned up: its home, config and
//! project in a temporary directory, `bashc mcp` on a temporary runtime dir, and every
//! process it left (its process group, the daemon on that dir, the jobs) killed at the
//! end, even when the test failed.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bashd_tests::fake_model::FakeModel;
use bashd_tests::{Daemon, bin_path, procs};
use serde_json::{Value, json};

/// How long one program may take for the whole conversation.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// The prompt; the fake model ignores it.
const PROMPT: &str = "Run the checks with the bashd tools.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Claude,
    Codex,
    Gemini,
    OpenCode,
}

impl Agent {
    pub fn name(self) -> &'static str {
        match self {
            Agent::Claude => "Claude Code",
            Agent::Codex => "Codex",
            Agent::Gemini => "Gemini CLI",
            Agent::OpenCode => "OpenCode",
        }
    }

    pub fn program(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Gemini => "gemini",
            Agent::OpenCode => "opencode",
        }
    }

    /// The `clientInfo.name` cli/src/mcp/clients.rs keys its budget on.
    pub fn client_name(self) -> &'static str {
        match self {
            Agent::Claude => "claude-code",
            Agent::Codex => "codex-mcp-client",
            Agent::Gemini => "gemini-cli-mcp-client",
            Agent::OpenCode => "opencode",
        }
    }

    /// The model credentials set in the program's environment, which no job may see.
    pub fn credentials(self) -> &'static [&'static str] {
        match self {
            Agent::Claude => &["ANTHROPIC_API_KEY"],
            Agent::Codex => &["OPENAI_API_KEY"],
            Agent::Gemini => &["GEMINI_API_KEY"],
            // OpenCode reads its key from its config here; one of another provider's
            // stands in for those it may take from the environment.
            Agent::OpenCode => &["ANTHROPIC_API_KEY"],
        }
    }

    /// Whether the program hands its whole environment to its MCP servers (Codex
    /// passes a short list), so that the control variable must reach jobs.
    pub fn passes_environment(self) -> bool {
        self != Agent::Codex
    }

    /// The text bashd sent, from what the program made of it for its model: Codex
    /// puts `Wall time: ... Output:` before it, Gemini CLI wraps it in
    /// `<untrusted_context>`, and passes an error result as a JSON dump in a sentence.
    pub fn unwrap(self, passed: &str) -> String {
        match self {
            Agent::Codex => passed
                .split_once("\nOutput:\n")
                .filter(|(head, _)| head.starts_with("Wall time:"))
                .map_or(passed, |(_, rest)| rest)
                .to_owned(),
            Agent::Gemini => {
                let dumped = passed
                    .split_once("with response: ")
                    .and_then(|(_, dump)| serde_json::from_str::<Value>(dump).ok());
                if let Some(text) = dumped.as_ref().and_then(|parts| {
                    parts[0]["functionResponse"]["response"]["content"][0]["text"].as_str()
                }) {
                    return text.to_owned();
                }
                passed
                    .trim_start_matches("<untrusted_context>\n")
                    .trim_end_matches("\n</untrusted_context>")
                    .to_owned()
            }
            _ => passed.to_owned(),
        }
    }
}

/// Where tests/agents/install.sh put the programs.
/// The config of the run's bashd: the sandbox is its default for `bashc mcp`
/// (`workspace-write` on the allow-list, issue 44), with a short ask.
const BASHD_CONFIG: &str = "[sandbox]\nask_secs = 5\n";

fn agents_bin_dir() -> PathBuf {
    let dir = std::env::var_os("BASHD_AGENTS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/bashd-agents")
        });
    dir.join("node_modules/.bin")
}

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// The indented blocks of the README after the line that starts with `intro`, up to
/// the next paragraph of text after them: a client's snippets, as written.
fn readme_blocks(intro: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(repo_file("README.md")).expect("the README is there");
    let mut lines = readme.lines().skip_while(|l| !l.starts_with(intro));
    assert!(
        lines.next().is_some(),
        "the README has no line starting {intro:?}"
    );
    let mut blocks: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for line in lines {
        if let Some(code) = line.strip_prefix("    ") {
            let block = current.get_or_insert_with(String::new);
            block.push_str(code);
            block.push('\n');
        } else if line.trim().is_empty() {
            blocks.extend(current.take());
        } else if blocks.is_empty() && current.is_none() {
            continue;
        } else {
            break;
        }
    }
    blocks.extend(current);
    assert!(
        !blocks.is_empty(),
        "the README has no snippet after {intro:?}"
    );
    blocks
}

/// One program's run: its directories, its daemon's runtime dir, the probe server's
/// log, and the other session's job.
pub struct Run {
    agent: Agent,
    program: PathBuf,
    // Dropped last: kills the daemon that `bashc mcp` started on its dir, and the jobs.
    daemon: Daemon,
    temp: tempfile::TempDir,
    group: Option<i32>,
    other: Arc<Mutex<Option<u32>>>,
}

impl Run {
    /// The run, or None (having said why) where the suite is not asked for.
    pub fn prepare(agent: Agent) -> Option<Run> {
        if std::env::var("BASHD_AGENTS").as_deref() != Ok("1") {
            eprintln!(
                "skipped: {} against bashc mcp runs with BASHD_AGENTS=1, after tests/agents/install.sh",
                agent.name()
            );
            return None;
        }
        let program = agents_bin_dir().join(agent.program());
        assert!(
            program.exists(),
            "BASHD_AGENTS=1 but {} is not installed: run tests/agents/install.sh",
            program.display()
        );
        let daemon = Daemon::unstarted();
        daemon.make_runtime_dir();
        let temp = tempfile::Builder::new()
            .prefix("bashd-agents-")
            .tempdir()
            .unwrap();
        for dir in ["home", "project"] {
            std::fs::create_dir(temp.path().join(dir)).unwrap();
        }
        Some(Run {
            agent,
            program,
            daemon,
            temp,
            group: None,
            other: Arc::default(),
        })
    }

    fn home(&self) -> PathBuf {
        self.temp.path().join("home")
    }

    fn project(&self) -> PathBuf {
        self.temp.path().join("project")
    }

    fn probe_log(&self) -> PathBuf {
        self.temp.path().join("probe.jsonl")
    }

    /// The probe MCP server's command line: node and its script, with its log.
    fn probe_command(&self) -> Vec<String> {
        vec![
            "node".to_owned(),
            repo_file("tests/agents/probe-server.mjs")
                .display()
                .to_string(),
            self.probe_log().display().to_string(),
        ]
    }

    /// The program's environment: nothing of this test's but `PATH` (with `bashc`,
    /// `bashd` and the programs first), a fresh `HOME`, the runtime dir, a variable
    /// that is no credential, and the program's own.
    fn command(&self, program: &Path, model: Option<&FakeModel>) -> Command {
        let bashc_dir = bin_path("bashc").parent().unwrap().to_owned();
        let path = format!(
            "{}:{}:{}",
            bashc_dir.display(),
            agents_bin_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = Command::new(program);
        command
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.home())
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .env("BASHD_RUNTIME_DIR", self.daemon.runtime_dir())
            .env("BASHD_AGENTS_CONTROL", "visible")
            .current_dir(self.project())
            .stdin(Stdio::null());
        if let Some(model) = model {
            let url = model.url();
            match self.agent {
                Agent::Claude => {
                    command
                        .env("ANTHROPIC_BASE_URL", &url)
                        .env("ANTHROPIC_API_KEY", "sk-ant-fake-credential");
                }
                Agent::Codex => {
                    command.env("OPENAI_API_KEY", "sk-fake-credential");
                }
                Agent::Gemini => {
                    command
                        .env("GOOGLE_GEMINI_BASE_URL", &url)
                        .env("GEMINI_API_KEY", "fake-credential");
                }
                Agent::OpenCode => {
                    command
                        .env("ANTHROPIC_API_KEY", "sk-ant-fake-credential")
                        .env("OPENCODE_DISABLE_AUTOUPDATE", "1");
                }
            }
        }
        command
    }

    /// Writes the program's config: the README's snippet, with the probe server and
    /// the fake model's provider added beside it.
    fn configure(&self, model: &FakeModel) {
        let url = model.url();
        let home = self.home();
        let probe = self.probe_command();
        // An ask (issue 44) ends within seconds rather than two minutes: a client
        // without elicitation, or whose headless mode dismisses the form, waits for the
        // person until then. Nothing else is written: the sandbox is bashd's default.
        let bashd = home.join(".config/bashd");
        std::fs::create_dir_all(&bashd).unwrap();
        std::fs::write(bashd.join("config.toml"), BASHD_CONFIG).unwrap();
        match self.agent {
            Agent::Claude => {
                let blocks = readme_blocks("Claude Code (user scope)");
                // `claude mcp add ...` as the README says, run by a shell.
                let status = self
                    .command(Path::new("sh"), None)
                    .arg("-c")
                    .arg(blocks[0].trim())
                    .stdout(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success(), "{:?} failed", blocks[0]);
                let status = self
                    .command(&self.program, None)
                    .args(["mcp", "add", "--scope", "user", "probe", "--"])
                    .args(&probe)
                    .stdout(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success(), "claude mcp add probe failed");
                let mut settings: Value = serde_json::from_str(&blocks[1]).unwrap();
                settings["permissions"]["allow"]
                    .as_array_mut()
                    .expect("the README's settings allow bashd's tools")
                    .push(json!("mcp__probe"));
                std::fs::create_dir_all(home.join(".claude")).unwrap();
                std::fs::write(home.join(".claude/settings.json"), settings.to_string()).unwrap();
            }
            Agent::Codex => {
                let snippet = readme_blocks("Codex, in").join("\n");
                let config = format!(
                    "model = \"fake-model\"\nmodel_provider = \"fake\"\n\n\
                     [model_providers.fake]\nname = \"fake\"\nbase_url = \"{url}/v1\"\nwire_api = \"responses\"\n\n\
                     {snippet}\n\
                     [mcp_servers.bashd.env]\nBASHD_RUNTIME_DIR = \"{}\"\n\n\
                     [mcp_servers.probe]\ncommand = \"node\"\nargs = {}\ndefault_tools_approval_mode = \"approve\"\n",
                    self.daemon.runtime_dir().display(),
                    json!(probe[1..])
                );
                std::fs::create_dir_all(home.join(".codex")).unwrap();
                std::fs::write(home.join(".codex/config.toml"), config).unwrap();
            }
            Agent::Gemini => {
                let blocks = readme_blocks("Gemini CLI, in");
                let mut settings: Value = serde_json::from_str(&blocks[0]).unwrap();
                settings["mcpServers"]["probe"] =
                    json!({"command": "node", "args": probe[1..], "trust": true});
                // The API key in the environment is the way to the model.
                settings["security"] = json!({"auth": {"selectedType": "gemini-api-key"}});
                std::fs::create_dir_all(home.join(".gemini")).unwrap();
                std::fs::write(home.join(".gemini/settings.json"), settings.to_string()).unwrap();
            }
            Agent::OpenCode => {
                let blocks = readme_blocks("OpenCode, in");
                let mut config: Value = serde_json::from_str(&blocks[0]).unwrap();
                config["mcp"]["probe"] =
                    json!({"type": "local", "command": probe, "enabled": true});
                config["model"] = json!("fake/fake-model");
                config["provider"] = json!({"fake": {
                    "npm": "@ai-sdk/openai-compatible", "name": "Fake",
                    "options": {"baseURL": format!("{url}/v1"), "apiKey": "fake-credential"},
                    "models": {"fake-model": {"name": "Fake", "tool_call": true}},
                }});
                std::fs::write(self.project().join("opencode.json"), config.to_string()).unwrap();
            }
        }
    }

    /// Runs the program through the conversation; returns how it ended.
    pub fn run(&mut self, model: &FakeModel) -> String {
        self.configure(model);
        let mut command = self.command(&self.program, Some(model));
        match self.agent {
            Agent::Claude => command.args(["-p", PROMPT]),
            Agent::Codex => command.args(["exec", "--skip-git-repo-check", PROMPT]),
            Agent::Gemini => command.args(["--skip-trust", "-p", PROMPT]),
            Agent::OpenCode => command.args(["run", PROMPT]),
        };
        let log = self.temp.path().join("program.log");
        let out = std::fs::File::create(&log).unwrap();
        command
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .process_group(0);
        let mut child: Child = command.spawn().expect("cannot start the agent program");
        self.group = Some(child.id() as i32);
        let deadline = Instant::now() + RUN_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status.to_string();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break format!("killed after {} s", RUN_TIMEOUT.as_secs());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let output = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: String = output
            .lines()
            .rev()
            .take(15)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        eprintln!(
            "--- {} said (last lines)\n{tail}\n---",
            self.agent.program()
        );
        status
    }

    /// A closure that starts a background job in the session `other-agent` on this
    /// run's daemon (started by `bashc mcp` by then), for the check that the program's
    /// exit does not reach it.
    pub fn other_session_job(&self) -> impl Fn() + Send + Sync + 'static {
        let bashc = bin_path("bashc");
        let runtime_dir = self.daemon.runtime_dir().to_owned();
        let other = Arc::clone(&self.other);
        move || {
            let out = Command::new(&bashc)
                .args([
                    "exec",
                    "--session",
                    "other-agent",
                    "--mode",
                    "background",
                    "--json",
                    "--",
                    "sleep 600",
                ])
                .env("BASHD_RUNTIME_DIR", &runtime_dir)
                .env("BASHD_NO_AUTOSTART", "1")
                .stdin(Stdio::null())
                .output()
                .expect("cannot run bashc");
            let pid = serde_json::from_slice::<Value>(&out.stdout)
                .ok()
                .and_then(|v| v["pid"].as_u64());
            *other.lock().unwrap() = pid.map(|p| p as u32);
        }
    }

    /// Whether bashd and the other session's job stay alive for 2 s after the program
    /// exited (a program that ends its servers' trees does so as it exits).
    pub fn daemon_and_other_alive(&self) -> Result<(), String> {
        let other = *self.other.lock().unwrap();
        let Some(other) = other else {
            return Err("the other session's job never started".to_owned());
        };
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if self.daemon.daemons().is_empty() {
                return Err("bashd is gone".to_owned());
            }
            if !procs::alive(other) {
                return Err(format!("the other session's job (pid {other}) is gone"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Whether a job wrote the file the script's confined job tries to write in the
    /// program's home.
    pub fn job_wrote_home(&self) -> bool {
        self.home().join("written-by-a-job").exists()
    }

    /// The asks and how each ended, as `bashc allow --list --json` tells them.
    pub fn asks(&self) -> String {
        let out = self.daemon.run_bashc(&["allow", "--list", "--json"]);
        let listing: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let asks: Vec<String> = listing["asks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|ask| format!("{} {} by {}", ask["id"], ask["state"], ask["answered_by"]))
            .collect();
        if asks.is_empty() {
            format!("none ({})", String::from_utf8_lossy(&out.stderr).trim())
        } else {
            asks.join("; ")
        }
    }

    /// Whether the `sleep 301` the program's model started in the background still
    /// runs, as a job of this run's daemon.
    pub fn own_background_job_alive(&self) -> Result<(), String> {
        let jobs = self.daemon.job_processes();
        if jobs.iter().any(|&pid| procs::cmdline(pid) == "sleep 301") {
            Ok(())
        } else {
            Err(format!(
                "no `sleep 301` among the jobs' processes: {:?}",
                jobs.iter().map(|&p| procs::cmdline(p)).collect::<Vec<_>>()
            ))
        }
    }

    fn probe_messages(&self) -> Vec<Value> {
        std::fs::read_to_string(self.probe_log())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|l| l["direction"] == "in")
            .map(|l| l["message"].clone())
            .collect()
    }

    /// When the program cancelled its call of the probe, if it did, against when the
    /// probe answered it (ms after the call).
    pub fn probe_cancel(&self) -> Option<String> {
        let log: Vec<Value> = std::fs::read_to_string(self.probe_log())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .collect();
        let at = |find: &dyn Fn(&Value) -> bool| {
            log.iter()
                .find(|l| find(&l["message"]))
                .and_then(|l| l["at"].as_i64())
        };
        let called = at(&|m| m["method"] == "tools/call")?;
        let cancelled = at(&|m| m["method"] == "notifications/cancelled")?;
        let answered = at(&|m| m["result"]["content"][0]["text"].is_string());
        Some(format!(
            "cancelled {} ms after the call, answered after {} ms",
            cancelled - called,
            answered.map_or("no".to_owned(), |a| (a - called).to_string())
        ))
    }

    fn initialize(&self) -> Option<Value> {
        self.probe_messages()
            .into_iter()
            .find(|m| m["method"] == "initialize")
    }

    /// The `clientInfo.name` the program gave the probe server in `initialize`.
    pub fn client_info(&self) -> Option<String> {
        Some(
            self.initialize()?["params"]["clientInfo"]["name"]
                .as_str()?
                .to_owned(),
        )
    }

    pub fn client_capabilities(&self) -> String {
        self.initialize()
            .map(|m| {
                format!(
                    "{} {}",
                    m["params"]["protocolVersion"], m["params"]["capabilities"]
                )
            })
            .unwrap_or_default()
    }

    /// The methods the program sent the probe server, in order of their first, each
    /// with how many times.
    pub fn probe_methods(&self) -> Vec<String> {
        let mut methods: Vec<(String, usize)> = Vec::new();
        for m in self.probe_messages() {
            let Some(method) = m["method"].as_str() else {
                continue;
            };
            match methods.iter_mut().find(|(name, _)| name == method) {
                Some((_, count)) => *count += 1,
                None => methods.push((method.to_owned(), 1)),
            }
        }
        methods
            .into_iter()
            .map(|(name, count)| match count {
                1 => name,
                n => format!("{name} x{n}"),
            })
            .collect()
    }

    /// The `_meta` keys of the program's first `tools/call` to the probe server.
    pub fn call_meta(&self) -> String {
        self.probe_messages()
            .into_iter()
            .find(|m| m["method"] == "tools/call")
            .and_then(|m| {
                m["params"]["_meta"]
                    .as_object()
                    .map(|o| o.keys().cloned().collect::<Vec<_>>().join(", "))
            })
            .unwrap_or_default()
    }

    /// Which of the probe server's pushed texts reached a request to the model, and
    /// from which request on: the one that carries the probe's result, or a later one.
    pub fn pushed_kinds(&self, model: &FakeModel) -> Vec<String> {
        let bodies: Vec<String> = model
            .requests()
            .iter()
            .filter(|r| r.turn)
            .map(|r| r.body.to_string())
            .collect();
        let result_at = bodies.iter().position(|b| b.contains("PROBE-RESULT"));
        [
            "PUSH-LOG",
            "PUSH-PROGRESS",
            "PUSH-RESOURCE",
            "PUSH-CHANNEL",
            "PUSH-TOOLS",
        ]
        .into_iter()
        .filter_map(|kind| {
            let at = bodies.iter().position(|b| b.contains(kind))?;
            let when = match result_at.map(|r| at as i64 - r as i64) {
                Some(0) => "from the request that carries the probe's result on".to_owned(),
                Some(n) if n > 0 => format!("from the {n}. request after the one with the result"),
                _ => "before the probe's result".to_owned(),
            };
            Some(format!("{kind} ({when})"))
        })
        .collect()
    }

    /// Kills what the program left: its process group (node children, `bashc mcp`,
    /// the probe server). The daemon and its jobs go with `self.daemon`.
    pub fn finish(&mut self) {
        if let Some(pid) = self.group.take().and_then(rustix::process::Pid::from_raw) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.finish();
    }
}

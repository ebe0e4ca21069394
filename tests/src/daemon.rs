//! A real `bashd` on a temporary runtime directory, killed with everything its jobs
//! started when the value is dropped, even when the test panicked.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use bashc::protocol::{ExecParams, runtime};

use crate::output::{json, show};
use crate::procs;

/// How long a daemon has to start answering on its socket.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The path of a binary of this workspace, in the target directory the running test
/// executable was built into (`target/<profile>/deps/..`).
///
/// `$BASHD_TEST_BIN_DIR` names another directory: the tests then run against the
/// binaries there (an older build, to see a test fail without its fix), as long as
/// they speak this build's protocol where a test uses the library.
pub fn bin_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    let mut dir = exe.parent().expect("the test executable is in a directory");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("deps has a parent");
    }
    let chosen = std::env::var_os("BASHD_TEST_BIN_DIR").map(PathBuf::from);
    let path = chosen.as_deref().unwrap_or(dir).join(name);
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build --workspace --bins` (the README's test command `cargo test --workspace` builds it)",
        path.display()
    );
    path
}

/// The path of the `bashc` under test, as text for a command line a job runs.
pub fn bashc_path() -> String {
    bin_path("bashc").display().to_string()
}

/// Copies of this workspace's programs (`bashd`, its `bashd-resident`, `bashc`) in a
/// new directory `dir`, every one of them mode 0755, for a test that runs them as
/// another user: the build's own may sit where only its owner can enter (a clone in
/// a `mktemp -d` directory, `/root/src`). `dir`'s parents must let that user through;
/// the copies go with `dir`.
pub fn copy_bins(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    for name in ["bashd", "bashd-resident", "bashc"] {
        let copy = dir.join(name);
        std::fs::copy(bin_path(name), &copy)
            .unwrap_or_else(|e| panic!("cannot copy {name} to {}: {e}", copy.display()));
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir.to_owned()
}

/// The `[sandbox]` of a test whose subject is not the sandbox but whose agent's jobs
/// must run as they did before `bashc mcp` was confined by default (issue 44): exact
/// results with no sandbox line, a server the test reaches from the host. Written as
/// a person turns the agent's confinement off.
pub const AGENTS_UNCONFINED: &str = "[sandbox]\ndefault = \"off\"\nnetwork = \"on\"\n";

pub struct Daemon {
    /// Holds the runtime directory; removed on drop.
    temp: tempfile::TempDir,
    runtime_dir: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    /// Starts `bashd` on a new temporary runtime directory and waits until it answers.
    pub fn start() -> Daemon {
        let daemon = Self::unstarted();
        daemon.spawn_and_wait()
    }

    /// Starts `bashd` with `config` as its config file and waits until it answers.
    pub fn start_with_config(config: &str) -> Daemon {
        let daemon = Self::unstarted();
        daemon.write_config(config);
        daemon.spawn_and_wait()
    }

    /// [`Daemon::start_with_config`] of [`AGENTS_UNCONFINED`].
    pub fn start_agents_unconfined() -> Daemon {
        Self::start_with_config(AGENTS_UNCONFINED)
    }

    /// A runtime directory with no daemon yet; `spawn_and_wait` starts one, and drop
    /// cleans up whatever was started on the directory, by anyone.
    pub fn unstarted() -> Daemon {
        Self::unstarted_in(&std::env::temp_dir())
    }

    /// As [`Daemon::unstarted`], with the runtime and scratch directories in `dir`
    /// (a benchmark puts them on a tmpfs, where a user's `/run/user/UID` is).
    pub fn unstarted_in(dir: &Path) -> Daemon {
        let temp = tempfile::Builder::new()
            .prefix("bashd-test-")
            .tempdir_in(dir)
            .expect("cannot create a temporary directory");
        let runtime_dir = temp.path().join("run");
        Daemon {
            temp,
            runtime_dir,
            child: None,
        }
    }

    /// Starts `bashd` on this directory and waits for its socket to answer.
    pub fn spawn_and_wait(mut self) -> Daemon {
        self.restart();
        self
    }

    /// Starts a new `bashd` on this directory (the last one this value started must
    /// be gone) and waits for its socket to answer. Its log is appended to
    /// [`Daemon::log`].
    pub fn restart(&mut self) {
        let command = self.bashd_command();
        self.start_with(command);
    }

    /// Starts `command`, which runs a `bashd` on this directory (the last one this
    /// value started must be gone), with its stderr appended to [`Daemon::log`], and
    /// waits for the socket to answer.
    pub fn start_with(&mut self, mut command: Command) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("cannot open the daemon's log file");
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("cannot spawn bashd");
        self.child = Some(child);
        self.wait_for_socket();
    }

    /// Waits until the socket accepts a connection.
    pub fn wait_for_socket(&self) {
        let socket = self.socket_path();
        let answered = procs::wait_until(START_TIMEOUT, || {
            std::os::unix::net::UnixStream::connect(&socket).is_ok()
        });
        assert!(
            answered,
            "bashd did not answer on {} in time",
            socket.display()
        );
    }

    /// SIGKILLs the daemon this value started and reaps it; its jobs live on.
    pub fn kill_daemon(&mut self) {
        let child = self.child_mut();
        child.kill().expect("cannot SIGKILL bashd");
        child.wait().expect("cannot reap bashd");
    }

    /// Where the daemons this value starts write their log (stderr).
    pub fn log_path(&self) -> PathBuf {
        self.temp.path().join("bashd.stderr")
    }

    /// Everything the daemons this value started have logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Waits until the log holds `text`; false if it does not within `timeout`.
    pub fn wait_for_log(&self, text: &str, timeout: Duration) -> bool {
        procs::wait_until(timeout, || self.log().contains(text))
    }

    /// A `bashd` command for this runtime directory, not started.
    pub fn bashd_command(&self) -> Command {
        self.bashd_command_from(&bin_path("bashd"))
    }

    /// As [`Daemon::bashd_command`], with the `bashd` at `program` (a copy from
    /// [`copy_bins`]).
    pub fn bashd_command_from(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .env(runtime::RUNTIME_DIR_ENV, &self.runtime_dir)
            .env("XDG_CONFIG_HOME", self.config_home())
            // bashd's tool caches (issue 44) in the test's scratch, not the tester's home.
            .env("XDG_CACHE_HOME", self.scratch().join("cache"))
            .env("BASHD_LOG", "info");
        command
    }

    pub fn runtime_dir(&self) -> &Path {
        &self.runtime_dir
    }

    /// The `XDG_CONFIG_HOME` of the daemon: empty unless a test writes
    /// `bashd/config.toml` into it, so the user's own config never applies.
    pub fn config_home(&self) -> PathBuf {
        self.temp.path().join("config")
    }

    /// Writes the daemon's config file (before `spawn_and_wait`).
    pub fn write_config(&self, text: &str) {
        let dir = self.config_home().join("bashd");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), text).unwrap();
    }

    /// A scratch directory beside the runtime dir, removed with it.
    pub fn scratch(&self) -> &Path {
        self.temp.path()
    }

    pub fn socket_path(&self) -> PathBuf {
        runtime::socket_path(&self.runtime_dir)
    }

    /// The pid of the daemon this value started.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the daemon was started").id()
    }

    /// The daemon's child process, to signal or wait for it.
    pub fn child_mut(&mut self) -> &mut Child {
        self.child.as_mut().expect("the daemon was started")
    }

    /// A `bashc` command aimed at this daemon, with autostart off and a fixed session.
    pub fn bashc(&self) -> Command {
        self.bashc_from(&bin_path("bashc"))
    }

    /// As [`Daemon::bashc`], with the `bashc` at `program` (a copy from [`copy_bins`]).
    pub fn bashc_from(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .env(runtime::RUNTIME_DIR_ENV, &self.runtime_dir)
            .env("XDG_CONFIG_HOME", self.config_home())
            .env("BASHD_NO_AUTOSTART", "1")
            .env("BASHD_SESSION", "test")
            .stdin(Stdio::null());
        command
    }

    /// A [`Daemon::bashc`] that runs in `dir`: the directory a client runs in is the
    /// writable root of the confined jobs it starts (issue 42), so a test whose job
    /// writes a workspace runs its client there, as a person would.
    pub fn bashc_at(&self, dir: &Path) -> Command {
        let mut command = self.bashc();
        command.current_dir(dir);
        command
    }

    /// Runs `bashc ARGS` in `dir` to completion ([`Daemon::bashc_at`]).
    pub fn run_bashc_at(&self, dir: &Path, args: &[&str]) -> Output {
        self.bashc_at(dir)
            .args(args)
            .output()
            .expect("cannot run bashc")
    }

    /// `bashc mcp` of `session` on this daemon, started in `dir` with `env` over the
    /// test's environment, its stdin and stdout one end of a socket pair whose other
    /// end the test speaks JSON-RPC on (reads time out after `timeout`): the server,
    /// the end to write, the end to read lines from.
    pub fn mcp_over_socket(
        &self,
        session: &str,
        dir: &std::path::Path,
        env: &[(&str, &str)],
        timeout: Duration,
    ) -> (
        procs::KillOnDrop,
        std::os::unix::net::UnixStream,
        std::io::BufReader<std::os::unix::net::UnixStream>,
    ) {
        use std::os::fd::OwnedFd;
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let server = procs::KillOnDrop(
            Command::new(bin_path("bashc"))
                .arg("mcp")
                .env(runtime::RUNTIME_DIR_ENV, &self.runtime_dir)
                .env("XDG_CONFIG_HOME", self.config_home())
                .env("BASHD_NO_AUTOSTART", "1")
                .env("BASHD_SESSION", session)
                .envs(env.iter().copied())
                .current_dir(dir)
                .stdin(OwnedFd::from(theirs.try_clone().unwrap()))
                .stdout(OwnedFd::from(theirs))
                .stderr(Stdio::null())
                .spawn()
                .expect("cannot start bashc mcp"),
        );
        ours.set_read_timeout(Some(timeout)).unwrap();
        let to = ours.try_clone().unwrap();
        (server, to, std::io::BufReader::new(ours))
    }

    /// Runs `bashc ARGS` to completion.
    pub fn run_bashc(&self, args: &[&str]) -> Output {
        self.bashc().args(args).output().expect("cannot run bashc")
    }

    /// A `bashc` command aimed at this daemon as a client of `session`
    /// (`BASHD_SESSION`).
    pub fn bashc_in(&self, session: &str) -> Command {
        let mut command = self.bashc();
        command.env("BASHD_SESSION", session);
        command
    }

    /// Runs `bashc exec --json ARGS` (session `test`), which must exit 0; its result.
    pub fn exec_json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.run_bashc(&[&["exec", "--json"][..], args].concat());
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        json(&out)
    }

    /// Runs `bashc ARGS` as a client of `session` to completion.
    pub fn run_bashc_in(&self, session: &str, args: &[&str]) -> Output {
        self.bashc_in(session)
            .args(args)
            .output()
            .expect("cannot run bashc")
    }

    /// Starts `command` in the background in `session` (`bashc exec --json --mode
    /// background EXTRA -- COMMAND`); its job id.
    pub fn background_in(&self, session: &str, extra: &[&str], command: &str) -> String {
        self.background_answer(session, extra, command)["job"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The JSON answer of [`Daemon::background_in`]'s exec: the job's id, pid, state.
    pub fn background_answer(
        &self,
        session: &str,
        extra: &[&str],
        command: &str,
    ) -> serde_json::Value {
        let args = [
            &["exec", "--json", "--mode", "background"][..],
            extra,
            &["--", command],
        ]
        .concat();
        let out = self.run_bashc_in(session, &args);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
        json(&out)
    }

    /// Like [`Daemon::background_in`], for a job that ends at once and whose end the
    /// test wants told in the inbox: a job that ended before its background answer was
    /// told there, so has no event; it is started again until its answer says running.
    pub fn background_running_in(&self, session: &str, command: &str) -> String {
        for _ in 0..20 {
            let answer = self.background_answer(session, &[], command);
            if answer["state"] == "running" {
                return answer["job"].as_str().unwrap().to_owned();
            }
        }
        panic!("`{command}` ended before its background answer 20 times");
    }

    /// A connected library client.
    pub async fn client(&self) -> bashc::Client {
        bashc::Client::connect(&self.socket_path())
            .await
            .expect("cannot connect to the test daemon")
    }

    /// The caller of session `test`, the session of [`Daemon::params`] and of
    /// [`Daemon::bashc`], owned by the process that connects.
    pub fn caller(&self) -> bashc::protocol::Caller {
        bashc::protocol::Caller {
            session: "test".to_owned(),
            owner: None,
        }
    }

    /// Exec parameters for `command` in session `test`, with this runtime dir in the
    /// job's environment so that cleanup can find the job's processes.
    pub fn params(&self, command: &str) -> ExecParams {
        let mut params = ExecParams::new(command, "test", self.scratch().to_str().unwrap());
        params.env = vec![
            (
                b"PATH".to_vec(),
                std::env::var("PATH").unwrap_or_default().into_bytes(),
            ),
            (
                runtime::RUNTIME_DIR_ENV.as_bytes().to_vec(),
                self.runtime_dir.to_str().unwrap().as_bytes().to_vec(),
            ),
        ];
        params
    }

    /// Creates the runtime dir as bashd would (mode 0700), for a test to seed it
    /// before the daemon starts; its path.
    pub fn make_runtime_dir(&self) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(&self.runtime_dir).unwrap();
        std::fs::set_permissions(&self.runtime_dir, std::fs::Permissions::from_mode(0o700))
            .unwrap();
        self.runtime_dir.clone()
    }

    /// The names in `R/sessions`, sorted: the session dirs on disk, whoever made them.
    pub fn session_dirs(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(runtime::sessions_dir(&self.runtime_dir))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Live processes started by jobs of this daemon: they carry a job cookie and
    /// this runtime dir in their environment.
    pub fn job_processes(&self) -> Vec<u32> {
        let dir = format!(
            "{}={}",
            runtime::RUNTIME_DIR_ENV,
            self.runtime_dir.display()
        );
        procs::pids_with_env(&["BASHD_JOB=", &dir])
    }

    /// Live `bashd` processes serving this runtime dir, whoever started them.
    pub fn daemons(&self) -> Vec<u32> {
        let dir = format!(
            "{}={}",
            runtime::RUNTIME_DIR_ENV,
            self.runtime_dir.display()
        );
        procs::pids_with_env(&[&dir])
            .into_iter()
            .filter(|&pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim() == "bashd")
            })
            .collect()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- bashd log\n{}--- end of bashd log", self.log());
        }
        let kill = |pid: u32| {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        };
        // The daemons' own children (the tools it asks where they fetch from, in
        // process groups of their own) would outlive a SIGKILLed daemon for a moment
        // and write into the scratch dir after it is removed: ended with it.
        let daemons: Vec<u32> = self
            .child
            .iter()
            .map(Child::id)
            .chain(self.daemons())
            .collect();
        let children: Vec<u32> = procs::all_pids()
            .into_iter()
            .filter(|&pid| procs::parent_pid(pid).is_some_and(|parent| daemons.contains(&parent)))
            .collect();
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Daemons started by bashc's autostart are not our children.
        for pid in self.daemons() {
            kill(pid);
        }
        children.into_iter().for_each(kill);
        // Jobs outlive a SIGKILLed daemon; sweep until none is left, since a dying
        // shell may still fork.
        procs::wait_until(Duration::from_secs(10), || {
            let left = self.job_processes();
            left.iter().copied().for_each(kill);
            left.is_empty()
        });
    }
}

//! A real OpenSSH server on 127.0.0.1 for the remote-host tests and bench (issue 19):
//! a free port, a host key and a user key made for it, the test user's own account. ssh
//! is pointed at it through a generated config file (`ssh -F`), never the user's
//! `~/.ssh`. Dropping it kills sshd and every process whose command line or environment
//! names its directory (the ssh masters, the bridges), even when a test fails.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::procs::{all_pids, cmdline, environ, wait_until};

/// The `Host` of the generated ssh config.
pub const HOST: &str = "bashd-test-host";

pub struct Sshd {
    /// Holds the keys, the configs and the log; removed on drop.
    temp: tempfile::TempDir,
    child: Child,
    /// More paths whose processes die with the server: the runtime dirs whose control
    /// sockets the ssh masters name in their command lines (`ssh: DIR/ssh/… [mux]`).
    also: Vec<String>,
}

impl Sshd {
    /// Starts sshd, or says in words why it cannot run here (no sshd binary, a
    /// failure to start): the caller skips with that word.
    pub fn start() -> Result<Sshd, String> {
        let sshd = ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .ok_or("no sshd (install openssh-server; .ci/run does)")?;
        let temp = tempfile::Builder::new()
            .prefix("bashd-sshd-i19-")
            .tempdir()
            .map_err(|e| format!("cannot make a temp dir: {e}"))?;
        let dir = temp.path();
        for key in ["host_key", "user_key"] {
            keygen(&dir.join(key))?;
        }
        std::fs::copy(dir.join("user_key.pub"), dir.join("authorized_keys"))
            .map_err(|e| format!("cannot write authorized_keys: {e}"))?;
        if rustix::process::geteuid().is_root() {
            // sshd run by root wants its privilege separation directory.
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let port = free_port()?;
        let d = dir.display();
        write(
            &dir.join("sshd_config"),
            &format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
                 AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nUsePAM no\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin yes\nAllowTcpForwarding no\nX11Forwarding no\nPrintMotd no\n\
                 MaxSessions 100\nMaxStartups 100\n"
            ),
        )?;
        write(
            &dir.join("ssh_config"),
            &format!(
                "Host {HOST}\n  HostName 127.0.0.1\n  Port {port}\n  IdentityFile {d}/user_key\n  \
                 IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  \
                 GlobalKnownHostsFile /dev/null\n  LogLevel ERROR\n  BatchMode yes\n"
            ),
        )?;
        let log = std::fs::File::create(dir.join("sshd.log"))
            .map_err(|e| format!("cannot create the sshd log: {e}"))?;
        let child = Command::new(&sshd)
            .args(["-D", "-e", "-f"])
            .arg(dir.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", sshd.display()))?;
        let mut sshd = Sshd {
            temp,
            child,
            also: Vec::new(),
        };
        let listening = wait_until(Duration::from_secs(10), || {
            sshd.child.try_wait().ok().flatten().is_none()
                && TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        let logged_in = listening
            && Command::new("ssh")
                .arg("-F")
                .arg(sshd.config())
                .args([HOST, "true"])
                .stdin(Stdio::null())
                .output()
                .is_ok_and(|out| out.status.success());
        if !logged_in {
            return Err(format!("sshd does not let the test log in: {}", sshd.log()));
        }
        Ok(sshd)
    }

    /// The ssh config file that reaches [`HOST`].
    pub fn config(&self) -> PathBuf {
        self.temp.path().join("ssh_config")
    }

    pub fn dir(&self) -> &Path {
        self.temp.path()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.temp.path().join("sshd.log")).unwrap_or_default()
    }

    /// `[remote] bridge_command` for this server: multiplexed as bashc's default is,
    /// running this build's `bashc bridge` with `remote_runtime_dir` as its runtime dir
    /// and `remote_config_home` as its config home (not the user's).
    pub fn bridge_command(&self, remote_runtime_dir: &Path, remote_config_home: &Path) -> String {
        let bin = crate::bin_path("bashc");
        let bin_dir = bin.parent().expect("a binary is in a directory").display();
        format!(
            "ssh -F {} -o ControlMaster=auto -o ControlPath={{control}} -o ControlPersist=60 {{host}} 'PATH={bin_dir}:$PATH BASHD_RUNTIME_DIR={} XDG_CONFIG_HOME={}' {{bashc}} bridge",
            self.config().display(),
            remote_runtime_dir.display(),
            remote_config_home.display()
        )
    }

    /// Kills, with the server, the processes that name `dir` (a client runtime dir,
    /// whose control sockets the ssh masters are named after).
    pub fn clean_up_after(&mut self, dir: &Path) {
        self.also.push(dir.display().to_string());
    }

    /// The ssh processes of this server's clients: those run with its config, and the
    /// masters that hold the connections.
    pub fn ssh_clients(&self) -> Vec<u32> {
        let config = self.config().display().to_string();
        all_pids()
            .into_iter()
            .filter(|&pid| {
                let line = cmdline(pid);
                line.starts_with("ssh")
                    && (line.contains(&config) || self.also.iter().any(|d| line.contains(d)))
            })
            .collect()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut dirs = self.also.clone();
        dirs.push(self.temp.path().display().to_string());
        let me = std::process::id();
        for pid in all_pids() {
            let line = cmdline(pid);
            let env = environ(pid);
            let names_dir = dirs
                .iter()
                .any(|dir| line.contains(dir) || env.iter().any(|e| e.contains(dir)));
            if pid != me && names_dir {
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_raw(pid as i32).expect("a pid of /proc is not 0"),
                    rustix::process::Signal::KILL,
                );
            }
        }
    }
}

fn keygen(path: &Path) -> Result<(), String> {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run ssh-keygen: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ssh-keygen failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A port nothing listens on now (bound and released; sshd takes it right after).
fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// The relays (`bashc relay HOST`) of the client runtime dir `runtime_dir`.
pub fn relay_pids(runtime_dir: &Path) -> Vec<u32> {
    let dir = runtime_dir.display().to_string();
    all_pids()
        .into_iter()
        .filter(|&pid| {
            let line = cmdline(pid);
            line.contains(" relay ") && line.contains(&dir)
        })
        .collect()
}

/// The bridges (`bashc bridge`) serving the far runtime dir `runtime_dir`.
pub fn bridge_pids(runtime_dir: &Path) -> Vec<u32> {
    let entry = format!("BASHD_RUNTIME_DIR={}", runtime_dir.display());
    all_pids()
        .into_iter()
        .filter(|&pid| cmdline(pid).ends_with("bashc bridge") && environ(pid).contains(&entry))
        .collect()
}

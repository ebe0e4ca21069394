//! The `bashd` binary: arguments, logging, signals, then [`bashd::run`].

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use bashd::config::Config;
use bashd::runtime::Runtime;
use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The bashd supervisor: runs shell commands for coding agents and owns every process
/// it starts.
///
/// `bashc` starts it on demand; it can also run as a systemd user service. It serves
/// the socket `bashd.sock` in its runtime directory: $BASHD_RUNTIME_DIR, else
/// $XDG_RUNTIME_DIR/bashd, else /run/user/$UID/bashd when that directory is yours,
/// else /tmp/bashd-$UID. Only one bashd runs per runtime
/// directory. At start it ends whatever a bashd that did not stop (SIGKILL, a crash)
/// left running, from the journal in that directory. SIGTERM or SIGINT stops every job
/// and exits 0; SIGHUP reloads the config (a config with an error is not taken: the old
/// one stays, and the log says why).
///
/// Settings come from --config, else $XDG_CONFIG_HOME/bashd/config.toml, else
/// ~/.config/bashd/config.toml; a missing default file means all defaults.
///
/// Under systemd (systemd/bashd.service, bashd.socket) it serves the socket systemd
/// passes, tells systemd when it is ready, and logs to the journal.
///
/// Log level: BASHD_LOG (error, warn, info, debug, trace; default info).
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The config file to use instead of the default one; it must exist.
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Check the config file and exit: say what is wrong (exit 1), or print the
    /// config in force, every key, with each change from the defaults marked and every
    /// built-in policy rule said to be on or OFF (exit 0).
    #[arg(long)]
    check_config: bool,
}

fn main() -> ExitCode {
    bashd::allocator::tune();
    let args = Args::parse();
    init_logging();
    if args.check_config {
        return check_config(args.config.as_deref());
    }
    match start(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("bashd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `--check-config`: the config in force, or what is wrong with the file.
fn check_config(path: Option<&Path>) -> ExitCode {
    match Config::load(path) {
        Ok((config, file)) => {
            let source = match file {
                Some(path) => format!("{} is valid", path.display()),
                None => match bashd::config::default_path() {
                    Some(path) => format!("no config file at {}", path.display()),
                    None => "no config file ($XDG_CONFIG_HOME and $HOME are unset)".to_owned(),
                },
            };
            print!(
                "# {source}; the config in force:\n\n{}",
                config.effective_toml()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bashd: {e}");
            ExitCode::FAILURE
        }
    }
}

fn start(args: &Args) -> anyhow::Result<()> {
    let (config, config_path) = Config::load(args.config.as_deref())?;
    if let Some(path) = config_path {
        tracing::info!("using config {}", path.display());
    }
    let dir = bashd_protocol::runtime::runtime_dir();
    let inherited = inherited_listener()?;
    if let Some(listener) = &inherited {
        let path = listener
            .local_addr()
            .ok()
            .and_then(|addr| addr.as_pathname().map(Path::to_owned));
        tracing::info!(
            "serving the socket systemd passed: {:?}",
            path.unwrap_or_default()
        );
    }
    let (runtime, listener) = Runtime::acquire(&dir, inherited)?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    tokio.block_on(async {
        let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
        let shutdown = async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        };
        bashd::run(runtime, listener, config, args.config.clone(), shutdown).await
    })
}

/// The runtime's worker threads: one less than the cores, at least one
/// (docs/design/runtime.md). On two cores that is one worker, which spends about a tenth
/// less CPU per `exec` than two (no hand-offs between workers, which under load each wait
/// for a core) and loses nothing where the jobs hold the other core; with more cores,
/// a flood of output (a capture, a terminal's screen) runs beside the requests.
fn worker_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get().saturating_sub(1).max(1))
}

/// The listening socket systemd passed (socket activation: `LISTEN_FDS`, `LISTEN_PID`),
/// if it passed one. It is made close-on-exec, so jobs do not inherit it.
fn inherited_listener() -> anyhow::Result<Option<UnixListener>> {
    let fds: Vec<RawFd> = sd_notify::listen_fds()
        .context("cannot read the sockets systemd passed (LISTEN_FDS, LISTEN_PID)")?
        .collect();
    let fd = match fds.as_slice() {
        [] => return Ok(None),
        [fd] => *fd,
        many => anyhow::bail!(
            "systemd passed {} sockets; bashd serves one: bashd.socket should have one ListenStream",
            many.len()
        ),
    };
    // SAFETY: systemd passed the fd for this process to own; nothing else uses it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let is_unix = rustix::net::sockopt::socket_domain(&fd)
        .is_ok_and(|domain| domain == rustix::net::AddressFamily::UNIX);
    let listening = rustix::net::sockopt::socket_acceptconn(&fd).unwrap_or(false);
    if !(is_unix && listening) {
        anyhow::bail!(
            "the socket systemd passed is not a listening Unix socket: bashd.socket needs ListenStream=%t/bashd/bashd.sock"
        );
    }
    let listener = UnixListener::from(fd);
    listener
        .set_nonblocking(true)
        .context("cannot use the socket systemd passed")?;
    Ok(Some(listener))
}

/// Logs go to the journal when systemd connected stderr to it, to stderr otherwise.
/// Level: BASHD_LOG.
fn init_logging() {
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_env("BASHD_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
    };
    if stderr_is_journal() {
        match tracing_journald::layer() {
            Ok(journal) => {
                tracing_subscriber::registry()
                    .with(filter())
                    .with(journal.with_syslog_identifier("bashd".to_owned()))
                    .init();
                return;
            }
            Err(e) => eprintln!("bashd: cannot log to the journal, logging to stderr: {e}"),
        }
    }
    tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

/// Whether stderr is the journal stream systemd names in `JOURNAL_STREAM`
/// (`<device>:<inode>`); a daemon started by a process that runs under systemd inherits
/// the variable but not the stream.
fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    rustix::fs::fstat(std::io::stderr())
        .is_ok_and(|stat| value.to_string_lossy() == format!("{}:{}", stat.st_dev, stat.st_ino))
}

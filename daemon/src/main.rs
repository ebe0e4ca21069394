//! The `bashd` binary: arguments, logging, signals, then [`bashd::run`].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use bashd::config::Config;
use bashd::runtime::Runtime;
use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};

/// The bashd supervisor: runs shell commands for coding agents and owns every process
/// it starts.
///
/// `bashc` starts it on demand; it can also run as a systemd user service. It serves
/// the socket `bashd.sock` in its runtime directory: $BASHD_RUNTIME_DIR, else
/// $XDG_RUNTIME_DIR/bashd, else /tmp/bashd-$UID. Only one bashd runs per runtime
/// directory. SIGTERM or SIGINT stops every job and exits 0.
///
/// Settings come from --config, else $XDG_CONFIG_HOME/bashd/config.toml, else
/// ~/.config/bashd/config.toml; a missing default file means all defaults.
///
/// Log level: BASHD_LOG (error, warn, info, debug, trace; default info).
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The config file to use instead of the default one; it must exist.
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Check the config file, say what is wrong or that it is fine, and exit.
    #[arg(long)]
    check_config: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    init_logging();
    if args.check_config {
        return match Config::load(args.config.as_deref()) {
            Ok((_, Some(path))) => {
                println!("{}: ok", path.display());
                ExitCode::SUCCESS
            }
            Ok((_, None)) => {
                println!("no config file; every setting has its default");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bashd: {e}");
                ExitCode::FAILURE
            }
        };
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

fn start(args: &Args) -> anyhow::Result<()> {
    let (config, config_path) = Config::load(args.config.as_deref())?;
    if let Some(path) = config_path {
        tracing::info!("using config {}", path.display());
    }
    let dir = bashd_protocol::runtime::runtime_dir();
    let (runtime, listener) = Runtime::acquire(&dir)?;
    let tokio = tokio::runtime::Builder::new_multi_thread()
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
        bashd::run(runtime, listener, config, shutdown).await
    })
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BASHD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

//! The `bashd` binary: arguments, logging, signals, then [`bashd::run`].

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
/// Log level: BASHD_LOG (error, warn, info, debug, trace; default info).
#[derive(Debug, Parser)]
#[command(version)]
struct Args {}

fn main() -> ExitCode {
    let _args = Args::parse();
    init_logging();
    match start() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("bashd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn start() -> anyhow::Result<()> {
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
        bashd::run(runtime, listener, Config::default(), shutdown).await
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

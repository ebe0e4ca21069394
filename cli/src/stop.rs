//! `bashc stop`: asks the daemon to stop, as SIGTERM does, and waits until it has
//! exited. It never starts a daemon to stop it.

use std::time::{Duration, Instant};

use clap::Args;
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, pidfd_open};

/// How long a stopping daemon has to exit: every job gets its grace time (2 s by
/// default) at once, then its clients a few seconds to read their last answers.
const EXIT_DEADLINE: Duration = Duration::from_secs(60);

#[derive(Debug, Args)]
pub struct StopArgs {}

pub async fn stop(_args: StopArgs, target: &bashc::Target) -> anyhow::Result<u8> {
    // Inside a sandboxed job, its channel is the way to bashd (which refuses the stop).
    let in_job = std::env::var_os(bashc::protocol::channel::CHANNEL_ENV).is_some();
    let client = match target.host() {
        Some(_) => bashc::connect(target).await?,
        None if in_job => bashc::connect(target).await?,
        None => {
            let socket = bashc::protocol::runtime::socket_path(target.runtime_dir());
            match bashc::Client::connect(&socket).await {
                Ok(client) => client,
                // Stopping what is stopped is done, as for `systemctl stop`.
                Err(e) if e.is_not_running() => {
                    eprintln!("bashc: bashd is not running at {}", socket.display());
                    return Ok(0);
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    let stopping = client.stop().await?;
    let pid = stopping.daemon_pid;
    let where_ = target
        .host()
        .map_or(String::new(), |host| format!(" on {host}"));
    println!(
        "stopping bashd{where_} (pid {pid}): ending {} running job{}",
        stopping.running_jobs,
        if stopping.running_jobs == 1 { "" } else { "s" }
    );
    // Another host's pid means nothing here: its daemon's answer is all there is.
    if target.host().is_some() {
        return Ok(0);
    }
    drop(client);
    if wait_for_exit(pid, EXIT_DEADLINE).await {
        println!("bashd stopped");
        Ok(0)
    } else {
        anyhow::bail!(
            "bashd (pid {pid}) has not exited {} s after it was asked to stop; its log ({}) says what it waits for, and kill -KILL {pid} ends it",
            EXIT_DEADLINE.as_secs(),
            bashc::protocol::runtime::log_path(target.runtime_dir()).display()
        )
    }
}

/// Whether process `pid` exits within `deadline`. Held by a pidfd, so a pid reused
/// after the daemon exited is not waited for instead.
async fn wait_for_exit(pid: u32, deadline: Duration) -> bool {
    let Some(pid) = Pid::from_raw(pid as i32) else {
        return false;
    };
    let pidfd = match pidfd_open(pid, PidfdFlags::empty()) {
        Ok(pidfd) => pidfd,
        // Gone already, or a kernel without pidfds: then the socket is the sign.
        Err(e) => return e == Errno::SRCH,
    };
    let start = Instant::now();
    while start.elapsed() < deadline {
        let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
        // A pidfd is readable once its process has exited; asked without blocking, in
        // short steps, so that the runtime is never held up.
        if rustix::event::poll(&mut fds, Some(&Timespec::default())).is_ok_and(|ready| ready > 0) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

//! Step: a terminal job (`exec --pty`). The daemon opens a pseudo-terminal, keeps its
//! master as the job's output and input, and gives the job the slave as stdin, stdout
//! and stderr, in the place of any pipe an earlier step gave it; the slave becomes the
//! shell's controlling terminal. See `jobs/job/pty/` for why the daemon, not the
//! resident, opens it.

use std::io;
use std::os::unix::process::CommandExt;

use bashd_protocol::PtySize;

use super::{Launch, Step, Target};
use crate::jobs::job::pty;

/// The job runs on a new terminal of this size.
#[derive(Debug)]
pub struct Terminal(pub PtySize);

impl Step for Terminal {
    fn add_to(self, launch: &mut Launch) -> io::Result<()> {
        let Terminal(size) = self;
        let (master, slave) = pty::open(size)?;
        match &mut launch.target {
            // The resident takes the terminal for the shell (`resident/src/pty.rs`).
            Target::Resident { frame, .. } => frame.pty = true,
            // SAFETY: the closure makes one system call (an ioctl on stdin, the slave),
            // async-signal-safe, and touches no memory of the parent. It runs after the
            // core's setsid, so the shell leads the session whose terminal it takes.
            Target::Direct(command) => unsafe {
                command.pre_exec(|| {
                    rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
                    Ok(())
                });
            },
        }
        launch.job.stdin = Some(slave.try_clone()?);
        launch.job.stdout = Some(slave.try_clone()?);
        // The daemon keeps no copy of the slave once the spawn has gone: the master
        // reads EIO once the job's last process has let go of the terminal.
        launch.job.stderr = Some(slave);
        launch.ours.stdin = Some(master.try_clone()?);
        launch.ours.stdout = Some(master);
        launch.ours.stderr = None;
        launch.pty = Some(size);
        Ok(())
    }
}

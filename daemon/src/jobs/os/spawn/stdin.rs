//! Step: a pipe for the job's stdin (`exec --stdin pipe`) instead of /dev/null; the
//! daemon keeps its write end, which `send` writes to (`jobs/job/stdin.rs`). The same
//! on either target: the core hands the read end to the shell.

use std::io;

use super::{Launch, Step, pipe};

/// The job reads a pipe the daemon writes.
#[derive(Debug)]
pub struct StdinPipe;

impl Step for StdinPipe {
    fn add_to(self, launch: &mut Launch) -> io::Result<()> {
        let (read, write) = pipe()?;
        launch.job.stdin = Some(read);
        launch.ours.stdin = Some(write);
        Ok(())
    }
}

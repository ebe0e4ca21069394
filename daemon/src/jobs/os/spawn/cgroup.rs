//! Step: the job's cgroup (`contain/cgroup.rs` makes it and writes its limits). The
//! resident clones the shell straight into it (`CLONE_INTO_CGROUP`), so the job's first
//! instruction already runs there. Only the resident can: a shell forked by the
//! daemon would start in the daemon's own cgroup.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::{Launch, Step, Target};

/// The job starts in the cgroup at this path.
#[derive(Debug)]
pub struct Cgroup<'a>(pub &'a Path);

impl Step for Cgroup<'_> {
    fn add_to(self, launch: &mut Launch) -> io::Result<()> {
        match &mut launch.target {
            Target::Resident { frame, .. } => {
                frame.cgroup = Some(self.0.as_os_str().as_bytes().to_vec());
                Ok(())
            }
            Target::Direct(_) => Err(io::Error::other(
                "a job cgroup needs bashd-resident, which the scan mechanism does without",
            )),
        }
    }
}

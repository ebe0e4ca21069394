//! Step: the rlimits a job starts with, and its OOM score. Every job gets back the
//! open-file limit the daemon started with (the daemon raises its own,
//! [`raise_open_files_limit`]); a job whose memory no cgroup holds gets `RLIMIT_AS`,
//! the nearest rlimit (containment decides, `contain/mod.rs`). Through the resident,
//! the job also gets a raised `oom_score_adj`, so the kernel picks a job, never the
//! daemon; a shell forked by the daemon (the scan mechanism) keeps the daemon's score.

use std::io;
use std::os::unix::process::CommandExt;

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

use super::{Launch, Step, Target};

/// What jobs get in `oom_score_adj`, so that under memory pressure the kernel picks a
/// job, never the daemon. Raising it needs no privilege.
pub const JOB_OOM_SCORE_ADJ: i32 = 500;

/// The rlimits of one job.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `RLIMIT_NOFILE`: the daemon's own before it raised it, when it did.
    pub open_files: Option<Rlimit>,
    /// `RLIMIT_AS` in bytes, soft and hard.
    pub address_space: Option<u64>,
}

impl Step for Limits {
    fn add_to(self, launch: &mut Launch) -> io::Result<()> {
        let Limits {
            open_files,
            address_space,
        } = self;
        match &mut launch.target {
            Target::Resident { frame, .. } => {
                frame.nofile = open_files.and_then(|limit| Some((limit.current?, limit.maximum?)));
                frame.rlimit_as = address_space;
                frame.oom_score_adj = Some(JOB_OOM_SCORE_ADJ);
            }
            Target::Direct(command) => {
                if open_files.is_none() && address_space.is_none() {
                    return Ok(());
                }
                // SAFETY: setrlimit is an async-signal-safe system call, and the limits
                // are copied into the closure before the fork, which touches nothing else.
                unsafe {
                    command.pre_exec(move || {
                        if let Some(limit) = open_files {
                            setrlimit(Resource::Nofile, limit)?;
                        }
                        if let Some(bytes) = address_space {
                            let limit = Rlimit {
                                current: Some(bytes),
                                maximum: Some(bytes),
                            };
                            setrlimit(Resource::As, limit)?;
                        }
                        Ok(())
                    });
                }
            }
        }
        Ok(())
    }
}

/// Raises the daemon's open-file limit to its hard limit: a job holds two pipes, and
/// a thousand background jobs pass the usual soft limit of 1024. Returns the limit the
/// daemon started with, for jobs to get back, when it was raised.
pub fn raise_open_files_limit() -> io::Result<Option<Rlimit>> {
    let original = getrlimit(Resource::Nofile);
    if original.current == original.maximum {
        return Ok(None);
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: original.maximum,
            maximum: original.maximum,
        },
    )?;
    Ok(Some(original))
}

//! Step: a sandboxed job (`crate::sandbox`): the resident applies the [`Spec`] in the
//! shell's process before `exec`, and the shell inherits the job's channel to the
//! daemon (`sandbox/channel.rs`) at [`CHANNEL_FD`]. Only the resident confines: a
//! sandboxed job is never forked by the daemon unconfined.
//!
//! [`CHANNEL_FD`]: bashd_resident_core::wire::CHANNEL_FD

use std::io;
use std::os::fd::OwnedFd;

use bashd_resident_core::confine::Spec;

use super::{Launch, Step, Target};

/// What confines the job, and its end of its channel to the daemon.
#[derive(Debug)]
pub struct Sandbox {
    pub spec: Spec,
    pub channel: Option<OwnedFd>,
    /// The user and network namespaces of the session network the job shares.
    pub network: Option<(OwnedFd, OwnedFd)>,
}

impl Step for Sandbox {
    fn add_to(self, launch: &mut Launch) -> io::Result<()> {
        match &mut launch.target {
            Target::Resident { frame, more } => {
                frame.sandbox = Some(self.spec.encode().into_encoded_bytes());
                // The last descriptor of the frame; the daemon's copy closes once the
                // spawn is sent.
                if let Some(channel) = self.channel {
                    frame.channel = true;
                    more.push(channel);
                }
                // After the channel, in the order `wire::Spawn` lists them.
                if let Some((user, net)) = self.network {
                    frame.network = true;
                    more.extend([user, net]);
                }
                Ok(())
            }
            // `plan` refuses a sandboxed job on the scan path first (`sandbox()`);
            // never run one unconfined.
            Target::Direct(_) => Err(io::Error::other(
                "the sandbox needs bashd-resident, which the scan mechanism does without",
            )),
        }
    }
}

//! The job table and everything that runs jobs: the actor that owns the table and the
//! sessions, the handle others use to reach it, one supervisor task per running job,
//! the reaper, and containment: which processes belong to a job and how they end.

mod actor;
pub(crate) mod contain;
mod descriptors;
mod handle;
pub mod inbox;
mod live;
mod new_output;
pub mod probe;
pub mod process;
pub mod pty;
mod session;
mod stdin;
mod supervisor;
mod teller;
mod terminal;
mod top;
mod wait_many;

pub use actor::{JobsActor, LostJob, new_instance_id};
pub use handle::{JobsHandle, shutting_down};
pub use process::raise_open_files_limit;

//! The job table and everything that runs jobs: the actor that owns the table, the
//! handle others use to reach it, one supervisor task per running job, and the reaper.

mod actor;
mod handle;
pub mod process;
mod supervisor;

pub use actor::JobsActor;
pub use handle::{JobsHandle, shutting_down};

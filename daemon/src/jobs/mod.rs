//! The job table and everything that runs jobs: the actor that owns the table and the
//! sessions, the handle others use to reach it, one supervisor task per running job,
//! the reaper, and the scan that finds every process of a job.

mod actor;
mod check;
mod handle;
pub(crate) mod members;
pub mod process;
mod session;
mod supervisor;

pub use actor::JobsActor;
pub use handle::{JobsHandle, shutting_down};
pub use members::raise_open_files_limit;

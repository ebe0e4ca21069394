//! The job table and everything that runs jobs, by layer: `requests/` has one file per
//! request a connection makes (its handle method, its message to the actor and the
//! actor's handler); `table/` is the actor that owns the job table and the sessions,
//! and the handle others use to reach it; `job/` is one running job (its supervisor,
//! pipes, live readers, terminal, stdin, teller); `os/` and `contain/` are the OS
//! side (the reaper, /proc, and which processes belong to a job and how they end).

pub(crate) mod contain;
mod job;
pub mod os;
pub(crate) mod requests;
mod table;

pub use job::pty;
pub use os::spawn::raise_open_files_limit;
pub use table::handle::{JobsHandle, shutting_down};
pub use table::{JobsActor, LostJob, new_instance_id};

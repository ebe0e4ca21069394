//! The OS side of jobs that is not containment (`contain/`): the reaper, which forks
//! and waits for every child of the daemon; a job's spawn, composed of steps
//! (`spawn/`); and the looks at a job's processes in /proc.

pub mod probe;
pub mod reaper;
pub mod spawn;

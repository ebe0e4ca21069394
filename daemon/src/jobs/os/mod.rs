//! The OS side of jobs that is not containment (`contain/`): the reaper, which spawns
//! and waits for every process, and the looks at a job's processes in /proc.

pub mod probe;
pub mod reaper;

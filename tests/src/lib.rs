//! Support for the end-to-end tests and benchmarks: a real `bashd` on a temporary
//! runtime directory, the real `bashc`, and `/proc` readers that check which
//! processes are alive without asking the daemon.

pub mod attack;
pub mod daemon;
pub mod fake_model;
pub mod output;
pub mod procs;
pub mod sshd;

pub use daemon::{AGENTS_UNCONFINED, Daemon, bashc_path, bin_path, copy_bins};
pub use procs::{
    KillOnDrop, alive, descendants, output_of_new_file, pids_running, wait_for_running, wait_until,
};

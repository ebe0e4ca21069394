//! What `bashd` and its resident (`bashd-resident`, the first process of every job)
//! share: the wire between them ([`wire`]: the zygote's spawn frame, the resident's
//! reports and the daemon's orders) and the confinement the resident applies to a
//! job's shell ([`confine`]: the daemon builds a [`confine::Spec`], the resident
//! applies it).
//!
//! A crate of its own so that the resident links only this, never the daemon's
//! library: it is exec'd once per daemon and forks every job's resident, so its start
//! and its size are on the first job's path.

// Every `unsafe` block says why it holds (issue 31).
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod confine;
pub mod wire;

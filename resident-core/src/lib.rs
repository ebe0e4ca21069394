//! What `bashd` and its resident (`bashd-resident`, the first process of every job)
//! share: the wire between them ([`wire`]: the zygote's spawn frame, the resident's
//! reports and the daemon's orders; [`frame`]: that frame on a socket, as the zygote
//! reads it and hands it to a spare) and the confinement the resident applies to a
//! job's shell ([`confine`]: the daemon builds a [`confine::Spec`], the resident
//! applies it).
//!
//! A crate of its own so that the resident links only this, never the daemon's
//! library: it is exec'd once per daemon and forks every job's resident, so its start
//! and its size are on the first job's path.

pub mod confine;
pub mod frame;
pub mod wire;

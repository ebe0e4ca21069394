//! One job while it runs: its supervisor (phases, pipes, live readers), its terminal
//! when it has one, the write end of its stdin, and the teller that tells its session
//! what it asked to be told.

pub mod pty;
pub(super) mod stdin;
pub(super) mod supervisor;
pub(super) mod teller;

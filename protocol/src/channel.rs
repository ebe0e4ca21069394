//! A sandboxed job's own way to its daemon (issue 30): a descriptor the job inherits,
//! a `SOCK_SEQPACKET` socket whose other end the daemon holds for that job alone.
//!
//! A client inside the job makes a connected pair of stream sockets, sends one end
//! over the channel (one message, one descriptor, `SCM_RIGHTS`), and speaks the
//! protocol over the other. The daemon takes every connection that arrives on a
//! job's channel as coming from that job: its session, its sandbox. Nothing a process
//! claims decides it, so a nested request cannot borrow another job's looser sandbox.

/// The number of the job's channel descriptor, in its environment.
pub const CHANNEL_ENV: &str = "BASHD_CHANNEL";

/// What a client sends with the descriptor: the message must carry a byte.
pub const CHANNEL_HELLO: &[u8] = b"c";

//! The contract between `bashd` and its clients: message types, the frame codec,
//! where the runtime directory and socket live, the limits both sides share, and how
//! text a job chose is made safe to show a person.
//!
//! This is the only crate that derives serde, at the two boundaries: the wire and the
//! config file a person writes (`config`). The daemon and the client depend on it and
//! on nothing of each other.

pub mod asks;
pub mod channel;
pub mod codec;
pub mod config;
pub mod exec;
pub mod inbox;
pub mod limits;
pub mod message;
pub mod notice;
pub mod peer;
pub mod proc_stat;
pub mod requests;
pub mod runtime;
pub mod sandbox;
pub mod text;
pub mod top;

pub use asks::{
    AllowReply, AllowRequest, AskId, AskInfo, AskKind, AskState, GrantInfo, GrantScope,
};
pub use codec::{FrameCodec, FrameError};
pub use exec::*;
pub use inbox::{Inbox, InboxEvent};
pub use message::*;
pub use notice::{Argument, BackgroundWhy, ErrorHint, JobId, Notice, WaitMet, Worded};
pub use proc_stat::{ProcStat, process_start_time};
pub use requests::*;
pub use sandbox::{
    FrontEnd, FrontEndSandbox, Network, NetworkStatus, ProxyStatus, SandboxDenial, SandboxInForce,
    SandboxMechanism, SandboxProfile, SandboxStatus, SettingFrom, ToolSource,
};
pub use top::{TopJob, TopRequest, WatchRequest, WatchUpdate};

/// Bumped on every incompatible change of the messages; `Hello` and `Welcome` carry it.
/// 7: `Watch` (a stream of the table's changes for `bashc top`) and `TopRequest::jobs`.
/// 8: a refusal's way out as data (`ErrorHint::NetworkOn`, ..., `Argument`; issue 31).
/// 9: `Argument::Until` and `Argument::Grep` (a bad pattern is a usage error; issue 45).
///    `CheckPolicy` carries the workdir to judge in (`PolicyCheck`; issue 42).
///    a session's writable roots are the person's (issue 42): `Notice::OutsideRoots`,
/// `Notice::NoWritableRoot`.
///    asks (issue 44): `Allow`, `Notice::Asked`, `ErrorHint::Ask`.
///    a session network's published ports (issue 43): `ListenPort::published`,
///    `WaitMet::Port::published`.
/// 10: an exec's job id before its spawn (`Response::Recorded`; issue 46), each front
///    end's sandbox in `SandboxStatus` (issue 44): a bashc of 9 cannot read a daemon of
///    10, and is told so at `Hello` rather than by a frame it cannot decode.
pub const PROTOCOL_VERSION: u32 = 10;

//! One file per request a connection makes.

pub(super) mod check;
pub(super) mod follow;
pub mod inbox;
pub(super) mod screen;
pub(super) mod top;
pub(super) mod wait_many;

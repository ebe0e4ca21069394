//! Names to addresses for the proxy, behind a trait so that tests map names of their
//! own to loopback addresses; the daemon's resolver is the system's (`getaddrinfo`,
//! through tokio's `lookup_host`). Only a name on the allow-list is ever resolved.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

/// What a resolution gives back: the addresses, in the order to try them.
pub type Resolving<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send + 'a>>;

/// Resolves a host name the allow-list let through.
pub trait Resolve: Send + Sync + 'static {
    fn resolve<'a>(&'a self, name: &'a str, port: u16) -> Resolving<'a>;
}

/// The system's resolver.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve<'a>(&'a self, name: &'a str, port: u16) -> Resolving<'a> {
        Box::pin(async move { Ok(tokio::net::lookup_host((name, port)).await?.collect()) })
    }
}

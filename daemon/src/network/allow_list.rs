//! The allow-list in force (issue 43): `[sandbox] allow_hosts` as the proxy asks it.
//! A name is judged before it is resolved, so an unlisted name costs no DNS lookup;
//! the addresses a listed name resolves to are judged again, so a name that resolves
//! to the host's own loopback or link-local addresses reaches them only when the
//! list names that address.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use bashd_protocol::config::{AllowHost, HostPattern, is_host_name};

/// `allow_hosts` and where a person changes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    entries: Vec<AllowHost>,
    /// Where the list is written (`[sandbox] allow_hosts in ~/.config/bashd/config.toml`):
    /// what a refusal tells the job to change.
    origin: String,
}

/// What a request names as its target, as the proxy read it from the request line,
/// the CONNECT or the SOCKS request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A host name, lower-cased, without a final dot.
    Name(String),
    Ip(IpAddr),
}

impl AllowList {
    pub fn new(entries: Vec<AllowHost>, origin: String) -> AllowList {
        AllowList { entries, origin }
    }

    pub fn entries(&self) -> &[AllowHost] {
        &self.entries
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Whether a name entry lets `name` through on `port`. `name` is a [`Target::Name`];
    /// an entry without a port allows 80 and 443.
    pub fn allows_name(&self, name: &str, port: u16) -> bool {
        self.entries.iter().any(|entry| {
            let host = match &entry.host {
                HostPattern::Name(listed) => listed == name,
                HostPattern::Subdomains(parent) => name
                    .strip_suffix(parent.as_str())
                    .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
                HostPattern::Ip(_) => false,
            };
            host && entry.port.map_or(port == 80 || port == 443, |p| p == port)
        })
    }

    /// Whether an IP entry lets `ip` through on `port`; an entry without a port allows
    /// every port. An IPv4 address written as IPv6 (`::ffff:127.0.0.1`) is judged as
    /// the IPv4 address it is.
    pub fn allows_ip(&self, ip: IpAddr, port: u16) -> bool {
        let ip = canonical(ip);
        self.entries.iter().any(|entry| {
            matches!(entry.host, HostPattern::Ip(listed) if canonical(listed) == ip)
                && entry.port.is_none_or(|p| p == port)
        })
    }

    /// Whether a listed name may reach `ip` on `port`: any address but the host's own
    /// (loopback, link-local, unspecified), which only an IP entry lets through.
    pub fn allows_resolved(&self, ip: IpAddr, port: u16) -> bool {
        !is_local(ip) || self.allows_ip(ip, port)
    }
}

impl fmt::Display for AllowList {
    /// `example.org, *.example.org:8443`, or `(empty)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.entries.is_empty() {
            return f.write_str("(empty)");
        }
        for (n, entry) in self.entries.iter().enumerate() {
            if n > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{entry}")?;
        }
        Ok(())
    }
}

impl Target {
    /// The host of a request: an address when it parses as one (`[v6]` in brackets),
    /// else a name lower-cased, without its final dot; `None` when it is neither, which
    /// no entry can match.
    pub fn parse(host: &str) -> Option<Target> {
        if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            return inner
                .parse::<Ipv6Addr>()
                .ok()
                .map(|ip| Target::Ip(IpAddr::V6(ip)));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Some(Target::Ip(ip));
        }
        let name = host.to_ascii_lowercase();
        let name = name.strip_suffix('.').unwrap_or(&name);
        is_host_name(name).then(|| Target::Name(name.to_owned()))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Name(name) => f.write_str(name),
            Target::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Target::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// An IPv4-mapped IPv6 address as its IPv4 address, so that neither form slips past
/// an entry or the local check written in the other.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// The host's own addresses, as a name may resolve to them: loopback, link-local and
/// unspecified (which connects to the host itself).
pub fn is_local(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local() || v4.is_unspecified(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> AllowList {
        AllowList::new(
            entries.iter().map(|e| e.parse().unwrap()).collect(),
            "test".into(),
        )
    }

    #[test]
    fn a_name_allows_80_and_443_and_a_port_only_itself() {
        let list = list(&["example.org", "api.example.org:8443"]);
        assert!(list.allows_name("example.org", 80));
        assert!(list.allows_name("example.org", 443));
        assert!(!list.allows_name("example.org", 22));
        assert!(!list.allows_name("www.example.org", 443));
        assert!(list.allows_name("api.example.org", 8443));
        assert!(!list.allows_name("api.example.org", 443));
        assert!(!list.allows_name("badexample.org", 443));
    }

    #[test]
    fn a_wildcard_allows_subdomains_not_the_parent_nor_a_lookalike() {
        let list = list(&["*.example.org"]);
        assert!(list.allows_name("a.example.org", 443));
        assert!(list.allows_name("a.b.example.org", 80));
        assert!(!list.allows_name("example.org", 443));
        assert!(!list.allows_name("badexample.org", 443));
        assert!(!list.allows_name("a.example.org", 8080));
    }

    #[test]
    fn an_ip_entry_allows_every_port_or_its_own_and_only_as_an_address() {
        let list = list(&["192.0.2.7", "192.0.2.8:8080", "[2001:db8::1]"]);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(list.allows_ip(ip("192.0.2.7"), 22));
        assert!(list.allows_ip(ip("::ffff:192.0.2.7"), 22));
        assert!(list.allows_ip(ip("192.0.2.8"), 8080));
        assert!(!list.allows_ip(ip("192.0.2.8"), 80));
        assert!(list.allows_ip(ip("2001:db8::1"), 443));
        assert!(!list.allows_ip(ip("192.0.2.9"), 80));
        assert!(!list.allows_name("192.0.2.7", 80));
    }

    #[test]
    fn a_listed_name_reaches_a_local_address_only_when_it_is_listed() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let plain = list(&["example.org"]);
        for local in [
            "127.0.0.1",
            "127.0.0.2",
            "169.254.1.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "::",
            "::ffff:127.0.0.1",
        ] {
            assert!(!plain.allows_resolved(ip(local), 443), "{local}");
        }
        assert!(plain.allows_resolved(ip("192.0.2.1"), 443));
        let listed = list(&["example.org", "127.0.0.2"]);
        assert!(listed.allows_resolved(ip("127.0.0.2"), 443));
        assert!(!listed.allows_resolved(ip("127.0.0.3"), 443));
    }

    #[test]
    fn a_target_is_an_address_or_a_checked_name() {
        assert_eq!(
            Target::parse("Example.ORG."),
            Some(Target::Name("example.org".into()))
        );
        assert_eq!(
            Target::parse("[::1]"),
            Some(Target::Ip("::1".parse().unwrap()))
        );
        assert_eq!(
            Target::parse("127.0.0.2"),
            Some(Target::Ip("127.0.0.2".parse().unwrap()))
        );
        assert_eq!(Target::parse("evil/.example.org"), None);
        assert_eq!(Target::parse(""), None);
    }
}

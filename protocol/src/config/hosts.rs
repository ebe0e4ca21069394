//! `[sandbox] allow_hosts` (issue 43): the hosts a job whose network is `allow-list`
//! reaches through bashd's proxy, as the file writes them. Each entry is read here,
//! while the file is read, so that a malformed one is refused at its own line; the
//! daemon matches requests against them (`daemon/src/network/allow_list.rs`).

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// One entry of `allow_hosts`: a host and, optionally, the one port it allows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllowHost {
    pub host: HostPattern,
    /// `None`: ports 80 and 443 for a name or a wildcard, every port for an IP address.
    pub port: Option<u16>,
}

/// What an entry names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// `example.org`: that name only, lower-cased, without a final dot.
    Name(String),
    /// `*.example.org`: every name under `example.org` (not `example.org` itself);
    /// holds `example.org`.
    Subdomains(String),
    /// `192.0.2.7`, `[2001:db8::1]`: that address, when a request names it as an
    /// address, or a listed name resolves to it.
    Ip(IpAddr),
}

/// `allow_hosts` as a whole, in the file's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowHosts(pub Vec<AllowHost>);

/// How an entry is written, for the errors.
const FORM: &str = "write a name (\"example.org\"), a wildcard (\"*.example.org\") or an IP address (\"192.0.2.7\", \"[2001:db8::1]\"), each with an optional \":PORT\"";

impl FromStr for AllowHost {
    type Err = String;

    fn from_str(text: &str) -> Result<AllowHost, String> {
        let bad = |why: &str| format!("{text:?} is not a host entry ({why}): {FORM}");
        if text.is_empty() {
            return Err(bad("it is empty"));
        }
        // `[v6]` or `[v6]:port`: the brackets keep the port apart from the address.
        if let Some(rest) = text.strip_prefix('[') {
            let (address, after) = rest.split_once(']').ok_or_else(|| bad("a [ with no ]"))?;
            let ip = Ipv6Addr::from_str(address).map_err(|_| bad("not an IPv6 address in [ ]"))?;
            let port = match after {
                "" => None,
                _ => Some(
                    port(after.strip_prefix(':').ok_or_else(|| bad("text after ]"))?)
                        .map_err(|why| bad(&why))?,
                ),
            };
            return Ok(AllowHost {
                host: HostPattern::Ip(IpAddr::V6(ip)),
                port,
            });
        }
        if text.parse::<Ipv6Addr>().is_ok() {
            return Err(bad(
                "an IPv6 address goes in brackets, like \"[2001:db8::1]\"",
            ));
        }
        let (host, port) = match text.rsplit_once(':') {
            Some((host, digits)) => (host, Some(port(digits).map_err(|why| bad(&why))?)),
            None => (text, None),
        };
        if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
            return Ok(AllowHost {
                host: HostPattern::Ip(IpAddr::V4(ip)),
                port,
            });
        }
        let host = host.to_ascii_lowercase();
        let host = host.strip_suffix('.').unwrap_or(&host);
        let pattern = match host.strip_prefix("*.") {
            Some(parent) => {
                check_name(parent).map_err(|why| bad(&why))?;
                HostPattern::Subdomains(parent.to_owned())
            }
            None => {
                check_name(host).map_err(|why| bad(&why))?;
                HostPattern::Name(host.to_owned())
            }
        };
        Ok(AllowHost {
            host: pattern,
            port,
        })
    }
}

/// A port from 1 to 65535, in decimal.
fn port(digits: &str) -> Result<u16, String> {
    match digits.parse::<u16>() {
        Ok(port) if port > 0 && digits.bytes().all(|b| b.is_ascii_digit()) => Ok(port),
        _ => Err(format!(
            "the port {digits:?} is not a number from 1 to 65535"
        )),
    }
}

/// Whether `name` is a host name as DNS writes it: dot-separated labels of letters,
/// digits, `-` and `_`, each 1 to 63 long, 253 in all. A request's host is checked by
/// the same rule before it is matched (`is_host_name`).
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("no name".to_owned());
    }
    if name.contains('*') {
        return Err("a * only as the whole first label, \"*.example.org\"".to_owned());
    }
    if is_host_name(name) {
        Ok(())
    } else {
        Err("a name is labels of letters, digits, - and _ between dots".to_owned())
    }
}

/// The rule of [`check_name`], for a name already lower-cased.
pub fn is_host_name(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

impl fmt::Display for AllowHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.host, self.port) {
            (HostPattern::Name(name), _) => f.write_str(name)?,
            (HostPattern::Subdomains(parent), _) => write!(f, "*.{parent}")?,
            (HostPattern::Ip(IpAddr::V6(ip)), _) => write!(f, "[{ip}]")?,
            (HostPattern::Ip(ip), _) => write!(f, "{ip}")?,
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

impl Serialize for AllowHosts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|entry| entry.to_string()))
    }
}

impl<'de> Deserialize<'de> for AllowHost {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entry;
        impl Visitor<'_> for Entry {
            type Value = AllowHost;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of hosts, like [\"example.org\", \"*.example.org:8443\"]")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<AllowHost, E> {
                // The ": " makes config::error put the key in front.
                text.parse().map_err(|why| E::custom(format!(": {why}")))
            }
        }
        deserializer.deserialize_str(Entry)
    }
}

impl<'de> Deserialize<'de> for AllowHosts {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<AllowHost>::deserialize(deserializer).map(AllowHosts)
    }
}

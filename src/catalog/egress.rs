//! Where Catalog connections may go, so a Catalog cannot turn the operator into a port scanner
//! or a courier of credentials (docs/security.md).
//!
//! Two lists of the same form decide it: the operator's `--allowed-catalog-hosts`, and a
//! credentials Secret's own annotation `semops.io/allowed-hosts`, which names every destination
//! its values may be sent to. Entries are CIDRs (`10.0.0.0/8`), addresses, exact host names
//! (`pg.data.svc`) or suffix patterns (`*.db.svc.cluster.local`), each optionally with a port
//! (`pg.data.svc:5432`, `[fd00::1]:5432`). A host is allowed when its name matches a name entry,
//! or when every address it resolves to lies in an address entry.
//!
//! Without an address entry that covers them, loopback, link-local (cloud metadata) and
//! unspecified addresses, and the kubelet's ports, are refused whatever the names say.

use std::net::IpAddr;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    Net(IpAddr, u8),
    Name(String),
    Suffix(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    pattern: Pattern,
    /// Only this port, when the entry names one.
    port: Option<u16>,
}

/// A parsed allow-list.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct HostAllowList {
    entries: Vec<Entry>,
}

/// The kubelet's API and read-only ports: a Catalog never reaches a node's kubelet by default.
const KUBELET_PORTS: [u16; 2] = [10250, 10255];

impl HostAllowList {
    /// Parses `entries`; errors name the entry.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut out = Vec::new();
        for raw in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            out.push(parse_entry(raw)?);
        }
        Ok(Self { entries: out })
    }

    /// A comma-separated list (an annotation's value).
    pub fn parse_list(text: &str) -> Result<Self, String> {
        Self::parse(&text.split(',').map(str::to_string).collect::<Vec<_>>())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `host:port`, resolving to `addresses`, matches this list (by name, or with every
    /// address inside an address entry).
    pub fn permits(&self, host: &str, port: u16, addresses: &[IpAddr]) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let for_port = |e: &&Entry| e.port.is_none_or(|p| p == port);
        let by_name = self
            .entries
            .iter()
            .filter(for_port)
            .any(|e| match &e.pattern {
                Pattern::Name(n) => *n == host,
                Pattern::Suffix(s) => host.ends_with(s.as_str()),
                Pattern::Net(..) => false,
            });
        by_name || (!addresses.is_empty() && addresses.iter().all(|a| self.covers(*a, port)))
    }

    /// Whether an address entry of this list contains `addr` (for `port`).
    fn covers(&self, addr: IpAddr, port: u16) -> bool {
        self.entries.iter().any(|e| {
            e.port.is_none_or(|p| p == port)
                && matches!(e.pattern, Pattern::Net(net, bits) if contains(net, bits, addr))
        })
    }

    /// The operator's decision for a destination: `Err` with the reason when semops must not
    /// connect. An empty list allows any host except the ones refused by default; those need
    /// an address entry of a non-empty list that covers them (a name never unlocks them).
    pub fn decide(&self, host: &str, port: u16, addresses: &[IpAddr]) -> Result<(), String> {
        if !self.is_empty() && !self.permits(host, port, addresses) {
            return Err("it is not in the operator's --allowed-catalog-hosts".into());
        }
        for addr in addresses {
            if let Some(why) = refused_by_default(*addr, port)
                && !self.covers(*addr, port)
            {
                return Err(format!(
                    "it resolves to {addr}, {why}, which semops never connects to unless --allowed-catalog-hosts names it by address"
                ));
            }
        }
        Ok(())
    }
}

/// Why semops refuses `addr:port` unless an address entry names it; `None` when it does not.
pub fn refused_by_default(addr: IpAddr, port: u16) -> Option<&'static str> {
    let addr = match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    };
    let metadata_v6: IpAddr =
        IpAddr::V6(std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254));
    if addr.is_loopback() {
        Some("a loopback address")
    } else if addr.is_unspecified() {
        Some("an unspecified address")
    } else if addr == metadata_v6 {
        Some("a cloud metadata address")
    } else if match addr {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    } {
        Some("a link-local address (cloud metadata lives there)")
    } else if KUBELET_PORTS.contains(&port) {
        Some("a kubelet port")
    } else {
        None
    }
}

fn parse_entry(raw: &str) -> Result<Entry, String> {
    // `host:port`, `[v6]:port`, `*.suffix:port`; a bare IPv6 address has colons but no port.
    let (text, port) = match raw.rsplit_once(':') {
        Some((head, p))
            if !raw.contains('/')
                && (head.starts_with('[') || !head.contains(':'))
                && !p.is_empty() =>
        {
            let port = p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{raw:?}: {p:?} is not a port"))?;
            let head = head
                .strip_prefix('[')
                .map(|h| {
                    h.strip_suffix(']')
                        .ok_or_else(|| format!("{raw:?}: unclosed ["))
                })
                .transpose()?
                .unwrap_or(head);
            (head, Some(port))
        }
        _ => (raw, None),
    };
    let pattern = if let Some(suffix) = text.strip_prefix("*.") {
        if suffix.is_empty() {
            return Err(format!(
                "{raw:?}: a suffix pattern needs a domain after \"*.\""
            ));
        }
        Pattern::Suffix(format!(".{}", suffix.to_ascii_lowercase()))
    } else if let Some((ip, bits)) = text.split_once('/') {
        let ip: IpAddr = ip.parse().map_err(|_| format!("{raw:?}: not a CIDR"))?;
        let bits: u8 = bits.parse().map_err(|_| format!("{raw:?}: not a CIDR"))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        if bits > max {
            return Err(format!("{raw:?}: prefix longer than {max}"));
        }
        Pattern::Net(ip, bits)
    } else if let Ok(ip) = text.parse::<IpAddr>() {
        Pattern::Net(ip, if ip.is_ipv4() { 32 } else { 128 })
    } else if text.is_empty() || text.contains(char::is_whitespace) || text.contains('*') {
        return Err(format!(
            "{raw:?}: not a host name, address, CIDR or *.suffix"
        ));
    } else {
        Pattern::Name(text.trim_end_matches('.').to_ascii_lowercase())
    };
    Ok(Entry { pattern, port })
}

fn contains(net: IpAddr, bits: u8, addr: IpAddr) -> bool {
    match (net, addr) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(e: &[&str]) -> HostAllowList {
        HostAllowList::parse(&e.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn ips(v: &[&str]) -> Vec<IpAddr> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn hosts_are_allowed_by_name_pattern_or_when_every_address_is_inside_a_network() {
        let l = list(&[
            "10.0.0.0/8",
            "192.168.1.7",
            "pg.data.svc",
            "*.db.example.com",
            "fd00::/8",
        ]);
        let cases: &[(&str, &[&str], bool)] = &[
            ("pg.data.svc", &["203.0.113.9"], true),
            ("PG.DATA.SVC.", &[], true),
            ("a.db.example.com", &[], true),
            ("db.example.com", &["203.0.113.9"], false),
            ("evil-db.example.com.attacker", &[], false),
            ("x", &["10.1.2.3"], true),
            ("x", &["10.1.2.3", "8.8.8.8"], false),
            ("x", &["192.168.1.7"], true),
            ("x", &["192.168.1.8"], false),
            ("x", &["fd12::1"], true),
            ("x", &[], false),
        ];
        for (host, addrs, want) in cases {
            assert_eq!(
                l.permits(host, 5432, &ips(addrs)),
                *want,
                "{host} {addrs:?}"
            );
        }
    }

    #[test]
    fn an_entry_with_a_port_allows_only_that_port() {
        let l = list(&[
            "pg.data.svc:5432",
            "[fd00::1]:9092",
            "10.0.0.0/8",
            "*.kafka.svc:9093",
            "::1",
        ]);
        let cases: &[(&str, u16, &[&str], bool)] = &[
            ("pg.data.svc", 5432, &[], true),
            ("pg.data.svc", 5433, &[], false),
            ("x", 9092, &["fd00::1"], true),
            ("x", 9093, &["fd00::1"], false),
            ("b1.kafka.svc", 9093, &[], true),
            ("b1.kafka.svc", 9092, &[], false),
            ("x", 1, &["10.9.9.9"], true),
            ("x", 1, &["::1"], true),
        ];
        for (host, port, addrs, want) in cases {
            assert_eq!(
                l.permits(host, *port, &ips(addrs)),
                *want,
                "{host}:{port} {addrs:?}"
            );
        }
    }

    #[test]
    fn loopback_link_local_metadata_and_kubelet_ports_need_an_address_entry() {
        let empty = HostAllowList::default();
        let cases: &[(&str, u16, bool)] = &[
            ("127.0.0.1", 5432, false),
            ("127.9.9.9", 5432, false),
            ("::1", 5432, false),
            ("::ffff:127.0.0.1", 5432, false),
            ("0.0.0.0", 5432, false),
            ("169.254.169.254", 80, false),
            ("fe80::1", 80, false),
            ("fd00:ec2::254", 80, false),
            ("10.0.0.9", 10250, false),
            ("10.0.0.9", 10255, false),
            ("10.0.0.9", 5432, true),
            ("2001:db8::1", 443, true),
        ];
        for (addr, port, want) in cases {
            let got = empty.decide("db", *port, &ips(&[addr]));
            assert_eq!(got.is_ok(), *want, "{addr}:{port}: {got:?}");
        }
        let err = empty
            .decide("db", 80, &ips(&["169.254.169.254"]))
            .unwrap_err();
        assert!(
            err.contains("169.254.169.254") && err.contains("link-local"),
            "{err}"
        );
        // A name never unlocks them; an address entry does.
        let by_name = list(&["db", "*.svc"]);
        assert!(by_name.decide("db", 5432, &ips(&["127.0.0.1"])).is_err());
        assert!(
            by_name
                .decide("x.svc", 80, &ips(&["169.254.169.254"]))
                .is_err()
        );
        let loopback = list(&["127.0.0.0/8", "::1"]);
        assert!(
            loopback
                .decide("localhost", 5432, &ips(&["127.0.0.1", "::1"]))
                .is_ok()
        );
        assert!(
            loopback
                .decide("x", 80, &ips(&["169.254.169.254"]))
                .is_err()
        );
        assert!(
            list(&["10.0.0.9:10250"])
                .decide("n", 10250, &ips(&["10.0.0.9"]))
                .is_ok()
        );
        // And a non-empty list refuses what it does not name.
        assert!(loopback.decide("db", 5432, &ips(&["10.0.0.9"])).is_err());
    }

    #[test]
    fn bad_entries_are_refused_with_their_text() {
        for bad in [
            "10.0.0.0/33",
            "300.1.1.1/8",
            "10.0.0.0/x",
            "pg:0",
            "pg:99999",
            "[::1:5432",
            "*.",
            "a b",
            "x*y",
        ] {
            let err = HostAllowList::parse(&[bad.to_string()]).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
        assert!(list(&[]).is_empty());
        assert!(HostAllowList::parse_list(" pg.svc , *.kafka:9092,").is_ok());
    }
}

//! `--allowed-catalog-hosts`: where Catalog connections may go, so a Catalog cannot turn the
//! operator into a port scanner. Entries are CIDRs (`10.0.0.0/8`), addresses, exact host names
//! (`pg.data.svc`) or suffix patterns (`*.db.svc.cluster.local`). A host is allowed when its name
//! matches a name entry, or when every address it resolves to lies in an address entry.

use std::net::IpAddr;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    Net(IpAddr, u8),
    Name(String),
    Suffix(String),
}

/// A parsed allow-list.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct HostAllowList {
    entries: Vec<Entry>,
}

impl HostAllowList {
    /// Parses `entries`; errors name the entry.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut out = Vec::new();
        for raw in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
            let entry = if let Some(suffix) = raw.strip_prefix("*.") {
                Entry::Suffix(format!(".{}", suffix.to_ascii_lowercase()))
            } else if let Some((ip, bits)) = raw.split_once('/') {
                let ip: IpAddr = ip.parse().map_err(|_| format!("{raw:?}: not a CIDR"))?;
                let bits: u8 = bits.parse().map_err(|_| format!("{raw:?}: not a CIDR"))?;
                let max = if ip.is_ipv4() { 32 } else { 128 };
                if bits > max {
                    return Err(format!("{raw:?}: prefix longer than {max}"));
                }
                Entry::Net(ip, bits)
            } else if let Ok(ip) = raw.parse::<IpAddr>() {
                Entry::Net(ip, if ip.is_ipv4() { 32 } else { 128 })
            } else {
                Entry::Name(raw.to_ascii_lowercase())
            };
            out.push(entry);
        }
        Ok(Self { entries: out })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `host`, resolving to `addresses`, may be connected to.
    pub fn permits(&self, host: &str, addresses: &[IpAddr]) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let by_name = self.entries.iter().any(|e| match e {
            Entry::Name(n) => *n == host,
            Entry::Suffix(s) => host.ends_with(s.as_str()),
            Entry::Net(..) => false,
        });
        by_name
            || (!addresses.is_empty()
                && addresses.iter().all(|a| {
                    self.entries
                        .iter()
                        .any(|e| matches!(e, Entry::Net(net, bits) if contains(*net, *bits, *a)))
                }))
    }
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
            assert_eq!(l.permits(host, &ips(addrs)), *want, "{host} {addrs:?}");
        }
    }

    #[test]
    fn bad_entries_are_refused_with_their_text() {
        for bad in ["10.0.0.0/33", "300.1.1.1/8", "10.0.0.0/x"] {
            let err = HostAllowList::parse(&[bad.to_string()]).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
        assert!(list(&[]).is_empty());
    }
}

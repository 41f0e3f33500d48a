//! Which Secrets may serve a Catalog, and where their values may go (docs/security.md). A Secret
//! is used only when it carries the label `semops.io/catalog-credentials: "true"` and, if it has
//! the annotation `semops.io/allowed-catalogs`, that list names the Catalog. Every refusal reads
//! the same, so a Catalog's author learns nothing about a Secret's existence, labels or keys.
//!
//! A Secret whose values are sent to a server (user names, passwords, tokens, client secrets,
//! client certificates) also names, in `semops.io/allowed-hosts`, every destination that may
//! receive them: the Secret's owner decides, not whoever may edit the Catalog.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use super::egress::HostAllowList;

/// The opt-in label.
pub const CREDENTIALS_LABEL: &str = "semops.io/catalog-credentials";
/// Optional: the Catalogs (names in the Secret's namespace, comma-separated) it may serve.
pub const ALLOWED_CATALOGS_ANNOTATION: &str = "semops.io/allowed-catalogs";

/// Required on Secrets whose values are sent: the hosts (`host`, `host:port`, `*.suffix`, CIDR;
/// comma-separated) that may receive them.
pub const ALLOWED_HOSTS_ANNOTATION: &str = "semops.io/allowed-hosts";

/// Whether `secret` opted in to serve Catalog `catalog`.
pub fn serves(secret: &Secret, catalog: &str) -> bool {
    let labelled = secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CREDENTIALS_LABEL))
        .is_some_and(|v| v == "true");
    let allowed = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ALLOWED_CATALOGS_ANNOTATION))
        .is_none_or(|list| list.split(',').any(|c| c.trim() == catalog));
    labelled && allowed
}

/// The UTF-8 values of `keys` in an opted-in Secret's data; `None` when any is missing or not
/// UTF-8 (the caller reports that exactly like a Secret that does not exist).
pub fn values(data: &BTreeMap<String, ByteString>, keys: &[&str]) -> Option<Vec<String>> {
    keys.iter()
        .map(|k| String::from_utf8(data.get(*k)?.0.clone()).ok())
        .collect()
}

/// The destinations `secret` allows: `None` without the annotation, `Err` naming the bad entry.
pub fn allowed_hosts(secret: &Secret) -> Option<Result<HostAllowList, String>> {
    let text = secret
        .metadata
        .annotations
        .as_ref()?
        .get(ALLOWED_HOSTS_ANNOTATION)?;
    Some(HostAllowList::parse_list(text))
}

/// Why Secret `name` may not send its values to `host:port` (the destination named by `field`),
/// and the fix; `allowed`: what its annotation said.
pub fn not_for_host(
    name: &str,
    allowed: &Option<Result<HostAllowList, String>>,
    field: &str,
    host: &str,
    port: u16,
) -> String {
    let shown = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    match allowed {
        None => format!(
            "Secret {name:?} has no annotation {ALLOWED_HOSTS_ANNOTATION}, so semops sends its values nowhere; its owner names the hosts that may receive them, e.g. {ALLOWED_HOSTS_ANNOTATION}: \"{shown}\" ({field})"
        ),
        Some(Err(e)) => format!(
            "Secret {name:?}: annotation {ALLOWED_HOSTS_ANNOTATION} has a bad entry {e}; its owner writes host, host:port, *.suffix or a CIDR, comma-separated"
        ),
        Some(Ok(_)) => format!(
            "{field} {shown} is not in Secret {name:?}'s annotation {ALLOWED_HOSTS_ANNOTATION}; nothing was sent. Point {field} at a host the annotation names, or ask the Secret's owner to add {shown}"
        ),
    }
}

/// The one message for every refusal of a Secret (`field` is the Catalog field naming it).
pub fn unusable(field: &str, name: &str, keys: &[&str], namespace: &str) -> String {
    let keys: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
    format!(
        "{field}: semops uses Secret {name:?} only if it exists in namespace {namespace:?} with key(s) {}, carries the label {CREDENTIALS_LABEL}=true and, when it has the annotation {ALLOWED_CATALOGS_ANNOTATION}, names this Catalog there",
        keys.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(label: Option<&str>, allowed: Option<&str>) -> Secret {
        let mut s = Secret::default();
        if let Some(v) = label {
            s.metadata.labels = Some([(CREDENTIALS_LABEL.to_string(), v.to_string())].into());
        }
        if let Some(v) = allowed {
            s.metadata.annotations =
                Some([(ALLOWED_CATALOGS_ANNOTATION.to_string(), v.to_string())].into());
        }
        s
    }

    #[test]
    fn only_an_opted_in_secret_serves_and_only_the_catalogs_it_names() {
        let cases = [
            (None, None, "hr", false),
            (Some("false"), None, "hr", false),
            (Some("yes"), None, "hr", false),
            (Some("true"), None, "hr", true),
            (Some("true"), Some("hr, finance"), "hr", true),
            (Some("true"), Some("hr,finance"), "finance", true),
            (Some("true"), Some("finance"), "hr", false),
            (Some("true"), Some(""), "hr", false),
            (None, Some("hr"), "hr", false),
        ];
        for (label, allowed, catalog, want) in cases {
            assert_eq!(
                serves(&secret(label, allowed), catalog),
                want,
                "{label:?} {allowed:?} {catalog}"
            );
        }
    }

    #[test]
    fn allowed_hosts_come_from_the_annotation_and_every_refusal_names_it_and_the_host() {
        let mut s = secret(Some("true"), None);
        assert!(allowed_hosts(&s).is_none());
        let m = not_for_host("pg", &allowed_hosts(&s), "spec.connection.host", "db", 5432);
        assert!(
            m.contains(ALLOWED_HOSTS_ANNOTATION) && m.contains("db:5432"),
            "{m}"
        );
        s.metadata.annotations = Some(
            [(
                ALLOWED_HOSTS_ANNOTATION.to_string(),
                "db.svc:5432, *.kafka".to_string(),
            )]
            .into(),
        );
        let list = allowed_hosts(&s).unwrap().unwrap();
        assert!(list.permits("db.svc", 5432, &[]));
        assert!(!list.permits("evil", 5432, &[]));
        let m = not_for_host(
            "pg",
            &Some(Ok(list)),
            "spec.connection.oauth2.tokenEndpoint",
            "::1",
            8443,
        );
        assert!(
            m.contains("[::1]:8443")
                && m.contains("tokenEndpoint")
                && m.contains("nothing was sent"),
            "{m}"
        );
        s.metadata.annotations =
            Some([(ALLOWED_HOSTS_ANNOTATION.to_string(), "db:0".to_string())].into());
        let bad = allowed_hosts(&s);
        assert!(matches!(bad, Some(Err(_))));
        let m = not_for_host("pg", &bad, "spec.connection.host", "db", 0);
        assert!(m.contains("\"db:0\""), "{m}");
    }

    #[test]
    fn values_need_every_key_in_utf8() {
        let data: BTreeMap<String, ByteString> = [
            ("u".to_string(), ByteString(b"reader".to_vec())),
            ("p".to_string(), ByteString(b"pw".to_vec())),
            ("bin".to_string(), ByteString(vec![0xff, 0xfe])),
        ]
        .into();
        assert_eq!(
            values(&data, &["u", "p"]),
            Some(vec!["reader".into(), "pw".into()])
        );
        assert_eq!(values(&data, &["u", "missing"]), None);
        assert_eq!(values(&data, &["bin"]), None);
    }

    #[test]
    fn the_refusal_names_only_what_the_catalog_says() {
        let m = unusable(
            "spec.connection.credentialsSecretRef",
            "victim",
            &["token", "ca.crt"],
            "ns",
        );
        assert!(m.contains("\"victim\"") && m.contains("\"token\""), "{m}");
        assert!(m.contains(CREDENTIALS_LABEL), "{m}");
    }
}

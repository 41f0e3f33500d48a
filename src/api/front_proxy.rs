//! The Kubernetes API server as a front proxy (aggregated API): which client certificates are
//! its, and who the user it proxies is. Pure: the ConfigMap
//! `kube-system/extension-apiserver-authentication` comes in as its data, the connection's
//! verified certificate as DER, the request's headers as a map.

use std::collections::BTreeMap;

use axum::http::HeaderMap;

use super::auth::Caller;

/// Where the API server publishes its front-proxy settings.
pub const CONFIG_MAP_NAMESPACE: &str = "kube-system";
pub const CONFIG_MAP_NAME: &str = "extension-apiserver-authentication";

/// The request-header authentication the API server announces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontProxy {
    /// PEM of the CA that signs the API server's proxy client certificate.
    pub client_ca_pem: String,
    /// Common names that certificate may carry; empty: any the CA signed.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_headers_prefix: Vec<String>,
}

impl FrontProxy {
    /// Reads the ConfigMap's data; `Ok(None)` when the API server has no front proxy set up
    /// (no `requestheader-client-ca-file`), an error naming the key when a value is malformed.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Option<FrontProxy>, String> {
        let Some(ca) = data
            .get("requestheader-client-ca-file")
            .filter(|c| !c.trim().is_empty())
        else {
            return Ok(None);
        };
        let list = |key: &str, default: &[&str]| -> Result<Vec<String>, String> {
            match data.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                None => Ok(default.iter().map(|s| s.to_string()).collect()),
                Some(v) => serde_json::from_str::<Vec<String>>(v).map_err(|e| {
                    format!("{CONFIG_MAP_NAMESPACE}/{CONFIG_MAP_NAME}: key {key} is not a JSON list of strings: {e}")
                }),
            }
        };
        Ok(Some(FrontProxy {
            client_ca_pem: ca.clone(),
            allowed_names: list("requestheader-allowed-names", &[])?,
            username_headers: list("requestheader-username-headers", &["X-Remote-User"])?,
            uid_headers: list("requestheader-uid-headers", &[])?,
            group_headers: list("requestheader-group-headers", &["X-Remote-Group"])?,
            extra_headers_prefix: list("requestheader-extra-headers-prefix", &["X-Remote-Extra-"])?,
        }))
    }

    /// Whether a certificate the request-header CA verified may act as the front proxy.
    pub fn allows(&self, common_name: Option<&str>) -> bool {
        self.allowed_names.is_empty()
            || common_name.is_some_and(|cn| self.allowed_names.iter().any(|n| n == cn))
    }

    /// The user the front proxy names: the first non-empty username header, every value of
    /// every group header. `None` without a username (the request is then unauthenticated).
    pub fn caller(&self, headers: &HeaderMap) -> Option<Caller> {
        let first = |names: &[String]| {
            names.iter().find_map(|h| {
                headers
                    .get(h.as_str())
                    .and_then(|v| v.to_str().ok())
                    .filter(|v| !v.is_empty())
                    .map(str::to_string)
            })
        };
        let username = first(&self.username_headers)?;
        let groups = self
            .group_headers
            .iter()
            .flat_map(|h| headers.get_all(h.as_str()).iter())
            .filter_map(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect();
        // `X-Remote-Extra-Scopes: a` → extra `scopes: [a]`: the key is the rest of the header
        // name, lower-cased and percent-decoded, as the API server encodes it.
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            let name = name.as_str();
            let Some(key) = self.extra_headers_prefix.iter().find_map(|p| {
                (name.len() > p.len() && name[..p.len()].eq_ignore_ascii_case(p))
                    .then(|| &name[p.len()..])
            }) else {
                continue;
            };
            let (Some(key), Ok(value)) = (super::paths::decode_segment(key), value.to_str()) else {
                continue;
            };
            extra
                .entry(key.to_lowercase())
                .or_default()
                .push(value.to_string());
        }
        Some(Caller {
            username,
            uid: first(&self.uid_headers),
            groups,
            extra,
        })
    }
}

/// The subject common name of a DER certificate (`None` when it has none or does not parse).
pub fn common_name(der: &[u8]) -> Option<String> {
    use x509_cert::der::Decode;
    const CN: x509_cert::der::asn1::ObjectIdentifier =
        x509_cert::der::asn1::ObjectIdentifier::new_unwrap("2.5.4.3");
    let cert = x509_cert::Certificate::from_der(der).ok()?;
    cert.tbs_certificate
        .subject
        .0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .find(|atv| atv.oid == CN)
        .and_then(|atv| {
            std::str::from_utf8(atv.value.value())
                .ok()
                .map(str::to_string)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_api_servers_settings_read_with_their_defaults() {
        assert_eq!(
            FrontProxy::from_data(&data(&[])),
            Ok(None),
            "no front proxy"
        );
        assert_eq!(
            FrontProxy::from_data(&data(&[("requestheader-client-ca-file", "  ")])),
            Ok(None)
        );
        let fp = FrontProxy::from_data(&data(&[
            ("requestheader-client-ca-file", "PEM"),
            ("requestheader-allowed-names", "[\"front-proxy-client\"]"),
            ("requestheader-group-headers", "[\"X-Remote-Group\"]"),
            ("requestheader-uid-headers", " "),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(fp.allowed_names, ["front-proxy-client"]);
        assert!(fp.uid_headers.is_empty(), "a blank value is the default");
        assert_eq!(fp.username_headers, ["X-Remote-User"], "default");
        let err = FrontProxy::from_data(&data(&[
            ("requestheader-client-ca-file", "PEM"),
            ("requestheader-allowed-names", "front-proxy-client"),
        ]))
        .unwrap_err();
        assert!(err.contains("requestheader-allowed-names"), "{err}");
    }

    #[test]
    fn only_allowed_names_act_as_the_front_proxy() {
        let mut fp = FrontProxy::from_data(&data(&[
            ("requestheader-client-ca-file", "PEM"),
            ("requestheader-allowed-names", "[\"front-proxy-client\"]"),
        ]))
        .unwrap()
        .unwrap();
        for (cn, allowed) in [
            (Some("front-proxy-client"), true),
            (Some("front-proxy-client2"), false),
            (Some("admin"), false),
            (None, false),
        ] {
            assert_eq!(fp.allows(cn), allowed, "{cn:?}");
        }
        fp.allowed_names.clear();
        assert!(
            fp.allows(None),
            "no names listed: any certificate the CA signed"
        );
    }

    #[test]
    fn the_proxied_user_comes_from_the_configured_headers() {
        let fp = FrontProxy::from_data(&data(&[
            ("requestheader-client-ca-file", "PEM"),
            ("requestheader-username-headers", "[\"X-Remote-User\"]"),
            ("requestheader-uid-headers", "[\"X-Remote-Uid\"]"),
            ("requestheader-group-headers", "[\"X-Remote-Group\"]"),
        ]))
        .unwrap()
        .unwrap();
        let mut h = HeaderMap::new();
        assert_eq!(fp.caller(&h), None, "no user: unauthenticated");
        h.insert("x-remote-user", "".parse().unwrap());
        assert_eq!(fp.caller(&h), None, "an empty user is no user");
        h.insert("x-remote-user", "alice".parse().unwrap());
        h.append("x-remote-group", "team-a".parse().unwrap());
        h.append("x-remote-group", "system:authenticated".parse().unwrap());
        h.insert("x-remote-uid", "u-1".parse().unwrap());
        h.insert("authorization", "Bearer ignored".parse().unwrap());
        h.append("x-remote-extra-scopes", "read".parse().unwrap());
        h.append("X-Remote-Extra-Scopes", "write".parse().unwrap());
        h.append(
            "x-remote-extra-authentication.kubernetes.io%2fnode-name",
            "node-1".parse().unwrap(),
        );
        h.append("x-remote-extra-bad%zz", "dropped".parse().unwrap());
        h.append("x-remote-extra-", "no key: dropped".parse().unwrap());
        h.append("x-remote-group", "".parse().unwrap());
        assert_eq!(
            fp.caller(&h),
            Some(Caller {
                username: "alice".into(),
                uid: Some("u-1".into()),
                groups: vec!["team-a".into(), "system:authenticated".into()],
                extra: BTreeMap::from([
                    (
                        "authentication.kubernetes.io/node-name".into(),
                        vec!["node-1".into()]
                    ),
                    ("scopes".into(), vec!["read".into(), "write".into()]),
                ]),
            })
        );
    }

    #[test]
    fn the_common_name_is_read_from_the_certificates_subject() {
        let der = |name: &str| {
            use rustls::pki_types::CertificateDer;
            use rustls::pki_types::pem::PemObject;
            let path = format!("{}/tests/fixtures/tls/{name}", env!("CARGO_MANIFEST_DIR"));
            CertificateDer::from_pem_file(&path).unwrap().to_vec()
        };
        assert_eq!(
            common_name(&der("client.pem")).as_deref(),
            Some("semops-client")
        );
        assert_eq!(
            common_name(&der("ca.pem")).as_deref(),
            Some("semops test CA")
        );
        assert_eq!(common_name(b"not a certificate"), None);
    }
}

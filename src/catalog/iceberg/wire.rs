//! The Iceberg REST protocol as plain values: URLs (prefix, namespace separator, percent
//! encoding), the answers semops reads (config, table and view metadata, identifier lists,
//! OAuth2 tokens) and the classification of every non-success answer. No I/O.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::catalog::{Column, Credentials, ObjectType, ProviderError};

/// The spec's default namespace separator (unit separator, percent-encoded); servers may
/// override it in `GET /v1/config` (`namespace-separator`), and Iceberg's own server does.
pub const DEFAULT_SEPARATOR: &str = "%1F";

/// What `GET /v1/config` says about where the catalog's paths are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `prefix` from the config's overrides (or defaults): `/v1/{prefix}/namespaces/...`.
    pub prefix: Option<String>,
    /// The separator of namespace levels in a path segment, already percent-encoded.
    pub separator: String,
}

#[derive(Deserialize, Default)]
struct ConfigResponse {
    #[serde(default)]
    defaults: serde_json::Map<String, Value>,
    #[serde(default)]
    overrides: serde_json::Map<String, Value>,
}

/// The endpoint from a config answer: overrides win over defaults.
pub fn endpoint_from_config(body: &[u8]) -> Result<Endpoint, ProviderError> {
    let config: ConfigResponse = serde_json::from_slice(body)
        .map_err(|e| ProviderError::Protocol(format!("GET /v1/config: {e}")))?;
    let get = |k: &str| {
        config
            .overrides
            .get(k)
            .or_else(|| config.defaults.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(Endpoint {
        prefix: get("prefix").filter(|p| !p.is_empty()),
        separator: get("namespace-separator").unwrap_or_else(|| DEFAULT_SEPARATOR.into()),
    })
}

/// Namespace levels of a semops schema name: levels are separated by dots (`sales.eu` is the
/// namespace `["sales", "eu"]`); in a source reference the schema is quoted the Ossie way
/// (`` lake.`sales.eu`.orders ``). A level cannot itself contain a dot. `None` for an empty level.
pub fn levels(schema: &str) -> Option<Vec<&str>> {
    let levels: Vec<&str> = schema.split('.').collect();
    levels.iter().all(|l| !l.is_empty()).then_some(levels)
}

/// Percent-encodes one path segment (RFC 3986 unreserved characters stay).
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

impl Endpoint {
    fn base(&self) -> String {
        match &self.prefix {
            Some(p) => format!("/v1/{}", encode(p)),
            None => "/v1".into(),
        }
    }

    /// The namespace as one path segment: levels encoded and joined by the separator.
    pub fn namespace_segment(&self, levels: &[&str]) -> String {
        levels
            .iter()
            .map(|l| encode(l))
            .collect::<Vec<_>>()
            .join(&self.separator)
    }

    pub fn namespace_path(&self, levels: &[&str]) -> String {
        format!(
            "{}/namespaces/{}",
            self.base(),
            self.namespace_segment(levels)
        )
    }

    /// `.../namespaces/{ns}/tables/{name}` or `.../views/{name}`.
    pub fn object_path(&self, levels: &[&str], kind: ObjectType, name: &str) -> String {
        let collection = if kind == ObjectType::View {
            "views"
        } else {
            "tables"
        };
        format!(
            "{}/{collection}/{}",
            self.namespace_path(levels),
            encode(name)
        )
    }

    /// The list of a namespace's tables or views, one page.
    pub fn list_path(&self, levels: &[&str], kind: ObjectType, page: Option<&str>) -> String {
        let collection = if kind == ObjectType::View {
            "views"
        } else {
            "tables"
        };
        let mut path = format!("{}/{collection}", self.namespace_path(levels));
        if let Some(token) = page {
            path.push_str(&format!("?pageToken={}", encode(token)));
        }
        path
    }
}

/// A loaded table or view: its uuid and current columns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    pub uuid: String,
    pub columns: Vec<Column>,
}

/// `table-uuid` and the current schema's columns of a LoadTableResult.
pub fn loaded_table(body: &[u8]) -> Result<Loaded, ProviderError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ProviderError::Protocol(format!("table metadata: {e}")))?;
    let meta = &v["metadata"];
    let uuid = meta["table-uuid"]
        .as_str()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| ProviderError::Protocol("table metadata without table-uuid".into()))?;
    let current = meta["current-schema-id"].as_i64();
    let schema = meta["schemas"]
        .as_array()
        .and_then(|all| {
            all.iter()
                .find(|s| s["schema-id"].as_i64() == current)
                .or(all.last())
        })
        .or_else(|| meta.get("schema"))
        .ok_or_else(|| ProviderError::Protocol("table metadata without a schema".into()))?;
    Ok(Loaded {
        uuid: uuid.to_string(),
        columns: columns(schema)?,
    })
}

/// `view-uuid` and the current version's columns of a LoadViewResult.
pub fn loaded_view(body: &[u8]) -> Result<Loaded, ProviderError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ProviderError::Protocol(format!("view metadata: {e}")))?;
    let meta = &v["metadata"];
    let uuid = meta["view-uuid"]
        .as_str()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| ProviderError::Protocol("view metadata without view-uuid".into()))?;
    let version_id = meta["current-version-id"].as_i64();
    let schema_id = meta["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|x| x["version-id"].as_i64() == version_id))
        .and_then(|x| x["schema-id"].as_i64());
    let schema = meta["schemas"]
        .as_array()
        .and_then(|all| {
            all.iter()
                .find(|s| s["schema-id"].as_i64() == schema_id)
                .or(all.last())
        })
        .ok_or_else(|| ProviderError::Protocol("view metadata without a schema".into()))?;
    Ok(Loaded {
        uuid: uuid.to_string(),
        columns: columns(schema)?,
    })
}

/// The columns of an Iceberg schema: top-level fields by name; fields of a struct also as
/// `parent.child` (the way an Ossie expression addresses them). Types as the spec writes them
/// (`long`, `decimal(10,2)`, `struct`, `list<string>`).
pub fn columns(schema: &Value) -> Result<Vec<Column>, ProviderError> {
    let mut out = Vec::new();
    let fields = schema["fields"]
        .as_array()
        .ok_or_else(|| ProviderError::Protocol("a schema without fields".into()))?;
    collect(fields, "", &mut out, 0)?;
    Ok(out)
}

/// Deepest struct nesting read (metadata is the server's; a hostile one must not recurse far).
const MAX_DEPTH: usize = 16;

fn collect(
    fields: &[Value],
    prefix: &str,
    out: &mut Vec<Column>,
    depth: usize,
) -> Result<(), ProviderError> {
    if depth > MAX_DEPTH {
        return Err(ProviderError::Protocol("schema nested too deep".into()));
    }
    for f in fields {
        let name = f["name"]
            .as_str()
            .ok_or_else(|| ProviderError::Protocol("a field without a name".into()))?;
        let full = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        out.push(Column::new(full.clone(), type_name(&f["type"])));
        if let Some(nested) = f["type"]["fields"].as_array()
            && f["type"]["type"] == "struct"
        {
            collect(nested, &full, out, depth + 1)?;
        }
    }
    Ok(())
}

fn type_name(t: &Value) -> String {
    match t {
        Value::String(s) => s.clone(),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("list") => format!("list<{}>", type_name(&t["element"])),
            Some("map") => format!("map<{},{}>", type_name(&t["key"]), type_name(&t["value"])),
            Some(other) => other.to_string(),
            None => "unknown".into(),
        },
        _ => "unknown".into(),
    }
}

/// One page of a list of tables or views: names and the next page token.
pub fn identifiers(body: &[u8]) -> Result<(Vec<String>, Option<String>), ProviderError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ProviderError::Protocol(format!("identifier list: {e}")))?;
    let names = v["identifiers"]
        .as_array()
        .ok_or_else(|| ProviderError::Protocol("identifier list without identifiers".into()))?
        .iter()
        .map(|i| {
            i["name"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| ProviderError::Protocol("an identifier without a name".into()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let next = v["next-page-token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    Ok((names, next))
}

/// An OAuth2 token answer: the token and how long it lives (when the server says).
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub access_token: String,
    pub expires_in: Option<Duration>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

pub fn token(body: &[u8]) -> Result<Token, ProviderError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|_| ProviderError::Protocol("the token endpoint did not answer JSON".into()))?;
    let access_token = v["access_token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ProviderError::Protocol("the token answer has no access_token".into()))?;
    Ok(Token {
        access_token: access_token.to_string(),
        expires_in: v["expires_in"].as_u64().map(Duration::from_secs),
    })
}

/// When a token that lives `ttl` should be replaced: after 80% of its life (at least 1 s
/// before it expires), so no request is sent with a token about to expire.
pub fn refresh_after(ttl: Duration) -> Duration {
    let early = (ttl / 5).max(Duration::from_secs(1));
    ttl.saturating_sub(early)
}

/// What a non-success answer means. Only a 404 says the object is absent, and only the caller
/// decides that; everything here is an error: 401 authentication, 403 permission, 5xx and 429
/// the server, anything else an unexpected reply. Only the HTTP status and the error `type` (an
/// identifier) leave semops; the server's message goes to the debug log, scrubbed (a server may
/// echo what it was sent), and its `stack` nowhere.
pub fn classify(status: u16, body: &[u8], what: &str, credentials: &Credentials) -> ProviderError {
    let error = serde_json::from_slice::<Value>(body)
        .ok()
        .map(|v| v["error"].clone())
        .unwrap_or(Value::Null);
    let kind = error["type"]
        .as_str()
        .filter(|t| is_identifier(t))
        .map(|t| format!(" {t}"))
        .unwrap_or_default();
    let message = error["message"].as_str().unwrap_or("");
    let ours = match status {
        401 | 419 => "the catalog refused the credentials of spec.connection.credentialsSecretRef",
        403 => "the catalog's user may not read this; grant it read access to the namespaces",
        429 | 500..=599 => "the catalog is overloaded or failing",
        _ => "the catalog answered something semops does not expect",
    };
    let detail = format!(
        "{what}: {}",
        credentials.server_said(ours, &format!("HTTP {status}{kind}"), message)
    );
    match status {
        401 | 419 => ProviderError::AuthFailed(detail),
        403 => ProviderError::PermissionDenied(detail),
        429 | 500..=599 => ProviderError::ServerUnavailable(detail),
        _ => ProviderError::Protocol(detail),
    }
}

/// An Iceberg error type as servers send it (`NoSuchTableException`): a short identifier.
fn is_identifier(t: &str) -> bool {
    (1..=64).contains(&t.len())
        && t.starts_with(|c: char| c.is_ascii_alphabetic())
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.$".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_overrides_win_and_the_spec_default_separator_applies_otherwise() {
        let e = endpoint_from_config(
            br#"{"defaults":{"prefix":"d","namespace-separator":"%1F"},"overrides":{"prefix":"wh1","namespace-separator":"%2E"}}"#,
        )
        .unwrap();
        assert_eq!(
            e,
            Endpoint {
                prefix: Some("wh1".into()),
                separator: "%2E".into()
            }
        );
        let e = endpoint_from_config(br#"{}"#).unwrap();
        assert_eq!((e.prefix, e.separator.as_str()), (None, "%1F"));
        assert!(matches!(
            endpoint_from_config(b"<html>"),
            Err(ProviderError::Protocol(_))
        ));
    }

    #[test]
    fn paths_encode_each_level_and_name() {
        let e = Endpoint {
            prefix: Some("my wh".into()),
            separator: "%1F".into(),
        };
        let ns = levels("sales.eu").unwrap();
        assert_eq!(
            e.object_path(&ns, ObjectType::Table, "or/ders x"),
            "/v1/my%20wh/namespaces/sales%1Feu/tables/or%2Fders%20x"
        );
        assert_eq!(
            e.object_path(&["s"], ObjectType::View, "v"),
            "/v1/my%20wh/namespaces/s/views/v"
        );
        let plain = Endpoint {
            prefix: None,
            separator: "%2E".into(),
        };
        assert_eq!(
            plain.list_path(&["a", "b"], ObjectType::Table, Some("p 2")),
            "/v1/namespaces/a%2Eb/tables?pageToken=p%202"
        );
        for bad in ["", "a..b", ".a", "a."] {
            assert_eq!(levels(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn table_and_view_metadata_give_the_uuid_and_current_columns_with_nested_fields() {
        let table = json!({"metadata": {
        "table-uuid": "T-1", "current-schema-id": 1,
        "schemas": [
            {"schema-id": 0, "fields": [{"id": 1, "name": "old", "type": "int"}]},
            {"schema-id": 1, "fields": [
                {"id": 1, "name": "id", "type": "long"},
                {"id": 2, "name": "price", "type": "decimal(10,2)"},
                {"id": 3, "name": "customer", "type": {"type": "struct", "fields": [
                    {"id": 4, "name": "name", "type": "string"}]}},
                {"id": 5, "name": "tags", "type": {"type": "list", "element-id": 6, "element": "string"}}
            ]}]}});
        let t = loaded_table(table.to_string().as_bytes()).unwrap();
        assert_eq!(t.uuid, "T-1");
        let cols: Vec<(&str, &str)> = t
            .columns
            .iter()
            .map(|c| (c.name.as_str(), c.data_type.as_str()))
            .collect();
        assert_eq!(
            cols,
            [
                ("id", "long"),
                ("price", "decimal(10,2)"),
                ("customer", "struct"),
                ("customer.name", "string"),
                ("tags", "list<string>")
            ]
        );
        let view = json!({"metadata": {"view-uuid": "V-1", "current-version-id": 2,
            "versions": [{"version-id": 1, "schema-id": 0}, {"version-id": 2, "schema-id": 1}],
            "schemas": [{"schema-id": 0, "fields": []}, {"schema-id": 1, "fields": [{"id": 1, "name": "n", "type": "int"}]}]}});
        let v = loaded_view(view.to_string().as_bytes()).unwrap();
        assert_eq!((v.uuid.as_str(), v.columns.len()), ("V-1", 1));
    }

    #[test]
    fn malformed_metadata_is_an_error_never_an_absence() {
        for body in [
            "not json",
            r#"{"metadata": {}}"#,
            r#"{"metadata": {"table-uuid": ""}}"#,
            r#"{"metadata": {"table-uuid": "x", "schemas": [{"schema-id": 0}]}}"#,
        ] {
            assert!(
                matches!(
                    loaded_table(body.as_bytes()),
                    Err(ProviderError::Protocol(_))
                ),
                "{body}"
            );
        }
        // A hostile schema nested past the bound.
        let mut t = json!("int");
        for _ in 0..40 {
            t = json!({"type": "struct", "fields": [{"id": 1, "name": "f", "type": t}]});
        }
        let deep = json!({"metadata": {"table-uuid": "x", "current-schema-id": 0,
            "schemas": [{"schema-id": 0, "fields": [{"id": 1, "name": "f", "type": t}]}]}});
        assert!(loaded_table(deep.to_string().as_bytes()).is_err());
    }

    #[test]
    fn answers_are_classified_by_status_and_keep_only_the_status_and_type() {
        let body = br#"{"error": {"message": "no such user k9F2xQ7wLm3Zp8Rt", "type": "ForbiddenException", "code": 403, "stack": ["at secret.Class"]}}"#;
        let credentials = Credentials::new("", "k9F2xQ7wLm3Zp8Rt5Vb1");
        type Case = (u16, fn(&ProviderError) -> bool);
        let cases: [Case; 6] = [
            (401, |e| matches!(e, ProviderError::AuthFailed(_))),
            (403, |e| matches!(e, ProviderError::PermissionDenied(_))),
            (429, |e| matches!(e, ProviderError::ServerUnavailable(_))),
            (500, |e| matches!(e, ProviderError::ServerUnavailable(_))),
            (503, |e| matches!(e, ProviderError::ServerUnavailable(_))),
            (409, |e| matches!(e, ProviderError::Protocol(_))),
        ];
        for (status, is) in cases {
            let e = classify(status, body, "loading t", &credentials);
            assert!(is(&e), "{status}: {e:?}");
            let text = e.to_string();
            assert!(
                !text.contains("secret.Class") && !text.contains("no such user"),
                "{text}"
            );
            assert!(
                text.contains(&format!("HTTP {status} ForbiddenException")),
                "{text}"
            );
        }
        assert!(
            classify(500, b"", "x", &credentials)
                .to_string()
                .contains("(HTTP 500)")
        );
        // A type that is not an identifier is server text too: left out.
        let odd = br#"{"error": {"type": "k9F2xQ7w Lm3Zp8Rt", "message": "m"}}"#;
        let text = classify(500, odd, "x", &credentials).to_string();
        assert!(
            !text.contains("k9F2") && text.contains("(HTTP 500)"),
            "{text}"
        );
    }

    #[test]
    fn tokens_are_refreshed_after_most_of_their_life() {
        assert_eq!(
            refresh_after(Duration::from_secs(3600)),
            Duration::from_secs(2880)
        );
        assert_eq!(
            refresh_after(Duration::from_secs(3)),
            Duration::from_secs(2)
        );
        assert_eq!(refresh_after(Duration::from_secs(1)), Duration::ZERO);
        let t =
            token(br#"{"access_token": "abc", "expires_in": 60, "token_type": "bearer"}"#).unwrap();
        assert_eq!(t.expires_in, Some(Duration::from_secs(60)));
        assert!(!format!("{t:?}").contains("abc"), "the token never prints");
        assert!(token(br#"{"error": "invalid_client"}"#).is_err());
    }

    #[test]
    fn identifier_pages_give_names_and_the_next_token() {
        let (names, next) = identifiers(
            br#"{"identifiers": [{"namespace": ["s"], "name": "a"}, {"namespace": ["s"], "name": "b"}], "next-page-token": "2"}"#,
        )
        .unwrap();
        assert_eq!(
            (names, next.as_deref()),
            (vec!["a".into(), "b".into()], Some("2"))
        );
        let (_, next) = identifiers(br#"{"identifiers": []}"#).unwrap();
        assert_eq!(next, None);
        assert!(identifiers(br#"{"identifiers": [{}]}"#).is_err());
    }
}

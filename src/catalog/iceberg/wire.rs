//! The Iceberg REST protocol as plain values: URLs (prefix, namespace separator, percent
//! encoding), the answers semops reads (config, table and view metadata, identifier lists,
//! OAuth2 tokens) and the classification of every non-success answer. No I/O.

use std::time::Duration;

use serde::Deserialize;

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
    defaults: ConfigValues,
    #[serde(default)]
    overrides: ConfigValues,
}

/// The two config keys semops reads (every other key is skipped unread).
#[derive(Deserialize, Default)]
struct ConfigValues {
    #[serde(default)]
    prefix: Scalar,
    #[serde(rename = "namespace-separator", default)]
    separator: Scalar,
}

/// The endpoint from a config answer: overrides win over defaults.
pub fn endpoint_from_config(body: &[u8]) -> Result<Endpoint, ProviderError> {
    let config: ConfigResponse = parse(body, "GET /v1/config")?;
    let (o, d) = (config.overrides, config.defaults);
    Ok(Endpoint {
        prefix: o
            .prefix
            .text()
            .or(d.prefix.text())
            .filter(|p| !p.is_empty()),
        separator: o
            .separator
            .text()
            .or(d.separator.text())
            .unwrap_or_else(|| DEFAULT_SEPARATOR.into()),
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

// Answers are read into these typed values, never into a `serde_json::Value` tree: a field
// semops does not read is skipped without being kept, so what a server's body costs in memory
// is a small multiple of the few parts semops uses, not of the whole body (a `Value` tree of a
// body of small numbers is about sixteen times its size). serde_json refuses nesting deeper
// than 128 levels.

#[derive(Deserialize)]
struct LoadResult<M> {
    metadata: Option<M>,
}

#[derive(Deserialize)]
struct TableMetadata {
    #[serde(rename = "table-uuid")]
    uuid: Option<String>,
    #[serde(rename = "current-schema-id")]
    current_schema_id: Option<i64>,
    schemas: Option<Vec<Schema>>,
    /// Format v1's single schema.
    schema: Option<Schema>,
}

#[derive(Deserialize)]
struct ViewMetadata {
    #[serde(rename = "view-uuid")]
    uuid: Option<String>,
    #[serde(rename = "current-version-id")]
    current_version_id: Option<i64>,
    versions: Option<Vec<ViewVersion>>,
    schemas: Option<Vec<Schema>>,
}

#[derive(Deserialize)]
struct ViewVersion {
    #[serde(rename = "version-id")]
    version_id: Option<i64>,
    #[serde(rename = "schema-id")]
    schema_id: Option<i64>,
}

#[derive(Deserialize)]
struct Schema {
    #[serde(rename = "schema-id")]
    id: Option<i64>,
    fields: Option<Vec<Field>>,
}

#[derive(Deserialize)]
struct Field {
    name: Option<String>,
    #[serde(rename = "type")]
    ty: Option<FieldType>,
}

/// A field's type as the spec writes it: a primitive's name, or an object for struct, list and
/// map (whose other keys are skipped).
enum FieldType {
    Named(String),
    Struct(Vec<Field>),
    List(Option<Box<FieldType>>),
    Map(Option<Box<FieldType>>, Option<Box<FieldType>>),
    Other(Option<String>),
}

impl<'de> Deserialize<'de> for FieldType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = FieldType;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a type name or a nested type object")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FieldType, E> {
                Ok(FieldType::Named(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<FieldType, A::Error> {
                let (mut kind, mut fields, mut element, mut key, mut value) =
                    (None::<String>, None, None, None, None);
                while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match k.as_ref() {
                        "type" => kind = Some(map.next_value()?),
                        "fields" => fields = Some(map.next_value::<Vec<Field>>()?),
                        "element" => element = Some(Box::new(map.next_value()?)),
                        "key" => key = Some(Box::new(map.next_value()?)),
                        "value" => value = Some(Box::new(map.next_value()?)),
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(match kind.as_deref() {
                    Some("struct") => FieldType::Struct(fields.unwrap_or_default()),
                    Some("list") => FieldType::List(element),
                    Some("map") => FieldType::Map(key, value),
                    _ => FieldType::Other(kind),
                })
            }
        }
        d.deserialize_any(Visit)
    }
}

fn parse<'a, T: Deserialize<'a>>(body: &'a [u8], what: &str) -> Result<T, ProviderError> {
    serde_json::from_slice(body).map_err(|e| ProviderError::Protocol(format!("{what}: {e}")))
}

fn uuid_of(uuid: Option<String>, what: &str) -> Result<String, ProviderError> {
    uuid.filter(|u| !u.is_empty())
        .ok_or_else(|| ProviderError::Protocol(format!("{what} metadata without {what}-uuid")))
}

/// The schema with `id`, or the last one.
fn pick(schemas: Option<Vec<Schema>>, id: Option<i64>) -> Option<Schema> {
    let mut all = schemas?;
    let at = all
        .iter()
        .position(|s| s.id == id)
        .unwrap_or(all.len().checked_sub(1)?);
    Some(all.swap_remove(at))
}

/// `table-uuid` and the current schema's columns of a LoadTableResult.
pub fn loaded_table(body: &[u8]) -> Result<Loaded, ProviderError> {
    let r: LoadResult<TableMetadata> = parse(body, "table metadata")?;
    let meta = r
        .metadata
        .ok_or_else(|| ProviderError::Protocol("a table answer without metadata".into()))?;
    let uuid = uuid_of(meta.uuid, "table")?;
    let schema = pick(meta.schemas, meta.current_schema_id)
        .or(meta.schema)
        .ok_or_else(|| ProviderError::Protocol("table metadata without a schema".into()))?;
    Ok(Loaded {
        uuid,
        columns: columns(schema)?,
    })
}

/// `view-uuid` and the current version's columns of a LoadViewResult.
pub fn loaded_view(body: &[u8]) -> Result<Loaded, ProviderError> {
    let r: LoadResult<ViewMetadata> = parse(body, "view metadata")?;
    let meta = r
        .metadata
        .ok_or_else(|| ProviderError::Protocol("a view answer without metadata".into()))?;
    let uuid = uuid_of(meta.uuid, "view")?;
    let schema_id = meta
        .versions
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.version_id == meta.current_version_id)
        .and_then(|v| v.schema_id);
    let schema = pick(meta.schemas, schema_id)
        .ok_or_else(|| ProviderError::Protocol("view metadata without a schema".into()))?;
    Ok(Loaded {
        uuid,
        columns: columns(schema)?,
    })
}

/// The columns of an Iceberg schema: top-level fields by name; fields of a struct also as
/// `parent.child` (the way an Ossie expression addresses them). Types as the spec writes them
/// (`long`, `decimal(10,2)`, `struct`, `list<string>`).
fn columns(schema: Schema) -> Result<Vec<Column>, ProviderError> {
    let mut out = Vec::new();
    let fields = schema
        .fields
        .ok_or_else(|| ProviderError::Protocol("a schema without fields".into()))?;
    collect(&fields, "", &mut out, 0)?;
    Ok(out)
}

/// Deepest struct nesting read (metadata is the server's; a hostile one must not recurse far).
const MAX_DEPTH: usize = 16;

fn collect(
    fields: &[Field],
    prefix: &str,
    out: &mut Vec<Column>,
    depth: usize,
) -> Result<(), ProviderError> {
    if depth > MAX_DEPTH {
        return Err(ProviderError::Protocol("schema nested too deep".into()));
    }
    for f in fields {
        let name = f
            .name
            .as_deref()
            .ok_or_else(|| ProviderError::Protocol("a field without a name".into()))?;
        let full = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        out.push(Column::new(full.clone(), type_name(f.ty.as_ref(), 0)));
        if let Some(FieldType::Struct(nested)) = &f.ty {
            collect(nested, &full, out, depth + 1)?;
        }
    }
    Ok(())
}

fn type_name(t: Option<&FieldType>, depth: usize) -> String {
    if depth > MAX_DEPTH {
        return "unknown".into();
    }
    let inner = |t: &Option<Box<FieldType>>| type_name(t.as_deref(), depth + 1);
    match t {
        Some(FieldType::Named(s)) => s.clone(),
        Some(FieldType::Struct(_)) => "struct".into(),
        Some(FieldType::List(element)) => format!("list<{}>", inner(element)),
        Some(FieldType::Map(k, v)) => format!("map<{},{}>", inner(k), inner(v)),
        Some(FieldType::Other(Some(kind))) => kind.clone(),
        Some(FieldType::Other(None)) | None => "unknown".into(),
    }
}

/// One scalar a server may send as another type: kept when it is a string or an unsigned
/// integer, skipped otherwise (a hostile array there costs nothing).
#[derive(Default)]
enum Scalar {
    Text(String),
    Number(u64),
    #[default]
    Other,
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Text(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::Number(v))
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Scalar, E> {
                Ok(Scalar::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Scalar, A::Error> {
                while a.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Scalar, A::Error> {
                while a
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Scalar::Other)
            }
        }
        d.deserialize_any(Visit)
    }
}

impl Scalar {
    fn text(self) -> Option<String> {
        match self {
            Scalar::Text(s) => Some(s),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
struct IdentifierPage {
    identifiers: Option<Vec<Identifier>>,
    #[serde(rename = "next-page-token", default)]
    next_page_token: Scalar,
}

#[derive(Deserialize)]
struct Identifier {
    name: Option<String>,
}

/// One page of a list of tables or views: names and the next page token.
pub fn identifiers(body: &[u8]) -> Result<(Vec<String>, Option<String>), ProviderError> {
    let page: IdentifierPage = parse(body, "identifier list")?;
    let names = page
        .identifiers
        .ok_or_else(|| ProviderError::Protocol("identifier list without identifiers".into()))?
        .into_iter()
        .map(|i| {
            i.name
                .ok_or_else(|| ProviderError::Protocol("an identifier without a name".into()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let next = page.next_page_token.text().filter(|t| !t.is_empty());
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

#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    access_token: Scalar,
    #[serde(default)]
    expires_in: Scalar,
}

pub fn token(body: &[u8]) -> Result<Token, ProviderError> {
    let answer: TokenAnswer = serde_json::from_slice(body)
        .map_err(|_| ProviderError::Protocol("the token endpoint did not answer JSON".into()))?;
    let access_token = answer
        .access_token
        .text()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ProviderError::Protocol("the token answer has no access_token".into()))?;
    Ok(Token {
        access_token,
        expires_in: match answer.expires_in {
            Scalar::Number(n) => Some(Duration::from_secs(n)),
            _ => None,
        },
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
    #[derive(Deserialize, Default)]
    struct Answer {
        #[serde(default)]
        error: Option<ErrorModel>,
    }
    #[derive(Deserialize, Default)]
    struct ErrorModel {
        #[serde(rename = "type", default)]
        kind: Scalar,
        #[serde(default)]
        message: Scalar,
    }
    let error = serde_json::from_slice::<Answer>(body)
        .ok()
        .and_then(|a| a.error)
        .unwrap_or_default();
    let kind = error
        .kind
        .text()
        .filter(|t| is_identifier(t))
        .map(|t| format!(" {t}"))
        .unwrap_or_default();
    let message = error.message.text().unwrap_or_default();
    let ours = match status {
        401 | 419 => "the catalog refused the credentials of spec.connection.credentialsSecretRef",
        403 => "the catalog's user may not read this; grant it read access to the namespaces",
        429 | 500..=599 => "the catalog is overloaded or failing",
        _ => "the catalog answered something semops does not expect",
    };
    let detail = format!(
        "{what}: {}",
        credentials.server_said(ours, &format!("HTTP {status}{kind}"), &message)
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
    fn hostile_answers_are_errors_or_skipped_never_kept() {
        // Parts semops does not read are skipped whatever they hold.
        let big = format!(
            r#"{{"metadata": {{"table-uuid": "T", "current-schema-id": 0, "snapshots": [{}0],
                "properties": {{"a": {{"b": [1, 2, {{"c": null}}]}}}},
                "schemas": [{{"schema-id": 0, "fields": [{{"name": "id", "type": "long", "doc": [1,2,3]}}]}}]}}}}"#,
            "0,".repeat(100_000)
        );
        let t = loaded_table(big.as_bytes()).unwrap();
        assert_eq!((t.uuid.as_str(), t.columns.len()), ("T", 1));
        // JSON nested past serde_json's limit, anywhere: an error, not a stack overflow.
        let deep = format!(
            r#"{{"metadata": {{"x": {}1{}}}}}"#,
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert!(matches!(
            loaded_table(deep.as_bytes()),
            Err(ProviderError::Protocol(_))
        ));
        let deep_type = format!(
            r#"{{"metadata": {{"table-uuid": "T", "schemas": [{{"fields": [{{"name": "f", "type": {}"int"{}}}]}}]}}}}"#,
            r#"{"type": "list", "element": "#.repeat(300),
            "}".repeat(300)
        );
        assert!(loaded_table(deep_type.as_bytes()).is_err());
        // Wrong types where scalars belong: skipped, not an error (and never echoed).
        let t = token(br#"{"access_token": "abc", "expires_in": [1, 2, 3]}"#).unwrap();
        assert_eq!(t.expires_in, None);
        assert!(token(br#"{"access_token": {"nested": "abc"}}"#).is_err());
        let e = classify(
            500,
            br#"{"error": {"type": ["x"], "message": {"m": 1}}}"#,
            "x",
            &Credentials::new("", ""),
        )
        .to_string();
        assert!(e.contains("HTTP 500") && !e.contains('['), "{e}");
        let (names, next) = identifiers(
            br#"{"identifiers": [{"namespace": ["a"], "name": "t"}], "next-page-token": 7}"#,
        )
        .unwrap();
        assert_eq!((names, next), (vec!["t".to_string()], None));
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

    /// A table of one top-level field `f` of type `t`.
    fn one_field(t: serde_json::Value) -> Result<Loaded, ProviderError> {
        let body = json!({"metadata": {"table-uuid": "T", "current-schema-id": 0,
            "schemas": [{"schema-id": 0, "fields": [{"id": 1, "name": "f", "type": t}]}]}});
        loaded_table(body.to_string().as_bytes())
    }

    #[test]
    fn nested_types_are_named_the_way_the_spec_writes_them() {
        // (type, the column's type)
        let cases = [
            (
                json!({"type": "map", "key": "string", "value": "long", "key-id": 2}),
                "map<string,long>",
            ),
            (
                json!({"type": "map", "value": {"type": "list", "element": "int"}}),
                "map<unknown,list<int>>",
            ),
            (json!({"type": "list"}), "list<unknown>"),
            (json!({"type": "fixed", "length": 16}), "fixed"),
            (json!({"element": "int"}), "unknown"),
        ];
        for (t, want) in cases {
            let loaded = one_field(t.clone()).unwrap();
            assert_eq!(loaded.columns, [Column::new("f", want)], "{t}");
        }
        let Err(ProviderError::Protocol(message)) = one_field(json!(5)) else {
            panic!("a number as a type was accepted");
        };
        assert!(
            message.contains("expected a type name or a nested type object"),
            "{message}"
        );
    }

    #[test]
    fn nesting_is_read_to_its_bound_and_no_further() {
        // Structs: the deepest level read is MAX_DEPTH; one more is an error.
        let structs = |levels: usize| {
            let mut t = json!("int");
            for _ in 0..levels {
                t = json!({"type": "struct", "fields": [{"id": 1, "name": "g", "type": t}]});
            }
            one_field(t)
        };
        let deepest = structs(MAX_DEPTH).unwrap();
        let last = deepest.columns.last().unwrap();
        assert_eq!(
            (last.name.matches(".g").count(), last.data_type.as_str()),
            (MAX_DEPTH, "int")
        );
        assert!(
            matches!(structs(MAX_DEPTH + 1), Err(ProviderError::Protocol(m)) if m.contains("nested too deep"))
        );
        // Lists and maps: named down to the bound, `unknown` below it.
        let lists = |levels: usize| {
            let mut t = json!("int");
            for _ in 0..levels {
                t = json!({"type": "list", "element": t});
            }
            one_field(t).unwrap().columns[0].data_type.clone()
        };
        let named = |levels: usize, inner: &str| {
            format!("{}{inner}{}", "list<".repeat(levels), ">".repeat(levels))
        };
        assert_eq!(lists(MAX_DEPTH), named(MAX_DEPTH, "int"));
        assert_eq!(lists(MAX_DEPTH + 1), named(MAX_DEPTH + 1, "unknown"));
    }

    #[test]
    fn a_token_answer_keeps_its_lifetime_only_as_a_whole_number_of_seconds() {
        // (expires_in, kept)
        let cases = [
            (json!(60), Some(Duration::from_secs(60))),
            (json!(-5), None),
            (json!(1.5), None),
            (json!(true), None),
            (json!(null), None),
            (json!("60"), None),
            (json!({"seconds": 60}), None),
        ];
        for (expires_in, kept) in cases {
            let body = json!({"access_token": "abc", "expires_in": expires_in});
            let t = token(body.to_string().as_bytes()).unwrap();
            assert_eq!(
                (t.access_token.as_str(), t.expires_in),
                ("abc", kept),
                "{expires_in}"
            );
        }
        let t = token(br#"{"access_token": "abc", "expires_in": 60}"#).unwrap();
        assert_eq!(format!("{t:?}"), "Token { expires_in: Some(60s), .. }");
        assert!(
            token(br#"{"access_token": ""}"#).is_err(),
            "an empty token is none"
        );
    }

    #[test]
    fn each_refusal_says_in_semops_words_what_to_do() {
        let credentials = Credentials::new("", "");
        // (status, the words)
        let cases = [
            (
                401,
                "loading t: the catalog refused the credentials of spec.connection.credentialsSecretRef (HTTP 401)",
            ),
            (
                419,
                "loading t: the catalog refused the credentials of spec.connection.credentialsSecretRef (HTTP 419)",
            ),
            (
                403,
                "loading t: the catalog's user may not read this; grant it read access to the namespaces (HTTP 403)",
            ),
            (
                429,
                "loading t: the catalog is overloaded or failing (HTTP 429)",
            ),
            (
                502,
                "loading t: the catalog is overloaded or failing (HTTP 502)",
            ),
            (
                302,
                "loading t: the catalog answered something semops does not expect (HTTP 302)",
            ),
        ];
        for (status, words) in cases {
            let e = classify(status, b"", "loading t", &credentials);
            let text = match &e {
                ProviderError::AuthFailed(t)
                | ProviderError::PermissionDenied(t)
                | ProviderError::ServerUnavailable(t)
                | ProviderError::Protocol(t) => t.clone(),
                other => panic!("{status}: {other:?}"),
            };
            assert_eq!(text, words, "{status}");
        }
        assert!(matches!(
            classify(419, b"", "x", &credentials),
            ProviderError::AuthFailed(_)
        ));
        // An error type is kept only when it is a short identifier.
        for (kind, kept) in [
            ("NoSuchTableException", true),
            ("a.b$C_1", true),
            ("9Lives", false),
            ("", false),
            ("has space", false),
            (&"X".repeat(64), true),
            (&"X".repeat(65), false),
        ] {
            let body = json!({"error": {"type": kind}}).to_string();
            let text = classify(500, body.as_bytes(), "x", &credentials).to_string();
            assert_eq!(
                text.contains(&format!("(HTTP 500 {kind})")),
                kept,
                "{kind:?}: {text}"
            );
        }
    }
}

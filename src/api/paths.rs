//! The read API's paths: one table of constants shared by the router, the OpenAPI document and
//! the CLI (which fills them in with [`fill`]), so a client URL can never drift from a route.

pub const SOURCE_DATASETS: &str =
    "/api/metalakes/{ns}/objects/{object_type}/{full_name}/semantic-model-datasets";
pub const SOURCE_DATASETS_BY_PARTS: &str =
    "/api/metalakes/{ns}/objects/{object_type}/semantic-model-datasets";
pub const SCHEMA_METRICS: &str =
    "/api/metalakes/{ns}/catalogs/{catalog}/schemas/{schema}/semantic-model-metrics";
/// Every model of the namespace (`?catalog=` and `?schema=` narrow it).
pub const NS_MODELS: &str = "/api/metalakes/{ns}/semantic-models";
/// One metric by its stable id.
pub const METRIC: &str = "/api/metalakes/{ns}/semantic-model-metrics/{id}";
pub const MODELS: &str = "/api/metalakes/{ns}/catalogs/{catalog}/schemas/{schema}/semantic-models";
pub const MODEL: &str =
    "/api/metalakes/{ns}/catalogs/{catalog}/schemas/{schema}/semantic-models/{name}";
pub const MODEL_VERSIONS: &str =
    "/api/metalakes/{ns}/catalogs/{catalog}/schemas/{schema}/semantic-models/{name}/versions";
/// A metric question compiled to SQL against the model (docs/queries.md).
pub const MODEL_SQL: &str =
    "/api/metalakes/{ns}/catalogs/{catalog}/schemas/{schema}/semantic-models/{name}/sql";

pub const STALE_SCHEMAS: &str = "/api/metalakes/{ns}/catalogs/{catalog}/stale-schemas";
pub const STALE_ENTITIES: &str = "/api/metalakes/{ns}/catalogs/{catalog}/stale-entities";
pub const RECONCILE: &str = "/api/metalakes/{ns}/catalogs/{catalog}/reconcile";
pub const REGISTRATIONS: &str = "/api/metalakes/{ns}/catalogs/{catalog}/registrations";

pub const MODEL_LINEAGE: &str =
    "/api/metalakes/{ns}/catalogs/{catalog}/schemas/{schema}/semantic-models/{name}/lineage";
pub const SOURCE_LINEAGE: &str = "/api/metalakes/{ns}/objects/{object_type}/{full_name}/lineage";
pub const SOURCE_LINEAGE_BY_PARTS: &str = "/api/metalakes/{ns}/objects/{object_type}/lineage";
pub const SOURCE_IMPACT: &str = "/api/metalakes/{ns}/objects/{object_type}/{full_name}/impact";

/// The aggregated API's group and version (the chart's `APIService` `v1alpha1.query.semops.io`).
pub const GROUP: &str = "query.semops.io";
pub const VERSION: &str = "v1alpha1";
pub const GROUP_VERSION: &str = "query.semops.io/v1alpha1";

/// An aggregated path under `namespaces/{ns}`: resource-shaped, so the API server's RBAC check
/// (verb get, resource `tables`, subresource `datasets`, ...) means something.
macro_rules! aggregated {
    ($tail:literal) => {
        concat!("/apis/query.semops.io/v1alpha1/namespaces/{ns}/", $tail)
    };
}
pub const AGG_TABLE_DATASETS: &str = aggregated!("tables/{name}/datasets");
pub const AGG_VIEW_DATASETS: &str = aggregated!("views/{name}/datasets");
pub const AGG_TABLE_LINEAGE: &str = aggregated!("tables/{name}/lineage");
pub const AGG_VIEW_LINEAGE: &str = aggregated!("views/{name}/lineage");
pub const AGG_TABLE_IMPACT: &str = aggregated!("tables/{name}/impact");
pub const AGG_VIEW_IMPACT: &str = aggregated!("views/{name}/impact");
pub const AGG_SCHEMA_METRICS: &str = aggregated!("schemas/{name}/metrics");
pub const AGG_SCHEMA_MODELS: &str = aggregated!("schemas/{name}/models");
pub const AGG_NS_MODELS: &str = aggregated!("models");
pub const AGG_METRIC: &str = aggregated!("metrics/{name}");
pub const AGG_MODEL: &str = aggregated!("models/{name}");
pub const AGG_MODEL_LINEAGE: &str = aggregated!("models/{name}/lineage");
pub const AGG_MODEL_VERSIONS: &str = aggregated!("models/{name}/versions");
pub const AGG_MODEL_SQL: &str = aggregated!("models/{name}/sql");
pub const AGG_STALE_SCHEMAS: &str = aggregated!("catalogs/{name}/stale-schemas");
pub const AGG_STALE_ENTITIES: &str = aggregated!("catalogs/{name}/stale-entities");
pub const AGG_REGISTRATIONS: &str = aggregated!("catalogs/{name}/registrations");
pub const AGG_RECONCILE: &str = aggregated!("catalogs/{name}/reconcile");

/// Each aggregated path and the Gravitino path that answers it (docs/api.md, OpenAPI v3).
pub const AGGREGATED: &[(&str, &str)] = &[
    (AGG_TABLE_DATASETS, SOURCE_DATASETS),
    (AGG_VIEW_DATASETS, SOURCE_DATASETS),
    (AGG_TABLE_LINEAGE, SOURCE_LINEAGE),
    (AGG_VIEW_LINEAGE, SOURCE_LINEAGE),
    (AGG_TABLE_IMPACT, SOURCE_IMPACT),
    (AGG_VIEW_IMPACT, SOURCE_IMPACT),
    (AGG_SCHEMA_METRICS, SCHEMA_METRICS),
    (AGG_SCHEMA_MODELS, MODELS),
    (AGG_NS_MODELS, NS_MODELS),
    (AGG_METRIC, METRIC),
    (AGG_MODEL, MODEL),
    (AGG_MODEL_LINEAGE, MODEL_LINEAGE),
    (AGG_MODEL_VERSIONS, MODEL_VERSIONS),
    (AGG_MODEL_SQL, MODEL_SQL),
    (AGG_STALE_SCHEMAS, STALE_SCHEMAS),
    (AGG_STALE_ENTITIES, STALE_ENTITIES),
    (AGG_REGISTRATIONS, REGISTRATIONS),
    (AGG_RECONCILE, RECONCILE),
];

/// A route path with each `{name}` replaced by the percent-encoded value given for it.
///
/// Panics when a placeholder has no value: every caller passes a fixed route constant, so a
/// miss is a programming error caught by the tests.
pub fn fill(route: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(route.len() + 32);
    let mut rest = route;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').expect("placeholders are closed") + open;
        let name = &rest[open + 1..close];
        let value = values
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no value for {{{name}}} in {route}"))
            .1;
        out.push_str(&encode_segment(value));
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Percent-encodes one path segment (everything but RFC 3986 unreserved characters).
pub fn encode_segment(s: &str) -> String {
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

/// `%xx` escapes decoded (the inverse of [`encode_segment`]); `None` when an escape is
/// malformed or the result is not UTF-8.
pub fn decode_segment(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_paths_encode_each_value_as_one_segment() {
        assert_eq!(
            fill(
                SOURCE_DATASETS,
                &[
                    ("ns", "example"),
                    ("object_type", "table"),
                    ("full_name", "hr.`a/b c`.employees")
                ]
            ),
            "/api/metalakes/example/objects/table/hr.%60a%2Fb%20c%60.employees/semantic-model-datasets"
        );
        assert_eq!(
            fill(
                MODEL,
                &[
                    ("ns", "n"),
                    ("catalog", "c"),
                    ("schema", "s"),
                    ("name", "ü")
                ]
            ),
            "/api/metalakes/n/catalogs/c/schemas/s/semantic-models/%C3%BC"
        );
    }

    #[test]
    #[should_panic(expected = "no value for {catalog}")]
    fn a_missing_value_is_a_programming_error() {
        fill(REGISTRATIONS, &[("ns", "n")]);
    }

    #[test]
    fn decoding_inverts_encoding_and_refuses_a_malformed_escape() {
        for s in ["", "plain", "hr.`a/b c`.employees", "ü%", "100%25"] {
            assert_eq!(
                decode_segment(&encode_segment(s)).as_deref(),
                Some(s),
                "{s}"
            );
        }
        // (segment, decoded)
        let cases = [
            ("a%2fb", Some("a/b")),
            ("%41%42c", Some("ABc")),
            ("abc%4", None),
            ("abc%", None),
            ("%zz", None),
            ("%FF", None),
            ("%C3%BC", Some("ü")),
        ];
        for (segment, decoded) in cases {
            assert_eq!(decode_segment(segment).as_deref(), decoded, "{segment}");
        }
    }
}

//! The OpenAPI 3 document of the read API, generated from the code: the route table below is
//! the one the router uses, and response schemas come from the response types themselves.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use super::error::Envelope;
use super::paths::*;
use super::routes::{EntityList, MetricList, ModelBody};

/// A documented route.
pub struct Route {
    /// HTTP method: get or post.
    pub method: &'static str,
    pub path: &'static str,
    pub summary: &'static str,
    pub response: &'static str,
    /// Query parameters: (name, description).
    pub query: &'static [(&'static str, &'static str)],
}

pub const ROUTES: &[Route] = &[
    Route {
        method: "get",
        path: SOURCE_DATASETS,
        summary: "Datasets of accepted semantic models bound to a table or view (full_name: catalog.schema.name, Ossie backtick quoting)",
        response: "EntityList",
        query: &[],
    },
    Route {
        method: "get",
        path: SOURCE_DATASETS_BY_PARTS,
        summary: "The same lookup with the name in structured form",
        response: "EntityList",
        query: &[
            ("catalog", "source catalog"),
            ("schema", "source schema"),
            ("name", "table or view name"),
        ],
    },
    Route {
        method: "get",
        path: SCHEMA_METRICS,
        summary: "Metrics of the semantic models of a schema (identifiers, or definitions with details=true)",
        response: "EntityList or MetricList",
        query: &[
            ("details", "true for MetricList"),
            ("ids", "with details=true: each metric's stable id too"),
        ],
    },
    Route {
        method: "get",
        path: MODELS,
        summary: "Semantic models of a schema",
        response: "EntityList",
        query: &[],
    },
    Route {
        method: "get",
        path: NS_MODELS,
        summary: "Every semantic model of the namespace the caller may get, optionally of one catalog or schema (no catalog is probed)",
        response: "EntityList",
        query: &[
            ("catalog", "only this catalog's models"),
            ("schema", "only this schema's models"),
        ],
    },
    Route {
        method: "get",
        path: METRIC,
        summary: "One metric by its stable id: its model, name, state (current or retired, e.g. by a rename), definition, and its definition in each kept revision",
        response: "MetricBody",
        query: &[],
    },
    Route {
        method: "get",
        path: MODEL,
        summary: "One semantic model's accepted definition, revision and metric ids (or a kept earlier revision with revision=N)",
        response: "ModelBody",
        query: &[(
            "revision",
            "a kept revision number (see versions); absent: the accepted one",
        )],
    },
    Route {
        method: "get",
        path: MODEL_VERSIONS,
        summary: "The model's kept revisions, oldest first: number, time, definition hash, the metric ids each added and retired",
        response: "VersionList",
        query: &[],
    },
    Route {
        method: "get",
        path: MODEL_SQL,
        summary: "A metric question compiled to SQL against the model's accepted revision, in its home catalog's dialect: the SQL, its bound parameters, the metric ids and revision used, the joins chosen (semops never runs it). 400 names the part of the question at fault and the fix",
        response: "CompiledQuery",
        query: &[
            (
                "metric",
                "a metric of the model; once per metric (at least one)",
            ),
            (
                "dimension",
                "dataset.field to group by, :day|:week|:month|:quarter|:year after a time field; once per dimension",
            ),
            (
                "filter",
                "a JSON object {\"field\": \"dataset.field\", \"op\": \"eq|ne|lt|le|gt|ge|in|not_in|between|is_null|is_not_null\", \"values\": [...]}; once per filter",
            ),
            (
                "order",
                "a requested metric or dimension, - in front for descending; once per key",
            ),
            ("limit", "at most this many rows"),
        ],
    },
    Route {
        method: "get",
        path: STALE_SCHEMAS,
        summary: "Live report-only scan of the catalog: its stale Schema registrations (changes nothing)",
        response: "StaleResponse",
        query: &[],
    },
    Route {
        method: "get",
        path: STALE_ENTITIES,
        summary: "Live report-only scan of the catalog: every registration that is Stale, Renamed or Removed (changes nothing)",
        response: "StaleResponse",
        query: &[],
    },
    Route {
        method: "post",
        path: RECONCILE,
        summary: "Run a check round now (body {\"dryRun\": true} reports only; otherwise the catalog's policy applies, leader only). Needs create on catalogs/reconcile",
        response: "StaleResponse",
        query: &[],
    },
    Route {
        method: "get",
        path: REGISTRATIONS,
        summary: "The catalog's registrations with their owner, tags and properties, as of the last round (removed ones withdrawn)",
        response: "RegistrationList",
        query: &[],
    },
    Route {
        method: "get",
        path: MODEL_LINEAGE,
        summary: "Lineage graph of one model: the model, its datasets and their sources, its metrics (bounded: 413 too large, 503 busy or past the deadline, 409 while its status lags its spec)",
        response: "Graph",
        query: &[],
    },
    Route {
        method: "get",
        path: SOURCE_LINEAGE,
        summary: "Lineage graph of a table or view: the source, the datasets bound to it, their models (only models the caller may get)",
        response: "Graph",
        query: &[],
    },
    Route {
        method: "get",
        path: SOURCE_LINEAGE_BY_PARTS,
        summary: "The same source lineage with the name in structured form",
        response: "Graph",
        query: &[
            ("catalog", "source catalog"),
            ("schema", "source schema"),
            ("name", "table or view name"),
        ],
    },
    Route {
        method: "get",
        path: SOURCE_IMPACT,
        summary: "Change impact: which models, datasets, keys, relationships, fields and metrics (with stable ids) would break if these columns of a table or view, or the whole object, went away (only models the caller may get)",
        response: "ImpactReport",
        query: &[(
            "columns",
            "comma-separated column names (at most 256); absent: the whole object",
        )],
    },
];

/// The whole document.
pub fn document() -> Value {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut schemas = Map::new();
    for (name, schema) in [
        ("EntityList", generator.subschema_for::<EntityList>()),
        ("MetricList", generator.subschema_for::<MetricList>()),
        ("ModelBody", generator.subschema_for::<ModelBody>()),
        (
            "MetricBody",
            generator.subschema_for::<super::explain::MetricBody>(),
        ),
        (
            "VersionList",
            generator.subschema_for::<super::versions::VersionList>(),
        ),
        (
            "CompiledQuery",
            generator.subschema_for::<super::compile::CompiledQuery>(),
        ),
        ("Error", generator.subschema_for::<Envelope>()),
        (
            "StaleResponse",
            generator.subschema_for::<super::checks::StaleResponse>(),
        ),
        (
            "RegistrationList",
            generator.subschema_for::<super::checks::RegistrationList>(),
        ),
        ("Graph", generator.subschema_for::<crate::lineage::Graph>()),
        (
            "ImpactReport",
            generator.subschema_for::<super::impact::ImpactReport>(),
        ),
        (
            "ReconcileRequest",
            generator.subschema_for::<super::checks::ReconcileRequest>(),
        ),
    ] {
        schemas.insert(name.into(), schema.to_value());
    }
    for (name, schema) in generator.take_definitions(true) {
        schemas.insert(name, schema);
    }
    let reference = |name: &str| json!({"$ref": format!("#/components/schemas/{name}")});
    let mut paths = Map::new();
    for r in ROUTES {
        let mut parameters: Vec<Value> = r
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|p| json!({"name": p, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        parameters.extend(r.query.iter().map(|(q, d)| json!({"name": q, "in": "query", "required": false, "description": d, "schema": {"type": "string"}})));
        let ok = match r.response {
            "EntityList or MetricList" => {
                json!({"oneOf": [reference("EntityList"), reference("MetricList")]})
            }
            other => reference(other),
        };
        let error = json!({"description": "error envelope", "content": {"application/json": {"schema": reference("Error")}}});
        let mut operation = json!({
            "summary": r.summary,
            "parameters": parameters,
            "security": [{"bearer": []}],
            "responses": {
                "200": {"description": "success", "content": {"application/json": {"schema": ok}}},
                "400": error, "401": error, "403": error, "404": error, "409": error, "413": error, "502": error, "503": error
            }
        });
        if r.method == "post" {
            operation["requestBody"] = json!({"required": false, "content": {"application/json": {"schema": reference("ReconcileRequest")}}});
        }
        paths.insert(r.path.into(), json!({ r.method: operation }));
    }
    json!({
        "openapi": "3.0.3",
        "info": {"title": "semops read API", "version": env!("CARGO_PKG_VERSION"), "description": "Gravitino-compatible read paths; metalake = Kubernetes namespace."},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "a Kubernetes token (TokenReview); access follows RBAC (SubjectAccessReview)"}}
        }
    })
}

/// The document as committed in docs/openapi.json.
pub fn document_text() -> String {
    serde_json::to_string_pretty(&document()).expect("the document serializes") + "\n"
}

#[cfg(test)]
mod tests {
    /// docs/openapi.json is what the code generates, byte for byte.
    #[test]
    fn the_committed_document_matches_the_code() {
        assert!(
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.json"))
                .unwrap()
                == super::document_text(),
            "docs/openapi.json is stale; run hack/generate"
        );
    }
}

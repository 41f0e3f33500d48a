//! One table from a question to its route on both path families: the direct port's
//! (`/api/metalakes/...`, one path segment per name part) and the aggregated API's
//! (`/apis/query.semops.io/...`, one dotted name, each part quoted the Ossie way when it needs
//! it). Every path is filled in from the route constants the server itself routes by.

use serde_json::Value;

use super::query::Query;
use crate::api::paths::{self, fill};
use crate::ossie::source_ref::format_segment;

/// Which of the two path families a request takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// The direct port: `/api/metalakes/{ns}/...`.
    Direct,
    /// Through the Kubernetes API server: `/apis/query.semops.io/v1alpha1/namespaces/{ns}/...`.
    Aggregated,
}

/// One request, ready to send.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub method: &'static str,
    /// Path with its query string.
    pub path: String,
    /// JSON body (POST only).
    pub body: Option<Value>,
}

/// A question's row of the table.
struct Route {
    method: &'static str,
    /// The direct route and its parameters besides `{ns}`.
    direct: &'static str,
    params: Vec<(&'static str, String)>,
    /// The aggregated route and its `{name}`, when it has one.
    aggregated: &'static str,
    name: Option<String>,
    /// `?...` or empty; the same on both families.
    query: String,
    body: Option<Value>,
}

impl Route {
    fn get(direct: &'static str, aggregated: &'static str) -> Route {
        Route {
            method: "GET",
            direct,
            params: vec![],
            aggregated,
            name: None,
            query: String::new(),
            body: None,
        }
    }
    fn params(mut self, params: &[(&'static str, &str)]) -> Route {
        self.params = params.iter().map(|(k, v)| (*k, v.to_string())).collect();
        self
    }
    fn name(mut self, name: String) -> Route {
        self.name = Some(name);
        self
    }
    fn query(mut self, query: impl Into<String>) -> Route {
        self.query = query.into();
        self
    }
}

/// `catalog.schema[.name]`, each part quoted when it needs it (the aggregated API's names).
fn dotted(parts: &[&str]) -> String {
    parts
        .iter()
        .map(|p| format_segment(p))
        .collect::<Vec<_>>()
        .join(".")
}

/// The aggregated route of a table or a view.
fn by_type(object_type: &str, tables: &'static str, views: &'static str) -> &'static str {
    if object_type == "view" { views } else { tables }
}

impl Query {
    /// The table: this question's route on both families.
    fn route(&self) -> Route {
        use paths::*;
        match self {
            Query::Lookup {
                object_type,
                full_name,
            } => Route::get(
                SOURCE_DATASETS,
                by_type(object_type, AGG_TABLE_DATASETS, AGG_VIEW_DATASETS),
            )
            .params(&[("object_type", object_type), ("full_name", full_name)])
            .name(full_name.clone()),
            Query::Metrics {
                catalog,
                schema,
                details,
            } => Route::get(SCHEMA_METRICS, AGG_SCHEMA_METRICS)
                .params(&[("catalog", catalog), ("schema", schema)])
                .name(dotted(&[catalog, schema]))
                .query(if *details {
                    "?details=true&ids=true"
                } else {
                    "?details=false"
                }),
            Query::Models {
                catalog,
                schema,
                name: None,
            } => Route::get(MODELS, AGG_SCHEMA_MODELS)
                .params(&[("catalog", catalog), ("schema", schema)])
                .name(dotted(&[catalog, schema])),
            Query::Models {
                catalog,
                schema,
                name: Some(name),
            } => model_route(MODEL, AGG_MODEL, catalog, schema, name),
            Query::ModelRevision {
                catalog,
                schema,
                name,
                revision,
            } => model_route(MODEL, AGG_MODEL, catalog, schema, name)
                .query(format!("?revision={revision}")),
            Query::ModelLineage {
                catalog,
                schema,
                name,
            } => model_route(MODEL_LINEAGE, AGG_MODEL_LINEAGE, catalog, schema, name),
            Query::History {
                catalog,
                schema,
                name,
            } => model_route(MODEL_VERSIONS, AGG_MODEL_VERSIONS, catalog, schema, name),
            Query::Sql {
                catalog,
                schema,
                name,
                question,
            } => model_route(MODEL_SQL, AGG_MODEL_SQL, catalog, schema, name)
                .query(format!("?{question}")),
            Query::NamespaceModels { catalog, schema } => {
                Route::get(NS_MODELS, AGG_NS_MODELS).query(filter_query(catalog, schema))
            }
            Query::Metric { id } => Route::get(METRIC, AGG_METRIC)
                .params(&[("id", id)])
                .name(id.clone()),
            Query::SourceLineage {
                object_type,
                full_name,
            } => Route::get(
                SOURCE_LINEAGE,
                by_type(object_type, AGG_TABLE_LINEAGE, AGG_VIEW_LINEAGE),
            )
            .params(&[("object_type", object_type), ("full_name", full_name)])
            .name(full_name.clone()),
            Query::Impact {
                object_type,
                full_name,
                columns,
            } => Route::get(
                SOURCE_IMPACT,
                by_type(object_type, AGG_TABLE_IMPACT, AGG_VIEW_IMPACT),
            )
            .params(&[("object_type", object_type), ("full_name", full_name)])
            .name(full_name.clone())
            .query(columns_query(columns)),
            Query::Stale { catalog } => Route::get(STALE_ENTITIES, AGG_STALE_ENTITIES)
                .params(&[("catalog", catalog)])
                .name(catalog.clone()),
            Query::Registrations { catalog } => Route::get(REGISTRATIONS, AGG_REGISTRATIONS)
                .params(&[("catalog", catalog)])
                .name(catalog.clone()),
            Query::Reconcile { catalog, dry_run } => Route {
                method: "POST",
                body: Some(serde_json::json!({ "dryRun": dry_run })),
                ..Route::get(RECONCILE, AGG_RECONCILE)
                    .params(&[("catalog", catalog)])
                    .name(catalog.clone())
            },
        }
    }

    /// The request for this question in namespace `ns` on `family`.
    pub fn request(&self, ns: &str, family: Family) -> Request {
        let route = self.route();
        let path = match family {
            Family::Direct => {
                let mut values: Vec<(&str, &str)> = vec![("ns", ns)];
                values.extend(route.params.iter().map(|(k, v)| (*k, v.as_str())));
                fill(route.direct, &values)
            }
            Family::Aggregated => {
                let mut values: Vec<(&str, &str)> = vec![("ns", ns)];
                if let Some(name) = &route.name {
                    values.push(("name", name));
                }
                fill(route.aggregated, &values)
            }
        };
        Request {
            method: route.method,
            path: path + &route.query,
            body: route.body,
        }
    }
}

/// A model's route: its three name parts on the direct port, one dotted name on the other.
fn model_route(
    direct: &'static str,
    aggregated: &'static str,
    catalog: &str,
    schema: &str,
    name: &str,
) -> Route {
    Route::get(direct, aggregated)
        .params(&[("catalog", catalog), ("schema", schema), ("name", name)])
        .name(dotted(&[catalog, schema, name]))
}

/// `?catalog=C&schema=S` with the given ones (percent-encoded), or nothing.
fn filter_query(catalog: &Option<String>, schema: &Option<String>) -> String {
    let parts: Vec<String> = [("catalog", catalog), ("schema", schema)]
        .into_iter()
        .filter_map(|(k, v)| {
            v.as_ref()
                .map(|v| format!("{k}={}", paths::encode_segment(v)))
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// `?columns=a,b` (each name percent-encoded), or nothing for the whole object.
fn columns_query(columns: &[String]) -> String {
    if columns.is_empty() {
        return String::new();
    }
    let encoded: Vec<String> = columns.iter().map(|c| paths::encode_segment(c)).collect();
    format!("?columns={}", encoded.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Questions of every kind, with names that need quoting and encoding.
    fn direct_queries() -> Vec<Query> {
        vec![
            Query::Lookup {
                object_type: "table".into(),
                full_name: "hr.`a.b`.t x".into(),
            },
            Query::Metrics {
                catalog: "c".into(),
                schema: "s".into(),
                details: true,
            },
            Query::Models {
                catalog: "c".into(),
                schema: "s".into(),
                name: None,
            },
            Query::Models {
                catalog: "c".into(),
                schema: "s".into(),
                name: Some("m".into()),
            },
            Query::ModelLineage {
                catalog: "c".into(),
                schema: "s".into(),
                name: "m".into(),
            },
            Query::SourceLineage {
                object_type: "view".into(),
                full_name: "c.s.v".into(),
            },
            Query::Stale {
                catalog: "c".into(),
            },
            Query::Registrations {
                catalog: "c".into(),
            },
            Query::Reconcile {
                catalog: "c".into(),
                dry_run: true,
            },
            Query::History {
                catalog: "c".into(),
                schema: "s".into(),
                name: "m x".into(),
            },
            Query::NamespaceModels {
                catalog: Some("c d".into()),
                schema: None,
            },
            Query::NamespaceModels {
                catalog: None,
                schema: None,
            },
            Query::Metric {
                id: "0190-a/b".into(),
            },
            Query::Sql {
                catalog: "c".into(),
                schema: "s".into(),
                name: "m".into(),
                question: "metric=a&limit=2".into(),
            },
        ]
    }

    #[test]
    fn every_query_fills_a_route_the_server_serves() {
        let queries = direct_queries();
        let want = [
            (
                "GET",
                "/api/metalakes/ns/objects/table/hr.%60a.b%60.t%20x/semantic-model-datasets",
            ),
            (
                "GET",
                "/api/metalakes/ns/catalogs/c/schemas/s/semantic-model-metrics?details=true&ids=true",
            ),
            (
                "GET",
                "/api/metalakes/ns/catalogs/c/schemas/s/semantic-models",
            ),
            (
                "GET",
                "/api/metalakes/ns/catalogs/c/schemas/s/semantic-models/m",
            ),
            (
                "GET",
                "/api/metalakes/ns/catalogs/c/schemas/s/semantic-models/m/lineage",
            ),
            ("GET", "/api/metalakes/ns/objects/view/c.s.v/lineage"),
            ("GET", "/api/metalakes/ns/catalogs/c/stale-entities"),
            ("GET", "/api/metalakes/ns/catalogs/c/registrations"),
            ("POST", "/api/metalakes/ns/catalogs/c/reconcile"),
            (
                "GET",
                "/api/metalakes/ns/catalogs/c/schemas/s/semantic-models/m%20x/versions",
            ),
            ("GET", "/api/metalakes/ns/semantic-models?catalog=c%20d"),
            ("GET", "/api/metalakes/ns/semantic-models"),
            ("GET", "/api/metalakes/ns/semantic-model-metrics/0190-a%2Fb"),
            (
                "GET",
                "/api/metalakes/ns/catalogs/c/schemas/s/semantic-models/m/sql?metric=a&limit=2",
            ),
        ];
        for (q, (method, path)) in queries.iter().zip(want) {
            let r = q.request("ns", Family::Direct);
            assert_eq!((r.method, r.path.as_str()), (method, path), "{q:?}");
        }
    }

    /// Questions with the aggregated request each must make.
    fn aggregated_cases() -> Vec<(Query, &'static str, String)> {
        let q = |catalog: &str, schema: &str, name: Option<&str>| Query::Models {
            catalog: catalog.into(),
            schema: schema.into(),
            name: name.map(str::to_string),
        };
        let agg = "/apis/query.semops.io/v1alpha1/namespaces/ns";
        vec![
            (
                Query::Lookup {
                    object_type: "view".into(),
                    full_name: "hr.`a.b`.v".into(),
                },
                "GET",
                format!("{agg}/views/hr.%60a.b%60.v/datasets"),
            ),
            (
                Query::Metrics {
                    catalog: "c".into(),
                    schema: "s".into(),
                    details: false,
                },
                "GET",
                format!("{agg}/schemas/c.s/metrics?details=false"),
            ),
            (
                q("c", "s", None),
                "GET",
                format!("{agg}/schemas/c.s/models"),
            ),
            (
                q("c", "a.b", Some("m")),
                "GET",
                format!("{agg}/models/c.%60a.b%60.m"),
            ),
            (
                Query::ModelLineage {
                    catalog: "c".into(),
                    schema: "s".into(),
                    name: "m`x".into(),
                },
                "GET",
                format!("{agg}/models/c.s.%60m%60%60x%60/lineage"),
            ),
            (
                Query::SourceLineage {
                    object_type: "table".into(),
                    full_name: "c.s.t".into(),
                },
                "GET",
                format!("{agg}/tables/c.s.t/lineage"),
            ),
            (
                Query::Stale {
                    catalog: "c".into(),
                },
                "GET",
                format!("{agg}/catalogs/c/stale-entities"),
            ),
            (
                Query::Registrations {
                    catalog: "c".into(),
                },
                "GET",
                format!("{agg}/catalogs/c/registrations"),
            ),
            (
                Query::NamespaceModels {
                    catalog: Some("c".into()),
                    schema: Some("a b".into()),
                },
                "GET",
                format!("{agg}/models?catalog=c&schema=a%20b"),
            ),
            (
                Query::Metric {
                    id: "0190-x".into(),
                },
                "GET",
                format!("{agg}/metrics/0190-x"),
            ),
            (
                Query::ModelRevision {
                    catalog: "c".into(),
                    schema: "s".into(),
                    name: "m".into(),
                    revision: 2,
                },
                "GET",
                format!("{agg}/models/c.s.m?revision=2"),
            ),
            (
                Query::Reconcile {
                    catalog: "c".into(),
                    dry_run: false,
                },
                "POST",
                format!("{agg}/catalogs/c/reconcile"),
            ),
            (
                Query::Impact {
                    object_type: "view".into(),
                    full_name: "c.s.v".into(),
                    columns: vec!["a b".into(), "c".into()],
                },
                "GET",
                format!("{agg}/views/c.s.v/impact?columns=a%20b,c"),
            ),
            (
                Query::Impact {
                    object_type: "table".into(),
                    full_name: "c.s.t".into(),
                    columns: vec![],
                },
                "GET",
                format!("{agg}/tables/c.s.t/impact"),
            ),
            (
                Query::History {
                    catalog: "c".into(),
                    schema: "a.b".into(),
                    name: "m".into(),
                },
                "GET",
                format!("{agg}/models/c.%60a.b%60.m/versions"),
            ),
            (
                Query::Sql {
                    catalog: "c".into(),
                    schema: "s".into(),
                    name: "m".into(),
                    question: "metric=a%2Cb".into(),
                },
                "GET",
                format!("{agg}/models/c.s.m/sql?metric=a%2Cb"),
            ),
        ]
    }

    #[test]
    fn every_query_has_its_aggregated_twin_with_dotted_quoted_names() {
        let cases = aggregated_cases();
        for (query, method, path) in cases {
            let r = query.request("ns", Family::Aggregated);
            assert_eq!((r.method, r.path), (method, path), "{query:?}");
        }
    }

    #[test]
    fn both_families_of_every_question_reach_the_same_handler() {
        let queries: Vec<Query> = direct_queries()
            .into_iter()
            .chain(aggregated_cases().into_iter().map(|(q, _, _)| q))
            .collect();
        for q in &queries {
            let r = q.route();
            assert!(
                paths::AGGREGATED.contains(&(r.aggregated, r.direct)),
                "{q:?}: {} is not the aggregated twin of {}",
                r.aggregated,
                r.direct
            );
            let (direct, aggregated) = (
                q.request("ns", Family::Direct),
                q.request("ns", Family::Aggregated),
            );
            assert_eq!(
                (direct.method, &direct.body),
                (aggregated.method, &aggregated.body),
                "{q:?}"
            );
        }
    }
}

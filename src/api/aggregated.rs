//! The aggregated API (`query.semops.io/v1alpha1`, docs/api.md): resource-shaped paths the
//! Kubernetes API server proxies here, each answered by the same handler as its Gravitino path,
//! plus the group's discovery documents and OpenAPI v3.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::ApiState;
use super::auth::Asker;
use super::error;
use super::extract::{Path, Query};
use super::paths::{self, GROUP, GROUP_VERSION, VERSION};
use super::{checks, compile, explain, impact, lineage, routes, versions};
use crate::ossie::source_ref::split_segments;
use axum::extract::RawQuery;

type S = State<Arc<ApiState>>;
type NsName = Path<(String, String)>;

/// `catalog.schema` (n = 2) or `catalog.schema.model` (n = 3), backtick quoting for dots.
fn dotted<const N: usize>(name: &str) -> Option<[String; N]> {
    split_segments(name).ok()?.try_into().ok()
}

pub fn routes(router: Router<Arc<ApiState>>) -> Router<Arc<ApiState>> {
    router
        .route(
            paths::AGG_TABLE_DATASETS,
            get(|s: S, Path((ns, n)): NsName, a: Asker| {
                routes::source_datasets(s, Path((ns, "table".into(), n)), a)
            }),
        )
        .route(
            paths::AGG_VIEW_DATASETS,
            get(|s: S, Path((ns, n)): NsName, a: Asker| {
                routes::source_datasets(s, Path((ns, "view".into(), n)), a)
            }),
        )
        .route(
            paths::AGG_TABLE_LINEAGE,
            get(|s: S, Path((ns, n)): NsName, a: Asker| {
                lineage::source_lineage(s, Path((ns, "table".into(), n)), a)
            }),
        )
        .route(
            paths::AGG_VIEW_LINEAGE,
            get(|s: S, Path((ns, n)): NsName, a: Asker| {
                lineage::source_lineage(s, Path((ns, "view".into(), n)), a)
            }),
        )
        .route(
            paths::AGG_TABLE_IMPACT,
            get(
                |s: S, Path((ns, n)): NsName, q: Query<impact::ImpactQuery>, a: Asker| {
                    impact::source_impact(s, Path((ns, "table".into(), n)), q, a)
                },
            ),
        )
        .route(
            paths::AGG_VIEW_IMPACT,
            get(
                |s: S, Path((ns, n)): NsName, q: Query<impact::ImpactQuery>, a: Asker| {
                    impact::source_impact(s, Path((ns, "view".into(), n)), q, a)
                },
            ),
        )
        .route(paths::AGG_SCHEMA_METRICS, get(schema_metrics))
        .route(paths::AGG_SCHEMA_MODELS, get(schema_models))
        .route(
            paths::AGG_NS_MODELS,
            get(
                |s: S, Path(ns): Path<String>, q: Query<routes::ModelFilter>, a: Asker| {
                    routes::list_namespace_models(s, Path(ns), q, a)
                },
            ),
        )
        .route(
            paths::AGG_METRIC,
            get(|s: S, p: NsName, a: Asker| explain::metric_by_id(s, p, a)),
        )
        .route(paths::AGG_MODEL, get(model))
        .route(paths::AGG_MODEL_LINEAGE, get(model_lineage))
        .route(paths::AGG_MODEL_VERSIONS, get(model_versions))
        .route(paths::AGG_MODEL_SQL, get(model_sql))
        .route(
            paths::AGG_STALE_SCHEMAS,
            get(|s: S, p: NsName, a: Asker| checks::stale_schemas(s, p, a)),
        )
        .route(
            paths::AGG_STALE_ENTITIES,
            get(|s: S, p: NsName, a: Asker| checks::stale_entities(s, p, a)),
        )
        .route(
            paths::AGG_REGISTRATIONS,
            get(|s: S, p: NsName, a: Asker| checks::registrations(s, p, a)),
        )
        .route(
            paths::AGG_RECONCILE,
            post(
                |s: S,
                 p: NsName,
                 a: Asker,
                 b: Result<Bytes, axum::extract::rejection::BytesRejection>| {
                    checks::reconcile(s, p, a, b)
                },
            ),
        )
        .route("/apis", get(|| async { discovery(group_list()) }))
        .route(
            &format!("/apis/{GROUP}"),
            get(|| async { discovery(group()) }),
        )
        .route(
            &format!("/apis/{GROUP_VERSION}"),
            get(|| async { discovery(resource_list()) }),
        )
        .route("/openapi/v3", get(|| async { discovery(openapi_index()) }))
        .route(
            &format!("/openapi/v3/apis/{GROUP_VERSION}"),
            get(|| async { discovery(openapi_document()) }),
        )
}

async fn schema_metrics(
    s: S,
    Path((ns, n)): NsName,
    q: Query<routes::Details>,
    a: Asker,
) -> Response {
    match dotted::<2>(&n) {
        Some([c, schema]) => routes::schema_metrics(s, Path((ns, c, schema)), q, a).await,
        None => error::BAD_DOTTED_NAME.into_response(),
    }
}

async fn schema_models(s: S, Path((ns, n)): NsName, a: Asker) -> Response {
    match dotted::<2>(&n) {
        Some([c, schema]) => routes::list_models(s, Path((ns, c, schema)), a).await,
        None => error::BAD_DOTTED_NAME.into_response(),
    }
}

async fn model(s: S, Path((ns, n)): NsName, q: Query<routes::RevisionQuery>, a: Asker) -> Response {
    match dotted::<3>(&n) {
        Some([c, schema, m]) => routes::get_model(s, Path((ns, c, schema, m)), q, a).await,
        None => error::BAD_DOTTED_NAME.into_response(),
    }
}

async fn model_lineage(s: S, Path((ns, n)): NsName, a: Asker) -> Response {
    match dotted::<3>(&n) {
        Some([c, schema, m]) => lineage::model_lineage(s, Path((ns, c, schema, m)), a).await,
        None => error::BAD_DOTTED_NAME.into_response(),
    }
}

async fn model_versions(s: S, Path((ns, n)): NsName, a: Asker) -> Response {
    match dotted::<3>(&n) {
        Some([c, schema, m]) => versions::model_versions(s, Path((ns, c, schema, m)), a).await,
        None => error::BAD_DOTTED_NAME.into_response(),
    }
}

async fn model_sql(s: S, Path((ns, n)): NsName, q: RawQuery, a: Asker) -> Response {
    match dotted::<3>(&n) {
        Some([c, schema, m]) => compile::model_sql(s, Path((ns, c, schema, m)), q, a).await,
        None => error::BAD_DOTTED_NAME.into_response(),
    }
}

fn discovery(body: Value) -> Response {
    ([("content-type", "application/json")], body.to_string()).into_response()
}

fn group() -> Value {
    let version = json!({"groupVersion": GROUP_VERSION, "version": VERSION});
    json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
        "versions": [version.clone()], "preferredVersion": version
    })
}

fn group_list() -> Value {
    let mut g = group();
    let g = g.as_object_mut().expect("an object");
    g.remove("kind");
    g.remove("apiVersion");
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [g]})
}

/// The group's resources as the API server authorizes them: every read of a named object is
/// `get` of a resource or subresource named after the path, a collection (`models`) is `list`,
/// the on-demand round is `create catalogs/reconcile`.
pub fn resource_list() -> Value {
    let mut verbs: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for (path, _) in paths::AGGREGATED {
        let tail = path
            .split("/namespaces/{ns}/")
            .nth(1)
            .expect("aggregated paths are namespaced");
        let mut parts = tail.split('/').filter(|s| *s != "{name}");
        let resource = parts.next().expect("a resource");
        let name = match parts.next() {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_string(),
        };
        let verb = if name == "catalogs/reconcile" {
            "create"
        } else if !path.contains("{name}") {
            "list"
        } else {
            "get"
        };
        let entry = verbs.entry(name).or_default();
        entry.push(verb);
        entry.sort_unstable();
    }
    // A subresource's parent is listed even where it has no path of its own (`tables` has only
    // `tables/datasets`, ...): the API server's discovery drops a subresource without its
    // parent, and then RBAC tooling (`kubectl auth can-i`) cannot resolve rules written for it.
    let parents: Vec<String> = verbs
        .keys()
        .filter_map(|name| name.split_once('/').map(|(parent, _)| parent.to_string()))
        .collect();
    for parent in parents {
        verbs.entry(parent).or_default();
    }
    let resources: Vec<Value> = verbs
        .into_iter()
        .map(|(name, verbs)| {
            let (kind, singular) = match name.split_once('/') {
                Some(_) => ("Status".to_string(), String::new()),
                None => (kind_of(&name), singular_of(&name)),
            };
            json!({"name": name, "singularName": singular, "namespaced": true, "kind": kind, "verbs": verbs})
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION, "resources": resources})
}

/// `tables` → `table`: what kubectl accepts besides the plural.
fn singular_of(resource: &str) -> String {
    resource.strip_suffix('s').unwrap_or(resource).to_string()
}

/// `tables` → `Table`: the kind a discovery entry names (nothing is stored under it).
fn kind_of(resource: &str) -> String {
    let singular = singular_of(resource);
    let mut chars = singular.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => singular,
    }
}

/// OpenAPI v3 of the group: each aggregated path documented as its Gravitino twin.
pub fn openapi_document() -> Value {
    let mut doc = super::openapi::document();
    let gravitino = doc["paths"].clone();
    let mut out = serde_json::Map::new();
    for (path, twin) in paths::AGGREGATED {
        let mut item = gravitino[*twin].clone();
        for op in item
            .as_object_mut()
            .into_iter()
            .flat_map(|o| o.values_mut())
        {
            let mut parameters: Vec<Value> = path
                .split('/')
                .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
                .map(|p| json!({"name": p, "in": "path", "required": true, "schema": {"type": "string"}}))
                .collect();
            parameters.extend(
                op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    // The by-parts lookups' catalog/schema/name are the aggregated `{name}`.
                    .filter(|p| {
                        p["in"] == "query"
                            && !(twin.contains("{object_type}")
                                && ["catalog", "schema", "name"]
                                    .contains(&p["name"].as_str().unwrap_or("")))
                    })
                    .cloned(),
            );
            op["parameters"] = Value::Array(parameters);
            op["security"] = json!([{"kubernetes": []}]);
        }
        out.insert(path.to_string(), item);
    }
    doc["paths"] = Value::Object(out);
    doc["info"]["description"] = json!(
        "semops read API through the Kubernetes API server (aggregated API); the API server authenticates and authorizes the request, semops then authorizes per model"
    );
    doc["components"]["securitySchemes"] = json!({"kubernetes": {"type": "http", "scheme": "bearer", "description": "whatever the kubeconfig uses; the API server proxies the user"}});
    doc
}

fn openapi_index() -> Value {
    use sha2::{Digest, Sha256};
    let hash = hex::encode(Sha256::digest(openapi_document().to_string().as_bytes()));
    json!({"paths": {format!("apis/{GROUP_VERSION}"): {"serverRelativeURL": format!("/openapi/v3/apis/{GROUP_VERSION}?hash={}", &hash[..32])}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_names_split_with_backtick_quoting() {
        assert_eq!(
            dotted::<2>("hr.public"),
            Some(["hr".into(), "public".into()])
        );
        assert_eq!(
            dotted::<3>("hr.`a.b`.m"),
            Some(["hr".into(), "a.b".into(), "m".into()])
        );
        for bad in ["hr", "hr.public.x.y", "hr..m", "", "`hr"] {
            assert_eq!(dotted::<3>(bad), None, "{bad}");
        }
        assert_eq!(dotted::<2>("hr.public.m"), None);
    }

    #[test]
    fn discovery_lists_each_resource_and_subresource_once_with_its_verb() {
        let list = resource_list();
        let names: Vec<(&str, String)> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let verbs: Vec<&str> = r["verbs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect();
                (r["name"].as_str().unwrap(), verbs.join(","))
            })
            .collect();
        assert_eq!(
            names,
            [
                ("catalogs", ""),
                ("catalogs/reconcile", "create"),
                ("catalogs/registrations", "get"),
                ("catalogs/stale-entities", "get"),
                ("catalogs/stale-schemas", "get"),
                ("metrics", "get"),
                ("models", "get,list"),
                ("models/lineage", "get"),
                ("models/sql", "get"),
                ("models/versions", "get"),
                ("schemas", ""),
                ("schemas/metrics", "get"),
                ("schemas/models", "get"),
                ("tables", ""),
                ("tables/datasets", "get"),
                ("tables/impact", "get"),
                ("tables/lineage", "get"),
                ("views", ""),
                ("views/datasets", "get"),
                ("views/impact", "get"),
                ("views/lineage", "get"),
            ]
            .map(|(n, v)| (n, v.to_string()))
        );
    }

    #[test]
    fn the_openapi_document_covers_every_aggregated_path_with_its_parameters() {
        let doc = openapi_document();
        for (path, _) in paths::AGGREGATED {
            let item = &doc["paths"][*path];
            assert!(item.is_object(), "{path} documented");
            let op = item.as_object().unwrap().values().next().unwrap();
            let names: Vec<&str> = op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["in"] == "path")
                .map(|p| p["name"].as_str().unwrap())
                .collect();
            let expected: &[&str] = if path.contains("{name}") {
                &["ns", "name"]
            } else {
                &["ns"]
            };
            assert_eq!(names, expected, "{path}");
        }
    }
}

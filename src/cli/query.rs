//! `semops lookup | metrics | models | lineage | stale`: the read API from a terminal (also
//! `kubectl semops …`). Talks to the API at `--server` (e.g. after `kubectl port-forward svc/semops
//! 8090`) with the bearer token of `--token`, or of the current kubeconfig user when it has one.
//! Every URL is filled in from the route constants the server itself routes by.

use std::process::ExitCode;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::api::paths::{self, fill};

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
    /// Graphviz DOT (lineage only).
    Dot,
    /// Mermaid flowchart (lineage only).
    Mermaid,
}

/// The root of a lineage graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LineageRoot {
    Model,
    Table,
    View,
}

/// Where and as whom the query verbs ask.
#[derive(clap::Args)]
pub struct ApiArgs {
    /// Namespace (the Gravitino metalake).
    #[arg(short = 'n', long, env = "SEMOPS_NAMESPACE", default_value = "default")]
    pub namespace: String,
    /// Base URL of the semops read API (e.g. after `kubectl port-forward svc/semops 8090`).
    #[arg(long, env = "SEMOPS_API", default_value = "http://127.0.0.1:8090")]
    pub server: String,
    /// Bearer token; defaults to the current kubeconfig user's token, if it has one.
    #[arg(long, env = "SEMOPS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Output,
}

/// One question to the read API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    Lookup {
        object_type: String,
        full_name: String,
    },
    Metrics {
        catalog: String,
        schema: String,
        details: bool,
    },
    Models {
        catalog: String,
        schema: String,
        name: Option<String>,
    },
    ModelLineage {
        catalog: String,
        schema: String,
        name: String,
    },
    SourceLineage {
        object_type: String,
        full_name: String,
    },
    Stale {
        catalog: String,
    },
    Reconcile {
        catalog: String,
        dry_run: bool,
    },
}

impl Query {
    /// `lineage model C S N` or `lineage table|view C.S.N`; `Err` is the usage line.
    pub fn lineage(root: LineageRoot, names: Vec<String>) -> Result<Query, &'static str> {
        match (
            root,
            <[String; 3]>::try_from(names.clone()),
            names.as_slice(),
        ) {
            (LineageRoot::Model, Ok([catalog, schema, name]), _) => Ok(Query::ModelLineage {
                catalog,
                schema,
                name,
            }),
            (LineageRoot::Table | LineageRoot::View, _, [full]) => Ok(Query::SourceLineage {
                object_type: if root == LineageRoot::Table {
                    "table"
                } else {
                    "view"
                }
                .into(),
                full_name: full.clone(),
            }),
            _ => Err(
                "use `semops lineage model CATALOG SCHEMA NAME` or `semops lineage table|view CATALOG.SCHEMA.NAME`",
            ),
        }
    }

    /// Method, path (with query string) and JSON body of the request in namespace `ns`.
    pub fn request(&self, ns: &str) -> (&'static str, String, Option<Value>) {
        let get = |path: String| ("GET", path, None);
        match self {
            Query::Lookup {
                object_type,
                full_name,
            } => get(fill(
                paths::SOURCE_DATASETS,
                &[
                    ("ns", ns),
                    ("object_type", object_type),
                    ("full_name", full_name),
                ],
            )),
            Query::Metrics {
                catalog,
                schema,
                details,
            } => get(format!(
                "{}?details={details}",
                fill(
                    paths::SCHEMA_METRICS,
                    &[("ns", ns), ("catalog", catalog), ("schema", schema)]
                )
            )),
            Query::Models {
                catalog,
                schema,
                name: None,
            } => get(fill(
                paths::MODELS,
                &[("ns", ns), ("catalog", catalog), ("schema", schema)],
            )),
            Query::Models {
                catalog,
                schema,
                name: Some(name),
            } => get(fill(
                paths::MODEL,
                &[
                    ("ns", ns),
                    ("catalog", catalog),
                    ("schema", schema),
                    ("name", name),
                ],
            )),
            Query::ModelLineage {
                catalog,
                schema,
                name,
            } => get(fill(
                paths::MODEL_LINEAGE,
                &[
                    ("ns", ns),
                    ("catalog", catalog),
                    ("schema", schema),
                    ("name", name),
                ],
            )),
            Query::SourceLineage {
                object_type,
                full_name,
            } => get(fill(
                paths::SOURCE_LINEAGE,
                &[
                    ("ns", ns),
                    ("object_type", object_type),
                    ("full_name", full_name),
                ],
            )),
            Query::Stale { catalog } => get(fill(
                paths::STALE_ENTITIES,
                &[("ns", ns), ("catalog", catalog)],
            )),
            Query::Reconcile { catalog, dry_run } => (
                "POST",
                fill(paths::RECONCILE, &[("ns", ns), ("catalog", catalog)]),
                Some(serde_json::json!({ "dryRun": dry_run })),
            ),
        }
    }
}

/// Runs one query and prints the answer; exit code 1 when the API answers with an error, 2 when
/// it cannot be asked.
pub fn main(api: &ApiArgs, query: Query) -> ExitCode {
    let (method, path, body) = query.request(&api.namespace);
    let token = api.token.clone().or_else(kubeconfig_token);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(request(
        &api.server,
        method,
        &path,
        token.as_deref(),
        body.as_ref(),
    )) {
        Ok((200, body)) => {
            print!("{}", render(&body, api.output));
            ExitCode::SUCCESS
        }
        Ok((status, body)) => {
            let message = body
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("unexpected answer");
            let type_ = body.get("type").and_then(|m| m.as_str()).unwrap_or("");
            eprintln!("error: {status} {type_}: {message}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// GETs `path` from the API; returns the status and the JSON body.
pub async fn get(server: &str, path: &str, token: Option<&str>) -> anyhow::Result<(u16, Value)> {
    request(server, "GET", path, token, None).await
}

/// Sends `method path` (with a JSON `body` when given); returns the status and the JSON body.
pub async fn request(
    server: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> anyhow::Result<(u16, Value)> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(format!("{}{path}", server.trim_end_matches('/')))
        .header("content-type", "application/json");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let resp = client
        .request(req.body(Full::new(Bytes::from(payload)))?)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot reach the semops API at {server}: {e}; is `kubectl port-forward` running?"
            )
        })?;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await?.to_bytes();
    let value = serde_json::from_slice(&body)
        .unwrap_or(Value::String(String::from_utf8_lossy(&body).into()));
    Ok((status, value))
}

/// The bearer token of the current kubeconfig user, when it authenticates with one.
pub fn kubeconfig_token() -> Option<String> {
    let kc = kube::config::Kubeconfig::read().ok()?;
    let context = kc.current_context.as_ref()?;
    let user = kc
        .contexts
        .iter()
        .find(|c| &c.name == context)?
        .context
        .as_ref()?
        .user
        .clone()?;
    let auth = kc
        .auth_infos
        .iter()
        .find(|a| a.name == user)?
        .auth_info
        .as_ref()?;
    auth.token
        .as_ref()
        .map(|t| secrecy::ExposeSecret::expose_secret(t).to_string())
}

/// The strings of a JSON array (the components of an identifier's namespace).
fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|s| s.as_str().unwrap_or_default().to_string())
        .collect()
}

/// Renders an API answer; identifiers become a table of their components.
pub fn render(value: &Value, output: Output) -> String {
    let graph = value.get("graphKind").is_some();
    match output {
        Output::Json => serde_json::to_string_pretty(value).unwrap_or_default(),
        Output::Yaml => serde_yaml::to_string(value).unwrap_or_default(),
        Output::Dot if graph => crate::lineage::render::dot(value),
        Output::Mermaid if graph => crate::lineage::render::mermaid(value),
        Output::Dot | Output::Mermaid => serde_yaml::to_string(value).unwrap_or_default(),
        Output::Table => {
            let rows: Vec<Vec<String>> = if let Some(ids) =
                value.get("identifiers").and_then(Value::as_array)
            {
                ids.iter()
                    .map(|i| {
                        let mut row = strings(&i["namespace"]);
                        row.push(i["name"].as_str().unwrap_or_default().to_string());
                        row
                    })
                    .collect()
            } else if let Some(ms) = value.get("metrics").and_then(Value::as_array) {
                ms.iter()
                    .map(|m| {
                        let mut row = strings(&m["namespace"]);
                        row.push(m["metric"]["name"].as_str().unwrap_or_default().to_string());
                        row.push(
                            m["metric"]["expression"]["dialects"][0]["expression"]
                                .as_str()
                                .unwrap_or_default()
                                .to_string(),
                        );
                        row
                    })
                    .collect()
            } else if let (true, Some(ns)) = (graph, value.get("nodes").and_then(Value::as_array)) {
                ns.iter()
                    .map(|n| {
                        let text = |k: &str| n[k].as_str().unwrap_or_default().to_string();
                        vec![text("kind"), text("name"), text("id")]
                    })
                    .collect()
            } else if let Some(es) = value.get("staleEntities").and_then(Value::as_array) {
                if value["catalogUnreachable"] == true {
                    return format!(
                        "catalog {} is unreachable: nothing is known this round and nothing was changed\n",
                        value["catalog"].as_str().unwrap_or_default()
                    );
                }
                es.iter()
                    .map(|e| {
                        let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                        vec![
                            text("kind"),
                            text("schema"),
                            text("name"),
                            text("state"),
                            text("renamedTo"),
                            text("detectedAt"),
                            e["removed"].as_bool().unwrap_or(false).to_string(),
                        ]
                    })
                    .collect()
            } else {
                return serde_yaml::to_string(value).unwrap_or_default();
            };
            if rows.is_empty() {
                return "No resources found.\n".into();
            }
            let header: Vec<&str> = match rows[0].len() {
                3 => vec!["KIND", "NAME", "ID"],
                4 => vec!["NAMESPACE", "CATALOG", "SCHEMA", "NAME"],
                5 => vec!["NAMESPACE", "CATALOG", "SCHEMA", "MODEL", "NAME"],
                6 => vec![
                    "NAMESPACE",
                    "CATALOG",
                    "SCHEMA",
                    "MODEL",
                    "METRIC",
                    "EXPRESSION",
                ],
                7 => vec![
                    "KIND", "SCHEMA", "NAME", "STATE", "NOW", "DETECTED", "REMOVED",
                ],
                _ => vec![],
            };
            let all: Vec<Vec<String>> =
                std::iter::once(header.iter().map(|s| s.to_string()).collect())
                    .chain(rows)
                    .collect();
            let widths: Vec<usize> = (0..all[0].len())
                .map(|c| {
                    all.iter()
                        .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            all.iter()
                .map(|r| {
                    r.iter()
                        .enumerate()
                        .map(|(i, s)| format!("{s:<w$}", w = widths[i]))
                        .collect::<Vec<_>>()
                        .join("   ")
                        .trim_end()
                        .to_string()
                        + "\n"
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_fills_a_route_the_server_serves() {
        let queries = [
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
            Query::lineage(LineageRoot::Model, vec!["c".into(), "s".into(), "m".into()]).unwrap(),
            Query::lineage(LineageRoot::View, vec!["c.s.v".into()]).unwrap(),
            Query::Stale {
                catalog: "c".into(),
            },
            Query::Reconcile {
                catalog: "c".into(),
                dry_run: true,
            },
        ];
        let want = [
            (
                "GET",
                "/api/metalakes/ns/objects/table/hr.%60a.b%60.t%20x/semantic-model-datasets",
            ),
            (
                "GET",
                "/api/metalakes/ns/catalogs/c/schemas/s/semantic-model-metrics?details=true",
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
            ("POST", "/api/metalakes/ns/catalogs/c/reconcile"),
        ];
        for (q, (method, path)) in queries.iter().zip(want) {
            let (m, p, _) = q.request("ns");
            assert_eq!((m, p.as_str()), (method, path), "{q:?}");
        }
        assert!(Query::lineage(LineageRoot::Model, vec!["c.s.m".into()]).is_err());
        assert!(Query::lineage(LineageRoot::Table, vec!["c".into(), "s".into()]).is_err());
    }

    #[test]
    fn identifiers_render_as_an_aligned_table() {
        let v: Value = serde_json::from_str(r#"{"code":0,"identifiers":[{"namespace":["ex","analytics","semantic","employee_analysis"],"name":"employee"}]}"#).unwrap();
        assert_eq!(
            render(&v, Output::Table),
            "NAMESPACE   CATALOG     SCHEMA     MODEL               NAME\nex          analytics   semantic   employee_analysis   employee\n"
        );
        assert_eq!(
            render(
                &serde_json::json!({"code": 0, "identifiers": []}),
                Output::Table
            ),
            "No resources found.\n"
        );
    }

    #[test]
    fn stale_reports_render_as_a_table_and_unreachable_says_so() {
        let v = serde_json::json!({"code": 0, "catalog": "hr", "catalogUnreachable": false, "staleSchemas": [],
            "staleEntities": [{"kind": "Table", "schema": "public", "name": "t", "state": "Removed", "detectedAt": "2026-11-30T10:00:00Z", "removed": true}]});
        assert_eq!(
            render(&v, Output::Table),
            "KIND    SCHEMA   NAME   STATE     NOW   DETECTED               REMOVED\nTable   public   t      Removed         2026-11-30T10:00:00Z   true\n"
        );
        let down =
            serde_json::json!({"catalog": "hr", "catalogUnreachable": true, "staleEntities": []});
        assert!(render(&down, Output::Table).contains("catalog hr is unreachable"));
    }
}

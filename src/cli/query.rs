//! `semops lookup | metrics | models | stale`: the read API from a terminal (also
//! `kubectl semops …`).
//! Talks to the API at `--server` (e.g. after `kubectl port-forward svc/semops 8090`) with the
//! bearer token of `--token`, or of the current kubeconfig user when it has one.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

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

/// Percent-encodes one path segment.
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
    fn segments_are_percent_encoded() {
        assert_eq!(encode_segment("hr.`a.b`.t x"), "hr.%60a.b%60.t%20x");
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

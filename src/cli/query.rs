//! `semops lookup | metrics | models | history | lineage | stale`: the read API from a terminal (also
//! `kubectl semops …`). By default through the Kubernetes API server (the aggregated API) with
//! the kubeconfig's user, whatever it authenticates with; with `--server`, the direct port and
//! the bearer token of `--token` (or the kubeconfig user's). The client room asks; this file
//! reads the flags and renders the answers.

use std::process::ExitCode;

use serde_json::Value;

use crate::client::{Connection, Query, ReadApi};

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
    /// Markdown for a pull-request comment (diff only).
    Markdown,
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
    /// Namespace (the Gravitino metalake); defaults to the kubeconfig context's namespace.
    #[arg(short = 'n', long, env = "SEMOPS_NAMESPACE")]
    pub namespace: Option<String>,
    /// The direct port instead of the Kubernetes API server, e.g. `https://semops.semops-system.svc:8090`
    /// (or `http://127.0.0.1:8090` for a local `semops run`). Without it, queries go through the
    /// API server (aggregated API `query.semops.io`) as the kubeconfig's user, whatever it uses.
    #[arg(long, env = "SEMOPS_API")]
    pub server: Option<String>,
    /// CA certificate (PEM) that verifies an https `--server`; the chart's is in the
    /// `<release>-api-tls` Secret (`ca.crt`).
    #[arg(long, requires = "server")]
    pub ca: Option<std::path::PathBuf>,
    /// Bearer token for `--server` (`kubectl create token NAME --audience semops`); defaults to
    /// the kubeconfig user's token, if it has one. Never sent over plain HTTP except to loopback.
    #[arg(long, env = "SEMOPS_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Path of the kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// kubeconfig context to use (default: the current one).
    #[arg(long)]
    pub context: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    pub output: Output,
}

impl ApiArgs {
    /// Where and as whom the flags say to ask.
    pub fn connection(&self) -> Connection {
        Connection {
            namespace: self.namespace.clone(),
            server: self.server.clone(),
            ca: self.ca.clone(),
            token: self.token.clone(),
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
        }
    }
}

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

/// Exit code of `semops impact` when something would break (1 and 2 stay errors).
pub const BREAKS: u8 = 3;

/// Runs one query and prints the answer; exit code 1 when the API answers with an error, 2 when
/// it cannot be asked, 3 when an impact question finds something that would break.
pub fn main(api: &ApiArgs, query: Query) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(ask(api, &query)) {
        Ok((200, body)) => {
            print!("{}", render(&body, api.output));
            if body["breaks"] == true {
                ExitCode::from(BREAKS)
            } else {
                ExitCode::SUCCESS
            }
        }
        Ok((status, body)) => {
            let message = body
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("unexpected answer");
            let type_ = body
                .get("type")
                .or_else(|| body.get("reason"))
                .and_then(|m| m.as_str())
                .unwrap_or("");
            eprintln!("error: {status} {type_}: {message}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Asks the API: through the Kubernetes API server by default, the direct port with `--server`.
async fn ask(api: &ApiArgs, query: &Query) -> anyhow::Result<(u16, Value)> {
    let read_api = ReadApi::connect(&api.connection()).await?;
    let ns = read_api.default_namespace.clone();
    read_api.ask(&ns, query).await
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
/// An impact answer as a table: one line per model, dataset and column.
fn render_impacts(value: &Value) -> String {
    let impacts = value["impacts"].as_array().cloned().unwrap_or_default();
    let source = value["source"].as_str().unwrap_or_default();
    if impacts.is_empty() {
        let columns = strings(&value["columns"]);
        return if columns.is_empty() {
            format!("nothing uses {source} in the models you may see\n")
        } else {
            format!(
                "nothing uses {} of {source} in the models you may see\n",
                columns.join(", ")
            )
        };
    }
    let rows = impacts.iter().map(|i| {
        let ns = strings(&i["namespace"]);
        let text = |k: &str, default: &str| i[k].as_str().unwrap_or(default).to_string();
        vec![
            format!(
                "{}.{}",
                ns.iter().skip(1).cloned().collect::<Vec<_>>().join("."),
                text("model", "")
            ),
            text("dataset", ""),
            text("column", "*"),
            strings(&i["usedBy"]).join(", "),
        ]
    });
    let header = ["MODEL", "DATASET", "COLUMN", "USED BY"].map(String::from);
    aligned(std::iter::once(header.to_vec()).chain(rows))
}

/// One row per kept revision: `+name` for each id it added, `-name` for each it retired
/// (`?` when the revision before it is no longer kept).
fn render_versions(value: &Value) -> String {
    let versions = value["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        return "No revisions kept.\n".into();
    }
    let names = |v: &Value, sign: char| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|m| format!("{sign}{}", m["name"].as_str().unwrap_or_default()))
            .collect()
    };
    let rows = versions.iter().map(|v| {
        let mut changes = match v.get("metricsAdded") {
            Some(added) => names(added, '+'),
            None => vec!["?".into()],
        };
        changes.extend(names(&v["metricsRetired"], '-'));
        changes.extend(names(&v["metricsRenamed"], '~'));
        let hash = v["definitionHash"].as_str().unwrap_or_default();
        vec![
            v["revision"].to_string(),
            v["created"].as_str().unwrap_or_default().to_string(),
            hash.chars().take(12).collect(),
            if v["current"] == true { "*" } else { "" }.to_string(),
            changes.join(" "),
        ]
    });
    let header = ["REVISION", "CREATED", "DEFINITION", "CURRENT", "METRIC IDS"].map(String::from);
    aligned(std::iter::once(header.to_vec()).chain(rows))
}

/// Rows as left-aligned columns three spaces apart (the first row is the header).
pub(super) fn aligned(rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let all: Vec<Vec<String>> = rows.into_iter().collect();
    let widths: Vec<usize> = (0..all.first().map_or(0, Vec::len))
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

pub fn render(value: &Value, output: Output) -> String {
    let graph = value.get("graphKind").is_some();
    match output {
        Output::Json => serde_json::to_string_pretty(value).unwrap_or_default(),
        Output::Yaml => serde_saphyr::to_string(value).unwrap_or_default(),
        Output::Dot if graph => crate::lineage::render::dot(value),
        Output::Mermaid if graph => crate::lineage::render::mermaid(value),
        Output::Dot | Output::Mermaid | Output::Markdown => {
            serde_saphyr::to_string(value).unwrap_or_default()
        }
        Output::Table if value.get("impacts").is_some() => render_impacts(value),
        Output::Table if value.get("versions").is_some() => render_versions(value),
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
                return serde_saphyr::to_string(value).unwrap_or_default();
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
            aligned(std::iter::once(header.iter().map(|s| s.to_string()).collect()).chain(rows))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lineage_takes_three_parts_for_a_model_and_one_dotted_name_for_a_source() {
        assert_eq!(
            lineage(LineageRoot::Model, vec!["c".into(), "s".into(), "m".into()]),
            Ok(Query::ModelLineage {
                catalog: "c".into(),
                schema: "s".into(),
                name: "m".into()
            })
        );
        assert_eq!(
            lineage(LineageRoot::View, vec!["c.s.v".into()]),
            Ok(Query::SourceLineage {
                object_type: "view".into(),
                full_name: "c.s.v".into()
            })
        );
        assert!(lineage(LineageRoot::Model, vec!["c.s.m".into()]).is_err());
        assert!(lineage(LineageRoot::Table, vec!["c".into(), "s".into()]).is_err());
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
    fn impacts_render_one_line_per_model_dataset_and_column() {
        let v = serde_json::json!({"code": 0, "source": "wh.app.orders", "columns": ["gross"], "breaks": true,
            "impacts": [{"namespace": ["ns", "home", "semantic"], "model": "sales", "revision": 1, "dataset": "orders",
                "column": "gross", "usedBy": ["field amount", "metric revenue"], "metrics": []}]});
        assert_eq!(
            render(&v, Output::Table),
            "MODEL                 DATASET   COLUMN   USED BY\nhome.semantic.sales   orders    gross    field amount, metric revenue\n"
        );
        let none =
            serde_json::json!({"source": "wh.app.orders", "columns": ["a", "b"], "impacts": []});
        assert_eq!(
            render(&none, Output::Table),
            "nothing uses a, b of wh.app.orders in the models you may see\n"
        );
    }

    #[test]
    fn a_history_renders_one_row_per_revision_with_the_ids_it_added_and_retired() {
        let v = serde_json::json!({"code": 0, "versions": [
            {"revision": 2, "created": "2026-12-02T10:00:00Z", "definitionHash": "0123456789abcdef", "current": false,
             "metricsRetired": [{"name": "headcount", "id": "a"}]},
            {"revision": 3, "created": "2026-12-02T11:00:00Z", "definitionHash": "fedcba9876543210", "current": true,
             "metricsAdded": [{"name": "managers", "id": "c"}], "metricsRetired": [],
             "metricsRenamed": [{"name": "staff", "id": "b", "formerNames": ["people"]}]}
        ]});
        assert_eq!(
            render(&v, Output::Table),
            "REVISION   CREATED                DEFINITION     CURRENT   METRIC IDS\n\
             2          2026-12-02T10:00:00Z   0123456789ab             ? -headcount\n\
             3          2026-12-02T11:00:00Z   fedcba987654   *         +managers ~staff\n"
        );
        assert_eq!(
            render(
                &serde_json::json!({"code": 0, "versions": []}),
                Output::Table
            ),
            "No revisions kept.\n"
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

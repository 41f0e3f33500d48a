//! Change impact (docs/impact.md): what in the accepted semantic models would break if some
//! columns of a table or view (or the whole object) went away, before the migration runs.
//! The source is resolved live like source lookup; only models the caller may get are answered.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use kube::ResourceExt;
use serde::{Deserialize, Serialize};

use super::ApiState;
use super::auth::Asker;
use super::error::{self, ApiError};
use super::extract::{Path, Query};
use super::routes::{accepted_definition, bound_datasets, ok, resolve_source, visible_to};
use crate::crd::SemanticModel;
use crate::crd::semantic_model::Definition;
use crate::model::columns::{self, Usage};
use crate::ossie::SourceRef;

/// Most columns one question may name.
pub const MAX_COLUMNS: usize = 256;

#[derive(Deserialize)]
pub struct ImpactQuery {
    /// Comma-separated column names; absent: the whole object.
    columns: Option<String>,
}

/// The answer: one entry per (model, dataset, column) that something uses.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImpactReport {
    pub code: i32,
    /// `catalog.schema.name` as asked.
    pub source: String,
    /// The columns asked about; empty when the question is the whole object.
    pub columns: Vec<String>,
    /// Whether anything would break.
    pub breaks: bool,
    /// Sorted by model (catalog, schema, name), dataset, then column.
    pub impacts: Vec<Impact>,
}

#[derive(Serialize, schemars::JsonSchema, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Impact {
    /// Namespace, model catalog, model schema.
    pub namespace: Vec<String>,
    pub model: String,
    /// The accepted revision the answer comes from.
    pub revision: i64,
    pub dataset: String,
    /// The column; absent when the whole object goes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    /// `primaryKey`, `uniqueKeys[N]`, `relationship R`, `field F`, `metric M`.
    pub used_by: Vec<String>,
    /// The metrics that break, with their stable ids.
    pub metrics: Vec<MetricRef>,
}

#[derive(Serialize, schemars::JsonSchema, Debug, PartialEq)]
pub struct MetricRef {
    pub name: String,
    pub id: String,
}

pub async fn source_impact(
    State(state): State<Arc<ApiState>>,
    Path((ns, object_type, full_name)): Path<(String, String, String)>,
    Query(q): Query<ImpactQuery>,
    headers: Asker,
) -> Response {
    let Ok(source) = SourceRef::parse(&full_name) else {
        return error::BAD_NAME.into_response();
    };
    let Some(asked) = parse_columns(q.columns.as_deref()) else {
        return error::BAD_QUERY.into_response();
    };
    impact(&state, &headers, &ns, &object_type, &source, asked)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// `a,b` → the distinct names in order; `None` when empty names or too many are given.
pub fn parse_columns(raw: Option<&str>) -> Option<Vec<String>> {
    let Some(raw) = raw else {
        return Some(vec![]);
    };
    let mut out: Vec<String> = Vec::new();
    for c in raw.split(',').map(str::trim) {
        if c.is_empty() {
            return None;
        }
        if !out.iter().any(|o| o == c) {
            out.push(c.to_string());
        }
    }
    (out.len() <= MAX_COLUMNS).then_some(out)
}

async fn impact(
    state: &ApiState,
    headers: &Asker,
    ns: &str,
    object_type: &str,
    source: &SourceRef,
    asked: Vec<String>,
) -> Result<Response, ApiError> {
    let (who, key) = resolve_source(state, headers, ns, object_type, source).await?;
    let by_model = bound_datasets(&state.stores.models, &state.index, &key);
    let models: Vec<Arc<SemanticModel>> = by_model.values().map(|(m, _)| m.clone()).collect();
    let visible = visible_to(state, &who, ns, models).await;
    let mut impacts = Vec::new();
    for m in visible {
        let Some((_, datasets)) = by_model.get(&m.name_any()) else {
            continue;
        };
        let def = accepted_definition(state, &m).await?;
        impacts.extend(model_impacts(ns, &m, &def, datasets, &asked));
    }
    impacts.sort_by(|a, b| {
        (&a.namespace, &a.model, &a.dataset, &a.column).cmp(&(
            &b.namespace,
            &b.model,
            &b.dataset,
            &b.column,
        ))
    });
    Ok(ok(ImpactReport {
        code: 0,
        source: source.to_string(),
        columns: asked,
        breaks: !impacts.is_empty(),
        impacts,
    }))
}

/// The impacts on one model's `datasets` (those bound to the source) of losing `asked` columns
/// (or, when empty, the whole source). Pure.
pub fn model_impacts(
    ns: &str,
    m: &SemanticModel,
    def: &Definition,
    datasets: &[String],
    asked: &[String],
) -> Vec<Impact> {
    let Some(status) = m.status.as_ref() else {
        return vec![]; // bound datasets come from status: a model without one has none
    };
    let mut out = Vec::new();
    for dataset in datasets {
        // The columns known to exist: the recorded dependencies, and the ones asked about.
        let mut known: Vec<String> = status
            .source_associations
            .iter()
            .filter(|a| a.dataset == *dataset)
            .flat_map(|a| a.columns.iter().map(|c| c.name.to_string()))
            .collect();
        known.extend(asked.iter().cloned());
        let entries: Vec<(Option<String>, Usage)> = if asked.is_empty() {
            vec![(None, columns::dataset_usage(def, dataset, &known))]
        } else {
            asked
                .iter()
                .map(|c| (Some(c.clone()), columns::usage(def, dataset, c, &known)))
                .collect()
        };
        for (column, usage) in entries {
            if usage.is_empty() && column.is_some() {
                continue;
            }
            let metrics = usage
                .metrics
                .iter()
                .map(|name| MetricRef {
                    name: name.clone(),
                    id: status
                        .metrics
                        .iter()
                        .find(|x| x.name == *name)
                        .map(|x| x.id.to_string())
                        .unwrap_or_default(),
                })
                .collect();
            let mut used_by = usage.describe();
            if column.is_none() {
                used_by.insert(0, "dataset".into());
            }
            out.push(Impact {
                namespace: vec![
                    ns.to_string(),
                    m.spec.catalog.to_string(),
                    m.spec.schema.to_string(),
                ],
                model: m.model_name().to_string(),
                revision: status.revision.unwrap_or(0),
                dataset: dataset.clone(),
                column,
                used_by,
                metrics,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn columns_parse_as_a_distinct_list_and_empty_names_are_refused() {
        let table: &[(Option<&str>, Option<Vec<&str>>)] = &[
            (None, Some(vec![])),
            (Some("a"), Some(vec!["a"])),
            (Some("a, b,a"), Some(vec!["a", "b"])),
            (Some(""), None),
            (Some("a,,b"), None),
        ];
        for (raw, want) in table {
            let want = want
                .as_ref()
                .map(|v| v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(parse_columns(*raw), want, "{raw:?}");
        }
        let many = (0..=MAX_COLUMNS)
            .map(|i| format!("c{i}"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(parse_columns(Some(&many)), None);
    }

    fn model() -> (SemanticModel, Definition) {
        let m: SemanticModel = serde_json::from_value(json!({
            "apiVersion": "semops.io/v1alpha1", "kind": "SemanticModel",
            "metadata": {"name": "sales", "namespace": "ns"},
            "spec": {"catalog": "home", "schema": "semantic", "definition": {
                "datasets": [{"name": "orders", "source": "wh.app.orders", "primaryKey": ["id"],
                    "fields": [{"name": "amount", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "gross"}]}}]}],
                "metrics": [
                    {"name": "revenue", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "SUM(orders.amount)"}]}},
                    {"name": "orders", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "COUNT(*)"}]}}
                ]}},
            "status": {"revision": 2, "metrics": [{"name": "revenue", "id": "0190-rev"}, {"name": "orders", "id": "0190-ord"}],
                "sourceAssociations": [{"dataset": "orders", "source": {"catalog": "wh", "schema": "app", "name": "orders"},
                    "type": "TABLE", "id": "pg:1", "revision": 1, "columns": [{"name": "gross", "type": "numeric"}, {"name": "id", "type": "integer"}]}]}
        }))
        .unwrap();
        let def = m.spec.definition.clone();
        (m, def)
    }

    #[test]
    fn impact_names_what_breaks_per_column_with_metric_ids() {
        let (m, def) = model();
        let ds = vec!["orders".to_string()];
        let got = model_impacts(
            "ns",
            &m,
            &def,
            &ds,
            &["gross".into(), "note".into(), "id".into()],
        );
        type Line<'a> = (Option<&'a str>, Vec<&'a str>, Vec<(&'a str, &'a str)>);
        let summary: Vec<Line> = got
            .iter()
            .map(|i| {
                (
                    i.column.as_deref(),
                    i.used_by.iter().map(String::as_str).collect(),
                    i.metrics
                        .iter()
                        .map(|x| (x.name.as_str(), x.id.as_str()))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    Some("gross"),
                    vec!["field amount", "metric revenue"],
                    vec![("revenue", "0190-rev")]
                ),
                (Some("id"), vec!["primaryKey"], vec![]),
            ],
            "an unused column (note) breaks nothing"
        );
        assert!(got.iter().all(|i| i.revision == 2 && i.model == "sales"));
        // The whole object: the dataset and everything of it.
        let whole = model_impacts("ns", &m, &def, &ds, &[]);
        assert_eq!(whole.len(), 1);
        assert_eq!(
            whole[0].used_by,
            vec!["dataset", "primaryKey", "field amount", "metric revenue"]
        );
    }
}

//! One metric by its id (`GET /api/metalakes/{ns}/semantic-model-metrics/{id}`): the id is
//! stable across every revision and never reused, so it is the handle an agent or a dashboard
//! keeps. The answer names the model, the metric's name under that id, whether it is live or
//! retired (a rename retires the old id and mints a new one in the same revision), its
//! definition, and its definition in each kept revision that committed the id.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use kube::ResourceExt;
use serde::Serialize;

use super::ApiState;
use super::auth::Asker;
use super::error::{self, ApiError};
use super::extract::Path;
use super::revisions::{Kept, kept_revisions};
use super::routes::{Identifier, accepted_definition, caller, ok, require, visible_to};
use crate::crd::SemanticModel;
use crate::crd::semantic_model::{Definition, Metric, MetricIdentity, SemanticModelStatus};
use crate::index::is_visible;
use crate::model::canonical::value_hash;

/// Whether the id names a metric of the accepted definition now.
#[derive(Serialize, schemars::JsonSchema, Debug, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "camelCase")]
pub enum MetricState {
    /// In the accepted definition.
    Current,
    /// Its name left the definition (removed or renamed): the id is never reused.
    Retired,
}

/// The metric in one kept revision that committed its id.
#[derive(Serialize, schemars::JsonSchema, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MetricRevision {
    pub revision: i64,
    /// When the revision was accepted (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// Canonical hash of the metric's definition in this revision.
    pub metric_hash: String,
    /// Whether the definition differs from the previous entry (true for the first).
    pub changed: bool,
    pub metric: Metric,
}

/// What an id is, from its model's status, accepted definition and kept revisions.
#[derive(Serialize, schemars::JsonSchema, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MetricExplanation {
    pub id: String,
    /// The metric's name under this id (the last one, for a retired id).
    pub name: String,
    /// The names this id had before, oldest first (renames declared with `renamedFrom`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub former_names: Vec<smol_str::SmolStr>,
    pub state: MetricState,
    /// The model: namespace `[metalake, catalog, schema]` and name.
    pub model: Identifier,
    /// The model's accepted revision.
    pub model_revision: i64,
    /// The revision whose definition no longer had the name (retired ids only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retired_in_revision: Option<i64>,
    /// Ids minted by the revision that retired this one: a rename's new id is among them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub minted_with_retirement: Vec<MetricIdentity>,
    /// The definition (expression per dialect): the accepted one, or for a retired id the last
    /// kept revision's; absent when no kept revision has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
    /// Kept revisions that committed the id, oldest first (revisions from before ids were
    /// recorded are not listed: they cannot say which metric had the id).
    pub revisions: Vec<MetricRevision>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct MetricBody {
    code: i32,
    metric: MetricExplanation,
}

/// Whether `id` is (or was) a metric of the model with this status.
pub fn has_id(status: &SemanticModelStatus, id: &str) -> bool {
    status.metrics.iter().any(|m| m.id == id) || status.retired_metrics.iter().any(|r| r.id == id)
}

fn metric_named<'a>(def: &'a Definition, name: &str) -> Option<&'a Metric> {
    def.metrics.iter().flatten().find(|m| m.name == name)
}

/// The explanation of `id` for a model whose status has it (`None` otherwise). `current` is the
/// accepted definition, `kept` the kept committed revisions oldest first.
pub fn explain(
    id: &str,
    model: Identifier,
    status: &SemanticModelStatus,
    current: &Definition,
    kept: &[Kept],
) -> Option<MetricExplanation> {
    let model_revision = status.revision.unwrap_or(0);
    let live = status.metrics.iter().find(|m| m.id == id);
    let retired = status.retired_metrics.iter().find(|r| r.id == id);
    let name = live
        .map(|m| m.name.to_string())
        .or_else(|| retired.map(|r| r.name.to_string()))?;
    // The ids a kept revision committed; the current revision's are status's when unrecorded.
    let ids_of = |k: &Kept| -> Option<Vec<MetricIdentity>> {
        k.metrics
            .clone()
            .or_else(|| (k.revision == model_revision).then(|| status.metrics.clone()))
    };
    let mut revisions: Vec<MetricRevision> = Vec::new();
    for k in kept {
        let Some(under_id) = ids_of(k).and_then(|ids| ids.into_iter().find(|m| m.id == id)) else {
            continue;
        };
        let Some(metric) = metric_named(&k.definition, &under_id.name) else {
            continue;
        };
        let metric_hash = value_hash(metric);
        let changed = revisions
            .last()
            .is_none_or(|p| p.metric_hash != metric_hash);
        revisions.push(MetricRevision {
            revision: k.revision,
            created: k.created.clone(),
            metric_hash,
            changed,
            metric: metric.clone(),
        });
    }
    let minted_with_retirement = match retired {
        Some(r) => {
            let before = kept
                .iter()
                .find(|k| k.revision == r.retired_in_revision - 1)
                .and_then(ids_of);
            let after = kept
                .iter()
                .find(|k| k.revision == r.retired_in_revision)
                .and_then(ids_of);
            match (before, after) {
                (Some(before), Some(after)) => after
                    .into_iter()
                    .filter(|m| !before.iter().any(|b| b.id == m.id))
                    .collect(),
                _ => vec![],
            }
        }
        None => vec![],
    };
    let metric = match live {
        Some(m) => metric_named(current, &m.name).cloned(),
        None => revisions.last().map(|r| r.metric.clone()),
    };
    let former_names = live.map(|m| m.former_names.clone()).unwrap_or_default();
    Some(MetricExplanation {
        id: id.to_string(),
        name,
        former_names,
        state: if live.is_some() {
            MetricState::Current
        } else {
            MetricState::Retired
        },
        model,
        model_revision,
        retired_in_revision: if live.is_some() {
            None
        } else {
            retired.map(|r| r.retired_in_revision)
        },
        minted_with_retirement,
        metric,
        revisions,
    })
}

/// `GET .../semantic-model-metrics/{id}`: 404 `NO_SUCH_METRIC` unless a model the caller may
/// get (and whose catalog it may get) has or had the id.
pub async fn metric_by_id(
    State(state): State<Arc<ApiState>>,
    Path((ns, id)): Path<(String, String)>,
    headers: Asker,
) -> Response {
    let run = async {
        let who = caller(&state, &headers).await?;
        // Ids are UUIDv7 and never reused, so at most one model has it (a deleted namesake's
        // model is gone from the store with its ids).
        let found: Vec<Arc<SemanticModel>> = state
            .stores
            .models
            .state()
            .into_iter()
            .filter(|m| m.namespace().as_deref() == Some(ns.as_str()) && is_visible(m))
            .filter(|m| m.status.as_ref().is_some_and(|s| has_id(s, &id)))
            .take(1)
            .collect();
        let m = visible_to(&state, &who, &ns, found)
            .await
            .into_iter()
            .next()
            .ok_or(error::NO_SUCH_METRIC)?;
        require(&state, &who, &ns, "catalogs", &m.spec.catalog)
            .await
            .map_err(|_| error::NO_SUCH_METRIC)?;
        let status = m.status.clone().unwrap_or_default();
        let current = accepted_definition(&state, &m).await?;
        let kept = kept_revisions(&state, &m).await?;
        let model = Identifier {
            namespace: vec![
                ns.clone(),
                m.spec.catalog.to_string(),
                m.spec.schema.to_string(),
            ],
            name: m.model_name().to_string(),
        };
        let metric = explain(&id, model, &status, &current, &kept).ok_or(error::NO_SUCH_METRIC)?;
        Ok::<_, ApiError>(ok(MetricBody { code: 0, metric }))
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::semantic_model::RetiredMetric;
    use std::collections::BTreeMap;

    fn metric(name: &str, sql: &str) -> Metric {
        serde_json::from_value(serde_json::json!({
            "name": name,
            "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": sql}]}
        }))
        .expect("a metric")
    }

    fn def(metrics: Vec<Metric>) -> Definition {
        Definition {
            metrics: Some(metrics),
            ..Definition::default()
        }
    }

    fn ident(name: &str, id: &str) -> MetricIdentity {
        MetricIdentity::new(name, id)
    }

    fn kept(revision: i64, metrics: Vec<Metric>, ids: Option<Vec<MetricIdentity>>) -> Kept {
        Kept {
            revision,
            created: Some(format!("2026-01-0{revision}T00:00:00Z")),
            name: "orders".into(),
            comment: None,
            properties: BTreeMap::new(),
            definition: def(metrics),
            metrics: ids,
        }
    }

    fn model() -> Identifier {
        Identifier {
            namespace: vec!["ns".into(), "c".into(), "s".into()],
            name: "orders".into(),
        }
    }

    /// r1 total=sum(a) [id A]; r2 total=sum(b) [A]; r3 renames total -> revenue [B], A retired.
    fn renamed() -> (SemanticModelStatus, Definition, Vec<Kept>) {
        let r3 = vec![metric("revenue", "sum(b)")];
        let kept = vec![
            kept(
                1,
                vec![metric("total", "sum(a)")],
                Some(vec![ident("total", "A")]),
            ),
            kept(
                2,
                vec![metric("total", "sum(b)")],
                Some(vec![ident("total", "A")]),
            ),
            kept(3, r3.clone(), Some(vec![ident("revenue", "B")])),
        ];
        let status = SemanticModelStatus {
            revision: Some(3),
            metrics: vec![ident("revenue", "B")],
            retired_metrics: vec![RetiredMetric {
                name: "total".into(),
                id: "A".into(),
                retired_in_revision: 3,
            }],
            ..SemanticModelStatus::default()
        };
        (status, def(r3), kept)
    }

    #[test]
    fn a_renamed_metric_is_found_by_its_old_id_with_its_history_and_successor() {
        let (status, current, kept) = renamed();
        let e = explain("A", model(), &status, &current, &kept).expect("found");
        assert_eq!(e.name, "total");
        assert_eq!(e.state, MetricState::Retired);
        assert_eq!(e.retired_in_revision, Some(3));
        assert_eq!(e.minted_with_retirement, vec![ident("revenue", "B")]);
        let revs: Vec<(i64, bool)> = e
            .revisions
            .iter()
            .map(|r| (r.revision, r.changed))
            .collect();
        assert_eq!(revs, vec![(1, true), (2, true)]);
        assert_eq!(
            e.metric,
            Some(metric("total", "sum(b)")),
            "the last kept definition"
        );
    }

    #[test]
    fn a_live_id_answers_the_accepted_definition_and_unchanged_revisions_say_so() {
        let (mut status, current, mut kept) = renamed();
        kept.push(kept_rev4());
        status.revision = Some(4);
        let e = explain("B", model(), &status, &current, &kept).expect("found");
        assert_eq!(e.state, MetricState::Current);
        assert_eq!(e.retired_in_revision, None);
        assert!(e.minted_with_retirement.is_empty());
        assert_eq!(e.metric, Some(metric("revenue", "sum(b)")));
        let revs: Vec<(i64, bool)> = e
            .revisions
            .iter()
            .map(|r| (r.revision, r.changed))
            .collect();
        assert_eq!(revs, vec![(3, true), (4, false)]);
    }

    fn kept_rev4() -> Kept {
        // Recorded before ids were written: the current revision's ids come from status.
        kept(4, vec![metric("revenue", "sum(b)")], None)
    }

    #[test]
    fn unknown_ids_and_unrecorded_old_revisions_say_nothing() {
        let (status, current, mut kept) = renamed();
        assert_eq!(explain("Z", model(), &status, &current, &kept), None);
        // Revisions 1-2 pruned: the retired id is still explained from status, with no
        // definition and no successor (nothing kept can say).
        kept.drain(..2);
        let e = explain("A", model(), &status, &current, &kept).expect("found");
        assert_eq!(e.metric, None);
        assert!(e.revisions.is_empty());
        assert!(e.minted_with_retirement.is_empty());
        assert!(has_id(&status, "A") && has_id(&status, "B") && !has_id(&status, "C"));
    }
}

#[cfg(test)]
mod renamed_from_tests {
    use super::*;
    use std::collections::BTreeMap;

    /// r1 total [A]; r2 renames total -> revenue with renamedFrom [A kept]: the id is current,
    /// named revenue, formerly total, and both revisions list it under their own names.
    #[test]
    fn a_declared_rename_keeps_the_id_current_with_its_former_names() {
        let m = |name: &str| -> Metric {
            serde_json::from_value(serde_json::json!({"name": name, "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "sum(a)"}]}})).unwrap()
        };
        let kept = |revision: i64, name: &str, ids: Vec<MetricIdentity>| Kept {
            revision,
            created: None,
            name: "orders".into(),
            comment: None,
            properties: BTreeMap::new(),
            definition: Definition {
                metrics: Some(vec![m(name)]),
                ..Definition::default()
            },
            metrics: Some(ids),
        };
        let renamed = MetricIdentity {
            name: "revenue".into(),
            id: "A".into(),
            former_names: vec!["total".into()],
        };
        let status = SemanticModelStatus {
            revision: Some(2),
            metrics: vec![renamed.clone()],
            ..SemanticModelStatus::default()
        };
        let history = vec![
            kept(1, "total", vec![MetricIdentity::new("total", "A")]),
            kept(2, "revenue", vec![renamed]),
        ];
        let model = Identifier {
            namespace: vec!["ns".into(), "c".into(), "s".into()],
            name: "orders".into(),
        };
        let current = history[1].definition.clone();
        let e = explain("A", model, &status, &current, &history).unwrap();
        assert_eq!(
            (e.name.as_str(), e.state),
            ("revenue", MetricState::Current)
        );
        assert_eq!(e.former_names, vec!["total"]);
        let names: Vec<&str> = e.revisions.iter().map(|r| r.metric.name.as_str()).collect();
        assert_eq!(names, ["total", "revenue"]);
        assert!(e.retired_in_revision.is_none() && e.minted_with_retirement.is_empty());
    }
}

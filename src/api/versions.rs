//! A model's revision history (`.../semantic-models/{name}/versions`) and one kept revision
//! (`.../semantic-models/{name}?revision=N`), read from the ControllerRevisions that
//! `--revision-history-limit` keeps. Only committed revisions count: a revision written after
//! the one status names belongs to an acceptance that has not committed (or never will).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use serde::{Deserialize, Serialize};

use super::ApiState;
use super::auth::Asker;
use super::error::{self, ApiError};
use super::extract::Path;
use super::routes::{caller, home_models, ok};
use crate::crd::semantic_model::{Definition, MetricIdentity, SemanticModelStatus};
use crate::crd::{MODEL_UID_LABEL, SemanticModel};
use crate::model::canonical::definition_hash;

/// Most revisions one history lists (the history limit keeps far fewer; this bounds the answer
/// even if foreign objects carry the label).
pub const MAX_VERSIONS: usize = 1000;

/// One kept revision as written at acceptance.
#[derive(Clone, Debug, PartialEq)]
pub struct Kept {
    pub revision: i64,
    /// When the revision was written (RFC 3339).
    pub created: Option<String>,
    pub name: String,
    pub comment: Option<String>,
    pub properties: BTreeMap<String, String>,
    pub definition: Definition,
    /// The ids the revision committed; `None` for revisions written before ids were recorded.
    pub metrics: Option<Vec<MetricIdentity>>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(default)]
    name: String,
    #[serde(default)]
    comment: Option<String>,
    #[serde(default)]
    properties: BTreeMap<String, String>,
    definition: Definition,
    #[serde(default)]
    metrics: Option<Vec<MetricIdentity>>,
}

impl Kept {
    /// The revision if it is `model`'s (labelled and owned by its uid) and its data parses.
    pub fn of(model: &SemanticModel, rev: &ControllerRevision) -> Option<Kept> {
        let uid = model.uid()?;
        let labelled = rev.labels().get(MODEL_UID_LABEL) == Some(&uid);
        let owned = rev
            .owner_references()
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true));
        let revision = rev.revision?;
        if !labelled || !owned || rev.name_any() != model.revision_object_name(revision) {
            return None;
        }
        let data: Data = serde_json::from_value(rev.data.0.clone()).ok()?;
        Some(Kept {
            revision,
            created: rev.creation_timestamp().map(|t| t.0.to_string()),
            name: data.name,
            comment: data.comment,
            properties: data.properties,
            definition: data.definition,
            metrics: data.metrics,
        })
    }
}

fn api(state: &ApiState, m: &SemanticModel) -> Api<ControllerRevision> {
    Api::namespaced(state.client.clone(), &m.namespace().unwrap_or_default())
}

/// Revision `revision` of `m`, if it is kept and committed.
pub(super) async fn kept_revision(
    state: &ApiState,
    m: &SemanticModel,
    revision: i64,
) -> Result<Option<Kept>, ApiError> {
    let committed = m.status.as_ref().and_then(|s| s.revision).unwrap_or(0);
    if revision < 1 || revision > committed {
        return Ok(None);
    }
    let name = m.revision_object_name(revision);
    let rev = api(state, m).get_opt(&name).await.map_err(|e| {
        tracing::warn!(error = %e, revision = %name, "reading a revision failed");
        error::INTERNAL
    })?;
    Ok(rev.and_then(|r| Kept::of(m, &r)))
}

/// Every kept, committed revision of `m`, oldest first.
async fn kept_revisions(state: &ApiState, m: &SemanticModel) -> Result<Vec<Kept>, ApiError> {
    let uid = m.uid().unwrap_or_default();
    let committed = m.status.as_ref().and_then(|s| s.revision).unwrap_or(0);
    let list = api(state, m)
        .list(&ListParams::default().labels(&format!("{MODEL_UID_LABEL}={uid}")))
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "listing revisions failed");
            error::INTERNAL
        })?;
    let mut kept: Vec<Kept> = list
        .items
        .iter()
        .filter_map(|r| Kept::of(m, r))
        .filter(|k| k.revision <= committed)
        .collect();
    kept.sort_by_key(|k| k.revision);
    kept.dedup_by_key(|k| k.revision);
    let excess = kept.len().saturating_sub(MAX_VERSIONS);
    kept.drain(..excess);
    Ok(kept)
}

/// One entry of a model's history.
#[derive(Serialize, schemars::JsonSchema, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    pub revision: i64,
    /// When the revision was accepted (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    /// Canonical hash of the revision's definition (the model's `status.definitionHash` when current).
    pub definition_hash: String,
    /// Whether this is the revision the model serves now.
    pub current: bool,
    /// Metric ids this revision minted; absent when the revision before it is no longer kept
    /// (or predates recorded ids), so nothing can be said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_added: Option<Vec<MetricIdentity>>,
    /// Metric ids this revision retired (their names left the definition).
    pub metrics_retired: Vec<MetricIdentity>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct VersionList {
    code: i32,
    /// Oldest first; only the last `--revision-history-limit` revisions are kept.
    versions: Vec<Version>,
}

/// The history of kept revisions (oldest first, committed only) with the ids each one added
/// and retired. Retired ids come from status (kept for 200 retirements even after the
/// revision that retired them is pruned); added ids from the difference with the revision
/// before, when both recorded their ids.
pub fn history(kept: &[Kept], status: &SemanticModelStatus) -> Vec<Version> {
    let current = status.revision.unwrap_or(0);
    let ids_of = |k: &Kept| -> Option<Vec<MetricIdentity>> {
        k.metrics.clone().or_else(|| {
            // The current revision's ids are status's, recorded or not.
            (k.revision == current).then(|| status.metrics.clone())
        })
    };
    kept.iter()
        .enumerate()
        .map(|(i, k)| {
            let mine = ids_of(k);
            let before = match i.checked_sub(1).map(|j| &kept[j]) {
                Some(prev) if prev.revision == k.revision - 1 => ids_of(prev),
                _ if k.revision == 1 => Some(vec![]),
                _ => None,
            };
            let metrics_added = mine.zip(before).map(|(mine, before)| {
                let old: HashSet<&str> = before.iter().map(|m| m.id.as_str()).collect();
                mine.into_iter()
                    .filter(|m| !old.contains(m.id.as_str()))
                    .collect()
            });
            Version {
                revision: k.revision,
                created: k.created.clone(),
                definition_hash: definition_hash(&k.definition),
                current: k.revision == current,
                metrics_added,
                metrics_retired: status
                    .retired_metrics
                    .iter()
                    .filter(|r| r.retired_in_revision == k.revision)
                    .map(|r| MetricIdentity {
                        name: r.name.clone(),
                        id: r.id.clone(),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// A model the caller may get, by its client-facing name.
pub(super) async fn visible_model(
    state: &ApiState,
    headers: &Asker,
    (ns, catalog, schema, name): (&str, &str, &str, &str),
) -> Result<Arc<SemanticModel>, ApiError> {
    let who = caller(state, headers).await?;
    home_models(state, &who, ns, catalog, schema, Some(name))
        .await?
        .into_iter()
        .find(|m| m.model_name() == name)
        .ok_or(error::NO_SUCH_MODEL)
}

/// `GET .../semantic-models/{name}/versions`.
pub async fn model_versions(
    State(state): State<Arc<ApiState>>,
    Path((ns, catalog, schema, name)): Path<(String, String, String, String)>,
    headers: Asker,
) -> Response {
    let run = async {
        let m = visible_model(&state, &headers, (&ns, &catalog, &schema, &name)).await?;
        let kept = kept_revisions(&state, &m).await?;
        let status = m.status.clone().unwrap_or_default();
        Ok::<_, ApiError>(ok(VersionList {
            code: 0,
            versions: history(&kept, &status),
        }))
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

/// `?revision=N` of the model path.
#[derive(Deserialize, Default)]
pub struct RevisionQuery {
    #[serde(default)]
    pub revision: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::semantic_model::RetiredMetric;

    fn id(name: &str, id: &str) -> MetricIdentity {
        MetricIdentity {
            name: name.into(),
            id: id.into(),
        }
    }

    fn kept(revision: i64, metrics: Option<Vec<MetricIdentity>>) -> Kept {
        Kept {
            revision,
            created: None,
            name: "m".into(),
            comment: None,
            properties: BTreeMap::new(),
            definition: Definition::default(),
            metrics,
        }
    }

    fn status(
        revision: i64,
        live: Vec<MetricIdentity>,
        retired: &[(&str, &str, i64)],
    ) -> SemanticModelStatus {
        SemanticModelStatus {
            revision: Some(revision),
            metrics: live,
            retired_metrics: retired
                .iter()
                .map(|(n, i, r)| RetiredMetric {
                    name: n.to_string(),
                    id: i.to_string(),
                    retired_in_revision: *r,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn added(v: &Version) -> Option<Vec<&str>> {
        v.metrics_added
            .as_ref()
            .map(|a| a.iter().map(|m| m.id.as_str()).collect())
    }

    #[test]
    fn each_revision_says_which_ids_it_added_and_retired() {
        // r1: revenue; r2: revenue renamed to sales (new id, old retired); r3: orders added.
        let kept = vec![
            kept(1, Some(vec![id("revenue", "a")])),
            kept(2, Some(vec![id("sales", "b")])),
            kept(3, Some(vec![id("sales", "b"), id("orders", "c")])),
        ];
        let st = status(
            3,
            vec![id("sales", "b"), id("orders", "c")],
            &[("revenue", "a", 2)],
        );
        let h = history(&kept, &st);
        // (revision, ids added, ids retired, current)
        type Row<'a> = (i64, Option<Vec<&'a str>>, Vec<&'a str>, bool);
        let table: Vec<Row> = h
            .iter()
            .map(|v| {
                (
                    v.revision,
                    added(v),
                    v.metrics_retired.iter().map(|m| m.id.as_str()).collect(),
                    v.current,
                )
            })
            .collect();
        assert_eq!(
            table,
            vec![
                (1, Some(vec!["a"]), vec![], false),
                (2, Some(vec!["b"]), vec!["a"], false),
                (3, Some(vec!["c"]), vec![], true),
            ]
        );
    }

    #[test]
    fn added_is_unknown_when_the_revision_before_is_pruned_or_unrecorded() {
        // (what, kept revisions, ids each one added)
        type Case<'a> = (&'a str, Vec<Kept>, Vec<Option<Vec<&'a str>>>);
        let cases: &[Case] = &[
            // r1..r3 pruned: r4 cannot say what it added; r5 can.
            (
                "pruned predecessor",
                vec![
                    kept(4, Some(vec![id("x", "a")])),
                    kept(5, Some(vec![id("x", "a"), id("y", "b")])),
                ],
                vec![None, Some(vec!["b"])],
            ),
            // Revisions from before ids were recorded: r1 unknown, so r2 (current, ids from
            // status) has nothing to compare with.
            (
                "legacy revision",
                vec![kept(1, None), kept(2, None)],
                vec![None, None],
            ),
        ];
        for (what, kept, want) in cases {
            let current = kept.last().unwrap().revision;
            let st = status(current, vec![id("x", "a"), id("y", "b")], &[]);
            let h = history(kept, &st);
            let got: Vec<Option<Vec<&str>>> = h.iter().map(added).collect();
            assert_eq!(&got, want, "{what}");
        }
    }

    #[test]
    fn the_current_revision_uses_status_ids_when_it_recorded_none() {
        let kept = vec![kept(1, Some(vec![id("x", "a")])), kept(2, None)];
        let st = status(2, vec![id("x", "a"), id("y", "b")], &[]);
        let h = history(&kept, &st);
        assert_eq!(added(&h[1]), Some(vec!["b"]));
    }
}

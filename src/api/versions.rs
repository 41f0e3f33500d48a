//! A model's revision history (`.../semantic-models/{name}/versions`): the kept, committed
//! revisions with the metric ids each one added and retired.

use std::collections::HashSet;
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::ApiState;
use super::auth::Asker;
use super::error::ApiError;
use super::extract::Path;
use super::revisions::{Kept, kept_revisions};
use super::routes::{ok, visible_model};
use crate::crd::packed::MetricId;
use crate::crd::semantic_model::{MetricIdentity, SemanticModelStatus};
use crate::model::canonical::definition_hash;

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
    /// Metric ids this revision renamed (`renamedFrom`): the new name, the id, the former names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub metrics_renamed: Vec<MetricIdentity>,
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
            let metrics_renamed = match (&mine, &before) {
                (Some(mine), Some(before)) => (mine.iter())
                    .filter(|m| before.iter().any(|b| b.id == m.id && b.name != m.name))
                    .cloned()
                    .collect(),
                _ => vec![],
            };
            let metrics_added = mine.zip(before).map(|(mine, before)| {
                let old: HashSet<&MetricId> = before.iter().map(|m| &m.id).collect();
                mine.into_iter().filter(|m| !old.contains(&m.id)).collect()
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
                    .map(|r| MetricIdentity::new(r.name.clone(), r.id.clone()))
                    .collect(),
                metrics_renamed,
            }
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::semantic_model::{Definition, RetiredMetric};
    use std::collections::BTreeMap;

    fn id(name: &str, id: &str) -> MetricIdentity {
        MetricIdentity::new(name, id)
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
                    name: (*n).into(),
                    id: (*i).into(),
                    retired_in_revision: *r,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn added(v: &Version) -> Option<Vec<String>> {
        v.metrics_added
            .as_ref()
            .map(|a| a.iter().map(|m| m.id.to_string()).collect())
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
        type Row = (i64, Option<Vec<String>>, Vec<String>, bool);
        let table: Vec<Row> = h
            .iter()
            .map(|v| {
                (
                    v.revision,
                    added(v),
                    v.metrics_retired.iter().map(|m| m.id.to_string()).collect(),
                    v.current,
                )
            })
            .collect();
        assert_eq!(
            table,
            [
                (1, Some(vec!["a"]), vec![], false),
                (2, Some(vec!["b"]), vec!["a"], false),
                (3, Some(vec!["c"]), vec![], true),
            ]
            .map(|(r, added, retired, current)| {
                let texts = |v: Vec<&str>| v.into_iter().map(String::from).collect();
                (r, added.map(texts), texts(retired), current)
            })
            .to_vec()
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
            let got: Vec<Option<Vec<String>>> = h.iter().map(added).collect();
            let want: Vec<Option<Vec<String>>> = want
                .iter()
                .map(|w| {
                    w.as_ref()
                        .map(|ids| ids.iter().map(|i| i.to_string()).collect())
                })
                .collect();
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn the_current_revision_uses_status_ids_when_it_recorded_none() {
        let kept = vec![kept(1, Some(vec![id("x", "a")])), kept(2, None)];
        let st = status(2, vec![id("x", "a"), id("y", "b")], &[]);
        let h = history(&kept, &st);
        assert_eq!(added(&h[1]), Some(vec!["b".to_string()]));
    }

    #[test]
    fn a_declared_rename_is_listed_with_the_id_it_kept() {
        let renamed = MetricIdentity {
            name: "sales".into(),
            id: "a".into(),
            former_names: vec!["revenue".into()],
        };
        let kept = vec![
            kept(1, Some(vec![id("revenue", "a")])),
            kept(2, Some(vec![renamed.clone()])),
        ];
        let h = history(&kept, &status(2, vec![renamed.clone()], &[]));
        assert!(h[0].metrics_renamed.is_empty());
        assert_eq!(h[1].metrics_renamed, vec![renamed]);
        assert_eq!(added(&h[1]), Some(vec![]), "nothing minted");
        assert!(h[1].metrics_retired.is_empty(), "nothing retired");
    }
}

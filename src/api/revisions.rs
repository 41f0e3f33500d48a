//! A model's kept revisions as the read API reads them: the ControllerRevisions that
//! `--revision-history-limit` keeps, checked to be the model's own (label and owner uid) and
//! committed (not after the revision status names: an acceptance that has not committed).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use serde::Deserialize;

use super::ApiState;
use super::error::{self, ApiError};
use crate::crd::semantic_model::{Definition, MetricIdentity};
use crate::crd::{MODEL_UID_LABEL, SemanticModel};

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
        let data = Data::deserialize(&rev.data.0).ok()?;
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
pub(super) async fn kept_revisions(
    state: &ApiState,
    m: &SemanticModel,
) -> Result<Vec<Kept>, ApiError> {
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

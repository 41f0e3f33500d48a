//! ControllerRevisions, step (a) of the acceptance transaction (docs/design.md#acceptance-is-one-status-write), and the history
//! window (`--revision-history-limit`).

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{DeleteParams, ObjectMeta, PostParams, Preconditions};
use kube::{Api, Resource, ResourceExt};

use crate::controller::{Context, Error};
use crate::crd::semantic_model::MetricIdentity;
use crate::crd::{MODEL_UID_LABEL, SemanticModel};

/// Revision `revision` of `model` as it is written (pure): the accepted snapshot, the ids it
/// commits, owned by the model and labelled with its uid.
pub fn revision_object(
    model: &SemanticModel,
    revision: i64,
    snapshot_hash: &str,
    metrics: &[MetricIdentity],
) -> ControllerRevision {
    let data = serde_json::json!({
        "name": model.model_name(),
        "comment": model.spec.comment,
        "properties": model.spec.properties,
        "definition": model.spec.definition,
        "snapshotHash": snapshot_hash,
        // The ids this revision commits, so its history can say which ids it added and retired.
        "metrics": metrics,
    });
    let owner = model.controller_owner_ref(&()).map(|mut o| {
        o.block_owner_deletion = None; // needs extra RBAC where owner-reference enforcement is on
        o
    });
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(model.revision_object_name(revision)),
            namespace: model.namespace(),
            labels: Some([(MODEL_UID_LABEL.to_string(), model.uid().unwrap_or_default())].into()),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        revision: Some(revision),
        data: RawExtension(data),
    }
}

/// Writes revision `revision` (step a of the transaction) and answers the metric ids it holds,
/// which the status must commit. A revision of that name left by a crash or a refused commit is
/// reused when it holds the same snapshot of this model (with the ids it recorded: the retry
/// minted fresh ones, and the revision and the status must never disagree on an id), replaced
/// otherwise.
pub async fn write(
    ctx: &Context,
    model: &SemanticModel,
    revision: i64,
    snapshot_hash: String,
    metrics: &[MetricIdentity],
) -> Result<Vec<MetricIdentity>, Error> {
    if !ctx.leader.is_leading() {
        return Err(Error::NotLeader);
    }
    let ns = model.namespace().ok_or(Error::MissingNamespace)?;
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let name = model.revision_object_name(revision);
    let rev = revision_object(model, revision, &snapshot_hash, metrics);
    match api
        .create(
            &PostParams {
                field_manager: Some("semops".into()),
                ..Default::default()
            },
            &rev,
        )
        .await
    {
        Ok(_) => Ok(metrics.to_vec()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = api.get(&name).await?;
            let owner = ownership(&existing, model);
            let same_snapshot = existing.data.0.get("snapshotHash").and_then(|h| h.as_str())
                == Some(snapshot_hash.as_str());
            match owner {
                // An earlier attempt (uncommitted, or committed and our cache is behind: then
                // the status write is refused as stale): reuse it and its ids.
                Ownership::ThisModel if same_snapshot => {
                    Ok(recorded_ids(&existing, metrics).unwrap_or_else(|| metrics.to_vec()))
                }
                // Never named by a committed status of this model, or left by a deleted
                // namesake: replace it (only that very object: the uid is a precondition).
                Ownership::ThisModel | Ownership::DeletedNamesake => {
                    delete_exactly(&api, &existing).await?;
                    api.create(&PostParams::default(), &rev).await?;
                    Ok(metrics.to_vec())
                }
                Ownership::Foreign => Err(Error::NotOwned(format!(
                    "ControllerRevision {}/{name}",
                    model.namespace().unwrap_or_default()
                ))),
            }
        }
        Err(e) => Err(e.into()),
    }
}

/// The ids `existing` recorded, when they name the same metrics as `minted` in the same order
/// (the same snapshot has the same metric names; anything else, or a revision written before
/// ids were recorded, answers `None`).
fn recorded_ids(
    existing: &ControllerRevision,
    minted: &[MetricIdentity],
) -> Option<Vec<MetricIdentity>> {
    let recorded: Vec<MetricIdentity> =
        serde_json::from_value(existing.data.0.get("metrics")?.clone()).ok()?;
    let same_names = recorded.len() == minted.len()
        && recorded.iter().zip(minted).all(|(r, m)| r.name == m.name);
    same_names.then_some(recorded)
}

/// Deletes the revision that fell out of the history window (best effort), only if this
/// model owns it.
pub async fn prune(ctx: &Context, model: &SemanticModel, committed: i64) {
    let old = committed - ctx.revision_history_limit;
    if old < 1 {
        return;
    }
    let Some(ns) = model.namespace() else { return };
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let result = match api.get_opt(&model.revision_object_name(old)).await {
        Ok(Some(rev)) if ownership(&rev, model) == Ownership::ThisModel => {
            delete_exactly(&api, &rev).await
        }
        Ok(_) => Ok(()),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) | Err(kube::Error::Api(_)) => {}
        Err(e) => tracing::debug!(error = %e, "could not prune an old revision"),
    }
}

/// Who owns a ControllerRevision, by its controller reference (labels can be written by
/// anyone who may create the object; the owner uid is what identifies a model).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ownership {
    ThisModel,
    /// A SemanticModel of the same name and another uid: deleted (names are unique).
    DeletedNamesake,
    Foreign,
}

fn ownership(rev: &ControllerRevision, model: &SemanticModel) -> Ownership {
    let uid = model.uid().unwrap_or_default();
    let owners = rev.metadata.owner_references.as_deref().unwrap_or_default();
    let by_a_model = |o: &&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference| {
        o.kind == SemanticModel::kind(&())
            && o.api_version == SemanticModel::api_version(&())
            && o.name == model.name_any()
            && o.controller == Some(true)
    };
    match owners.iter().find(by_a_model) {
        Some(o) if !uid.is_empty() && o.uid == uid => Ownership::ThisModel,
        Some(_) => Ownership::DeletedNamesake,
        None => Ownership::Foreign,
    }
}

/// Deletes exactly this object: if it was replaced meanwhile, the uid precondition refuses.
async fn delete_exactly(
    api: &Api<ControllerRevision>,
    rev: &ControllerRevision,
) -> Result<(), kube::Error> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: rev.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    api.delete(&rev.name_any(), &params).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn model(uid: &str) -> SemanticModel {
        let spec: crate::crd::SemanticModelSpec = serde_json::from_value(serde_json::json!({
            "catalog": "analytics", "schema": "semantic", "name": "orders",
            "definition": {"datasets": [{"name": "e", "source": "hr.public.employees"}]}
        }))
        .unwrap();
        let mut m = SemanticModel::new("orders", spec);
        m.metadata.uid = Some(uid.into());
        m.metadata.namespace = Some("ns".into());
        m
    }

    fn revision(owner: Option<(&str, &str, &str, Option<bool>)>) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some("orders-r1".into()),
                // A label claiming this model's uid proves nothing: anyone may write it.
                labels: Some([(MODEL_UID_LABEL.to_string(), "u1".to_string())].into()),
                owner_references: owner.map(|(kind, name, uid, controller)| {
                    vec![OwnerReference {
                        api_version: "semops.io/v1alpha1".into(),
                        kind: kind.into(),
                        name: name.into(),
                        uid: uid.into(),
                        controller,
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn ids(pairs: &[(&str, &str)]) -> Vec<MetricIdentity> {
        pairs
            .iter()
            .map(|(name, id)| MetricIdentity::new(*name, *id))
            .collect()
    }

    #[test]
    fn a_reused_revision_hands_back_the_ids_it_recorded() {
        let minted = ids(&[("a", "new-a"), ("b", "new-b")]);
        let cases = [
            (
                serde_json::json!({"metrics": ids(&[("a", "old-a"), ("b", "old-b")])}),
                Some(ids(&[("a", "old-a"), ("b", "old-b")])),
            ),
            // Written before ids were recorded, or not naming the same metrics: keep the minted.
            (serde_json::json!({}), None),
            (serde_json::json!({"metrics": null}), None),
            (serde_json::json!({"metrics": "garbage"}), None),
            (serde_json::json!({"metrics": ids(&[("a", "old-a")])}), None),
            (
                serde_json::json!({"metrics": ids(&[("b", "old-b"), ("a", "old-a")])}),
                None,
            ),
        ];
        for (i, (data, want)) in cases.into_iter().enumerate() {
            let mut rev = revision(None);
            rev.data = RawExtension(data);
            assert_eq!(recorded_ids(&rev, &minted), want, "case {i}");
        }
    }

    #[test]
    fn only_the_controller_reference_decides_who_owns_a_revision() {
        use Ownership::*;
        let cases = [
            (
                Some(("SemanticModel", "orders", "u1", Some(true))),
                ThisModel,
            ),
            (
                Some(("SemanticModel", "orders", "u0", Some(true))),
                DeletedNamesake,
            ),
            (None, Foreign),
            (Some(("SemanticModel", "orders", "u1", None)), Foreign),
            (Some(("SemanticModel", "other", "u1", Some(true))), Foreign),
            (Some(("Deployment", "orders", "u1", Some(true))), Foreign),
        ];
        for (i, (owner, want)) in cases.into_iter().enumerate() {
            assert_eq!(ownership(&revision(owner), &model("u1")), want, "case {i}");
        }
    }
}

//! ControllerRevisions, step (a) of the acceptance transaction (DESIGN 3.2), and the history
//! window (`--revision-history-limit`).

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, Resource, ResourceExt};

use crate::controller::{Context, Error};
use crate::crd::{MODEL_UID_LABEL, SemanticModel};

fn revision_name(model: &SemanticModel, revision: i64) -> String {
    format!("{}-r{revision}", model.name_any())
}

/// Writes revision `revision` (step a of the transaction). A revision of that name left by a
/// crash is reused when it holds the same snapshot of this model, replaced otherwise.
pub async fn write(
    ctx: &Context,
    model: &SemanticModel,
    revision: i64,
    snapshot_hash: String,
) -> Result<(), Error> {
    if !ctx.leader.is_leading() {
        return Err(Error::NotLeader);
    }
    let ns = model.namespace().ok_or(Error::MissingNamespace)?;
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = model.uid().unwrap_or_default();
    let name = revision_name(model, revision);
    let data = serde_json::json!({
        "name": model.model_name(),
        "comment": model.spec.comment,
        "properties": model.spec.properties,
        "definition": model.spec.definition,
        "snapshotHash": snapshot_hash,
    });
    let owner = model.controller_owner_ref(&()).map(|mut o| {
        o.block_owner_deletion = None; // needs extra RBAC where owner-reference enforcement is on
        o
    });
    let rev = ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns),
            labels: Some([(MODEL_UID_LABEL.to_string(), uid.clone())].into()),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        revision: Some(revision),
        data: RawExtension(data),
    };
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
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = api.get(&name).await?;
            let same_model = existing
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(MODEL_UID_LABEL))
                == Some(&uid);
            let same_snapshot = existing.data.0.get("snapshotHash").and_then(|h| h.as_str())
                == Some(snapshot_hash.as_str());
            if same_model && same_snapshot {
                return Ok(()); // left by an earlier attempt that did not commit: reuse it
            }
            // Never named by any committed status (or owned by a deleted namesake): replace it.
            api.delete(&name, &DeleteParams::default()).await?;
            api.create(&PostParams::default(), &rev).await?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Deletes the revision that fell out of the history window (best effort).
pub async fn prune(ctx: &Context, model: &SemanticModel, committed: i64) {
    let old = committed - ctx.revision_history_limit;
    if old < 1 {
        return;
    }
    let Some(ns) = model.namespace() else { return };
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    match api
        .delete(&revision_name(model, old), &DeleteParams::default())
        .await
    {
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(e) => tracing::debug!(error = %e, "could not prune an old revision"),
    }
}

//! The one status writer: skips equal statuses, refuses to write without leadership, sends a
//! full-status PUT preconditioned on the resourceVersion that was read, and — once the write
//! committed — announces a flip of the condition the caller watches as an Event.

use crate::crd::conditions::Condition;
use kube::api::PostParams;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::events::{Reporter, Severity};
use super::{Context, Error};
use crate::crd::conditions::{self, ConditionType, Reason};
use crate::crd::{
    Catalog, CatalogStatus, ReconcilePolicy, ReconcilePolicyStatus, SemanticModel,
    SemanticModelStatus,
};

/// A kind with a status subresource and conditions.
pub trait HasStatus:
    Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + std::fmt::Debug
{
    type Status: PartialEq + Clone + std::fmt::Debug;
    fn status(&self) -> Option<&Self::Status>;
    fn set_status(&mut self, status: Self::Status);
    fn conditions_of(status: &Self::Status) -> &[Condition];
}

macro_rules! has_status {
    ($kind:ty, $status:ty) => {
        impl HasStatus for $kind {
            type Status = $status;
            fn status(&self) -> Option<&$status> {
                self.status.as_ref()
            }
            fn set_status(&mut self, status: $status) {
                self.status = Some(status);
            }
            fn conditions_of(status: &$status) -> &[Condition] {
                &status.conditions
            }
        }
    };
}
has_status!(SemanticModel, SemanticModelStatus);
has_status!(Catalog, CatalogStatus);
has_status!(ReconcilePolicy, ReconcilePolicyStatus);

/// Which condition's flips (status or reason) become an Event after the write commits.
#[derive(Clone, Copy, Debug)]
pub struct Announce {
    pub condition: ConditionType,
    /// The Event's action, e.g. `Validate`, `CheckConnection`.
    pub action: &'static str,
    /// Whether a flip to True is announced too (a model announces acceptance separately).
    pub when_true: bool,
}

/// Writes `desired` unless it equals the current status; answers the resourceVersion the write
/// produced (`None`: equal, nothing sent, or an answer without one).
/// With `announce`, a committed flip of that condition is published as an Event (Normal when
/// it now holds, Warning otherwise), reported by the controller.
pub async fn commit<K: HasStatus>(
    ctx: &Context,
    controller: &str,
    obj: &K,
    desired: K::Status,
    announce: Option<Announce>,
) -> Result<Option<String>, Error> {
    if obj.status() == Some(&desired) {
        return Ok(None);
    }
    if !ctx.leader.is_leading() {
        return Err(Error::NotLeader);
    }
    let flip = announce.and_then(|a| {
        let before = obj
            .status()
            .and_then(|s| conditions::find(K::conditions_of(s), a.condition));
        let after = conditions::find(K::conditions_of(&desired), a.condition)?;
        (conditions::flipped(before, after) && (a.when_true || after.status != "True"))
            .then(|| (a.action, after.clone()))
    });
    let ns = obj.namespace().ok_or(Error::MissingNamespace)?;
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    let mut next = obj.clone();
    next.set_status(desired);
    // The cache strips managedFields; an empty list in a PUT would reset them on the server.
    next.meta_mut().managed_fields = None;
    let params = PostParams {
        field_manager: Some("semops".into()),
        ..Default::default()
    };
    let request = kube::core::Request::new(api.resource_url())
        .replace_subresource(
            "status",
            &obj.name_any(),
            &params,
            serde_json::to_vec(&next)?,
        )
        .map_err(kube::Error::BuildRequest)?;
    // Only the new version is read from the answer: nobody reads the rest of the object it
    // sends back, and decoding it (spec and all) cost CPU on every write.
    let written = match ctx.client.request::<WrittenVersion>(request).await {
        Ok(w) => w.metadata.resource_version,
        Err(kube::Error::Api(s)) if s.code == 409 => return Err(ctx.refused_as_stale(obj)),
        Err(e) => return Err(Error::Kube(e)),
    };
    ctx.metrics.observe_status_write(controller);
    if let Some((action, after)) = flip {
        let reason = Reason::kept(&after.reason);
        ctx.publish(
            Reporter::Controller,
            obj,
            Severity::of(after.status == "True" && !reason.warns_when_true()),
            &reason,
            action,
            after.message.to_string(),
        )
        .await;
    }
    Ok(written)
}

/// The part of a write's answer the writer reads.
#[derive(serde::Deserialize)]
struct WrittenVersion {
    metadata: WrittenMeta,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct WrittenMeta {
    resource_version: Option<String>,
}

//! The one status writer: skips equal statuses, refuses to write without leadership, and sends a
//! full-status PUT preconditioned on the resourceVersion that was read.

use kube::api::PostParams;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Context, Error};
use crate::crd::{
    Catalog, CatalogStatus, ReconcilePolicy, ReconcilePolicyStatus, SemanticModel,
    SemanticModelStatus,
};

/// A kind with a status subresource.
pub trait HasStatus:
    Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug
{
    type Status: PartialEq + Clone + std::fmt::Debug;
    fn status(&self) -> Option<&Self::Status>;
    fn set_status(&mut self, status: Self::Status);
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
        }
    };
}
has_status!(SemanticModel, SemanticModelStatus);
has_status!(Catalog, CatalogStatus);
has_status!(ReconcilePolicy, ReconcilePolicyStatus);

/// Writes `desired` unless it equals the current status. Returns whether a request was sent.
pub async fn write_status_if_changed<K: HasStatus<Scope = kube::core::NamespaceResourceScope>>(
    ctx: &Context,
    controller: &str,
    obj: &K,
    desired: K::Status,
) -> Result<bool, Error> {
    if obj.status() == Some(&desired) {
        return Ok(false);
    }
    if !ctx.leader.is_leading() {
        return Err(Error::NotLeader);
    }
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
    match api.replace_status(&obj.name_any(), &params, &next).await {
        Ok(_) => {
            ctx.metrics.observe_status_write(controller);
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Err(Error::Conflict),
        Err(e) => Err(Error::Kube(e)),
    }
}

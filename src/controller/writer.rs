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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::mock_api::{self, Seen};
    use crate::crd::{Catalog, CatalogStatus};

    fn catalog(status: Option<CatalogStatus>) -> Catalog {
        let mut cat: Catalog = serde_json::from_value(serde_json::json!({
            "apiVersion": "semops.io/v1alpha1", "kind": "Catalog",
            "metadata": {"name": "hr", "namespace": "team-a", "uid": "u-1", "resourceVersion": "5",
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
            "spec": {"provider": "managed"}
        }))
        .unwrap();
        cat.status = status;
        cat
    }

    fn reachable(status: &str, reason: &str) -> CatalogStatus {
        CatalogStatus {
            conditions: vec![
                serde_json::from_value(serde_json::json!({
                    "type": "Reachable", "status": status, "reason": reason,
                    "message": "m", "lastTransitionTime": "2026-12-06T00:00:00Z"
                }))
                .unwrap(),
            ],
            ..Default::default()
        }
    }

    const REACHABLE: Announce = Announce {
        condition: ConditionType::Reachable,
        action: "CheckConnection",
        when_true: true,
    };

    #[tokio::test]
    async fn an_equal_status_sends_nothing_even_without_leadership() {
        let (client, seen) = mock_api::client(vec![]);
        let ctx = mock_api::context(client, false);
        let cat = catalog(Some(reachable("True", "Connected")));
        let written = commit(&ctx, "catalog", &cat, reachable("True", "Connected"), None).await;
        assert_eq!(written.unwrap(), None);
        assert!(seen.seen().is_empty());
    }

    #[tokio::test]
    async fn a_replica_that_does_not_lead_writes_nothing() {
        let (client, seen) = mock_api::client(vec![]);
        let ctx = mock_api::context(client, false);
        let cat = catalog(None);
        let refused = commit(&ctx, "catalog", &cat, reachable("True", "Connected"), None).await;
        assert!(matches!(refused, Err(Error::NotLeader)), "{refused:?}");
        assert!(seen.seen().is_empty());
    }

    #[tokio::test]
    async fn a_change_is_one_put_of_the_status_subresource_guarded_by_the_version_read() {
        let (client, seen) = mock_api::client(vec![(
            200,
            serde_json::json!({"metadata": {"resourceVersion": "6"}}),
        )]);
        let ctx = mock_api::context(client, true);
        let cat = catalog(Some(reachable("False", "ConnectionFailed")));
        let written = commit(
            &ctx,
            "catalog",
            &cat,
            reachable("False", "AuthFailed"),
            None,
        )
        .await;
        assert_eq!(written.unwrap().as_deref(), Some("6"));
        let seen = seen.seen();
        assert_eq!(seen.len(), 1, "{seen:?}");
        let Seen {
            method,
            path,
            content_type,
            body,
        } = &seen[0];
        assert_eq!(
            (method.as_str(), content_type.as_str()),
            ("PUT", "application/json")
        );
        let (path, query) = path.split_once('?').unwrap();
        assert_eq!(
            path,
            "/apis/semops.io/v1alpha1/namespaces/team-a/catalogs/hr/status"
        );
        assert!(query.contains("fieldManager=semops"), "{query}");
        assert_eq!(body["metadata"]["resourceVersion"], "5", "the version read");
        assert!(
            body["metadata"].get("managedFields").is_none(),
            "managedFields are left to the server"
        );
        assert_eq!(body["status"]["conditions"][0]["reason"], "AuthFailed");
    }

    #[tokio::test]
    async fn a_conflict_is_a_conflict_and_nothing_is_announced() {
        let (client, seen) = mock_api::client(vec![mock_api::status(409, "Conflict")]);
        let ctx = mock_api::context(client, true);
        let cat = catalog(None);
        let refused = commit(
            &ctx,
            "catalog",
            &cat,
            reachable("False", "ConnectionFailed"),
            Some(REACHABLE),
        )
        .await;
        assert!(matches!(refused, Err(Error::Conflict)), "{refused:?}");
        assert_eq!(
            seen.seen().len(),
            1,
            "the PUT only; no Event for an uncommitted flip"
        );
    }

    #[tokio::test]
    async fn a_committed_flip_is_announced_after_the_write_and_a_kept_state_is_not() {
        let (client, seen) = mock_api::client(vec![
            (
                200,
                serde_json::json!({"metadata": {"resourceVersion": "6"}}),
            ),
            (201, serde_json::json!({})),
        ]);
        let ctx = mock_api::context(client, true);
        let cat = catalog(Some(reachable("True", "Connected")));
        commit(
            &ctx,
            "catalog",
            &cat,
            reachable("False", "ConnectionFailed"),
            Some(REACHABLE),
        )
        .await
        .unwrap();
        let seen = seen.seen();
        assert_eq!(
            seen.iter()
                .map(|s| (s.method.as_str(), s.path.split('?').next().unwrap()))
                .collect::<Vec<_>>(),
            [
                (
                    "PUT",
                    "/apis/semops.io/v1alpha1/namespaces/team-a/catalogs/hr/status"
                ),
                ("POST", "/apis/events.k8s.io/v1/namespaces/team-a/events"),
            ]
        );
        assert_eq!(seen[1].body["type"], "Warning");
        assert_eq!(seen[1].body["reason"], "ConnectionFailed");

        // The same condition with another message only: written, not announced.
        let (client, seen) = mock_api::client(vec![(
            200,
            serde_json::json!({"metadata": {"resourceVersion": "7"}}),
        )]);
        let ctx = mock_api::context(client, true);
        let mut desired = reachable("True", "Connected");
        desired.conditions[0].message = "another message".into();
        commit(&ctx, "catalog", &cat, desired, Some(REACHABLE))
            .await
            .unwrap();
        assert_eq!(seen.seen().len(), 1);
    }
}

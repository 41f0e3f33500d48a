//! Catalog reconciler, a pipeline: protect (the finalizer follows hosted models) → schedule (a
//! check round now, or when) → reachability (a connection check, a dry-run round while a round
//! failure stands, or a source visit) → status (pure, `reconcile::status`) → commit → requeue.
//! The rounds themselves are in `check`.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::check::{self, REACHABLE_FLIPS};
use super::writer::commit;
use super::{Context, Error};
use crate::catalog::CatalogProvider;
use crate::catalog::registry::{provider_from, registry_key};
use crate::crd::catalog::{CheckResult, Provider};
use crate::crd::conditions::{self, ConditionType, Desired, Status};
use crate::crd::{CHECK_REQUESTED_ANNOTATION, Catalog, SemanticModel, wanted_finalizers};
use crate::policy::schedule::{Periodic, Trigger, Visit, next_visit};
use crate::policy::settings::round_settings;
use crate::reconcile::Act;
use crate::reconcile::status::{
    connected, deleting, desired_status, managed_reachable, unreachable,
};

pub const CONTROLLER: &str = super::names::CATALOG;

/// How often a reachable catalog's connection is re-checked.
pub const RECHECK_CONNECTED: Duration = Duration::from_secs(5 * 60);
/// How often an unreachable catalog is retried.
pub const RECHECK_UNREACHABLE: Duration = Duration::from_secs(30);

pub async fn reconcile(cat: Arc<Catalog>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.leader.is_leading() {
        return Ok(Action::await_change());
    }
    let ns = cat.namespace().ok_or(Error::MissingNamespace)?;

    // protect
    let hosted = hosted_models(&ctx.stores.models_in(&ns), &cat.name_any());
    if let Some(action) = protect(&ctx, &cat, &hosted).await? {
        return Ok(action);
    }

    // schedule
    let policies = ctx.stores.policies_in(&ns);
    let managed = cat.spec.provider == Provider::Managed;
    let settings = round_settings(&cat, &policies, &ctx.defaults);
    let periodic = Periodic {
        enabled: settings.periodic.enabled && !managed,
        ..settings.periodic
    };
    let previous = cat.status.clone().unwrap_or_default();
    let visit = next_visit(
        periodic,
        previous.next_check_at.as_ref().map(|t| t.0),
        cat.annotations()
            .get(CHECK_REQUESTED_ANNOTATION)
            .map(String::as_str),
        previous.observed_check_request.as_deref(),
        k8s_openapi::jiff::Timestamp::now(),
        rand::random(),
    );
    let next_check_at = match visit {
        Visit::Now(trigger) => {
            let Some(round) = check::try_run_round(&ctx, &cat, trigger, Act::Record).await? else {
                return Ok(Action::requeue(busy_retry()));
            };
            let recheck = if round.result == CheckResult::CatalogUnreachable {
                RECHECK_UNREACHABLE
            } else {
                RECHECK_CONNECTED
            };
            return Ok(Action::requeue(
                until(round.next_check_at.as_ref()).min(recheck),
            ));
        }
        Visit::Schedule(at) | Visit::Wait(at) => Some(Time(at)),
        Visit::Off => None,
    };

    // reachability
    let key = registry_key(&cat);
    // Models bind sources here (the model controller notes it at once; the cache may lag).
    let sources_only = !managed
        && !periodic.enabled
        && (ctx.checks.is_bound(&key)
            || !check::bound_sources(&ctx, &ns, &cat.name_any()).is_empty());
    let mut wake = RECHECK_CONNECTED;
    let round_failed = previous.last_check.as_ref().map(|l| l.result)
        == Some(CheckResult::CatalogUnreachable)
        && conditions::find(&previous.conditions, ConditionType::Reachable)
            .is_some_and(|c| c.status == "False");
    let reachable = if managed {
        managed_reachable()
    } else if round_failed {
        // A passing `SELECT 1` proves nothing about probes that failed (e.g. a revoked
        // privilege): until the next recorded round, recovery is judged by a dry-run round.
        match check::try_run_round(&ctx, &cat, Trigger::Periodic, Act::DryRun).await? {
            Some(round) => round.reachable,
            None => return Ok(Action::requeue(busy_retry())),
        }
    } else if sources_only {
        match ctx.checks.source_visit_due(&key, ctx.drift_interval) {
            None => match check::visit_sources(&ctx, &cat).await? {
                Some(seen) => seen,
                None => return Ok(Action::requeue(busy_retry())),
            },
            Some(left) => {
                wake = wake.min(left);
                match check_reachable(&ctx, &cat).await? {
                    Some(seen) => seen,
                    None => return Ok(Action::requeue(busy_retry())),
                }
            }
        }
    } else {
        match check_reachable(&ctx, &cat).await? {
            Some(seen) => seen,
            None => return Ok(Action::requeue(busy_retry())),
        }
    };
    if sources_only && let Some(left) = ctx.checks.next_source_visit(&key) {
        wake = wake.min(left);
    }
    let connected = reachable.status == Status::True;

    // status
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let desired = crate::crd::CatalogStatus {
        next_check_at: next_check_at.clone(),
        ..desired_status(&cat, &policies, &ctx.defaults, reachable, &now)
    };

    // commit
    commit(
        &ctx,
        CONTROLLER,
        cat.as_ref(),
        desired,
        Some(REACHABLE_FLIPS),
    )
    .await?;

    // requeue: re-check reachability (and pick up a rotated Secret) periodically; sooner while
    // failing; never later than the next round.
    let recheck = if connected {
        wake
    } else {
        RECHECK_UNREACHABLE.min(wake)
    };
    Ok(Action::requeue(until(next_check_at.as_ref()).min(recheck)))
}

/// Checks the connection of a probed catalog: Secret, settings, pool, `SELECT 1`. Every failure
/// becomes a `Reachable=False` verdict with a category reason and a message without secrets.
/// A connection check within the namespace's share of probe slots; `None` without checking
/// when that share is taken (the reconcile comes back later, its status unchanged).
async fn check_reachable(ctx: &Context, cat: &Catalog) -> Result<Option<Desired>, Error> {
    let Some(_permit) = ctx.checks.try_probe(&cat.namespace().unwrap_or_default()) else {
        ctx.metrics.checks.deferred.inc();
        return Ok(None);
    };
    let (provider, endpoint) = match provider_from(&ctx.client, &ctx.providers, cat).await? {
        Ok(p) => p,
        Err(no) => return Ok(Some(unreachable(no.reason, no.message))),
    };
    Ok(Some(match provider.check_connection().await {
        Ok(()) => connected(cat),
        Err(e) => unreachable(e.category(), format!("{endpoint}: {e}")),
    }))
}

/// When a reconcile whose namespace's share was taken comes back: soon, spread over 2–4 s so
/// the waiting Catalogs of one namespace do not return in step.
fn busy_retry() -> Duration {
    Duration::from_millis(2000 + rand::random::<u64>() % 2000)
}

/// Time left until `at` (zero when past; a long wait when there is none).
fn until(at: Option<&Time>) -> Duration {
    at.map(|t| {
        let left = k8s_openapi::jiff::Timestamp::now().duration_until(t.0);
        Duration::try_from(left).unwrap_or(Duration::ZERO)
    })
    .unwrap_or(Duration::from_secs(24 * 3600))
}

/// Names of the models whose home is `catalog` (models that only read its tables do not count).
pub fn hosted_models(models: &[Arc<SemanticModel>], catalog: &str) -> Vec<String> {
    let mut v: Vec<String> = models
        .iter()
        .filter(|m| m.spec.catalog == catalog)
        .map(|m| m.name_any())
        .collect();
    v.sort();
    v
}

/// Keeps `semops.io/catalog-protection` in step with the hosted models. A Catalog being deleted
/// while it still hosts models reports what it waits for; once empty it is released.
async fn protect(ctx: &Context, cat: &Catalog, hosted: &[String]) -> Result<Option<Action>, Error> {
    let current = cat.finalizers().to_vec();
    if let Some(next) = wanted_finalizers(&current, !hosted.is_empty()) {
        let api: Api<Catalog> =
            Api::namespaced(ctx.client.clone(), &cat.namespace().unwrap_or_default());
        // resourceVersion makes this a compare-and-swap: never drop someone else's finalizer.
        let patch = serde_json::json!({"metadata": {"finalizers": next, "resourceVersion": cat.resource_version()}});
        match api
            .patch(
                &cat.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => return Err(ctx.refused_as_stale(cat)),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Some(Action::await_change())),
            Err(e) => return Err(e.into()),
        }
        if hosted.is_empty() && cat.metadata.deletion_timestamp.is_some() {
            ctx.providers.remove(&registry_key(cat));
            ctx.checks.forget(&registry_key(cat));
            return Ok(Some(Action::await_change())); // released: the Catalog is gone
        }
    }
    if cat.metadata.deletion_timestamp.is_some() && !hosted.is_empty() {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        commit(ctx, CONTROLLER, cat, deleting(cat, hosted, &now), None).await?;
        return Ok(Some(Action::await_change()));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::mock_api;
    use crate::crd::CATALOG_PROTECTION_FINALIZER as PROTECTION;

    fn catalog(finalizers: &[&str], deleting: bool) -> Catalog {
        let mut meta = serde_json::json!({"name": "hr", "namespace": "team-a", "uid": "u-1",
            "resourceVersion": "5", "finalizers": finalizers});
        if deleting {
            meta["deletionTimestamp"] = "2026-12-06T00:00:00Z".into();
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "semops.io/v1alpha1", "kind": "Catalog", "metadata": meta,
            "spec": {"provider": "managed"}
        }))
        .unwrap()
    }

    fn hosted() -> Vec<String> {
        vec!["analytics.semantic.employee_analysis".into()]
    }

    #[tokio::test]
    async fn hosting_adds_the_finalizer_by_compare_and_swap_keeping_others() {
        let cat = catalog(&["example.com/theirs"], false);
        let (client, seen) = mock_api::client(vec![(200, serde_json::to_value(&cat).unwrap())]);
        let ctx = mock_api::context(client, true);
        assert_eq!(protect(&ctx, &cat, &hosted()).await.unwrap(), None);
        let seen = seen.seen();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].method, "PATCH");
        assert_eq!(seen[0].content_type, "application/merge-patch+json");
        assert_eq!(
            seen[0].path.split('?').next().unwrap(),
            "/apis/semops.io/v1alpha1/namespaces/team-a/catalogs/hr"
        );
        assert_eq!(
            seen[0].body,
            serde_json::json!({"metadata": {"finalizers": ["example.com/theirs", PROTECTION],
                "resourceVersion": "5"}})
        );
    }

    #[tokio::test]
    async fn nothing_to_change_sends_nothing() {
        let (client, seen) = mock_api::client(vec![]);
        let ctx = mock_api::context(client, true);
        assert_eq!(
            protect(&ctx, &catalog(&[PROTECTION], false), &hosted())
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            protect(&ctx, &catalog(&[], false), &[]).await.unwrap(),
            None
        );
        assert!(seen.seen().is_empty());
    }

    #[tokio::test]
    async fn a_conflict_retries_and_a_catalog_already_gone_waits() {
        let (client, _) = mock_api::client(vec![mock_api::status(409, "Conflict")]);
        let ctx = mock_api::context(client, true);
        let refused = protect(&ctx, &catalog(&[], false), &hosted()).await;
        assert!(matches!(refused, Err(Error::Conflict)), "{refused:?}");

        let (client, _) = mock_api::client(vec![mock_api::status(404, "NotFound")]);
        let ctx = mock_api::context(client, true);
        assert_eq!(
            protect(&ctx, &catalog(&[], false), &hosted())
                .await
                .unwrap(),
            Some(Action::await_change())
        );
    }

    #[tokio::test]
    async fn a_deleted_catalog_is_released_only_when_it_hosts_nothing() {
        // Still hosting: the finalizer stays, and status says what the deletion waits for.
        let (client, seen) = mock_api::client(vec![(
            200,
            serde_json::json!({"metadata": {"resourceVersion": "6"}}),
        )]);
        let ctx = mock_api::context(client, true);
        let cat = catalog(&[PROTECTION], true);
        assert_eq!(
            protect(&ctx, &cat, &hosted()).await.unwrap(),
            Some(Action::await_change())
        );
        let seen = seen.seen();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].method, "PUT", "a status write, no finalizer change");
        assert!(
            seen[0].body["status"]
                .to_string()
                .contains("employee_analysis"),
            "status names the hosted model: {}",
            seen[0].body["status"]
        );

        // Hosting nothing: the finalizer goes, and nothing else is written.
        let (client, seen) = mock_api::client(vec![(200, serde_json::to_value(&cat).unwrap())]);
        let ctx = mock_api::context(client, true);
        assert_eq!(
            protect(&ctx, &cat, &[]).await.unwrap(),
            Some(Action::await_change())
        );
        let seen = seen.seen();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(
            seen[0].body,
            serde_json::json!({"metadata": {"finalizers": [], "resourceVersion": "5"}})
        );
    }
}

//! Catalog reconciler: effective policy (DESIGN 5.2), reachability, the protection finalizer and
//! the check-round schedule (DESIGN 5.3); the rounds themselves are in `check`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};

use super::check;
use super::status::write_status_if_changed;
use super::{Context, Error};
use crate::catalog::CatalogProvider;
use crate::catalog::registry::AnyProvider;
use crate::catalog::registry::settings_from;
use crate::crd::CHECK_REQUESTED_ANNOTATION;
use crate::crd::catalog::CheckResult;
use crate::crd::catalog::Provider;
use crate::crd::conditions::{self, Desired, Status};
use crate::crd::{
    CATALOG_PROTECTION_FINALIZER, Catalog, CatalogStatus, ReconcilePolicy, SemanticModel,
};
use crate::policy::resolve::{CatalogView, PolicyView};
use crate::policy::schedule::{Periodic, Trigger, Visit, next_visit};
use crate::policy::{OperatorDefaults, effective_policy};

pub const CONTROLLER: &str = "catalog";

pub fn policy_views(policies: &[Arc<ReconcilePolicy>]) -> Vec<PolicyView<'_>> {
    policies
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| PolicyView {
            name: p.metadata.name.as_deref().unwrap_or_default(),
            selector: p.spec.catalog_selector.as_ref(),
            mode: p.spec.mode,
            interval: &p.spec.interval,
            enabled: p.spec.enabled,
        })
        .collect()
}

pub fn catalog_view(c: &Catalog) -> CatalogView<'_> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    CatalogView {
        name: c.metadata.name.as_deref().unwrap_or_default(),
        labels: c.metadata.labels.as_ref().unwrap_or(&EMPTY),
        policy_ref: c
            .spec
            .reconcile_policy_ref
            .as_ref()
            .map(|r| r.name.as_str()),
    }
}

/// Paths of registrations that repeat an earlier (kind, schema, name).
fn duplicate_registrations(cat: &Catalog) -> Vec<String> {
    let mut first_seen = HashMap::new();
    let mut dups = Vec::new();
    for (i, r) in cat.spec.registrations.iter().enumerate() {
        if let Some(first) = first_seen.insert((r.kind, r.schema.as_deref(), r.name.as_str()), i) {
            dups.push(format!(
                "spec.registrations[{i}] repeats spec.registrations[{first}]"
            ));
            first_seen.insert((r.kind, r.schema.as_deref(), r.name.as_str()), first);
        }
    }
    dups
}

/// The whole status this controller wants, from plain inputs. `reachable` is the verdict of the
/// connection check, made by the caller (I/O stays out of here).
pub fn desired_status(
    cat: &Catalog,
    policies: &[Arc<ReconcilePolicy>],
    defaults: &OperatorDefaults,
    reachable: Desired,
    now: &Time,
) -> CatalogStatus {
    let previous = cat.status.clone().unwrap_or_default();
    let generation = cat.metadata.generation;
    let resolution = effective_policy(&catalog_view(cat), &policy_views(policies), defaults);
    let dups = duplicate_registrations(cat);
    let ready = if let Some(missing) = &resolution.missing_reference {
        Desired::new(
            "Ready",
            Status::False,
            "ReconcilePolicyNotFound",
            format!(
                "spec.reconcilePolicyRef names ReconcilePolicy {missing:?}, which does not exist in this namespace; periodic checks are off until it exists or the reference is removed"
            ),
        )
    } else if !dups.is_empty() {
        Desired::new(
            "Ready",
            Status::False,
            "DuplicateRegistration",
            format!("{}; remove the repeated entries", dups.join("; ")),
        )
    } else if reachable.status == Status::False {
        Desired::new(
            "Ready",
            Status::False,
            reachable.reason.clone(),
            reachable.message.clone(),
        )
    } else {
        Desired::new(
            "Ready",
            Status::True,
            "Configured",
            format!("effective policy: {}", describe(&resolution.effective)),
        )
    };
    let kept = previous
        .conditions
        .iter()
        .filter(|c| !["Ready", "Reachable", "RegistrationsCurrent"].contains(&c.type_.as_str()))
        .cloned();
    let mut conds = conditions::merge(
        &previous.conditions,
        vec![ready, reachable],
        generation,
        now,
    );
    conds.extend(kept);
    let managed = cat.spec.provider == Provider::Managed;
    if managed {
        conds.extend(conditions::merge(
            &previous.conditions,
            vec![Desired::new(
                "RegistrationsCurrent",
                Status::True,
                "Managed",
                "a managed catalog's registrations are its own and never probed",
            )],
            generation,
            now,
        ));
    } else {
        // Keep the previous RegistrationsCurrent for `with_states` to merge against.
        conds.extend(conditions::find(&previous.conditions, "RegistrationsCurrent").cloned());
    }
    let base = CatalogStatus {
        observed_generation: generation,
        conditions: conds,
        effective_policy: Some(resolution.effective),
        registration_count: Some(cat.spec.registrations.len() as i64),
        ..previous.clone()
    };
    if managed {
        return CatalogStatus {
            registrations: vec![],
            stale_count: None,
            ..base
        };
    }
    // Spec edits show at once: new entries are Pending, deleted ones leave status.
    let states = crate::reconcile::plan::align(&cat.spec.registrations, &previous.registrations);
    super::check::with_states(base, states, generation, now)
}

fn describe(p: &crate::crd::catalog::EffectivePolicy) -> String {
    let name = p.name.as_deref().unwrap_or("operator defaults");
    format!(
        "{name} ({:?}, every {}, {})",
        p.mode,
        p.interval,
        if p.enabled { "enabled" } else { "disabled" }
    )
}

/// The `Reachable=True` verdict; one text for connection checks, rounds and source visits, so
/// alternating between them writes nothing.
pub fn connected(cat: &Catalog) -> Desired {
    let endpoint = cat
        .spec
        .connection
        .as_ref()
        .map(|c| format!("{}:{}", c.host, c.port))
        .unwrap_or_default();
    Desired::new(
        "Reachable",
        Status::True,
        "Connected",
        format!("connected to {endpoint}"),
    )
}

/// Key of a Catalog in the provider registry.
pub fn registry_key(cat: &Catalog) -> String {
    format!("{}/{}", cat.namespace().unwrap_or_default(), cat.name_any())
}

/// Why a probed catalog has no usable provider: a condition reason and a message naming the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoProvider {
    pub reason: String,
    pub message: String,
}

/// The provider of a probed (non-managed) Catalog: reads its Secret (get only) and reuses or
/// rebuilds its pool. Shared by the Catalog and SemanticModel controllers.
pub async fn provider_for(
    ctx: &Context,
    cat: &Catalog,
) -> Result<Result<(Arc<AnyProvider>, String), NoProvider>, Error> {
    provider_from(&ctx.client, &ctx.providers, cat).await
}

/// [`provider_for`] without a controller context (the read API uses it too).
pub async fn provider_from(
    client: &kube::Client,
    providers: &crate::catalog::registry::Registry,
    cat: &Catalog,
) -> Result<Result<(Arc<AnyProvider>, String), NoProvider>, Error> {
    let no = |reason: &str, message: String| {
        Ok(Err(NoProvider {
            reason: reason.into(),
            message,
        }))
    };
    if cat.spec.provider == Provider::Managed {
        return no("Managed", "managed catalogs have no external system".into());
    }
    let Some(connection) = &cat.spec.connection else {
        return no(
            "Misconfigured",
            "spec.connection is required unless provider is managed".into(),
        );
    };
    let ns = cat.namespace().ok_or(Error::MissingNamespace)?;
    let secret_name = &connection.credentials_secret_ref.name;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let Some(secret) = secrets.get_opt(secret_name).await? else {
        return no(
            "SecretNotFound",
            format!(
                "Secret {secret_name:?} does not exist in namespace {ns:?}; create it or fix spec.connection.credentialsSecretRef.name"
            ),
        );
    };
    let settings = match settings_from(connection, &secret.data.unwrap_or_default()) {
        Ok(s) => s,
        Err(message) => return no("CredentialsInvalid", message),
    };
    let endpoint = format!("{}:{}", settings.host, settings.port);
    match providers.provider_for(&registry_key(cat), cat.spec.provider, settings) {
        Ok(p) => Ok(Ok((p, endpoint))),
        Err(e) => no(e.category(), format!("{endpoint}: {e}")),
    }
}

/// Checks the connection of a probed catalog: Secret, settings, pool, `SELECT 1`. Every failure
/// becomes a `Reachable=False` verdict with a category reason and a message without secrets.
async fn check_reachable(ctx: &Context, cat: &Catalog) -> Result<Desired, Error> {
    if cat.spec.provider == Provider::Managed {
        return Ok(Desired::new(
            "Reachable",
            Status::True,
            "Managed",
            "managed catalogs have no external system to reach",
        ));
    }
    let (provider, endpoint) = match provider_for(ctx, cat).await? {
        Ok(p) => p,
        Err(no) => {
            return Ok(Desired::new(
                "Reachable",
                Status::False,
                no.reason,
                no.message,
            ));
        }
    };
    Ok(match provider.check_connection().await {
        Ok(()) => connected(cat),
        Err(e) => Desired::new(
            "Reachable",
            Status::False,
            e.category(),
            format!("{endpoint}: {e}"),
        ),
    })
}

pub async fn reconcile(cat: Arc<Catalog>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.leader.is_leading() {
        return Ok(Action::await_change());
    }
    let ns = cat.namespace().ok_or(Error::MissingNamespace)?;
    let hosted = hosted_models(&ctx.stores.models_in(&ns), &cat.name_any());
    if let Some(action) = protect(&ctx, &cat, &hosted).await? {
        return Ok(action);
    }
    let policies = ctx.stores.policies_in(&ns);
    let managed = cat.spec.provider == Provider::Managed;
    let settings = check::round_settings(&cat, &policies, &ctx.defaults);
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
            let round = check::run_round(&ctx, &cat, trigger, check::Act::Record).await?;
            return Ok(Action::requeue(until(round.next_check_at.as_ref()).min(
                if round.result == CheckResult::CatalogUnreachable {
                    RECHECK_UNREACHABLE
                } else {
                    RECHECK_CONNECTED
                },
            )));
        }
        Visit::Schedule(at) | Visit::Wait(at) => Some(Time(at)),
        Visit::Off => None,
    };
    let key = registry_key(&cat);
    // Models bind sources here (the model controller notes it at once; the cache may lag).
    let sources_only = !managed
        && !periodic.enabled
        && (ctx.checks.is_bound(&key)
            || !check::bound_sources(&ctx, &ns, &cat.name_any()).is_empty());
    let mut wake = RECHECK_CONNECTED;
    let round_failed = previous.last_check.as_ref().map(|l| l.result)
        == Some(CheckResult::CatalogUnreachable)
        && conditions::find(&previous.conditions, "Reachable").is_some_and(|c| c.status == "False");
    let reachable = if managed {
        check_reachable(&ctx, &cat).await?
    } else if round_failed {
        // A passing `SELECT 1` proves nothing about probes that failed (e.g. a revoked
        // privilege): until the next recorded round, recovery is judged by a dry-run round.
        check::run_round(&ctx, &cat, Trigger::Periodic, check::Act::DryRun)
            .await?
            .reachable
    } else if sources_only {
        match ctx.checks.source_visit_due(&key, ctx.drift_interval) {
            None => check::visit_sources(&ctx, &cat).await?,
            Some(left) => {
                wake = wake.min(left);
                check_reachable(&ctx, &cat).await?
            }
        }
    } else {
        check_reachable(&ctx, &cat).await?
    };
    if sources_only && let Some(left) = ctx.checks.next_source_visit(&key) {
        wake = wake.min(left);
    }
    let connected = reachable.status == Status::True;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let before = previous
        .conditions
        .iter()
        .find(|c| c.type_ == "Reachable")
        .cloned();
    let desired = CatalogStatus {
        next_check_at: next_check_at.clone(),
        ..desired_status(&cat, &policies, &ctx.defaults, reachable, &now)
    };
    let after = conditions::find(&desired.conditions, "Reachable").cloned();
    if write_status_if_changed(&ctx, CONTROLLER, cat.as_ref(), desired).await?
        && let Some(after) = after
        && before
            .as_ref()
            .is_none_or(|b| b.status != after.status || b.reason != after.reason)
    {
        let type_ = if connected {
            EventType::Normal
        } else {
            EventType::Warning
        };
        ctx.publish(
            cat.as_ref(),
            type_,
            &after.reason,
            "CheckConnection",
            after.message.clone(),
        )
        .await;
    }
    // Re-check reachability (and pick up a rotated Secret) periodically; sooner while failing;
    // never later than the next round.
    let recheck = if connected {
        wake
    } else {
        RECHECK_UNREACHABLE.min(wake)
    };
    Ok(Action::requeue(until(next_check_at.as_ref()).min(recheck)))
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

/// What the protection finalizer list should be: present while models live here.
pub fn wanted_finalizers(current: &[String], hosting: bool) -> Option<Vec<String>> {
    let has = current.iter().any(|f| f == CATALOG_PROTECTION_FINALIZER);
    match (hosting, has) {
        (true, false) => Some(
            current
                .iter()
                .cloned()
                .chain([CATALOG_PROTECTION_FINALIZER.to_string()])
                .collect(),
        ),
        (false, true) => Some(
            current
                .iter()
                .filter(|f| *f != CATALOG_PROTECTION_FINALIZER)
                .cloned()
                .collect(),
        ),
        _ => None,
    }
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
            Err(kube::Error::Api(s)) if s.code == 409 => return Err(Error::Conflict),
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
        let message = format!(
            "deletion waits until the SemanticModels hosted here are deleted: {}",
            hosted.join(", ")
        );
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let previous = cat.status.clone().unwrap_or_default();
        let conds = conditions::merge(
            &previous.conditions,
            vec![Desired::new("Ready", Status::False, "Deleting", message)],
            cat.metadata.generation,
            &now,
        );
        let kept = previous
            .conditions
            .iter()
            .filter(|c| c.type_ != "Ready")
            .cloned();
        let status = CatalogStatus {
            conditions: conds.into_iter().chain(kept).collect(),
            ..previous
        };
        write_status_if_changed(ctx, CONTROLLER, cat, status).await?;
        return Ok(Some(Action::await_change()));
    }
    Ok(None)
}

/// How often a reachable catalog's connection is re-checked.
pub const RECHECK_CONNECTED: Duration = Duration::from_secs(5 * 60);
/// How often an unreachable catalog is retried.
pub const RECHECK_UNREACHABLE: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::CatalogSpec;
    use crate::crd::catalog::PolicySource;

    fn catalog(yaml: &str) -> Catalog {
        let spec: CatalogSpec = serde_yaml::from_str(yaml).unwrap();
        let mut c = Catalog::new("hr", spec);
        c.metadata.namespace = Some("ns".into());
        c.metadata.generation = Some(4);
        c
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1000).unwrap())
    }

    fn reachable() -> Desired {
        Desired::new("Reachable", Status::True, "Managed", "")
    }

    #[test]
    fn a_catalog_without_policies_shows_the_operator_defaults() {
        let c = catalog("provider: managed\nregistrations: [{kind: Schema, name: semantic}]");
        let s = desired_status(&c, &[], &OperatorDefaults::default(), reachable(), &now());
        let p = s.effective_policy.unwrap();
        assert_eq!(
            (p.source, p.enabled),
            (PolicySource::OperatorDefault, false)
        );
        assert!(conditions::is_true(&s.conditions, "Ready"));
        assert_eq!(s.registration_count, Some(1));
    }

    #[test]
    fn repeated_registrations_are_named_by_path() {
        let c = catalog(
            "provider: managed\nregistrations: [{kind: Schema, name: a}, {kind: Schema, name: b}, {kind: Schema, name: a}]",
        );
        let s = desired_status(&c, &[], &OperatorDefaults::default(), reachable(), &now());
        let ready = conditions::find(&s.conditions, "Ready").unwrap();
        assert_eq!(ready.reason, "DuplicateRegistration");
        assert!(
            ready
                .message
                .contains("spec.registrations[2] repeats spec.registrations[0]"),
            "{}",
            ready.message
        );
    }

    #[test]
    fn a_missing_referenced_policy_is_reported() {
        let c = catalog("provider: managed\nreconcilePolicyRef: {name: strict}");
        let s = desired_status(&c, &[], &OperatorDefaults::default(), reachable(), &now());
        assert_eq!(
            conditions::find(&s.conditions, "Ready").unwrap().reason,
            "ReconcilePolicyNotFound"
        );
        assert!(!s.effective_policy.unwrap().enabled);
    }

    #[test]
    fn conditions_owned_by_other_writers_are_kept() {
        let mut c = catalog("provider: managed");
        let foreign = conditions::merge(
            &[],
            vec![Desired::new("Audited", Status::True, "ByPlatformTeam", "")],
            Some(4),
            &now(),
        );
        c.status = Some(CatalogStatus {
            conditions: foreign.clone(),
            ..Default::default()
        });
        let s = desired_status(&c, &[], &OperatorDefaults::default(), reachable(), &now());
        assert!(s.conditions.contains(&foreign[0]));
    }

    #[test]
    fn an_unreachable_catalog_is_not_ready_with_the_failure_category() {
        let c = catalog("provider: managed");
        let verdict = Desired::new(
            "Reachable",
            Status::False,
            "AuthFailed",
            "db:5432: authentication failed",
        );
        let s = desired_status(&c, &[], &OperatorDefaults::default(), verdict, &now());
        let ready = conditions::find(&s.conditions, "Ready").unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "AuthFailed")
        );
        assert_eq!(
            conditions::find(&s.conditions, "Reachable").unwrap().reason,
            "AuthFailed"
        );
    }

    #[test]
    fn the_protection_finalizer_follows_hosting_and_leaves_others_alone() {
        let f = CATALOG_PROTECTION_FINALIZER.to_string();
        let other = "example.com/keep".to_string();
        assert_eq!(wanted_finalizers(&[], true), Some(vec![f.clone()]));
        assert_eq!(
            wanted_finalizers(std::slice::from_ref(&other), true),
            Some(vec![other.clone(), f.clone()])
        );
        assert_eq!(
            wanted_finalizers(&[other.clone(), f.clone()], false),
            Some(vec![other.clone()])
        );
        assert_eq!(wanted_finalizers(std::slice::from_ref(&f), true), None);
        assert_eq!(wanted_finalizers(&[other], false), None);
    }
}

//! Stale-registration rounds (DESIGN 5.4), the I/O half: settle the policy, plan, probe, classify
//! (pure, in `reconcile`), then one status write, Events, metrics, a summary log line and the
//! drift feed for models. Used by the Catalog controller (periodic and annotation triggers) and
//! the read API (reports and on-demand reconcile).
//!
//! Never delete on doubt: any infrastructure failure anywhere in the round leaves every state as
//! it was and removes nothing. A removal is a state in status, so it happens exactly when that
//! one status write commits; Events are published only after it did.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::events::EventType;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::Semaphore;

use super::catalog::{provider_for, registry_key};
use super::status::write_status_if_changed;
use super::{Context, Error};
use crate::catalog::ProbeTarget;
use crate::catalog::observe::{ProbeLimits, observe};
use crate::crd::catalog::{
    CheckResult, LastCheck, Provider, RegistrationState, RegistrationStatus,
};
use crate::crd::conditions::{self, Desired, Status};
use crate::crd::policy::{PolicyMode, RegistrationKind};
use crate::crd::{Catalog, CatalogStatus, ReconcilePolicy};
use crate::policy::schedule::{Periodic, Trigger, after_round, first_visit, jittered};
use crate::reconcile::plan::{self, Observations, StaleReport};
use crate::reconcile::round::{self, Transition};
use crate::telemetry::{CatalogLabels, RoundLabels, StateLabels};

/// Events published per round at most; the rest are summed up in one more Event (a round over
/// 5,000 registrations must not flood the API server).
const EVENTS_PER_ROUND: usize = 20;

/// Who reports what rounds do (DESIGN 5.4: removals are reported by `semops-reconciler`).
pub const REPORTER: &str = "semops-reconciler";

/// The policy settings a round of one Catalog runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundSettings {
    /// The ReconcilePolicy's name; `None` for the operator defaults.
    pub policy: Option<String>,
    pub mode: PolicyMode,
    pub kinds: Vec<RegistrationKind>,
    pub limits: ProbeLimits,
    pub max_removals: usize,
    pub periodic: Periodic,
}

impl RoundSettings {
    pub fn policy_label(&self) -> String {
        self.policy
            .clone()
            .unwrap_or_else(|| "operator defaults".into())
    }
}

fn go_duration(text: &str, fallback: Duration) -> Duration {
    crate::policy::duration::parse(text).unwrap_or(fallback)
}

/// The full settings of the Catalog's effective policy (the status shows only a summary).
pub fn round_settings(
    cat: &Catalog,
    policies: &[Arc<ReconcilePolicy>],
    defaults: &crate::policy::OperatorDefaults,
) -> RoundSettings {
    let resolution = crate::policy::effective_policy(
        &super::catalog::catalog_view(cat),
        &super::catalog::policy_views(policies),
        defaults,
    );
    let e = resolution.effective;
    let interval = go_duration(&e.interval, Duration::from_secs(3600));
    let spec = e
        .name
        .as_deref()
        .and_then(|n| policies.iter().find(|p| p.name_any() == n))
        .map(|p| p.spec.clone());
    match spec {
        Some(s) => RoundSettings {
            policy: e.name,
            mode: s.mode,
            kinds: s.kinds,
            limits: ProbeLimits {
                timeout: go_duration(&s.probe.timeout, Duration::from_secs(5)),
                concurrency: s.probe.concurrency.max(1) as usize,
                batch_size: s.probe.batch_size.max(1) as usize,
            },
            max_removals: s.max_removals_per_round.max(0) as usize,
            periodic: Periodic {
                enabled: e.enabled,
                interval,
                jitter: s.jitter,
            },
        },
        None => RoundSettings {
            policy: None,
            mode: e.mode,
            kinds: vec![
                RegistrationKind::Schema,
                RegistrationKind::Table,
                RegistrationKind::View,
                RegistrationKind::Topic,
            ],
            limits: ProbeLimits::default(),
            max_removals: 50,
            periodic: Periodic {
                // A missing referenced policy keeps periodic checks off (never guess a policy).
                enabled: e.enabled,
                interval,
                jitter: 0.2,
            },
        },
    }
}

/// What the last round (or source visit) learned about a catalog, for the models bound to it.
#[derive(Clone, Debug)]
pub struct SourceFeed {
    pub at: Instant,
    /// `Err(message)` when the catalog could not answer.
    pub seen: Result<Arc<Observations>, String>,
}

/// Round bookkeeping shared by the controller and the read API.
pub struct Checks {
    /// Global bound on concurrent rounds (DESIGN 5.3).
    slots: Semaphore,
    /// One round per catalog at a time (periodic, annotation and API rounds serialize).
    catalog_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    feeds: Mutex<HashMap<String, SourceFeed>>,
    /// Next source-only visit per catalog while periodic checks are off (in memory: a restart
    /// draws a fresh first visit, so it never causes a storm).
    source_visits: Mutex<HashMap<String, Instant>>,
    /// Catalogs known to have model-bound sources in this process.
    bound: Mutex<std::collections::HashSet<String>>,
    reporter: Reporter,
}

/// Publishes round Events as `semops-reconciler`. Each Event is created on its own (kube's
/// Recorder folds Events with the same reason into one series that keeps only the first note,
/// which would hide every registration after the first).
pub struct Reporter {
    pub client: kube::Client,
    pub instance: String,
}

impl Checks {
    pub fn new(max_rounds: usize, reporter: Reporter) -> Self {
        Self {
            slots: Semaphore::new(max_rounds.max(1)),
            catalog_locks: Mutex::default(),
            feeds: Mutex::default(),
            source_visits: Mutex::default(),
            bound: Mutex::default(),
            reporter,
        }
    }

    fn lock_for(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.catalog_locks
            .lock()
            .expect("lock map poisoned")
            .entry(key.to_string())
            .or_default()
            .clone()
    }

    pub fn feed(&self, key: &str) -> Option<SourceFeed> {
        self.feeds
            .lock()
            .expect("feed map poisoned")
            .get(key)
            .cloned()
    }

    fn set_feed(&self, key: &str, seen: Result<Arc<Observations>, String>) {
        self.feeds.lock().expect("feed map poisoned").insert(
            key.to_string(),
            SourceFeed {
                at: Instant::now(),
                seen,
            },
        );
    }

    /// Forgets a deleted catalog.
    pub fn forget(&self, key: &str) {
        self.feeds.lock().expect("feed map poisoned").remove(key);
        self.source_visits
            .lock()
            .expect("visit map poisoned")
            .remove(key);
        self.catalog_locks
            .lock()
            .expect("lock map poisoned")
            .remove(key);
    }

    /// Whether a source-only visit is due; the first call draws a uniform first visit.
    pub fn source_visit_due(&self, key: &str, interval: Duration) -> Option<Duration> {
        let mut map = self.source_visits.lock().expect("visit map poisoned");
        let now = Instant::now();
        let at = *map
            .entry(key.to_string())
            .or_insert_with(|| now + first_visit(interval, rand::random()));
        if at <= now {
            map.insert(
                key.to_string(),
                now + jittered(interval, 0.2, rand::random()),
            );
            None
        } else {
            Some(at - now)
        }
    }

    /// Notes that a model binds sources of catalog `key`; true the first time in this process
    /// (the catalog then needs one reconcile to start its source visits).
    pub fn note_bound(&self, key: &str) -> bool {
        self.bound
            .lock()
            .expect("bound set poisoned")
            .insert(key.to_string())
    }

    pub fn is_bound(&self, key: &str) -> bool {
        self.bound.lock().expect("bound set poisoned").contains(key)
    }

    pub fn next_source_visit(&self, key: &str) -> Option<Duration> {
        let map = self.source_visits.lock().expect("visit map poisoned");
        map.get(key)
            .map(|at| at.saturating_duration_since(Instant::now()))
    }
}

/// How a round may act.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// Record states, publish Events, remove per policy (leader only).
    Record,
    /// Report only: compute and return, change nothing anywhere.
    DryRun,
}

/// What a round did.
#[derive(Clone, Debug)]
pub struct RoundReport {
    pub report: StaleReport,
    pub result: CheckResult,
    /// The `nextCheckAt` recorded (Record rounds).
    pub next_check_at: Option<Time>,
    /// What the round says about reachability.
    pub reachable: Desired,
}

/// Distinct `(target, id)` of the sources bound by accepted models to `catalog`.
pub fn bound_sources(ctx: &Context, ns: &str, catalog: &str) -> Vec<(ProbeTarget, String)> {
    let mut v: Vec<(ProbeTarget, String)> = ctx
        .stores
        .models_in(ns)
        .iter()
        .flat_map(|m| m.status.iter().flat_map(|s| &s.source_associations))
        .filter(|a| a.source.catalog == catalog)
        .map(|a| (crate::model::drift::target_of(a), a.id.clone()))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The observation of one catalog: `Err((category, message))` on any infrastructure failure.
async fn look(
    ctx: &Context,
    cat: &Catalog,
    targets: &[plan::Target],
    limits: ProbeLimits,
) -> Result<Result<Observations, (String, String)>, Error> {
    let (provider, endpoint) = match provider_for(ctx, cat).await? {
        Ok(p) => p,
        Err(no) => return Ok(Err((no.reason, no.message))),
    };
    let metrics = &ctx.metrics.checks;
    let on_probe = |d: Duration| {
        metrics.probes.inc();
        metrics.probe_latency.observe(d.as_secs_f64());
    };
    Ok(observe(provider.as_ref(), targets, limits, &on_probe)
        .await
        .map_err(|e| (e.category().to_string(), format!("{endpoint}: {e}"))))
}

/// A source-only visit (periodic checks off): probes the model-bound sources and feeds drift.
/// Changes no Catalog state. Returns the connection verdict it saw.
pub async fn visit_sources(ctx: &Context, cat: &Catalog) -> Result<Desired, Error> {
    let key = registry_key(cat);
    let ns = cat.namespace().unwrap_or_default();
    let sources = bound_sources(ctx, &ns, &cat.name_any());
    let targets = plan::plan(&[], &[], &[], &sources).targets;
    let _permit = ctx.checks.slots.acquire().await.expect("never closed");
    let seen = look(ctx, cat, &targets, ProbeLimits::default()).await?;
    tracing::debug!(catalog = %key, sources = targets.len(), answered = seen.is_ok(), "source visit");
    Ok(feed_models(ctx, cat, &key, seen.map(Arc::new)))
}

/// Stores what a catalog answered for its bound sources and requeues the models using it.
fn feed_models(
    ctx: &Context,
    cat: &Catalog,
    key: &str,
    seen: Result<Arc<Observations>, (String, String)>,
) -> Desired {
    let verdict = match &seen {
        Ok(_) => super::catalog::connected(cat),
        Err((reason, message)) => {
            Desired::new("Reachable", Status::False, reason.clone(), message.clone())
        }
    };
    ctx.checks.set_feed(
        key,
        seen.map_err(|(reason, message)| format!("{reason}: {message}")),
    );
    if let Some(t) = &ctx.triggers {
        let name = cat.name_any();
        t.requeue_models(
            ctx.stores
                .models_in(&cat.namespace().unwrap_or_default())
                .iter()
                .filter(|m| {
                    m.status
                        .iter()
                        .flat_map(|s| &s.source_associations)
                        .any(|a| a.source.catalog == name)
                })
                .map(|m| ObjectRef::from_obj(m.as_ref())),
        );
    }
    verdict
}

/// Runs one round of `cat` now. `Act::Record` needs leadership (the status writer refuses
/// otherwise); `Act::DryRun` works on any replica and writes nothing.
pub async fn run_round(
    ctx: &Context,
    cat: &Catalog,
    trigger: Trigger,
    act: Act,
) -> Result<RoundReport, Error> {
    let key = registry_key(cat);
    let lock = ctx.checks.lock_for(&key);
    let _one_per_catalog = lock.lock().await;
    let _permit = ctx.checks.slots.acquire().await.expect("never closed");
    ctx.metrics.checks.rounds_in_flight.inc();
    let result = round_inner(ctx, cat, trigger, act).await;
    ctx.metrics.checks.rounds_in_flight.dec();
    result
}

async fn round_inner(
    ctx: &Context,
    cat: &Catalog,
    trigger: Trigger,
    act: Act,
) -> Result<RoundReport, Error> {
    let ns = cat.namespace().ok_or(Error::MissingNamespace)?;
    let name = cat.name_any();
    let key = registry_key(cat);
    let policies = ctx.stores.policies_in(&ns);
    let settings = round_settings(cat, &policies, &ctx.defaults);
    let started = Time(k8s_openapi::jiff::Timestamp::now());
    let clock = Instant::now();
    let previous = cat.status.clone().unwrap_or_default();
    let aligned = plan::align(&cat.spec.registrations, &previous.registrations);

    if cat.spec.provider == Provider::Managed {
        let report = plan::report(&name, &[], false);
        if act == Act::Record {
            let status = CatalogStatus {
                last_check: Some(last_check(
                    (&started, &started),
                    &trigger,
                    CheckResult::Skipped,
                    0,
                    (0, 0, 0),
                )),
                observed_check_request: answered(&trigger, &previous),
                ..super::catalog::desired_status(
                    cat,
                    &policies,
                    &ctx.defaults,
                    managed_reachable(),
                    &started,
                )
            };
            write_status_if_changed(ctx, super::catalog::CONTROLLER, cat, status).await?;
            count_round(ctx, &ns, &name, CheckResult::Skipped);
        }
        return Ok(RoundReport {
            report,
            result: CheckResult::Skipped,
            next_check_at: None,
            reachable: managed_reachable(),
        });
    }

    let sources = bound_sources(ctx, &ns, &name);
    let round_plan = plan::plan(&cat.spec.registrations, &aligned, &settings.kinds, &sources);
    let seen = look(ctx, cat, &round_plan.targets, settings.limits).await?;
    let finished = Time(k8s_openapi::jiff::Timestamp::now());
    let probed = round_plan.targets.len() as i64;

    let (states, outcome, reachable) = match &seen {
        Err((reason, message)) => (
            aligned.clone(),
            None,
            Desired::new("Reachable", Status::False, reason.clone(), message.clone()),
        ),
        Ok(obs) => {
            let prev: Vec<RegistrationStatus> = round_plan
                .checked
                .iter()
                .map(|&i| aligned[i].clone())
                .collect();
            let answers: Vec<round::Observation> = round_plan
                .checked
                .iter()
                .map(|&i| {
                    obs.of_registration(&cat.spec.registrations[i], &aligned[i])
                        .expect("every checked registration was probed")
                })
                .collect();
            let mode = match act {
                Act::Record => settings.mode,
                Act::DryRun => PolicyMode::ReportOnly,
            };
            let outcome = round::classify(&prev, &answers, mode, settings.max_removals, &finished);
            let mut states = aligned.clone();
            for (slot, &i) in round_plan.checked.iter().enumerate() {
                states[i] = outcome.states[slot].clone();
            }
            (states, Some(outcome), super::catalog::connected(cat))
        }
    };
    let unreachable = seen.is_err();
    let result = if unreachable {
        CheckResult::CatalogUnreachable
    } else {
        CheckResult::Completed
    };
    let report = plan::report(&name, &states, unreachable);
    if act == Act::DryRun {
        return Ok(RoundReport {
            report,
            result,
            next_check_at: None,
            reachable,
        });
    }

    let counts = outcome
        .as_ref()
        .map(|o| (o.stale as i64, o.renamed as i64, o.removed as i64))
        .unwrap_or_default();
    // While failures repeat, the wait doubles (from the last failed round's wait).
    let previous_retry = previous
        .last_check
        .as_ref()
        .filter(|l| l.result == CheckResult::CatalogUnreachable)
        .and_then(|l| Some((l.finished_at.as_ref()?, previous.next_check_at.as_ref()?)))
        .and_then(|(done, next)| Duration::try_from(done.0.duration_until(next.0)).ok());
    let next_check_at = after_round(
        settings.periodic,
        finished.0,
        unreachable,
        previous_retry,
        rand::random(),
    )
    .map(Time);
    let base =
        super::catalog::desired_status(cat, &policies, &ctx.defaults, reachable.clone(), &finished);
    let status = CatalogStatus {
        last_check: Some(last_check(
            (&started, &finished),
            &trigger,
            result,
            probed,
            counts,
        )),
        next_check_at: next_check_at.clone(),
        observed_check_request: answered(&trigger, &previous),
        ..with_states(base, states.clone(), cat.metadata.generation, &finished)
    };
    let before = conditions::find(&previous.conditions, "Reachable").cloned();
    write_status_if_changed(ctx, super::catalog::CONTROLLER, cat, status).await?;

    // Committed: now tell people, count, and feed the models.
    count_round(ctx, &ns, &name, result);
    set_state_gauges(ctx, &ns, &name, &states);
    if before
        .as_ref()
        .is_none_or(|b| b.status != reachable.status.as_str() || b.reason != reachable.reason)
    {
        let type_ = if unreachable {
            EventType::Warning
        } else {
            EventType::Normal
        };
        ctx.publish(
            cat,
            type_,
            &reachable.reason,
            "CheckConnection",
            reachable.message.clone(),
        )
        .await;
    }
    if let Some(o) = &outcome {
        publish_transitions(
            ctx,
            cat,
            &settings,
            &round_plan.checked,
            &states,
            &o.transitions,
        )
        .await;
    }
    let removed = counts.2;
    tracing::info!(
        catalog = %key,
        trigger = %trigger,
        result = ?result,
        policy = %settings.policy_label(),
        mode = ?settings.mode,
        scanned = probed,
        unreachable = unreachable as u8,
        stale = counts.0,
        renamed = counts.1,
        removals_attempted = removed,
        removals_succeeded = removed,
        took_ms = clock.elapsed().as_millis() as u64,
        "check round"
    );
    feed_models(ctx, cat, &key, seen.map(Arc::new));
    Ok(RoundReport {
        report,
        result,
        next_check_at,
        reachable,
    })
}

fn managed_reachable() -> Desired {
    Desired::new(
        "Reachable",
        Status::True,
        "Managed",
        "managed catalogs have no external system to reach",
    )
}

fn answered(trigger: &Trigger, previous: &CatalogStatus) -> Option<String> {
    match trigger {
        Trigger::Annotation(token) => Some(token.clone()),
        _ => previous.observed_check_request.clone(),
    }
}

fn last_check(
    (started, finished): (&Time, &Time),
    trigger: &Trigger,
    result: CheckResult,
    probed: i64,
    (stale, renamed, removed): (i64, i64, i64),
) -> LastCheck {
    LastCheck {
        started_at: started.clone(),
        finished_at: Some(finished.clone()),
        trigger: trigger.to_string(),
        result,
        probed,
        stale,
        renamed,
        removed,
    }
}

/// The registration part of a Catalog status: states, the stale count and
/// `RegistrationsCurrent`. Shared with the controller's non-round path so spec edits show at once.
pub fn with_states(
    base: CatalogStatus,
    states: Vec<RegistrationStatus>,
    generation: Option<i64>,
    now: &Time,
) -> CatalogStatus {
    let current = plan::registrations_condition(&states);
    let mut conds: Vec<_> = base
        .conditions
        .iter()
        .filter(|c| c.type_ != "RegistrationsCurrent")
        .cloned()
        .collect();
    conds.extend(conditions::merge(
        &base.conditions,
        vec![current],
        generation,
        now,
    ));
    CatalogStatus {
        stale_count: Some(
            states
                .iter()
                .filter(|s| s.state == RegistrationState::Stale)
                .count() as i64,
        ),
        registrations: states,
        conditions: conds,
        ..base
    }
}

fn count_round(ctx: &Context, ns: &str, catalog: &str, result: CheckResult) {
    ctx.metrics
        .checks
        .rounds
        .get_or_create(&RoundLabels {
            namespace: ns.into(),
            catalog: catalog.into(),
            result: format!("{result:?}"),
        })
        .inc();
}

fn set_state_gauges(ctx: &Context, ns: &str, catalog: &str, states: &[RegistrationStatus]) {
    for state in [
        RegistrationState::Pending,
        RegistrationState::Live,
        RegistrationState::Stale,
        RegistrationState::Renamed,
        RegistrationState::Removed,
    ] {
        let n = states.iter().filter(|s| s.state == state).count() as i64;
        ctx.metrics
            .checks
            .registrations
            .get_or_create(&StateLabels {
                namespace: ns.into(),
                catalog: catalog.into(),
                state: format!("{state:?}"),
            })
            .set(n);
    }
}

/// One Event per transition (capped per round), from `semops-reconciler`.
async fn publish_transitions(
    ctx: &Context,
    cat: &Catalog,
    settings: &RoundSettings,
    checked: &[usize],
    states: &[RegistrationStatus],
    transitions: &[Transition],
) {
    let labels = CatalogLabels {
        namespace: cat.namespace().unwrap_or_default(),
        catalog: cat.name_any(),
    };
    let policy = settings.policy_label();
    let mut events = Vec::new();
    for t in transitions {
        let (type_, reason, index) = match t {
            Transition::BecameStale { index } => (EventType::Warning, "StaleRegistration", *index),
            Transition::Renamed { index, .. } => {
                ctx.metrics.checks.renamed.get_or_create(&labels).inc();
                (EventType::Normal, "RegistrationRenamed", *index)
            }
            Transition::Replaced { index } => (EventType::Warning, "RegistrationReplaced", *index),
            Transition::Removed { index } => {
                ctx.metrics.checks.removed.get_or_create(&labels).inc();
                (EventType::Normal, "RegistrationRemoved", *index)
            }
            Transition::Reappeared { index } => (EventType::Normal, "RegistrationRestored", *index),
        };
        let spec_index = checked[index];
        let s = &states[spec_index];
        let what = plan::describe(s);
        let note = match t {
            Transition::BecameStale { .. } => format!(
                "spec.registrations[{spec_index}] ({what}) does not exist in the catalog; policy {policy} ({:?})",
                settings.mode
            ),
            Transition::Renamed { to, .. } => format!(
                "spec.registrations[{spec_index}] ({what}) was renamed to {to}; its metadata is kept; update the name in spec"
            ),
            Transition::Replaced { .. } => format!(
                "spec.registrations[{spec_index}] ({what}) now names a different object (dropped and recreated); the new id is recorded"
            ),
            Transition::Removed { .. } => format!(
                "spec.registrations[{spec_index}] ({what}) removed by ReconcilePolicy {policy}: the object was dropped; delete the entry from spec"
            ),
            Transition::Reappeared { .. } => format!(
                "spec.registrations[{spec_index}] ({what}) exists again and is registered as new"
            ),
        };
        events.push((type_, reason, note));
    }
    let total = events.len();
    for (type_, reason, note) in events.into_iter().take(EVENTS_PER_ROUND) {
        publish_as_reconciler(ctx, cat, type_, reason, note).await;
    }
    if total > EVENTS_PER_ROUND {
        publish_as_reconciler(
            ctx,
            cat,
            EventType::Normal,
            "CheckRoundSummary",
            format!(
                "{} more registration change(s) this round; see status.registrations",
                total - EVENTS_PER_ROUND
            ),
        )
        .await;
    }
}

async fn publish_as_reconciler(
    ctx: &Context,
    cat: &Catalog,
    type_: EventType,
    reason: &str,
    note: String,
) {
    use k8s_openapi::api::events::v1::Event;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    use kube::Resource;
    let reporter = &ctx.checks.reporter;
    let now = k8s_openapi::jiff::Timestamp::now();
    let event = Event {
        action: Some("CheckRegistrations".into()),
        reason: Some(reason.into()),
        note: Some(note),
        event_time: Some(MicroTime(now)),
        regarding: Some(cat.object_ref(&())),
        metadata: ObjectMeta {
            namespace: cat.namespace(),
            // Like kube's Recorder (generateName must itself be a valid name, so no "x." form);
            // random bits keep Events of one round distinct.
            name: Some(format!(
                "{}.{:x}{:04x}",
                cat.name_any(),
                now.as_nanosecond(),
                rand::random::<u16>()
            )),
            ..Default::default()
        },
        reporting_controller: Some(REPORTER.into()),
        reporting_instance: Some(reporter.instance.clone()),
        type_: Some(
            match type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .into(),
        ),
        ..Default::default()
    };
    let api: kube::Api<Event> = kube::Api::namespaced(
        reporter.client.clone(),
        &cat.namespace().unwrap_or_default(),
    );
    match api.create(&Default::default(), &event).await {
        Ok(_) => {
            ctx.metrics.events_published.inc();
        }
        Err(e) => tracing::warn!(error = %e, reason, "could not publish event"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{CatalogSpec, ReconcilePolicySpec};
    use crate::policy::OperatorDefaults;

    fn catalog(yaml: &str) -> Catalog {
        let mut c = Catalog::new("hr", serde_yaml::from_str::<CatalogSpec>(yaml).unwrap());
        c.metadata.namespace = Some("ns".into());
        c
    }

    fn policy(name: &str, yaml: &str) -> Arc<ReconcilePolicy> {
        let mut p = ReconcilePolicy::new(
            name,
            serde_yaml::from_str::<ReconcilePolicySpec>(yaml).unwrap(),
        );
        p.metadata.namespace = Some("ns".into());
        Arc::new(p)
    }

    #[test]
    fn round_settings_come_from_the_effective_policy_or_safe_defaults() {
        let strict = policy(
            "strict",
            "{mode: AutoRemove, interval: 30m, jitter: 0.1, kinds: [Table], probe: {timeout: 2s, concurrency: 8, batchSize: 50}, maxRemovalsPerRound: 7}",
        );
        let s = round_settings(
            &catalog(
                "provider: postgresql\nconnection: {host: h, port: 1, credentialsSecretRef: {name: s}}",
            ),
            &[strict],
            &OperatorDefaults::default(),
        );
        assert_eq!(s.policy.as_deref(), Some("strict"));
        assert_eq!(
            (s.mode, s.kinds.as_slice(), s.max_removals),
            (PolicyMode::AutoRemove, &[RegistrationKind::Table][..], 7)
        );
        assert_eq!(
            s.limits,
            ProbeLimits {
                timeout: Duration::from_secs(2),
                concurrency: 8,
                batch_size: 50
            }
        );
        assert_eq!(
            s.periodic,
            Periodic {
                enabled: true,
                interval: Duration::from_secs(1800),
                jitter: 0.1
            }
        );

        let none = round_settings(
            &catalog("provider: managed"),
            &[],
            &OperatorDefaults::default(),
        );
        assert_eq!(
            (none.policy.as_deref(), none.mode, none.periodic.enabled),
            (None, PolicyMode::ReportOnly, false)
        );
        assert_eq!(none.policy_label(), "operator defaults");

        // A reference to a missing policy never falls back to another one that might remove.
        let auto = policy("auto", "{mode: AutoRemove}");
        let dangling = round_settings(
            &catalog("provider: managed\nreconcilePolicyRef: {name: gone}"),
            &[auto],
            &OperatorDefaults::default(),
        );
        assert!(!dangling.periodic.enabled);
        assert_eq!(dangling.mode, PolicyMode::ReportOnly);
    }
}

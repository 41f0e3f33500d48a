//! One check round as a pipeline: plan → observe → classify → status → commit → announce.
//! Only `observe` and `commit` talk to the outside; the steps between are pure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::{REACHABLE_FLIPS, RoundReport, announce, visit};
use crate::catalog::observe::Observations;
use crate::controller::names::CATALOG as CONTROLLER;
use crate::controller::writer::commit;
use crate::controller::{Context, Error};
use crate::crd::catalog::{CheckResult, LastCheck, Provider, RegistrationStatus};
use crate::crd::conditions::{Desired, Reason};
use crate::crd::policy::PolicyMode;
use crate::crd::{Catalog, CatalogStatus, ReconcilePolicy};
use crate::policy::schedule::{Trigger, after_round};
use crate::policy::settings::{RoundSettings, round_settings};
use crate::reconcile::Act;
use crate::reconcile::plan::{self, RoundPlan};
use crate::reconcile::round::{self, RoundOutcome};
use crate::reconcile::status::{connected, desired_status, managed_reachable, unreachable};

/// What the classification decided.
pub(super) struct Classified {
    /// Every declared registration's state after the round (spec order).
    pub states: Vec<RegistrationStatus>,
    /// `None` when the catalog could not answer (states are then unchanged).
    pub outcome: Option<RoundOutcome>,
    pub reachable: Desired,
}

impl Classified {
    pub fn result(&self) -> CheckResult {
        match self.outcome {
            Some(_) => CheckResult::Completed,
            None => CheckResult::CatalogUnreachable,
        }
    }
    /// (stale, renamed, removed) of this round.
    pub fn counts(&self) -> (i64, i64, i64) {
        self.outcome
            .as_ref()
            .map(|o| (o.stale as i64, o.renamed as i64, o.removed as i64))
            .unwrap_or_default()
    }
}

pub(super) async fn run(
    ctx: &Context,
    cat: &Catalog,
    trigger: Trigger,
    act: Act,
) -> Result<RoundReport, Error> {
    let ns = cat.namespace().ok_or(Error::MissingNamespace)?;
    let policies = ctx.stores.policies_in(&ns);
    let settings = round_settings(cat, &policies, &ctx.defaults);
    let started = now();
    let clock = Instant::now();
    if cat.spec.provider == Provider::Managed {
        return managed_round(ctx, cat, &policies, trigger, act, started).await;
    }

    // plan
    let previous = cat.status.clone().unwrap_or_default();
    let aligned = plan::align(&cat.spec.registrations, &previous.registrations);
    let sources = super::bound_sources(ctx, &ns, &cat.name_any());
    let round_plan = plan::plan(&cat.spec.registrations, &aligned, &settings.kinds, &sources);

    // observe
    let seen = visit::observe_catalog(ctx, cat, &round_plan.targets, settings.limits).await?;
    let finished = now();

    // classify
    let mode = match act {
        Act::Record => settings.mode,
        Act::DryRun => PolicyMode::ReportOnly,
    };
    let classified = classify(
        cat,
        &aligned,
        &round_plan,
        &seen,
        mode,
        settings.max_removals,
        &finished,
    );
    let result = classified.result();
    let report = plan::report(
        &cat.name_any(),
        &classified.states,
        result == CheckResult::CatalogUnreachable,
    );
    if act == Act::DryRun {
        return Ok(RoundReport {
            report,
            result,
            next_check_at: None,
            reachable: classified.reachable,
        });
    }

    // status
    let next_check_at = next_check(&settings, &previous, &classified, &finished);
    let probed = round_plan.targets.len() as i64;
    let status = CatalogStatus {
        last_check: Some(last_check(
            (&started, &finished),
            &trigger,
            result,
            probed,
            classified.counts(),
        )),
        next_check_at: next_check_at.clone(),
        observed_check_request: answered(&trigger, &previous),
        ..crate::reconcile::status::with_states(
            desired_status(
                cat,
                &policies,
                &ctx.defaults,
                classified.reachable.clone(),
                &finished,
            ),
            classified.states.clone(),
            cat.metadata.generation,
            &finished,
        )
    };

    // commit
    commit(ctx, CONTROLLER, cat, status, Some(REACHABLE_FLIPS)).await?;

    // announce (the round is committed: now tell people, count, and feed the models)
    announce::committed(
        ctx,
        cat,
        &settings,
        &round_plan.checked,
        &classified,
        &trigger,
        probed,
        clock.elapsed(),
    )
    .await;
    visit::feed_models(ctx, cat, seen.map(Arc::new));
    Ok(RoundReport {
        report,
        result,
        next_check_at,
        reachable: classified.reachable,
    })
}

/// Next state of every declared registration from the catalog's answers (pure). A failed
/// observation changes nothing.
fn classify(
    cat: &Catalog,
    aligned: &[RegistrationStatus],
    round_plan: &RoundPlan,
    seen: &Result<Observations, (Reason, String)>,
    mode: PolicyMode,
    max_removals: usize,
    finished: &Time,
) -> Classified {
    let obs = match seen {
        Err((reason, message)) => {
            return Classified {
                states: aligned.to_vec(),
                outcome: None,
                reachable: unreachable(reason.clone(), message.clone()),
            };
        }
        Ok(obs) => obs,
    };
    let prev: Vec<RegistrationStatus> = round_plan
        .checked
        .iter()
        .map(|&i| aligned[i].clone())
        .collect();
    let answers: Vec<round::Observation> = round_plan
        .checked
        .iter()
        .map(|&i| {
            plan::observation_of(obs, &cat.spec.registrations[i], &aligned[i])
                .expect("every checked registration was probed")
        })
        .collect();
    let outcome = round::classify(&prev, &answers, mode, max_removals, finished);
    let mut states = aligned.to_vec();
    for (slot, &i) in round_plan.checked.iter().enumerate() {
        states[i] = outcome.states[slot].clone();
    }
    Classified {
        states,
        outcome: Some(outcome),
        reachable: connected(cat),
    }
}

/// When the next round is due: the policy's period, or a retry that doubles while failures
/// repeat (from the last failed round's wait).
fn next_check(
    settings: &RoundSettings,
    previous: &CatalogStatus,
    classified: &Classified,
    finished: &Time,
) -> Option<Time> {
    let previous_retry = previous
        .last_check
        .as_ref()
        .filter(|l| l.result == CheckResult::CatalogUnreachable)
        .and_then(|l| Some((l.finished_at.as_ref()?, previous.next_check_at.as_ref()?)))
        .and_then(|(done, next)| Duration::try_from(done.0.duration_until(next.0)).ok());
    after_round(
        settings.periodic,
        finished.0,
        classified.outcome.is_none(),
        previous_retry,
        rand::random(),
    )
    .map(Time)
}

/// A managed catalog is never probed: its round only records that it was skipped.
async fn managed_round(
    ctx: &Context,
    cat: &Catalog,
    policies: &[Arc<ReconcilePolicy>],
    trigger: Trigger,
    act: Act,
    started: Time,
) -> Result<RoundReport, Error> {
    if act == Act::Record {
        let previous = cat.status.clone().unwrap_or_default();
        let status = CatalogStatus {
            last_check: Some(last_check(
                (&started, &started),
                &trigger,
                CheckResult::Skipped,
                0,
                (0, 0, 0),
            )),
            observed_check_request: answered(&trigger, &previous),
            ..desired_status(cat, policies, &ctx.defaults, managed_reachable(), &started)
        };
        commit(ctx, CONTROLLER, cat, status, None).await?;
        announce::count_round(ctx, cat, CheckResult::Skipped);
    }
    Ok(RoundReport {
        report: plan::report(&cat.name_any(), &[], false),
        result: CheckResult::Skipped,
        next_check_at: None,
        reachable: managed_reachable(),
    })
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// The annotation token a round answers (echoed so the same token never runs twice).
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

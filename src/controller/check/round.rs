//! One check round as a pipeline: plan → observe → classify → status → commit → announce.
//! Only `observe` and `commit` talk to the outside; the steps between are pure.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::classify::{Classified, classify};
use super::{REACHABLE_FLIPS, RoundReport, announce, visit};
use crate::catalog::{CatalogProvider, ProbeTarget};
use crate::controller::names::CATALOG as CONTROLLER;
use crate::controller::writer::commit;
use crate::controller::{Context, Error};
use crate::crd::catalog::{CheckResult, LastCheck, Provider};
use crate::crd::policy::PolicyMode;
use crate::crd::{ACCEPT_SERVER_ANNOTATION, Catalog, CatalogStatus, ReconcilePolicy};
use crate::policy::schedule::{Trigger, after_round};
use crate::policy::settings::{RoundSettings, round_settings};
use crate::reconcile::Act;
use crate::reconcile::plan::{self};
use crate::reconcile::round::{self, RemovalRule};
use crate::reconcile::server::{self};
use crate::reconcile::status::{desired_status, managed_reachable};

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
    let previous = cat.status.clone().unwrap_or_default();

    // connect: the provider (opted-in Secrets, allowed host) and which server answers
    let connection = visit::connect(ctx, cat).await?;
    let identity = match &connection {
        Ok(c) => visit::identify(c).await,
        Err(failure) => Err(failure.clone()),
    };
    let accepted = cat
        .annotations()
        .get(ACCEPT_SERVER_ANNOTATION)
        .map(String::as_str);
    let verdict = identity
        .as_ref()
        .ok()
        .map(|id| server::verdict(previous.server.as_deref(), id, accepted));

    // plan: names the catalog cannot have are never probed
    let aligned = plan::align(&cat.spec.registrations, &previous.registrations);
    let sources = super::bound_sources(ctx, &ns, &cat.name_any());
    let column_targets = super::column_sources(ctx, &ns, &cat.name_any());
    let invalid_name = |t: &ProbeTarget| {
        connection
            .as_ref()
            .ok()
            .and_then(|c| c.provider.invalid_name(t))
    };
    let round_plan = plan::plan(
        cat.spec.provider,
        &cat.spec.registrations,
        &aligned,
        &settings.kinds,
        &sources,
        &invalid_name,
    );

    // observe (ids recorded on another server mean nothing here: never looked up)
    let seen = match (&connection, &identity, &verdict) {
        (Ok(c), Ok(_), Some(v)) => {
            let targets = if v.same_server() {
                round_plan.targets.clone()
            } else {
                plan::without_ids(&round_plan.targets)
            };
            visit::observe_with(ctx, c, &targets, &column_targets, settings.limits).await
        }
        (Err(failure), _, _) | (_, Err(failure), _) => Err(failure.clone()),
        (Ok(_), Ok(_), None) => unreachable!("an identity always has a verdict"),
    };
    let finished = now();

    // classify
    let mode = match act {
        Act::Record => settings.mode,
        Act::DryRun => PolicyMode::ReportOnly,
    };
    let interval = settings.periodic.interval;
    let (budget, window_after) = round::removal_budget(
        previous.removal_window.as_ref(),
        settings.max_removals,
        interval,
        &finished,
    );
    let (misses, grace) = settings.remove_after;
    let removal = RemovalRule {
        budget,
        misses,
        grace,
    };
    let answering = identity.as_ref().ok().cloned();
    let classified = classify(
        cat,
        (&aligned, &round_plan, &seen),
        (verdict.as_ref(), answering, previous.server.clone()),
        mode,
        removal,
        &finished,
    );
    let result = classified.result;
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
    let status = crate::reconcile::status::with_states(
        CatalogStatus {
            last_check: Some(LastCheck {
                server: identity.as_ref().ok().cloned(),
                ..last_check(
                    (&started, &finished),
                    &trigger,
                    result,
                    probed,
                    classified.counts(),
                )
            }),
            next_check_at: next_check_at.clone(),
            observed_check_request: answered(&trigger, &previous),
            server: classified.server.clone(),
            removal_window: window_after(classified.counts().2 as usize),
            ..desired_status(
                cat,
                &policies,
                &ctx.defaults,
                classified.reachable.clone(),
                &finished,
            )
        },
        classified.states.clone(),
        cat.metadata.generation,
        &finished,
    );

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
        previous.last_check.as_ref().map(|l| l.result),
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
        classified.result == CheckResult::CatalogUnreachable,
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
        server: None,
        probed,
        stale,
        renamed,
        removed,
    }
}

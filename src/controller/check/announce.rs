//! After a round committed: round and state metrics, one Event per registration transition
//! (capped per round, from `semops-reconciler`), and one summary log line.

use std::time::Duration;

use kube::ResourceExt;

use super::classify::Classified;
use crate::controller::Context;
use crate::controller::events::{Reporter, Severity};
use crate::crd::Catalog;
use crate::crd::catalog::{CheckResult, RegistrationState, RegistrationStatus};
use crate::crd::conditions::Reason;
use crate::policy::schedule::Trigger;
use crate::policy::settings::RoundSettings;
use crate::reconcile::plan;
use crate::reconcile::round::Transition;
use crate::telemetry::{CatalogLabels, RoundLabels, StateLabels};

/// Events published per round at most; the rest are summed up in one more Event (a round over
/// 5,000 registrations must not flood the API server).
pub const EVENTS_PER_ROUND: usize = 20;

/// Everything a committed round tells the world.
#[allow(clippy::too_many_arguments)]
pub(super) async fn committed(
    ctx: &Context,
    cat: &Catalog,
    settings: &RoundSettings,
    checked: &[usize],
    classified: &Classified,
    trigger: &Trigger,
    probed: i64,
    took: Duration,
    previous_result: Option<CheckResult>,
) {
    let result = classified.result;
    set_state_gauges(ctx, cat, &classified.states);
    publish_server_change(ctx, cat, classified, previous_result).await;
    if let Some(o) = &classified.outcome {
        publish_transitions(
            ctx,
            cat,
            settings,
            checked,
            &classified.states,
            &o.transitions,
            &classified.newly_invalid,
        )
        .await;
    }
    // Counted after its Events: a counted round has told everything it will tell.
    count_round(ctx, cat, result);
    let (stale, renamed, removed) = classified.counts();
    tracing::info!(
        trigger = %trigger,
        result = ?result,
        policy = %settings.policy_label(),
        mode = ?settings.mode,
        scanned = probed,
        unreachable = u8::from(result == CheckResult::CatalogUnreachable),
        stale,
        renamed,
        removals_attempted = removed,
        removals_succeeded = removed,
        took_ms = took.as_millis() as u64,
        "check round"
    );
}

pub(super) fn count_round(ctx: &Context, cat: &Catalog, result: CheckResult) {
    let checks = &ctx.metrics.checks;
    let round = |result: CheckResult| RoundLabels {
        namespace: cat.namespace().unwrap_or_default(),
        catalog: cat.name_any(),
        result: format!("{result:?}"),
    };
    // Every series of this catalog starts at 0, so increase() and the alerts see the first
    // unreachable round, removal or rename too.
    for other in [
        CheckResult::Completed,
        CheckResult::CatalogUnreachable,
        CheckResult::CatalogChanged,
        CheckResult::Skipped,
    ] {
        drop(checks.rounds.get_or_create(&round(other)));
    }
    let labels = CatalogLabels {
        namespace: cat.namespace().unwrap_or_default(),
        catalog: cat.name_any(),
    };
    drop(checks.removed.get_or_create(&labels));
    drop(checks.renamed.get_or_create(&labels));
    checks.rounds.get_or_create(&round(result)).inc();
}

fn set_state_gauges(ctx: &Context, cat: &Catalog, states: &[RegistrationStatus]) {
    for state in [
        RegistrationState::Pending,
        RegistrationState::Live,
        RegistrationState::Stale,
        RegistrationState::Renamed,
        RegistrationState::Removed,
        RegistrationState::Invalid,
    ] {
        let n = states.iter().filter(|s| s.state == state).count() as i64;
        ctx.metrics
            .checks
            .registrations
            .get_or_create(&StateLabels {
                namespace: cat.namespace().unwrap_or_default(),
                catalog: cat.name_any(),
                state: format!("{state:?}"),
            })
            .set(n);
    }
}

/// The Event of one transition: severity, reason and note.
pub fn transition_event(
    t: &Transition,
    spec_index: usize,
    s: &RegistrationStatus,
    settings: &RoundSettings,
) -> (Severity, Reason, String) {
    let what = plan::describe(s);
    let policy = settings.policy_label();
    match t {
        Transition::BecameStale { .. } => (
            Severity::Warning,
            Reason::STALE_REGISTRATION,
            format!(
                "spec.registrations[{spec_index}] ({what}) does not exist in the catalog; policy {policy} ({:?})",
                settings.mode
            ),
        ),
        Transition::Renamed { to, .. } => (
            Severity::Normal,
            Reason::REGISTRATION_RENAMED,
            format!(
                "spec.registrations[{spec_index}] ({what}) was renamed to {to}; its metadata is kept; update the name in spec"
            ),
        ),
        Transition::Replaced { .. } => (
            Severity::Warning,
            Reason::REGISTRATION_REPLACED,
            format!(
                "spec.registrations[{spec_index}] ({what}) now names a different object (dropped and recreated); the new id is recorded"
            ),
        ),
        Transition::Removed { .. } => (
            Severity::Normal,
            Reason::REGISTRATION_REMOVED,
            format!(
                "spec.registrations[{spec_index}] ({what}) removed by ReconcilePolicy {policy}: the object was dropped; delete the entry from spec"
            ),
        ),
        Transition::Reappeared { .. } => (
            Severity::Normal,
            Reason::REGISTRATION_RESTORED,
            format!(
                "spec.registrations[{spec_index}] ({what}) exists again and is registered as new"
            ),
        ),
    }
}

/// Another server answered: a Normal Event when it was adopted, a Warning when the round
/// changed nothing because of it (once, not every round while it lasts).
async fn publish_server_change(
    ctx: &Context,
    cat: &Catalog,
    classified: &Classified,
    previous_result: Option<CheckResult>,
) {
    let Some((recorded, answering, adopted)) = &classified.server_change else {
        return;
    };
    if *adopted {
        let note = format!(
            "the catalog now answers as {answering} (registrations were recorded on {recorded}); every registration was found there or the server was accepted, so ids were re-recorded; nothing was removed this round"
        );
        ctx.publish(
            Reporter::Reconciler,
            cat,
            Severity::Normal,
            &Reason::SERVER_ADOPTED,
            "CheckRegistrations",
            note,
        )
        .await;
    } else if previous_result != Some(CheckResult::CatalogChanged) {
        let note = format!(
            "the catalog now answers as {answering}, not {recorded} where the registrations were recorded, and some are missing there: nothing changes until {}={answering} accepts it",
            crate::crd::ACCEPT_SERVER_ANNOTATION
        );
        ctx.publish(
            Reporter::Reconciler,
            cat,
            Severity::Warning,
            &Reason::CATALOG_CHANGED,
            "CheckRegistrations",
            note,
        )
        .await;
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
    newly_invalid: &[usize],
) {
    let labels = CatalogLabels {
        namespace: cat.namespace().unwrap_or_default(),
        catalog: cat.name_any(),
    };
    let mut events = Vec::with_capacity(transitions.len());
    for t in transitions {
        match t {
            Transition::Renamed { .. } => {
                ctx.metrics.checks.renamed.get_or_create(&labels).inc();
            }
            Transition::Removed { .. } => {
                ctx.metrics.checks.removed.get_or_create(&labels).inc();
            }
            _ => {}
        }
        let spec_index = checked[t.index()];
        events.push(transition_event(
            t,
            spec_index,
            &states[spec_index],
            settings,
        ));
    }
    for &i in newly_invalid {
        let s = &states[i];
        events.push((
            Severity::Warning,
            Reason::INVALID_REGISTRATION,
            format!(
                "spec.registrations[{i}] ({}) cannot exist in this catalog: {}; it is never probed, the rest of the round goes on; fix the name in spec",
                plan::describe(s),
                s.message.as_deref().unwrap_or_default()
            ),
        ));
    }
    let total = events.len();
    for (severity, reason, note) in events.into_iter().take(EVENTS_PER_ROUND) {
        ctx.publish(
            Reporter::Reconciler,
            cat,
            severity,
            &reason,
            "CheckRegistrations",
            note,
        )
        .await;
    }
    if total > EVENTS_PER_ROUND {
        ctx.publish(
            Reporter::Reconciler,
            cat,
            Severity::Normal,
            &Reason::CHECK_ROUND_SUMMARY,
            "CheckRegistrations",
            format!(
                "{} more registration change(s) this round; see status.registrations",
                total - EVENTS_PER_ROUND
            ),
        )
        .await;
    }
}

//! The classify step of a round (pure): from the catalog's answers and the round's plan to
//! every declared registration's next state. The round runs it; the announcer reads what it
//! decided.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::visit::Failure;
use crate::catalog::observe::Observations;
use crate::crd::Catalog;
use crate::crd::catalog::{CheckResult, RegistrationState, RegistrationStatus};
use crate::crd::conditions::Desired;
use crate::crd::policy::PolicyMode;
use crate::reconcile::plan::{self, RoundPlan};
use crate::reconcile::round::{self, RemovalRule, RoundOutcome, Rules, Transition};
use crate::reconcile::server::ServerVerdict;
use crate::reconcile::status::{connected, unreachable};

/// What the classification decided.
pub(super) struct Classified {
    /// Every declared registration's state after the round (spec order).
    pub states: Vec<RegistrationStatus>,
    /// `None` when the catalog could not answer or answered as another server (states are then
    /// unchanged).
    pub outcome: Option<RoundOutcome>,
    pub result: CheckResult,
    pub reachable: Desired,
    /// Spec indices of registrations that became Invalid this round.
    pub newly_invalid: Vec<usize>,
    /// The server the registrations are recorded on after this round.
    pub server: Option<String>,
    /// Another server answered: (recorded, answering, adopted).
    pub server_change: Option<(String, String, bool)>,
}

impl Classified {
    /// (stale, renamed, removed) of this round.
    pub fn counts(&self) -> (i64, i64, i64) {
        self.outcome
            .as_ref()
            .map(|o| (o.stale as i64, o.renamed as i64, o.removed as i64))
            .unwrap_or_default()
    }
}

/// Next state of every declared registration from the catalog's answers (pure). A failed
/// observation changes nothing; neither does another server where registrations would go
/// missing, unless it was accepted.
pub(super) fn classify(
    cat: &Catalog,
    (aligned, round_plan, seen): (
        &[RegistrationStatus],
        &RoundPlan,
        &Result<Observations, Failure>,
    ),
    (verdict, answering, recorded): (Option<&ServerVerdict>, Option<String>, Option<String>),
    mode: PolicyMode,
    removal: RemovalRule,
    finished: &Time,
) -> Classified {
    let unchanged = |result, reachable| Classified {
        states: aligned.to_vec(),
        outcome: None,
        result,
        reachable,
        newly_invalid: vec![],
        server: recorded.clone(),
        server_change: None,
    };
    let (obs, verdict) = match (seen, verdict) {
        (Ok(obs), Some(v)) => (obs, v),
        (Err((reason, message)), _) => {
            let reachable = unreachable(reason.clone(), message.clone());
            return unchanged(CheckResult::CatalogUnreachable, reachable);
        }
        (Ok(_), None) => unreachable!("a catalog answered without an identity"),
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
            plan::observation_of(
                cat.spec.provider,
                obs,
                &cat.spec.registrations[i],
                &aligned[i],
            )
            .expect("every checked registration was probed")
        })
        .collect();
    let changed_server = matches!(
        verdict,
        ServerVerdict::Changed { .. } | ServerVerdict::Accepted { .. }
    );
    let rules = Rules {
        mode,
        // The round that meets a new server removes nothing; the next one may.
        removal: if changed_server {
            RemovalRule {
                budget: 0,
                ..removal
            }
        } else {
            removal
        },
        same_server: verdict.same_server(),
    };
    let outcome = round::classify(&prev, &answers, &rules, finished);
    let server_change = match verdict {
        ServerVerdict::Changed { recorded } | ServerVerdict::Accepted { recorded } => {
            let accepted = matches!(verdict, ServerVerdict::Accepted { .. });
            // Adopted without a person only if nothing would go missing there.
            let adopted = accepted
                || !outcome
                    .transitions
                    .iter()
                    .any(|t| matches!(t, Transition::BecameStale { .. }));
            Some((
                recorded.clone(),
                answering.clone().unwrap_or_default(),
                adopted,
            ))
        }
        _ => None,
    };
    if let Some((_, _, false)) = &server_change {
        return Classified {
            server_change,
            ..unchanged(CheckResult::CatalogChanged, connected(cat))
        };
    }
    let mut states = aligned.to_vec();
    for (slot, &i) in round_plan.checked.iter().enumerate() {
        states[i] = outcome.states[slot].clone();
    }
    let mut newly_invalid = Vec::new();
    for (i, why) in &round_plan.invalid {
        let s = &mut states[*i];
        if s.state != RegistrationState::Invalid {
            s.state = RegistrationState::Invalid;
            s.since = Some(finished.clone());
            newly_invalid.push(*i);
        }
        s.message = Some(why.clone());
        s.misses = None;
        s.missing_since = None;
    }
    Classified {
        states,
        outcome: Some(outcome),
        result: CheckResult::Completed,
        reachable: connected(cat),
        newly_invalid,
        server: answering,
        server_change,
    }
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;

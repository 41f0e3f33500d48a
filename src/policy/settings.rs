//! The full settings a check round runs with, from a Catalog's effective policy (the status shows
//! only a summary of them).

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;

use super::schedule::Periodic;
use super::views::{catalog_view, policy_views};
use super::{OperatorDefaults, duration, effective_policy};
use crate::crd::policy::{PolicyMode, RegistrationKind, RemoveAfter};
use crate::crd::{Catalog, ReconcilePolicy};

/// How a round may load the catalog (from the policy's `probe` settings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeLimits {
    pub timeout: Duration,
    pub concurrency: usize,
    pub batch_size: usize,
}

impl Default for ProbeLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            concurrency: 4,
            batch_size: 200,
        }
    }
}

/// The policy settings a round of one Catalog runs with.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundSettings {
    /// The ReconcilePolicy's name; `None` for the operator defaults.
    pub policy: Option<String>,
    pub mode: PolicyMode,
    pub kinds: Vec<RegistrationKind>,
    pub limits: ProbeLimits,
    pub max_removals: usize,
    /// Consecutive missing rounds and grace before AutoRemove withdraws (`removeAfter`).
    pub remove_after: (u32, Duration),
    pub periodic: Periodic,
}

impl RoundSettings {
    pub fn policy_label(&self) -> String {
        self.policy
            .clone()
            .unwrap_or_else(|| "operator defaults".into())
    }
}

fn remove_after(r: &RemoveAfter) -> (u32, Duration) {
    (
        r.misses.max(1) as u32,
        go_duration(&r.grace, Duration::from_secs(3600)),
    )
}

fn go_duration(text: &str, fallback: Duration) -> Duration {
    duration::parse(text).unwrap_or(fallback)
}

/// The full settings of the Catalog's effective policy (the status shows only a summary).
pub fn round_settings(
    cat: &Catalog,
    policies: &[Arc<ReconcilePolicy>],
    defaults: &OperatorDefaults,
) -> RoundSettings {
    let resolution = effective_policy(&catalog_view(cat), &policy_views(policies), defaults);
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
            remove_after: remove_after(&s.remove_after),
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
            remove_after: remove_after(&RemoveAfter::default()),
            periodic: Periodic {
                // A missing referenced policy keeps periodic checks off (never guess a policy).
                enabled: e.enabled,
                interval,
                jitter: 0.2,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{CatalogSpec, ReconcilePolicySpec};

    fn catalog(yaml: &str) -> Catalog {
        let mut c = Catalog::new("hr", serde_saphyr::from_str::<CatalogSpec>(yaml).unwrap());
        c.metadata.namespace = Some("ns".into());
        c
    }

    fn policy(name: &str, yaml: &str) -> Arc<ReconcilePolicy> {
        let mut p = ReconcilePolicy::new(
            name,
            serde_saphyr::from_str::<ReconcilePolicySpec>(yaml).unwrap(),
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

        // removeAfter: as written, and at least one miss even if an older CRD let 0 through.
        let patient = policy(
            "patient",
            "{mode: AutoRemove, interval: 30m, removeAfter: {misses: 3, grace: 90s}}",
        );
        let zero = policy(
            "zero",
            "{mode: AutoRemove, interval: 30m, removeAfter: {misses: 0, grace: 0s}}",
        );
        for (p, want) in [
            (patient, (3, Duration::from_secs(90))),
            (zero, (1, Duration::ZERO)),
        ] {
            let s = round_settings(
                &catalog(
                    "provider: postgresql\nconnection: {host: h, port: 1, credentialsSecretRef: {name: s}}",
                ),
                &[p],
                &OperatorDefaults::default(),
            );
            assert_eq!(s.remove_after, want);
        }

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

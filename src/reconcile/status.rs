//! The desired Catalog status, from plain values: effective policy, reachability verdict, the
//! registration states and `RegistrationsCurrent`. The Catalog controller and check rounds both
//! build their one status write here, so alternating between them writes nothing new.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::plan;
use crate::crd::catalog::{
    CheckResult, EffectivePolicy, Provider, RegistrationState, RegistrationStatus,
};
use crate::crd::conditions::{self, ConditionType, Desired, Reason, Status};
use crate::crd::{Catalog, CatalogStatus, ReconcilePolicy};
use crate::policy::views::{catalog_view, policy_views};
use crate::policy::{OperatorDefaults, effective_policy};

/// Condition types the Catalog controller owns; others' conditions are kept as they are.
const OWNED: [ConditionType; 3] = [
    ConditionType::Ready,
    ConditionType::Reachable,
    ConditionType::RegistrationsCurrent,
];

/// Paths of registrations that repeat an earlier (kind, schema, name).
fn duplicate_registrations(cat: &Catalog) -> Vec<String> {
    let mut first_seen = HashMap::new();
    let mut dups = Vec::new();
    for (i, r) in cat.spec.registrations.iter().enumerate() {
        let key = (r.kind, r.schema.as_deref(), r.name.as_str());
        match first_seen.get(&key) {
            Some(first) => dups.push(format!(
                "spec.registrations[{i}] repeats spec.registrations[{first}]"
            )),
            None => {
                first_seen.insert(key, i);
            }
        }
    }
    dups
}

/// The whole status the Catalog controller wants. `reachable` is the verdict of the connection
/// check, a round or a source visit, made by the caller (I/O stays out of here).
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
            ConditionType::Ready,
            Status::False,
            Reason::RECONCILE_POLICY_NOT_FOUND,
            format!(
                "spec.reconcilePolicyRef names ReconcilePolicy {missing:?}, which does not exist in this namespace; periodic checks are off until it exists or the reference is removed"
            ),
        )
    } else if !dups.is_empty() {
        Desired::new(
            ConditionType::Ready,
            Status::False,
            Reason::DUPLICATE_REGISTRATION,
            format!("{}; remove the repeated entries", dups.join("; ")),
        )
    } else if reachable.status == Status::False {
        reachable.as_type(ConditionType::Ready)
    } else {
        Desired::new(
            ConditionType::Ready,
            Status::True,
            Reason::CONFIGURED,
            format!("effective policy: {}", describe(&resolution.effective)),
        )
    };
    let mut conds = conditions::merge(
        &previous.conditions,
        vec![ready, reachable],
        generation,
        now,
    );
    conds.extend(conditions::foreign(&previous.conditions, &OWNED));
    let managed = cat.spec.provider == Provider::Managed;
    if managed {
        conds.extend(conditions::merge(
            &previous.conditions,
            vec![Desired::new(
                ConditionType::RegistrationsCurrent,
                Status::True,
                Reason::MANAGED,
                "a managed catalog's registrations are its own and never probed",
            )],
            generation,
            now,
        ));
    } else {
        // Keep the previous RegistrationsCurrent for `with_states` to merge against.
        conds.extend(
            conditions::find(&previous.conditions, ConditionType::RegistrationsCurrent).cloned(),
        );
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
    let states = plan::align(&cat.spec.registrations, &previous.registrations);
    with_states(base, states, generation, now)
}

/// The registration part of a Catalog status: states, the stale count and
/// `RegistrationsCurrent`.
pub fn with_states(
    base: CatalogStatus,
    states: Vec<RegistrationStatus>,
    generation: Option<i64>,
    now: &Time,
) -> CatalogStatus {
    let current = match &base.last_check {
        Some(l) if l.result == CheckResult::CatalogChanged => catalog_changed(
            base.server.as_deref().unwrap_or_default(),
            l.server.as_deref().unwrap_or_default(),
        ),
        _ => plan::registrations_condition(&states),
    };
    let mut conds = conditions::foreign(&base.conditions, &[ConditionType::RegistrationsCurrent]);
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

/// `RegistrationsCurrent` while another server answers and some registrations would go missing
/// there: states stay as they were, and the message says how to accept the new server.
fn catalog_changed(recorded: &str, answering: &str) -> Desired {
    Desired::new(
        ConditionType::RegistrationsCurrent,
        Status::False,
        Reason::CATALOG_CHANGED,
        format!(
            "the catalog answers as {answering}, but the registrations were recorded on {recorded} and some are missing there; no registration changes state and nothing is removed. If this is the intended server (a failover, a restore, a move), accept it with the annotation {}={answering}",
            crate::crd::ACCEPT_SERVER_ANNOTATION
        ),
    )
}

/// The status of a Catalog being deleted while it still hosts models: Ready=False naming them,
/// everything else as it was.
pub fn deleting(cat: &Catalog, hosted: &[String], now: &Time) -> CatalogStatus {
    let previous = cat.status.clone().unwrap_or_default();
    let message = format!(
        "deletion waits until the SemanticModels hosted here are deleted: {}",
        hosted.join(", ")
    );
    let mut conds = conditions::merge(
        &previous.conditions,
        vec![Desired::new(
            ConditionType::Ready,
            Status::False,
            Reason::DELETING,
            message,
        )],
        cat.metadata.generation,
        now,
    );
    conds.extend(conditions::foreign(
        &previous.conditions,
        &[ConditionType::Ready],
    ));
    CatalogStatus {
        conditions: conds,
        ..previous
    }
}

fn describe(p: &EffectivePolicy) -> String {
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
        .map(|c| match (&c.host, c.port, &c.uri) {
            (Some(host), Some(port), _) => format!("{host}:{port}"),
            (_, _, Some(uri)) => uri.clone(),
            _ => c.bootstrap_servers.join(","),
        })
        .unwrap_or_default();
    let mode = cat.spec.connection.as_ref().and_then(|c| c.ssl_mode);
    match mode {
        Some(m) if m.may_send_in_clear() => Desired::new(
            ConditionType::Reachable,
            Status::True,
            Reason::INSECURE_TRANSPORT,
            format!(
                "connected to {endpoint} with sslMode {}: the password (or token) may travel in clear; use verify-full (with tls.caSecretRef for a private CA)",
                serde_json::to_value(m)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ),
        ),
        _ => Desired::new(
            ConditionType::Reachable,
            Status::True,
            Reason::CONNECTED,
            format!("connected to {endpoint}"),
        ),
    }
}

/// The `Reachable` verdict of a managed catalog.
pub fn managed_reachable() -> Desired {
    Desired::new(
        ConditionType::Reachable,
        Status::True,
        Reason::MANAGED,
        "managed catalogs have no external system to reach",
    )
}

/// A `Reachable=False` verdict with a failure category and a message without secrets.
pub fn unreachable(reason: Reason, message: impl Into<String>) -> Desired {
    Desired::new(ConditionType::Reachable, Status::False, reason, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::CatalogSpec;
    use crate::crd::catalog::{LastCheck, PolicySource};

    fn catalog(yaml: &str) -> Catalog {
        let spec: CatalogSpec = serde_saphyr::from_str(yaml).unwrap();
        let mut c = Catalog::new("hr", spec);
        c.metadata.namespace = Some("ns".into());
        c.metadata.generation = Some(4);
        c
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1000).unwrap())
    }

    fn ready_reason(s: &CatalogStatus) -> String {
        conditions::find(&s.conditions, ConditionType::Ready)
            .unwrap()
            .reason
            .to_string()
    }

    #[test]
    fn a_catalog_without_policies_shows_the_operator_defaults() {
        let c = catalog("provider: managed\nregistrations: [{kind: Schema, name: semantic}]");
        let s = desired_status(
            &c,
            &[],
            &OperatorDefaults::default(),
            managed_reachable(),
            &now(),
        );
        let p = s.effective_policy.unwrap();
        assert_eq!(
            (p.source, p.enabled),
            (PolicySource::OperatorDefault, false)
        );
        assert!(conditions::is_true(&s.conditions, ConditionType::Ready));
        assert_eq!(s.registration_count, Some(1));
    }

    #[test]
    fn repeated_registrations_are_named_by_path() {
        let c = catalog(
            "provider: managed\nregistrations: [{kind: Schema, name: a}, {kind: Schema, name: b}, {kind: Schema, name: a}, {kind: Schema, name: a}]",
        );
        let s = desired_status(
            &c,
            &[],
            &OperatorDefaults::default(),
            managed_reachable(),
            &now(),
        );
        let ready = conditions::find(&s.conditions, ConditionType::Ready).unwrap();
        assert_eq!(ready.reason, "DuplicateRegistration");
        assert!(
            ready
                .message
                .contains("spec.registrations[2] repeats spec.registrations[0]")
                && ready
                    .message
                    .contains("spec.registrations[3] repeats spec.registrations[0]"),
            "{}",
            ready.message
        );
    }

    #[test]
    fn a_missing_referenced_policy_is_reported() {
        let c = catalog("provider: managed\nreconcilePolicyRef: {name: strict}");
        let s = desired_status(
            &c,
            &[],
            &OperatorDefaults::default(),
            managed_reachable(),
            &now(),
        );
        assert_eq!(ready_reason(&s), "ReconcilePolicyNotFound");
        assert!(!s.effective_policy.unwrap().enabled);
    }

    #[test]
    fn conditions_owned_by_other_writers_are_kept() {
        let mut c = catalog("provider: managed");
        let foreign = vec![crate::crd::conditions::Condition {
            type_: "Audited".into(),
            status: "True".into(),
            reason: "ByPlatformTeam".into(),
            message: Default::default(),
            observed_generation: Some(4),
            last_transition_time: now(),
        }];
        c.status = Some(CatalogStatus {
            conditions: foreign.clone(),
            ..Default::default()
        });
        let s = desired_status(
            &c,
            &[],
            &OperatorDefaults::default(),
            managed_reachable(),
            &now(),
        );
        assert!(s.conditions.contains(&foreign[0]));
        let deleting = deleting(&c, &["m".into()], &now());
        assert!(deleting.conditions.contains(&foreign[0]));
        assert_eq!(ready_reason(&deleting), "Deleting");
    }

    #[test]
    fn an_unreachable_catalog_is_not_ready_with_the_failure_category() {
        let c = catalog("provider: managed");
        let verdict = unreachable(Reason::AUTH_FAILED, "db:5432: authentication failed");
        let s = desired_status(&c, &[], &OperatorDefaults::default(), verdict, &now());
        let ready = conditions::find(&s.conditions, ConditionType::Ready).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "AuthFailed")
        );
        assert_eq!(
            conditions::find(&s.conditions, ConditionType::Reachable)
                .unwrap()
                .reason,
            "AuthFailed"
        );
    }

    const POSTGRES: &str = "provider: postgresql\nconnection: {host: db, port: 5432, credentialsSecretRef: {name: s}}\nregistrations: [{kind: Schema, name: a}, {kind: Schema, name: b}]";

    fn state_of(name: &str, state: RegistrationState) -> RegistrationStatus {
        RegistrationStatus {
            state,
            ..plan::align(
                &[crate::crd::catalog::Registration {
                    kind: crate::crd::policy::RegistrationKind::Schema,
                    schema: None,
                    name: name.into(),
                    owner: None,
                    tags: vec![],
                    properties: Default::default(),
                }],
                &[],
            )[0]
            .clone()
        }
    }

    fn current(s: &CatalogStatus) -> (String, String) {
        let c = conditions::find(&s.conditions, ConditionType::RegistrationsCurrent).unwrap();
        (c.reason.to_string(), c.message.to_string())
    }

    #[test]
    fn only_a_managed_catalog_drops_registration_states_and_reports_managed() {
        let recorded = CatalogStatus {
            observed_generation: Some(1),
            registrations: vec![
                state_of("a", RegistrationState::Stale),
                state_of("b", RegistrationState::Live),
            ],
            stale_count: Some(1),
            ..Default::default()
        };
        // (provider yaml, registrations kept, stale count, RegistrationsCurrent reason)
        let cases = [
            (POSTGRES.to_string(), 2, Some(1), "StaleRegistrations"),
            (
                "provider: managed\nregistrations: [{kind: Schema, name: a}, {kind: Schema, name: b}]"
                    .to_string(),
                0,
                None,
                "Managed",
            ),
        ];
        for (yaml, kept, stale, reason) in cases {
            let mut c = catalog(&yaml);
            c.status = Some(recorded.clone());
            let s = desired_status(&c, &[], &OperatorDefaults::default(), connected(&c), &now());
            assert_eq!(s.observed_generation, Some(4), "{yaml}");
            assert_eq!(s.registrations.len(), kept, "{yaml}");
            assert_eq!(s.stale_count, stale, "{yaml}");
            assert_eq!(current(&s).0, reason, "{yaml}");
            assert!(s.effective_policy.is_some() && s.registration_count == Some(2));
        }
    }

    #[test]
    fn new_registrations_show_as_pending_at_once() {
        let c = catalog(POSTGRES);
        let s = desired_status(&c, &[], &OperatorDefaults::default(), connected(&c), &now());
        assert_eq!(
            s.registrations
                .iter()
                .map(|r| (r.name.as_str(), r.state))
                .collect::<Vec<_>>(),
            vec![
                ("a", RegistrationState::Pending),
                ("b", RegistrationState::Pending)
            ]
        );
        assert_eq!(s.stale_count, Some(0));
        assert_eq!(current(&s).0, "NotChecked");
        assert_eq!(
            conditions::find(&s.conditions, ConditionType::Ready)
                .unwrap()
                .message,
            "effective policy: operator defaults (ReportOnly, every 1h, disabled)"
        );
    }

    #[test]
    fn states_count_only_stale_entries_and_a_changed_server_overrides_the_condition() {
        use RegistrationState::*;
        let states = vec![
            state_of("a", Stale),
            state_of("b", Live),
            state_of("c", Stale),
            state_of("d", Renamed),
        ];
        let check = |result| LastCheck {
            started_at: now(),
            finished_at: Some(now()),
            trigger: "periodic".into(),
            result,
            server: Some("pg@other/db".into()),
            probed: 4,
            stale: 2,
            renamed: 1,
            removed: 0,
        };
        // (last round's result, RegistrationsCurrent reason)
        let cases = [
            (None, "StaleRegistrations"),
            (Some(CheckResult::Completed), "StaleRegistrations"),
            (Some(CheckResult::CatalogChanged), "CatalogChanged"),
        ];
        for (result, reason) in cases {
            let base = CatalogStatus {
                server: Some("pg@first/db".into()),
                last_check: result.map(check),
                conditions: vec![crate::crd::conditions::Condition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    reason: "Configured".into(),
                    message: Default::default(),
                    observed_generation: Some(4),
                    last_transition_time: now(),
                }],
                ..Default::default()
            };
            let s = with_states(base, states.clone(), Some(4), &now());
            assert_eq!(s.stale_count, Some(2), "{result:?}");
            assert_eq!(s.registrations, states, "{result:?}");
            assert!(
                conditions::find(&s.conditions, ConditionType::Ready).is_some(),
                "other conditions are kept"
            );
            let (got, message) = current(&s);
            assert_eq!(got, reason, "{result:?}");
            if result == Some(CheckResult::CatalogChanged) {
                assert!(
                    message.contains("answers as pg@other/db")
                        && message.contains("recorded on pg@first/db"),
                    "{message}"
                );
            }
        }
    }

    #[test]
    fn cleartext_capable_ssl_modes_are_reported_as_insecure() {
        let cases = [
            (None, "Connected"),
            (Some("disable"), "InsecureTransport"),
            (Some("prefer"), "InsecureTransport"),
            (Some("require"), "Connected"),
            (Some("verify-ca"), "Connected"),
            (Some("verify-full"), "Connected"),
        ];
        for (mode, reason) in cases {
            let extra = mode.map(|m| format!(", sslMode: {m}")).unwrap_or_default();
            let c = catalog(&format!(
                "provider: postgresql\nconnection: {{host: db, port: 5432, credentialsSecretRef: {{name: s}}{extra}}}"
            ));
            let verdict = connected(&c);
            assert_eq!(verdict.reason.as_str(), reason, "{mode:?}");
            assert!(
                verdict.message.starts_with("connected to db:5432"),
                "{}",
                verdict.message
            );
            if let Some(m) = mode.filter(|_| reason == "InsecureTransport") {
                assert!(
                    verdict.message.contains(&format!("sslMode {m}")),
                    "{}",
                    verdict.message
                );
            }
        }
    }

    #[test]
    fn the_endpoint_named_is_host_port_brokers_or_the_catalog_url() {
        for (spec, endpoint) in [
            (
                "provider: mysql\nconnection: {host: db, port: 3306, credentialsSecretRef: {name: s}}",
                "db:3306",
            ),
            (
                "provider: kafka\nconnection: {bootstrapServers: [\"k1:9093\", \"k2:9093\"]}",
                "k1:9093,k2:9093",
            ),
            (
                "provider: iceberg-rest\nconnection: {uri: \"https://lake.example/api\"}",
                "https://lake.example/api",
            ),
        ] {
            assert_eq!(
                connected(&catalog(spec)).message,
                format!("connected to {endpoint}")
            );
        }
    }

    #[test]
    fn the_same_inputs_later_reproduce_the_status_exactly() {
        let mut c = catalog(
            "provider: postgresql\nconnection: {host: h, port: 1, credentialsSecretRef: {name: s}}\nregistrations: [{kind: Schema, name: a}]",
        );
        let first = desired_status(&c, &[], &OperatorDefaults::default(), connected(&c), &now());
        c.status = Some(first.clone());
        let later = Time(k8s_openapi::jiff::Timestamp::from_second(99_999).unwrap());
        assert_eq!(
            desired_status(&c, &[], &OperatorDefaults::default(), connected(&c), &later),
            first,
            "equal status means no write"
        );
    }
}

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{Classified, classify};
use crate::catalog::observe::Observations;
use crate::catalog::{ObjectType, Probe, ProbeTarget};
use crate::crd::catalog::{CheckResult, RegistrationState, RegistrationStatus};
use crate::crd::conditions::{Reason, Status};
use crate::crd::policy::PolicyMode;
use crate::crd::{Catalog, CatalogSpec};
use crate::reconcile::plan::{self, RoundPlan};
use crate::reconcile::round::{RemovalRule, Transition};
use crate::reconcile::server::ServerVerdict;

/// Schema `hr` and tables `hr.a`, `hr.b` checked; `hr.c` (spec index 3) invalid this round.
fn catalog() -> Catalog {
    let spec: CatalogSpec = serde_saphyr::from_str(
        "provider: postgresql\nconnection: {host: db, port: 5432}\nregistrations: [{kind: Schema, name: hr}, {kind: Table, schema: hr, name: a}, {kind: Table, schema: hr, name: b}, {kind: Table, schema: hr, name: c}]",
    )
    .unwrap();
    Catalog::new("warehouse", spec)
}

fn at(second: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(second).unwrap())
}

/// Every registration Live under id `id-<name>` since second 1, but `hr.c` already Invalid
/// with an old reason and a leftover miss count.
fn recorded(cat: &Catalog) -> Vec<RegistrationStatus> {
    let mut states = plan::align(&cat.spec.registrations, &[]);
    for s in &mut states {
        s.id = Some(format!("id-{}", s.name));
        s.state = RegistrationState::Live;
        s.since = Some(at(1));
    }
    states[3].state = RegistrationState::Invalid;
    states[3].message = Some("an old reason".into());
    states[3].misses = Some(2);
    states
}

fn round_plan(invalid: &[usize]) -> RoundPlan {
    RoundPlan {
        checked: (0..4).filter(|i| !invalid.contains(i)).collect(),
        invalid: invalid
            .iter()
            .map(|&i| (i, format!("entry {i} cannot exist here")))
            .collect(),
        targets: vec![],
    }
}

/// The catalog's answers: every checked registration present under its recorded id, except
/// the names in `absent`.
fn answers(cat: &Catalog, absent: &[&str]) -> Observations {
    let mut by_name = HashMap::new();
    for r in &cat.spec.registrations {
        let target = match &r.schema {
            Some(schema) => ProbeTarget::relation(schema, &r.name),
            None => ProbeTarget::schema(&r.name),
        };
        let probe = if absent.contains(&r.name.as_str()) {
            Probe::Absent
        } else {
            Probe::Present {
                object_type: ObjectType::Table,
                native_id: format!("id-{}", r.name),
            }
        };
        by_name.insert(target, probe);
    }
    Observations {
        by_name,
        by_id: HashMap::new(),
        columns: HashMap::new(),
    }
}

/// A round answered by `server-2` where `server-1` is recorded, under AutoRemove with room for
/// five removals; `hr.c` invalid.
fn on_another_server(
    cat: &Catalog,
    states: &[RegistrationStatus],
    seen: &Result<Observations, (Reason, String)>,
    verdict: &ServerVerdict,
) -> Classified {
    classify(
        cat,
        (states, &round_plan(&[3]), seen),
        (
            Some(verdict),
            Some("server-2".into()),
            Some("server-1".into()),
        ),
        PolicyMode::AutoRemove,
        RemovalRule::immediate(5),
        &at(9),
    )
}

#[test]
fn a_failed_observation_changes_nothing_and_marks_the_catalog_unreachable() {
    let cat = catalog();
    let states = recorded(&cat);
    let seen = Err((
        Reason::CATALOG_UNREACHABLE,
        "connection refused".to_string(),
    ));
    let c = classify(
        &cat,
        (&states, &round_plan(&[]), &seen),
        (None, None, Some("server-1".into())),
        PolicyMode::AutoRemove,
        RemovalRule::immediate(5),
        &at(9),
    );
    assert_eq!(c.states, states);
    assert!(c.outcome.is_none());
    assert_eq!(c.result, CheckResult::CatalogUnreachable);
    assert_eq!(
        (
            c.reachable.status,
            &c.reachable.reason,
            c.reachable.message.as_str()
        ),
        (
            Status::False,
            &Reason::CATALOG_UNREACHABLE,
            "connection refused"
        )
    );
    assert_eq!(
        c.server.as_deref(),
        Some("server-1"),
        "the recorded server stays"
    );
    assert!(c.newly_invalid.is_empty() && c.server_change.is_none());
    assert_eq!(c.counts(), (0, 0, 0));
}

#[test]
fn the_same_server_classifies_removes_within_the_rule_and_marks_invalid_names() {
    let cat = catalog();
    let mut states = recorded(&cat);
    // hr.b was Pending: this round makes it Invalid (newly); hr.c was Invalid already.
    states[2].state = RegistrationState::Pending;
    states[2].misses = Some(1);
    let seen = Ok(answers(&cat, &["a"]));
    let c = classify(
        &cat,
        (&states, &round_plan(&[2, 3]), &seen),
        (
            Some(&ServerVerdict::Same),
            Some("server-1".into()),
            Some("server-1".into()),
        ),
        PolicyMode::AutoRemove,
        RemovalRule::immediate(5),
        &at(9),
    );
    assert_eq!(c.result, CheckResult::Completed);
    assert_eq!(c.reachable.status, Status::True);
    assert_eq!(c.server.as_deref(), Some("server-1"));
    assert!(c.server_change.is_none());
    let by_state: Vec<_> = c.states.iter().map(|s| s.state).collect();
    assert_eq!(
        by_state,
        [
            RegistrationState::Live,
            RegistrationState::Removed,
            RegistrationState::Invalid,
            RegistrationState::Invalid,
        ]
    );
    assert_eq!(c.states[0], states[0], "the Live schema is untouched");
    assert_eq!(
        c.newly_invalid,
        [2],
        "only the one that was not Invalid before"
    );
    assert_eq!(c.states[2].since, Some(at(9)));
    assert_eq!(
        c.states[3].since,
        Some(at(1)),
        "Invalid since an earlier round"
    );
    for i in [2, 3] {
        let s = &c.states[i];
        assert_eq!(
            s.message.as_deref(),
            Some(format!("entry {i} cannot exist here").as_str()),
            "the reason is this round's"
        );
        assert_eq!((s.misses, &s.missing_since), (None, &None));
    }
    assert_eq!(c.counts(), (1, 0, 1), "(stale, renamed, removed)");
}

#[test]
fn another_server_where_names_go_missing_is_not_adopted_without_a_person() {
    let cat = catalog();
    let states = recorded(&cat);
    let seen = Ok(answers(&cat, &["b"]));
    let verdict = ServerVerdict::Changed {
        recorded: "server-1".into(),
    };
    let c = on_another_server(&cat, &states, &seen, &verdict);
    assert_eq!(c.states, states, "nothing recorded on the other server");
    assert!(c.outcome.is_none() && c.newly_invalid.is_empty());
    assert_eq!(c.result, CheckResult::CatalogChanged);
    assert_eq!(c.reachable.status, Status::True, "it did answer");
    assert_eq!(c.server.as_deref(), Some("server-1"));
    assert_eq!(
        c.server_change,
        Some(("server-1".into(), "server-2".into(), false))
    );
}

#[test]
fn another_server_is_adopted_when_everything_is_there_or_a_person_accepted_it() {
    let cat = catalog();
    let states = recorded(&cat);
    // (verdict, absent names, adopted states of hr.a and hr.b)
    let cases = [
        (
            ServerVerdict::Changed {
                recorded: "server-1".into(),
            },
            vec![],
            [RegistrationState::Live, RegistrationState::Live],
        ),
        // Accepted: adopted although hr.b is missing there; the round that meets the new
        // server removes nothing, whatever the rule allows.
        (
            ServerVerdict::Accepted {
                recorded: "server-1".into(),
            },
            vec!["b"],
            [RegistrationState::Live, RegistrationState::Stale],
        ),
    ];
    for (verdict, absent, want) in cases {
        let seen = Ok(answers(&cat, &absent));
        let c = on_another_server(&cat, &states, &seen, &verdict);
        assert_eq!(c.result, CheckResult::Completed, "{verdict:?}");
        assert_eq!([c.states[1].state, c.states[2].state], want, "{verdict:?}");
        assert_eq!(c.server.as_deref(), Some("server-2"), "{verdict:?}");
        assert_eq!(
            c.server_change,
            Some(("server-1".into(), "server-2".into(), true)),
            "{verdict:?}"
        );
        let outcome = c.outcome.as_ref().unwrap();
        assert!(
            !outcome
                .transitions
                .iter()
                .any(|t| matches!(t, Transition::Removed { .. })),
            "{verdict:?}"
        );
        assert_eq!(c.counts(), (absent.len() as i64, 0, 0), "{verdict:?}");
    }
}

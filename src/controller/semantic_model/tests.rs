use std::collections::BTreeMap;

use super::*;
use crate::crd::SemanticModelSpec;

fn model(uid: &str, created: i64, name: &str) -> SemanticModel {
    let spec: SemanticModelSpec = serde_json::from_value(serde_json::json!({
        "catalog": "analytics", "schema": "semantic", "name": name,
        "definition": {"datasets": [{"name": "e", "source": "hr.public.employees"}]}
    }))
    .unwrap();
    let mut m = SemanticModel::new(uid, spec);
    m.metadata.uid = Some(uid.into());
    m.metadata.namespace = Some("ns".into());
    m.metadata.generation = Some(1);
    m.metadata.creation_timestamp = Some(Time(
        k8s_openapi::jiff::Timestamp::from_second(created).unwrap(),
    ));
    m
}

fn catalogs() -> BTreeMap<String, Option<Vec<String>>> {
    BTreeMap::from([
        ("hr".into(), None),
        ("analytics".into(), Some(vec!["semantic".into()])),
    ])
}

fn at(secs: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
}

fn rejection(
    m: &SemanticModel,
    others: &[Arc<SemanticModel>],
    cats: &BTreeMap<String, Option<Vec<String>>>,
) -> Option<String> {
    local_verdict(m, cats, others).map(|r| r.ready.reason.to_string())
}

#[test]
fn a_valid_model_without_rivals_passes_the_local_checks_and_status_counts_it() {
    let m = model("a", 1, "emp");
    assert_eq!(rejection(&m, &[], &catalogs()), None);
    let s = status_with(
        &m,
        SemanticModelStatus::default(),
        vec![Desired::new(
            ConditionType::Ready,
            Status::True,
            Reason::ACCEPTED,
            "",
        )],
        &at(5),
    );
    assert_eq!(
        (
            s.model_name.as_deref(),
            s.dataset_count,
            s.metric_count,
            s.observed_generation
        ),
        (Some("emp"), Some(1), Some(0), Some(1))
    );
}

#[test]
fn the_younger_of_two_models_with_one_name_gets_name_conflict() {
    let old = Arc::new(model("old", 1, "emp"));
    let young = Arc::new(model("young", 2, "emp"));
    let all = vec![old.clone(), young.clone()];
    assert_eq!(
        rejection(&young, &all, &catalogs()).as_deref(),
        Some("NameConflict")
    );
    assert_eq!(rejection(&old, &all, &catalogs()), None);
}

#[test]
fn the_same_verdict_later_reproduces_the_status_exactly() {
    let mut m = model("a", 1, "emp");
    let conds = || {
        vec![Desired::new(
            ConditionType::Ready,
            Status::True,
            Reason::ACCEPTED,
            "revision 1 accepted",
        )]
    };
    let first = status_with(&m, SemanticModelStatus::default(), conds(), &at(10));
    m.status = Some(first.clone());
    assert_eq!(
        status_with(&m, first.clone(), conds(), &at(5000)),
        first,
        "equal status means no write"
    );
}

#[test]
fn a_missing_home_catalog_is_rejected_before_any_io() {
    let m = model("a", 1, "emp");
    let only_hr = BTreeMap::from([("hr".to_string(), None)]);
    assert_eq!(
        rejection(&m, &[], &only_hr).as_deref(),
        Some("CatalogNotFound")
    );
}

fn reasons(s: &SemanticModelStatus) -> Vec<Triple> {
    s.conditions
        .iter()
        .map(|c| {
            (
                c.type_.to_string(),
                c.status.to_string(),
                c.reason.to_string(),
            )
        })
        .collect()
}

/// (type, status, reason) of a condition.
type Triple = (String, String, String);

fn triple(t: &str, s: &str, r: &str) -> Triple {
    (t.into(), s.into(), r.into())
}

/// An accepted model: revision 3 with one association and its conditions.
fn accepted_model() -> SemanticModel {
    let mut m = model("a", 1, "emp");
    let accepted = SemanticModelStatus {
        revision: Some(3),
        source_associations: vec![serde_json::from_value(serde_json::json!({
            "dataset": "e", "source": {"catalog": "hr", "schema": "public", "name": "employees"},
            "type": "TABLE", "id": "pg:1:2:r3", "revision": 3
        }))
        .unwrap()],
        ..Default::default()
    };
    let conds = vec![
        Desired::new(
            ConditionType::Ready,
            Status::True,
            Reason::ACCEPTED,
            "revision 3 accepted",
        ),
        valid_ok(),
        Desired::new(
            ConditionType::SourcesResolved,
            Status::True,
            Reason::RESOLVED,
            "1 distinct source(s) resolved",
        ),
        Desired::new(
            ConditionType::SourcesCurrent,
            Status::True,
            Reason::CURRENT,
            "all 1 association(s) match their sources",
        ),
    ];
    m.status = Some(status_with(&m, accepted, conds, &at(10)));
    m
}

#[test]
fn each_outcome_builds_its_conditions_and_keeps_the_accepted_revision_unless_it_commits_one() {
    let m = accepted_model();
    let accepted = m.status.clone().unwrap();
    let rejected = Outcome::Rejected(local_verdict(&m, &BTreeMap::new(), &[]).unwrap());
    let cases: Vec<(&str, Outcome, Vec<Triple>, i64)> = vec![
        (
            "rejected",
            rejected,
            vec![
                triple("Ready", "False", "CatalogNotFound"),
                triple("Reconciling", "True", "CatalogNotFound"),
                triple("Valid", "False", "CatalogNotFound"),
            ],
            3,
        ),
        (
            "pending",
            Outcome::Pending("Catalog \"hr\": Timeout".into()),
            vec![
                triple("Ready", "False", "CatalogUnreachable"),
                triple("Reconciling", "True", "CatalogUnreachable"),
                triple("Valid", "True", "Valid"),
                triple("SourcesResolved", "Unknown", "CatalogUnreachable"),
            ],
            3,
        ),
        (
            "level 3 refused",
            Outcome::SourcesInvalid {
                reason: Reason::COLUMN_NOT_FOUND,
                message: "x".into(),
            },
            vec![
                triple("Ready", "False", "ColumnNotFound"),
                triple("Stalled", "True", "ColumnNotFound"),
                triple("Valid", "True", "Valid"),
                triple("SourcesResolved", "False", "ColumnNotFound"),
            ],
            3,
        ),
        (
            "unchanged, drift not due",
            Outcome::Unchanged(DriftCheck::NotDue),
            vec![
                triple("Ready", "True", "Accepted"),
                triple("Valid", "True", "Valid"),
                triple("SourcesResolved", "True", "Resolved"),
                triple("SourcesCurrent", "True", "Current"),
            ],
            3,
        ),
        (
            "unchanged, a catalog could not answer",
            Outcome::Unchanged(DriftCheck::Unknown("down".into())),
            vec![
                triple("Ready", "True", "Accepted"),
                triple("Valid", "True", "Valid"),
                triple("SourcesResolved", "True", "Resolved"),
                triple("SourcesCurrent", "Unknown", "CatalogUnreachable"),
            ],
            3,
        ),
        (
            "preserved (comment changed)",
            Outcome::Accepted(Box::new(Acceptance {
                status: SemanticModelStatus {
                    revision: Some(4),
                    ..accepted.clone()
                },
                revision: 4,
                change: Change::Preserve,
                resolved: None,
            })),
            vec![
                triple("Ready", "True", "Accepted"),
                triple("Valid", "True", "Valid"),
                triple("SourcesResolved", "True", "Resolved"),
                triple("SourcesCurrent", "True", "Current"),
            ],
            4,
        ),
    ];
    for (what, outcome, want, revision) in cases {
        let s = status_for(&m, accepted.clone(), &outcome, &at(20));
        assert_eq!(reasons(&s), want, "{what}");
        assert_eq!(s.revision, Some(revision), "{what}");
        assert_eq!(
            s.source_associations, accepted.source_associations,
            "{what}"
        );
    }
}

#[test]
fn drift_found_by_a_round_is_recorded_and_named() {
    let m = accepted_model();
    let accepted = m.status.clone().unwrap();
    let found: Vec<crate::crd::semantic_model::SourceDrift> = vec![
        serde_json::from_value(serde_json::json!({"dataset": "e", "kind": "SourceMissing"}))
            .unwrap(),
    ];
    let s = status_for(
        &m,
        accepted,
        &Outcome::Unchanged(DriftCheck::Checked(found.clone())),
        &at(20),
    );
    assert_eq!(s.source_drift, found);
    assert_eq!(
        reasons(&s)[3],
        triple("SourcesCurrent", "False", "SourceDrift")
    );
    let unchanged = status_for(
        &m,
        m.status.clone().unwrap(),
        &Outcome::Unchanged(DriftCheck::Checked(vec![])),
        &at(30),
    );
    assert_eq!(
        unchanged,
        m.status.clone().unwrap(),
        "a round that finds nothing new writes nothing"
    );
}

#[test]
fn a_first_acceptance_is_one_the_next_pass_finds_nothing_to_do_for() {
    let mut m = model("a", 1, "emp");
    m.spec.definition.datasets[0].primary_key = Some(vec!["id".into()].into());
    let source = crate::ossie::SourceRef::parse("hr.public.employees").unwrap();
    let lookups = std::collections::HashMap::from([(
        source,
        SourceLookup::Present {
            object_type: crate::catalog::ObjectType::Table,
            native_id: "pg:1:2:r3".into(),
            columns: vec![crate::catalog::Column::new("id", "integer")],
        },
    )]);
    let (status, rev) = first_acceptance(&m, &lookups, &at(5));
    assert_eq!(status.revision, Some(1));
    assert_eq!(
        reasons(&status),
        vec![
            triple("Ready", "True", "Accepted"),
            triple("Valid", "True", "Valid"),
            triple("SourcesResolved", "True", "Resolved"),
            triple("SourcesCurrent", "True", "Current"),
        ]
    );
    assert_eq!(status.source_associations.len(), 1);
    assert_eq!(
        status.source_associations[0].columns.len(),
        1,
        "the key's column"
    );
    // The revision holds the snapshot and ids the status commits.
    assert_eq!(rev.revision, Some(1));
    assert_eq!(rev.metadata.name, Some(m.revision_object_name(1)));
    let snapshot = status.snapshot_hash.as_ref().map(ToString::to_string);
    assert_eq!(rev.data.0["snapshotHash"].as_str(), snapshot.as_deref());
    assert_eq!(
        rev.data.0["metrics"],
        serde_json::to_value(&status.metrics).unwrap()
    );
    // Committed, it is the accepted state: the next pass is a no-op.
    assert!(matches!(
        canonical::decide(&m.spec, m.model_name(), &status),
        Change::NoOp
    ));
}

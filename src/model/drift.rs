//! Source drift (DESIGN 3.4): compare each association with what its catalog says now. Pure:
//! the probes and id lookups are done by the caller.

use std::collections::HashMap;

use crate::catalog::{Found, Probe, ProbeTarget};
use crate::crd::semantic_model::{DriftKind, SourceAssociation, SourceDrift};

/// The probe target of an association's source.
pub fn target_of(a: &SourceAssociation) -> ProbeTarget {
    ProbeTarget::relation(&a.source.schema, &a.source.name)
}

/// One drift entry per dataset whose source changed. `by_name` answers each association's
/// (catalog, target); `by_id` answers `find_by_id` for the ids whose names were absent.
pub fn classify(
    associations: &[SourceAssociation],
    by_name: &HashMap<(String, ProbeTarget), Probe>,
    by_id: &HashMap<String, Option<Found>>,
) -> Vec<SourceDrift> {
    associations
        .iter()
        .filter_map(|a| {
            let (kind, current) = match by_name.get(&(a.source.catalog.clone(), target_of(a)))? {
                Probe::Present { native_id, .. } if *native_id == a.id => return None,
                Probe::Present { native_id, .. } => {
                    (DriftKind::SourceReplaced, Some(native_id.clone()))
                }
                Probe::Absent => match by_id.get(&a.id) {
                    Some(Some(Found {
                        target: ProbeTarget::Relation { schema, name },
                        ..
                    })) => (DriftKind::SourceRenamed, Some(format!("{schema}.{name}"))),
                    _ => (DriftKind::SourceMissing, None),
                },
            };
            Some(SourceDrift {
                dataset: a.dataset.clone(),
                kind,
                current,
            })
        })
        .collect()
}

/// Condition message summarizing drift.
pub fn summarize(drift: &[SourceDrift]) -> String {
    drift
        .iter()
        .map(|d| match &d.current {
            Some(c) => format!("dataset {:?}: {:?} ({c})", d.dataset, d.kind),
            None => format!("dataset {:?}: {:?}", d.dataset, d.kind),
        })
        .collect::<Vec<_>>()
        .join("; ")
        + "; change spec.rebind to resolve the sources again"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ObjectType;
    use crate::crd::semantic_model::SourceName;

    fn assoc(dataset: &str, name: &str, id: &str) -> SourceAssociation {
        SourceAssociation {
            dataset: dataset.into(),
            source: SourceName {
                catalog: "hr".into(),
                schema: "public".into(),
                name: name.into(),
            },
            object_type: "TABLE".into(),
            id: id.into(),
            revision: 1,
        }
    }

    fn present(id: &str) -> Probe {
        Probe::Present {
            object_type: ObjectType::Table,
            native_id: id.into(),
        }
    }

    #[test]
    fn each_change_of_a_source_is_classified() {
        let assocs = vec![
            assoc("same", "t1", "id1"),
            assoc("renamed", "t2", "id2"),
            assoc("missing", "t3", "id3"),
            assoc("replaced", "t4", "id4"),
        ];
        let key = |n: &str| ("hr".to_string(), ProbeTarget::relation("public", n));
        let by_name = HashMap::from([
            (key("t1"), present("id1")),
            (key("t2"), Probe::Absent),
            (key("t3"), Probe::Absent),
            (key("t4"), present("id9")),
        ]);
        let by_id = HashMap::from([
            (
                "id2".to_string(),
                Some(Found {
                    target: ProbeTarget::relation("public", "t2_new"),
                    object_type: ObjectType::Table,
                }),
            ),
            ("id3".to_string(), None),
        ]);
        let drift = classify(&assocs, &by_name, &by_id);
        let got: Vec<(&str, DriftKind, Option<&str>)> = drift
            .iter()
            .map(|d| (d.dataset.as_str(), d.kind, d.current.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("renamed", DriftKind::SourceRenamed, Some("public.t2_new")),
                ("missing", DriftKind::SourceMissing, None),
                ("replaced", DriftKind::SourceReplaced, Some("id9")),
            ]
        );
        assert!(summarize(&drift).ends_with("change spec.rebind to resolve the sources again"));
    }

    #[test]
    fn an_unanswered_source_is_not_reported_as_drift() {
        let assocs = vec![assoc("a", "t", "id")];
        assert_eq!(classify(&assocs, &HashMap::new(), &HashMap::new()), vec![]);
    }
}

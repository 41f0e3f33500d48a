//! Source drift (docs/design.md#source-associations-and-drift): compare each association with what its catalog says now. Pure:
//! the probes and id lookups are done by the caller.

use std::collections::HashMap;

use crate::catalog::{Column, Found, Probe, ProbeTarget};
use crate::crd::semantic_model::{Definition, DriftKind, SourceAssociation, SourceDrift};

/// The probe target of an association's source.
pub fn target_of(a: &SourceAssociation) -> ProbeTarget {
    ProbeTarget::relation(a.source.schema.as_str(), a.source.name.as_str())
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
            let (kind, current) =
                match by_name.get(&(a.source.catalog.to_string(), target_of(a)))? {
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
                dataset: a.dataset.to_string(),
                kind,
                current,
                column: None,
                used_by: vec![],
            })
        })
        .collect()
}

/// Column drift of the associations whose source is still the bound object (same id under the
/// same name): each dependency column that is gone, or whose type changed, with what in `def`
/// uses it. `columns` holds the catalog's column lists by target; a source without one (not
/// asked, or no answer) has no column drift.
pub fn classify_columns(
    def: &Definition,
    associations: &[SourceAssociation],
    by_name: &HashMap<(String, ProbeTarget), Probe>,
    columns: &HashMap<(String, ProbeTarget), Vec<Column>>,
) -> Vec<SourceDrift> {
    let mut out = Vec::new();
    for a in associations.iter().filter(|a| !a.columns.is_empty()) {
        let key = (a.source.catalog.to_string(), target_of(a));
        let same = matches!(by_name.get(&key), Some(Probe::Present { native_id, .. }) if *native_id == a.id);
        let Some(now) = columns.get(&key).filter(|_| same) else {
            continue;
        };
        let deps: Vec<String> = a.columns.iter().map(|c| c.name.to_string()).collect();
        for dep in &a.columns {
            let (kind, current) = match now.iter().find(|c| c.name == dep.name) {
                None => (DriftKind::ColumnMissing, None),
                Some(c) if !dep.data_type.is_empty() && c.data_type != dep.data_type => {
                    (DriftKind::ColumnTypeChanged, Some(c.data_type.clone()))
                }
                Some(_) => continue,
            };
            out.push(SourceDrift {
                dataset: a.dataset.to_string(),
                kind,
                current,
                column: Some(dep.name.to_string()),
                used_by: super::columns::usage(def, &a.dataset, &dep.name, &deps).describe(),
            });
        }
    }
    out
}

/// Condition message summarizing drift.
pub fn summarize(drift: &[SourceDrift]) -> String {
    drift
        .iter()
        .map(|d| {
            let mut line = format!("dataset {:?}: {:?}", d.dataset, d.kind);
            if let Some(column) = &d.column {
                line += &format!(" {column:?}");
            }
            if let Some(c) = &d.current {
                line += &format!(" ({c})");
            }
            if !d.used_by.is_empty() {
                line += &format!(", used by {}", d.used_by.join(", "));
            }
            line
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
            columns: vec![],
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
    fn column_drift_names_the_column_its_new_type_and_its_users() {
        let def: Definition = serde_json::from_value(serde_json::json!({
            "datasets": [{"name": "orders", "source": "hr.public.t1", "primaryKey": ["id"]}],
            "metrics": [{"name": "revenue", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "SUM(orders.amount)"}]}}]
        }))
        .unwrap();
        let dep = |n: &str, t: &str| crate::crd::semantic_model::ColumnDependency {
            name: n.into(),
            data_type: t.into(),
        };
        let mut a = assoc("orders", "t1", "id1");
        a.columns = vec![
            dep("amount", "numeric"),
            dep("id", "integer"),
            dep("note", ""),
        ];
        let key = ("hr".to_string(), ProbeTarget::relation("public", "t1"));
        let by_name = HashMap::from([(key.clone(), present("id1"))]);
        /// (kind, column, current, usedBy) of one drift entry.
        type Found<'a> = (DriftKind, &'a str, Option<&'a str>, Vec<&'a str>);
        let cases: Vec<(&str, Vec<Column>, Vec<Found>)> = vec![
            (
                "unchanged",
                vec![
                    Column::new("id", "integer"),
                    Column::new("amount", "numeric"),
                    Column::new("note", "text"),
                ],
                vec![],
            ),
            (
                "dropped column",
                vec![Column::new("id", "integer"), Column::new("note", "text")],
                vec![(
                    DriftKind::ColumnMissing,
                    "amount",
                    None,
                    vec!["metric revenue"],
                )],
            ),
            (
                "type change (an unrecorded type is never compared)",
                vec![
                    Column::new("id", "bigint"),
                    Column::new("amount", "numeric"),
                    Column::new("note", "json"),
                ],
                vec![(
                    DriftKind::ColumnTypeChanged,
                    "id",
                    Some("bigint"),
                    vec!["primaryKey"],
                )],
            ),
            (
                "renamed column",
                vec![
                    Column::new("ident", "integer"),
                    Column::new("amount", "numeric"),
                    Column::new("note", "text"),
                ],
                vec![(DriftKind::ColumnMissing, "id", None, vec!["primaryKey"])],
            ),
        ];
        for (what, now, want) in cases {
            let columns = HashMap::from([(key.clone(), now)]);
            let got = classify_columns(&def, std::slice::from_ref(&a), &by_name, &columns);
            let got: Vec<Found> = got
                .iter()
                .map(|d| {
                    (
                        d.kind,
                        d.column.as_deref().unwrap(),
                        d.current.as_deref(),
                        d.used_by.iter().map(String::as_str).collect(),
                    )
                })
                .collect();
            assert_eq!(got, want, "{what}");
        }
        // A replaced source is source drift, not column drift; an unanswered one is neither.
        let replaced = HashMap::from([(key.clone(), present("id9"))]);
        let columns = HashMap::from([(key.clone(), vec![])]);
        assert_eq!(
            classify_columns(&def, std::slice::from_ref(&a), &replaced, &columns),
            vec![]
        );
        assert_eq!(
            classify_columns(&def, &[a], &by_name, &HashMap::new()),
            vec![]
        );
    }

    #[test]
    fn an_unanswered_source_is_not_reported_as_drift() {
        let assocs = vec![assoc("a", "t", "id")];
        assert_eq!(classify(&assocs, &HashMap::new(), &HashMap::new()), vec![]);
    }
}

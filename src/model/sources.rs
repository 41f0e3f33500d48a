//! Level 3 of docs/design.md#validation-in-three-levels and the association set of docs/design.md#source-associations-and-drift, from what the live systems
//! answered about each distinct source (the I/O happens before, in the controller).

use smol_str::SmolStr;
use std::collections::{BTreeMap, HashMap};

use super::validate::{Problem, Reason};
use crate::catalog::{Column, ObjectType};
use crate::crd::semantic_model::{ColumnDependency, Definition, SourceAssociation, SourceName};
use crate::ossie::SourceRef;

/// What a catalog said about one distinct source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceLookup {
    Present {
        object_type: ObjectType,
        native_id: String,
        columns: Vec<Column>,
    },
    Absent,
    /// The source names a managed catalog, which holds no tables.
    InManagedCatalog,
}

/// The distinct sources of a definition, each once, in first-use order.
pub fn distinct_sources(def: &Definition) -> Vec<SourceRef> {
    let mut out: Vec<SourceRef> = Vec::new();
    for ds in &def.datasets {
        if let Ok(r) = SourceRef::parse(&ds.source)
            && !out.contains(&r)
        {
            out.push(r);
        }
    }
    out
}

/// Every source resolves to a table or view; every key and relationship column exists.
pub fn validate_sources(
    def: &Definition,
    lookups: &HashMap<SourceRef, SourceLookup>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut columns_of: HashMap<&str, Vec<&str>> = HashMap::new();
    for (i, ds) in def.datasets.iter().enumerate() {
        let path = format!("spec.definition.datasets[{i}]");
        let Ok(source) = SourceRef::parse(&ds.source) else {
            continue;
        };
        match lookups.get(&source) {
            // A topic's fields are not known without a schema registry: its keys are not checked.
            Some(SourceLookup::Present {
                object_type: ObjectType::Topic,
                ..
            }) => {}
            Some(SourceLookup::Present { columns, .. }) => {
                columns_of.insert(
                    ds.name.as_str(),
                    columns.iter().map(|c| c.name.as_str()).collect(),
                );
            }
            Some(SourceLookup::InManagedCatalog) => problems.push(Problem {
                reason: Reason::SourceNotFound,
                path: format!("{path}.source"),
                message: format!("dataset {:?}: Catalog {:?} is managed and holds no tables, views or topics; point the source at a postgresql, mysql or kafka Catalog", ds.name, source.catalog),
            }),
            Some(SourceLookup::Absent) | None => problems.push(Problem {
                reason: Reason::SourceNotFound,
                path: format!("{path}.source"),
                message: format!("dataset {:?}: no table, view or topic {source} exists; create it or fix the source", ds.name),
            }),
        }
    }
    let mut check = |dataset: &str, path: String, cols: &[SmolStr]| {
        let Some(known) = columns_of.get(dataset) else {
            return;
        };
        for (k, c) in cols.iter().enumerate() {
            if !known.contains(&c.as_str()) {
                problems.push(Problem {
                    reason: Reason::ColumnNotFound,
                    path: format!("{path}[{k}]"),
                    message: format!("dataset {dataset:?} has no column {c:?} in its source"),
                });
            }
        }
    };
    for (i, ds) in def.datasets.iter().enumerate() {
        if let Some(pk) = &ds.primary_key {
            check(
                &ds.name,
                format!("spec.definition.datasets[{i}].primaryKey"),
                pk,
            );
        }
        for (u, key) in ds.unique_keys.iter().flatten().enumerate() {
            check(
                &ds.name,
                format!("spec.definition.datasets[{i}].uniqueKeys[{u}]"),
                key,
            );
        }
    }
    for (i, rel) in def.relationships.iter().flatten().enumerate() {
        check(
            &rel.from,
            format!("spec.definition.relationships[{i}].fromColumns"),
            &rel.from_columns,
        );
        check(
            &rel.to,
            format!("spec.definition.relationships[{i}].toColumns"),
            &rel.to_columns,
        );
    }
    problems
}

/// One association per dataset (two datasets on one source give two), for a definition whose
/// sources all resolved, each with the columns the dataset depends on (model::columns) and
/// their types now.
pub fn build_associations(
    def: &Definition,
    lookups: &HashMap<SourceRef, SourceLookup>,
    revision: i64,
) -> Vec<SourceAssociation> {
    let present = |ds: &crate::crd::semantic_model::Dataset| {
        let source = SourceRef::parse(&ds.source).ok()?;
        match lookups.get(&source)? {
            SourceLookup::Present {
                object_type,
                native_id,
                columns,
            } => Some((source, *object_type, native_id, columns)),
            _ => None,
        }
    };
    let columns_of: BTreeMap<String, Vec<String>> = def
        .datasets
        .iter()
        .filter_map(|ds| {
            let (_, _, _, cols) = present(ds)?;
            Some((
                ds.name.to_string(),
                cols.iter().map(|c| c.name.clone()).collect(),
            ))
        })
        .collect();
    let deps = super::columns::dependencies(def, &columns_of);
    def.datasets
        .iter()
        .filter_map(|ds| {
            let (source, object_type, native_id, cols) = present(ds)?;
            let columns = deps
                .get(ds.name.as_str())
                .into_iter()
                .flatten()
                .filter_map(|name| cols.iter().find(|c| c.name == *name))
                .map(|c| ColumnDependency {
                    name: c.name.as_str().into(),
                    data_type: c.data_type.as_str().into(),
                })
                .collect();
            Some(SourceAssociation {
                dataset: ds.name.clone(),
                source: SourceName {
                    catalog: source.catalog.into(),
                    schema: source.schema.into(),
                    name: source.name.into(),
                },
                object_type: object_type.as_str().into(),
                id: native_id.clone(),
                revision,
                columns,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def() -> Definition {
        serde_json::from_value(json!({
            "datasets": [
                {"name": "employee", "source": "hr.public.employees", "primaryKey": ["id"], "uniqueKeys": [["email"]]},
                {"name": "manager", "source": "hr.public.employees"},
                {"name": "dept", "source": "hr.public.v_departments", "primaryKey": ["id"]}
            ],
            "relationships": [
                {"name": "reports_to", "from": "employee", "to": "manager", "fromColumns": ["manager_id"], "toColumns": ["id"]},
                {"name": "works_in", "from": "employee", "to": "dept", "fromColumns": ["department_id"], "toColumns": ["id"]}
            ]
        }))
        .unwrap()
    }

    fn present(t: ObjectType, id: &str, cols: &[&str]) -> SourceLookup {
        SourceLookup::Present {
            object_type: t,
            native_id: id.into(),
            columns: cols.iter().map(|c| Column::new(*c, "integer")).collect(),
        }
    }

    fn lookups() -> HashMap<SourceRef, SourceLookup> {
        HashMap::from([
            (
                SourceRef::new("hr", "public", "employees"),
                present(
                    ObjectType::Table,
                    "pg:1:2:r10",
                    &["id", "email", "manager_id", "department_id"],
                ),
            ),
            (
                SourceRef::new("hr", "public", "v_departments"),
                present(ObjectType::View, "pg:1:2:r11", &["id", "name"]),
            ),
        ])
    }

    #[test]
    fn distinct_sources_are_listed_once() {
        assert_eq!(
            distinct_sources(&def()),
            vec![
                SourceRef::new("hr", "public", "employees"),
                SourceRef::new("hr", "public", "v_departments")
            ]
        );
    }

    #[test]
    fn a_fully_resolved_definition_has_no_problems_and_one_association_per_dataset() {
        assert_eq!(validate_sources(&def(), &lookups()), vec![]);
        let a = build_associations(&def(), &lookups(), 3);
        let summary: Vec<(&str, &str, &str)> = a
            .iter()
            .map(|x| (x.dataset.as_str(), x.object_type.as_str(), x.id.as_str()))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("employee", "TABLE", "pg:1:2:r10"),
                ("manager", "TABLE", "pg:1:2:r10"),
                ("dept", "VIEW", "pg:1:2:r11")
            ]
        );
        assert!(a.iter().all(|x| x.revision == 3));
        // Each binding records the columns its dataset uses, with their types: the employee
        // keys and relationship columns, the manager's key, the department's key (not `name`).
        let deps: Vec<(&str, Vec<&str>)> = a
            .iter()
            .map(|x| {
                (
                    x.dataset.as_str(),
                    x.columns.iter().map(|c| c.name.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            deps,
            vec![
                (
                    "employee",
                    vec!["department_id", "email", "id", "manager_id"]
                ),
                ("manager", vec!["id"]),
                ("dept", vec!["id"])
            ]
        );
        assert!(
            a.iter()
                .flat_map(|x| &x.columns)
                .all(|c| c.data_type == "integer")
        );
    }

    #[test]
    fn missing_sources_and_columns_are_named_with_dataset_and_path() {
        type Edit = fn(&mut HashMap<SourceRef, SourceLookup>);
        let cases: Vec<(&str, Edit, Reason, &str, &str)> = vec![
            (
                "absent source",
                |l| {
                    l.insert(
                        SourceRef::new("hr", "public", "v_departments"),
                        SourceLookup::Absent,
                    );
                },
                Reason::SourceNotFound,
                "spec.definition.datasets[2].source",
                "dataset \"dept\"",
            ),
            (
                "managed catalog",
                |l| {
                    l.insert(
                        SourceRef::new("hr", "public", "v_departments"),
                        SourceLookup::InManagedCatalog,
                    );
                },
                Reason::SourceNotFound,
                "spec.definition.datasets[2].source",
                "managed",
            ),
            (
                "primary key column",
                |l| {
                    l.insert(
                        SourceRef::new("hr", "public", "v_departments"),
                        present(ObjectType::View, "x", &["dept_id"]),
                    );
                },
                Reason::ColumnNotFound,
                "spec.definition.datasets[2].primaryKey[0]",
                "no column \"id\"",
            ),
            (
                "unique key column",
                |l| {
                    l.insert(
                        SourceRef::new("hr", "public", "employees"),
                        present(
                            ObjectType::Table,
                            "x",
                            &["id", "manager_id", "department_id"],
                        ),
                    );
                },
                Reason::ColumnNotFound,
                "spec.definition.datasets[0].uniqueKeys[0][0]",
                "\"email\"",
            ),
            (
                "fromColumns",
                |l| {
                    l.insert(
                        SourceRef::new("hr", "public", "employees"),
                        present(ObjectType::Table, "x", &["id", "email", "department_id"]),
                    );
                },
                Reason::ColumnNotFound,
                "spec.definition.relationships[0].fromColumns[0]",
                "\"manager_id\"",
            ),
        ];
        for (what, edit, reason, path, needle) in cases {
            let mut l = lookups();
            edit(&mut l);
            let problems = validate_sources(&def(), &l);
            let found = problems
                .iter()
                .find(|p| p.path == path)
                .unwrap_or_else(|| panic!("{what}: no problem at {path}: {problems:#?}"));
            assert_eq!(found.reason, reason, "{what}");
            assert!(found.message.contains(needle), "{what}: {}", found.message);
            assert!(
                problems.iter().all(|p| p.reason == reason),
                "{what}: unrelated problems {problems:#?}"
            );
        }
    }
}

//! Table of invalid definitions: each names the reason and the field path it must report.

use super::*;
use serde_json::json;

fn employee_model() -> Value {
    json!({
        "catalog": "analytics",
        "schema": "semantic",
        "name": "employee_analysis",
        "definition": {
            "aiContext": "Use certified metrics only",
            "datasets": [
                {"name": "employee", "source": "hr.public.employees", "primaryKey": ["id"],
                 "fields": [{"name": "salary", "datatype": "Decimal",
                             "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "salary"}]}}]},
                {"name": "manager", "source": "hr.public.employees", "primaryKey": ["id"]},
                {"name": "department", "source": "hr.public.departments"}
            ],
            "relationships": [
                {"name": "reports_to", "from": "employee", "to": "manager", "fromColumns": ["manager_id"], "toColumns": ["id"]}
            ],
            "metrics": [
                {"name": "headcount", "datatype": "Integer",
                 "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "COUNT(employee.id)"}]}}
            ]
        }
    })
}

fn catalogs() -> BTreeMap<String, Option<Vec<String>>> {
    BTreeMap::from([
        ("hr".to_string(), None),
        ("analytics".to_string(), Some(vec!["semantic".to_string()])),
    ])
}

/// All problems of a spec value: shape first (as the API server would), then levels 1-2.
fn problems_of(value: &Value) -> Vec<Problem> {
    match parse_spec(value) {
        Err(p) => vec![p],
        Ok(spec) => {
            let mut ps = validate_definition(&spec);
            ps.extend(validate_catalog_refs(&spec, &catalogs()));
            ps
        }
    }
}

/// Sets the value at `pointer`, adding the last key to its object when it is not there yet.
fn set(v: &mut Value, pointer: &str, new: Value) {
    if let Some(slot) = v.pointer_mut(pointer) {
        *slot = new;
        return;
    }
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    v.pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("no {parent}"))
        .insert(key.to_string(), new);
}

fn remove(v: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let parent = v.pointer_mut(parent).unwrap();
    match parent {
        Value::Object(m) => {
            m.remove(key).unwrap();
        }
        Value::Array(a) => {
            a.remove(key.parse().unwrap());
        }
        _ => panic!("cannot remove from {pointer}"),
    }
}

fn push(v: &mut Value, pointer: &str, new: Value) {
    v.pointer_mut(pointer)
        .unwrap()
        .as_array_mut()
        .unwrap()
        .push(new);
}

#[test]
fn the_design_example_is_valid() {
    assert_eq!(problems_of(&employee_model()), vec![]);
}

#[test]
fn each_invalid_definition_reports_its_reason_and_field_path() {
    use Reason::*;
    type Mutation = fn(&mut Value);
    let cases: Vec<(&str, Mutation, Reason, &str)> = vec![
        (
            "empty home catalog",
            |v| set(v, "/catalog", json!("")),
            MissingValue,
            "spec.catalog",
        ),
        (
            "empty home schema",
            |v| set(v, "/schema", json!("")),
            MissingValue,
            "spec.schema",
        ),
        (
            "empty model name",
            |v| set(v, "/name", json!("")),
            MissingValue,
            "spec.name",
        ),
        (
            "model name with a bidi override",
            |v| set(v, "/name", json!("abc\u{202E}fed")),
            InvalidName,
            "spec.name",
        ),
        (
            "dataset name with a zero-width space",
            |v| {
                set(
                    v,
                    "/definition/datasets/2/name",
                    json!("depart\u{200B}ment"),
                )
            },
            InvalidName,
            "spec.definition.datasets[2].name",
        ),
        (
            "two dataset names equal after NFC normalization",
            |v| {
                set(v, "/definition/datasets/1/name", json!("caf\u{e9}"));
                set(v, "/definition/datasets/2/name", json!("cafe\u{301}"));
                remove(v, "/definition/relationships");
            },
            DuplicateName,
            "spec.definition.datasets[2].name",
        ),
        (
            "a NUL character in a source",
            |v| {
                set(
                    v,
                    "/definition/datasets/2/source",
                    json!("hr.public.depart\u{0}ments"),
                )
            },
            InvalidSource,
            "spec.definition.datasets[2].source",
        ),
        (
            "model name too long",
            |v| set(v, "/name", json!("m".repeat(254))),
            InvalidName,
            "spec.name",
        ),
        (
            "no datasets",
            |v| {
                set(v, "/definition/datasets", json!([]));
                remove(v, "/definition/relationships");
            },
            EmptyList,
            "spec.definition.datasets",
        ),
        (
            "duplicate dataset name",
            |v| {
                push(
                    v,
                    "/definition/datasets",
                    json!({"name": "employee", "source": "hr.public.x"}),
                )
            },
            DuplicateName,
            "spec.definition.datasets[3].name",
        ),
        (
            "empty dataset name",
            |v| set(v, "/definition/datasets/2/name", json!("")),
            MissingValue,
            "spec.definition.datasets[2].name",
        ),
        (
            "dataset name with a NUL",
            |v| set(v, "/definition/datasets/2/name", json!("dep\u{0000}")),
            InvalidName,
            "spec.definition.datasets[2].name",
        ),
        (
            "empty source",
            |v| set(v, "/definition/datasets/0/source", json!("")),
            MissingValue,
            "spec.definition.datasets[0].source",
        ),
        (
            "source with two segments",
            |v| set(v, "/definition/datasets/0/source", json!("hr.employees")),
            InvalidSource,
            "spec.definition.datasets[0].source",
        ),
        (
            "source with an empty segment",
            |v| set(v, "/definition/datasets/1/source", json!("hr..employees")),
            InvalidSource,
            "spec.definition.datasets[1].source",
        ),
        (
            "source with an unterminated quote",
            |v| {
                set(
                    v,
                    "/definition/datasets/0/source",
                    json!("`hr.public.employees"),
                )
            },
            InvalidSource,
            "spec.definition.datasets[0].source",
        ),
        (
            "source catalog missing",
            |v| {
                set(
                    v,
                    "/definition/datasets/1/source",
                    json!("crm.public.accounts"),
                )
            },
            CatalogNotFound,
            "spec.definition.datasets[1].source",
        ),
        (
            "home catalog missing",
            |v| set(v, "/catalog", json!("nowhere")),
            CatalogNotFound,
            "spec.catalog",
        ),
        (
            "home schema not declared by the managed catalog",
            |v| set(v, "/schema", json!("other")),
            SchemaNotFound,
            "spec.schema",
        ),
        (
            "empty primary key",
            |v| set(v, "/definition/datasets/0/primaryKey", json!([])),
            EmptyList,
            "spec.definition.datasets[0].primaryKey",
        ),
        (
            "empty primary key column",
            |v| set(v, "/definition/datasets/0/primaryKey", json!(["id", ""])),
            MissingValue,
            "spec.definition.datasets[0].primaryKey[1]",
        ),
        (
            "duplicate primary key column",
            |v| set(v, "/definition/datasets/0/primaryKey", json!(["id", "id"])),
            DuplicateColumn,
            "spec.definition.datasets[0].primaryKey[1]",
        ),
        (
            "empty unique key",
            |v| {
                set(
                    v,
                    "/definition/datasets/0/uniqueKeys",
                    json!([["email"], []]),
                )
            },
            EmptyList,
            "spec.definition.datasets[0].uniqueKeys[1]",
        ),
        (
            "duplicate field name",
            |v| {
                push(
                    v,
                    "/definition/datasets/0/fields",
                    json!({"name": "salary", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "x"}]}}),
                )
            },
            DuplicateName,
            "spec.definition.datasets[0].fields[1].name",
        ),
        (
            "field without dialects",
            |v| {
                set(
                    v,
                    "/definition/datasets/0/fields/0/expression/dialects",
                    json!([]),
                )
            },
            EmptyList,
            "spec.definition.datasets[0].fields[0].expression.dialects",
        ),
        (
            "duplicate dialect",
            |v| {
                push(
                    v,
                    "/definition/datasets/0/fields/0/expression/dialects",
                    json!({"dialect": "ANSI_SQL", "expression": "y"}),
                )
            },
            DuplicateName,
            "spec.definition.datasets[0].fields[0].expression.dialects[1].dialect",
        ),
        (
            "empty dialect expression",
            |v| {
                set(
                    v,
                    "/definition/metrics/0/expression/dialects/0/expression",
                    json!(""),
                )
            },
            MissingValue,
            "spec.definition.metrics[0].expression.dialects[0].expression",
        ),
        (
            "unknown dialect",
            |v| {
                set(
                    v,
                    "/definition/metrics/0/expression/dialects/0/dialect",
                    json!("COBOL"),
                )
            },
            SchemaMismatch,
            "spec.definition.metrics[0].expression.dialects[0].dialect",
        ),
        (
            "unknown datatype",
            |v| set(v, "/definition/metrics/0/datatype", json!("Money")),
            SchemaMismatch,
            "spec.definition.metrics[0].datatype",
        ),
        (
            "metric without expression",
            |v| remove(v, "/definition/metrics/0/expression"),
            SchemaMismatch,
            "spec.definition.metrics[0]",
        ),
        (
            "missing definition",
            |v| remove(v, "/definition"),
            SchemaMismatch,
            "spec",
        ),
        (
            "relationship to an unknown dataset",
            |v| set(v, "/definition/relationships/0/to", json!("mgr")),
            UnknownDataset,
            "spec.definition.relationships[0].to",
        ),
        (
            "relationship from an unknown dataset",
            |v| set(v, "/definition/relationships/0/from", json!("Employee")),
            UnknownDataset,
            "spec.definition.relationships[0].from",
        ),
        (
            "relationship with an empty endpoint",
            |v| set(v, "/definition/relationships/0/from", json!("")),
            MissingValue,
            "spec.definition.relationships[0].from",
        ),
        (
            "relationship column counts differ",
            |v| {
                set(
                    v,
                    "/definition/relationships/0/toColumns",
                    json!(["id", "region"]),
                )
            },
            ColumnCountMismatch,
            "spec.definition.relationships[0].toColumns",
        ),
        (
            "relationship without fromColumns",
            |v| set(v, "/definition/relationships/0/fromColumns", json!([])),
            EmptyList,
            "spec.definition.relationships[0].fromColumns",
        ),
        (
            "duplicate relationship name",
            |v| {
                push(
                    v,
                    "/definition/relationships",
                    json!({"name": "reports_to", "from": "employee", "to": "manager", "fromColumns": ["a"], "toColumns": ["b"]}),
                )
            },
            DuplicateName,
            "spec.definition.relationships[1].name",
        ),
        (
            "duplicate metric name",
            |v| {
                push(
                    v,
                    "/definition/metrics",
                    json!({"name": "headcount", "expression": {"dialects": [{"dialect": "MDX", "expression": "x"}]}}),
                )
            },
            DuplicateName,
            "spec.definition.metrics[1].name",
        ),
        (
            "empty metric name",
            |v| set(v, "/definition/metrics/0/name", json!("")),
            MissingValue,
            "spec.definition.metrics[0].name",
        ),
        (
            "aiContext as a number",
            |v| set(v, "/definition/aiContext", json!(42)),
            InvalidAiContext,
            "spec.definition.aiContext",
        ),
        (
            "aiContext as a list on a metric",
            |v| set(v, "/definition/metrics/0/aiContext", json!(["a"])),
            InvalidAiContext,
            "spec.definition.metrics[0].aiContext",
        ),
        (
            "extension without vendor",
            |v| {
                set(
                    v,
                    "/definition/customExtensions",
                    json!([{"vendorName": "", "data": "{}"}]),
                )
            },
            MissingValue,
            "spec.definition.customExtensions[0].vendorName",
        ),
        (
            "a metric renamed from itself",
            |v| set(v, "/definition/metrics/0/renamedFrom", json!("headcount")),
            InvalidRename,
            "spec.definition.metrics[0].renamedFrom",
        ),
        (
            "a rename from a name still present (a chain in one revision)",
            |v| {
                push(
                    v,
                    "/definition/metrics",
                    json!({"name": "staff", "renamedFrom": "headcount", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "COUNT(*)"}]}}),
                )
            },
            InvalidRename,
            "spec.definition.metrics[1].renamedFrom",
        ),
        (
            "two renames from one name",
            |v| {
                set(v, "/definition/metrics/0/renamedFrom", json!("people"));
                push(
                    v,
                    "/definition/metrics",
                    json!({"name": "staff", "renamedFrom": "people", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "COUNT(*)"}]}}),
                )
            },
            InvalidRename,
            "spec.definition.metrics[1].renamedFrom",
        ),
        (
            "a deprecation whose replacement does not exist",
            |v| {
                set(
                    v,
                    "/definition/metrics/0/deprecated",
                    json!({"replacement": "staff", "reason": "counts contractors"}),
                )
            },
            UnknownReplacement,
            "spec.definition.metrics[0].deprecated.replacement",
        ),
        (
            "a deprecation replaced by itself",
            |v| {
                set(
                    v,
                    "/definition/metrics/0/deprecated",
                    json!({"replacement": "headcount"}),
                )
            },
            UnknownReplacement,
            "spec.definition.metrics[0].deprecated.replacement",
        ),
        (
            "source as a number",
            |v| set(v, "/definition/datasets/0/source", json!(7)),
            SchemaMismatch,
            "spec.definition.datasets[0].source",
        ),
    ];
    assert!(cases.len() >= 25);
    for (what, mutate, reason, path) in cases {
        let mut value = employee_model();
        mutate(&mut value);
        let problems = problems_of(&value);
        assert_eq!(
            problems.len(),
            1,
            "{what}: expected exactly one problem, got {problems:#?}"
        );
        assert_eq!(
            (problems[0].reason, problems[0].path.as_str()),
            (reason, path),
            "{what}: {}",
            problems[0]
        );
        assert!(!problems[0].message.is_empty(), "{what}: empty message");
    }
}

#[test]
fn unknown_dataset_message_names_the_missing_dataset() {
    let mut value = employee_model();
    set(&mut value, "/definition/relationships/0/to", json!("mgr"));
    let problems = problems_of(&value);
    assert_eq!(
        problems[0].to_string(),
        r#"spec.definition.relationships[0].to: no dataset named "mgr""#
    );
}

#[test]
fn aicontext_may_be_an_object_with_any_keys() {
    let mut value = employee_model();
    set(
        &mut value,
        "/definition/aiContext",
        json!({"instructions": "x", "synonyms": ["a"], "vendorHint": {"deep": [1, 2]}}),
    );
    assert_eq!(problems_of(&value), vec![]);
}

#[test]
fn a_missing_source_catalog_is_reported_once_however_many_datasets_use_it() {
    let mut value = employee_model();
    set(
        &mut value,
        "/definition/datasets/0/source",
        json!("crm.a.b"),
    );
    set(
        &mut value,
        "/definition/datasets/1/source",
        json!("crm.a.c"),
    );
    let problems = problems_of(&value);
    assert_eq!(problems.len(), 1, "{problems:#?}");
}

#[test]
fn a_summary_lists_the_first_problems_then_a_count() {
    let problems: Vec<Problem> = (0..7)
        .map(|i| Problem {
            reason: Reason::MissingValue,
            path: format!("p{i}"),
            message: "m".into(),
        })
        .collect();
    assert_eq!(
        summarize(&problems),
        "p0: m; p1: m; p2: m; p3: m; p4: m; and 2 more"
    );
    // Exactly five are all shown, with no "and 0 more".
    assert_eq!(
        summarize(&problems[..5]),
        "p0: m; p1: m; p2: m; p3: m; p4: m"
    );
}

#[test]
fn a_name_of_exactly_the_longest_length_is_valid_and_one_more_character_is_not() {
    // Characters, not bytes: "é" is two bytes.
    for (len, valid) in [(MAX_NAME_LEN, true), (MAX_NAME_LEN + 1, false)] {
        let mut value = employee_model();
        set(
            &mut value,
            "/definition/metrics/0/name",
            json!("é".repeat(len)),
        );
        let problems = problems_of(&value);
        assert_eq!(problems.is_empty(), valid, "{len}: {problems:#?}");
        if !valid {
            assert_eq!(problems[0].reason, Reason::InvalidName);
            assert_eq!(problems[0].path, "spec.definition.metrics[0].name");
        }
    }
}

/// `renamedFrom` against the accepted revision: a live name or one this metric already took is
/// fine; anything else is refused naming the field; with nothing accepted it is inert.
#[test]
fn renames_are_checked_against_the_accepted_revision() {
    use crate::crd::semantic_model::{Metric, MetricIdentity};
    let metric = |name: &str, from: &str| Metric {
        name: name.into(),
        renamed_from: Some(from.into()),
        ..Default::default()
    };
    let live = [
        MetricIdentity::new("headcount", "id1"),
        MetricIdentity {
            name: "staff".into(),
            id: "id2".into(),
            former_names: vec!["employees".into()],
        },
    ];
    let cases = [
        (metric("people", "headcount"), Some(3), None),
        (metric("staff", "employees"), Some(3), None),
        (
            metric("workers", "employees"),
            Some(3),
            Some("\"employees\" is live in the accepted revision 3"),
        ),
        (
            metric("people", "nobody"),
            Some(3),
            Some("no metric named \"nobody\""),
        ),
        (metric("people", "nobody"), None, None),
    ];
    for (i, (m, revision, want)) in cases.into_iter().enumerate() {
        let problems = validate_renames(std::slice::from_ref(&m), &live, revision);
        match want {
            None => assert!(problems.is_empty(), "case {i}: {problems:?}"),
            Some(text) => {
                assert_eq!(problems.len(), 1, "case {i}");
                assert_eq!(problems[0].reason, Reason::InvalidRename);
                assert_eq!(problems[0].path, "spec.definition.metrics[0].renamedFrom");
                assert!(
                    problems[0].message.contains(text),
                    "case {i}: {}",
                    problems[0].message
                );
            }
        }
    }
}

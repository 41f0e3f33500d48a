//! How a plan is written in each dialect: the operators, the placeholders and their numbering,
//! the tables named, the doubles of a division.

use super::super::tests::{ask, field, metric, shop};
use super::super::{Parameter, Target};
use crate::crd::semantic_model::Definition;
use serde_json::{Value, json};

/// One dataset `e` with an integer field `n` and a string field `s`, in `source`.
fn one_table(source: &str) -> Definition {
    serde_json::from_value(json!({
        "datasets": [{"name": "e", "source": source, "fields": [
            field("n", "n", Some("Integer")),
            field("s", "s", Some("String")),
        ]}],
        "metrics": [metric("count", "COUNT(e.n)")]
    }))
    .unwrap()
}

/// A dialect, how it writes the field `e.n` and the placeholder of the i-th value.
type Dialect = (Target, &'static str, fn(usize) -> String);

fn dialects() -> [Dialect; 3] {
    [
        (Target::Postgres, "\"e\".\"n\"", |i| {
            format!("CAST(${i} AS BIGINT)")
        }),
        (Target::Ansi, "\"e\".n", |_| "CAST(? AS BIGINT)".into()),
        (Target::Mysql, "`e`.`n`", |_| "?".into()),
    ]
}

#[test]
fn each_operator_is_written_with_its_placeholders_in_each_dialect() {
    // (op, values, the condition with {x} for the field and {1}.. for the placeholders)
    let cases: [(&str, Value, &str); 11] = [
        ("eq", json!([3]), "{x} = {1}"),
        ("ne", json!([3]), "{x} <> {1}"),
        ("lt", json!([3]), "{x} < {1}"),
        ("le", json!([3]), "{x} <= {1}"),
        ("gt", json!([3]), "{x} > {1}"),
        ("ge", json!([3]), "{x} >= {1}"),
        ("between", json!([1, 9]), "{x} BETWEEN {1} AND {2}"),
        ("in", json!([1, 2, 3]), "{x} IN ({1}, {2}, {3})"),
        ("not_in", json!([4, 5]), "{x} NOT IN ({1}, {2})"),
        ("is_null", json!([]), "{x} IS NULL"),
        ("is_not_null", json!([]), "{x} IS NOT NULL"),
    ];
    let def = one_table("db.s.e");
    for (op, values, template) in cases {
        let q = json!({"metrics": ["count"], "filters": [{"field": "e.n", "op": op, "values": values}]});
        let bound: Vec<Parameter> = values
            .as_array()
            .unwrap()
            .iter()
            .map(|v| Parameter {
                data_type: "integer",
                value: v.to_string(),
            })
            .collect();
        for (target, x, placeholder) in dialects() {
            let mut want = template.replace("{x}", x);
            for i in 1..=3 {
                want = want.replace(&format!("{{{i}}}"), &placeholder(i));
            }
            let c = ask(&def, q.clone(), target).unwrap();
            assert!(
                c.sql.ends_with(&format!("\nWHERE {want}")),
                "{op} {target:?}: want WHERE {want} at the end of\n{}",
                c.sql
            );
            assert_eq!(c.parameters, bound, "{op} {target:?}");
        }
    }
}

#[test]
fn conditions_are_joined_by_and_and_numbered_in_order() {
    let q = json!({"metrics": ["count"], "filters": [
        {"field": "e.n", "op": "between", "values": [1, 9]},
        {"field": "e.s", "op": "ne", "values": ["x"]},
        {"field": "e.n", "op": "is_not_null"}
    ]});
    let def = one_table("db.s.e");
    for (target, want) in [
        (
            Target::Postgres,
            "\nWHERE \"e\".\"n\" BETWEEN CAST($1 AS BIGINT) AND CAST($2 AS BIGINT)\n  \
             AND \"e\".\"s\" <> $3\n  AND \"e\".\"n\" IS NOT NULL",
        ),
        (
            Target::Ansi,
            "\nWHERE \"e\".n BETWEEN CAST(? AS BIGINT) AND CAST(? AS BIGINT)\n  \
             AND \"e\".s <> ?\n  AND \"e\".n IS NOT NULL",
        ),
        (
            Target::Mysql,
            "\nWHERE `e`.`n` BETWEEN ? AND ?\n  AND `e`.`s` <> ?\n  AND `e`.`n` IS NOT NULL",
        ),
    ] {
        let c = ask(&def, q.clone(), target).unwrap();
        assert!(c.sql.ends_with(want), "{target:?}:\n{}", c.sql);
        let values: Vec<(&str, &str)> = c
            .parameters
            .iter()
            .map(|p| (p.data_type, p.value.as_str()))
            .collect();
        assert_eq!(
            values,
            [("integer", "1"), ("integer", "9"), ("string", "x")],
            "{target:?}"
        );
    }
}

/// In a union every branch filters alike: PostgreSQL binds each value once and both branches
/// name its number; the `?` dialects bind it again in each branch.
#[test]
fn a_union_numbers_each_value_once_on_postgres_and_binds_it_per_branch_elsewhere() {
    let q = json!({"metrics": ["revenue", "units"], "dimensions": ["customers.region"],
                   "filters": [{"field": "customers.region", "op": "in", "values": ["north", "south"]}]});
    for (target, list, bound) in [
        (
            Target::Postgres,
            "\"customers\".\"region\" IN ($1, $2)",
            vec!["north", "south"],
        ),
        (
            Target::Ansi,
            "\"customers\".region IN (?, ?)",
            vec!["north", "south", "north", "south"],
        ),
        (
            Target::Mysql,
            "`customers`.`region` IN (?, ?)",
            vec!["north", "south", "north", "south"],
        ),
    ] {
        let c = ask(&shop(), q.clone(), target).unwrap();
        assert_eq!(
            c.sql.matches("UNION ALL").count(),
            1,
            "{target:?}:\n{}",
            c.sql
        );
        assert_eq!(c.sql.matches(list).count(), 2, "{target:?}:\n{}", c.sql);
        let values: Vec<&str> = c.parameters.iter().map(|p| p.value.as_str()).collect();
        assert_eq!(values, bound, "{target:?}");
        if target != Target::Postgres {
            assert_eq!(c.sql.matches('?').count(), bound.len(), "{target:?}");
        }
    }
}

#[test]
fn a_ratio_divides_as_doubles_in_each_dialect() {
    for (target, want) in [
        (
            Target::Postgres,
            "CAST(\"q\".\"revenue\" AS DOUBLE PRECISION) / CAST(\"q\".\"orders\" AS DOUBLE PRECISION) AS \"average_order\"",
        ),
        (
            Target::Ansi,
            "CAST(\"q\".\"revenue\" AS DOUBLE PRECISION) / CAST(\"q\".\"orders\" AS DOUBLE PRECISION) AS \"average_order\"",
        ),
        (
            Target::Mysql,
            "CAST(`q`.`revenue` AS DOUBLE) / CAST(`q`.`orders` AS DOUBLE) AS `average_order`",
        ),
    ] {
        let c = ask(&shop(), json!({"metrics": ["average_order"]}), target).unwrap();
        assert!(
            c.sql.contains(want),
            "{target:?}: want {want} in\n{}",
            c.sql
        );
        assert!(
            c.sql.ends_with(") AS \"q\"") || c.sql.ends_with(") AS `q`"),
            "{}",
            c.sql
        );
    }
}

/// A source that is not `catalog.schema.table` is named whole, as one quoted table name.
#[test]
fn a_source_that_is_not_three_names_is_one_table_name() {
    for (source, target, want) in [
        ("db.s.e", Target::Postgres, "\nFROM \"s\".\"e\" AS \"e\""),
        ("db.s.e", Target::Mysql, "\nFROM `s`.`e` AS `e`"),
        ("e_table", Target::Postgres, "\nFROM \"e_table\" AS \"e\""),
        ("e_table", Target::Mysql, "\nFROM `e_table` AS `e`"),
        ("e_table", Target::Ansi, "\nFROM \"e_table\" AS \"e\""),
    ] {
        let c = ask(&one_table(source), json!({"metrics": ["count"]}), target).unwrap();
        assert!(c.sql.ends_with(want), "{source} {target:?}:\n{}", c.sql);
    }
}

/// Metrics of two datasets without dimensions: one row, so the union is combined without
/// grouping, and each branch aggregates without grouping either.
#[test]
fn a_union_without_dimensions_is_combined_into_one_row() {
    for target in [Target::Postgres, Target::Ansi, Target::Mysql] {
        let c = ask(&shop(), json!({"metrics": ["revenue", "units"]}), target).unwrap();
        assert_eq!(
            c.sql.matches("UNION ALL").count(),
            1,
            "{target:?}:\n{}",
            c.sql
        );
        assert!(!c.sql.contains("GROUP BY"), "{target:?}:\n{}", c.sql);
        let u = if target == Target::Mysql {
            "`u`"
        } else {
            "\"u\""
        };
        assert!(
            c.sql.ends_with(&format!(") AS {u}")),
            "{target:?}:\n{}",
            c.sql
        );
        assert_eq!(c.columns, ["revenue", "units"]);
    }
}

//! How the planner reads a question against a model: names asked twice, grains per field,
//! output names that clash, the hints of an unknown name, and how deep derived metrics nest.

use super::tests::{ask, field, shop, with_metrics};
use super::*;
use crate::crd::semantic_model::{Definition, Field};
use serde_json::json;

fn with_order_fields(mut def: Definition, fields: &[serde_json::Value]) -> Definition {
    let orders = &mut def.datasets[1];
    let mut all = orders.fields.take().unwrap().into_vec();
    all.extend(
        fields
            .iter()
            .map(|f| serde_json::from_value::<Field>(f.clone()).unwrap()),
    );
    orders.fields = Some(all.into());
    def
}

fn refused(def: &Definition, q: serde_json::Value) -> QueryError {
    ask(def, q.clone(), Target::Postgres)
        .map(|c| c.sql)
        .expect_err(&q.to_string())
}

#[test]
fn a_name_asked_or_ordered_twice_is_refused_at_its_second_place() {
    for (q, parameter, says) in [
        (
            json!({"metrics": ["revenue"], "dimensions": ["customers.region", "customers.region"]}),
            "dimensions[1]",
            "dimension \"customers.region\" is asked for twice",
        ),
        (
            json!({"metrics": ["revenue"], "order": ["revenue", "-revenue"]}),
            "order[1]",
            "\"revenue\" is ordered by twice",
        ),
        (
            json!({"metrics": ["revenue"], "dimensions": ["customers.region"],
                   "order": ["-customers.region", "customers.region"]}),
            "order[1]",
            "\"customers.region\" is ordered by twice",
        ),
    ] {
        let e = refused(&shop(), q.clone());
        assert_eq!(
            (e.kind, e.parameter.as_str()),
            (ErrorKind::Invalid, parameter),
            "{q}: {e}"
        );
        assert!(e.message.contains(says), "{q}: {e}");
    }
}

#[test]
fn a_grain_needs_a_field_that_is_a_date_or_timestamp_or_marked_as_time() {
    let mut at_time = field("at_time", "at_time", Some("Time"));
    let untyped = field("untyped", "untyped", None);
    let mut untyped_time = field("untyped_time", "untyped_time", None);
    untyped_time["dimension"] = json!({"isTime": true});
    let mut label_time = field("label_time", "label_time", Some("String"));
    label_time["dimension"] = json!({"isTime": true});
    let mut not_time = field("not_time", "ordered_at", Some("DateTime"));
    not_time["dimension"] = json!({"isTime": false});
    // Marked as time or not, a time of day has no date to truncate.
    at_time["dimension"] = json!({"isTime": true});
    let def = with_order_fields(
        shop(),
        &[at_time, untyped, untyped_time, label_time, not_time],
    );
    for (dimension, refusal) in [
        ("orders.ordered_at", None),
        ("customers.signed_up", None),
        ("orders.untyped_time", None),
        ("orders.label_time", None),
        (
            "orders.at_time",
            Some("orders.at_time is a time of day. Drop :month"),
        ),
        (
            "orders.untyped",
            Some("orders.untyped is not marked as time (dimension.isTime)"),
        ),
        ("orders.not_time", Some("orders.not_time is DateTime")),
        ("customers.region", Some("customers.region is String")),
    ] {
        let q = json!({"metrics": ["revenue"], "dimensions": [format!("{dimension}:month")]});
        match (refusal, ask(&def, q, Target::Postgres)) {
            (None, Ok(c)) => assert!(
                c.sql.contains("DATE_TRUNC('month'"),
                "{dimension}: {}",
                c.sql
            ),
            (Some(says), Err(e)) => {
                assert_eq!(
                    (e.kind, e.parameter.as_str()),
                    (ErrorKind::WrongType, "dimensions[0]")
                );
                assert!(e.message.contains(says), "{dimension}: {e}");
                assert!(
                    e.message
                        .starts_with("grain month needs a date or timestamp field"),
                    "{e}"
                );
            }
            (want, got) => panic!("{dimension}: want {want:?}, got {:?}", got.map(|c| c.sql)),
        }
    }
}

#[test]
fn output_names_that_clash_are_told_apart_or_refused() {
    // A field named like another dimension's grained alias: the second alias gains a `_`.
    let def = with_order_fields(
        shop(),
        &[field("ordered_at__month", "label", Some("String"))],
    );
    let q = json!({"metrics": ["revenue"], "dimensions": ["orders.ordered_at:month", "orders.ordered_at__month"]});
    let c = ask(&def, q, Target::Postgres).unwrap();
    assert_eq!(
        c.columns,
        [
            "orders__ordered_at__month",
            "orders__ordered_at__month_",
            "revenue"
        ]
    );
    // A metric named like a dimension's alias cannot share the output.
    let def = with_metrics(shop(), &[("customers__region", "COUNT(customers.id)")]);
    let e = refused(
        &def,
        json!({"metrics": ["customers__region"], "dimensions": ["customers.region"]}),
    );
    assert_eq!(
        (e.kind, e.parameter.as_str()),
        (ErrorKind::Invalid, "metrics")
    );
    assert!(
        e.message
            .contains("metric customers__region has the output name of a dimension"),
        "{e}"
    );
}

#[test]
fn an_unknown_name_is_answered_with_up_to_ten_known_ones() {
    // shop has 9 metrics: one more lists all 10; three more list 10 and count the rest.
    let ten = with_metrics(shop(), &[("m10", "COUNT(orders.order_id)")]);
    let e = refused(&ten, json!({"metrics": ["nope"]}));
    assert_eq!(
        e.message,
        "unknown metric \"nope\"; the model has average_order, buyers, m10, net_per_order, \
         net_sales, orders, revenue, units, uplift, visits"
    );
    let twelve = with_metrics(
        ten,
        &[
            ("m11", "COUNT(orders.order_id)"),
            ("m12", "COUNT(orders.order_id)"),
        ],
    );
    let e = refused(&twelve, json!({"metrics": ["nope"]}));
    assert_eq!(
        e.message,
        "unknown metric \"nope\"; the model has average_order, buyers, m10, m11, m12, \
         net_per_order, net_sales, orders, revenue, units and 2 more"
    );
    for (dimension, says) in [
        (
            "customers",
            "unknown field \"customers\"; write dataset.field",
        ),
        (
            "nope.x",
            "unknown field \"nope.x\"; no dataset \"nope\"; datasets: customers, lines, orders, products, visits",
        ),
        (
            "products.colour",
            "unknown field \"products.colour\"; dataset products has fields category",
        ),
    ] {
        let e = refused(
            &shop(),
            json!({"metrics": ["revenue"], "dimensions": [dimension]}),
        );
        assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Unknown, says));
    }
}

#[test]
fn derived_metrics_nest_at_most_sixteen_deep() {
    // d0 = d1 * 1, …, d{n-1} = revenue * 1: n derived metrics above a simple one.
    let chain = |n: usize| {
        let metrics: Vec<(String, String)> = (0..n)
            .map(|i| {
                let next = if i + 1 == n {
                    "revenue".to_string()
                } else {
                    format!("d{}", i + 1)
                };
                (format!("d{i}"), format!("{next} * 1"))
            })
            .collect();
        let borrowed: Vec<(&str, &str)> = metrics
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        with_metrics(shop(), &borrowed)
    };
    let c = ask(&chain(15), json!({"metrics": ["d0"]}), Target::Postgres).unwrap();
    assert_eq!(c.metrics[0].uses, ["revenue"]);
    let e = refused(&chain(16), json!({"metrics": ["d0"]}));
    assert_eq!(
        (e.kind, e.parameter.as_str()),
        (ErrorKind::Model, "metrics[revenue]")
    );
    assert_eq!(e.message, "derived metrics nest deeper than 16");
}

#[test]
fn a_metric_used_twice_below_a_derived_one_is_listed_once() {
    // uplift = net_per_order - average_order: orders is under both.
    let c = ask(
        &shop(),
        json!({"metrics": ["uplift", "orders"]}),
        Target::Postgres,
    )
    .unwrap();
    assert_eq!(c.metrics[0].uses, ["net_sales", "orders", "revenue"]);
    assert!(c.metrics[1].uses.is_empty());
    assert_eq!(c.columns, ["uplift", "orders"]);
}

#[test]
fn each_dialect_orders_nulls_alike_and_types_the_nulls_of_a_union() {
    let q = json!({"metrics": ["revenue", "units"], "dimensions": ["customers.region"],
                   "order": ["-revenue"], "limit": 5});
    // The column as the model writes it: PostgreSQL quotes it folded, ANSI leaves it bare.
    let typed_null = |column: &str| {
        format!(
            "(SELECT SUM((\"lines\".{column})) FROM \"sales\".\"order_lines\" AS \"lines\" WHERE 1 = 0) AS \"units\""
        )
    };
    for (target, has, lacks) in [
        (
            Target::Postgres,
            vec![
                typed_null("\"quantity\""),
                "NULL AS \"revenue\"".into(),
                "\nORDER BY \"revenue\" DESC, \"customers__region\"\nLIMIT 5".into(),
            ],
            "NULL AS \"units\"",
        ),
        (
            Target::Ansi,
            vec![
                typed_null("quantity"),
                "NULL AS \"revenue\"".into(),
                "\nORDER BY \"revenue\" DESC NULLS FIRST, \"customers__region\" ASC NULLS LAST\nLIMIT 5"
                    .into(),
            ],
            "NULL AS \"units\"",
        ),
        (
            Target::Mysql,
            vec![
                "NULL AS `units`".into(),
                "NULL AS `revenue`".into(),
                "SELECT `r`.`customers__region`, `r`.`revenue`, `r`.`units`\nFROM (\n  SELECT\n".into(),
                "\n) AS `r`\nORDER BY `r`.`revenue` IS NULL DESC, `r`.`revenue` DESC, \
                 `r`.`customers__region` IS NULL, `r`.`customers__region`\nLIMIT 5"
                    .into(),
            ],
            "WHERE 1 = 0",
        ),
    ] {
        let sql = ask(&shop(), q.clone(), target).unwrap().sql;
        for part in has {
            assert!(sql.contains(&part), "{target:?}: want {part:?} in\n{sql}");
        }
        assert!(!sql.contains(lacks), "{target:?}: {lacks:?} in\n{sql}");
    }
}

/// A metric may name its dataset more than once; a second dataset, or one the model lacks, is
/// refused and named.
#[test]
fn a_metric_naming_its_dataset_twice_is_one_dataset_and_two_are_refused() {
    let def = with_metrics(
        shop(),
        &[
            ("per_order", "SUM(orders.amount) / COUNT(orders.order_id)"),
            ("mixed", "SUM(orders.amount) / SUM(lines.quantity)"),
            ("stray", "SUM(nowhere.amount)"),
        ],
    );
    let c = ask(&def, json!({"metrics": ["per_order"]}), Target::Postgres).unwrap();
    assert!(
        c.sql.contains(
            "SUM((\"orders\".\"amount\")) / COUNT((\"orders\".\"order_id\")) AS \"per_order\""
        ),
        "{}",
        c.sql
    );
    let e = refused(&def, json!({"metrics": ["mixed"]}));
    assert!(
        e.message
            .contains("aggregates over datasets orders and lines"),
        "{e}"
    );
    let e = refused(&def, json!({"metrics": ["stray"]}));
    assert!(
        e.message
            .contains("`nowhere.amount` names no dataset of the model"),
        "{e}"
    );
}

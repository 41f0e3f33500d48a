use super::*;
use serde_json::json;

fn spec(metrics: serde_json::Value, fields: serde_json::Value) -> SemanticModelSpec {
    serde_json::from_value(json!({
        "catalog": "home", "schema": "semantic",
        "definition": {
            "datasets": [{"name": "orders", "source": "wh.app.orders", "primaryKey": ["id"], "fields": fields}],
            "metrics": metrics,
        }
    }))
    .unwrap()
}

fn metric(name: &str, dialects: &[(&str, &str)]) -> serde_json::Value {
    let ds: Vec<_> = dialects
        .iter()
        .map(|(d, e)| json!({"dialect": d, "expression": e}))
        .collect();
    json!({"name": name, "expression": {"dialects": ds}})
}

fn field(name: &str, sql: &str) -> serde_json::Value {
    json!({"name": name, "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": sql}]}})
}

fn file_diff(base: &SemanticModelSpec, next: &SemanticModelSpec) -> ModelDiff {
    let b = Base {
        name: "m",
        spec: base,
        accepted: None,
    };
    diff_model("ns", "m", "m", next, Some(&b)).unwrap()
}

fn rows(d: &ModelDiff) -> Vec<(Verdict, &str, &str)> {
    d.changes
        .iter()
        .map(|c| (c.verdict, c.what.as_str(), c.subject.as_str()))
        .collect()
}

#[test]
fn expressions_are_compared_per_dialect() {
    use Verdict::*;
    let base = spec(
        json!([metric(
            "revenue",
            &[
                ("ANSI_SQL", "SUM(orders.amount)"),
                ("SNOWFLAKE", "SUM(orders.amount)"),
                ("MDX", "[Measures].[Revenue]")
            ]
        )]),
        json!([]),
    );
    let next = spec(
        json!([metric(
            "revenue",
            &[
                ("ANSI_SQL", "SUM( orders.amount )"),
                ("SNOWFLAKE", "SUM(orders.net)"),
                ("BIGQUERY", "SUM(orders.amount)")
            ]
        )]),
        json!([]),
    );
    let d = file_diff(&base, &next);
    assert_eq!(
        rows(&d),
        vec![
            (Safe, "expression reformatted", "metric revenue"),
            (Breaking, "expression changed", "metric revenue"),
            (Breaking, "dialect removed", "metric revenue"),
            (Safe, "dialect added", "metric revenue"),
        ]
    );
    assert!(
        d.changes[1]
            .detail
            .starts_with("SNOWFLAKE: SUM(orders.amount) → SUM(orders.net)"),
        "{:?}",
        d.changes[1]
    );
    assert_eq!(d.verdict, Breaking);
}

#[test]
fn a_removed_field_breaks_exactly_when_a_metric_names_it() {
    use Verdict::*;
    let base = spec(
        json!([
            metric("revenue", &[("ANSI_SQL", "SUM(orders.amount)")]),
            metric("rows", &[("ANSI_SQL", "COUNT(note)")])
        ]),
        json!([
            field("amount", "gross"),
            field("note", "memo"),
            field("spare", "x")
        ]),
    );
    let next = spec(
        json!([
            metric("revenue", &[("ANSI_SQL", "SUM(orders.amount)")]),
            metric("rows", &[("ANSI_SQL", "COUNT(note)")])
        ]),
        json!([field("amount", "gross - discount")]),
    );
    let d = file_diff(&base, &next);
    assert_eq!(
        rows(&d),
        vec![
            (Risky, "expression changed", "field orders.amount"),
            (Breaking, "field removed", "field orders.note"),
            (Risky, "field removed", "field orders.spare"),
        ]
    );
    assert_eq!(d.changes[1].detail, "used by metric(s) rows");
}

#[test]
fn a_cluster_base_predicts_the_ids_themselves() {
    let base = spec(
        json!([
            metric("a", &[("ANSI_SQL", "COUNT(*)")]),
            metric("b", &[("ANSI_SQL", "COUNT(*)")]),
            metric("c", &[("ANSI_SQL", "COUNT(*)")])
        ]),
        json!([]),
    );
    let mut next_metrics = json!([
        metric("a", &[("ANSI_SQL", "COUNT(*)")]),
        metric("b2", &[("ANSI_SQL", "COUNT(*)")]),
        metric("d", &[("ANSI_SQL", "COUNT(*)")])
    ]);
    next_metrics[1]["renamedFrom"] = json!("b");
    next_metrics[2]["deprecated"] = json!({"replacement": "a", "reason": "use a"});
    let next = spec(next_metrics, json!([]));
    let live = vec![
        MetricIdentity::new("a", "id-a"),
        MetricIdentity::new("b", "id-b"),
        MetricIdentity::new("c", "id-c"),
    ];
    let b = Base {
        name: "m",
        spec: &base,
        accepted: Some((&live, 7)),
    };
    let d = diff_model("ns", "m", "m", &next, Some(&b)).unwrap();
    let ids = &d.metrics;
    assert_eq!(
        ids.kept,
        vec![Named {
            name: "a".into(),
            id: Some("id-a".into())
        }]
    );
    assert_eq!(
        ids.renamed,
        vec![Renamed {
            from: "b".into(),
            to: "b2".into(),
            id: Some("id-b".into())
        }]
    );
    assert_eq!(
        ids.minted,
        vec![Named {
            name: "d".into(),
            id: None
        }]
    );
    assert_eq!(
        ids.retired,
        vec![Named {
            name: "c".into(),
            id: Some("id-c".into())
        }]
    );
    assert_eq!(ids.deprecated.len(), 1);
    assert!(ids.deprecated[0].new);
    assert_eq!(d.base_revision, Some(7));
    assert_eq!(d.verdict, Verdict::Breaking);

    // An unknown renamedFrom is refused as acceptance would refuse it, naming the field.
    let mut bad = next.clone();
    bad.definition.metrics.as_mut().unwrap()[1].renamed_from = Some("zzz".into());
    let problems = diff_model("ns", "m", "m", &bad, Some(&b)).unwrap_err();
    assert_eq!(problems[0].path, "spec.definition.metrics[1].renamedFrom");
    assert!(
        problems[0].message.contains("accepted revision 7"),
        "{}",
        problems[0].message
    );
}

#[test]
fn a_new_model_mints_everything_and_an_unchanged_one_says_so() {
    let s = spec(json!([metric("a", &[("ANSI_SQL", "COUNT(*)")])]), json!([]));
    let d = diff_model("ns", "m", "m", &s, None).unwrap();
    assert_eq!(
        (d.state, d.verdict, d.metrics.minted.len()),
        ("new", Verdict::Safe, 1)
    );
    let d = file_diff(&s, &s);
    assert_eq!(
        (d.state, d.verdict, d.changes.len(), d.metrics.kept.len()),
        ("unchanged", Verdict::Safe, 0, 1)
    );
}

#[test]
fn only_whitespace_outside_quotes_is_insignificant() {
    let cases = [
        ("SUM( orders.amount )", "SUM(orders.amount)", true),
        ("COUNT(DISTINCT  x)", "COUNT(DISTINCT x)\n", true),
        ("COUNT(DISTINCT x)", "COUNT(DISTINCTx)", false),
        ("x = 'a  b'", "x = 'a b'", false),
        ("\"my col\" + 1", "\"my col\"+1", true),
    ];
    for (a, b, same) in cases {
        assert_eq!(squeeze(a) == squeeze(b), same, "{a:?} vs {b:?}");
    }
}

#[test]
fn descriptions_comments_and_deprecations_are_each_reported_alone() {
    use Verdict::*;
    let mut metrics = json!([
        metric("a", &[("ANSI_SQL", "COUNT(*)")]),
        metric("b", &[("ANSI_SQL", "COUNT(*)")])
    ]);
    metrics[1]["deprecated"] = json!({"replacement": "a", "reason": "counts twice"});
    let base = spec(metrics.clone(), json!([]));

    // A deprecation already in the base is listed, not reported as a change.
    let d = file_diff(&base, &base);
    assert_eq!(rows(&d), vec![]);
    assert_eq!(d.metrics.deprecated.len(), 1);
    assert!(!d.metrics.deprecated[0].new);

    // One of two descriptions, one of comment and properties, a deprecation's reason dropped.
    metrics[0]["description"] = json!("orders counted");
    metrics[1]["deprecated"] = json!({"replacement": "a"});
    let mut next = spec(metrics, json!([]));
    next.comment = Some("the shop's orders".into());
    let d = file_diff(&base, &next);
    let mut got = rows(&d);
    got.sort_by_key(|r| r.1);
    assert_eq!(
        got,
        vec![
            (Risky, "metric deprecated", "b"),
            (Safe, "metric described", "metric a"),
            (Safe, "model described", "m"),
        ]
    );
    assert!(!d.metrics.deprecated[0].new);
}

#[test]
fn a_deprecation_reads_as_what_to_use_and_why() {
    for (deprecated, text) in [
        (
            json!({"replacement": "net", "reason": "gross of refunds"}),
            "use \"net\" instead: gross of refunds",
        ),
        (json!({"replacement": "net"}), "use \"net\" instead"),
        (json!({"reason": "gross of refunds"}), "gross of refunds"),
        (json!({}), "deprecated"),
    ] {
        let d: Deprecation = serde_json::from_value(deprecated).unwrap();
        assert_eq!(deprecation_text(&d), text);
    }
}

/// A model over orders and customers, written out in full.
fn shop(datasets: serde_json::Value, relationships: serde_json::Value) -> SemanticModelSpec {
    serde_json::from_value(json!({
        "catalog": "home", "schema": "semantic",
        "definition": {
            "datasets": datasets,
            "relationships": relationships,
            "metrics": [
                metric("revenue", &[("ANSI_SQL", "SUM(orders.amount)")]),
                metric("buyers", &[("ANSI_SQL", "COUNT(DISTINCT customers.email)")]),
            ],
        }
    }))
    .unwrap()
}

fn dataset(name: &str, fields: serde_json::Value) -> serde_json::Value {
    json!({"name": name, "source": format!("wh.app.{name}"), "primaryKey": ["id"], "fields": fields})
}

fn relationship(name: &str, from: &str, to: &str, columns: &str) -> serde_json::Value {
    json!({"name": name, "from": from, "to": to, "fromColumns": [columns], "toColumns": ["id"]})
}

#[test]
fn relationships_added_changed_removed_and_kept() {
    use Verdict::*;
    let datasets = json!([
        dataset("orders", json!([])),
        dataset("customers", json!([]))
    ]);
    let base = shop(
        datasets.clone(),
        json!([
            relationship("buyer", "orders", "customers", "customer_id"),
            relationship("payer", "orders", "customers", "payer_id"),
            relationship("kept", "orders", "customers", "kept_id"),
        ]),
    );
    let next = shop(
        datasets,
        json!([
            relationship("kept", "orders", "customers", "kept_id"),
            relationship("buyer", "orders", "customers", "buyer_id"),
            relationship("seller", "orders", "customers", "seller_id"),
        ]),
    );
    let d = file_diff(&base, &next);
    assert_eq!(
        rows(&d),
        vec![
            (Risky, "relationship changed", "relationship buyer"),
            (Safe, "relationship added", "relationship seller"),
            (Risky, "relationship removed", "relationship payer"),
        ]
    );
    assert_eq!(
        d.changes[0].detail,
        "orders(customer_id) → customers(id) is now orders(buyer_id) → customers(id)"
    );
}

#[test]
fn a_removed_dataset_breaks_exactly_the_metrics_that_name_it() {
    use Verdict::*;
    // customers.email is no declared field: the metric still names the dataset.
    let base = shop(
        json!([
            dataset("orders", json!([field("amount", "gross")])),
            dataset("customers", json!([field("id", "id")])),
            dataset("visits", json!([field("amount", "amount")])),
        ]),
        json!([]),
    );
    let next = shop(
        json!([dataset("orders", json!([field("amount", "gross")]))]),
        json!([]),
    );
    let d = file_diff(&base, &next);
    assert_eq!(
        rows(&d),
        vec![
            (Breaking, "dataset removed", "dataset customers"),
            (Risky, "dataset removed", "dataset visits"),
        ]
    );
    assert_eq!(
        d.changes[0].detail,
        "was bound to wh.app.customers; used by metric(s) buyers"
    );
    // visits.amount shares its name with orders.amount, which revenue qualifies by orders.
    assert_eq!(d.changes[1].detail, "was bound to wh.app.visits");
}

#[test]
fn fields_are_matched_by_name_and_each_key_or_type_change_is_reported() {
    use Verdict::*;
    let typed = |name: &str, sql: &str, t: &str| {
        let mut f = field(name, sql);
        f["datatype"] = json!(t);
        f
    };
    let base = spec(
        json!([]),
        json!([
            typed("id", "id", "Integer"),
            typed("amount", "gross", "Decimal")
        ]),
    );
    let mut next = spec(
        json!([]),
        json!([
            typed("id", "id", "String"),
            typed("amount", "gross - discount", "Decimal")
        ]),
    );
    next.definition.datasets[0].primary_key = Some(["amount".into()].into());
    let d = file_diff(&base, &next);
    assert_eq!(
        rows(&d),
        vec![
            (Risky, "keys changed", "dataset orders"),
            (Risky, "field changed", "field orders.id"),
            (Risky, "expression changed", "field orders.amount"),
        ]
    );
}

#[test]
fn a_removed_field_named_by_another_dataset_is_not_used() {
    use Verdict::*;
    let base = spec(
        json!([metric("visits", &[("ANSI_SQL", "SUM(visits.amount)")])]),
        json!([field("amount", "gross")]),
    );
    let next = spec(
        json!([metric("visits", &[("ANSI_SQL", "SUM(visits.amount)")])]),
        json!([]),
    );
    let d = file_diff(&base, &next);
    assert_eq!(
        rows(&d),
        vec![(Risky, "field removed", "field orders.amount")]
    );
}

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

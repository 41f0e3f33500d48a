//! Column drift and change impact (docs/impact.md) against real PostgreSQL and MariaDB: the
//! impact preview names what a migration would break before it runs; after it runs, a check
//! round makes exactly the dependent models drift, naming the column and the metrics; columns
//! nobody uses change without drift and without a write.

mod support;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::checks::{World, condition};
use support::db::mariadb;
use support::{env, eventually, wait_ready};

const REPORT: &str = "enabled: false, mode: ReportOnly";

/// A model on `source` whose field `amount` is `gross`, metric `revenue` sums it, keyed by id.
fn sales(ns: &str, source: &str) -> String {
    format!(
        r#"apiVersion: semops.io/v1alpha1
kind: SemanticModel
metadata: {{name: sales, namespace: {ns}}}
spec:
  catalog: home
  schema: semantic
  definition:
    datasets:
    - name: orders
      source: {source}
      primaryKey: [id]
      fields:
      - name: amount
        expression: {{dialects: [{{dialect: ANSI_SQL, expression: "gross - discount"}}]}}
    metrics:
    - name: revenue
      expression: {{dialects: [{{dialect: ANSI_SQL, expression: "SUM(orders.amount)"}}]}}
    - name: orders_count
      expression: {{dialects: [{{dialect: ANSI_SQL, expression: "COUNT(DISTINCT orders.id)"}}]}}
"#
    )
}

/// A model on the same source that uses its key and (where the table has it) `code`.
fn counts(ns: &str, source: &str) -> String {
    format!(
        r#"apiVersion: semops.io/v1alpha1
kind: SemanticModel
metadata: {{name: counts, namespace: {ns}}}
spec:
  catalog: home
  schema: semantic
  definition:
    datasets:
    - name: o
      source: {source}
      primaryKey: [id]
      fields:
      - name: code
        expression: {{dialects: [{{dialect: ANSI_SQL, expression: "code"}}]}}
    metrics:
    - name: rows
      expression: {{dialects: [{{dialect: ANSI_SQL, expression: "COUNT(*)"}}]}}
"#
    )
}

fn home(ns: &str) -> String {
    format!(
        "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: home, namespace: {ns}}}\nspec: {{provider: managed, registrations: [{{kind: Schema, name: semantic}}]}}\n"
    )
}

fn model(ns: &str, name: &str) -> Value {
    serde_json::from_str(&env().kubectl_ok(&["get", "sm", name, "-n", ns, "-o", "json"])).unwrap()
}

/// `(dataset, kind, column, current, usedBy)` of a model's drift, in status order.
fn drift(m: &Value) -> Vec<(String, String, String, String, Vec<String>)> {
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    m["status"]["sourceDrift"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            (
                text(&d["dataset"]),
                text(&d["kind"]),
                text(&d["column"]),
                text(&d["current"]),
                d["usedBy"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(text)
                    .collect(),
            )
        })
        .collect()
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `semops impact` against the operator's direct port: (exit code, stdout).
fn cli_impact(w: &World, source: &str, columns: &str) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_semops"))
        .args([
            "impact",
            "table",
            source,
            "--server",
            &format!("http://127.0.0.1:{}", w.op.api_port),
            "-n",
            w.ns(),
            "-o",
            "json",
        ])
        .args((!columns.is_empty()).then(|| format!("--columns={columns}")))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
    )
}

/// The drift of both models once a round has fed them (the round's answers requeue them).
fn after_round(w: &World, catalog: &str, want_sales: usize, want_counts: usize) -> (Value, Value) {
    w.check(catalog);
    eventually(Duration::from_secs(30), "drift from the round", || {
        let (s, c) = (model(w.ns(), "sales"), model(w.ns(), "counts"));
        (drift(&s).len() == want_sales && drift(&c).len() == want_counts).then_some((s, c))
    })
}

#[test]
fn postgres_column_changes_drift_exactly_the_dependent_models_and_the_preview_names_them_first() {
    let w = World::new(
        "colpg",
        "CREATE SCHEMA app; CREATE TABLE app.orders(id int PRIMARY KEY, gross numeric(10,2), discount numeric(10,2), note text); CREATE TABLE app.items(id int);",
        "[]",
        REPORT,
        &["--drift-interval", "1h"],
    );
    let ns = w.ns();
    env().apply_ok(&format!(
        "{}---\n{}---\n{}",
        home(ns),
        sales(ns, "wh.app.orders"),
        counts(ns, "wh.app.orders")
    ));
    wait_ready(env(), ns, "sm/sales", "True", "Accepted");
    wait_ready(env(), ns, "sm/counts", "True", "Accepted");
    let s = model(ns, "sales");
    let deps: Vec<(&str, &str)> = s["status"]["sourceAssociations"][0]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        deps,
        vec![
            ("discount", "numeric(10,2)"),
            ("gross", "numeric(10,2)"),
            ("id", "integer")
        ],
        "note is used by nothing"
    );
    let revenue_id = s["status"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "revenue")
        .unwrap()["id"]
        .clone();

    // Before the migration: the preview names sales (field, metric and its id), not counts.
    let path = |q: &str| format!("/api/metalakes/{ns}/objects/table/wh.app.orders/impact{q}");
    let (code, r) = w.api("GET", &path("?columns=gross"), None);
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["breaks"], true);
    assert_eq!(r["impacts"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["impacts"][0]["model"], "sales");
    assert_eq!(r["impacts"][0]["column"], "gross");
    assert_eq!(
        r["impacts"][0]["usedBy"],
        serde_json::json!(["field amount", "metric revenue"])
    );
    assert_eq!(r["impacts"][0]["metrics"][0]["id"], revenue_id);
    let (_, r) = w.api("GET", &path("?columns=id"), None);
    let models: Vec<&str> = r["impacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["model"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["counts", "sales"], "both models key on id");
    let (_, r) = w.api("GET", &path(""), None);
    assert_eq!(
        r["impacts"].as_array().unwrap().len(),
        2,
        "the whole table: {r}"
    );
    let (code, r) = w.api("GET", &path("?columns=a,,b"), None);
    assert_eq!(code, 400, "{r}");
    // The CLI, as a migration's CI step would run it: exit 3 when something breaks.
    let (exit, out) = cli_impact(&w, "wh.app.orders", "gross");
    assert_eq!(exit, 3, "{out}");
    assert!(out.contains("metric revenue"), "{out}");
    let (exit, out) = cli_impact(&w, "wh.app.orders", "note");
    assert_eq!(exit, 0, "nothing uses note: {out}");

    // A round with nothing changed: no drift. Then an unused column changes: no drift and no
    // write to either model.
    after_round(&w, "wh", 0, 0);
    let versions = || {
        (
            model(ns, "sales")["metadata"]["resourceVersion"].clone(),
            model(ns, "counts")["metadata"]["resourceVersion"].clone(),
        )
    };
    let before = versions();
    w.sql("ALTER TABLE app.orders DROP COLUMN note; ALTER TABLE app.orders ADD COLUMN extra int;");
    after_round(&w, "wh", 0, 0);
    support::stays(
        Duration::from_secs(2),
        "no write for an unused column",
        || versions() == before,
    );

    // The migration renames gross: sales drifts, naming the column and what uses it.
    w.sql("ALTER TABLE app.orders RENAME COLUMN gross TO gross_amount;");
    let (s, c) = after_round(&w, "wh", 1, 0);
    assert_eq!(
        drift(&s),
        vec![(
            "orders".into(),
            "ColumnMissing".into(),
            "gross".into(),
            String::new(),
            owned(&["field amount", "metric revenue"])
        )]
    );
    assert_eq!(
        condition(&s["status"], "SourcesCurrent"),
        ("False".into(), "SourceDrift".into())
    );
    let message = s["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "SourcesCurrent")
        .unwrap()["message"]
        .to_string();
    assert!(message.contains("metric revenue"), "{message}");
    assert_eq!(condition(&c["status"], "SourcesCurrent").0, "True");
    assert_eq!(s["status"]["revision"], 1, "drift never rebinds");

    // A type change of the key: both models drift, with the new type.
    w.sql("ALTER TABLE app.orders ALTER COLUMN id TYPE bigint;");
    let (s, c) = after_round(&w, "wh", 2, 1);
    assert!(
        drift(&s).contains(&(
            "orders".into(),
            "ColumnTypeChanged".into(),
            "id".into(),
            "bigint".into(),
            owned(&["primaryKey", "metric orders_count"])
        )),
        "{:?}",
        drift(&s)
    );
    assert_eq!(
        drift(&c),
        vec![(
            "o".into(),
            "ColumnTypeChanged".into(),
            "id".into(),
            "bigint".into(),
            owned(&["primaryKey"])
        )]
    );

    // Renamed back and retyped back: the drift is gone.
    w.sql("ALTER TABLE app.orders RENAME COLUMN gross_amount TO gross; ALTER TABLE app.orders ALTER COLUMN id TYPE integer;");
    after_round(&w, "wh", 0, 0);
}

#[test]
fn mariadb_column_changes_drift_the_dependent_models() {
    let server = mariadb();
    let db = format!("m{}", support::db::unique());
    server.mysql(&format!(
        "CREATE DATABASE {db}; CREATE TABLE {db}.orders(id int PRIMARY KEY, gross decimal(10,2), discount decimal(10,2), note text, code varchar(20)) ENGINE=InnoDB;"
    ));
    let objects = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: mdb, namespace: NS, labels: {{semops.io/catalog-credentials: \"true\"}}, annotations: {{semops.io/allowed-hosts: \"localhost,127.0.0.0/8,::1\"}}}}\nstringData: {{username: {user}, password: {pw}}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: shop, namespace: NS}}\nspec:\n  provider: mysql\n  connection: {{host: 127.0.0.1, port: {port}, database: {db}, sslMode: disable, credentialsSecretRef: {{name: mdb}}}}\n  registrations: []\n",
        user = server.admin_user,
        pw = server.admin_password,
        port = server.port,
    );
    let w = World::with_objects("colmdb", &objects, REPORT, &["--drift-interval", "1h"]);
    let ns = w.ns();
    let source = format!("shop.{db}.orders");
    env().apply_ok(&format!(
        "{}---\n{}---\n{}",
        home(ns),
        sales(ns, &source),
        counts(ns, &source)
    ));
    wait_ready(env(), ns, "sm/sales", "True", "Accepted");
    wait_ready(env(), ns, "sm/counts", "True", "Accepted");
    let (code, r) = w.api(
        "GET",
        &format!("/api/metalakes/{ns}/objects/table/{source}/impact?columns=discount"),
        None,
    );
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["impacts"][0]["model"], "sales", "{r}");
    assert_eq!(r["impacts"].as_array().unwrap().len(), 1, "{r}");

    after_round(&w, "shop", 0, 0);
    server.mysql(&format!("ALTER TABLE {db}.orders DROP COLUMN note;"));
    after_round(&w, "shop", 0, 0);
    server.mysql(&format!("ALTER TABLE {db}.orders DROP COLUMN discount;"));
    let (s, _) = after_round(&w, "shop", 1, 0);
    assert_eq!(
        drift(&s),
        vec![(
            "orders".into(),
            "ColumnMissing".into(),
            "discount".into(),
            String::new(),
            owned(&["field amount", "metric revenue"])
        )]
    );
    // Widening a VARCHAR is done in place: the same table, a new type.
    server.mysql(&format!("ALTER TABLE {db}.orders MODIFY code varchar(40);"));
    let (_, c) = after_round(&w, "shop", 1, 1);
    assert_eq!(
        drift(&c),
        vec![(
            "o".into(),
            "ColumnTypeChanged".into(),
            "code".into(),
            "varchar(40)".into(),
            owned(&["field code"])
        )]
    );
    // A change that rebuilds the table gives it a new InnoDB table id: the binding's object is
    // gone, which is SourceReplaced (docs/impact.md, limits), for both models.
    server.mysql(&format!("ALTER TABLE {db}.orders MODIFY id bigint;"));
    let (s, c) = after_round(&w, "shop", 1, 1);
    assert_eq!(drift(&s)[0].1, "SourceReplaced", "{:?}", drift(&s));
    assert_eq!(drift(&c)[0].1, "SourceReplaced", "{:?}", drift(&c));
}

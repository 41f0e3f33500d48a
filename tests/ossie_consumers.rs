//! semops's Ossie exports read by consumers nobody here wrote, installed from PyPI by
//! `hack/ossie-consumers`: dbt-core 1.12 (with dbt-postgres) reads a 0.1.1 JSON export in a dbt
//! project built on the project's local PostgreSQL, and the ossie-guard linter reads every
//! export. What dbt's reader cannot take is in docs/ossie.md.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::ROOT;
use support::db::{postgres, unique};
use support::semops_cli::semops_ok as semops;

fn scratch(name: &str) -> PathBuf {
    support::semops_cli::scratch(&format!("ossie-consumers-{name}"))
}

/// A model in the shape dbt's reader takes: qualified sources that name dbt models, key columns
/// declared as fields too (its entities are made of fields), metrics that aggregate one column.
fn shop_model(database: &str) -> String {
    format!(
        "apiVersion: semops.io/v1alpha1
kind: SemanticModel
metadata: {{name: shop-volume, namespace: team-a}}
spec:
  catalog: analytics
  schema: semantic
  name: shop_volume
  comment: Checkouts per store
  definition:
    datasets:
      - name: orders
        source: {database}.public.orders
        primaryKey: [order_id]
        description: One row per checkout
        fields:
          - name: order_id
            expression: {{dialects: [{{dialect: ANSI_SQL, expression: order_id}}]}}
          - name: store_id
            expression: {{dialects: [{{dialect: ANSI_SQL, expression: store_id}}]}}
      - name: stores
        source: {database}.public.stores
        primaryKey: [store_id]
        fields:
          - name: store_id
            expression: {{dialects: [{{dialect: ANSI_SQL, expression: store_id}}]}}
          - name: city
            expression: {{dialects: [{{dialect: ANSI_SQL, expression: city}}]}}
    relationships:
      - {{name: order_store, from: orders, to: stores, fromColumns: [store_id], toColumns: [store_id]}}
    metrics:
      - name: order_count
        expression: {{dialects: [{{dialect: ANSI_SQL, expression: COUNT(orders.order_id)}}]}}
        description: Checkouts
      - name: store_count
        expression: {{dialects: [{{dialect: ANSI_SQL, expression: COUNT(stores.store_id)}}]}}
"
    )
}

#[test]
fn dbt_core_reads_a_0_1_1_json_export_in_a_dbt_project_on_postgresql() {
    let pg = postgres();
    let database = format!("shop_{}", unique());
    pg.psql("postgres", &format!("CREATE DATABASE {database}"));
    let project = scratch("dbt");
    let manifest = project.join("shop.yaml");
    std::fs::write(&manifest, shop_model(&database)).unwrap();
    std::fs::create_dir_all(project.join("osi")).unwrap();
    std::fs::create_dir_all(project.join("models")).unwrap();
    let out = semops(&[
        "ossie",
        "export",
        "-f",
        manifest.to_str().unwrap(),
        "--ossie-version",
        "0.1.1",
        "-o",
        "json",
    ]);
    std::fs::write(project.join("osi/shop.json"), &out.stdout).unwrap();

    let files = [
        (
            "dbt_project.yml",
            "name: shop\nversion: \"1.0\"\nprofile: shop\nmodel-paths: [models]\nosi-paths: [osi]\n"
                .to_string(),
        ),
        (
            "profiles.yml",
            format!(
                "shop:\n  target: dev\n  outputs:\n    dev: {{type: postgres, host: 127.0.0.1, port: {}, user: postgres, password: postgres, dbname: {database}, schema: public, threads: 1}}\n",
                pg.port
            ),
        ),
        (
            "models/orders.sql",
            "select 1 as order_id, 1 as store_id\n".into(),
        ),
        (
            "models/stores.sql",
            "select 1 as store_id, 'Lyon' as city\n".into(),
        ),
        // dbt's semantic layer needs a time spine before it takes any semantic model.
        (
            "models/metricflow_time_spine.sql",
            "select current_date as date_day\n".into(),
        ),
        (
            "models/schema.yml",
            "models:\n  - name: metricflow_time_spine\n    time_spine: {standard_granularity_column: date_day}\n    columns:\n      - {name: date_day, granularity: day}\n".into(),
        ),
    ];
    for (name, text) in files {
        std::fs::write(project.join(name), text).unwrap();
    }
    // `dbt run` parses the project (the Ossie file too) and builds its models in PostgreSQL.
    let run = Command::new(support::python_tools().join("bin/dbt"))
        .args(["run", "--no-use-colors"])
        .current_dir(&project)
        .env("DBT_PROFILES_DIR", &project)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "dbt run failed:\n{log}");
    assert!(log.contains("Completed successfully"), "{log}");

    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(project.join("target/manifest.json")).unwrap(),
    )
    .unwrap();
    let models = manifest["semantic_models"].as_object().unwrap();
    let mut names: Vec<(&str, &str)> = models
        .values()
        .map(|m| (m["name"].as_str().unwrap(), m["model"].as_str().unwrap()))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [("orders", "ref('orders')"), ("stores", "ref('stores')")],
        "each semops dataset became a dbt semantic model on the dbt model its source names"
    );
    // Keys became entities, the relationship a foreign one, other fields dimensions.
    let shape = |name: &str| -> (Vec<String>, Vec<String>) {
        let m = models.values().find(|m| m["name"] == name).unwrap();
        let list = |key: &str, f: &dyn Fn(&Value) -> String| -> Vec<String> {
            m[key].as_array().unwrap().iter().map(f).collect()
        };
        (
            list("entities", &|e| {
                format!(
                    "{} {}",
                    e["name"].as_str().unwrap(),
                    e["type"].as_str().unwrap()
                )
            }),
            list("dimensions", &|d| d["name"].as_str().unwrap().to_string()),
        )
    };
    assert_eq!(
        shape("orders"),
        (
            vec!["order_id primary".into(), "store_id foreign".into()],
            vec![]
        )
    );
    assert_eq!(
        shape("stores"),
        (vec!["store_id primary".into()], vec!["city".into()])
    );
    let metrics = manifest["metrics"].as_object().unwrap();
    let mut found: Vec<(String, String, String)> = metrics
        .values()
        .map(|m| {
            let p = &m["type_params"];
            (
                m["name"].as_str().unwrap().to_string(),
                p["expr"].as_str().unwrap_or_default().to_string(),
                p["metric_aggregation_params"]["agg"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    found.sort();
    assert_eq!(
        found,
        [
            ("order_count".into(), "order_id".into(), "count".into()),
            ("store_count".into(), "store_id".into(), "count".into()),
        ],
        "each semops metric became a dbt metric with its expression"
    );
    let description = metrics
        .values()
        .find(|m| m["name"] == "order_count")
        .unwrap()["description"]
        .clone();
    assert_eq!(description, "Checkouts");
}

/// ossie-guard's findings on a file (`--json`).
fn guard(file: &Path) -> Vec<Value> {
    let out = Command::new(support::python_tools().join("bin/ossie-guard"))
        .args(["--json", "--exit-zero"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ossie-guard {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn ossie_guard_reads_every_export_and_finds_what_is_there() {
    let dir = scratch("guard");
    let fixtures = format!("{ROOT}/tests/fixtures/ossie");
    let mut findings = Vec::new();
    for fixture in [
        "bike-shop-0.2.yaml",
        "bike-shop-0.1.1.yaml",
        "bike-shop-0.1.0.json",
    ] {
        let out = semops(&[
            "ossie",
            "import",
            "-f",
            &format!("{fixtures}/{fixture}"),
            "--catalog",
            "analytics",
            "--schema",
            "semantic",
            "--source-catalog",
            "shop",
            "--source-schema",
            "public",
        ]);
        let manifests = dir.join(format!("{fixture}.manifests.yaml"));
        std::fs::write(&manifests, &out.stdout).unwrap();
        for version in ["0.2", "0.1.1", "0.1.0"] {
            let out_dir = dir.join(format!("{fixture}-{version}"));
            semops(&[
                "ossie",
                "export",
                "-f",
                manifests.to_str().unwrap(),
                "--ossie-version",
                version,
                "--out-dir",
                out_dir.to_str().unwrap(),
            ]);
            for file in std::fs::read_dir(&out_dir).unwrap() {
                findings.extend(guard(&file.unwrap().path()));
            }
        }
    }
    // The fixtures say the same thing in every dialect they use: nothing to find.
    assert_eq!(findings, Vec::<Value>::new());

    // A model whose dialects disagree, exported by semops: the linter reads the export and
    // says so (so the empty result above is a reading, not a skipped file).
    let drift = dir.join("drift.yaml");
    std::fs::write(
        &drift,
        "version: 0.2.0.dev0\nname: drift\ndatasets: [{name: d, source: a.b.c, primary_key: [x]}]\nmetrics:\n  - name: total\n    expression:\n      dialects:\n        - {dialect: ANSI_SQL, expression: SUM(d.x)}\n        - {dialect: SNOWFLAKE, expression: AVG(d.x)}\n",
    )
    .unwrap();
    let out = semops(&[
        "ossie",
        "import",
        "-f",
        drift.to_str().unwrap(),
        "--catalog",
        "analytics",
        "--schema",
        "semantic",
    ]);
    let manifests = dir.join("drift.manifests.yaml");
    std::fs::write(&manifests, &out.stdout).unwrap();
    let exported = dir.join("drift-export");
    semops(&[
        "ossie",
        "export",
        "-f",
        manifests.to_str().unwrap(),
        "--out-dir",
        exported.to_str().unwrap(),
    ]);
    let found = guard(&exported.join("drift.ossie.yaml"));
    let codes: Vec<&str> = found.iter().filter_map(|f| f["code"].as_str()).collect();
    assert_eq!(codes, ["AGGREGATE_DRIFT"], "{found:?}");
    assert_eq!(found[0]["entity"], "total");
}

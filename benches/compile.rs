//! Metric-query compile benchmark (not a test): the same questions compiled by semops's `sql`
//! room and by MetricFlow, over models of 5 and 50 datasets with the same tables, relationships
//! and metrics. The datasets form a tree of many-to-one relationships below one fact dataset
//! (dataset i refers to datasets 2i+1 and 2i+2), written once as a semops definition and once as
//! MetricFlow semantic models in a dbt project. semops: percentiles over thousands of compiles
//! in process. MetricFlow (dbt-metricflow from `hack/ossie-consumers`): in process through its
//! engine (`hack/bench-metricflow.py`; the first compile of each question and percentiles of
//! repeats, which its plan caches make faster), and `mf query --explain` as a person or a CI job
//! runs it. No query is executed; the dbt profile points at a closed port.
//! Run: `cargo bench --bench compile` (prints a Markdown table for BENCHMARKS.md).

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use semops::crd::semantic_model::{Definition, MetricIdentity};
use semops::sql::{Model, Question, Target, compile};
use serde_json::{Value, json};

use support::ROOT;
const SEMOPS_ITERATIONS: usize = 5_000;
const METRICFLOW_ITERATIONS: usize = 100;
const CLI_RUNS: usize = 5;

fn parent(i: usize) -> usize {
    (i - 1) / 2
}

fn children(i: usize, datasets: usize) -> impl Iterator<Item = usize> {
    [2 * i + 1, 2 * i + 2]
        .into_iter()
        .filter(move |&c| c < datasets)
}

fn ansi(expression: &str) -> Value {
    json!({"dialects": [{"dialect": "ANSI_SQL", "expression": expression}]})
}

/// The semops definition: d00 is the fact (a timestamp, an amount, seven metrics); every
/// dataset has an id and a text attribute.
fn definition(datasets: usize) -> Definition {
    let sets: Vec<Value> = (0..datasets)
        .map(|i| {
            let mut fields = vec![
                json!({"name": "id", "datatype": "Integer", "expression": ansi("id")}),
                json!({"name": "attr", "datatype": "String", "expression": ansi("attr")}),
            ];
            if i == 0 {
                fields
                    .push(json!({"name": "at", "datatype": "DateTime", "expression": ansi("at")}));
                fields.push(
                    json!({"name": "amount", "datatype": "Decimal", "expression": ansi("amount")}),
                );
            }
            json!({"name": format!("d{i:02}"), "source": format!("wh.wh.t{i:02}"),
                   "primaryKey": ["id"], "fields": fields})
        })
        .collect();
    let relationships: Vec<Value> = (1..datasets)
        .map(|i| {
            json!({"name": format!("r{i:02}"), "from": format!("d{:02}", parent(i)),
                   "to": format!("d{i:02}"), "fromColumns": [format!("k{i:02}")], "toColumns": ["id"]})
        })
        .collect();
    let metrics: Vec<Value> = [
        ("m_sum", "SUM(d00.amount)"),
        ("m_count", "COUNT(d00.id)"),
        ("m_max", "MAX(d00.amount)"),
        ("m_min", "MIN(d00.amount)"),
        ("m_avg", "AVG(d00.amount)"),
        ("m_distinct", "COUNT(DISTINCT d00.attr)"),
        ("m_per", "m_sum / m_count"),
    ]
    .iter()
    .map(|(name, expression)| json!({"name": name, "expression": ansi(expression)}))
    .collect();
    serde_json::from_value(
        json!({"datasets": sets, "relationships": relationships, "metrics": metrics}),
    )
    .unwrap()
}

/// The same model as MetricFlow semantic models: entity eNN is dataset NN's key.
fn metricflow_yaml(datasets: usize) -> String {
    let mut y = String::from(
        "version: 2\nmodels:\n  - name: days\n    time_spine: {standard_granularity_column: day}\n    columns: [{name: day, granularity: day}]\nsemantic_models:\n",
    );
    for i in 0..datasets {
        y += &format!("  - name: d{i:02}\n    model: ref('t{i:02}')\n");
        if i == 0 {
            y += "    defaults: {agg_time_dimension: at}\n";
        }
        y += &format!("    entities:\n      - {{name: e{i:02}, type: primary, expr: id}}\n");
        for c in children(i, datasets) {
            y += &format!("      - {{name: e{c:02}, type: foreign, expr: k{c:02}}}\n");
        }
        y += "    dimensions:\n      - {name: attr, type: categorical}\n";
        if i == 0 {
            y += "      - {name: at, type: time, type_params: {time_granularity: day}}\n";
            y += "    measures:\n";
            for (name, agg, expr) in [
                ("amount_sum", "sum", "amount"),
                ("rows", "count", "id"),
                ("amount_max", "max", "amount"),
                ("amount_min", "min", "amount"),
                ("amount_avg", "average", "amount"),
                ("attr_distinct", "count_distinct", "attr"),
            ] {
                y += &format!("      - {{name: {name}, agg: {agg}, expr: {expr}}}\n");
            }
        }
    }
    y += "metrics:\n";
    for (name, measure) in [
        ("m_sum", "amount_sum"),
        ("m_count", "rows"),
        ("m_max", "amount_max"),
        ("m_min", "amount_min"),
        ("m_avg", "amount_avg"),
        ("m_distinct", "attr_distinct"),
    ] {
        y += &format!("  - {{name: {name}, type: simple, type_params: {{measure: {measure}}}}}\n");
    }
    y += "  - {name: m_per, type: ratio, type_params: {numerator: m_sum, denominator: m_count}}\n";
    y
}

/// The questions, as semops and as MetricFlow take them.
fn questions() -> Vec<(&'static str, Question, Value)> {
    let q = |v: Value| -> Question { serde_json::from_value(v).unwrap() };
    vec![
        (
            "one metric by a dimension one relationship away",
            q(json!({"metrics": ["m_sum"], "dimensions": ["d01.attr"]})),
            json!({"metrics": ["m_sum"], "group_by": ["e01__attr"]}),
        ),
        (
            "two metrics, a dimension two relationships away, a month, a filter",
            q(
                json!({"metrics": ["m_sum", "m_count"], "dimensions": ["d03.attr", "d00.at:month"],
                     "filters": [{"field": "d02.attr", "op": "eq", "values": ["x"]}]}),
            ),
            json!({"metrics": ["m_sum", "m_count"], "group_by": ["e01__e03__attr", "e00__at__month"],
                   "where": "{{ Dimension('e02__attr') }} = 'x'"}),
        ),
        (
            "a ratio metric, ordered, with a limit",
            q(
                json!({"metrics": ["m_per"], "dimensions": ["d04.attr"], "order": ["-m_per"], "limit": 10}),
            ),
            json!({"metrics": ["m_per"], "group_by": ["e01__e04__attr"], "order": ["-m_per"], "limit": 10}),
        ),
    ]
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// semops: (p50, p99) in microseconds.
fn time_semops(def: &Definition, question: &Question) -> (f64, f64) {
    let ids: Vec<MetricIdentity> = def
        .metrics
        .iter()
        .flatten()
        .map(|m| {
            MetricIdentity::new(
                m.name.clone(),
                semops::crd::packed::MetricId::from_uuid(uuid::Uuid::now_v7()),
            )
        })
        .collect();
    let model = Model {
        definition: def,
        revision: 1,
        metric_ids: &ids,
        sources: &[],
    };
    for _ in 0..200 {
        compile(model, question, Target::Postgres).unwrap();
    }
    let mut times: Vec<f64> = (0..SEMOPS_ITERATIONS)
        .map(|_| {
            let start = Instant::now();
            let compiled = compile(model, question, Target::Postgres).unwrap();
            let us = start.elapsed().as_secs_f64() * 1e6;
            std::hint::black_box(compiled);
            us
        })
        .collect();
    times.sort_by(f64::total_cmp);
    (percentile(&times, 0.50), percentile(&times, 0.99))
}

/// A dbt project of the model, parsed (`dbt parse` needs no database).
fn metricflow_project(venv: &Path, datasets: usize) -> PathBuf {
    let dir = PathBuf::from(ROOT).join(format!("target/bench/compile/mf-{datasets}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("models")).unwrap();
    std::fs::write(
        dir.join("dbt_project.yml"),
        "name: bench\nversion: \"1.0\"\nconfig-version: 2\nprofile: bench\nmodel-paths: [models]\n",
    )
    .unwrap();
    // Port 1 on loopback is closed: nothing here may reach a database.
    std::fs::write(
        dir.join("profiles.yml"),
        "bench:\n  target: b\n  outputs:\n    b: {type: postgres, host: 127.0.0.1, port: 1, user: u, password: p, dbname: d, schema: s, threads: 1}\n",
    )
    .unwrap();
    std::fs::write(dir.join("models/days.sql"), "select current_date as day\n").unwrap();
    for i in 0..datasets {
        let keys: String = children(i, datasets)
            .map(|c| format!(", 1 as k{c:02}"))
            .collect();
        let fact = if i == 0 {
            ", current_timestamp as at, 1.0 as amount"
        } else {
            ""
        };
        std::fs::write(
            dir.join(format!("models/t{i:02}.sql")),
            format!("select 1 as id, 'x' as attr{keys}{fact}\n"),
        )
        .unwrap();
    }
    std::fs::write(dir.join("models/semantic.yml"), metricflow_yaml(datasets)).unwrap();
    let out = Command::new(venv.join("bin/dbt"))
        .args(["parse", "--no-use-colors"])
        .current_dir(&dir)
        .env("DBT_PROFILES_DIR", &dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dbt parse failed:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    dir
}

struct MetricFlowTimes {
    first: f64,
    p50: f64,
    p99: f64,
}

fn time_metricflow_in_process(
    venv: &Path,
    project: &Path,
    asked: &[Value],
) -> Vec<MetricFlowTimes> {
    let queries = project.join("queries.json");
    let named: Vec<Value> = asked
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let mut a = a.clone();
            a["name"] = json!(i.to_string());
            a
        })
        .collect();
    std::fs::write(&queries, serde_json::to_string(&named).unwrap()).unwrap();
    let out = Command::new(venv.join("bin/python"))
        .arg(format!("{ROOT}/hack/bench-metricflow.py"))
        .arg(project)
        .arg(&queries)
        .arg(METRICFLOW_ITERATIONS.to_string())
        .current_dir(project)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hack/bench-metricflow.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert!(v["sql_chars"].as_u64().unwrap() > 0);
            MetricFlowTimes {
                first: v["first_us"].as_f64().unwrap(),
                p50: v["p50_us"].as_f64().unwrap(),
                p99: v["p99_us"].as_f64().unwrap(),
            }
        })
        .collect()
}

/// `mf query --explain`: median wall time in milliseconds.
fn time_metricflow_cli(venv: &Path, project: &Path, asked: &Value) -> f64 {
    let list = |key: &str| -> String {
        asked[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().unwrap())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default()
    };
    let mut times: Vec<f64> = (0..CLI_RUNS)
        .map(|_| {
            let mut command = Command::new(venv.join("bin/mf"));
            command
                .args(["query", "--explain", "--metrics", &list("metrics")])
                .args(["--group-by", &list("group_by")])
                .current_dir(project)
                .env("DBT_PROFILES_DIR", project);
            if let Some(filter) = asked["where"].as_str() {
                command.args(["--where", filter]);
            }
            if asked.get("order").is_some() {
                command.args(["--order", &list("order")]);
            }
            if let Some(limit) = asked["limit"].as_u64() {
                command.args(["--limit", &limit.to_string()]);
            }
            let start = Instant::now();
            let out = command.output().unwrap();
            let ms = start.elapsed().as_secs_f64() * 1e3;
            assert!(
                out.status.success() && String::from_utf8_lossy(&out.stdout).contains("SELECT"),
                "mf query --explain failed:\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
            ms
        })
        .collect();
    times.sort_by(f64::total_cmp);
    percentile(&times, 0.5)
}

fn main() {
    let venv = support::python_tools();
    println!(
        "| datasets | question | semops p50 / p99 | MetricFlow in process: first / p50 / p99 of repeats | `mf query --explain` median | MetricFlow's best (p50 of repeats) ÷ semops p99 |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for datasets in [5, 50] {
        let def = definition(datasets);
        let project = metricflow_project(venv, datasets);
        let questions = questions();
        let asked: Vec<Value> = questions.iter().map(|(_, _, a)| a.clone()).collect();
        let in_process = time_metricflow_in_process(venv, &project, &asked);
        for ((name, question, asked), mf) in questions.iter().zip(in_process) {
            let (p50, p99) = time_semops(&def, question);
            let cli = time_metricflow_cli(venv, &project, asked);
            println!(
                "| {datasets} | {name} | {p50:.1} µs / {p99:.1} µs | {:.1} / {:.1} / {:.1} ms | {:.0} ms | {:.0}x |",
                mf.first / 1e3,
                mf.p50 / 1e3,
                mf.p99 / 1e3,
                cli,
                mf.p50 / p99
            );
        }
    }
}

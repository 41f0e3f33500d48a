//! Compiled metric questions against a real warehouse: every shape in
//! tests/fixtures/warehouse/shapes.yaml is compiled for PostgreSQL and for MariaDB, run on both
//! with its parameters bound, and compared row for row with the hand-written reference answer
//! run on PostgreSQL; and every shape MetricFlow can ask is asked of MetricFlow (dbt-metricflow
//! from PyPI, installed by `hack/ossie-consumers`) over its own semantic models for the same
//! tables (tests/fixtures/warehouse/metricflow), and its answer compared with the compiled SQL's.

mod support;

use semops::crd::semantic_model::{Definition, MetricIdentity};
use semops::sql::{Compiled, Model, Question, Target, compile};
use serde::Deserialize;
use support::ROOT;
use support::db::{mariadb, postgres, unique};
use support::warehouse::{Flavor, script};

#[derive(Deserialize)]
struct Shape {
    name: String,
    question: Question,
    #[serde(default)]
    reference: Option<String>,
    #[serde(default)]
    refused: Option<String>,
    #[serde(default)]
    metricflow: Vec<Asked>,
    /// Why MetricFlow cannot be asked, for an answered shape without `metricflow`.
    #[serde(default)]
    metricflow_cannot: Option<String>,
}

/// One query as MetricFlow's `mf query` takes it.
#[derive(Deserialize)]
struct Asked {
    metrics: Vec<String>,
    #[serde(default)]
    group_by: Vec<String>,
    #[serde(default, rename = "where")]
    filter: Option<String>,
    #[serde(default)]
    order: Vec<String>,
    #[serde(default)]
    limit: Option<u64>,
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/tests/fixtures/warehouse/{name}")).unwrap()
}

fn model() -> Definition {
    serde_saphyr::from_str(&fixture("model.yaml")).unwrap()
}

fn shapes() -> Vec<Shape> {
    serde_saphyr::from_str(&fixture("shapes.yaml")).unwrap()
}

fn ids(def: &Definition) -> Vec<MetricIdentity> {
    def.metrics
        .iter()
        .flatten()
        .map(|m| {
            MetricIdentity::new(
                m.name.clone(),
                semops::crd::packed::MetricId::from_uuid(uuid::Uuid::now_v7()),
            )
        })
        .collect()
}

/// One value as both databases are compared: numbers to four decimals, NULL spelled out.
fn normal(text: Option<String>) -> String {
    match text {
        None => "NULL".into(),
        Some(t) => match t.parse::<f64>() {
            Ok(n) if t.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c)) => {
                let s = format!("{n:.4}");
                if s == "-0.0000" { "0.0000".into() } else { s }
            }
            _ => t,
        },
    }
}

/// Rows of a PostgreSQL query, every value as text (through `row_to_json`, columns renamed so
/// unnamed reference columns do not collide).
async fn postgres_rows(
    client: &tokio_postgres::Client,
    sql: &str,
    columns: usize,
    parameters: &[String],
) -> Vec<Vec<String>> {
    let names: Vec<String> = (0..columns).map(|i| format!("c{i}")).collect();
    let wrapped = format!(
        "SELECT row_to_json(r)::text FROM (\n{sql}\n) AS r({})",
        names.join(", ")
    );
    let types = vec![tokio_postgres::types::Type::TEXT; parameters.len()];
    let statement = client
        .prepare_typed(&wrapped, &types)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{wrapped}"));
    let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = parameters
        .iter()
        .map(|p| p as &(dyn tokio_postgres::types::ToSql + Sync))
        .collect();
    let rows = client.query(&statement, &params).await.unwrap();
    rows.iter()
        .map(|row| {
            let object: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(row.get::<_, &str>(0)).unwrap();
            names
                .iter()
                .map(|n| {
                    normal(match &object[n] {
                        serde_json::Value::Null => None,
                        serde_json::Value::String(s) => Some(s.clone()),
                        other => Some(other.to_string()),
                    })
                })
                .collect()
        })
        .collect()
}

/// Rows of a MariaDB query, every value as text.
async fn mariadb_rows(
    conn: &mut mysql_async::Conn,
    sql: &str,
    parameters: &[String],
) -> Vec<Vec<String>> {
    use mysql_async::prelude::Queryable;
    let params: Vec<mysql_async::Value> = parameters
        .iter()
        .map(|p| mysql_async::Value::Bytes(p.clone().into_bytes()))
        .collect();
    let rows: Vec<mysql_async::Row> = conn
        .exec(sql, mysql_async::Params::Positional(params))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{sql}"));
    rows.into_iter()
        .map(|row| {
            row.unwrap()
                .into_iter()
                .map(|v| {
                    normal(match v {
                        mysql_async::Value::NULL => None,
                        mysql_async::Value::Bytes(b) => Some(String::from_utf8(b).unwrap()),
                        mysql_async::Value::Int(n) => Some(n.to_string()),
                        mysql_async::Value::UInt(n) => Some(n.to_string()),
                        mysql_async::Value::Float(n) => Some(n.to_string()),
                        mysql_async::Value::Double(n) => Some(n.to_string()),
                        mysql_async::Value::Date(y, m, d, 0, 0, 0, 0) => {
                            Some(format!("{y:04}-{m:02}-{d:02}"))
                        }
                        other => panic!("unexpected value {other:?}"),
                    })
                })
                .collect()
        })
        .collect()
}

fn model_of<'a>(definition: &'a Definition, metric_ids: &'a [MetricIdentity]) -> Model<'a> {
    Model {
        definition,
        revision: 1,
        metric_ids,
        sources: &[],
    }
}

fn unordered(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    rows.sort();
    rows
}

/// A fresh PostgreSQL database holding the warehouse in schema `wh`, and a client of it.
async fn postgres_warehouse() -> (String, tokio_postgres::Client) {
    let database = format!("wh_{}", unique());
    postgres().psql("postgres", &format!("CREATE DATABASE {database}"));
    postgres().psql(
        &database,
        &format!("CREATE SCHEMA wh;\n{}", script(Flavor::Postgres, "wh")),
    );
    let (client, connection) = tokio_postgres::connect(
        &format!(
            "host=127.0.0.1 port={} user=postgres password=postgres dbname={database}",
            postgres().port
        ),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    (database, client)
}

#[tokio::test(flavor = "multi_thread")]
async fn every_shape_gives_the_reference_answer_on_postgres_and_mariadb() {
    let (_, pg) = postgres_warehouse().await;
    mariadb().mysql(&format!(
        "CREATE DATABASE wh;\n{}",
        script(Flavor::Mariadb, "wh")
    ));

    let mut my =
        mysql_async::Conn::from_url(format!("mysql://root:root@127.0.0.1:{}/wh", mariadb().port))
            .await
            .unwrap();

    let def = model();
    let ids = ids(&def);
    let model = model_of(&def, &ids);
    let shapes = shapes();
    assert!(shapes.len() >= 30, "{} shapes", shapes.len());
    let mut compared = 0;
    for shape in &shapes {
        let compiled = |target| compile(model, &shape.question, target);
        if let Some(kind) = &shape.refused {
            for target in [Target::Postgres, Target::Mysql] {
                let e = compiled(target).expect_err(&shape.name);
                assert_eq!(format!("{:?}", e.kind), *kind, "{}: {e}", shape.name);
            }
            continue;
        }
        let reference = shape
            .reference
            .as_deref()
            .expect("a reference or a refusal");
        let on_pg: Compiled =
            compiled(Target::Postgres).unwrap_or_else(|e| panic!("{}: {e}", shape.name));
        let on_my: Compiled =
            compiled(Target::Mysql).unwrap_or_else(|e| panic!("{}: {e}", shape.name));
        let columns = on_pg.columns.len();
        let values = |c: &Compiled| {
            c.parameters
                .iter()
                .map(|p| p.value.clone())
                .collect::<Vec<_>>()
        };
        let want = postgres_rows(&pg, reference, columns, &[]).await;
        let got_pg = postgres_rows(&pg, &on_pg.sql, columns, &values(&on_pg)).await;
        let got_my = mariadb_rows(&mut my, &on_my.sql, &values(&on_my)).await;
        assert!(
            !want.is_empty(),
            "{}: the reference answers no rows",
            shape.name
        );
        let (want, got_pg, got_my) = if shape.question.order.is_empty() {
            (unordered(want), unordered(got_pg), unordered(got_my))
        } else {
            (want, got_pg, got_my)
        };
        assert_eq!(got_pg, want, "{} on PostgreSQL:\n{}", shape.name, on_pg.sql);
        assert_eq!(got_my, want, "{} on MariaDB:\n{}", shape.name, on_my.sql);
        compared += 1;
    }
    assert!(compared >= 30, "{compared} shapes compared");
}

/// A dbt project over the warehouse in `database`: the fixture project, a profile for the
/// test's PostgreSQL, and its models built by `dbt run`.
fn metricflow_project(database: &str) -> std::path::PathBuf {
    let dir = support::semops_cli::scratch(&format!("metricflow-{database}"));
    let fixture = std::path::Path::new(ROOT).join("tests/fixtures/warehouse/metricflow");
    std::fs::create_dir_all(dir.join("models")).unwrap();
    std::fs::copy(fixture.join("dbt_project.yml"), dir.join("dbt_project.yml")).unwrap();
    for entry in std::fs::read_dir(fixture.join("models")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join("models").join(entry.file_name())).unwrap();
    }
    std::fs::write(
        dir.join("profiles.yml"),
        format!(
            "warehouse:\n  target: test\n  outputs:\n    test: {{type: postgres, host: 127.0.0.1, \
             port: {}, user: postgres, password: postgres, dbname: {database}, schema: mf, \
             threads: 1}}\n",
            postgres().port
        ),
    )
    .unwrap();
    let run = python_tool("dbt", &dir)
        .args(["run", "--no-use-colors"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "dbt run failed:\n{}",
        String::from_utf8_lossy(&run.stdout)
    );
    dir
}

fn python_tool(name: &str, project: &std::path::Path) -> std::process::Command {
    let mut command = std::process::Command::new(support::python_tools().join("bin").join(name));
    command
        .current_dir(project)
        .env("DBT_PROFILES_DIR", project);
    command
}

/// MetricFlow's answer to one query: columns in the order group-by items then metrics, as the
/// query lists them, every value normalised as the compiled SQL's are.
fn metricflow_rows(project: &std::path::Path, asked: &Asked) -> Vec<Vec<String>> {
    static ANSWERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = ANSWERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let csv = project.join(format!("answer-{n}.csv"));
    let mut command = python_tool("mf", project);
    command.args(["query", "--metrics", &asked.metrics.join(",")]);
    if !asked.group_by.is_empty() {
        command.args(["--group-by", &asked.group_by.join(",")]);
    }
    if let Some(filter) = &asked.filter {
        command.args(["--where", filter]);
    }
    if !asked.order.is_empty() {
        command.args(["--order", &asked.order.join(",")]);
    }
    if let Some(limit) = asked.limit {
        command.args(["--limit", &limit.to_string()]);
    }
    command.arg("--csv").arg(&csv);
    let out = command.output().unwrap();
    assert!(
        out.status.success() && csv.exists(),
        "mf query {:?} failed:\n{}{}",
        asked.metrics,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header = csv_fields(lines.next().unwrap());
    let wanted: Vec<usize> = asked
        .group_by
        .iter()
        .chain(&asked.metrics)
        .map(|name| {
            header
                .iter()
                .position(|h| h == name)
                .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
        })
        .collect();
    lines
        .map(|line| {
            let fields = csv_fields(line);
            wanted
                .iter()
                .map(|&i| {
                    let value = &fields[i];
                    // MetricFlow writes NULL as an empty field (no value here is an empty text)
                    // and a truncated time as a timestamp at midnight.
                    normal(
                        (!value.is_empty())
                            .then(|| value.strip_suffix(" 00:00:00").unwrap_or(value).to_string()),
                    )
                })
                .collect()
        })
        .collect()
}

/// The fields of one CSV line (RFC 4180 quoting; no value here spans lines).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().unwrap().push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(String::new()),
            c => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

/// MetricFlow's answers to the queries of one shape, combined on their group-by columns (a
/// metric a query does not answer for a group is NULL there), metrics in the question's order.
fn metricflow_answer(project: &std::path::Path, shape: &Shape) -> Vec<Vec<String>> {
    if let [asked] = shape.metricflow.as_slice() {
        assert_eq!(asked.metrics, shape.question.metrics, "{}", shape.name);
        return metricflow_rows(project, asked);
    }
    let dimensions = shape.question.dimensions.len();
    let metrics = &shape.question.metrics;
    let mut combined: std::collections::BTreeMap<Vec<String>, Vec<String>> = Default::default();
    for asked in &shape.metricflow {
        assert_eq!(asked.group_by.len(), dimensions, "{}", shape.name);
        for row in metricflow_rows(project, asked) {
            let (key, values) = row.split_at(dimensions);
            let slot = combined
                .entry(key.to_vec())
                .or_insert_with(|| vec!["NULL".to_string(); metrics.len()]);
            for (name, value) in asked.metrics.iter().zip(values) {
                let at = metrics.iter().position(|m| m == name).unwrap();
                slot[at] = value.clone();
            }
        }
    }
    combined
        .into_iter()
        .map(|(mut key, values)| {
            key.extend(values);
            key
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn metricflow_gives_the_compiled_answer_for_every_shape_it_can_ask() {
    let (database, pg) = postgres_warehouse().await;
    let project = metricflow_project(&database);
    let def = model();
    let ids = ids(&def);
    let model = model_of(&def, &ids);
    let shapes: Vec<Shape> = shapes()
        .into_iter()
        .filter(|s| !s.metricflow.is_empty())
        .collect();
    // Each `mf query` is a Python process that loads the manifest (about 2 s of CPU): two at a
    // time, one per core.
    let half = shapes.len().div_ceil(2);
    let answers: Vec<Vec<Vec<String>>> = std::thread::scope(|scope| {
        let workers: Vec<_> = shapes
            .chunks(half)
            .map(|chunk| {
                let project = &project;
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|shape| metricflow_answer(project, shape))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let mut asked = 0;
    for (shape, theirs) in shapes.iter().zip(answers) {
        let compiled = compile(model, &shape.question, Target::Postgres)
            .unwrap_or_else(|e| panic!("{}: {e}", shape.name));
        let parameters: Vec<String> = compiled
            .parameters
            .iter()
            .map(|p| p.value.clone())
            .collect();
        let ours = postgres_rows(&pg, &compiled.sql, compiled.columns.len(), &parameters).await;
        assert!(
            !theirs.is_empty(),
            "{}: MetricFlow answers no rows",
            shape.name
        );
        let (ours, theirs) = if shape.question.order.is_empty() {
            (unordered(ours), unordered(theirs))
        } else {
            (ours, theirs)
        };
        assert_eq!(
            ours, theirs,
            "{}: compiled (left) and MetricFlow (right)\n{}",
            shape.name, compiled.sql
        );
        asked += 1;
    }
    assert!(asked >= 30, "{asked} shapes asked of MetricFlow");
}

/// docs/queries.md lists every shape with what proved it, and every answered shape is either
/// asked of MetricFlow or says why it cannot be.
#[test]
fn the_oracle_table_in_the_docs_lists_every_shape() {
    let docs = std::fs::read_to_string(format!("{ROOT}/docs/queries.md")).unwrap();
    for shape in shapes() {
        let oracle = match (
            &shape.refused,
            shape.metricflow.is_empty(),
            &shape.metricflow_cannot,
        ) {
            (Some(kind), true, None) => format!("refused with `{kind}` (checked on both targets)"),
            (None, false, None) => "reference SQL on PostgreSQL and MariaDB; MetricFlow".into(),
            (None, true, Some(why)) => {
                format!("reference SQL on PostgreSQL and MariaDB; not MetricFlow: {why}")
            }
            _ => panic!(
                "{}: a refusal, a MetricFlow query or why there is none",
                shape.name
            ),
        };
        let row = format!("| {} | {oracle} |", shape.name);
        assert!(
            docs.lines().any(|l| l == row),
            "docs/queries.md lacks the row\n{row}"
        );
    }
}

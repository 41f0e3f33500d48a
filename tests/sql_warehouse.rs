//! Compiled metric questions against a real warehouse: every shape in
//! tests/fixtures/warehouse/shapes.yaml is compiled for PostgreSQL and for MariaDB, run on both
//! with its parameters bound, and compared row for row with the hand-written reference answer
//! run on PostgreSQL.

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
        .map(|m| MetricIdentity {
            name: m.name.clone(),
            id: semops::crd::packed::MetricId::from_uuid(uuid::Uuid::now_v7()),
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

fn unordered(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    rows.sort();
    rows
}

#[tokio::test(flavor = "multi_thread")]
async fn every_shape_gives_the_reference_answer_on_postgres_and_mariadb() {
    let database = format!("wh_{}", unique());
    postgres().psql("postgres", &format!("CREATE DATABASE {database}"));
    postgres().psql(
        &database,
        &format!("CREATE SCHEMA wh;\n{}", script(Flavor::Postgres, "wh")),
    );
    mariadb().mysql(&format!(
        "CREATE DATABASE wh;\n{}",
        script(Flavor::Mariadb, "wh")
    ));

    let (pg, connection) = tokio_postgres::connect(
        &format!(
            "host=127.0.0.1 port={} user=postgres password=postgres dbname={database}",
            postgres().port
        ),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    let mut my =
        mysql_async::Conn::from_url(format!("mysql://root:root@127.0.0.1:{}/wh", mariadb().port))
            .await
            .unwrap();

    let def = model();
    let ids = ids(&def);
    let model = Model {
        definition: &def,
        revision: 1,
        metric_ids: &ids,
        sources: &[],
    };
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

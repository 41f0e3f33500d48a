//! Metric questions through the operator: the warehouse model accepted against real PostgreSQL
//! and MariaDB catalogs, compiled by the read API (both path families, RBAC of the model), the
//! dialect chosen by the catalog the tables are in, and `semops sql --execute` running the SQL
//! with the caller's own connection, agreeing with hand-written reference SQL on both databases.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use semops::sql::Question;
use serde::Deserialize;
use serde_json::{Value, json};
use support::db::{mariadb, postgres, unique};
use support::warehouse::{Flavor, script};
use support::{ALLOWED_LOCAL_HOSTS, Operator, ROOT, env, eventually, wait_ready};

fn get(port: u16, path: &str, token: &str) -> (u16, Value) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    let (head, body) = buf.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (
        status,
        serde_json::from_str(body).unwrap_or(Value::String(body.into())),
    )
}

#[derive(Deserialize)]
struct Shape {
    name: String,
    question: Question,
    #[serde(default)]
    reference: Option<String>,
}

/// A SemanticModel of the warehouse definition with its sources in `catalog.schema`.
fn model(ns: &str, name: &str, rebind: &[(&str, &str)]) -> String {
    let mut text =
        std::fs::read_to_string(format!("{ROOT}/tests/fixtures/warehouse/model.yaml")).unwrap();
    for (from, to) in rebind {
        text = text.replace(from, to);
    }
    let definition: Value = serde_saphyr::from_str(&text).unwrap();
    json!({
        "apiVersion": "semops.io/v1alpha1", "kind": "SemanticModel",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"catalog": "home", "schema": "semantic", "definition": definition}
    })
    .to_string()
}

/// One value as compared across databases: numbers to four decimals.
fn normal(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::Number(n) => format!("{:.4}", n.as_f64().unwrap()),
        Value::String(s) => match s.parse::<f64>() {
            Ok(n) => format!("{n:.4}"),
            Err(_) => s.clone(),
        },
        other => other.to_string(),
    }
}

fn rows(out: &Value, sorted: bool) -> Vec<Vec<String>> {
    let columns: Vec<&str> = out["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let mut rows: Vec<Vec<String>> = out["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| columns.iter().map(|c| normal(&r[*c])).collect())
        .collect();
    if sorted {
        rows.sort();
    }
    rows
}

#[test]
fn questions_compile_through_the_api_and_run_with_the_callers_connection() {
    let env = env();
    let ns = env.namespace("sql");
    let ns = ns.name.as_str();
    let u = unique();
    let (pg_db, my_db) = (format!("wh_{u}"), format!("whm_{u}"));
    let (pg, my) = (postgres(), mariadb());
    pg.psql("postgres", &format!("CREATE DATABASE {pg_db}"));
    pg.psql(
        &pg_db,
        &format!("CREATE SCHEMA wh;\n{}", script(Flavor::Postgres, "wh")),
    );
    my.mysql(&format!(
        "CREATE DATABASE {my_db};\n{}",
        script(Flavor::Mariadb, &my_db)
    ));

    let op = Operator::for_namespace(env, ns);
    env.apply_ok(&support::ca_secret(ns, "pg-ca", &pg.ca_pem()));
    env.apply_ok(&support::ca_secret(ns, "my-ca", &my.ca_pem()));
    env.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: pg, namespace: {ns}, labels: {{semops.io/catalog-credentials: \"true\"}}, annotations: {{semops.io/allowed-hosts: \"{ALLOWED_LOCAL_HOSTS}\"}}}}\nstringData: {{username: {pu}, password: {pp}}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: my, namespace: {ns}, labels: {{semops.io/catalog-credentials: \"true\"}}, annotations: {{semops.io/allowed-hosts: \"{ALLOWED_LOCAL_HOSTS}\"}}}}\nstringData: {{username: {mu}, password: {mp}}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: p, namespace: {ns}}}\nspec: {{enabled: false, mode: ReportOnly}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: wh, namespace: {ns}}}\nspec:\n  provider: postgresql\n  connection: {{host: localhost, port: {pport}, database: {pg_db}, tls: {{caSecretRef: {{name: pg-ca}}}}, credentialsSecretRef: {{name: pg}}}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: mdb, namespace: {ns}}}\nspec:\n  provider: mysql\n  connection: {{host: localhost, port: {mport}, database: {my_db}, tls: {{caSecretRef: {{name: my-ca}}}}, credentialsSecretRef: {{name: my}}}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: home, namespace: {ns}}}\nspec: {{provider: managed, registrations: [{{kind: Schema, name: semantic}}]}}\n",
        pu = pg.admin_user,
        pp = pg.admin_password,
        mu = my.admin_user,
        mp = my.admin_password,
        pport = pg.port,
        mport = my.port,
    ));
    env.apply_ok(&model(ns, "shop-pg", &[]));
    let my_sources = format!("source: mdb.{my_db}.");
    env.apply_ok(&model(ns, "shop-my", &[("source: wh.wh.", &my_sources)]));
    // Regions in MariaDB, everything else in PostgreSQL: a question through regions spans both.
    let mixed = format!("source: mdb.{my_db}.regions");
    env.apply_ok(&model(
        ns,
        "shop-mixed",
        &[("source: wh.wh.regions", &mixed)],
    ));
    for m in ["sm/shop-pg", "sm/shop-my", "sm/shop-mixed"] {
        wait_ready(env, ns, m, "True", "Accepted");
    }

    let full = env.service_account_token(
        ns,
        "analyst",
        "[{apiGroups: [semops.io], resources: [catalogs, semanticmodels], verbs: [get]}]",
        &[
            ("get", "catalogs.semops.io"),
            ("get", "semanticmodels.semops.io"),
        ],
    );
    let other = env.service_account_token(
        ns,
        "mixed-only",
        "[{apiGroups: [semops.io], resources: [catalogs], verbs: [get]}, {apiGroups: [semops.io], resources: [semanticmodels], resourceNames: [shop-mixed], verbs: [get]}]",
        &[("get", "semanticmodels.semops.io/shop-mixed")],
    );
    let direct = |m: &str| {
        format!("/api/metalakes/{ns}/catalogs/home/schemas/semantic/semantic-models/{m}/sql")
    };
    let aggregated = |m: &str| {
        format!("/apis/query.semops.io/v1alpha1/namespaces/{ns}/models/home.semantic.{m}/sql")
    };
    let question: Question = serde_json::from_value(json!({
        "metrics": ["revenue", "units"], "dimensions": ["regions.region", "orders.ordered_at:quarter"],
        "filters": [{"field": "orders.status", "op": "in", "values": ["paid", "shipped"]}],
        "order": ["-revenue"], "limit": 5
    }))
    .unwrap();
    let query = question.to_query();

    // The answer names the revision and the ids status holds, in the dialect of the tables'
    // catalog (the model's home catalog is a managed one).
    let (status, pg_answer) = eventually(Duration::from_secs(30), "the analyst's role", || {
        let r = get(
            op.api_port,
            &format!("{}?{query}", direct("shop-pg")),
            &full,
        );
        (r.0 != 403).then_some(r)
    });
    assert_eq!(status, 200, "{pg_answer}");
    let sm: Value =
        serde_json::from_str(&env.kubectl_ok(&["get", "sm", "shop-pg", "-n", ns, "-o", "json"]))
            .unwrap();
    assert_eq!(pg_answer["revision"], sm["status"]["revision"]);
    for (i, name) in ["revenue", "units"].iter().enumerate() {
        assert_eq!(
            (
                &pg_answer["metrics"][i]["name"],
                &pg_answer["metrics"][i]["id"]
            ),
            (&json!(name), &id_of(&sm, name))
        );
    }
    assert_eq!(pg_answer["target"], "postgres");
    assert_eq!(pg_answer["catalogs"], json!(["wh"]));
    assert_eq!(pg_answer["namespace"], json!([ns, "home", "semantic"]));
    assert!(
        pg_answer["sql"]
            .as_str()
            .unwrap()
            .contains("\"wh\".\"orders\""),
        "{pg_answer}"
    );
    assert_eq!(
        pg_answer["parameters"],
        json!([{"type": "string", "value": "paid"}, {"type": "string", "value": "shipped"}])
    );
    // The aggregated twin answers the same.
    let (status, twin) = get(
        op.api_port,
        &format!("{}?{query}", aggregated("shop-pg")),
        &full,
    );
    assert_eq!((status, &twin), (200, &pg_answer));
    let (status, my_answer) = get(
        op.api_port,
        &format!("{}?{query}", direct("shop-my")),
        &full,
    );
    assert_eq!(status, 200, "{my_answer}");
    assert_eq!(my_answer["target"], "mysql");
    assert!(
        my_answer["sql"]
            .as_str()
            .unwrap()
            .contains(&format!("`{my_db}`.`orders`")),
        "{my_answer}"
    );

    // Refusals name the part of the question and the fix, on both families.
    for (q, parameter, says) in [
        (
            "metric=profit",
            "metrics[0]",
            "unknown metric \\\"profit\\\"",
        ),
        (
            "metric=revenue&dimension=lines.quantity",
            "dimensions[0]",
            "more than once",
        ),
        (
            "metric=revenue&dimension=regions.region:month",
            "dimensions[0]",
            "needs a date or timestamp",
        ),
        (
            "metric=revenue&filter=%7B%22field%22%3A%22orders.amount%22%2C%22op%22%3A%22gt%22%2C%22values%22%3A%5B%22lots%22%5D%7D",
            "filters[0].values[0]",
            "is not a number",
        ),
        ("metric=revenue&nonsense=1", "query", "unknown parameter"),
    ] {
        let (status, body) = get(op.api_port, &format!("{}?{q}", direct("shop-pg")), &full);
        assert_eq!(status, 400, "{q}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{parameter}: "))
                && message.contains(says.replace("\\\"", "\"").as_str()),
            "{q}: {message}"
        );
        let (status, body) = get(
            op.api_port,
            &format!("{}?{q}", aggregated("shop-pg")),
            &full,
        );
        assert_eq!(
            (status, body["kind"].as_str(), body["reason"].as_str()),
            (400, Some("Status"), Some("BadRequest")),
            "{q}: {body}"
        );
        assert_eq!(body["message"].as_str().unwrap(), message);
    }
    // One statement runs in one catalog.
    let (status, body) = get(
        op.api_port,
        &format!(
            "{}?metric=revenue&dimension=regions.region",
            direct("shop-mixed")
        ),
        &full,
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("catalogs mdb, wh"),
        "{body}"
    );
    let (status, body) = get(
        op.api_port,
        &format!(
            "{}?metric=revenue&dimension=customers.segment",
            direct("shop-mixed")
        ),
        &full,
    );
    assert_eq!(
        (status, body["target"].as_str()),
        (200, Some("postgres")),
        "{body}"
    );
    // The model's RBAC: a caller who may get only another model does not see this one.
    let (status, body) = get(
        op.api_port,
        &format!("{}?{query}", direct("shop-pg")),
        &other,
    );
    assert_eq!(status, 404, "{body}");
    let (status, _) = get(
        op.api_port,
        &format!(
            "{}?metric=revenue&dimension=customers.segment",
            direct("shop-mixed")
        ),
        &other,
    );
    assert_eq!(status, 200);

    // `semops sql`: SQL on stdout, and with --execute the rows, run with the caller's own
    // connection (--dsn, or the PG*/MYSQL* environment), equal to the reference on both databases.
    let cli = |model: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_semops"));
        c.args(["sql", "home", "semantic", model, "-n", ns])
            .args([
                "--server",
                &format!("http://127.0.0.1:{}", op.api_port),
                "--token",
                &full,
            ])
            .env_remove("SEMOPS_DSN");
        c
    };
    let printed = stdout_of(cli("shop-pg").args(["-m", "revenue", "-d", "customers.segment"]));
    assert!(
        printed.starts_with("SELECT") && printed.contains("\"wh\".\"customers\""),
        "{printed}"
    );
    let out = cli("shop-pg").args(["-m", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("metrics[0]: unknown metric"),
        "{out:?}"
    );

    let shapes: Vec<Shape> = serde_saphyr::from_str(
        &std::fs::read_to_string(format!("{ROOT}/tests/fixtures/warehouse/shapes.yaml")).unwrap(),
    )
    .unwrap();
    let pg_dsn = format!(
        "host=127.0.0.1 port={} user={} password={} dbname={pg_db} sslmode=disable",
        pg.port, pg.admin_user, pg.admin_password
    );
    let my_dsn = format!(
        "mysql://{}:{}@127.0.0.1:{}/{my_db}",
        my.admin_user, my.admin_password, my.port
    );
    let picked = [
        "the fan-out trap, order and line metrics together",
        "a ratio across datasets",
        "filter between two timestamps",
        "ordered by a metric with a limit, ties broken by the dimensions",
        "grain week (weeks start on Monday)",
    ];
    for name in picked {
        let shape = shapes
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no shape {name}"));
        let sorted = shape.question.order.is_empty();
        let mut args: Vec<String> = vec![];
        for m in &shape.question.metrics {
            args.extend(["-m".into(), m.clone()]);
        }
        for d in &shape.question.dimensions {
            args.extend(["-d".into(), d.clone()]);
        }
        for f in &shape.question.filters {
            args.extend(["-w".into(), serde_json::to_string(f).unwrap()]);
        }
        for o in &shape.question.order {
            args.extend(["--order".into(), o.clone()]);
        }
        if let Some(l) = shape.question.limit {
            args.extend(["--limit".into(), l.to_string()]);
        }
        let run = |c: &mut Command| -> Value {
            serde_json::from_str(&stdout_of(c.args(&args).args(["--execute", "-o", "json"])))
                .unwrap()
        };
        let on_pg = run(cli("shop-pg").args(["--dsn", &pg_dsn]));
        let on_my = run(cli("shop-my").args(["--dsn", &my_dsn]));
        // The reference, run by PostgreSQL's own client as JSON rows in the answer's column order.
        let reference = shape.reference.as_deref().unwrap();
        let columns: Vec<String> = on_pg["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        let renamed = columns
            .iter()
            .enumerate()
            .map(|(i, c)| format!("r.\"c{i}\" AS \"{c}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let aliases = (0..columns.len())
            .map(|i| format!("c{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        let psql = Command::new("psql")
            .env("PGPASSWORD", pg.admin_password)
            .args(["-h", "127.0.0.1", "-p", &pg.port.to_string(), "-U", pg.admin_user, "-d", &pg_db, "-At", "-c"])
            .arg(format!("SELECT json_agg(x)::text FROM (SELECT {renamed} FROM ({reference}) AS r({aliases})) AS x"))
            .output()
            .unwrap();
        assert!(
            psql.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&psql.stderr)
        );
        let want = json!({"columns": columns, "rows": serde_json::from_slice::<Value>(&psql.stdout).unwrap()});
        assert_eq!(
            rows(&on_pg, sorted),
            rows(&want, sorted),
            "{name} on PostgreSQL"
        );
        assert_eq!(
            rows(&on_my, sorted),
            rows(&want, sorted),
            "{name} on MariaDB"
        );
        // The ids come with the rows: those status holds for each requested metric.
        for (i, m) in shape.question.metrics.iter().enumerate() {
            assert_eq!(on_pg["metrics"][i]["name"], json!(m), "{name}");
            assert_eq!(on_pg["metrics"][i]["id"], id_of(&sm, m), "{name}");
        }
    }

    // The environment instead of --dsn: PG* (TLS verified against PGSSLROOTCERT) and MYSQL_*.
    let ca = env.work_dir.join(format!("pg-ca-{u}.crt"));
    std::fs::write(&ca, pg.ca_pem()).unwrap();
    let mut pg_command = cli("shop-pg");
    pg_command.args(["-m", "order_count", "--execute"]).envs([
        ("PGHOST", "localhost"),
        ("PGPORT", &pg.port.to_string()),
        ("PGUSER", pg.admin_user),
        ("PGPASSWORD", pg.admin_password),
        ("PGDATABASE", &pg_db),
        ("PGSSLMODE", "verify-full"),
        ("PGSSLROOTCERT", ca.to_str().unwrap()),
    ]);
    let pg_table = stdout_of(&mut pg_command);
    let mut my_command = cli("shop-my");
    my_command.args(["-m", "order_count", "--execute"]).envs([
        ("MYSQL_HOST", "127.0.0.1"),
        ("MYSQL_TCP_PORT", &my.port.to_string()),
        ("MYSQL_USER", my.admin_user),
        ("MYSQL_PWD", my.admin_password),
        ("MYSQL_DATABASE", &my_db),
    ]);
    let my_table = stdout_of(&mut my_command);
    assert_eq!(pg_table, my_table);
    assert!(
        pg_table.starts_with("ORDER_COUNT\n") && pg_table.lines().count() == 2,
        "{pg_table}"
    );
}

/// What a command printed, after it succeeded.
fn stdout_of(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The id a model's status gives metric `name`.
fn id_of(sm: &Value, name: &str) -> Value {
    sm["status"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no metric {name} in status"))["id"]
        .clone()
}

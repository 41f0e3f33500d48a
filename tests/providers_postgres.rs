//! What only PostgreSQL can show, against a real PostgreSQL 15 (the shared contract is in
//! provider_contract.rs): more relation kinds, ids across databases, catalog visibility without
//! privileges, a backend killed mid-batch, a missing database.

mod support;

use std::time::Duration;

use semops::catalog::postgres::PostgresProvider;
use semops::catalog::{CatalogProvider, Column, ObjectType, Probe, ProbeTarget};
use support::db::{postgres, unique};
use support::eventually;

/// A fresh database per test so tests run in parallel without seeing each other.
fn database() -> (String, PostgresProvider) {
    let pg = postgres();
    let db = format!("t{}", unique());
    pg.psql("postgres", &format!("CREATE DATABASE {db}"));
    let provider = PostgresProvider::new(pg.admin(&db)).unwrap();
    (db, provider)
}

fn present_id(p: &Probe) -> (ObjectType, String) {
    match p {
        Probe::Present {
            object_type,
            native_id,
        } => (*object_type, native_id.clone()),
        Probe::Absent => panic!("expected Present"),
    }
}

#[tokio::test]
async fn materialized_views_are_views_and_partitioned_and_foreign_tables_are_tables() {
    let (db, p) = database();
    postgres().psql(&db, "CREATE SCHEMA mart; CREATE MATERIALIZED VIEW mart.mv AS SELECT 1 AS x; \
        CREATE TABLE mart.parted(id int) PARTITION BY RANGE (id); CREATE SEQUENCE mart.seq; CREATE INDEX ON mart.parted(id);");
    let answers = p
        .probe(&[
            ProbeTarget::relation("mart", "mv"),
            ProbeTarget::relation("mart", "parted"),
            ProbeTarget::relation("mart", "seq"),
        ])
        .await
        .unwrap();
    assert_eq!(present_id(&answers[0]).0, ObjectType::View);
    assert_eq!(present_id(&answers[1]).0, ObjectType::Table);
    assert_eq!(
        answers[2],
        Probe::Absent,
        "a sequence is not a table or view"
    );
}

#[tokio::test]
async fn ids_are_distinct_across_databases() {
    let (db1, p1) = database();
    let (db2, p2) = database();
    for db in [&db1, &db2] {
        postgres().psql(db, "CREATE TABLE public.same(id int);");
    }
    let target = [ProbeTarget::relation("public", "same")];
    let a = present_id(&p1.probe(&target).await.unwrap()[0]).1;
    let b = present_id(&p2.probe(&target).await.unwrap()[0]).1;
    assert_ne!(a, b);
    assert_eq!(
        p1.find_by_id(&b).await.unwrap(),
        None,
        "an id from another database is not found here"
    );
}

#[tokio::test]
async fn a_renamed_schema_keeps_its_id_and_dropped_columns_are_not_listed() {
    let (db, p) = database();
    postgres().psql(
        &db,
        "CREATE SCHEMA s; CREATE TABLE s.e(id int, gone int, name text); ALTER TABLE s.e DROP COLUMN gone;",
    );
    let (_, schema_id) = present_id(&p.probe(&[ProbeTarget::schema("s")]).await.unwrap()[0]);
    assert_eq!(
        p.columns("s", "e").await.unwrap(),
        Some(vec![
            Column::new("id", "integer"),
            Column::new("name", "text")
        ])
    );
    // The batched form leaves the dropped column out too.
    let all = p
        .columns_of(&[ProbeTarget::relation("s", "e")])
        .await
        .unwrap();
    assert_eq!(
        all[&ProbeTarget::relation("s", "e")],
        vec![Column::new("id", "integer"), Column::new("name", "text")]
    );
    postgres().psql(&db, "ALTER SCHEMA s RENAME TO s2;");
    assert_eq!(
        present_id(&p.probe(&[ProbeTarget::schema("s2")]).await.unwrap()[0]).1,
        schema_id
    );
    assert_eq!(
        p.find_by_id(&schema_id).await.unwrap().unwrap().target,
        ProbeTarget::schema("s2")
    );
}

#[tokio::test]
async fn a_role_without_privileges_still_sees_that_objects_exist() {
    let (db, _) = database();
    let role = format!("nopriv_{}", unique());
    postgres().psql(&db, &format!("CREATE TABLE public.secret(id int); REVOKE ALL ON public.secret FROM PUBLIC; CREATE ROLE {role} LOGIN PASSWORD 'pw';"));
    let p = PostgresProvider::new(postgres().settings(&db, &role, "pw")).unwrap();
    let answers = p
        .probe(&[
            ProbeTarget::relation("public", "secret"),
            ProbeTarget::relation("public", "absent"),
        ])
        .await
        .unwrap();
    assert_eq!(present_id(&answers[0]).0, ObjectType::Table, "{answers:?}");
    assert_eq!(answers[1], Probe::Absent);
}

#[tokio::test]
async fn a_connection_killed_in_the_middle_of_a_batch_is_an_error_not_absent() {
    let (db, p) = database();
    postgres().psql(&db, "CREATE TABLE public.t(id int);");
    // A batch large enough to still be running when its backend is terminated.
    let mut targets: Vec<ProbeTarget> = (0..400_000)
        .map(|i| ProbeTarget::relation("public", format!("n{i}")))
        .collect();
    targets.push(ProbeTarget::relation("public", "t"));
    let probe = tokio::spawn(async move { (p.probe(&targets).await, p) });
    // Terminate the backend once it is running the batch (seen in pg_stat_activity).
    let killed = tokio::task::spawn_blocking(move || {
        eventually(Duration::from_secs(60), "the batch to be running", || {
            let out = std::process::Command::new("psql")
                .env("PGPASSWORD", postgres().admin_password)
                .args(["-h", "127.0.0.1", "-p", &postgres().port.to_string(), "-U", "postgres", "-d", "postgres", "-tAc"])
                .arg(format!("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '{db}' AND application_name = 'semops' AND state = 'active' AND query LIKE '%unnest%'"))
                .output()
                .unwrap();
            (String::from_utf8_lossy(&out.stdout).trim() == "1").then_some(())
        })
    });
    let ((result, p), ()) = (probe.await.unwrap(), killed.await.unwrap());
    match result {
        Err(e) => assert!(
            ["ServerUnavailable", "Unreachable"].contains(&e.category().as_str()),
            "{e}"
        ),
        Ok(answers) => panic!(
            "the batch finished although its backend was terminated ({} answers)",
            answers.len()
        ),
    }
    // The pool recovers with a fresh connection.
    assert!(matches!(
        p.probe(&[ProbeTarget::relation("public", "t")])
            .await
            .unwrap()[0],
        Probe::Present { .. }
    ));
}

#[tokio::test]
async fn a_missing_database_is_a_misconfiguration() {
    let p = PostgresProvider::new(postgres().admin("no_such_db")).unwrap();
    let err = p.check_connection().await.unwrap_err();
    assert_eq!(err.category(), "Misconfigured", "{err}");
    assert!(
        err.to_string().contains("spec.connection.database"),
        "{err}"
    );
}

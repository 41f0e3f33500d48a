//! The PostgreSQL provider against a real PostgreSQL 15: existence and identity answers, and
//! every infrastructure failure an error of the right category, never `Absent`.

mod support;

use std::time::{Duration, Instant};

use semops::catalog::postgres::PostgresProvider;
use semops::catalog::{CatalogProvider, ObjectType, Probe, ProbeTarget, ProviderError};
use support::db::{postgres, settings, unique};

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
async fn probes_answer_present_or_absent_in_input_order_with_the_object_type() {
    let (db, p) = database();
    postgres().psql(&db, "CREATE SCHEMA mart; CREATE TABLE mart.orders(id int); CREATE VIEW mart.v AS SELECT 1 AS x; \
        CREATE MATERIALIZED VIEW mart.mv AS SELECT 1 AS x; CREATE TABLE mart.parted(id int) PARTITION BY RANGE (id);");
    let targets = [
        ProbeTarget::relation("mart", "orders"),
        ProbeTarget::schema("mart"),
        ProbeTarget::relation("mart", "missing"),
        ProbeTarget::relation("mart", "v"),
        ProbeTarget::schema("nope"),
        ProbeTarget::relation("mart", "mv"),
        ProbeTarget::relation("nope", "orders"),
        ProbeTarget::relation("mart", "parted"),
    ];
    let answers = p.probe(&targets).await.unwrap();
    let types: Vec<Option<ObjectType>> = answers
        .iter()
        .map(|a| match a {
            Probe::Present { object_type, .. } => Some(*object_type),
            Probe::Absent => None,
        })
        .collect();
    assert_eq!(
        types,
        vec![
            Some(ObjectType::Table),
            Some(ObjectType::Schema),
            None,
            Some(ObjectType::View),
            None,
            Some(ObjectType::View),
            None,
            Some(ObjectType::Table)
        ]
    );
}

#[tokio::test]
async fn a_rename_keeps_the_id_and_a_drop_and_recreate_changes_it() {
    let (db, p) = database();
    let pg = postgres();
    pg.psql(&db, "CREATE SCHEMA s; CREATE TABLE s.t(id int);");
    let (_, table_id) = present_id(&p.probe(&[ProbeTarget::relation("s", "t")]).await.unwrap()[0]);
    let (_, schema_id) = present_id(&p.probe(&[ProbeTarget::schema("s")]).await.unwrap()[0]);

    pg.psql(
        &db,
        "ALTER TABLE s.t RENAME TO t2; ALTER SCHEMA s RENAME TO s2;",
    );
    let answers = p
        .probe(&[
            ProbeTarget::relation("s", "t"),
            ProbeTarget::relation("s2", "t2"),
            ProbeTarget::schema("s2"),
        ])
        .await
        .unwrap();
    assert_eq!(answers[0], Probe::Absent);
    assert_eq!(
        present_id(&answers[1]).1,
        table_id,
        "rename keeps the table id"
    );
    assert_eq!(
        present_id(&answers[2]).1,
        schema_id,
        "rename keeps the schema id"
    );
    let found = p.find_by_id(&table_id).await.unwrap().unwrap();
    assert_eq!(found.target, ProbeTarget::relation("s2", "t2"));
    assert_eq!(
        p.find_by_id(&schema_id).await.unwrap().unwrap().target,
        ProbeTarget::schema("s2")
    );

    pg.psql(&db, "DROP TABLE s2.t2; CREATE TABLE s2.t2(id int);");
    let (_, recreated) =
        present_id(&p.probe(&[ProbeTarget::relation("s2", "t2")]).await.unwrap()[0]);
    assert_ne!(recreated, table_id, "drop + create gives a new id");
    assert_eq!(
        p.find_by_id(&table_id).await.unwrap(),
        None,
        "the old id is gone"
    );
}

#[tokio::test]
async fn ids_are_distinct_across_databases() {
    let (db1, p1) = database();
    let (db2, p2) = database();
    for db in [&db1, &db2] {
        postgres().psql(db, "CREATE TABLE public.same(id int);");
    }
    let a = present_id(
        &p1.probe(&[ProbeTarget::relation("public", "same")])
            .await
            .unwrap()[0],
    )
    .1;
    let b = present_id(
        &p2.probe(&[ProbeTarget::relation("public", "same")])
            .await
            .unwrap()[0],
    )
    .1;
    assert_ne!(a, b);
    assert_eq!(
        p1.find_by_id(&b).await.unwrap(),
        None,
        "an id from another database is not found here"
    );
}

#[tokio::test]
async fn names_are_exact_case_sensitive_and_may_hold_any_character() {
    let (db, p) = database();
    let names = [
        "Employees",
        "employees",
        "with.dot",
        "with\"quote",
        "with`tick",
        "with space",
        "ünïcödé_名前",
        "semi;colon",
    ];
    let mut sql = String::from("CREATE SCHEMA \"Odd.Schema\";");
    for n in names {
        sql.push_str(&format!(
            "CREATE TABLE \"Odd.Schema\".\"{}\"(id int);",
            n.replace('"', "\"\"")
        ));
    }
    postgres().psql(&db, &sql);
    let mut targets: Vec<ProbeTarget> = names
        .iter()
        .map(|n| ProbeTarget::relation("Odd.Schema", *n))
        .collect();
    targets.push(ProbeTarget::relation("Odd.Schema", "EMPLOYEES"));
    targets.push(ProbeTarget::relation("odd.schema", "employees"));
    let answers = p.probe(&targets).await.unwrap();
    let ids: Vec<String> = answers[..names.len()]
        .iter()
        .map(|a| present_id(a).1)
        .collect();
    assert_eq!(
        ids.iter().collect::<std::collections::HashSet<_>>().len(),
        names.len(),
        "each name is its own object"
    );
    assert_eq!(
        &answers[names.len()..],
        &[Probe::Absent, Probe::Absent],
        "case matters"
    );
}

#[tokio::test]
async fn columns_are_the_visible_undropped_ones_in_order() {
    let (db, p) = database();
    postgres().psql(&db, "CREATE TABLE public.e(id int, gone int, name text, salary numeric); ALTER TABLE public.e DROP COLUMN gone; \
        CREATE VIEW public.ev AS SELECT id, name FROM public.e;");
    assert_eq!(
        p.columns("public", "e").await.unwrap(),
        Some(vec!["id".into(), "name".into(), "salary".into()])
    );
    assert_eq!(
        p.columns("public", "ev").await.unwrap(),
        Some(vec!["id".into(), "name".into()])
    );
    assert_eq!(p.columns("public", "missing").await.unwrap(), None);
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
    assert!(
        matches!(
            answers[0],
            Probe::Present {
                object_type: ObjectType::Table,
                ..
            }
        ),
        "{answers:?}"
    );
    assert_eq!(answers[1], Probe::Absent);
}

#[tokio::test]
async fn a_wrong_password_is_auth_failed_and_never_leaks_the_password() {
    let (db, _) = database();
    let canary = "canary-7f3a-S3CR3T";
    let p = PostgresProvider::new(postgres().settings(&db, "postgres", canary)).unwrap();
    for result in [
        p.check_connection().await.map(drop),
        p.probe(&[ProbeTarget::schema("public")]).await.map(drop),
    ] {
        let err = result.unwrap_err();
        assert_eq!(err.category(), "AuthFailed", "{err}");
        assert!(
            !err.to_string().contains(canary) && !format!("{err:?}").contains(canary),
            "{err:?}"
        );
    }
}

#[tokio::test]
async fn a_refused_connection_is_unreachable() {
    let port = support::free_port(); // nothing listens there
    let p = PostgresProvider::new(settings(
        "127.0.0.1",
        port,
        "postgres",
        "postgres",
        "postgres",
    ))
    .unwrap();
    let err = p.probe(&[ProbeTarget::schema("public")]).await.unwrap_err();
    assert_eq!(err.category(), "Unreachable", "{err}");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_within_the_deadline() {
    // Accepts TCP connections (the kernel completes the handshake) and never says a word.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let p = PostgresProvider::new(settings(
        "127.0.0.1",
        port,
        "postgres",
        "postgres",
        "postgres",
    ))
    .unwrap();
    let started = Instant::now();
    let err = p.probe(&[ProbeTarget::schema("public")]).await.unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(err, ProviderError::Timeout(_)), "{err}");
    // A liveness bound, not a speed target: connect (2s) + statement (2s) plus slack.
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
    drop(listener);
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
    let killer = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        postgres().psql("postgres", &format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}' AND application_name = 'semops'"));
    };
    let (result, ()) = tokio::join!(p.probe(&targets), killer);
    match result {
        Err(e) => assert!(
            ["ServerUnavailable", "Unreachable"].contains(&e.category()),
            "{e}"
        ),
        Ok(answers) => panic!(
            "the batch finished before it was killed ({} answers); enlarge it",
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

/// A round's observation in many small batches with concurrency gives the same answers as one
/// big probe, looks up only the ids of absent names, and counts every request.
#[tokio::test]
async fn a_batched_observation_matches_single_probes_and_finds_renamed_ids() {
    use semops::catalog::observe::{ProbeLimits, observe};
    use semops::reconcile::plan::Target;
    let (db, p) = database();
    let tables: String = (0..300)
        .map(|i| format!("CREATE TABLE app.t{i}(id int);"))
        .collect();
    postgres().psql(&db, &format!("CREATE SCHEMA app; {tables}"));
    let mut targets: Vec<ProbeTarget> = (0..320)
        .map(|i| ProbeTarget::relation("app", format!("t{i}")))
        .collect();
    targets.push(ProbeTarget::schema("app"));
    targets.sort();
    let truth = p.probe(&targets).await.unwrap();
    let id_of_t5 = present_id(
        &truth[targets
            .binary_search(&ProbeTarget::relation("app", "t5"))
            .unwrap()],
    )
    .1;
    postgres().psql(&db, "ALTER TABLE app.t5 RENAME TO renamed;");
    let planned: Vec<Target> = targets
        .iter()
        .map(|t| Target {
            target: t.clone(),
            ids: if *t == ProbeTarget::relation("app", "t5") {
                vec![id_of_t5.clone()]
            } else {
                vec![]
            },
        })
        .collect();
    let requests = std::sync::atomic::AtomicUsize::new(0);
    let count = |_: Duration| {
        requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    let limits = ProbeLimits {
        timeout: Duration::from_secs(5),
        concurrency: 3,
        batch_size: 7,
    };
    let seen = observe(&p, &planned, limits, &count).await.unwrap();
    for (t, want) in targets.iter().zip(&truth) {
        let got = &seen.by_name[t];
        if *t == ProbeTarget::relation("app", "t5") {
            assert_eq!(*got, Probe::Absent);
        } else {
            assert_eq!(got, want, "{t:?}");
        }
    }
    assert_eq!(
        seen.by_id.len(),
        1,
        "only recorded ids of absent names are looked up"
    );
    assert_eq!(
        seen.by_id[&id_of_t5].as_ref().map(|f| f.target.clone()),
        Some(ProbeTarget::relation("app", "renamed"))
    );
    assert_eq!(requests.into_inner(), targets.len().div_ceil(7) + 1);
}

/// A server that accepts and never answers: the observation fails with Timeout within the
/// per-probe deadline instead of hanging (and never says Absent).
#[tokio::test]
async fn an_observation_against_a_blackholed_port_times_out() {
    use semops::catalog::observe::{ProbeLimits, observe};
    use semops::reconcile::plan::Target;
    let hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hole.local_addr().unwrap().port();
    let p = PostgresProvider::new(settings(
        "127.0.0.1",
        port,
        "postgres",
        "postgres",
        "postgres",
    ))
    .unwrap();
    let planned = vec![Target {
        target: ProbeTarget::schema("app"),
        ids: vec![],
    }];
    let limits = ProbeLimits {
        timeout: Duration::from_millis(700),
        concurrency: 1,
        batch_size: 1,
    };
    let started = Instant::now();
    let err = observe(&p, &planned, limits, &|_| {}).await.unwrap_err();
    assert!(matches!(err, ProviderError::Timeout(_)), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "a deadline, not a hang"
    );
    drop(hole);
}

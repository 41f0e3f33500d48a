//! The MySQL/MariaDB provider against a real MariaDB: existence and identity answers, the
//! information_schema visibility trap (hidden is not absent), and classified failures.

mod support;

use std::time::{Duration, Instant};

use semops::catalog::mysql::MysqlProvider;
use semops::catalog::{CatalogProvider, ObjectType, Probe, ProbeTarget, ProviderError};
use support::db::{mariadb, settings, unique};

/// A fresh database (schema) per test.
fn database() -> (String, MysqlProvider) {
    let db = format!("t{}", unique());
    mariadb().mysql(&format!("CREATE DATABASE {db}"));
    (
        db.clone(),
        MysqlProvider::new(mariadb().admin(&db)).unwrap(),
    )
}

fn present(p: &Probe) -> (ObjectType, String) {
    match p {
        Probe::Present {
            object_type,
            native_id,
        } => (*object_type, native_id.clone()),
        Probe::Absent => panic!("expected Present"),
    }
}

#[tokio::test]
async fn probes_answer_present_or_absent_in_order_with_the_object_type() {
    let (db, p) = database();
    mariadb().mysql(&format!(
        "CREATE TABLE {db}.orders(id int); CREATE VIEW {db}.v AS SELECT 1 AS x;"
    ));
    let targets = [
        ProbeTarget::relation(&db, "orders"),
        ProbeTarget::schema(&db),
        ProbeTarget::relation(&db, "missing"),
        ProbeTarget::relation(&db, "v"),
        ProbeTarget::schema(format!("{db}_nope")),
        ProbeTarget::relation(format!("{db}_nope"), "orders"),
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
            None
        ]
    );
}

#[tokio::test]
async fn with_process_privilege_table_ids_survive_rename_and_change_on_recreate() {
    let (db, p) = database();
    mariadb().mysql(&format!("CREATE TABLE {db}.t(id int) ENGINE=InnoDB;"));
    let (_, id) = present(&p.probe(&[ProbeTarget::relation(&db, "t")]).await.unwrap()[0]);
    assert!(
        id.contains(":innodb:"),
        "root has PROCESS, so the InnoDB id is used: {id}"
    );
    mariadb().mysql(&format!("RENAME TABLE {db}.t TO {db}.t2;"));
    let answers = p
        .probe(&[
            ProbeTarget::relation(&db, "t"),
            ProbeTarget::relation(&db, "t2"),
        ])
        .await
        .unwrap();
    assert_eq!(answers[0], Probe::Absent);
    assert_eq!(present(&answers[1]).1, id, "rename keeps the id");
    assert_eq!(
        p.find_by_id(&id).await.unwrap().unwrap().target,
        ProbeTarget::relation(&db, "t2")
    );
    mariadb().mysql(&format!(
        "DROP TABLE {db}.t2; CREATE TABLE {db}.t2(id int) ENGINE=InnoDB;"
    ));
    let (_, recreated) = present(&p.probe(&[ProbeTarget::relation(&db, "t2")]).await.unwrap()[0]);
    assert_ne!(recreated, id, "drop + create gives a new id");
    assert_eq!(p.find_by_id(&id).await.unwrap(), None);
}

#[tokio::test]
async fn without_process_privilege_ids_fall_back_to_names_with_the_documented_limitation() {
    let (db, _) = database();
    let user = format!("u{}", unique());
    mariadb().mysql(&format!("CREATE TABLE {db}.t(id int); CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'pw'; GRANT SELECT ON {db}.* TO '{user}'@'127.0.0.1';"));
    let p = MysqlProvider::new(mariadb().settings(&db, &user, "pw")).unwrap();
    let (_, id) = present(&p.probe(&[ProbeTarget::relation(&db, "t")]).await.unwrap()[0]);
    assert!(
        id.contains(":name:") && id.ends_with(&format!("{db}/t")),
        "{id}"
    );
    mariadb().mysql(&format!("RENAME TABLE {db}.t TO {db}.t2;"));
    let (_, renamed) = present(&p.probe(&[ProbeTarget::relation(&db, "t2")]).await.unwrap()[0]);
    assert_ne!(renamed, id, "limitation: a rename looks like drop + create");
    assert_eq!(p.find_by_id(&id).await.unwrap(), None);
}

#[tokio::test]
async fn names_are_exact_and_may_hold_dots_quotes_backticks_spaces_and_unicode() {
    let (db, p) = database();
    let names = [
        "Employees",
        "employees",
        "with.dot",
        "with'quote",
        "with`tick",
        "with space",
        "ünïcödé_名前",
    ];
    let mut sql = String::new();
    for n in names {
        sql.push_str(&format!(
            "CREATE TABLE `{db}`.`{}`(id int);",
            n.replace('`', "``")
        ));
    }
    mariadb().mysql(&sql);
    let mut targets: Vec<ProbeTarget> = names
        .iter()
        .map(|n| ProbeTarget::relation(&db, *n))
        .collect();
    targets.push(ProbeTarget::relation(&db, "EMPLOYEES"));
    let answers = p.probe(&targets).await.unwrap();
    for (n, a) in names.iter().zip(&answers) {
        assert!(
            matches!(
                a,
                Probe::Present {
                    object_type: ObjectType::Table,
                    ..
                }
            ),
            "{n}: {a:?}"
        );
    }
    assert_eq!(
        answers[names.len()],
        Probe::Absent,
        "lower_case_table_names=0: case matters"
    );
    assert_eq!(
        p.columns(&db, "with.dot").await.unwrap(),
        Some(vec!["id".to_string()])
    );
}

#[tokio::test]
async fn an_account_that_cannot_see_an_object_gets_permission_denied_never_absent() {
    let (db, _) = database();
    let user = format!("u{}", unique());
    let other = format!("{db}_private");
    mariadb().mysql(&format!(
        "CREATE TABLE {db}.visible(id int); CREATE TABLE {db}.hidden(id int); CREATE DATABASE {other}; CREATE TABLE {other}.t(id int); \
         CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'pw'; GRANT SELECT ON {db}.visible TO '{user}'@'127.0.0.1';"
    ));
    let p = MysqlProvider::new(mariadb().settings(&db, &user, "pw")).unwrap();
    assert!(matches!(
        p.probe(&[ProbeTarget::relation(&db, "visible")])
            .await
            .unwrap()[0],
        Probe::Present { .. }
    ));
    for target in [
        ProbeTarget::relation(&db, "hidden"),
        ProbeTarget::relation(&other, "t"),
        ProbeTarget::schema(&other),
        ProbeTarget::relation(&db, "truly_missing"),
    ] {
        let err = p
            .probe(std::slice::from_ref(&target))
            .await
            .expect_err(&format!("{target:?} must not be Absent"));
        assert_eq!(err.category(), "PermissionDenied", "{target:?}: {err}");
    }
}

#[tokio::test]
async fn a_wrong_password_is_auth_failed_and_never_leaks_the_password() {
    let (db, _) = database();
    let canary = "canary-7f3a-S3CR3T";
    let p = MysqlProvider::new(mariadb().settings(&db, "root", canary)).unwrap();
    let err = p.probe(&[ProbeTarget::schema(&db)]).await.unwrap_err();
    assert_eq!(err.category(), "AuthFailed", "{err}");
    assert!(
        !err.to_string().contains(canary) && !format!("{err:?}").contains(canary),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_refused_connection_is_unreachable_and_a_silent_server_times_out() {
    let p = MysqlProvider::new(settings(
        "127.0.0.1",
        support::free_port(),
        "x",
        "root",
        "root",
    ))
    .unwrap();
    assert_eq!(
        p.check_connection().await.unwrap_err().category(),
        "Unreachable"
    );

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = MysqlProvider::new(settings(
        "127.0.0.1",
        listener.local_addr().unwrap().port(),
        "x",
        "root",
        "root",
    ))
    .unwrap();
    let started = Instant::now();
    let err = p.probe(&[ProbeTarget::schema("x")]).await.unwrap_err();
    assert!(matches!(err, ProviderError::Timeout(_)), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

//! What only MySQL/MariaDB can show, against a real MariaDB (the shared contract is in
//! provider_contract.rs): the id fallback without the PROCESS privilege, and the
//! information_schema visibility trap (hidden is not absent).

mod support;

use semops::catalog::mysql::MysqlProvider;
use semops::catalog::{CatalogProvider, ObjectType, Probe, ProbeTarget};
use support::db::{mariadb, unique};

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
async fn with_process_privilege_table_ids_are_innodb_ids() {
    let (db, p) = database();
    mariadb().mysql(&format!("CREATE TABLE {db}.t(id int) ENGINE=InnoDB;"));
    let (_, id) = present(&p.probe(&[ProbeTarget::relation(&db, "t")]).await.unwrap()[0]);
    assert!(
        id.contains(":innodb:"),
        "root has PROCESS, so the InnoDB id is used: {id}"
    );
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

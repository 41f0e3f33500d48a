//! The provider contract (docs/design.md#catalogs), one suite run against every SQL provider with a real
//! server: PostgreSQL 15 and MariaDB. Each test states the promise once and checks it on both;
//! what only one system can show lives in providers_postgres.rs / providers_mysql.rs.

mod support;

use std::time::Duration;

use semops::catalog::observe::{Target, observe};
use semops::catalog::registry::{AnyProvider, build};
use semops::catalog::{CatalogProvider, Column, ObjectType, Probe, ProbeTarget, ProviderError};
use semops::crd::catalog::Provider;
use semops::policy::settings::ProbeLimits;
use support::db::{Server, mariadb, postgres, settings, unique};

#[derive(Clone, Copy, Debug)]
enum System {
    Postgres,
    Mariadb,
}

const SYSTEMS: [System; 2] = [System::Postgres, System::Mariadb];

/// A fresh database for one test, with one schema `schema` to create objects in.
struct Fixture {
    system: System,
    db: String,
    schema: String,
    provider: AnyProvider,
}

impl System {
    fn server(self) -> &'static Server {
        match self {
            System::Postgres => postgres(),
            System::Mariadb => mariadb(),
        }
    }

    fn kind(self) -> Provider {
        match self {
            System::Postgres => Provider::Postgresql,
            System::Mariadb => Provider::Mysql,
        }
    }

    /// A quoted identifier.
    fn quote(self, name: &str) -> String {
        match self {
            System::Postgres => format!("\"{}\"", name.replace('"', "\"\"")),
            System::Mariadb => format!("`{}`", name.replace('`', "``")),
        }
    }

    fn fresh(self) -> Fixture {
        let db = format!("t{}", unique());
        let server = self.server();
        // In MySQL a schema is a database; in PostgreSQL the test's schema lives in its database.
        let schema = match self {
            System::Postgres => {
                server.psql("postgres", &format!("CREATE DATABASE {db}"));
                server.psql(&db, "CREATE SCHEMA app");
                "app".to_string()
            }
            System::Mariadb => {
                server.mysql(&format!("CREATE DATABASE {db}"));
                db.clone()
            }
        };
        let provider = build(self.kind(), server.admin(&db)).unwrap();
        Fixture {
            system: self,
            db,
            schema,
            provider,
        }
    }
}

impl Fixture {
    /// Runs statements as the administrator in this fixture's database.
    fn sql(&self, sql: &str) {
        match self.system {
            System::Postgres => self.system.server().psql(&self.db, sql),
            System::Mariadb => self
                .system
                .server()
                .mysql(&format!("USE {}; {sql}", self.db)),
        }
    }

    /// `schema.name`, quoted for this system.
    fn qualified(&self, name: &str) -> String {
        format!(
            "{}.{}",
            self.system.quote(&self.schema),
            self.system.quote(name)
        )
    }

    fn table(&self, name: &str) -> ProbeTarget {
        ProbeTarget::relation(&self.schema, name)
    }

    async fn id_of(&self, name: &str) -> String {
        match &self.provider.probe(&[self.table(name)]).await.unwrap()[0] {
            Probe::Present { native_id, .. } => native_id.clone(),
            Probe::Absent => panic!("{:?}: {name} is absent", self.system),
        }
    }
}

fn kinds(answers: &[Probe]) -> Vec<Option<ObjectType>> {
    answers
        .iter()
        .map(|a| match a {
            Probe::Present { object_type, .. } => Some(*object_type),
            Probe::Absent => None,
        })
        .collect()
}

#[tokio::test]
async fn probes_answer_present_or_absent_in_input_order_with_the_object_type() {
    for system in SYSTEMS {
        let f = system.fresh();
        f.sql(&format!(
            "CREATE TABLE {}(id int); CREATE VIEW {} AS SELECT 1 AS x;",
            f.qualified("orders"),
            f.qualified("v")
        ));
        let targets = [
            f.table("orders"),
            ProbeTarget::schema(&f.schema),
            f.table("missing"),
            f.table("v"),
            ProbeTarget::schema(format!("{}_nope", f.schema)),
            ProbeTarget::relation(format!("{}_nope", f.schema), "orders"),
        ];
        let answers = f.provider.probe(&targets).await.unwrap();
        assert_eq!(
            kinds(&answers),
            vec![
                Some(ObjectType::Table),
                Some(ObjectType::Schema),
                None,
                Some(ObjectType::View),
                None,
                None
            ],
            "{system:?}"
        );
    }
}

#[tokio::test]
async fn a_rename_keeps_the_native_id_and_a_drop_and_recreate_changes_it() {
    for system in SYSTEMS {
        let f = system.fresh();
        f.sql(&format!("CREATE TABLE {}(id int);", f.qualified("t")));
        let id = f.id_of("t").await;
        let rename = match system {
            System::Postgres => format!("ALTER TABLE {} RENAME TO t2;", f.qualified("t")),
            System::Mariadb => format!(
                "RENAME TABLE {} TO {};",
                f.qualified("t"),
                f.qualified("t2")
            ),
        };
        f.sql(&rename);
        let answers = f
            .provider
            .probe(&[f.table("t"), f.table("t2")])
            .await
            .unwrap();
        assert_eq!(answers[0], Probe::Absent, "{system:?}");
        assert_eq!(f.id_of("t2").await, id, "{system:?}: a rename keeps the id");
        assert_eq!(
            f.provider.find_by_id(&id).await.unwrap().map(|x| x.target),
            Some(f.table("t2")),
            "{system:?}: the id is found under its new name"
        );
        f.sql(&format!(
            "DROP TABLE {0}; CREATE TABLE {0}(id int);",
            f.qualified("t2")
        ));
        assert_ne!(
            f.id_of("t2").await,
            id,
            "{system:?}: drop + create gives a new id"
        );
        assert_eq!(
            f.provider.find_by_id(&id).await.unwrap(),
            None,
            "{system:?}: the old id is gone"
        );
    }
}

#[tokio::test]
async fn names_are_exact_case_sensitive_and_may_hold_dots_quotes_spaces_and_unicode() {
    let names = [
        "Employees",
        "employees",
        "with.dot",
        "with\"quote",
        "with'apostrophe",
        "with`tick",
        "with space",
        "ünïcödé_名前",
    ];
    for system in SYSTEMS {
        let f = system.fresh();
        let ddl: String = names
            .iter()
            .map(|n| format!("CREATE TABLE {}(id int);", f.qualified(n)))
            .collect();
        f.sql(&ddl);
        let mut targets: Vec<ProbeTarget> = names.iter().map(|n| f.table(n)).collect();
        targets.push(f.table("EMPLOYEES"));
        let answers = f.provider.probe(&targets).await.unwrap();
        let ids: std::collections::HashSet<String> = answers[..names.len()]
            .iter()
            .map(|a| match a {
                Probe::Present { native_id, .. } => native_id.clone(),
                Probe::Absent => panic!("{system:?}: {a:?}"),
            })
            .collect();
        assert_eq!(
            ids.len(),
            names.len(),
            "{system:?}: each name is its own object"
        );
        assert_eq!(
            answers[names.len()],
            Probe::Absent,
            "{system:?}: case matters"
        );
        assert_eq!(
            names_of(f.provider.columns(&f.schema, "with.dot").await.unwrap()),
            Some(vec!["id".to_string()]),
            "{system:?}"
        );
    }
}

fn names_of(cols: Option<Vec<Column>>) -> Option<Vec<String>> {
    cols.map(|v| v.into_iter().map(|c| c.name).collect())
}

#[tokio::test]
async fn columns_are_listed_in_order_with_types_and_a_missing_relation_has_none() {
    for system in SYSTEMS {
        let f = system.fresh();
        f.sql(&format!(
            "CREATE TABLE {}(id int, name varchar(20), salary numeric(10,2)); CREATE VIEW {} AS SELECT id, name FROM {}; CREATE TABLE {}(x int);",
            f.qualified("e"),
            f.qualified("ev"),
            f.qualified("e"),
            f.qualified("other"),
        ));
        let (int, varchar, numeric) = match system {
            System::Postgres => ("integer", "character varying(20)", "numeric(10,2)"),
            System::Mariadb => ("int(11)", "varchar(20)", "decimal(10,2)"),
        };
        let e = vec![
            Column::new("id", int),
            Column::new("name", varchar),
            Column::new("salary", numeric),
        ];
        assert_eq!(
            f.provider.columns(&f.schema, "e").await.unwrap(),
            Some(e.clone()),
            "{system:?}"
        );
        assert_eq!(
            names_of(f.provider.columns(&f.schema, "ev").await.unwrap()),
            Some(vec!["id".to_string(), "name".to_string()]),
            "{system:?}"
        );
        assert_eq!(
            f.provider.columns(&f.schema, "missing").await.unwrap(),
            None,
            "{system:?}"
        );
        // Many relations in one question: the same lists; the missing one and schemas left out.
        let all = f
            .provider
            .columns_of(&[
                f.table("e"),
                f.table("missing"),
                ProbeTarget::schema(&f.schema),
                f.table("ev"),
            ])
            .await
            .unwrap();
        assert_eq!(all.len(), 2, "{system:?}: {all:?}");
        assert_eq!(all[&f.table("e")], e, "{system:?}");
        assert_eq!(
            names_of(all.get(&f.table("ev")).cloned()),
            Some(vec!["id".to_string(), "name".to_string()]),
            "{system:?}"
        );
        // A type change shows in the list.
        let alter = match system {
            System::Postgres => format!(
                "ALTER TABLE {} ALTER COLUMN salary TYPE bigint;",
                f.qualified("e")
            ),
            System::Mariadb => format!("ALTER TABLE {} MODIFY salary bigint;", f.qualified("e")),
        };
        f.sql(&alter);
        let after = f.provider.columns_of(&[f.table("e")]).await.unwrap();
        assert!(
            after[&f.table("e")][2].data_type.starts_with("bigint"),
            "{system:?}: {after:?}"
        );
    }
}

#[tokio::test]
async fn a_wrong_password_is_auth_failed_and_never_leaks_the_password() {
    let canary = "canary-7f3a-S3CR3T";
    for system in SYSTEMS {
        let f = system.fresh();
        let server = system.server();
        let p = build(
            system.kind(),
            server.settings(&f.db, server.admin_user, canary),
        )
        .unwrap();
        for result in [
            p.check_connection().await.map(drop),
            p.probe(&[ProbeTarget::schema(&f.schema)]).await.map(drop),
        ] {
            let err = result.expect_err("a wrong password must fail");
            assert_eq!(err.category(), "AuthFailed", "{system:?}: {err}");
            assert!(
                !err.to_string().contains(canary) && !format!("{err:?}").contains(canary),
                "{system:?}: {err:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_refused_connection_is_unreachable_never_absent() {
    // Bound by this test for its whole life and never listened on, so connects are refused
    // (and no other process can take the port meanwhile).
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = held.local_addr().unwrap().port();
    for system in SYSTEMS {
        let p = build(system.kind(), settings("127.0.0.1", port, "x", "u", "p")).unwrap();
        let err = p
            .probe(&[ProbeTarget::schema("public")])
            .await
            .expect_err("refused");
        assert_eq!(err.category(), "Unreachable", "{system:?}: {err}");
    }
    drop(held);
}

#[tokio::test]
async fn a_server_that_accepts_and_never_answers_is_a_timeout_never_absent() {
    // The kernel completes the handshake for the listener's backlog; nothing ever answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    for system in SYSTEMS {
        let p = build(system.kind(), settings("127.0.0.1", port, "x", "u", "p")).unwrap();
        let err = p
            .probe(&[ProbeTarget::schema("x")])
            .await
            .expect_err("nothing answers");
        assert!(
            matches!(err, ProviderError::Timeout(_)),
            "{system:?}: {err}"
        );
    }
    drop(listener);
}

/// A round's observation in many small batches with concurrency gives the same answers as one
/// big probe, looks up only the ids of absent names, and counts every request.
#[tokio::test]
async fn a_batched_observation_matches_single_probes_and_finds_renamed_ids() {
    for system in SYSTEMS {
        let f = system.fresh();
        let ddl: String = (0..60)
            .map(|i| format!("CREATE TABLE {}(id int);", f.qualified(&format!("t{i}"))))
            .collect();
        f.sql(&ddl);
        let mut targets: Vec<ProbeTarget> = (0..64).map(|i| f.table(&format!("t{i}"))).collect();
        targets.push(ProbeTarget::schema(&f.schema));
        targets.sort();
        let truth = f.provider.probe(&targets).await.unwrap();
        let id_of_t5 = f.id_of("t5").await;
        let rename = match system {
            System::Postgres => format!("ALTER TABLE {} RENAME TO renamed;", f.qualified("t5")),
            System::Mariadb => format!(
                "RENAME TABLE {} TO {};",
                f.qualified("t5"),
                f.qualified("renamed")
            ),
        };
        f.sql(&rename);
        let planned: Vec<Target> = targets
            .iter()
            .map(|t| Target {
                target: t.clone(),
                ids: if *t == f.table("t5") {
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
        // Column lists of present targets only: t1's are read (one batch), the renamed t5's not.
        let column_targets = [f.table("t1"), f.table("t5")];
        let seen = observe(&f.provider, &planned, &column_targets, limits, &count)
            .await
            .unwrap();
        for (t, want) in targets.iter().zip(&truth) {
            let got = &seen.by_name[t];
            if *t == f.table("t5") {
                assert_eq!(*got, Probe::Absent, "{system:?}");
            } else {
                assert_eq!(got, want, "{system:?}: {t:?}");
            }
        }
        assert_eq!(seen.by_id.len(), 1, "{system:?}: only absent names' ids");
        assert_eq!(
            seen.by_id[&id_of_t5].as_ref().map(|x| x.target.clone()),
            Some(f.table("renamed")),
            "{system:?}"
        );
        assert_eq!(
            seen.columns.keys().collect::<Vec<_>>(),
            vec![&f.table("t1")],
            "{system:?}"
        );
        assert_eq!(
            requests.into_inner(),
            targets.len().div_ceil(7) + 2,
            "{system:?}: one request per batch, one id lookup, one column batch"
        );
    }
}

/// TLS against each server's private CA (hack/tls; the certificate names `localhost` only):
/// (host, sslMode, CA, expected error category or `None` for a connection).
#[tokio::test]
async fn tls_verifies_the_chain_to_the_catalog_ca_and_the_host_name_only_under_verify_full() {
    use semops::crd::catalog::SslMode::*;
    for system in SYSTEMS {
        let server = system.server();
        let (right, wrong) = (server.ca_pem(), server.other_ca_pem());
        let cases = [
            ("localhost", VerifyFull, Some(&right), None),
            ("localhost", VerifyCa, Some(&right), None),
            ("localhost", VerifyFull, Some(&wrong), Some("TlsFailed")),
            ("localhost", VerifyCa, Some(&wrong), Some("TlsFailed")),
            // Public roots do not know a private CA.
            ("localhost", VerifyFull, None, Some("TlsFailed")),
            // The certificate does not name 127.0.0.1: only verify-full cares.
            ("127.0.0.1", VerifyFull, Some(&right), Some("TlsFailed")),
            ("127.0.0.1", VerifyCa, Some(&right), None),
            ("127.0.0.1", Require, None, None),
        ];
        for (host, mode, ca, want) in cases {
            let mut s = support::db::settings(
                host,
                server.port,
                if matches!(system, System::Postgres) {
                    "postgres"
                } else {
                    "mysql"
                },
                server.admin_user,
                server.admin_password,
            );
            s.ssl_mode = mode;
            s.ca_pem = ca.map(|c| c.as_bytes().to_vec());
            let got = match build(system.kind(), s) {
                Ok(p) => p.check_connection().await,
                Err(e) => Err(e),
            };
            let what = format!(
                "{system:?} {host} {mode:?} ca={}",
                ca.map_or("public", |c| if *c == right { "right" } else { "wrong" })
            );
            match (want, got) {
                (None, Ok(())) => {}
                (Some(reason), Err(e)) => assert_eq!(e.category().as_str(), reason, "{what}: {e}"),
                (want, got) => panic!("{what}: wanted {want:?}, got {got:?}"),
            }
        }
    }
}

/// The server identity (removal only when sure): stable for one server and database, distinct
/// where the registrations could not have been recorded, and naming no host (a pod rename or
/// another address for the same server changes nothing).
#[tokio::test]
async fn the_server_identity_is_stable_per_server_and_names_no_host() {
    for system in SYSTEMS {
        let (a, b) = (system.fresh(), system.fresh());
        let id = a.provider.server_identity().await.unwrap();
        let again = build(system.kind(), system.server().admin(&a.db))
            .unwrap()
            .server_identity()
            .await
            .unwrap();
        assert_eq!(id, again, "{system:?}: a new pool, the same server");
        assert!(
            !id.contains("127.0.0.1") && !id.contains("localhost"),
            "{id}"
        );
        let other = b.provider.server_identity().await.unwrap();
        match system {
            // PostgreSQL registrations live in one database: another one is another catalog.
            System::Postgres => assert_ne!(id, other),
            // MySQL schemas are server-wide: one server, one identity.
            System::Mariadb => assert_eq!(id, other),
        }
        // Native ids name no host either.
        a.sql(&format!("CREATE TABLE {}(id int)", a.qualified("t")));
        let native = a.id_of("t").await;
        assert!(
            !native.contains("127.0.0.1") && !native.contains("localhost"),
            "{native}"
        );
    }
}

/// Names the system cannot hold are judged without a round trip, so one of them never fails a
/// batch of good ones.
#[tokio::test]
async fn names_the_system_cannot_hold_are_invalid_before_any_probe() {
    for system in SYSTEMS {
        let f = system.fresh();
        let cases = [
            ("x".repeat(65), true),
            ("nul\0inside".to_string(), true),
            ("plain_name".to_string(), false),
            ("with space and ünïcode".to_string(), false),
        ];
        for (name, invalid) in cases {
            let t = f.table(&name);
            assert_eq!(
                f.provider.invalid_name(&t).is_some(),
                invalid,
                "{system:?} {name:?}"
            );
            if !invalid {
                assert_eq!(f.provider.probe(&[t]).await.unwrap(), vec![Probe::Absent]);
            }
        }
    }
}

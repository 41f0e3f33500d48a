//! Real PostgreSQL and MariaDB servers for provider tests: one of each per test binary, started
//! by hack/postgres and hack/mariadb (installed from Debian packages when missing) and stopped
//! by their reaper when the binary exits.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use semops::catalog::{ConnectionSettings, Credentials};
use semops::crd::catalog::SslMode;

use super::ROOT;

pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    pub admin_user: &'static str,
    pub admin_password: &'static str,
}

static POSTGRES: OnceLock<Server> = OnceLock::new();
static POSTGRES_FOR_PODS: OnceLock<Server> = OnceLock::new();
static MARIADB: OnceLock<Server> = OnceLock::new();

fn start(
    script: &str,
    name: &str,
    user: &'static str,
    password: &'static str,
    sql: Option<&str>,
    extra: &[&str],
) -> Server {
    let exe = std::env::current_exe().unwrap();
    let dir = PathBuf::from(ROOT).join("target/e2e").join(format!(
        "{}-{}-{name}",
        exe.file_stem().unwrap().to_string_lossy(),
        std::process::id()
    ));
    let out = Command::new(format!("{ROOT}/hack/{script}"))
        .args([
            "up",
            dir.to_str().unwrap(),
            "--owner-pid",
            &std::process::id().to_string(),
        ])
        .args(
            sql.map(|f| ["--sql".to_string(), format!("{ROOT}/{f}")])
                .into_iter()
                .flatten(),
        )
        .args(extra)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "hack/{script} up failed");
    let port = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .lines()
        .last()
        .unwrap()
        .parse()
        .unwrap();
    Server {
        port,
        dir,
        admin_user: user,
        admin_password: password,
    }
}

pub fn postgres() -> &'static Server {
    // Loaded with the demo's HR warehouse so the examples' `hr` Catalog connects.
    POSTGRES.get_or_init(|| {
        start(
            "postgres",
            "pg",
            "postgres",
            "postgres",
            Some("examples/hr.sql"),
            &[],
        )
    })
}

/// A PostgreSQL also listening on the node's address, for catalogs used by Pods (start the
/// node-backed cluster first: the address is its bridge's).
pub fn postgres_for_pods() -> &'static Server {
    POSTGRES_FOR_PODS.get_or_init(|| {
        start(
            "postgres",
            "pgpods",
            "postgres",
            "postgres",
            Some("examples/hr.sql"),
            &["--listen", super::NODE_IP],
        )
    })
}

pub fn mariadb() -> &'static Server {
    MARIADB.get_or_init(|| start("mariadb", "mariadb", "root", "root", None, &[]))
}

impl Server {
    /// The private CA (PEM) that signed this server's certificate (for `localhost`).
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir.join("tls/ca.crt")).unwrap()
    }

    /// A CA that signed nothing this server presents.
    pub fn other_ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir.join("tls/other-ca.crt")).unwrap()
    }

    /// Settings for `user`/`password` on `database`, with short timeouts for failure tests.
    pub fn settings(&self, database: &str, user: &str, password: &str) -> ConnectionSettings {
        settings("127.0.0.1", self.port, database, user, password)
    }

    pub fn admin(&self, database: &str) -> ConnectionSettings {
        self.settings(database, self.admin_user, self.admin_password)
    }

    /// Runs SQL as the administrator through the command-line client.
    pub fn psql(&self, database: &str, sql: &str) {
        let out = Command::new("psql")
            .env("PGPASSWORD", self.admin_password)
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                self.admin_user,
                "-d",
                database,
                "-v",
                "ON_ERROR_STOP=1",
                "-q",
                "-c",
                sql,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stops (`stop`) or restarts (`start`) a PostgreSQL server started by hack/postgres.
    pub fn pg_ctl(&self, action: &str) {
        let out = Command::new(format!("{ROOT}/hack/postgres"))
            .args([action, self.dir.to_str().unwrap()])
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(out.status.success(), "hack/postgres {action} failed");
    }

    pub fn mysql(&self, sql: &str) {
        let out = Command::new("mariadb")
            .args([
                "--no-defaults",
                "-h",
                "127.0.0.1",
                "-P",
                &self.port.to_string(),
                &format!("-u{}", self.admin_user),
                &format!("-p{}", self.admin_password),
                "-e",
                sql,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mariadb {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

pub fn settings(
    host: &str,
    port: u16,
    database: &str,
    user: &str,
    password: &str,
) -> ConnectionSettings {
    ConnectionSettings {
        host: host.into(),
        port,
        bootstrap: vec![],
        sasl: None,
        database: Some(database.into()),
        iceberg: None,
        ssl_mode: SslMode::Disable,
        ca_pem: None,
        client_certificate: None,
        credentials: Credentials::new(user, password),
        connect_timeout: Duration::from_secs(2),
        statement_timeout: Duration::from_secs(2),
        max_connections: 2,
        addresses: Default::default(),
    }
}

/// A unique, SQL-safe suffix for objects of one test.
pub fn unique() -> String {
    uuid::Uuid::now_v7().simple().to_string()[20..].to_string()
}

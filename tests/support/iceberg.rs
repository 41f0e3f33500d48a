//! A real Apache Iceberg REST catalog per test binary (hack/iceberg: Iceberg 1.11's REST
//! adapter and servlet from Maven Central, on 127.0.0.1), secured the way production catalogs
//! are: OAuth2 client credentials with short-lived tokens, a static bearer token, a forbidden
//! table and an outage switch. Namespaces, tables and views are made, renamed and dropped
//! through the REST API itself (curl, as the administrator's bearer token), never through
//! semops' client.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

use super::ROOT;

pub struct Iceberg {
    pub dir: PathBuf,
    /// `http://127.0.0.1:port`.
    pub uri: String,
    /// `https://127.0.0.1:port`, certificate from [`Iceberg::ca_pem`].
    pub tls_uri: String,
}

/// The OAuth2 client semops is given (tokens live [`TOKEN_TTL_SECONDS`]).
pub const CLIENT: (&str, &str) = ("semops", "semops-client-secret");
/// A static bearer token (also the administrator's, for setup).
pub const ADMIN_TOKEN: &str = "admin-bearer-token";
pub const TOKEN_TTL_SECONDS: u64 = 3;
/// The namespace and table the server answers 403 for (a grant the client lacks).
pub const FORBIDDEN: (&str, &str) = ("guarded", "secret");

static SERVER: OnceLock<Iceberg> = OnceLock::new();

pub fn iceberg() -> &'static Iceberg {
    SERVER.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let dir = PathBuf::from(ROOT).join("target/e2e").join(format!(
            "{}-{}-iceberg",
            exe.file_stem().unwrap().to_string_lossy(),
            std::process::id()
        ));
        let out = Command::new(format!("{ROOT}/hack/iceberg"))
            .args(["up", dir.to_str().unwrap(), "--owner-pid"])
            .arg(std::process::id().to_string())
            .env("ICEBERG_CLIENTS", format!("{}:{}", CLIENT.0, CLIENT.1))
            .env("ICEBERG_TOKEN_TTL", TOKEN_TTL_SECONDS.to_string())
            .env("ICEBERG_STATIC_TOKEN", ADMIN_TOKEN)
            .env(
                "ICEBERG_FORBIDDEN",
                format!("{}.{}", FORBIDDEN.0, FORBIDDEN.1),
            )
            .env("ICEBERG_FAIL_FILE", dir.join("fail"))
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(out.status.success(), "hack/iceberg up failed");
        let env = std::fs::read_to_string(dir.join("env")).unwrap();
        let var = |k: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap_or_else(|| panic!("{k} missing from hack/iceberg's env"))
                .to_string()
        };
        Iceberg {
            uri: var("ICEBERG_URI"),
            tls_uri: var("ICEBERG_TLS_URI"),
            dir,
        }
    })
}

/// A simple table schema: `id long`, `amount double`, `customer struct<name string>`.
pub fn table_schema() -> Value {
    json!({"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "required": true, "type": "long"},
        {"id": 2, "name": "amount", "required": false, "type": "double"},
        {"id": 3, "name": "customer", "required": false, "type": {"type": "struct", "fields": [
            {"id": 4, "name": "name", "required": false, "type": "string"}]}}
    ]})
}

impl Iceberg {
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir.join("tls/ca.crt")).unwrap()
    }
    pub fn other_ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir.join("tls/other-ca.crt")).unwrap()
    }

    /// `method path` with a JSON body as the administrator; the status and the JSON answer.
    pub fn admin(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut c = Command::new("curl");
        c.args([
            "-sS",
            "--max-time",
            "20",
            "-X",
            method,
            "-w",
            "\n%{http_code}",
        ])
        .args(["-H", &format!("Authorization: Bearer {ADMIN_TOKEN}")])
        .args(["-H", "Content-Type: application/json"]);
        if let Some(b) = body {
            c.args(["-d", &b.to_string()]);
        }
        let out = c.arg(format!("{}{path}", self.uri)).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (
            code.trim().parse().unwrap_or(0),
            serde_json::from_str(body).unwrap_or(Value::Null),
        )
    }

    fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.admin(method, path, body);
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {v}"
        );
        v
    }

    /// Namespace levels joined the way this server wants them in a path (`%2E`).
    fn ns(levels: &str) -> String {
        levels.replace('.', "%2E")
    }

    pub fn create_namespace(&self, levels: &str) {
        let parts: Vec<&str> = levels.split('.').collect();
        let (status, v) = self.admin("POST", "/v1/namespaces", Some(json!({"namespace": parts})));
        assert!(
            (200..300).contains(&status) || status == 409,
            "create namespace {levels}: {status} {v}"
        );
    }

    /// Creates a table; its `table-uuid`.
    pub fn create_table(&self, ns: &str, name: &str) -> String {
        let v = self.ok(
            "POST",
            &format!("/v1/namespaces/{}/tables", Self::ns(ns)),
            Some(json!({"name": name, "schema": table_schema()})),
        );
        v["metadata"]["table-uuid"].as_str().unwrap().to_string()
    }

    /// Creates a view over `sql`; its `view-uuid`.
    pub fn create_view(&self, ns: &str, name: &str) -> String {
        let parts: Vec<&str> = ns.split('.').collect();
        let v = self.ok(
            "POST",
            &format!("/v1/namespaces/{}/views", Self::ns(ns)),
            Some(json!({
                "name": name,
                "schema": {"type": "struct", "schema-id": 0, "fields": [
                    {"id": 1, "name": "total", "required": false, "type": "double"}]},
                "view-version": {
                    "version-id": 1, "timestamp-ms": 0, "schema-id": 0,
                    "summary": {"engine-name": "test"},
                    "default-namespace": parts,
                    "representations": [{"type": "sql", "sql": "SELECT sum(amount) AS total FROM t", "dialect": "spark"}]
                },
                "properties": {}
            })),
        );
        v["metadata"]["view-uuid"].as_str().unwrap().to_string()
    }

    pub fn rename_table(&self, ns: &str, from: &str, to: &str) {
        let parts: Vec<&str> = ns.split('.').collect();
        self.ok(
            "POST",
            "/v1/tables/rename",
            Some(json!({"source": {"namespace": parts, "name": from}, "destination": {"namespace": parts, "name": to}})),
        );
    }

    pub fn drop_table(&self, ns: &str, name: &str) {
        self.ok(
            "DELETE",
            &format!(
                "/v1/namespaces/{}/tables/{name}?purgeRequested=true",
                Self::ns(ns)
            ),
            None,
        );
    }

    pub fn drop_view(&self, ns: &str, name: &str) {
        self.ok(
            "DELETE",
            &format!("/v1/namespaces/{}/views/{name}", Self::ns(ns)),
            None,
        );
    }

    /// While on, every catalog request answers 503.
    pub fn outage(&self, on: bool) {
        let f = self.dir.join("fail");
        if on {
            std::fs::write(f, "").unwrap();
        } else {
            let _ = std::fs::remove_file(f);
        }
    }

    /// How many OAuth2 tokens the server has issued.
    pub fn tokens_issued(&self) -> u64 {
        self.counter("tokens-issued")
    }

    /// How many requests the server refused because their token had expired.
    pub fn expired_refusals(&self) -> u64 {
        self.counter("expired-refusals")
    }

    fn counter(&self, name: &str) -> u64 {
        let out = Command::new("curl")
            .args(["-sS", &format!("{}/test/{name}", self.uri)])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }
}

//! A world for stale-registration tests: a namespace, its own PostgreSQL database and login role
//! (so privilege changes touch no other test), a Catalog `wh` on it, a ReconcilePolicy `p`, and
//! an operator. Rounds are started by annotation tokens, so every round is deterministic.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

use super::db::{postgres, unique};
use super::{Namespace, Operator, env, eventually};

pub struct World {
    pub ns: Namespace,
    pub db: String,
    pub role: String,
    pub op: Operator,
    rounds: std::cell::Cell<u32>,
}

pub const PASSWORD: &str = "reader-pw";

impl World {
    /// `setup` runs as the administrator inside the new database; `registrations` is the flow
    /// YAML list of the Catalog; `policy` the ReconcilePolicy spec (flow YAML, without braces).
    pub fn new(
        prefix: &str,
        setup: &str,
        registrations: &str,
        policy: &str,
        args: &[&str],
    ) -> World {
        let ns = env().namespace(prefix);
        let u = unique();
        let (db, role) = (format!("d{u}"), format!("r{u}"));
        let pg = postgres();
        pg.psql(
            "postgres",
            &format!("CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'"),
        );
        pg.psql("postgres", &format!("CREATE DATABASE {db}"));
        if !setup.is_empty() {
            pg.psql(&db, setup);
        }
        let objects = format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: wh-reader, namespace: {n}, labels: {{semops.io/catalog-credentials: \"true\"}}, annotations: {{semops.io/allowed-hosts: \"localhost,127.0.0.0/8,::1\"}}}}\nstringData: {{username: {role}, password: {PASSWORD}}}\n---\n{}",
            catalog_yaml(&ns.name, "wh", &db, pg.port, registrations, ""),
            n = ns.name,
        );
        Self::start(ns, db, role, &objects, policy, args)
    }

    /// A world on another system: `objects` (YAML, with `namespace: NS` for the namespace)
    /// holds its Secrets and Catalogs; no database is made.
    pub fn with_objects(prefix: &str, objects: &str, policy: &str, args: &[&str]) -> World {
        let ns = env().namespace(prefix);
        let objects = objects.replace("namespace: NS", &format!("namespace: {}", ns.name));
        Self::start(ns, String::new(), String::new(), &objects, policy, args)
    }

    fn start(
        ns: Namespace,
        db: String,
        role: String,
        objects: &str,
        policy: &str,
        args: &[&str],
    ) -> World {
        let env = env();
        env.apply_ok(&format!(
            "apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: p, namespace: {n}}}\nspec: {{{policy}}}\n---\n{objects}",
            n = ns.name,
        ));
        let mut all = vec!["--api-auth", "none"];
        all.extend_from_slice(args);
        let op = Operator::start(env, &env.kubeconfig, Some(&ns.name), &ns.name, &all);
        World {
            ns,
            db,
            role,
            op,
            rounds: std::cell::Cell::new(0),
        }
    }

    pub fn ns(&self) -> &str {
        &self.ns.name
    }

    pub fn sql(&self, sql: &str) {
        postgres().psql(&self.db, sql);
    }

    pub fn catalog(&self, name: &str) -> Value {
        let out = env().kubectl_ok(&["get", "catalog", name, "-n", self.ns(), "-o", "json"]);
        serde_json::from_str(&out).unwrap()
    }

    /// Asks for a round of `name` by annotation and waits until its status echoes the token and
    /// the round counted itself (after its Events: everything it does is done).
    pub fn check(&self, name: &str) -> Value {
        let label = format!("catalog=\"{name}\"");
        let counted = self.op.metric("semops_check_rounds_total", &[&label]);
        let n = self.rounds.get() + 1;
        self.rounds.set(n);
        let token = format!("t{n}");
        env().kubectl_ok(&[
            "annotate",
            "catalog",
            name,
            "-n",
            self.ns(),
            &format!("semops.io/check-requested={token}"),
            "--overwrite",
        ]);
        let want = format!("annotation:{token}");
        let status = eventually(
            Duration::from_secs(60),
            &format!("round {want} of {name}"),
            || {
                let c = self.catalog(name);
                (c["status"]["lastCheck"]["trigger"] == want.as_str())
                    .then_some(c["status"].clone())
            },
        );
        eventually(Duration::from_secs(60), "the round counted", || {
            (self.op.metric("semops_check_rounds_total", &[&label]) > counted).then_some(())
        });
        status
    }

    /// (name, state) of each registration in status.
    pub fn states(status: &Value) -> Vec<(String, String)> {
        status["registrations"].as_array().map_or(vec![], |a| {
            a.iter()
                .map(|r| {
                    (
                        r["name"].as_str().unwrap().to_string(),
                        r["state"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
    }

    /// Events about Catalog `name`: (reason, reporting controller, note).
    pub fn events(&self, name: &str) -> Vec<(String, String, String)> {
        let out = env().kubectl_ok(&["get", "events.events.k8s.io", "-n", self.ns(), "-o", "json"]);
        let v: Value = serde_json::from_str(&out).unwrap();
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["regarding"]["name"] == name && e["regarding"]["kind"] == "Catalog")
            .map(|e| {
                (
                    e["reason"].as_str().unwrap_or("").to_string(),
                    e["reportingController"].as_str().unwrap_or("").to_string(),
                    e["note"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    /// Points Catalog `wh` at another port (outage drills: refused, blackholed).
    pub fn set_port(&self, port: u16) {
        env().kubectl_ok(&[
            "patch",
            "catalog",
            "wh",
            "-n",
            self.ns(),
            "--type=merge",
            "-p",
            &format!(r#"{{"spec":{{"connection":{{"port":{port}}}}}}}"#),
        ]);
    }

    /// Changes the password in Catalog `wh`'s Secret.
    pub fn set_password(&self, password: &str) {
        env().kubectl_ok(&[
            "patch",
            "secret",
            "wh-reader",
            "-n",
            self.ns(),
            "--type=merge",
            "-p",
            &format!(r#"{{"stringData":{{"password":"{password}"}}}}"#),
        ]);
    }

    /// Moves the start of Catalog `name`'s AutoRemove window `by` into the past (as if that much
    /// time had passed since its first removal).
    pub fn age_removal_window(&self, name: &str, by: Duration) {
        let c = self.catalog(name);
        let started = c["status"]["removalWindow"]["startedAt"].as_str().unwrap();
        let at: k8s_openapi::jiff::Timestamp = started.parse().unwrap();
        let earlier = at - k8s_openapi::jiff::SignedDuration::try_from(by).unwrap();
        env().kubectl_ok(&[
            "patch",
            "catalog",
            name,
            "-n",
            self.ns(),
            "--subresource=status",
            "--type=merge",
            "-p",
            &format!(
                r#"{{"status":{{"removalWindow":{{"startedAt":"{}"}}}}}}"#,
                earlier.strftime("%Y-%m-%dT%H:%M:%SZ")
            ),
        ]);
    }

    pub fn removed_metric(&self) -> f64 {
        self.op.metric("semops_registrations_removed_total", &[])
    }

    /// Calls the read API of this world's operator.
    pub fn api(&self, method: &str, path: &str, body: Option<&str>) -> (u16, Value) {
        let (code, text) = request(self.op.api_port, method, path, None, body);
        (code, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

/// The YAML of a Catalog on database `db`.
pub fn catalog_yaml(
    ns: &str,
    name: &str,
    db: &str,
    port: u16,
    registrations: &str,
    extra: &str,
) -> String {
    format!(
        "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: {name}, namespace: {ns}{extra}}}\nspec:\n  provider: postgresql\n  connection: {{host: 127.0.0.1, port: {port}, database: {db}, sslMode: disable, credentialsSecretRef: {{name: wh-reader}}}}\n  registrations: {registrations}\n"
    )
}

/// One HTTP/1.0 request; returns (status, body).
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let body = body.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: localhost\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    let (head, body) = buf.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

/// A condition's (status, reason) in a status object.
/// `(state, id)` of the registration `name` in a Catalog status.
pub fn state_of(status: &Value, name: &str) -> (String, String) {
    let r = status["registrations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no registration {name} in {status}"));
    (
        r["state"].as_str().unwrap_or("").into(),
        r["id"].as_str().unwrap_or("").into(),
    )
}

pub fn condition(status: &Value, type_: &str) -> (String, String) {
    let c = status["conditions"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or(Value::Null);
    (
        c["status"].as_str().unwrap_or("").into(),
        c["reason"].as_str().unwrap_or("").into(),
    )
}

/// One finished check round as the operator logged it: catalog, start and end.
#[derive(Clone, Debug)]
pub struct LoggedRound {
    pub catalog: String,
    pub start: k8s_openapi::jiff::Timestamp,
    pub end: k8s_openapi::jiff::Timestamp,
}

/// The rounds an operator logged (its one summary line per committed round).
pub fn logged_rounds(op: &Operator) -> Vec<LoggedRound> {
    op.logs()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"] == "check round")
        .filter_map(|v| {
            let end: k8s_openapi::jiff::Timestamp = v["timestamp"].as_str()?.parse().ok()?;
            let took = k8s_openapi::jiff::SignedDuration::from_millis(v["took_ms"].as_i64()?);
            Some(LoggedRound {
                catalog: v["span"]["catalog"].as_str()?.to_string(),
                start: end.checked_sub(took).ok()?,
                end,
            })
        })
        .collect()
}

/// The most rounds that ran at one instant.
pub fn most_at_once(rounds: &[LoggedRound]) -> usize {
    rounds
        .iter()
        .map(|r| {
            rounds
                .iter()
                .filter(|o| o.start <= r.start && r.start < o.end)
                .count()
        })
        .max()
        .unwrap_or(0)
}

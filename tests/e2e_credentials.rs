//! No Secret can be read through a Catalog, and no password leaves in clear (issue 16): the
//! exfiltration attempts a Catalog author could make, against the real operator, a real
//! PostgreSQL and a hostile listener that speaks the PostgreSQL protocol. The canary value must
//! appear in no status, Event, log line or read-API body.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::checks::request;
use support::db::postgres;
use support::{Operator, env, jsonpath, stays, wait_ready};

const CANARY: &str = "SUPERSECRETTOKEN123";

fn secret(ns: &str, name: &str, opt_in: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}{opt_in}}}\nstringData: {{token: {CANARY}, ca.crt: {CANARY}-not-a-cert, username: postgres, password: {CANARY}}}\n"
    )
}

fn catalog(ns: &str, name: &str, port: u16, connection: &str) -> String {
    format!(
        "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  provider: postgresql\n  connection: {{host: 127.0.0.1, port: {port}, database: postgres{connection}}}\n"
    )
}

/// What one hostile server asks a client for after the startup message.
#[derive(Clone, Copy)]
enum Ask {
    Cleartext,
    Md5,
}

/// A PostgreSQL-protocol listener that declines TLS and asks for the password; every byte a
/// client sends after that question is kept.
fn hostile_listener(ask: Ask) -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answers = Arc::new(Mutex::new(Vec::new()));
    let kept = answers.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let kept = kept.clone();
            std::thread::spawn(move || {
                c.set_read_timeout(Some(Duration::from_secs(2))).ok();
                fn message(c: &mut std::net::TcpStream) -> Option<Vec<u8>> {
                    let mut len = [0u8; 4];
                    c.read_exact(&mut len).ok()?;
                    let mut body = vec![0u8; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
                    c.read_exact(&mut body).ok()?;
                    Some(body)
                }
                let Some(first) = message(&mut c) else { return };
                // SSLRequest (80877103): "N", then the real startup message follows.
                if first == [4, 210, 22, 47] {
                    c.write_all(b"N").ok();
                    if message(&mut c).is_none() {
                        return;
                    }
                }
                let question: Vec<u8> = match ask {
                    Ask::Cleartext => [b'R', 0, 0, 0, 8, 0, 0, 0, 3].to_vec(),
                    Ask::Md5 => [b'R', 0, 0, 0, 12, 0, 0, 0, 5, 1, 2, 3, 4].to_vec(),
                };
                c.write_all(&question).ok();
                let mut rest = Vec::new();
                let _ = c.read_to_end(&mut rest);
                kept.lock().unwrap().extend(rest);
            });
        }
    });
    (port, answers)
}

fn reachable(ns: &str, name: &str) -> (String, String) {
    let get = |f: &str| {
        jsonpath(
            env(),
            ns,
            &format!("cat/{name}"),
            &format!("{{.status.conditions[?(@.type==\"Reachable\")].{f}}}"),
        )
    };
    (get("reason"), get("message"))
}

#[test]
fn no_secret_value_can_be_read_through_a_catalog_or_sent_in_clear() {
    let env = env();
    let pg = postgres();
    let ns = env.namespace("exfil");
    let ns = ns.name.as_str();
    let op = Operator::start(env, &env.kubeconfig, Some(ns), ns, &["--api-auth", "none"]);
    let (cleartext_port, cleartext_seen) = hostile_listener(Ask::Cleartext);
    let (md5_port, md5_seen) = hostile_listener(Ask::Md5);
    let opted_in = ", labels: {semops.io/catalog-credentials: \"true\"}";
    env.apply_ok(&[
        // A Secret that never opted in, and one that opted in for another Catalog only.
        secret(ns, "victim", ""),
        secret(ns, "victim-other", &format!("{opted_in}, annotations: {{semops.io/allowed-catalogs: \"someone-else\"}}")),
        // An opted-in Secret whose keys a Catalog author recombines, allowed to go to this
        // machine's servers (the hostile listeners are there too).
        secret(ns, "opted", &format!("{opted_in}, annotations: {{semops.io/allowed-hosts: \"127.0.0.0/8\"}}")),
        // Other key as username, other key as password, against the real server.
        catalog(ns, "user-from-token", pg.port, ", sslMode: disable, credentialsSecretRef: {name: victim, usernameKey: token, passwordKey: ca.crt}"),
        catalog(ns, "other-catalogs-secret", pg.port, ", sslMode: disable, credentialsSecretRef: {name: victim-other, usernameKey: token}"),
        catalog(ns, "opted-token-as-user", pg.port, ", sslMode: disable, credentialsSecretRef: {name: opted, usernameKey: token, passwordKey: ca.crt}"),
        // A CA bundle from a Secret that never opted in.
        catalog(ns, "ca-from-victim", pg.port, ", credentialsSecretRef: {name: opted}, tls: {caSecretRef: {name: victim, key: token}}"),
        // A CA bundle that is not one (opted in): refused without echoing it.
        catalog(ns, "ca-not-pem", pg.port, ", credentialsSecretRef: {name: opted}, tls: {caSecretRef: {name: opted, key: token}}"),
        // The attacker's own server, asking for the password in clear / as MD5.
        catalog(ns, "hostile-default", cleartext_port, ", credentialsSecretRef: {name: opted}"),
        catalog(ns, "hostile-prefer", cleartext_port, ", sslMode: prefer, credentialsSecretRef: {name: opted}"),
        catalog(ns, "hostile-md5", md5_port, ", sslMode: prefer, credentialsSecretRef: {name: opted}"),
    ]
    .join("---\n"));

    let expected = [
        ("user-from-token", "CredentialsInvalid"),
        ("other-catalogs-secret", "CredentialsInvalid"),
        ("opted-token-as-user", "AuthFailed"),
        ("ca-from-victim", "CredentialsInvalid"),
        ("ca-not-pem", "Misconfigured"),
        // verify-full (the default) needs TLS; the listener has none: nothing is sent.
        ("hostile-default", "TlsFailed"),
        ("hostile-prefer", "InsecureAuthRefused"),
        ("hostile-md5", "InsecureAuthRefused"),
    ];
    for (name, reason) in expected {
        wait_ready(env, ns, &format!("cat/{name}"), "False", reason);
    }
    // The refusal of a Secret is one message, whatever the Secret is (absent, not opted in,
    // opted in elsewhere): it tells the author nothing they did not write.
    let (_, refused) = reachable(ns, "other-catalogs-secret");
    assert!(
        !refused.contains("someone-else") && refused.contains("semops.io/catalog-credentials=true"),
        "{refused}"
    );
    let (_, asked) = reachable(ns, "hostile-prefer");
    assert!(
        asked.contains("the server asked for the password in clear"),
        "{asked}"
    );

    // The hostile servers never received a password, a hash, or anything at all after asking,
    // and nothing arrives late either.
    stays(
        Duration::from_secs(1),
        "the hostile listeners receive nothing",
        || cleartext_seen.lock().unwrap().is_empty() && md5_seen.lock().unwrap().is_empty(),
    );
    for (what, seen) in [("cleartext", &cleartext_seen), ("md5", &md5_seen)] {
        let seen = seen.lock().unwrap();
        assert!(
            seen.is_empty(),
            "the {what} listener received {} bytes after asking: {:?}",
            seen.len(),
            String::from_utf8_lossy(&seen)
        );
    }

    // The canary is nowhere: status, Events, logs, read-API bodies.
    let mut places = vec![
        (
            "status",
            env.kubectl_ok(&["get", "catalogs", "-n", ns, "-o", "yaml"]),
        ),
        (
            "events",
            env.kubectl_ok(&["get", "events.events.k8s.io", "-n", ns, "-o", "yaml"]),
        ),
        ("operator logs", op.logs()),
        ("metrics", op.http_get("/metrics").unwrap_or_default()),
    ];
    for (name, _) in expected {
        for (method, path, body) in [
            (
                "GET",
                format!("/api/metalakes/{ns}/catalogs/{name}/registrations"),
                None,
            ),
            (
                "GET",
                format!("/api/metalakes/{ns}/catalogs/{name}/stale-entities"),
                None,
            ),
            (
                "POST",
                format!("/api/metalakes/{ns}/catalogs/{name}/reconcile"),
                Some(r#"{"dryRun": true}"#),
            ),
        ] {
            let (code, text) = request(op.api_port, method, &path, None, body);
            assert_ne!(code, 401, "{path}");
            places.push(("API body", text));
        }
    }
    for (what, text) in places {
        assert!(
            !text.contains(CANARY),
            "the canary leaked into {what}: {text}"
        );
    }
}

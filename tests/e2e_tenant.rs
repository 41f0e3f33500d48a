//! A hostile tenant, as docs/security.md describes one: may create and edit Catalogs in its own
//! namespace, may not read Secrets. Against the real API server, PostgreSQL, MariaDB, Kafka and
//! the Iceberg REST catalog, with a listener this test runs as the tenant's server:
//!
//! - a Catalog that may use a Secret, pointed at the listener (every provider, the Secret's
//!   password as user name, bearer token, SASL password, OAuth2 client secret), is
//!   `CredentialsNotForHost` and the listener receives nothing at all;
//! - a Secret without `semops.io/allowed-hosts`, or one naming other hosts, sends nothing;
//! - a Kafka bootstrap list mixing an allowed broker with the listener is refused whole;
//! - an `https://` Iceberg uri with an `http://` token endpoint is refused even where the Secret
//!   allows the endpoint;
//! - an 80-character Secret value used as a user name against the real PostgreSQL and MariaDB
//!   (which echo 63 and 32 characters of it) leaves no 8-character window of any Secret value in
//!   status or Events;
//! - and a Catalog whose Secret names its real server connects (the checks are not a wall);
//! - a name that rebinds (a DNS server this test runs answers the real server's address and a
//!   listener's in turn) is connected to at the checked address only.

mod support;

use std::io::Read;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::db::{mariadb, postgres};
use support::iceberg::{CLIENT, iceberg};
use support::kafka::kafka;
use support::{Operator, env, jsonpath, wait_ready};

/// Secret values long enough that PostgreSQL and MySQL truncate what they echo.
const PASSWORD: &str =
    "pw-A7f3Kq9Zx2Lm8Rt4Vb6Nc1Yh5Jd0Gs3Ae7Uq2Wi9Oo4Ek6Tr1Ly8Mn5Bv3Cx7Zs2Dq9Fw4Hp6Jk0Lm";
const TOKEN: &str =
    "tk-Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8L9z0X1c2V3b4N5m6Q7w8E9r0T1y2U3i4O5p6A7s8D9f0";
const LONG_USER: &str =
    "us-Z9x8C7v6B5n4M3a2S1d0F9g8H7j6K5l4Q3w2E1r0T9y8U7i6O5p4A3s2D1f0G9h8J7k6L5z4X3c2V1b";

/// A loopback listener that records every byte any connection sends (it never answers), and
/// how many connections it accepted.
struct Listener {
    port: u16,
    connections: Arc<Mutex<usize>>,
    bytes: Arc<Mutex<Vec<u8>>>,
}

fn listener() -> Listener {
    listener_at("127.0.0.1:0")
}

fn listener_at(addr: &str) -> Listener {
    let l = TcpListener::bind(addr).unwrap();
    let port = l.local_addr().unwrap().port();
    let connections: Arc<Mutex<usize>> = Arc::default();
    let bytes: Arc<Mutex<Vec<u8>>> = Arc::default();
    let (c2, b2) = (connections.clone(), bytes.clone());
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            *c2.lock().unwrap() += 1;
            let b = b2.clone();
            std::thread::spawn(move || {
                c.set_read_timeout(Some(Duration::from_secs(5))).ok();
                let mut buf = [0u8; 4096];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    b.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
        }
    });
    Listener {
        port,
        connections,
        bytes,
    }
}

fn secret(ns: &str, name: &str, annotations: &str, data: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}, labels: {{semops.io/catalog-credentials: \"true\"}}, annotations: {{{annotations}}}}}\nstringData: {{{data}}}\n"
    )
}

fn catalog(ns: &str, name: &str, provider: &str, connection: &str) -> String {
    format!(
        "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  provider: {provider}\n  connection: {{{connection}}}\n"
    )
}

/// Every 8-character window of `value`.
fn windows(value: &str) -> Vec<&str> {
    (0..=value.len() - 8).map(|i| &value[i..i + 8]).collect()
}

#[test]
fn a_catalog_author_cannot_send_a_secret_anywhere_its_owner_did_not_name() {
    let env = env();
    let (pg, my, broker, lake) = (postgres(), mariadb(), kafka(), iceberg());
    let ns = env.namespace("tenant");
    let ns = ns.name.as_str();
    let _op = Operator::start(env, &env.kubeconfig, Some(ns), ns, &["--api-auth", "none"]);
    let thief = listener();
    let l = thief.port;
    let lake_port = lake.tls_uri.rsplit(':').next().unwrap().to_string();
    let kafka_port = broker
        .sasl_plaintext
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();

    // The victim's Secret: opted in for the Catalogs below, its values allowed only to the real
    // servers. Its owner named the Catalogs; a tenant who may edit them re-points them.
    let real = format!(
        "127.0.0.1:{}, 127.0.0.1:{}, 127.0.0.1:{kafka_port}, 127.0.0.1:{lake_port}",
        pg.port, my.port
    );
    let objects = [
        secret(
            ns,
            "victim",
            &format!("semops.io/allowed-hosts: \"{real}\""),
            &format!("username: postgres, password: {PASSWORD}, token: {TOKEN}"),
        ),
        // The same values, with no annotation and with another host's.
        secret(
            ns,
            "unannotated",
            "",
            &format!("username: postgres, password: {PASSWORD}"),
        ),
        secret(
            ns,
            "elsewhere",
            "semops.io/allowed-hosts: \"pg.other.svc:5432, 10.20.0.0/16\"",
            &format!("username: postgres, password: {PASSWORD}"),
        ),
        // A Secret whose owner allowed this machine (the listener too): the transport rules
        // still hold.
        secret(
            ns,
            "lake-open",
            "semops.io/allowed-hosts: \"127.0.0.0/8\"",
            &format!("username: {}, password: {}", CLIENT.0, CLIENT.1),
        ),
        // The real servers' own credentials, and an 80-character user name for the echo test.
        secret(
            ns,
            "honest",
            &format!("semops.io/allowed-hosts: \"127.0.0.1:{}\"", pg.port),
            &format!(
                "username: {}, password: {}",
                pg.admin_user, pg.admin_password
            ),
        ),
        secret(
            ns,
            "long-user",
            &format!("semops.io/allowed-hosts: \"{real}\""),
            &format!("username: {LONG_USER}, password: {PASSWORD}"),
        ),
        // Attack 1: the Secret's password as a user name, at the tenant's listener, per provider.
        catalog(
            ns,
            "thief-pg",
            "postgresql",
            &format!(
                "host: 127.0.0.1, port: {l}, database: postgres, sslMode: disable, credentialsSecretRef: {{name: victim, usernameKey: password}}"
            ),
        ),
        catalog(
            ns,
            "thief-mysql",
            "mysql",
            &format!(
                "host: 127.0.0.1, port: {l}, sslMode: disable, credentialsSecretRef: {{name: victim, usernameKey: password}}"
            ),
        ),
        catalog(
            ns,
            "thief-kafka",
            "kafka",
            &format!(
                "bootstrapServers: [\"127.0.0.1:{l}\"], sasl: {{mechanism: PLAIN}}, sslMode: disable, credentialsSecretRef: {{name: victim, usernameKey: token}}"
            ),
        ),
        catalog(
            ns,
            "thief-iceberg",
            "iceberg-rest",
            &format!(
                "uri: \"http://127.0.0.1:{l}\", sslMode: disable, credentialsSecretRef: {{name: victim, passwordKey: token}}"
            ),
        ),
        // The real catalog, its token endpoint at the listener.
        catalog(
            ns,
            "thief-token",
            "iceberg-rest",
            &format!(
                "uri: \"{}\", oauth2: {{tokenEndpoint: \"https://127.0.0.1:{l}/token\"}}, sslMode: require, credentialsSecretRef: {{name: victim}}",
                lake.tls_uri
            ),
        ),
        // An allowed broker first, the listener second: every bootstrap server is checked.
        catalog(
            ns,
            "thief-bootstrap",
            "kafka",
            &format!(
                "bootstrapServers: [\"{}\", \"127.0.0.1:{l}\"], sasl: {{mechanism: PLAIN}}, sslMode: disable, credentialsSecretRef: {{name: victim}}",
                broker.sasl_plaintext
            ),
        ),
        // Secrets that name no host, or another host, send nothing even to the real server.
        catalog(
            ns,
            "unannotated-pg",
            "postgresql",
            &format!(
                "host: 127.0.0.1, port: {}, database: postgres, sslMode: disable, credentialsSecretRef: {{name: unannotated}}",
                pg.port
            ),
        ),
        catalog(
            ns,
            "elsewhere-pg",
            "postgresql",
            &format!(
                "host: 127.0.0.1, port: {}, database: postgres, sslMode: disable, credentialsSecretRef: {{name: elsewhere}}",
                pg.port
            ),
        ),
        // Attack 3: https catalog, http token endpoint, the Secret allowing both.
        catalog(
            ns,
            "clear-token",
            "iceberg-rest",
            &format!(
                "uri: \"{}\", oauth2: {{tokenEndpoint: \"http://127.0.0.1:{l}/token\"}}, sslMode: require, credentialsSecretRef: {{name: lake-open}}",
                lake.tls_uri
            ),
        ),
        // Attack 2: an 80-character value as the user name against the real servers.
        catalog(
            ns,
            "echo-pg",
            "postgresql",
            &format!(
                "host: 127.0.0.1, port: {}, database: postgres, sslMode: disable, credentialsSecretRef: {{name: long-user}}",
                pg.port
            ),
        ),
        catalog(
            ns,
            "echo-mysql",
            "mysql",
            &format!(
                "host: 127.0.0.1, port: {}, sslMode: disable, credentialsSecretRef: {{name: long-user}}",
                my.port
            ),
        ),
        // The control: allowed, real, connected.
        catalog(
            ns,
            "honest-pg",
            "postgresql",
            &format!(
                "host: 127.0.0.1, port: {}, database: postgres, sslMode: disable, credentialsSecretRef: {{name: honest}}",
                pg.port
            ),
        ),
    ];
    env.apply_ok(&objects.join("---\n"));

    let reachable = |name: &str| -> (String, String) {
        let get = |f: &str| {
            jsonpath(
                env,
                ns,
                &format!("cat/{name}"),
                &format!("{{.status.conditions[?(@.type==\"Reachable\")].{f}}}"),
            )
        };
        (get("reason"), get("message"))
    };
    for (name, status, reason) in [
        // sslMode: disable, written: connected, and reported as such.
        ("honest-pg", "True", "InsecureTransport"),
        ("thief-pg", "False", "CredentialsNotForHost"),
        ("thief-mysql", "False", "CredentialsNotForHost"),
        ("thief-kafka", "False", "CredentialsNotForHost"),
        ("thief-iceberg", "False", "CredentialsNotForHost"),
        ("thief-token", "False", "CredentialsNotForHost"),
        ("thief-bootstrap", "False", "CredentialsNotForHost"),
        ("unannotated-pg", "False", "CredentialsNotForHost"),
        ("elsewhere-pg", "False", "CredentialsNotForHost"),
        ("clear-token", "False", "InsecureAuthRefused"),
        ("echo-pg", "False", "AuthFailed"),
        ("echo-mysql", "False", "AuthFailed"),
    ] {
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        loop {
            let (got, message) = reachable(name);
            let ready = jsonpath(
                env,
                ns,
                &format!("cat/{name}"),
                "{.status.conditions[?(@.type==\"Reachable\")].status}",
            );
            if got == reason && ready == status {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{name}: Reachable {ready}/{got} ({message}), expected {status}/{reason}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    wait_ready(env, ns, "cat/honest-pg", "True", "Configured");

    // Every refusal names the field, the Secret, the annotation and the host, never a value.
    let (_, m) = reachable("thief-pg");
    assert!(
        m.contains("spec.connection.host")
            && m.contains("\"victim\"")
            && m.contains("semops.io/allowed-hosts")
            && m.contains(&format!("127.0.0.1:{l}")),
        "{m}"
    );
    let (_, m) = reachable("thief-token");
    assert!(m.contains("spec.connection.oauth2.tokenEndpoint"), "{m}");
    let (_, m) = reachable("thief-bootstrap");
    assert!(m.contains("spec.connection.bootstrapServers[1]"), "{m}");
    let (_, m) = reachable("unannotated-pg");
    assert!(
        m.contains("has no annotation semops.io/allowed-hosts"),
        "{m}"
    );
    let (_, m) = reachable("clear-token");
    assert!(m.contains("tokenEndpoint is http://"), "{m}");
    let (_, m) = reachable("echo-pg");
    assert!(m.contains("SQLSTATE 28"), "{m}");
    let (_, m) = reachable("echo-mysql");
    assert!(m.contains("MySQL error 1045"), "{m}");

    // The tenant's server never heard from semops: not one connection, so no byte of anything.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        *thief.connections.lock().unwrap(),
        0,
        "the listener was connected to; it received {} bytes",
        thief.bytes.lock().unwrap().len()
    );

    // No 8-character window of any Secret value anywhere a tenant can read.
    let readable = [
        env.kubectl_ok(&["get", "cat", "-n", ns, "-o", "yaml"]),
        env.kubectl_ok(&["get", "events", "-n", ns, "-o", "yaml"]),
    ]
    .join("\n");
    assert!(readable.contains("echo-pg"), "the dump holds the Catalogs");
    for value in [PASSWORD, TOKEN, LONG_USER] {
        for w in windows(value) {
            assert!(
                !readable.contains(w),
                "{w:?} of a Secret value is readable:\n{readable}"
            );
        }
    }
}

/// A DNS server on `addr` (UDP) that answers every A question with `answers` in turn and every
/// other question with no records; returns how many A questions it answered.
fn rebinding_nameserver(addr: &str, answers: [[u8; 4]; 2]) -> Arc<Mutex<usize>> {
    let socket = std::net::UdpSocket::bind(addr).expect("port 53 on a loopback address (root)");
    let asked: Arc<Mutex<usize>> = Arc::default();
    let count = asked.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        while let Ok((n, peer)) = socket.recv_from(&mut buf) {
            let q = &buf[..n];
            // The question: labels up to a zero byte, then type and class.
            let Some(end) = q.iter().skip(12).position(|b| *b == 0).map(|p| 12 + p + 5) else {
                continue;
            };
            if end > q.len() {
                continue;
            }
            let qtype = u16::from_be_bytes([q[end - 4], q[end - 3]]);
            let mut answer = q[..12].to_vec();
            answer[2] = 0x81; // a response, recursion desired
            answer[3] = 0x80; // recursion available, no error
            answer[4..12].copy_from_slice(&[0, 1, 0, u8::from(qtype == 1), 0, 0, 0, 0]);
            answer.extend_from_slice(&q[12..end]);
            if qtype == 1 {
                let turn = {
                    let mut n = count.lock().unwrap();
                    *n += 1;
                    (*n - 1) % 2
                };
                // The name by pointer, A, IN, TTL 0, four bytes.
                answer.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4]);
                answer.extend_from_slice(&answers[turn]);
            }
            let _ = socket.send_to(&answer, peer);
        }
    });
    asked
}

#[test]
fn a_name_that_rebinds_is_connected_to_at_the_checked_address_only() {
    let env = env();
    let pg = postgres();
    let ns = env.namespace("rebind");
    let ns = ns.name.as_str();
    // The name answers the real server's address and the thief's in turn; the Secret allows
    // only the real one. A second resolution after the check would reach the thief.
    let asked = rebinding_nameserver("127.83.0.53:53", [[127, 0, 0, 1], [127, 0, 0, 2]]);
    let thief = listener_at(&format!("127.0.0.2:{}", pg.port));
    let conf = env
        .work_dir
        .join(format!("resolv-{}.conf", std::process::id()));
    std::fs::write(
        &conf,
        "nameserver 127.83.0.53\noptions attempts:1 timeout:1\n",
    )
    .unwrap();
    let _op = Operator::start_with_resolv_conf(env, ns, &["--api-auth", "none"], &conf);
    env.apply_ok(&format!(
        "{}---\n{}",
        secret(
            ns,
            "real",
            "semops.io/allowed-hosts: \"127.0.0.1/32\"",
            &format!("username: {}, password: {}", pg.admin_user, pg.admin_password),
        ),
        catalog(
            ns,
            "rebinding",
            "postgresql",
            &format!(
                "host: rebind.semops.test, port: {}, database: postgres, sslMode: disable, credentialsSecretRef: {{name: real}}",
                pg.port
            ),
        ),
    ));
    // Rounds on request, each after the remembered answer expired: every round resolves anew.
    let mut reasons = std::collections::BTreeSet::new();
    for round in 0..6 {
        env.kubectl_ok(&[
            "annotate",
            "catalog",
            "rebinding",
            "-n",
            ns,
            &format!("semops.io/check-requested=r{round}"),
            "--overwrite",
        ]);
        let deadline = std::time::Instant::now() + Duration::from_secs(11);
        while std::time::Instant::now() < deadline {
            let reason = jsonpath(
                env,
                ns,
                "catalog/rebinding",
                "{.status.conditions[?(@.type==\"Reachable\")].status}/{.status.conditions[?(@.type==\"Reachable\")].reason}",
            );
            if reason != "/" {
                reasons.insert(reason);
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let asked = *asked.lock().unwrap();
    assert!(asked >= 3, "the name was resolved {asked} times");
    assert_eq!(
        *thief.connections.lock().unwrap(),
        0,
        "the thief's address was dialled"
    );
    assert!(thief.bytes.lock().unwrap().is_empty());
    // Both answers were seen and judged: the real server connected (plaintext, so reported
    // as InsecureTransport), the other address refused.
    assert!(
        reasons.contains("True/InsecureTransport")
            && reasons.contains("False/CredentialsNotForHost"),
        "{reasons:?}"
    );
}

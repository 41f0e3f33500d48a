//! Catalog reachability end to end: a real control plane, a real PostgreSQL, the operator
//! reading credentials from the Catalog's Secret. A canary password must never show up in
//! status, Events or the operator's logs.

mod support;

use std::time::Duration;
use support::db::postgres;

use support::{Operator, env, jsonpath, ready, stays, wait_ready};

/// Whether `f` becomes true within `limit`.
fn holds_within(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

const CANARY: &str = "canary-9d2e-NEVER-SHOW-ME";

fn catalog(ns: &str, port: u16, secret: &str) -> String {
    format!(
        "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: hr, namespace: {ns}}}\nspec:\n  provider: postgresql\n  connection:\n    host: 127.0.0.1\n    port: {port}\n    database: postgres\n    sslMode: disable\n    credentialsSecretRef: {{name: {secret}}}\n"
    )
}

fn secret(ns: &str, name: &str, password: &str, opted_in: bool) -> String {
    let labels = if opted_in {
        ", labels: {semops.io/catalog-credentials: \"true\"}, annotations: {semops.io/allowed-hosts: \"localhost,127.0.0.0/8,::1\"}"
    } else {
        ""
    };
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}{labels}}}\nstringData: {{username: postgres, password: {password}}}\n"
    )
}

fn touch(ns: &str, i: u32) {
    env().kubectl_ok(&[
        "annotate",
        "--overwrite",
        "cat/hr",
        "-n",
        ns,
        &format!("semops.io/test-touch={i}"),
    ]);
}

fn reachable(ns: &str) -> String {
    jsonpath(
        env(),
        ns,
        "cat/hr",
        "{.status.conditions[?(@.type==\"Reachable\")].status}/{.status.conditions[?(@.type==\"Reachable\")].reason}",
    )
}

#[test]
fn reachability_follows_the_secret_and_never_reveals_it() {
    let env = env();
    let pg = postgres();
    let ns = env.namespace("reach");
    let ns = ns.name.as_str();
    let op = Operator::for_namespace(env, ns);

    // No Secret yet: one message naming the field, the Secret and what makes it usable.
    env.apply_ok(&catalog(ns, pg.port, "pg-creds"));
    let missing = wait_ready(env, ns, "cat/hr", "False", "CredentialsInvalid");
    assert!(
        missing.contains("\"pg-creds\"")
            && missing.contains("credentialsSecretRef")
            && missing.contains("semops.io/catalog-credentials=true"),
        "{missing}"
    );

    // The right password in a Secret that did not opt in: refused with the very same message
    // (whether a Secret exists is nothing a Catalog author learns).
    env.apply_ok(&secret(ns, "pg-creds", pg.admin_password, false));
    touch(ns, 1);
    stays(
        Duration::from_secs(3),
        "a Secret without the opt-in stays unused",
        || reachable(ns) == "False/CredentialsInvalid",
    );
    assert_eq!(ready(env, ns, "cat/hr").2, missing);

    // Opted in, with a wrong (canary) password: AuthFailed.
    env.apply_ok(&secret(ns, "pg-creds", CANARY, true));
    touch(ns, 2);
    wait_ready(env, ns, "cat/hr", "False", "AuthFailed");
    assert_eq!(reachable(ns), "False/AuthFailed");

    // The right password: the pool is rebuilt and the catalog connects, over plaintext the
    // Catalog asked for explicitly: True, with a reason and a Warning saying so.
    env.apply_ok(&secret(ns, "pg-creds", pg.admin_password, true));
    touch(ns, 3);
    wait_ready(env, ns, "cat/hr", "True", "Configured");
    assert_eq!(reachable(ns), "True/InsecureTransport");
    let printed = env.kubectl_ok(&["get", "cat/hr", "-n", ns]);
    assert!(
        printed.lines().nth(1).unwrap().contains("True"),
        "REACHABLE column: {printed}"
    );

    // verify-full against the server's private CA: Connected.
    env.apply_ok(&support::ca_secret(ns, "pg-ca", &pg.ca_pem()));
    env.merge_patch(
        ns,
        "cat/hr",
        r#"{"spec":{"connection":{"host":"localhost","sslMode":"verify-full","tls":{"caSecretRef":{"name":"pg-ca"}}}}}"#,
    );
    let mut last = String::new();
    let connected = holds_within(Duration::from_secs(30), || {
        last = format!("{} {}", reachable(ns), ready(env, ns, "cat/hr").2);
        last.starts_with("True/Connected")
    });
    assert!(
        connected,
        "Reachable=True/Connected over TLS; last seen {last}"
    );

    // A key the Secret lacks: the same refusal, naming the keys the Catalog asked for.
    env.merge_patch(
        ns,
        "cat/hr",
        r#"{"spec":{"connection":{"credentialsSecretRef":{"passwordKey":"pw"}}}}"#,
    );
    let message = wait_ready(env, ns, "cat/hr", "False", "CredentialsInvalid");
    assert!(message.contains("\"pw\""), "{message}");

    for (what, text) in [
        (
            "status",
            env.kubectl_ok(&["get", "cat/hr", "-n", ns, "-o", "yaml"]),
        ),
        (
            "events",
            env.kubectl_ok(&["get", "events.events.k8s.io", "-n", ns, "-o", "yaml"]),
        ),
        ("operator logs", op.logs()),
    ] {
        assert!(
            !text.contains(CANARY),
            "the canary password leaked into {what}"
        );
    }
    let events = env.kubectl_ok(&[
        "get",
        "events.events.k8s.io",
        "-n",
        ns,
        "-o",
        "jsonpath={range .items[*]}{.type}/{.reason}{\"\\n\"}{end}",
    ]);
    assert!(
        events.contains("Warning/AuthFailed")
            && events.contains("Warning/InsecureTransport")
            && events.contains("Normal/Connected"),
        "{events}"
    );
}

#[test]
fn a_managed_catalog_is_never_probed() {
    let env = env();
    let ns = env.namespace("managed");
    let ns = ns.name.as_str();
    let _op = Operator::for_namespace(env, ns);
    env.apply_ok(&format!("apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: m, namespace: {ns}}}\nspec: {{provider: managed}}\n"));
    wait_ready(env, ns, "cat/m", "True", "Configured");
    assert_eq!(
        jsonpath(
            env,
            ns,
            "cat/m",
            "{.status.conditions[?(@.type==\"Reachable\")].reason}"
        ),
        "Managed"
    );
}

#[test]
fn a_refused_port_is_unreachable() {
    let env = env();
    let ns = env.namespace("refused");
    let ns = ns.name.as_str();
    let _op = Operator::for_namespace(env, ns);
    env.apply_ok(&secret(ns, "pg-creds", "x", true));
    let (port, _held) = support::refused_port();
    env.apply_ok(&catalog(ns, port, "pg-creds"));
    let message = wait_ready(env, ns, "cat/hr", "False", "Unreachable");
    assert!(message.starts_with("127.0.0.1:"), "{message}");
}

#[test]
fn a_host_outside_the_allow_list_is_never_connected_to() {
    let env = env();
    let ns = env.namespace("egress");
    let ns = ns.name.as_str();
    let _op = Operator::start(
        env,
        &env.kubeconfig,
        Some(ns),
        ns,
        &["--allowed-catalog-hosts", "10.99.0.0/16,*.db.example"],
    );
    // A listener that counts who knocks.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    env.apply_ok(&secret(ns, "pg-creds", "x", true));
    env.apply_ok(&catalog(ns, port, "pg-creds"));
    let message = wait_ready(env, ns, "cat/hr", "False", "HostNotAllowed");
    assert!(
        message.contains(&format!("127.0.0.1:{port}"))
            && message.contains("--allowed-catalog-hosts"),
        "{message}"
    );
    assert!(
        matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the operator connected to a host it may not reach"
    );
}

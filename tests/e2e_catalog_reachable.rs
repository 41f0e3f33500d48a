//! Catalog reachability end to end: a real control plane, a real PostgreSQL, the operator
//! reading credentials from the Catalog's Secret. A canary password must never show up in
//! status, Events or the operator's logs.

mod support;

use support::db::postgres;
use support::{Operator, env, jsonpath, wait_ready};

const CANARY: &str = "canary-9d2e-NEVER-SHOW-ME";

fn catalog(ns: &str, port: u16, secret: &str) -> String {
    format!(
        "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: hr, namespace: {ns}}}\nspec:\n  provider: postgresql\n  connection:\n    host: 127.0.0.1\n    port: {port}\n    database: postgres\n    sslMode: disable\n    credentialsSecretRef: {{name: {secret}}}\n"
    )
}

fn secret(ns: &str, name: &str, password: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\nstringData: {{username: postgres, password: {password}}}\n"
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

#[test]
fn reachability_follows_the_secret_and_never_reveals_it() {
    let env = env();
    let pg = postgres();
    let ns = env.namespace("reach");
    let ns = ns.name.as_str();
    let op = Operator::for_namespace(env, ns);

    // No Secret yet: a clear reason naming what to create.
    env.apply_ok(&catalog(ns, pg.port, "pg-creds"));
    let message = wait_ready(env, ns, "cat/hr", "False", "SecretNotFound");
    assert!(
        message.contains("\"pg-creds\"") && message.contains("credentialsSecretRef.name"),
        "{message}"
    );

    // A wrong (canary) password: AuthFailed.
    env.apply_ok(&secret(ns, "pg-creds", CANARY));
    touch(ns, 1);
    wait_ready(env, ns, "cat/hr", "False", "AuthFailed");
    assert_eq!(
        jsonpath(
            env,
            ns,
            "cat/hr",
            "{.status.conditions[?(@.type==\"Reachable\")].reason}"
        ),
        "AuthFailed"
    );

    // The right password: the pool is rebuilt and the catalog connects.
    env.apply_ok(&secret(ns, "pg-creds", pg.admin_password));
    touch(ns, 2);
    wait_ready(env, ns, "cat/hr", "True", "Configured");
    let reachable = jsonpath(
        env,
        ns,
        "cat/hr",
        "{.status.conditions[?(@.type==\"Reachable\")].status}/{.status.conditions[?(@.type==\"Reachable\")].reason}",
    );
    assert_eq!(reachable, "True/Connected");
    let printed = env.kubectl_ok(&["get", "cat/hr", "-n", ns]);
    assert!(
        printed.lines().nth(1).unwrap().contains("True"),
        "REACHABLE column: {printed}"
    );

    // A key the Secret lacks names the field to fix.
    env.kubectl_ok(&[
        "patch",
        "cat/hr",
        "-n",
        ns,
        "--type=merge",
        "-p",
        "{\"spec\":{\"connection\":{\"credentialsSecretRef\":{\"passwordKey\":\"pw\"}}}}",
    ]);
    let message = wait_ready(env, ns, "cat/hr", "False", "CredentialsInvalid");
    assert!(message.contains("passwordKey"), "{message}");

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
        "jsonpath={.items[*].reason}",
    ]);
    assert!(
        events.contains("AuthFailed") && events.contains("Connected"),
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
    env.apply_ok(&secret(ns, "pg-creds", "x"));
    let (port, _held) = support::refused_port();
    env.apply_ok(&catalog(ns, port, "pg-creds"));
    let message = wait_ready(env, ns, "cat/hr", "False", "Unreachable");
    assert!(message.starts_with("127.0.0.1:"), "{message}");
}

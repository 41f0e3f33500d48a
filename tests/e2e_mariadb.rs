//! A MySQL/MariaDB Catalog driven through the operator (not only the provider): it connects,
//! its check rounds record native ids and mark a dropped table stale, a model binds its tables,
//! and source lookup answers through the read API.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::checks::{condition, request};
use support::db::{mariadb, unique};
use support::{Operator, env, eventually, wait_ready};

#[test]
fn a_mariadb_catalog_is_checked_binds_models_and_serves_lookups() {
    let env = env();
    let ns = env.namespace("mariadb");
    let ns = ns.name.as_str();
    let db = format!("m{}", unique());
    let server = mariadb();
    server.mysql(&format!(
        "CREATE DATABASE {db}; CREATE TABLE {db}.orders(id int PRIMARY KEY, customer_id int) ENGINE=InnoDB; \
         CREATE TABLE {db}.items(id int) ENGINE=InnoDB; CREATE VIEW {db}.big_orders AS SELECT id FROM {db}.orders;"
    ));
    let op = Operator::start(
        env,
        &env.kubeconfig,
        Some(ns),
        ns,
        &["--api-auth", "none", "--leader-elect=false"],
    );
    // TLS verified against the server's private CA (verify-full, the default).
    env.apply_ok(&support::ca_secret(ns, "mdb-ca", &server.ca_pem()));
    env.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: mdb, namespace: {ns}, labels: {{semops.io/catalog-credentials: \"true\"}}, annotations: {{semops.io/allowed-hosts: \"localhost,127.0.0.0/8,::1\"}}}}\nstringData: {{username: {user}, password: {pw}}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: p, namespace: {ns}}}\nspec: {{enabled: false, mode: ReportOnly}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: shop, namespace: {ns}}}\nspec:\n  provider: mysql\n  connection: {{host: localhost, port: {port}, database: {db}, tls: {{caSecretRef: {{name: mdb-ca}}}}, credentialsSecretRef: {{name: mdb}}}}\n  registrations: [{{kind: Schema, name: {db}}}, {{kind: Table, schema: {db}, name: orders}}, {{kind: Table, schema: {db}, name: items}}, {{kind: View, schema: {db}, name: big_orders}}]\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: home, namespace: {ns}}}\nspec: {{provider: managed, registrations: [{{kind: Schema, name: semantic}}]}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: sales, namespace: {ns}}}\nspec:\n  catalog: home\n  schema: semantic\n  definition:\n    datasets: [{{name: o, source: shop.{db}.orders, primaryKey: [id]}}, {{name: b, source: shop.{db}.big_orders}}]\n",
        user = server.admin_user,
        pw = server.admin_password,
        port = server.port,
    ));
    let message = wait_ready(env, ns, "cat/shop", "True", "Configured");
    assert!(message.contains("effective policy: p"), "{message}");
    let reachable = support::jsonpath(
        env,
        ns,
        "cat/shop",
        "{.status.conditions[?(@.type==\"Reachable\")].reason}",
    );
    assert_eq!(reachable, "Connected", "verify-full with the private CA");

    // The model's sources resolve against MariaDB (level 3: columns checked).
    wait_ready(env, ns, "sm/sales", "True", "Accepted");
    let model: Value =
        serde_json::from_str(&env.kubectl_ok(&["get", "sm", "sales", "-n", ns, "-o", "json"]))
            .unwrap();
    let assoc = &model["status"]["sourceAssociations"];
    assert_eq!(assoc[0]["type"], "TABLE");
    assert_eq!(assoc[1]["type"], "VIEW");
    assert!(
        assoc[0]["id"].as_str().unwrap().contains(":innodb:"),
        "{assoc}"
    );

    // A round records every registration's id; a dropped table becomes stale.
    let check = |token: &str| {
        env.kubectl_ok(&[
            "annotate",
            "catalog",
            "shop",
            "-n",
            ns,
            &format!("semops.io/check-requested={token}"),
            "--overwrite",
        ]);
        eventually(Duration::from_secs(60), token, || {
            let s: Value = serde_json::from_str(&env.kubectl_ok(&[
                "get",
                "cat",
                "shop",
                "-n",
                ns,
                "-o",
                "jsonpath={.status}",
            ]))
            .ok()?;
            (s["lastCheck"]["trigger"] == format!("annotation:{token}")).then_some(s)
        })
    };
    let s = check("one");
    assert_eq!(s["lastCheck"]["result"], "Completed", "{s}");
    let states: Vec<&str> = s["registrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["Live", "Live", "Live", "Live"]);
    server.mysql(&format!("DROP TABLE {db}.items;"));
    let s = check("two");
    assert_eq!(s["registrations"][2]["state"], "Stale");
    assert_eq!(
        condition(&s, "RegistrationsCurrent"),
        ("False".into(), "StaleRegistrations".into())
    );

    // Source lookup resolves the name live against MariaDB and finds the model's dataset.
    let (code, body) = request(
        op.api_port,
        "GET",
        &format!("/api/metalakes/{ns}/objects/table/shop.{db}.orders/semantic-model-datasets"),
        None,
        None,
    );
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        format!(
            r#"{{"code":0,"identifiers":[{{"namespace":["{ns}","home","semantic","sales"],"name":"o"}}]}}"#
        )
    );
    let (code, _) = request(
        op.api_port,
        "GET",
        &format!("/api/metalakes/{ns}/objects/table/shop.{db}.items/semantic-model-datasets"),
        None,
        None,
    );
    assert_eq!(code, 404, "a dropped table is not found");
}

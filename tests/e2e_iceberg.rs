//! Iceberg REST catalogs end to end, against a real control plane and a real Apache Iceberg
//! REST catalog (hack/iceberg) over https verified with its private CA, with OAuth2 client
//! credentials and 3-second tokens: a model
//! bound to Iceberg tables keeps its association across `renameTable` and is found by the new
//! name; a table dropped and created again is `SourceReplaced` for the model until `rebind`;
//! check rounds record uuids, see renames, withdraw dropped tables under AutoRemove, and a 403
//! on one table is doubt (nothing removed); lookup, metric discovery and lineage answer for
//! the Iceberg-bound model. Tables are changed through the REST API itself.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::checks::{World, condition, state_of};
use support::db::unique;
use support::iceberg::{CLIENT, FORBIDDEN, iceberg};
use support::{env, eventually};

const REPORT: &str = "enabled: false, mode: ReportOnly, kinds: [Schema, Table, View]";
const AUTO: &str = "enabled: false, mode: AutoRemove, removeAfter: {misses: 1, grace: 0s}, kinds: [Schema, Table, View]";

/// The OAuth2 Secret, the Iceberg Catalog `lake` registering `tables` (and a view) of
/// namespace `ns`, the managed catalog `analytics`, and a model on `orders` and `events`.
fn objects(ns: &str, tables: &[&str], extra: &str) -> String {
    let regs: Vec<String> = std::iter::once(format!("{{kind: Schema, name: {ns}}}"))
        .chain(
            tables
                .iter()
                .map(|t| format!("{{kind: Table, schema: {ns}, name: {t}, owner: lake-team}}")),
        )
        .chain(std::iter::once(format!(
            "{{kind: View, schema: {ns}, name: revenue}}"
        )))
        .chain((!extra.is_empty()).then(|| extra.to_string()))
        .collect();
    let ca = iceberg().ca_pem().replace('\n', "\\n");
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: lake-ca, namespace: NS, labels: {{semops.io/catalog-credentials: \"true\"}}}}\nstringData: {{ca.crt: \"{ca}\"}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: lake-oauth, namespace: NS, labels: {{semops.io/catalog-credentials: \"true\"}}, annotations: {{semops.io/allowed-hosts: \"localhost,127.0.0.0/8,::1\"}}}}\nstringData: {{username: {}, password: {}}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: lake, namespace: NS}}\nspec:\n  provider: iceberg-rest\n  connection:\n    uri: {}\n    tls: {{caSecretRef: {{name: lake-ca}}}}\n    oauth2: {{scope: catalog}}\n    credentialsSecretRef: {{name: lake-oauth}}\n  registrations: [{}]\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: analytics, namespace: NS}}\nspec:\n  provider: managed\n  registrations: [{{kind: Schema, name: semantic}}]\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: sales, namespace: NS}}\nspec:\n  catalog: analytics\n  schema: semantic\n  definition:\n    datasets:\n      - {{name: orders, source: lake.{ns}.orders, fields: [{{name: amount, expression: {{dialects: [{{dialect: ANSI_SQL, expression: amount}}]}}}}]}}\n      - {{name: events, source: lake.{ns}.events}}\n    metrics:\n      - {{name: revenue, expression: {{dialects: [{{dialect: ANSI_SQL, expression: \"SUM(orders.amount)\"}}]}}}}\n",
        CLIENT.0,
        CLIENT.1,
        iceberg().tls_uri,
        regs.join(", ")
    )
}

fn model(w: &World) -> Value {
    let out = env().kubectl_ok(&["get", "sm", "sales", "-n", w.ns(), "-o", "json"]);
    serde_json::from_str::<Value>(&out).unwrap()
}

fn ready(w: &World) -> Value {
    eventually(Duration::from_secs(60), "the model accepted", || {
        let m = model(w);
        let status = m["status"].clone();
        (condition(&status, "Ready") == ("True".into(), "Accepted".into())).then_some(status)
    })
}

#[test]
fn a_model_on_iceberg_tables_survives_a_rename_and_sees_a_replaced_table_until_rebind() {
    let srv = iceberg();
    let ns = format!("ice{}", unique());
    srv.create_namespace(&ns);
    let orders = srv.create_table(&ns, "orders");
    let events = srv.create_table(&ns, "events");
    let view = srv.create_view(&ns, "revenue");
    let w = World::with_objects(
        "iceberg",
        &objects(&ns, &["orders", "events"], ""),
        REPORT,
        &[],
    );

    // Rounds record the uuids; the catalog is reachable through OAuth2.
    let s = w.check("lake");
    assert_eq!(s["lastCheck"]["result"], "Completed", "{s}");
    assert_eq!(
        state_of(&s, "orders"),
        ("Live".into(), format!("table:{orders}@{ns}"))
    );
    assert_eq!(
        state_of(&s, "revenue"),
        ("Live".into(), format!("view:{view}@{ns}"))
    );
    assert_eq!(
        condition(&s, "Reachable"),
        ("True".into(), "Connected".into())
    );

    // The model is bound to the tables' uuids.
    let status = ready(&w);
    let assoc: Vec<(String, String)> = status["sourceAssociations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["dataset"].as_str().unwrap().into(),
                a["id"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert!(
        assoc.contains(&("orders".into(), format!("table:{orders}@{ns}")))
            && assoc.contains(&("events".into(), format!("table:{events}@{ns}"))),
        "{status}"
    );
    let lookup = |name: &str| {
        w.api(
            "GET",
            &format!(
                "/api/metalakes/{}/objects/table/lake.{ns}.{name}/semantic-model-datasets",
                w.ns()
            ),
            None,
        )
    };
    let one = |d: &str| -> Value {
        serde_json::json!({"code": 0, "identifiers": [{"namespace": [w.ns(), "analytics", "semantic", "sales"], "name": d}]})
    };
    assert_eq!(lookup("orders"), (200, one("orders")));
    // Metric discovery and lineage answer for the Iceberg-bound model.
    let (code, metrics) = w.api(
        "GET",
        &format!(
            "/api/metalakes/{}/catalogs/analytics/schemas/semantic/semantic-model-metrics",
            w.ns()
        ),
        None,
    );
    assert_eq!(
        (code, metrics["identifiers"][0]["name"].as_str()),
        (200, Some("revenue")),
        "{metrics}"
    );
    let (code, graph) = w.api(
        "GET",
        &format!(
            "/api/metalakes/{}/catalogs/analytics/schemas/semantic/semantic-models/sales/lineage",
            w.ns()
        ),
        None,
    );
    assert_eq!(code, 200, "{graph}");
    let mut sources: Vec<&str> = graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "SOURCE")
        .map(|n| n["name"].as_str().unwrap_or(""))
        .collect();
    sources.sort_unstable();
    assert_eq!(
        sources,
        [format!("lake.{ns}.events"), format!("lake.{ns}.orders")],
        "{graph}"
    );

    // renameTable: the association holds, the lookup finds the dataset under the new name,
    // the old name is gone, and the round sees the registration renamed.
    srv.rename_table(&ns, "orders", "orders_v2");
    assert_eq!(lookup("orders_v2"), (200, one("orders")));
    assert_eq!(lookup("orders").0, 404, "the old name is gone");
    let s = w.check("lake");
    assert_eq!(state_of(&s, "orders").0, "Renamed", "{s}");
    let drift = eventually(
        Duration::from_secs(60),
        "the rename reaches the model",
        || {
            let st = model(&w)["status"].clone();
            st["sourceDrift"]
                .as_array()
                .and_then(|d| d.iter().find(|x| x["dataset"] == "orders").cloned())
        },
    );
    assert_eq!(drift["kind"], "SourceRenamed", "{drift}");
    assert_eq!(
        drift["current"],
        format!("{ns}.orders_v2").as_str(),
        "{drift}"
    );

    // Dropped and created again under the same name: another object. The model sees
    // SourceReplaced until it is told to resolve again.
    srv.drop_table(&ns, "events");
    let events_again = srv.create_table(&ns, "events");
    assert_ne!(events_again, events);
    assert_eq!(
        lookup("events"),
        (200, serde_json::json!({"code": 0, "identifiers": []})),
        "the new table is bound to nothing"
    );
    let s = w.check("lake");
    assert_eq!(
        state_of(&s, "events"),
        ("Live".into(), format!("table:{events_again}@{ns}"))
    );
    let replaced = eventually(
        Duration::from_secs(60),
        "the replacement reaches the model",
        || {
            let st = model(&w)["status"].clone();
            st["sourceDrift"].as_array().and_then(|d| {
                d.iter()
                    .find(|x| x["dataset"] == "events" && x["kind"] == "SourceReplaced")
                    .cloned()
            })
        },
    );
    assert_eq!(replaced["kind"], "SourceReplaced");
    // Resolving again (spec.rebind) binds the new table; the renamed one is named by its new name.
    let rebound = objects(&ns, &["orders", "events"], "")
        .replace(
            &format!("source: lake.{ns}.orders,"),
            &format!("source: lake.{ns}.orders_v2,"),
        )
        .replace(
            "  catalog: analytics\n  schema: semantic\n",
            "  catalog: analytics\n  schema: semantic\n  rebind: after-recreate\n",
        );
    assert!(rebound.contains("rebind: after-recreate") && rebound.contains("orders_v2"));
    env().apply_ok(&rebound.replace("namespace: NS", &format!("namespace: {}", w.ns())));
    eventually(Duration::from_secs(60), "rebound to the new table", || {
        let st = model(&w)["status"].clone();
        st["sourceAssociations"]
            .as_array()?
            .iter()
            .any(|a| {
                a["dataset"] == "events" && a["id"] == format!("table:{events_again}@{ns}").as_str()
            })
            .then_some(())
    });
    assert_eq!(lookup("events"), (200, one("events")));
}

#[test]
fn a_forbidden_table_is_doubt_and_autoremove_withdraws_dropped_tables_and_views_only_on_certainty()
{
    let srv = iceberg();
    let ns = format!("icea{}", unique());
    srv.create_namespace(&ns);
    srv.create_namespace(FORBIDDEN.0);
    srv.create_table(&ns, "orders");
    srv.create_table(&ns, "events");
    srv.create_table(&ns, "gone");
    srv.create_view(&ns, "revenue");
    srv.create_view(&ns, "old_view");
    let forbidden = format!(
        "{{kind: Table, schema: {}, name: {}}}",
        FORBIDDEN.0, FORBIDDEN.1
    );
    let view = format!("{{kind: View, schema: {ns}, name: old_view}}");
    let w = World::with_objects(
        "iceauto",
        &objects(
            &ns,
            &["orders", "events", "gone"],
            &format!("{forbidden}, {view}"),
        ),
        AUTO,
        &[],
    );
    srv.drop_table(&ns, "gone");
    srv.drop_view(&ns, "old_view");
    // The 403 on one table fails the round: nothing is marked, nothing removed.
    let s = w.check("lake");
    assert_ne!(s["lastCheck"]["result"], "Completed", "{s}");
    assert_eq!(
        condition(&s, "Reachable"),
        ("False".into(), "PermissionDenied".into()),
        "{s}"
    );
    assert_eq!(w.removed_metric(), 0.0, "zero removals on doubt");

    // Without the forbidden registration the round is certain: the dropped table is withdrawn.
    env().apply_ok(
        &objects(&ns, &["orders", "events", "gone"], &view)
            .replace("namespace: NS", &format!("namespace: {}", w.ns())),
    );
    let s = w.check("lake");
    assert_eq!(s["lastCheck"]["result"], "Completed", "{s}");
    assert_eq!(state_of(&s, "gone").0, "Removed", "{s}");
    assert_eq!(state_of(&s, "old_view").0, "Removed", "{s}");
    assert_eq!(state_of(&s, "orders").0, "Live");
    assert_eq!(state_of(&s, "revenue").0, "Live", "a live view stays");
    assert_eq!(s["lastCheck"]["removed"], 2);
}

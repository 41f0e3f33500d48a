//! Stale-registration rounds (DESIGN 5, 6.4) against a real control plane and PostgreSQL:
//! out-of-band drops, renames and name reuse; ReportOnly vs AutoRemove; never a removal on
//! doubt (wrong password, revoked privileges, a failure in the middle of a round, a blackholed
//! port); the removal cap; policy precedence; the persisted schedule across a restart; the
//! report and reconcile endpoints with their authorization.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::checks::{World, catalog_yaml, condition, request};
use support::db::postgres;
use support::{Operator, env, eventually};

const AUTO: &str = "enabled: false, mode: AutoRemove, kinds: [Schema, Table, View], probe: {timeout: 2s, concurrency: 2, batchSize: 2}";
const REPORT: &str = "enabled: false, mode: ReportOnly";

const SETUP: &str = "CREATE SCHEMA app; CREATE TABLE app.orders(id int); CREATE TABLE app.items(id int); CREATE VIEW app.v AS SELECT 1 AS x; CREATE SCHEMA old;";
const REGS: &str = "[{kind: Schema, name: app, owner: data-team, tags: [pii]}, {kind: Schema, name: old}, {kind: Table, schema: app, name: orders}, {kind: Table, schema: app, name: items}, {kind: View, schema: app, name: v}]";

fn names_in(states: &[(String, String)], state: &str) -> Vec<String> {
    states
        .iter()
        .filter(|(_, s)| s == state)
        .map(|(n, _)| n.clone())
        .collect()
}

#[test]
fn report_only_marks_drops_stale_and_auto_remove_removes_them_once_through_one_path() {
    let w = World::new("stale", SETUP, REGS, REPORT, &[]);
    let s = w.check("wh");
    assert_eq!(s["lastCheck"]["result"], "Completed");
    assert_eq!(names_in(&World::states(&s), "Live").len(), 5, "{s}");
    assert_eq!(
        condition(&s, "RegistrationsCurrent"),
        ("True".into(), "AllLive".into())
    );
    let ids: Vec<Value> = s["registrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    assert!(
        ids.iter()
            .all(|i| i.as_str().is_some_and(|i| i.starts_with("pg:")))
    );

    w.sql("DROP SCHEMA old; DROP TABLE app.items;");
    let s = w.check("wh");
    let states = World::states(&s);
    assert_eq!(names_in(&states, "Stale"), vec!["old", "items"]);
    assert_eq!(s["staleCount"], 2);
    assert_eq!(s["lastCheck"]["stale"], 2);
    assert_eq!(
        condition(&s, "RegistrationsCurrent"),
        ("False".into(), "StaleRegistrations".into())
    );
    let stale_events = |w: &World| {
        w.events("wh")
            .into_iter()
            .filter(|e| e.0 == "StaleRegistration")
            .count()
    };
    eventually(
        Duration::from_secs(20),
        "two StaleRegistration events",
        || (stale_events(&w) == 2).then_some(()),
    );
    // A second ReportOnly round warns no more: once per transition.
    w.check("wh");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(stale_events(&w), 2);
    assert_eq!(w.removed_metric(), 0.0);

    // The report endpoints scan live and change nothing.
    let (code, report) = w.api(
        "GET",
        &format!("/api/metalakes/{}/catalogs/wh/stale-entities", w.ns()),
        None,
    );
    assert_eq!(code, 200, "{report}");
    assert_eq!(report["code"], 0);
    assert_eq!(report["catalogUnreachable"], false);
    let entities: Vec<(&str, &str, bool)> = report["staleEntities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                e["state"].as_str().unwrap(),
                e["removed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        entities,
        vec![("old", "Stale", false), ("items", "Stale", false)]
    );
    // The same from a terminal.
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_semops"))
        .args([
            "stale",
            "wh",
            "-n",
            w.ns(),
            "--server",
            &format!("http://127.0.0.1:{}", w.op.api_port),
        ])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&cli.stdout);
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    assert!(
        table.starts_with("KIND") && table.contains("items") && table.contains("Stale"),
        "{table}"
    );
    let (_, schemas) = w.api(
        "GET",
        &format!("/api/metalakes/{}/catalogs/wh/stale-schemas", w.ns()),
        None,
    );
    assert_eq!(schemas["staleSchemas"].as_array().unwrap().len(), 1);
    assert_eq!(schemas["staleSchemas"][0]["name"], "old");

    // AutoRemove: dryRun removes nothing; a real round removes both, spec untouched.
    env().kubectl_ok(&[
        "patch",
        "reconcilepolicy",
        "p",
        "-n",
        w.ns(),
        "--type=merge",
        "-p",
        r#"{"spec":{"mode":"AutoRemove"}}"#,
    ]);
    eventually(
        Duration::from_secs(30),
        "policy AutoRemove in effect",
        || (w.catalog("wh")["status"]["effectivePolicy"]["mode"] == "AutoRemove").then_some(()),
    );
    let (code, dry) = w.api(
        "POST",
        &format!("/api/metalakes/{}/catalogs/wh/reconcile", w.ns()),
        Some(r#"{"dryRun": true}"#),
    );
    assert_eq!(code, 200, "{dry}");
    assert!(
        dry["staleEntities"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["removed"] == false)
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        names_in(&World::states(&w.catalog("wh")["status"]), "Removed").len(),
        0,
        "dryRun removed something"
    );
    assert_eq!(w.removed_metric(), 0.0);

    let spec_before = w.catalog("wh")["spec"].clone();
    let (code, done) = w.api(
        "POST",
        &format!("/api/metalakes/{}/catalogs/wh/reconcile", w.ns()),
        None,
    );
    assert_eq!(code, 200, "{done}");
    assert!(
        done["staleEntities"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["removed"] == true),
        "{done}"
    );
    let c = w.catalog("wh");
    assert_eq!(c["spec"], spec_before, "the operator never edits spec");
    let s = &c["status"];
    assert_eq!(names_in(&World::states(s), "Removed"), vec!["old", "items"]);
    assert!(s["registrations"][1]["removedAt"].is_string());
    assert_eq!(s["lastCheck"]["trigger"], "api");
    assert_eq!(s["lastCheck"]["removed"], 2);
    assert_eq!(
        condition(s, "RegistrationsCurrent"),
        ("False".into(), "RemovedEntriesInSpec".into())
    );
    assert_eq!(w.removed_metric(), 2.0);
    let removed = eventually(
        Duration::from_secs(20),
        "RegistrationRemoved events",
        || {
            let v: Vec<_> = w
                .events("wh")
                .into_iter()
                .filter(|e| e.0 == "RegistrationRemoved")
                .collect();
            (v.len() == 2).then_some(v)
        },
    );
    for (_, reporter, note) in &removed {
        assert_eq!(reporter, "semops-reconciler");
        assert!(note.contains("ReconcilePolicy p"), "{note}");
    }
    // Withdrawn from the API; the rest keeps its metadata.
    let (_, regs) = w.api(
        "GET",
        &format!("/api/metalakes/{}/catalogs/wh/registrations", w.ns()),
        None,
    );
    let served: Vec<&str> = regs["registrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(served, vec!["app", "orders", "v"]);
    assert_eq!(regs["registrations"][0]["owner"], "data-team");

    // A removed registration stays removed (nothing more to remove) ...
    let s = w.check("wh");
    assert_eq!(s["lastCheck"]["removed"], 0);
    assert_eq!(w.removed_metric(), 2.0);
    // ... until its object is back: then it registers again as new.
    w.sql("CREATE TABLE app.items(id int);");
    let s = w.check("wh");
    let items = &s["registrations"][3];
    assert_eq!(
        (items["name"].as_str(), items["state"].as_str()),
        (Some("items"), Some("Live"))
    );
    assert_ne!(items["id"], ids[3], "a recreated table has a new id");
    // Deleting the removed entry from spec clears RegistrationsCurrent without a round.
    env().kubectl_ok(&[
        "patch",
        "catalog",
        "wh",
        "-n",
        w.ns(),
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/registrations/1"}]"#,
    ]);
    eventually(Duration::from_secs(30), "RegistrationsCurrent True", || {
        (condition(&w.catalog("wh")["status"], "RegistrationsCurrent")
            == ("True".into(), "AllLive".into()))
            .then_some(())
    });
}

#[test]
fn a_renamed_schema_is_renamed_never_removed_and_keeps_its_metadata_and_reuse_is_replaced() {
    let w = World::new("rename", SETUP, REGS, AUTO, &[]);
    let s = w.check("wh");
    let orders_id = s["registrations"][2]["id"].clone();
    w.sql("ALTER SCHEMA app RENAME TO application;");
    let s = w.check("wh");
    let app = &s["registrations"][0];
    assert_eq!(app["state"], "Renamed", "{s}");
    assert_eq!(app["renamedTo"], "application");
    // Its tables are absent by their declared names and not found by id under `app`... they are
    // found by id under the new schema, so they are renamed too, not removed.
    let states = World::states(&s);
    assert_eq!(names_in(&states, "Removed"), Vec::<String>::new(), "{s}");
    assert_eq!(
        names_in(&states, "Renamed"),
        vec!["app", "orders", "items", "v"]
    );
    assert_eq!(s["registrations"][2]["renamedTo"], "application.orders");
    assert_eq!(w.removed_metric(), 0.0);
    assert_eq!(
        condition(&s, "RegistrationsCurrent"),
        ("False".into(), "Renamed".into())
    );
    let (_, regs) = w.api(
        "GET",
        &format!("/api/metalakes/{}/catalogs/wh/registrations", w.ns()),
        None,
    );
    let app = &regs["registrations"][0];
    assert_eq!(
        (app["name"].as_str(), app["currentName"].as_str()),
        (Some("app"), Some("application"))
    );
    assert_eq!(app["owner"], "data-team");
    assert_eq!(app["tags"], serde_json::json!(["pii"]));
    eventually(
        Duration::from_secs(20),
        "RegistrationRenamed events",
        || {
            (w.events("wh")
                .iter()
                .filter(|e| e.0 == "RegistrationRenamed")
                .count()
                == 4)
                .then_some(())
        },
    );

    // Back under its name, then the table dropped and recreated: Live with a new id, a warning.
    w.sql("ALTER SCHEMA application RENAME TO app; DROP TABLE app.orders; CREATE TABLE app.orders(id int);");
    let s = w.check("wh");
    assert_eq!(names_in(&World::states(&s), "Live").len(), 5, "{s}");
    assert_ne!(s["registrations"][2]["id"], orders_id);
    eventually(Duration::from_secs(20), "RegistrationReplaced", || {
        w.events("wh")
            .iter()
            .any(|e| e.0 == "RegistrationReplaced" && e.2.contains("app.orders"))
            .then_some(())
    });
    assert_eq!(w.removed_metric(), 0.0);
}

/// Sets up an AutoRemove world where two registrations would be removed by a healthy round,
/// breaks the catalog with `fail`, and checks that the round changes nothing; then `heal`s and
/// checks that the next round does remove (so the first assertion could have failed).
fn no_removal_on_doubt(
    prefix: &str,
    reason: &str,
    fail: impl FnOnce(&World),
    heal: impl FnOnce(&World),
) {
    let w = World::new(prefix, SETUP, REGS, AUTO, &[]);
    let before = w.check("wh");
    assert_eq!(
        names_in(&World::states(&before), "Live").len(),
        5,
        "{before}"
    );
    w.sql("DROP SCHEMA old; DROP TABLE app.items;");
    fail(&w);
    let s = w.check("wh");
    assert_eq!(s["lastCheck"]["result"], "CatalogUnreachable", "{s}");
    assert_eq!(
        condition(&s, "Reachable"),
        ("False".into(), reason.into()),
        "{s}"
    );
    assert_eq!(
        s["registrations"], before["registrations"],
        "states changed on doubt"
    );
    assert_eq!(s["lastCheck"]["removed"], 0);
    assert_eq!(w.removed_metric(), 0.0);
    assert!(
        w.events("wh")
            .iter()
            .all(|e| e.0 != "RegistrationRemoved" && e.0 != "StaleRegistration")
    );
    let (code, report) = w.api(
        "GET",
        &format!("/api/metalakes/{}/catalogs/wh/stale-entities", w.ns()),
        None,
    );
    assert_eq!(
        (code, report["catalogUnreachable"].as_bool()),
        (200, Some(true)),
        "{report}"
    );
    assert_eq!(report["staleEntities"], serde_json::json!([]));

    heal(&w);
    let s = w.check("wh");
    assert_eq!(s["lastCheck"]["result"], "Completed", "{s}");
    assert_eq!(
        names_in(&World::states(&s), "Removed"),
        vec!["old", "items"]
    );
    assert_eq!(w.removed_metric(), 2.0);
    assert_eq!(condition(&s, "Reachable").0, "True");
}

#[test]
fn a_wrong_password_removes_nothing() {
    no_removal_on_doubt(
        "wrongpw",
        "AuthFailed",
        |w| w.set_password("wrong"),
        |w| w.set_password(support::checks::PASSWORD),
    );
}

#[test]
fn revoked_connect_privilege_removes_nothing() {
    no_removal_on_doubt(
        "revoked",
        "PermissionDenied",
        |w| {
            w.sql(&format!(
                "REVOKE CONNECT ON DATABASE {db} FROM PUBLIC; SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}';",
                db = w.db,
                role = w.role
            ));
        },
        |w| w.sql(&format!("GRANT CONNECT ON DATABASE {} TO PUBLIC;", w.db)),
    );
}

#[test]
fn a_failure_in_the_middle_of_a_round_removes_nothing() {
    // Schemas are probed through pg_namespace, relations through pg_class: without SELECT on
    // pg_class (in this database only) the schema batch answers and the relation batches fail.
    no_removal_on_doubt(
        "midround",
        "PermissionDenied",
        |w| w.sql("REVOKE SELECT ON pg_catalog.pg_class FROM PUBLIC;"),
        |w| w.sql("GRANT SELECT ON pg_catalog.pg_class TO PUBLIC;"),
    );
}

#[test]
fn a_blackholed_port_removes_nothing() {
    // A listener that never accepts: the kernel completes the handshake, nobody ever answers.
    let hole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hole.local_addr().unwrap().port();
    no_removal_on_doubt(
        "blackhole",
        "Timeout",
        |w| w.set_port(port),
        |w| w.set_port(postgres().port),
    );
    drop(hole);
}

#[test]
fn two_hundred_stale_registrations_with_a_cap_of_fifty_go_fifty_per_round() {
    let tables: Vec<String> = (0..200).map(|i| format!("t{i:03}")).collect();
    let setup = format!(
        "CREATE SCHEMA bulk; {}",
        tables
            .iter()
            .map(|t| format!("CREATE TABLE bulk.{t}(id int);"))
            .collect::<String>()
    );
    let regs = format!(
        "[{}]",
        tables
            .iter()
            .map(|t| format!("{{kind: Table, schema: bulk, name: {t}}}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let w = World::new(
        "cap",
        &setup,
        &regs,
        &format!("{AUTO}, maxRemovalsPerRound: 50"),
        &[],
    );
    let s = w.check("wh");
    assert_eq!(names_in(&World::states(&s), "Live").len(), 200);
    assert_eq!(s["lastCheck"]["probed"], 200);
    w.sql("DROP SCHEMA bulk CASCADE;");
    for round in 1..=4 {
        let s = w.check("wh");
        let states = World::states(&s);
        let removed = names_in(&states, "Removed");
        assert_eq!(removed.len(), 50 * round, "round {round}");
        assert_eq!(removed, tables[..50 * round].to_vec(), "spec order");
        assert_eq!(names_in(&states, "Stale").len(), 200 - 50 * round);
        assert_eq!(s["lastCheck"]["removed"], 50);
    }
    assert_eq!(w.removed_metric(), 200.0);
    // Events are capped per round, with a summary for the rest.
    let events = w.events("wh");
    assert!(
        events.iter().any(|e| e.0 == "CheckRoundSummary"),
        "{events:?}"
    );
    let s = w.check("wh");
    assert_eq!(s["lastCheck"]["removed"], 0);
}

#[test]
fn rounds_follow_the_effective_policy_reference_selector_and_namespace_with_overlap() {
    // Catalogs: `plain` (no labels: namespace policy, ReportOnly), `gold` (tier=gold: two
    // selector policies overlap, `a-auto` wins alphabetically), `pinned` (tier=gold but
    // referencing `z-report`).
    let w = World::new(
        "prec",
        SETUP,
        "[{kind: Table, schema: app, name: items}]",
        REPORT,
        &[],
    );
    let env = env();
    let ns = w.ns();
    let pg = postgres();
    env.apply_ok(&format!(
        "apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: a-auto, namespace: {ns}}}\nspec: {{enabled: false, mode: AutoRemove, catalogSelector: {{matchLabels: {{tier: gold}}}}}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: b-report, namespace: {ns}}}\nspec: {{enabled: false, mode: ReportOnly, catalogSelector: {{matchLabels: {{tier: gold}}}}}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: z-report, namespace: {ns}}}\nspec: {{enabled: false, mode: ReportOnly, catalogSelector: {{matchLabels: {{tier: none}}}}}}\n---\n{}---\n{}",
        catalog_yaml(ns, "gold", &w.db, pg.port, "[{kind: Table, schema: app, name: items}]", ", labels: {tier: gold}"),
        catalog_yaml(ns, "pinned", &w.db, pg.port, "[{kind: Table, schema: app, name: items}]", ", labels: {tier: gold}")
            .replace("  registrations:", "  reconcilePolicyRef: {name: z-report}\n  registrations:"),
    ));
    for c in ["wh", "gold", "pinned"] {
        w.check(c);
    }
    w.sql("DROP TABLE app.items;");
    let policy = |c: &str| {
        w.catalog(c)["status"]["effectivePolicy"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(
        (policy("wh"), policy("gold"), policy("pinned")),
        ("p".into(), "a-auto".into(), "z-report".into())
    );
    assert_eq!(World::states(&w.check("wh"))[0].1, "Stale");
    assert_eq!(World::states(&w.check("gold"))[0].1, "Removed");
    assert_eq!(World::states(&w.check("pinned"))[0].1, "Stale");
    for p in ["a-auto", "b-report"] {
        support::wait_ready(env, ns, &format!("reconcilepolicy/{p}"), "False", "Overlap");
    }
    let removal = eventually(Duration::from_secs(20), "removal event of gold", || {
        w.events("gold")
            .into_iter()
            .find(|e| e.0 == "RegistrationRemoved")
    });
    assert!(removal.2.contains("ReconcilePolicy a-auto"), "{removal:?}");
}

#[test]
fn models_bound_to_a_dropped_table_see_drift_from_the_round() {
    // Source-only visits (periodic checks off) are an hour apart here: only the round feeds.
    let w = World::new("drift", SETUP, "[]", REPORT, &["--drift-interval", "1h"]);
    let ns = w.ns();
    env().apply_ok(&format!(
        "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: home, namespace: {ns}}}\nspec: {{provider: managed, registrations: [{{kind: Schema, name: semantic}}]}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: m, namespace: {ns}}}\nspec:\n  catalog: home\n  schema: semantic\n  definition:\n    datasets: [{{name: o, source: wh.app.orders}}, {{name: i, source: wh.app.items}}]\n"
    ));
    support::wait_ready(env(), ns, "sm/m", "True", "Accepted");
    w.sql("DROP TABLE app.items;");
    // Nothing probes until a round runs (the policy's periodic checks are off) ...
    std::thread::sleep(Duration::from_secs(2));
    let sm = |w: &World| -> Value {
        serde_json::from_str(&env().kubectl_ok(&["get", "sm", "m", "-n", w.ns(), "-o", "json"]))
            .unwrap()
    };
    assert_eq!(condition(&sm(&w)["status"], "SourcesCurrent").0, "True");
    // ... and the round's answers feed the model.
    let s = w.check("wh");
    assert_eq!(
        s["lastCheck"]["probed"], 2,
        "the round probes the bound sources"
    );
    let status = eventually(Duration::from_secs(30), "SourceMissing", || {
        let st = sm(&w)["status"].clone();
        (condition(&st, "SourcesCurrent") == ("False".into(), "SourceDrift".into())).then_some(st)
    });
    assert_eq!(status["sourceDrift"][0]["dataset"], "i");
    assert_eq!(status["sourceDrift"][0]["kind"], "SourceMissing");
    assert_eq!(status["revision"], 1, "drift never rebinds");
    // Lineage keeps the topology and warns about the missing source.
    let (code, g) = w.api(
        "GET",
        &format!("/api/metalakes/{ns}/catalogs/home/schemas/semantic/semantic-models/m/lineage"),
        None,
    );
    assert_eq!(code, 200, "{g}");
    let items = g["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "wh.app.items")
        .unwrap()["id"]
        .clone();
    assert_eq!(
        g["warnings"],
        serde_json::json!([{"code": "SOURCE_UNAVAILABLE", "nodeId": items}])
    );
    assert_eq!(
        g["edges"].as_array().unwrap().len(),
        4,
        "2 BINDS + 2 CONTAINS"
    );
}

#[test]
fn a_restart_resumes_the_persisted_schedule_without_a_probe_storm() {
    let mut w = World::new(
        "restart",
        SETUP,
        "[{kind: Table, schema: app, name: items}]",
        // A year: no catalog's first visit can fall inside this test by chance.
        "enabled: true, interval: 8760h, jitter: 0.2, mode: AutoRemove",
        &[],
    );
    let ns = w.ns().to_string();
    let pg = postgres();
    let names: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
    let docs: Vec<String> = names
        .iter()
        .map(|n| {
            catalog_yaml(
                &ns,
                n,
                &w.db,
                pg.port,
                "[{kind: Table, schema: app, name: items}]",
                "",
            )
        })
        .collect();
    env().apply_ok(&docs.join("---\n"));
    let next = |w: &World, n: &str| {
        w.catalog(n)["status"]["nextCheckAt"]
            .as_str()
            .map(str::to_string)
    };
    let scheduled: Vec<String> =
        eventually(Duration::from_secs(60), "every catalog scheduled", || {
            names
                .iter()
                .map(|n| next(&w, n))
                .collect::<Option<Vec<_>>>()
        });
    // First visits are spread over the interval, not stacked.
    let distinct: std::collections::HashSet<_> = scheduled.iter().collect();
    assert_eq!(distinct.len(), names.len(), "{scheduled:?}");
    assert_eq!(
        w.op.metric("semops_check_rounds_total", &[]),
        0.0,
        "no round before its time"
    );

    w.op.kill();
    // While the operator is down, c0's time comes.
    env().kubectl_ok(&[
        "patch",
        "catalog",
        "c0",
        "-n",
        &ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"nextCheckAt":"2020-01-01T00:00:00Z"}}"#,
    ]);
    w.sql("DROP TABLE app.items;");
    w.op = Operator::start(
        env(),
        &env().kubeconfig,
        Some(&ns),
        &ns,
        &["--api-auth", "none"],
    );
    let c0 = eventually(Duration::from_secs(60), "c0's overdue round", || {
        let s = w.catalog("c0")["status"].clone();
        (s["lastCheck"]["trigger"] == "periodic").then_some(s)
    });
    assert_eq!(World::states(&c0)[0].1, "Removed");
    let resumed: k8s_openapi::jiff::Timestamp =
        c0["nextCheckAt"].as_str().unwrap().parse().unwrap();
    assert!(
        resumed > k8s_openapi::jiff::Timestamp::now(),
        "rescheduled one interval on: {resumed}"
    );
    std::thread::sleep(Duration::from_secs(5));
    for (n, before) in names.iter().zip(&scheduled).skip(1) {
        assert_eq!(next(&w, n).as_ref(), Some(before), "{n} kept its schedule");
        assert!(
            w.catalog(n)["status"]["lastCheck"].is_null(),
            "{n} was probed after the restart"
        );
    }
    assert_eq!(w.op.metric("semops_check_rounds_total", &[]), 1.0);
    assert!(
        w.op.metric("semops_probes_total", &[]) <= 2.0,
        "one batch and at most one id lookup"
    );
}

#[test]
fn the_report_and_reconcile_endpoints_follow_rbac_and_only_the_leader_records() {
    let mut w = World::new("rbac", SETUP, REGS, AUTO, &[]);
    let ns = w.ns().to_string();
    w.check("wh");
    w.sql("DROP TABLE app.items;");
    let env = env();
    // Two operators with authentication on instead: one leads, one follows.
    w.op.terminate();
    let a = Operator::start(env, &env.kubeconfig, Some(&ns), &ns, &[]);
    let b = Operator::start(env, &env.kubeconfig, Some(&ns), &ns, &[]);
    let (leader, follower) = eventually(Duration::from_secs(30), "a leader", || {
        match (a.is_leading(), b.is_leading()) {
            (true, false) => Some((&a, &b)),
            (false, true) => Some((&b, &a)),
            _ => None,
        }
    });
    let token = |name: &str, rules: &str| {
        env.apply_ok(&format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {name}, namespace: {ns}}}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {name}, namespace: {ns}}}\nrules: {rules}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {name}}}\nsubjects: [{{kind: ServiceAccount, name: {name}, namespace: {ns}}}]\n"
        ));
        env.kubectl_ok(&["create", "token", name, "-n", &ns])
            .trim()
            .to_string()
    };
    let viewer = token(
        "viewer",
        r#"[{apiGroups: [semops.io], resources: [catalogs], verbs: [get]}]"#,
    );
    let admin = token(
        "admin",
        r#"[{apiGroups: [semops.io], resources: [catalogs, catalogs/reconcile], verbs: [get, create]}]"#,
    );
    let nobody = token("nobody", "[]");
    let report = format!("/api/metalakes/{ns}/catalogs/wh/stale-entities");
    let reconcile = format!("/api/metalakes/{ns}/catalogs/wh/reconcile");
    let call = |op: &Operator, method: &str, path: &str, t: Option<&str>, body: Option<&str>| {
        let (code, body) = request(op.api_port, method, path, t, body);
        (
            code,
            serde_json::from_str::<Value>(&body).unwrap_or(Value::Null),
        )
    };
    assert_eq!(call(leader, "GET", &report, None, None).0, 401);
    assert_eq!(call(leader, "GET", &report, Some(&nobody), None).0, 403);
    let (code, r) = call(follower, "GET", &report, Some(&viewer), None);
    assert_eq!(code, 200, "any replica reports: {r}");
    assert_eq!(r["staleEntities"][0]["name"], "items");
    assert_eq!(
        call(leader, "POST", &reconcile, Some(&viewer), None).0,
        403,
        "reconcile needs create catalogs/reconcile"
    );
    let (code, r) = call(follower, "POST", &reconcile, Some(&admin), None);
    assert_eq!((code, r["type"].as_str()), (503, Some("NOT_LEADER")), "{r}");
    let (code, r) = call(
        follower,
        "POST",
        &reconcile,
        Some(&admin),
        Some(r#"{"dryRun": true}"#),
    );
    assert_eq!(code, 200, "a follower may dry-run: {r}");
    assert_eq!(
        call(leader, "POST", &reconcile, Some(&admin), Some("{nope")).0,
        400
    );
    assert_eq!(
        leader.metric("semops_registrations_removed_total", &[]),
        0.0
    );
    let (code, r) = call(leader, "POST", &reconcile, Some(&admin), None);
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["staleEntities"][0]["removed"], true);
    assert_eq!(
        call(
            leader,
            "GET",
            &format!("/api/metalakes/{ns}/catalogs/missing/stale-entities"),
            Some(&admin),
            None
        )
        .0,
        404
    );
}

//! Stale-registration rounds (docs/design.md#stale-registration-checks, docs/design.md#stale-reports-and-on-demand-rounds) against a real control plane and PostgreSQL:
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

/// AutoRemove on the first round that finds an object missing (the tests of `removeAfter`
/// itself set their own).
const AUTO: &str = "enabled: false, mode: AutoRemove, removeAfter: {misses: 1, grace: 0s}, kinds: [Schema, Table, View], probe: {timeout: 2s, concurrency: 2, batchSize: 2}";
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

/// `n` tables `bulk.t000…`: their names, the SQL creating them, and their registrations.
fn bulk_tables(n: usize) -> (Vec<String>, String, Vec<String>) {
    let tables: Vec<String> = (0..n).map(|i| format!("t{i:03}")).collect();
    let setup = format!(
        "CREATE SCHEMA bulk; {}",
        tables
            .iter()
            .map(|t| format!("CREATE TABLE bulk.{t}(id int);"))
            .collect::<String>()
    );
    let regs = tables
        .iter()
        .map(|t| format!("{{kind: Table, schema: bulk, name: {t}}}"))
        .collect();
    (tables, setup, regs)
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
    w.check("wh"); // returns once the round's Events are published
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
        r#"{"spec":{"mode":"AutoRemove","removeAfter":{"misses":1,"grace":"0s"}}}"#,
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
    // A dry run answers after it is done; it never writes.
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
    let restored: Vec<_> = w
        .events("wh")
        .into_iter()
        .filter(|e| e.0 == "RegistrationRestored")
        .collect();
    assert_eq!(restored.len(), 1, "{restored:?}");
    assert!(
        restored[0].1 == "semops-reconciler" && restored[0].2.contains("spec.registrations[3]"),
        "{restored:?}"
    );
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
    let (tables, setup, regs) = bulk_tables(200);
    let regs = format!("[{}]", regs.join(", "));
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
    let reconciler_events = |w: &World| -> Vec<(String, String)> {
        w.events("wh")
            .into_iter()
            .filter(|e| e.1 == "semops-reconciler")
            .map(|e| (e.0, e.2))
            .collect()
    };
    w.sql("DROP SCHEMA bulk CASCADE;");
    for round in 1..=4 {
        if round > 1 {
            // The cap counts per policy interval: rounds on demand (annotation or API) within
            // it remove nothing more.
            let s = w.check("wh");
            assert_eq!(
                s["lastCheck"]["removed"], 0,
                "round {round}: a forced round"
            );
            let (code, body) = w.api(
                "POST",
                &format!("/api/metalakes/{}/catalogs/wh/reconcile", w.ns()),
                Some("{}"),
            );
            assert_eq!(code, 200, "{body}");
            let status = &w.catalog("wh")["status"];
            assert_eq!(
                status["lastCheck"]["removed"], 0,
                "round {round}: an API round"
            );
            assert_eq!(
                status["removalWindow"]["removed"], 50,
                "the window's removals"
            );
            // The interval passes.
            w.age_removal_window("wh", Duration::from_secs(2 * 3600));
        }
        let s = w.check("wh");
        let states = World::states(&s);
        let removed = names_in(&states, "Removed");
        assert_eq!(removed.len(), 50 * round, "round {round}");
        assert_eq!(removed, tables[..50 * round].to_vec(), "spec order");
        assert_eq!(names_in(&states, "Stale").len(), 200 - 50 * round);
        assert_eq!(s["lastCheck"]["removed"], 50);
        // Each round has more than 20 transitions: exactly 20 Events and one summary of the
        // rest. Round 1: 200 became stale, 50 removed; later rounds: 50 removed.
        let events = reconciler_events(&w);
        assert_eq!(events.len(), 21 * round, "round {round}: {events:?}");
        let more = if round == 1 { 250 - 20 } else { 50 - 20 };
        let summaries: Vec<&(String, String)> = events
            .iter()
            .filter(|e| e.0 == "CheckRoundSummary")
            .collect();
        assert_eq!(summaries.len(), round);
        assert!(
            summaries.iter().any(|e| e
                .1
                .starts_with(&format!("{more} more registration change(s)"))),
            "round {round}: {summaries:?}"
        );
    }
    assert_eq!(w.removed_metric(), 200.0);
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
        "apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: a-auto, namespace: {ns}}}\nspec: {{enabled: false, mode: AutoRemove, removeAfter: {{misses: 1, grace: 0s}}, catalogSelector: {{matchLabels: {{tier: gold}}}}}}\n---\n\
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
    let sm = |w: &World| -> Value {
        serde_json::from_str(&env().kubectl_ok(&["get", "sm", "m", "-n", w.ns(), "-o", "json"]))
            .unwrap()
    };
    // Nothing probes until a round runs (the policy's periodic checks are off) ...
    let probes = w.op.metric("semops_probes_total", &[]);
    let mut seen = (probes, String::new());
    let quiet = support::holds_for(Duration::from_secs(2), || {
        seen = (
            w.op.metric("semops_probes_total", &[]),
            condition(&sm(&w)["status"], "SourcesCurrent").0,
        );
        seen.0 == probes && seen.1 == "True"
    });
    assert!(
        quiet,
        "no probe and no drift before a round: probes {probes} -> {}, SourcesCurrent {:?}\n{}",
        seen.0,
        seen.1,
        w.op.logs()
    );
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
        "enabled: true, interval: 8760h, jitter: 0.2, mode: AutoRemove, removeAfter: {misses: 1, grace: 0s}",
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
    support::stays(
        Duration::from_secs(5),
        "the other catalogs keep their schedule and are not probed",
        || {
            names.iter().zip(&scheduled).skip(1).all(|(n, before)| {
                next(&w, n).as_ref() == Some(before)
                    && w.catalog(n)["status"]["lastCheck"].is_null()
            })
        },
    );
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
    let viewer = env.service_account_token(
        &ns,
        "viewer",
        r#"[{apiGroups: [semops.io], resources: [catalogs], verbs: [get]}]"#,
        &[("get", "catalogs.semops.io")],
    );
    let admin = env.service_account_token(
        &ns,
        "admin",
        r#"[{apiGroups: [semops.io], resources: [catalogs, catalogs/reconcile], verbs: [get, create]}]"#,
        &[("get", "catalogs.semops.io"), ("create", "catalogs.semops.io --subresource=reconcile")],
    );
    let nobody = env.service_account_token(&ns, "nobody", "[]", &[]);
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

/// Three catalogs with rounds of about a second each, asked for at the same instant, plus an
/// API round of one of them: with `--max-concurrent-rounds 1` the operator's own log shows them
/// one after another; with 3 they overlap (so the measurement can see overlap); rounds of one
/// catalog never overlap.
#[test]
fn rounds_respect_the_global_bound_and_one_round_per_catalog() {
    use support::checks::{logged_rounds, most_at_once};
    let (_, setup, regs) = bulk_tables(800);
    let regs = format!("[{}]", regs.join(", "));
    // One probe per batch, one batch at a time: a round is hundreds of requests.
    let policy = "enabled: false, mode: ReportOnly, probe: {concurrency: 1, batchSize: 1}";
    let run = |bound: &str| {
        let w = World::new(
            "bound",
            &setup,
            &regs,
            policy,
            &["--max-concurrent-rounds", bound],
        );
        for c in ["wh2", "wh3"] {
            env().apply_ok(&catalog_yaml(w.ns(), c, &w.db, postgres().port, &regs, ""));
        }
        env().kubectl_ok(&[
            "annotate",
            "catalog",
            "wh",
            "wh2",
            "wh3",
            "-n",
            w.ns(),
            "semops.io/check-requested=together",
        ]);
        let (code, body) = w.api(
            "POST",
            &format!("/api/metalakes/{}/catalogs/wh/reconcile", w.ns()),
            Some(r#"{"dryRun": false}"#),
        );
        assert_eq!(code, 200, "{body}");
        eventually(Duration::from_secs(120), "four rounds logged", || {
            (logged_rounds(&w.op).len() >= 4).then_some(())
        });
        let rounds = logged_rounds(&w.op);
        let of_wh: Vec<_> = rounds
            .iter()
            .filter(|r| r.catalog == "wh")
            .cloned()
            .collect();
        assert_eq!(of_wh.len(), 2, "{rounds:?}");
        assert_eq!(
            most_at_once(&of_wh),
            1,
            "two rounds of one catalog overlapped"
        );
        most_at_once(&rounds)
    };
    assert_eq!(run("1"), 1, "--max-concurrent-rounds 1 let rounds overlap");
    assert!(
        run("3") > 1,
        "rounds never overlapped: the measurement cannot see overlap"
    );
}

/// A round whose one status write is refused (the Catalog changed while it probed) commits
/// nothing: no removal, no Event, no metric; the retry that follows removes once.
#[test]
fn a_refused_commit_removes_nothing_and_the_retry_removes_once() {
    let w = World::new(
        "refused",
        "CREATE SCHEMA app; CREATE TABLE app.orders(id int); CREATE TABLE app.items(id int);",
        "[{kind: Table, schema: app, name: orders}, {kind: Table, schema: app, name: items}]",
        "enabled: false, mode: AutoRemove, removeAfter: {misses: 1, grace: 0s}, probe: {timeout: 8s}",
        &[],
    );
    w.check("wh");
    w.sql("DROP TABLE app.items;");
    // Hold pg_class for 3 s so the next round's probe waits inside the round ...
    let (db, port) = (w.db.clone(), postgres().port);
    let holder = std::thread::spawn(move || {
        let out = std::process::Command::new("psql")
            .env("PGPASSWORD", postgres().admin_password)
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres", "-d", &db, "-c"])
            .arg("BEGIN; LOCK TABLE pg_catalog.pg_class IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(3); COMMIT;")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    eventually(Duration::from_secs(10), "pg_class locked", || {
        let out = std::process::Command::new("psql")
            .env("PGPASSWORD", postgres().admin_password)
            .args(["-h", "127.0.0.1", "-p", &postgres().port.to_string(), "-U", "postgres", "-d", "postgres", "-tAc"])
            .arg(format!("SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE d.datname = '{}' AND l.relation = 'pg_catalog.pg_class'::regclass AND l.mode = 'AccessExclusiveLock' AND l.granted", w.db))
            .output()
            .unwrap();
        (String::from_utf8_lossy(&out.stdout).trim() == "1").then_some(())
    });
    let conflicts = || {
        w.op.metric(
            "semops_reconcile_errors_by_category_total",
            &["category=\"Conflict\""],
        )
    };
    let before = conflicts();
    env().kubectl_ok(&[
        "annotate",
        "catalog",
        "wh",
        "-n",
        w.ns(),
        "semops.io/check-requested=locked",
        "--overwrite",
    ]);
    // ... and change the Catalog while it waits: its status write is refused (409).
    eventually(
        Duration::from_secs(10),
        "the round waiting on the lock",
        || {
            let out = std::process::Command::new("psql")
            .env("PGPASSWORD", postgres().admin_password)
            .args(["-h", "127.0.0.1", "-p", &postgres().port.to_string(), "-U", "postgres", "-d", "postgres", "-tAc"])
            .arg(format!("SELECT count(*) FROM pg_stat_activity WHERE datname = '{}' AND application_name = 'semops' AND wait_event_type = 'Lock'", w.db))
            .output()
            .unwrap();
            (String::from_utf8_lossy(&out.stdout).trim() != "0").then_some(())
        },
    );
    env().kubectl_ok(&["label", "catalog", "wh", "-n", w.ns(), "touched=yes"]);
    holder.join().unwrap();
    let s = eventually(Duration::from_secs(60), "the retried round", || {
        let s = w.catalog("wh")["status"].clone();
        (s["lastCheck"]["trigger"] == "annotation:locked").then_some(s)
    });
    assert!(
        conflicts() > before,
        "no status write was refused: the test proved nothing"
    );
    assert_eq!(World::states(&s)[1], ("items".into(), "Removed".into()));
    let removed: Vec<_> = w
        .events("wh")
        .into_iter()
        .filter(|e| e.0 == "RegistrationRemoved")
        .collect();
    assert_eq!(
        removed.len(),
        1,
        "the refused round published an Event: {removed:?}"
    );
    assert_eq!(w.removed_metric(), 1.0);
}

#[test]
fn one_invalid_registration_among_a_hundred_is_set_apart_and_the_round_goes_on() {
    let (_, setup, regs) = bulk_tables(100);
    // 70 bytes: PostgreSQL truncates names to 63, so no table can carry it, and probing it
    // must not fail the other 100.
    let long = "x".repeat(70);
    let regs = format!(
        "[{}, {{kind: Table, schema: bulk, name: {long}}}]",
        regs.join(", ")
    );
    let w = World::new("invalid", &setup, &regs, AUTO, &[]);
    let s = w.check("wh");
    let states = World::states(&s);
    assert_eq!(names_in(&states, "Live").len(), 100);
    assert_eq!(names_in(&states, "Invalid"), vec![long.clone()]);
    assert_eq!(s["lastCheck"]["result"], "Completed");
    assert_eq!(
        s["lastCheck"]["probed"], 100,
        "the invalid name is never probed"
    );
    let invalid = &s["registrations"][100];
    assert!(
        invalid["message"]
            .as_str()
            .unwrap()
            .contains("at most 63 bytes"),
        "{invalid}"
    );
    assert_eq!(
        condition(&s, "RegistrationsCurrent"),
        ("False".into(), "InvalidRegistrations".into())
    );
    let events = w.events("wh");
    assert!(
        events
            .iter()
            .any(|e| e.0 == "InvalidRegistration" && e.2.contains("spec.registrations[100]")),
        "{events:?}"
    );
    // A second round: still Invalid, no second Event.
    w.check("wh");
    let again = w
        .events("wh")
        .iter()
        .filter(|e| e.0 == "InvalidRegistration")
        .count();
    assert_eq!(again, 1);
}

#[test]
fn a_dropped_table_is_withdrawn_only_after_the_misses_and_the_grace() {
    let w = World::new(
        "grace",
        "CREATE SCHEMA app; CREATE TABLE app.a(id int); CREATE TABLE app.b(id int);",
        "[{kind: Table, schema: app, name: a}, {kind: Table, schema: app, name: b}]",
        "enabled: false, mode: AutoRemove, removeAfter: {misses: 3, grace: 6s}",
        &[],
    );
    w.check("wh");
    w.sql("DROP TABLE app.a;");
    let state_of_a = |s: &Value| {
        (
            s["registrations"][0]["state"].as_str().unwrap().to_string(),
            s["registrations"][0]["misses"].as_i64(),
        )
    };
    let first = w.check("wh");
    assert_eq!(state_of_a(&first), ("Stale".into(), Some(1)));
    // Misses count up, and nothing is removed within the grace even past the misses. Whether a
    // round ran within the grace is judged from the operator's own record (when the round
    // started, when the object was first missed), never from this test's clock. Both are
    // recorded to the second, so a removal must come at least 5 s after the first miss.
    let seconds = |v: &Value| {
        v.as_str()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map(|t| t.as_second())
            .expect("a recorded time")
    };
    let first_missed = seconds(&first["registrations"][0]["missingSince"]);
    for misses in 2..=4 {
        let s = w.check("wh");
        let into_grace = seconds(&s["lastCheck"]["startedAt"]) - first_missed;
        match s["registrations"][0]["state"].as_str() {
            Some("Stale") => assert_eq!(state_of_a(&s), ("Stale".into(), Some(misses))),
            Some("Removed") => assert!(
                misses >= 3 && into_grace >= 5,
                "removed at miss {misses}, {into_grace} s into a 6 s grace"
            ),
            other => panic!("state {other:?} at miss {misses}"),
        }
    }
    // The table comes back: the count starts over.
    w.sql("CREATE TABLE app.a(id int);");
    let back = w.check("wh");
    assert_eq!(state_of_a(&back), ("Live".into(), None));
    w.sql("DROP TABLE app.a;");
    let again = w.check("wh");
    assert_eq!(state_of_a(&again), ("Stale".into(), Some(1)));
    let since = std::time::Instant::now();
    w.check("wh");
    w.check("wh");
    // Three misses; wait out the grace from the first of them.
    std::thread::sleep(
        Duration::from_secs(6).saturating_sub(since.elapsed()) + Duration::from_millis(500),
    );
    let s = w.check("wh");
    assert_eq!(s["registrations"][0]["state"], "Removed");
    assert_eq!(s["registrations"][1]["state"], "Live");
    assert_eq!(w.removed_metric(), 1.0);
}

#[test]
fn another_database_answering_removes_nothing_until_it_is_accepted() {
    let w = World::new(
        "moved",
        "CREATE SCHEMA app; CREATE TABLE app.a(id int); CREATE TABLE app.b(id int);",
        "[{kind: Table, schema: app, name: a}, {kind: Table, schema: app, name: b}]",
        AUTO,
        &[],
    );
    let before = w.check("wh");
    let recorded = before["server"].as_str().unwrap().to_string();
    assert!(recorded.starts_with("pg:"), "{recorded}");
    // Another database of the same server, holding only app.a, grants the reader CONNECT.
    let pg = postgres();
    let other = format!("{}x", w.db);
    pg.psql("postgres", &format!("CREATE DATABASE {other}"));
    pg.psql(&other, "CREATE SCHEMA app; CREATE TABLE app.a(id int);");
    let point_at = |db: &str| {
        env().merge_patch(
            w.ns(),
            "catalog/wh",
            &format!(r#"{{"spec":{{"connection":{{"database":"{db}"}}}}}}"#),
        )
    };
    point_at(&other);
    let s = w.check("wh");
    assert_eq!(s["lastCheck"]["result"], "CatalogChanged");
    assert_eq!(
        World::states(&s),
        vec![("a".into(), "Live".into()), ("b".into(), "Live".into())],
        "nothing changes state on another server"
    );
    assert_eq!(s["server"], recorded.as_str());
    let (status, reason) = condition(&s, "RegistrationsCurrent");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "CatalogChanged")
    );
    // Rounds go on changing nothing (and warn once).
    let s = w.check("wh");
    assert_eq!(s["lastCheck"]["result"], "CatalogChanged");
    let warned = w
        .events("wh")
        .iter()
        .filter(|e| e.0 == "CatalogChanged")
        .count();
    assert_eq!(warned, 1);
    assert_eq!(w.removed_metric(), 0.0);

    // Accepting the new server: the round that meets it records it and removes nothing; the
    // next one applies the policy.
    let message = condition_message(&s, "RegistrationsCurrent");
    let answering = message
        .split("semops.io/accept-server=")
        .nth(1)
        .unwrap()
        .trim()
        .to_string();
    assert_ne!(answering, recorded);
    env().kubectl_ok(&[
        "annotate",
        "catalog",
        "wh",
        "-n",
        w.ns(),
        &format!("semops.io/accept-server={answering}"),
    ]);
    let s = w.check("wh");
    assert_eq!(s["lastCheck"]["result"], "Completed");
    assert_eq!(s["server"], answering.as_str());
    assert_eq!(
        World::states(&s),
        vec![("a".into(), "Live".into()), ("b".into(), "Stale".into())]
    );
    assert_eq!(s["lastCheck"]["removed"], 0);
    let s = w.check("wh");
    assert_eq!(s["registrations"][1]["state"], "Removed");

    // Back to the first database, where everything exists: adopted without a person.
    point_at(&w.db);
    let s = w.check("wh");
    assert_eq!(s["lastCheck"]["result"], "Completed");
    assert_eq!(s["server"], recorded.as_str());
    assert!(w.events("wh").iter().any(|e| e.0 == "ServerAdopted"));
}

fn condition_message(status: &Value, type_: &str) -> String {
    status["conditions"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["type"] == type_))
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string()
}

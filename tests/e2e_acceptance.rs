//! SemanticModel acceptance against a real control plane and PostgreSQL: every lifecycle row of
//! the association table and every identity rule of docs/design.md (Source associations and
//! drift, Metric identities), the revision transaction under a crash, concurrent edits.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;
use support::checks::condition;
use support::db::{postgres, unique};
use support::{Operator, env, eventually, examples_in, wait_ready};

/// A test's world: a namespace with the example catalogs, an operator, and its own PostgreSQL
/// schema in the `hr` database.
struct World {
    ns: support::Namespace,
    schema: String,
    op: Operator,
}

impl World {
    fn new(prefix: &str) -> World {
        World::with_operator_args(prefix, &[])
    }

    fn with_operator_args(prefix: &str, args: &[&str]) -> World {
        let env = env();
        let ns = env.namespace(prefix);
        let schema = format!("s{}", unique());
        postgres().psql("hr", &format!("CREATE SCHEMA {schema}; CREATE TABLE {schema}.employees(id int PRIMARY KEY, manager_id int, name text); CREATE TABLE {schema}.departments(id int PRIMARY KEY, name text);"));
        let catalogs: String = examples_in(&ns.name)
            .split("\n---\n")
            .filter(|d| !d.contains("kind: SemanticModel"))
            .collect::<Vec<_>>()
            .join("\n---\n");
        env.apply_ok(&catalogs);
        let op = Operator::start(env, &env.kubeconfig, Some(&ns.name), &ns.name, args);
        World { ns, schema, op }
    }

    fn ns(&self) -> &str {
        &self.ns.name
    }

    fn sql(&self, sql: &str) {
        postgres().psql("hr", &sql.replace("$S", &self.schema));
    }

    /// Applies model `name` with the given datasets / metrics YAML (flow style) and extra spec.
    fn apply(&self, name: &str, datasets: &str, metrics: &str, extra: &str) {
        let yaml = format!(
            "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  catalog: analytics\n  schema: semantic\n{extra}  definition:\n    datasets: {datasets}\n    metrics: {metrics}\n",
            ns = self.ns(),
            datasets = datasets.replace("$S", &self.schema),
        );
        env().apply_ok(&yaml);
    }

    fn status(&self, name: &str) -> Value {
        let out = env().kubectl_ok(&["get", "sm", name, "-n", self.ns(), "-o", "json"]);
        serde_json::from_str::<Value>(&out).unwrap()["status"].clone()
    }

    /// Waits for revision `n` to be accepted and returns the status.
    fn accepted(&self, name: &str, n: i64) -> Value {
        eventually(
            Duration::from_secs(60),
            &format!("{name} revision {n}"),
            || {
                let s = self.status(name);
                let ready = s["conditions"]
                    .as_array()?
                    .iter()
                    .find(|c| c["type"] == "Ready")?
                    .clone();
                (s["revision"] == n && ready["status"] == "True" && ready["reason"] == "Accepted")
                    .then_some(s)
            },
        )
    }
}

fn metric_ids(status: &Value) -> Vec<(String, String)> {
    status["metrics"].as_array().map_or(vec![], |a| {
        a.iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap().to_string(),
                    m["id"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    })
}

fn associations(status: &Value) -> Vec<(String, String, String)> {
    status["sourceAssociations"].as_array().map_or(vec![], |a| {
        a.iter()
            .map(|x| {
                (
                    x["dataset"].as_str().unwrap().into(),
                    x["source"]["name"].as_str().unwrap().into(),
                    x["id"].as_str().unwrap().into(),
                )
            })
            .collect()
    })
}

fn metric(name: &str, expr: &str) -> String {
    format!(
        "{{name: {name}, expression: {{dialects: [{{dialect: ANSI_SQL, expression: \"{expr}\"}}]}}}}"
    )
}

const TWO_ON_ONE: &str = "[{name: employee, source: hr.$S.employees, primaryKey: [id]}, {name: manager, source: hr.$S.employees}]";

#[test]
fn acceptance_writes_a_revision_and_two_datasets_on_one_source_give_two_entries() {
    let w = World::new("acc");
    w.apply(
        "m",
        TWO_ON_ONE,
        &format!("[{}]", metric("headcount", "COUNT(*)")),
        "",
    );
    let s = w.accepted("m", 1);
    let a = associations(&s);
    assert_eq!(a.len(), 2);
    assert_eq!((a[0].0.as_str(), a[1].0.as_str()), ("employee", "manager"));
    assert_eq!(a[0].2, a[1].2, "one source, one id");
    assert!(
        s["sourceAssociations"][0]["type"] == "TABLE"
            && s["sourceAssociations"][0]["revision"] == 1
    );
    let ids = metric_ids(&s);
    assert_eq!(
        uuid::Uuid::parse_str(&ids[0].1).unwrap().get_version_num(),
        7,
        "metric ids are UUIDv7"
    );
    let rev = env().kubectl_ok(&[
        "get",
        "controllerrevision",
        "m-r1",
        "-n",
        w.ns(),
        "-o",
        "json",
    ]);
    let rev: Value = serde_json::from_str(&rev).unwrap();
    assert_eq!(
        rev["metadata"]["ownerReferences"][0]["kind"],
        "SemanticModel"
    );
    assert_eq!(
        rev["metadata"]["labels"]["semops.io/model-uid"],
        env().kubectl_ok(&[
            "get",
            "sm",
            "m",
            "-n",
            w.ns(),
            "-o",
            "jsonpath={.metadata.uid}"
        ])
    );
    assert_eq!(rev["data"]["definition"]["datasets"][0]["name"], "employee");
    assert_eq!(s["acceptedGeneration"], 1);
    // The Accepted Event is posted by the background poster, after the status write.
    let accepted = eventually(Duration::from_secs(20), "the Accepted Event", || {
        let out = env().kubectl_ok(&["get", "events.events.k8s.io", "-n", w.ns(), "-o", "json"]);
        let v: Value = serde_json::from_str(&out).unwrap();
        let notes: Vec<(String, String, String)> = v["items"]
            .as_array()?
            .iter()
            .filter(|e| e["regarding"]["kind"] == "SemanticModel" && e["regarding"]["name"] == "m")
            .filter(|e| e["reason"] == "Accepted")
            .map(|e| {
                let text = |k: &str| e[k].as_str().unwrap_or("").to_string();
                (text("note"), text("reportingController"), text("type"))
            })
            .collect();
        (!notes.is_empty()).then_some(notes)
    });
    assert_eq!(accepted.len(), 1, "one Accepted Event: {accepted:?}");
    assert!(
        accepted[0].0.starts_with("revision 1 accepted")
            && accepted[0].1 == "semops"
            && accepted[0].2 == "Normal",
        "{accepted:?}"
    );
}

#[test]
fn a_renamed_source_keeps_its_id_and_a_rebind_follows_the_new_name() {
    let w = World::new("rename");
    w.apply("m", TWO_ON_ONE, "[]", "");
    let before = associations(&w.accepted("m", 1));
    w.sql("ALTER TABLE $S.employees RENAME TO staff;");
    w.apply("m", &TWO_ON_ONE.replace("employees", "staff"), "[]", "");
    let after = associations(&w.accepted("m", 2));
    assert_eq!(after[0].1, "staff");
    assert_eq!(after[0].2, before[0].2, "the renamed table kept its id");
}

#[test]
fn a_dropped_source_keeps_the_association_and_a_rebind_refuses_without_losing_the_accepted_revision()
 {
    let w = World::new("drop");
    w.apply("m", TWO_ON_ONE, "[]", "");
    let before = associations(&w.accepted("m", 1));
    w.sql("DROP TABLE $S.employees;");
    w.apply("m", TWO_ON_ONE, "[]", "  rebind: \"after-drop\"\n");
    let message = wait_ready(env(), w.ns(), "sm/m", "False", "SourceNotFound");
    assert!(
        message.contains("dataset \"employee\"")
            && message.contains("spec.definition.datasets[0].source"),
        "{message}"
    );
    let s = w.status("m");
    assert_eq!(s["revision"], 1, "the accepted revision keeps serving");
    assert_eq!(associations(&s), before);
}

#[test]
fn a_name_reused_by_another_object_gets_the_new_id_on_rebind() {
    let w = World::new("reuse");
    w.apply("m", TWO_ON_ONE, "[]", "");
    let before = associations(&w.accepted("m", 1));
    w.sql(
        "DROP TABLE $S.employees; CREATE TABLE $S.employees(id int PRIMARY KEY, manager_id int);",
    );
    w.apply("m", TWO_ON_ONE, "[]", "  rebind: \"recreated\"\n");
    let after = associations(&w.accepted("m", 2));
    assert_ne!(after[0].2, before[0].2, "a recreated table has a new id");
    assert_eq!(after[0].2, after[1].2);
}

#[test]
fn datasets_renamed_removed_or_reordered_rebuild_the_whole_set() {
    let w = World::new("datasets");
    w.apply(
        "m",
        "[{name: a, source: hr.$S.employees}, {name: b, source: hr.$S.departments}]",
        "[]",
        "",
    );
    let first = associations(&w.accepted("m", 1));
    w.apply(
        "m",
        "[{name: d, source: hr.$S.departments}, {name: a2, source: hr.$S.employees}]",
        "[]",
        "",
    );
    let second = associations(&w.accepted("m", 2));
    let names: Vec<&str> = second.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(names, vec!["d", "a2"]);
    assert_eq!(
        second[1].2, first[0].2,
        "same source, same id, whatever the dataset is called"
    );
    assert!(
        w.status("m")["sourceAssociations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["revision"] == 2)
    );
}

#[test]
fn metric_identities_follow_the_design_table() {
    let w = World::new("ids");
    w.apply(
        "m",
        TWO_ON_ONE,
        &format!("[{}, {}]", metric("a", "1"), metric("b", "2")),
        "",
    );
    let r1 = metric_ids(&w.accepted("m", 1));

    // Expression and order changed, same names: ids kept.
    w.apply(
        "m",
        TWO_ON_ONE,
        &format!("[{}, {}]", metric("b", "20"), metric("a", "10")),
        "",
    );
    let r2 = metric_ids(&w.accepted("m", 2));
    assert_eq!(r2, vec![r1[1].clone(), r1[0].clone()]);

    // New name: new id. Removed name: retired.
    w.apply(
        "m",
        TWO_ON_ONE,
        &format!("[{}, {}]", metric("a", "10"), metric("c", "3")),
        "",
    );
    let s3 = w.accepted("m", 3);
    let r3 = metric_ids(&s3);
    assert_eq!(r3[0], r1[0]);
    assert!(!r1.iter().any(|(_, id)| *id == r3[1].1), "c got a fresh id");
    assert_eq!(s3["retiredMetrics"][0]["id"], r1[1].1.as_str());

    // A removed name reintroduced: a new id, never the retired one.
    w.apply(
        "m",
        TWO_ON_ONE,
        &format!(
            "[{}, {}, {}]",
            metric("a", "10"),
            metric("c", "3"),
            metric("b", "2")
        ),
        "",
    );
    let r4 = metric_ids(&w.accepted("m", 4));
    assert_ne!(r4[2].1, r1[1].1);

    // Comment, properties and model rename keep every id (preserve: no re-resolution).
    w.apply(
        "m",
        TWO_ON_ONE,
        &format!(
            "[{}, {}, {}]",
            metric("a", "10"),
            metric("c", "3"),
            metric("b", "2")
        ),
        "  name: renamed_model\n  comment: new\n  properties: {team: x}\n",
    );
    let s5 = w.accepted("m", 5);
    assert_eq!(metric_ids(&s5), r4);
    assert_eq!(s5["modelName"], "renamed_model");
    assert!(
        s5["sourceAssociations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["revision"] == 4),
        "preserve keeps associations as they are"
    );
}

#[test]
fn a_model_deleted_and_recreated_gets_new_ids_and_its_old_revisions_are_collected() {
    let w = World::new("recreate");
    w.apply("m", TWO_ON_ONE, &format!("[{}]", metric("a", "1")), "");
    let old = metric_ids(&w.accepted("m", 1));
    env().kubectl_ok(&["delete", "sm", "m", "-n", w.ns()]);
    w.apply("m", TWO_ON_ONE, &format!("[{}]", metric("a", "1")), "");
    let new = metric_ids(&w.accepted("m", 1));
    assert_ne!(new[0].1, old[0].1, "a recreated model has all new ids");
    let uid = env().kubectl_ok(&[
        "get",
        "sm",
        "m",
        "-n",
        w.ns(),
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let label = env().kubectl_ok(&[
        "get",
        "controllerrevision",
        "m-r1",
        "-n",
        w.ns(),
        "-o",
        "jsonpath={.metadata.labels.semops\\.io/model-uid}",
    ]);
    assert_eq!(label, uid, "r1 belongs to the new model");
}

#[test]
fn the_revision_history_is_bounded() {
    let w = World::new("history");
    for i in 1..=12 {
        w.apply("m", TWO_ON_ONE, "[]", &format!("  comment: \"edit {i}\"\n"));
        w.accepted("m", i);
    }
    let names = env().kubectl_ok(&[
        "get",
        "controllerrevision",
        "-n",
        w.ns(),
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    let mut names: Vec<&str> = names.split_whitespace().collect();
    names.sort_by_key(|n| n[3..].parse::<i32>().unwrap());
    assert_eq!(
        names,
        (3..=12).map(|i| format!("m-r{i}")).collect::<Vec<_>>()
    );
}

#[test]
fn an_unreachable_catalog_leaves_acceptance_pending_and_the_accepted_revision_serving() {
    let w = World::new("pending");
    w.apply("m", TWO_ON_ONE, &format!("[{}]", metric("a", "1")), "");
    let accepted = w.accepted("m", 1);
    let (refused, _held) = support::refused_port();
    env().kubectl_ok(&[
        "patch",
        "cat/hr",
        "-n",
        w.ns(),
        "--type=merge",
        "-p",
        &format!("{{\"spec\":{{\"connection\":{{\"port\":{refused}}}}}}}"),
    ]);
    w.apply(
        "m",
        TWO_ON_ONE,
        &format!("[{}, {}]", metric("a", "1"), metric("b", "2")),
        "",
    );
    let message = wait_ready(env(), w.ns(), "sm/m", "False", "CatalogUnreachable");
    assert!(
        message.contains("\"hr\"") && message.contains("Unreachable"),
        "{message}"
    );
    let s = w.status("m");
    assert_eq!(
        (s["revision"].clone(), metric_ids(&s)),
        (accepted["revision"].clone(), metric_ids(&accepted))
    );
}

/// The catalogs and the employee model of the examples in a fresh namespace, and an operator
/// armed to die between the revision write and the status commit, run until it did.
fn crashed_after_revision(prefix: &str) -> support::Namespace {
    let env = env();
    let ns = env.namespace(prefix);
    env.apply_ok(&examples_in(&ns.name));
    let crashing = Operator::start_unready(
        env,
        &ns.name,
        &["--leader-elect=false"],
        &[("SEMOPS_FAILPOINT", "after-revision")],
    );
    // The bound only limits how long a failure takes to report; a failure says what the
    // objects and the operator showed.
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    while !crashing.exited() {
        if std::time::Instant::now() > deadline {
            panic!(
                "the failpoint did not fire in 180 s\n--- objects:\n{}\n--- operator log:\n{}",
                env.kubectl_ok(&["get", "sm,cat", "-n", &ns.name, "-o", "yaml"]),
                crashing.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        crashing.logs().contains("failpoint hit"),
        "{}",
        crashing.logs()
    );
    env.kubectl_ok(&[
        "get",
        "controllerrevision",
        "employee-analysis-r1",
        "-n",
        &ns.name,
    ]);
    assert_eq!(
        support::jsonpath(env, &ns.name, "sm/employee-analysis", "{.status.revision}"),
        "",
        "nothing was committed"
    );
    ns
}

fn revision_snapshot(ns: &str, name: &str) -> String {
    env().kubectl_ok(&[
        "get",
        "controllerrevision",
        name,
        "-n",
        ns,
        "-o",
        "jsonpath={.data.snapshotHash}",
    ])
}

#[test]
fn a_crash_between_revision_and_commit_is_recovered_by_reusing_the_left_over_revision() {
    let env = env();
    let ns = crashed_after_revision("crash");
    let ns = ns.name.as_str();
    let left_over_uid = support::jsonpath(
        env,
        ns,
        "controllerrevision/employee-analysis-r1",
        "{.metadata.uid}",
    );
    let _op = Operator::start(
        env,
        &env.kubeconfig,
        Some(ns),
        ns,
        &["--leader-elect=false"],
    );
    wait_ready(env, ns, "sm/employee-analysis", "True", "Accepted");
    assert_eq!(
        support::jsonpath(env, ns, "sm/employee-analysis", "{.status.revision}"),
        "1"
    );
    assert_eq!(
        support::jsonpath(
            env,
            ns,
            "controllerrevision/employee-analysis-r1",
            "{.metadata.uid}"
        ),
        left_over_uid,
        "the same snapshot: the left-over revision was reused, not rewritten"
    );
    // The retry minted fresh ids; it must commit the ones the reused revision recorded, or the
    // history would name ids the model never had.
    let recorded: Value = serde_json::from_str(&env.kubectl_ok(&[
        "get",
        "controllerrevision",
        "employee-analysis-r1",
        "-n",
        ns,
        "-o",
        "jsonpath={.data}",
    ]))
    .unwrap();
    let committed = metric_ids(
        &serde_json::from_str::<Value>(&support::jsonpath(
            env,
            ns,
            "sm/employee-analysis",
            "{.status}",
        ))
        .unwrap(),
    );
    assert!(!committed.is_empty());
    assert_eq!(committed, metric_ids(&recorded));
    // The cache drops kubectl's last-applied copy; the object keeps it through status writes.
    assert!(
        support::jsonpath(env, ns, "sm/employee-analysis", "{.metadata.annotations}")
            .contains("kubectl.kubernetes.io/last-applied-configuration")
    );
    let revisions = env.kubectl_ok(&["get", "controllerrevision", "-n", ns, "-o", "name"]);
    assert_eq!(revisions.lines().count(), 1, "{revisions}");
}

#[test]
fn a_crash_between_revision_and_commit_followed_by_an_edit_replaces_the_left_over_revision() {
    let env = env();
    let ns = crashed_after_revision("crashedit");
    let ns = ns.name.as_str();
    let left_over = revision_snapshot(ns, "employee-analysis-r1");
    // The definition changes before anyone commits r1: r1 holds a snapshot nobody will name.
    env.apply_ok(
        &examples_in(ns)
            .split("\n---\n")
            .find(|d| d.contains("kind: SemanticModel"))
            .unwrap()
            .replace("name: headcount", "name: employees_total"),
    );
    let _op = Operator::start(
        env,
        &env.kubeconfig,
        Some(ns),
        ns,
        &["--leader-elect=false"],
    );
    wait_ready(env, ns, "sm/employee-analysis", "True", "Accepted");
    let status: Value = serde_json::from_str(&support::jsonpath(
        env,
        ns,
        "sm/employee-analysis",
        "{.status}",
    ))
    .unwrap();
    assert_eq!(status["revision"], 1);
    let committed = revision_snapshot(ns, "employee-analysis-r1");
    assert_ne!(committed, left_over, "the left-over revision was replaced");
    assert_eq!(committed, status["snapshotHash"].as_str().unwrap());
    let metric = support::jsonpath(
        env,
        ns,
        "controllerrevision/employee-analysis-r1",
        "{.data.definition.metrics[0].name}",
    );
    assert_eq!(
        metric, "employees_total",
        "r1 holds the definition status names"
    );
    assert_eq!(metric_ids(&status)[0].0, "employees_total");
}

#[test]
fn concurrent_edits_while_the_operator_writes_never_duplicate_an_id() {
    let w = World::new("edits");
    w.apply("m", TWO_ON_ONE, &format!("[{}]", metric("m0", "0")), "");
    w.accepted("m", 1);
    let mut names = vec!["m0".to_string()];
    for i in 1..=15 {
        names.push(format!("m{i}"));
        let metrics: Vec<String> = names.iter().map(|n| metric(n, "1")).collect();
        w.apply("m", TWO_ON_ONE, &format!("[{}]", metrics.join(", ")), "");
    }
    let s = eventually(Duration::from_secs(90), "the last edit accepted", || {
        let s = w.status("m");
        (s["acceptedGeneration"] == s["observedGeneration"] && metric_ids(&s).len() == names.len())
            .then_some(s)
    });
    let ids = metric_ids(&s);
    let unique: HashSet<&String> = ids.iter().map(|(_, id)| id).collect();
    assert_eq!(unique.len(), ids.len(), "duplicated ids: {ids:?}");
    assert!(w.op.metric("semops_status_writes_total", &[]) >= 2.0);
}

#[test]
fn an_ossie_document_is_imported_and_accepted_against_real_tables() {
    use semops::ossie::interchange::{ImportTarget, import};
    let env = env();
    let ns = env.namespace("ossie");
    let ns = ns.name.as_str();
    let path = format!("{}/tests/fixtures/ossie/bike-shop-0.2.yaml", support::ROOT);
    let doc: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let models = import(
        &doc,
        &ImportTarget {
            namespace: Some(ns.to_string()),
            catalog: "analytics".into(),
            schema: "semantic".into(),
            source_catalog: None,
            source_schema: None,
        },
    )
    .unwrap();
    let def = &models[0].spec.definition;

    // Tables for the fixture: every key and relationship column of each dataset's source.
    let db = format!("shop_{}", unique());
    postgres().psql("postgres", &format!("CREATE DATABASE {db}"));
    let mut ddl = String::new();
    for ds in &def.datasets {
        let mut cols: Vec<&smol_str::SmolStr> = ds
            .primary_key
            .iter()
            .flatten()
            .chain(ds.unique_keys.iter().flatten().flatten())
            .collect();
        for rel in def.relationships.iter().flatten() {
            if rel.from == ds.name {
                cols.extend(&rel.from_columns);
            }
            if rel.to == ds.name {
                cols.extend(&rel.to_columns);
            }
        }
        cols.sort();
        cols.dedup();
        let table = ds.source.rsplit('.').next().unwrap();
        let columns: Vec<String> = cols.iter().map(|c| format!("\"{c}\" text")).collect();
        ddl.push_str(&format!(
            "CREATE TABLE public.{table} ({});",
            columns.join(", ")
        ));
    }
    postgres().psql(&db, &ddl);

    env.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: pg, namespace: {ns}, labels: {{semops.io/catalog-credentials: \"true\"}}, annotations: {{semops.io/allowed-hosts: \"localhost,127.0.0.0/8,::1\"}}}}\nstringData: {{username: postgres, password: postgres}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: shop, namespace: {ns}}}\nspec: {{provider: postgresql, connection: {{host: 127.0.0.1, port: {port}, database: {db}, sslMode: disable, credentialsSecretRef: {{name: pg}}}}}}\n---\n\
         apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: analytics, namespace: {ns}}}\nspec: {{provider: managed, registrations: [{{kind: Schema, name: semantic}}]}}\n---\n{model}",
        port = postgres().port,
        model = serde_saphyr::to_string(&models[0]).unwrap(),
    ));
    let _op = Operator::for_namespace(env, ns);
    wait_ready(env, ns, "sm/bike-shop-sales", "True", "Accepted");
    let out = env.kubectl_ok(&["get", "sm", "bike-shop-sales", "-n", ns, "-o", "json"]);
    let stored: Value = serde_json::from_str(&out).unwrap();
    let status = &stored["status"];
    assert_eq!(
        status["sourceAssociations"].as_array().unwrap().len(),
        def.datasets.len()
    );
    assert_eq!(
        status["metrics"].as_array().unwrap().len(),
        def.metrics.iter().flatten().count()
    );
    // What the CRD does not hold came through the API server in annotations, and the stored
    // object exports back to the document it was imported from.
    let annotations = &stored["metadata"]["annotations"];
    assert_eq!(annotations["semops.io/ossie-version"], "0.2.0.dev0");
    assert_eq!(annotations["semops.io/ossie-shape"], "root");
    let back: semops::crd::SemanticModel = serde_json::from_value(stored.clone()).unwrap();
    let exported = semops::ossie::interchange::export(&[back], None).unwrap();
    let canonical = |v: &Value| semops::model::canonical::canonical_json(v);
    assert_eq!(canonical(&exported.documents[0]), canonical(&doc));
    assert!(exported.warnings.is_empty(), "{:?}", exported.warnings);
}

fn drift(status: &Value) -> Vec<(String, String, String)> {
    status["sourceDrift"].as_array().map_or(vec![], |a| {
        a.iter()
            .map(|d| {
                (
                    d["dataset"].as_str().unwrap().into(),
                    d["kind"].as_str().unwrap().into(),
                    d["current"].as_str().unwrap_or("").into(),
                )
            })
            .collect()
    })
}

#[test]
fn drift_is_reported_per_dataset_and_never_rebinds_by_itself() {
    let w = World::with_operator_args("drift", &["--drift-interval", "2s"]);
    // Without a policy the catalog's periodic checks are off and only its model-bound sources
    // are visited, every --drift-interval (rounds feeding drift are tested in e2e_checks).
    support::env().kubectl_ok(&["delete", "reconcilepolicy", "strict", "-n", w.ns()]);
    w.apply(
        "m",
        "[{name: e, source: hr.$S.employees}, {name: d, source: hr.$S.departments}]",
        "[]",
        "",
    );
    let accepted = w.accepted("m", 1);
    assert_eq!(
        condition(&accepted, "SourcesCurrent"),
        ("True".into(), "Current".into())
    );
    let wait_drift = |want: Vec<(String, String, String)>| {
        eventually(Duration::from_secs(60), &format!("drift {want:?}"), || {
            let s = w.status("m");
            (drift(&s) == want).then_some(s)
        })
    };

    w.sql("ALTER TABLE $S.employees RENAME TO staff;");
    let s = wait_drift(vec![(
        "e".into(),
        "SourceRenamed".into(),
        format!("{}.staff", w.schema),
    )]);
    assert_eq!(
        condition(&s, "SourcesCurrent"),
        ("False".into(), "SourceDrift".into())
    );
    assert_eq!(s["revision"], 1, "drift never rebinds");

    // Steady drift costs no writes: two more source visits (every 2 s) change nothing.
    let writes = w.op.metric("semops_status_writes_total", &[]);
    let probes = w.op.metric("semops_probes_total", &[]);
    eventually(Duration::from_secs(30), "two more source visits", || {
        (w.op.metric("semops_probes_total", &[]) >= probes + 2.0).then_some(())
    });
    assert_eq!(
        w.op.metric("semops_status_writes_total", &[]),
        writes,
        "an unchanged drift report was rewritten"
    );

    w.sql("ALTER TABLE $S.staff RENAME TO employees; DROP TABLE $S.departments; CREATE TABLE $S.departments(id int);");
    let s = eventually(Duration::from_secs(60), "replaced", || {
        let s = w.status("m");
        let d = drift(&s);
        (d.len() == 1 && d[0].0 == "d" && d[0].1 == "SourceReplaced").then_some(s)
    });
    assert_eq!(s["revision"], 1);

    w.sql("DROP TABLE $S.departments;");
    eventually(Duration::from_secs(60), "missing", || {
        let d = drift(&w.status("m"));
        (d == vec![("d".to_string(), "SourceMissing".to_string(), String::new())]).then_some(())
    });

    // A rebind after the source is back clears the drift.
    w.sql("CREATE TABLE $S.departments(id int);");
    w.apply(
        "m",
        "[{name: e, source: hr.$S.employees}, {name: d, source: hr.$S.departments}]",
        "[]",
        "  rebind: \"1\"\n",
    );
    let s = w.accepted("m", 2);
    assert_eq!(drift(&s), vec![]);
    assert_eq!(condition(&s, "SourcesCurrent").0, "True");
}

/// Models with an uncommitted revision (`<name>-r<status.revision + 1>` exists): a kill that
/// landed between the revision write and the status commit.
fn uncommitted(ns: &str, statuses: &[(String, Value)]) -> usize {
    let revisions = env().kubectl_ok(&["get", "controllerrevision", "-n", ns, "-o", "name"]);
    statuses
        .iter()
        .filter(|(name, s)| {
            let next = s["revision"].as_i64().unwrap_or(0) + 1;
            revisions
                .lines()
                .any(|l| l == format!("controllerrevision.apps/{name}-r{next}"))
        })
        .count()
}

#[test]
fn operators_killed_mid_acceptance_many_times_never_reuse_or_lose_an_id() {
    use std::collections::HashMap;
    use std::io::BufRead as _;
    const MODELS: usize = 12;
    let env = env();
    let mut w = World::with_operator_args("kills", &["--leader-elect=false"]);
    let names_of = |m: usize| format!("m{m}");
    let apply_all = |w: &World, metrics: &[String]| {
        let docs: Vec<String> = (0..MODELS)
            .map(|m| {
                format!(
                    "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: {}, namespace: {}}}\nspec:\n  catalog: analytics\n  schema: semantic\n  definition:\n    datasets: {}\n    metrics: [{}]\n",
                    names_of(m),
                    w.ns(),
                    TWO_ON_ONE.replace("$S", &w.schema),
                    metrics.iter().map(|n| metric(n, "1")).collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        env.apply_ok(&docs.join("---\n"));
    };
    let statuses = |w: &World| -> Vec<(String, Value)> {
        (0..MODELS)
            .map(|m| (names_of(m), w.status(&names_of(m))))
            .collect()
    };
    let mut metrics = vec!["keep".to_string()];
    apply_all(&w, &metrics);
    for m in 0..MODELS {
        w.accepted(&names_of(m), 1);
    }
    let keep: HashMap<String, String> = statuses(&w)
        .into_iter()
        .map(|(n, s)| (n, metric_ids(&s)[0].1.clone()))
        .collect();
    w.op.kill();
    let mut observations = vec![];
    let mut landed = 0;
    for cycle in 1..=10 {
        metrics.push(format!("c{cycle}"));
        if cycle % 3 == 0 {
            metrics.remove(1); // drop the oldest non-kept metric
        }
        apply_all(&w, &metrics);
        // Watch for the revisions this cycle writes; SIGKILL the operator right after the
        // k-th one (k random), while the other models are mid-acceptance. The watch first lists
        // what exists, so once those lines are read no new revision can be missed.
        let existing: std::collections::HashSet<String> = env
            .kubectl_ok(&["get", "controllerrevision", "-n", w.ns(), "-o", "name"])
            .lines()
            .map(str::to_string)
            .collect();
        let mut watch = env
            .tool("kubectl")
            .args([
                "get",
                "controllerrevision",
                "-n",
                w.ns(),
                "--watch",
                "-o",
                "name",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let out = watch.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        for _ in 0..existing.len() {
            rx.recv_timeout(Duration::from_secs(60))
                .expect("the watch lists the existing revisions");
        }
        w.op = Operator::start_unready(env, w.ns(), &["--leader-elect=false"], &[]);
        let k = 1 + rand::random::<u64>() as usize % MODELS;
        let mut seen = std::collections::HashSet::new();
        while seen.len() < k {
            let line = rx
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|_| {
                    panic!(
                        "cycle {cycle}: {} of {k} revisions written; revisions:\n{}\nstatuses: {:?}\nlog:\n{}",
                        seen.len(),
                        env.kubectl_ok(&["get", "controllerrevision", "-n", w.ns(), "-o", "name"]),
                        statuses(&w)
                            .iter()
                            .map(|(n, s)| (n.clone(), s["revision"].clone(), condition(s, "Ready")))
                            .collect::<Vec<_>>(),
                        w.op.logs()
                    )
                });
            seen.insert(line); // a replaced left-over keeps its name: count names, not lines
        }
        w.op.kill();
        let _ = watch.kill();
        let _ = watch.wait();
        let now = statuses(&w);
        landed += uncommitted(w.ns(), &now);
        observations.extend(now);
    }
    w.op = Operator::start(
        env,
        &env.kubeconfig,
        Some(w.ns()),
        w.ns(),
        &["--leader-elect=false"],
    );
    let last: Vec<(String, Value)> = (0..MODELS)
        .map(|m| {
            let name = names_of(m);
            let s = eventually(Duration::from_secs(90), "the last edit accepted", || {
                let s = w.status(&name);
                (s["acceptedGeneration"] == s["observedGeneration"]
                    && metric_ids(&s).len() == metrics.len())
                .then_some(s)
            });
            (name, s)
        })
        .collect();
    observations.extend(last.clone());
    println!("kills that landed between a revision write and its commit: {landed}");
    assert!(
        landed > 0,
        "no kill landed between a revision write and its commit; the test proved nothing"
    );

    let mut owner: HashMap<String, (String, String)> = HashMap::new();
    for (model, s) in &observations {
        let live = metric_ids(s);
        if s["revision"].as_i64().is_some() {
            assert_eq!(
                live.iter()
                    .find(|(n, _)| n == "keep")
                    .map(|(_, id)| id.clone()),
                Some(keep[model].clone()),
                "{model}: the kept metric's id was lost"
            );
        }
        let retired: Vec<String> = s["retiredMetrics"].as_array().map_or(vec![], |a| {
            a.iter()
                .map(|r| r["id"].as_str().unwrap().to_string())
                .collect()
        });
        for (name, id) in &live {
            assert!(
                !retired.contains(id),
                "{model}: id {id} is both live and retired"
            );
            let prev = owner
                .entry(id.clone())
                .or_insert_with(|| (model.clone(), name.clone()));
            assert_eq!(
                prev,
                &(model.clone(), name.clone()),
                "id {id} was reused for another metric"
            );
        }
    }
    for (model, s) in &last {
        let live: Vec<String> = metric_ids(s).into_iter().map(|(n, _)| n).collect();
        assert_eq!(live, metrics, "{model}");
        // The status names exactly one revision, and that revision holds this snapshot.
        let rev = s["revision"].as_i64().unwrap();
        assert_eq!(
            revision_snapshot(w.ns(), &format!("{model}-r{rev}")),
            s["snapshotHash"].as_str().unwrap(),
            "{model}"
        );
    }
}

/// An object nested past serde_json's recursion limit (the API server accepts it) must not stall
/// the model watch: it is reported in its own status and other models keep being accepted.
#[test]
fn a_model_nested_too_deep_is_reported_and_does_not_stall_the_others() {
    let w = World::new("deep");
    let deep = format!("{}1{}", "{x: ".repeat(150), "}".repeat(150));
    env().apply_ok(&format!(
        "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: deep, namespace: {}}}\nspec:\n  catalog: analytics\n  schema: semantic\n  definition:\n    aiContext: {deep}\n    datasets: [{{name: e, source: hr.{}.employees}}]\n",
        w.ns(),
        w.schema
    ));
    let message = wait_ready(env(), w.ns(), "sm/deep", "False", "SpecTooDeep");
    assert!(message.contains("levels deep"), "{message}");
    w.apply("after", "[{name: e, source: hr.$S.employees}]", "[]", "");
    w.accepted("after", 1);
    assert!(
        !w.op.logs().contains("watch failed"),
        "the deep object broke the watch"
    );
}

/// Drift is status, not memory: an operator restarted with no fresh answer from the catalog
/// keeps reporting what the last one saw, and writes nothing until it knows better.
#[test]
fn drift_survives_an_operator_restart() {
    let env = env();
    let mut w = World::with_operator_args("driftrestart", &["--drift-interval", "2s"]);
    env.kubectl_ok(&["delete", "reconcilepolicy", "strict", "-n", w.ns()]);
    w.apply("m", "[{name: e, source: hr.$S.employees}]", "[]", "");
    w.accepted("m", 1);
    w.sql("DROP TABLE $S.employees;");
    let s = eventually(Duration::from_secs(60), "SourceMissing", || {
        let s = w.status("m");
        (drift(&s) == vec![("e".into(), "SourceMissing".into(), String::new())]).then_some(s)
    });
    w.op.kill();
    // Source visits an hour apart: the new process has no answer for a long while.
    w.op = Operator::start(
        env,
        &env.kubeconfig,
        Some(w.ns()),
        w.ns(),
        &["--drift-interval", "1h"],
    );
    // The killed process held the Lease: the window below means something only once this one
    // leads (a standby could not write whatever it thought).
    eventually(Duration::from_secs(60), "the new process leads", || {
        w.op.is_leading().then_some(())
    });
    let reconciles_before = w.op.metric(
        "controller_runtime_reconcile_total",
        &["controller=\"semanticmodel\""],
    );
    // A metadata-only edit: a reconcile as the leader, with nothing to accept.
    env.kubectl_ok(&[
        "annotate",
        "semanticmodel",
        "m",
        "-n",
        w.ns(),
        "example.com/nudge=1",
    ]);
    eventually(
        Duration::from_secs(30),
        "the model reconciled as leader",
        || {
            (w.op.metric(
                "controller_runtime_reconcile_total",
                &["controller=\"semanticmodel\""],
            ) > reconciles_before)
                .then_some(())
        },
    );
    support::stays(
        Duration::from_secs(3),
        "drift and SourcesCurrent kept",
        || {
            let now = w.status("m");
            drift(&now) == drift(&s)
                && condition(&now, "SourcesCurrent") == ("False".into(), "SourceDrift".into())
        },
    );
    // Zero writes of a metric that exists (`metric` refuses a name the operator lacks).
    assert_eq!(
        w.op.metric(
            "semops_status_writes_total",
            &["controller=\"semanticmodel\""]
        ),
        0.0
    );
}

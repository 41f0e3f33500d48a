//! `semops diff` against a real API server and operator: for every step of every change case
//! (tests/fixtures/change/cases.yaml), the ids the diff predicts from the cluster's accepted
//! revision are exactly the ids acceptance then keeps, hands over, mints and retires.

mod support;

use std::collections::HashSet;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::change_cases::{cases, observed};
use support::checks::World;
use support::{env, eventually};

const TABLES: &str = "CREATE SCHEMA app;
CREATE TABLE app.departments(id int PRIMARY KEY, title text);
CREATE TABLE app.employees(id int PRIMARY KEY, salary numeric(10,2), dept int REFERENCES app.departments(id));
CREATE TABLE app.staff(id int PRIMARY KEY, salary numeric(10,2), dept int);";

fn document(ns: &str, object: &str, spec: &Value) -> String {
    serde_saphyr::to_string(&serde_json::json!({
        "apiVersion": "semops.io/v1alpha1",
        "kind": "SemanticModel",
        "metadata": {"name": object, "namespace": ns},
        "spec": spec,
    }))
    .unwrap()
}

fn status(ns: &str, object: &str) -> Option<Value> {
    let out = env().kubectl(&["get", "sm", object, "-n", ns, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice::<Value>(&out.stdout).unwrap())
}

/// Waits until `object` has accepted revision `revision` of its current generation.
fn accepted(ns: &str, object: &str, revision: i64) -> Value {
    eventually(
        Duration::from_secs(60),
        &format!("{object} accepts revision {revision}"),
        || {
            let m = status(ns, object)?;
            let s = &m["status"];
            let ready = s["conditions"].as_array()?.iter().any(|c| {
                c["type"] == "Ready" && c["status"] == "True" && c["reason"] == "Accepted"
            });
            (ready
                && s["revision"] == revision
                && s["acceptedGeneration"] == m["metadata"]["generation"])
                .then_some(s.clone())
        },
    )
}

fn ids(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            (
                m["name"].as_str().unwrap().into(),
                m["id"].as_str().unwrap().into(),
            )
        })
        .collect()
}

/// The DEPRECATED column of `kubectl get sm -o wide` (empty when the count is absent).
fn deprecated_column(ns: &str, object: &str) -> String {
    let out = env().kubectl_ok(&["get", "sm", object, "-n", ns, "-o", "wide"]);
    let mut lines = out.lines();
    let header = lines.next().unwrap();
    let at = header.find("DEPRECATED").expect("a DEPRECATED column");
    let row = lines.next().unwrap();
    row[at..]
        .split_whitespace()
        .next()
        .filter(|_| !row[at..].starts_with(' '))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn the_ids_diff_predicts_are_the_ids_acceptance_commits_for_every_case() {
    let w = World::new(
        "diff",
        TABLES,
        "[]",
        "enabled: false, mode: ReportOnly",
        &[],
    );
    let ns = w.ns().to_string();
    env().apply_ok(&format!(
        "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: home, namespace: {ns}}}\nspec: {{provider: managed, registrations: [{{kind: Schema, name: semantic}}]}}\n"
    ));
    let dir = tempfile::tempdir().unwrap();
    let server = format!("http://127.0.0.1:{}", w.op.api_port);
    let mut checked = 0;
    for (k, case) in cases().iter().enumerate() {
        let object = format!("c{k}");
        env().apply_ok(&document(&ns, &object, &case.steps[0].spec));
        let mut status = accepted(&ns, &object, 1);
        let mut ever: HashSet<String> = ids(&status["metrics"])
            .into_iter()
            .map(|(_, i)| i)
            .collect();
        for (i, step) in case.steps.iter().enumerate().skip(1) {
            let what = format!("{} (step {i})", case.name);
            let mut revision = status["revision"].as_i64().unwrap() + 1;
            if step.recreate {
                env().kubectl_ok(&["delete", "sm", &object, "-n", &ns, "--wait"]);
                revision = 1;
            }
            let file = dir.path().join(format!("{object}-{i}.yaml"));
            std::fs::write(&file, document(&ns, &object, &step.spec)).unwrap();
            let out = Command::new(env!("CARGO_BIN_EXE_semops"))
                .args([
                    "diff",
                    "-f",
                    file.to_str().unwrap(),
                    "--server",
                    &server,
                    "-n",
                    &ns,
                    "-o",
                    "json",
                ])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let diff: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
                panic!(
                    "{what}: {e}: {text}{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
            let model = &diff["models"][0];
            let want = step.expect.as_ref().unwrap();
            assert_eq!(&observed(model), want, "{what}: the prediction");
            let code = if want.verdict == "breaking" { 3 } else { 0 };
            assert_eq!(out.status.code(), Some(code), "{what}: exit code");

            let before = status.clone();
            env().apply_ok(&document(&ns, &object, &step.spec));
            status = accepted(&ns, &object, revision);
            let now = ids(&status["metrics"]);
            let id_now = |name: &str| now.iter().find(|(n, _)| n == name).map(|(_, i)| i.clone());
            for kept in model["metrics"]["kept"].as_array().unwrap() {
                let name = kept["name"].as_str().unwrap();
                assert_eq!(
                    kept["id"].as_str().map(String::from),
                    id_now(name),
                    "{what}: kept {name}"
                );
            }
            for r in model["metrics"]["renamed"].as_array().unwrap() {
                let to = r["to"].as_str().unwrap();
                assert_eq!(
                    r["id"].as_str().map(String::from),
                    id_now(to),
                    "{what}: renamed to {to}"
                );
                let former: Vec<&str> = status["metrics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|m| m["name"] == to)
                    .unwrap()["formerNames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_str().unwrap())
                    .collect();
                assert_eq!(
                    former.last().copied(),
                    r["from"].as_str(),
                    "{what}: name history"
                );
            }
            for m in model["metrics"]["minted"].as_array().unwrap() {
                let id = id_now(m["name"].as_str().unwrap()).expect("minted id present");
                assert!(ever.insert(id.clone()), "{what}: {id} is fresh");
            }
            let retired_before = if step.recreate {
                0
            } else {
                before["retiredMetrics"].as_array().map_or(0, Vec::len)
            };
            let newly: Vec<(String, String)> =
                ids(&status["retiredMetrics"]).split_off(retired_before);
            let said: Vec<(String, String)> = ids(&model["metrics"]["retired"]);
            assert_eq!(said, newly, "{what}: retired ids");
            assert_eq!(
                now.len(),
                want.kept.len() + want.minted.len() + want.renamed.len(),
                "{what}: every live id accounted for"
            );
            ever.extend(now.into_iter().map(|(_, i)| i));
            assert_eq!(
                deprecated_column(&ns, &object),
                match want.deprecated.len() {
                    0 => String::new(),
                    n => n.to_string(),
                },
                "{what}: kubectl -o wide"
            );
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked} steps applied");
}

//! Objects as release 0.2.0 stored them (`tests/stored/v0.2.0/`, frozen: never regenerated)
//! still decode into this release's types and round-trip through a real API server with the
//! CRDs this release generates (`crds/`, checked equal to `semops crd` by the unit tests of
//! src/crd): nothing of their spec or status is refused or pruned. docs/versioning.md says why.

mod support;

use serde_json::Value;
use support::{ROOT, env};

fn fixtures() -> Vec<(String, Value)> {
    let dir = format!("{ROOT}/tests/stored/v0.2.0");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for doc in text.split("\n---\n") {
            let value: Value = serde_saphyr::from_str(doc).unwrap();
            if value.is_object() {
                out.push((file.display().to_string(), value));
            }
        }
    }
    out
}

/// Whether `got` keeps every value of `stored` (defaults added since are allowed). Returns the
/// first path where it does not.
fn keeps(got: &Value, stored: &Value, path: &str) -> Result<(), String> {
    match (got, stored) {
        (Value::Object(g), Value::Object(s)) => s.iter().try_for_each(|(k, v)| {
            keeps(g.get(k).unwrap_or(&Value::Null), v, &format!("{path}.{k}"))
        }),
        (Value::Array(g), Value::Array(s)) if g.len() == s.len() => g
            .iter()
            .zip(s)
            .enumerate()
            .try_for_each(|(i, (g, s))| keeps(g, s, &format!("{path}[{i}]"))),
        (Value::Number(g), Value::Number(s)) if g.as_f64() == s.as_f64() => Ok(()),
        (g, s) if g == s => Ok(()),
        (g, s) => Err(format!("{path}: stored {s}, now {g}")),
    }
}

#[test]
fn keeps_allows_added_defaults_and_nothing_else() {
    let stored = serde_json::json!({"a": 1, "b": [{"c": "x"}]});
    assert!(
        keeps(
            &serde_json::json!({"a": 1.0, "b": [{"c": "x", "d": 2}], "e": 3}),
            &stored,
            ""
        )
        .is_ok()
    );
    for changed in [
        serde_json::json!({"b": [{"c": "x"}]}),
        serde_json::json!({"a": 2, "b": [{"c": "x"}]}),
        serde_json::json!({"a": 1, "b": [{"c": "y"}]}),
        serde_json::json!({"a": 1, "b": [{"c": "x"}, {"c": "x"}]}),
    ] {
        assert!(keeps(&changed, &stored, "").is_err(), "{changed}");
    }
}

#[test]
fn every_stored_object_decodes_into_this_releases_types() {
    let fixtures = fixtures();
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for (file, value) in &fixtures {
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        let decoded = match kind.as_str() {
            "SemanticModel" => serde_json::from_value::<semops::crd::SemanticModel>(value.clone())
                .map(|o| serde_json::to_value(o).unwrap()),
            "Catalog" => serde_json::from_value::<semops::crd::Catalog>(value.clone())
                .map(|o| serde_json::to_value(o).unwrap()),
            "ReconcilePolicy" => {
                serde_json::from_value::<semops::crd::ReconcilePolicy>(value.clone())
                    .map(|o| serde_json::to_value(o).unwrap())
            }
            _ => continue,
        }
        .unwrap_or_else(|e| panic!("{file}: {kind} no longer decodes: {e}"));
        // Decoding keeps what was stored (a renamed field would vanish here); defaults may be
        // added.
        for part in ["spec", "status"] {
            if let Err(e) = keeps(&decoded[part], &value[part], part) {
                panic!("{file}: {kind} changed on decode: {e}");
            }
        }
        *kinds.entry(kind).or_default() += 1;
    }
    for kind in ["SemanticModel", "Catalog", "ReconcilePolicy"] {
        assert!(
            kinds.get(kind).is_some_and(|n| *n >= 1),
            "no stored {kind}: {kinds:?}"
        );
    }
    assert!(
        fixtures
            .iter()
            .any(|(_, v)| v["kind"] == "SemanticModel" && v["status"]["metrics"].is_array()),
        "a stored model with its committed status"
    );
}

#[test]
fn every_stored_object_round_trips_through_the_regenerated_crds() {
    let env = env();
    let ns = env.namespace("stored");
    let ns = ns.name.as_str();
    for (file, mut value) in fixtures() {
        let kind = value["kind"].as_str().unwrap().to_string();
        let name = value["metadata"]["name"].as_str().unwrap().to_string();
        value["metadata"] = serde_json::json!({
            "name": name,
            "namespace": ns,
            "labels": value["metadata"]["labels"],
            "annotations": value["metadata"]["annotations"],
        });
        let status = value.as_object_mut().unwrap().remove("status");
        env.apply_ok(&value.to_string());
        if !value["apiVersion"]
            .as_str()
            .unwrap()
            .starts_with("semops.io/")
        {
            continue; // a Secret the objects refer to
        }
        let resource = format!("{}.semops.io/{name}", kind.to_lowercase());
        if let Some(status) = &status {
            env.kubectl_ok(&[
                "patch",
                &resource,
                "-n",
                ns,
                "--subresource=status",
                "--type=merge",
                "-p",
                &serde_json::json!({"status": status}).to_string(),
            ]);
        }
        let stored: Value =
            serde_json::from_str(&env.kubectl_ok(&["get", &resource, "-n", ns, "-o", "json"]))
                .unwrap();
        if let Err(e) = keeps(&stored["spec"], &value["spec"], "spec") {
            panic!("{file}: {kind} pruned or changed by the API server: {e}");
        }
        if let Some(status) = status
            && let Err(e) = keeps(&stored["status"], &status, "status")
        {
            panic!("{file}: {kind} status pruned or changed by the API server: {e}");
        }
    }
}

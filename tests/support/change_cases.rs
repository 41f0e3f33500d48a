//! The change cases of tests/fixtures/change/cases.yaml as SemanticModel specs, shared by the
//! table test of `semops diff` and the e2e test that applies every step.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use super::ROOT;

/// Runs git in `dir` as a throwaway identity, asserting success.
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub struct Case {
    pub name: String,
    pub steps: Vec<Step>,
}

pub struct Step {
    /// The spec as JSON (catalog `home`, schema `semantic`, sources in catalog `wh`).
    pub spec: Value,
    pub recreate: bool,
    /// What the step does to the ids (absent on a case's first step).
    pub expect: Option<Expect>,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Expect {
    pub kept: Vec<String>,
    pub minted: Vec<String>,
    pub retired: Vec<String>,
    /// `old>new`.
    pub renamed: Vec<String>,
    pub deprecated: Vec<String>,
    pub verdict: String,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// `{name, sql, snowflake?, ...rest}` → a metric or field with its expression.
fn with_expression(item: &Value) -> Value {
    let mut out = item.as_object().unwrap().clone();
    let mut dialects =
        vec![json!({"dialect": "ANSI_SQL", "expression": out.remove("sql").unwrap()})];
    if let Some(e) = out.remove("snowflake") {
        dialects.push(json!({"dialect": "SNOWFLAKE", "expression": e}));
    }
    out.insert("expression".into(), json!({ "dialects": dialects }));
    Value::Object(out)
}

fn spec(step: &Value) -> Value {
    let fields: Vec<Value> = match step.get("fields") {
        Some(f) => f.as_array().unwrap().iter().map(with_expression).collect(),
        None => vec![
            json!({"name": "salary", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "salary"}]}}),
        ],
    };
    let mut employees = json!({
        "name": "employees",
        "source": step.get("source").cloned().unwrap_or(json!("wh.app.employees")),
        "primaryKey": ["id"],
    });
    if !fields.is_empty() {
        employees["fields"] = Value::Array(fields);
    }
    let mut spec = json!({
        "catalog": "home",
        "schema": "semantic",
        "definition": {
            "datasets": [employees, {"name": "departments", "source": "wh.app.departments", "primaryKey": ["id"]}],
            "relationships": [{"name": "works_in", "from": "employees", "to": "departments", "fromColumns": ["dept"], "toColumns": ["id"]}],
            "metrics": step["metrics"].as_array().unwrap().iter().map(with_expression).collect::<Vec<_>>(),
        }
    });
    for key in ["name", "comment", "properties"] {
        if let Some(v) = step.get(key) {
            spec[key] = v.clone();
        }
    }
    spec
}

pub fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(format!("{ROOT}/tests/fixtures/change/cases.yaml")).unwrap();
    let doc: Value = serde_saphyr::from_str(&text).unwrap();
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap().into(),
            steps: c["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| Step {
                    spec: spec(s),
                    recreate: s["recreate"] == true,
                    expect: s.get("expect").map(|e| Expect {
                        kept: strings(&e["kept"]),
                        minted: strings(&e["minted"]),
                        retired: strings(&e["retired"]),
                        renamed: strings(&e["renamed"]),
                        deprecated: strings(&e["deprecated"]),
                        verdict: e["verdict"].as_str().unwrap().into(),
                    }),
                })
                .collect(),
        })
        .collect()
}

/// What a `semops diff -o json` model entry says, in the fixture's terms.
pub fn observed(model: &Value) -> Expect {
    let names = |key: &str| -> Vec<String> {
        model["metrics"][key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| m["name"].as_str().unwrap().to_string())
            .collect()
    };
    Expect {
        kept: names("kept"),
        minted: names("minted"),
        retired: names("retired"),
        renamed: model["metrics"]["renamed"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                format!(
                    "{}>{}",
                    r["from"].as_str().unwrap(),
                    r["to"].as_str().unwrap()
                )
            })
            .collect(),
        deprecated: names("deprecated"),
        verdict: model["verdict"].as_str().unwrap_or_default().into(),
    }
}

//! Canonical hashes and the replace / preserve / no-op decision (DESIGN 3.3), from plain values.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::crd::SemanticModelStatus;
use crate::crd::semantic_model::{Definition, SemanticModelSpec};

/// JSON with object keys sorted at every level and array order kept (order is meaning in Ossie).
pub fn canonical_json(value: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    write(&map[*k], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn sha256(text: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
}

/// Hash of the definition alone: what decides a replace.
pub fn definition_hash(def: &Definition) -> String {
    sha256(&canonical_json(
        &serde_json::to_value(def).expect("definitions serialize"),
    ))
}

/// Hash of everything a revision snapshots: definition, effective name, comment, properties.
pub fn snapshot_hash(spec: &SemanticModelSpec, model_name: &str) -> String {
    let v = serde_json::json!({
        "definitionHash": definition_hash(&spec.definition),
        "name": model_name,
        "comment": spec.comment,
        "properties": spec.properties,
    });
    sha256(&canonical_json(&v))
}

/// What a reconcile must do with the current spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Nothing accepted differs.
    NoOp,
    /// Only name, comment or properties changed: new revision, same associations and ids.
    Preserve,
    /// Resolve every source again and rebuild associations and metric identities.
    Replace(ReplaceReason),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplaceReason {
    FirstAcceptance,
    DefinitionChanged,
    Rebind,
}

/// Decides from hashes and the rebind token, never from guessing.
pub fn decide(
    spec: &SemanticModelSpec,
    model_name: &str,
    accepted: &SemanticModelStatus,
) -> Change {
    if accepted.revision.is_none() || accepted.definition_hash.is_none() {
        return Change::Replace(ReplaceReason::FirstAcceptance);
    }
    if accepted.definition_hash.as_deref() != Some(definition_hash(&spec.definition).as_str()) {
        return Change::Replace(ReplaceReason::DefinitionChanged);
    }
    if accepted.accepted_rebind != spec.rebind {
        return Change::Replace(ReplaceReason::Rebind);
    }
    if accepted.snapshot_hash.as_deref() != Some(snapshot_hash(spec, model_name).as_str()) {
        return Change::Preserve;
    }
    Change::NoOp
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> SemanticModelSpec {
        serde_json::from_value(v).unwrap()
    }

    fn base() -> Value {
        json!({"catalog": "a", "schema": "s", "comment": "c", "properties": {"team": "x"},
               "definition": {"datasets": [{"name": "e", "source": "hr.public.t"}, {"name": "m", "source": "hr.public.t"}],
                              "metrics": [{"name": "n", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "1"}]}}]}})
    }

    fn accepted(s: &SemanticModelSpec, name: &str) -> SemanticModelStatus {
        SemanticModelStatus {
            revision: Some(1),
            definition_hash: Some(definition_hash(&s.definition)),
            accepted_rebind: s.rebind.clone(),
            snapshot_hash: Some(snapshot_hash(s, name)),
            ..Default::default()
        }
    }

    #[test]
    fn canonical_json_sorts_keys_and_keeps_array_order() {
        assert_eq!(
            canonical_json(&json!({"b": 1, "a": [3, 1, {"z": 0, "y": null}]})),
            r#"{"a":[3,1,{"y":null,"z":0}],"b":1}"#
        );
    }

    #[test]
    fn each_kind_of_edit_maps_to_its_change() {
        let s0 = spec(base());
        let status = accepted(&s0, "m1");
        type Edit = fn(&mut Value);
        let cases: Vec<(&str, Edit, &str, Change)> = vec![
            ("identical", |_| {}, "m1", Change::NoOp),
            (
                "comment",
                |v| v["comment"] = json!("new"),
                "m1",
                Change::Preserve,
            ),
            (
                "properties",
                |v| v["properties"]["team"] = json!("y"),
                "m1",
                Change::Preserve,
            ),
            ("model rename", |_| {}, "m2", Change::Preserve),
            (
                "metric expression",
                |v| {
                    v["definition"]["metrics"][0]["expression"]["dialects"][0]["expression"] =
                        json!("2")
                },
                "m1",
                Change::Replace(ReplaceReason::DefinitionChanged),
            ),
            (
                "dataset order",
                |v| {
                    v["definition"]["datasets"]
                        .as_array_mut()
                        .unwrap()
                        .reverse()
                },
                "m1",
                Change::Replace(ReplaceReason::DefinitionChanged),
            ),
            (
                "definition and comment",
                |v| {
                    v["comment"] = json!("z");
                    v["definition"]["datasets"][0]["name"] = json!("f");
                },
                "m1",
                Change::Replace(ReplaceReason::DefinitionChanged),
            ),
            (
                "rebind",
                |v| v["rebind"] = json!("2026-11-30"),
                "m1",
                Change::Replace(ReplaceReason::Rebind),
            ),
        ];
        for (what, edit, name, want) in cases {
            let mut v = base();
            edit(&mut v);
            assert_eq!(decide(&spec(v), name, &status), want, "{what}");
        }
        assert_eq!(
            decide(&s0, "m1", &SemanticModelStatus::default()),
            Change::Replace(ReplaceReason::FirstAcceptance)
        );
    }

    #[test]
    fn the_hash_ignores_key_order_in_free_form_ai_context() {
        let mut a = base();
        a["definition"]["aiContext"] = json!({"instructions": "x", "synonyms": ["a"]});
        let mut b = base();
        b["definition"]["aiContext"] =
            serde_json::from_str(r#"{"synonyms": ["a"], "instructions": "x"}"#).unwrap();
        assert_eq!(
            definition_hash(&spec(a).definition),
            definition_hash(&spec(b).definition)
        );
    }
}

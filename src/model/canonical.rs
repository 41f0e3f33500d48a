//! Canonical hashes and the replace / preserve / no-op decision (docs/design.md#replace-or-preserve), from plain values.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::crd::SemanticModelStatus;
use crate::crd::semantic_model::{Definition, SemanticModelSpec};

/// JSON with object keys sorted at every level and array order kept (order is meaning in Ossie).
/// The sort does not rely on the map type: with serde_json's `preserve_order` (which any
/// dependency may turn on) maps keep insertion order, and the hash must not change with it.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, &mut out);
    out
}

fn write_value(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => write_object(map.iter().collect(), out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// An object's entries, in whatever order they come, written sorted by key.
fn write_object(mut entries: Vec<(&String, &Value)>, out: &mut String) {
    entries.sort_by(|a, b| a.0.cmp(b.0));
    out.push('{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(k.clone()).to_string());
        out.push(':');
        write_value(v, out);
    }
    out.push('}');
}

fn sha256(text: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
}

/// Canonical hash of any serializable value (e.g. one metric of a definition).
pub fn value_hash<T: serde::Serialize>(value: &T) -> String {
    sha256(&canonical_json(
        &serde_json::to_value(value).expect("definitions serialize"),
    ))
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
    let hash = definition_hash(&spec.definition);
    if !accepted
        .definition_hash
        .as_ref()
        .is_some_and(|h| *h == hash)
    {
        return Change::Replace(ReplaceReason::DefinitionChanged);
    }
    if accepted.accepted_rebind != spec.rebind {
        return Change::Replace(ReplaceReason::Rebind);
    }
    let hash = snapshot_hash(spec, model_name);
    if !accepted.snapshot_hash.as_ref().is_some_and(|h| *h == hash) {
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
            definition_hash: Some(definition_hash(&s.definition).into()),
            accepted_rebind: s.rebind.clone(),
            snapshot_hash: Some(snapshot_hash(s, name).into()),
            ..Default::default()
        }
    }

    #[test]
    fn object_entries_are_written_sorted_whatever_order_they_come_in() {
        // Entries handed over out of order, as a `preserve_order` map would iterate them.
        let (b, a, z) = ("b".to_string(), "a".to_string(), "Z".to_string());
        let (one, list, null) = (json!(1), json!([3, 1, {"y": null}]), json!(null));
        let mut out = String::new();
        write_object(vec![(&b, &one), (&a, &list), (&z, &null)], &mut out);
        assert_eq!(out, r#"{"Z":null,"a":[3,1,{"y":null}],"b":1}"#);
    }

    proptest::proptest! {
        /// Canonical text is JSON for the same value (escaping included), and stable.
        #[test]
        fn canonical_text_parses_back_to_the_same_value(v in arb_json()) {
            let text = canonical_json(&v);
            let back: Value = serde_json::from_str(&text).unwrap();
            proptest::prop_assert_eq!(&back, &v);
            proptest::prop_assert_eq!(canonical_json(&back), text);
        }
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "\\PC{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map("\\PC{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
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
        // Half a record (a revision without its hash, or the reverse) was never an acceptance.
        let no_hash = SemanticModelStatus {
            definition_hash: None,
            ..status.clone()
        };
        let no_revision = SemanticModelStatus {
            revision: None,
            ..status.clone()
        };
        for half in [no_hash, no_revision] {
            assert_eq!(
                decide(&s0, "m1", &half),
                Change::Replace(ReplaceReason::FirstAcceptance),
                "{half:?}"
            );
        }
    }

    #[test]
    fn the_hash_changes_with_any_definition_content_and_not_with_other_fields() {
        let mut v = base();
        let h0 = definition_hash(&spec(v.clone()).definition);
        v["comment"] = json!("other");
        v["properties"] = json!({});
        assert_eq!(definition_hash(&spec(v.clone()).definition), h0);
        v["definition"]["aiContext"] = json!({"instructions": "x"});
        let h1 = definition_hash(&spec(v.clone()).definition);
        assert_ne!(h1, h0);
        v["definition"]["aiContext"] = json!({"instructions": "y"});
        assert_ne!(definition_hash(&spec(v).definition), h1);
    }
}

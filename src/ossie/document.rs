//! Apache Ossie documents as files hold them (pure): which version and shape a document has,
//! what it is when it is not a semantic-model document, and how models are written back in a
//! chosen version and shape.
//!
//! Two shapes exist. The wrapped shape (0.1.0, 0.1.1, and 0.2.0.dev0 until it changed) is
//! `{version, semantic_model: [model, …]}`, with root `dialects` and `vendors` lists in the 0.1
//! line. The root shape (0.2.0.dev0 now) is one model per document, its keys at the root beside
//! `version`. docs/ossie.md has the table.

use serde_json::{Map, Value};

/// Versions semops reads and writes.
pub const VERSIONS: [&str; 3] = ["0.1.0", "0.1.1", "0.2.0.dev0"];

/// Keys a model has in either shape (the root shape puts them beside `version`).
const MODEL_KEYS: [&str; 7] = [
    "name",
    "description",
    "ai_context",
    "datasets",
    "relationships",
    "metrics",
    "custom_extensions",
];

/// How a document holds its models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `semantic_model: [ … ]`.
    Wrapped,
    /// One model, its keys at the document's root.
    Root,
}

impl Shape {
    pub fn as_str(self) -> &'static str {
        match self {
            Shape::Wrapped => "wrapped",
            Shape::Root => "root",
        }
    }
    pub fn parse(s: &str) -> Option<Shape> {
        match s {
            "wrapped" => Some(Shape::Wrapped),
            "root" => Some(Shape::Root),
            _ => None,
        }
    }
}

/// A semantic-model document, split into its models and what belongs to the document itself.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    pub version: String,
    pub shape: Shape,
    /// Each model's mapping, as written (snake_case).
    pub models: Vec<Map<String, Value>>,
    /// The document's own keys besides `version` and the models (`dialects`, `vendors`, keys
    /// semops does not know), kept so an export can write them back.
    pub root: Map<String, Value>,
}

/// What a file holds when it is not a semantic-model document semops reads.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refused {
    #[error(
        "an Apache Ossie ontology document (`ontology`): semops imports semantic models, not ontologies"
    )]
    Ontology,
    #[error(
        "a Snowflake semantic view (`tables` with `base_table`), not an Ossie document: convert it to Ossie first"
    )]
    SnowflakeSemanticView,
    #[error(
        "a dbt semantic manifest (`semantic_models`, `project_configuration`), not an Ossie document: export Ossie from dbt, or write the models as Ossie"
    )]
    DbtSemanticManifest,
    #[error("Ossie version {found:?} is not one semops reads (it reads {})", VERSIONS.join(", "))]
    UnknownVersion { found: String },
    #[error("the document has no `version`: write one of {}", VERSIONS.join(", "))]
    MissingVersion,
    #[error(
        "a list at the top of the document: an Ossie document is a mapping; a 0.2 document holds one model at its root, so write one document per model (--- between them)"
    )]
    TopLevelList,
    #[error(
        "not an Ossie semantic-model document (top-level keys: {keys}): it needs `version` and either a `semantic_model` list or a model's `name` and `datasets` at its root"
    )]
    NotOssie { keys: String },
}

fn keys(map: &Map<String, Value>) -> String {
    let mut k: Vec<&str> = map.keys().map(String::as_str).collect();
    k.sort_unstable();
    if k.is_empty() {
        "none".into()
    } else {
        k.join(", ")
    }
}

/// Reads one parsed document.
pub fn read(doc: &Value) -> Result<Document, Refused> {
    let map = match doc {
        Value::Object(map) => map,
        Value::Array(_) => return Err(Refused::TopLevelList),
        _ => {
            return Err(Refused::NotOssie {
                keys: "none".into(),
            });
        }
    };
    if map.contains_key("ontology") {
        return Err(Refused::Ontology);
    }
    let tables_with_base = map
        .get("tables")
        .and_then(Value::as_array)
        .is_some_and(|t| t.iter().any(|t| t.get("base_table").is_some()));
    if tables_with_base {
        return Err(Refused::SnowflakeSemanticView);
    }
    if map.contains_key("semantic_models")
        && (map.contains_key("project_configuration") || map.contains_key("saved_queries"))
    {
        return Err(Refused::DbtSemanticManifest);
    }
    let wrapped = map.get("semantic_model");
    let rooted = map.contains_key("datasets") || map.contains_key("name");
    if wrapped.is_none() && !rooted {
        return Err(Refused::NotOssie { keys: keys(map) });
    }
    let version = match map.get("version") {
        Some(Value::String(v)) => v.clone(),
        // An unquoted `0.1` in YAML is a number; name it as written.
        Some(other) => {
            return Err(Refused::UnknownVersion {
                found: other.to_string(),
            });
        }
        None => return Err(Refused::MissingVersion),
    };
    if !VERSIONS.contains(&version.as_str()) {
        return Err(Refused::UnknownVersion { found: version });
    }
    let mut root = map.clone();
    root.remove("version");
    match wrapped {
        Some(items) => {
            root.remove("semantic_model");
            let Value::Array(items) = items else {
                return Err(Refused::NotOssie {
                    keys: "semantic_model (not a list)".into(),
                });
            };
            let models = items
                .iter()
                .map(|m| match m {
                    Value::Object(m) => m.clone(),
                    // Typed later with the item's path: an empty mapping names what is missing.
                    _ => Map::new(),
                })
                .collect();
            Ok(Document {
                version,
                shape: Shape::Wrapped,
                models,
                root,
            })
        }
        None => {
            let mut model = Map::new();
            for k in MODEL_KEYS {
                if let Some(v) = root.remove(k) {
                    model.insert(k.into(), v);
                }
            }
            // Keys of neither the document nor a model stay with the model (they are the
            // model's in this shape), so they come back where they were.
            let extra: Vec<String> = root
                .keys()
                .filter(|k| !["dialects", "vendors"].contains(&k.as_str()))
                .cloned()
                .collect();
            for k in extra {
                if let Some(v) = root.remove(&k) {
                    model.insert(k, v);
                }
            }
            Ok(Document {
                version,
                shape: Shape::Root,
                models: vec![model],
                root,
            })
        }
    }
}

/// A version and shape to write (`--ossie-version`, `--shape`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    pub version: &'static str,
    pub shape: Shape,
}

impl Target {
    /// 0.2.0.dev0, one model per document at the root (the current shape).
    pub const V0_2: Target = Target {
        version: "0.2.0.dev0",
        shape: Shape::Root,
    };
    /// 0.1.1, wrapped.
    pub const V0_1_1: Target = Target {
        version: "0.1.1",
        shape: Shape::Wrapped,
    };
    /// 0.1.0, wrapped.
    pub const V0_1_0: Target = Target {
        version: "0.1.0",
        shape: Shape::Wrapped,
    };

    /// `0.2`, `0.1.1` or `0.1.0` (or a full version), in that version's usual shape.
    pub fn parse(s: &str) -> Option<Target> {
        match s {
            "0.2" | "0.2.0.dev0" => Some(Target::V0_2),
            "0.1.1" => Some(Target::V0_1_1),
            "0.1.0" => Some(Target::V0_1_0),
            _ => None,
        }
    }
    pub fn with_shape(self, shape: Shape) -> Target {
        Target { shape, ..self }
    }
    /// The target a document of this version and shape is written back as.
    pub fn of(version: &str, shape: Shape) -> Option<Target> {
        let version = *VERSIONS.iter().find(|v| **v == version)?;
        Some(Target { version, shape })
    }
}

/// A model's mapping (snake_case) and the document keys it came with.
pub type ModelWithRoot = (Map<String, Value>, Map<String, Value>);

/// Models (snake_case mappings) as documents of `version` in `shape`, each model with the
/// document keys it came with (`root`); warnings name what the target cannot hold.
pub fn write(models: &[ModelWithRoot], version: &str, shape: Shape) -> (Vec<Value>, Vec<String>) {
    let mut warnings = Vec::new();
    let old_line = version.starts_with("0.1");
    let mut cleaned: Vec<ModelWithRoot> = Vec::new();
    for (model, root) in models {
        let name = model.get("name").and_then(Value::as_str).unwrap_or("?");
        let mut model = model.clone();
        let mut root = root.clone();
        if old_line {
            for path in strip_datatypes(&mut model) {
                warnings.push(format!(
                    "model {name}: {path}.datatype dropped: Ossie {version} has no datatype"
                ));
            }
        } else {
            for k in ["dialects", "vendors"] {
                if root.remove(k).is_some() {
                    warnings.push(format!(
                        "model {name}: the document's `{k}` list dropped: Ossie {version} has none at the root"
                    ));
                }
            }
        }
        cleaned.push((model, root));
    }
    let docs = match shape {
        Shape::Root => cleaned
            .into_iter()
            .map(|(model, root)| {
                let mut doc = Map::new();
                doc.insert("version".into(), Value::String(version.into()));
                doc.extend(root);
                doc.extend(model);
                Value::Object(doc)
            })
            .collect(),
        Shape::Wrapped => {
            let mut doc = Map::new();
            doc.insert("version".into(), Value::String(version.into()));
            // The document's own keys, from the models that carry them; a key two models
            // disagree on keeps the first and is named.
            for (model, root) in &cleaned {
                for (k, v) in root {
                    match doc.get(k) {
                        Some(kept) if kept != v => warnings.push(format!(
                            "model {}: the document's `{k}` differs from another model's; the first is kept",
                            model.get("name").and_then(Value::as_str).unwrap_or("?")
                        )),
                        Some(_) => {}
                        None => {
                            doc.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            doc.insert(
                "semantic_model".into(),
                Value::Array(cleaned.into_iter().map(|(m, _)| Value::Object(m)).collect()),
            );
            vec![Value::Object(doc)]
        }
    };
    (docs, warnings)
}

/// Removes every field's and metric's `datatype`; answers their paths.
fn strip_datatypes(model: &mut Map<String, Value>) -> Vec<String> {
    let mut removed = Vec::new();
    let mut strip = |item: &mut Value, path: String| {
        if let Some(obj) = item.as_object_mut()
            && obj.remove("datatype").is_some()
        {
            removed.push(path);
        }
    };
    if let Some(datasets) = model.get_mut("datasets").and_then(Value::as_array_mut) {
        for (d, dataset) in datasets.iter_mut().enumerate() {
            if let Some(fields) = dataset.get_mut("fields").and_then(Value::as_array_mut) {
                for (f, field) in fields.iter_mut().enumerate() {
                    strip(field, format!("datasets[{d}].fields[{f}]"));
                }
            }
        }
    }
    if let Some(metrics) = model.get_mut("metrics").and_then(Value::as_array_mut) {
        for (m, metric) in metrics.iter_mut().enumerate() {
            strip(metric, format!("metrics[{m}]"));
        }
    }
    removed
}

/// A document serialized with its keys in reading order: `version`, `name`, `description`
/// first, then the rest as stored; the same `name` first for every nested mapping.
pub struct Ordered<'a>(pub &'a Value);

impl serde::Serialize for Ordered<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        const FIRST: [&str; 4] = ["version", "name", "description", "source"];
        match self.0 {
            Value::Object(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for k in FIRST {
                    if let Some(v) = map.get(k) {
                        out.serialize_entry(k, &Ordered(v))?;
                    }
                }
                for (k, v) in map.iter().filter(|(k, _)| !FIRST.contains(&k.as_str())) {
                    // Free-form AI context keeps the user's keys as stored.
                    out.serialize_entry(k, &Ordered(v))?;
                }
                out.end()
            }
            Value::Array(items) => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    out.serialize_element(&Ordered(item))?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_shapes_of_every_version_are_read() {
        for version in VERSIONS {
            let wrapped = read(&json!({"version": version, "dialects": ["ANSI_SQL"],
                "semantic_model": [{"name": "a", "datasets": []}, {"name": "b", "datasets": []}]}))
            .unwrap();
            assert_eq!((wrapped.shape, wrapped.models.len()), (Shape::Wrapped, 2));
            assert_eq!(
                wrapped.root,
                json!({"dialects": ["ANSI_SQL"]})
                    .as_object()
                    .cloned()
                    .unwrap()
            );
            let rooted = read(&json!({"version": version, "name": "a", "datasets": [],
                "x_owner": "team"}))
            .unwrap();
            assert_eq!((rooted.shape, rooted.models.len()), (Shape::Root, 1));
            assert_eq!(
                rooted.models[0]["x_owner"], "team",
                "an unknown key stays the model's"
            );
            assert!(rooted.root.is_empty());
        }
    }

    #[test]
    fn what_is_not_a_semantic_model_document_is_named() {
        let cases = [
            (
                json!({"version": "0.2.0.dev0", "name": "o", "ontology": []}),
                Refused::Ontology,
            ),
            (
                json!({"name": "v", "tables": [{"name": "t", "base_table": {"table": "x"}}]}),
                Refused::SnowflakeSemanticView,
            ),
            (
                json!({"semantic_models": [], "metrics": [], "project_configuration": {}}),
                Refused::DbtSemanticManifest,
            ),
            (
                json!({"version": "0.3.0", "name": "m", "datasets": []}),
                Refused::UnknownVersion {
                    found: "0.3.0".into(),
                },
            ),
            (
                json!({"version": 0.1, "semantic_model": []}),
                Refused::UnknownVersion {
                    found: "0.1".into(),
                },
            ),
            (json!([{"name": "a"}, {"name": "b"}]), Refused::TopLevelList),
            (
                json!({"kind": "ConfigMap"}),
                Refused::NotOssie {
                    keys: "kind".into(),
                },
            ),
        ];
        for (doc, want) in cases {
            assert_eq!(read(&doc), Err(want), "{doc}");
        }
        let unknown = Refused::UnknownVersion { found: "9".into() }.to_string();
        assert!(unknown.contains("0.1.0, 0.1.1, 0.2.0.dev0"), "{unknown}");
    }

    #[test]
    fn shapes_and_targets_are_named_as_the_flags_write_them() {
        for shape in [Shape::Wrapped, Shape::Root] {
            assert_eq!(Shape::parse(shape.as_str()), Some(shape));
        }
        assert_eq!(Shape::parse("flat"), None);
        for (flag, want) in [
            ("0.2", Some(Target::V0_2)),
            ("0.2.0.dev0", Some(Target::V0_2)),
            ("0.1.1", Some(Target::V0_1_1)),
            ("0.1.0", Some(Target::V0_1_0)),
            ("0.1", None),
        ] {
            assert_eq!(Target::parse(flag), want, "{flag}");
        }
        assert_eq!(
            Target::V0_2.with_shape(Shape::Wrapped),
            Target {
                version: "0.2.0.dev0",
                shape: Shape::Wrapped
            }
        );
        assert_eq!(
            Target::of("0.1.0", Shape::Root),
            Some(Target {
                version: "0.1.0",
                shape: Shape::Root
            })
        );
        assert_eq!(Target::of("0.3.0", Shape::Root), None);
    }

    /// The markers of other formats refuse a document only together; alone they are a model's
    /// own keys. A root model needs only its name.
    #[test]
    fn other_formats_are_told_by_their_markers_together() {
        assert_eq!(
            read(&json!({"semantic_models": [], "saved_queries": []})),
            Err(Refused::DbtSemanticManifest)
        );
        let doc = read(&json!({"version": "0.2.0.dev0", "name": "m", "saved_queries": []}))
            .expect("a model with a key named like dbt's");
        assert_eq!(doc.models[0]["saved_queries"], json!([]));
        let doc = read(&json!({"version": "0.2.0.dev0", "name": "m"})).unwrap();
        assert_eq!((doc.shape, doc.models.len()), (Shape::Root, 1));
        assert_eq!(doc.models[0], *json!({"name": "m"}).as_object().unwrap());
        assert_eq!(
            read(&json!({})),
            Err(Refused::NotOssie {
                keys: "none".into()
            })
        );
        let wrapped =
            read(&json!({"version": "0.1.1", "semantic_model": [{"name": "a"}, 7]})).unwrap();
        assert_eq!(
            wrapped.models,
            [
                json!({"name": "a"}).as_object().cloned().unwrap(),
                Map::new()
            ],
            "an item that is not a mapping is typed later, with its path"
        );
    }

    /// In one wrapped document the models share the document's keys: agreeing ones are written
    /// once, and a disagreement keeps the first and names the model that differs.
    #[test]
    fn models_written_together_share_the_document_keys() {
        let pair = |name: &str, dialects: Value| {
            (
                json!({"name": name}).as_object().cloned().unwrap(),
                json!({"dialects": dialects}).as_object().cloned().unwrap(),
            )
        };
        let differs =
            "model b: the document's `dialects` differs from another model's; the first is kept";
        for (second, want) in [("ANSI_SQL", vec![]), ("SNOWFLAKE", vec![differs])] {
            let (docs, warnings) = write(
                &[pair("a", json!(["ANSI_SQL"])), pair("b", json!([second]))],
                "0.1.1",
                Shape::Wrapped,
            );
            assert_eq!(docs[0]["dialects"], json!(["ANSI_SQL"]), "{second}");
            assert_eq!(docs[0]["semantic_model"][1]["name"], "b");
            assert_eq!(warnings, want);
        }
    }

    /// `version`, `name`, `description` and `source` come first in every mapping, at any depth;
    /// every other key is written once.
    #[test]
    fn ordered_output_puts_the_reading_keys_first_at_every_depth() {
        let doc = json!({"z": 1, "source": "s", "description": "d", "name": "n", "version": "v",
            "items": [{"a": 1, "name": "i"}]});
        let text = serde_json::to_string(&Ordered(&doc)).unwrap();
        assert!(
            text.starts_with(r#"{"version":"v","name":"n","description":"d","source":"s","#),
            "{text}"
        );
        assert!(text.contains(r#""items":[{"name":"i","a":1}]"#), "{text}");
        assert_eq!(text.matches(r#""z":1"#).count(), 1, "{text}");
        assert_eq!(text.matches(r#""name""#).count(), 2, "{text}");
    }

    #[test]
    fn writing_names_what_the_target_cannot_hold() {
        let model = json!({"name": "m", "datasets": [{"name": "d", "fields": [
            {"name": "f", "datatype": "Integer"}]}], "metrics": [{"name": "n", "datatype": "Decimal"}]});
        let root = json!({"dialects": ["ANSI_SQL"]});
        let pair = (
            model.as_object().cloned().unwrap(),
            root.as_object().cloned().unwrap(),
        );
        let (docs, warnings) = write(std::slice::from_ref(&pair), "0.1.1", Shape::Wrapped);
        assert_eq!(docs[0]["dialects"], json!(["ANSI_SQL"]));
        assert!(
            docs[0]["semantic_model"][0]["datasets"][0]["fields"][0]
                .get("datatype")
                .is_none()
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].contains("datasets[0].fields[0].datatype dropped"),
            "{warnings:?}"
        );
        let (docs, warnings) = write(&[pair], "0.2.0.dev0", Shape::Root);
        assert_eq!(docs[0]["name"], "m");
        assert_eq!(docs[0]["metrics"][0]["datatype"], "Decimal");
        assert!(docs[0].get("dialects").is_none());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("`dialects` list dropped"),
            "{warnings:?}"
        );
    }
}

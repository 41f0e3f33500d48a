//! Apache Ossie YAML (snake_case, `semantic_model[]`) <-> SemanticModel custom resources.
//!
//! Lossless: keys are renamed between snake_case and camelCase everywhere except inside
//! `ai_context` objects, whose keys are the user's own; the model's `name` and `description`
//! become `spec.name` and `spec.comment`; everything else is the definition, typed in between so
//! a malformed document is refused with the path of the problem.

use serde_json::{Map, Value};
use smol_str::SmolStr;

use crate::crd::SemanticModel;
use crate::crd::semantic_model::{Definition, SemanticModelSpec};

/// The Ossie core version semops writes when the models do not say which they came from.
pub const OSSIE_VERSION: &str = "0.2.0.dev0";
/// Annotation on an imported model: the `version` of the Ossie document it came from, written
/// back by export so a document of another version (e.g. the 0.1.x line) keeps its version.
pub const OSSIE_VERSION_ANNOTATION: &str = "semops.io/ossie-version";

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum InterchangeError {
    #[error("not an Ossie document: {0}")]
    NotOssie(String),
    #[error(
        "an Ossie document of another layer (top-level keys: {keys}); semops imports the semantic-model layer, a document with a `semantic_model` list"
    )]
    OtherLayer { keys: String },
    #[error("semantic_model[{index}] ({name}): {path}: {message}")]
    Invalid {
        index: usize,
        name: String,
        path: String,
        message: String,
    },
}

/// Where imported models live.
#[derive(Clone, Debug)]
pub struct ImportTarget {
    pub namespace: Option<String>,
    pub catalog: String,
    pub schema: String,
    /// Qualifies dataset sources that name no catalog (`schema.object`, `object`).
    pub source_catalog: Option<String>,
    /// Qualifies dataset sources that name only the object (`object`).
    pub source_schema: Option<String>,
}

impl ImportTarget {
    /// `source` as `catalog.schema.object`: a bare or two-segment name (as several converters
    /// write them) gets the source catalog and schema; the message says which flag is missing.
    fn qualify(&self, source: &str) -> Result<String, String> {
        let segments = crate::ossie::source_ref::split_segments(source)
            .map_err(|e| format!("{source:?}: {e}"))?;
        let (catalog, schema, name) = match segments.as_slice() {
            [_, _, _] => return Ok(source.to_string()),
            [schema, name] => (self.source_catalog.as_deref(), Some(schema.as_str()), name),
            [name] => (
                self.source_catalog.as_deref(),
                self.source_schema.as_deref(),
                name,
            ),
            _ => return Ok(source.to_string()),
        };
        match (catalog, schema) {
            (Some(c), Some(s)) => {
                Ok(crate::ossie::source_ref::SourceRef::new(c, s, name.as_str()).to_string())
            }
            _ => Err(format!(
                "{source:?} names no {}; pass {} (or write catalog.schema.object)",
                if schema.is_none() {
                    "catalog or schema"
                } else {
                    "catalog"
                },
                if schema.is_none() {
                    "--source-catalog and --source-schema"
                } else {
                    "--source-catalog"
                }
            )),
        }
    }
}

fn snake_to_camel(key: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn camel_to_snake(key: &str) -> String {
    let mut out = String::new();
    for c in key.chars() {
        if c.is_uppercase() {
            out.push('_');
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Renames keys recursively; the value of an AI-context key is kept verbatim.
fn rename_keys(value: &Value, rename: fn(&str) -> String) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let free_form = k == "ai_context" || k == "aiContext";
                    (
                        rename(k),
                        if free_form {
                            v.clone()
                        } else {
                            rename_keys(v, rename)
                        },
                    )
                })
                .collect::<Map<String, Value>>(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| rename_keys(v, rename)).collect()),
        other => other.clone(),
    }
}

/// A DNS-1123 object name for a model name (`tpcds_retail_model` -> `tpcds-retail-model`).
pub fn object_name(model_name: &str) -> String {
    let mut s: String = model_name
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    let s = s.trim_matches('-');
    let s = if s.is_empty() { "model" } else { s };
    s.chars().take(253).collect()
}

/// Ossie document -> SemanticModels (one per `semantic_model` item).
pub fn import(doc: &Value, target: &ImportTarget) -> Result<Vec<SemanticModel>, InterchangeError> {
    let Some(items) = doc.get("semantic_model").and_then(Value::as_array) else {
        return Err(match doc.as_object() {
            Some(map) if !map.is_empty() && doc.get("semantic_model").is_none() => {
                InterchangeError::OtherLayer {
                    keys: map.keys().cloned().collect::<Vec<_>>().join(", "),
                }
            }
            _ => InterchangeError::NotOssie("no semantic_model list".into()),
        });
    };
    let version = doc.get("version").and_then(Value::as_str);
    items
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let mut camel = rename_keys(item, snake_to_camel);
            let obj = camel.as_object_mut().ok_or_else(|| {
                InterchangeError::NotOssie(format!("semantic_model[{index}] is not a mapping"))
            })?;
            let name = obj
                .remove("name")
                .and_then(|v| v.as_str().map(str::to_string));
            let comment = obj
                .remove("description")
                .and_then(|v| v.as_str().map(str::to_string));
            let label = name.clone().unwrap_or_else(|| "<unnamed>".into());
            let invalid = |path: String, message: String| InterchangeError::Invalid {
                index,
                name: label.clone(),
                path,
                message,
            };
            let Some(name) = name else {
                return Err(invalid("name".into(), "is required".into()));
            };
            if let Some(datasets) = obj.get_mut("datasets").and_then(Value::as_array_mut) {
                for (i, dataset) in datasets.iter_mut().enumerate() {
                    if let Some(source) = dataset.get_mut("source")
                        && let Some(text) = source.as_str()
                    {
                        let qualified = target
                            .qualify(text)
                            .map_err(|m| invalid(format!("datasets[{i}].source"), m))?;
                        *source = Value::String(qualified);
                    }
                }
            }
            let definition: Definition =
                serde_path_to_error::deserialize(Value::Object(obj.clone())).map_err(|e| {
                    invalid(
                        camel_to_snake(&e.path().to_string()),
                        e.into_inner().to_string(),
                    )
                })?;
            let spec = SemanticModelSpec {
                catalog: target.catalog.as_str().into(),
                schema: target.schema.as_str().into(),
                name: Some(name.as_str().into()),
                comment: comment.map(SmolStr::from),
                properties: Default::default(),
                rebind: None,
                definition,
            };
            let mut model = SemanticModel::new(&object_name(&name), spec);
            model.metadata.namespace = target.namespace.clone();
            if let Some(v) = version {
                model.metadata.annotations =
                    Some([(OSSIE_VERSION_ANNOTATION.to_string(), v.to_string())].into());
            }
            Ok(model)
        })
        .collect()
}

/// SemanticModels -> one Ossie document.
pub fn export(models: &[SemanticModel]) -> Value {
    let items: Vec<Value> = models
        .iter()
        .map(|m| {
            let definition =
                serde_json::to_value(&m.spec.definition).expect("definitions serialize");
            let mut out = Map::new();
            out.insert("name".into(), Value::String(m.model_name().to_string()));
            if let Some(c) = &m.spec.comment {
                out.insert("description".into(), Value::String(c.to_string()));
            }
            if let Value::Object(def) = rename_keys(&definition, camel_to_snake) {
                out.extend(def);
            }
            Value::Object(out)
        })
        .collect();
    serde_json::json!({"version": export_version(models), "semantic_model": items})
}

/// The version the models came from when they agree on one; else the version semops writes.
fn export_version(models: &[SemanticModel]) -> String {
    let versions: std::collections::BTreeSet<Option<&String>> = models
        .iter()
        .map(|m| {
            m.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(OSSIE_VERSION_ANNOTATION))
        })
        .collect();
    match versions.into_iter().collect::<Vec<_>>().as_slice() {
        [Some(v)] => (*v).clone(),
        _ => OSSIE_VERSION.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> ImportTarget {
        ImportTarget {
            namespace: Some("ns".into()),
            catalog: "analytics".into(),
            schema: "semantic".into(),
            source_catalog: None,
            source_schema: None,
        }
    }

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/ossie/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_saphyr::from_str(
            &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
        )
        .unwrap()
    }

    /// Ossie and JSON compare equal when numbers and strings match; YAML maps carry no order.
    fn normalize(v: &Value) -> Value {
        serde_json::from_str(&crate::model::canonical::canonical_json(v)).unwrap()
    }

    #[test]
    fn every_fixture_round_trips_losslessly() {
        for name in [
            "tpcds_semantic_model.yaml",
            "fixtureA_ossie.yaml",
            "version_0_1_ossie.yaml",
        ] {
            let original = fixture(name);
            let models = import(&original, &target()).unwrap();
            // Through the CRD's own YAML, as kubectl would store it.
            let yaml = serde_saphyr::to_string(&models).unwrap();
            let reread: Vec<SemanticModel> = serde_saphyr::from_str(&yaml).unwrap();
            let exported = export(&reread);
            assert_eq!(
                normalize(&exported),
                normalize(&original),
                "{name} did not round-trip"
            );
        }
    }

    #[test]
    fn imported_models_are_placed_named_and_valid() {
        let models = import(&fixture("tpcds_semantic_model.yaml"), &target()).unwrap();
        assert_eq!(models.len(), 1);
        let m = &models[0];
        assert_eq!(m.metadata.name.as_deref(), Some("tpcds-retail-model"));
        assert_eq!(
            (
                m.spec.catalog.as_str(),
                m.spec.schema.as_str(),
                m.model_name()
            ),
            ("analytics", "semantic", "tpcds_retail_model")
        );
        assert_eq!(m.spec.definition.datasets.len(), 5);
        assert_eq!(crate::model::validate::validate_definition(&m.spec), vec![]);
        // ai_context keys stay as written, inside and out.
        let ctx = m.spec.definition.datasets[0].ai_context.as_ref().unwrap();
        assert!(ctx.get("synonyms").is_some());
    }

    #[test]
    fn free_form_ai_context_keys_are_not_renamed() {
        let doc = serde_json::json!({"version": OSSIE_VERSION, "semantic_model": [{
            "name": "m", "ai_context": {"my_custom_key": {"nested_key": 1}},
            "datasets": [{"name": "d", "source": "a.b.c", "primary_key": ["x"], "ai_context": {"snake_case_here": true}}]
        }]});
        let models = import(&doc, &target()).unwrap();
        let def = serde_json::to_value(&models[0].spec.definition).unwrap();
        assert!(def["aiContext"].get("my_custom_key").is_some());
        assert!(def["datasets"][0]["primaryKey"].is_array());
        assert!(
            def["datasets"][0]["aiContext"]
                .get("snake_case_here")
                .is_some()
        );
        assert_eq!(normalize(&export(&models)), normalize(&doc));
    }

    #[test]
    fn malformed_documents_name_the_item_and_path() {
        let doc = serde_json::json!({"semantic_model": [{"name": "m", "datasets": [{"name": "d", "source": "a.b.c", "fields": [{"name": "f", "expression": {"dialects": [{"dialect": "COBOL", "expression": "x"}]}}]}]}]});
        let err = import(&doc, &target()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(
                "semantic_model[0] (m): datasets[0].fields[0].expression.dialects[0].dialect:"
            ),
            "{text}"
        );
        assert!(matches!(
            import(&serde_json::json!([1]), &target()),
            Err(InterchangeError::NotOssie(_))
        ));
        // A document of another Ossie layer is told which layer semops imports.
        let other = import(
            &serde_json::json!({"version": "0.2.0", "ontology": {"concepts": []}}),
            &target(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            other.contains("another layer (top-level keys: ontology, version)")
                && other.contains("`semantic_model` list"),
            "{other}"
        );
    }

    #[test]
    fn bare_sources_are_qualified_by_the_source_flags_or_refused_naming_the_flag() {
        let doc = |source: &str| {
            serde_json::json!({"semantic_model": [{"name": "m", "datasets": [
                {"name": "d", "source": source, "primary_key": ["id"]}
            ]}]})
        };
        let with = |catalog: Option<&str>, schema: Option<&str>| ImportTarget {
            source_catalog: catalog.map(str::to_string),
            source_schema: schema.map(str::to_string),
            ..target()
        };
        /// source, --source-catalog, --source-schema, the qualified source or the error's words.
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            Option<&'a str>,
            Result<&'a str, &'a str>,
        );
        let cases: &[Case] = &[
            ("orders", Some("hr"), Some("public"), Ok("hr.public.orders")),
            ("sales.orders", Some("hr"), None, Ok("hr.sales.orders")),
            (
                "sales.orders",
                Some("hr"),
                Some("public"),
                Ok("hr.sales.orders"),
            ),
            ("a.b.c", Some("hr"), Some("public"), Ok("a.b.c")),
            ("a.b.c", None, None, Ok("a.b.c")),
            (
                "orders",
                Some("my.lake"),
                Some("raw"),
                Ok("`my.lake`.raw.orders"),
            ),
            ("`x.y`", Some("hr"), Some("public"), Ok("hr.public.`x.y`")),
            (
                "orders",
                None,
                None,
                Err("--source-catalog and --source-schema"),
            ),
            (
                "orders",
                Some("hr"),
                None,
                Err("--source-catalog and --source-schema"),
            ),
            (
                "sales.orders",
                None,
                Some("public"),
                Err("pass --source-catalog ("),
            ),
            (
                "`open",
                Some("hr"),
                Some("public"),
                Err("unterminated backtick"),
            ),
        ];
        for (source, catalog, schema, want) in cases {
            let got = import(&doc(source), &with(*catalog, *schema));
            match (want, got) {
                (Ok(w), Ok(models)) => {
                    assert_eq!(&models[0].spec.definition.datasets[0].source, w, "{source}")
                }
                (Err(w), Err(e)) => {
                    let text = e.to_string();
                    assert!(
                        text.contains("datasets[0].source") && text.contains(w),
                        "{source}: {text}"
                    );
                }
                (want, got) => panic!("{source}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn the_document_version_comes_back_and_mixed_versions_fall_back() {
        let doc = |version: &str| {
            serde_json::json!({"version": version, "semantic_model": [{"name": format!("m{version}"), "datasets": [
                {"name": "d", "source": "a.b.c", "primary_key": ["id"]}
            ]}]})
        };
        let old = import(&doc("0.1.3"), &target()).unwrap();
        assert_eq!(export(&old)["version"], "0.1.3");
        let new = import(&doc("0.2.0"), &target()).unwrap();
        let mixed: Vec<_> = old.into_iter().chain(new).collect();
        assert_eq!(export(&mixed)["version"], OSSIE_VERSION);
        let unversioned = import(
            &serde_json::json!({"semantic_model": doc("x")["semantic_model"].clone()}),
            &target(),
        )
        .unwrap();
        assert_eq!(export(&unversioned)["version"], OSSIE_VERSION);
    }

    #[test]
    fn object_names_are_dns_labels() {
        for (input, want) in [
            ("tpcds_retail_model", "tpcds-retail-model"),
            ("Sales Model!", "sales-model"),
            ("__", "model"),
            ("a__b", "a-b"),
        ] {
            assert_eq!(object_name(input), want);
        }
    }
}

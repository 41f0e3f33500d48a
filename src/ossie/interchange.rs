//! Apache Ossie models <-> SemanticModel custom resources.
//!
//! Lossless: keys are renamed between snake_case and camelCase everywhere except inside
//! `ai_context` objects, whose keys are the user's own; the model's `name` and `description`
//! become `spec.name` and `spec.comment`; everything else is the definition, typed in between so
//! a malformed document is refused with the path of the problem. What the CRD does not hold (keys
//! semops does not know, the document's own `dialects` and `vendors`, a value written in another
//! form) is kept in annotations and written back by export, so import -> apply -> export gives
//! the document back. The version and shape a model came from are annotations too.

use serde_json::{Map, Value};
use smol_str::SmolStr;

use super::document::{self, Refused, Shape, Target};
use crate::crd::SemanticModel;
use crate::crd::semantic_model::{Definition, SemanticModelSpec};

/// The Ossie version semops writes by default (the current one-model-per-document shape).
pub const OSSIE_VERSION: &str = "0.2.0.dev0";
/// Annotation on an imported model: the `version` of the Ossie document it came from.
pub const OSSIE_VERSION_ANNOTATION: &str = "semops.io/ossie-version";
/// Annotation on an imported model: the shape of its document, `wrapped` or `root`.
pub const OSSIE_SHAPE_ANNOTATION: &str = "semops.io/ossie-shape";
/// Annotation on an imported model: what the CRD does not hold, as JSON (see [`Extras`]).
pub const OSSIE_EXTRAS_ANNOTATION: &str = "semops.io/ossie-extras";

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum InterchangeError {
    #[error("{0}")]
    Refused(#[from] Refused),
    #[error("{}({name}): {path}: {message}", .item.map(|i| format!("semantic_model[{i}] ")).unwrap_or_default())]
    Invalid {
        /// The model's index in a wrapped document's list (`None` in the root shape).
        item: Option<usize>,
        name: String,
        path: String,
        message: String,
    },
    #[error(
        "model {name}: annotation {OSSIE_EXTRAS_ANNOTATION} is not what import wrote: {message}"
    )]
    Extras { name: String, message: String },
}

/// What the CRD does not hold of one imported model, kept beside it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Extras {
    /// The document's own keys besides `version` and the models.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub root: Map<String, Value>,
    /// Values inside the model the typed definition dropped or wrote differently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model: Vec<Kept>,
}

/// One kept value: where it goes, what it is, and (for a value written in another form) what
/// the definition says there, so an edit made since wins over the kept form.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Kept {
    pub path: Vec<Step>,
    pub value: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub was: Option<Value>,
}

/// A step into a mapping (its key) or a list (the item's index, and its name when it has one,
/// which is preferred: lists are edited).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum Step {
    Key(String),
    Item {
        index: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
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

/// An Ossie document -> SemanticModels (one per model in it).
pub fn import(doc: &Value, target: &ImportTarget) -> Result<Vec<SemanticModel>, InterchangeError> {
    let document = document::read(doc)?;
    document
        .models
        .iter()
        .enumerate()
        .map(|(index, item)| {
            let at = (document.shape == Shape::Wrapped).then_some(index);
            import_model(item, at, &document, target)
        })
        .collect()
}

fn import_model(
    item: &Map<String, Value>,
    at: Option<usize>,
    document: &document::Document,
    target: &ImportTarget,
) -> Result<SemanticModel, InterchangeError> {
    let label = match item.get("name") {
        Some(Value::String(n)) => n.clone(),
        _ => "<unnamed>".into(),
    };
    let invalid = |path: String, message: String| InterchangeError::Invalid {
        item: at,
        name: label.clone(),
        path,
        message,
    };
    let name = match item.get("name") {
        Some(Value::String(n)) if !n.is_empty() => n.clone(),
        Some(Value::String(_)) | None => {
            return Err(invalid("name".into(), "is required".into()));
        }
        Some(other) => {
            return Err(invalid(
                "name".into(),
                format!("must be a string, found {other}"),
            ));
        }
    };
    let comment = match item.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(SmolStr::from(c.as_str())),
        Some(other) => {
            return Err(invalid(
                "description".into(),
                format!("must be a string, found {other}"),
            ));
        }
    };
    let mut camel = rename_keys(&Value::Object(item.clone()), snake_to_camel);
    let obj = camel.as_object_mut().expect("a mapping stays one");
    obj.remove("name");
    obj.remove("description");
    for metric in (obj.get_mut("metrics").and_then(Value::as_array_mut))
        .into_iter()
        .flatten()
    {
        semops_keys_from_extension(metric);
    }
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
    let definition: Definition = serde_path_to_error::deserialize(Value::Object(obj.clone()))
        .map_err(|e| {
            invalid(
                camel_to_snake(&e.path().to_string()),
                e.into_inner().to_string(),
            )
        })?;
    let spec = SemanticModelSpec {
        catalog: target.catalog.as_str().into(),
        schema: target.schema.as_str().into(),
        name: Some(name.as_str().into()),
        comment,
        properties: Default::default(),
        rebind: None,
        definition,
    };
    let mut model = SemanticModel::new(&object_name(&name), spec);
    model.metadata.namespace = target.namespace.clone();
    // What typing dropped or wrote in another form, found by writing the model back.
    let mut kept = Vec::new();
    diff(
        &Value::Object(item.clone()),
        &Value::Object(model_map(&model)),
        &mut Vec::new(),
        &mut kept,
    );
    let extras = Extras {
        root: document.root.clone(),
        model: kept,
    };
    let mut annotations = std::collections::BTreeMap::from([
        (
            OSSIE_VERSION_ANNOTATION.to_string(),
            document.version.clone(),
        ),
        (
            OSSIE_SHAPE_ANNOTATION.to_string(),
            document.shape.as_str().to_string(),
        ),
    ]);
    if extras != Extras::default() {
        annotations.insert(
            OSSIE_EXTRAS_ANNOTATION.to_string(),
            serde_json::to_string(&extras).expect("extras serialize"),
        );
    }
    model.metadata.annotations = Some(annotations);
    Ok(model)
}

/// Records where `input` (as written) has what `output` (as typed and written back) does not.
fn diff(input: &Value, output: &Value, path: &mut Vec<Step>, kept: &mut Vec<Kept>) {
    match (input, output) {
        (Value::Object(i), Value::Object(o)) => {
            for (k, v) in i {
                path.push(Step::Key(k.clone()));
                match o.get(k) {
                    Some(w) => diff(v, w, path, kept),
                    None => kept.push(Kept {
                        path: path.clone(),
                        value: v.clone(),
                        was: None,
                    }),
                }
                path.pop();
            }
        }
        (Value::Array(i), Value::Array(o)) if i.len() == o.len() => {
            for (index, (v, w)) in i.iter().zip(o).enumerate() {
                path.push(Step::Item {
                    index,
                    name: v.get("name").and_then(Value::as_str).map(str::to_string),
                });
                diff(v, w, path, kept);
                path.pop();
            }
        }
        (i, o) if i != o => kept.push(Kept {
            path: path.clone(),
            value: i.clone(),
            was: Some(o.clone()),
        }),
        _ => {}
    }
}

/// The item a step names in `at`: a mapping's key, or a list's item by name (by index only when
/// the item had no name).
fn step_into<'a>(at: &'a mut Value, step: &Step) -> Option<&'a mut Value> {
    match (step, at) {
        (Step::Key(key), Value::Object(map)) => map.get_mut(key),
        (Step::Item { index, name }, Value::Array(items)) => {
            let i = match name {
                Some(n) => items
                    .iter()
                    .position(|i| i.get("name").and_then(Value::as_str) == Some(n.as_str()))?,
                None => *index,
            };
            items.get_mut(i)
        }
        _ => None,
    }
}

/// Puts the kept values back into `model`; answers what could not go back (its place is gone,
/// or the definition changed there since).
fn restore(model: &mut Value, kept: &[Kept]) -> Vec<String> {
    let mut lost = Vec::new();
    for k in kept {
        let Some((last, parents)) = k.path.split_last() else {
            continue;
        };
        let parent = parents
            .iter()
            .try_fold(&mut *model, |at, step| step_into(at, step));
        let put = match (last, parent) {
            (Step::Key(key), Some(Value::Object(map))) => match (&k.was, map.get(key)) {
                (None, None) => {
                    map.insert(key.clone(), k.value.clone());
                    true
                }
                (Some(was), Some(now)) if was == now => {
                    map.insert(key.clone(), k.value.clone());
                    true
                }
                _ => false,
            },
            (Step::Item { index, .. }, Some(Value::Array(items))) => {
                match (&k.was, items.get_mut(*index)) {
                    (Some(was), Some(now)) if was == now => {
                        *now = k.value.clone();
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        };
        if !put {
            lost.push(path_text(&k.path));
        }
    }
    lost
}

fn path_text(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Item { index, .. } => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

/// A model's Ossie mapping from its spec alone (snake_case, `name` and `description` first).
fn model_map(m: &SemanticModel) -> Map<String, Value> {
    let definition = serde_json::to_value(&m.spec.definition).expect("definitions serialize");
    let mut out = Map::new();
    out.insert("name".into(), Value::String(m.model_name().to_string()));
    if let Some(c) = &m.spec.comment {
        out.insert("description".into(), Value::String(c.to_string()));
    }
    if let Value::Object(mut def) = rename_keys(&definition, camel_to_snake) {
        for metric in (def.get_mut("metrics").and_then(Value::as_array_mut))
            .into_iter()
            .flatten()
        {
            semops_keys_into_extension(metric);
        }
        out.extend(def);
    }
    out
}

/// Vendor name of the custom extension that carries semops's own metric keys through Ossie.
const SEMOPS_VENDOR: &str = "SEMOPS";
/// semops's metric keys that Ossie does not define (snake_case as exported).
const SEMOPS_METRIC_KEYS: [(&str, &str); 2] = [
    ("renamed_from", "renamedFrom"),
    ("deprecated", "deprecated"),
];

/// Moves `renamed_from` and `deprecated` of an exported metric into a `SEMOPS` custom
/// extension: Ossie readers see only keys Ossie defines, and import puts them back.
fn semops_keys_into_extension(metric: &mut Value) {
    let Some(m) = metric.as_object_mut() else {
        return;
    };
    let mut data = Map::new();
    for (snake, camel) in SEMOPS_METRIC_KEYS {
        if let Some(v) = m.remove(snake) {
            data.insert(camel.into(), rename_keys(&v, snake_to_camel));
        }
    }
    if data.is_empty() {
        return;
    }
    let entry =
        serde_json::json!({"vendor_name": SEMOPS_VENDOR, "data": Value::Object(data).to_string()});
    match m.get_mut("custom_extensions").and_then(Value::as_array_mut) {
        Some(list) => list.push(entry),
        None => {
            m.insert("custom_extensions".into(), Value::Array(vec![entry]));
        }
    }
}

/// The reverse on import (camelCase by then): a `SEMOPS` extension of a metric becomes its
/// `renamedFrom` and `deprecated` again; other data in it is left where it was.
fn semops_keys_from_extension(metric: &mut Value) {
    let Some(m) = metric.as_object_mut() else {
        return;
    };
    let Some(list) = m.get_mut("customExtensions").and_then(Value::as_array_mut) else {
        return;
    };
    let mut restored = Map::new();
    list.retain(|ext| {
        let ours = ext["vendorName"] == SEMOPS_VENDOR;
        let data = ext["data"]
            .as_str()
            .and_then(|d| serde_json::from_str::<Map<String, Value>>(d).ok());
        match data {
            Some(data)
                if ours
                    && data
                        .keys()
                        .all(|k| SEMOPS_METRIC_KEYS.iter().any(|(_, c)| c == k)) =>
            {
                restored.extend(data);
                false
            }
            _ => true,
        }
    });
    if list.is_empty() {
        m.remove("customExtensions");
    }
    m.extend(restored);
}

fn annotation<'a>(m: &'a SemanticModel, key: &str) -> Option<&'a String> {
    m.metadata.annotations.as_ref().and_then(|a| a.get(key))
}

/// What `export` wrote, and what it could not carry over.
#[derive(Debug, Default)]
pub struct Exported {
    pub documents: Vec<Value>,
    /// Constructs the target cannot hold, and kept values whose place is gone.
    pub warnings: Vec<String>,
}

/// SemanticModels -> Ossie documents of `to` (default: the current version and shape; one
/// document per model in the root shape, one for all in the wrapped shape).
pub fn export(models: &[SemanticModel], to: Option<Target>) -> Result<Exported, InterchangeError> {
    let to = to.unwrap_or(Target::V0_2);
    let mut warnings = Vec::new();
    let mut pairs = Vec::new();
    for m in models {
        let name = m.model_name().to_string();
        let extras: Extras = match annotation(m, OSSIE_EXTRAS_ANNOTATION) {
            Some(text) => serde_json::from_str(text).map_err(|e| InterchangeError::Extras {
                name: name.clone(),
                message: e.to_string(),
            })?,
            None => Extras::default(),
        };
        let mut model = Value::Object(model_map(m));
        for lost in restore(&mut model, &extras.model) {
            warnings.push(format!(
                "model {name}: {lost} not written back: the definition changed there since import"
            ));
        }
        let Value::Object(model) = model else {
            unreachable!("a model is a mapping")
        };
        pairs.push((model, extras.root));
    }
    let (documents, more) = document::write(&pairs, to.version, to.shape);
    warnings.extend(more);
    Ok(Exported {
        documents,
        warnings,
    })
}

/// The target a model's own document had (for writing a model back as it came).
pub fn origin(m: &SemanticModel) -> Option<Target> {
    let version = annotation(m, OSSIE_VERSION_ANNOTATION)?;
    let shape = Shape::parse(annotation(m, OSSIE_SHAPE_ANNOTATION)?)?;
    Target::of(version, shape)
}

/// One problem `semops validate` finds in an Ossie document, with its JSON path.
#[derive(Debug, PartialEq)]
pub struct OssieProblem {
    /// `model NAME` or `document`.
    pub object: String,
    /// A JSON path into the document as written (`$.semantic_model[0].datasets[1].source`).
    pub path: String,
    pub message: String,
    pub reason: String,
}

/// Whether a parsed document is meant as an Ossie semantic-model document (what `validate`
/// checks as one).
pub fn looks_like_ossie(doc: &Value) -> bool {
    doc.get("semantic_model").is_some()
        || (doc.get("version").is_some() && doc.get("datasets").is_some())
}

/// The contract and model-local checks of every model in an Ossie document; bare sources are
/// allowed (an import qualifies them).
pub fn check(doc: &Value) -> (usize, Vec<OssieProblem>) {
    let target = ImportTarget {
        namespace: None,
        catalog: "ossie".into(),
        schema: "ossie".into(),
        source_catalog: Some("ossie".into()),
        source_schema: Some("ossie".into()),
    };
    // A JSON path to the model: its item of a wrapped document's list, or the root.
    let prefix = |item: Option<usize>| match item {
        Some(i) => format!("$.semantic_model[{i}]"),
        None => "$".to_string(),
    };
    match import(doc, &target) {
        Err(InterchangeError::Invalid {
            item,
            name,
            path,
            message,
        }) => (
            0,
            vec![OssieProblem {
                object: format!("model {name}"),
                path: format!("{}.{path}", prefix(item)),
                message,
                reason: "SchemaMismatch".into(),
            }],
        ),
        Err(e) => (
            0,
            vec![OssieProblem {
                object: "document".into(),
                path: "$".into(),
                message: e.to_string(),
                reason: "NotOssie".into(),
            }],
        ),
        Ok(models) => {
            let problems = models
                .iter()
                .enumerate()
                .flat_map(|(index, m)| {
                    let wrapped = annotation(m, OSSIE_SHAPE_ANNOTATION)
                        .is_some_and(|s| s == Shape::Wrapped.as_str());
                    let at = prefix(wrapped.then_some(index));
                    crate::model::validate::validate_definition(&m.spec)
                        .into_iter()
                        .map(move |p| {
                            let inner = p
                                .path
                                .trim_start_matches("spec.definition")
                                .trim_start_matches('.');
                            OssieProblem {
                                object: format!("model {}", m.model_name()),
                                path: if inner.is_empty() {
                                    at.clone()
                                } else {
                                    format!("{at}.{}", camel_to_snake(inner))
                                },
                                message: p.message,
                                reason: p.reason.condition_reason().to_string(),
                            }
                        })
                })
                .collect();
            (models.len(), problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target() -> ImportTarget {
        ImportTarget {
            namespace: Some("ns".into()),
            catalog: "analytics".into(),
            schema: "semantic".into(),
            source_catalog: Some("shop".into()),
            source_schema: Some("public".into()),
        }
    }

    fn fixture(name: &str) -> Value {
        let path = format!("{}/tests/fixtures/ossie/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_saphyr::from_str(
            &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
        )
        .unwrap()
    }

    /// Documents compare as YAML values: mappings carry no order.
    fn normalize(v: &Value) -> Value {
        serde_json::from_str(&crate::model::canonical::canonical_json(v)).unwrap()
    }

    /// Import, then through the CRD's own YAML as kubectl would store it, then export.
    fn round_trip(doc: &Value, to: Target) -> Exported {
        let models = import(doc, &target()).unwrap();
        let yaml = serde_saphyr::to_string(&models).unwrap();
        let reread: Vec<SemanticModel> = serde_saphyr::from_str(&yaml).unwrap();
        export(&reread, Some(to)).unwrap()
    }

    #[test]
    fn every_version_and_shape_comes_back_as_written() {
        for (name, to) in [
            ("bike-shop-0.2.yaml", Target::V0_2),
            ("bike-shop-0.1.1.yaml", Target::V0_1_1),
            ("bike-shop-0.1.0.json", Target::V0_1_0),
        ] {
            let original = fixture(name);
            let out = round_trip(&original, to);
            assert_eq!(out.documents.len(), 1, "{name}");
            assert_eq!(
                normalize(&out.documents[0]),
                normalize(&original),
                "{name} did not round-trip"
            );
            assert!(out.warnings.is_empty(), "{name}: {:?}", out.warnings);
        }
    }

    #[test]
    fn every_version_in_both_shapes_comes_back_in_its_own_shape() {
        // The 0.1.1 fixture's two models, in every version and shape: one wrapped document, or
        // one root document per model.
        let models = import(&fixture("bike-shop-0.1.1.yaml"), &target()).unwrap();
        for version in document::VERSIONS {
            for shape in [Shape::Wrapped, Shape::Root] {
                let to = Target::of(version, shape).unwrap();
                let written = export(&models, Some(to)).unwrap().documents;
                assert_eq!(written.len(), if shape == Shape::Root { 2 } else { 1 });
                for doc in &written {
                    let again = import(doc, &target()).unwrap();
                    assert_eq!(origin(&again[0]), Some(to), "{version} {shape:?}");
                    let back = export(&again, Some(to)).unwrap();
                    assert_eq!(
                        normalize(&back.documents[0]),
                        normalize(doc),
                        "{version} {shape:?} did not round-trip"
                    );
                }
            }
        }
    }

    #[test]
    fn imported_models_record_where_they_came_from_and_are_valid() {
        let models = import(&fixture("bike-shop-0.1.1.yaml"), &target()).unwrap();
        assert_eq!(models.len(), 2);
        let m = &models[0];
        assert_eq!(m.metadata.name.as_deref(), Some("shop-orders"));
        let a = m.metadata.annotations.as_ref().unwrap();
        assert_eq!(a[OSSIE_VERSION_ANNOTATION], "0.1.1");
        assert_eq!(a[OSSIE_SHAPE_ANNOTATION], "wrapped");
        let extras: Extras = serde_json::from_str(&a[OSSIE_EXTRAS_ANNOTATION]).unwrap();
        assert_eq!(extras.root["vendors"], serde_json::json!(["COMMON"]));
        // The bare source was qualified for the CRD and is kept as written for export.
        assert_eq!(m.spec.definition.datasets[1].source, "shop.public.stores");
        assert!(
            extras.model.iter().any(|k| k.value == "stores"
                && k.was == Some(Value::String("shop.public.stores".into()))),
            "{extras:?}"
        );
        assert_eq!(origin(m), Some(Target::V0_1_1));
        for m in &models {
            assert_eq!(crate::model::validate::validate_definition(&m.spec), vec![]);
        }
        let rooted = import(&fixture("bike-shop-0.2.yaml"), &target()).unwrap();
        assert_eq!(origin(&rooted[0]), Some(Target::V0_2));
        // ai_context keys stay as written, inside and out.
        let ctx = rooted[0].spec.definition.datasets[2]
            .ai_context
            .as_ref()
            .unwrap();
        assert!(ctx.get("synonyms").is_some());
    }

    #[test]
    fn the_older_line_and_the_current_shape_convert_both_ways_where_constructs_fit() {
        // 0.1.1 -> 0.2: each model becomes its own document; the document's lists cannot go.
        let out = round_trip(&fixture("bike-shop-0.1.1.yaml"), Target::V0_2);
        assert_eq!(out.documents.len(), 2);
        assert_eq!(out.documents[1]["name"], "shop_bikes");
        assert_eq!(out.documents[1]["version"], "0.2.0.dev0");
        assert!(out.documents[0].get("dialects").is_none());
        assert_eq!(
            out.warnings.len(),
            4,
            "dialects and vendors of each model: {:?}",
            out.warnings
        );
        // ... and back: 0.2 -> 0.1.1 gives the models back as they were (without those lists).
        let again: Vec<SemanticModel> = out
            .documents
            .iter()
            .flat_map(|d| import(d, &target()).unwrap())
            .collect();
        let back = export(&again, Some(Target::V0_1_1)).unwrap();
        let mut want = fixture("bike-shop-0.1.1.yaml");
        let root = want.as_object_mut().unwrap();
        root.remove("dialects");
        root.remove("vendors");
        assert_eq!(normalize(&back.documents[0]), normalize(&want));
        assert!(back.warnings.is_empty(), "{:?}", back.warnings);

        // 0.2 -> 0.1.1: datatypes have no place in the 0.1 line, and each one is named.
        let out = round_trip(&fixture("bike-shop-0.2.yaml"), Target::V0_1_1);
        let dropped: Vec<&String> = out
            .warnings
            .iter()
            .filter(|w| w.contains("datatype dropped"))
            .collect();
        assert_eq!(dropped.len(), 6, "{:?}", out.warnings);
        assert!(
            out.documents[0]["semantic_model"][0]["metrics"][0]
                .get("datatype")
                .is_none()
        );
    }

    #[test]
    fn an_edit_since_import_wins_over_the_kept_form_and_is_named() {
        let mut models = import(&fixture("bike-shop-0.1.1.yaml"), &target()).unwrap();
        models[0].spec.definition.datasets[1].source = "shop.sales.stores".into();
        let out = export(&models, Some(Target::V0_1_1)).unwrap();
        assert_eq!(
            out.documents[0]["semantic_model"][0]["datasets"][1]["source"],
            "shop.sales.stores"
        );
        assert!(
            out.warnings
                .iter()
                .any(|w| w.contains("datasets[1].source not written back")),
            "{:?}",
            out.warnings
        );
        // A dataset removed since import takes its unknown keys with it, and says so.
        let mut models = import(&fixture("bike-shop-0.1.1.yaml"), &target()).unwrap();
        models[0].spec.definition.datasets = models[0].spec.definition.datasets[..1].to_vec();
        let out = export(&models, Some(Target::V0_1_1)).unwrap();
        assert!(
            out.warnings.iter().any(|w| w.contains("x_region_hint")),
            "{:?}",
            out.warnings
        );
    }

    /// `renamedFrom` and `deprecated` are semops's: exported inside a SEMOPS custom extension
    /// (no key Ossie does not define), imported back as they were.
    #[test]
    fn semops_metric_keys_travel_in_a_custom_extension_and_come_back() {
        let spec: crate::crd::SemanticModelSpec = serde_json::from_value(serde_json::json!({
            "catalog": "analytics", "schema": "semantic", "name": "people",
            "definition": {"datasets": [{"name": "d", "source": "hr.public.t"}], "metrics": [
                {"name": "staff", "renamedFrom": "headcount", "deprecated": {"replacement": "people", "reason": "rows"},
                 "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "COUNT(*)"}]},
                 "customExtensions": [{"vendorName": "DBT", "data": "{}"}]},
                {"name": "people", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "COUNT(DISTINCT d.id)"}]}}
            ]}
        }))
        .unwrap();
        let model = SemanticModel::new("people", spec.clone());
        let out = export(std::slice::from_ref(&model), Some(Target::V0_1_1)).unwrap();
        let text = serde_json::to_string(&out.documents).unwrap();
        assert!(
            !text.contains("renamed_from") && !text.contains("\"deprecated\""),
            "{text}"
        );
        let metric = &out.documents[0]["semantic_model"][0]["metrics"][0];
        let ext = &metric["custom_extensions"];
        assert_eq!(ext[0]["vendor_name"], "DBT");
        assert_eq!(ext[1]["vendor_name"], "SEMOPS");
        assert!(
            out.documents[0]["semantic_model"][0]["metrics"][1]
                .get("custom_extensions")
                .is_none()
        );
        let back = import(&out.documents[0], &target()).unwrap();
        assert_eq!(back[0].spec.definition, spec.definition);
    }

    #[test]
    fn free_form_ai_context_keys_are_not_renamed() {
        let doc = serde_json::json!({"version": OSSIE_VERSION, "name": "m", "ai_context": {"my_custom_key": {"nested_key": 1}},
            "datasets": [{"name": "d", "source": "a.b.c", "primary_key": ["x"], "ai_context": {"snake_case_here": true}}]
        });
        let models = import(&doc, &target()).unwrap();
        let def = serde_json::to_value(&models[0].spec.definition).unwrap();
        assert!(def["aiContext"].get("my_custom_key").is_some());
        assert!(def["datasets"][0]["primaryKey"].is_array());
        assert!(
            def["datasets"][0]["aiContext"]
                .get("snake_case_here")
                .is_some()
        );
        assert_eq!(
            normalize(&export(&models, None).unwrap().documents[0]),
            normalize(&doc)
        );
    }

    #[test]
    fn bad_input_names_the_item_and_the_path() {
        let wrapped =
            |model: Value| serde_json::json!({"version": "0.1.1", "semantic_model": [model]});
        let cases = [
            (
                wrapped(
                    serde_json::json!({"name": "m", "datasets": [{"name": "d", "source": "a.b.c", "fields": [{"name": "f", "expression": {"dialects": [{"dialect": "COBOL", "expression": "x"}]}}]}]}),
                ),
                "semantic_model[0] (m): datasets[0].fields[0].expression.dialects[0].dialect:",
            ),
            (
                wrapped(serde_json::json!({"datasets": []})),
                "semantic_model[0] (<unnamed>): name: is required",
            ),
            (
                serde_json::json!({"version": "0.2.0.dev0", "name": 7, "datasets": []}),
                "(<unnamed>): name: must be a string, found 7",
            ),
            (
                serde_json::json!({"version": "0.2.0.dev0", "name": "m", "datasets": [{"name": 3, "source": "a.b.c"}]}),
                "(m): datasets[0].name:",
            ),
            (
                serde_json::json!([{"version": "0.2.0.dev0", "name": "a"}, {"version": "0.2.0.dev0", "name": "b"}]),
                "a list at the top of the document",
            ),
        ];
        for (doc, want) in cases {
            let text = import(&doc, &target()).unwrap_err().to_string();
            assert!(text.starts_with(want), "{text}\nwanted: {want}");
        }
    }

    #[test]
    fn other_documents_are_named_for_what_they_are() {
        for (name, want) in [
            ("refused/ontology.yaml", "an Apache Ossie ontology document"),
            (
                "refused/snowflake-semantic-view.yaml",
                "a Snowflake semantic view",
            ),
            (
                "refused/dbt-semantic-manifest.json",
                "a dbt semantic manifest",
            ),
            (
                "refused/unknown-version.yaml",
                "Ossie version \"0.9.0\" is not one semops reads (it reads 0.1.0, 0.1.1, 0.2.0.dev0)",
            ),
        ] {
            let text = import(&fixture(name), &target()).unwrap_err().to_string();
            assert!(text.starts_with(want), "{name}: {text}");
        }
    }

    #[test]
    fn bare_sources_are_qualified_by_the_source_flags_or_refused_naming_the_flag() {
        let doc = |source: &str| {
            serde_json::json!({"version": "0.1.1", "semantic_model": [{"name": "m", "datasets": [
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

    fn key(k: &str) -> Step {
        Step::Key(k.into())
    }
    fn item(index: usize, name: Option<&str>) -> Step {
        Step::Item {
            index,
            name: name.map(str::to_string),
        }
    }
    fn kept(path: Vec<Step>, value: Value, was: Option<Value>) -> Kept {
        Kept { path, value, was }
    }

    /// What a typed model dropped or wrote in another form, recorded at the deepest place that
    /// differs: into mappings, and into lists of the same length item by item.
    #[test]
    fn diff_records_the_deepest_place_that_differs() {
        let cases = [
            (
                json!({"a": {"b": 1, "gone": true}}),
                json!({"a": {"b": 1}}),
                vec![kept(vec![key("a"), key("gone")], json!(true), None)],
            ),
            (
                json!({"l": [{"name": "x", "v": 1}, {"name": "y", "v": 2}]}),
                json!({"l": [{"name": "x", "v": 1}, {"name": "y", "v": 3}]}),
                vec![kept(
                    vec![key("l"), item(1, Some("y")), key("v")],
                    json!(2),
                    Some(json!(3)),
                )],
            ),
            (
                json!({"l": [1, 2]}),
                json!({"l": [1]}),
                vec![kept(vec![key("l")], json!([1, 2]), Some(json!([1])))],
            ),
            (
                json!({"same": [1, {"k": "v"}]}),
                json!({"same": [1, {"k": "v"}]}),
                vec![],
            ),
        ];
        for (input, output, want) in cases {
            let mut found = Vec::new();
            diff(&input, &output, &mut Vec::new(), &mut found);
            assert_eq!(found, want, "{input} -> {output}");
        }
    }

    /// Kept values go back where they were unless the definition changed there since; a list
    /// item is found by its name before its index; what cannot go back is named by its path.
    #[test]
    fn restore_puts_back_what_is_unchanged_and_names_the_rest() {
        let mut model = json!({
            "a": {"b": 2},
            "l": [1, 5],
            "ds": [{"name": "x", "v": 1}, {"name": "y", "v": 2}]
        });
        let lost = restore(
            &mut model,
            &[
                kept(vec![], json!("nowhere"), None),
                kept(vec![key("a"), key("new")], json!(9), None),
                kept(vec![key("a"), key("b")], json!("two"), Some(json!(2))),
                kept(vec![key("a"), key("b")], json!("three"), Some(json!(3))),
                kept(vec![key("a"), key("a")], json!(1), Some(json!(1))),
                kept(vec![key("l"), item(1, None)], json!("five"), Some(json!(5))),
                kept(vec![key("l"), item(0, None)], json!("four"), Some(json!(4))),
                kept(vec![key("l"), item(7, None)], json!("far"), Some(json!(0))),
                kept(
                    vec![key("ds"), item(0, Some("y")), key("v")],
                    json!("y2"),
                    Some(json!(2)),
                ),
                kept(
                    vec![key("ds"), item(0, Some("z")), key("v")],
                    json!("z"),
                    None,
                ),
                kept(vec![key("gone"), key("z")], json!(0), None),
                kept(vec![key("a"), key("b"), key("deeper")], json!(0), None),
            ],
        );
        assert_eq!(
            model,
            json!({
                "a": {"b": "two", "new": 9},
                "l": [1, "five"],
                "ds": [{"name": "x", "v": 1}, {"name": "y", "v": "y2"}]
            })
        );
        assert_eq!(
            lost,
            [
                "a.b",
                "a.a",
                "l[0]",
                "l[7]",
                "ds[0].v",
                "gone.z",
                "a.b.deeper"
            ]
        );
    }

    /// A SEMOPS extension holding anything besides semops's own keys is not semops's: it stays.
    #[test]
    fn a_semops_extension_with_other_data_stays_an_extension() {
        let doc = serde_json::json!({"version": OSSIE_VERSION, "name": "m",
            "datasets": [{"name": "d", "source": "a.b.c"}],
            "metrics": [{"name": "n",
                "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "COUNT(*)"}]},
                "custom_extensions": [{"vendor_name": "SEMOPS", "data": "{\"deprecated\": {\"reason\": \"r\"}, \"owner\": \"x\"}"}]}]
        });
        let models = import(&doc, &target()).unwrap();
        let metric =
            serde_json::to_value(&models[0].spec.definition.metrics.as_ref().unwrap()[0]).unwrap();
        assert!(metric.get("deprecated").is_none(), "{metric}");
        assert_eq!(metric["customExtensions"][0]["vendorName"], "SEMOPS");
        assert_eq!(
            normalize(&export(&models, None).unwrap().documents[0]),
            normalize(&doc)
        );
    }

    #[test]
    fn an_empty_model_name_is_refused_as_missing() {
        let doc = serde_json::json!({"version": OSSIE_VERSION, "name": "", "datasets": []});
        assert_eq!(
            import(&doc, &target()).unwrap_err().to_string(),
            "(): name: is required"
        );
    }

    /// Only a document with a model list, or a version and datasets, is checked as Ossie.
    #[test]
    fn what_validate_checks_as_an_ossie_document() {
        for (doc, want) in [
            (json!({"semantic_model": []}), true),
            (json!({"version": "0.2.0.dev0", "datasets": []}), true),
            (json!({"version": "0.2.0.dev0", "name": "m"}), false),
            (json!({"datasets": []}), false),
            (json!({"kind": "SemanticModel"}), false),
        ] {
            assert_eq!(looks_like_ossie(&doc), want, "{doc}");
        }
    }

    /// `semops validate` on an Ossie document: each problem with the model it is in and a JSON
    /// path into the document as written (the item of a wrapped list, or the root).
    #[test]
    fn checking_a_document_names_json_paths_as_written() {
        let dataset = json!([{"name": "d", "source": "t", "primary_key": ["id"]}]);
        let problem = |object: &str, path: &str, message: &str, reason: &str| OssieProblem {
            object: object.into(),
            path: path.into(),
            message: message.into(),
            reason: reason.into(),
        };
        let empty = crate::model::validate::Reason::EmptyList
            .condition_reason()
            .to_string();
        let no_dataset = "a model needs at least one dataset";
        let cases = [
            (
                json!({"version": "0.1.1", "semantic_model": [
                    {"name": "a", "datasets": dataset},
                    {"name": "b", "datasets": []}
                ]}),
                2,
                vec![problem(
                    "model b",
                    "$.semantic_model[1].datasets",
                    no_dataset,
                    empty.as_str(),
                )],
            ),
            (
                json!({"version": OSSIE_VERSION, "name": "b", "datasets": []}),
                1,
                vec![problem("model b", "$.datasets", no_dataset, empty.as_str())],
            ),
            (
                json!({"version": OSSIE_VERSION, "name": "a", "datasets": dataset}),
                1,
                vec![],
            ),
            // The path is written in the document's own snake_case.
            (
                json!({"version": OSSIE_VERSION, "name": "c",
                    "datasets": [{"name": "d", "source": "t", "primary_key": []}]}),
                1,
                vec![problem(
                    "model c",
                    "$.datasets[0].primary_key",
                    "must list at least one column",
                    empty.as_str(),
                )],
            ),
            (
                json!({"version": "0.1.1", "semantic_model": [{"name": "a", "datasets": dataset}, {"datasets": []}]}),
                0,
                vec![problem(
                    "model <unnamed>",
                    "$.semantic_model[1].name",
                    "is required",
                    "SchemaMismatch",
                )],
            ),
            (
                json!({"version": OSSIE_VERSION, "name": 7, "datasets": []}),
                0,
                vec![problem(
                    "model <unnamed>",
                    "$.name",
                    "must be a string, found 7",
                    "SchemaMismatch",
                )],
            ),
        ];
        for (doc, count, problems) in cases {
            assert_eq!(check(&doc), (count, problems), "{doc}");
        }
        let (count, problems) = check(&json!({"version": "0.9.0", "name": "m", "datasets": []}));
        assert_eq!(count, 0);
        assert_eq!(
            problems,
            vec![problem(
                "document",
                "$",
                Refused::UnknownVersion {
                    found: "0.9.0".into()
                }
                .to_string()
                .as_str(),
                "NotOssie"
            )]
        );
    }

    #[test]
    fn object_names_are_dns_labels() {
        for (input, want) in [
            ("bike_shop_sales", "bike-shop-sales"),
            ("Sales Model!", "sales-model"),
            ("__", "model"),
            ("a__b", "a-b"),
        ] {
            assert_eq!(object_name(input), want);
        }
    }
}

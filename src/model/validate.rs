//! Levels 1-2 of docs/design.md#validation-in-three-levels as one pure function: the CRD contract re-checked (defense in depth)
//! and the model-local rules. Shared by the controller and the offline `semops validate`.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde_json::Value;
use smol_str::SmolStr;

use crate::crd::conditions::Reason as ConditionReason;
use crate::crd::semantic_model::{CustomExtension, Expression, SemanticModelSpec};
use crate::ossie::SourceRef;

/// Category of a validation problem; becomes the condition reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A required string is empty.
    MissingValue,
    /// A list that needs entries is empty.
    EmptyList,
    /// Two entries of a keyed list share a name.
    DuplicateName,
    /// A column appears twice in one key or column list.
    DuplicateColumn,
    /// A dataset source does not parse as catalog.schema.object.
    InvalidSource,
    /// A relationship names a dataset this model does not have.
    UnknownDataset,
    /// fromColumns and toColumns differ in length.
    ColumnCountMismatch,
    /// aiContext is neither a string nor an object.
    InvalidAiContext,
    /// A name holds control or bidirectional-override characters, or is too long.
    InvalidName,
    /// A referenced Catalog does not exist in the namespace.
    CatalogNotFound,
    /// The home schema is not declared by a managed home Catalog.
    SchemaNotFound,
    /// The spec does not have the CRD's shape (missing field, wrong type, unknown enum value).
    SchemaMismatch,
    /// A source is not a table or view of its catalog (level 3).
    SourceNotFound,
    /// A key or relationship column is not a column of its source (level 3).
    ColumnNotFound,
    /// A `renamedFrom` that cannot keep an id (self, a name still present, shared, unknown).
    InvalidRename,
    /// A deprecation's replacement is not another metric of the model.
    UnknownReplacement,
}

impl Reason {
    /// The condition reason this problem reports.
    pub fn condition_reason(self) -> ConditionReason {
        match self {
            Reason::MissingValue => ConditionReason::MISSING_VALUE,
            Reason::EmptyList => ConditionReason::EMPTY_LIST,
            Reason::DuplicateName => ConditionReason::DUPLICATE_NAME,
            Reason::DuplicateColumn => ConditionReason::DUPLICATE_COLUMN,
            Reason::InvalidSource => ConditionReason::INVALID_SOURCE,
            Reason::UnknownDataset => ConditionReason::UNKNOWN_DATASET,
            Reason::ColumnCountMismatch => ConditionReason::COLUMN_COUNT_MISMATCH,
            Reason::InvalidAiContext => ConditionReason::INVALID_AI_CONTEXT,
            Reason::InvalidName => ConditionReason::INVALID_NAME,
            Reason::CatalogNotFound => ConditionReason::CATALOG_NOT_FOUND,
            Reason::SchemaNotFound => ConditionReason::SCHEMA_NOT_FOUND,
            Reason::SchemaMismatch => ConditionReason::SCHEMA_MISMATCH,
            Reason::SourceNotFound => ConditionReason::SOURCE_NOT_FOUND,
            Reason::ColumnNotFound => ConditionReason::COLUMN_NOT_FOUND,
            Reason::InvalidRename => ConditionReason::INVALID_RENAME,
            Reason::UnknownReplacement => ConditionReason::UNKNOWN_REPLACEMENT,
        }
    }
}

/// One problem, located by the JSON path of the offending field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub reason: Reason,
    pub path: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Longest name semops accepts for datasets, fields, relationships, metrics and the model.
pub const MAX_NAME_LEN: usize = 253;

/// What the validator knows about the Catalogs of the model's namespace.
pub trait CatalogLookup {
    /// `None`: the Catalog does not exist. `Some(None)`: it exists and is not managed.
    /// `Some(Some(schemas))`: it is managed and declares these schemas.
    fn catalog(&self, name: &str) -> Option<Option<Vec<String>>>;
}

/// Lookup over a map of known catalogs (used by tests and the offline validator).
impl CatalogLookup for BTreeMap<String, Option<Vec<String>>> {
    fn catalog(&self, name: &str) -> Option<Option<Vec<String>>> {
        self.get(name).cloned()
    }
}

/// Level 1 re-checked and level 2 model-local rules; no catalog knowledge needed.
pub fn validate_definition(spec: &SemanticModelSpec) -> Vec<Problem> {
    let mut v = Validator::default();
    v.required("spec.catalog", &spec.catalog);
    v.required("spec.schema", &spec.schema);
    if let Some(name) = &spec.name {
        v.name("spec.name", name);
    }
    let def = &spec.definition;
    v.ai_context("spec.definition.aiContext", def.ai_context.as_deref());
    v.extensions(
        "spec.definition.customExtensions",
        def.custom_extensions.as_deref(),
    );

    if def.datasets.is_empty() {
        v.push(
            Reason::EmptyList,
            "spec.definition.datasets",
            "a model needs at least one dataset",
        );
    }
    let mut dataset_names = HashSet::new();
    for (i, ds) in def.datasets.iter().enumerate() {
        let p = format!("spec.definition.datasets[{i}]");
        v.unique_name(
            &format!("{p}.name"),
            &ds.name,
            &mut dataset_names,
            "dataset",
        );
        if v.required(&format!("{p}.source"), &ds.source) {
            match SourceRef::parse(&ds.source) {
                Err(e) => v.push(
                    Reason::InvalidSource,
                    format!("{p}.source"),
                    format!("{e} (got {:?})", ds.source),
                ),
                // A control character (NUL above all) is no catalog's object name; sending it
                // to the catalog would only earn a confusing driver error.
                Ok(_) if ds.source.chars().any(char::is_control) => v.push(
                    Reason::InvalidSource,
                    format!("{p}.source"),
                    "contains a control character; remove it".to_string(),
                ),
                Ok(_) => {}
            }
        }
        if let Some(pk) = &ds.primary_key {
            v.columns(&format!("{p}.primaryKey"), pk);
        }
        for (k, key) in ds.unique_keys.iter().flatten().enumerate() {
            v.columns(&format!("{p}.uniqueKeys[{k}]"), key);
        }
        v.ai_context(&format!("{p}.aiContext"), ds.ai_context.as_deref());
        v.extensions(
            &format!("{p}.customExtensions"),
            ds.custom_extensions.as_deref(),
        );
        let mut field_names = HashSet::new();
        for (j, field) in ds.fields.iter().flatten().enumerate() {
            let fp = format!("{p}.fields[{j}]");
            v.unique_name(
                &format!("{fp}.name"),
                &field.name,
                &mut field_names,
                "field",
            );
            v.expression(&format!("{fp}.expression"), &field.expression);
            v.ai_context(&format!("{fp}.aiContext"), field.ai_context.as_deref());
            v.extensions(
                &format!("{fp}.customExtensions"),
                field.custom_extensions.as_deref(),
            );
        }
    }

    let mut relationship_names = HashSet::new();
    for (i, rel) in def.relationships.iter().flatten().enumerate() {
        let p = format!("spec.definition.relationships[{i}]");
        v.unique_name(
            &format!("{p}.name"),
            &rel.name,
            &mut relationship_names,
            "relationship",
        );
        for (end, dataset) in [("from", &rel.from), ("to", &rel.to)] {
            if v.required(&format!("{p}.{end}"), dataset)
                && !dataset_names.contains(dataset.as_str())
            {
                v.push(
                    Reason::UnknownDataset,
                    format!("{p}.{end}"),
                    format!("no dataset named {dataset:?}"),
                );
            }
        }
        v.columns(&format!("{p}.fromColumns"), &rel.from_columns);
        v.columns(&format!("{p}.toColumns"), &rel.to_columns);
        if !rel.from_columns.is_empty()
            && !rel.to_columns.is_empty()
            && rel.from_columns.len() != rel.to_columns.len()
        {
            v.push(
                Reason::ColumnCountMismatch,
                format!("{p}.toColumns"),
                format!("has {} columns but fromColumns has {}; list one key column per foreign-key column", rel.to_columns.len(), rel.from_columns.len()),
            );
        }
        v.ai_context(&format!("{p}.aiContext"), rel.ai_context.as_deref());
        v.extensions(
            &format!("{p}.customExtensions"),
            rel.custom_extensions.as_deref(),
        );
    }

    let mut metric_names = HashSet::new();
    for (i, metric) in def.metrics.iter().flatten().enumerate() {
        let p = format!("spec.definition.metrics[{i}]");
        v.unique_name(
            &format!("{p}.name"),
            &metric.name,
            &mut metric_names,
            "metric",
        );
        v.expression(&format!("{p}.expression"), &metric.expression);
        v.ai_context(&format!("{p}.aiContext"), metric.ai_context.as_deref());
        v.extensions(
            &format!("{p}.customExtensions"),
            metric.custom_extensions.as_deref(),
        );
    }
    v.renames_and_deprecations(def.metrics.as_deref().unwrap_or_default());
    v.problems
}

/// Renames checked against the accepted revision's live identities: `renamedFrom` must name a
/// live metric (a rename now) or one this metric already took its id from (a rename accepted
/// earlier, still written in the file). A model with no accepted revision has nothing to rename
/// from, so its `renamedFrom` entries are inert.
pub fn validate_renames(
    metrics: &[crate::crd::semantic_model::Metric],
    live: &[crate::crd::semantic_model::MetricIdentity],
    accepted_revision: Option<i64>,
) -> Vec<Problem> {
    let Some(revision) = accepted_revision else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    for (i, metric) in metrics.iter().enumerate() {
        let Some(old) = &metric.renamed_from else {
            continue;
        };
        let is_live = live.iter().any(|m| m.name == *old);
        let already_taken = live
            .iter()
            .any(|m| m.name == metric.name && m.former_names.contains(old));
        if !is_live && !already_taken {
            problems.push(Problem {
                reason: Reason::InvalidRename,
                path: format!("spec.definition.metrics[{i}].renamedFrom"),
                message: format!(
                    "no metric named {old:?} is live in the accepted revision{}; name a metric it has, or remove renamedFrom to mint a new id",
                    if revision > 0 { format!(" {revision}") } else { String::new() }
                ),
            });
        }
    }
    problems
}

/// Level 2 references: home Catalog and schema, and each source's Catalog, in this namespace.
pub fn validate_catalog_refs(
    spec: &SemanticModelSpec,
    catalogs: &dyn CatalogLookup,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    if !spec.catalog.is_empty() {
        match catalogs.catalog(&spec.catalog) {
            None => problems.push(Problem {
                reason: Reason::CatalogNotFound,
                path: "spec.catalog".into(),
                message: format!("no Catalog named {:?} in this namespace; create it or fix the name", spec.catalog),
            }),
            Some(Some(schemas)) if !spec.schema.is_empty() && !schemas.iter().any(|s| *s == spec.schema) => problems.push(Problem {
                reason: Reason::SchemaNotFound,
                path: "spec.schema".into(),
                message: format!(
                    "managed Catalog {:?} declares no schema {:?}; add a Schema registration for it",
                    spec.catalog, spec.schema
                ),
            }),
            Some(_) => {}
        }
    }
    let mut reported = HashSet::new();
    for (i, ds) in spec.definition.datasets.iter().enumerate() {
        let Ok(source) = SourceRef::parse(&ds.source) else {
            continue;
        };
        if catalogs.catalog(&source.catalog).is_none() && reported.insert(source.catalog.clone()) {
            problems.push(Problem {
                reason: Reason::CatalogNotFound,
                path: format!("spec.definition.datasets[{i}].source"),
                message: format!(
                    "no Catalog named {:?} in this namespace; create it or fix the source",
                    source.catalog
                ),
            });
        }
    }
    problems
}

#[derive(Default)]
struct Validator {
    problems: Vec<Problem>,
}

impl Validator {
    fn push(&mut self, reason: Reason, path: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            reason,
            path: path.into(),
            message: message.into(),
        });
    }

    /// Reports an empty value; returns whether the value is present.
    fn required(&mut self, path: &str, value: &str) -> bool {
        if value.is_empty() {
            self.push(Reason::MissingValue, path, "must not be empty");
            false
        } else {
            true
        }
    }

    fn name(&mut self, path: &str, name: &str) -> bool {
        if !self.required(path, name) {
            return false;
        }
        if name.chars().count() > MAX_NAME_LEN {
            self.push(
                Reason::InvalidName,
                path,
                format!("is longer than {MAX_NAME_LEN} characters"),
            );
            return false;
        }
        if let Some(c) = name.chars().find(|c| is_forbidden_in_name(*c)) {
            self.push(
                Reason::InvalidName,
                path,
                format!(
                    "contains the control or bidirectional character U+{:04X}; remove it",
                    c as u32
                ),
            );
            return false;
        }
        true
    }

    /// Names are compared after Unicode NFC normalization: "é" typed precomposed and "é" typed
    /// as e + combining accent look the same to people and must not name two things.
    fn unique_name(&mut self, path: &str, name: &str, seen: &mut HashSet<String>, what: &str) {
        use unicode_normalization::UnicodeNormalization;
        if self.name(path, name) && !seen.insert(name.nfc().collect()) {
            self.push(
                Reason::DuplicateName,
                path,
                format!(
                    "another {what} is already named {name:?} (compared after Unicode NFC normalization); names must be unique"
                ),
            );
        }
    }

    fn columns(&mut self, path: &str, columns: &[SmolStr]) {
        if columns.is_empty() {
            self.push(Reason::EmptyList, path, "must list at least one column");
        }
        let mut seen = HashSet::new();
        for (k, column) in columns.iter().enumerate() {
            let cp = format!("{path}[{k}]");
            if self.required(&cp, column) && !seen.insert(column.as_str()) {
                self.push(
                    Reason::DuplicateColumn,
                    cp,
                    format!("column {column:?} is listed twice"),
                );
            }
        }
    }

    fn expression(&mut self, path: &str, expression: &Expression) {
        if expression.dialects.is_empty() {
            self.push(
                Reason::EmptyList,
                format!("{path}.dialects"),
                "must have at least one dialect",
            );
        }
        let mut seen = HashSet::new();
        for (k, d) in expression.dialects.iter().enumerate() {
            let dp = format!("{path}.dialects[{k}]");
            if !seen.insert(d.dialect) {
                self.push(
                    Reason::DuplicateName,
                    format!("{dp}.dialect"),
                    format!(
                        "dialect {:?} appears twice; give each dialect once",
                        d.dialect
                    ),
                );
            }
            self.required(&format!("{dp}.expression"), &d.expression);
        }
    }

    /// Model-local rules of `renamedFrom` and `deprecated`: a rename names another metric that is
    /// not also present (the old name is not reusable in the revision that renames it, which
    /// also refuses a chain), at most one metric renames from a name, and a replacement is
    /// another metric of the model.
    fn renames_and_deprecations(&mut self, metrics: &[crate::crd::semantic_model::Metric]) {
        let present: HashSet<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        let mut renamed: HashSet<&str> = HashSet::new();
        for (i, metric) in metrics.iter().enumerate() {
            let p = format!("spec.definition.metrics[{i}]");
            if let Some(old) = &metric.renamed_from {
                let path = format!("{p}.renamedFrom");
                if *old == metric.name {
                    self.push(
                        Reason::InvalidRename,
                        path,
                        "names the metric itself; remove renamedFrom",
                    );
                } else if present.contains(old.as_str()) {
                    self.push(
                        Reason::InvalidRename,
                        path,
                        format!(
                            "metric {old:?} is still in this definition; a rename removes the old name (rename one step per revision, or drop renamedFrom)"
                        ),
                    );
                } else if !renamed.insert(old.as_str()) {
                    self.push(
                        Reason::InvalidRename,
                        path,
                        format!(
                            "another metric is already renamed from {old:?}; one id can go to one metric only"
                        ),
                    );
                }
            }
            let replacement = metric
                .deprecated
                .as_ref()
                .and_then(|d| d.replacement.as_ref());
            if let Some(replacement) = replacement {
                let path = format!("{p}.deprecated.replacement");
                if *replacement == metric.name {
                    self.push(
                        Reason::UnknownReplacement,
                        path,
                        "names the deprecated metric itself; name the metric to use instead",
                    );
                } else if !present.contains(replacement.as_str()) {
                    self.push(
                        Reason::UnknownReplacement,
                        path,
                        format!(
                            "no metric named {replacement:?} in this model; name an existing metric or remove replacement"
                        ),
                    );
                }
            }
        }
    }

    fn ai_context(&mut self, path: &str, value: Option<&Value>) {
        if let Some(v) = value
            && !matches!(v, Value::String(_) | Value::Object(_))
        {
            self.push(
                Reason::InvalidAiContext,
                path,
                "must be a string or an object",
            );
        }
    }

    fn extensions(&mut self, path: &str, extensions: Option<&[CustomExtension]>) {
        for (k, ext) in extensions.unwrap_or_default().iter().enumerate() {
            self.required(&format!("{path}[{k}].vendorName"), &ext.vendor_name);
        }
    }
}

/// Control characters and bidirectional overrides/isolates make names that display as other names.
/// Control characters, bidirectional overrides and invisible separators (zero-width space,
/// word joiner, BOM) — characters that make two names look alike. Joiners (U+200C/U+200D) stay:
/// scripts and emoji need them.
fn is_forbidden_in_name(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
        || matches!(c, '\u{200B}' | '\u{2060}' | '\u{FEFF}' | '\u{180E}')
}

/// Summarizes problems for a condition message: the first few, then a count.
pub fn summarize(problems: &[Problem]) -> String {
    const SHOWN: usize = 5;
    let mut parts: Vec<String> = problems
        .iter()
        .take(SHOWN)
        .map(ToString::to_string)
        .collect();
    if problems.len() > SHOWN {
        parts.push(format!("and {} more", problems.len() - SHOWN));
    }
    parts.join("; ")
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;

/// Deserializes a spec, turning a shape error (missing field, wrong type, unknown enum value) into
/// a problem located by its field path.
pub fn parse_spec(spec: &Value) -> Result<SemanticModelSpec, Problem> {
    serde_path_to_error::deserialize(spec).map_err(|e| {
        let inner = e.path().to_string();
        let path = if inner == "." {
            "spec".to_string()
        } else {
            format!("spec.{inner}")
        };
        Problem {
            reason: Reason::SchemaMismatch,
            path,
            message: e.into_inner().to_string(),
        }
    })
}

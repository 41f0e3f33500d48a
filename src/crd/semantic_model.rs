//! `SemanticModel`: an Apache Ossie core model bound to real tables (docs/design.md#semantic-models).
// `printcolumn(...)` repeats `type_ =` by design; clippy reads that as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use crate::crd::conditions::Condition;
use crate::crd::packed::{Digest, MetricId};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

/// A semantic model: datasets bound to real tables or views, their relationships and metrics.
/// semops validates it against the live catalogs, snapshots each accepted definition in a
/// ControllerRevision and gives every metric a stable id.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "semops.io",
    version = "v1alpha1",
    kind = "SemanticModel",
    root = "SemanticModelDoc",
    plural = "semanticmodels",
    namespaced,
    status = "SemanticModelStatus",
    shortname = "sm",
    category = "semops",
    doc = "A semantic model (Apache Ossie core) whose datasets are bound to real tables and views of Catalogs in the same namespace.",
    printcolumn(name = "Catalog", type_ = "string", json_path = ".spec.catalog"),
    printcolumn(name = "Schema", type_ = "string", json_path = ".spec.schema"),
    printcolumn(name = "Model", type_ = "string", json_path = ".status.modelName"),
    printcolumn(
        name = "Datasets",
        type_ = "integer",
        json_path = ".status.datasetCount"
    ),
    printcolumn(name = "Metrics", type_ = "integer", json_path = ".status.metricCount"),
    printcolumn(
        name = "Deprecated",
        type_ = "integer",
        priority = 1,
        json_path = ".status.deprecatedMetricCount"
    ),
    printcolumn(name = "Revision", type_ = "integer", json_path = ".status.revision"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        priority = 1,
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SemanticModelSpec {
    /// Home Catalog of the model, in this namespace. Immutable.
    #[schemars(length(min = 1))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.catalog is immutable; create a new SemanticModel to move it"))]
    pub catalog: SmolStr,
    /// Home schema of the model inside its Catalog. Immutable.
    #[schemars(length(min = 1))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.schema is immutable; create a new SemanticModel to move it"))]
    pub schema: SmolStr,
    /// Model name as clients see it; defaults to metadata.name. Case-sensitive. Changing it renames
    /// the model and keeps its associations and metric ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub name: Option<SmolStr>,
    /// Free-text comment (Ossie `description` of the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<SmolStr>,
    /// Free-form string properties attached to the model.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "crate::crd::schema::string_map")]
    pub properties: BTreeMap<String, String>,
    /// Change this value to make semops resolve every source again without editing the definition,
    /// e.g. after a source table was dropped and recreated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebind: Option<SmolStr>,
    /// The model definition in Apache Ossie core shape (camelCase).
    pub definition: Definition,
}

/// An Apache Ossie core semantic model definition.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Definition {
    /// Context for AI tools: a string or an object (instructions, synonyms, examples, any keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::schema::ai_context")]
    pub ai_context: Option<Box<serde_json::Value>>,
    /// Logical datasets, each bound to one table or view. Names are unique.
    #[schemars(length(min = 1))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub datasets: Vec<Dataset>,
    /// Foreign-key relationships between datasets of this model. Names are unique.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub relationships: Option<Vec<Relationship>>,
    /// Quantitative measures of the model. Names are unique; each gets a stable id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub metrics: Option<Vec<Metric>>,
    /// Vendor-specific extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_extensions: Option<Box<[CustomExtension]>>,
}

/// A logical dataset: a business entity backed by one table or view.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Dataset {
    /// Dataset name, unique within the model.
    #[schemars(length(min = 1))]
    pub name: SmolStr,
    /// The table or view: `catalog.schema.object`. Quote a segment holding dots or backticks with
    /// backticks, doubling a backtick inside: `` `a.b`.mart.orders ``.
    #[schemars(length(min = 1))]
    pub source: SmolStr,
    /// Primary key columns of the source (single or composite).
    // Lists here and below are boxed slices: a cached model holds them at exact size, so a `Vec`'s
    // capacity word is 8 spare bytes in every dataset, field and metric (docs/architecture.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_key: Option<Box<[SmolStr]>>,
    /// Unique keys of the source, each a list of columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_keys: Option<Box<[Vec<SmolStr>]>>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<SmolStr>,
    /// Context for AI tools: a string or an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::schema::ai_context")]
    pub ai_context: Option<Box<serde_json::Value>>,
    /// Row-level attributes. Names are unique within the dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub fields: Option<Box<[Field]>>,
    /// Vendor-specific extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_extensions: Option<Box<[CustomExtension]>>,
}

/// A row-level attribute used for grouping, filtering and metric expressions.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Field {
    /// Field name, unique within its dataset.
    #[schemars(length(min = 1))]
    pub name: SmolStr,
    /// How the field is computed, per dialect.
    pub expression: Expression,
    /// Dimension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimension: Option<Dimension>,
    /// Label for categorization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<SmolStr>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<SmolStr>,
    /// Logical data type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datatype: Option<DataType>,
    /// Context for AI tools: a string or an object.
    // Boxed here and wherever it appears: it is mostly absent, and an unboxed `Value` would cost
    // 32 bytes in every field, dataset, metric and relationship of every cached model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::schema::ai_context")]
    pub ai_context: Option<Box<serde_json::Value>>,
    /// Vendor-specific extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_extensions: Option<Box<[CustomExtension]>>,
}

/// Dimension metadata of a field.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Dimension {
    /// Temporal-role marker; defaults to true for Date, Time, DateTime and DateTimeTz fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_time: Option<bool>,
}

/// A foreign-key relationship: `from` (many side) references `to` (one side).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("size(self.fromColumns) == size(self.toColumns)").message("fromColumns and toColumns must have the same length"))]
pub struct Relationship {
    /// Relationship name, unique within the model.
    #[schemars(length(min = 1))]
    pub name: SmolStr,
    /// Dataset on the many side.
    #[schemars(length(min = 1))]
    pub from: SmolStr,
    /// Dataset on the one side.
    #[schemars(length(min = 1))]
    pub to: SmolStr,
    /// Foreign-key columns in the `from` dataset.
    #[schemars(length(min = 1))]
    pub from_columns: Vec<SmolStr>,
    /// Key columns in the `to` dataset, in the same order.
    #[schemars(length(min = 1))]
    pub to_columns: Vec<SmolStr>,
    /// Context for AI tools: a string or an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::schema::ai_context")]
    pub ai_context: Option<Box<serde_json::Value>>,
    /// Vendor-specific extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_extensions: Option<Box<[CustomExtension]>>,
}

/// A quantitative measure of the model.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Metric {
    /// Metric name, unique within the model. The name is the metric's identity key.
    #[schemars(length(min = 1))]
    pub name: SmolStr,
    /// The metric's previous name: the metric keeps the id of the metric of that name in the
    /// accepted revision instead of retiring it and minting a new one (a semops extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub renamed_from: Option<SmolStr>,
    /// Marks the metric as deprecated: clients are told not to use it and which metric replaces
    /// it (a semops extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<Deprecation>,
    /// How the metric is computed, per dialect.
    pub expression: Expression,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<SmolStr>,
    /// Logical data type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datatype: Option<DataType>,
    /// Context for AI tools: a string or an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::schema::ai_context")]
    pub ai_context: Option<Box<serde_json::Value>>,
    /// Vendor-specific extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_extensions: Option<Box<[CustomExtension]>>,
}

/// Why a metric is deprecated and what to use instead.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Deprecation {
    /// Name of the metric of this model that replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub replacement: Option<SmolStr>,
    /// Why it is deprecated, for people and agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<SmolStr>,
}

/// An expression with one entry per dialect.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Expression {
    /// The expression in each dialect; each dialect at most once.
    #[schemars(length(min = 1))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["dialect"]))]
    pub dialects: Box<[DialectExpression]>,
}

/// An expression written in one dialect.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DialectExpression {
    /// Expression language.
    pub dialect: Dialect,
    /// The SQL or dialect-specific expression.
    #[schemars(length(min = 1))]
    pub expression: SmolStr,
}

/// Expression languages of Apache Ossie core.
#[derive(
    schemars::JsonSchema,
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
)]
#[allow(non_camel_case_types)]
pub enum Dialect {
    ANSI_SQL,
    SNOWFLAKE,
    MDX,
    TABLEAU,
    DATABRICKS,
    MAQL,
    BIGQUERY,
}

/// Logical data types of Apache Ossie core.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    String,
    Integer,
    Decimal,
    Float,
    Boolean,
    Date,
    Time,
    DateTime,
    DateTimeTz,
    Opaque,
}

/// Vendor-specific attributes.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CustomExtension {
    /// Vendor name (any string, e.g. COMMON, DBT, SNOWFLAKE).
    #[schemars(length(min = 1))]
    pub vendor_name: SmolStr,
    /// JSON string with vendor-specific data.
    pub data: String,
}

/// Observed state of a SemanticModel. Readers trust only the revision named here.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct SemanticModelStatus {
    /// Generation of the spec this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Effective model name (spec.name or metadata.name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<SmolStr>,
    /// Number of datasets in the observed definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_count: Option<i64>,
    /// Number of metrics in the observed definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_count: Option<i64>,
    /// Number of deprecated metrics in the observed definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated_metric_count: Option<i64>,
    /// Generation whose definition was last accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_generation: Option<i64>,
    /// Number of the ControllerRevision `<name>-r<N>` holding the accepted definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// Canonical hash of the accepted definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_hash: Option<Digest>,
    /// `spec.rebind` as of the last replace; a different value asks for a fresh resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_rebind: Option<SmolStr>,
    /// Hash of the accepted snapshot (definition, name, comment, properties).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_hash: Option<Digest>,
    /// One entry per dataset: the source as resolved at the last replace, with its native id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_associations: Vec<SourceAssociation>,
    /// Live metric identities of the accepted definition, in definition order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<MetricIdentity>,
    /// Ids of metrics removed by later definitions (bounded, newest kept); never reused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired_metrics: Vec<RetiredMetric>,
    /// Sources whose live state no longer matches their association (never rebound by itself;
    /// change `spec.rebind` to resolve again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_drift: Vec<SourceDrift>,
    /// Current state: Ready (summary), Valid, SourcesResolved, SourcesCurrent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// A dataset's binding to the table or view it was resolved to.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SourceAssociation {
    /// Dataset name.
    pub dataset: SmolStr,
    /// The source as resolved.
    pub source: SourceName,
    /// TABLE or VIEW.
    #[serde(rename = "type")]
    pub object_type: SmolStr,
    /// Native id of the source (survives renames, changes on drop + create).
    pub id: String,
    /// Revision that established this binding.
    pub revision: i64,
    /// The source columns the dataset depends on (keys, relationship columns, columns its
    /// fields and metrics name), with the type each had at acceptance. Column drift watches
    /// these; empty for topics and for bindings accepted before semops 0.3.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<ColumnDependency>,
}

/// A source column a dataset depends on.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ColumnDependency {
    pub name: SmolStr,
    /// The type the system reported at acceptance (e.g. `integer`, `varchar(20)`).
    #[serde(rename = "type", default, skip_serializing_if = "SmolStr::is_empty")]
    pub data_type: SmolStr,
}

/// `catalog.schema.name` of a source, unquoted.
#[derive(
    KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
#[serde(rename_all = "camelCase")]
pub struct SourceName {
    pub catalog: SmolStr,
    pub schema: SmolStr,
    pub name: SmolStr,
}

/// How a bound source differs from what was resolved.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SourceDrift {
    /// Dataset bound to the source.
    pub dataset: String,
    /// SourceMissing, SourceRenamed, SourceReplaced, ColumnMissing or ColumnTypeChanged.
    pub kind: DriftKind,
    /// What is there now: the new name (renamed), the new id (replaced) or the column's new
    /// type (type changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// The source column (column drift only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<String>,
    /// What uses the column: `primaryKey`, `uniqueKeys[N]`, `relationship R`, `field F`,
    /// `metric M` (column drift only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub used_by: Vec<String>,
}

/// Kinds of source drift (docs/design.md#source-associations-and-drift).
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriftKind {
    /// Neither the name nor the recorded id exists any more.
    SourceMissing,
    /// The recorded id lives on under another name.
    SourceRenamed,
    /// The name now belongs to another object (dropped and recreated).
    SourceReplaced,
    /// A column the dataset depends on is gone (dropped or renamed).
    ColumnMissing,
    /// A column the dataset depends on has another type than at acceptance.
    ColumnTypeChanged,
}

/// A metric's stable identity.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MetricIdentity {
    /// Metric name (the identity key within the model).
    pub name: SmolStr,
    /// UUIDv7 minted by semops; never reused.
    pub id: MetricId,
    /// Names the metric had before, oldest first (each kept its id through `renamedFrom`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub former_names: Vec<SmolStr>,
}

impl MetricIdentity {
    /// An identity with no former names.
    pub fn new(name: impl Into<SmolStr>, id: impl Into<MetricId>) -> Self {
        Self {
            name: name.into(),
            id: id.into(),
            former_names: Vec::new(),
        }
    }
}

/// A metric id retired when its name left the definition.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RetiredMetric {
    pub name: SmolStr,
    pub id: MetricId,
    /// Revision whose definition no longer had the name.
    pub retired_in_revision: i64,
}

/// The SemanticModel object as semops reads and writes it. `SemanticModelDoc` (the derive's root)
/// generates the CRD; this type decodes what the API server sends so that no object can trip
/// serde_json's recursion limit (128): `metadata.managedFields`, which mirrors the nesting of a
/// free-form `aiContext`, is skipped, and a spec nested deeper than [`MAX_SPEC_DEPTH`] is not
/// parsed at all — the object keeps its name, catalog and schema and carries a
/// [`SemanticModel::decode_problem`] that the controller reports. Without this, one object
/// nested ~130 levels deep (which the API server accepts) fails every list and watch of the kind
/// and stalls the operator for all models.
#[derive(Clone, Debug, PartialEq)]
pub struct SemanticModel {
    pub metadata: ObjectMeta,
    pub spec: SemanticModelSpec,
    pub status: Option<SemanticModelStatus>,
    /// Set when the spec could not be decoded (too deep); never serialized.
    pub decode_problem: Option<String>,
}

/// Deepest JSON nesting of `spec` semops decodes (objects and arrays, from `spec` itself).
pub const MAX_SPEC_DEPTH: usize = 64;

/// Nesting depth of a JSON text (objects and arrays), by a byte scan that skips strings: safe on
/// any input, no recursion.
pub fn json_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

impl SemanticModel {
    pub fn new(name: &str, spec: SemanticModelSpec) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..Default::default()
            },
            spec,
            status: None,
            decode_problem: None,
        }
    }

    /// The CRD (generated from `SemanticModelDoc`).
    pub fn crd()
    -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition
    {
        let mut crd = <SemanticModelDoc as kube::CustomResourceExt>::crd();
        // The schema is titled after the derive's root type; users know the kind.
        for v in &mut crd.spec.versions {
            if let Some(schema) = v
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
            {
                schema.title = Some("SemanticModel".into());
            }
        }
        crd
    }
}

impl kube::Resource for SemanticModel {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "SemanticModel".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "semops.io".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1alpha1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "semanticmodels".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Serialize for SemanticModel {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut o = s.serialize_struct("SemanticModel", 5)?;
        o.serialize_field("apiVersion", "semops.io/v1alpha1")?;
        o.serialize_field("kind", "SemanticModel")?;
        o.serialize_field("metadata", &self.metadata)?;
        o.serialize_field("spec", &self.spec)?;
        if let Some(status) = &self.status {
            o.serialize_field("status", status)?;
        }
        o.end()
    }
}

/// `ObjectMeta` without `managedFields` (unknown fields are skipped without recursion).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct WireMeta {
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

/// What a too-deep spec still tells: where the model lives.
#[derive(Deserialize)]
struct ShallowSpec {
    #[serde(default)]
    catalog: SmolStr,
    #[serde(default)]
    schema: SmolStr,
}

/// The spec as JSON text. From serde_json it is the raw text (scanned, never recursed into);
/// from other formats (YAML manifests) it is decoded and re-encoded.
struct SpecText(String);

/// The newtype name through which serde_json hands out raw text (its `RawValue` protocol); any
/// other deserializer takes the generic path. Pinned by a unit test.
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

impl<'de> Deserialize<'de> for SpecText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> serde::de::Visitor<'de> for Text {
            type Value = SpecText;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a SemanticModel spec")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<SpecText, A::Error> {
                use serde::de::Error;
                match map.next_key::<String>()? {
                    Some(k) if k == RAW_TOKEN => Ok(SpecText(map.next_value::<String>()?)),
                    _ => Err(A::Error::custom("the spec must be an object")),
                }
            }
            fn visit_newtype_struct<D: serde::Deserializer<'de>>(
                self,
                d: D,
            ) -> Result<SpecText, D::Error> {
                serde_json::Value::deserialize(d).map(|v| SpecText(v.to_string()))
            }
        }
        d.deserialize_newtype_struct(RAW_TOKEN, Text)
    }
}

impl<'de> Deserialize<'de> for SemanticModel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        #[derive(Deserialize)]
        struct Wire {
            #[serde(default)]
            metadata: WireMeta,
            spec: SpecText,
            #[serde(default)]
            status: Option<SemanticModelStatus>,
        }
        let wire = Wire::deserialize(d)?;
        let m = wire.metadata;
        let metadata = ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        };
        let raw = wire.spec.0.as_str();
        let depth = json_depth(raw);
        let (spec, decode_problem) = if depth <= MAX_SPEC_DEPTH {
            (serde_json::from_str(raw).map_err(D::Error::custom)?, None)
        } else {
            let shallow: ShallowSpec = serde_json::from_str(raw).map_err(D::Error::custom)?;
            let spec = SemanticModelSpec {
                catalog: shallow.catalog,
                schema: shallow.schema,
                name: None,
                comment: None,
                properties: BTreeMap::new(),
                rebind: None,
                definition: Definition::default(),
            };
            let problem = format!(
                "spec nests {depth} levels deep; at most {MAX_SPEC_DEPTH} are allowed: flatten the deepest aiContext"
            );
            (spec, Some(problem))
        };
        Ok(SemanticModel {
            metadata,
            spec,
            status: wire.status,
            decode_problem,
        })
    }
}

impl SemanticModel {
    /// Name of the ControllerRevision holding revision `revision` of this model.
    pub fn revision_object_name(&self, revision: i64) -> String {
        format!(
            "{}-r{revision}",
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }

    /// The model name clients see: `spec.name`, else `metadata.name`.
    pub fn model_name(&self) -> &str {
        self.spec
            .name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        format!("{}1{}", "{\"x\":".repeat(levels), "}".repeat(levels))
    }

    #[test]
    fn json_depth_counts_objects_and_arrays_and_skips_strings() {
        let cases = [
            ("1", 0),
            ("{}", 1),
            ("[[],{\"a\":[1]}]", 3),
            ("{\"a\":\"{[{[\"}", 1),
            ("{\"a\":\"\\\"{{\"}", 1),
            ("[\"\\\\\",[]]", 2),
        ];
        for (text, depth) in cases {
            assert_eq!(json_depth(text), depth, "{text}");
        }
        assert_eq!(json_depth(&nested(500)), 500);
    }

    fn object(spec: &str, managed: &str) -> String {
        format!(
            r#"{{"apiVersion":"semops.io/v1alpha1","kind":"SemanticModel","metadata":{{"name":"m","namespace":"ns","uid":"u","generation":3,"managedFields":[{{"manager":"kubectl","fieldsV1":{managed}}}]}},"spec":{spec},"status":{{"revision":2}}}}"#
        )
    }

    /// A spec nested past serde_json's recursion limit, with managedFields as deep: decoded,
    /// flagged, never an error (an error would fail the whole list or watch of the kind).
    #[test]
    fn an_object_nested_past_the_recursion_limit_decodes_with_a_problem() {
        let spec = format!(
            r#"{{"catalog":"analytics","schema":"semantic","definition":{{"aiContext":{},"datasets":[]}}}}"#,
            nested(300)
        );
        let m: SemanticModel = serde_json::from_str(&object(&spec, &nested(300))).unwrap();
        assert_eq!(
            (m.spec.catalog.as_str(), m.spec.schema.as_str()),
            ("analytics", "semantic")
        );
        assert_eq!(m.metadata.generation, Some(3));
        assert_eq!(m.metadata.managed_fields, None);
        assert_eq!(m.status.unwrap().revision, Some(2));
        let problem = m.decode_problem.unwrap();
        assert!(problem.contains("302 levels deep"), "{problem}");
        // The same through a list, as a relist reads it.
        let list = format!(r#"{{"items":[{}]}}"#, object(&spec, "{}"));
        #[derive(Deserialize)]
        struct List {
            items: Vec<SemanticModel>,
        }
        assert_eq!(serde_json::from_str::<List>(&list).unwrap().items.len(), 1);
    }

    /// `spec` itself is level 1: a spec of exactly the deepest allowed nesting decodes, one
    /// level more is flagged.
    #[test]
    fn the_depth_limit_is_inclusive() {
        let spec = |levels: usize| {
            format!(
                r#"{{"catalog":"c","schema":"s","definition":{{"aiContext":{},"datasets":[]}}}}"#,
                nested(levels - 2)
            )
        };
        assert_eq!(json_depth(&spec(MAX_SPEC_DEPTH)), MAX_SPEC_DEPTH);
        let at_limit: SemanticModel =
            serde_json::from_str(&object(&spec(MAX_SPEC_DEPTH), "{}")).unwrap();
        assert_eq!(at_limit.decode_problem, None);
        let past: SemanticModel =
            serde_json::from_str(&object(&spec(MAX_SPEC_DEPTH + 1), "{}")).unwrap();
        assert!(past.decode_problem.is_some());
    }

    fn spec() -> SemanticModelSpec {
        serde_json::from_str(r#"{"catalog":"c","schema":"s","definition":{"datasets":[]}}"#)
            .unwrap()
    }

    #[test]
    fn the_model_name_is_spec_name_else_metadata_name() {
        let mut model = SemanticModel::new("orders-model", spec());
        assert_eq!(model.model_name(), "orders-model");
        assert_eq!(model.revision_object_name(7), "orders-model-r7");
        model.spec.name = Some("orders".into());
        assert_eq!(model.model_name(), "orders");
        assert_eq!(model.revision_object_name(7), "orders-model-r7");
    }

    /// The hand-written `Resource` (the derive's is on `SemanticModelDoc`) addresses what the
    /// CRD declares, and the CRD's schema is titled after the kind.
    #[test]
    fn the_resource_addresses_what_the_crd_declares() {
        use kube::Resource;
        let crd = SemanticModel::crd();
        assert_eq!(SemanticModel::kind(&()), crd.spec.names.kind);
        assert_eq!(SemanticModel::group(&()), crd.spec.group);
        assert_eq!(SemanticModel::plural(&()), crd.spec.names.plural);
        assert_eq!(SemanticModel::version(&()), crd.spec.versions[0].name);
        let schema = crd.spec.versions[0].schema.as_ref().unwrap();
        assert_eq!(
            schema.open_api_v3_schema.as_ref().unwrap().title.as_deref(),
            Some("SemanticModel")
        );
        let mut model = SemanticModel::new("m", spec());
        model.meta_mut().namespace = Some("ns".into());
        assert_eq!(model.meta().namespace.as_deref(), Some("ns"));
        assert_eq!(model.meta().name.as_deref(), Some("m"));
    }

    #[test]
    fn ordinary_objects_round_trip_through_json_yaml_and_values() {
        let spec = r#"{"catalog":"analytics","schema":"semantic","name":"m","definition":{"aiContext":{"a":{"b":[1,2]}},"datasets":[{"name":"d","source":"hr.public.t"}]}}"#;
        let m: SemanticModel = serde_json::from_str(&object(spec, "{}")).unwrap();
        assert_eq!(m.decode_problem, None);
        assert_eq!(m.spec.definition.datasets[0].source, "hr.public.t");
        let again: SemanticModel =
            serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(again, m);
        let from_yaml: SemanticModel =
            serde_saphyr::from_str(&serde_saphyr::to_string(&m).unwrap()).unwrap();
        assert_eq!(from_yaml, m);
        let from_value: SemanticModel =
            serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
        assert_eq!(from_value, m);
    }
}

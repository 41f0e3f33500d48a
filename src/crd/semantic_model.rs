//! `SemanticModel`: an Apache Ossie core model bound to real tables (DESIGN 3).
// `printcolumn(...)` repeats `type_ =` by design; clippy reads that as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// A semantic model: datasets bound to real tables or views, their relationships and metrics.
/// semops validates it against the live catalogs, snapshots each accepted definition in a
/// ControllerRevision and gives every metric a stable id.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "semops.io",
    version = "v1alpha1",
    kind = "SemanticModel",
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
    pub catalog: String,
    /// Home schema of the model inside its Catalog. Immutable.
    #[schemars(length(min = 1))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.schema is immutable; create a new SemanticModel to move it"))]
    pub schema: String,
    /// Model name as clients see it; defaults to metadata.name. Case-sensitive. Changing it renames
    /// the model and keeps its associations and metric ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub name: Option<String>,
    /// Free-text comment (Ossie `description` of the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Free-form string properties attached to the model.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "crate::crd::schema::string_map")]
    pub properties: BTreeMap<String, String>,
    /// Change this value to make semops resolve every source again without editing the definition,
    /// e.g. after a source table was dropped and recreated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebind: Option<String>,
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
    pub ai_context: Option<serde_json::Value>,
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
    pub custom_extensions: Option<Vec<CustomExtension>>,
}

/// A logical dataset: a business entity backed by one table or view.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Dataset {
    /// Dataset name, unique within the model.
    #[schemars(length(min = 1))]
    pub name: String,
    /// The table or view: `catalog.schema.object`. Quote a segment holding dots or backticks with
    /// backticks, doubling a backtick inside: `` `a.b`.mart.orders ``.
    #[schemars(length(min = 1))]
    pub source: String,
    /// Primary key columns of the source (single or composite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_key: Option<Vec<String>>,
    /// Unique keys of the source, each a list of columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_keys: Option<Vec<Vec<String>>>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Context for AI tools: a string or an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::schema::ai_context")]
    pub ai_context: Option<serde_json::Value>,
    /// Row-level attributes. Names are unique within the dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub fields: Option<Vec<Field>>,
    /// Vendor-specific extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_extensions: Option<Vec<CustomExtension>>,
}

/// A row-level attribute used for grouping, filtering and metric expressions.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Field {
    /// Field name, unique within its dataset.
    #[schemars(length(min = 1))]
    pub name: String,
    /// How the field is computed, per dialect.
    pub expression: Expression,
    /// Dimension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimension: Option<Dimension>,
    /// Label for categorization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Logical data type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datatype: Option<DataType>,
    /// Context for AI tools: a string or an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::schema::ai_context")]
    pub ai_context: Option<serde_json::Value>,
    /// Vendor-specific extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_extensions: Option<Vec<CustomExtension>>,
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
    pub name: String,
    /// Dataset on the many side.
    #[schemars(length(min = 1))]
    pub from: String,
    /// Dataset on the one side.
    #[schemars(length(min = 1))]
    pub to: String,
    /// Foreign-key columns in the `from` dataset.
    #[schemars(length(min = 1))]
    pub from_columns: Vec<String>,
    /// Key columns in the `to` dataset, in the same order.
    #[schemars(length(min = 1))]
    pub to_columns: Vec<String>,
    /// Context for AI tools: a string or an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::schema::ai_context")]
    pub ai_context: Option<serde_json::Value>,
    /// Vendor-specific extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_extensions: Option<Vec<CustomExtension>>,
}

/// A quantitative measure of the model.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Metric {
    /// Metric name, unique within the model. The name is the metric's identity key.
    #[schemars(length(min = 1))]
    pub name: String,
    /// How the metric is computed, per dialect.
    pub expression: Expression,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Logical data type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datatype: Option<DataType>,
    /// Context for AI tools: a string or an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::crd::schema::ai_context")]
    pub ai_context: Option<serde_json::Value>,
    /// Vendor-specific extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_extensions: Option<Vec<CustomExtension>>,
}

/// An expression with one entry per dialect.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Expression {
    /// The expression in each dialect; each dialect at most once.
    #[schemars(length(min = 1))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["dialect"]))]
    pub dialects: Vec<DialectExpression>,
}

/// An expression written in one dialect.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DialectExpression {
    /// Expression language.
    pub dialect: Dialect,
    /// The SQL or dialect-specific expression.
    #[schemars(length(min = 1))]
    pub expression: String,
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
    pub vendor_name: String,
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
    pub model_name: Option<String>,
    /// Number of datasets in the observed definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_count: Option<i64>,
    /// Number of metrics in the observed definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_count: Option<i64>,
    /// Generation whose definition was last accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_generation: Option<i64>,
    /// Number of the ControllerRevision `<name>-r<N>` holding the accepted definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    /// Canonical hash of the accepted definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_hash: Option<String>,
    /// `spec.rebind` as of the last replace; a different value asks for a fresh resolution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_rebind: Option<String>,
    /// Hash of the accepted snapshot (definition, name, comment, properties).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_hash: Option<String>,
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
    pub dataset: String,
    /// The source as resolved.
    pub source: SourceName,
    /// TABLE or VIEW.
    #[serde(rename = "type")]
    pub object_type: String,
    /// Native id of the source (survives renames, changes on drop + create).
    pub id: String,
    /// Revision that established this binding.
    pub revision: i64,
}

/// `catalog.schema.name` of a source, unquoted.
#[derive(
    KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
#[serde(rename_all = "camelCase")]
pub struct SourceName {
    pub catalog: String,
    pub schema: String,
    pub name: String,
}

/// How a bound source differs from what was resolved.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SourceDrift {
    /// Dataset bound to the source.
    pub dataset: String,
    /// SourceMissing, SourceRenamed or SourceReplaced.
    pub kind: DriftKind,
    /// What is there now: the new name (renamed) or the new id (replaced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
}

/// Kinds of source drift (DESIGN 3.4).
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriftKind {
    /// Neither the name nor the recorded id exists any more.
    SourceMissing,
    /// The recorded id lives on under another name.
    SourceRenamed,
    /// The name now belongs to another object (dropped and recreated).
    SourceReplaced,
}

/// A metric's stable identity.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MetricIdentity {
    /// Metric name (the identity key within the model).
    pub name: String,
    /// UUIDv7 minted by semops; never reused.
    pub id: String,
}

/// A metric id retired when its name left the definition.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RetiredMetric {
    pub name: String,
    pub id: String,
    /// Revision whose definition no longer had the name.
    pub retired_in_revision: i64,
}

impl SemanticModel {
    /// The model name clients see: `spec.name`, else `metadata.name`.
    pub fn model_name(&self) -> &str {
        self.spec
            .name
            .as_deref()
            .or(self.metadata.name.as_deref())
            .unwrap_or_default()
    }
}

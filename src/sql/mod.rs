//! Metric questions compiled to SQL (pure; docs/queries.md). A question names metrics,
//! dimensions (with a time grain for time fields), structured filters, an order and a limit; the
//! compiler answers with SQL for the home catalog's dialect, its bound parameters, the metric ids
//! and revision it used, and the join path it chose. semops never runs the SQL itself.
//!
//! `question` parses and bounds what a caller sends, `expr` reads and rewrites model expressions
//! (sqlparser), `plan` decides datasets, joins and grains, `render` writes one dialect's SQL.

mod expr;
mod plan;
mod question;
mod render;

pub use plan::{JoinStep, MetricPath};
pub use question::{Filter, FilterOp, Grain, Question};

use crate::crd::semantic_model::{Definition, MetricIdentity, SourceAssociation};
use serde::Serialize;

/// The SQL a catalog speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// PostgreSQL: `"quoted"` identifiers, `$n` parameters, `DATE_TRUNC`.
    Postgres,
    /// MySQL and MariaDB: `` `quoted` `` identifiers, `?` parameters, date arithmetic for grains.
    Mysql,
    /// Any other SQL engine (Iceberg catalogs): `"quoted"` identifiers, `?` parameters,
    /// `DATE_TRUNC('unit', x)`.
    Ansi,
}

/// An accepted model as the compiler needs it.
#[derive(Clone, Copy, Debug)]
pub struct Model<'a> {
    pub definition: &'a Definition,
    /// The ControllerRevision number of `definition`.
    pub revision: i64,
    /// Live metric identities of that revision.
    pub metric_ids: &'a [MetricIdentity],
    /// Each dataset's source as resolved at acceptance (the names the SQL reads).
    pub sources: &'a [SourceAssociation],
}

/// A compiled question.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Compiled {
    pub target: Target,
    pub sql: String,
    /// One entry per placeholder, in placeholder order (`$n` is entry n-1; each `?` takes the
    /// next entry).
    pub parameters: Vec<Parameter>,
    /// The requested metrics, in request order, with the ids the revision gives them.
    pub metrics: Vec<MetricUse>,
    pub revision: i64,
    /// Output columns in order: dimensions, then metrics.
    pub columns: Vec<String>,
    /// Per dataset whose rows are aggregated: the relationships followed to reach the datasets of
    /// the dimensions and filters.
    pub paths: Vec<MetricPath>,
    /// The catalogs whose tables the SQL reads (sorted): the SQL runs where they are.
    pub catalogs: Vec<String>,
}

/// A bound value. `value` is the text the database receives; `type` is the Ossie data type of
/// the field it is compared with (the SQL casts to it where the dialect needs a cast).
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Parameter {
    #[serde(rename = "type")]
    pub data_type: &'static str,
    pub value: String,
}

/// A requested metric and its stable id.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct MetricUse {
    pub name: String,
    pub id: String,
    /// The metrics it is computed from, for a derived metric.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub uses: Vec<String>,
}

/// Why a question does not compile. `parameter` names the part of the question at fault
/// (`metrics`, `dimensions`, `filters[2].values`, `order`, `limit`) or, for a fault of the model,
/// the model path; the message says what to do instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{parameter}: {message}")]
pub struct QueryError {
    pub kind: ErrorKind,
    pub parameter: String,
    pub message: String,
}

/// What kind of fault a [`QueryError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub enum ErrorKind {
    /// The question is malformed or over a bound.
    Invalid,
    /// A metric, dataset or field the model does not have.
    Unknown,
    /// No relationship path, two equally short ones, or only a path that would fan out.
    Unreachable,
    /// A filter value that does not fit the field's type, or a grain on a field that is no time.
    WrongType,
    /// An expression of the model that the compiler cannot use (the model needs a change).
    Model,
}

impl QueryError {
    pub(crate) fn new(kind: ErrorKind, parameter: impl Into<String>, message: String) -> Self {
        Self {
            kind,
            parameter: parameter.into(),
            message,
        }
    }
}

/// Compiles `question` against `model` for `target`.
pub fn compile(
    model: Model<'_>,
    question: &Question,
    target: Target,
) -> Result<Compiled, QueryError> {
    let plan = plan::plan(model, question)?;
    let mut compiled = render::render(model, &plan, target);
    compiled.catalogs = catalogs_read(model, &compiled.paths);
    Ok(compiled)
}

/// The catalogs of the sources of every dataset the paths read, as resolved at acceptance (else
/// as the definition names them).
fn catalogs_read(model: Model<'_>, paths: &[MetricPath]) -> Vec<String> {
    let datasets = paths
        .iter()
        .flat_map(|p| std::iter::once(&p.dataset).chain(p.joins.iter().map(|j| &j.to)));
    let mut out: Vec<String> = datasets
        .filter_map(|name| {
            if let Some(a) = model.sources.iter().find(|a| a.dataset == name.as_str()) {
                return Some(a.source.catalog.to_string());
            }
            let ds = model
                .definition
                .datasets
                .iter()
                .find(|d| d.name == name.as_str())?;
            crate::ossie::source_ref::SourceRef::parse(&ds.source)
                .ok()
                .map(|r| r.catalog)
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod tests;

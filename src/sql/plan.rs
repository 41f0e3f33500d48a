//! The decisions of a compile, before any SQL text: which dataset each metric aggregates, which
//! relationships reach the datasets of the dimensions and filters from there, and what each
//! output column is. Joins run only from the many side to the one side of a relationship, so a
//! metric's rows are never repeated by a join (the fan-out trap); each aggregated dataset gets
//! its own grouped query and the queries are combined on the dimensions.

use std::collections::{BTreeMap, HashMap};

use crate::crd::semantic_model::{DataType, Dataset, Dialect, Expression, Field};
use serde::Serialize;
use sqlparser::ast::{Expr, Ident};

use super::expr::{self, ColumnRef};
use super::question::{bind_text, op_name, shown};
use super::{ErrorKind, FilterOp, Grain, MetricUse, Model, QueryError, Question};

/// How many metrics deep a derived metric may refer (a → b → c …).
const MAX_DERIVED_DEPTH: usize = 16;

/// One relationship followed from the many side to the one side.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct JoinStep {
    pub relationship: String,
    pub from: String,
    pub to: String,
}

/// The joins one aggregated dataset needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct MetricPath {
    pub dataset: String,
    pub joins: Vec<JoinStep>,
}

/// A dimension column.
#[derive(Debug)]
pub(super) struct Dim {
    /// The requested text (`orders.ordered_at:month`); order keys name it.
    pub key: String,
    pub alias: String,
    /// The field's expression, columns qualified by dataset alias.
    pub expr: Expr,
    pub grain: Option<Grain>,
}

/// One dataset whose rows are aggregated, with the metrics computed over it.
#[derive(Debug)]
pub(super) struct Group {
    pub dataset: String,
    /// `schema`, `object` of the source.
    pub source: (String, String),
    pub joins: Vec<Join>,
    /// (output alias, aggregate expression with qualified columns).
    pub metrics: Vec<(String, Expr)>,
}

/// A join to a one-side dataset.
#[derive(Debug)]
pub(super) struct Join {
    pub step: JoinStep,
    pub source: (String, String),
    /// (column of `from`, column of `to`) pairs.
    pub on: Vec<(String, String)>,
}

/// A condition, rendered in every group.
#[derive(Debug)]
pub(super) struct Condition {
    pub expr: Expr,
    pub op: FilterOp,
    pub data_type: Option<DataType>,
    pub values: Vec<String>,
}

/// An output metric column.
#[derive(Debug)]
pub(super) enum Output {
    /// Computed by a group under this alias.
    Base(String),
    /// Computed from base outputs; identifiers in `expr` are base aliases.
    Derived {
        alias: String,
        expr: Box<Expr>,
        divides: bool,
    },
}

#[derive(Debug)]
pub(super) struct Plan {
    pub dims: Vec<Dim>,
    pub groups: Vec<Group>,
    /// Requested metrics in order.
    pub outputs: Vec<Output>,
    pub conditions: Vec<Condition>,
    /// (output alias, descending).
    pub order: Vec<(String, bool)>,
    pub limit: Option<u64>,
    pub uses: Vec<MetricUse>,
}

/// A simple metric: one dataset's rows aggregated.
struct Simple {
    dataset: usize,
    expr: Expr,
}

/// What a metric name resolves to.
enum Kind {
    Simple(Simple),
    Derived {
        expr: Expr,
        refs: Vec<usize>,
        divides: bool,
    },
}

/// The model, indexed for lookups.
struct Index<'a> {
    model: Model<'a>,
    datasets: HashMap<&'a str, usize>,
    metrics: HashMap<&'a str, usize>,
    /// Relationships leaving each dataset from its many side: (relationship index, to).
    out: Vec<Vec<(usize, usize)>>,
    /// Relationships arriving at each dataset on its one side: (relationship index, from).
    into: Vec<Vec<(usize, usize)>>,
}

impl<'a> Index<'a> {
    fn new(model: Model<'a>) -> Self {
        let d = model.definition;
        let datasets: HashMap<&str, usize> = d
            .datasets
            .iter()
            .enumerate()
            .map(|(i, ds)| (ds.name.as_str(), i))
            .collect();
        let metrics = d
            .metrics
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, m)| (m.name.as_str(), i))
            .collect();
        let mut out = vec![Vec::new(); d.datasets.len()];
        let mut into = vec![Vec::new(); d.datasets.len()];
        for (r, rel) in d.relationships.iter().flatten().enumerate() {
            if let (Some(&f), Some(&t)) = (
                datasets.get(rel.from.as_str()),
                datasets.get(rel.to.as_str()),
            ) && f != t
            {
                out[f].push((r, t));
                into[t].push((r, f));
            }
        }
        Self {
            model,
            datasets,
            metrics,
            out,
            into,
        }
    }

    fn dataset(&self, i: usize) -> &'a Dataset {
        &self.model.definition.datasets[i]
    }

    /// A dataset named by an expression's qualifier: exactly, or without case when unquoted and
    /// only one dataset matches.
    fn dataset_by_ident(&self, ident: &Ident) -> Option<usize> {
        if let Some(&i) = self.datasets.get(ident.value.as_str()) {
            return Some(i);
        }
        if ident.quote_style.is_some() {
            return None;
        }
        let mut hits = self
            .datasets
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case(&ident.value));
        match (hits.next(), hits.next()) {
            (Some((_, &i)), None) => Some(i),
            _ => None,
        }
    }

    fn field(&self, dataset: usize, name: &Ident) -> Option<&'a Field> {
        let fields = self.dataset(dataset).fields.as_deref().unwrap_or_default();
        fields.iter().find(|f| f.name == name.value).or_else(|| {
            let mut hits = fields.iter().filter(|f| expr::same_name(name, &f.name));
            match (hits.next(), hits.next()) {
                (Some(f), None) => Some(f),
                _ => None,
            }
        })
    }

    fn source(&self, dataset: usize) -> (String, String) {
        let ds = self.dataset(dataset);
        if let Some(a) = self.model.sources.iter().find(|a| a.dataset == ds.name) {
            return (a.source.schema.to_string(), a.source.name.to_string());
        }
        match crate::ossie::source_ref::SourceRef::parse(&ds.source) {
            Ok(r) => (r.schema, r.name),
            Err(_) => (String::new(), ds.source.to_string()),
        }
    }

    fn relationship(&self, r: usize) -> &'a crate::crd::semantic_model::Relationship {
        &self
            .model
            .definition
            .relationships
            .as_deref()
            .unwrap_or_default()[r]
    }
}

/// The ANSI SQL text of an expression.
fn ansi(expression: &Expression) -> Option<&str> {
    expression
        .dialects
        .iter()
        .find(|d| d.dialect == Dialect::ANSI_SQL)
        .map(|d| d.expression.as_str())
}

fn model_error(path: String, message: String) -> QueryError {
    QueryError::new(ErrorKind::Model, path, message)
}

/// The ANSI_SQL text of a model expression at `path`, parsed and its shape read; refused when it
/// has none or holds what the compiler cannot use.
fn parsed(path: &str, expression: &Expression) -> Result<(Expr, expr::Shape), QueryError> {
    let text = ansi(expression).ok_or_else(|| {
        model_error(
            path.to_string(),
            "has no ANSI_SQL expression; add one to query it".into(),
        )
    })?;
    let e = expr::parse(text).map_err(|why| model_error(path.to_string(), why))?;
    let shape = expr::shape(&e);
    match shape.refused {
        Some(why) => Err(model_error(path.to_string(), format!("expression {why}"))),
        None => Ok((e, shape)),
    }
}

/// A field's expression with every column qualified by `alias`.
fn field_expr(ix: &Index<'_>, dataset: usize, field: &Field) -> Result<Expr, QueryError> {
    let ds = ix.dataset(dataset);
    let path = format!("datasets[{}].fields[{}]", ds.name, field.name);
    let (mut e, shape) = parsed(&path, &field.expression)?;
    if shape.aggregates > 0 {
        return Err(model_error(
            path,
            "aggregates; a field is a row-level value, put the aggregate in a metric".into(),
        ));
    }
    let alias = ds.name.as_str();
    expr::rewrite_refs(&mut e, |qualifier, name| match qualifier {
        None => Ok(expr::column(alias, name)),
        Some(q) if ix.dataset_by_ident(q) == Some(dataset) => Ok(expr::column(alias, name)),
        Some(q) => Err(format!(
            "expression names `{q}.{name}`; a field reads only columns of its own dataset"
        )),
    })
    .map_err(|why| model_error(path, why))?;
    Ok(e)
}

/// Resolves a metric: a simple metric's dataset and qualified expression, or a derived metric's
/// references.
fn resolve_metric(ix: &Index<'_>, m: usize) -> Result<Kind, QueryError> {
    let metric = &ix.model.definition.metrics.as_deref().unwrap_or_default()[m];
    let path = format!("metrics[{}]", metric.name);
    let (mut e, shape) = parsed(&path, &metric.expression)?;
    if shape.aggregates == 0 {
        // Derived: bare names of other metrics.
        let mut refs = Vec::new();
        for r in &shape.refs {
            match (&r.qualifier, ix.metrics.get(r.name.value.as_str())) {
                (None, Some(&i)) => refs.push(i),
                _ => {
                    return Err(model_error(
                        path,
                        format!(
                            "`{}` is neither an aggregate over a dataset nor another metric's name; \
                             write e.g. SUM(dataset.field) or other_metric / third_metric",
                            display_ref(r)
                        ),
                    ));
                }
            }
        }
        if refs.is_empty() {
            return Err(model_error(
                path,
                "aggregates nothing and names no metric; write e.g. SUM(dataset.field)".into(),
            ));
        }
        return Ok(Kind::Derived {
            expr: e,
            refs,
            divides: shape.divides,
        });
    }
    let mut dataset = None;
    for r in &shape.refs {
        let Some(q) = &r.qualifier else {
            return Err(model_error(
                path,
                format!(
                    "`{}` names no dataset; qualify it as dataset.{}",
                    r.name, r.name
                ),
            ));
        };
        if !r.aggregated {
            return Err(model_error(
                path,
                format!(
                    "`{}` stands outside every aggregate; aggregate it",
                    display_ref(r)
                ),
            ));
        }
        let Some(d) = ix.dataset_by_ident(q) else {
            return Err(model_error(
                path,
                format!("`{}` names no dataset of the model", display_ref(r)),
            ));
        };
        match dataset {
            None => dataset = Some(d),
            Some(prev) if prev == d => {}
            Some(prev) => {
                return Err(model_error(
                    path,
                    format!(
                        "aggregates over datasets {} and {} in one expression; define one metric \
                         per dataset and a derived metric that combines them",
                        ix.dataset(prev).name,
                        ix.dataset(d).name
                    ),
                ));
            }
        }
    }
    let Some(dataset) = dataset else {
        return Err(model_error(
            path,
            "names no dataset (e.g. COUNT(*)); write COUNT(dataset.key_field)".into(),
        ));
    };
    let alias = ix.dataset(dataset).name.to_string();
    let mut failure = None;
    expr::rewrite_refs(&mut e, |_, name| match ix.field(dataset, name) {
        Some(field) => match field_expr(ix, dataset, field) {
            Ok(fe) => Ok(Expr::Nested(Box::new(fe))),
            Err(err) => {
                let why = err.message.clone();
                failure = Some(err);
                Err(why)
            }
        },
        None => Ok(expr::column(&alias, name)),
    })
    .map_err(|why| {
        failure
            .take()
            .unwrap_or_else(|| model_error(path.clone(), why))
    })?;
    Ok(Kind::Simple(Simple { dataset, expr: e }))
}

fn display_ref(r: &ColumnRef) -> String {
    match &r.qualifier {
        Some(q) => format!("{q}.{}", r.name),
        None => r.name.to_string(),
    }
}

/// `dataset.field` split where both halves name something in the model.
fn split_field<'a>(ix: &Index<'a>, text: &str) -> Option<(usize, &'a Field)> {
    text.match_indices('.').find_map(|(i, _)| {
        let d = *ix.datasets.get(&text[..i])?;
        let fields = ix.dataset(d).fields.as_deref().unwrap_or_default();
        let f = fields.iter().find(|f| f.name == text[i + 1..])?;
        Some((d, f))
    })
}

fn unknown_field(ix: &Index<'_>, parameter: String, text: &str) -> QueryError {
    let hint = match text.split_once('.') {
        None => "write dataset.field".to_string(),
        Some((d, _)) => match ix.datasets.get(d) {
            None => format!(
                "no dataset {}; datasets: {}",
                shown(d),
                names(ix.datasets.keys().copied())
            ),
            Some(&i) => format!(
                "dataset {d} has fields {}",
                names(
                    ix.dataset(i)
                        .fields
                        .as_deref()
                        .unwrap_or_default()
                        .iter()
                        .map(|f| f.name.as_str())
                )
            ),
        },
    };
    QueryError::new(
        ErrorKind::Unknown,
        parameter,
        format!("unknown field {}; {hint}", shown(text)),
    )
}

/// Up to ten names, sorted, for a hint.
fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let mut all: Vec<&str> = it.collect();
    all.sort_unstable();
    let more = all.len().saturating_sub(10);
    all.truncate(10);
    let mut s = all.join(", ");
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    s
}

fn is_time(field: &Field) -> bool {
    field
        .dimension
        .as_ref()
        .and_then(|d| d.is_time)
        .unwrap_or(matches!(
            field.datatype,
            Some(DataType::Date | DataType::Time | DataType::DateTime | DataType::DateTimeTz)
        ))
}

/// The shortest relationship path from `from` to `to` along many-to-one steps, or why there is
/// not exactly one.
fn path(ix: &Index<'_>, from: usize, to: usize, parameter: &str) -> Result<Vec<usize>, QueryError> {
    let n = ix.out.len();
    let mut dist = vec![usize::MAX; n];
    // Relationships that reach each dataset on a shortest path (all of them, for the error).
    let mut parents: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    dist[from] = 0;
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(at) = queue.pop_front() {
        for &(r, next) in &ix.out[at] {
            if dist[next] == usize::MAX {
                dist[next] = dist[at] + 1;
                queue.push_back(next);
            }
            if dist[next] == dist[at] + 1 {
                parents[next].push((r, at));
            }
        }
    }
    let name = |d: usize| ix.dataset(d).name.to_string();
    if dist[to] == usize::MAX {
        let message = if reaches_either_way(ix, from, to) {
            format!(
                "dataset {} is reached from {} only through the many side of a relationship; \
                 grouping {}'s rows by it would count them more than once. Group by a field of {} \
                 or of a dataset it references",
                name(to),
                name(from),
                name(from),
                name(from)
            )
        } else {
            format!(
                "no relationship connects dataset {} to {}; declare one in the model",
                name(from),
                name(to)
            )
        };
        return Err(QueryError::new(ErrorKind::Unreachable, parameter, message));
    }
    let mut found = Vec::new();
    collect_paths(&parents, from, to, &mut Vec::new(), &mut found);
    if found.len() > 1 {
        let show = |p: &Vec<usize>| {
            p.iter()
                .map(|&r| ix.relationship(r).name.to_string())
                .collect::<Vec<_>>()
                .join(" → ")
        };
        return Err(QueryError::new(
            ErrorKind::Unreachable,
            parameter,
            format!(
                "dataset {} reaches {} by equally short paths [{}] and [{}]; semops will not \
                 choose between them. Remove one relationship or model the second role as its \
                 own dataset",
                name(from),
                name(to),
                show(&found[0]),
                show(&found[1])
            ),
        ));
    }
    Ok(found.pop().unwrap_or_default())
}

/// Walks shortest-path parents back from `at`; stops after two paths.
fn collect_paths(
    parents: &[Vec<(usize, usize)>],
    from: usize,
    at: usize,
    suffix: &mut Vec<usize>,
    found: &mut Vec<Vec<usize>>,
) {
    if found.len() >= 2 {
        return;
    }
    if at == from {
        found.push(suffix.iter().rev().copied().collect());
        return;
    }
    for &(r, prev) in &parents[at] {
        suffix.push(r);
        collect_paths(parents, from, prev, suffix, found);
        suffix.pop();
    }
}

fn reaches_either_way(ix: &Index<'_>, from: usize, to: usize) -> bool {
    let mut seen = vec![false; ix.out.len()];
    let mut stack = vec![from];
    seen[from] = true;
    while let Some(at) = stack.pop() {
        if at == to {
            return true;
        }
        for &(_, next) in ix.out[at].iter().chain(&ix.into[at]) {
            if !seen[next] {
                seen[next] = true;
                stack.push(next);
            }
        }
    }
    false
}

/// Plans a question.
pub(super) fn plan(model: Model<'_>, q: &Question) -> Result<Plan, QueryError> {
    q.check_shape()?;
    let ix = Index::new(model);
    let all_metrics = model.definition.metrics.as_deref().unwrap_or_default();

    // Metrics: requested ones, expanded through derived metrics to simple ones.
    let mut kinds: BTreeMap<usize, Kind> = BTreeMap::new();
    let mut requested = Vec::new();
    for (i, name) in q.metrics.iter().enumerate() {
        let Some(&m) = ix.metrics.get(name.as_str()) else {
            return Err(QueryError::new(
                ErrorKind::Unknown,
                format!("metrics[{i}]"),
                format!(
                    "unknown metric {}; the model has {}",
                    shown(name),
                    names(all_metrics.iter().map(|m| m.name.as_str()))
                ),
            ));
        };
        if requested.contains(&m) {
            return Err(QueryError::new(
                ErrorKind::Invalid,
                format!("metrics[{i}]"),
                format!("metric {name} is asked for twice; name it once"),
            ));
        }
        requested.push(m);
        expand(&ix, m, &mut kinds, &mut Vec::new())?;
    }

    // Dimensions.
    let mut dims: Vec<Dim> = Vec::new();
    let mut dim_datasets = Vec::new();
    for (i, text) in q.dimensions.iter().enumerate() {
        let parameter = format!("dimensions[{i}]");
        let (field_text, grain) = match text.rsplit_once(':') {
            Some((f, g)) => match super::Grain::parse(g) {
                Some(g) => (f, Some(g)),
                None => {
                    return Err(QueryError::new(
                        ErrorKind::Invalid,
                        parameter,
                        format!(
                            "unknown grain {}; use day, week, month, quarter or year",
                            shown(g)
                        ),
                    ));
                }
            },
            None => (text.as_str(), None),
        };
        let (d, field) = split_field(&ix, field_text)
            .ok_or_else(|| unknown_field(&ix, parameter.clone(), field_text))?;
        if let Some(g) = grain
            && (!is_time(field) || field.datatype == Some(DataType::Time))
        {
            return Err(QueryError::new(
                ErrorKind::WrongType,
                parameter,
                format!(
                    "grain {} needs a date or timestamp field; {field_text} is {}. Drop :{}",
                    g.as_str(),
                    match field.datatype {
                        Some(DataType::Time) => "a time of day".to_string(),
                        Some(t) => format!("{t:?}"),
                        None => "not marked as time (dimension.isTime)".to_string(),
                    },
                    g.as_str()
                ),
            ));
        }
        if dims.iter().any(|x| x.key == *text) {
            return Err(QueryError::new(
                ErrorKind::Invalid,
                parameter,
                format!("dimension {} is asked for twice; name it once", shown(text)),
            ));
        }
        let mut alias = format!("{}__{}", ix.dataset(d).name, field.name);
        if let Some(g) = grain {
            alias.push_str("__");
            alias.push_str(g.as_str());
        }
        while dims.iter().any(|x| x.alias == alias) {
            alias.push('_');
        }
        dims.push(Dim {
            key: text.clone(),
            alias,
            expr: field_expr(&ix, d, field)?,
            grain,
        });
        dim_datasets.push((d, parameter));
    }

    // Filters.
    let mut conditions = Vec::new();
    for (i, f) in q.filters.iter().enumerate() {
        let parameter = format!("filters[{i}].field");
        let (d, field) = split_field(&ix, &f.field)
            .ok_or_else(|| unknown_field(&ix, parameter.clone(), &f.field))?;
        let values = f
            .values
            .iter()
            .enumerate()
            .map(|(j, v)| {
                bind_text(field.datatype, v).map_err(|why| {
                    QueryError::new(
                        ErrorKind::WrongType,
                        format!("filters[{i}].values[{j}]"),
                        format!("{why} ({} compares with field {})", op_name(f.op), f.field),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        conditions.push(Condition {
            expr: field_expr(&ix, d, field)?,
            op: f.op,
            data_type: field.datatype,
            values,
        });
        dim_datasets.push((d, parameter));
    }

    // Groups: one per aggregated dataset, in order of first use.
    let mut groups: Vec<Group> = Vec::new();
    let mut group_of: HashMap<usize, usize> = HashMap::new();
    for (&m, kind) in &kinds {
        if let Kind::Simple(s) = kind {
            let g = *group_of.entry(s.dataset).or_insert_with(|| {
                groups.push(Group {
                    dataset: ix.dataset(s.dataset).name.to_string(),
                    source: ix.source(s.dataset),
                    joins: Vec::new(),
                    metrics: Vec::new(),
                });
                groups.len() - 1
            });
            groups[g]
                .metrics
                .push((all_metrics[m].name.to_string(), s.expr.clone()));
        }
    }
    let group_datasets: Vec<usize> = {
        let mut v: Vec<(usize, usize)> = group_of.iter().map(|(&d, &g)| (g, d)).collect();
        v.sort_unstable();
        v.into_iter().map(|(_, d)| d).collect()
    };
    for (g, &from) in group_datasets.iter().enumerate() {
        let mut joined: Vec<usize> = Vec::new();
        let mut steps: Vec<(usize, usize, usize)> = Vec::new(); // (depth, relationship, to)
        for (to, parameter) in &dim_datasets {
            if *to == from || joined.contains(to) {
                continue;
            }
            let rels = path(&ix, from, *to, parameter)?;
            for (depth, &r) in rels.iter().enumerate() {
                let target = ix.datasets[ix.relationship(r).to.as_str()];
                if !joined.contains(&target) {
                    joined.push(target);
                    steps.push((depth, r, target));
                }
            }
        }
        steps.sort_by_key(|&(depth, ..)| depth);
        groups[g].joins = steps
            .into_iter()
            .map(|(_, r, to)| {
                let rel = ix.relationship(r);
                Join {
                    step: JoinStep {
                        relationship: rel.name.to_string(),
                        from: rel.from.to_string(),
                        to: rel.to.to_string(),
                    },
                    source: ix.source(to),
                    on: rel
                        .from_columns
                        .iter()
                        .zip(&rel.to_columns)
                        .map(|(a, b)| (a.to_string(), b.to_string()))
                        .collect(),
                }
            })
            .collect();
    }

    // Outputs and ids.
    let mut outputs = Vec::new();
    let mut uses = Vec::new();
    for &m in &requested {
        let name = all_metrics[m].name.to_string();
        if dims.iter().any(|d| d.alias == name) {
            return Err(QueryError::new(
                ErrorKind::Invalid,
                "metrics",
                format!("metric {name} has the output name of a dimension; drop one of them"),
            ));
        }
        let id = model
            .metric_ids
            .iter()
            .find(|i| i.name == name)
            .map(|i| i.id.to_string())
            .unwrap_or_default();
        match &kinds[&m] {
            Kind::Simple(_) => {
                outputs.push(Output::Base(name.clone()));
                uses.push(MetricUse {
                    name,
                    id,
                    uses: Vec::new(),
                });
            }
            Kind::Derived { .. } => {
                let (expr, divides) = derived_expr(&ix, m, &kinds);
                let mut leaves = Vec::new();
                simple_leaves(m, &kinds, &mut leaves);
                outputs.push(Output::Derived {
                    alias: name.clone(),
                    expr: Box::new(expr),
                    divides,
                });
                uses.push(MetricUse {
                    name,
                    id,
                    uses: leaves
                        .into_iter()
                        .map(|l| all_metrics[l].name.to_string())
                        .collect(),
                });
            }
        }
    }

    // Order: requested keys, then (with a limit) every dimension, so a limit cuts a fixed set.
    let mut order = Vec::new();
    for (i, key) in q.order.iter().enumerate() {
        let (name, descending) = match key.strip_prefix('-') {
            Some(rest) => (rest, true),
            None => (key.as_str(), false),
        };
        let alias = if let Some(d) = dims.iter().find(|d| d.key == name) {
            d.alias.clone()
        } else if q.metrics.iter().any(|m| m == name) {
            name.to_string()
        } else {
            return Err(QueryError::new(
                ErrorKind::Invalid,
                format!("order[{i}]"),
                format!(
                    "{} is not a requested metric or dimension; order by one of those",
                    shown(name)
                ),
            ));
        };
        if order.iter().any(|(a, _)| *a == alias) {
            return Err(QueryError::new(
                ErrorKind::Invalid,
                format!("order[{i}]"),
                format!("{} is ordered by twice", shown(name)),
            ));
        }
        order.push((alias, descending));
    }
    if q.limit.is_some() {
        for d in &dims {
            if !order.iter().any(|(a, _)| *a == d.alias) {
                order.push((d.alias.clone(), false));
            }
        }
    }

    Ok(Plan {
        dims,
        groups,
        outputs,
        conditions,
        order,
        limit: q.limit,
        uses,
    })
}

/// Resolves metric `m` and everything it derives from into `kinds`; `stack` finds cycles.
fn expand(
    ix: &Index<'_>,
    m: usize,
    kinds: &mut BTreeMap<usize, Kind>,
    stack: &mut Vec<usize>,
) -> Result<(), QueryError> {
    let metrics = ix.model.definition.metrics.as_deref().unwrap_or_default();
    if let Some(at) = stack.iter().position(|&s| s == m) {
        let cycle: Vec<&str> = stack[at..]
            .iter()
            .chain([&m])
            .map(|&s| metrics[s].name.as_str())
            .collect();
        return Err(model_error(
            format!("metrics[{}]", metrics[m].name),
            format!(
                "derived metrics refer to each other in a circle: {}",
                cycle.join(" → ")
            ),
        ));
    }
    if stack.len() >= MAX_DERIVED_DEPTH {
        return Err(model_error(
            format!("metrics[{}]", metrics[m].name),
            format!("derived metrics nest deeper than {MAX_DERIVED_DEPTH}"),
        ));
    }
    if kinds.contains_key(&m) {
        return Ok(());
    }
    let kind = resolve_metric(ix, m)?;
    let refs = match &kind {
        Kind::Derived { refs, .. } => refs.clone(),
        Kind::Simple(_) => Vec::new(),
    };
    kinds.insert(m, kind);
    stack.push(m);
    for r in refs {
        expand(ix, r, kinds, stack)?;
    }
    stack.pop();
    Ok(())
}

/// A derived metric's expression with derived references inlined, so it names only simple
/// metrics (whose group aliases are their names); and whether any level divides.
fn derived_expr(ix: &Index<'_>, m: usize, kinds: &BTreeMap<usize, Kind>) -> (Expr, bool) {
    let Kind::Derived { expr, divides, .. } = &kinds[&m] else {
        unreachable!("derived_expr is called for derived metrics")
    };
    let mut e = expr.clone();
    let mut any_divides = *divides;
    let _ = expr::rewrite_refs(&mut e, |_, name| {
        let r = ix.metrics[name.value.as_str()];
        match &kinds[&r] {
            Kind::Simple(_) => Ok(Expr::Identifier(Ident::new(name.value.clone()))),
            Kind::Derived { .. } => {
                let (inner, d) = derived_expr(ix, r, kinds);
                any_divides |= d;
                Ok(Expr::Nested(Box::new(inner)))
            }
        }
    });
    (e, any_divides)
}

fn simple_leaves(m: usize, kinds: &BTreeMap<usize, Kind>, out: &mut Vec<usize>) {
    match &kinds[&m] {
        Kind::Simple(_) => {
            if !out.contains(&m) {
                out.push(m)
            }
        }
        Kind::Derived { refs, .. } => {
            for &r in refs {
                simple_leaves(r, kinds, out);
            }
        }
    }
}

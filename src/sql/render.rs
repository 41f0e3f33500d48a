//! A plan written as one dialect's SQL: identifiers quoted the dialect's way, grains with its
//! own date functions, every filter value a placeholder.

use std::fmt::Write;

use crate::crd::semantic_model::DataType;
use sqlparser::ast::{Expr, Ident};

use super::expr;
use super::plan::{Condition, Group, Output, Plan};
use super::{Compiled, FilterOp, Grain, Model, Parameter, Target};

/// Quotes an identifier the model's text names: bare names are folded as the dialect folds
/// them (PostgreSQL lowers them), quoted ones kept exactly.
fn requote(target: Target, ident: &Ident) -> Ident {
    match (target, ident.quote_style) {
        (Target::Postgres, None) => Ident::with_quote('"', ident.value.to_lowercase()),
        (Target::Postgres | Target::Ansi, Some(_)) => Ident::with_quote('"', ident.value.clone()),
        (Target::Ansi, None) => ident.clone(),
        (Target::Mysql, _) => Ident::with_quote('`', ident.value.clone()),
    }
}

/// Quotes a name semops chose or resolved (aliases, schemas, tables) exactly.
fn exact(target: Target, name: &str) -> String {
    let q = match target {
        Target::Mysql => '`',
        Target::Postgres | Target::Ansi => '"',
    };
    Ident::with_quote(q, name).to_string()
}

/// A model column named by the model's text (relationship columns): a bare identifier.
fn bare(target: Target, name: &str) -> String {
    requote(target, &Ident::new(name)).to_string()
}

/// An expression of the plan (columns as `alias.column`) in the target's quoting.
fn expression(target: Target, e: &Expr) -> String {
    let mut e = e.clone();
    let _ = expr::rewrite_refs(&mut e, |qualifier, name| {
        let alias = qualifier.map(|q| q.value.clone()).unwrap_or_default();
        Ok(Expr::CompoundIdentifier(vec![
            Ident::with_quote(quote_char(target), alias),
            requote(target, name),
        ]))
    });
    e.to_string()
}

fn quote_char(target: Target) -> char {
    match target {
        Target::Mysql => '`',
        Target::Postgres | Target::Ansi => '"',
    }
}

fn grained(target: Target, x: &str, grain: Grain) -> String {
    match target {
        Target::Postgres | Target::Ansi => {
            format!("CAST(DATE_TRUNC('{}', {x}) AS DATE)", grain.as_str())
        }
        Target::Mysql => match grain {
            Grain::Day => format!("DATE({x})"),
            Grain::Week => format!("DATE_SUB(DATE({x}), INTERVAL WEEKDAY({x}) DAY)"),
            Grain::Month => format!("DATE_SUB(DATE({x}), INTERVAL (DAYOFMONTH({x}) - 1) DAY)"),
            Grain::Quarter => {
                format!("MAKEDATE(YEAR({x}), 1) + INTERVAL (QUARTER({x}) - 1) QUARTER")
            }
            Grain::Year => format!("MAKEDATE(YEAR({x}), 1)"),
        },
    }
}

/// The SQL type a placeholder is cast to, where the dialect needs one.
fn cast_type(target: Target, t: Option<DataType>) -> Option<&'static str> {
    let t = t?;
    match target {
        Target::Mysql => None,
        Target::Postgres | Target::Ansi => match t {
            DataType::Integer => Some("BIGINT"),
            DataType::Decimal => Some("NUMERIC"),
            DataType::Float => Some("DOUBLE PRECISION"),
            DataType::Boolean => Some("BOOLEAN"),
            DataType::Date => Some("DATE"),
            DataType::Time => Some("TIME"),
            DataType::DateTime => Some("TIMESTAMP"),
            DataType::DateTimeTz => Some(if target == Target::Postgres {
                "TIMESTAMPTZ"
            } else {
                "TIMESTAMP WITH TIME ZONE"
            }),
            DataType::String | DataType::Opaque => None,
        },
    }
}

fn type_name(t: Option<DataType>) -> &'static str {
    match t {
        None | Some(DataType::String) | Some(DataType::Opaque) => "string",
        Some(DataType::Integer) => "integer",
        Some(DataType::Decimal) => "decimal",
        Some(DataType::Float) => "float",
        Some(DataType::Boolean) => "boolean",
        Some(DataType::Date) => "date",
        Some(DataType::Time) => "time",
        Some(DataType::DateTime) => "datetime",
        Some(DataType::DateTimeTz) => "datetimetz",
    }
}

/// Placeholders and the parameters behind them. PostgreSQL numbers each value once and every
/// group reuses the number; `?` dialects bind again at each occurrence.
struct Binder {
    target: Target,
    parameters: Vec<Parameter>,
    /// PostgreSQL: the `$n` of (condition, value).
    numbered: Vec<Vec<usize>>,
}

impl Binder {
    fn new(target: Target, conditions: &[Condition]) -> Self {
        let mut b = Binder {
            target,
            parameters: Vec::new(),
            numbered: Vec::new(),
        };
        if target == Target::Postgres {
            for c in conditions {
                let mut ns = Vec::new();
                for v in &c.values {
                    b.parameters.push(b.parameter(c.data_type, v));
                    ns.push(b.parameters.len());
                }
                b.numbered.push(ns);
            }
        }
        b
    }

    fn parameter(&self, t: Option<DataType>, value: &str) -> Parameter {
        let value = match (self.target, t, value) {
            // MySQL has no boolean type: TRUE is 1.
            (Target::Mysql, Some(DataType::Boolean), "true") => "1".to_string(),
            (Target::Mysql, Some(DataType::Boolean), "false") => "0".to_string(),
            _ => value.to_string(),
        };
        Parameter {
            data_type: type_name(t),
            value,
        }
    }

    fn placeholder(&mut self, condition: usize, c: &Condition, value: usize) -> String {
        let p = match self.target {
            Target::Postgres => format!("${}", self.numbered[condition][value]),
            Target::Mysql | Target::Ansi => {
                self.parameters
                    .push(self.parameter(c.data_type, &c.values[value]));
                "?".to_string()
            }
        };
        match cast_type(self.target, c.data_type) {
            Some(t) => format!("CAST({p} AS {t})"),
            None => p,
        }
    }
}

fn condition(b: &mut Binder, i: usize, c: &Condition) -> String {
    let x = expression(b.target, &c.expr);
    let mut p = |v: usize| b.placeholder(i, c, v);
    match c.op {
        FilterOp::Eq => format!("{x} = {}", p(0)),
        FilterOp::Ne => format!("{x} <> {}", p(0)),
        FilterOp::Lt => format!("{x} < {}", p(0)),
        FilterOp::Le => format!("{x} <= {}", p(0)),
        FilterOp::Gt => format!("{x} > {}", p(0)),
        FilterOp::Ge => format!("{x} >= {}", p(0)),
        FilterOp::Between => {
            let lo = p(0);
            format!("{x} BETWEEN {lo} AND {}", p(1))
        }
        FilterOp::In | FilterOp::NotIn => {
            let list: Vec<String> = (0..c.values.len()).map(p).collect();
            let not = if c.op == FilterOp::NotIn { "NOT " } else { "" };
            format!("{x} {not}IN ({})", list.join(", "))
        }
        FilterOp::IsNull => format!("{x} IS NULL"),
        FilterOp::IsNotNull => format!("{x} IS NOT NULL"),
    }
}

fn table(target: Target, source: &(String, String)) -> String {
    if source.0.is_empty() {
        exact(target, &source.1)
    } else {
        format!("{}.{}", exact(target, &source.0), exact(target, &source.1))
    }
}

/// One group's grouped query; in a union, `all` lists the metric aliases of every group, and
/// `typed_nulls` asks for NULLs of each metric's type (the first branch, on typed dialects).
fn group_sql(
    plan: &Plan,
    b: &mut Binder,
    g: &Group,
    all: Option<&[&str]>,
    typed_nulls: bool,
    indent: &str,
) -> String {
    let t = b.target;
    let mut select: Vec<String> = Vec::new();
    let mut group_by: Vec<String> = Vec::new();
    for d in &plan.dims {
        let mut x = expression(t, &d.expr);
        if let Some(grain) = d.grain {
            x = grained(t, &x, grain);
        }
        select.push(format!("{x} AS {}", exact(t, &d.alias)));
        group_by.push(x);
    }
    // With `all` (a union), every branch lists every metric in one order: NULL where another
    // branch computes it. UNION ALL matches columns by position.
    let own = |alias: &str| g.metrics.iter().find(|(a, _)| a == alias).map(|(_, e)| e);
    let listed: Vec<&str> = match all {
        Some(all) => all.to_vec(),
        None => g.metrics.iter().map(|(a, _)| a.as_str()).collect(),
    };
    for alias in listed {
        match own(alias) {
            Some(e) => select.push(format!("{} AS {}", expression(t, e), exact(t, alias))),
            None if typed_nulls => {
                // PostgreSQL types a UNION column pair by pair: two bare NULLs become text and
                // then clash with a number. The first branch's NULLs carry the metric's type.
                let (other, e) = plan
                    .groups
                    .iter()
                    .find_map(|o| {
                        o.metrics
                            .iter()
                            .find(|(a, _)| a == alias)
                            .map(|(_, e)| (o, e))
                    })
                    .expect("every listed metric belongs to a group");
                select.push(format!(
                    "(SELECT {} FROM {} AS {} WHERE 1 = 0) AS {}",
                    expression(t, e),
                    table(t, &other.source),
                    exact(t, &other.dataset),
                    exact(t, alias)
                ))
            }
            None => select.push(format!("NULL AS {}", exact(t, alias))),
        }
    }
    let mut sql = String::new();
    let _ = write!(
        sql,
        "{indent}SELECT\n{indent}  {}",
        select.join(&format!(",\n{indent}  "))
    );
    let _ = write!(
        sql,
        "\n{indent}FROM {} AS {}",
        table(t, &g.source),
        exact(t, &g.dataset)
    );
    for j in &g.joins {
        let on: Vec<String> =
            j.on.iter()
                .map(|(a, z)| {
                    format!(
                        "{}.{} = {}.{}",
                        exact(t, &j.step.from),
                        bare(t, a),
                        exact(t, &j.step.to),
                        bare(t, z)
                    )
                })
                .collect();
        let _ = write!(
            sql,
            "\n{indent}LEFT OUTER JOIN {} AS {} ON {}",
            table(t, &j.source),
            exact(t, &j.step.to),
            on.join(" AND ")
        );
    }
    if !plan.conditions.is_empty() {
        let cs: Vec<String> = plan
            .conditions
            .iter()
            .enumerate()
            .map(|(i, c)| condition(b, i, c))
            .collect();
        let _ = write!(
            sql,
            "\n{indent}WHERE {}",
            cs.join(&format!("\n{indent}  AND "))
        );
    }
    if !group_by.is_empty() {
        let _ = write!(sql, "\n{indent}GROUP BY {}", group_by.join(", "));
    }
    sql
}

/// The dimensions and every group metric, one row per dimension combination.
fn core_sql(plan: &Plan, b: &mut Binder, indent: &str) -> String {
    let t = b.target;
    if let [g] = plan.groups.as_slice() {
        return group_sql(plan, b, g, None, false, indent);
    }
    let all: Vec<&str> = plan
        .groups
        .iter()
        .flat_map(|g| g.metrics.iter().map(|(a, _)| a.as_str()))
        .collect();
    let inner = format!("{indent}    ");
    let branches: Vec<String> = plan
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| group_sql(plan, b, g, Some(&all), i == 0 && t != Target::Mysql, &inner))
        .collect();
    let u = exact(t, "u");
    let mut select: Vec<String> = plan
        .dims
        .iter()
        .map(|d| format!("{u}.{0} AS {0}", exact(t, &d.alias)))
        .collect();
    // Each branch has one row per combination, so MAX picks the one non-NULL value.
    select.extend(
        all.iter()
            .map(|a| format!("MAX({u}.{0}) AS {0}", exact(t, a))),
    );
    let mut sql = format!(
        "{indent}SELECT\n{indent}  {}\n{indent}FROM (\n{}\n{indent}) AS {u}",
        select.join(&format!(",\n{indent}  ")),
        branches.join(&format!("\n{indent}    UNION ALL\n"))
    );
    if !plan.dims.is_empty() {
        let keys: Vec<String> = plan
            .dims
            .iter()
            .map(|d| format!("{u}.{}", exact(t, &d.alias)))
            .collect();
        let _ = write!(sql, "\n{indent}GROUP BY {}", keys.join(", "));
    }
    sql
}

/// A derived metric's expression over the columns of `q`.
fn derived(t: Target, e: &Expr, divides: bool) -> String {
    let mut e = e.clone();
    let q = quote_char(t);
    let _ = expr::rewrite_refs(&mut e, |_, name| {
        let column = Expr::CompoundIdentifier(vec![
            Ident::with_quote(q, "q"),
            Ident::with_quote(q, name.value.clone()),
        ]);
        if !divides {
            return Ok(column);
        }
        // Divide as decimals everywhere: PostgreSQL divides integers to an integer.
        let double = match t {
            Target::Mysql => "DOUBLE",
            Target::Postgres | Target::Ansi => "DOUBLE PRECISION",
        };
        crate::sql::expr::parse(&format!("CAST({column} AS {double})"))
    });
    e.to_string()
}

pub(super) fn render(model: Model<'_>, plan: &Plan, target: Target) -> Compiled {
    let t = target;
    let mut b = Binder::new(t, &plan.conditions);
    // A group computes only requested metrics and the inputs of derived ones, so the outer
    // query (computing derived metrics, hiding their inputs) is needed exactly for a derived one.
    let needs_outer = plan
        .outputs
        .iter()
        .any(|o| matches!(o, Output::Derived { .. }));
    let mut columns: Vec<String> = plan.dims.iter().map(|d| d.alias.clone()).collect();
    columns.extend(plan.outputs.iter().map(|o| match o {
        Output::Base(a) | Output::Derived { alias: a, .. } => a.clone(),
    }));
    let mut sql = if needs_outer {
        let q = exact(t, "q");
        let mut select: Vec<String> = plan
            .dims
            .iter()
            .map(|d| format!("{q}.{0} AS {0}", exact(t, &d.alias)))
            .collect();
        for o in &plan.outputs {
            select.push(match o {
                Output::Base(a) => format!("{q}.{0} AS {0}", exact(t, a)),
                Output::Derived {
                    alias,
                    expr,
                    divides,
                } => format!("{} AS {}", derived(t, expr, *divides), exact(t, alias)),
            });
        }
        format!(
            "SELECT\n  {}\nFROM (\n{}\n) AS {q}",
            select.join(",\n  "),
            core_sql(plan, &mut b, "  ")
        )
    } else {
        core_sql(plan, &mut b, "")
    };
    if !plan.order.is_empty() {
        // MySQL reads an output name inside an ORDER BY expression (`x IS NULL`) as a column of
        // the tables, not the aggregate: order the finished rows from outside.
        let prefix = if t == Target::Mysql {
            let r = exact(t, "r");
            let names: Vec<String> = columns
                .iter()
                .map(|c| format!("{r}.{}", exact(t, c)))
                .collect();
            let indented = sql.replace('\n', "\n  ");
            sql = format!(
                "SELECT {}\nFROM (\n  {indented}\n) AS {r}",
                names.join(", ")
            );
            format!("{r}.")
        } else {
            String::new()
        };
        let keys: Vec<String> = plan
            .order
            .iter()
            .map(|(alias, desc)| {
                let c = format!("{prefix}{}", exact(t, alias));
                // NULLs sort last ascending and first descending on every dialect.
                match (t, desc) {
                    (Target::Postgres, false) => c,
                    (Target::Postgres, true) => format!("{c} DESC"),
                    (Target::Ansi, false) => format!("{c} ASC NULLS LAST"),
                    (Target::Ansi, true) => format!("{c} DESC NULLS FIRST"),
                    (Target::Mysql, false) => format!("{c} IS NULL, {c}"),
                    (Target::Mysql, true) => format!("{c} IS NULL DESC, {c} DESC"),
                }
            })
            .collect();
        let _ = write!(sql, "\nORDER BY {}", keys.join(", "));
    }
    if let Some(n) = plan.limit {
        let _ = write!(sql, "\nLIMIT {n}");
    }
    Compiled {
        target,
        sql,
        parameters: b.parameters,
        metrics: plan.uses.clone(),
        revision: model.revision,
        columns,
        catalogs: Vec::new(),
        paths: plan
            .groups
            .iter()
            .map(|g| super::MetricPath {
                dataset: g.dataset.clone(),
                joins: g.joins.iter().map(|j| j.step.clone()).collect(),
            })
            .collect(),
    }
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;

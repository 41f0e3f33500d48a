//! Model expressions read with a SQL parser: what a metric aggregates and over which dataset,
//! which metrics a derived metric combines, and the rewrites that qualify every column with its
//! dataset's alias. Expressions are the model author's text (accepted by semops); the caller of a
//! question never supplies any.

use std::ops::ControlFlow;

use sqlparser::ast::{Expr, Ident, Visit, Visitor, visit_expressions_mut};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;

/// Functions that aggregate rows (compared without case).
const AGGREGATES: &[&str] = &[
    "sum",
    "count",
    "avg",
    "min",
    "max",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "variance",
    "var_pop",
    "var_samp",
    "bool_and",
    "bool_or",
    "every",
    "median",
    "percentile_cont",
    "percentile_disc",
    "approx_count_distinct",
    "any_value",
];

/// Parses one expression; the whole text must be that expression.
pub(super) fn parse(text: &str) -> Result<Expr, String> {
    let dialect = GenericDialect {};
    let mut parser = Parser::new(&dialect)
        .try_with_sql(text)
        .map_err(|e| format!("does not parse as SQL: {e}"))?;
    let expr = parser
        .parse_expr()
        .map_err(|e| format!("does not parse as SQL: {e}"))?;
    match parser.peek_token().token {
        Token::EOF => Ok(expr),
        other => Err(format!("unexpected `{other}` after the expression")),
    }
}

/// A column reference as written: `qualifier.name` or a bare `name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ColumnRef {
    pub qualifier: Option<Ident>,
    pub name: Ident,
    /// Inside an aggregate function's arguments.
    pub aggregated: bool,
}

/// What an expression contains.
#[derive(Debug, Default)]
pub(super) struct Shape {
    pub refs: Vec<ColumnRef>,
    pub aggregates: usize,
    /// Why the expression cannot be compiled (a subquery, a window, a nested aggregate, a
    /// reference with more than two parts), if it cannot.
    pub refused: Option<String>,
    /// A division appears (derived metrics then divide in double precision).
    pub divides: bool,
}

struct ShapeVisitor {
    shape: Shape,
    depth: usize,
}

fn is_aggregate(expr: &Expr) -> bool {
    match expr {
        Expr::Function(f) => {
            let name = f.name.to_string();
            let last = name.rsplit('.').next().unwrap_or(&name);
            AGGREGATES.iter().any(|a| a.eq_ignore_ascii_case(last))
        }
        _ => false,
    }
}

impl Visitor for ShapeVisitor {
    type Break = ();

    fn pre_visit_query(&mut self, _query: &sqlparser::ast::Query) -> ControlFlow<()> {
        self.shape
            .refused
            .get_or_insert_with(|| "contains a subquery".to_string());
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        let refuse = |s: &mut Shape, why: &str| {
            s.refused.get_or_insert_with(|| why.to_string());
        };
        match expr {
            Expr::Function(f) if f.over.is_some() => {
                refuse(&mut self.shape, "contains a window function (OVER)");
            }
            Expr::Identifier(name) => self.shape.refs.push(ColumnRef {
                qualifier: None,
                name: name.clone(),
                aggregated: self.depth > 0,
            }),
            Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
                self.shape.refs.push(ColumnRef {
                    qualifier: Some(parts[0].clone()),
                    name: parts[1].clone(),
                    aggregated: self.depth > 0,
                })
            }
            Expr::CompoundIdentifier(parts) => refuse(
                &mut self.shape,
                &format!(
                    "names `{}`; write dataset.field",
                    parts
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(".")
                ),
            ),
            Expr::BinaryOp { op, .. } if op.to_string() == "/" => self.shape.divides = true,
            _ => {}
        }
        if is_aggregate(expr) {
            if self.depth > 0 {
                refuse(&mut self.shape, "nests one aggregate inside another");
            }
            self.depth += 1;
            self.shape.aggregates += 1;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        if is_aggregate(expr) {
            self.depth -= 1;
        }
        ControlFlow::Continue(())
    }
}

/// Reads the shape of an expression.
pub(super) fn shape(expr: &Expr) -> Shape {
    let mut visitor = ShapeVisitor {
        shape: Shape::default(),
        depth: 0,
    };
    let _ = expr.visit(&mut visitor);
    visitor.shape
}

/// Replaces every column reference (`Identifier` or two-part `CompoundIdentifier`) by what
/// `replace` returns for it; the first error stops the rewrite.
pub(super) fn rewrite_refs(
    expr: &mut Expr,
    mut replace: impl FnMut(Option<&Ident>, &Ident) -> Result<Expr, String>,
) -> Result<(), String> {
    let flow = visit_expressions_mut(expr, |e| {
        let replaced = match e {
            Expr::Identifier(name) => Some(replace(None, name)),
            Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
                Some(replace(Some(&parts[0]), &parts[1]))
            }
            _ => None,
        };
        match replaced {
            Some(Ok(new)) => {
                *e = new;
                ControlFlow::Continue(())
            }
            Some(Err(why)) => ControlFlow::Break(why),
            None => ControlFlow::Continue(()),
        }
    });
    match flow {
        ControlFlow::Break(why) => Err(why),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// The two-part reference `alias.column` the plan uses for a column; `render` quotes both parts.
pub(super) fn column(alias: &str, name: &Ident) -> Expr {
    Expr::CompoundIdentifier(vec![Ident::new(alias), name.clone()])
}

/// Two identifiers name the same thing: quoted ones exactly, bare ones without case.
pub(super) fn same_name(ident: &Ident, name: &str) -> bool {
    match ident.quote_style {
        Some(_) => ident.value == name,
        None => ident.value.eq_ignore_ascii_case(name),
    }
}

//! Column dependencies of a definition (pure): which source columns each dataset needs, and
//! which keys, relationships, fields and metrics use a given column. The basis of column drift
//! and of the impact preview (docs/impact.md).
//!
//! Expressions are read by a conservative identifier scan, not a SQL parser: it finds the
//! identifiers an expression names and keeps only those that are columns of the dataset's source
//! at acceptance, so a function name, keyword or alias the scan misjudges can at worst add a
//! dependency on a real column of that name, never invent one.

use std::collections::{BTreeMap, BTreeSet};

use crate::crd::semantic_model::{Definition, Dialect};
use smol_str::SmolStr;

/// One identifier an expression names: `qualifier.name` or a bare `name`. `quoted` names match
/// exactly; bare ones match case-insensitively (PostgreSQL folds them to lower case, Snowflake
/// to upper case, MySQL compares column names without case).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ident {
    pub qualifier: Option<String>,
    pub name: String,
    pub quoted: bool,
}

/// How a dialect writes strings and quoted identifiers; `None` for dialects that are not SQL
/// (MDX, TABLEAU, MAQL): their expressions are not scanned.
fn quoting(dialect: Dialect) -> Option<(&'static [char], &'static [char])> {
    // (string delimiters, identifier delimiters)
    match dialect {
        Dialect::ANSI_SQL | Dialect::SNOWFLAKE => Some((&['\''], &['"'])),
        Dialect::DATABRICKS | Dialect::BIGQUERY => Some((&['\'', '"'], &['`'])),
        Dialect::MDX | Dialect::TABLEAU | Dialect::MAQL => None,
    }
}

/// Words that are never column references where they stand (compared without case).
const KEYWORDS: &[&str] = &[
    "all",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "between",
    "both",
    "by",
    "case",
    "cast",
    "current_date",
    "current_time",
    "current_timestamp",
    "date",
    "day",
    "desc",
    "distinct",
    "else",
    "end",
    "escape",
    "exists",
    "extract",
    "false",
    "filter",
    "following",
    "for",
    "from",
    "hour",
    "ilike",
    "in",
    "interval",
    "is",
    "leading",
    "like",
    "minute",
    "month",
    "not",
    "null",
    "nulls",
    "on",
    "or",
    "order",
    "over",
    "partition",
    "preceding",
    "range",
    "rows",
    "second",
    "similar",
    "some",
    "then",
    "time",
    "timestamp",
    "trailing",
    "true",
    "unbounded",
    "unknown",
    "week",
    "when",
    "where",
    "within",
    "year",
    "zone",
    "with",
    "without",
    "at",
    "first",
    "last",
    "current",
    "row",
    "ignore",
    "respect",
    "separator",
    "to",
    "using",
    "symmetric",
    "asymmetric",
    "collate",
];

#[derive(Debug, PartialEq)]
enum Token {
    Word { text: String, quoted: bool },
    Dot,
    Open,
    Str,
    DoubleColon,
    Other,
}

fn tokenize(expr: &str, strings: &[char], idents: &[char]) -> Vec<Token> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    // Reads a delimited run with doubled-delimiter escapes; returns its text and the next index.
    let delimited = |start: usize, d: char| -> (String, usize) {
        let mut text = String::new();
        let mut j = start + 1;
        while j < chars.len() {
            if chars[j] == d {
                if chars.get(j + 1) == Some(&d) {
                    text.push(d);
                    j += 2;
                    continue;
                }
                return (text, j + 1);
            }
            if chars[j] == '\\' && strings.contains(&d) {
                // Backslash escapes inside strings (MySQL, Databricks, BigQuery), in each of the
                // dialect's string delimiters; quoted identifiers keep a backslash as it is. A
                // backslash at the very end skips past it, which ends the scan the same way.
                j += 2;
                continue;
            }
            text.push(chars[j]);
            j += 1;
        }
        (text, j)
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '-' && chars.get(i + 1) == Some(&'-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
        } else if strings.contains(&c) {
            let (_, next) = delimited(i, c);
            out.push(Token::Str);
            i = next;
        } else if idents.contains(&c) {
            let (text, next) = delimited(i, c);
            out.push(Token::Word { text, quoted: true });
            i = next;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$')
            {
                i += 1;
            }
            out.push(Token::Word {
                text: chars[start..i].iter().collect(),
                quoted: false,
            });
        } else if c.is_ascii_digit() {
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '.' || chars[i] == '_')
            {
                i += 1;
            }
            out.push(Token::Other);
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push(Token::DoubleColon);
            i += 2;
        } else {
            out.push(match c {
                '.' => Token::Dot,
                '(' => Token::Open,
                _ => Token::Other,
            });
            i += 1;
        }
    }
    out
}

/// The identifiers `expr` names as columns, in order of appearance (duplicates kept once).
/// Skipped: string literals, comments, numbers, keywords, function names (a word followed by
/// `(`), typed literals (`DATE '2024-01-01'`), the word after `AS` (an alias or a CAST type) and
/// after `::` (a PostgreSQL cast type). `a.b` is column `b` qualified by `a`; in `s.t.c` the
/// qualifier is `t`. Empty for dialects that are not SQL.
pub fn scan(expr: &str, dialect: Dialect) -> Vec<Ident> {
    let Some((strings, idents)) = quoting(dialect) else {
        return vec![];
    };
    let tokens = tokenize(expr, strings, idents);
    let mut out: Vec<Ident> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let Token::Word { .. } = &tokens[i] else {
            i += 1;
            continue;
        };
        // The whole dotted chain starting here.
        let mut chain: Vec<(String, bool)> = Vec::new();
        let mut j = i;
        while let Some(Token::Word { text, quoted }) = tokens.get(j) {
            chain.push((text.clone(), *quoted));
            if tokens.get(j + 1) == Some(&Token::Dot)
                && matches!(tokens.get(j + 2), Some(Token::Word { .. }))
            {
                j += 2;
            } else {
                break;
            }
        }
        let next = tokens.get(j + 1);
        let previous = i.checked_sub(1).and_then(|p| tokens.get(p));
        let after_as = matches!(previous, Some(Token::Word { text, quoted: false }) if text.eq_ignore_ascii_case("as"));
        let after_cast = previous == Some(&Token::DoubleColon);
        let is_call = next == Some(&Token::Open);
        let typed_literal = next == Some(&Token::Str);
        let (name, quoted) = chain.last().cloned().expect("a chain has a word");
        let keyword =
            !quoted && chain.len() == 1 && KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(&name));
        if !(after_as || after_cast || is_call || typed_literal || keyword) {
            let ident = Ident {
                qualifier: (chain.len() >= 2).then(|| chain[chain.len() - 2].0.clone()),
                name,
                quoted,
            };
            if !out.contains(&ident) {
                out.push(ident);
            }
        }
        i = j + 1;
    }
    out
}

impl Ident {
    /// The source column this identifier names, if any: exact for quoted names, without case
    /// for bare ones (an exact match wins when two columns differ only in case).
    pub fn column_in<'a>(&self, columns: &'a [String]) -> Option<&'a String> {
        columns.iter().find(|c| **c == self.name).or_else(|| {
            (!self.quoted)
                .then(|| columns.iter().find(|c| c.eq_ignore_ascii_case(&self.name)))
                .flatten()
        })
    }

    /// Whether the qualifier (if any) names `dataset`.
    fn qualified_by(&self, dataset: &str) -> bool {
        self.qualifier.as_deref() == Some(dataset)
    }
}

/// What uses one column of one dataset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// `primaryKey`, `uniqueKeys[N]`.
    pub keys: Vec<String>,
    pub relationships: Vec<String>,
    pub fields: Vec<String>,
    pub metrics: Vec<String>,
}

impl Usage {
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
            && self.relationships.is_empty()
            && self.fields.is_empty()
            && self.metrics.is_empty()
    }

    /// `primaryKey, relationship reports_to, field amount, metric revenue`: for messages.
    pub fn describe(&self) -> Vec<String> {
        self.keys
            .iter()
            .cloned()
            .chain(
                self.relationships
                    .iter()
                    .map(|r| format!("relationship {r}")),
            )
            .chain(self.fields.iter().map(|f| format!("field {f}")))
            .chain(self.metrics.iter().map(|m| format!("metric {m}")))
            .collect()
    }
}

/// The identifiers of every scanned dialect of an expression.
fn idents_of(e: &crate::crd::semantic_model::Expression) -> Vec<Ident> {
    let mut all: Vec<Ident> = Vec::new();
    for d in &e.dialects {
        for i in scan(&d.expression, d.dialect) {
            if !all.contains(&i) {
                all.push(i);
            }
        }
    }
    all
}

/// Every source column each dataset depends on, given the columns each dataset's source had
/// (`columns_of[dataset]`; datasets without an entry, e.g. topics, get none). Keys and
/// relationship columns count as written; expression identifiers count when they name a column
/// of the source. A field's expression names columns of its own dataset (bare or qualified by
/// it); a metric's names `dataset.column`, `dataset.field` (the field's columns), or a bare
/// column (every dataset whose source has it). Sorted by dataset, then column.
pub fn dependencies(
    def: &Definition,
    columns_of: &BTreeMap<String, Vec<String>>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // Every identifier of the definition, scanned once: only a column some identifier names
    // can be used by an expression, so `usage` runs for those columns alone.
    let named: Vec<Ident> = def
        .datasets
        .iter()
        .flat_map(|d| d.fields.iter().flatten().map(|f| &f.expression))
        .chain(def.metrics.iter().flatten().map(|m| &m.expression))
        .flat_map(idents_of)
        .collect();
    for ds in &def.datasets {
        let Some(cols) = columns_of.get(ds.name.as_str()) else {
            continue;
        };
        let entry = deps.entry(ds.name.to_string()).or_default();
        for name in all_key_columns(def, &ds.name) {
            if let Some(c) = cols.iter().find(|c| c.as_str() == name) {
                entry.insert(c.clone());
            }
        }
        for c in cols {
            let is_named = named
                .iter()
                .any(|i| i.column_in(std::slice::from_ref(c)).is_some());
            if is_named && !usage(def, &ds.name, c, cols).is_empty() {
                entry.insert(c.clone());
            }
        }
    }
    deps.retain(|_, v| !v.is_empty());
    deps
}

fn all_key_columns(def: &Definition, dataset: &str) -> Vec<SmolStr> {
    let mut out = Vec::new();
    if let Some(ds) = def.datasets.iter().find(|d| d.name == dataset) {
        out.extend(ds.primary_key.iter().flatten().cloned());
        out.extend(ds.unique_keys.iter().flatten().flatten().cloned());
    }
    for r in def.relationships.iter().flatten() {
        if r.from == dataset {
            out.extend(r.from_columns.iter().cloned());
        }
        if r.to == dataset {
            out.extend(r.to_columns.iter().cloned());
        }
    }
    out
}

/// What in `def` uses `column` of `dataset`, whose source has `source_columns` (to tell which
/// expression identifiers are columns). Each list in definition order.
pub fn usage(def: &Definition, dataset: &str, column: &str, source_columns: &[String]) -> Usage {
    let mut u = Usage::default();
    let Some(ds) = def.datasets.iter().find(|d| d.name == dataset) else {
        return u;
    };
    if ds.primary_key.iter().flatten().any(|c| c == column) {
        u.keys.push("primaryKey".into());
    }
    for (k, key) in ds.unique_keys.iter().flatten().enumerate() {
        if key.iter().any(|c| c == column) {
            u.keys.push(format!("uniqueKeys[{k}]"));
        }
    }
    for r in def.relationships.iter().flatten() {
        if (r.from == dataset && r.from_columns.iter().any(|c| c == column))
            || (r.to == dataset && r.to_columns.iter().any(|c| c == column))
        {
            u.relationships.push(r.name.to_string());
        }
    }
    let names_column = |i: &Ident| i.column_in(source_columns).is_some_and(|c| c == column);
    for f in ds.fields.iter().flatten() {
        if idents_of(&f.expression)
            .iter()
            .any(|i| (i.qualifier.is_none() || i.qualified_by(dataset)) && names_column(i))
        {
            u.fields.push(f.name.to_string());
        }
    }
    for m in def.metrics.iter().flatten() {
        let uses = idents_of(&m.expression).iter().any(|i| match &i.qualifier {
            None => names_column(i),
            Some(q) if q == dataset => {
                names_column(i)
                    || u.fields
                        .iter()
                        .any(|f| *f == i.name || (!i.quoted && f.eq_ignore_ascii_case(&i.name)))
            }
            Some(_) => false,
        });
        if uses {
            u.metrics.push(m.name.to_string());
        }
    }
    u
}

/// What in `def` breaks if the whole source of `dataset` goes away: its keys, every
/// relationship from or to it, all its fields, and every metric that names it (qualified) or one
/// of its `source_columns` (bare).
pub fn dataset_usage(def: &Definition, dataset: &str, source_columns: &[String]) -> Usage {
    let mut u = Usage::default();
    let Some(ds) = def.datasets.iter().find(|d| d.name == dataset) else {
        return u;
    };
    if ds.primary_key.is_some() {
        u.keys.push("primaryKey".into());
    }
    u.keys.extend(
        (0..ds.unique_keys.as_ref().map_or(0, |k| k.len())).map(|k| format!("uniqueKeys[{k}]")),
    );
    u.relationships = def
        .relationships
        .iter()
        .flatten()
        .filter(|r| r.from == dataset || r.to == dataset)
        .map(|r| r.name.to_string())
        .collect();
    u.fields = ds
        .fields
        .iter()
        .flatten()
        .map(|f| f.name.to_string())
        .collect();
    u.metrics = def
        .metrics
        .iter()
        .flatten()
        .filter(|m| {
            idents_of(&m.expression).iter().any(|i| match &i.qualifier {
                Some(q) => q == dataset,
                None => i.column_in(source_columns).is_some(),
            })
        })
        .map(|m| m.name.to_string())
        .collect();
    u
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(expr: &str, dialect: Dialect) -> Vec<String> {
        scan(expr, dialect)
            .into_iter()
            .map(|i| match i.qualifier {
                Some(q) => format!("{q}.{}", i.name),
                None => i.name,
            })
            .collect()
    }

    /// The identifier scan, case by case: what is a column reference and what is not.
    #[test]
    fn the_identifier_scan_finds_columns_and_nothing_else() {
        use Dialect::*;
        let cases: &[(&str, Dialect, &str, &[&str])] = &[
            ("bare column", ANSI_SQL, "amount", &["amount"]),
            (
                "qualified",
                ANSI_SQL,
                "orders.amount * 2",
                &["orders.amount"],
            ),
            (
                "schema.table.column",
                ANSI_SQL,
                "app.orders.amount",
                &["orders.amount"],
            ),
            (
                "function call",
                ANSI_SQL,
                "SUM(orders.amount)",
                &["orders.amount"],
            ),
            (
                "nested functions",
                ANSI_SQL,
                "coalesce(sum(a), max(b))",
                &["a", "b"],
            ),
            (
                "quoted identifier",
                ANSI_SQL,
                "\"Order Total\" + \"x\"\"y\"",
                &["Order Total", "x\"y"],
            ),
            (
                "quoted qualified",
                SNOWFLAKE,
                "\"orders\".\"Amount\"",
                &["orders.Amount"],
            ),
            (
                "string literal with column text",
                ANSI_SQL,
                "CASE WHEN status = 'amount' THEN 1 ELSE 0 END",
                &["status"],
            ),
            (
                "escaped quote in string",
                ANSI_SQL,
                "note = 'it''s amount'",
                &["note"],
            ),
            (
                "CASE with columns in branches",
                ANSI_SQL,
                "CASE WHEN a > 0 THEN b ELSE c END",
                &["a", "b", "c"],
            ),
            (
                "CAST type is not a column",
                ANSI_SQL,
                "CAST(price AS decimal(10, 2))",
                &["price"],
            ),
            ("alias after AS", ANSI_SQL, "sum(x) AS total", &["x"]),
            (
                "postgres cast",
                ANSI_SQL,
                "price::numeric + qty::int",
                &["price", "qty"],
            ),
            (
                "postgres cast after a parenthesis",
                ANSI_SQL,
                "(a + b)::int",
                &["a", "b"],
            ),
            (
                "a single colon is no cast: a Snowflake path key may be a column, and is kept",
                SNOWFLAKE,
                "payload:amount",
                &["payload", "amount"],
            ),
            (
                "postgres cast to a quoted type",
                ANSI_SQL,
                "a::\"Money\" + b",
                &["a", "b"],
            ),
            (
                "typed literal",
                ANSI_SQL,
                "created_at > DATE '2024-01-01'",
                &["created_at"],
            ),
            (
                "interval",
                ANSI_SQL,
                "created_at + INTERVAL '1' DAY",
                &["created_at"],
            ),
            (
                "keywords and null",
                ANSI_SQL,
                "a IS NOT NULL AND b IN (1, 2) OR c BETWEEN 1 AND 2",
                &["a", "b", "c"],
            ),
            ("comments", ANSI_SQL, "a -- b\n + /* c */ d", &["a", "d"]),
            ("a line comment at the very end", ANSI_SQL, "a -- b", &["a"]),
            ("a leading minus", ANSI_SQL, "-a - -b", &["a", "b"]),
            (
                "a block comment with words and a star inside",
                ANSI_SQL,
                "a + /* not b * c */ d",
                &["a", "d"],
            ),
            ("numbers", ANSI_SQL, "a * 1.5e3 + 2", &["a"]),
            ("count star", ANSI_SQL, "COUNT(*)", &[]),
            (
                "distinct",
                ANSI_SQL,
                "COUNT(DISTINCT customer_id)",
                &["customer_id"],
            ),
            (
                "window",
                ANSI_SQL,
                "sum(a) OVER (PARTITION BY b ORDER BY c)",
                &["a", "b", "c"],
            ),
            ("duplicates once", ANSI_SQL, "a + a", &["a"]),
            (
                "backticks in BigQuery",
                BIGQUERY,
                "SUM(`orders`.`amount`)",
                &["orders.amount"],
            ),
            (
                "double quotes are strings in BigQuery",
                BIGQUERY,
                "IF(status = \"amount\", x, 0)",
                &["status", "x"],
            ),
            (
                "backslash escape in Databricks string",
                DATABRICKS,
                "a = 'x\\'b' OR c",
                &["a", "c"],
            ),
            (
                "backslash escape in a double-quoted BigQuery string",
                BIGQUERY,
                "a = \"x\\\"b\" OR c",
                &["a", "c"],
            ),
            (
                "a backslash in a quoted identifier is part of its name",
                ANSI_SQL,
                "\"a\\\" + c",
                &["a\\", "c"],
            ),
            (
                "a backslash ends an unterminated string",
                DATABRICKS,
                "c + 'x\\",
                &["c"],
            ),
            (
                "an unterminated string ends the expression",
                ANSI_SQL,
                "c + 'x + d",
                &["c"],
            ),
            (
                "an unterminated quoted identifier is a name",
                ANSI_SQL,
                "c + \"Order",
                &["c", "Order"],
            ),
            (
                "an unterminated comment ends the expression",
                ANSI_SQL,
                "c /* d",
                &["c"],
            ),
            ("MDX is not scanned", MDX, "[Measures].[Amount]", &[]),
            (
                "MAQL is not scanned",
                MAQL,
                "SELECT SUM({fact/amount})",
                &[],
            ),
            ("TABLEAU is not scanned", TABLEAU, "SUM([Amount])", &[]),
        ];
        for (what, dialect, expr, want) in cases {
            assert_eq!(names(expr, *dialect), *want, "{what}: {expr}");
        }
    }

    fn def() -> Definition {
        serde_json::from_value(json!({
            "datasets": [
                {"name": "orders", "source": "wh.app.orders", "primaryKey": ["id"],
                 "fields": [
                    {"name": "amount", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "gross - discount"}]}},
                    {"name": "status", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "\"Status\""}]}},
                    {"name": "elsewhere", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "customers.note"}]}}
                 ]},
                {"name": "customers", "source": "wh.app.customers", "primaryKey": ["id"], "uniqueKeys": [["email"]]}
            ],
            "relationships": [
                {"name": "placed_by", "from": "orders", "to": "customers", "fromColumns": ["customer_id"], "toColumns": ["id"]}
            ],
            "metrics": [
                {"name": "revenue", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "SUM(orders.amount)"}]}},
                {"name": "buyers", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "COUNT(DISTINCT customers.email)"}]}},
                {"name": "taxed", "expression": {"dialects": [{"dialect": "SNOWFLAKE", "expression": "SUM(TAX)"}]}},
                {"name": "mdx", "expression": {"dialects": [{"dialect": "MDX", "expression": "[orders].[gross]"}]}},
                {"name": "revenue_quoted", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "SUM(orders.\"amount\")"}]}},
                {"name": "not_a_field", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "SUM(orders.\"AMOUNT\")"}]}},
                {"name": "customer_rows", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "COUNT(customers.id)"}]}}
            ]
        }))
        .unwrap()
    }

    fn cols(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn sources() -> BTreeMap<String, Vec<String>> {
        BTreeMap::from([
            (
                "orders".to_string(),
                cols(&[
                    "id",
                    "gross",
                    "discount",
                    "Status",
                    "customer_id",
                    "tax",
                    "note",
                ]),
            ),
            ("customers".to_string(), cols(&["id", "email", "name"])),
        ])
    }

    #[test]
    fn dependencies_are_the_columns_something_uses() {
        let deps = dependencies(&def(), &sources());
        let flat: Vec<(String, Vec<String>)> = deps
            .into_iter()
            .map(|(d, c)| (d, c.into_iter().collect()))
            .collect();
        assert_eq!(
            flat,
            vec![
                ("customers".to_string(), cols(&["email", "id"])),
                (
                    "orders".to_string(),
                    cols(&["Status", "customer_id", "discount", "gross", "id", "tax"])
                ),
            ],
            "note and name are used by nothing; MDX is not scanned"
        );
    }

    #[test]
    fn usage_names_keys_relationships_fields_and_metrics_through_fields() {
        let table: &[(&str, &str, Usage)] = &[
            (
                "orders",
                "gross",
                // Through field `amount`: bare, quoted exactly, never quoted in another case.
                Usage {
                    fields: cols(&["amount"]),
                    metrics: cols(&["revenue", "revenue_quoted"]),
                    ..Usage::default()
                },
            ),
            (
                "orders",
                "customer_id",
                Usage {
                    relationships: cols(&["placed_by"]),
                    ..Usage::default()
                },
            ),
            (
                "customers",
                "id",
                Usage {
                    keys: cols(&["primaryKey"]),
                    relationships: cols(&["placed_by"]),
                    metrics: cols(&["customer_rows"]),
                    ..Usage::default()
                },
            ),
            // `customers.id` is another dataset's column of the same name.
            (
                "orders",
                "id",
                Usage {
                    keys: cols(&["primaryKey"]),
                    ..Usage::default()
                },
            ),
            (
                "customers",
                "email",
                Usage {
                    keys: cols(&["uniqueKeys[0]"]),
                    metrics: cols(&["buyers"]),
                    ..Usage::default()
                },
            ),
            (
                "orders",
                "tax",
                Usage {
                    metrics: cols(&["taxed"]),
                    ..Usage::default()
                },
            ),
            (
                "orders",
                "Status",
                Usage {
                    fields: cols(&["status"]),
                    ..Usage::default()
                },
            ),
            // Field `elsewhere` names `customers.note`: another dataset's column of that name.
            ("orders", "note", Usage::default()),
        ];
        let s = sources();
        for (dataset, column, want) in table {
            assert_eq!(
                usage(&def(), dataset, column, &s[*dataset]),
                *want,
                "{dataset}.{column}"
            );
        }
    }

    #[test]
    fn losing_a_whole_source_breaks_everything_of_its_dataset() {
        let s = sources();
        assert_eq!(
            dataset_usage(&def(), "orders", &s["orders"]),
            Usage {
                keys: cols(&["primaryKey"]),
                relationships: cols(&["placed_by"]),
                fields: cols(&["amount", "status", "elsewhere"]),
                metrics: cols(&["revenue", "taxed", "revenue_quoted", "not_a_field"]),
            }
        );
        assert_eq!(
            dataset_usage(&def(), "customers", &s["customers"]),
            Usage {
                keys: cols(&["primaryKey", "uniqueKeys[0]"]),
                relationships: cols(&["placed_by"]),
                fields: vec![],
                metrics: cols(&["buyers", "customer_rows"]),
            }
        );
        assert!(dataset_usage(&def(), "nope", &[]).is_empty());
    }

    #[test]
    fn bare_names_match_without_case_and_quoted_names_exactly() {
        let c = cols(&["Status", "status_code"]);
        let bare = Ident {
            qualifier: None,
            name: "STATUS".into(),
            quoted: false,
        };
        let quoted = Ident {
            quoted: true,
            ..bare.clone()
        };
        assert_eq!(bare.column_in(&c), Some(&"Status".to_string()));
        assert_eq!(quoted.column_in(&c), None);
    }
}

//! What a caller asks: metrics, dimensions, structured filters, order, limit. Nothing here is
//! SQL text: names are looked up in the model and values become bound parameters.

use crate::crd::semantic_model::DataType;
use serde::{Deserialize, Serialize};

use super::{ErrorKind, QueryError};

/// Bounds on one question (docs/queries.md).
pub const MAX_METRICS: usize = 50;
pub const MAX_DIMENSIONS: usize = 20;
pub const MAX_FILTERS: usize = 50;
pub const MAX_VALUES: usize = 1_000;
pub const MAX_VALUE_BYTES: usize = 4_096;
pub const MAX_LIMIT: u64 = 1_000_000_000;

/// A metric question.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Question {
    /// Metric names of the model (at least one).
    pub metrics: Vec<String>,
    /// Fields to group by, `dataset.field`, with `:day`, `:week`, `:month`, `:quarter` or
    /// `:year` after a time field.
    #[serde(default)]
    pub dimensions: Vec<String>,
    /// Conditions on fields, applied to rows before they are aggregated.
    #[serde(default)]
    pub filters: Vec<Filter>,
    /// Output columns to sort by: a requested metric or dimension, `-` in front for descending.
    #[serde(default)]
    pub order: Vec<String>,
    /// At most this many rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

/// A condition on one field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// `dataset.field`.
    pub field: String,
    pub op: FilterOp,
    /// The values compared with: one for comparisons, two for `between`, one or more for `in`
    /// and `not_in`, none for `is_null` and `is_not_null`.
    #[serde(default)]
    pub values: Vec<serde_json::Value>,
}

/// Filter operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FilterOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    Between,
    IsNull,
    IsNotNull,
}

impl FilterOp {
    /// How many values the operator takes: exactly `Some(n)`, or `None` for one or more.
    fn arity(self) -> Option<usize> {
        match self {
            FilterOp::In | FilterOp::NotIn => None,
            FilterOp::Between => Some(2),
            FilterOp::IsNull | FilterOp::IsNotNull => Some(0),
            _ => Some(1),
        }
    }
}

/// A time grain of a date or timestamp dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Grain {
    Day,
    Week,
    Month,
    Quarter,
    Year,
}

impl Grain {
    pub const ALL: [Grain; 5] = [
        Grain::Day,
        Grain::Week,
        Grain::Month,
        Grain::Quarter,
        Grain::Year,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Grain::Day => "day",
            Grain::Week => "week",
            Grain::Month => "month",
            Grain::Quarter => "quarter",
            Grain::Year => "year",
        }
    }

    pub fn parse(text: &str) -> Option<Grain> {
        Grain::ALL.into_iter().find(|g| g.as_str() == text)
    }
}

impl Question {
    /// Bounds and shapes that need no model: counts, arities, the limit.
    pub(super) fn check_shape(&self) -> Result<(), QueryError> {
        let invalid = |parameter: String, message: String| {
            Err(QueryError::new(ErrorKind::Invalid, parameter, message))
        };
        if self.metrics.is_empty() {
            return invalid(
                "metrics".into(),
                "name at least one metric of the model".into(),
            );
        }
        for (parameter, count, max) in [
            ("metrics", self.metrics.len(), MAX_METRICS),
            ("dimensions", self.dimensions.len(), MAX_DIMENSIONS),
            ("filters", self.filters.len(), MAX_FILTERS),
            ("order", self.order.len(), MAX_DIMENSIONS + MAX_METRICS),
        ] {
            if count > max {
                return invalid(
                    parameter.into(),
                    format!("{count} entries; at most {max} are allowed in one question"),
                );
            }
        }
        if let Some(limit) = self.limit
            && !(1..=MAX_LIMIT).contains(&limit)
        {
            return invalid(
                "limit".into(),
                format!("{limit} is out of range; give a limit from 1 to {MAX_LIMIT}"),
            );
        }
        for (i, filter) in self.filters.iter().enumerate() {
            let n = filter.values.len();
            let fits = match filter.op.arity() {
                Some(want) => n == want,
                None => (1..=MAX_VALUES).contains(&n),
            };
            if !fits {
                let want = match filter.op.arity() {
                    Some(0) => "no values".to_string(),
                    Some(1) => "exactly one value".to_string(),
                    Some(k) => format!("exactly {k} values"),
                    None => format!("1 to {MAX_VALUES} values"),
                };
                return invalid(
                    format!("filters[{i}].values"),
                    format!(
                        "{n} values given; operator {} takes {want}",
                        op_name(filter.op)
                    ),
                );
            }
        }
        Ok(())
    }
}

/// Most entries one URL query may hold (each becomes at most one part of a question).
const MAX_QUERY_PAIRS: usize =
    MAX_METRICS + MAX_DIMENSIONS + MAX_FILTERS + MAX_METRICS + MAX_DIMENSIONS + 1;

impl Question {
    /// The question as a URL query (docs/queries.md#http): `metric`, `dimension`, `order` and
    /// `filter` once per entry (a filter as a JSON object), then `limit`. Names may hold any
    /// character, commas included, so entries are never packed into one value.
    pub fn to_query(&self) -> String {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        pairs.extend(self.metrics.iter().map(|m| ("metric", m.clone())));
        pairs.extend(self.dimensions.iter().map(|d| ("dimension", d.clone())));
        pairs.extend(self.filters.iter().map(|f| {
            (
                "filter",
                serde_json::to_string(f).expect("a filter serializes"),
            )
        }));
        pairs.extend(self.order.iter().map(|o| ("order", o.clone())));
        if let Some(limit) = self.limit {
            pairs.push(("limit", limit.to_string()));
        }
        serde_urlencoded::to_string(&pairs).expect("pairs of strings encode")
    }

    /// Reads [`Question::to_query`]'s form. An unknown key, a filter that is no JSON object of
    /// the filter shape, or a limit that is no number is refused naming the entry.
    pub fn from_query(query: &str) -> Result<Question, QueryError> {
        let invalid = |parameter: String, message: String| {
            QueryError::new(ErrorKind::Invalid, parameter, message)
        };
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).map_err(|_| {
            invalid(
                "query".into(),
                "the query string does not decode; percent-encode each value".into(),
            )
        })?;
        if pairs.len() > MAX_QUERY_PAIRS {
            return Err(invalid(
                "query".into(),
                format!(
                    "{} entries; at most {MAX_QUERY_PAIRS} are allowed",
                    pairs.len()
                ),
            ));
        }
        let mut q = Question::default();
        for (key, value) in pairs {
            match key.as_str() {
                "metric" => q.metrics.push(value),
                "dimension" => q.dimensions.push(value),
                "order" => q.order.push(value),
                "filter" => {
                    let i = q.filters.len();
                    let filter = serde_json::from_str(&value).map_err(|e| {
                        invalid(
                            format!("filters[{i}]"),
                            format!(
                                "is not a filter ({}); write {{\"field\": \"dataset.field\", \"op\": \"eq\", \"values\": [...]}}",
                                e.classify_message()
                            ),
                        )
                    })?;
                    q.filters.push(filter);
                }
                "limit" => {
                    if q.limit.is_some() {
                        return Err(invalid(
                            "limit".into(),
                            "given twice; give one limit".into(),
                        ));
                    }
                    q.limit = Some(value.parse().map_err(|_| {
                        invalid(
                            "limit".into(),
                            format!("is not a whole number; give a limit from 1 to {MAX_LIMIT}"),
                        )
                    })?);
                }
                _ => {
                    return Err(invalid(
                        "query".into(),
                        format!(
                            "unknown parameter {}; use metric, dimension, filter, order and limit",
                            shown(&key)
                        ),
                    ));
                }
            }
        }
        Ok(q)
    }
}

/// A serde_json error's kind in words, without the input it quotes.
trait ClassifyMessage {
    fn classify_message(&self) -> &'static str;
}

impl ClassifyMessage for serde_json::Error {
    fn classify_message(&self) -> &'static str {
        use serde_json::error::Category;
        match self.classify() {
            Category::Syntax | Category::Eof | Category::Io => "not JSON",
            Category::Data => "a missing or unknown key, or an unknown op",
        }
    }
}

/// Caller text as an error shows it: quoted, control characters escaped, at most 64 characters,
/// so an error never carries raw input back (docs/queries.md#errors).
pub(super) fn shown(text: &str) -> String {
    const MAX: usize = 64;
    match text.char_indices().nth(MAX) {
        None => format!("{text:?}"),
        Some((cut, _)) => format!("{:?}…", &text[..cut]),
    }
}

pub(super) fn op_name(op: FilterOp) -> &'static str {
    match op {
        FilterOp::Eq => "eq",
        FilterOp::Ne => "ne",
        FilterOp::Lt => "lt",
        FilterOp::Le => "le",
        FilterOp::Gt => "gt",
        FilterOp::Ge => "ge",
        FilterOp::In => "in",
        FilterOp::NotIn => "not_in",
        FilterOp::Between => "between",
        FilterOp::IsNull => "is_null",
        FilterOp::IsNotNull => "is_not_null",
    }
}

/// The text a filter value is bound as, checked against the field's data type (a field without
/// one takes strings and numbers as text). Errors say what the field expects.
pub(super) fn bind_text(
    data_type: Option<DataType>,
    value: &serde_json::Value,
) -> Result<String, String> {
    use serde_json::Value;
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => return Err("null is not a value; use the is_null operator".into()),
        Value::Array(_) | Value::Object(_) => {
            return Err("give a string, number or boolean, not a list or object".into());
        }
    };
    if text.len() > MAX_VALUE_BYTES {
        return Err(format!(
            "{} bytes; at most {MAX_VALUE_BYTES} are allowed",
            text.len()
        ));
    }
    let Some(data_type) = data_type else {
        return match value {
            Value::Bool(_) => Err("the field has no datatype; give a string or number".into()),
            _ => Ok(text),
        };
    };
    let ok = match data_type {
        DataType::String | DataType::Opaque => !matches!(value, Value::Bool(_)),
        DataType::Integer => text.parse::<i64>().is_ok(),
        DataType::Decimal | DataType::Float => is_decimal(&text),
        DataType::Boolean => matches!(text.as_str(), "true" | "false"),
        DataType::Date => is_date(&text),
        DataType::Time => is_time(&text),
        DataType::DateTime => is_timestamp(&text, false),
        DataType::DateTimeTz => is_timestamp(&text, true),
    };
    if ok {
        Ok(text)
    } else {
        Err(format!(
            "{value} is not {}",
            match data_type {
                DataType::String | DataType::Opaque => "a string",
                DataType::Integer => "an integer",
                DataType::Decimal | DataType::Float => "a number",
                DataType::Boolean => "true or false",
                DataType::Date => "a date (YYYY-MM-DD)",
                DataType::Time => "a time (HH:MM:SS)",
                DataType::DateTime => "a timestamp (YYYY-MM-DD HH:MM:SS)",
                DataType::DateTimeTz => "a timestamp with offset (YYYY-MM-DDTHH:MM:SS+00:00)",
            }
        ))
    }
}

fn digits(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_digit())
}

fn is_decimal(s: &str) -> bool {
    let body = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    !(int.is_empty() && frac.is_empty())
        && (int.is_empty() || digits(int, int.len()))
        && (frac.is_empty() || digits(frac, frac.len()))
        && !body.ends_with('.')
}

fn is_date(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 3
        && digits(parts[0], 4)
        && digits(parts[1], 2)
        && digits(parts[2], 2)
        && (1..=12).contains(&parts[1].parse::<u32>().unwrap_or(0))
        && (1..=31).contains(&parts[2].parse::<u32>().unwrap_or(0))
}

fn is_time(s: &str) -> bool {
    let (hms, frac) = s.split_once('.').unwrap_or((s, "0"));
    let parts: Vec<&str> = hms.split(':').collect();
    parts.len() == 3
        && parts.iter().all(|p| digits(p, 2))
        && parts[0] < "24"
        && parts[1] < "60"
        && parts[2] < "60"
        && digits(frac, frac.len())
        && !frac.is_empty()
}

fn is_timestamp(s: &str, with_offset: bool) -> bool {
    let Some((date, rest)) = s.split_once([' ', 'T']) else {
        return !with_offset && is_date(s);
    };
    if !is_date(date) {
        return false;
    }
    let (time, offset) = match rest.strip_suffix('Z') {
        Some(time) => (time, Some("")),
        None => match rest.rfind(['+', '-']) {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        },
    };
    let offset_ok = match (offset, with_offset) {
        (None, false) => true,
        (Some(""), true) => true,
        (Some(o), true) => {
            let (h, m) = o.split_once(':').unwrap_or((o, "00"));
            digits(h, 2) && digits(m, 2)
        }
        _ => false,
    };
    offset_ok && is_time(time)
}

#[cfg(test)]
#[path = "question_tests.rs"]
mod tests;

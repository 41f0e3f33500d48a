//! Tool inputs and outputs, and the pure shaping of read-API answers into them: bounds, order,
//! refusals and resource URIs. Every output type names the read-API type its data comes from,
//! so the JSON schema a tool declares is generated from what the API serializes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::paths::encode_segment;
pub use crate::client::SourceType;

/// Most entries a list tool returns; past it the answer says `truncated: true` and the total.
pub const MAX_LIST: usize = 500;
/// Largest tool answer, in bytes of JSON; a larger one is refused with its size (narrow the
/// question: a catalog or schema, `details: false`, a smaller lineage root).
pub const MAX_ANSWER_BYTES: usize = 512 * 1024;
/// Default and largest `max_nodes` of `get_lineage` (the read API's own bound is 10,000 nodes).
pub const DEFAULT_MAX_NODES: usize = 500;
pub const MAX_NODES: usize = 10_000;

// ---- inputs ----------------------------------------------------------------------------------

#[derive(Deserialize, JsonSchema, Debug)]
pub struct ListModelsInput {
    /// Kubernetes namespace (the Gravitino metalake).
    pub namespace: String,
    /// Only this catalog's models.
    #[serde(default)]
    pub catalog: Option<String>,
    /// Only this schema's models.
    #[serde(default)]
    pub schema: Option<String>,
}

#[derive(Deserialize, JsonSchema, Debug)]
pub struct ModelInput {
    pub namespace: String,
    pub catalog: String,
    pub schema: String,
    /// The model's name (its `spec.name`, else its metadata name).
    pub name: String,
    /// A kept earlier revision; absent: the accepted one.
    #[serde(default)]
    pub revision: Option<i64>,
}

#[derive(Deserialize, JsonSchema, Debug)]
pub struct ListMetricsInput {
    pub namespace: String,
    pub catalog: String,
    pub schema: String,
    /// Case-insensitive text to find in a metric's name, description or model name.
    #[serde(default)]
    pub search: Option<String>,
    /// Include each metric's definition (expression per dialect).
    #[serde(default)]
    pub details: bool,
}

#[derive(Deserialize, JsonSchema, Debug)]
pub struct FindDatasetsInput {
    pub namespace: String,
    #[serde(rename = "type")]
    pub object_type: SourceType,
    /// `catalog.schema.object`; a part containing a dot is backtick-quoted (`` hr.`a.b`.t ``).
    pub full_name: String,
}

#[derive(Deserialize, JsonSchema, Debug)]
pub struct StaleInput {
    pub namespace: String,
    pub catalog: String,
}

/// What a lineage graph is rooted at.
#[derive(Deserialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LineageRootType {
    Model,
    Table,
    View,
}

#[derive(Deserialize, JsonSchema, Debug)]
pub struct LineageInput {
    pub namespace: String,
    pub root_type: LineageRootType,
    /// model: `catalog.schema.model`; table or view: `catalog.schema.object` (backtick quoting
    /// for parts with dots).
    pub root: String,
    /// Refuse (with the counts) rather than answer a graph with more nodes than this
    /// (default 500, at most 10000).
    #[serde(default)]
    pub max_nodes: Option<usize>,
}

#[derive(Deserialize, JsonSchema, Debug)]
pub struct ExplainMetricInput {
    pub namespace: String,
    /// The metric's stable id (UUIDv7), as `list_metrics` or `get_semantic_model` gave it.
    pub id: String,
}

// ---- outputs ---------------------------------------------------------------------------------

/// One model, with the resource URI of its accepted definition.
#[derive(Serialize, JsonSchema, Debug, PartialEq, Eq)]
pub struct ModelRef {
    pub namespace: String,
    pub catalog: String,
    pub schema: String,
    pub name: String,
    pub uri: String,
}

#[derive(Serialize, JsonSchema, Debug, PartialEq)]
pub struct ModelList {
    /// Sorted by catalog, schema, name.
    pub models: Vec<ModelRef>,
    /// How many models matched.
    pub total: usize,
    /// Whether `models` stops short of `total` (at most 500 are listed; narrow by catalog or schema).
    pub truncated: bool,
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct ModelOut {
    #[schemars(with = "crate::api::routes::ModelView")]
    pub model: Value,
    pub uri: String,
}

#[derive(Serialize, JsonSchema, Debug, PartialEq)]
pub struct MetricOut {
    /// Stable id: survives every revision and a rename declared with `renamedFrom`, never reused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    pub catalog: String,
    pub schema: String,
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Set when the metric is deprecated: do not cite it; the text names its replacement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<String>,
    /// The definition (with `details: true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::crd::semantic_model::Metric>")]
    pub definition: Option<Value>,
}

#[derive(Serialize, JsonSchema, Debug, PartialEq)]
pub struct MetricList {
    /// Sorted by model, then metric name.
    pub metrics: Vec<MetricOut>,
    /// How many metrics matched.
    pub total: usize,
    /// Whether `metrics` stops short of `total` (at most 500 are listed; use `search`).
    pub truncated: bool,
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct DatasetList {
    /// Each dataset: namespace `[metalake, catalog, schema, model]` and the dataset's name.
    #[schemars(with = "Vec<crate::api::routes::Identifier>")]
    pub datasets: Value,
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct StaleOut {
    #[schemars(with = "crate::reconcile::plan::StaleReport")]
    pub report: Value,
}

#[derive(Serialize, JsonSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct LineageOut {
    /// Always false: a graph past a bound is refused with its counts, never cut.
    pub truncated: bool,
    pub node_count: usize,
    pub edge_count: usize,
    #[schemars(with = "crate::lineage::Graph")]
    pub graph: Value,
}

/// A metric question for `compile_metric_query`.
#[derive(Deserialize, JsonSchema, Debug)]
pub struct CompileInput {
    pub namespace: String,
    pub catalog: String,
    pub schema: String,
    /// The model's name (its `spec.name`, else its metadata name).
    pub model: String,
    /// Metric names of the model (at least one).
    pub metrics: Vec<String>,
    /// Fields to group by, `dataset.field`; `:day`, `:week`, `:month`, `:quarter` or `:year`
    /// after a date or timestamp field.
    #[serde(default)]
    pub dimensions: Vec<String>,
    /// Conditions on fields, applied before aggregation. Values are bound as parameters.
    #[serde(default)]
    pub filters: Vec<crate::sql::Filter>,
    /// Output columns to sort by (a requested metric or dimension), `-` in front for descending.
    #[serde(default)]
    pub order: Vec<String>,
    #[serde(default)]
    pub limit: Option<u64>,
}

impl CompileInput {
    pub fn question(&self) -> crate::sql::Question {
        crate::sql::Question {
            metrics: self.metrics.clone(),
            dimensions: self.dimensions.clone(),
            filters: self.filters.clone(),
            order: self.order.clone(),
            limit: self.limit,
        }
    }
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct CompileOut {
    /// The SQL, its parameters, the metric ids and revision it used, the joins it chose.
    #[schemars(with = "crate::api::compile::CompiledQuery")]
    pub compiled: Value,
    /// How to cite the answer.
    pub cite: String,
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct ExplainOut {
    #[schemars(with = "crate::api::explain::MetricExplanation")]
    pub metric: Value,
}

// ---- shaping ---------------------------------------------------------------------------------

/// `semops://{namespace}/{catalog}/{schema}/{model}`, each part percent-encoded.
pub fn model_uri(ns: &str, catalog: &str, schema: &str, name: &str) -> String {
    format!(
        "semops://{}/{}/{}/{}",
        encode_segment(ns),
        encode_segment(catalog),
        encode_segment(schema),
        encode_segment(name)
    )
}

/// The four parts of a model URI; `None` for anything else.
pub fn parse_model_uri(uri: &str) -> Option<[String; 4]> {
    let rest = uri.strip_prefix("semops://")?;
    let parts: Vec<String> = rest
        .split('/')
        .map(crate::api::paths::decode_segment)
        .collect::<Option<Vec<_>>>()?;
    let parts: [String; 4] = parts.try_into().ok()?;
    parts.iter().all(|p| !p.is_empty()).then_some(parts)
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// The namespace-wide model list (`identifiers` of `[ns, catalog, schema]` + name), bounded.
pub fn model_list(body: &Value, limit: usize) -> ModelList {
    let all: Vec<ModelRef> = body["identifiers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            let ns = text(&i["namespace"][0]);
            let catalog = text(&i["namespace"][1]);
            let schema = text(&i["namespace"][2]);
            let name = text(&i["name"]);
            ModelRef {
                uri: model_uri(&ns, &catalog, &schema, &name),
                namespace: ns,
                catalog,
                schema,
                name,
            }
        })
        .collect();
    let total = all.len();
    let models: Vec<ModelRef> = all.into_iter().take(limit).collect();
    ModelList {
        truncated: models.len() < total,
        models,
        total,
    }
}

/// A schema's metrics (`?details=true&ids=true` answer), filtered by `search`, bounded.
pub fn metric_list(body: &Value, search: Option<&str>, details: bool, limit: usize) -> MetricList {
    let needle = search.map(str::to_lowercase).filter(|s| !s.is_empty());
    let all: Vec<MetricOut> = body["metrics"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let metric = &e["metric"];
            MetricOut {
                id: e["id"].as_str().map(str::to_string),
                name: text(&metric["name"]),
                catalog: text(&e["namespace"][1]),
                schema: text(&e["namespace"][2]),
                model: text(&e["namespace"][3]),
                description: metric["description"].as_str().map(str::to_string),
                deprecated: deprecation(&metric["deprecated"]),
                definition: details.then(|| metric.clone()),
            }
        })
        .filter(|m| {
            needle.as_ref().is_none_or(|n| {
                [Some(&m.name), m.description.as_ref(), Some(&m.model)]
                    .into_iter()
                    .flatten()
                    .any(|t| t.to_lowercase().contains(n))
            })
        })
        .collect();
    let total = all.len();
    let metrics: Vec<MetricOut> = all.into_iter().take(limit).collect();
    MetricList {
        truncated: metrics.len() < total,
        metrics,
        total,
    }
}

/// What an agent is told about a deprecated metric (`None`: not deprecated).
fn deprecation(d: &Value) -> Option<String> {
    if !d.is_object() {
        return None;
    }
    let mut text = "deprecated: do not cite this metric".to_string();
    if let Some(r) = d["replacement"].as_str() {
        text.push_str(&format!("; use {r:?} instead"));
    }
    if let Some(why) = d["reason"].as_str() {
        text.push_str(&format!(" ({why})"));
    }
    Some(text)
}

/// Why a lineage answer was refused.
#[derive(Debug, PartialEq, Eq)]
pub struct LineageRefused {
    pub nodes: usize,
    pub edges: usize,
    pub max_nodes: usize,
}

impl std::fmt::Display for LineageRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refused: the lineage graph has {} nodes and {} edges, more than max_nodes = {}; nothing was cut. Ask again with a larger max_nodes (at most {MAX_NODES}) or a narrower root",
            self.nodes, self.edges, self.max_nodes
        )
    }
}

/// The graph whole, or a refusal with its counts: never a partial graph.
pub fn lineage(graph: Value, max_nodes: Option<usize>) -> Result<LineageOut, LineageRefused> {
    let max_nodes = max_nodes.unwrap_or(DEFAULT_MAX_NODES).clamp(1, MAX_NODES);
    let count = |k: &str| graph[k].as_array().map_or(0, Vec::len);
    let (nodes, edges) = (count("nodes"), count("edges"));
    if nodes > max_nodes {
        return Err(LineageRefused {
            nodes,
            edges,
            max_nodes,
        });
    }
    Ok(LineageOut {
        truncated: false,
        node_count: nodes,
        edge_count: edges,
        graph,
    })
}

/// The answer's JSON, or a refusal naming its size and the bound.
pub fn bounded<T: Serialize>(out: &T) -> Result<Value, String> {
    let value = serde_json::to_value(out).map_err(|e| format!("cannot serialize: {e}"))?;
    let size = value.to_string().len();
    if size > MAX_ANSWER_BYTES {
        return Err(format!(
            "refused: the answer is {size} bytes, more than the {MAX_ANSWER_BYTES}-byte bound; nothing was cut. Narrow the question (one catalog or schema, details: false, search)"
        ));
    }
    Ok(value)
}

/// The `write_sql` prompt: how to write SQL from a model's datasets, relationships and metric
/// expressions, with the model (`ModelView` JSON) inlined.
pub fn sql_prompt(model: &Value, dialect: &str, question: Option<&str>) -> String {
    let definition = &model["definition"];
    let mut out = String::new();
    out.push_str(&format!(
        "You write {dialect} SQL against the semantic model `{}` (revision {}). Use only what it defines:\n\n",
        text(&model["name"]),
        model["revision"]
    ));
    out.push_str("Datasets (each is a table or view; query it by its source name):\n");
    for d in definition["datasets"].as_array().into_iter().flatten() {
        let keys: Vec<String> = d["primaryKey"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        out.push_str(&format!(
            "- {} = {} (primary key: {})\n",
            text(&d["name"]),
            text(&d["source"]),
            if keys.is_empty() {
                "none".into()
            } else {
                keys.join(", ")
            }
        ));
        for f in d["fields"].as_array().into_iter().flatten() {
            let expr = dialect_expression(&f["expression"], dialect);
            out.push_str(&format!("    field {}: {}\n", text(&f["name"]), expr));
        }
    }
    out.push_str("\nRelationships (join only along these, from -> to on the listed columns):\n");
    for r in definition["relationships"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "- {}: {} ({}) -> {} ({})\n",
            text(&r["name"]),
            text(&r["from"]),
            list(&r["fromColumns"]),
            text(&r["to"]),
            list(&r["toColumns"])
        ));
    }
    out.push_str("\nMetrics (use the expression as written; cite the metric id so answers stay traceable across renames):\n");
    let ids: std::collections::BTreeMap<String, String> = model["metricIds"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| (text(&m["name"]), text(&m["id"])))
        .collect();
    for m in definition["metrics"].as_array().into_iter().flatten() {
        let name = text(&m["name"]);
        out.push_str(&format!(
            "- {name} [id {}]: {}\n",
            ids.get(&name).map_or("-", String::as_str),
            dialect_expression(&m["expression"], dialect)
        ));
    }
    out.push_str("\nRules: aggregate with the metric expressions, group by dataset fields, join only along the relationships, and say which metric ids the query uses.\n");
    if let Some(q) = question {
        out.push_str(&format!("\nQuestion: {q}\n"));
    }
    out
}

fn list(v: &Value) -> String {
    v.as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The expression in `dialect`, else the first one (with its dialect named).
fn dialect_expression(expression: &Value, dialect: &str) -> String {
    let dialects: Vec<&Value> = expression["dialects"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    match dialects
        .iter()
        .find(|d| text(&d["dialect"]).eq_ignore_ascii_case(dialect))
        .or(dialects.first())
    {
        Some(d) if text(&d["dialect"]).eq_ignore_ascii_case(dialect) => text(&d["expression"]),
        Some(d) => format!("{} (in {})", text(&d["expression"]), text(&d["dialect"])),
        None => "?".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_uris_round_trip_any_name_and_refuse_anything_else() {
        for parts in [
            ["ns", "hr", "public", "employees"],
            ["ns", "c d", "a/b", "ü.`x`"],
            ["n", "%", "%25", "?#"],
        ] {
            let uri = model_uri(parts[0], parts[1], parts[2], parts[3]);
            assert_eq!(
                parse_model_uri(&uri),
                Some(parts.map(String::from)),
                "{uri}"
            );
        }
        for bad in [
            "semops://a/b/c",
            "semops://a/b/c/d/e",
            "semops://a//c/d",
            "http://a/b/c/d",
            "semops://a/b/c/%zz",
            "semops://a/b/c/%ff",
        ] {
            assert_eq!(parse_model_uri(bad), None, "{bad}");
        }
    }

    fn identifiers(n: usize) -> Value {
        let ids: Vec<Value> = (0..n)
            .map(|i| json!({"namespace": ["ns", "c", "s"], "name": format!("m{i:04}")}))
            .collect();
        json!({"code": 0, "identifiers": ids})
    }

    #[test]
    fn lists_are_bounded_and_say_so() {
        for (n, limit, listed, truncated) in [(0, 5, 0, false), (5, 5, 5, false), (6, 5, 5, true)] {
            let out = model_list(&identifiers(n), limit);
            assert_eq!(
                (out.models.len(), out.total, out.truncated),
                (listed, n, truncated)
            );
        }
        let out = model_list(&identifiers(2), 5);
        assert_eq!(out.models[1].uri, "semops://ns/c/s/m0001");
    }

    fn metrics() -> Value {
        json!({"code": 0, "metrics": [
            {"namespace": ["ns", "c", "s", "orders"], "id": "A",
             "metric": {"name": "revenue", "description": "Gross Revenue",
                        "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "SUM(x)"}]}}},
            {"namespace": ["ns", "c", "s", "orders"], "id": "B",
             "metric": {"name": "order_count", "deprecated": {"replacement": "revenue", "reason": "counts lines"},
                        "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "COUNT(*)"}]}}},
            {"namespace": ["ns", "c", "s", "people"],
             "metric": {"name": "headcount", "expression": {"dialects": []}}}
        ]})
    }

    #[test]
    fn metric_search_matches_name_description_or_model_case_insensitively() {
        let names = |search: Option<&str>| -> Vec<String> {
            metric_list(&metrics(), search, false, MAX_LIST)
                .metrics
                .into_iter()
                .map(|m| m.name)
                .collect()
        };
        assert_eq!(names(None), ["revenue", "order_count", "headcount"]);
        assert_eq!(names(Some("REVENUE")), ["revenue"]);
        assert_eq!(names(Some("gross")), ["revenue"]);
        assert_eq!(names(Some("people")), ["headcount"]);
        assert_eq!(names(Some("")), ["revenue", "order_count", "headcount"]);
        assert!(names(Some("nothing")).is_empty());
        let out = metric_list(&metrics(), None, true, 1);
        assert_eq!((out.total, out.truncated), (3, true));
        assert_eq!(out.metrics[0].id.as_deref(), Some("A"));
        assert_eq!(
            out.metrics[0].definition.as_ref().unwrap()["name"],
            "revenue"
        );
        assert_eq!(
            metric_list(&metrics(), None, false, 9).metrics[0].definition,
            None
        );
    }

    #[test]
    fn a_deprecated_metric_tells_the_agent_not_to_cite_it_and_what_to_use() {
        let out = metric_list(&metrics(), None, false, MAX_LIST);
        let said: Vec<Option<&str>> = out
            .metrics
            .iter()
            .map(|m| m.deprecated.as_deref())
            .collect();
        assert_eq!(
            said,
            [
                None,
                Some("deprecated: do not cite this metric; use \"revenue\" instead (counts lines)"),
                None
            ]
        );
        assert_eq!(
            deprecation(&json!({})).as_deref(),
            Some("deprecated: do not cite this metric")
        );
    }

    #[test]
    fn lineage_over_the_bound_is_refused_with_counts_never_cut() {
        let graph = |n: usize| {
            let nodes: Vec<Value> = (0..n).map(|i| json!({"id": i})).collect();
            json!({"nodes": nodes, "edges": [{}, {}]})
        };
        assert_eq!(
            lineage(graph(11), Some(10)).err(),
            Some(LineageRefused {
                nodes: 11,
                edges: 2,
                max_nodes: 10
            })
        );
        let out = lineage(graph(10), Some(10)).expect("within");
        assert_eq!(
            (out.truncated, out.node_count, out.edge_count),
            (false, 10, 2)
        );
        assert!(lineage(graph(DEFAULT_MAX_NODES + 1), None).is_err());
        // max_nodes 0 means 1; past MAX_NODES it is MAX_NODES.
        assert!(lineage(graph(2), Some(0)).is_err());
        assert_eq!(
            lineage(graph(1), Some(usize::MAX)).map(|o| o.node_count),
            Ok(1)
        );
        let text = LineageRefused {
            nodes: 11,
            edges: 2,
            max_nodes: 10,
        }
        .to_string();
        assert!(text.contains("11 nodes") && text.contains("max_nodes = 10"));
    }

    #[test]
    fn answers_past_the_byte_bound_are_refused_with_their_size() {
        let big = json!({"x": "y".repeat(MAX_ANSWER_BYTES)});
        let err = bounded(&big).unwrap_err();
        assert!(err.contains("bytes") && err.contains(&MAX_ANSWER_BYTES.to_string()));
        assert!(bounded(&json!({"x": 1})).is_ok());
    }

    #[test]
    fn the_sql_prompt_names_datasets_joins_and_metric_ids_in_the_asked_dialect() {
        let model = json!({"name": "orders", "revision": 3,
        "metricIds": [{"name": "revenue", "id": "0190-A"}],
        "definition": {
            "datasets": [{"name": "orders", "source": "shop.public.orders", "primaryKey": ["id"],
                          "fields": [{"name": "amount", "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "amount"}]}}]}],
            "relationships": [{"name": "o_c", "from": "orders", "to": "customers", "fromColumns": ["customer_id"], "toColumns": ["id"]}],
            "metrics": [{"name": "revenue", "expression": {"dialects": [
                {"dialect": "ANSI_SQL", "expression": "SUM(amount)"},
                {"dialect": "SNOWFLAKE", "expression": "SUM(amount)::number"}]}}]
        }});
        let p = sql_prompt(&model, "SNOWFLAKE", Some("revenue by month"));
        assert!(
            p.contains("orders = shop.public.orders (primary key: id)"),
            "{p}"
        );
        assert!(
            p.contains("o_c: orders (customer_id) -> customers (id)"),
            "{p}"
        );
        assert!(
            p.contains("revenue [id 0190-A]: SUM(amount)::number"),
            "{p}"
        );
        assert!(p.contains("field amount: amount (in ANSI_SQL)"), "{p}");
        assert!(p.ends_with("Question: revenue by month\n"), "{p}");
    }
}

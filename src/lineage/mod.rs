//! The lineage graph (DESIGN 6.5, seed 003): a deterministic, read-only, bounded projection of
//! accepted models and their source associations. Pure: the caller supplies the accepted
//! definitions, associations and metric ids; this room counts, checks bounds *before* building
//! or sorting anything, builds, sorts, and serializes once into a capped buffer.
//!
//! No invented edges: a dataset BINDS its source, a dataset RELATES to another only through a
//! declared relationship, a model CONTAINS its datasets and metrics (metrics name no datasets in
//! Ossie, so they hang off their model). Missing metadata is a warning, never missing topology.

pub mod render;

use std::collections::{BTreeSet, HashSet};
use std::io::Write;

use serde::Serialize;

use crate::crd::semantic_model::{Definition, MetricIdentity, SourceAssociation};

/// Bounds of one projection (configurable; measured in BENCHMARKS.md before changing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_nodes: usize,
    pub max_edges: usize,
    /// UTF-8 bytes per label (node name).
    pub max_label_bytes: usize,
    /// Bytes of the serialized JSON body.
    pub max_response_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_nodes: 10_000,
            max_edges: 50_000,
            max_label_bytes: 4 * 1024,
            max_response_bytes: 8 * 1024 * 1024,
        }
    }
}

/// Node kinds, in output order.
#[derive(
    Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum NodeKind {
    Source,
    Dataset,
    Metric,
    Model,
}

/// Edge kinds, in output order.
#[derive(
    Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, schemars::JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EdgeKind {
    /// dataset -> the source it reads.
    Binds,
    /// dataset -> dataset, through a declared relationship.
    Relates,
    /// model -> its dataset or metric.
    Contains,
}

#[derive(Serialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    pub id: String,
    pub kind: NodeKind,
    pub name: String,
    /// Where it lives: SOURCE [ns, catalog, schema]; DATASET and METRIC [ns, catalog, schema,
    /// model]; MODEL [ns, catalog, schema].
    pub namespace: Vec<String>,
    /// SOURCE: TABLE or VIEW.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_type: Option<String>,
    /// MODEL: the accepted revision projected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
}

#[derive(Serialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema)]
pub struct Edge {
    pub kind: EdgeKind,
    pub source: String,
    pub target: String,
}

#[derive(Serialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Warning {
    pub code: &'static str,
    pub node_id: String,
}

/// The response body.
#[derive(Serialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Graph {
    pub schema_version: u32,
    /// MODEL (rooted at a model) or SOURCE (rooted at a table or view).
    pub graph_kind: &'static str,
    pub root: String,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    pub warnings: Vec<Warning>,
}

/// A source whose last probe said absent, or whose catalog could not answer.
pub const SOURCE_UNAVAILABLE: &str = "SOURCE_UNAVAILABLE";

/// One accepted model, as the projection needs it.
#[derive(Clone, Copy, Debug)]
pub struct ModelInput<'a> {
    pub uid: &'a str,
    pub namespace: &'a str,
    pub catalog: &'a str,
    pub schema: &'a str,
    pub name: &'a str,
    pub revision: i64,
    pub definition: &'a Definition,
    pub associations: &'a [SourceAssociation],
    pub metric_ids: &'a [MetricIdentity],
    /// Datasets whose source is unavailable (drift says missing, or its catalog's answer is
    /// unknown).
    pub unavailable: &'a [String],
}

/// The source a graph is rooted at (resolved live by the caller).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceRoot {
    pub namespace: String,
    pub catalog: String,
    pub schema: String,
    pub name: String,
    pub object_type: String,
    pub id: String,
}

impl SourceRoot {
    /// Whether association `a` binds this source (same catalog, type and native id).
    pub fn is_bound_by(&self, a: &SourceAssociation) -> bool {
        a.source.catalog == self.catalog && a.object_type == self.object_type && a.id == self.id
    }
}

/// Why no graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TooLarge {
    #[error("more than {0} nodes")]
    Nodes(usize),
    #[error("more than {0} edges")]
    Edges(usize),
    #[error("a label longer than {0} bytes")]
    Label(usize),
    #[error("a response larger than {0} bytes")]
    Response(usize),
}

pub fn source_id(catalog: &str, object_type: &str, id: &str) -> String {
    format!("source:{catalog}/{object_type}/{id}")
}
pub fn dataset_id(model_uid: &str, name: &str) -> String {
    format!("dataset:{model_uid}/{name}")
}
pub fn model_id(uid: &str) -> String {
    format!("model:{uid}")
}
fn metric_node_id(m: &ModelInput<'_>, name: &str) -> String {
    match m.metric_ids.iter().find(|i| i.name == name) {
        Some(i) => format!("metric:{}", i.id),
        None => format!("metric:{}/{name}", m.uid),
    }
}

fn source_label(a: &SourceAssociation) -> String {
    format!("{}.{}.{}", a.source.catalog, a.source.schema, a.source.name)
}

fn check_label(text: &str, limits: &Limits) -> Result<(), TooLarge> {
    if text.len() > limits.max_label_bytes {
        Err(TooLarge::Label(limits.max_label_bytes))
    } else {
        Ok(())
    }
}

/// Preflight of a model-rooted graph: counts and labels, no copies.
fn preflight_model(m: &ModelInput<'_>, limits: &Limits) -> Result<(), TooLarge> {
    let datasets = m.definition.datasets.len();
    let metrics = m.definition.metrics.as_ref().map_or(0, Vec::len);
    let relationships = m.definition.relationships.as_ref().map_or(0, Vec::len);
    let sources: HashSet<(&str, &str, &str)> = m
        .associations
        .iter()
        .map(|a| {
            (
                a.source.catalog.as_str(),
                a.object_type.as_str(),
                a.id.as_str(),
            )
        })
        .collect();
    let nodes = 1 + datasets + metrics + sources.len();
    if nodes > limits.max_nodes {
        return Err(TooLarge::Nodes(limits.max_nodes));
    }
    let edges = datasets + metrics + m.associations.len() + relationships;
    if edges > limits.max_edges {
        return Err(TooLarge::Edges(limits.max_edges));
    }
    check_label(m.name, limits)?;
    for d in &m.definition.datasets {
        check_label(&d.name, limits)?;
    }
    for metric in m.definition.metrics.iter().flatten() {
        check_label(&metric.name, limits)?;
    }
    for a in m.associations {
        if source_label(a).len() > limits.max_label_bytes {
            return Err(TooLarge::Label(limits.max_label_bytes));
        }
    }
    Ok(())
}

fn model_node(m: &ModelInput<'_>) -> Node {
    Node {
        id: model_id(m.uid),
        kind: NodeKind::Model,
        name: m.name.to_string(),
        namespace: vec![m.namespace.into(), m.catalog.into(), m.schema.into()],
        object_type: None,
        revision: Some(m.revision),
    }
}

fn in_model(m: &ModelInput<'_>) -> Vec<String> {
    vec![
        m.namespace.into(),
        m.catalog.into(),
        m.schema.into(),
        m.name.into(),
    ]
}

fn source_node(a: &SourceAssociation, namespace: &str) -> Node {
    Node {
        id: source_id(&a.source.catalog, &a.object_type, &a.id),
        kind: NodeKind::Source,
        name: source_label(a),
        namespace: vec![
            namespace.into(),
            a.source.catalog.clone(),
            a.source.schema.clone(),
        ],
        object_type: Some(a.object_type.clone()),
        revision: None,
    }
}

/// The graph of one model: the model, its datasets and their sources, its metrics.
pub fn project_model(m: &ModelInput<'_>, limits: &Limits) -> Result<Vec<u8>, TooLarge> {
    preflight_model(m, limits)?;
    let root = model_id(m.uid);
    let mut nodes = vec![model_node(m)];
    let mut edges = Vec::new();
    let mut warnings = Vec::new();
    for d in &m.definition.datasets {
        let id = dataset_id(m.uid, &d.name);
        edges.push(Edge {
            kind: EdgeKind::Contains,
            source: root.clone(),
            target: id.clone(),
        });
        nodes.push(Node {
            id,
            kind: NodeKind::Dataset,
            name: d.name.clone(),
            namespace: in_model(m),
            object_type: None,
            revision: None,
        });
    }
    for metric in m.definition.metrics.iter().flatten() {
        let id = metric_node_id(m, &metric.name);
        edges.push(Edge {
            kind: EdgeKind::Contains,
            source: root.clone(),
            target: id.clone(),
        });
        nodes.push(Node {
            id,
            kind: NodeKind::Metric,
            name: metric.name.clone(),
            namespace: in_model(m),
            object_type: None,
            revision: None,
        });
    }
    let mut seen_sources = HashSet::new();
    for a in m.associations {
        let source = source_node(a, m.namespace);
        edges.push(Edge {
            kind: EdgeKind::Binds,
            source: dataset_id(m.uid, &a.dataset),
            target: source.id.clone(),
        });
        if m.unavailable.contains(&a.dataset) {
            warnings.push(Warning {
                code: SOURCE_UNAVAILABLE,
                node_id: source.id.clone(),
            });
        }
        if seen_sources.insert(source.id.clone()) {
            nodes.push(source);
        }
    }
    let declared: HashSet<&str> = m
        .definition
        .datasets
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    for r in m.definition.relationships.iter().flatten() {
        // Validation guarantees both ends exist; a dangling end is skipped, never invented.
        if declared.contains(r.from.as_str()) && declared.contains(r.to.as_str()) {
            edges.push(Edge {
                kind: EdgeKind::Relates,
                source: dataset_id(m.uid, &r.from),
                target: dataset_id(m.uid, &r.to),
            });
        }
    }
    finish("MODEL", root, nodes, edges, warnings, limits)
}

/// The graph of one source: the source, the datasets bound to it, their models. `models` are
/// the (already authorized) models with at least one association to the source.
pub fn project_source(
    root: &SourceRoot,
    models: &[ModelInput<'_>],
    limits: &Limits,
) -> Result<Vec<u8>, TooLarge> {
    let binds = |m: &ModelInput<'_>| {
        m.associations
            .iter()
            .filter(|a| root.is_bound_by(a))
            .count()
    };
    // Preflight: counts and labels before any copy.
    let bound: usize = models.iter().map(binds).sum();
    if 1 + models.len() + bound > limits.max_nodes {
        return Err(TooLarge::Nodes(limits.max_nodes));
    }
    if 2 * bound > limits.max_edges {
        return Err(TooLarge::Edges(limits.max_edges));
    }
    check_label(
        &format!("{}.{}.{}", root.catalog, root.schema, root.name),
        limits,
    )?;
    for m in models {
        check_label(m.name, limits)?;
        for a in m.associations {
            check_label(&a.dataset, limits)?;
        }
    }
    let source = source_id(&root.catalog, &root.object_type, &root.id);
    let mut nodes = Vec::with_capacity(1 + models.len() + bound);
    let mut edges = Vec::with_capacity(2 * bound);
    nodes.push(Node {
        id: source.clone(),
        kind: NodeKind::Source,
        name: format!("{}.{}.{}", root.catalog, root.schema, root.name),
        namespace: vec![
            root.namespace.clone(),
            root.catalog.clone(),
            root.schema.clone(),
        ],
        object_type: Some(root.object_type.clone()),
        revision: None,
    });
    for m in models {
        let mine: BTreeSet<&str> = m
            .associations
            .iter()
            .filter(|a| root.is_bound_by(a))
            .map(|a| a.dataset.as_str())
            .collect();
        if mine.is_empty() {
            continue;
        }
        nodes.push(model_node(m));
        for d in mine {
            let id = dataset_id(m.uid, d);
            edges.push(Edge {
                kind: EdgeKind::Binds,
                source: id.clone(),
                target: source.clone(),
            });
            edges.push(Edge {
                kind: EdgeKind::Contains,
                source: model_id(m.uid),
                target: id.clone(),
            });
            nodes.push(Node {
                id,
                kind: NodeKind::Dataset,
                name: d.to_string(),
                namespace: in_model(m),
                object_type: None,
                revision: None,
            });
        }
    }
    finish("SOURCE", source, nodes, edges, vec![], limits)
}

/// Sorts, deduplicates, serializes into a capped buffer.
fn finish(
    graph_kind: &'static str,
    root: String,
    mut nodes: Vec<Node>,
    mut edges: Vec<Edge>,
    mut warnings: Vec<Warning>,
    limits: &Limits,
) -> Result<Vec<u8>, TooLarge> {
    nodes.sort_by(|a, b| (a.kind, &a.id).cmp(&(b.kind, &b.id)));
    nodes.dedup_by(|a, b| a.id == b.id);
    edges.sort();
    edges.dedup();
    warnings.sort();
    warnings.dedup();
    let graph = Graph {
        schema_version: 1,
        graph_kind,
        root,
        nodes,
        edges,
        warnings,
    };
    let mut out = Capped::new(limits.max_response_bytes);
    serde_json::to_writer(&mut out, &graph)
        .map_err(|_| TooLarge::Response(limits.max_response_bytes))?;
    Ok(out.buf)
}

/// A buffer that refuses to grow past its cap (the body is sent only if it fits).
pub struct Capped {
    buf: Vec<u8>,
    cap: usize,
}

impl Capped {
    pub fn new(cap: usize) -> Self {
        Self {
            buf: Vec::with_capacity(cap.min(64 * 1024)),
            cap,
        }
    }
}

impl Write for Capped {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + data.len() > self.cap {
            return Err(std::io::Error::other("response limit"));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;

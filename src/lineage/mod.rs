//! The lineage graph (docs/design.md#lineage, seed 003): a deterministic, read-only, bounded projection of
//! accepted models and their source associations. Pure: the caller supplies the accepted
//! definitions, associations and metric ids; this room counts, checks bounds *before* building
//! or sorting anything, builds, sorts, and serializes once into a capped buffer.
//!
//! No invented edges: a dataset BINDS its source, a dataset RELATES to another only through a
//! declared relationship, a model CONTAINS its datasets and metrics (metrics name no datasets in
//! Ossie, so they hang off their model). Missing metadata is a warning, never missing topology.

pub mod render;

use std::collections::BTreeSet;

// A fast seeded hasher: the projection hashes up to 100,000 names per request.
use foldhash::{HashMap, HashMapExt, HashSet};
use std::io::Write;

use serde::Serialize;

use crate::crd::packed::MetricId;
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
        // The length of `source_label(a)`, without building it.
        let label = a.source.catalog.len() + a.source.schema.len() + a.source.name.len() + 2;
        if label > limits.max_label_bytes {
            return Err(TooLarge::Label(limits.max_label_bytes));
        }
    }
    Ok(())
}

/// Node ids of one projection, each formatted once; nodes, edges and warnings refer to them by
/// index, so an edge costs 12 bytes instead of two owned strings (the edge limit is 50,000).
#[derive(Default)]
struct Ids {
    text: Vec<String>,
}

type Id = u32;

impl Ids {
    fn add(&mut self, id: String) -> Id {
        self.text.push(id);
        (self.text.len() - 1) as Id
    }
    fn get(&self, id: Id) -> &str {
        &self.text[id as usize]
    }
    /// Each id's rank in byte order, equal texts sharing one: comparing ranks compares texts.
    fn ranks(&self) -> Vec<u32> {
        let mut order: Vec<Id> = (0..self.text.len() as Id).collect();
        order.sort_unstable_by(|a, b| self.get(*a).cmp(self.get(*b)));
        let mut rank = vec![0; order.len()];
        let mut current = 0;
        for (position, pair) in order.iter().enumerate() {
            if position > 0 && self.get(order[position - 1]) != self.get(*pair) {
                current += 1;
            }
            rank[*pair as usize] = current;
        }
        rank
    }
}

/// Where a node lives (3 or 4 borrowed parts).
#[derive(Clone, Copy)]
struct Place<'a> {
    parts: [&'a str; 4],
    len: usize,
}

impl<'a> Place<'a> {
    fn of_model(m: &ModelInput<'a>) -> Self {
        Self {
            parts: [m.namespace, m.catalog, m.schema, ""],
            len: 3,
        }
    }
    fn in_model(m: &ModelInput<'a>) -> Self {
        Self {
            parts: [m.namespace, m.catalog, m.schema, m.name],
            len: 4,
        }
    }
    fn of_source(namespace: &'a str, catalog: &'a str, schema: &'a str) -> Self {
        Self {
            parts: [namespace, catalog, schema, ""],
            len: 3,
        }
    }
}

/// A node while projecting: borrowed text, its id by index.
struct NodeAt<'a> {
    id: Id,
    kind: NodeKind,
    name: std::borrow::Cow<'a, str>,
    place: Place<'a>,
    object_type: Option<&'a str>,
    revision: Option<i64>,
}

#[derive(Clone, Copy)]
struct EdgeAt {
    kind: EdgeKind,
    source: Id,
    target: Id,
}

/// Nodes, edges and warnings under construction.
struct Building<'a> {
    ids: Ids,
    nodes: Vec<NodeAt<'a>>,
    edges: Vec<EdgeAt>,
    warnings: Vec<(&'static str, Id)>,
}

impl<'a> Building<'a> {
    fn new(nodes: usize, edges: usize) -> Self {
        Self {
            ids: Ids {
                text: Vec::with_capacity(nodes),
            },
            nodes: Vec::with_capacity(nodes),
            edges: Vec::with_capacity(edges),
            warnings: Vec::new(),
        }
    }
    fn edge(&mut self, kind: EdgeKind, source: Id, target: Id) {
        self.edges.push(EdgeAt {
            kind,
            source,
            target,
        });
    }
    fn model_node(&mut self, m: &ModelInput<'a>) -> Id {
        let id = self.ids.add(model_id(m.uid));
        self.nodes.push(NodeAt {
            id,
            kind: NodeKind::Model,
            name: m.name.into(),
            place: Place::of_model(m),
            object_type: None,
            revision: Some(m.revision),
        });
        id
    }
    /// A DATASET or METRIC node of model `m`.
    fn member(&mut self, m: &ModelInput<'a>, kind: NodeKind, id: String, name: &'a str) -> Id {
        let id = self.ids.add(id);
        self.nodes.push(NodeAt {
            id,
            kind,
            name: name.into(),
            place: Place::in_model(m),
            object_type: None,
            revision: None,
        });
        id
    }
}

/// The graph of one model: the model, its datasets and their sources, its metrics.
pub fn project_model(m: &ModelInput<'_>, limits: &Limits) -> Result<Vec<u8>, TooLarge> {
    preflight_model(m, limits)?;
    let datasets = &m.definition.datasets;
    let metrics = m.definition.metrics.as_deref().unwrap_or_default();
    let relationships = m.definition.relationships.as_deref().unwrap_or_default();
    let mut g = Building::new(
        1 + datasets.len() + metrics.len() + m.associations.len(),
        datasets.len() + metrics.len() + m.associations.len() + relationships.len(),
    );
    let root = g.model_node(m);
    let mut dataset_ids: HashMap<&str, Id> = HashMap::with_capacity(datasets.len());
    for d in datasets {
        let id = g.member(m, NodeKind::Dataset, dataset_id(m.uid, &d.name), &d.name);
        dataset_ids.insert(&d.name, id);
        g.edge(EdgeKind::Contains, root, id);
    }
    let metric_ids: HashMap<&str, &MetricId> = m
        .metric_ids
        .iter()
        .map(|i| (i.name.as_str(), &i.id))
        .collect();
    for metric in metrics {
        let text = match metric_ids.get(metric.name.as_str()) {
            Some(id) => format!("metric:{id}"),
            None => format!("metric:{}/{}", m.uid, metric.name),
        };
        let id = g.member(m, NodeKind::Metric, text, &metric.name);
        g.edge(EdgeKind::Contains, root, id);
    }
    let mut sources: HashMap<(&str, &str, &str), Id> = HashMap::new();
    for a in m.associations {
        let key = (
            a.source.catalog.as_str(),
            a.object_type.as_str(),
            a.id.as_str(),
        );
        let source = match sources.get(&key) {
            Some(id) => *id,
            None => {
                let id = g
                    .ids
                    .add(source_id(&a.source.catalog, &a.object_type, &a.id));
                g.nodes.push(NodeAt {
                    id,
                    kind: NodeKind::Source,
                    name: source_label(a).into(),
                    place: Place::of_source(m.namespace, &a.source.catalog, &a.source.schema),
                    object_type: Some(&a.object_type),
                    revision: None,
                });
                sources.insert(key, id);
                id
            }
        };
        // An association names a declared dataset (validation); otherwise its id is still drawn.
        let dataset = match dataset_ids.get(a.dataset.as_str()) {
            Some(id) => *id,
            None => g.ids.add(dataset_id(m.uid, &a.dataset)),
        };
        g.edge(EdgeKind::Binds, dataset, source);
        if m.unavailable.iter().any(|d| *d == a.dataset) {
            g.warnings.push((SOURCE_UNAVAILABLE, source));
        }
    }
    for r in relationships {
        // Validation guarantees both ends exist; a dangling end is skipped, never invented.
        if let (Some(from), Some(to)) = (
            dataset_ids.get(r.from.as_str()),
            dataset_ids.get(r.to.as_str()),
        ) {
            g.edge(EdgeKind::Relates, *from, *to);
        }
    }
    finish("MODEL", root, g, limits)
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
    let label = format!("{}.{}.{}", root.catalog, root.schema, root.name);
    check_label(&label, limits)?;
    for m in models {
        check_label(m.name, limits)?;
        for a in m.associations {
            check_label(&a.dataset, limits)?;
        }
    }
    let mut g = Building::new(1 + models.len() + bound, 2 * bound);
    let source = g
        .ids
        .add(source_id(&root.catalog, &root.object_type, &root.id));
    g.nodes.push(NodeAt {
        id: source,
        kind: NodeKind::Source,
        name: label.into(),
        place: Place::of_source(&root.namespace, &root.catalog, &root.schema),
        object_type: Some(&root.object_type),
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
        let model = g.model_node(m);
        for d in mine {
            let id = g.member(m, NodeKind::Dataset, dataset_id(m.uid, d), d);
            g.edge(EdgeKind::Binds, id, source);
            g.edge(EdgeKind::Contains, model, id);
        }
    }
    finish("SOURCE", source, g, limits)
}

/// Sorts (by kind, then id text), deduplicates, serializes into a capped buffer. The output has
/// exactly the shape of [`Graph`].
fn finish(
    graph_kind: &'static str,
    root: Id,
    mut g: Building<'_>,
    limits: &Limits,
) -> Result<Vec<u8>, TooLarge> {
    let rank = g.ids.ranks();
    let rank_of = |id: Id| rank[id as usize];
    // Stable: of two nodes with one id, the first built is kept (as before interning).
    g.nodes.sort_by_key(|n| (n.kind, rank_of(n.id)));
    g.nodes.dedup_by(|a, b| rank_of(a.id) == rank_of(b.id));
    g.edges
        .sort_unstable_by_key(|e| (e.kind, rank_of(e.source), rank_of(e.target)));
    g.edges
        .dedup_by_key(|e| (e.kind, rank_of(e.source), rank_of(e.target)));
    g.warnings
        .sort_unstable_by_key(|(code, id)| (*code, rank_of(*id)));
    g.warnings.dedup_by_key(|(code, id)| (*code, rank_of(*id)));
    let graph = GraphOut {
        graph_kind,
        root,
        g: &g,
    };
    let mut out = Capped::new(limits.max_response_bytes);
    serde_json::to_writer(&mut out, &graph)
        .map_err(|_| TooLarge::Response(limits.max_response_bytes))?;
    Ok(out.buf)
}

/// Serializes a built graph in [`Graph`]'s shape, looking ids up as it writes.
struct GraphOut<'b, 'a> {
    graph_kind: &'static str,
    root: Id,
    g: &'b Building<'a>,
}

impl<'b, 'a> Serialize for GraphOut<'b, 'a> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let ids: &'b Ids = &self.g.ids;
        let mut graph = s.serialize_struct("Graph", 6)?;
        graph.serialize_field("schemaVersion", &1u32)?;
        graph.serialize_field("graphKind", self.graph_kind)?;
        graph.serialize_field("root", ids.get(self.root))?;
        graph.serialize_field(
            "nodes",
            &Seq(&self.g.nodes, |n: &'b NodeAt<'a>| NodeView {
                id: ids.get(n.id),
                kind: n.kind,
                name: &n.name,
                namespace: &n.place.parts[..n.place.len],
                object_type: n.object_type,
                revision: n.revision,
            }),
        )?;
        graph.serialize_field(
            "edges",
            &Seq(&self.g.edges, |e: &'b EdgeAt| EdgeView {
                kind: e.kind,
                source: ids.get(e.source),
                target: ids.get(e.target),
            }),
        )?;
        graph.serialize_field(
            "warnings",
            &Seq(&self.g.warnings, |(code, id): &'b (&'static str, Id)| {
                WarningView {
                    code,
                    node_id: ids.get(*id),
                }
            }),
        )?;
        graph.end()
    }
}

/// A list serialized through a view of each item (no copy of the list).
struct Seq<'l, T, F>(&'l [T], F);

impl<'l, T, V: Serialize, F: Fn(&'l T) -> V> Serialize for Seq<'l, T, F> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(&self.1))
    }
}

/// [`Node`] with borrowed text (same fields, same order).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeView<'a> {
    id: &'a str,
    kind: NodeKind,
    name: &'a str,
    namespace: &'a [&'a str],
    #[serde(skip_serializing_if = "Option::is_none")]
    object_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<i64>,
}

/// [`Edge`] with borrowed ids.
#[derive(Serialize)]
struct EdgeView<'a> {
    kind: EdgeKind,
    source: &'a str,
    target: &'a str,
}

/// [`Warning`] with a borrowed id.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WarningView<'a> {
    code: &'a str,
    node_id: &'a str,
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

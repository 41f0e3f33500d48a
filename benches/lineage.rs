//! Lineage projection benchmark (not a test): graphs at the default bounds — 10,000 nodes, and
//! 50,000 edges — and a source shared by 3,333 models, through the production projection
//! (preflight, build, sort, capped serialization). Latency percentiles and the peak heap the
//! projection allocates (a counting allocator), plus the response size.
//! Run: `cargo bench --bench lineage` (prints a Markdown table for BENCHMARKS.md).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use semops::crd::semantic_model::{Definition, MetricIdentity, SourceAssociation, SourceName};
use semops::lineage::{Limits, ModelInput, SourceRoot, TooLarge, project_model, project_source};
use serde_json::json;

/// Counts live heap bytes and their peak.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

struct Model {
    uid: String,
    definition: Definition,
    associations: Vec<SourceAssociation>,
    metric_ids: Vec<MetricIdentity>,
}

fn model(
    i: usize,
    datasets: usize,
    metrics: usize,
    relationships: usize,
    table_of: impl Fn(usize) -> usize,
) -> Model {
    let ds: Vec<_> = (0..datasets)
        .map(|d| json!({"name": format!("dataset_{d:05}"), "source": format!("hr.public.table_{:05}", table_of(d))}))
        .collect();
    let ms: Vec<_> = (0..metrics)
        .map(|k| json!({"name": format!("metric_{k:05}"), "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "SUM(x)"}]}}))
        .collect();
    let rs: Vec<_> = (0..relationships)
        .map(|r| json!({"name": format!("r{r}"), "from": format!("dataset_{:05}", r % datasets), "to": format!("dataset_{:05}", (r * 7 + 1) % datasets), "fromColumns": ["a"], "toColumns": ["b"]}))
        .collect();
    Model {
        uid: format!("0190c0de-0000-7000-8000-{i:012}"),
        definition: serde_json::from_value(
            json!({"datasets": ds, "metrics": ms, "relationships": rs}),
        )
        .unwrap(),
        associations: (0..datasets)
            .map(|d| SourceAssociation {
                dataset: format!("dataset_{d:05}").into(),
                source: SourceName {
                    catalog: "hr".into(),
                    schema: "public".into(),
                    name: format!("table_{:05}", table_of(d)).into(),
                },
                object_type: "TABLE".into(),
                id: format!("pg:7313918441042311863:16412:r{}", 20000 + table_of(d)),
                revision: 1,
                columns: vec![],
            })
            .collect(),
        metric_ids: (0..metrics)
            .map(|k| {
                MetricIdentity::new(
                    format!("metric_{k:05}"),
                    format!("0190c0de-{k:04x}-7000-8000-000000000000"),
                )
            })
            .collect(),
    }
}

impl Model {
    fn input(&self) -> ModelInput<'_> {
        ModelInput {
            uid: &self.uid,
            namespace: "bench",
            catalog: "analytics",
            schema: "semantic",
            name: "model",
            revision: 1,
            definition: &self.definition,
            associations: &self.associations,
            metric_ids: &self.metric_ids,
            unavailable: &[],
        }
    }
}

fn measure(runs: usize, mut f: impl FnMut() -> usize) -> (Duration, Duration, usize, usize) {
    let mut samples = Vec::with_capacity(runs);
    let mut bytes = 0;
    let mut peak = 0;
    for _ in 0..runs {
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let t = Instant::now();
        bytes = f();
        samples.push(t.elapsed());
        peak = peak.max(PEAK.load(Ordering::Relaxed) - base);
    }
    samples.sort();
    let p = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (p(0.5), p(0.99), bytes, peak)
}

fn main() {
    let limits = Limits::default();
    // Enough runs that p99 is not simply the slowest run (with 50 it was the maximum).
    let runs = 200;
    println!("| graph | nodes | edges | p50 | p99 | response | peak heap of the projection |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let row = |name: &str,
               nodes: usize,
               edges: usize,
               (p50, p99, bytes, peak): (Duration, Duration, usize, usize)| {
        println!(
            "| {name} | {nodes} | {edges} | {:.1} ms | {:.1} ms | {:.2} MiB | {:.1} MiB |",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            bytes as f64 / 1048576.0,
            peak as f64 / 1048576.0
        );
    };

    // The graph's real size, read from the answer (the table states what was projected).
    let shape = |json: &[u8]| {
        let g: serde_json::Value = serde_json::from_slice(json).unwrap();
        (
            g["nodes"].as_array().unwrap().len(),
            g["edges"].as_array().unwrap().len(),
        )
    };

    // 1 model + 4,999 datasets on their own tables + 4,999 sources + 1 metric = 10,000 nodes.
    let m = model(0, 4999, 1, 0, |d| d);
    let (nodes, edges) = shape(&project_model(&m.input(), &limits).unwrap());
    assert_eq!(nodes, limits.max_nodes, "exactly at the node limit");
    row(
        "model at the node limit",
        nodes,
        edges,
        measure(runs, || project_model(&m.input(), &limits).unwrap().len()),
    );

    // 1,000 datasets on 500 tables, 48,000 relationships: 50,000 edges counted against the
    // limit (parallel relationships between two datasets merge into one edge of the answer).
    let m = model(0, 1000, 0, 48_000, |d| d / 2);
    let (nodes, _merged) = shape(&project_model(&m.input(), &limits).unwrap());
    let one_more = model(0, 1000, 0, 48_001, |d| d / 2);
    assert!(
        matches!(
            project_model(&one_more.input(), &limits),
            Err(TooLarge::Edges(_))
        ),
        "one relationship more is over the edge limit, so this row sits at it"
    );
    row(
        "model at the edge limit",
        nodes,
        limits.max_edges,
        measure(runs, || project_model(&m.input(), &limits).unwrap().len()),
    );

    // Over the node limit: refused by the preflight, before anything is built.
    let m = model(0, 5000, 1, 0, |d| d);
    assert!(
        matches!(project_model(&m.input(), &limits), Err(TooLarge::Nodes(n)) if n == limits.max_nodes),
        "the refused row is refused, for its node count"
    );
    let refused = measure(runs, || {
        usize::from(project_model(&m.input(), &limits).is_err())
    });
    row("model one node over (refused)", 10_001, 10_001, refused);

    // A table bound by 3,333 models with 2 datasets each: 1 + 3,333 + 6,666 = 10,000 nodes.
    let models: Vec<Model> = (0..3333).map(|i| model(i, 2, 0, 0, |_| 0)).collect();
    let inputs: Vec<ModelInput<'_>> = models.iter().map(Model::input).collect();
    let root = SourceRoot {
        namespace: "bench".into(),
        catalog: "hr".into(),
        schema: "public".into(),
        name: "table_00000".into(),
        object_type: "TABLE".into(),
        id: "pg:7313918441042311863:16412:r20000".into(),
    };
    let (nodes, edges) = shape(&project_source(&root, &inputs, &limits).unwrap());
    assert_eq!(nodes, limits.max_nodes, "exactly at the node limit");
    row(
        "source bound by 3,333 models",
        nodes,
        edges,
        measure(runs, || {
            project_source(&root, &inputs, &limits).unwrap().len()
        }),
    );
}

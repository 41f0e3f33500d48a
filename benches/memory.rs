//! Bytes per cached model (not a test): 10,000 SemanticModels shaped like the scale benchmark's
//! (5 datasets, 10 metrics) with the status semops writes (5 bindings, 10 metric ids, 4
//! conditions), decoded from JSON text as the watch decodes them, and held as the model cache
//! holds them. A counting allocator reports live heap bytes and allocations per model, split
//! into metadata, spec and status, before and after `stores::compact` (a clone allocates every
//! Vec and String at its exact length, so the difference is what decoding left as spare
//! capacity), and the read API's index over them.
//! Run: `cargo bench --bench memory` (prints a Markdown table for BENCHMARKS.md).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use semops::crd::SemanticModel;
use serde_json::json;

/// Counts live heap bytes and live allocations.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static BLOCKS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
            BLOCKS.fetch_add(1, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const MODELS: usize = 10_000;
const DATASETS: usize = 5;
const METRICS: usize = 10;

/// One model as the API server sends it after semops accepted it.
fn wire(i: usize) -> String {
    let datasets: Vec<_> = (0..DATASETS)
        .map(|d| json!({"name": format!("d{d}"), "source": format!("hr.bench.t{}", (i * 7 + d * 131) % 1000), "primaryKey": ["id"]}))
        .collect();
    let metrics: Vec<_> = (0..METRICS)
        .map(|k| json!({"name": format!("metric_{k}"), "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": format!("SUM(d0.id) + {k}")}]}, "datatype": "Decimal"}))
        .collect();
    let bindings: Vec<_> = (0..DATASETS)
        .map(|d| json!({"dataset": format!("d{d}"), "source": {"catalog": "hr", "schema": "bench", "name": format!("t{}", (i * 7 + d * 131) % 1000)}, "type": "TABLE", "id": format!("pg:7313918441042311863:16412:r{}", 20000 + (i * 7 + d * 131) % 1000), "revision": 1, "columns": [{"name": "id", "type": "integer"}]}))
        .collect();
    let ids: Vec<_> = (0..METRICS)
        .map(|k| json!({"name": format!("metric_{k}"), "id": format!("019a8f3c-0000-7000-8000-{i:08}{k:04}")}))
        .collect();
    let condition = |t: &str, reason: &str, message: &str| json!({"type": t, "status": "True", "reason": reason, "message": message, "lastTransitionTime": "2026-12-03T06:00:00Z", "observedGeneration": 1});
    json!({
        "apiVersion": "semops.io/v1alpha1", "kind": "SemanticModel",
        "metadata": {"name": format!("model-{i}"), "namespace": "bench-scale", "uid": format!("6f1c2d3e-0000-4000-8000-{i:012}"),
                     "resourceVersion": format!("{}", 100000 + i), "generation": 1, "creationTimestamp": "2026-12-03T06:00:00Z",
                     "finalizers": ["semops.io/finalizer"]},
        "spec": {"catalog": "analytics", "schema": "semantic", "name": format!("model_{i}"),
                 "definition": {"datasets": datasets, "metrics": metrics}},
        "status": {"observedGeneration": 1, "modelName": format!("model_{i}"), "datasetCount": DATASETS, "metricCount": METRICS,
                   "acceptedGeneration": 1, "revision": 1, "definitionHash": format!("sha256:{}", "a".repeat(64)), "snapshotHash": format!("sha256:{}", "b".repeat(64)),
                   "sourceAssociations": bindings, "metrics": ids,
                   "conditions": [
                       condition("Ready", "Accepted", "revision 1 accepted"),
                       condition("Valid", "Valid", "definition passed the contract and model-local checks"),
                       condition("SourcesResolved", "Resolved", &format!("{DATASETS} distinct source(s) resolved")),
                       condition("SourcesCurrent", "Current", &format!("all {DATASETS} association(s) match their sources")),
                   ]}
    })
    .to_string()
}

fn live() -> (usize, usize) {
    (LIVE.load(Ordering::Relaxed), BLOCKS.load(Ordering::Relaxed))
}

/// Live bytes and blocks `make` leaves behind, per model.
fn per_model<T>(make: impl FnMut(usize) -> T) -> ((f64, f64), Vec<T>) {
    let before = live();
    let held: Vec<T> = (0..MODELS).map(make).collect();
    let after = live();
    let vec_itself = std::mem::size_of::<T>() * held.capacity();
    let bytes = (after.0 - before.0 - vec_itself) as f64 / MODELS as f64;
    let blocks = (after.1 - before.1 - 1) as f64 / MODELS as f64;
    ((bytes, blocks), held)
}

fn main() {
    let texts: Vec<String> = (0..MODELS).map(wire).collect();
    let text_bytes = texts.iter().map(String::len).sum::<usize>() as f64 / MODELS as f64;

    let ((decoded, decoded_blocks), models) =
        per_model(|i| serde_json::from_str::<SemanticModel>(&texts[i]).expect("decodes"));
    let ((meta, meta_blocks), _m) = per_model(|i| models[i].metadata.clone());
    let ((spec, spec_blocks), _s) = per_model(|i| models[i].spec.clone());
    let ((status, status_blocks), _t) = per_model(|i| models[i].status.clone());
    let ((compacted, compacted_blocks), _c) = per_model(|i| {
        let mut m = serde_json::from_str::<SemanticModel>(&texts[i]).expect("decodes");
        semops::stores::compact(&mut m);
        m
    });
    let inline = std::mem::size_of::<SemanticModel>() as f64;
    // Heap an index grows by per model, fed every model (the index stays alive meanwhile).
    let grown_by = |apply: &dyn Fn(&SemanticModel)| {
        let before = live();
        models.iter().for_each(apply);
        let after = live();
        (
            (after.0 - before.0) as f64 / MODELS as f64,
            (after.1 - before.1) as f64 / MODELS as f64,
        )
    };
    let index = semops::index::ModelIndex::default();
    let (index_bytes, index_blocks) = grown_by(&|m| index.apply(m));
    let claims = semops::index::claims::ClaimIndex::default();
    let (claim_bytes, claim_blocks) = grown_by(&|m| claims.apply(m));

    println!("| {MODELS} models, per model | heap bytes | allocations |");
    println!("| --- | --- | --- |");
    println!("| the object as JSON text (what the API server sends) | {text_bytes:.0} | - |");
    println!(
        "| decoded, as the watch decodes it (+ {inline:.0} bytes inline in the cache's Arc) | {decoded:.0} | {decoded_blocks:.1} |"
    );
    println!(
        "| decoded, then compacted as the cache now holds it (`stores::compact`) | {compacted:.0} | {compacted_blocks:.1} |"
    );
    println!("| of the compacted: metadata | {meta:.0} | {meta_blocks:.1} |");
    println!("| of the compacted: spec | {spec:.0} | {spec_blocks:.1} |");
    println!("| of the compacted: status | {status:.0} | {status_blocks:.1} |");
    println!(
        "| the read API's index (source and home keys) | {index_bytes:.0} | {index_blocks:.1} |"
    );
    println!(
        "| the claim index (who claims each model name) | {claim_bytes:.0} | {claim_blocks:.1} |"
    );
    println!(
        "| spare capacity decoding left (decoded - compacted) | {:.0} ({:.0}%) | - |",
        decoded - compacted,
        100.0 * (decoded - compacted) / decoded
    );
    println!(
        "| at {MODELS} models: decoded / compacted, with glibc's 8 bytes per block and 16-byte rounding | {:.0} MiB / {:.0} MiB | - |",
        (decoded + 12.0 * decoded_blocks + inline + 16.0) * MODELS as f64 / 1048576.0,
        (compacted + 12.0 * compacted_blocks + inline + 16.0) * MODELS as f64 / 1048576.0,
    );
}

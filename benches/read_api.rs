//! Read-API benchmark (not a test): 10,000 accepted models (5 datasets, 10 metrics each) held
//! in a reflector store and the read API's index, in process (catalog probe excluded). Source
//! lookup and metric discovery through the index, beside the list-everything-and-filter
//! baseline, in the same run; the name-claim query every model event asks; plus the memory the
//! cache and index take.
//! Run: `cargo bench --bench read_api` (prints a Markdown table for BENCHMARKS.md).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::Event;
use semops::api::routes::{Identifier, bound_datasets, dataset_identifiers, sorted_metrics};
use semops::crd::semantic_model::{MetricIdentity, SourceAssociation, SourceName};
use semops::crd::{SemanticModel, SemanticModelStatus};
use semops::index::{HomeKey, ModelIndex, SourceKey, is_visible};

const MODELS: usize = 10_000;
const DATASETS: usize = 5;
const METRICS: usize = 10;
const TABLES: usize = 2_000; // each table is bound by ~25 datasets
const SCHEMAS: usize = 100; // ~100 models per home schema
const QUERIES: usize = 2_000;

fn model(i: usize) -> SemanticModel {
    let tables: Vec<usize> = (0..DATASETS).map(|d| (i * 7 + d * 131) % TABLES).collect();
    let datasets: Vec<serde_json::Value> = tables.iter().enumerate().map(|(d, t)| serde_json::json!({"name": format!("d{d}"), "source": format!("hr.public.t{t}"), "primaryKey": ["id"]})).collect();
    let metrics: Vec<serde_json::Value> = (0..METRICS).map(|k| serde_json::json!({"name": format!("metric_{k}"), "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": format!("SUM(d0.c{k})")}]}, "datatype": "Decimal"})).collect();
    let spec = serde_json::from_value(serde_json::json!({
        "catalog": "analytics", "schema": format!("s{}", i % SCHEMAS), "name": format!("model_{i}"),
        "definition": {"datasets": datasets, "metrics": metrics}
    }))
    .unwrap();
    let mut m = SemanticModel::new(&format!("model-{i}"), spec);
    m.metadata.namespace = Some("bench".into());
    m.metadata.generation = Some(1);
    m.status = Some(SemanticModelStatus {
        revision: Some(1),
        accepted_generation: Some(1),
        source_associations: tables
            .iter()
            .enumerate()
            .map(|(d, t)| SourceAssociation {
                dataset: format!("d{d}").into(),
                source: SourceName {
                    catalog: "hr".into(),
                    schema: "public".into(),
                    name: format!("t{t}").into(),
                },
                object_type: "TABLE".into(),
                id: format!("pg:1:2:r{t}"),
                revision: 1,
                columns: vec![],
            })
            .collect(),
        metrics: (0..METRICS)
            .map(|k| {
                MetricIdentity::new(
                    format!("metric_{k}"),
                    semops::model::identity::mint_metric_id(),
                )
            })
            .collect(),
        ..Default::default()
    });
    m
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
    )
}

fn measure(mut f: impl FnMut(usize) -> usize) -> (Duration, Duration, usize) {
    let mut samples = Vec::with_capacity(QUERIES);
    let mut total = 0;
    for q in 0..QUERIES {
        let started = Instant::now();
        total += std::hint::black_box(f(q));
        samples.push(started.elapsed());
    }
    let (p50, p99) = percentiles(samples);
    (p50, p99, total / QUERIES)
}

fn lookup_indexed(
    store: &Store<SemanticModel>,
    index: &ModelIndex,
    table: usize,
) -> Vec<Identifier> {
    let key = SourceKey {
        namespace: "bench".into(),
        catalog: "hr".into(),
        object_type: "TABLE".into(),
        id: format!("pg:1:2:r{table}"),
    };
    dataset_identifiers("bench", bound_datasets(store, index, &key), |_| true)
}

fn lookup_scan(store: &Store<SemanticModel>, table: usize) -> Vec<Identifier> {
    let id = format!("pg:1:2:r{table}");
    let mut by_model = std::collections::BTreeMap::new();
    for m in store.state() {
        if !is_visible(&m) {
            continue;
        }
        let ds: Vec<String> = m
            .status
            .iter()
            .flat_map(|s| &s.source_associations)
            .filter(|a| a.id == id && a.source.catalog == "hr")
            .map(|a| a.dataset.to_string())
            .collect();
        if !ds.is_empty() {
            by_model.insert(kube::ResourceExt::name_any(m.as_ref()), (m.clone(), ds));
        }
    }
    dataset_identifiers("bench", by_model, |_| true)
}

fn discover_indexed(store: &Store<SemanticModel>, index: &ModelIndex, schema: usize) -> String {
    let key = HomeKey {
        namespace: "bench".into(),
        catalog: "analytics".into(),
        schema: format!("s{schema}"),
    };
    let models: Vec<_> = index
        .models_in(&key)
        .into_iter()
        .filter_map(|r| store.get(&r))
        .collect();
    let borrowed: Vec<_> = models
        .iter()
        .map(|m| (m.as_ref(), &m.spec.definition))
        .collect();
    // Serialized, as the API answers: the timed work includes it, and answers compare whole.
    serde_json::to_string(&sorted_metrics("bench", &borrowed)).unwrap()
}

fn discover_scan(store: &Store<SemanticModel>, schema: usize) -> String {
    let wanted = format!("s{schema}");
    let models: Vec<_> = store
        .state()
        .into_iter()
        .filter(|m| is_visible(m) && m.spec.catalog == "analytics" && m.spec.schema == wanted)
        .collect();
    let borrowed: Vec<_> = models
        .iter()
        .map(|m| (m.as_ref(), &m.spec.definition))
        .collect();
    // Serialized, as the API answers: the timed work includes it, and answers compare whole.
    serde_json::to_string(&sorted_metrics("bench", &borrowed)).unwrap()
}

fn main() {
    let before = rss_kib();
    let (store, mut writer) = reflector::store::<SemanticModel>();
    let index = Arc::new(ModelIndex::default());
    for i in 0..MODELS {
        let m = model(i);
        index.apply(&m);
        writer.apply_watcher_event(&Event::Apply(m));
    }
    let after = rss_kib();

    // Both paths must give the same answer to every query, not only the same counts.
    for q in 0..QUERIES {
        let table = q % TABLES;
        let indexed = lookup_indexed(&store, &index, table);
        assert!(!indexed.is_empty(), "table {table} is bound");
        assert_eq!(indexed, lookup_scan(&store, table), "lookup of t{table}");
        let schema = q % SCHEMAS;
        assert_eq!(
            discover_indexed(&store, &index, schema),
            discover_scan(&store, schema),
            "discovery in s{schema}"
        );
    }
    let lookup_i = measure(|q| lookup_indexed(&store, &index, q % TABLES).len());
    let lookup_s = measure(|q| lookup_scan(&store, q % TABLES).len());
    let metrics_in = |json: String| json.matches("\"metric_").count();
    let disc_i = measure(|q| metrics_in(discover_indexed(&store, &index, q % SCHEMAS)));
    let disc_s = measure(|q| metrics_in(discover_scan(&store, q % SCHEMAS)));
    // What a client without the API does: list every model (as `kubectl get sm -o json` returns
    // them) and filter. A few queries suffice at this cost.
    let listed = serde_json::to_vec(
        &store
            .state()
            .iter()
            .map(|m| m.as_ref().clone())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let client_side = {
        let mut samples = Vec::new();
        for q in 0..5 {
            let started = Instant::now();
            let all: Vec<SemanticModel> = serde_json::from_slice(&listed).unwrap();
            let id = format!("pg:1:2:r{}", q % TABLES);
            let mut hits: Vec<(String, String)> = all
                .iter()
                .flat_map(|m| {
                    m.status
                        .iter()
                        .flat_map(|s| &s.source_associations)
                        .filter(|a| a.id == id)
                        .map(|a| {
                            (
                                m.spec.name.as_deref().unwrap_or_default().to_string(),
                                a.dataset.to_string(),
                            )
                        })
                })
                .collect();
            hits.sort();
            samples.push(started.elapsed());
            // The client's answer is the API's answer, query by query.
            let mut api: Vec<(String, String)> = lookup_indexed(&store, &index, q % TABLES)
                .into_iter()
                .map(|i| (i.namespace[3].clone(), i.name))
                .collect();
            api.sort();
            assert_eq!(hits, api, "client-side lookup of t{}", q % TABLES);
        }
        percentiles(samples)
    };
    // What every model event and model reconcile asks the cache (the name-conflict verdict and
    // the trigger that requeues rivals): one pass over all cached models.
    let stores = semops::stores::Stores {
        models: store.clone(),
        catalogs: reflector::store::<semops::crd::Catalog>().0,
        policies: reflector::store::<semops::crd::ReconcilePolicy>().0,
        claims: Default::default(),
    };
    for m in store.state() {
        stores.claims.apply(&m);
    }
    let claims = measure(|q| {
        let name = format!("model_{}", q % MODELS);
        let schema = format!("s{}", q % MODELS % SCHEMAS);
        stores
            .models_claiming("bench", "analytics", &schema, &[name.as_str()])
            .len()
    });
    assert_eq!(claims.2, 1, "each name is claimed by its model");
    // The same question answered by one pass over the cache (before the claim index).
    let claims_scan = measure(|q| {
        let name = format!("model_{}", q % MODELS);
        let schema = format!("s{}", q % MODELS % SCHEMAS);
        store
            .state_filter(|m| {
                m.spec.catalog == "analytics"
                    && m.spec.schema == schema
                    && m.model_name() == name
                    && m.metadata.namespace.as_deref() == Some("bench")
            })
            .len()
    });
    assert_eq!(claims_scan.2, 1, "each name is claimed by its model");
    assert_eq!(lookup_i.2, lookup_s.2, "index and scan agree");
    assert_eq!(disc_i.2, disc_s.2, "index and scan agree");

    let us = |d: Duration| format!("{:.1} µs", d.as_secs_f64() * 1e6);
    println!(
        "| query ({MODELS} models, {QUERIES} queries) | p50 | p99 | results per query | p99 speedup vs scan |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (label, (p50, p99, n), base) in [
        ("source lookup, index", lookup_i, Some(lookup_s.1)),
        ("source lookup, list-everything-and-filter", lookup_s, None),
        ("metric discovery, index", disc_i, Some(disc_s.1)),
        ("metric discovery, list-everything-and-filter", disc_s, None),
    ] {
        let speed = base.map_or("-".to_string(), |b| {
            format!("{:.0}x", b.as_secs_f64() / p99.as_secs_f64())
        });
        println!("| {label} | {} | {} | {n} | {speed} |", us(p50), us(p99));
    }
    println!(
        "| source lookup, client lists all {MODELS} models as JSON ({} MiB) and filters | {} | {} | 25 | {:.0}x (p50 {:.0}x) |",
        listed.len() / (1024 * 1024),
        us(client_side.0),
        us(client_side.1),
        client_side.1.as_secs_f64() / lookup_i.1.as_secs_f64(),
        client_side.0.as_secs_f64() / lookup_i.0.as_secs_f64()
    );
    println!(
        "| name claims of one model (`Stores::models_claiming`, asked per model event and reconcile), claim index | {} | {} | {} | {:.0}x |",
        us(claims.0),
        us(claims.1),
        claims.2,
        claims_scan.1.as_secs_f64() / claims.1.as_secs_f64()
    );
    println!(
        "| the same by one pass over the cache (before) | {} | {} | {} | - |",
        us(claims_scan.0),
        us(claims_scan.1),
        claims_scan.2
    );
    println!();
    println!(
        "RSS: {} MiB before, {} MiB with {MODELS} models cached and indexed (+{} MiB)",
        before / 1024,
        after / 1024,
        (after - before) / 1024
    );
}

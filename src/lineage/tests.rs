use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::crd::semantic_model::SourceName;

/// An accepted model: `datasets` datasets on their own tables, `metrics` metrics, and
/// relationships d0 -> d1 repeated `relationships` times.
struct Fixture {
    definition: Definition,
    associations: Vec<SourceAssociation>,
    metric_ids: Vec<MetricIdentity>,
    unavailable: Vec<String>,
}

fn fixture(datasets: usize, metrics: usize, relationships: usize) -> Fixture {
    let ds: Vec<Value> = (0..datasets)
        .map(|d| json!({"name": format!("d{d}"), "source": format!("hr.public.t{d}")}))
        .collect();
    let ms: Vec<Value> = (0..metrics)
        .map(|k| json!({"name": format!("m{k}"), "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "COUNT(*)"}]}}))
        .collect();
    let rs: Vec<Value> = (0..relationships)
        .map(|r| json!({"name": format!("r{r}"), "from": "d0", "to": "d1", "fromColumns": ["a"], "toColumns": ["b"]}))
        .collect();
    let definition: Definition =
        serde_json::from_value(json!({"datasets": ds, "metrics": ms, "relationships": rs}))
            .unwrap();
    Fixture {
        associations: (0..datasets)
            .map(|d| SourceAssociation {
                dataset: format!("d{d}").into(),
                source: SourceName {
                    catalog: "hr".into(),
                    schema: "public".into(),
                    name: format!("t{d}").into(),
                },
                object_type: "TABLE".into(),
                id: format!("pg:1:2:r{d}"),
                revision: 1,
                columns: vec![],
            })
            .collect(),
        metric_ids: (0..metrics)
            .map(|k| MetricIdentity::new(format!("m{k}"), format!("0190-{k:04}")))
            .collect(),
        definition,
        unavailable: vec![],
    }
}

impl Fixture {
    fn input(&self) -> ModelInput<'_> {
        ModelInput {
            uid: "u1",
            namespace: "ns",
            catalog: "analytics",
            schema: "semantic",
            name: "model",
            revision: 3,
            definition: &self.definition,
            associations: &self.associations,
            metric_ids: &self.metric_ids,
            unavailable: &self.unavailable,
        }
    }
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

#[test]
fn a_model_graph_has_its_datasets_sources_metrics_and_only_declared_edges() {
    let mut f = fixture(2, 1, 1);
    // Two datasets on one table: one SOURCE node, two BINDS edges.
    f.associations[1].source.name = "t0".into();
    f.associations[1].id = f.associations[0].id.clone();
    f.unavailable = vec!["d1".into()];
    let g = parse(&project_model(&f.input(), &Limits::default()).unwrap());
    assert_eq!(g["schemaVersion"], 1);
    assert_eq!(g["graphKind"], "MODEL");
    assert_eq!(g["root"], "model:u1");
    let nodes: Vec<(&str, &str)> = g["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["kind"].as_str().unwrap(), n["id"].as_str().unwrap()))
        .collect();
    assert_eq!(
        nodes,
        vec![
            ("SOURCE", "source:hr/TABLE/pg:1:2:r0"),
            ("DATASET", "dataset:u1/d0"),
            ("DATASET", "dataset:u1/d1"),
            ("METRIC", "metric:0190-0000"),
            ("MODEL", "model:u1"),
        ]
    );
    let edges: Vec<(&str, &str, &str)> = g["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap(),
                e["source"].as_str().unwrap(),
                e["target"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        edges,
        vec![
            ("BINDS", "dataset:u1/d0", "source:hr/TABLE/pg:1:2:r0"),
            ("BINDS", "dataset:u1/d1", "source:hr/TABLE/pg:1:2:r0"),
            ("RELATES", "dataset:u1/d0", "dataset:u1/d1"),
            ("CONTAINS", "model:u1", "dataset:u1/d0"),
            ("CONTAINS", "model:u1", "dataset:u1/d1"),
            ("CONTAINS", "model:u1", "metric:0190-0000"),
        ],
        "metrics hang off their model, never off datasets"
    );
    assert_eq!(
        g["warnings"],
        json!([{"code": "SOURCE_UNAVAILABLE", "nodeId": "source:hr/TABLE/pg:1:2:r0"}]),
        "missing metadata is a warning; the node and its edges stay"
    );
    assert_eq!(g["nodes"][4]["revision"], 3);
    assert_eq!(g["nodes"][0]["namespace"], json!(["ns", "hr", "public"]));
    // Datasets and metrics are named inside their model.
    for i in [1, 2, 3] {
        assert_eq!(
            g["nodes"][i]["namespace"],
            json!(["ns", "analytics", "semantic", "model"]),
            "{}",
            g["nodes"][i]
        );
    }
}

#[test]
fn a_relationship_with_an_undeclared_end_draws_no_edge() {
    let mut f = fixture(2, 0, 2);
    let relationships = f.definition.relationships.as_mut().unwrap();
    relationships[0].to = "ghost".into();
    relationships[1].from = "ghost".into();
    let g = parse(&project_model(&f.input(), &Limits::default()).unwrap());
    let relates = g["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "RELATES")
        .count();
    assert_eq!(relates, 0, "{}", g["edges"]);
}

/// Every kind of node and edge counts toward the bounds, exactly once: 3 datasets on 3 tables,
/// 2 metrics, 2 relationships = 1 + 3 + 2 + 3 = 9 nodes and 3 + 2 + 3 + 2 = 10 edges.
#[test]
fn node_and_edge_counts_take_every_kind_exactly_once() {
    let f = fixture(3, 2, 2);
    let limits = |max_nodes, max_edges| Limits {
        max_nodes,
        max_edges,
        ..Limits::default()
    };
    assert!(project_model(&f.input(), &limits(9, 10)).is_ok());
    assert_eq!(
        project_model(&f.input(), &limits(8, 10)),
        Err(TooLarge::Nodes(8))
    );
    assert_eq!(
        project_model(&f.input(), &limits(9, 9)),
        Err(TooLarge::Edges(9))
    );
}

#[test]
fn a_source_label_exactly_at_the_limit_passes() {
    let mut f = fixture(1, 0, 0);
    // "hr.public." (10 bytes) + 4,086 bytes = 4,096.
    f.associations[0].source.name = "ü".repeat(2043).into();
    assert!(project_model(&f.input(), &Limits::default()).is_ok());
}

#[test]
fn a_source_graph_has_the_source_its_datasets_and_their_models() {
    let a = fixture(2, 3, 0);
    let mut b = fixture(1, 0, 0);
    b.associations[0].id = "pg:1:2:r9".into(); // another table: b is not in the graph
    let root = SourceRoot {
        namespace: "ns".into(),
        catalog: "hr".into(),
        schema: "public".into(),
        name: "t0".into(),
        object_type: "TABLE".into(),
        id: "pg:1:2:r0".into(),
    };
    let mut ib = b.input();
    ib.uid = "u2";
    let g = parse(&project_source(&root, &[a.input(), ib], &Limits::default()).unwrap());
    assert_eq!(g["graphKind"], "SOURCE");
    let ids: Vec<&str> = g["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        vec!["source:hr/TABLE/pg:1:2:r0", "dataset:u1/d0", "model:u1"]
    );
    assert_eq!(g["edges"].as_array().unwrap().len(), 2);
}

/// Every bound: exactly at the limit passes, one over is refused, before anything is built.
#[test]
fn every_bound_passes_at_the_limit_and_refuses_one_over() {
    // Nodes: 1 model + 4999 datasets + 4999 sources + 1 metric = 10,000.
    let f = fixture(4999, 1, 0);
    assert!(project_model(&f.input(), &Limits::default()).is_ok());
    let f = fixture(4999, 2, 0);
    assert_eq!(
        project_model(&f.input(), &Limits::default()),
        Err(TooLarge::Nodes(10_000))
    );

    // Edges: 100 datasets (100 CONTAINS + 100 BINDS) + 49,800 relationships = 50,000, counted
    // before duplicates are merged.
    let f = fixture(100, 0, 49_800);
    let g = project_model(&f.input(), &Limits::default()).unwrap();
    assert_eq!(
        parse(&g)["edges"].as_array().unwrap().len(),
        201,
        "identical edges merged"
    );
    let f = fixture(100, 0, 49_801);
    assert_eq!(
        project_model(&f.input(), &Limits::default()),
        Err(TooLarge::Edges(50_000))
    );

    // Labels: 4 KiB of UTF-8 bytes, multibyte characters counted as bytes.
    let mut f = fixture(1, 0, 0);
    let at_limit = "é".repeat(2048); // 4096 bytes, 2048 characters
    f.definition.datasets[0].name = at_limit.clone().into();
    f.associations[0].dataset = at_limit.into();
    assert!(project_model(&f.input(), &Limits::default()).is_ok());
    let over = format!("{}x", "é".repeat(2048));
    f.definition.datasets[0].name = over.clone().into();
    f.associations[0].dataset = over.into();
    assert_eq!(
        project_model(&f.input(), &Limits::default()),
        Err(TooLarge::Label(4096))
    );
    let mut f = fixture(1, 0, 0);
    f.associations[0].source.name = "ü".repeat(2048).into(); // "hr.public." + 4096 bytes
    assert_eq!(
        project_model(&f.input(), &Limits::default()),
        Err(TooLarge::Label(4096))
    );

    // Response bytes: the exact size passes, one byte less is refused (no partial body).
    let f = fixture(3, 2, 1);
    let size = project_model(&f.input(), &Limits::default()).unwrap().len();
    let tight = Limits {
        max_response_bytes: size,
        ..Limits::default()
    };
    assert_eq!(project_model(&f.input(), &tight).unwrap().len(), size);
    let short = Limits {
        max_response_bytes: size - 1,
        ..Limits::default()
    };
    assert_eq!(
        project_model(&f.input(), &short),
        Err(TooLarge::Response(size - 1))
    );
}

#[test]
fn the_default_response_cap_holds_a_graph_at_the_node_limit() {
    let f = fixture(4999, 1, 0);
    let bytes = project_model(&f.input(), &Limits::default()).unwrap();
    assert!(bytes.len() < Limits::default().max_response_bytes);
}

#[test]
fn source_graph_bounds_are_checked_too() {
    let models: Vec<Fixture> = (0..3).map(|_| fixture(1, 0, 0)).collect();
    let uids = ["a", "b", "c"];
    let inputs: Vec<ModelInput<'_>> = models
        .iter()
        .zip(uids)
        .map(|(f, uid)| ModelInput { uid, ..f.input() })
        .collect();
    let root = SourceRoot {
        namespace: "ns".into(),
        catalog: "hr".into(),
        schema: "public".into(),
        name: "t0".into(),
        object_type: "TABLE".into(),
        id: "pg:1:2:r0".into(),
    };
    // 1 source + 3 models + 3 datasets = 7 nodes; 6 edges.
    let at = |nodes, edges| Limits {
        max_nodes: nodes,
        max_edges: edges,
        ..Limits::default()
    };
    assert!(project_source(&root, &inputs, &at(7, 6)).is_ok());
    assert_eq!(
        project_source(&root, &inputs, &at(6, 6)),
        Err(TooLarge::Nodes(6))
    );
    assert_eq!(
        project_source(&root, &inputs, &at(7, 5)),
        Err(TooLarge::Edges(5))
    );
}

proptest! {
    /// Identical input in any order gives identical bytes.
    #[test]
    fn shuffled_inputs_give_identical_bytes(seed in any::<u64>()) {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let f = fixture(12, 7, 5);
        let base = project_model(&f.input(), &Limits::default()).unwrap();
        let mut g = fixture(12, 7, 5);
        g.definition.datasets.shuffle(&mut rng);
        g.definition.metrics.as_mut().unwrap().shuffle(&mut rng);
        g.definition.relationships.as_mut().unwrap().shuffle(&mut rng);
        g.associations.shuffle(&mut rng);
        g.metric_ids.shuffle(&mut rng);
        prop_assert_eq!(project_model(&g.input(), &Limits::default()).unwrap(), base);
    }
}

/// Every node and edge of an answer once, even when ids repeat: two associations of one
/// dataset to one source, and several models that share a uid (equal id texts built apart).
#[test]
fn repeated_ids_draw_each_node_and_edge_once() {
    fn assert_unique(graph: &Value) {
        let mut ids: Vec<&str> = graph["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["id"].as_str().unwrap())
            .collect();
        let nodes = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), nodes, "a node twice: {graph}");
        let mut edges: Vec<String> = graph["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(Value::to_string)
            .collect();
        let count = edges.len();
        edges.dedup();
        assert_eq!(edges.len(), count, "an edge twice: {graph}");
    }
    let mut f = fixture(6, 2, 3);
    f.unavailable = vec!["d3".into()];
    let again = SourceAssociation {
        dataset: "d3".into(),
        ..f.associations[3].clone()
    };
    f.associations.push(again);
    let model = parse(&project_model(&f.input(), &Limits::default()).unwrap());
    assert_unique(&model);
    assert_eq!(model["warnings"].as_array().unwrap().len(), 1);
    let fs: Vec<Fixture> = (0..4).map(|i| fixture(3 + i, 0, 0)).collect();
    let inputs: Vec<ModelInput<'_>> = fs.iter().map(Fixture::input).collect();
    let root = SourceRoot {
        namespace: "ns".into(),
        catalog: "hr".into(),
        schema: "public".into(),
        name: "t1".into(),
        object_type: "TABLE".into(),
        id: "pg:1:2:r1".into(),
    };
    let source = parse(&project_source(&root, &inputs, &Limits::default()).unwrap());
    assert_unique(&source);
    assert_eq!(source["edges"].as_array().unwrap().len(), 2);
}

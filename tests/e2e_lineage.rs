//! Lineage (docs/design.md#lineage) against a real control plane and PostgreSQL: the example model's graph
//! and its source's graph through the API and the CLI (JSON, DOT, Mermaid), per-model access
//! filtering with real ServiceAccount tokens, and every refusal: 413 over a bound, 503 for the
//! request past the admission limit and past the deadline, 409 while a model's status lags its
//! spec, 404 for unknown models.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::checks::request;
use support::{Operator, env, eventually, examples_in, wait_ready};

/// A namespace with the examples, ready, and an operator started with `args` and `vars`.
fn world(prefix: &str, args: &[&str], vars: &[(&str, &str)]) -> (support::Namespace, Operator) {
    let env = env();
    let ns = env.namespace(prefix);
    env.apply_ok(&examples_in(&ns.name));
    let op = Operator::start_with_vars(env, &env.kubeconfig, Some(&ns.name), &ns.name, args, vars);
    wait_ready(env, &ns.name, "sm/employee-analysis", "True", "Accepted");
    (ns, op)
}

/// GET returning the raw response head too (for headers).
fn raw_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    buf
}

fn model_path(ns: &str, name: &str) -> String {
    format!(
        "/api/metalakes/{ns}/catalogs/analytics/schemas/semantic/semantic-models/{name}/lineage"
    )
}

fn get(op: &Operator, path: &str, token: Option<&str>) -> (u16, Value, String) {
    let (code, body) = request(op.api_port, "GET", path, token, None);
    let v = serde_json::from_str(&body).unwrap_or(Value::Null);
    (code, v, body)
}

fn ids(graph: &Value) -> Vec<(String, String)> {
    graph["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["kind"].as_str().unwrap().into(),
                n["name"].as_str().unwrap().into(),
            )
        })
        .collect()
}

#[test]
fn model_and_source_lineage_through_the_api_and_the_cli() {
    let (ns, op) = world("lin", &["--api-auth", "none"], &[]);
    let ns = ns.name.clone();
    let (code, g, body) = get(&op, &model_path(&ns, "employee_analysis"), None);
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        (g["schemaVersion"].as_i64(), g["graphKind"].as_str()),
        (Some(1), Some("MODEL"))
    );
    assert_eq!(
        ids(&g),
        vec![
            ("SOURCE".into(), "hr.public.employees".into()),
            ("DATASET".into(), "employee".into()),
            ("DATASET".into(), "manager".into()),
            ("METRIC".into(), "headcount".into()),
            ("MODEL".into(), "employee_analysis".into()),
        ]
    );
    let kinds: Vec<&str> = g["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "BINDS", "BINDS", "RELATES", "CONTAINS", "CONTAINS", "CONTAINS"
        ]
    );
    assert_eq!(g["warnings"], serde_json::json!([]));
    // The metric node is its identity; the source node its native id.
    let sm: Value = serde_json::from_str(&env().kubectl_ok(&[
        "get",
        "sm",
        "employee-analysis",
        "-n",
        &ns,
        "-o",
        "json",
    ]))
    .unwrap();
    let metric_id = sm["status"]["metrics"][0]["id"].as_str().unwrap();
    assert!(g["nodes"][3]["id"].as_str().unwrap().ends_with(metric_id));
    assert!(
        g["nodes"][0]["id"]
            .as_str()
            .unwrap()
            .starts_with("source:hr/TABLE/pg:")
    );
    // Deterministic bytes; private; no secret or connection detail.
    assert_eq!(
        get(&op, &model_path(&ns, "employee_analysis"), None).2,
        body
    );
    let raw = raw_get(op.api_port, &model_path(&ns, "employee_analysis")).to_lowercase();
    assert!(raw.contains("cache-control: private, no-store"), "{raw}");
    for secret in [
        "change-me",
        "hr_reader",
        "127.0.0.1",
        &support::db::postgres().port.to_string(),
    ] {
        assert!(!body.contains(secret), "the graph leaks {secret:?}");
    }

    let (code, s, _) = get(
        &op,
        &format!("/api/metalakes/{ns}/objects/table/hr.public.employees/lineage"),
        None,
    );
    assert_eq!(code, 200);
    assert_eq!(s["graphKind"], "SOURCE");
    assert_eq!(
        ids(&s),
        vec![
            ("SOURCE".into(), "hr.public.employees".into()),
            ("DATASET".into(), "employee".into()),
            ("DATASET".into(), "manager".into()),
            ("MODEL".into(), "employee_analysis".into()),
        ]
    );
    let (code, by_parts, _) = get(
        &op,
        &format!(
            "/api/metalakes/{ns}/objects/table/lineage?catalog=hr&schema=public&name=employees"
        ),
        None,
    );
    assert_eq!((code, &by_parts), (200, &s));

    // Unknown things: fixed 404s that echo nothing.
    let (code, e, body) = get(&op, &model_path(&ns, "no_such_model_xyz"), None);
    assert_eq!(
        (code, e["type"].as_str()),
        (404, Some("NO_SUCH_SEMANTIC_MODEL"))
    );
    assert!(!body.contains("no_such_model_xyz"));
    let (code, _, _) = get(
        &op,
        &format!("/api/metalakes/{ns}/objects/table/hr.public.nope/lineage"),
        None,
    );
    assert_eq!(code, 404);

    // The CLI draws it.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_semops"))
            .args(args)
            .args([
                "-n",
                &ns,
                "--server",
                &format!("http://127.0.0.1:{}", op.api_port),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let dot = cli(&[
        "lineage",
        "model",
        "analytics",
        "semantic",
        "employee_analysis",
        "-o",
        "dot",
    ]);
    assert!(
        dot.starts_with("digraph lineage {") && dot.contains("[label=\"RELATES\"]"),
        "{dot}"
    );
    let mermaid = cli(&["lineage", "table", "hr.public.employees", "-o", "mermaid"]);
    assert!(
        mermaid.starts_with("flowchart LR") && mermaid.contains("-->|BINDS|"),
        "{mermaid}"
    );
    let table = cli(&[
        "lineage",
        "model",
        "analytics",
        "semantic",
        "employee_analysis",
    ]);
    assert!(
        table.starts_with("KIND")
            && table
                .lines()
                .any(|l| l.starts_with("METRIC") && l.contains("headcount")),
        "{table}"
    );
}

#[test]
fn a_user_without_access_to_a_model_never_sees_its_nodes() {
    let (ns, op) = world("linrbac", &[], &[]);
    let ns = ns.name.clone();
    let env = env();
    env.apply_ok(&format!(
        "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: secret, namespace: {ns}}}\nspec:\n  catalog: analytics\n  schema: semantic\n  name: secret_model\n  definition:\n    datasets: [{{name: hidden_dataset, source: hr.public.employees}}]\n"
    ));
    wait_ready(env, &ns, "sm/secret", "True", "Accepted");
    let token = env.service_account_token(
        &ns,
        "reader",
        "[{apiGroups: [semops.io], resources: [catalogs], verbs: [get]}, {apiGroups: [semops.io], resources: [semanticmodels], resourceNames: [employee-analysis], verbs: [get]}]",
        &[
            ("get", "catalogs.semops.io"),
            ("get", "semanticmodels.semops.io/employee-analysis"),
        ],
    );
    let source = format!("/api/metalakes/{ns}/objects/table/hr.public.employees/lineage");
    let (code, g, body) = get(&op, &source, Some(&token));
    assert_eq!(code, 200, "{body}");
    assert!(
        !body.contains("secret") && !body.contains("hidden_dataset"),
        "{body}"
    );
    assert_eq!(ids(&g).iter().filter(|(k, _)| k == "MODEL").count(), 1);
    let (code, _, body) = get(&op, &model_path(&ns, "secret_model"), Some(&token));
    assert_eq!(code, 404, "{body}");
    assert!(!body.contains("hidden_dataset"));
    assert_eq!(
        get(&op, &model_path(&ns, "employee_analysis"), Some(&token)).0,
        200
    );
    assert_eq!(get(&op, &source, None).0, 401);
}

#[test]
fn a_graph_over_a_bound_is_refused_whole() {
    // The example model's graph has 5 nodes and 6 edges.
    let (ns, op) = world(
        "linbound",
        &["--api-auth", "none", "--lineage-max-nodes", "4"],
        &[],
    );
    let (code, e, body) = get(&op, &model_path(&ns.name, "employee_analysis"), None);
    assert_eq!(
        (code, e["type"].as_str()),
        (413, Some("LINEAGE_GRAPH_TOO_LARGE")),
        "{body}"
    );
    assert!(!body.contains("nodes\":["), "no partial body");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("--lineage-max-nodes")),
        "the refusal names the bound that was hit: {body}"
    );
    // The source graph (4 nodes) fits the same bound exactly.
    let (code, _, _) = get(
        &op,
        &format!(
            "/api/metalakes/{}/objects/table/hr.public.employees/lineage",
            ns.name
        ),
        None,
    );
    assert_eq!(code, 200);
}

#[test]
fn the_fifth_concurrent_request_is_busy_and_held_requests_hit_the_deadline() {
    let env = env();
    let release = env
        .work_dir
        .join(format!("lineage-release-{}", std::process::id()));
    let _ = std::fs::remove_file(&release);
    let release_var = release.to_str().unwrap();
    // Every projection is held until the test releases it; the deadline is far away.
    let (ns, op) = world(
        "linbusy",
        &["--api-auth", "none", "--lineage-deadline", "10m"],
        &[
            ("SEMOPS_FAILPOINT", "lineage-hold"),
            ("SEMOPS_FAILPOINT_RELEASE", release_var),
        ],
    );
    let path = model_path(&ns.name, "employee_analysis");
    let port = op.api_port;
    let held: Vec<_> = (0..4)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || request(port, "GET", &path, None, None))
        })
        .collect();
    eventually(Duration::from_secs(30), "four projections admitted", || {
        (op.metric("semops_lineage_in_flight", &[]) == 4.0).then_some(())
    });
    let (code, body) = request(port, "GET", &path, None, None);
    let e: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (code, e["type"].as_str()),
        (503, Some("LINEAGE_BUSY")),
        "{body}"
    );
    // Released, the four finish, and their capacity is back.
    std::fs::write(&release, "").unwrap();
    for t in held {
        let (code, body) = t.join().unwrap();
        assert_eq!(code, 200, "{body}");
    }
    assert_eq!(request(port, "GET", &path, None, None).0, 200);

    // Another replica whose projections are never released, with a 1 s deadline: each request
    // meets the deadline, and each gives its capacity back (a fifth one in a row is admitted
    // and meets the deadline too, rather than LINEAGE_BUSY).
    let never = env
        .work_dir
        .join(format!("lineage-never-{}", std::process::id()));
    let other = Operator::start_with_vars(
        env,
        &env.kubeconfig,
        Some(&ns.name),
        &ns.name,
        &["--api-auth", "none", "--lineage-deadline", "1s"],
        &[
            ("SEMOPS_FAILPOINT", "lineage-hold"),
            ("SEMOPS_FAILPOINT_RELEASE", never.to_str().unwrap()),
        ],
    );
    for _ in 0..5 {
        let (code, body) = request(other.api_port, "GET", &path, None, None);
        let e: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (code, e["type"].as_str()),
            (503, Some("LINEAGE_TEMPORARILY_UNAVAILABLE")),
            "{body}"
        );
    }
}

#[test]
fn a_model_whose_status_lags_its_spec_answers_409() {
    let env = env();
    let (ns, mut leader) = world(
        "linlag",
        &["--api-auth", "none", "--lease-duration-seconds", "3600"],
        &[],
    );
    let ns = ns.name.clone();
    // The leader dies holding an hour-long lease: the next replica serves reads, writes nothing.
    leader.kill();
    let follower = Operator::start(
        env,
        &env.kubeconfig,
        Some(&ns),
        &ns,
        &["--api-auth", "none"],
    );
    assert!(!follower.is_leading());
    assert_eq!(
        get(&follower, &model_path(&ns, "employee_analysis"), None).0,
        200
    );
    env.kubectl_ok(&[
        "patch",
        "sm",
        "employee-analysis",
        "-n",
        &ns,
        "--type=merge",
        "-p",
        r#"{"spec":{"comment":"edited"}}"#,
    ]);
    eventually(Duration::from_secs(30), "409 while the status lags", || {
        let (code, e, _) = get(&follower, &model_path(&ns, "employee_analysis"), None);
        (code == 409 && e["type"] == "LINEAGE_UNAVAILABLE").then_some(())
    });
}

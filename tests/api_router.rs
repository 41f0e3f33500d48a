//! The read API's router in-process: every route's status codes and bodies (error envelopes
//! included) over stores filled with real decoded objects — the examples, with the statuses the
//! operator writes. No control plane: the Kubernetes client points at a loopback port that
//! refuses connections, so every path that would need the API server shows its failure answer.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};
use tower::ServiceExt;

use semops::api::auth::Auth;
use semops::api::lineage::Lineage;
use semops::api::{ApiState, router};
use semops::catalog::registry::Registry;
use semops::crd::{Catalog, SemanticModel};
use semops::index::ModelIndex;
use semops::leader::{Elector, LeaderHandle, LeaseTimings};
use semops::run::ControllerRounds;
use semops::stores::Stores;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The example objects of one kind, in namespace `example`.
fn examples<K: serde::de::DeserializeOwned>(kind: &str) -> Vec<K> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(format!("{ROOT}/examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for doc in text.split("\n---\n") {
            let v: Value = serde_saphyr::from_str(doc).unwrap();
            if v["kind"] == kind {
                out.push(serde_json::from_value(v).unwrap());
            }
        }
    }
    out
}

/// The employee model as the operator leaves it once revision 1 is accepted.
fn accepted_employee_model() -> SemanticModel {
    let mut m: SemanticModel = examples("SemanticModel").remove(0);
    m.metadata.uid = Some("11111111-1111-1111-1111-111111111111".into());
    m.metadata.generation = Some(1);
    m.metadata.creation_timestamp = serde_json::from_value(json!("2026-11-30T10:00:00Z")).ok();
    m.status = Some(
        serde_json::from_value(json!({
            "observedGeneration": 1, "acceptedGeneration": 1, "revision": 1,
            "modelName": "employee_analysis", "datasetCount": 2, "metricCount": 1,
            "definitionHash": "d", "snapshotHash": "s",
            "sourceAssociations": [
                {"dataset": "employee", "source": {"catalog": "hr", "schema": "public", "name": "employees"}, "type": "TABLE", "id": "pg:1:2:r3", "revision": 1},
                {"dataset": "manager", "source": {"catalog": "hr", "schema": "public", "name": "employees"}, "type": "TABLE", "id": "pg:1:2:r3", "revision": 1}
            ],
            "metrics": [{"name": "headcount", "id": "0193a8c0-0000-7000-8000-000000000001"}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "Accepted", "message": "revision 1 accepted",
                            "lastTransitionTime": "2026-11-30T10:00:00Z", "observedGeneration": 1}]
        }))
        .unwrap(),
    );
    m
}

/// A younger model claiming the same name: it loses the conflict and is served nowhere.
fn conflicting_model() -> SemanticModel {
    let mut m = accepted_employee_model();
    m.metadata.name = Some("employee-analysis-copy".into());
    m.metadata.uid = Some("22222222-2222-2222-2222-222222222222".into());
    let status = m.status.as_mut().unwrap();
    status.conditions[0].status = "False".into();
    status.conditions[0].reason = "NameConflict".into();
    m
}

/// A model whose spec moved past its status (an edit not reconciled yet).
fn lagging_model() -> SemanticModel {
    let mut m = accepted_employee_model();
    m.metadata.name = Some("lagging".into());
    m.metadata.uid = Some("33333333-3333-3333-3333-333333333333".into());
    m.spec.name = Some("lagging".into());
    m.status.as_mut().unwrap().model_name = Some("lagging".into());
    m.metadata.generation = Some(2);
    m
}

struct World {
    ready: bool,
    auth_kubernetes: bool,
    leading: bool,
    /// Adds a model whose spec moved past its accepted revision (reading that revision needs
    /// the API server, which this world cannot reach).
    lagging: bool,
}

impl Default for World {
    fn default() -> Self {
        Self {
            ready: true,
            auth_kubernetes: false,
            leading: true,
            lagging: false,
        }
    }
}

/// A kube client for a loopback port that is bound (so no one else takes it) and never
/// listened on: every request to the API server fails with "connection refused".
fn unreachable_client() -> (kube::Client, tokio::net::TcpSocket) {
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let url = format!("https://{}", held.local_addr().unwrap());
    let config = kube::Config::new(url.parse().unwrap());
    (kube::Client::try_from(config).unwrap(), held)
}

impl World {
    fn router(self) -> (axum::Router, tokio::net::TcpSocket) {
        let (client, held) = unreachable_client();
        let (models, mut mw) = reflector::store::<SemanticModel>();
        let (catalogs, mut cw) = reflector::store::<Catalog>();
        let (policies, _pw) = reflector::store();
        let index = Arc::new(ModelIndex::default());
        let mut models_in = vec![accepted_employee_model(), conflicting_model()];
        if self.lagging {
            models_in.push(lagging_model());
        }
        for m in models_in {
            index.apply(&m);
            mw.apply_watcher_event(&Event::Apply(m));
        }
        for c in examples::<Catalog>("Catalog") {
            cw.apply_watcher_event(&Event::Apply(c));
        }
        let stores = Stores {
            models,
            catalogs,
            policies,
            claims: Default::default(),
        };
        let leader = if self.leading {
            LeaderHandle::always()
        } else {
            // An elector that never runs: its handle never leads.
            let api = kube::Api::namespaced(client.clone(), "semops-system");
            Elector::new(api, "semops-leader", "me", LeaseTimings::for_lease(15)).1
        };
        let providers = Arc::new(Registry::default());
        let ctx = semops::controller::Context::new(semops::controller::ContextConfig {
            providers: providers.clone(),
            ..semops::controller::ContextConfig::new(client.clone(), stores.clone(), leader)
        });
        let state = ApiState {
            client: client.clone(),
            stores,
            index,
            revisions: Default::default(),
            providers,
            auth: if self.auth_kubernetes {
                Auth::kubernetes(client, vec!["semops".into()])
            } else {
                Auth::None
            },
            ready: Arc::new(AtomicBool::new(self.ready)),
            rounds: Arc::new(ControllerRounds(Arc::new(ctx))),
            lineage: Lineage::default(),
            metrics: Arc::default(),
            reports: Default::default(),
            probes: Default::default(),
        };
        (router(Arc::new(state)), held)
    }
}

async fn call(
    world: World,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, Value) {
    let (app, _held) = world.router();
    let mut req = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = app
        .oneshot(req.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| panic!("{path}: not JSON: {}", String::from_utf8_lossy(&bytes)));
    (status, value)
}

async fn get(path: &str) -> (StatusCode, Value) {
    call(World::default(), "GET", path, &[], "").await
}

const API: &str = "/api/metalakes/example";

/// Every error of the aggregated API is a Kubernetes `Status`: (code, reason, the envelope type
/// kept as the cause's reason).
fn kube_status(v: &Value) -> (i64, &str, &str) {
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["apiVersion"], "v1", "{v}");
    assert_eq!(v["status"], "Failure", "{v}");
    assert!(!v["message"].as_str().unwrap().is_empty(), "{v}");
    (
        v["code"].as_i64().unwrap(),
        v["reason"].as_str().unwrap(),
        v["details"]["causes"][0]["reason"].as_str().unwrap(),
    )
}

/// Every error answer is the envelope `{code, type, message}` and nothing else.
fn envelope(v: &Value) -> (i64, &str) {
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["code", "message", "type"], "{v}");
    (v["code"].as_i64().unwrap(), v["type"].as_str().unwrap())
}

#[tokio::test]
async fn errors_come_in_the_envelope_with_gravitinos_codes() {
    let cases: Vec<(&str, &str, &str, StatusCode, i64, &str)> = vec![
        (
            "GET",
            "/objects/table/not-a-full-name/semantic-model-datasets",
            "",
            StatusCode::BAD_REQUEST,
            1001,
            "ILLEGAL_ARGUMENTS",
        ),
        (
            "GET",
            "/objects/column/hr.public.employees/semantic-model-datasets",
            "",
            StatusCode::BAD_REQUEST,
            1006,
            "UNSUPPORTED_OPERATION",
        ),
        (
            "GET",
            "/objects/table/semantic-model-datasets?catalog=hr&schema=public",
            "",
            StatusCode::BAD_REQUEST,
            1001,
            "ILLEGAL_ARGUMENTS",
        ),
        (
            "GET",
            "/objects/table/nocatalog.s.t/semantic-model-datasets",
            "",
            StatusCode::NOT_FOUND,
            1003,
            "NO_SUCH_METADATA_OBJECT",
        ),
        (
            "GET",
            "/objects/table/analytics.semantic.t/semantic-model-datasets",
            "",
            StatusCode::NOT_FOUND,
            1003,
            "NO_SUCH_METADATA_OBJECT",
        ),
        // The hr Catalog's Secret cannot be read (the API server refuses connections).
        (
            "GET",
            "/objects/table/hr.public.employees/semantic-model-datasets",
            "",
            StatusCode::BAD_GATEWAY,
            1007,
            "CONNECTION_FAILED",
        ),
        (
            "GET",
            "/objects/view/hr.public.employees/lineage",
            "",
            StatusCode::BAD_GATEWAY,
            1007,
            "CONNECTION_FAILED",
        ),
        (
            "GET",
            "/catalogs/analytics/schemas/semantic/semantic-model-metrics?details=maybe",
            "",
            StatusCode::BAD_REQUEST,
            1001,
            "ILLEGAL_ARGUMENTS",
        ),
        (
            "GET",
            "/catalogs/nope/schemas/semantic/semantic-models",
            "",
            StatusCode::NOT_FOUND,
            1003,
            "NO_SUCH_CATALOG",
        ),
        (
            "GET",
            "/catalogs/analytics/schemas/nope/semantic-models",
            "",
            StatusCode::NOT_FOUND,
            1003,
            "NO_SUCH_SCHEMA",
        ),
        (
            "GET",
            "/catalogs/analytics/schemas/semantic/semantic-models/nope",
            "",
            StatusCode::NOT_FOUND,
            1003,
            "NO_SUCH_SEMANTIC_MODEL",
        ),
        (
            "GET",
            "/catalogs/analytics/schemas/semantic/semantic-models/nope/lineage",
            "",
            StatusCode::NOT_FOUND,
            1003,
            "NO_SUCH_SEMANTIC_MODEL",
        ),
        (
            "GET",
            "/catalogs/analytics/schemas/semantic/semantic-models/%FF",
            "",
            StatusCode::BAD_REQUEST,
            1001,
            "ILLEGAL_ARGUMENTS",
        ),
        (
            "GET",
            "/catalogs/nope/registrations",
            "",
            StatusCode::NOT_FOUND,
            1003,
            "NO_SUCH_CATALOG",
        ),
        (
            "POST",
            "/catalogs/analytics/reconcile",
            "not json",
            StatusCode::BAD_REQUEST,
            1001,
            "ILLEGAL_ARGUMENTS",
        ),
        (
            "POST",
            "/catalogs/analytics/reconcile",
            "{\"dryRun\": 3}",
            StatusCode::BAD_REQUEST,
            1001,
            "ILLEGAL_ARGUMENTS",
        ),
        (
            "POST",
            "/catalogs/nope/reconcile",
            "",
            StatusCode::NOT_FOUND,
            1003,
            "NO_SUCH_CATALOG",
        ),
    ];
    for (method, path, body, status, code, type_) in cases {
        let (got, v) = call(World::default(), method, &format!("{API}{path}"), &[], body).await;
        assert_eq!(got, status, "{method} {path}: {v}");
        assert_eq!(envelope(&v), (code, type_), "{method} {path}");
    }
}

#[tokio::test]
async fn metric_discovery_lists_the_visible_models_metrics_with_stable_ids() {
    let (status, v) = get(&format!(
        "{API}/catalogs/analytics/schemas/semantic/semantic-model-metrics"
    ))
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        v,
        json!({"code": 0, "identifiers": [
            {"namespace": ["example", "analytics", "semantic", "employee_analysis"], "name": "headcount"}
        ]}),
        "the model that lost its name conflict is left out"
    );
    let (_, v) = get(&format!(
        "{API}/catalogs/analytics/schemas/semantic/semantic-model-metrics?details=true"
    ))
    .await;
    assert_eq!(v["metrics"][0]["metric"]["name"], "headcount");
    assert_eq!(
        v["metrics"][0]["metric"]["expression"]["dialects"][0]["expression"],
        "COUNT(employee.id)"
    );
}

#[tokio::test]
async fn models_and_one_model_come_from_the_accepted_revision() {
    let (status, v) = get(&format!(
        "{API}/catalogs/analytics/schemas/semantic/semantic-models"
    ))
    .await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = v["identifiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["employee_analysis"]);

    let (status, v) = get(&format!(
        "{API}/catalogs/analytics/schemas/semantic/semantic-models/employee_analysis"
    ))
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["model"]["revision"], 1);
    assert_eq!(v["model"]["comment"], "Headcount analysis");
    assert_eq!(
        v["model"]["metricIds"],
        json!([{"name": "headcount", "id": "0193a8c0-0000-7000-8000-000000000001"}])
    );
    assert_eq!(v["model"]["definition"]["datasets"][1]["name"], "manager");
}

#[tokio::test]
async fn model_lineage_is_a_bounded_graph_served_without_caching() {
    let (app, _held) = World::default().router();
    let resp = app
        .oneshot(
            Request::get(format!(
                "{API}/catalogs/analytics/schemas/semantic/semantic-models/employee_analysis/lineage"
            ))
            .body(Body::empty())
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["cache-control"], "private, no-store");
    let v: Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(v["schemaVersion"], 1);
    let kinds: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["kind"].as_str().unwrap())
        .collect();
    for kind in ["MODEL", "DATASET", "METRIC", "SOURCE"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
}

#[tokio::test]
async fn a_model_whose_spec_moved_past_its_revision_gets_409_for_lineage_and_its_revision_is_read_for_the_rest()
 {
    let lagging = || World {
        lagging: true,
        ..World::default()
    };
    let (status, v) = call(
        lagging(),
        "GET",
        &format!("{API}/catalogs/analytics/schemas/semantic/semantic-models/lagging/lineage"),
        &[],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(envelope(&v), (1100, "LINEAGE_UNAVAILABLE"));
    // Its accepted definition lives in a ControllerRevision; when that cannot be read the
    // answer is an error, never a list without the model.
    let (status, v) = call(
        lagging(),
        "GET",
        &format!("{API}/catalogs/analytics/schemas/semantic/semantic-model-metrics"),
        &[],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(envelope(&v), (1002, "INTERNAL_ERROR"));
    let (status, v) = call(
        lagging(),
        "GET",
        &format!("{API}/catalogs/analytics/schemas/semantic/semantic-models"),
        &[],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["identifiers"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn registrations_serve_the_declared_entries_with_their_metadata() {
    let (status, v) = get(&format!("{API}/catalogs/hr/registrations")).await;
    assert_eq!(status, StatusCode::OK);
    let regs = v["registrations"].as_array().unwrap();
    assert_eq!(regs.len(), 3);
    assert_eq!(regs[0]["owner"], "hr-team");
    assert_eq!(regs[0]["state"], "Pending", "not checked yet");
    assert_eq!(regs[1]["properties"], json!({"tier": "gold"}));
}

#[tokio::test]
async fn a_stale_report_of_a_managed_catalog_is_empty_and_a_follower_refuses_to_record() {
    let (status, v) = get(&format!("{API}/catalogs/analytics/stale-entities")).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        v,
        json!({"code": 0, "catalog": "analytics", "catalogUnreachable": false, "staleSchemas": [], "staleEntities": []})
    );
    let (status, v) = get(&format!("{API}/catalogs/analytics/stale-schemas")).await;
    assert_eq!(
        (status, v["staleSchemas"].clone()),
        (StatusCode::OK, json!([]))
    );

    let follower = World {
        leading: false,
        ..World::default()
    };
    let (status, v) = call(
        follower,
        "POST",
        &format!("{API}/catalogs/analytics/reconcile"),
        &[],
        "{\"dryRun\": false}",
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(envelope(&v), (1100, "NOT_LEADER"));
    // A dry run is fine on any replica.
    let follower = World {
        leading: false,
        ..World::default()
    };
    let (status, _) = call(
        follower,
        "POST",
        &format!("{API}/catalogs/analytics/reconcile"),
        &[],
        "{\"dryRun\": true}",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn nothing_is_served_before_the_caches_synced() {
    for path in [
        "/catalogs/analytics/schemas/semantic/semantic-models",
        "/objects/table/hr.public.employees/semantic-model-datasets",
        "/catalogs/analytics/schemas/semantic/semantic-models/employee_analysis/lineage",
        "/catalogs/hr/registrations",
    ] {
        let world = World {
            ready: false,
            ..World::default()
        };
        let (status, v) = call(world, "GET", &format!("{API}{path}"), &[], "").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
        assert_eq!(envelope(&v), (1100, "NOT_READY"), "{path}");
    }
}

#[tokio::test]
async fn with_kubernetes_auth_a_missing_token_is_401_and_an_unanswered_review_fails_closed() {
    let path = format!("{API}/catalogs/analytics/schemas/semantic/semantic-models");
    let kube = || World {
        auth_kubernetes: true,
        ..World::default()
    };
    let (status, v) = call(kube(), "GET", &path, &[], "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(envelope(&v), (1008, "UNAUTHENTICATED"));
    let (status, v) = call(
        kube(),
        "GET",
        &path,
        &[("authorization", "Bearer some-token")],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
    assert_eq!(envelope(&v), (1002, "INTERNAL_ERROR"));
}

#[tokio::test]
async fn the_openapi_document_is_served_and_names_every_route() {
    let (status, v) = get("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["openapi"], "3.0.3");
    for route in semops::api::openapi::ROUTES {
        assert!(
            v["paths"].get(route.path).is_some(),
            "{} missing",
            route.path
        );
    }
}

const AGG: &str = "/apis/query.semops.io/v1alpha1/namespaces/example";

/// Each aggregated path answers exactly what its Gravitino twin answers (same handler, same
/// caches): status and body, errors included.
#[tokio::test]
async fn every_aggregated_path_answers_like_its_gravitino_twin() {
    let cases = [
        (
            "/tables/hr.public.employees/datasets",
            "/objects/table/hr.public.employees/semantic-model-datasets",
        ),
        (
            "/views/hr.public.employees/datasets",
            "/objects/view/hr.public.employees/semantic-model-datasets",
        ),
        (
            "/tables/nocatalog.s.t/datasets",
            "/objects/table/nocatalog.s.t/semantic-model-datasets",
        ),
        (
            "/schemas/analytics.semantic/metrics",
            "/catalogs/analytics/schemas/semantic/semantic-model-metrics",
        ),
        (
            "/schemas/analytics.semantic/metrics?details=true",
            "/catalogs/analytics/schemas/semantic/semantic-model-metrics?details=true",
        ),
        (
            "/schemas/analytics.semantic/models",
            "/catalogs/analytics/schemas/semantic/semantic-models",
        ),
        (
            "/models/analytics.semantic.employee_analysis",
            "/catalogs/analytics/schemas/semantic/semantic-models/employee_analysis",
        ),
        (
            "/models/analytics.semantic.nope",
            "/catalogs/analytics/schemas/semantic/semantic-models/nope",
        ),
        (
            "/models/analytics.semantic.nope/versions",
            "/catalogs/analytics/schemas/semantic/semantic-models/nope/versions",
        ),
        (
            "/models/analytics.semantic.nope?revision=x",
            "/catalogs/analytics/schemas/semantic/semantic-models/nope?revision=x",
        ),
        (
            "/models/analytics.semantic.employee_analysis/lineage",
            "/catalogs/analytics/schemas/semantic/semantic-models/employee_analysis/lineage",
        ),
        (
            "/catalogs/analytics/registrations",
            "/catalogs/analytics/registrations",
        ),
        (
            "/catalogs/analytics/stale-schemas",
            "/catalogs/analytics/stale-schemas",
        ),
        (
            "/catalogs/analytics/stale-entities",
            "/catalogs/analytics/stale-entities",
        ),
    ];
    for (aggregated, twin) in cases {
        let (a_status, a) = get(&format!("{AGG}{aggregated}")).await;
        let (t_status, t) = get(&format!("{API}{twin}")).await;
        assert_eq!(a_status, t_status, "{aggregated} vs {twin}");
        if a_status.is_success() {
            assert_eq!(a, t, "{aggregated} vs {twin}");
        } else {
            // The same error, as a Status: its message, the envelope's type as the cause.
            let (code, _, cause) = kube_status(&a);
            assert_eq!(code, i64::from(a_status.as_u16()), "{aggregated}");
            assert_eq!(
                (cause, &a["message"]),
                (envelope(&t).1, &t["message"]),
                "{aggregated} vs {twin}"
            );
        }
    }
    let (status, v) = call(
        World {
            leading: true,
            ..World::default()
        },
        "POST",
        &format!("{AGG}/catalogs/analytics/reconcile"),
        &[],
        "{\"dryRun\": true}",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
}

#[tokio::test]
async fn aggregated_names_that_do_not_split_are_refused_with_a_kubernetes_status() {
    for path in [
        "/schemas/analytics/metrics",
        "/schemas/analytics.semantic.x/models",
        "/models/analytics.semantic",
        "/models/analytics..m",
        "/models/%60analytics.semantic.m/lineage",
    ] {
        let (status, v) = get(&format!("{AGG}{path}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(
            kube_status(&v),
            (400, "BadRequest", "ILLEGAL_ARGUMENTS"),
            "{path}"
        );
    }
    let (status, v) = get("/apis/query.semops.io/v1alpha1/namespaces/example/nothing/x").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(kube_status(&v), (404, "NotFound", "NOT_FOUND"));
    let (status, v) = call(
        World::default(),
        "DELETE",
        &format!("{AGG}/models/a.b.c"),
        &[],
        "",
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        kube_status(&v),
        (405, "MethodNotAllowed", "UNSUPPORTED_OPERATION")
    );
}

#[tokio::test]
async fn an_oversized_body_is_refused_on_both_doors() {
    let huge = format!("{{\"dryRun\": true, \"pad\": \"{}\"}}", "x".repeat(3 << 20));
    for path in [
        format!("{API}/catalogs/analytics/reconcile"),
        format!("{AGG}/catalogs/analytics/reconcile"),
    ] {
        let (status, v) = call(World::default(), "POST", &path, &[], &huge).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}");
        if path.starts_with("/apis") {
            assert_eq!(
                kube_status(&v),
                (413, "RequestEntityTooLarge", "ILLEGAL_ARGUMENTS")
            );
        } else {
            assert_eq!(envelope(&v), (1001, "ILLEGAL_ARGUMENTS"), "{path}");
        }
    }
}

#[tokio::test]
async fn discovery_and_openapi_v3_describe_the_group() {
    let (status, v) = get("/apis").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["kind"], "APIGroupList");
    assert_eq!(
        v["groups"][0]["preferredVersion"]["groupVersion"],
        "query.semops.io/v1alpha1"
    );
    let (_, v) = get("/apis/query.semops.io").await;
    assert_eq!(v["kind"], "APIGroup");
    let (_, v) = get("/apis/query.semops.io/v1alpha1").await;
    assert_eq!(v["kind"], "APIResourceList");
    assert!(
        v["resources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["namespaced"] == true)
    );
    let (_, index) = get("/openapi/v3").await;
    let url = index["paths"]["apis/query.semops.io/v1alpha1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, doc) = get(&url).await;
    assert_eq!(status, StatusCode::OK);
    for (path, _) in semops::api::paths::AGGREGATED {
        assert!(doc["paths"].get(*path).is_some(), "{path} in OpenAPI v3");
    }
}

/// The discovery document and the router agree: every resource and subresource it lists with a
/// verb answers that verb (neither "no such path" nor "method not allowed"), and a parent listed
/// without verbs (`tables`, only there so RBAC tooling can resolve `tables/datasets`) has no
/// path of its own.
#[tokio::test]
async fn discovery_lists_exactly_what_the_router_serves() {
    let (_, list) = get("/apis/query.semops.io/v1alpha1").await;
    let resources = list["resources"].as_array().unwrap();
    let names: Vec<&str> = resources
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for r in resources {
        let name = r["name"].as_str().unwrap();
        let verbs: Vec<&str> = r["verbs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let (resource, sub) = match name.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => {
                assert!(
                    !r["kind"].as_str().unwrap().is_empty(),
                    "{name}: a kind, or discovery drops it"
                );
                (name, None)
            }
        };
        if sub.is_some() {
            assert!(names.contains(&resource), "{name} without its parent");
        }
        // A name that splits for every resource: catalogs take one segment, the rest dotted.
        let object = if resource == "catalogs" {
            "analytics"
        } else {
            "analytics.semantic.m"
        };
        let object = if resource == "schemas" {
            "analytics.semantic"
        } else {
            object
        };
        let named = match sub {
            Some(s) => format!("{AGG}/{resource}/{object}/{s}"),
            None => format!("{AGG}/{resource}/{object}"),
        };
        if verbs.is_empty() {
            let (status, v) = get(&named).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{name} has no path");
            assert!(
                v["message"].as_str().unwrap().starts_with("no such path"),
                "{name}: {v}"
            );
        }
        for verb in verbs {
            let (method, path) = match verb {
                "get" => ("GET", named.clone()),
                "list" => ("GET", format!("{AGG}/{resource}")),
                "create" => ("POST", named.clone()),
                other => panic!("{name}: unexpected verb {other}"),
            };
            let world = World {
                leading: true,
                ..World::default()
            };
            let (status, v) = call(world, method, &path, &[], "{\"dryRun\": true}").await;
            assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{verb} {name}: {v}");
            assert!(
                !v["message"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with("no such path"),
                "{verb} {name} ({method} {path}) is not routed: {v}"
            );
        }
    }
}

/// A user the API server proxied is taken as is: no TokenReview (the client here reaches no
/// API server, so a review would fail), straight to the per-object checks (which fail closed).
#[tokio::test]
async fn a_proxied_user_needs_no_token_and_is_still_authorized_per_object() {
    let path = format!("{AGG}/schemas/analytics.semantic/models");
    let world = World {
        auth_kubernetes: true,
        ..World::default()
    };
    let (app, _held) = world.router();
    let mut req = Request::get(&path).body(Body::empty()).unwrap();
    req.extensions_mut()
        .insert(semops::api::auth::Proxied(semops::api::auth::Caller {
            username: "alice".into(),
            uid: None,
            groups: vec!["team-a".into()],
            extra: Default::default(),
        }));
    let resp = app.oneshot(req).await.unwrap();
    // Not 401: authenticated. The catalog check could not be asked: refused, fail closed.
    assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let (status, v) = call(
        World {
            auth_kubernetes: true,
            ..World::default()
        },
        "GET",
        &path,
        &[("x-remote-user", "alice")],
        "",
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "headers alone name nobody: {v}"
    );
}

//! Scale benchmark against the real control plane and PostgreSQL (docs/design.md#targets). Not a test: run
//! by `hack/bench` (which also records the table in docs/benchmarks-history.md). For each model count:
//!
//! 1. the bare API server: the same writes semops makes per model (a ControllerRevision create,
//!    a status PUT and the Accepted Event, the first two built by semops' own
//!    `first_acceptance` and checked against semops' objects afterwards), issued by a plain
//!    client at the operator's concurrency after listing the models, Events queued for a poster
//!    as semops does — the limit. Both phases start their clocks before their first request and
//!    end when the same kind of watch has seen every model Ready, and report how busy the cores
//!    were;
//! 2. semops bringing the same number of models (5 datasets, 10 metrics) to Ready from a cold
//!    start; its write requests per model from its own `rest_client_requests_total` (every
//!    answer counted: conflicts, deletes and Events included), RSS and CPU;
//! 3. steady state: write requests per minute (target 0, Lease renewals shown apart) and CPU;
//! 4. time to ready after a restart;
//! 5. source lookup through the live read API, authenticated with a real ServiceAccount token
//!    (TokenReview + SubjectAccessReview, as in production), vs `kubectl get -o json` and
//!    filtering; both sides' answers are checked query by query against the models' status;
//!
//! 6. with `SEMOPS_BENCH_LOAD=CLIENTS:SECONDS` (hack/bench --load): the read API under
//!    concurrent load — requests/s, p50/p99, errors, CPU per 1,000 requests, peak RSS and how many
//!    live probes the lookups cost (single flight) and the catalog queries they went out in — once with a new connection per request, once
//!    with connections kept open;
//!
//! and once per engine: a stale round over 10,000 registrations (two Catalogs of 5,000, the most
//! one Catalog may declare) on the local PostgreSQL and MariaDB, default concurrency.
//!
//! With `SEMOPS_BENCH_PAIRS=P` (hack/bench --pairs P) only phases 1 and 2 run, P times per count
//! in alternating order (bare client first, then semops first), each phase on a control plane of
//! its own started empty, and the cold-start ratio is their median.
//!
//! `SEMOPS_BENCH_MODELS=1000,10000` picks the counts (`0`: the rounds only); the table goes to stdout and to
//! target/bench/scale.md.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use semops::catalog::{Column, ObjectType};
use semops::controller::semantic_model::first_acceptance;
use semops::crd::SemanticModel;
use semops::model::sources::SourceLookup;
use semops::ossie::SourceRef;
use support::db::{mariadb, postgres};
use support::{Operator, env, eventually, examples_in};
use tokio_util::sync::CancellationToken;

const TABLES: usize = 2_000;
const DATASETS: usize = 5;
const METRICS: usize = 10;
const CONCURRENCY: usize = 16;

fn model(ns: &str, i: usize) -> SemanticModel {
    let datasets: Vec<serde_json::Value> = (0..DATASETS)
        .map(|d| serde_json::json!({"name": format!("d{d}"), "source": format!("hr.bench.t{}", (i * 7 + d * 131) % TABLES), "primaryKey": ["id"]}))
        .collect();
    let metrics: Vec<serde_json::Value> = (0..METRICS)
        .map(|k| serde_json::json!({"name": format!("metric_{k}"), "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": format!("SUM(d0.id) + {k}")}]}, "datatype": "Decimal"}))
        .collect();
    let spec = serde_json::from_value(serde_json::json!({
        "catalog": "analytics", "schema": "semantic", "name": format!("model_{i}"),
        "definition": {"datasets": datasets, "metrics": metrics}
    }))
    .unwrap();
    let mut m = SemanticModel::new(&format!("model-{i}"), spec);
    m.metadata.namespace = Some(ns.into());
    m
}

async fn for_each(n: usize, f: impl Fn(usize) -> futures::future::BoxFuture<'static, ()>) {
    futures::stream::iter(0..n)
        .map(f)
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
}

async fn create_models(client: &Client, ns: &str, n: usize) {
    let api: Api<SemanticModel> = Api::namespaced(client.clone(), ns);
    let ns = ns.to_string();
    for_each(n, |i| {
        let (api, ns) = (api.clone(), ns.clone());
        Box::pin(async move {
            api.create(&PostParams::default(), &model(&ns, i))
                .await
                .unwrap();
        })
    })
    .await;
}

/// Event POSTs in flight at once, like semops' background poster (`controller::events`).
const EVENT_POSTS_AT_ONCE: usize = 8;

/// The objects the bare client writes per model: semops' own first acceptance, built by its
/// own code (`first_acceptance`) from what its probe would find (each `bench.tN` is
/// `(id int)`), so they are the objects semops writes, byte for byte but for ids and times.
/// Built before the clock: computing them is semops' work, not the API server's.
struct BareWrite {
    model: SemanticModel,
    revision: ControllerRevision,
}

async fn prepare_bare_writes(client: &Client, ns: &str) -> Vec<BareWrite> {
    let models: Api<SemanticModel> = Api::namespaced(client.clone(), ns);
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut listed = models.list(&ListParams::default()).await.unwrap().items;
    listed.sort_by_key(|m| m.name_any());
    listed
        .into_iter()
        .map(|mut model| {
            let (status, revision) = first_acceptance(&model, &bench_lookups(&model), &now);
            model.status = Some(status);
            model.metadata.managed_fields = None;
            BareWrite { model, revision }
        })
        .collect()
}

/// The bare client: per model, the revision create, the status PUT and the Accepted Event
/// semops makes, the same way: the revision and status in `CONCURRENCY` workers, the Event
/// queued for a poster with `EVENT_POSTS_AT_ONCE` in flight. Returns when the writes began and
/// the poster, which ends once every Event is posted.
async fn bare_writes(
    client: &Client,
    ns: &str,
    prepared: Vec<BareWrite>,
) -> (Instant, tokio::task::JoinHandle<()>) {
    let models: Api<SemanticModel> = Api::namespaced(client.clone(), ns);
    let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), ns);
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    // A cold-started client reads the models it writes for (each status PUT is preconditioned
    // on the version read), as semops lists them on its clock.
    let started = Instant::now();
    let mut listed = models.list(&ListParams::default()).await.unwrap().items;
    listed.sort_by_key(|m| m.name_any());
    assert_eq!(
        listed.len(),
        prepared.len(),
        "models changed since the writes were built"
    );
    let prepared: Arc<Vec<_>> = Arc::new(prepared.into_iter().zip(listed).collect());
    let (queue, mut queued) = tokio::sync::mpsc::channel::<Event>(1024);
    let poster = tokio::spawn(async move {
        futures::stream::poll_fn(move |cx| queued.poll_recv(cx))
            .for_each_concurrent(EVENT_POSTS_AT_ONCE, |event| {
                let events = events.clone();
                async move {
                    events.create(&PostParams::default(), &event).await.unwrap();
                }
            })
            .await;
    });
    for_each(prepared.len(), |i| {
        let (models, revisions, queue, prepared) = (
            models.clone(),
            revisions.clone(),
            queue.clone(),
            prepared.clone(),
        );
        Box::pin(async move {
            let (write, listed) = &prepared[i];
            let params = PostParams {
                field_manager: Some("semops".into()),
                ..Default::default()
            };
            revisions.create(&params, &write.revision).await.unwrap();
            let mut next = write.model.clone();
            next.metadata.resource_version = listed.metadata.resource_version.clone();
            models
                .replace_status(&next.name_any(), &params, &next)
                .await
                .unwrap();
            let event = Event {
                metadata: ObjectMeta {
                    name: Some(format!("{}.accepted", next.name_any())),
                    ..Default::default()
                },
                action: Some("Accept".into()),
                reason: Some("Accepted".into()),
                note: Some("revision 1 accepted (Created)".into()),
                event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
                regarding: Some(listed.object_ref(&())),
                reporting_controller: Some("semops.io/semops".into()),
                reporting_instance: Some("bench".into()),
                type_: Some("Normal".into()),
                ..Default::default()
            };
            queue.send(event).await.unwrap();
        })
    })
    .await;
    (started, poster)
}

/// Waits until the machine is idle (under a tenth of its cores busy for three seconds running,
/// at most two minutes), so a phase does not start while the API server, etcd or the
/// controller-manager still work off the one before (the deleted namespace's garbage
/// collection, etcd's compaction). Says how long it waited.
async fn wait_idle(what: &str) {
    let began = Instant::now();
    let mut quiet = 0;
    let mut last = 1.0;
    while quiet < 3 && began.elapsed() < Duration::from_secs(120) {
        let before = cores_busy();
        tokio::time::sleep(Duration::from_secs(1)).await;
        last = busy_fraction(before, cores_busy());
        quiet = if last < 0.1 { quiet + 1 } else { 0 };
    }
    eprintln!(
        "[bench] idle before {what} after {} ({:.0}% busy in the last second)",
        secs(began.elapsed()),
        last * 100.0
    );
}

/// What semops' probe finds for each source of a bench model: a table `(id int)`.
fn bench_lookups(m: &SemanticModel) -> HashMap<SourceRef, SourceLookup> {
    (m.spec.definition.datasets.iter())
        .map(|d| {
            let table = d.source.rsplit('.').next().unwrap();
            let oid = 16_400 + table.trim_start_matches('t').parse::<u64>().unwrap();
            let lookup = SourceLookup::Present {
                object_type: ObjectType::Table,
                native_id: format!("pg:7300000000000000000:16384:r{oid}"),
                columns: vec![Column::new("id", "integer")],
            };
            (SourceRef::parse(&d.source).unwrap(), lookup)
        })
        .collect()
}

/// The bare client's revision and status (built by `first_acceptance`) have the fields semops'
/// own have, at the same sizes give or take ids: otherwise the ratio compares unequal writes.
async fn same_writes_as_the_bare_client(client: &Client, ns: &str) {
    let models: Api<SemanticModel> = Api::namespaced(client.clone(), ns);
    let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), ns);
    let live = models.get("model-0").await.unwrap();
    let live_rev = revisions.get(&live.revision_object_name(1)).await.unwrap();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let (status, rev) = first_acceptance(&live, &bench_lookups(&live), &now);
    let pairs = [
        (
            "status",
            serde_json::to_value(&live.status).unwrap(),
            serde_json::to_value(&status).unwrap(),
        ),
        ("revision data", live_rev.data.0, rev.data.0),
    ];
    for (what, semops, bare) in pairs {
        assert_eq!(
            json_paths(&semops, ""),
            json_paths(&bare, ""),
            "the bare client's {what} has other fields than semops'"
        );
        let (a, b) = (semops.to_string().len(), bare.to_string().len());
        eprintln!("[bench] {what}: semops {a} bytes, bare client {b} bytes");
        assert!(
            a.abs_diff(b) * 20 < a,
            "the bare client's {what} is not the size of semops' ({b} against {a} bytes)"
        );
    }
}

/// Every object key path in `v` (array items share their parent's path).
fn json_paths(v: &serde_json::Value, at: &str) -> std::collections::BTreeSet<String> {
    match v {
        serde_json::Value::Object(m) => m
            .iter()
            .flat_map(|(k, v)| {
                let path = format!("{at}.{k}");
                let mut below = json_paths(v, &path);
                below.insert(path);
                below
            })
            .collect(),
        serde_json::Value::Array(items) => items.iter().flat_map(|v| json_paths(v, at)).collect(),
        _ => Default::default(),
    }
}

/// Write requests the operator sent so far (any answer), from its own request counter.
struct Writes {
    revisions: f64,
    model_status: f64,
    events: f64,
    leases: f64,
    all: f64,
    conflicts: f64,
    deletes: f64,
}

fn writes(op: &Operator) -> Writes {
    let of = |resource: &str| op.write_requests(&[&format!("resource=\"{resource}\"")]);
    Writes {
        revisions: of("controllerrevisions"),
        model_status: of("semanticmodels/status"),
        events: of("events"),
        leases: of("leases"),
        all: op.write_requests(&[]),
        conflicts: op.write_requests(&["code=\"409\""]),
        deletes: op.write_requests(&["method=\"DELETE\""]),
    }
}

/// Which (model, dataset) pairs bind `hr.bench.{table}`, from the models' committed status in
/// a `kubectl get sm -o json` listing: what a client without the API computes.
fn bound_pairs(models: &serde_json::Value, table: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = models["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| {
            let model = m["spec"]["name"].as_str().unwrap_or_default().to_string();
            m["status"]["sourceAssociations"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| {
                    a["source"]["catalog"] == "hr"
                        && a["source"]["schema"] == "bench"
                        && a["source"]["name"] == table
                })
                .map(move |a| (model.clone(), a["dataset"].as_str().unwrap().to_string()))
                .collect::<Vec<_>>()
        })
        .collect();
    pairs.sort();
    pairs
}

/// The (model, dataset) pairs of a lookup answer.
fn answered(body: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    let mut pairs: Vec<(String, String)> = v["identifiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["namespace"][3].as_str().unwrap().to_string(),
                i["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    pairs.sort();
    pairs
}

fn is_ready(m: &SemanticModel) -> bool {
    m.status.as_ref().is_some_and(|s| {
        semops::crd::conditions::is_true(
            &s.conditions,
            semops::crd::conditions::ConditionType::Ready,
        )
    })
}

/// How many models of `ns` are Ready, kept current by a watch (one list, then events).
fn ready_watch(client: &Client, ns: &str) -> tokio::sync::watch::Receiver<usize> {
    use kube::runtime::WatchStreamExt;
    use kube::runtime::watcher::{self, Event};
    let api: Api<SemanticModel> = Api::namespaced(client.clone(), ns);
    let (tx, rx) = tokio::sync::watch::channel(0);
    tokio::spawn(async move {
        let mut ready = std::collections::HashSet::new();
        let mut listing = std::collections::HashSet::new();
        let mut events =
            std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
        // The watch ends with its phase (every receiver dropped), even while its API server is
        // gone and the watcher only retries: a retry loop left behind would take the cores from
        // the phases after it.
        loop {
            let event = tokio::select! {
                _ = tx.closed() => return,
                event = events.next() => match event {
                    Some(event) => event,
                    None => return,
                },
            };
            match event {
                Ok(Event::Apply(m)) | Ok(Event::InitApply(m)) if is_ready(&m) => {
                    ready.insert(m.name_any());
                    listing.insert(m.name_any());
                }
                Ok(Event::Apply(m)) | Ok(Event::Delete(m)) => {
                    ready.remove(&m.name_any());
                }
                Ok(Event::InitApply(_)) => {}
                Ok(Event::Init) => listing.clear(),
                // A relist: what it did not list as ready is not ready.
                Ok(Event::InitDone) => ready.retain(|name| listing.contains(name)),
                Err(_) => continue, // the watcher retries by itself, with backoff
            }
            if tx.send(ready.len()).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits until `ready` counts `n` models (an hour at most).
async fn wait_for_ready(ready: &tokio::sync::watch::Receiver<usize>, n: usize) {
    let mut ready = ready.clone();
    tokio::time::timeout(Duration::from_secs(3600), ready.wait_for(|r| *r == n))
        .await
        .expect("models did not become Ready")
        .expect("the ready watch ended");
}

/// CPU seconds each live process has used so far, by pid, with its command name.
fn cpu_by_process() -> std::collections::HashMap<u32, (String, f64)> {
    let mut all = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let comm = stat
            .split_once('(')
            .and_then(|(_, rest)| rest.rsplit_once(')'))
            .map(|(c, _)| c.to_string())
            .unwrap_or_default();
        all.insert(pid, (comm, cpu_seconds(&stat)));
    }
    all
}

/// Where a phase's CPU went: seconds per command name between two [`cpu_by_process`]
/// readings (processes started meanwhile count from zero), the largest first.
fn cpu_spent(
    before: &std::collections::HashMap<u32, (String, f64)>,
    after: &std::collections::HashMap<u32, (String, f64)>,
) -> String {
    let mut by_name: std::collections::BTreeMap<&str, f64> = Default::default();
    for (pid, (name, cpu)) in after {
        let was = before.get(pid).map_or(0.0, |(_, c)| *c);
        *by_name.entry(name.as_str()).or_default() += cpu - was;
    }
    let mut spent: Vec<(&str, f64)> = by_name.into_iter().filter(|(_, s)| *s >= 0.5).collect();
    spent.sort_by(|a, b| b.1.total_cmp(&a.1));
    spent
        .iter()
        .map(|(name, s)| format!("{name} {s:.1}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The machine's CPU time so far, busy and in all, in clock ticks (`/proc/stat`).
fn cores_busy() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
    let all: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    (all - idle, all)
}

/// The share of all cores' time that was busy between two [`cores_busy`] readings.
fn busy_fraction(before: (u64, u64), after: (u64, u64)) -> f64 {
    (after.0 - before.0) as f64 / (after.1 - before.1).max(1) as f64
}

/// Listed in pages of 500, as `list_all` is: one list of 50,000 models is gigabytes of
/// garbage in the API server.
async fn ready_count(client: &Client, ns: &str) -> usize {
    let api: Api<SemanticModel> = Api::namespaced(client.clone(), ns);
    let mut ready = 0;
    let mut params = ListParams::default().limit(500);
    loop {
        let Ok(page) = api.list(&params).await else {
            return 0;
        };
        ready += page.items.iter().filter(|m| is_ready(m)).count();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => return ready,
        }
    }
}

/// Resident set size (KiB) and CPU seconds (user + system) of a process.
fn proc_stats(pid: u32) -> (u64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    (rss, cpu_seconds(&stat))
}

/// User + system CPU seconds from the text of a `/proc/<pid>/stat`.
fn cpu_seconds(stat: &str) -> f64 {
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// Anonymous memory (KiB) of a process's RSS: its heap and stacks, not its mapped code.
fn anonymous_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Anonymous:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn percentiles(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    let p = |q: f64| v[((v.len() as f64 - 1.0) * q).round() as usize];
    (p(0.5), p(0.99))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

struct Row(String, String);

/// Above this many models the `kubectl get -o json` comparison is not run.
const KUBECTL_BASELINE_MAX: usize = 10_000;

/// The example Catalogs (not the models) in `ns`.
fn with_catalogs(env: &'static support::Env, ns: &str) {
    let docs: String = examples_in(ns)
        .split("\n---\n")
        .filter(|d| !d.contains("kind: SemanticModel"))
        .collect::<Vec<_>>()
        .join("\n---\n");
    env.apply_ok(&docs);
}

/// The limit: a bare client making semops's writes for `n` models, timed to all Ready on a
/// watch; its namespace is deleted before this returns.
struct BarePhase {
    time: Duration,
    busy: f64,
    cpu: String,
    ns: support::Namespace,
}

async fn bare_phase(env: &'static support::Env, client: &Client, n: usize) -> BarePhase {
    let bare = env.namespace("bare");
    with_catalogs(env, &bare.name);
    create_models(client, &bare.name, n).await;
    let prepared = prepare_bare_writes(client, &bare.name).await;
    assert_eq!(prepared.len(), n);
    // Both phases end the same way: when a watch has seen every model Ready.
    let bare_ready = ready_watch(client, &bare.name);
    wait_idle("the bare client").await;
    let busy_before = cores_busy();
    let procs_before = cpu_by_process();
    let (bare_started, poster) = bare_writes(client, &bare.name, prepared).await;
    let t_bare_writes = bare_started.elapsed();
    wait_for_ready(&bare_ready, n).await;
    let t_bare = bare_started.elapsed();
    let bare_busy = busy_fraction(busy_before, cores_busy());
    let bare_cpu = cpu_spent(&procs_before, &cpu_by_process());
    poster.await.unwrap();
    eprintln!(
        "[bench] {n} models: bare client {} (status writes done at {}, all Events at {}); cores busy {:.0}%; CPU-s {bare_cpu}",
        secs(t_bare),
        secs(t_bare_writes),
        secs(bare_started.elapsed()),
        bare_busy * 100.0
    );
    BarePhase {
        time: t_bare,
        busy: bare_busy,
        cpu: bare_cpu,
        ns: bare,
    }
}

/// semops bringing `n` models to Ready from a cold start, on the same kind of watch; the
/// operator keeps running and the namespace stays for what is measured next.
struct SemopsPhase {
    time: Duration,
    busy: f64,
    cpu: String,
    peak_rss: u64,
    op: Operator,
    ns: support::Namespace,
}

async fn semops_phase(env: &'static support::Env, client: &Client, n: usize) -> SemopsPhase {
    let ns = env.namespace("scale");
    with_catalogs(env, &ns.name);
    create_models(client, &ns.name, n).await;
    // Readiness is followed by a watch, not by listing every model: a list of 10,000 models
    // costs the API server seconds of CPU, which the measurement would take from semops.
    let ready = ready_watch(client, &ns.name);
    wait_idle("semops").await;
    let busy_before = cores_busy();
    let procs_before = cpu_by_process();
    let started = Instant::now();
    let op = Operator::start(
        env,
        &env.kubeconfig,
        Some(&ns.name),
        &ns.name,
        &["--concurrency", &CONCURRENCY.to_string()],
    );
    // The clock stops the moment the watch counts n (as for the bare client); RSS is sampled
    // beside it.
    let pid = op.pid();
    let sampling = CancellationToken::new();
    let sampler = tokio::spawn({
        let sampling = sampling.clone();
        async move {
            let mut peak = 0;
            while !sampling.is_cancelled() {
                peak = proc_stats(pid).0.max(peak);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            peak
        }
    });
    wait_for_ready(&ready, n).await;
    let time = started.elapsed();
    sampling.cancel();
    let peak_rss = sampler.await.unwrap().max(proc_stats(pid).0);
    let busy = busy_fraction(busy_before, cores_busy());
    let cpu = cpu_spent(&procs_before, &cpu_by_process());
    // The watch is the truth only if a list agrees (once, after the clock stopped).
    assert_eq!(
        ready_count(client, &ns.name).await,
        n,
        "the ready watch miscounted"
    );
    SemopsPhase {
        time,
        busy,
        cpu,
        peak_rss,
        op,
        ns,
    }
}

/// The cold-start ratio as the median of `pairs` pairs whose order alternates (bare client
/// first, then semops first), so neither side always runs first.
async fn run_pairs(n: usize, pairs: usize, rows: &mut Vec<Row>) {
    // Every phase runs on a control plane of its own, started empty and stopped after it:
    // deleting 10,000 models with their finalizers would take the API server longer than the
    // phase itself, and leftovers would make every later phase run on a fuller server.
    let bare_alone = async |label: String| {
        let cluster = support::OwnCluster::start(&label);
        let client = cluster.env.client().await;
        let BarePhase { time, ns, .. } = bare_phase(cluster.env, &client, n).await;
        drop((ns, cluster));
        time
    };
    let semops_alone = async |label: String| {
        let cluster = support::OwnCluster::start(&label);
        let client = cluster.env.client().await;
        let SemopsPhase { time, op, ns, .. } = semops_phase(cluster.env, &client, n).await;
        drop((op, ns, cluster));
        time
    };
    let mut runs = vec![];
    for pair in 0..pairs {
        let bare_first = pair % 2 == 0;
        let (bare_label, semops_label) = (format!("pair{pair}-bare"), format!("pair{pair}-semops"));
        let (bare, semops) = if bare_first {
            let bare = bare_alone(bare_label).await;
            (bare, semops_alone(semops_label).await)
        } else {
            let semops = semops_alone(semops_label).await;
            (bare_alone(bare_label).await, semops)
        };
        let ratio = semops.as_secs_f64() / bare.as_secs_f64();
        eprintln!(
            "[bench] {n} models, pair {} ({}): bare client {}, semops {} ({ratio:.3}x)",
            pair + 1,
            if bare_first {
                "bare client first"
            } else {
                "semops first"
            },
            secs(bare),
            secs(semops)
        );
        runs.push((bare, semops, ratio));
    }
    let mut ratios: Vec<f64> = runs.iter().map(|r| r.2).collect();
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];
    rows.push(Row(
        format!(
            "{n} models: semops cold start to all Ready ÷ the bare client, median of {pairs} alternating pairs (bare client s / semops s = ratio, in run order)"
        ),
        format!(
            "**{median:.3}x**; {}",
            runs.iter()
                .map(|(b, s, r)| format!(
                    "{:.1} / {:.1} = {r:.3}x",
                    b.as_secs_f64(),
                    s.as_secs_f64()
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ));
}

async fn run_scale(n: usize, rows: &mut Vec<Row>) {
    let first_row = rows.len();
    let env = env();
    let client = env.client().await;

    // 1. The limit: a bare client making semops's writes.
    let BarePhase {
        time: t_bare,
        busy: bare_busy,
        cpu: bare_cpu,
        ns: bare,
    } = bare_phase(env, &client, n).await;
    // The bare client's objects go before semops starts: they would otherwise share the API
    // server's memory and its namespace controller's deletion would share the cores (at 50,000
    // models the two namespaces held 300,000 objects and the API server 20 GiB).
    let bare_name = bare.name.clone();
    drop(bare);
    wait_deleted(env, &[bare_name]);

    // 2. semops from a cold start over the same number of models.
    let SemopsPhase {
        time: t_semops,
        busy: semops_busy,
        cpu: semops_cpu,
        peak_rss,
        mut op,
        ns,
    } = semops_phase(env, &client, n).await;
    eprintln!(
        "[bench] {n} models: semops cold start {} ({:.2}x); peak RSS {} MiB; cores busy {:.0}%; CPU-s {semops_cpu}",
        secs(t_semops),
        t_semops.as_secs_f64() / t_bare.as_secs_f64(),
        peak_rss / 1024,
        semops_busy * 100.0
    );
    let (_, cpu_bringup) = proc_stats(op.pid());
    // Writes per model: every write request the operator sent, from its own counter.
    let bringup = writes(&op);
    // Reads that are not watches: each acceptance needs the Catalog's Secret.
    let secret_gets = op.metric(
        "rest_client_requests_total",
        &["method=\"GET\"", "resource=\"secrets\""],
    );
    // The acceptance chain: mean reconcile time and the API requests in it.
    let mean_ms = |name: &str, filters: &[&str]| {
        let count = op.metric(&format!("{name}_count"), filters);
        1000.0 * op.metric(&format!("{name}_sum"), filters) / count.max(1.0)
    };
    let rest = "rest_client_request_duration_seconds";
    let chain = format!(
        "{:.2} reconciles per model, {:.1} ms each; in them Secret GET {:.1}, revision POST {:.1}, status PUT {:.1} ms; Event POST (queued) {:.1} ms",
        op.metric(
            "controller_runtime_reconcile_time_seconds_count",
            &["controller=\"semanticmodel\""]
        ) / n as f64,
        mean_ms(
            "controller_runtime_reconcile_time_seconds",
            &["controller=\"semanticmodel\""]
        ),
        mean_ms(rest, &["method=\"GET\"", "resource=\"secrets\""]),
        mean_ms(
            rest,
            &["method=\"POST\"", "resource=\"controllerrevisions\""]
        ),
        mean_ms(
            rest,
            &["method=\"PUT\"", "resource=\"semanticmodels/status\""]
        ),
        mean_ms(rest, &["method=\"POST\"", "resource=\"events\""]),
    );
    eprintln!("[bench] {n} models: bring-up means: {chain}");
    let revisions: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns.name);
    let revision_count = revisions
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .items
        .len();
    assert_eq!(
        revision_count, n,
        "one revision per model is left (a deleted and recreated revision would show here)"
    );
    same_writes_as_the_bare_client(&client, &ns.name).await;

    // 3. Steady state over a minute.
    let before = writes(&op);
    let (_, cpu0) = proc_stats(op.pid());
    tokio::time::sleep(Duration::from_secs(60)).await;
    let (rss_steady, cpu1) = proc_stats(op.pid());
    let anon_steady = anonymous_kib(op.pid());
    let heap_live = op.metric("semops_heap_allocated_bytes", &[]) as u64 / 1024;
    let heap_resident = op.metric("semops_heap_resident_bytes", &[]) as u64 / 1024;
    if std::env::var_os("SEMOPS_HEAP_PROFILE").is_some() {
        // `hack/bench --heap-profile`: the operator (built with it) dumps its live heap now.
        let pid = op.pid().to_string();
        assert!(
            std::process::Command::new("kill")
                .args(["-USR2", &pid])
                .status()
                .unwrap()
                .success()
        );
    }
    let after = writes(&op);
    let steady_writes = (after.all - after.leases) - (before.all - before.leases);
    let steady_leases = after.leases - before.leases;
    // Said at once: a later step that fails (at 50,000 models the API server ran out of memory
    // listing them) must not take these figures with it.
    eprintln!(
        "[bench] {n} models at steady state: RSS {} MiB (anonymous {} / allocator resident {} / live heap {} MiB); writes per model {:.2}; steady writes/min {steady_writes} (+ {steady_leases}); bring-up {cpu_bringup:.1} CPU-s; Secret GETs {secret_gets}",
        rss_steady / 1024,
        anon_steady / 1024,
        heap_resident / 1024,
        heap_live / 1024,
        (bringup.all - bringup.leases) / n as f64,
    );

    // A check round of `hr` (every model's sources are bound there): one catalog write, and no
    // model write when nothing drifted.
    let model_writes_before = op.metric("semops_status_writes_total", &["semanticmodel"]);
    let catalog_writes_before = op.metric("semops_status_writes_total", &["catalog"]);
    env.kubectl_ok(&[
        "annotate",
        "catalog",
        "hr",
        "-n",
        &ns.name,
        "semops.io/check-requested=bench",
        "--overwrite",
    ]);
    let round = eventually(Duration::from_secs(120), "round of hr", || {
        let out = env.kubectl_ok(&["get", "catalog", "hr", "-n", &ns.name, "-o", "json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        (v["status"]["lastCheck"]["trigger"] == "annotation:bench")
            .then(|| v["status"]["lastCheck"].clone())
    });
    tokio::time::sleep(Duration::from_secs(10)).await;
    let round_model_writes =
        op.metric("semops_status_writes_total", &["semanticmodel"]) - model_writes_before;
    let round_catalog_writes =
        op.metric("semops_status_writes_total", &["catalog"]) - catalog_writes_before;

    // 5. Source lookup through the live API, with a real token, vs kubectl + filter; both
    // sides' answers are checked per query against what the models' status says.
    let token = env.service_account_token(
        &ns.name,
        "bench-reader",
        "[{apiGroups: [semops.io], resources: [catalogs, semanticmodels], verbs: [get]}]",
        &[
            ("get", "catalogs.semops.io"),
            ("get", "semanticmodels.semops.io"),
        ],
    );
    let listing = list_all(&client, &ns.name).await;
    let table_of = |k: usize| format!("t{}", (k * 37) % TABLES);
    let lookup_path = |k: usize| {
        format!(
            "/api/metalakes/{}/objects/table/hr.bench.{}/semantic-model-datasets",
            ns.name,
            table_of(k)
        )
    };
    let port = op.api_port;
    // One request first, so the token's review is cached as it is for any steady client.
    let (code, body) = support::checks::request(port, "GET", &lookup_path(0), Some(&token), None);
    assert_eq!(code, 200, "{body}");
    let mut lookups = vec![];
    for k in 0..200 {
        let t = Instant::now();
        let (code, body) =
            support::checks::request(port, "GET", &lookup_path(k), Some(&token), None);
        lookups.push(t.elapsed());
        assert_eq!(code, 200, "{body}");
        let want = bound_pairs(&listing, &table_of(k));
        assert!(!want.is_empty(), "every benchmarked table is bound");
        assert_eq!(answered(&body), want, "lookup of {}", table_of(k));
    }
    let (lookup_p50, lookup_p99) = percentiles(lookups);
    // kubectl decodes every model of the namespace per query; above 10,000 models that costs
    // the API server and kubectl gigabytes for a comparison already made at 10,000.
    let baseline: Vec<Duration> = (0..if n <= KUBECTL_BASELINE_MAX { 3 } else { 0 })
        .map(|k| {
            let t = Instant::now();
            let out = env.kubectl_ok(&["get", "sm", "-n", &ns.name, "-o", "json"]);
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            let table = table_of(k);
            let hits = bound_pairs(&v, &table);
            let elapsed = t.elapsed();
            assert_eq!(
                hits,
                bound_pairs(&listing, &table),
                "kubectl lookup of {table}"
            );
            elapsed
        })
        .collect();
    let base_p50 = (!baseline.is_empty()).then(|| percentiles(baseline).0);

    // 6. Concurrent load (hack/bench --load), before the restart below replaces the process.
    // Once with a new connection per request, once with connections kept open.
    let loads: Vec<_> = load_settings()
        .into_iter()
        .flat_map(|(clients, secs)| [(clients, secs, false), (clients, secs, true)])
        .map(|(clients, secs, keep_alive)| {
            let probes_before = op.metric("semops_api_source_probes_total", &[]);
            let batches_before = op.metric("semops_api_source_probe_batches_total", &[]);
            let result = run_load(&op, &token, &ns.name, n, clients, secs, keep_alive);
            (
                clients,
                secs,
                keep_alive,
                result,
                op.metric("semops_api_source_probes_total", &[]) - probes_before,
                op.metric("semops_api_source_probe_batches_total", &[]) - batches_before,
            )
        })
        .collect();

    // 4. Restart: time until ready (caches synced) with n models.
    op.terminate();
    let restarted = Instant::now();
    let op2 = Operator::start(env, &env.kubeconfig, Some(&ns.name), &ns.name, &[]);
    let t_restart = restarted.elapsed();
    let writes_after_restart = {
        tokio::time::sleep(Duration::from_secs(20)).await;
        let w = writes(&op2);
        w.all - w.leases
    };
    drop(op2);

    let label = |s: &str| format!("{n} models: {s}");
    rows.push(Row(
        label("bare API server, revision + status + Event per model, to all Ready on a watch (the limit); cores busy"),
        format!("{}; {:.0}%", secs(t_bare), bare_busy * 100.0),
    ));
    rows.push(Row(
        label("semops, cold start to all Ready on the same watch; cores busy"),
        format!(
            "{} ({:.2}x the bare client); {:.0}%",
            secs(t_semops),
            t_semops.as_secs_f64() / t_bare.as_secs_f64(),
            semops_busy * 100.0
        ),
    ));
    let per = |x: f64| x / n as f64;
    rows.push(Row(
        label("write requests per model by semops, every answer counted (revision / status / Event); conflicts, deletes"),
        format!(
            "{:.2} ({:.2} / {:.2} / {:.2}); {}, {}",
            per(bringup.all - bringup.leases),
            per(bringup.revisions),
            per(bringup.model_status),
            per(bringup.events),
            bringup.conflicts,
            bringup.deletes
        ),
    ));
    rows.push(Row(
        label("CPU seconds by process: bare phase / semops phase"),
        format!("{bare_cpu} / {semops_cpu}"),
    ));
    rows.push(Row(
        label("bring-up means: reconcile, and the API requests in it"),
        chain,
    ));
    rows.push(Row(
        label("Secret GETs per model during bring-up (concurrent acceptances share one)"),
        format!("{:.3} ({secret_gets} in all)", per(secret_gets)),
    ));
    rows.push(Row(
        label("operator peak RSS during bring-up / RSS at steady state"),
        format!("{} MiB / {} MiB", peak_rss / 1024, rss_steady / 1024),
    ));
    rows.push(Row(
        label("at steady state: RSS that is anonymous memory / allocator resident / live heap"),
        format!(
            "{} / {} / {} MiB",
            anon_steady / 1024,
            heap_resident / 1024,
            heap_live / 1024
        ),
    ));
    rows.push(Row(
        label("operator CPU for the bring-up / at steady state"),
        format!(
            "{cpu_bringup:.1} CPU-s / {:.1}% of a core",
            (cpu1 - cpu0) / 60.0 * 100.0
        ),
    ));
    rows.push(Row(
        label("write requests per minute at steady state (+ Lease renewals)"),
        format!("{steady_writes} (+ {steady_leases})"),
    ));
    rows.push(Row(
        label("a check round over the sources of all models: probed / status writes (catalog, models)"),
        format!("{} / {round_catalog_writes}, {round_model_writes}", round["probed"]),
    ));
    rows.push(Row(
        label("restart: process start to ready (caches synced) / writes in the next 20 s"),
        format!("{} / {}", secs(t_restart), writes_after_restart.abs()),
    ));
    rows.push(Row(
        label("source lookup through the live API with a ServiceAccount token (incl. live probe), 200 queries, answers checked"),
        format!("p50 {} / p99 {}", ms(lookup_p50), ms(lookup_p99)),
    ));
    rows.push(Row(
        label("the same via `kubectl get sm -o json` + filter, answers checked"),
        match base_p50 {
            Some(base) => format!(
                "p50 {} ({:.0}x slower than the API p50)",
                ms(base),
                base.as_secs_f64() / lookup_p50.as_secs_f64()
            ),
            None => format!("not run above {KUBECTL_BASELINE_MAX} models"),
        },
    ));
    for (clients, secs, keep_alive, l, probes, batches) in loads {
        let total = l.latencies.len();
        let (p50, p99) = percentiles(l.latencies);
        let connections = if keep_alive {
            "connections kept open (hyper's client)"
        } else {
            "a new connection per request"
        };
        rows.push(Row(
            label(&format!("read API under load: {clients} clients for {secs} s on the same 2 cores (lookups, half of them of 16 hot tables; 1 in 10 a model read), real token, {connections}")),
            format!(
                "{:.0} requests/s, p50 {} / p99 {}, errors {} of {total}",
                total as f64 / secs as f64,
                ms(p50),
                ms(p99),
                l.errors
            ),
        ));
        rows.push(Row(
            label("under that load: operator CPU per 1,000 requests / peak RSS / live probes per lookup (single flight) / catalog queries per lookup (probes batched)"),
            format!(
                "{:.2} CPU-s / {} MiB / {:.2} ({probes} probes for {} lookups) / {:.2} ({batches} queries)",
                l.cpu_seconds / total.max(1) as f64 * 1000.0,
                l.peak_rss_kib / 1024,
                probes / l.lookups.max(1) as f64,
                l.lookups,
                batches / l.lookups.max(1) as f64
            ),
        ));
    }
    for Row(what, result) in &rows[first_row..] {
        eprintln!("[bench] | {what} | {result} |");
    }
    // The namespace controller deletes its objects in the background; the next count (and
    // the stale rounds) must not share the cores with it.
    let name = ns.name.clone();
    drop(ns);
    wait_deleted(env, &[name]);
}

/// The models of `ns` in the shape of `kubectl get -o json`, cut to what `bound_pairs` reads
/// (each model's name and source associations), listed in pages of 500. Whole objects would be
/// gigabytes at 50,000 models, taken from the memory the API server needs.
async fn list_all(client: &Client, ns: &str) -> serde_json::Value {
    let api: Api<SemanticModel> = Api::namespaced(client.clone(), ns);
    let mut items = vec![];
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await.unwrap();
        items.extend(page.items.iter().map(|m| {
            let whole = serde_json::to_value(m).unwrap();
            let associations: Vec<_> = whole["status"]["sourceAssociations"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| serde_json::json!({ "source": a["source"], "dataset": a["dataset"] }))
                .collect();
            serde_json::json!({
                "spec": { "name": whole["spec"]["name"] },
                "status": { "sourceAssociations": associations },
            })
        }));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => break,
        }
    }
    serde_json::json!({ "items": items })
}

/// Waits until the namespaces are gone (their objects deleted), saying how long it took.
fn wait_deleted(env: &support::Env, names: &[String]) {
    let started = Instant::now();
    for name in names {
        while env
            .kubectl(&["get", "namespace", name, "--ignore-not-found", "-o", "name"])
            .stdout
            .starts_with(b"namespace")
        {
            assert!(
                started.elapsed() < Duration::from_secs(3600),
                "namespace {name} was not deleted within an hour"
            );
            std::thread::sleep(Duration::from_secs(2));
        }
    }
    eprintln!(
        "[bench] namespaces {names:?} deleted in {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

/// `SEMOPS_BENCH_LOAD=CLIENTS:SECONDS` (hack/bench --load sets 64:30).
fn load_settings() -> Option<(usize, u64)> {
    let v = std::env::var("SEMOPS_BENCH_LOAD").ok()?;
    let (c, s) = v.split_once(':')?;
    Some((c.parse().ok()?, s.parse().ok()?))
}

struct Load {
    latencies: Vec<Duration>,
    errors: usize,
    lookups: usize,
    cpu_seconds: f64,
    peak_rss_kib: u64,
}

/// `clients` threads asking the operator's read API for `secs` with the ServiceAccount token,
/// each request on a new connection or (`keep_alive`) on the client's open one: source lookups (half of them of 16 hot tables, so
/// concurrent lookups of one source happen) and, one request in ten, a model read.
fn run_load(
    op: &Operator,
    token: &str,
    ns: &str,
    models: usize,
    clients: usize,
    secs: u64,
    keep_alive: bool,
) -> Load {
    let port = op.api_port;
    let deadline = Instant::now() + Duration::from_secs(secs);
    let (_, cpu0) = proc_stats(op.pid());
    let pid = op.pid();
    let sampler = std::thread::spawn(move || {
        let mut peak = 0;
        while Instant::now() < deadline {
            peak = proc_stats(pid).0.max(peak);
            std::thread::sleep(Duration::from_millis(200));
        }
        peak
    });
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let (token, ns) = (token.to_string(), ns.to_string());
            std::thread::spawn(move || {
                let (mut latencies, mut errors, mut lookups) = (vec![], 0, 0);
                let mut client = keep_alive.then(|| KeepAlive::new(port, &token));
                let mut k = c;
                while Instant::now() < deadline {
                    let path = match k % 10 {
                        9 => format!(
                            "/api/metalakes/{ns}/catalogs/analytics/schemas/semantic/semantic-models/model_{}",
                            k % models
                        ),
                        even if even % 2 == 0 => format!(
                            "/api/metalakes/{ns}/objects/table/hr.bench.t{}/semantic-model-datasets",
                            (k / 10) % 16
                        ),
                        _ => format!(
                            "/api/metalakes/{ns}/objects/table/hr.bench.t{}/semantic-model-datasets",
                            (k * 37) % TABLES
                        ),
                    };
                    lookups += usize::from(k % 10 != 9);
                    let t = Instant::now();
                    let ok = match &mut client {
                        Some(c) => c.get_ok(&path),
                        None => support::checks::request(port, "GET", &path, Some(&token), None).0 == 200,
                    };
                    latencies.push(t.elapsed());
                    errors += usize::from(!ok);
                    k += clients;
                }
                (latencies, errors, lookups)
            })
        })
        .collect();
    let mut load = Load {
        latencies: vec![],
        errors: 0,
        lookups: 0,
        cpu_seconds: 0.0,
        peak_rss_kib: 0,
    };
    for w in workers {
        let (l, e, n) = w.join().unwrap();
        load.latencies.extend(l);
        load.errors += e;
        load.lookups += n;
    }
    load.peak_rss_kib = sampler.join().unwrap();
    load.cpu_seconds = proc_stats(op.pid()).1 - cpu0;
    load
}

/// One client's HTTP/1.1 connection (hyper's client), kept open across requests the way
/// kubectl and client libraries keep theirs; reopened after an error.
struct KeepAlive {
    rt: tokio::runtime::Runtime,
    port: u16,
    auth: String,
    sender:
        Option<hyper::client::conn::http1::SendRequest<http_body_util::Empty<hyper::body::Bytes>>>,
}

impl KeepAlive {
    fn new(port: u16, token: &str) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Self {
            rt,
            port,
            auth: format!("Bearer {token}"),
            sender: None,
        }
    }

    /// Whether `GET path` answered 200 with its whole body read.
    fn get_ok(&mut self, path: &str) -> bool {
        let (port, auth) = (self.port, self.auth.clone());
        let mut sender = self.sender.take();
        let (ok, sender) = self
            .rt
            .block_on(async move {
                if sender.is_none() {
                    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                        .await
                        .ok()?;
                    let (s, conn) =
                        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                            .await
                            .ok()?;
                    tokio::spawn(conn);
                    sender = Some(s);
                }
                let mut s = sender?;
                let req = hyper::Request::get(path)
                    .header("host", "localhost")
                    .header("authorization", auth)
                    .body(http_body_util::Empty::new())
                    .unwrap();
                let res = s.send_request(req).await.ok()?;
                let ok = res.status() == 200;
                let body = http_body_util::BodyExt::collect(res.into_body()).await.ok();
                Some((ok && body.is_some(), s))
            })
            .map_or((false, None), |(ok, s)| (ok, Some(s)));
        self.sender = sender;
        ok
    }
}

/// The catalog server a stale round runs against.
#[derive(Clone, Copy)]
enum Engine {
    Postgres,
    MariaDb,
}

/// Two Catalogs of 5,000 registrations on 10,000 real tables, one round each, at once.
async fn run_round(rows: &mut Vec<Row>, engine: Engine) {
    let env = env();
    let ns = env.namespace("round");
    let n = &ns.name;
    let regs = |from: usize| {
        let list = (from..from + 5000)
            .map(|i| format!("{{kind: Table, schema: round, name: r{i}}}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!("[{list}]")
    };
    let (server, catalogs, user, password) = match engine {
        Engine::Postgres => {
            let pg = postgres();
            pg.psql("hr", "CREATE SCHEMA IF NOT EXISTS round; DO $$ BEGIN FOR i IN 0..9999 LOOP EXECUTE format('CREATE TABLE IF NOT EXISTS round.r%s(id int)', i); END LOOP; END $$;");
            let catalogs = ["a", "b"].map(|c| {
                let from = if c == "a" { 0 } else { 5000 };
                support::checks::catalog_yaml(n, c, "hr", pg.port, &regs(from), "")
            });
            ("PostgreSQL", catalogs.join("---\n"), "postgres", "postgres")
        }
        Engine::MariaDb => {
            let db = mariadb();
            // 10,000 CREATE TABLEs are longer than one argument may be: a script, sourced.
            let script = std::path::Path::new(support::ROOT).join("target/bench/round.sql");
            std::fs::create_dir_all(script.parent().unwrap()).unwrap();
            let ddl: String = (0..10_000)
                .map(|i| format!("CREATE TABLE IF NOT EXISTS round.r{i}(id int);\n"))
                .collect();
            std::fs::write(
                &script,
                format!("CREATE DATABASE IF NOT EXISTS round;\n{ddl}"),
            )
            .unwrap();
            db.mysql(&format!("source {}", script.display()));
            env.apply_ok(&support::ca_secret(n, "mdb-ca", &db.ca_pem()));
            let catalogs = ["a", "b"].map(|c| {
                let from = if c == "a" { 0 } else { 5000 };
                format!(
                    "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: {c}, namespace: {n}}}\nspec:\n  provider: mysql\n  connection: {{host: localhost, port: {port}, database: round, tls: {{caSecretRef: {{name: mdb-ca}}}}, credentialsSecretRef: {{name: wh-reader}}}}\n  registrations: {regs}\n",
                    port = db.port,
                    regs = regs(from)
                )
            });
            let (user, password) = (db.admin_user, db.admin_password);
            ("MariaDB", catalogs.join("---\n"), user, password)
        }
    };
    env.apply_ok(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: wh-reader, namespace: {n}, labels: {{semops.io/catalog-credentials: \"true\"}}, annotations: {{semops.io/allowed-hosts: \"localhost,127.0.0.0/8,::1\"}}}}\nstringData: {{username: {user}, password: {password}}}\n---\n{catalogs}"
    ));
    let op = Operator::start(env, &env.kubeconfig, Some(n), n, &[]);
    // Both Catalogs configured (connected, registrations accepted) before the clock starts.
    for c in ["a", "b"] {
        eventually(Duration::from_secs(300), "catalog ready", || {
            let out = env.kubectl_ok(&["get", "catalog", c, "-n", n, "-o", "json"]);
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            v["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
                .then_some(())
        });
    }
    let started = Instant::now();
    for c in ["a", "b"] {
        env.kubectl_ok(&[
            "annotate",
            "catalog",
            c,
            "-n",
            n,
            "semops.io/check-requested=bench",
            "--overwrite",
        ]);
    }
    for c in ["a", "b"] {
        let status = eventually(Duration::from_secs(300), "round", || {
            let out = env.kubectl_ok(&["get", "catalog", c, "-n", n, "-o", "json"]);
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            (v["status"]["lastCheck"]["trigger"] == "annotation:bench").then(|| v["status"].clone())
        });
        assert_eq!(
            status["lastCheck"]["result"], "Completed",
            "{server} round of {c}"
        );
        assert_eq!(status["lastCheck"]["probed"], 5000);
    }
    let wall = started.elapsed();
    // Each round logs its own duration (took_ms) in its summary line.
    let took_ms: Vec<u64> = op
        .logs()
        .lines()
        .filter(|l| l.contains("\"check round\""))
        .filter(|l| l.contains("annotation:bench"))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["took_ms"].as_u64())
        .collect();
    rows.push(Row(
        format!("stale round, 10,000 registrations (2 Catalogs x 5,000) on local {server}, default concurrency"),
        format!(
            "rounds took {took_ms:?} ms (run at once); {} from annotation to both recorded in status; probe requests: {}",
            secs(wall),
            op.metric("semops_probes_total", &[])
        ),
    ));
}

fn main() {
    if std::env::var_os("SEMOPS_BENCH_SCALE").is_none() {
        eprintln!(
            "the scale benchmark starts a control plane and takes minutes: run it with hack/bench"
        );
        return;
    }
    let counts: Vec<usize> = std::env::var("SEMOPS_BENCH_MODELS")
        .unwrap_or_else(|_| "1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|n| *n > 0)
        .collect();
    // `SEMOPS_BENCH_PAIRS=5` (hack/bench --pairs 5): only the cold-start ratio, as a median.
    let pairs: Option<usize> = std::env::var("SEMOPS_BENCH_PAIRS")
        .ok()
        .and_then(|p| p.parse().ok());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut rows = vec![];
    runtime.block_on(async {
        let pg = postgres();
        pg.psql("hr", &format!("CREATE SCHEMA IF NOT EXISTS bench; DO $$ BEGIN FOR i IN 0..{} LOOP EXECUTE format('CREATE TABLE IF NOT EXISTS bench.t%s(id int)', i); END LOOP; END $$;", TABLES - 1));
        if let Some(pairs) = pairs {
            for n in counts {
                eprintln!("[bench] {n} models, {pairs} alternating pairs");
                run_pairs(n, pairs, &mut rows).await;
            }
            return;
        }
        for n in counts {
            eprintln!("[bench] {n} models");
            run_scale(n, &mut rows).await;
        }
        for engine in [Engine::Postgres, Engine::MariaDb] {
            eprintln!("[bench] stale round");
            run_round(&mut rows, engine).await;
        }
    });
    let mut table = String::from("| measurement | result |\n| --- | --- |\n");
    for Row(what, result) in &rows {
        table.push_str(&format!("| {what} | {result} |\n"));
    }
    print!("{table}");
    let dir = std::path::Path::new(support::ROOT).join("target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("scale.md"), &table).unwrap();
}

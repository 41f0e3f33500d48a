//! Failure scenarios shared by the end-to-end suites (a small scale, on every CI run) and the
//! drills (a large scale, by `hack/drill`): leader failover with a frozen leader, and a relist
//! after watch expiry. Each returns what it observed; the caller asserts and records.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use semops::crd::SemanticModel;
use serde_json::Value;

use super::{Env, Operator, ROOT, eventually, examples_in};

/// Tables `drill.t0` … `drill.t49` in the `hr` database (the sources of [`model_yaml`]).
pub fn drill_tables() {
    super::db::postgres().psql(
        "hr",
        "CREATE SCHEMA IF NOT EXISTS drill; DO $$ BEGIN FOR i IN 0..49 LOOP EXECUTE format('CREATE TABLE IF NOT EXISTS drill.t%s(id int)', i); END LOOP; END $$;",
    );
}

/// The examples without their models.
pub fn catalogs_only(ns: &str) -> String {
    examples_in(ns)
        .split("\n---\n")
        .filter(|d| !d.contains("kind: SemanticModel"))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Model `model-{i}` with `metrics` metrics `m0`…, over two of the drill tables.
pub fn model_yaml(ns: &str, i: usize, metrics: usize) -> String {
    let ms: Vec<String> = (0..metrics)
        .map(|k| format!("{{name: m{k}, expression: {{dialects: [{{dialect: ANSI_SQL, expression: \"SUM(a.id) + {k}\"}}]}}}}"))
        .collect();
    format!(
        "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: model-{i}, namespace: {ns}}}\nspec:\n  catalog: analytics\n  schema: semantic\n  name: model_{i}\n  definition:\n    datasets: [{{name: a, source: hr.drill.t{}}}, {{name: b, source: hr.drill.t{}}}]\n    metrics: [{}]\n",
        i % 50,
        (i * 7 + 3) % 50,
        ms.join(", ")
    )
}

/// Every model accepted at its latest generation, Ready, with all its metrics.
pub fn converged(models: &[SemanticModel]) -> bool {
    models.iter().all(|m| {
        m.status.as_ref().is_some_and(|s| {
            s.accepted_generation == m.metadata.generation
                && semops::crd::conditions::is_true(
                    &s.conditions,
                    semops::crd::conditions::ConditionType::Ready,
                )
                && s.metrics.len() == m.spec.definition.metrics.as_ref().map_or(0, Vec::len)
        })
    })
}

pub fn sig(pid: u32, signal: &str) {
    std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
}

pub fn leader_of(ops: &[Operator]) -> Option<usize> {
    ops.iter().position(|o| o.is_leading())
}

pub fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

/// What a failover run observed.
#[derive(Debug)]
pub struct Failover {
    /// Seconds from each SIGKILL of the leader to the edit accepted by its successor.
    pub takeovers: Vec<f64>,
    /// Status writes the frozen leader's process made after it was stopped.
    pub frozen_writes: f64,
    /// Whether that process exposed the write counter at all (a zero means something).
    pub frozen_series_seen: bool,
    /// The model's accepted state went back after the frozen leader resumed.
    pub harmful: usize,
    /// Ids of metrics that stayed, changed across acceptances (lost).
    pub ids_lost: usize,
    /// Ids held by two metrics at once.
    pub ids_duplicated: usize,
    /// Ids that came back for another metric after being seen.
    pub ids_reused: usize,
    /// Metric ids checked.
    pub ids_checked: usize,
}

/// Three replicas with election on (lease 3 s) and a model edited once per kill, each edit
/// adding a metric: the leader is SIGKILLed `kills` times (a new replica replaces it), then a
/// leader is frozen (SIGSTOP) past its lease while the model is edited, then resumed.
pub fn failover(env: &'static Env, kills: usize) -> Failover {
    drill_tables();
    let ns = env.namespace("failover");
    env.apply_ok(&catalogs_only(&ns.name));
    env.apply_ok(&model_yaml(&ns.name, 0, 1));
    let args = ["--lease-duration-seconds", "3", "--api-auth", "none"];
    let start = || Operator::start(env, &env.kubeconfig, Some(&ns.name), &ns.name, &args);
    let mut ops = vec![start(), start(), start()];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api: Api<SemanticModel> = Api::namespaced(rt.block_on(env.client()), &ns.name);
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut every_id: HashMap<String, String> = HashMap::new();
    let (mut lost, mut duplicated, mut reused) = (0, 0, 0);
    let mut accepted = |generation: i64| {
        let status = eventually(Duration::from_secs(60), "edit accepted", || {
            let m = rt.block_on(api.get("model-0")).ok()?;
            let s = m.status?;
            (s.accepted_generation == Some(generation)).then_some(s)
        });
        let now: HashMap<String, String> = status
            .metrics
            .iter()
            .map(|m| (m.name.to_string(), m.id.to_string()))
            .collect();
        for (name, id) in &ids {
            if now.get(name) != Some(id) {
                lost += 1;
            }
        }
        let distinct: HashSet<&String> = now.values().collect();
        duplicated += now.len() - distinct.len();
        for (name, id) in &now {
            if every_id.get(id).is_some_and(|owner| owner != name) {
                reused += 1;
            }
            every_id.insert(id.clone(), name.clone());
        }
        ids = now;
        status
    };
    let edit = |metrics: usize| -> i64 {
        let yaml = model_yaml(&ns.name, 0, metrics);
        let spec: Value = serde_json::to_value(
            serde_saphyr::from_str::<serde_json::Value>(&yaml).unwrap()["spec"].clone(),
        )
        .unwrap();
        let m = rt
            .block_on(api.patch(
                "model-0",
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({ "spec": spec })),
            ))
            .unwrap();
        m.metadata.generation.unwrap()
    };
    accepted(1);
    let mut metrics = 1;
    let mut takeovers = vec![];
    for _ in 0..kills {
        let i = eventually(Duration::from_secs(30), "a leader", || leader_of(&ops));
        let mut old = ops.remove(i);
        let t0 = Instant::now();
        old.kill();
        metrics += 1;
        let generation = edit(metrics);
        accepted(generation);
        takeovers.push(t0.elapsed().as_secs_f64());
        ops.push(start());
    }

    // The frozen leader: stopped past its lease, the model edited meanwhile, then resumed.
    let i = eventually(Duration::from_secs(30), "a leader", || leader_of(&ops));
    let frozen_series_seen = super::describes(&ops[i].scrape(), "semops_status_writes_total");
    let writes_before = ops[i].metric("semops_status_writes_total", &[]);
    let frozen_pid = ops[i].pid();
    sig(frozen_pid, "STOP");
    // Another replica leads only after the frozen one's lease expired.
    let successor = eventually(Duration::from_secs(60), "a successor", || {
        ops.iter()
            .enumerate()
            .find(|(k, o)| *k != i && o.is_leading())
            .map(|(k, _)| k)
    });
    metrics += 1;
    let generation = edit(metrics);
    let revision = accepted(generation).revision;
    sig(frozen_pid, "CONT");
    // Resumed, it finds it no longer leads; whatever it had in flight was refused by then.
    eventually(
        Duration::from_secs(60),
        "the resumed process stands by",
        || (!ops[i].is_leading()).then_some(()),
    );
    // One more edit, accepted by the successor while the resumed process runs.
    metrics += 1;
    let last = edit(metrics);
    accepted(last);
    assert!(ops[successor].is_leading(), "the successor still leads");
    let frozen_writes = ops[i].metric("semops_status_writes_total", &[]) - writes_before;
    let after = rt.block_on(api.get("model-0")).unwrap().status.unwrap();
    let harmful = usize::from(after.revision < revision || after.accepted_generation != Some(last));
    Failover {
        takeovers,
        frozen_writes,
        frozen_series_seen,
        harmful,
        ids_lost: lost,
        ids_duplicated: duplicated,
        ids_reused: reused,
        ids_checked: every_id.len(),
    }
}

/// What a relist run observed.
#[derive(Debug)]
pub struct Relist {
    pub missing: usize,
    pub ghosts: usize,
    pub stale_definitions: usize,
    /// Seconds from resuming to everything served correctly, if it happened within 180 s.
    pub converged_after: Option<f64>,
    pub watch_errors: usize,
    pub watches_restarted: f64,
}

/// One operator (election off) serving `n` models is frozen while `n / 2` are created, `n / 4`
/// deleted and `n / 4` edited; etcd is compacted past its watch and the API server restarted,
/// so its watches expire (410) and it relists. Compared: what its read API serves after
/// resuming with what must exist.
pub fn relist(env: &'static Env, n: usize) -> Relist {
    drill_tables();
    let ns = env.namespace("relist");
    env.apply_ok(&catalogs_only(&ns.name));
    let op = Operator::start(
        env,
        &env.kubeconfig,
        Some(&ns.name),
        &ns.name,
        &["--leader-elect=false", "--api-auth", "none"],
    );
    let (quarter, half) = (n / 4, n / 2);
    for i in 0..n {
        env.apply_ok(&model_yaml(&ns.name, i, 1));
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let api: Api<SemanticModel> = Api::namespaced(rt.block_on(env.client()), &ns.name);
    let list = || rt.block_on(api.list(&ListParams::default())).unwrap().items;
    eventually(Duration::from_secs(300), "models ready", || {
        let all = list();
        (all.len() == n && converged(&all)).then_some(())
    });

    sig(op.pid(), "STOP");
    for i in n..n + half {
        env.apply_ok(&model_yaml(&ns.name, i, 1));
    }
    for i in 0..quarter {
        env.kubectl_ok(&[
            "delete",
            "sm",
            &format!("model-{i}"),
            "-n",
            &ns.name,
            "--wait=false",
        ]);
    }
    for i in quarter..half {
        env.apply_ok(&model_yaml(&ns.name, i, 2));
    }
    // Compact etcd at its current revision (through its JSON gateway), restart the API server.
    let cluster = env.work_dir.join("cluster");
    let etcd = std::fs::read_to_string(cluster.join("env"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("SEMOPS_ETCD=").map(str::to_string))
        .unwrap();
    let curl = |path: &str, body: &str| -> Value {
        let out = std::process::Command::new("curl")
            .args(["-fsS", "-X", "POST", &format!("{etcd}{path}"), "-d", body])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let revision = curl("/v3/kv/range", r#"{"key":"AA=="}"#)["header"]["revision"]
        .as_str()
        .unwrap()
        .to_string();
    curl(
        "/v3/kv/compaction",
        &format!(r#"{{"revision":"{revision}","physical":true}}"#),
    );
    let restart = std::process::Command::new(format!("{ROOT}/hack/cluster"))
        .args(["restart-apiserver", cluster.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(restart.success());
    let resumed = Instant::now();
    sig(op.pid(), "CONT");
    let expected: HashSet<String> = (quarter..n + half).map(|i| format!("model_{i}")).collect();
    let served = || -> Option<HashSet<String>> {
        let (code, body) = super::checks::request(
            op.api_port,
            "GET",
            &format!(
                "/api/metalakes/{}/catalogs/analytics/schemas/semantic/semantic-models",
                ns.name
            ),
            None,
            None,
        );
        let v: Value = serde_json::from_str(&body).ok()?;
        (code == 200).then(|| {
            v["identifiers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|i| i["name"].as_str().map(str::to_string))
                .collect()
        })
    };
    let edited_metrics_served = || -> Option<usize> {
        let (code, body) = super::checks::request(
            op.api_port,
            "GET",
            &format!(
                "/api/metalakes/{}/catalogs/analytics/schemas/semantic/semantic-model-metrics",
                ns.name
            ),
            None,
            None,
        );
        (code == 200).then(|| body.matches("\"name\":\"m1\"").count())
    };
    let edited = half - quarter;
    let mut converged_after = None;
    while resumed.elapsed() < Duration::from_secs(180) {
        if served().as_ref() == Some(&expected)
            && edited_metrics_served() == Some(edited)
            && converged(&list())
        {
            converged_after = Some(resumed.elapsed().as_secs_f64());
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    // The figures come from answers that were read: an unreadable answer is not "0 missing".
    let got = served().expect("the read API answers the model list");
    let edited_served = edited_metrics_served().expect("the read API answers the metric list");
    Relist {
        missing: expected.difference(&got).count(),
        ghosts: got.difference(&expected).count(),
        stale_definitions: edited - edited_served.min(edited),
        converged_after,
        watch_errors: op.logs().matches("watch failed").count(),
        watches_restarted: op.metric("semops_watch_restarts_total", &[]),
    }
}

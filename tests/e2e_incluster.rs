//! The chart's Pods on a real node (hack/node: containerd, CNI, kubelet, kube-proxy) running the
//! image hack/image built, as users run semops: install, two replicas and one leader, the
//! examples, the read API through the Kubernetes API server (aggregated API) with client-certificate,
//! ServiceAccount and unauthorized users and on its HTTPS port with a semops-audience token, the Pod's
//! security context, the leader's Pod deleted under edits, a rolling `helm upgrade` to another
//! image tag with never two writers, `helm test`, and `helm uninstall` without a hanging
//! namespace. One scenario, in order: each step builds on the last.

mod support;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Env, eventually, examples_for_pods, node_env, wait_ready};

const RELEASE: &str = "semops";
const SYSTEM: &str = "semops-system";

fn helm(env: &Env, args: &[&str]) -> String {
    let out = env.tool("helm").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "helm {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json(env: &Env, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&env.kubectl_ok(&all)).unwrap()
}

/// The operator's Pods: (name, IP, ready).
fn pods(env: &Env) -> Vec<(String, String, bool)> {
    json(
        env,
        &[
            "get",
            "pods",
            "-n",
            SYSTEM,
            "-l",
            "app.kubernetes.io/name=semops",
        ],
    )["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            let ready = p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            (
                p["metadata"]["name"].as_str().unwrap().to_string(),
                p["status"]["podIP"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                ready,
            )
        })
        .collect()
}

fn leader(env: &Env) -> String {
    env.kubectl_ok(&[
        "get",
        "lease",
        "semops-leader",
        "-n",
        SYSTEM,
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ])
}

fn two_ready(env: &Env) -> Vec<(String, String, bool)> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let p = pods(env);
        if p.len() == 2 && p.iter().all(|x| x.2) {
            return p;
        }
        if Instant::now() > deadline {
            let describe = env.kubectl(&["describe", "pods", "-n", SYSTEM]);
            let logs = env.kubectl(&[
                "logs",
                "-n",
                SYSTEM,
                "-l",
                "app.kubernetes.io/name=semops",
                "--tail=30",
                "--prefix",
            ]);
            panic!(
                "timed out waiting for 2/2 replicas Ready: {p:?}\n{}\n{}",
                String::from_utf8_lossy(&describe.stdout),
                String::from_utf8_lossy(&logs.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Metric ids of every model in `ns`: (model, metric) -> id.
fn metric_ids(env: &Env, ns: &str) -> HashMap<(String, String), String> {
    json(env, &["get", "sm", "-n", ns])["items"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| {
            let model = m["metadata"]["name"].as_str().unwrap().to_string();
            m["status"]["metrics"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |i| {
                    (
                        (model.clone(), i["name"].as_str().unwrap().to_string()),
                        i["id"].as_str().unwrap().to_string(),
                    )
                })
        })
        .collect()
}

fn model(ns: &str, i: usize, metrics: usize) -> String {
    let ms: Vec<String> = (0..metrics)
        .map(|k| format!("{{name: m{k}, expression: {{dialects: [{{dialect: ANSI_SQL, expression: \"COUNT(*) + {k}\"}}]}}}}"))
        .collect();
    format!(
        "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: load-{i}, namespace: {ns}}}\nspec:\n  catalog: analytics\n  schema: semantic\n  definition:\n    datasets: [{{name: e, source: hr.public.employees}}]\n    metrics: [{}]\n",
        ms.join(", ")
    )
}

/// Every model in `ns` accepted at its latest generation with `metrics` metrics.
fn all_accepted(env: &Env, ns: &str, metrics: usize) -> bool {
    json(env, &["get", "sm", "-n", ns])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["metadata"]["name"].as_str().unwrap().starts_with("load-"))
        .all(|m| {
            m["status"]["acceptedGeneration"] == m["metadata"]["generation"]
                && m["status"]["metrics"].as_array().map_or(0, Vec::len) == metrics
        })
}

/// Ids may only be added: a kept (model, metric) keeps its id and no id names two metrics.
fn assert_ids_only_grew(
    before: &HashMap<(String, String), String>,
    after: &HashMap<(String, String), String>,
) {
    for (k, id) in before {
        assert_eq!(after.get(k), Some(id), "{k:?}: id lost or changed");
    }
    let unique: HashSet<&String> = after.values().collect();
    assert_eq!(unique.len(), after.len(), "an id names two metrics");
}

/// The Pods that wrote status, in the API server's audit log order (their ServiceAccount tokens
/// are bound to the Pod, whose name the API server records with the user).
fn status_writers(env: &Env) -> Vec<String> {
    let log = std::fs::read_to_string(env.audit_log.as_ref().unwrap()).unwrap();
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["verb"] == "update"
                && e["objectRef"]["apiGroup"] == "semops.io"
                && e["objectRef"]["subresource"] == "status"
                && e["responseStatus"]["code"] == 200
        })
        .map(|e| {
            e["user"]["extra"]["authentication.kubernetes.io/pod-name"][0]
                .as_str()
                .unwrap_or("(not a Pod)")
                .to_string()
        })
        .collect()
}

/// Never two writers: once another replica has written, an earlier writer never writes again.
fn assert_writers_never_interleave(writers: &[String]) {
    let mut finished: Vec<&String> = vec![];
    let mut current: Option<&String> = None;
    for w in writers {
        if current != Some(w) {
            assert!(
                !finished.contains(&w),
                "{w} wrote again after another replica took over: {writers:?}"
            );
            if let Some(c) = current {
                finished.push(c);
            }
            current = Some(w);
        }
    }
}

/// `kubectl port-forward svc/semops` on a free local port, until dropped.
struct Forward(Child, u16);

impl Forward {
    fn start(env: &Env, target: u16) -> Forward {
        let mut child = env
            .tool("kubectl")
            .args([
                "port-forward",
                "-n",
                SYSTEM,
                &format!("svc/{RELEASE}"),
                &format!(":{target}"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        // Keep reading: kubectl logs each connection, and dies of a closed pipe otherwise.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        // "Forwarding from 127.0.0.1:PORT -> TARGET"
        let port = line
            .split("127.0.0.1:")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("port-forward said {line:?}"));
        Forward(child, port)
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_chart_runs_for_real_from_install_to_uninstall() {
    let env = node_env();
    let chart = format!("{}/charts/semops", support::ROOT);

    // Install: the CRDs come with the chart; the image is the one hack/image built.
    helm(
        env,
        &[
            "install",
            RELEASE,
            &chart,
            "-n",
            SYSTEM,
            "--create-namespace",
            "--set",
            "image.pullPolicy=Never",
            "--set",
            "leaderElection.leaseDurationSeconds=6",
        ],
    );
    let replicas = two_ready(env);
    let holder = eventually(Duration::from_secs(60), "a leader", || {
        let l = leader(env);
        (!l.is_empty()).then_some(l)
    });
    assert!(
        replicas.iter().any(|p| p.0 == holder),
        "the Lease names one of the replicas: {holder} vs {replicas:?}"
    );

    // The examples become Ready, reconciled by the Pods.
    let app = env.namespace("app");
    env.apply_ok(&examples_for_pods(&app.name));
    for (what, reason) in [
        ("sm/employee-analysis", "Accepted"),
        ("cat/hr", "Configured"),
        ("cat/analytics", "Configured"),
        ("rpol/strict", "Valid"),
    ] {
        wait_ready(env, &app.name, what, "True", reason);
    }

    // The Pod's security context really applies: uid 65532, read-only root filesystem. The
    // processes are this chart's Pods' own (by the Pod uid in their cgroup), not any
    // `semops run` that happens to run on the machine.
    let pod_uids: Vec<String> = json(
        env,
        &[
            "get",
            "pods",
            "-n",
            SYSTEM,
            "-l",
            "app.kubernetes.io/name=semops",
        ],
    )["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(pod_uids.len(), 2, "two operator Pods");
    let in_our_pods = |pid: &str| {
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        pod_uids
            .iter()
            .any(|uid| cgroup.contains(uid) || cgroup.contains(&uid.replace('-', "_")))
    };
    let ps = Command::new("ps")
        .args(["-eo", "pid=,uid=,args="])
        .output()
        .unwrap();
    let ours: Vec<(String, String)> = String::from_utf8_lossy(&ps.stdout)
        .lines()
        .filter(|l| l.contains("/semops run"))
        .map(|l| {
            let mut f = l.split_whitespace();
            (f.next().unwrap().to_string(), f.next().unwrap().to_string())
        })
        .filter(|(pid, _)| in_our_pods(pid))
        .collect();
    assert_eq!(ours.len(), 2, "one operator process in each of our Pods");
    for (pid, uid) in &ours {
        assert_eq!(uid, "65532", "process {pid}");
        let mounts = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
        let root = mounts
            .lines()
            .find(|l| l.split_whitespace().nth(4) == Some("/"))
            .unwrap();
        assert!(
            root.split_whitespace()
                .nth(5)
                .unwrap()
                .split(',')
                .any(|o| o == "ro"),
            "process {pid}: the root filesystem is writable: {root}"
        );
    }

    read_api_through_the_api_server(env, &app.name);
    read_api_on_the_direct_port(env, &app.name);
    namespace_roles(env, &app.name);

    // The leader's Pod is deleted while models are edited: the other replica takes over, every
    // edit is accepted, no metric id is lost, reused or duplicated.
    for i in 0..8 {
        env.apply_ok(&model(&app.name, i, 1));
    }
    eventually(Duration::from_secs(120), "load models accepted", || {
        all_accepted(env, &app.name, 1).then_some(())
    });
    let before = metric_ids(env, &app.name);
    let old_leader = leader(env);
    let deleting = Instant::now();
    env.kubectl_ok(&["delete", "pod", &old_leader, "-n", SYSTEM, "--wait=false"]);
    for i in 0..8 {
        env.apply_ok(&model(&app.name, i, 2));
    }
    let new_leader = eventually(Duration::from_secs(120), "another replica leads", || {
        let l = leader(env);
        (!l.is_empty() && l != old_leader).then_some(l)
    });
    eventually(
        Duration::from_secs(180),
        "edits made during the takeover accepted",
        || all_accepted(env, &app.name, 2).then_some(()),
    );
    println!(
        "takeover: {new_leader} leads after {old_leader}'s Pod was deleted; edits accepted {:?} after the delete",
        deleting.elapsed()
    );
    let after_failover = metric_ids(env, &app.name);
    assert_ids_only_grew(&before, &after_failover);
    two_ready(env);

    // A rolling upgrade to another image tag (and chart version, so the CRDs change): the
    // Deployment rolls, the CRDs are updated, edits keep being accepted, never two writers.
    let archive = Command::new(format!("{}/hack/image", support::ROOT))
        .arg("--print")
        .output()
        .unwrap();
    let archive = String::from_utf8(archive.stdout)
        .unwrap()
        .trim()
        .to_string();
    let tagged = Command::new("ctr")
        .args(["--address", support::NODE_CONTAINERD_SOCKET])
        .args(["-n", "k8s.io", "images", "tag", "--force"])
        .arg(format!(
            "ghcr.io/semops/semops:{}",
            env!("CARGO_PKG_VERSION")
        ))
        .arg(format!(
            "ghcr.io/semops/semops:{}-next",
            env!("CARGO_PKG_VERSION")
        ))
        .status()
        .unwrap();
    assert!(tagged.success(), "tagging {archive}");
    let next_chart = env.work_dir.join("chart-next");
    let copied = Command::new("cp")
        .args(["-r", &chart])
        .arg(&next_chart)
        .status()
        .unwrap();
    assert!(copied.success());
    let chart_yaml = next_chart.join("Chart.yaml");
    let text = std::fs::read_to_string(&chart_yaml).unwrap();
    std::fs::write(
        &chart_yaml,
        text.replace("version: 0.2.0", "version: 0.2.1"),
    )
    .unwrap();
    let writers_before = status_writers(env).len();
    let ids_before = metric_ids(env, &app.name);
    for i in 0..8 {
        env.apply_ok(&model(&app.name, i, 3));
    }
    helm(
        env,
        &[
            "upgrade",
            RELEASE,
            next_chart.to_str().unwrap(),
            "-n",
            SYSTEM,
            "--reuse-values",
            "--set",
            &format!("image.tag={}-next", env!("CARGO_PKG_VERSION")),
        ],
    );
    // Edits keep coming while the Deployment rolls (a comment each: a new revision each).
    let rolling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let editor = {
        let (rolling, ns) = (rolling.clone(), app.name.clone());
        std::thread::spawn(move || {
            let mut edits = 0;
            while rolling.load(std::sync::atomic::Ordering::Relaxed) {
                let i = edits % 8;
                let yaml = model(&ns, i, 4).replace(
                    "  catalog: analytics\n",
                    &format!("  catalog: analytics\n  comment: edit {edits}\n"),
                );
                node_env().apply_ok(&yaml);
                edits += 1;
            }
            edits
        })
    };
    env.kubectl_ok(&[
        "rollout",
        "status",
        "deployment",
        RELEASE,
        "-n",
        SYSTEM,
        "--timeout=180s",
    ]);
    rolling.store(false, std::sync::atomic::Ordering::Relaxed);
    let edits = editor.join().unwrap();
    println!("{edits} edits during the rolling upgrade");
    let rolled = two_ready(env);
    for (name, _, _) in &rolled {
        let image = env.kubectl_ok(&[
            "get",
            "pod",
            name,
            "-n",
            SYSTEM,
            "-o",
            "jsonpath={.spec.containers[0].image}",
        ]);
        assert!(image.ends_with("-next"), "{name} runs {image}");
    }
    let crd_chart = env.kubectl_ok(&[
        "get",
        "crd",
        "semanticmodels.semops.io",
        "-o",
        "jsonpath={.metadata.labels.helm\\.sh/chart}",
    ]);
    assert_eq!(crd_chart, "semops-0.2.1", "the upgrade updated the CRDs");
    // One more edit for every model: the new ReplicaSet's leader accepts them.
    for i in 0..8 {
        env.apply_ok(&model(&app.name, i, 5));
    }
    eventually(
        Duration::from_secs(180),
        "edits across the upgrade accepted",
        || all_accepted(env, &app.name, 5).then_some(()),
    );
    assert_ids_only_grew(&ids_before, &metric_ids(env, &app.name));
    let writers = status_writers(env);
    assert!(
        writers.len() > writers_before,
        "no status write was audited"
    );
    assert!(
        rolled
            .iter()
            .any(|(name, _, _)| writers.last() == Some(name)),
        "a Pod of the upgraded Deployment writes now: {:?}",
        writers.last()
    );
    assert_writers_never_interleave(&writers);
    println!(
        "status writers in order: {:?}",
        writers.iter().fold(Vec::<&String>::new(), |mut v, w| {
            if v.last() != Some(&w) {
                v.push(w);
            }
            v
        })
    );

    // helm test: a Pod with the image asks the Service's /readyz.
    let tested = helm(env, &["test", RELEASE, "-n", SYSTEM]);
    assert!(tested.contains("Phase:          Succeeded"), "{tested}");

    // Uninstall leaves the CRDs and the user's objects; the hook releases the finalizers, so
    // deleting a namespace with models and Catalogs completes.
    helm(env, &["uninstall", RELEASE, "-n", SYSTEM, "--wait"]);
    env.kubectl_ok(&["get", "crd", "semanticmodels.semops.io"]);
    env.kubectl_ok(&["get", "sm/employee-analysis", "cat/hr", "-n", &app.name]);
    let finalizers = env.kubectl_ok(&[
        "get",
        "cat",
        "analytics",
        "-n",
        &app.name,
        "-o",
        "jsonpath={.metadata.finalizers}",
    ]);
    assert!(
        !finalizers.contains("semops.io"),
        "finalizer left: {finalizers}"
    );
    env.kubectl_ok(&["delete", "namespace", &app.name, "--wait=false"]);
    eventually(Duration::from_secs(120), "the namespace gone", || {
        (!env
            .kubectl(&["get", "namespace", &app.name])
            .status
            .success())
        .then_some(())
    });
}

/// `kubectl get --raw PATH` as the user of `kubeconfig`: Ok(body) or Err(stderr).
fn get_raw(env: &Env, kubeconfig: &std::path::Path, path: &str) -> Result<String, String> {
    let out = env
        .tool("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "--raw", path])
        .output()
        .unwrap();
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Each query through the API server with (a) a client-certificate user, (b) a ServiceAccount
/// token, (c) a user without RBAC on the query group (403 from the API server), (d) a user with
/// the group but not the model (the model left out).
fn read_api_through_the_api_server(env: &Env, ns: &str) {
    eventually(Duration::from_secs(120), "the APIService Available", || {
        let s = env.kubectl_ok(&[
            "get",
            "apiservice",
            "v1alpha1.query.semops.io",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
        ]);
        (s == "True").then_some(())
    });
    let grant = |subject: &str, name: &str, models: &str| {
        env.apply_ok(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {name}, namespace: {ns}}}\nrules:\n\
             - {{apiGroups: [query.semops.io], resources: ['*'], verbs: [get, list, create]}}\n\
             - {{apiGroups: [semops.io], resources: [catalogs], verbs: [get]}}\n\
             - {{apiGroups: [semops.io], resources: [semanticmodels], verbs: [get]{models}}}\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {name}}}\nsubjects: [{subject}]\n"
        ));
    };
    grant(
        "{kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}",
        "alice",
        "",
    );
    grant(
        "{kind: ServiceAccount, name: reader, namespace: NS}"
            .replace("NS", ns)
            .as_str(),
        "reader",
        "",
    );
    grant(
        "{kind: User, name: carol, apiGroup: rbac.authorization.k8s.io}",
        "carol",
        ", resourceNames: [another-model]",
    );
    env.kubectl_ok(&["create", "serviceaccount", "reader", "-n", ns]);
    let alice = env.client_cert_kubeconfig("alice", &["team-a"]);
    let bob = env.client_cert_kubeconfig("bob", &["team-b"]);
    let carol = env.client_cert_kubeconfig("carol", &[]);
    let reader = env.work_dir.join("reader.kubeconfig");
    // The API server's own audience: it is the API server that checks this token.
    let token = env.kubectl_ok(&["create", "token", "reader", "-n", ns]);
    env.token_kubeconfig(token.trim(), &reader);

    let base = format!("/apis/query.semops.io/v1alpha1/namespaces/{ns}");
    let lookup = format!("{base}/tables/hr.public.employees/datasets");
    let metric_id = env
        .kubectl_ok(&[
            "get",
            "sm",
            "employee-analysis",
            "-n",
            ns,
            "-o",
            "jsonpath={.status.metrics[0].id}",
        ])
        .trim()
        .to_string();
    for (who, kubeconfig) in [
        ("alice (client certificate)", &alice),
        ("reader (ServiceAccount token)", &reader),
    ] {
        let body = eventually(Duration::from_secs(60), &format!("{who}: lookup"), || {
            get_raw(env, kubeconfig, &lookup)
                .ok()
                .filter(|b| b.contains("employee_analysis"))
        });
        assert!(body.contains("\"manager\""), "{who}: {body}");
        for (path, expect) in [
            (
                format!("{base}/schemas/analytics.semantic/metrics"),
                "headcount",
            ),
            (
                format!("{base}/schemas/analytics.semantic/models"),
                "employee_analysis",
            ),
            (
                format!("{base}/models/analytics.semantic.employee_analysis"),
                "metricIds",
            ),
            (
                format!("{base}/models/analytics.semantic.employee_analysis/lineage"),
                "schemaVersion",
            ),
            (
                format!("{base}/tables/hr.public.employees/lineage"),
                "schemaVersion",
            ),
            (format!("{base}/catalogs/hr/registrations"), "registrations"),
            (format!("{base}/models"), "employee_analysis"),
            (format!("{base}/metrics/{metric_id}"), "\"headcount\""),
        ] {
            let body =
                get_raw(env, kubeconfig, &path).unwrap_or_else(|e| panic!("{who} {path}: {e}"));
            assert!(body.contains(expect), "{who} {path}: {body}");
        }
    }
    // (c) No RBAC on the query group: the API server refuses before semops is asked.
    let err = get_raw(env, &bob, &lookup).unwrap_err();
    assert!(
        err.contains("Forbidden") || err.contains("forbidden"),
        "bob: {err}"
    );
    // (d) The query group but not the model: the model is left out, and asked for by name it
    // does not exist for this user.
    let body = eventually(Duration::from_secs(60), "carol: lookup", || {
        get_raw(env, &carol, &lookup).ok()
    });
    assert_eq!(body.trim(), r#"{"code":0,"identifiers":[]}"#, "carol");
    let err = get_raw(
        env,
        &carol,
        &format!("{base}/models/analytics.semantic.employee_analysis"),
    )
    .unwrap_err();
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "carol: {err}"
    );
    // Discovery: kubectl knows the group.
    let resources = env.kubectl_ok(&[
        "api-resources",
        "--api-group",
        "query.semops.io",
        "-o",
        "name",
    ]);
    assert!(resources.contains("models.query.semops.io"), "{resources}");

    // The CLI, with a client-certificate kubeconfig, through the same path.
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_semops"))
        .args([
            "lookup",
            "table",
            "hr.public.employees",
            "-n",
            ns,
            "-o",
            "json",
            "--kubeconfig",
        ])
        .arg(&alice)
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "semops lookup: {}",
        String::from_utf8_lossy(&cli.stderr)
    );
    assert!(String::from_utf8_lossy(&cli.stdout).contains("employee_analysis"));

    // An agent through the same door: `semops mcp` with the user's kubeconfig, driven by the
    // official Python SDK. alice sees the model and its metric by id; carol does not.
    use serde_json::json;
    let ops = [
        json!({"op": "call", "tool": "list_semantic_models", "args": {"namespace": ns}}),
        json!({"op": "call", "tool": "explain_metric", "args": {"namespace": ns, "id": metric_id}}),
    ];
    let as_user = |kubeconfig: &std::path::Path| {
        support::mcp::drive(
            support::mcp::Sdk::Python,
            &[
                "--kubeconfig".to_string(),
                kubeconfig.display().to_string(),
                "-n".into(),
                ns.to_string(),
            ],
            &ops,
        )
    };
    let r = as_user(&alice);
    assert_eq!(
        r[0]["structuredContent"]["models"][0]["name"], "employee_analysis",
        "alice: {r:?}"
    );
    assert_eq!(
        r[1]["structuredContent"]["metric"]["name"], "headcount",
        "alice: {r:?}"
    );
    let r = as_user(&carol);
    assert_eq!(r[0]["structuredContent"]["total"], 0, "carol: {r:?}");
    assert_eq!(r[1]["isError"], true, "carol: {r:?}");
}

/// The chart's API CA (the generated `semops-api-tls` Secret), written to a file for curl.
fn chart_ca(env: &Env) -> std::path::PathBuf {
    let ca = env.work_dir.join("semops-api-ca.crt");
    let b64 = env.kubectl_ok(&[
        "get",
        "secret",
        "semops-api-tls",
        "-n",
        SYSTEM,
        "-o",
        "jsonpath={.data.ca\\.crt}",
    ]);
    let pem = Command::new("base64")
        .arg("-d")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b64.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    std::fs::write(&ca, pem.stdout).unwrap();
    ca
}

/// One request to the direct HTTPS port through a port-forward on `port`, verified against
/// the chart's CA under the Service's name: (status, body).
fn https(
    ca: &std::path::Path,
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String) {
    let host = format!("{RELEASE}.{SYSTEM}.svc");
    let mut c = Command::new("curl");
    c.args([
        "-sS",
        "--max-time",
        "20",
        "-w",
        "\n%{http_code}",
        "-X",
        method,
        "--cacert",
    ])
    .arg(ca)
    .arg("--resolve")
    .arg(format!("{host}:{port}:127.0.0.1"))
    .arg(format!("https://{host}:{port}{path}"));
    if let Some(t) = token {
        c.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    if let Some(b) = body {
        c.args([
            "-H",
            "content-type: application/json",
            "-H",
            "accept: application/json, text/event-stream",
            "--data-binary",
            b,
        ]);
    }
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// The direct HTTPS port (Gravitino paths) through `kubectl port-forward`: the chart's CA
/// verifies it, a semops-audience token works, the API server's audience does not; /metrics
/// on the same port needs a token allowed `get /metrics`.
fn read_api_on_the_direct_port(env: &Env, ns: &str) {
    let ca = chart_ca(env);
    let forward = Forward::start(env, 8090);
    let https = |path: &str, token: Option<&str>| https(&ca, forward.1, "GET", path, token, None);
    let token = env.service_account_token(
        ns,
        "direct",
        "[{apiGroups: [semops.io], resources: [catalogs, semanticmodels], verbs: [get]}]",
        &[
            ("get", "catalogs.semops.io"),
            ("get", "semanticmodels.semops.io"),
        ],
    );
    let lookup =
        format!("/api/metalakes/{ns}/objects/table/hr.public.employees/semantic-model-datasets");
    let (code, body) = eventually(Duration::from_secs(60), "direct lookup", || {
        let r = https(&lookup, Some(&token));
        (r.0 == 200).then_some(r)
    });
    assert!(body.contains("employee_analysis"), "{code} {body}");
    let api_server_token = env.kubectl_ok(&["create", "token", "direct", "-n", ns]);
    assert_eq!(
        https(&lookup, Some(api_server_token.trim())).0,
        401,
        "API server audience refused"
    );
    assert_eq!(https(&lookup, Some("not-a-token")).0, 401);
    // /metrics: 401 without a token, 403 without the role, 200 with it.
    assert_eq!(https("/metrics", None).0, 401);
    let scraper = env.service_account_token(ns, "scraper", "[]", &[]);
    let scraper_api = env.kubectl_ok(&["create", "token", "scraper", "-n", ns]);
    assert_eq!(https("/metrics", Some(scraper_api.trim())).0, 403);
    drop(scraper);
    env.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        &format!("{ns}-scraper"),
        "--clusterrole",
        "semops-metrics-reader",
        "--serviceaccount",
        &format!("{ns}:scraper"),
    ]);
    let (code, body) = eventually(Duration::from_secs(60), "metrics for the scraper", || {
        let r = https("/metrics", Some(scraper_api.trim()));
        (r.0 == 200).then_some(r)
    });
    assert!(body.contains("semops_"), "{code}");
    drop(forward);
}

/// A ServiceAccount of `ns` bound (RoleBinding) to the built-in ClusterRole `role`; returns a
/// token-only kubeconfig (API server audience) and a semops-audience token for the direct port.
fn bound_to_builtin_role(env: &Env, ns: &str, role: &str) -> (std::path::PathBuf, String) {
    let sa = format!("team-{role}");
    env.kubectl_ok(&["create", "serviceaccount", &sa, "-n", ns]);
    env.kubectl_ok(&[
        "create",
        "rolebinding",
        &sa,
        "-n",
        ns,
        "--clusterrole",
        role,
        "--serviceaccount",
        &format!("{ns}:{sa}"),
    ]);
    let kubeconfig = env.work_dir.join(format!("{sa}.kubeconfig"));
    let token = env.kubectl_ok(&["create", "token", &sa, "-n", ns]);
    env.token_kubeconfig(token.trim(), &kubeconfig);
    let semops_token = env.kubectl_ok(&["create", "token", &sa, "-n", ns, "--audience", "semops"]);
    (kubeconfig, semops_token.trim().to_string())
}

/// `kubectl auth can-i VERB RESOURCE [--subresource=S] -n NS` as the user of `kubeconfig`:
/// (allowed, stderr).
fn can_i(
    env: &Env,
    kubeconfig: &std::path::Path,
    verb: &str,
    what: &str,
    ns: &str,
) -> (bool, String) {
    let mut args = vec![
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "auth",
        "can-i",
        verb,
    ];
    args.extend(what.split_whitespace());
    args.extend(["-n", ns]);
    let out = env.tool("kubectl").args(&args).output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).trim() == "yes",
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One MCP tool call on `/mcp` (stateless streamable HTTP) with `token`; the JSON-RPC result.
fn mcp_call(
    ca: &std::path::Path,
    port: u16,
    ns: &str,
    token: &str,
    tool: &str,
    args: Value,
) -> Value {
    let request = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": args}
    });
    let (code, body) = https(
        ca,
        port,
        "POST",
        &format!("/mcp?namespace={ns}"),
        Some(token),
        Some(&request.to_string()),
    );
    assert_eq!(code, 200, "/mcp {tool}: {body}");
    // An SSE stream of one message, or plain JSON.
    let json = body
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .unwrap_or(&body)
        .trim()
        .to_string();
    let v: Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("/mcp {tool}: {e}: {body}"));
    v["result"].clone()
}

/// The built-in namespace roles through the chart's aggregated ClusterRoles: ServiceAccounts
/// bound to `view`, `edit` and `admin` in `ns` can do exactly what docs/security.md's table says
/// through kubectl, the aggregated API and `/mcp`, and nothing in another namespace; discovery
/// lets `kubectl auth can-i` resolve every query resource; `rbac.aggregate=false` grants none.
fn namespace_roles(env: &'static Env, ns: &str) {
    let elsewhere = env.namespace("roles-elsewhere");
    let view = bound_to_builtin_role(env, ns, "view");
    let edit = bound_to_builtin_role(env, ns, "edit");
    let admin = bound_to_builtin_role(env, ns, "admin");

    // (verb, resource, view, edit, admin)
    let table: &[(&str, &str, bool, bool, bool)] = &[
        ("get", "semanticmodels.semops.io", true, true, true),
        ("list", "catalogs.semops.io", true, true, true),
        ("watch", "reconcilepolicies.semops.io", true, true, true),
        (
            "get",
            "semanticmodels.semops.io --subresource=status",
            true,
            true,
            true,
        ),
        ("create", "semanticmodels.semops.io", false, true, true),
        ("delete", "semanticmodels.semops.io", false, true, true),
        (
            "patch",
            "semanticmodels.semops.io --subresource=status",
            false,
            false,
            false,
        ),
        ("create", "catalogs.semops.io", false, false, true),
        ("update", "reconcilepolicies.semops.io", false, false, true),
        (
            "create",
            "catalogs.query.semops.io --subresource=reconcile",
            false,
            false,
            true,
        ),
        (
            "create",
            "catalogs.semops.io --subresource=reconcile",
            false,
            false,
            true,
        ),
        ("list", "models.query.semops.io", true, true, true),
    ];
    // Aggregation is the controller-manager's work: wait until the last role has its rules.
    eventually(Duration::from_secs(60), "admin aggregates semops", || {
        can_i(env, &admin.0, "create", "catalogs.semops.io", ns)
            .0
            .then_some(())
    });
    for (verb, what, v, e, a) in table {
        for ((kubeconfig, _), expected, who) in
            [(&view, v, "view"), (&edit, e, "edit"), (&admin, a, "admin")]
        {
            let (allowed, stderr) = can_i(env, kubeconfig, verb, what, ns);
            assert_eq!(allowed, *expected, "{who}: can-i {verb} {what}: {stderr}");
            assert!(
                !stderr.contains("resource type"),
                "{who}: can-i {verb} {what}: {stderr}"
            );
            let (elsewhere_allowed, _) = can_i(env, kubeconfig, verb, what, &elsewhere.name);
            assert!(
                !elsewhere_allowed,
                "{who}: {verb} {what} in another namespace"
            );
        }
    }
    // Every resource and subresource the read API serves resolves for RBAC tooling.
    let discovery = semops::api::aggregated::resource_list();
    for r in discovery["resources"].as_array().unwrap() {
        let name = r["name"].as_str().unwrap();
        let what = match name.split_once('/') {
            Some((res, sub)) => format!("{res}.query.semops.io --subresource={sub}"),
            None => format!("{name}.query.semops.io"),
        };
        let (_, stderr) = can_i(env, &view.0, "get", &what, ns);
        assert!(stderr.trim().is_empty(), "can-i get {what}: {stderr}");
    }
    // The group's discovery through the API server holds every resource and subresource the
    // read API serves (`kubectl api-resources` shows only those with verbs of their own: metrics
    // and models; the parents are there so RBAC tooling resolves the subresources, above).
    let served: Value =
        serde_json::from_str(&env.kubectl_ok(&["get", "--raw", "/apis/query.semops.io/v1alpha1"]))
            .unwrap();
    let names: Vec<&str> = served["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, expected, "discovery through the API server");

    // Through kubectl: view reads, edit writes a model, admin writes a Catalog.
    let as_user = |kubeconfig: &std::path::Path, args: &[&str]| {
        env.tool("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args)
            .output()
            .unwrap()
    };
    assert!(
        as_user(&view.0, &["get", "sm,cat,rpol", "-n", ns])
            .status
            .success()
    );
    let model = "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {name: by-edit}\nspec:\n  catalog: analytics\n  schema: semantic\n  name: by_edit\n  definition:\n    datasets:\n    - {name: e, source: hr.public.employees, primaryKey: [id]}\n";
    let applied = |kubeconfig: &std::path::Path, yaml: &str| {
        let file = env.work_dir.join("roles-object.yaml");
        std::fs::write(&file, yaml).unwrap();
        as_user(
            kubeconfig,
            &["apply", "-n", ns, "-f", file.to_str().unwrap()],
        )
    };
    assert!(
        !applied(&view.0, model).status.success(),
        "view cannot write a model"
    );
    let out = applied(&edit.0, model);
    assert!(
        out.status.success(),
        "edit writes a model: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let catalog = "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {name: by-admin}\nspec: {provider: managed}\n";
    assert!(
        !applied(&edit.0, catalog).status.success(),
        "edit cannot write a Catalog"
    );
    let out = applied(&admin.0, catalog);
    assert!(
        out.status.success(),
        "admin writes a Catalog: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Through the aggregated API: view reads the model and asks no rounds; admin asks one.
    let base = format!("/apis/query.semops.io/v1alpha1/namespaces/{ns}");
    let body = eventually(
        Duration::from_secs(60),
        "view: the model through the API server",
        || {
            get_raw(
                env,
                &view.0,
                &format!("{base}/models/analytics.semantic.employee_analysis"),
            )
            .ok()
        },
    );
    assert!(body.contains("metricIds"), "{body}");
    assert!(
        get_raw(
            env,
            &view.0,
            &format!(
                "/apis/query.semops.io/v1alpha1/namespaces/{}/models",
                elsewhere.name
            )
        )
        .is_err()
    );
    let reconcile = |kubeconfig: &std::path::Path| {
        let file = env.work_dir.join("dry-run.json");
        std::fs::write(&file, "{\"dryRun\": true}").unwrap();
        as_user(
            kubeconfig,
            &[
                "create",
                "--raw",
                &format!("{base}/catalogs/hr/reconcile"),
                "-f",
                file.to_str().unwrap(),
            ],
        )
    };
    assert!(
        !reconcile(&edit.0).status.success(),
        "edit asks no check round"
    );
    let out = reconcile(&admin.0);
    assert!(
        out.status.success(),
        "admin asks a check round: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A user with the query group but not the Catalog: semops's own refusal, as a Status that
    // kubectl prints, naming what is missing.
    env.apply_ok(&format!(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: query-only, namespace: {ns}}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: query-only, namespace: {ns}}}\nrules: [{{apiGroups: [query.semops.io], resources: ['tables/datasets'], verbs: [get]}}]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: query-only, namespace: {ns}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: query-only}}\nsubjects: [{{kind: ServiceAccount, name: query-only, namespace: {ns}}}]\n"
    ));
    let query_only = env.work_dir.join("query-only.kubeconfig");
    let token = env.kubectl_ok(&["create", "token", "query-only", "-n", ns]);
    env.token_kubeconfig(token.trim(), &query_only);
    let err = eventually(Duration::from_secs(60), "semops's 403 as a Status", || {
        get_raw(
            env,
            &query_only,
            &format!("{base}/tables/hr.public.employees/datasets"),
        )
        .err()
        .filter(|e| e.contains("may not"))
    });
    assert!(
        err.contains("Error from server (Forbidden)")
            && err.contains("may not get catalogs.semops.io \"hr\"")
            && err.contains(&format!("namespace \"{ns}\"")),
        "{err}"
    );

    // Through /mcp on the direct port, with semops-audience tokens.
    let ca = chart_ca(env);
    let forward = Forward::start(env, 8090);
    let listed = eventually(Duration::from_secs(60), "view: models over /mcp", || {
        let r = mcp_call(
            &ca,
            forward.1,
            ns,
            &view.1,
            "list_semantic_models",
            serde_json::json!({"namespace": ns}),
        );
        (r["structuredContent"]["total"].as_u64() > Some(0)).then_some(r)
    });
    assert!(listed.to_string().contains("employee_analysis"), "{listed}");
    let r = mcp_call(
        &ca,
        forward.1,
        ns,
        &view.1,
        "list_semantic_models",
        serde_json::json!({"namespace": elsewhere.name}),
    );
    assert!(
        r["isError"] == true || r["structuredContent"]["total"] == 0,
        "view elsewhere over /mcp: {r}"
    );
    drop(forward);

    // Off: the aggregated ClusterRoles go, and with them every grant above.
    let chart = format!("{}/charts/semops", support::ROOT);
    helm(
        env,
        &[
            "upgrade",
            RELEASE,
            &chart,
            "-n",
            SYSTEM,
            "--reuse-values",
            "--set",
            "rbac.aggregate=false",
        ],
    );
    for ((kubeconfig, _), who) in [(&view, "view"), (&edit, "edit"), (&admin, "admin")] {
        eventually(
            Duration::from_secs(60),
            &format!("{who} loses semops"),
            || {
                let granted = table
                    .iter()
                    .any(|(verb, what, ..)| can_i(env, kubeconfig, verb, what, ns).0);
                (!granted).then_some(())
            },
        );
    }
    helm(
        env,
        &[
            "upgrade",
            RELEASE,
            &chart,
            "-n",
            SYSTEM,
            "--reuse-values",
            "--set",
            "rbac.aggregate=true",
        ],
    );
    env.kubectl_ok(&["delete", "sm/by-edit", "cat/by-admin", "-n", ns]);
}

//! `semops run` against a real kube-apiserver: examples become Ready, status is written only
//! when it changes, invalid models name their field, name conflicts resolve when the owner goes,
//! policies resolve and overlap, Catalog changes reach the models that use them.

mod support;

use std::time::Duration;

use support::{Operator, env, eventually, examples_in, jsonpath, ready, wait_ready};

#[test]
fn the_examples_become_ready_and_kubectl_wait_sees_it() {
    let env = env();
    let (ns, _op) = support::examples_with_operator("examples");
    let ns = ns.name.as_str();
    support::wait_all_ready(env, ns);
    assert_eq!(
        jsonpath(
            env,
            ns,
            "sm/employee-analysis",
            "{.status.modelName}/{.status.datasetCount}/{.status.metricCount}"
        ),
        "employee_analysis/2/1"
    );
    assert_eq!(
        jsonpath(
            env,
            ns,
            "cat/hr",
            "{.status.effectivePolicy.name}/{.status.effectivePolicy.source}/{.status.registrationCount}"
        ),
        "strict/Selector/3"
    );
    assert_eq!(
        jsonpath(env, ns, "cat/analytics", "{.status.effectivePolicy.source}"),
        "OperatorDefault"
    );
    assert_eq!(
        jsonpath(env, ns, "rpol/strict", "{.status.catalogCount}"),
        "1"
    );
}

#[test]
fn an_unchanged_object_costs_no_status_write_after_it_is_ready() {
    let env = env();
    let (ns, op) = support::examples_with_operator("quiet");
    let ns = ns.name.as_str();
    support::wait_all_ready(env, ns);
    // Let the initial burst (including conflict retries) settle.
    let settled = eventually(Duration::from_secs(30), "writes to settle", || {
        let before = op.metric("semops_status_writes_total", &[]);
        support::holds_for(Duration::from_secs(2), || {
            op.metric("semops_status_writes_total", &[]) == before
        })
        .then_some(before)
    });
    let audited = env.audited_writes(ns, "semanticmodels", "status", "update");
    // The operator's request counter sees every status write it counted itself.
    assert_eq!(
        op.metric(
            "rest_client_requests_total",
            &[
                "method=\"PUT\"",
                "resource=\"semanticmodels/status\"",
                "code=\"200\""
            ]
        ),
        op.metric(
            "semops_status_writes_total",
            &["controller=\"semanticmodel\""]
        ),
    );
    // Each of them (and conflicts) has a latency, under the same method and resource.
    let put_status = ["method=\"PUT\"", "resource=\"semanticmodels/status\""];
    let timed = op.metric("rest_client_request_duration_seconds_count", &put_status);
    assert_eq!(timed, op.metric("rest_client_requests_total", &put_status));
    assert!(
        timed > 0.0 && op.metric("rest_client_request_duration_seconds_sum", &put_status) > 0.0
    );
    // Every write request but Lease renewals: Events, revisions, conflicts included.
    let requests = || op.write_requests_except("resource=\"leases\"");
    let requests_settled = requests();
    let reconciles = op.metric(
        "controller_runtime_reconcile_total",
        &["controller=\"semanticmodel\""],
    );

    // Metadata-only changes trigger reconciles that find nothing to do.
    for i in 0..5 {
        env.kubectl_ok(&[
            "annotate",
            "--overwrite",
            "sm/employee-analysis",
            "cat/hr",
            "rpol/strict",
            "-n",
            ns,
            &format!("touch={i}"),
        ]);
    }
    eventually(
        Duration::from_secs(30),
        "reconciles of the touched model",
        || {
            (op.metric(
                "controller_runtime_reconcile_total",
                &["controller=\"semanticmodel\""],
            ) >= reconciles + 1.0)
                .then_some(())
        },
    );
    support::stays(
        Duration::from_secs(2),
        "no status write after reconciles of unchanged objects",
        || op.metric("semops_status_writes_total", &[]) == settled,
    );
    assert_eq!(
        requests(),
        requests_settled,
        "a write request (an Event, a revision, a retried conflict) after reconciles of unchanged objects"
    );
    if let Some(before) = audited {
        assert_eq!(
            env.audited_writes(ns, "semanticmodels", "status", "update"),
            Some(before),
            "the API server saw a status write"
        );
    }
}

#[test]
fn an_invalid_model_names_the_field_and_recovers_when_fixed() {
    let env = env();
    let (ns, _op) = support::examples_with_operator("invalid");
    let ns = ns.name.as_str();
    wait_ready(env, ns, "sm/employee-analysis", "True", "Accepted");
    let bad = examples_in(ns).replace("to: manager", "to: mgr");
    env.apply_ok(&bad);
    let message = wait_ready(env, ns, "sm/employee-analysis", "False", "UnknownDataset");
    assert_eq!(
        message,
        r#"spec.definition.relationships[0].to: no dataset named "mgr""#
    );
    assert_eq!(
        jsonpath(
            env,
            ns,
            "sm/employee-analysis",
            "{.status.conditions[?(@.type==\"Valid\")].reason}"
        ),
        "UnknownDataset"
    );
    let events = env.kubectl_ok(&[
        "get",
        "events.events.k8s.io",
        "-n",
        ns,
        "-o",
        "jsonpath={.items[*].reason}",
    ]);
    assert!(
        events.contains("UnknownDataset"),
        "no Warning event: {events}"
    );

    env.apply_ok(&examples_in(ns));
    wait_ready(env, ns, "sm/employee-analysis", "True", "Accepted");
}

#[test]
fn the_younger_model_loses_a_name_conflict_until_the_older_is_deleted() {
    let env = env();
    let (ns, _op) = support::examples_with_operator("conflict");
    let ns = ns.name.as_str();
    wait_ready(env, ns, "sm/employee-analysis", "True", "Accepted");
    let twin = examples_in(ns)
        .split("\n---\n")
        .find(|d| d.contains("kind: SemanticModel"))
        .unwrap()
        .replace("name: employee-analysis", "name: employee-analysis-copy");
    // creationTimestamp has one-second resolution; within one second the uid decides (docs/design.md#name-conflicts-and-home).
    // The twin must be created in a later second than the original to be the younger one.
    let created: k8s_openapi::jiff::Timestamp = support::jsonpath(
        env,
        ns,
        "sm/employee-analysis",
        "{.metadata.creationTimestamp}",
    )
    .parse()
    .unwrap();
    eventually(Duration::from_secs(5), "the next second", || {
        (k8s_openapi::jiff::Timestamp::now().as_second() > created.as_second()).then_some(())
    });
    env.apply_ok(&twin);
    let message = wait_ready(
        env,
        ns,
        "sm/employee-analysis-copy",
        "False",
        "NameConflict",
    );
    assert!(message.contains("\"employee-analysis\""), "{message}");
    assert_eq!(
        ready(env, ns, "sm/employee-analysis").0,
        "True",
        "the older model keeps its name"
    );

    env.kubectl_ok(&["delete", "sm/employee-analysis", "-n", ns]);
    wait_ready(env, ns, "sm/employee-analysis-copy", "True", "Accepted");
}

#[test]
fn deleting_a_catalog_reaches_the_models_that_use_it() {
    let env = env();
    let (ns, _op) = support::examples_with_operator("catdel");
    let ns = ns.name.as_str();
    wait_ready(env, ns, "sm/employee-analysis", "True", "Accepted");
    env.kubectl_ok(&["delete", "cat/hr", "-n", ns]);
    let message = wait_ready(env, ns, "sm/employee-analysis", "False", "CatalogNotFound");
    assert!(message.contains("no Catalog named \"hr\""), "{message}");
    env.apply_ok(&examples_in(ns));
    wait_ready(env, ns, "sm/employee-analysis", "True", "Accepted");
}

#[test]
fn policies_resolve_by_precedence_and_report_overlap() {
    let env = env();
    let (ns, _op) = support::examples_with_operator("policy");
    let ns = ns.name.as_str();
    wait_ready(env, ns, "rpol/strict", "True", "Valid");
    let policy = |name: &str, selector: &str| {
        format!(
            "apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{mode: AutoRemove{selector}}}\n"
        )
    };
    // A namespace-wide policy picks up the catalog no selector matches.
    env.apply_ok(&policy("everything", ""));
    eventually(
        Duration::from_secs(30),
        "analytics on the namespace policy",
        || {
            (jsonpath(
                env,
                ns,
                "cat/analytics",
                "{.status.effectivePolicy.name}/{.status.effectivePolicy.source}",
            ) == "everything/Namespace")
                .then_some(())
        },
    );
    assert_eq!(
        jsonpath(env, ns, "cat/hr", "{.status.effectivePolicy.name}"),
        "strict",
        "a selector beats the namespace policy"
    );

    // A second selector policy for the same labels: alphabetical first wins, both report Overlap.
    env.apply_ok(&policy(
        "also-prod",
        ", catalogSelector: {matchLabels: {tier: prod}}",
    ));
    wait_ready(env, ns, "rpol/also-prod", "False", "Overlap");
    let message = wait_ready(env, ns, "rpol/strict", "False", "Overlap");
    assert!(
        message.contains("also-prod") && message.contains("\"hr\""),
        "{message}"
    );
    eventually(Duration::from_secs(30), "hr on also-prod", || {
        (jsonpath(env, ns, "cat/hr", "{.status.effectivePolicy.name}") == "also-prod").then_some(())
    });

    // An explicit reference beats every selector and ends the overlap for that catalog.
    env.kubectl_ok(&[
        "patch",
        "cat/hr",
        "-n",
        ns,
        "--type=merge",
        "-p",
        "{\"spec\":{\"reconcilePolicyRef\":{\"name\":\"strict\"}}}",
    ]);
    wait_ready(env, ns, "rpol/strict", "True", "Valid");
    wait_ready(env, ns, "rpol/also-prod", "True", "Valid");
    assert_eq!(
        jsonpath(
            env,
            ns,
            "cat/hr",
            "{.status.effectivePolicy.name}/{.status.effectivePolicy.source}"
        ),
        "strict/Reference"
    );

    // A reference to a missing policy turns periodic checks off and says so.
    env.kubectl_ok(&[
        "patch",
        "cat/hr",
        "-n",
        ns,
        "--type=merge",
        "-p",
        "{\"spec\":{\"reconcilePolicyRef\":{\"name\":\"gone\"}}}",
    ]);
    wait_ready(env, ns, "cat/hr", "False", "ReconcilePolicyNotFound");
    assert_eq!(
        jsonpath(env, ns, "cat/hr", "{.status.effectivePolicy.enabled}"),
        "false"
    );
}

#[test]
fn a_catalog_hosting_models_waits_for_them_and_one_only_read_from_does_not() {
    let env = env();
    let (ns, _op) = support::examples_with_operator("protect");
    let ns = ns.name.as_str();
    wait_ready(env, ns, "sm/employee-analysis", "True", "Accepted");
    eventually(Duration::from_secs(30), "the protection finalizer", || {
        (jsonpath(env, ns, "cat/analytics", "{.metadata.finalizers}")
            .contains("semops.io/catalog-protection"))
        .then_some(())
    });
    assert_eq!(
        jsonpath(env, ns, "cat/hr", "{.metadata.finalizers}"),
        "",
        "hr is only read from"
    );

    env.kubectl_ok(&["delete", "cat/analytics", "-n", ns, "--wait=false"]);
    let message = wait_ready(env, ns, "cat/analytics", "False", "Deleting");
    assert!(message.contains("employee-analysis"), "{message}");

    env.kubectl_ok(&["delete", "cat/hr", "-n", ns, "--timeout=30s"]);
    env.kubectl_ok(&["delete", "sm/employee-analysis", "-n", ns, "--timeout=30s"]);
    eventually(Duration::from_secs(30), "analytics to be released", || {
        (!env
            .kubectl(&["get", "cat/analytics", "-n", ns])
            .status
            .success())
        .then_some(())
    });
}

/// `/readyz` (and the read API) answer "not ready" until every cache has its first list: an
/// operator whose credentials may not list the kinds yet stays unready, and becomes ready once
/// RBAC lets it.
#[test]
fn readiness_waits_for_the_caches_to_sync() {
    let env = env();
    let ns = env.namespace("ready");
    let ns = ns.name.as_str();
    env.apply_ok(&examples_in(ns));
    env.service_account_token(ns, "late", "[]", &[]);
    // The operator's own identity: a token for the API server (not the semops audience).
    let token = env.kubectl_ok(&["create", "token", "late", "-n", ns]);
    let token = token.trim();
    let kc: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&env.kubeconfig).unwrap()).unwrap();
    let cluster = &kc["clusters"][0]["cluster"];
    let kubeconfig = env.work_dir.join(format!("late-{ns}.kubeconfig"));
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{}\", certificate-authority: \"{}\"}}}}]\nusers: [{{name: late, user: {{token: \"{token}\"}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: late, namespace: {ns}}}}}]\ncurrent-context: c\n",
            cluster["server"].as_str().unwrap(),
            cluster["certificate-authority"].as_str().unwrap()
        ),
    )
    .unwrap();
    let op = Operator::start_bound(
        env,
        &kubeconfig,
        Some(ns),
        ns,
        &["--leader-elect=false", "--api-auth", "none"],
    );
    let readyz = |op: &Operator| op.http_get_status("/readyz");
    support::stays(
        Duration::from_secs(3),
        "not ready without list rights",
        || readyz(&op) == 503,
    );
    let (code, body) = support::checks::request(
        op.api_port,
        "GET",
        &format!("/api/metalakes/{ns}/catalogs/analytics/schemas/semantic/semantic-models"),
        None,
        None,
    );
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("NOT_READY"), "{body}");
    env.apply_ok(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: lister, namespace: {ns}}}\nrules: [{{apiGroups: [semops.io], resources: ['*'], verbs: [get, list, watch]}}]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: lister, namespace: {ns}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: lister}}\nsubjects: [{{kind: ServiceAccount, name: late, namespace: {ns}}}]\n"
    ));
    eventually(Duration::from_secs(120), "ready once it may list", || {
        (readyz(&op) == 200).then_some(())
    });
}

/// The metric names of a PromQL text: the identifiers semops or its controller runtime export
/// (Prometheus's own `up` is left out).
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|t| {
            [
                "semops_",
                "controller_runtime_",
                "leader_election_",
                "rest_client_",
            ]
            .iter()
            .any(|p| t.starts_with(p))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn every_metric_the_alerts_and_the_dashboard_query_is_served() {
    let env = env();
    let (ns, op) = support::examples_with_operator("metrics");
    let ns = ns.name.as_str();
    support::wait_all_ready(env, ns);
    let rules = std::fs::read_to_string(format!(
        "{}/charts/semops/files/prometheus/rules.yaml",
        support::ROOT
    ))
    .unwrap();
    let dashboard = std::fs::read_to_string(format!(
        "{}/charts/semops/files/grafana/semops.json",
        support::ROOT
    ))
    .unwrap();
    let wanted = metric_names(&format!("{rules}\n{dashboard}"));
    assert!(wanted.len() >= 15, "{wanted:?}");
    // A read-API request and a check round, as any running installation has seen: their series
    // (and the catalog's removal, rename and per-result round counters, which start at 0) exist.
    let mut api = std::net::TcpStream::connect(("127.0.0.1", op.api_port)).unwrap();
    std::io::Write::write_all(
        &mut api,
        format!("GET /api/metalakes/{ns}/catalogs/analytics/schemas/semantic/semantic-model-metrics HTTP/1.0\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut api, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1."), "{answer}");
    env.kubectl_ok(&[
        "annotate",
        "--overwrite",
        "cat/hr",
        "-n",
        ns,
        "semops.io/check-requested=metrics",
    ]);
    let scrape = eventually(Duration::from_secs(60), "a check round counted", || {
        let scrape = op.scrape();
        scrape
            .contains("semops_check_rounds_total{")
            .then_some(scrape)
    });
    // A metric is served when the scrape has a sample of it (prometheus-client leaves out a
    // family with no series at all) or declares its family (a counter `x` serves `x_total`, a
    // histogram `x_bucket`, `_sum`, `_count`).
    let declared: std::collections::BTreeSet<&str> = scrape
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let sampled: std::collections::BTreeSet<&str> = scrape
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    for name in &wanted {
        let family = ["_total", "_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        assert!(
            sampled.contains(name.as_str()) || declared.contains(family),
            "{name} is queried by the chart's alerts or dashboard but not served:\n{scrape}"
        );
    }
    // And it is not vacuous: a misspelt name is caught.
    assert!(!sampled.contains("semops_registration") && !declared.contains("semops_registration"));
}

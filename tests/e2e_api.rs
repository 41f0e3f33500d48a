//! The read API against a real control plane and PostgreSQL: the seed's employee example byte
//! for byte, an RBAC matrix with real ServiceAccount tokens, source rename / drop / reuse seen
//! through the API, names with dots and backticks, metric discovery and models.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::db::{postgres, unique};
use support::{Operator, env, eventually, examples_in, wait_ready};

/// GET with an optional bearer token; returns (status, body).
fn get(port: u16, path: &str, token: Option<&str>) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n{auth}\r\n").unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).unwrap();
    let (head, body) = buf.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

#[test]
fn the_seed_example_the_rbac_matrix_and_source_lifecycle_through_the_api() {
    let env = env();
    let ns = env.namespace("api");
    let ns = ns.name.as_str();
    let op = Operator::for_namespace(env, ns); // --api-auth=kubernetes by default
    env.apply_ok(&examples_in(ns));
    wait_ready(env, ns, "sm/employee-analysis", "True", "Accepted");
    // A second model on the same table, to filter per model.
    let second = examples_in(ns)
        .split("\n---\n")
        .find(|d| d.contains("kind: SemanticModel"))
        .unwrap()
        .replace("name: employee-analysis", "name: headcount-model")
        .replace("name: employee_analysis", "name: headcount");
    env.apply_ok(&second);
    wait_ready(env, ns, "sm/headcount-model", "True", "Accepted");

    let lookup =
        format!("/api/metalakes/{ns}/objects/table/hr.public.employees/semantic-model-datasets");
    let full = env.service_account_token(
        ns,
        "full",
        "[{apiGroups: [semops.io], resources: [catalogs, semanticmodels], verbs: [get]}]",
        &[
            ("get", "catalogs.semops.io"),
            ("get", "semanticmodels.semops.io"),
        ],
    );
    let catalog_only = env.service_account_token(
        ns,
        "catalog-only",
        "[{apiGroups: [semops.io], resources: [catalogs], verbs: [get]}]",
        &[("get", "catalogs.semops.io")],
    );
    let one_model = env.service_account_token(
        ns,
        "one-model",
        "[{apiGroups: [semops.io], resources: [catalogs], verbs: [get]}, {apiGroups: [semops.io], resources: [semanticmodels], resourceNames: [employee-analysis], verbs: [get]}]",
        &[("get", "catalogs.semops.io"), ("get", "semanticmodels.semops.io/employee-analysis")],
    );
    let nothing = env.service_account_token(
        ns,
        "nothing",
        "[{apiGroups: [''], resources: [configmaps], verbs: [get]}]",
        &[("get", "configmaps")],
    );

    // Role bindings take a moment to reach the authorizer.
    let (status, body) = eventually(Duration::from_secs(30), "full access", || {
        let r = get(op.api_port, &lookup, Some(&full));
        (r.0 == 200 && r.1.contains("headcount")).then_some(r)
    });
    assert_eq!(status, 200);
    let m = |model: &str, d: &str| {
        format!(r#"{{"namespace":["{ns}","analytics","semantic","{model}"],"name":"{d}"}}"#)
    };
    assert_eq!(
        body,
        format!(
            r#"{{"code":0,"identifiers":[{},{},{},{}]}}"#,
            m("employee_analysis", "employee"),
            m("employee_analysis", "manager"),
            m("headcount", "employee"),
            m("headcount", "manager")
        )
    );
    // Only the model this user may get; catalog access without model access sees nothing.
    assert_eq!(
        get(op.api_port, &lookup, Some(&one_model)).1,
        format!(
            r#"{{"code":0,"identifiers":[{},{}]}}"#,
            m("employee_analysis", "employee"),
            m("employee_analysis", "manager")
        )
    );
    assert_eq!(
        get(op.api_port, &lookup, Some(&catalog_only)).1,
        r#"{"code":0,"identifiers":[]}"#
    );
    // The impact preview is filtered the same way: a model the caller may not get is not there.
    let impact = format!("/api/metalakes/{ns}/objects/table/hr.public.employees/impact?columns=id");
    let models_in = |token: &str| -> Vec<String> {
        let (status, body) = get(op.api_port, &impact, Some(token));
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["impacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                format!(
                    "{}/{}",
                    i["model"].as_str().unwrap(),
                    i["dataset"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(
        models_in(&full),
        [
            "employee_analysis/employee",
            "employee_analysis/manager",
            "headcount/employee",
            "headcount/manager"
        ]
    );
    assert_eq!(
        models_in(&one_model),
        ["employee_analysis/employee", "employee_analysis/manager"]
    );
    assert!(models_in(&catalog_only).is_empty());
    assert_eq!(get(op.api_port, &impact, Some(&nothing)).0, 403);
    let (status, body) = get(op.api_port, &lookup, Some(&nothing));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains(r#""type":"FORBIDDEN""#));
    assert_eq!(get(op.api_port, &lookup, None).0, 401);
    assert_eq!(get(op.api_port, &lookup, Some("not-a-token")).0, 401);
    // Audiences keep tokens in their lane: one issued for the API server is refused here, and
    // the one issued for semops is refused by the API server (nothing captured is replayable).
    let for_api_server = env.kubectl_ok(&["create", "token", "full", "-n", ns]);
    let (status, body) = get(op.api_port, &lookup, Some(for_api_server.trim()));
    assert_eq!(status, 401, "{body}");
    let semops_only = env
        .work_dir
        .join(format!("{ns}-semops-audience.kubeconfig"));
    env.token_kubeconfig(&full, &semops_only);
    let out = env
        .tool("kubectl")
        .arg("--kubeconfig")
        .arg(&semops_only)
        .args(["get", "catalogs", "-n", ns])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Unauthorized"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Errors: unsupported type, malformed name, missing object; fixed messages, no echo.
    let (status, body) = get(
        op.api_port,
        &format!("/api/metalakes/{ns}/objects/fileset/hr.public.employees/semantic-model-datasets"),
        Some(&full),
    );
    assert_eq!((status, body.contains("1006")), (400, true), "{body}");
    let (status, body) = get(
        op.api_port,
        &format!("/api/metalakes/{ns}/objects/table/hr.evil%3Cscript%3E/semantic-model-datasets"),
        Some(&full),
    );
    assert_eq!(status, 400);
    assert!(
        !body.contains("evil") && !body.contains("script"),
        "input echoed: {body}"
    );
    assert_eq!(
        get(
            op.api_port,
            &format!("/api/metalakes/{ns}/objects/table/hr.public.nope/semantic-model-datasets"),
            Some(&full)
        )
        .0,
        404
    );
    assert_eq!(
        get(
            op.api_port,
            &format!(
                "/api/metalakes/{ns}/objects/view/hr.public.employees/semantic-model-datasets"
            ),
            Some(&full)
        )
        .0,
        404,
        "a table is not a view"
    );
    // The structured form is equivalent.
    let parts = format!(
        "/api/metalakes/{ns}/objects/table/semantic-model-datasets?catalog=hr&schema=public&name=employees"
    );
    assert_eq!(
        get(op.api_port, &parts, Some(&full)).1,
        get(op.api_port, &lookup, Some(&full)).1
    );

    // Metric discovery and models.
    let metrics = get(
        op.api_port,
        &format!("/api/metalakes/{ns}/catalogs/analytics/schemas/semantic/semantic-model-metrics"),
        Some(&full),
    )
    .1;
    assert_eq!(
        metrics,
        format!(
            r#"{{"code":0,"identifiers":[{{"namespace":["{ns}","analytics","semantic","employee_analysis"],"name":"headcount"}},{{"namespace":["{ns}","analytics","semantic","headcount"],"name":"headcount"}}]}}"#
        )
    );
    let details = get(op.api_port, &format!("/api/metalakes/{ns}/catalogs/analytics/schemas/semantic/semantic-model-metrics?details=true"), Some(&full)).1;
    assert!(details.starts_with(&format!(r#"{{"code":0,"metrics":[{{"namespace":["{ns}","analytics","semantic","employee_analysis"],"metric":{{"name":"headcount","expression":{{"dialects":[{{"dialect":"ANSI_SQL","expression":"COUNT(employee.id)"}}]}}"#)), "{details}");
    assert_eq!(
        get(
            op.api_port,
            &format!("/api/metalakes/{ns}/catalogs/analytics/schemas/nope/semantic-model-metrics"),
            Some(&full)
        )
        .0,
        404
    );
    assert_eq!(
        get(
            op.api_port,
            &format!("/api/metalakes/{ns}/catalogs/nope/schemas/semantic/semantic-model-metrics"),
            Some(&full)
        )
        .0,
        404
    );
    let models = get(
        op.api_port,
        &format!("/api/metalakes/{ns}/catalogs/analytics/schemas/semantic/semantic-models"),
        Some(&one_model),
    )
    .1;
    assert_eq!(
        models,
        format!(
            r#"{{"code":0,"identifiers":[{{"namespace":["{ns}","analytics","semantic"],"name":"employee_analysis"}}]}}"#
        )
    );
    let model = get(op.api_port, &format!("/api/metalakes/{ns}/catalogs/analytics/schemas/semantic/semantic-models/employee_analysis"), Some(&full)).1;
    assert!(
        model.contains(r#""revision":1"#)
            && model.contains(r#""metricIds":[{"name":"headcount","id":""#),
        "{model}"
    );
    // A model the caller may not get has no history either; one it may get has its own.
    let versions = |model: &str, token: &str| {
        get(
            op.api_port,
            &format!(
                "/api/metalakes/{ns}/catalogs/analytics/schemas/semantic/semantic-models/{model}/versions"
            ),
            Some(token),
        )
    };
    let (status, body) = versions("headcount", &one_model);
    assert_eq!(
        (status, body.contains("NO_SUCH_SEMANTIC_MODEL")),
        (404, true),
        "{body}"
    );
    let (status, body) = versions("employee_analysis", &one_model);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(r#""revision":1"#) && body.contains(r#""current":true"#),
        "{body}"
    );
}

#[test]
fn renamed_dropped_and_reused_sources_and_quoted_names_through_the_api() {
    let env = env();
    let ns = env.namespace("apisrc");
    let ns = ns.name.as_str();
    let op = Operator::start(env, &env.kubeconfig, Some(ns), ns, &["--api-auth", "none"]);
    let schema = format!("s{}", unique());
    postgres().psql("hr", &format!("CREATE SCHEMA {schema}; CREATE TABLE {schema}.t(id int); CREATE TABLE {schema}.\"odd.na`me\"(id int);"));
    let catalogs: String = examples_in(ns)
        .split("\n---\n")
        .filter(|d| !d.contains("kind: SemanticModel"))
        .collect::<Vec<_>>()
        .join("\n---\n");
    env.apply_ok(&catalogs);
    env.apply_ok(&format!(
        "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: m, namespace: {ns}}}\nspec:\n  catalog: analytics\n  schema: semantic\n  definition:\n    datasets: [{{name: plain, source: hr.{schema}.t}}, {{name: odd, source: \"hr.{schema}.`odd.na``me`\"}}]\n"
    ));
    wait_ready(env, ns, "sm/m", "True", "Accepted");
    let path = |name: &str| {
        format!("/api/metalakes/{ns}/objects/table/hr.{schema}.{name}/semantic-model-datasets")
    };
    let one = |d: &str| {
        format!(
            r#"{{"code":0,"identifiers":[{{"namespace":["{ns}","analytics","semantic","m"],"name":"{d}"}}]}}"#
        )
    };
    assert_eq!(get(op.api_port, &path("t"), None).1, one("plain"));
    // Backtick quoting, URL-encoded: `odd.na``me`
    assert_eq!(
        get(op.api_port, &path("%60odd.na%60%60me%60"), None).1,
        one("odd")
    );

    // Renamed, same id: found through the new name.
    postgres().psql("hr", &format!("ALTER TABLE {schema}.t RENAME TO t2;"));
    assert_eq!(get(op.api_port, &path("t2"), None).1, one("plain"));
    assert_eq!(
        get(op.api_port, &path("t"), None).0,
        404,
        "the old name is gone"
    );
    // Dropped: 404. Name reused by a new table: found, but bound to nothing.
    postgres().psql("hr", &format!("DROP TABLE {schema}.t2;"));
    assert_eq!(get(op.api_port, &path("t2"), None).0, 404);
    postgres().psql("hr", &format!("CREATE TABLE {schema}.t2(id int);"));
    assert_eq!(
        get(op.api_port, &path("t2"), None).1,
        r#"{"code":0,"identifiers":[]}"#
    );
}

#[test]
fn the_query_verbs_work_directly_and_as_a_kubectl_plugin() {
    let env = env();
    let ns = env.namespace("cli");
    let ns = ns.name.as_str();
    let op = Operator::start(env, &env.kubeconfig, Some(ns), ns, &["--api-auth", "none"]);
    env.apply_ok(&examples_in(ns));
    wait_ready(env, ns, "sm/employee-analysis", "True", "Accepted");
    let server = format!("http://127.0.0.1:{}", op.api_port);
    assert_eq!(
        get(op.api_port, "/openapi.json", None).1,
        semops::api::openapi::document_text(),
        "the served document is the generated one"
    );

    // Installed as a kubectl plugin: the same binary, named kubectl-semops, on PATH.
    let plugin_dir = env.work_dir.join("plugins");
    std::fs::create_dir_all(&plugin_dir).unwrap();
    let link = plugin_dir.join("kubectl-semops");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_semops"), &link).unwrap();
    let path = format!(
        "{}:{}",
        plugin_dir.display(),
        std::env::var("PATH").unwrap()
    );
    let out = env
        .tool("kubectl")
        .env("PATH", &path)
        .args([
            "semops",
            "lookup",
            "table",
            "hr.public.employees",
            "-n",
            ns,
            "--server",
            &server,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text.lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["NAMESPACE", "CATALOG", "SCHEMA", "MODEL", "NAME"]
    );
    assert!(
        text.contains("employee_analysis   employee")
            && text.contains("employee_analysis   manager"),
        "{text}"
    );

    let semops = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_semops"))
            .env("KUBECONFIG", &env.kubeconfig)
            .args(args)
            .output()
            .unwrap()
    };
    let out = semops(&[
        "metrics",
        "analytics",
        "semantic",
        "--details",
        "-n",
        ns,
        "--server",
        &server,
        "-o",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["metrics"][0]["metric"]["name"], "headcount");
    let out = semops(&[
        "models",
        "analytics",
        "semantic",
        "employee_analysis",
        "-n",
        ns,
        "--server",
        &server,
        "-o",
        "yaml",
    ]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("revision: 1"));
    let out = semops(&[
        "lookup",
        "table",
        "hr.public.nope",
        "-n",
        ns,
        "--server",
        &server,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("404 NO_SUCH_METADATA_OBJECT"));
}

#[test]
fn a_failing_edit_leaves_the_accepted_revision_serving_through_the_api() {
    let env = env();
    let ns = env.namespace("apirev");
    let ns = ns.name.as_str();
    let op = Operator::start(env, &env.kubeconfig, Some(ns), ns, &["--api-auth", "none"]);
    env.apply_ok(&examples_in(ns));
    wait_ready(env, ns, "sm/employee-analysis", "True", "Accepted");
    // An edit that renames the metric but breaks a relationship: not accepted.
    let bad = examples_in(ns)
        .replace("to: manager", "to: mgr")
        .replace("name: headcount", "name: renamed_metric");
    env.apply_ok(&bad);
    wait_ready(env, ns, "sm/employee-analysis", "False", "UnknownDataset");
    let path =
        format!("/api/metalakes/{ns}/catalogs/analytics/schemas/semantic/semantic-model-metrics");
    let want = format!(
        r#"{{"code":0,"identifiers":[{{"namespace":["{ns}","analytics","semantic","employee_analysis"],"name":"headcount"}}]}}"#
    );
    for _ in 0..2 {
        // The second answer comes from the revision cache.
        assert_eq!(
            get(op.api_port, &path, None).1,
            want,
            "the accepted revision, not the spec, is served"
        );
    }
}

/// The revision history (`.../versions`) and `?revision=N`: which metric ids each revision
/// added and retired, a pruned revision refused by name, both doors answering alike.
#[test]
fn the_revision_history_names_the_ids_each_revision_added_and_retired() {
    let env = env();
    let ns = env.namespace("apihist");
    let ns = ns.name.as_str();
    let op = Operator::start(
        env,
        &env.kubeconfig,
        Some(ns),
        ns,
        &["--api-auth", "none", "--revision-history-limit", "3"],
    );
    let base = format!(
        "/api/metalakes/{ns}/catalogs/analytics/schemas/semantic/semantic-models/employee_analysis"
    );
    let json = |path: &str| -> serde_json::Value {
        let (status, body) = get(op.api_port, path, None);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    };
    let at_revision = |r: i64| {
        eventually(Duration::from_secs(60), &format!("revision {r}"), || {
            let (status, body) = get(op.api_port, &base, None);
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            (status == 200 && v["model"]["revision"] == r).then_some(v)
        })
    };
    let metric = "      - name: headcount\n        expression: {dialects: [{dialect: ANSI_SQL, expression: \"COUNT(employee.id)\"}]}\n        datatype: Integer\n";
    let with_metrics = |metrics: &str| examples_in(ns).replace(metric, metrics);
    assert!(
        examples_in(ns).contains(metric),
        "the example's metric block moved"
    );
    // r1: headcount. r2: renamed to staff (a new id; headcount's retired). r3: staff's expression
    // changed (ids kept). r4: managers added. With a history limit of 3, r1 is pruned.
    env.apply_ok(&examples_in(ns));
    let r1 = at_revision(1);
    env.apply_ok(&with_metrics(&metric.replace("headcount", "staff")));
    let r2 = at_revision(2);
    env.apply_ok(&with_metrics(
        &metric
            .replace("headcount", "staff")
            .replace("COUNT(employee.id)", "COUNT(DISTINCT employee.id)"),
    ));
    at_revision(3);
    let managers = "      - name: managers\n        expression: {dialects: [{dialect: ANSI_SQL, expression: \"COUNT(manager.id)\"}]}\n        datatype: Integer\n";
    env.apply_ok(&with_metrics(&format!(
        "{}{managers}",
        metric
            .replace("headcount", "staff")
            .replace("COUNT(employee.id)", "COUNT(DISTINCT employee.id)")
    )));
    let r4 = at_revision(4);
    let id_of = |v: &serde_json::Value, name: &str| -> String {
        v["model"]["metricIds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {v}"))["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (headcount, staff, managers_id) = (
        id_of(&r1, "headcount"),
        id_of(&r2, "staff"),
        id_of(&r4, "managers"),
    );
    assert_ne!(headcount, staff, "a renamed metric is a new identity");
    assert_eq!(id_of(&r4, "staff"), staff, "a kept name keeps its id");

    // r1 is pruned only after r4 committed: wait for the history to settle at three.
    let history = eventually(Duration::from_secs(30), "r1 pruned", || {
        let v = json(&format!("{base}/versions"));
        (v["versions"].as_array().unwrap().len() == 3).then_some(v)
    });
    let ids = |v: &serde_json::Value| -> Option<Vec<String>> {
        v.as_array().map(|a| {
            a.iter()
                .map(|m| m["id"].as_str().unwrap().to_string())
                .collect()
        })
    };
    // (revision, ids added, ids retired, current)
    type Row = (i64, Option<Vec<String>>, Option<Vec<String>>, bool);
    let rows: Vec<Row> = history["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            assert!(
                v["created"].as_str().is_some_and(|t| t.contains('T')),
                "{v}"
            );
            assert!(
                v["definitionHash"]
                    .as_str()
                    .is_some_and(|h| h.starts_with("sha256:") && h.len() == 71),
                "{v}"
            );
            (
                v["revision"].as_i64().unwrap(),
                ids(&v["metricsAdded"]),
                ids(&v["metricsRetired"]),
                v["current"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            // r1 is gone: what r2 added cannot be told, what it retired can (status keeps it).
            (2, None, Some(vec![headcount.clone()]), false),
            (3, Some(vec![]), Some(vec![]), false),
            (4, Some(vec![managers_id]), Some(vec![]), true),
        ]
    );
    let (h2, h3) = (
        &history["versions"][0]["definitionHash"],
        &history["versions"][1]["definitionHash"],
    );
    assert_ne!(h2, h3, "the expression change is a new definition");
    let status_hash = env.kubectl_ok(&[
        "get",
        "sm",
        "employee-analysis",
        "-n",
        ns,
        "-o",
        "jsonpath={.status.definitionHash}",
    ]);
    assert_eq!(
        history["versions"][2]["definitionHash"],
        status_hash.trim(),
        "the current revision's hash is the one status records"
    );

    // A kept earlier revision, as it was accepted.
    let old = json(&format!("{base}?revision=2"));
    assert_eq!(old["model"]["revision"], 2);
    assert_eq!(id_of(&old, "staff"), staff);
    assert_eq!(
        old["model"]["definition"]["metrics"][0]["expression"]["dialects"][0]["expression"],
        "COUNT(employee.id)"
    );
    assert_eq!(
        json(&format!("{base}?revision=4")),
        json(&base),
        "the current revision by number"
    );
    // Pruned, never written, and not a number: refused with the envelope.
    for (query, status, kind) in [
        ("?revision=1", 404, "NO_SUCH_REVISION"),
        ("?revision=5", 404, "NO_SUCH_REVISION"),
        ("?revision=0", 404, "NO_SUCH_REVISION"),
        ("?revision=two", 400, "ILLEGAL_ARGUMENTS"),
    ] {
        let (got, body) = get(op.api_port, &format!("{base}{query}"), None);
        assert_eq!(
            (got, body.contains(kind)),
            (status, true),
            "{query}: {body}"
        );
    }
    // The CLI's table: one row per kept revision, + for ids added, - for ids retired.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_semops"))
        .args([
            "history",
            "analytics",
            "semantic",
            "employee_analysis",
            "-n",
            ns,
        ])
        .args(["--server", &format!("http://127.0.0.1:{}", op.api_port)])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    // (revision, current mark and changes) after the time and the hash
    let rows: Vec<(&str, String)> = lines.iter().map(|l| (l[0], l[3..].join(" "))).collect();
    assert_eq!(
        rows,
        [
            ("2", "? -headcount".to_string()),
            ("3", String::new()),
            ("4", "* +managers".to_string())
        ],
        "{table}"
    );
    // The aggregated door answers the same.
    let agg = format!(
        "/apis/query.semops.io/v1alpha1/namespaces/{ns}/models/analytics.semantic.employee_analysis"
    );
    assert_eq!(json(&format!("{agg}/versions")), history);
    assert_eq!(json(&format!("{agg}?revision=2")), old);
}

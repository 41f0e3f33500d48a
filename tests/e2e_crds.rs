//! The CRDs against a real kube-apiserver: the API server itself refuses contract violations,
//! `kubectl explain` shows the docs, printer columns and the `semops` category work.

mod support;

use std::process::Command;

use support::{env, examples_in};

fn model(ns: &str, name: &str, definition: &str) -> String {
    format!(
        "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  catalog: analytics\n  schema: semantic\n  definition:\n{definition}"
    )
}

const DIALECT: &str = "{dialects: [{dialect: ANSI_SQL, expression: x}]}";

fn catalog(ns: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{{spec}}}\n"
    )
}

#[test]
fn the_api_server_rejects_contract_violations_with_the_field_named() {
    let env = env();
    let ns = env.namespace("crds");
    let ns = ns.name.as_str();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "duplicate dataset names",
            model(
                ns,
                "dup",
                "    datasets: [{name: a, source: hr.public.t}, {name: a, source: hr.public.u}]\n",
            ),
            "Duplicate value",
        ),
        (
            "missing datasets",
            model(ns, "nods", "    metrics: []\n"),
            "spec.definition.datasets: Required value",
        ),
        (
            "empty datasets",
            model(ns, "empty", "    datasets: []\n"),
            "should have at least 1 items",
        ),
        (
            "unknown dialect",
            model(
                ns,
                "dialect",
                "    datasets: [{name: a, source: hr.public.t}]\n    metrics: [{name: m, expression: {dialects: [{dialect: COBOL, expression: x}]}}]\n",
            ),
            "Unsupported value: \"COBOL\"",
        ),
        (
            "unknown datatype",
            model(
                ns,
                "dtype",
                &format!(
                    "    datasets: [{{name: a, source: hr.public.t}}]\n    metrics: [{{name: m, datatype: Money, expression: {DIALECT}}}]\n"
                ),
            ),
            "Unsupported value: \"Money\"",
        ),
        (
            "duplicate metric names",
            model(
                ns,
                "dupm",
                &format!(
                    "    datasets: [{{name: a, source: hr.public.t}}]\n    metrics: [{{name: m, expression: {DIALECT}}}, {{name: m, expression: {DIALECT}}}]\n"
                ),
            ),
            "Duplicate value",
        ),
        (
            "duplicate dialects",
            model(
                ns,
                "dupd",
                "    datasets: [{name: a, source: hr.public.t}]\n    metrics: [{name: m, expression: {dialects: [{dialect: MDX, expression: x}, {dialect: MDX, expression: y}]}}]\n",
            ),
            "Duplicate value",
        ),
        (
            "relationship column counts differ",
            model(
                ns,
                "rel",
                "    datasets: [{name: a, source: hr.public.t}]\n    relationships: [{name: r, from: a, to: a, fromColumns: [c1, c2], toColumns: [c3]}]\n",
            ),
            "fromColumns and toColumns must have the same length",
        ),
        (
            "catalog without connection",
            format!(
                "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: c, namespace: {ns}}}\nspec: {{provider: postgresql}}\n"
            ),
            "spec.connection is required unless provider is managed",
        ),
        (
            "table registration without schema",
            format!(
                "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: c2, namespace: {ns}}}\nspec: {{provider: managed, registrations: [{{kind: Table, name: t}}]}}\n"
            ),
            "schema is required for Table, View and Topic registrations",
        ),
        (
            "unknown provider",
            format!(
                "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: c3, namespace: {ns}}}\nspec: {{provider: oracle}}\n"
            ),
            "Unsupported value: \"oracle\"",
        ),
        (
            "interval below one minute",
            format!(
                "apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: p, namespace: {ns}}}\nspec: {{interval: 30s}}\n"
            ),
            "interval must be at least 1m",
        ),
        (
            "jitter of one",
            format!(
                "apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: p2, namespace: {ns}}}\nspec: {{jitter: 1.0}}\n"
            ),
            "jitter must be in [0, 1)",
        ),
        (
            "control character in a registration name",
            format!(
                "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: c4, namespace: {ns}}}\nspec: {{provider: managed, registrations: [{{kind: Table, schema: s, name: \"a\\tb\"}}]}}\n"
            ),
            "names must not contain control characters",
        ),
        (
            "a kafka catalog with host and port",
            catalog(
                ns,
                "k1",
                "provider: kafka, connection: {host: broker, port: 9092}",
            ),
            "a kafka catalog names its brokers in spec.connection.bootstrapServers",
        ),
        (
            "a bootstrap server without a port",
            catalog(
                ns,
                "k2",
                "provider: kafka, connection: {bootstrapServers: [broker]}",
            ),
            "every bootstrap server is host:port",
        ),
        (
            "a postgresql catalog with bootstrap servers",
            catalog(
                ns,
                "k3",
                "provider: postgresql, connection: {host: db, port: 5432, bootstrapServers: [\"db:5432\"], credentialsSecretRef: {name: s}}",
            ),
            "bootstrapServers and sasl are for kafka",
        ),
        (
            "sasl without a credentials Secret",
            catalog(
                ns,
                "k4",
                "provider: kafka, connection: {bootstrapServers: [\"b:9092\"], sasl: {mechanism: PLAIN}}",
            ),
            "spec.connection.sasl needs spec.connection.credentialsSecretRef",
        ),
        (
            "an unknown SASL mechanism",
            catalog(
                ns,
                "k5",
                "provider: kafka, connection: {bootstrapServers: [\"b:9092\"], sasl: {mechanism: GSSAPI}, credentialsSecretRef: {name: s}}",
            ),
            "Unsupported value: \"GSSAPI\"",
        ),
        (
            "a client certificate on a postgresql catalog",
            catalog(
                ns,
                "k6",
                "provider: postgresql, connection: {host: db, port: 5432, credentialsSecretRef: {name: s}, tls: {clientCertificateSecretRef: {name: c}}}",
            ),
            "clientCertificateSecretRef is for kafka catalogs",
        ),
        (
            "negative removal grace",
            format!(
                "apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: p4, namespace: {ns}}}\nspec: {{removeAfter: {{misses: 2, grace: -1h}}}}\n"
            ),
            "grace must not be negative",
        ),
        (
            "zero misses",
            format!(
                "apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: p5, namespace: {ns}}}\nspec: {{removeAfter: {{misses: 0}}}}\n"
            ),
            "spec.removeAfter.misses",
        ),
        (
            "unknown mode",
            format!(
                "apiVersion: semops.io/v1alpha1\nkind: ReconcilePolicy\nmetadata: {{name: p3, namespace: {ns}}}\nspec: {{mode: DeleteEverything}}\n"
            ),
            "Unsupported value: \"DeleteEverything\"",
        ),
    ];
    for (what, yaml, want) in cases {
        let out = env.apply(&yaml);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what}: the API server accepted it");
        assert!(
            stderr.contains(want),
            "{what}: error lacks {want:?}:\n{stderr}"
        );
    }
    // Nothing invalid was stored.
    assert_eq!(
        env.kubectl_ok(&["get", "sm,cat,rpol", "-n", ns, "-o", "name"])
            .trim(),
        ""
    );
}

#[test]
fn home_catalog_and_schema_are_immutable() {
    let env = env();
    let ns = env.namespace("immut");
    let ns = ns.name.as_str();
    env.apply_ok(&model(
        ns,
        "m",
        "    datasets: [{name: a, source: hr.public.t}]\n",
    ));
    for (field, value) in [("catalog", "elsewhere"), ("schema", "other")] {
        let patch = format!("{{\"spec\":{{\"{field}\":\"{value}\"}}}}");
        let out = env.kubectl(&["patch", "sm", "m", "-n", ns, "--type=merge", "-p", &patch]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(&format!("spec.{field} is immutable")),
            "{field}: {stderr}"
        );
    }
    // Mutable fields still change.
    env.kubectl_ok(&[
        "patch",
        "sm",
        "m",
        "-n",
        ns,
        "--type=merge",
        "-p",
        "{\"spec\":{\"name\":\"renamed\",\"comment\":\"c\"}}",
    ]);
}

#[test]
fn kubectl_explain_shows_the_field_docs() {
    let env = env();
    // The API server publishes a new CRD's OpenAPI a moment after it is Established.
    let out = support::eventually(
        std::time::Duration::from_secs(60),
        "OpenAPI for semanticmodels",
        || {
            let o = env.kubectl(&["explain", "semanticmodel.spec.definition"]);
            o.status
                .success()
                .then(|| String::from_utf8(o.stdout).unwrap())
        },
    );
    let out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    for want in [
        "Apache Ossie core",
        "datasets",
        "Logical datasets, each bound to one table or view",
        "relationships",
        "metrics",
    ] {
        assert!(out.contains(want), "explain lacks {want:?}:\n{out}");
    }
    // kubectl wraps descriptions; compare with whitespace collapsed.
    let flat = |s: String| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let out = flat(env.kubectl_ok(&["explain", "catalog.spec.registrations"]));
    assert!(out.contains("At most 5000 entries"), "{out}");
    let out = env.kubectl_ok(&["explain", "reconcilepolicy.spec.mode"]);
    assert!(out.contains("AutoRemove"), "{out}");
}

#[test]
fn printer_columns_short_names_and_the_semops_category() {
    let env = env();
    let ns = env.namespace("columns");
    let ns = ns.name.as_str();
    env.apply_ok(&examples_in(ns));
    let out = env.kubectl_ok(&["get", "sm", "-n", ns]);
    let header = out.lines().next().unwrap();
    for col in [
        "NAME", "CATALOG", "SCHEMA", "MODEL", "DATASETS", "METRICS", "REVISION", "READY", "AGE",
    ] {
        assert!(header.contains(col), "sm header lacks {col}: {header}");
    }
    assert!(
        out.contains("employee-analysis") && out.contains("analytics") && out.contains("semantic"),
        "{out}"
    );
    let out = env.kubectl_ok(&["get", "cat", "-n", ns]);
    for col in [
        "PROVIDER",
        "REACHABLE",
        "REGISTRATIONS",
        "STALE",
        "POLICY",
        "LAST CHECK",
        "AGE",
    ] {
        assert!(
            out.lines().next().unwrap().contains(col),
            "cat header lacks {col}: {out}"
        );
    }
    assert!(
        out.contains("postgresql") && out.contains("managed"),
        "{out}"
    );
    let out = env.kubectl_ok(&["get", "rpol", "-n", ns]);
    for col in ["MODE", "INTERVAL", "ENABLED", "CATALOGS", "AGE"] {
        assert!(
            out.lines().next().unwrap().contains(col),
            "rpol header lacks {col}: {out}"
        );
    }
    assert!(out.contains("ReportOnly") && out.contains("1h"), "{out}");
    let out = env.kubectl_ok(&["get", "semops", "-n", ns, "-o", "name"]);
    for want in [
        "catalog.semops.io/hr",
        "catalog.semops.io/analytics",
        "reconcilepolicy.semops.io/strict",
        "semanticmodel.semops.io/employee-analysis",
    ] {
        assert!(
            out.contains(want),
            "kubectl get semops lacks {want}:\n{out}"
        );
    }
}

/// A protected model's metric set as one definition; `metrics` is flow YAML.
fn protected_model(ns: &str, name: &str, labels: &str, annotations: &str, metrics: &str) -> String {
    format!(
        "apiVersion: semops.io/v1alpha1\nkind: SemanticModel\nmetadata: {{name: {name}, namespace: {ns}, labels: {{{labels}}}, annotations: {{{annotations}}}}}\nspec:\n  catalog: analytics\n  schema: semantic\n  definition:\n    datasets: [{{name: orders, source: wh.app.orders}}]\n    metrics: {metrics}\n"
    )
}

fn metric(name: &str, sql: &str, from: Option<&str>) -> String {
    let from = from
        .map(|f| format!(", renamedFrom: {f}"))
        .unwrap_or_default();
    format!(
        "{{name: {name}{from}, expression: {{dialects: [{{dialect: ANSI_SQL, expression: \"{sql}\"}}]}}}}"
    )
}

/// The chart's ValidatingAdmissionPolicy on the real API server: a protected model's breaking
/// edit is refused naming the metric; with `semops.io/allow-breaking-change` it passes; a
/// rename through renamedFrom and additions pass; an unprotected model is untouched.
#[test]
fn the_protect_models_policy_refuses_breaking_edits_of_protected_models_only() {
    let env = env();
    let ns = env.namespace("vap");
    let ns = ns.name.as_str();
    let release = format!("p{}", &ns[ns.len() - 8..]);
    let out = Command::new(support::tool_bin_dir().join("helm"))
        .args([
            "template",
            &release,
            &format!("{}/charts/semops", support::ROOT),
        ])
        .args([
            "--set",
            "admission.protectModels=true",
            "--show-only",
            "templates/protect-models.yaml",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let policy = String::from_utf8(out.stdout).unwrap();
    env.apply_ok(&policy);

    let (rev, cnt) = (
        metric("revenue", "SUM(orders.amount)", None),
        metric("orders", "COUNT(*)", None),
    );
    let protected = "semops.io/protected: \"true\"";
    let base = |name: &str, labels: &str| {
        protected_model(ns, name, labels, "", &format!("[{rev}, {cnt}]"))
    };
    env.apply_ok(&base("kept", protected));
    env.apply_ok(&base("free", ""));

    let dry_run = |yaml: &str| {
        let out = env.kubectl_stdin(&["apply", "--dry-run=server", "-f", "-"], yaml);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let removed = protected_model(ns, "kept", protected, "", &format!("[{cnt}]"));
    // The API server compiles and starts enforcing a new policy within a few seconds.
    let refusal = support::eventually(
        std::time::Duration::from_secs(60),
        "the policy enforces",
        || {
            let (ok, err) = dry_run(&removed);
            (!ok).then_some(err)
        },
    );
    assert!(
        refusal.contains("ValidatingAdmissionPolicy")
            && refusal.contains("removing metric(s) revenue retires their ids"),
        "{refusal}"
    );

    let changed = protected_model(
        ns,
        "kept",
        protected,
        "",
        &format!("[{}, {cnt}]", metric("revenue", "SUM(orders.net)", None)),
    );
    let (ok, err) = dry_run(&changed);
    assert!(
        !ok && err.contains("the expression of metric(s) revenue changed"),
        "{err}"
    );

    // Dropping the label in the same edit does not lift the protection.
    let (ok, err) = dry_run(&protected_model(ns, "kept", "", "", &format!("[{cnt}]")));
    assert!(!ok && err.contains("removing metric(s) revenue"), "{err}");

    let allowed = "semops.io/allow-breaking-change: \"revenue moves to the finance model\"";
    let empty_reason = "semops.io/allow-breaking-change: \"  \"";
    let passes = [
        (
            "a rename through renamedFrom",
            protected_model(
                ns,
                "kept",
                protected,
                "",
                &format!(
                    "[{}, {cnt}]",
                    metric("gross_revenue", "SUM(orders.amount)", Some("revenue"))
                ),
            ),
        ),
        (
            "a metric added",
            protected_model(
                ns,
                "kept",
                protected,
                "",
                &format!(
                    "[{rev}, {cnt}, {}]",
                    metric("avg", "AVG(orders.amount)", None)
                ),
            ),
        ),
        (
            "the breaking edit with a reason",
            protected_model(ns, "kept", protected, allowed, &format!("[{cnt}]")),
        ),
        (
            "an unprotected model's breaking edit",
            protected_model(ns, "free", "", "", &format!("[{cnt}]")),
        ),
    ];
    for (what, yaml) in passes {
        let (ok, err) = dry_run(&yaml);
        assert!(ok, "{what} passes: {err}");
    }
    let (ok, err) = dry_run(&protected_model(
        ns,
        "kept",
        protected,
        empty_reason,
        &format!("[{cnt}]"),
    ));
    assert!(!ok, "a blank reason is no reason: {err}");

    // For real: the refused edit left the object as it was; the allowed one lands.
    let out = env.apply(&removed);
    assert!(!out.status.success());
    let kept = env.kubectl_ok(&[
        "get",
        "sm",
        "kept",
        "-n",
        ns,
        "-o",
        "jsonpath={.spec.definition.metrics[*].name}",
    ]);
    assert_eq!(kept, "revenue orders");
    env.apply_ok(&protected_model(
        ns,
        "kept",
        protected,
        allowed,
        &format!("[{cnt}]"),
    ));

    let out = env.kubectl_stdin(&["delete", "--ignore-not-found", "-f", "-"], &policy);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

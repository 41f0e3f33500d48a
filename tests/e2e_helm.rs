//! The chart against a real control plane: it lints and installs (CRDs included), its RBAC is
//! enough for the operator to reconcile the examples, and not an inch more (no Secrets listing).
//! Pods never start here (no kubelet), so the operator runs out of cluster with a token of the
//! chart's ServiceAccount.

mod support;

use support::{Operator, ROOT, env_without_crds, wait_ready};

/// A kubeconfig for the API server of `admin_kubeconfig` that authenticates with `token`.
#[test]
fn the_chart_installs_and_its_rbac_is_sufficient_and_minimal() {
    let env = env_without_crds();
    let chart = format!("{ROOT}/charts/semops");
    let lint = env
        .tool("helm")
        .args(["lint", "--strict", &chart])
        .output()
        .unwrap();
    assert!(
        lint.status.success(),
        "helm lint: {}",
        String::from_utf8_lossy(&lint.stdout)
    );

    let release_ns = env.namespace("semops-system");
    let install = env
        .tool("helm")
        // No node in this control plane: the post-delete hook Job (release-finalizers) could
        // never run, so it is off here; tests/e2e_incluster.rs runs it on a real node.
        .args([
            "install",
            "semops",
            &chart,
            "-n",
            &release_ns.name,
            "--set",
            "uninstall.releaseFinalizers=false",
            // No node here: an APIService without Pods behind it would leave discovery (and
            // namespace deletion) failing. e2e_incluster installs it.
            "--set",
            "api.aggregated=false",
        ])
        .output()
        .unwrap();
    assert!(
        install.status.success(),
        "helm install: {}",
        String::from_utf8_lossy(&install.stderr)
    );
    env.kubectl_ok(&[
        "wait",
        "--for",
        "condition=Established",
        "crd/semanticmodels.semops.io",
        "crd/catalogs.semops.io",
        "crd/reconcilepolicies.semops.io",
        "--timeout=60s",
    ]);
    let annotations = env.kubectl_ok(&[
        "get",
        "crd",
        "semanticmodels.semops.io",
        "-o",
        "jsonpath={.metadata.annotations.helm\\.sh/resource-policy}",
    ]);
    assert_eq!(annotations, "keep", "CRDs must survive helm uninstall");

    let sa = format!("system:serviceaccount:{}:semops", release_ns.name);
    for (verb, resource, want) in [
        ("list", "secrets", "no"),
        ("watch", "secrets", "no"),
        ("get", "secrets", "yes"),
        ("create", "secrets", "no"),
        ("delete", "semanticmodels.semops.io", "no"),
        ("update", "semanticmodels.semops.io", "no"),
        ("create", "catalogs.semops.io", "no"),
        (
            "update",
            "semanticmodels.semops.io --subresource=status",
            "yes",
        ),
        ("update", "catalogs.semops.io --subresource=status", "yes"),
        ("watch", "catalogs.semops.io", "yes"),
        ("create", "events.events.k8s.io", "yes"),
    ] {
        let mut args = vec!["auth", "can-i", verb];
        args.extend(resource.split(' '));
        args.extend(["--as", &sa, "-A"]);
        let out = env.kubectl(&args);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want,
            "can {sa} {verb} {resource}?"
        );
    }

    let token = env.kubectl_ok(&[
        "create",
        "token",
        "semops",
        "-n",
        &release_ns.name,
        "--duration=1h",
    ]);
    let sa_kubeconfig = env.work_dir.join("sa.kubeconfig");
    env.token_kubeconfig(token.trim(), &sa_kubeconfig);

    let app_ns = env.namespace("app");
    let examples = support::examples_in(&app_ns.name);
    env.apply_ok(&examples);
    let op = Operator::start(env, &sa_kubeconfig, None, &release_ns.name, &[]);
    for what in [
        "sm/employee-analysis",
        "cat/hr",
        "cat/analytics",
        "rpol/strict",
    ] {
        let reason = if what.starts_with("sm/") {
            "Accepted"
        } else if what.starts_with("cat/") {
            "Configured"
        } else {
            "Valid"
        };
        wait_ready(env, &app_ns.name, what, "True", reason);
    }
    assert!(
        op.is_leading(),
        "the operator holds its Lease with the chart's Role"
    );
    let forbidden = env
        .tool("kubectl")
        .env("KUBECONFIG", &sa_kubeconfig)
        .args(["get", "secrets", "-A"])
        .output()
        .unwrap();
    assert!(
        !forbidden.status.success()
            && String::from_utf8_lossy(&forbidden.stderr).contains("forbidden"),
        "the token listed Secrets"
    );
    assert!(
        !op.logs().contains("forbidden"),
        "the operator hit a permission it lacks:\n{}",
        op.logs()
    );

    let uninstall = env
        .tool("helm")
        .args(["uninstall", "semops", "-n", &release_ns.name])
        .output()
        .unwrap();
    assert!(
        uninstall.status.success(),
        "helm uninstall: {}",
        String::from_utf8_lossy(&uninstall.stderr)
    );
    env.kubectl_ok(&["get", "crd", "semanticmodels.semops.io"]);
    env.kubectl_ok(&["get", "sm/employee-analysis", "-n", &app_ns.name]);
}

/// The README's plain-kubectl path: CRDs applied with `kubectl apply -f crds/` first, then the
/// chart with `--set crds.install=false` (without the flag Helm refuses to adopt the CRDs).
#[test]
fn helm_install_after_kubectl_applied_the_crds_works_with_the_documented_flag() {
    let env = support::env(); // CRDs applied with kubectl
    let ns = env.namespace("kubectl-first");
    let chart = format!("{ROOT}/charts/semops");
    let refused = env
        .tool("helm")
        .args(["install", "first", &chart, "-n", &ns.name])
        .output()
        .unwrap();
    assert!(
        !refused.status.success(),
        "Helm adopted CRDs it did not create"
    );
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("cannot be imported"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let install = env
        .tool("helm")
        .args([
            "install",
            "second",
            &chart,
            "-n",
            &ns.name,
            "--set",
            "crds.install=false",
            "--set",
            "api.aggregated=false",
        ])
        .output()
        .unwrap();
    assert!(
        install.status.success(),
        "helm install --set crds.install=false: {}",
        String::from_utf8_lossy(&install.stderr)
    );
    let notes = String::from_utf8_lossy(&install.stdout);
    assert!(notes.contains("crds.install=false"), "NOTES: {notes}");
    env.kubectl_ok(&["get", "deployment", "second-semops", "-n", &ns.name]);
}

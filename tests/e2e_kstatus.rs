//! What Flux, kpt and every other kstatus user sees: live objects in each state, read back from
//! a real kube-apiserver and judged by the real kstatus library (`sigs.k8s.io/cli-utils`, built
//! by `hack/gotool kstatus` from `tools/kstatus`). A model that can never be accepted must be
//! Failed (Flux fails fast), one that waits on something that may still arrive InProgress, and
//! an accepted one Current.

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use support::{ROOT, env, eventually, jsonpath, wait_ready};

/// The kstatus harness, built once per test binary.
fn harness() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let out = Command::new(format!("{ROOT}/hack/gotool"))
            .arg("kstatus")
            .stderr(Stdio::inherit())
            .output()
            .expect("hack/gotool runs");
        assert!(out.status.success(), "hack/gotool kstatus failed");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
}

/// kstatus's verdict (status, message) per `Kind/name` for every semops object in `ns`.
fn kstatus(ns: &str) -> BTreeMap<String, (String, String)> {
    let list = env().kubectl_ok(&[
        "get",
        "catalogs,semanticmodels,reconcilepolicies",
        "-n",
        ns,
        "-o",
        "json",
    ]);
    let mut child = Command::new(harness())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(list.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kstatus: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let mut parts = line.splitn(3, '\t');
            let key = parts.next().unwrap().to_string();
            let status = parts.next().unwrap_or_default().to_string();
            let message = parts.next().unwrap_or_default().to_string();
            (key, (status, message))
        })
        .collect()
}

/// Waits until kstatus judges `key` as `status`; returns its message.
fn wait_kstatus(ns: &str, key: &str, status: &str) -> String {
    eventually(
        Duration::from_secs(60),
        &format!("kstatus {key} = {status}"),
        || {
            kstatus(ns)
                .remove(key)
                .filter(|(s, _)| s == status)
                .map(|(_, m)| m)
        },
    )
}

/// The employee example under another Kubernetes name, model name and source catalog.
fn model(ns: &str, name: &str, model_name: &str, source_catalog: &str) -> String {
    std::fs::read_to_string(format!("{ROOT}/examples/40-semanticmodel-employee.yaml"))
        .unwrap()
        .replace("namespace: example", &format!("namespace: {ns}"))
        .replace("name: employee-analysis", &format!("name: {name}"))
        .replace("name: employee_analysis", &format!("name: {model_name}"))
        .replace(
            "source: hr.public.",
            &format!("source: {source_catalog}.public."),
        )
}

#[test]
fn flux_sees_accepted_objects_current_unfixable_ones_failed_and_waiting_ones_in_progress() {
    let env = env();
    let (ns, _op) = support::examples_with_operator("kstatus");
    let ns = ns.name.as_str();
    env.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "sm,cat,rpol",
        "--all",
        "-n",
        ns,
        "--timeout=60s",
    ]);
    let all = kstatus(ns);
    for key in [
        "Catalog/hr",
        "Catalog/analytics",
        "ReconcilePolicy/strict",
        "SemanticModel/employee-analysis",
    ] {
        assert_eq!(
            all.get(key).map(|(s, _)| s.as_str()),
            Some("Current"),
            "{key}: {all:?}"
        );
    }

    // Failed: a model whose relationship names a dataset it does not have, and
    // a Catalog whose credentials Secret does not exist.
    // (A name conflict is decided by creation time, which has one-second resolution, so the
    // test uses a definition error: deterministic.)
    env.apply_ok(&model(ns, "broken", "broken_model", "hr").replace("to: manager", "to: nobody"));
    wait_ready(env, ns, "sm/broken", "False", "UnknownDataset");
    let message = wait_kstatus(ns, "SemanticModel/broken", "Failed");
    assert!(message.contains("nobody"), "{message}");
    assert_eq!(
        jsonpath(
            env,
            ns,
            "sm/broken",
            "{.status.conditions[?(@.type==\"Stalled\")].reason}"
        ),
        "UnknownDataset"
    );
    env.apply_ok(&format!(
        "apiVersion: semops.io/v1alpha1\nkind: Catalog\nmetadata: {{name: locked, namespace: {ns}}}\nspec:\n  provider: postgresql\n  connection:\n    host: 127.0.0.1\n    port: 5432\n    database: hr\n    credentialsSecretRef: {{name: no-such-secret}}\n"
    ));
    wait_ready(env, ns, "cat/locked", "False", "CredentialsInvalid");
    wait_kstatus(ns, "Catalog/locked", "Failed");

    // InProgress: a model whose source catalog is not there yet (Flux applies it with the model).
    env.apply_ok(&model(ns, "early", "early_model", "later"));
    wait_ready(env, ns, "sm/early", "False", "CatalogNotFound");
    wait_kstatus(ns, "SemanticModel/early", "InProgress");
    assert_eq!(
        jsonpath(
            env,
            ns,
            "sm/early",
            "{.status.conditions[?(@.type==\"Reconciling\")].reason}/{.status.conditions[?(@.type==\"Stalled\")].reason}"
        ),
        "CatalogNotFound/"
    );

    // The catalog arrives (a copy of hr under another name, with its own Secret): Current, and
    // no kstatus condition is left behind.
    let later = support::examples_in(ns)
        .split("\n---\n")
        .filter(|doc| {
            doc.contains("name: hr-reader")
                || doc.contains("kind: Catalog\nmetadata:\n  name: hr\n")
        })
        .map(|doc| {
            doc.replace("name: hr-reader", "name: later-reader")
                .replace("allowed-catalogs: hr", "allowed-catalogs: later")
                .replace("name: hr\n", "name: later\n")
        })
        .collect::<Vec<_>>();
    assert_eq!(later.len(), 2, "the hr Secret and Catalog of the examples");
    env.apply_ok(&later.join("\n---\n"));
    wait_ready(env, ns, "sm/early", "True", "Accepted");
    wait_kstatus(ns, "SemanticModel/early", "Current");
    assert_eq!(
        jsonpath(env, ns, "sm/early", "{.status.conditions[*].type}"),
        "Ready Valid SourcesResolved SourcesCurrent"
    );

    // The person fixes the relationship: Failed becomes Current.
    env.apply_ok(&model(ns, "broken", "broken_model", "hr"));
    wait_ready(env, ns, "sm/broken", "True", "Accepted");
    wait_kstatus(ns, "SemanticModel/broken", "Current");
}

//! What Flux, kpt and every other kstatus user sees, and what Argo CD shows: live objects in
//! each state, read back from a real kube-apiserver and judged by the real kstatus library
//! (`sigs.k8s.io/cli-utils`, `tools/kstatus`) and by our health Lua in gopher-lua with Argo CD's
//! libraries (`tools/argocd-health`), both built by `hack/gotool`. A model that can never be
//! accepted must be Failed / Degraded (Flux fails fast), one that waits on something that may
//! still arrive InProgress / Progressing, and an accepted one Current / Healthy.

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::{ROOT, env, eventually, gotool, jsonpath, wait_ready};

/// Who judges the live objects: the kstatus library (Flux) or Argo CD's health Lua.
#[derive(Clone, Copy, Debug)]
enum Judge {
    Kstatus,
    ArgoCd,
}

/// The judge's verdict (status, message) per `Kind/name` for every semops object in `ns`.
fn verdicts(judge: Judge, ns: &str) -> BTreeMap<String, (String, String)> {
    let list = env().kubectl_ok(&[
        "get",
        "catalogs,semanticmodels,reconcilepolicies",
        "-n",
        ns,
        "-o",
        "json",
    ]);
    let mut command = match judge {
        Judge::Kstatus => Command::new(gotool("kstatus")),
        Judge::ArgoCd => {
            let mut c = Command::new(gotool("argocd-health"));
            c.args(["eval", &format!("{ROOT}/docs/argocd")]);
            c
        }
    };
    let mut child = command
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
        "{judge:?}: {}",
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

fn kstatus(ns: &str) -> BTreeMap<String, (String, String)> {
    verdicts(Judge::Kstatus, ns)
}

/// Waits until the judge sees `key` as `status`; returns its message.
fn wait_for(judge: Judge, ns: &str, key: &str, status: &str) -> String {
    eventually(
        Duration::from_secs(60),
        &format!("{judge:?} {key} = {status}"),
        || {
            verdicts(judge, ns)
                .remove(key)
                .filter(|(s, _)| s == status)
                .map(|(_, m)| m)
        },
    )
}

fn wait_kstatus(ns: &str, key: &str, status: &str) -> String {
    wait_for(Judge::Kstatus, ns, key, status)
}

/// Argo CD's verdict on a live object; with `SEMOPS_CAPTURE_ARGOCD_TESTDATA=1` the object is
/// also written to `docs/argocd/semops.io/<Kind>/testdata/<file>.yaml` (how the upstream-layout
/// testdata were captured from this control plane).
fn argocd(ns: &str, key: &str, status: &str, file: &str) -> String {
    let message = wait_for(Judge::ArgoCd, ns, key, status);
    if std::env::var_os("SEMOPS_CAPTURE_ARGOCD_TESTDATA").is_some() {
        let (kind, name) = key.split_once('/').unwrap();
        let json = env().kubectl_ok(&[
            "get",
            &format!("{kind}.semops.io/{name}"),
            "-n",
            ns,
            "-o",
            "json",
        ]);
        let mut object: serde_json::Value = serde_json::from_str(&json).unwrap();
        let meta = object["metadata"].as_object_mut().unwrap();
        for field in [
            "managedFields",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "annotations",
        ] {
            meta.remove(field);
        }
        meta.insert("namespace".into(), "example".into());
        let dir = format!("{ROOT}/docs/argocd/semops.io/{kind}/testdata");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            format!("{dir}/{file}.yaml"),
            serde_saphyr::to_string(&object)
                .unwrap()
                .replace(ns, "example"),
        )
        .unwrap();
    }
    message
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
fn flux_and_argocd_see_accepted_objects_healthy_unfixable_ones_failed_and_waiting_ones_in_progress()
{
    let env = env();
    let (ns, _op) = support::examples_with_operator("kstatus");
    let ns = ns.name.as_str();
    support::wait_all_ready(env, ns);
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
    argocd(ns, "Catalog/hr", "Healthy", "healthy_configured");
    argocd(ns, "ReconcilePolicy/strict", "Healthy", "healthy_valid");
    argocd(
        ns,
        "SemanticModel/employee-analysis",
        "Healthy",
        "healthy_accepted",
    );

    // Failed: a model whose relationship names a dataset it does not have, and
    // a Catalog whose credentials Secret does not exist.
    // (A name conflict is decided by creation time, which has one-second resolution, so the
    // test uses a definition error: deterministic.)
    env.apply_ok(&model(ns, "broken", "broken_model", "hr").replace("to: manager", "to: nobody"));
    wait_ready(env, ns, "sm/broken", "False", "UnknownDataset");
    let message = wait_kstatus(ns, "SemanticModel/broken", "Failed");
    assert!(message.contains("nobody"), "{message}");
    let message = argocd(
        ns,
        "SemanticModel/broken",
        "Degraded",
        "degraded_unknownDataset",
    );
    assert!(message.starts_with("UnknownDataset: "), "{message}");
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
    argocd(
        ns,
        "Catalog/locked",
        "Degraded",
        "degraded_credentialsInvalid",
    );

    // InProgress: a model whose source catalog is not there yet (Flux applies it with the model).
    env.apply_ok(&model(ns, "early", "early_model", "later"));
    wait_ready(env, ns, "sm/early", "False", "CatalogNotFound");
    wait_kstatus(ns, "SemanticModel/early", "InProgress");
    let message = argocd(
        ns,
        "SemanticModel/early",
        "Progressing",
        "progressing_catalogNotFound",
    );
    assert!(message.starts_with("CatalogNotFound: "), "{message}");
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
    wait_for(Judge::ArgoCd, ns, "SemanticModel/early", "Healthy");
    assert_eq!(
        jsonpath(env, ns, "sm/early", "{.status.conditions[*].type}"),
        "Ready Valid SourcesResolved SourcesCurrent"
    );

    // The person fixes the relationship: Failed becomes Current.
    env.apply_ok(&model(ns, "broken", "broken_model", "hr"));
    wait_ready(env, ns, "sm/broken", "True", "Accepted");
    wait_kstatus(ns, "SemanticModel/broken", "Current");
    wait_for(Judge::ArgoCd, ns, "SemanticModel/broken", "Healthy");
}

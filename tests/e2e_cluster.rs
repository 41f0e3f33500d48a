//! The test control plane is a real one: kube-controller-manager's garbage collector follows
//! owner references and its namespace controller empties and removes deleted namespaces.

mod support;

use std::time::Duration;

use support::{env, eventually};

#[test]
fn owner_references_are_garbage_collected() {
    let env = env();
    let ns = env.namespace("gc");
    let ns = ns.name.as_str();
    env.apply_ok(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: owner, namespace: {ns}}}\n"
    ));
    let uid = env.kubectl_ok(&[
        "get",
        "configmap",
        "owner",
        "-n",
        ns,
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    env.apply_ok(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dependent\n  namespace: {ns}\n  ownerReferences: [{{apiVersion: v1, kind: ConfigMap, name: owner, uid: {uid}}}]\n"
    ));
    env.kubectl_ok(&["delete", "configmap", "owner", "-n", ns]);
    eventually(
        Duration::from_secs(60),
        "the dependent to be collected",
        || {
            let out = env.kubectl(&["get", "configmap", "dependent", "-n", ns]);
            (!out.status.success()).then_some(())
        },
    );
}

#[test]
fn deleting_a_namespace_removes_it_and_its_contents() {
    let env = env();
    let name = format!("nsdel-{}", support::db::unique());
    env.kubectl_ok(&["create", "namespace", &name]);
    env.apply_ok(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c, namespace: {name}}}\n"
    ));
    env.kubectl_ok(&["delete", "namespace", &name, "--wait=false"]);
    eventually(
        Duration::from_secs(90),
        "the namespace to disappear",
        || {
            let out = env.kubectl(&["get", "namespace", &name]);
            (!out.status.success()).then_some(())
        },
    );
}

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

/// The daemons' ports come from below the kernel's ephemeral range, where no outgoing
/// connection of a parallel test can take one between the check and the daemon's bind.
#[test]
fn daemon_ports_are_free_and_outside_the_ephemeral_range() {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    let low: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let port = support::daemon_port();
        assert!(
            (10000..low).contains(&port),
            "port {port} is not in 10000..{low}"
        );
        std::net::TcpListener::bind(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("port {port} was handed out but cannot be bound: {e}"));
        seen.insert(port);
    }
    // Random, not one fixed port that every script would fight over.
    assert!(seen.len() > 10, "{seen:?}");
}

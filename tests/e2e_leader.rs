//! Leader election against a real API server: one of two replicas leads and writes; when it is
//! killed (no lease release) the other takes over after the lease expires and reconciles; a
//! graceful stop hands over at once. Takeover times are printed, not asserted (benchmarks own
//! timing); the bounds here are generous liveness limits.

mod support;

use std::time::{Duration, Instant};

use support::{Operator, env, eventually, examples_in, wait_ready};

const LEASE: &str = "6";

fn pair(ns: &str) -> (Operator, Operator) {
    let env = env();
    let a = Operator::start(
        env,
        &env.kubeconfig,
        Some(ns),
        ns,
        &["--lease-duration-seconds", LEASE],
    );
    let b = Operator::start(
        env,
        &env.kubeconfig,
        Some(ns),
        ns,
        &["--lease-duration-seconds", LEASE],
    );
    (a, b)
}

fn leader_and_standby(a: Operator, b: Operator) -> (Operator, Operator) {
    eventually(Duration::from_secs(30), "exactly one leader", || {
        (a.is_leading() != b.is_leading()).then_some(())
    });
    if a.is_leading() { (a, b) } else { (b, a) }
}

#[test]
fn a_killed_leader_is_replaced_and_the_new_leader_reconciles() {
    let env = env();
    let ns = env.namespace("failover");
    let ns = ns.name.as_str();
    let (a, b) = pair(ns);
    env.apply_ok(&examples_in(ns));
    wait_ready(env, ns, "sm/employee-analysis", "True", "Accepted");
    let (mut leader, standby) = leader_and_standby(a, b);
    assert_eq!(
        standby.metric("semops_status_writes_total", &[]),
        0.0,
        "a standby never writes"
    );

    let killed = Instant::now();
    leader.kill();
    eventually(Duration::from_secs(60), "standby takes over", || {
        standby.is_leading().then_some(())
    });
    println!(
        "takeover after SIGKILL: {:?} (lease {LEASE}s)",
        killed.elapsed()
    );

    let bad = examples_in(ns).replace("to: manager", "to: mgr");
    env.apply_ok(&bad);
    wait_ready(env, ns, "sm/employee-analysis", "False", "UnknownDataset");
    assert!(
        standby.metric("semops_status_writes_total", &[]) >= 1.0,
        "the new leader wrote the status"
    );
}

#[test]
fn a_gracefully_stopped_leader_hands_over_without_waiting_for_expiry() {
    let env = env();
    let ns = env.namespace("handover");
    let ns = ns.name.as_str();
    let (a, b) = pair(ns);
    let (mut leader, standby) = leader_and_standby(a, b);
    let stopped = Instant::now();
    leader.terminate();
    eventually(Duration::from_secs(60), "standby takes over", || {
        standby.is_leading().then_some(())
    });
    println!(
        "takeover after SIGTERM: {:?} (lease {LEASE}s)",
        stopped.elapsed()
    );
    let holder = env.kubectl_ok(&[
        "get",
        "lease",
        "semops-leader",
        "-n",
        ns,
        "-o",
        "jsonpath={.spec.holderIdentity}",
    ]);
    assert!(
        !holder.is_empty(),
        "the new leader recorded itself in the Lease"
    );
}

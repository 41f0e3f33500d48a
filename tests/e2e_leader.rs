//! Leader election against a real API server: one of two replicas leads and writes; when it is
//! killed (no lease release) the other takes over after the lease expires and reconciles; a
//! graceful stop releases the Lease, so the other takes over long before it could expire.
//! Takeover times are printed, not asserted (benchmarks own timing).

mod support;

use std::time::{Duration, Instant};

use support::{Operator, env, eventually, examples_in, wait_ready};

const LEASE: &str = "6";
/// A lease longer than the wait below (and standbys retry every lease/7, ~9 s): a takeover
/// within the wait is a release, never an expiry.
const LONG_LEASE: &str = "60";

fn pair(ns: &str, lease: &str) -> (Operator, Operator) {
    let env = env();
    let start = || {
        Operator::start(
            env,
            &env.kubeconfig,
            Some(ns),
            ns,
            &["--lease-duration-seconds", lease],
        )
    };
    (start(), start())
}

fn lease_field(ns: &str, field: &str) -> String {
    env().kubectl_ok(&[
        "get",
        "lease",
        "semops-leader",
        "-n",
        ns,
        "-o",
        &format!("jsonpath={{.spec.{field}}}"),
    ])
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
    let (a, b) = pair(ns, LEASE);
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
    let (a, b) = pair(ns, LONG_LEASE);
    let (mut leader, standby) = leader_and_standby(a, b);
    let before = lease_field(ns, "holderIdentity");
    let transitions = lease_field(ns, "leaseTransitions");
    let stopped = Instant::now();
    leader.terminate();
    // Well inside the 60 s lease: only a released Lease lets the standby in this early.
    eventually(Duration::from_secs(45), "standby takes over", || {
        standby.is_leading().then_some(())
    });
    println!(
        "takeover after SIGTERM: {:?} (lease {LONG_LEASE}s)",
        stopped.elapsed()
    );
    let holder = lease_field(ns, "holderIdentity");
    assert!(
        !holder.is_empty() && holder != before,
        "the new leader recorded itself in the Lease ({before} -> {holder})"
    );
    assert_ne!(
        lease_field(ns, "leaseTransitions"),
        transitions,
        "the hand-over is a lease transition"
    );
}

//! Failover and relist for real, on every run (the drills run the same scenarios larger):
//!
//! - three replicas with leader election on; the leader SIGKILLed twice while a model is
//!   edited (each edit adds a metric), then a leader frozen (SIGSTOP) past its lease while the
//!   model is edited, then resumed: no metric id lost, duplicated or reused, and no status write
//!   from the frozen leader;
//! - an operator frozen while models are created, deleted and edited, etcd compacted past its
//!   watch and the API server restarted (its watches expire with 410): after resuming it serves
//!   exactly what exists.
//!
//! The relist restarts this suite's API server, so the two run one after the other.

mod support;

use std::sync::Mutex;

use support::env;
use support::scenarios;

/// One scenario at a time: the relist restarts the API server every test here talks to.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn killed_and_frozen_leaders_lose_no_id_and_write_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let f = scenarios::failover(env(), 2);
    assert_eq!(f.takeovers.len(), 2, "{f:?}");
    assert!(f.ids_checked >= 5, "{f:?}");
    assert!(
        f.frozen_series_seen,
        "the frozen leader exposed no write counter"
    );
    assert_eq!(
        (f.frozen_writes, f.harmful),
        (0.0, 0),
        "the frozen leader wrote: {f:?}"
    );
    assert_eq!(
        (f.ids_lost, f.ids_duplicated, f.ids_reused),
        (0, 0, 0),
        "{f:?}"
    );
}

#[test]
fn watches_that_expire_are_relisted_and_nothing_is_missed() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let r = scenarios::relist(env(), 20);
    assert!(r.converged_after.is_some(), "{r:?}");
    assert_eq!(
        (r.missing, r.ghosts, r.stale_definitions),
        (0, 0, 0),
        "{r:?}"
    );
}

//! Stale-registration rounds (docs/design.md#a-check-round), the I/O half, in rooms by job: `round` runs one
//! round (plan → observe → classify → status → commit → announce), `classify` is its pure
//! step from answers to next states, `visit` probes model-bound
//! sources and feeds drift to the models, `announce` publishes Events, metrics and the summary
//! line. This file keeps the bookkeeping they share: the global bound on rounds, one round per
//! catalog at a time, the drift feed and the source-visit schedule.
//!
//! Never delete on doubt: any infrastructure failure anywhere in the round leaves every state as
//! it was and removes nothing. A removal is a state in status, so it happens exactly when that
//! one status write commits; Events are published only after it did.

mod announce;
mod classify;
mod round;
mod visit;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::ResourceExt;

use super::writer::Announce;
use super::{Context, Error};
use crate::catalog::ProbeTarget;
use crate::catalog::observe::Observations;
use crate::catalog::registry::registry_key;
use crate::crd::Catalog;
use crate::crd::catalog::CheckResult;
use crate::crd::conditions::{ConditionType, Desired};
use crate::fair::{FairSlots, Permit};
use crate::policy::schedule::{Trigger, first_visit, jittered};
use crate::reconcile::Act;
use crate::reconcile::plan::StaleReport;

pub use visit::visit_sources;

/// Reachable flips (from rounds and connection checks alike) become Events: Normal when the
/// catalog answers again, Warning when it stops.
pub const REACHABLE_FLIPS: Announce = Announce {
    condition: ConditionType::Reachable,
    action: "CheckConnection",
    when_true: true,
};

/// What the last round (or source visit) learned about a catalog, for the models bound to it.
#[derive(Clone, Debug)]
pub struct SourceFeed {
    pub at: Instant,
    /// `Err(message)` when the catalog could not answer.
    pub seen: Result<Arc<Observations>, String>,
}

/// Round bookkeeping shared by the controller and the read API.
pub struct Checks {
    /// Concurrent rounds (and source visits): a global bound and a per-namespace share
    /// (docs/design.md#scheduling).
    rounds: Arc<FairSlots>,
    /// Concurrent connection checks, bounded the same way.
    probes: Arc<FairSlots>,
    /// One round per catalog at a time (periodic, annotation and API rounds serialize).
    catalog_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    feeds: Mutex<HashMap<String, SourceFeed>>,
    /// Next source-only visit per catalog while periodic checks are off (in memory: a restart
    /// draws a fresh first visit, so it never causes a storm).
    source_visits: Mutex<HashMap<String, Instant>>,
    /// Catalogs known to have model-bound sources in this process.
    bound: Mutex<HashSet<String>>,
}

impl Checks {
    pub fn new(max_rounds: usize) -> Self {
        Self::with_shares(max_rounds, FairSlots::default_share(max_rounds))
    }

    /// `max_rounds` rounds at once, at most `per_namespace` of them (and of connection checks,
    /// of which twice as many run at once) for one namespace.
    pub fn with_shares(max_rounds: usize, per_namespace: usize) -> Self {
        let probes = max_rounds.max(1) * 2;
        Self {
            rounds: FairSlots::new(max_rounds, per_namespace),
            probes: FairSlots::new(probes, per_namespace * 2),
            catalog_locks: Mutex::default(),
            feeds: Mutex::default(),
            source_visits: Mutex::default(),
            bound: Mutex::default(),
        }
    }

    fn lock_for(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.catalog_locks
            .lock()
            .expect("lock map poisoned")
            .entry(key.to_string())
            .or_default()
            .clone()
    }

    pub fn feed(&self, key: &str) -> Option<SourceFeed> {
        self.feeds
            .lock()
            .expect("feed map poisoned")
            .get(key)
            .cloned()
    }

    fn set_feed(&self, key: &str, seen: Result<Arc<Observations>, String>) {
        self.feeds.lock().expect("feed map poisoned").insert(
            key.to_string(),
            SourceFeed {
                at: Instant::now(),
                seen,
            },
        );
    }

    /// Forgets a deleted catalog.
    pub fn forget(&self, key: &str) {
        self.feeds.lock().expect("feed map poisoned").remove(key);
        self.source_visits
            .lock()
            .expect("visit map poisoned")
            .remove(key);
        self.catalog_locks
            .lock()
            .expect("lock map poisoned")
            .remove(key);
    }

    /// Whether a source-only visit is due; the first call draws a uniform first visit.
    pub fn source_visit_due(&self, key: &str, interval: Duration) -> Option<Duration> {
        let mut map = self.source_visits.lock().expect("visit map poisoned");
        let now = Instant::now();
        let at = *map
            .entry(key.to_string())
            .or_insert_with(|| now + first_visit(interval, rand::random()));
        if at <= now {
            map.insert(
                key.to_string(),
                now + jittered(interval, 0.2, rand::random()),
            );
            None
        } else {
            Some(at - now)
        }
    }

    /// Notes that a model binds sources of catalog `key`; true the first time in this process
    /// (the catalog then needs one reconcile to start its source visits).
    pub fn note_bound(&self, key: &str) -> bool {
        self.bound
            .lock()
            .expect("bound set poisoned")
            .insert(key.to_string())
    }

    pub fn is_bound(&self, key: &str) -> bool {
        self.bound.lock().expect("bound set poisoned").contains(key)
    }

    /// A connection-check slot for namespace `ns` now, or `None` when its share (or every
    /// slot) is taken: the caller comes back later instead of holding a reconcile worker.
    pub fn try_probe(&self, ns: &str) -> Option<Permit> {
        self.probes.try_acquire(ns)
    }

    pub fn next_source_visit(&self, key: &str) -> Option<Duration> {
        let map = self.source_visits.lock().expect("visit map poisoned");
        map.get(key)
            .map(|at| at.saturating_duration_since(Instant::now()))
    }
}

/// What a round did.
#[derive(Clone, Debug)]
pub struct RoundReport {
    pub report: StaleReport,
    pub result: CheckResult,
    /// The `nextCheckAt` recorded (Record rounds).
    pub next_check_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// What the round says about reachability.
    pub reachable: Desired,
}

/// Distinct `(target, id)` of the sources bound by accepted models to `catalog`.
pub fn bound_sources(ctx: &Context, ns: &str, catalog: &str) -> Vec<(ProbeTarget, String)> {
    let mut v: Vec<(ProbeTarget, String)> = ctx
        .stores
        .models_in(ns)
        .iter()
        .flat_map(|m| m.status.iter().flat_map(|s| &s.source_associations))
        .filter(|a| a.source.catalog == catalog)
        .map(|a| (crate::model::drift::target_of(a), a.id.clone()))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Distinct targets of the sources bound to `catalog` whose datasets depend on columns: their
/// column lists are read with each round or visit (column drift).
pub fn column_sources(ctx: &Context, ns: &str, catalog: &str) -> Vec<ProbeTarget> {
    let mut v: Vec<ProbeTarget> = ctx
        .stores
        .models_in(ns)
        .iter()
        .flat_map(|m| m.status.iter().flat_map(|s| &s.source_associations))
        .filter(|a| a.source.catalog == catalog && !a.columns.is_empty())
        .map(crate::model::drift::target_of)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Runs one round of `cat` now, after the catalog's lock and a slot of its namespace's share
/// (waiting for one). `Act::Record` needs leadership (the status writer refuses otherwise);
/// `Act::DryRun` works on any replica and writes nothing.
pub async fn run_round(
    ctx: &Context,
    cat: &Catalog,
    trigger: Trigger,
    act: Act,
) -> Result<RoundReport, Error> {
    let lock = ctx.checks.lock_for(&registry_key(cat));
    let _one_per_catalog = lock.lock().await;
    // A report the API asked for is bounded by the API (api::reports), never by taking one of
    // the slots the schedule's rounds need.
    let _permit = if act == Act::DryRun && trigger == Trigger::Api {
        None
    } else {
        Some(ctx.checks.rounds.acquire(&namespace(cat)).await)
    };
    locked_round(ctx, cat, trigger, act).await
}

/// Like [`run_round`], but `None` at once when the namespace's share of slots (or every slot)
/// is taken: a reconcile comes back later rather than holding a worker that another
/// namespace's Catalogs need.
pub async fn try_run_round(
    ctx: &Context,
    cat: &Catalog,
    trigger: Trigger,
    act: Act,
) -> Result<Option<RoundReport>, Error> {
    let lock = ctx.checks.lock_for(&registry_key(cat));
    let _one_per_catalog = lock.lock().await;
    let Some(_permit) = ctx.checks.rounds.try_acquire(&namespace(cat)) else {
        ctx.metrics.checks.deferred.inc();
        return Ok(None);
    };
    locked_round(ctx, cat, trigger, act).await.map(Some)
}

fn namespace(cat: &Catalog) -> String {
    cat.namespace().unwrap_or_default()
}

async fn locked_round(
    ctx: &Context,
    cat: &Catalog,
    trigger: Trigger,
    act: Act,
) -> Result<RoundReport, Error> {
    // A round that waited for another round of this catalog works on the newest cached copy
    // (the other one's status write), so its own write is not refused as stale.
    let cached = ctx
        .stores
        .catalogs
        .get(&kube::runtime::reflector::ObjectRef::from_obj(cat));
    let cat = cached.as_deref().unwrap_or(cat);
    ctx.metrics.checks.rounds_in_flight.inc();
    let span = tracing::info_span!("round", catalog = %cat.name_any(), %trigger, ?act);
    let result = tracing::Instrument::instrument(round::run(ctx, cat, trigger, act), span).await;
    ctx.metrics.checks.rounds_in_flight.dec();
    result
}

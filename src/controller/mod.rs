//! Reconcilers, one per kind: each reads the shared caches, runs a pipeline of named steps over
//! the pure rooms, builds one status and commits it at most once — only when it changed and
//! only while this replica leads. `check` runs the Catalog check rounds.

pub mod catalog;
pub mod check;
pub mod events;
#[cfg(test)]
mod mock_api;
mod own_writes;
pub mod policy;
mod resolutions;
pub mod semantic_model;
mod triggers;
pub mod writer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Future, StreamExt};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use tracing::Instrument;

use crate::catalog::registry::Registry;
use crate::crd::conditions::Reason;
use crate::leader::LeaderHandle;
use crate::policy::OperatorDefaults;
use crate::stores::Stores;
use crate::telemetry::Metrics;
use events::{Delivery, Events, Reporter, Severity};

pub use own_writes::OwnWrites;
pub use triggers::Triggers;
pub use writer::HasStatus;

/// Controller names: metric labels (controller-runtime's `controller` label) and log fields.
pub mod names {
    pub const SEMANTIC_MODEL: &str = "semanticmodel";
    pub const CATALOG: &str = "catalog";
    pub const RECONCILE_POLICY: &str = "reconcilepolicy";
}

/// Check rounds running at once across all catalogs, unless `--max-concurrent-rounds` says.
pub const DEFAULT_MAX_CONCURRENT_ROUNDS: usize = 4;

/// Everything a reconcile needs.
pub struct Context {
    pub client: Client,
    pub stores: Stores,
    pub leader: LeaderHandle,
    pub metrics: Arc<Metrics>,
    pub events: Events,
    pub defaults: OperatorDefaults,
    /// One connection pool per probed Catalog.
    pub providers: Arc<Registry>,
    /// Period of source-only visits of Catalogs whose periodic checks are off.
    pub drift_interval: Duration,
    /// ControllerRevisions kept per model (`--revision-history-limit`).
    pub revision_history_limit: i64,
    /// Check rounds: global bound, per-catalog serialization, the drift feed.
    pub checks: check::Checks,
    /// Requeues models when a round fed new drift (set by `run`).
    pub triggers: Option<Triggers>,
    failures: Mutex<HashMap<String, u32>>,
    /// When each model's sources were last resolved (in memory): drift from a round older than
    /// that describes sources the model no longer has, and is ignored.
    sources_resolved: Mutex<resolutions::Resolutions>,
    /// Writes refused as stale, per kind: evidence that a watch stopped delivering.
    pub stale_caches: Arc<crate::stale_cache::StaleCaches>,
    /// Models' own status writes, whose watch events trigger no reconcile (set by `run`).
    pub own_writes: Arc<OwnWrites>,
    /// Acceptances' probes and column reads that wait for one catalog go out together.
    pub source_batches: Arc<semantic_model::SourceBatches>,
}

/// What a [`Context`] is built from: the parts `run` wires, and the operator's settings (with
/// their flag defaults, so tests name only what they change).
pub struct ContextConfig {
    pub client: Client,
    pub stores: Stores,
    pub leader: LeaderHandle,
    pub metrics: Arc<Metrics>,
    /// Reports Events as `semops-controller` / `semops-reconciler` of this instance.
    pub identity: String,
    pub defaults: OperatorDefaults,
    pub providers: Arc<Registry>,
    /// Period of source-only visits of Catalogs whose periodic checks are off.
    pub drift_interval: Duration,
    /// ControllerRevisions kept per model (`--revision-history-limit`).
    pub revision_history_limit: i64,
    /// Global bound on concurrent check rounds.
    pub max_concurrent_rounds: usize,
    /// The most rounds one namespace holds at once (`None`: half of all).
    pub max_rounds_per_namespace: Option<usize>,
    /// Requeues models when a round fed new drift (none in single-object tools and tests).
    pub triggers: Option<Triggers>,
    /// Writes refused as stale, per kind (shared with the watches that act on it).
    pub stale_caches: Arc<crate::stale_cache::StaleCaches>,
}

impl ContextConfig {
    /// The flag defaults around the given client, caches and leadership.
    pub fn new(client: Client, stores: Stores, leader: LeaderHandle) -> Self {
        Self {
            client,
            stores,
            leader,
            metrics: Arc::default(),
            identity: "semops".into(),
            defaults: OperatorDefaults::default(),
            providers: Arc::default(),
            drift_interval: Duration::from_secs(600),
            revision_history_limit: 10,
            max_concurrent_rounds: DEFAULT_MAX_CONCURRENT_ROUNDS,
            max_rounds_per_namespace: None,
            triggers: None,
            stale_caches: Arc::default(),
        }
    }
}

impl Context {
    pub fn new(cfg: ContextConfig) -> Self {
        Self {
            events: Events::new(cfg.client.clone(), cfg.identity),
            client: cfg.client,
            stores: cfg.stores,
            leader: cfg.leader,
            metrics: cfg.metrics,
            defaults: cfg.defaults,
            providers: cfg.providers,
            drift_interval: cfg.drift_interval,
            revision_history_limit: cfg.revision_history_limit,
            checks: check::Checks::with_shares(
                cfg.max_concurrent_rounds,
                cfg.max_rounds_per_namespace.unwrap_or_else(|| {
                    crate::fair::FairSlots::default_share(cfg.max_concurrent_rounds)
                }),
            ),
            triggers: cfg.triggers,
            failures: Mutex::default(),
            sources_resolved: Mutex::default(),
            stale_caches: cfg.stale_caches,
            own_writes: Arc::default(),
            source_batches: Arc::new(semantic_model::source_batches()),
        }
    }

    /// A write made from the cached `obj` was refused as a conflict: recorded as evidence about
    /// the kind's watch (docs/reliability.md), then retried like any conflict.
    pub fn refused_as_stale<K: Resource<DynamicType = ()>>(&self, obj: &K) -> Error {
        if let (Some(cache), Some(uid), Some(rv)) = (
            self.stale_caches.of_kind(&K::kind(&())),
            obj.meta().uid.as_deref(),
            obj.meta().resource_version.as_deref(),
        ) {
            cache.refused(uid, rv);
        }
        Error::Conflict
    }

    /// A model's sources were just resolved: older drift observations no longer apply to it.
    pub fn mark_sources_resolved(&self, uid: &str) {
        let live_uids = || {
            (self.stores.models.state().iter())
                .filter_map(|m| m.metadata.uid.clone())
                .collect()
        };
        self.sources_resolved
            .lock()
            .expect("resolution map poisoned")
            .mark(uid, Instant::now(), live_uids);
    }

    pub fn sources_resolved_at(&self, uid: &str) -> Option<Instant> {
        self.sources_resolved
            .lock()
            .expect("resolution map poisoned")
            .get(uid)
    }

    /// Publishes an Event about `obj` (best effort).
    pub async fn publish<K: Resource<DynamicType = ()>>(
        &self,
        reporter: Reporter,
        obj: &K,
        severity: Severity,
        reason: &Reason,
        action: &str,
        note: String,
    ) {
        self.events
            .publish(
                &self.metrics,
                reporter,
                obj,
                severity,
                reason,
                action,
                note,
                Delivery::Now,
            )
            .await;
    }
}

/// Reconcile failures, each a category used as metric label and in logs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API request failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("the object changed since it was read; retrying with the newer version")]
    Conflict,
    #[error("this replica lost leadership before writing")]
    NotLeader,
    #[error("object has no namespace")]
    MissingNamespace,
    #[error("could not serialize status: {0}")]
    Serialize(#[from] serde_json::Error),
    /// Work that waits on something outside (e.g. an unreachable catalog); retried with backoff.
    #[error("waiting: {0}")]
    Pending(Reason),
    /// An object semops would replace or delete is not its own; it is left alone.
    #[error(
        "{0} is not owned by semops for this object; delete or rename it to let semops proceed"
    )]
    NotOwned(String),
}

/// The error categories that need a person (conflicts, lost leadership and waits retry by
/// themselves): the chart's SemopsReconcileErrors alert selects exactly these.
pub const ALERTED_CATEGORIES: [&str; 4] = ["KubeApi", "Serialize", "NotOwned", "MissingNamespace"];

impl Error {
    pub fn category(&self) -> &str {
        match self {
            Error::Kube(_) => "KubeApi",
            Error::Conflict => "Conflict",
            Error::NotLeader => "NotLeader",
            Error::MissingNamespace => "MissingNamespace",
            Error::Serialize(_) => "Serialize",
            Error::Pending(reason) => reason.as_str(),
            Error::NotOwned(_) => "NotOwned",
        }
    }
}

/// Exponential backoff per object: 1s, 2s, 4s ... capped at 5 minutes; conflicts retry at once-ish.
pub fn backoff_delay(failures: u32, error: &Error) -> Duration {
    match error {
        Error::Conflict => Duration::from_millis(200),
        Error::NotLeader => Duration::from_secs(5),
        _ => Duration::from_secs(1u64 << failures.min(8)).min(Duration::from_secs(300)),
    }
}

fn object_key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{}/{}/{}",
        K::kind(&()),
        obj.namespace().unwrap_or_default(),
        obj.name_any()
    )
}

pub(crate) fn error_policy<K: Resource<DynamicType = ()>>(
    controller: &'static str,
) -> impl Fn(Arc<K>, &Error, Arc<Context>) -> Action {
    move |obj, error, ctx| {
        let key = object_key(obj.as_ref());
        let failures = {
            let mut map = ctx.failures.lock().expect("failure map poisoned");
            let n = map.entry(key.clone()).or_insert(0);
            *n += 1;
            *n - 1
        };
        let delay = backoff_delay(failures, error);
        ctx.metrics.observe_error(controller, error.category());
        // A conflict only means our cache lagged our own write; it retries at once and is routine.
        if matches!(error, Error::Conflict) {
            tracing::debug!(controller, object = %key, "status write conflict; retrying");
        } else {
            tracing::warn!(controller, object = %key, category = error.category(), error = %error, retry_in = ?delay, "reconcile failed");
        }
        Action::requeue(delay)
    }
}

/// Wraps a reconcile in a span naming its object (every log line inside carries it), with
/// timing, metrics and failure-count reset.
pub(crate) async fn instrumented<K, F>(
    controller: &'static str,
    obj: Arc<K>,
    ctx: Arc<Context>,
    fut: F,
) -> Result<Action, Error>
where
    K: Resource<DynamicType = ()>,
    F: Future<Output = Result<Action, Error>>,
{
    let span = tracing::info_span!(
        "reconcile",
        controller,
        kind = %K::kind(&()),
        namespace = %obj.namespace().unwrap_or_default(),
        name = %obj.name_any(),
    );
    let started = Instant::now();
    let result = fut.instrument(span).await;
    let label = match &result {
        Ok(a) if *a == Action::await_change() => "success",
        Ok(_) => "requeue_after",
        Err(_) => "error",
    };
    if result.is_ok() {
        ctx.failures
            .lock()
            .expect("failure map poisoned")
            .remove(&object_key(obj.as_ref()));
    }
    ctx.metrics
        .observe_reconcile(controller, started.elapsed(), label);
    result
}

/// Drives a controller's result stream, logging object-level outcomes at debug level.
pub(crate) async fn drain<S, T, E>(controller: &'static str, stream: S)
where
    S: futures::Stream<Item = Result<T, E>>,
    E: std::fmt::Display,
{
    stream
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(controller, error = %e, "controller event");
            }
        })
        .await;
}

/// Refs of all objects in a store, for "reconcile everything" triggers.
pub fn all_refs<K>(store: &Store<K>) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .state()
        .iter()
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}

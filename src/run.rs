//! `semops run`: one watch per kind into shared caches, the leader elector, three controllers and
//! the probe/metrics server, all stopped by one cancellation token.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::Api;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, watcher as make_watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::api::auth::Auth;
use crate::api::{ApiState, RoundError, Rounds};
use crate::catalog::registry::{Registry, registry_key};
use crate::controller::{self, Context, ContextConfig, Triggers, catalog, policy, semantic_model};
use crate::crd::{Catalog, ReconcilePolicy, SemanticModel};
use crate::index::ModelIndex;
use crate::leader::{Elector, LeaderHandle, LeaseTimings};
use crate::policy::OperatorDefaults;
use crate::policy::schedule::Trigger;
use crate::reconcile::Act;
use crate::reconcile::plan::StaleReport;
use crate::server;
use crate::stores::Stores;
use crate::telemetry::Metrics;

/// Settings of one operator process.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub probe_addr: SocketAddr,
    pub leader_election: bool,
    pub lease_namespace: String,
    pub lease_name: String,
    pub identity: String,
    pub lease_timings: LeaseTimings,
    pub defaults: OperatorDefaults,
    pub concurrency: u16,
    /// Watch only this namespace (namespace-scoped installs, tests); all namespaces when None.
    pub watch_namespace: Option<String>,
    /// Period of source-only visits of Catalogs whose periodic checks are off.
    pub drift_interval: Duration,
    /// Check rounds running at once across all Catalogs.
    pub max_concurrent_rounds: usize,
    /// The share of one namespace (`None`: half of `max_concurrent_rounds`).
    pub max_rounds_per_namespace: Option<usize>,
    /// ControllerRevisions kept per model.
    pub revision_history_limit: i64,
    /// Address of the read API.
    pub api_addr: SocketAddr,
    /// Whether the read API checks tokens and RBAC (false only for local use).
    pub api_auth: bool,
    /// Whether the API server's front proxy (aggregated API) is trusted (with TLS and auth).
    pub api_front_proxy: bool,
    /// The read API's certificate and key files (HTTPS, hot-reloaded); plain HTTP when None.
    pub api_tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// Audiences a bearer token must be issued for on the direct port.
    pub api_token_audiences: Vec<String>,
    /// Connection, concurrency and time bounds of the read API.
    pub api_limits: crate::api::listen::Limits,
    /// Whether /metrics asks for a token allowed `get /metrics` (kube-rbac-proxy convention).
    pub metrics_auth: bool,
    /// How long a stale report is served again before a new scan (0: every request scans).
    pub api_report_reuse: Duration,
    /// Lineage bounds, admission and deadline.
    pub lineage: crate::api::lineage::LineageSettings,
    /// Where Catalog connections may go (empty: anywhere).
    pub allowed_catalog_hosts: crate::catalog::egress::HostAllowList,
}

/// Subscriber buffer of each shared cache; the reflector waits when a controller lags this far.
const SHARED_BUFFER: usize = 4096;

fn watch_kind<K>(
    client: &Client,
    namespace: Option<&str>,
    writer: Writer<K>,
    restart: Arc<tokio::sync::Notify>,
    metrics: Arc<Metrics>,
    tap: impl Fn(&Event<K>) + Send + 'static,
) -> impl std::future::Future<Output = ()> + Send + 'static
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let api: Api<K> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let watch = move || {
        make_watcher(api.clone(), watcher::Config::default())
            .backoff(crate::backoff::WatchBackoff::default())
            .modify(|o| {
                crate::stores::slim_for_cache(o.meta_mut());
                crate::stores::compact(o);
            })
    };
    let restarted = move || {
        metrics
            .watch_restarts
            .get_or_create(&crate::telemetry::KindLabel {
                kind: K::kind(&()).to_string(),
            })
            .inc();
        tracing::warn!(
            kind = %K::kind(&()),
            after = ?crate::stale_cache::STALE_AFTER,
            "writes made from this cache keep being refused as stale: its watch stopped delivering; restarting it with a fresh list"
        );
    };
    crate::stale_cache::restartable(watch, restart, restarted)
        .reflect_shared(writer)
        // After the store has the event: a trigger sent before would let the triggered
        // reconcile read the old object (a deleted Catalog still serving its models).
        .inspect_ok(move |e| tap(e))
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::warn!(kind = %K::kind(&()), error = %e, "watch failed; retrying with backoff");
            }
        })
}

/// Waits until a store has its first full list. kube's readiness signal wakes only the most
/// recent waiter (the controller also waits on it), so poll with short timeouts.
async fn wait_synced<K>(store: &reflector::Store<K>) -> Result<(), reflector::store::WriterDropped>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    loop {
        if let Ok(result) =
            tokio::time::timeout(Duration::from_millis(200), store.wait_until_ready()).await
        {
            return result;
        }
    }
}

/// Runs until `shutdown` is cancelled.
pub async fn run(
    client: Client,
    review_client: Client,
    metrics: Arc<Metrics>,
    cfg: RunConfig,
    shutdown: CancellationToken,
) -> Result<(), std::io::Error> {
    let ready = Arc::new(AtomicBool::new(false));
    for controller in [
        crate::controller::names::SEMANTIC_MODEL,
        crate::controller::names::CATALOG,
        crate::controller::names::RECONCILE_POLICY,
    ] {
        metrics.declare_controller(controller, &crate::controller::ALERTED_CATEGORIES);
    }

    let (models, models_writer) = reflector::store_shared::<SemanticModel>(SHARED_BUFFER);
    let (catalogs, catalogs_writer) = reflector::store_shared::<Catalog>(SHARED_BUFFER);
    let (policies, policies_writer) = reflector::store_shared::<ReconcilePolicy>(SHARED_BUFFER);
    let stores = Stores {
        models: models.clone(),
        catalogs: catalogs.clone(),
        policies: policies.clone(),
        claims: Default::default(),
    };
    let models_sub = models_writer.subscribe().expect("shared store");
    let catalogs_sub = catalogs_writer.subscribe().expect("shared store");
    let policies_sub = policies_writer.subscribe().expect("shared store");

    let (triggers, receivers) = Triggers::new();
    let index = Arc::new(ModelIndex::default());
    let stale_caches = Arc::new(crate::stale_cache::StaleCaches::default());
    for kind in ["SemanticModel", "Catalog", "ReconcilePolicy"] {
        // Exposed at 0 from the start, so a rate or an alert has a series to read.
        metrics
            .watch_restarts
            .get_or_create(&crate::telemetry::KindLabel { kind: kind.into() })
            .inc_by(0);
    }
    let (t, s, idx) = (triggers.clone(), stores.clone(), index.clone());
    tokio::spawn(watch_kind(
        &client,
        cfg.watch_namespace.as_deref(),
        models_writer,
        stale_caches.models.restart_signal(),
        metrics.clone(),
        move |e| {
            // Both indexes follow the watch after the store (see `Stores::models_claiming`).
            idx.feed(e);
            s.claims.feed(e);
            t.on_model(e, &s)
        },
    ));
    let providers = Arc::new(Registry::with_allowed_hosts(
        cfg.allowed_catalog_hosts.clone(),
    ));
    let (t, s, reg) = (triggers.clone(), stores.clone(), providers.clone());
    tokio::spawn(watch_kind(
        &client,
        cfg.watch_namespace.as_deref(),
        catalogs_writer,
        stale_caches.catalogs.restart_signal(),
        metrics.clone(),
        move |e| {
            // A deleted Catalog's pool (and its connections) goes with it.
            if let Event::Delete(c) = e {
                reg.remove(&registry_key(c));
            }
            t.on_catalog(e, &s)
        },
    ));
    let (t, s) = (triggers.clone(), stores.clone());
    tokio::spawn(watch_kind(
        &client,
        cfg.watch_namespace.as_deref(),
        policies_writer,
        stale_caches.policies.restart_signal(),
        metrics.clone(),
        move |e| t.on_policy(e, &s),
    ));

    // Readiness waits on these and, further down, on the read API's TLS settings.
    let stores_for_ready = stores.clone();
    let mut elector_task = None;
    let leader = if cfg.leader_election {
        let api = Api::namespaced(client.clone(), &cfg.lease_namespace);
        let (elector, handle) = Elector::new(
            api,
            &cfg.lease_name,
            &cfg.identity,
            cfg.lease_timings.clone(),
        );
        let token = shutdown.clone();
        elector_task = Some(tokio::spawn(async move {
            elector.run(token.cancelled_owned()).await
        }));
        handle
    } else {
        LeaderHandle::always()
    };
    let ctx = Context::new(ContextConfig {
        metrics: metrics.clone(),
        identity: cfg.identity.clone(),
        defaults: cfg.defaults.clone(),
        providers,
        drift_interval: cfg.drift_interval,
        revision_history_limit: cfg.revision_history_limit,
        max_concurrent_rounds: cfg.max_concurrent_rounds,
        max_rounds_per_namespace: cfg.max_rounds_per_namespace,
        triggers: Some(triggers.clone()),
        stale_caches,
        ..ContextConfig::new(client.clone(), stores, leader.clone())
    });
    let own_writes = ctx.own_writes.clone();
    let ctx = Arc::new(ctx);
    let config = ControllerConfig::default().concurrency(cfg.concurrency);

    // A model's own status write comes back on its watch; reconciling it would find nothing.
    let models_sub = models_sub.filter(move |m| {
        let meta = &m.metadata;
        let triggers = own_writes.triggers(meta.uid.as_deref(), meta.resource_version.as_deref());
        std::future::ready(triggers)
    });
    let models_ctl = Controller::for_shared_stream(models_sub, models)
        .with_config(config.clone())
        .reconcile_on(receivers.models)
        .reconcile_all_on(leader.on_acquired())
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(
            |o, c| {
                controller::instrumented(
                    semantic_model::CONTROLLER,
                    o.clone(),
                    c.clone(),
                    semantic_model::reconcile(o, c),
                )
            },
            controller::error_policy(semantic_model::CONTROLLER),
            ctx.clone(),
        );
    let catalogs_ctl = Controller::for_shared_stream(catalogs_sub, catalogs)
        .with_config(config.clone())
        .reconcile_on(receivers.catalogs)
        .reconcile_all_on(leader.on_acquired())
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(
            |o, c| {
                controller::instrumented(
                    catalog::CONTROLLER,
                    o.clone(),
                    c.clone(),
                    catalog::reconcile(o, c),
                )
            },
            controller::error_policy(catalog::CONTROLLER),
            ctx.clone(),
        );
    let policies_ctl = Controller::for_shared_stream(policies_sub, policies)
        .with_config(config)
        .reconcile_on(receivers.policies)
        .reconcile_all_on(leader.on_acquired())
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(
            |o, c| {
                controller::instrumented(
                    policy::CONTROLLER,
                    o.clone(),
                    c.clone(),
                    policy::reconcile(o, c),
                )
            },
            controller::error_policy(policy::CONTROLLER),
            ctx.clone(),
        );

    let api_state = Arc::new(ApiState {
        client: client.clone(),
        stores: ctx.stores.clone(),
        index,
        revisions: Default::default(),
        providers: ctx.providers.clone(),
        auth: if cfg.api_auth {
            Auth::kubernetes(review_client.clone(), cfg.api_token_audiences.clone())
        } else {
            Auth::None
        },
        ready: ready.clone(),
        rounds: Arc::new(ControllerRounds(ctx.clone())),
        lineage: crate::api::lineage::Lineage::new(
            cfg.lineage,
            metrics.api.lineage_in_flight.clone(),
        ),
        metrics: metrics.clone(),
        reports: crate::api::reports::Reports::new(
            cfg.api_report_reuse,
            crate::api::reports::SCANS_AT_ONCE,
        ),
        probes: Default::default(),
    });
    let api_listener = tokio::net::TcpListener::bind(cfg.api_addr).await?;
    let api_tls = match &cfg.api_tls {
        Some((cert, key)) => {
            let serving = crate::api::tls::Serving::load(cert.clone(), key.clone())
                .map_err(std::io::Error::other)?;
            // The front proxy (aggregated API) is only trusted when reviews are on, and not
            // at all when the deployment has no aggregated API.
            let front_proxy_client =
                (cfg.api_auth && cfg.api_front_proxy).then(|| review_client.clone());
            tokio::spawn(crate::api::tls::keep_fresh(
                serving.clone(),
                front_proxy_client,
                shutdown.clone(),
            ));
            Some(serving)
        }
        None => None,
    };
    tracing::info!(
        addr = %api_listener.local_addr()?,
        auth = cfg.api_auth,
        tls = api_tls.is_some(),
        "serving the read API"
    );
    {
        let (ready, stores, tls) = (ready.clone(), stores_for_ready, api_tls.clone());
        tokio::spawn(async move {
            let synced = tokio::try_join!(
                wait_synced(&stores.models),
                wait_synced(&stores.catalogs),
                wait_synced(&stores.policies)
            );
            if synced.is_err() {
                return;
            }
            // Ready only once the front proxy is known: a Service must not route the API
            // server's aggregated requests to a replica that would answer them 401.
            if let Some(tls) = tls {
                tracing::info!("caches synced; waiting for the read API's front-proxy settings");
                tls.settled().await;
            }
            tracing::info!("caches synced; ready");
            ready.store(true, Ordering::Release);
        });
    }
    let probe_state = server::ProbeState {
        ready,
        metrics,
        leader: leader.clone(),
        index: api_state.index.clone(),
        auth: cfg.metrics_auth.then(|| {
            // Prometheus presents its ServiceAccount token: the API server's audience.
            Arc::new(Auth::kubernetes(review_client.clone(), vec![]))
        }),
    };
    // With TLS, /metrics moves to the HTTPS port: a scraper's token never crosses in clear.
    let metrics_on_api_port = api_tls.is_some();
    // MCP over streamable HTTP beside the read API; its tools ask the API's own router.
    let mcp = crate::mcp::http::router(
        crate::api::router(api_state.clone()),
        shutdown.child_token(),
    );
    let api_server = crate::api::serve(
        api_listener,
        api_state,
        if metrics_on_api_port {
            server::metrics_router(probe_state.clone()).merge(mcp)
        } else {
            mcp
        },
        api_tls,
        cfg.api_limits,
        shutdown.clone(),
    );

    let listener = tokio::net::TcpListener::bind(cfg.probe_addr).await?;
    tracing::info!(
        addr = %listener.local_addr()?,
        metrics_here = !metrics_on_api_port,
        "serving the probes"
    );
    let server = server::serve(
        listener,
        probe_state,
        !metrics_on_api_port,
        shutdown.clone(),
    );

    let events = ctx.clone();
    let controllers = async move {
        tokio::join!(
            controller::drain(semantic_model::CONTROLLER, models_ctl),
            controller::drain(catalog::CONTROLLER, catalogs_ctl),
            controller::drain(policy::CONTROLLER, policies_ctl),
        );
        // Events the last reconciles queued go out before the process ends (within the grace).
        events.events.flush().await;
    };
    let everything = async { tokio::join!(controllers, server, api_server) };
    // Shutdown is bounded whatever state the process is in (API server unreachable, caches
    // never synced, a reconcile stuck on a catalog): in-flight work gets SHUTDOWN_GRACE, then
    // the process stops; the Lease is released when the API server answers in time.
    let grace = async {
        shutdown.cancelled().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    let served = tokio::select! {
        ((), served, api_served) = everything => {
            if let Err(e) = api_served {
                tracing::warn!(error = %e, "read API stopped with an error");
            }
            served
        }
        () = grace => {
            tracing::warn!(grace = ?SHUTDOWN_GRACE, "work still in flight after the shutdown grace period; stopping anyway");
            Ok(())
        }
    };
    if let Some(task) = elector_task
        && tokio::time::timeout(LEASE_RELEASE_GRACE, task)
            .await
            .is_err()
    {
        tracing::warn!("the Lease could not be released in time; it expires instead");
    }
    tracing::info!("stopped");
    served
}

/// How long in-flight work may take after SIGTERM.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(7);
/// How long the Lease release may take after that. Together with the runtime's own shutdown
/// (1 s for blocking tasks), `semops run` ends within 10 s of SIGTERM in any state.
pub const LEASE_RELEASE_GRACE: Duration = Duration::from_secs(2);

/// The read API's rounds, run by the controllers' round engine (the API never imports it).
pub struct ControllerRounds(pub Arc<Context>);

impl Rounds for ControllerRounds {
    fn is_leading(&self) -> bool {
        self.0.leader.is_leading()
    }

    fn run<'a>(
        &'a self,
        catalog: &'a Catalog,
        act: Act,
    ) -> futures::future::BoxFuture<'a, Result<StaleReport, RoundError>> {
        Box::pin(async move {
            // A round that raced another writer of the Catalog (its status write refused as
            // stale) runs again on the newer copy: the caller asked for a round, not a retry.
            let mut attempts = 0;
            loop {
                attempts += 1;
                match controller::check::run_round(&self.0, catalog, Trigger::Api, act).await {
                    Ok(round) => return Ok(round.report),
                    Err(controller::Error::NotLeader) => return Err(RoundError::NotLeader),
                    Err(controller::Error::Conflict) if attempts < 10 => {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, catalog = %registry_key(catalog), "check round failed");
                        return Err(RoundError::Failed);
                    }
                }
            }
        })
    }
}

/// Cancels `token` on SIGINT or SIGTERM.
pub fn cancel_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        let term = async {
            if let Ok(mut s) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                s.recv().await;
            }
        };
        #[cfg(not(unix))]
        let term = std::future::pending::<()>();
        tokio::select! { _ = ctrl_c => {}, _ = term => {} }
        tracing::info!("shutdown requested");
        token.cancel();
    });
}

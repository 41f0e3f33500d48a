//! The read API (docs/design.md#the-read-api): Gravitino's REST paths (metalake = namespace), served by every
//! replica from its own watch caches and indexes. It never imports a controller: check rounds
//! reach it through the [`Rounds`] seam that `run` wires.

pub mod aggregated;
pub mod auth;
pub mod checks;
pub mod compile;
pub mod error;
pub mod explain;
pub mod extract;
pub mod front_proxy;
pub mod impact;
pub mod lineage;
pub mod listen;
pub mod openapi;
pub mod paths;
pub mod reports;
pub mod revisions;
pub mod routes;
pub mod single_flight;
pub mod tls;
pub mod versions;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use futures::future::BoxFuture;
use kube::Client;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::catalog::registry::Registry;
use crate::crd::Catalog;
use crate::index::ModelIndex;
use crate::reconcile::Act;
use crate::reconcile::plan::StaleReport;
use crate::stores::Stores;

/// Why a round asked for by the API did not run.
#[derive(Debug, PartialEq, Eq)]
pub enum RoundError {
    /// Recording a round needs the leader.
    NotLeader,
    /// Anything else (logged with its cause where it happened).
    Failed,
}

/// Check rounds as the read API needs them (stale reports, on-demand reconcile); implemented
/// over the controllers' round engine by `run`.
pub trait Rounds: Send + Sync {
    /// Whether this replica may record a round now.
    fn is_leading(&self) -> bool;
    /// Runs a round of `catalog` now (an API trigger) and returns its report.
    fn run<'a>(
        &'a self,
        catalog: &'a Catalog,
        act: Act,
    ) -> BoxFuture<'a, Result<StaleReport, RoundError>>;
}

/// Everything a request needs.
pub struct ApiState {
    pub client: Client,
    pub stores: Stores,
    pub index: Arc<ModelIndex>,
    /// model -> accepted definition, for models whose spec moved past it.
    pub revisions: crate::index::revisions::RevisionCache,
    pub providers: Arc<Registry>,
    pub auth: auth::Auth,
    pub ready: Arc<AtomicBool>,
    /// Check rounds (reports, on-demand reconcile).
    pub rounds: Arc<dyn Rounds>,
    /// Lineage admission and bounds.
    pub lineage: lineage::Lineage,
    /// Stale reports: single flight per catalog, reused briefly, few scans at once.
    pub reports: reports::Reports,
    pub metrics: Arc<crate::telemetry::Metrics>,
    /// Live lookups of the same source share one probe while it is in flight.
    pub probes: SourceProbes,
}

/// The read API's live source probes: concurrent lookups of one source share one probe
/// (single flight, keyed by provider instance, schema and name), and probes of different sources
/// waiting for one catalog go out together in one batch (keyed by provider instance).
pub struct SourceProbes {
    pub flights: single_flight::SingleFlight<
        (usize, String, String),
        Result<Vec<crate::catalog::Probe>, crate::catalog::ProviderError>,
    >,
    pub batches: Arc<ProbeBatches>,
}

/// Each target answered on its own: one target's failure is not its batch's.
pub type ProbeBatches = crate::catalog::coalesce::Coalescer<
    usize,
    crate::catalog::ProbeTarget,
    Result<crate::catalog::Probe, crate::catalog::ProviderError>,
    crate::catalog::ProviderError,
>;

impl Default for SourceProbes {
    fn default() -> Self {
        SourceProbes {
            flights: Default::default(),
            batches: Arc::new(crate::catalog::coalesce::per_provider()),
        }
    }
}

impl ApiState {
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

pub fn router(state: Arc<ApiState>) -> Router {
    use paths::{MODEL, MODELS, SCHEMA_METRICS, SOURCE_DATASETS, SOURCE_DATASETS_BY_PARTS};
    aggregated::routes(Router::new())
        .route(SOURCE_DATASETS, get(routes::source_datasets))
        .route(
            SOURCE_DATASETS_BY_PARTS,
            get(routes::source_datasets_by_parts),
        )
        .route(SCHEMA_METRICS, get(routes::schema_metrics))
        .route(MODELS, get(routes::list_models))
        .route(paths::NS_MODELS, get(routes::list_namespace_models))
        .route(paths::METRIC, get(explain::metric_by_id))
        .route(MODEL, get(routes::get_model))
        .route(paths::MODEL_VERSIONS, get(versions::model_versions))
        .route(paths::MODEL_SQL, get(compile::model_sql))
        .route(paths::STALE_SCHEMAS, get(checks::stale_schemas))
        .route(paths::STALE_ENTITIES, get(checks::stale_entities))
        .route(paths::RECONCILE, axum::routing::post(checks::reconcile))
        .route(paths::REGISTRATIONS, get(checks::registrations))
        .route(paths::MODEL_LINEAGE, get(lineage::model_lineage))
        .route(paths::SOURCE_LINEAGE, get(lineage::source_lineage))
        .route(
            paths::SOURCE_LINEAGE_BY_PARTS,
            get(lineage::source_lineage_by_parts),
        )
        .route(paths::SOURCE_IMPACT, get(impact::source_impact))
        .route(
            "/openapi.json",
            get(|| async {
                (
                    [("content-type", "application/json")],
                    openapi::document_text(),
                )
            }),
        )
        .fallback(|| async { error::NO_SUCH_PATH })
        .method_not_allowed_fallback(|| async { error::METHOD_NOT_ALLOWED })
        .layer(middleware::from_fn(error::as_kubernetes_status))
        .layer(middleware::from_fn_with_state(state.clone(), observed))
        .with_state(state)
}

/// One span per request naming its route and method (so every log line inside carries them),
/// and the request counted by route and status code with its latency.
async fn observed(State(state): State<Arc<ApiState>>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let span = tracing::info_span!("request", method = %request.method(), %route);
    let started = std::time::Instant::now();
    let response = next.run(request).instrument(span).await;
    state
        .metrics
        .api
        .observe(&route, response.status().as_u16(), started.elapsed());
    response
}

/// Serves the read API on `listener` (TLS with `tls`) within `limits` until `shutdown`.
/// `also` adds routes outside the API's own (run puts /metrics here when it is served on this
/// HTTPS port); they are neither counted nor authenticated by the API.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ApiState>,
    also: Router,
    tls: Option<Arc<tls::Serving>>,
    limits: listen::Limits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    listen::serve(listener, router(state).merge(also), tls, limits, shutdown).await
}

//! The read API (DESIGN 6.1-6.3): Gravitino's REST paths (metalake = namespace), served by every
//! replica from its own watch caches and indexes.

pub mod auth;
pub mod checks;
pub mod error;
pub mod lineage;
pub mod openapi;
pub mod routes;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::routing::get;
use kube::Client;
use tokio_util::sync::CancellationToken;

use crate::catalog::registry::Registry;
use crate::controller::Stores;
use crate::index::ModelIndex;

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
    /// The controllers' context: check rounds (reports, on-demand reconcile) run through it.
    pub controller: Arc<crate::controller::Context>,
    /// Lineage admission and bounds.
    pub lineage: lineage::Lineage,
}

impl ApiState {
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

pub fn router(state: Arc<ApiState>) -> Router {
    use openapi::{MODEL, MODELS, SCHEMA_METRICS, SOURCE_DATASETS, SOURCE_DATASETS_BY_PARTS};
    Router::new()
        .route(SOURCE_DATASETS, get(routes::source_datasets))
        .route(
            SOURCE_DATASETS_BY_PARTS,
            get(routes::source_datasets_by_parts),
        )
        .route(SCHEMA_METRICS, get(routes::schema_metrics))
        .route(MODELS, get(routes::list_models))
        .route(MODEL, get(routes::get_model))
        .route(openapi::STALE_SCHEMAS, get(checks::stale_schemas))
        .route(openapi::STALE_ENTITIES, get(checks::stale_entities))
        .route(openapi::RECONCILE, axum::routing::post(checks::reconcile))
        .route(openapi::REGISTRATIONS, get(checks::registrations))
        .route(openapi::MODEL_LINEAGE, get(lineage::model_lineage))
        .route(openapi::SOURCE_LINEAGE, get(lineage::source_lineage))
        .route(
            openapi::SOURCE_LINEAGE_BY_PARTS,
            get(lineage::source_lineage_by_parts),
        )
        .route(
            "/openapi.json",
            get(|| async {
                (
                    [("content-type", "application/json")],
                    openapi::document_text(),
                )
            }),
        )
        .with_state(state)
}

pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ApiState>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

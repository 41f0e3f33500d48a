//! The read API (DESIGN 6.1-6.3): Gravitino's REST paths (metalake = namespace), served by every
//! replica from its own watch caches and indexes.

pub mod auth;
pub mod error;
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
    pub providers: Arc<Registry>,
    pub auth: auth::Auth,
    pub ready: Arc<AtomicBool>,
}

impl ApiState {
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

pub fn router(state: Arc<ApiState>) -> Router {
    Router::new()
        .route(
            "/api/metalakes/{ns}/objects/{object_type}/{full_name}/semantic-model-datasets",
            get(routes::source_datasets),
        )
        .route(
            "/api/metalakes/{ns}/objects/{object_type}/semantic-model-datasets",
            get(routes::source_datasets_by_parts),
        )
        .route(
            "/api/metalakes/{ns}/catalogs/{catalog}/schemas/{schema}/semantic-model-metrics",
            get(routes::schema_metrics),
        )
        .route(
            "/api/metalakes/{ns}/catalogs/{catalog}/schemas/{schema}/semantic-models",
            get(routes::list_models),
        )
        .route(
            "/api/metalakes/{ns}/catalogs/{catalog}/schemas/{schema}/semantic-models/{name}",
            get(routes::get_model),
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

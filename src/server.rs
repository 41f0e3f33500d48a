//! Probe and metrics HTTP server: `/healthz` (process alive), `/readyz` (caches synced),
//! `/metrics` (Prometheus text).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::leader::LeaderHandle;
use crate::telemetry::Metrics;

#[derive(Clone)]
pub struct ProbeState {
    pub ready: Arc<AtomicBool>,
    pub metrics: Arc<Metrics>,
    pub leader: LeaderHandle,
    pub index: Arc<crate::index::ModelIndex>,
}

pub fn router(state: ProbeState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn readyz(State(s): State<ProbeState>) -> impl IntoResponse {
    if s.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
    }
}

async fn metrics(State(s): State<ProbeState>) -> impl IntoResponse {
    // Sampled at scrape time: the gauges are never behind the lease or the index.
    s.metrics.is_leader.set(i64::from(s.leader.is_leading()));
    let (sources, homes) = s.index.sizes();
    for (index, n) in [("source", sources), ("home", homes)] {
        s.metrics
            .api
            .index_entries
            .get_or_create(&crate::telemetry::IndexLabels {
                index: index.into(),
            })
            .set(n as i64);
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
}

pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ProbeState,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

//! Probe and metrics HTTP server: `/healthz` (process alive), `/readyz` (caches synced and
//! the read API's front-proxy settings read), `/metrics` (Prometheus text).

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
    /// With `--metrics-auth kubernetes`: who may scrape (`get` on the non-resource URL
    /// /metrics, the kube-rbac-proxy convention).
    pub auth: Option<Arc<crate::api::auth::Auth>>,
}

/// The probes, and /metrics unless it is served on the read API's HTTPS port instead.
pub fn router(state: ProbeState, with_metrics: bool) -> Router {
    let probes = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz));
    let probes = if with_metrics {
        probes.route("/metrics", get(metrics))
    } else {
        probes
    };
    probes.with_state(state)
}

/// /metrics alone, for the read API's HTTPS port: with `--metrics-auth kubernetes` a scraper's
/// token never crosses the network in clear.
pub fn metrics_router(state: ProbeState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn readyz(State(s): State<ProbeState>) -> impl IntoResponse {
    if s.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: caches not synced, or the read API's front-proxy settings not read yet (see the log)",
        )
    }
}

async fn metrics(
    State(s): State<ProbeState>,
    asker: crate::api::auth::Asker,
) -> axum::response::Response {
    if let Some(auth) = &s.auth
        && let Err(code) = may_scrape(auth, &asker).await
    {
        return (code, "").into_response();
    }
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
        .into_response()
}

/// 401 without a valid token, 403 without `get /metrics`; a failed review refuses too.
async fn may_scrape(
    auth: &crate::api::auth::Auth,
    asker: &crate::api::auth::Asker,
) -> Result<(), StatusCode> {
    let who = match auth.authenticate(asker.bearer.as_deref(), asker.peer).await {
        Ok(Some(who)) => who,
        Ok(None) => return Err(StatusCode::UNAUTHORIZED),
        Err(e) => {
            tracing::warn!(error = %e, "TokenReview for /metrics failed");
            return Err(StatusCode::SERVICE_UNAVAILABLE);
        }
    };
    match auth.may_non_resource(&who, "get", "/metrics").await {
        Ok(true) => Ok(()),
        Ok(false) => Err(StatusCode::FORBIDDEN),
        Err(e) => {
            tracing::warn!(error = %e, "SubjectAccessReview for /metrics failed");
            Err(StatusCode::SERVICE_UNAVAILABLE)
        }
    }
}

/// Serves the probes (plain HTTP: kubelet and `semops healthcheck` ask them; they carry no
/// secret), with /metrics when `with_metrics`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ProbeState,
    with_metrics: bool,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    axum::serve(listener, router(state, with_metrics))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}

//! `/mcp` on the read API's port: MCP over streamable HTTP, stateless (any replica answers any
//! request, so a Service in front of several replicas needs no session affinity). Each tool call
//! is answered by sending the read-API request in process to the API's own router with the MCP
//! request's `Authorization` header and nothing else: the caller is authenticated and
//! authorized exactly as on the read API (bearer token; a front-proxy identity never carries
//! over, since it is a property of the connection, not of a header).

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use futures::FutureExt;
use futures::future::BoxFuture;
use http_body_util::BodyExt;
use hyper::header::{AUTHORIZATION, HeaderValue};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::server::{Reader, SemopsMcp};
use crate::client::{Family, Query};

/// The endpoint's path on the API port.
pub const PATH: &str = "/mcp";
/// Largest MCP request body (a tool call's arguments are small).
const MAX_REQUEST_BYTES: usize = 64 * 1024;
/// Largest read-API answer read back (the tools refuse past 512 KiB anyway).
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// Asks the read API's router in process, as the MCP request's bearer.
struct InProcess {
    api: Router,
}

impl Reader for InProcess {
    fn ask<'a>(
        &'a self,
        authorization: Option<&'a HeaderValue>,
        ns: &'a str,
        query: Query,
    ) -> BoxFuture<'a, anyhow::Result<(u16, Value)>> {
        async move {
            let crate::client::Request { method, path, body } = query.request(ns, Family::Direct);
            let mut request = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header("content-type", "application/json");
            if let Some(a) = authorization {
                request = request.header(AUTHORIZATION, a.clone());
            }
            let payload = body.map(|b| b.to_string()).unwrap_or_default();
            let response = self
                .api
                .clone()
                .oneshot(request.body(Body::from(payload))?)
                .await?;
            let status = response.status().as_u16();
            let bytes = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| anyhow::anyhow!("reading the answer: {e}"))?
                .to_bytes();
            let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            Ok((status, value))
        }
        .boxed()
    }

    /// Over HTTP the namespace comes from the URL (`/mcp?namespace=NS`).
    fn default_namespace(&self) -> Option<String> {
        None
    }
}

/// The `/mcp` route over `api` (the read API's router, which answers the tools).
pub fn router(api: Router, shutdown: CancellationToken) -> Router {
    let reader: Arc<dyn Reader> = Arc::new(InProcess { api });
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(MAX_REQUEST_BYTES)
        .with_cancellation_token(shutdown)
        // Host checks guard local servers that trust ambient credentials against DNS
        // rebinding; here every answer needs a bearer token a browser never attaches by itself,
        // and the port is reached by Service names that are not known in advance.
        .disable_allowed_hosts();
    let service = StreamableHttpService::new(
        move || Ok(SemopsMcp::new(reader.clone())),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new().route_service(PATH, service)
}

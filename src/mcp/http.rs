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
use hyper::header::AUTHORIZATION;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::server::{Reader, SemopsMcp};
use crate::api::auth::Peer;
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
        request: Option<&'a hyper::http::request::Parts>,
        ns: &'a str,
        query: Query,
    ) -> BoxFuture<'a, anyhow::Result<(u16, Value)>> {
        let request_parts = request;
        async move {
            let crate::client::Request { method, path, body } = query.request(ns, Family::Direct);
            let mut request = hyper::Request::builder()
                .method(method)
                .uri(path)
                .header("content-type", "application/json");
            let outer = request_parts;
            if let Some(a) = outer.and_then(|p| p.headers.get(AUTHORIZATION)) {
                request = request.header(AUTHORIZATION, a.clone());
            }
            // The connection's peer goes along, so failed tokens count against it as on the
            // read API (a front-proxy identity never does: it is not a header).
            if let Some(peer) = outer.and_then(|p| p.extensions.get::<Peer>()) {
                request = request.extension(*peer);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-process request carries the caller's token and connection peer, and nothing
    /// else of the outer request: failed tokens over /mcp count against the peer as on the
    /// read API.
    #[tokio::test]
    async fn a_tool_call_asks_as_the_callers_token_and_peer() {
        let echo = Router::new().fallback(|req: axum::extract::Request| async move {
            let peer = req.extensions().get::<Peer>().map(|p| p.0.to_string());
            let auth = req
                .headers()
                .get(AUTHORIZATION)
                .map(|a| a.to_str().unwrap().to_string());
            let proxied = req
                .extensions()
                .get::<crate::api::auth::Proxied>()
                .is_some();
            axum::Json(serde_json::json!({"peer": peer, "authorization": auth, "proxied": proxied}))
        });
        let reader = InProcess { api: echo };
        let outer = hyper::Request::builder()
            .header(AUTHORIZATION, "Bearer tok")
            .header("x-remote-user", "mallory")
            .extension(Peer("192.0.2.7".parse().unwrap()))
            .extension(crate::api::auth::Proxied(crate::api::auth::Caller {
                username: "front-proxied".into(),
                uid: None,
                groups: vec![],
                extra: Default::default(),
            }))
            .body(())
            .unwrap();
        let (parts, ()) = outer.into_parts();
        let (status, body) = reader
            .ask(Some(&parts), "ns", Query::Metric { id: "x".into() })
            .await
            .unwrap();
        assert_eq!(status, 200);
        assert_eq!(
            body,
            serde_json::json!({"peer": "192.0.2.7", "authorization": "Bearer tok", "proxied": false})
        );
        // stdio and tests without an HTTP request: neither.
        let (_, body) = reader
            .ask(None, "ns", Query::Metric { id: "x".into() })
            .await
            .unwrap();
        assert_eq!(
            body,
            serde_json::json!({"peer": null, "authorization": null, "proxied": false})
        );
    }
}

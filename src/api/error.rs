//! One error envelope `{code, type, message}`: `code` is Gravitino's numeric constant so its
//! clients keep working, `type` a stable name to branch on, `message` semops's own text that
//! never echoes raw input, secrets or internals. The aggregated API answers the same errors as
//! Kubernetes `Status` objects ([`as_kubernetes_status`]).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: i32,
    pub type_: &'static str,
    /// Fixed text, or semops's own words about what the caller asked (a 403 names the verb,
    /// resource and namespace that were missing); never raw server text or secrets.
    pub message: std::borrow::Cow<'static, str>,
}

/// The error envelope.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Envelope {
    code: i32,
    #[serde(rename = "type")]
    type_: &'static str,
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [("cache-control", "private, no-store")],
            Json(Envelope {
                code: self.code,
                type_: self.type_,
                message: self.message.into_owned(),
            }),
        )
            .into_response();
        // Every 503 is temporary: say when to come back (clients and the API server honour it).
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static(RETRY_AFTER_SECONDS),
            );
        } else if self.status == StatusCode::TOO_MANY_REQUESTS {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("60"),
            );
        }
        response
    }
}

/// On the aggregated API's paths (`/apis/...`) every error is a Kubernetes `Status`, so kubectl
/// and client-go print its reason and message; the envelope's `type` is kept as the cause's
/// reason. The Gravitino paths keep the envelope.
pub async fn as_kubernetes_status(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let aggregated = request.uri().path().starts_with("/apis");
    let response = next.run(request).await;
    if !aggregated || response.status().as_u16() < 400 {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024).await else {
        return (parts.status, "error").into_response();
    };
    let Ok(envelope) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    };
    let status = kubernetes_status(parts.status, &envelope);
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(status.to_string()))
}

/// The `Status` object for an error answer `envelope` with HTTP `status`.
pub fn kubernetes_status(status: StatusCode, envelope: &serde_json::Value) -> serde_json::Value {
    let reason = match status.as_u16() {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        413 => "RequestEntityTooLarge",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    };
    let message = envelope["message"].as_str().unwrap_or(reason);
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {
            "group": super::paths::GROUP,
            "causes": [{"reason": envelope["type"].as_str().unwrap_or(reason), "message": message}],
        },
        "code": status.as_u16(),
    })
}

/// Seconds a 503 asks the client to wait.
pub const RETRY_AFTER_SECONDS: &str = "1";

const fn e(status: StatusCode, code: i32, type_: &'static str, message: &'static str) -> ApiError {
    ApiError {
        status,
        code,
        type_,
        message: std::borrow::Cow::Borrowed(message),
    }
}

/// 403 naming what the caller lacks: `verb` on `resource` (group semops.io) in `ns`.
pub fn forbidden(user: &str, verb: &str, resource: &str, name: &str, ns: &str) -> ApiError {
    let object = if name.is_empty() {
        String::new()
    } else {
        format!(" {name:?}")
    };
    ApiError {
        message: std::borrow::Cow::Owned(format!(
            "{user:?} may not {verb} {resource}.semops.io{object} in namespace {ns:?}; a RoleBinding there to a role that grants it (with the chart's rbac.aggregate, the built-in view role does)"
        )),
        ..FORBIDDEN
    }
}

pub const UNSUPPORTED_TYPE: ApiError = e(
    StatusCode::BAD_REQUEST,
    1006,
    "UNSUPPORTED_OPERATION",
    "object type must be table or view",
);
pub const BAD_NAME: ApiError = e(
    StatusCode::BAD_REQUEST,
    1001,
    "ILLEGAL_ARGUMENTS",
    "the object name must be catalog.schema.name, with backtick quoting for dots",
);
pub const NO_SUCH_OBJECT: ApiError = e(
    StatusCode::NOT_FOUND,
    1003,
    "NO_SUCH_METADATA_OBJECT",
    "no such table or view",
);
pub const NO_SUCH_CATALOG: ApiError = e(
    StatusCode::NOT_FOUND,
    1003,
    "NO_SUCH_CATALOG",
    "no such catalog",
);
pub const NO_SUCH_SCHEMA: ApiError = e(
    StatusCode::NOT_FOUND,
    1003,
    "NO_SUCH_SCHEMA",
    "no such schema",
);
pub const NO_SUCH_MODEL: ApiError = e(
    StatusCode::NOT_FOUND,
    1003,
    "NO_SUCH_SEMANTIC_MODEL",
    "no such semantic model",
);
pub const NO_SUCH_REVISION: ApiError = e(
    StatusCode::NOT_FOUND,
    1003,
    "NO_SUCH_REVISION",
    "no such revision of this semantic model is kept (the last --revision-history-limit are; list them at .../versions)",
);
pub const NO_SUCH_METRIC: ApiError = e(
    StatusCode::NOT_FOUND,
    1003,
    "NO_SUCH_METRIC",
    "no semantic model you may get has or had a metric with this id",
);
pub const UNAUTHENTICATED: ApiError = e(
    StatusCode::UNAUTHORIZED,
    1008,
    "UNAUTHENTICATED",
    "a valid bearer token is required",
);
pub const FORBIDDEN: ApiError = e(StatusCode::FORBIDDEN, 1008, "FORBIDDEN", "access denied");
pub const CATALOG_UNREACHABLE: ApiError = e(
    StatusCode::BAD_GATEWAY,
    1007,
    "CONNECTION_FAILED",
    "the catalog could not be reached",
);
pub const NOT_READY: ApiError = e(
    StatusCode::SERVICE_UNAVAILABLE,
    1100,
    "NOT_READY",
    "caches are not synced yet",
);
pub const INTERNAL: ApiError = e(
    StatusCode::INTERNAL_SERVER_ERROR,
    1002,
    "INTERNAL_ERROR",
    "internal error",
);
pub const NOT_LEADER: ApiError = e(
    StatusCode::SERVICE_UNAVAILABLE,
    1100,
    "NOT_LEADER",
    "only the leader replica records check rounds; retry (another replica may lead) or send dryRun=true",
);
pub const BAD_PATH: ApiError = e(
    StatusCode::BAD_REQUEST,
    1001,
    "ILLEGAL_ARGUMENTS",
    "a path segment is not valid percent-encoded UTF-8",
);
pub const BAD_QUERY: ApiError = e(
    StatusCode::BAD_REQUEST,
    1001,
    "ILLEGAL_ARGUMENTS",
    "a query parameter has an invalid value (details must be true or false, revision a whole number)",
);
pub const BAD_BODY: ApiError = e(
    StatusCode::BAD_REQUEST,
    1001,
    "ILLEGAL_ARGUMENTS",
    "the body must be empty or a JSON object like {\"dryRun\": true}",
);
pub const LINEAGE_BUSY: ApiError = e(
    StatusCode::SERVICE_UNAVAILABLE,
    1100,
    "LINEAGE_BUSY",
    "too many lineage requests in progress; retry shortly",
);
pub const LINEAGE_DEADLINE: ApiError = e(
    StatusCode::SERVICE_UNAVAILABLE,
    1100,
    "LINEAGE_TEMPORARILY_UNAVAILABLE",
    "the lineage graph could not be produced in time; retry shortly",
);
/// The lineage graph past one of its bounds; the message names the bound (the operator flag).
pub const LINEAGE_TOO_MANY_NODES: ApiError = e(
    StatusCode::PAYLOAD_TOO_LARGE,
    1006,
    "LINEAGE_GRAPH_TOO_LARGE",
    "the lineage graph has more nodes than --lineage-max-nodes allows; nothing was cut: ask from a narrower root",
);
pub const LINEAGE_TOO_MANY_EDGES: ApiError = e(
    StatusCode::PAYLOAD_TOO_LARGE,
    1006,
    "LINEAGE_GRAPH_TOO_LARGE",
    "the lineage graph has more edges than --lineage-max-edges allows; nothing was cut: ask from a narrower root",
);
pub const LINEAGE_LABEL_TOO_LONG: ApiError = e(
    StatusCode::PAYLOAD_TOO_LARGE,
    1006,
    "LINEAGE_GRAPH_TOO_LARGE",
    "a label of the lineage graph is longer than --lineage-max-label-bytes allows",
);
pub const LINEAGE_RESPONSE_TOO_LARGE: ApiError = e(
    StatusCode::PAYLOAD_TOO_LARGE,
    1006,
    "LINEAGE_GRAPH_TOO_LARGE",
    "the lineage graph's response is larger than --lineage-max-response-bytes allows; nothing was cut: ask from a narrower root",
);
pub const LINEAGE_UNAVAILABLE: ApiError = e(
    StatusCode::CONFLICT,
    1100,
    "LINEAGE_UNAVAILABLE",
    "the semantic model has no accepted revision matching its current spec yet; retry after it is reconciled",
);
pub const OVERLOADED: ApiError = e(
    StatusCode::SERVICE_UNAVAILABLE,
    1100,
    "OVERLOADED",
    "the server is handling too many requests; retry shortly",
);
pub const TIMED_OUT: ApiError = e(
    StatusCode::SERVICE_UNAVAILABLE,
    1100,
    "TIMED_OUT",
    "the request took longer than the server allows; retry shortly",
);
pub const NO_SUCH_PATH: ApiError = e(
    StatusCode::NOT_FOUND,
    1003,
    "NOT_FOUND",
    "no such path; see /openapi.json (direct port) or /openapi/v3 (aggregated API)",
);
pub const METHOD_NOT_ALLOWED: ApiError = e(
    StatusCode::METHOD_NOT_ALLOWED,
    1006,
    "UNSUPPORTED_OPERATION",
    "this path does not answer that method",
);
pub const BAD_DOTTED_NAME: ApiError = e(
    StatusCode::BAD_REQUEST,
    1001,
    "ILLEGAL_ARGUMENTS",
    "the name must be catalog.schema (schemas) or catalog.schema.model (models), with backtick quoting for dots",
);
pub const TOO_MANY_FAILURES: ApiError = e(
    StatusCode::TOO_MANY_REQUESTS,
    1100,
    "TOO_MANY_FAILED_TOKENS",
    "too many invalid tokens from this address; retry later with a valid token",
);
pub const BODY_TOO_LARGE: ApiError = e(
    StatusCode::PAYLOAD_TOO_LARGE,
    1001,
    "ILLEGAL_ARGUMENTS",
    "the request body is too large; send {\"dryRun\": true} or nothing",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forbidden_answer_names_the_verb_resource_and_namespace_and_nothing_else() {
        let e = forbidden(
            "system:serviceaccount:team:reader",
            "get",
            "catalogs",
            "hr",
            "team",
        );
        assert_eq!(e.status, StatusCode::FORBIDDEN);
        assert_eq!((e.code, e.type_), (1008, "FORBIDDEN"));
        for part in [
            "\"system:serviceaccount:team:reader\"",
            "get catalogs.semops.io \"hr\"",
            "namespace \"team\"",
        ] {
            assert!(e.message.contains(part), "{part}: {}", e.message);
        }
        let namespace_wide = forbidden("u", "create", "catalogs/reconcile", "", "ns");
        assert!(
            namespace_wide
                .message
                .contains("create catalogs/reconcile.semops.io in"),
            "{}",
            namespace_wide.message
        );
    }

    #[test]
    fn error_answers_become_kubernetes_status_objects_with_the_reason_kubectl_prints() {
        let cases = [
            (StatusCode::BAD_REQUEST, "BadRequest"),
            (StatusCode::FORBIDDEN, "Forbidden"),
            (StatusCode::NOT_FOUND, "NotFound"),
            (StatusCode::CONFLICT, "Conflict"),
            (StatusCode::PAYLOAD_TOO_LARGE, "RequestEntityTooLarge"),
            (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"),
            (StatusCode::BAD_GATEWAY, "InternalError"),
        ];
        for (code, reason) in cases {
            let envelope = serde_json::json!({"code": 1, "type": "SOME_TYPE", "message": "why"});
            let s = kubernetes_status(code, &envelope);
            assert_eq!(s["kind"], "Status");
            assert_eq!(s["reason"], reason, "{code}");
            assert_eq!(s["code"], code.as_u16());
            assert_eq!(s["message"], "why");
            assert_eq!(s["details"]["causes"][0]["reason"], "SOME_TYPE");
        }
    }
}

//! One error envelope `{code, type, message}`: `code` is Gravitino's numeric constant so its
//! clients keep working, `type` a stable name to branch on, `message` fixed text that never
//! echoes raw input, secrets or internals.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: i32,
    pub type_: &'static str,
    pub message: &'static str,
}

/// The error envelope.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Envelope {
    code: i32,
    #[serde(rename = "type")]
    type_: &'static str,
    message: &'static str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [("cache-control", "private, no-store")],
            Json(Envelope {
                code: self.code,
                type_: self.type_,
                message: self.message,
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

/// Seconds a 503 asks the client to wait.
pub const RETRY_AFTER_SECONDS: &str = "1";

const fn e(status: StatusCode, code: i32, type_: &'static str, message: &'static str) -> ApiError {
    ApiError {
        status,
        code,
        type_,
        message,
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

//! Path and query extractors that refuse bad input with the API's error envelope (axum's own
//! answer plain-text 400s, which Gravitino clients cannot parse).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::{self, ApiError};

/// `axum::extract::Path`, with `ILLEGAL_ARGUMENTS` for segments that do not decode.
pub struct Path<T>(pub T);

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|_| error::BAD_PATH)
    }
}

/// `axum::extract::Query`, with `ILLEGAL_ARGUMENTS` for parameters that do not parse.
pub struct Query<T>(pub T);

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|_| error::BAD_QUERY)
    }
}

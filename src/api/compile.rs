//! `GET .../semantic-models/{name}/sql` (docs/queries.md#http): a metric question compiled
//! against the model's accepted revision, in the dialect of the catalog whose tables it reads. semops only
//! compiles; the caller runs the SQL with its own credentials.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::ApiState;
use super::auth::Asker;
use super::error::ApiError;
use super::extract::Path;
use super::routes::{accepted_definition, catalog, ok, visible_model};
use crate::crd::catalog::Provider;
use crate::sql::{Compiled, ErrorKind, Model, QueryError, Question, Target};

/// A compiled question and what it was compiled against.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompiledQuery {
    code: i32,
    /// `[namespace, catalog, schema]` of the model, as every other answer names it.
    namespace: Vec<String>,
    /// The model's name.
    model: String,
    #[serde(flatten)]
    compiled: Compiled,
}

/// The SQL a catalog's provider speaks; `None` for a catalog that holds no tables (Kafka).
pub fn target_for(provider: Provider) -> Option<Target> {
    match provider {
        Provider::Postgresql => Some(Target::Postgres),
        Provider::Mysql => Some(Target::Mysql),
        Provider::IcebergRest | Provider::Managed => Some(Target::Ansi),
        Provider::Kafka => None,
    }
}

/// A compile refusal as the API answers it: 400 for a fault of the question (naming the part
/// and the fix), 422 for an expression of the model the compiler cannot use.
pub fn refusal(e: &QueryError) -> ApiError {
    let (status, type_) = match e.kind {
        ErrorKind::Invalid => (StatusCode::BAD_REQUEST, "ILLEGAL_ARGUMENTS"),
        ErrorKind::Unknown => (StatusCode::BAD_REQUEST, "UNKNOWN_NAME"),
        ErrorKind::Unreachable => (StatusCode::BAD_REQUEST, "NOT_REACHABLE"),
        ErrorKind::WrongType => (StatusCode::BAD_REQUEST, "WRONG_TYPE"),
        ErrorKind::Model => (StatusCode::UNPROCESSABLE_ENTITY, "MODEL_NOT_COMPILABLE"),
    };
    ApiError {
        status,
        code: 1001,
        type_,
        message: e.to_string().into(),
    }
}

/// `GET .../semantic-models/{name}/sql?metric=...&dimension=...&filter=...&order=...&limit=...`.
pub async fn model_sql(
    State(state): State<Arc<ApiState>>,
    Path((ns, catalog_name, schema, name)): Path<(String, String, String, String)>,
    RawQuery(query): RawQuery,
    headers: Asker,
) -> Response {
    let run = async {
        // The question is read first: a malformed one is refused without any lookup.
        let question =
            Question::from_query(query.as_deref().unwrap_or("")).map_err(|e| refusal(&e))?;
        let m = visible_model(&state, &headers, (&ns, &catalog_name, &schema, &name)).await?;
        let status = m.status.clone().unwrap_or_default();
        let definition = accepted_definition(&state, &m).await?;
        let model = Model {
            definition: &definition,
            revision: status.revision.unwrap_or(0),
            metric_ids: &status.metrics,
            sources: &status.source_associations,
        };
        // The SQL runs where the tables it reads are: their catalog's provider picks the dialect
        // (the plan, and so the tables, do not depend on the dialect).
        let plan = crate::sql::compile(model, &question, Target::Ansi).map_err(|e| refusal(&e))?;
        let target = match plan.catalogs.as_slice() {
            [one] => {
                let source_catalog = catalog(&state, &ns, one)?;
                target_for(source_catalog.spec.provider).ok_or(KAFKA_HAS_NO_SQL)?
            }
            [] => Target::Ansi,
            many => return Err(refusal(&spanning(many))),
        };
        let compiled = match target {
            Target::Ansi => plan,
            _ => crate::sql::compile(model, &question, target).map_err(|e| refusal(&e))?,
        };
        Ok::<_, ApiError>(ok(CompiledQuery {
            code: 0,
            namespace: vec![ns.clone(), catalog_name.clone(), schema.clone()],
            model: name.clone(),
            compiled,
        }))
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

/// One SQL statement reads one catalog.
fn spanning(catalogs: &[String]) -> QueryError {
    QueryError::new(
        ErrorKind::Unreachable,
        "metrics",
        format!(
            "the question reads tables of the catalogs {}; one SQL statement runs in one catalog: ask for metrics and dimensions whose datasets share a catalog",
            catalogs.join(", ")
        ),
    )
}

const KAFKA_HAS_NO_SQL: ApiError = ApiError {
    status: StatusCode::BAD_REQUEST,
    code: 1006,
    type_: "UNSUPPORTED_OPERATION",
    message: std::borrow::Cow::Borrowed(
        "the question reads a Kafka catalog: topics are not queried with SQL; ask for metrics of datasets bound to tables",
    ),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_has_a_dialect_or_a_reason() {
        for (p, t) in [
            (Provider::Postgresql, Some(Target::Postgres)),
            (Provider::Mysql, Some(Target::Mysql)),
            (Provider::IcebergRest, Some(Target::Ansi)),
            (Provider::Managed, Some(Target::Ansi)),
            (Provider::Kafka, None),
        ] {
            assert_eq!(target_for(p), t, "{p:?}");
        }
    }

    #[test]
    fn refusals_of_the_question_are_400_and_of_the_model_422() {
        for (kind, status) in [
            (ErrorKind::Invalid, 400),
            (ErrorKind::Unknown, 400),
            (ErrorKind::Unreachable, 400),
            (ErrorKind::WrongType, 400),
            (ErrorKind::Model, 422),
        ] {
            let e = refusal(&QueryError::new(kind, "metrics[0]", "m".into()));
            assert_eq!(e.status.as_u16(), status, "{kind:?}");
            assert_eq!(e.message, "metrics[0]: m");
        }
    }
}

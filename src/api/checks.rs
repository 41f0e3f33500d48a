//! Stale report and on-demand reconcile (docs/design.md#stale-reports-and-on-demand-rounds). Reports are live report-only scans, shared
//! by concurrent askers and reused for a few seconds (`api::reports`); a recorded round runs only
//! on the leader.

use std::sync::Arc;

use super::extract::Path;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::auth::Asker;
use super::error::{self, ApiError};
use super::routes::{caller, catalog, ok, require, require_verb};
use super::{ApiState, RoundError};
use crate::crd::catalog::{RegistrationState, RegistrationStatus};
use crate::crd::policy::RegistrationKind;
use crate::reconcile::Act;
use crate::reconcile::plan::{self, StaleReport};

/// The stale report in Gravitino's envelope (`code: 0`).
#[derive(Serialize, schemars::JsonSchema)]
pub struct StaleResponse {
    pub code: i32,
    #[serde(flatten)]
    pub report: StaleReport,
}

/// `POST .../reconcile` body.
#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReconcileRequest {
    /// true: report only, change nothing. Absent: follow the catalog's policy.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// One registration with the metadata attached to it (removed ones are not served).
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationEntry {
    pub kind: RegistrationKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    pub name: String,
    /// The object's name now, when it was renamed in the catalog.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_name: Option<String>,
    pub state: RegistrationState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    pub tags: Vec<String>,
    pub properties: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct RegistrationList {
    pub code: i32,
    pub registrations: Vec<RegistrationEntry>,
}

async fn scan(
    state: &ApiState,
    headers: &Asker,
    ns: &str,
    name: &str,
    verb: &str,
    resource: &str,
    act: Act,
) -> Result<StaleReport, ApiError> {
    let who = caller(state, headers).await?;
    require_verb(state, &who, verb, ns, resource, name).await?;
    let cat = catalog(state, ns, name)?;
    if act == Act::Record && !state.rounds.is_leading() {
        return Err(error::NOT_LEADER);
    }
    let answer = match state.rounds.run(&cat, act).await {
        Ok(report) => Ok(report),
        Err(RoundError::NotLeader) => Err(error::NOT_LEADER),
        Err(RoundError::Failed) => Err(error::INTERNAL),
    };
    if act == Act::Record {
        // The recorded round changed what a report would say.
        state.reports.forget(&report_key(&cat));
    }
    answer
}

fn report_key(cat: &crate::crd::Catalog) -> String {
    use kube::ResourceExt;
    format!(
        "{}/{}/{}",
        cat.namespace().unwrap_or_default(),
        cat.name_any(),
        cat.uid().unwrap_or_default()
    )
}

/// A report-only scan for `GET stale-*`: shared by concurrent askers and reused for
/// `reports::FRESH_FOR` (the response then carries its `Age`).
async fn report(
    state: &ApiState,
    asker: &Asker,
    ns: &str,
    name: &str,
) -> Result<(StaleReport, std::time::Duration), ApiError> {
    let who = caller(state, asker).await?;
    require(state, &who, ns, "catalogs", name).await?;
    let cat = catalog(state, ns, name)?;
    state
        .reports
        .get(&report_key(&cat), || async {
            match state.rounds.run(&cat, Act::DryRun).await {
                Ok(report) => Ok(report),
                Err(RoundError::NotLeader) => Err(error::NOT_LEADER),
                Err(RoundError::Failed) => Err(error::INTERNAL),
            }
        })
        .await
}

fn aged(response: Response, age: std::time::Duration) -> Response {
    let mut response = response;
    if let Ok(v) = axum::http::HeaderValue::from_str(&age.as_secs().to_string()) {
        response.headers_mut().insert(axum::http::header::AGE, v);
    }
    response
}

pub async fn stale_schemas(
    State(state): State<Arc<ApiState>>,
    Path((ns, name)): Path<(String, String)>,
    headers: Asker,
) -> Response {
    match report(&state, &headers, &ns, &name).await {
        Ok((mut report, age)) => {
            report.stale_entities.clear();
            aged(ok(StaleResponse { code: 0, report }), age)
        }
        Err(e) => e.into_response(),
    }
}

pub async fn stale_entities(
    State(state): State<Arc<ApiState>>,
    Path((ns, name)): Path<(String, String)>,
    headers: Asker,
) -> Response {
    match report(&state, &headers, &ns, &name).await {
        Ok((report, age)) => aged(ok(StaleResponse { code: 0, report }), age),
        Err(e) => e.into_response(),
    }
}

pub async fn reconcile(
    State(state): State<Arc<ApiState>>,
    Path((ns, name)): Path<(String, String)>,
    headers: Asker,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    // A body past axum's limit (2 MiB) or one that cannot be read: the envelope, not plain text.
    let body = match body {
        Ok(b) => b,
        Err(e) if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
            return error::BODY_TOO_LARGE.into_response();
        }
        Err(_) => return error::BAD_BODY.into_response(),
    };
    let request: ReconcileRequest = if body.iter().all(u8::is_ascii_whitespace) {
        ReconcileRequest::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(r) => r,
            Err(_) => return error::BAD_BODY.into_response(),
        }
    };
    let act = if request.dry_run == Some(true) {
        Act::DryRun
    } else {
        Act::Record
    };
    match scan(
        &state,
        &headers,
        &ns,
        &name,
        "create",
        "catalogs/reconcile",
        act,
    )
    .await
    {
        Ok(report) => ok(StaleResponse { code: 0, report }),
        Err(e) => e.into_response(),
    }
}

/// `GET .../catalogs/{c}/registrations`: the declared registrations and their metadata, as of
/// the last recorded round. Removed registrations are withdrawn.
pub async fn registrations(
    State(state): State<Arc<ApiState>>,
    Path((ns, name)): Path<(String, String)>,
    headers: Asker,
) -> Response {
    let served = async {
        let who = caller(&state, &headers).await?;
        require(&state, &who, &ns, "catalogs", &name).await?;
        let cat = catalog(&state, &ns, &name)?;
        let recorded = cat
            .status
            .as_ref()
            .map(|s| s.registrations.as_slice())
            .unwrap_or_default();
        let states = plan::align(&cat.spec.registrations, recorded);
        Ok::<_, ApiError>(RegistrationList {
            code: 0,
            registrations: cat
                .spec
                .registrations
                .iter()
                .zip(states)
                .filter(|(_, s)| s.state != RegistrationState::Removed)
                .map(|(r, s): (_, RegistrationStatus)| RegistrationEntry {
                    kind: r.kind,
                    schema: r.schema.clone(),
                    name: r.name.clone(),
                    current_name: s.renamed_to,
                    state: s.state,
                    id: s.id,
                    owner: r.owner.clone(),
                    tags: r.tags.clone(),
                    properties: r.properties.clone(),
                })
                .collect(),
        })
    };
    match served.await {
        Ok(list) => ok(list),
        Err(e) => e.into_response(),
    }
}

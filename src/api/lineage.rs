//! Lineage endpoints (docs/design.md#lineage): admission first (at most N projections; the next one gets an
//! immediate 503), then the whole request under a deadline. The projection itself runs on a
//! blocking thread that owns the admission permit, so a request abandoned at its deadline still
//! counts against capacity until its work is done — retries cannot pile up background work.

use std::sync::Arc;
use std::time::Duration;

use super::extract::{Path, Query};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ApiState;
use super::auth::Asker;
use super::error::{self, ApiError};
use super::routes::{
    Parts, accepted_definition, bound_datasets, caller, home_models, resolve_source, visible_to,
};
use crate::crd::SemanticModel;
use crate::crd::conditions::{self, ConditionType};
use crate::crd::semantic_model::{Definition, DriftKind};
use crate::lineage::{Limits, ModelInput, SourceRoot, TooLarge};
use crate::ossie::SourceRef;

/// Lineage settings (`--lineage-*` flags).
#[derive(Clone, Copy, Debug)]
pub struct LineageSettings {
    pub limits: Limits,
    pub concurrency: usize,
    pub deadline: Duration,
}

impl Default for LineageSettings {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            concurrency: 4,
            deadline: Duration::from_secs(5),
        }
    }
}

/// Admission and settings, shared by the lineage handlers of one process.
pub struct Lineage {
    pub settings: LineageSettings,
    permits: Arc<Semaphore>,
    in_flight: InFlight,
}

type InFlight = prometheus_client::metrics::gauge::Gauge<i64, std::sync::atomic::AtomicI64>;

impl Lineage {
    /// `in_flight` counts admitted projections (the `semops_lineage_in_flight` gauge).
    pub fn new(settings: LineageSettings, in_flight: InFlight) -> Self {
        Self {
            permits: Arc::new(Semaphore::new(settings.concurrency.max(1))),
            settings,
            in_flight,
        }
    }
}

impl Default for Lineage {
    fn default() -> Self {
        Self::new(LineageSettings::default(), InFlight::default())
    }
}

/// One admitted projection: holds its permit and counts in the gauge until dropped.
struct Admission {
    _permit: OwnedSemaphorePermit,
    in_flight: InFlight,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.in_flight.dec();
    }
}

/// Test hook (`failpoints` builds only): `SEMOPS_FAILPOINT=lineage-hold` holds every
/// projection until the test releases it.
async fn failpoint() {
    crate::failpoint::hold("lineage-hold").await;
}

/// Datasets whose source is unavailable: drift says missing, or the catalog's answer is unknown.
fn unavailable(m: &SemanticModel) -> Vec<String> {
    let Some(s) = &m.status else { return vec![] };
    let unknown = conditions::find(&s.conditions, ConditionType::SourcesCurrent)
        .is_some_and(|c| c.status == "Unknown");
    s.source_associations
        .iter()
        .filter(|a| {
            unknown
                || s.source_drift
                    .iter()
                    .any(|d| d.dataset == a.dataset && d.kind == DriftKind::SourceMissing)
        })
        .map(|a| a.dataset.to_string())
        .collect()
}

fn input<'a>(
    m: &'a SemanticModel,
    definition: &'a Definition,
    unavailable: &'a [String],
) -> ModelInput<'a> {
    let status = m.status.as_ref();
    ModelInput {
        uid: m.metadata.uid.as_deref().unwrap_or_default(),
        namespace: m.metadata.namespace.as_deref().unwrap_or_default(),
        catalog: &m.spec.catalog,
        schema: &m.spec.schema,
        name: m.model_name(),
        revision: status.and_then(|s| s.revision).unwrap_or(0),
        definition,
        associations: status
            .map(|s| s.source_associations.as_slice())
            .unwrap_or_default(),
        metric_ids: status.map(|s| s.metrics.as_slice()).unwrap_or_default(),
        unavailable,
    }
}

/// Whether the model's status describes its current spec (else 409: not a consistent snapshot).
fn consistent(m: &SemanticModel) -> bool {
    let Some(s) = &m.status else { return false };
    s.revision.is_some()
        && s.observed_generation.is_some()
        && s.observed_generation == m.metadata.generation
}

fn too_large(e: TooLarge) -> ApiError {
    tracing::debug!(bound = %e, "lineage graph refused");
    match e {
        TooLarge::Nodes(_) => error::LINEAGE_TOO_MANY_NODES,
        TooLarge::Edges(_) => error::LINEAGE_TOO_MANY_EDGES,
        TooLarge::Label(_) => error::LINEAGE_LABEL_TOO_LONG,
        TooLarge::Response(_) => error::LINEAGE_RESPONSE_TOO_LARGE,
    }
}

fn respond(bytes: Vec<u8>) -> Response {
    (
        [
            ("content-type", "application/json"),
            ("cache-control", "private, no-store"),
        ],
        bytes,
    )
        .into_response()
}

/// Runs `work` under admission and the deadline; `work` gets the permit to hand to the
/// projection.
async fn admitted<F, Fut>(state: &ApiState, work: F) -> Response
where
    F: FnOnce(Admission) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<u8>, ApiError>>,
{
    let Ok(permit) = state.lineage.permits.clone().try_acquire_owned() else {
        return error::LINEAGE_BUSY.into_response();
    };
    state.lineage.in_flight.inc();
    let permit = Admission {
        _permit: permit,
        in_flight: state.lineage.in_flight.clone(),
    };
    match tokio::time::timeout(state.lineage.settings.deadline, work(permit)).await {
        Ok(Ok(bytes)) => respond(bytes),
        Ok(Err(e)) => e.into_response(),
        Err(_) => error::LINEAGE_DEADLINE.into_response(),
    }
}

/// Runs the CPU part on a blocking thread that owns the permit.
async fn project<T: Send + 'static>(
    permit: Admission,
    data: T,
    f: impl FnOnce(&T) -> Result<Vec<u8>, TooLarge> + Send + 'static,
) -> Result<Vec<u8>, ApiError> {
    tokio::task::spawn_blocking(move || {
        let out = f(&data);
        drop(permit);
        out
    })
    .await
    .map_err(|_| error::INTERNAL)?
    .map_err(too_large)
}

pub async fn model_lineage(
    State(state): State<Arc<ApiState>>,
    Path((ns, catalog_name, schema, name)): Path<(String, String, String, String)>,
    headers: Asker,
) -> Response {
    let limits = state.lineage.settings.limits;
    // Authenticated before admission: anonymous floods never hold the lineage permits.
    let who = match caller(&state, &headers).await {
        Ok(who) => who,
        Err(e) => return e.into_response(),
    };
    let st = state.clone();
    admitted(&state, move |permit| async move {
        let models = home_models(&st, &who, &ns, &catalog_name, &schema, Some(&name)).await?;
        let m = models
            .into_iter()
            .find(|m| m.model_name() == name)
            .ok_or(error::NO_SUCH_MODEL)?;
        if !consistent(&m) {
            return Err(error::LINEAGE_UNAVAILABLE);
        }
        let definition = accepted_definition(&st, &m).await?;
        failpoint().await;
        project(permit, (m, definition), move |(m, definition)| {
            let missing = unavailable(m);
            crate::lineage::project_model(&input(m, definition, &missing), &limits)
        })
        .await
    })
    .await
}

async fn source_lineage_of(
    state: Arc<ApiState>,
    headers: Asker,
    ns: String,
    object_type: String,
    source: SourceRef,
) -> Response {
    let limits = state.lineage.settings.limits;
    // Authenticated before admission (the answer is cached, so `resolve_source` reuses it).
    if let Err(e) = caller(&state, &headers).await {
        return e.into_response();
    }
    let st = state.clone();
    admitted(&state, move |permit| async move {
        let (who, key) = resolve_source(&st, &headers, &ns, &object_type, &source).await?;
        let by_model = bound_datasets(&st.stores.models, &st.index, &key);
        let candidates: Vec<Arc<SemanticModel>> =
            by_model.values().map(|(m, _)| m.clone()).collect();
        let models = visible_to(&st, &who, &ns, candidates).await;
        let root = SourceRoot {
            namespace: ns.clone(),
            catalog: source.catalog.clone(),
            schema: source.schema.clone(),
            name: source.name.clone(),
            object_type: key.object_type.clone(),
            id: key.id.clone(),
        };
        failpoint().await;
        project(permit, (root, models), move |(root, models)| {
            let none: Vec<String> = vec![];
            let inputs: Vec<ModelInput<'_>> = models
                .iter()
                .map(|m| input(m, &m.spec.definition, &none))
                .collect();
            crate::lineage::project_source(root, &inputs, &limits)
        })
        .await
    })
    .await
}

pub async fn source_lineage(
    State(state): State<Arc<ApiState>>,
    Path((ns, object_type, full_name)): Path<(String, String, String)>,
    headers: Asker,
) -> Response {
    match SourceRef::parse(&full_name) {
        Ok(source) => source_lineage_of(state, headers, ns, object_type, source).await,
        Err(_) => error::BAD_NAME.into_response(),
    }
}

pub async fn source_lineage_by_parts(
    State(state): State<Arc<ApiState>>,
    Path((ns, object_type)): Path<(String, String)>,
    Query(p): Query<Parts>,
    headers: Asker,
) -> Response {
    match p.source() {
        Some(source) => source_lineage_of(state, headers, ns, object_type, source).await,
        None => error::BAD_NAME.into_response(),
    }
}

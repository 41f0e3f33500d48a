//! Handlers: each is a projection of the caches and indexes into Gravitino's response shapes.
//! Never partial results: a failure anywhere fails the request.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::extract::{Path, Query};
use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use serde::{Deserialize, Serialize};

use super::ApiState;
use super::auth::{Asker, Caller};
use super::error::{self, ApiError};
use crate::catalog::coalesce;
use crate::catalog::registry::provider_for_reads;
use crate::catalog::{CatalogProvider, ObjectType, Probe, ProbeTarget, ProviderError};
use crate::crd::catalog::Provider;
use crate::crd::policy::RegistrationKind;
use crate::crd::semantic_model::{Definition, Metric};
use crate::crd::{Catalog, SemanticModel};
use crate::index::{HomeKey, SourceKey, cmp_utf16_all, is_visible};
use crate::ossie::SourceRef;

/// Gravitino's `NameIdentifier`.
#[derive(Serialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub struct Identifier {
    pub namespace: Vec<String>,
    pub name: String,
}

/// Gravitino's `EntityListResponse`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct EntityList {
    pub code: i32,
    pub identifiers: Vec<Identifier>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct MetricEntry {
    pub namespace: Vec<String>,
    pub metric: Metric,
    /// The metric's stable id (with `ids=true`; not part of Gravitino's shape).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct MetricList {
    pub code: i32,
    pub metrics: Vec<MetricEntry>,
}

pub(super) fn ok<T: Serialize>(body: T) -> Response {
    ([("cache-control", "private, no-store")], Json(body)).into_response()
}

pub(super) async fn caller(state: &ApiState, asker: &Asker) -> Result<Caller, ApiError> {
    if !state.is_ready() {
        return Err(error::NOT_READY);
    }
    if let Some(user) = &asker.proxied {
        return Ok(user.clone());
    }
    match state
        .auth
        .authenticate(asker.bearer.as_deref(), asker.peer)
        .await
    {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Err(error::UNAUTHENTICATED),
        Err(super::auth::AuthError::Busy) => Err(error::OVERLOADED),
        Err(super::auth::AuthError::TooManyFailures) => Err(error::TOO_MANY_FAILURES),
        Err(e) => {
            tracing::warn!(error = %e, "TokenReview failed");
            Err(error::INTERNAL)
        }
    }
}

pub(super) async fn require(
    state: &ApiState,
    who: &Caller,
    ns: &str,
    resource: &str,
    name: &str,
) -> Result<(), ApiError> {
    require_verb(state, who, "get", ns, resource, name).await
}

/// 403 unless `who` may `verb` `resource/name` (a subresource like `catalogs/reconcile` too).
pub(super) async fn require_verb(
    state: &ApiState,
    who: &Caller,
    verb: &str,
    ns: &str,
    resource: &str,
    name: &str,
) -> Result<(), ApiError> {
    match state.auth.may(who, verb, ns, resource, name).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(error::forbidden(&who.username, verb, resource, name, ns)),
        Err(e) => {
            tracing::warn!(error = %e, "SubjectAccessReview failed");
            Err(error::INTERNAL)
        }
    }
}

/// Keeps the models `who` may see; a denied or failed check excludes the model (logged).
pub(super) async fn visible_to(
    state: &ApiState,
    who: &Caller,
    ns: &str,
    models: Vec<Arc<SemanticModel>>,
) -> Vec<Arc<SemanticModel>> {
    if models.is_empty() {
        return models;
    }
    // One namespace-wide review first: a user who may get every model needs no per-model ones.
    if let Ok(true) = state.auth.may_get(who, ns, "semanticmodels", "").await {
        return models;
    }
    let mut out = Vec::new();
    for m in models {
        match state
            .auth
            .may_get(who, ns, "semanticmodels", &m.name_any())
            .await
        {
            Ok(true) => out.push(m),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, model = %m.name_any(), "SubjectAccessReview failed; model excluded")
            }
        }
    }
    out
}

pub(super) fn catalog(state: &ApiState, ns: &str, name: &str) -> Result<Arc<Catalog>, ApiError> {
    state
        .stores
        .catalogs
        .get(&ObjectRef::new(name).within(ns))
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .ok_or(error::NO_SUCH_CATALOG)
}

fn model_namespace(ns: &str, m: &SemanticModel) -> Vec<String> {
    vec![
        ns.to_string(),
        m.spec.catalog.to_string(),
        m.spec.schema.to_string(),
        m.model_name().to_string(),
    ]
}

#[derive(Deserialize)]
pub struct Parts {
    catalog: Option<String>,
    schema: Option<String>,
    name: Option<String>,
}

impl Parts {
    /// The source named by `?catalog=&schema=&name=`, all three non-empty.
    pub fn source(self) -> Option<SourceRef> {
        match (self.catalog, self.schema, self.name) {
            (Some(c), Some(s), Some(n)) if !c.is_empty() && !s.is_empty() && !n.is_empty() => {
                Some(SourceRef::new(c, s, n))
            }
            _ => None,
        }
    }
}

pub async fn source_datasets(
    State(state): State<Arc<ApiState>>,
    Path((ns, object_type, full_name)): Path<(String, String, String)>,
    headers: Asker,
) -> Response {
    match SourceRef::parse(&full_name) {
        Ok(source) => lookup(&state, &headers, &ns, &object_type, source)
            .await
            .unwrap_or_else(IntoResponse::into_response),
        Err(_) => error::BAD_NAME.into_response(),
    }
}

pub async fn source_datasets_by_parts(
    State(state): State<Arc<ApiState>>,
    Path((ns, object_type)): Path<(String, String)>,
    Query(p): Query<Parts>,
    headers: Asker,
) -> Response {
    match p.source() {
        Some(source) => lookup(&state, &headers, &ns, &object_type, source)
            .await
            .unwrap_or_else(IntoResponse::into_response),
        None => error::BAD_NAME.into_response(),
    }
}

/// docs/design.md#source-lookup: resolve the name live, then match accepted associations by (catalog, type, id).
async fn lookup(
    state: &ApiState,
    headers: &Asker,
    ns: &str,
    object_type: &str,
    source: SourceRef,
) -> Result<Response, ApiError> {
    let (who, key) = resolve_source(state, headers, ns, object_type, &source).await?;
    let by_model = bound_datasets(&state.stores.models, &state.index, &key);
    let models: Vec<Arc<SemanticModel>> = by_model.values().map(|(m, _)| m.clone()).collect();
    let allowed: Vec<String> = visible_to(state, &who, ns, models)
        .await
        .iter()
        .map(|m| m.name_any())
        .collect();
    let identifiers = dataset_identifiers(ns, by_model, |name| allowed.iter().any(|a| a == name));
    Ok(ok(EntityList {
        code: 0,
        identifiers,
    }))
}

/// Authenticates, authorizes `get catalogs/<source catalog>`, and resolves the source's name
/// live to (type, native id). Shared by source lookup and source lineage.
pub(super) async fn resolve_source(
    state: &ApiState,
    headers: &Asker,
    ns: &str,
    object_type: &str,
    source: &SourceRef,
) -> Result<(Caller, SourceKey), ApiError> {
    let wanted = match object_type {
        "table" => ObjectType::Table,
        "view" => ObjectType::View,
        "topic" => ObjectType::Topic,
        _ => return Err(error::UNSUPPORTED_TYPE),
    };
    let who = caller(state, headers).await?;
    require(state, &who, ns, "catalogs", &source.catalog).await?;
    let cat = catalog(state, ns, &source.catalog).map_err(|_| error::NO_SUCH_OBJECT)?;
    if cat.spec.provider == Provider::Managed {
        return Err(error::NO_SUCH_OBJECT);
    }
    let provider = match provider_for_reads(&state.client, &state.providers, &cat).await {
        Ok(Ok((p, _))) => p,
        Ok(Err(_)) | Err(_) => return Err(error::CATALOG_UNREACHABLE),
    };
    // Many clients asking for one source at once cost one catalog round trip.
    let key = (
        coalesce::provider_lane(&provider),
        source.schema.clone(),
        source.name.clone(),
    );
    let target = ProbeTarget::relation(&source.schema, &source.name);
    let (sent, batches_sent) = (
        state.metrics.api.source_probes.clone(),
        state.metrics.api.source_probe_batches.clone(),
    );
    let (batches, lane) = (state.probes.batches.clone(), key.0);
    let probe = move || {
        // The flight, then the lane, holds the provider, so its address cannot be reused while
        // either key lives.
        async move {
            sent.inc();
            // Built only when this lookup opens the catalog's lane; later asks join its batches.
            let send = || -> coalesce::SendBatch<ProbeTarget, Result<Probe, ProviderError>, ProviderError> {
                Arc::new(move |targets: Vec<ProbeTarget>| {
                    let (provider, batches_sent) = (provider.clone(), batches_sent.clone());
                    async move {
                        batches_sent.inc();
                        // One target's failure (a namespace the credential may not read) must
                        // not fail the lookups batched with it.
                        crate::catalog::probe_each(provider.as_ref(), &targets).await
                    }
                    .boxed()
                })
            };
            batches
                .ask(lane, target, send, ProviderError::batch_answered_short())
                .await
                .and_then(|answer| answer)
                .map(|answer| vec![answer])
        }
        .boxed()
    };
    let answer = state.probes.flights.run(key, probe).await.map_err(|e| {
        tracing::warn!(catalog = %source.catalog, category = %e.category(), "source lookup probe failed");
        error::CATALOG_UNREACHABLE
    })?;
    let id = match answer.into_iter().next() {
        Some(Probe::Present {
            object_type: t,
            native_id,
        }) if t == wanted => native_id,
        _ => return Err(error::NO_SUCH_OBJECT),
    };
    let key = SourceKey {
        namespace: ns.to_string(),
        catalog: source.catalog.clone(),
        object_type: wanted.as_str().to_string(),
        id: id.clone(),
    };
    Ok((who, key))
}

/// Datasets bound to the source `key`, by model, re-checked against the cached models (the
/// index may run a step ahead of the store). The pure core of source lookup.
pub fn bound_datasets(
    models: &kube::runtime::reflector::Store<SemanticModel>,
    index: &crate::index::ModelIndex,
    key: &SourceKey,
) -> BTreeMap<String, (Arc<SemanticModel>, Vec<String>)> {
    let mut by_model: BTreeMap<String, (Arc<SemanticModel>, Vec<String>)> = BTreeMap::new();
    for (r, dataset) in index.datasets_of(key) {
        let Some(m) = models.get(&r) else { continue };
        let bound = m
            .status
            .iter()
            .flat_map(|s| &s.source_associations)
            .any(|a| a.dataset == dataset && a.id == key.id && a.source.catalog == key.catalog);
        if is_visible(&m) && bound {
            by_model
                .entry(m.name_any())
                .or_insert_with(|| (m.clone(), vec![]))
                .1
                .push(dataset);
        }
    }
    by_model
}

/// Sorted, de-duplicated identifiers of the datasets of the `allowed` models.
pub fn dataset_identifiers(
    ns: &str,
    by_model: BTreeMap<String, (Arc<SemanticModel>, Vec<String>)>,
    allowed: impl Fn(&str) -> bool,
) -> Vec<Identifier> {
    let mut identifiers: Vec<Identifier> = by_model
        .into_iter()
        .filter(|(name, _)| allowed(name))
        .flat_map(|(_, (m, datasets))| {
            datasets.into_iter().map(move |d| Identifier {
                namespace: model_namespace(ns, &m),
                name: d,
            })
        })
        .collect();
    sort_identifiers(&mut identifiers);
    identifiers
}

/// UTF-16 code units of catalog, schema, model name and metric name.
type SortKey = (Vec<u16>, Vec<u16>, Vec<u16>, Vec<u16>);

/// Metrics of `models`, each from its definition, sorted by model identifier then metric name
/// (UTF-16 code units). Keys are encoded once per entry, not once per comparison.
pub fn sorted_metrics(
    ns: &str,
    models: &[(&SemanticModel, &Definition)],
) -> Vec<(Vec<String>, Metric)> {
    let utf16 = |s: &str| s.encode_utf16().collect::<Vec<u16>>();
    let mut keyed: Vec<(SortKey, &SemanticModel, &Metric)> = models
        .iter()
        .flat_map(|(m, def)| {
            let model_key = (
                utf16(&m.spec.catalog),
                utf16(&m.spec.schema),
                utf16(m.model_name()),
            );
            def.metrics.iter().flatten().map(move |metric| {
                (
                    (
                        model_key.0.clone(),
                        model_key.1.clone(),
                        model_key.2.clone(),
                        utf16(&metric.name),
                    ),
                    *m,
                    metric,
                )
            })
        })
        .collect();
    keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    keyed
        .into_iter()
        .map(|(_, m, metric)| (model_namespace(ns, m), metric.clone()))
        .collect()
}

fn sort_identifiers(ids: &mut Vec<Identifier>) {
    ids.sort_by(|a, b| {
        let ka: Vec<&str> = a
            .namespace
            .iter()
            .map(String::as_str)
            .chain([a.name.as_str()])
            .collect();
        let kb: Vec<&str> = b
            .namespace
            .iter()
            .map(String::as_str)
            .chain([b.name.as_str()])
            .collect();
        cmp_utf16_all(&ka, &kb)
    });
    ids.dedup();
}

/// The visible models whose home is (catalog, schema), after the catalog and schema checks.
pub(super) async fn home_models(
    state: &ApiState,
    who: &Caller,
    ns: &str,
    catalog_name: &str,
    schema: &str,
    only: Option<&str>,
) -> Result<Vec<Arc<SemanticModel>>, ApiError> {
    require(state, who, ns, "catalogs", catalog_name).await?;
    let cat = catalog(state, ns, catalog_name)?;
    let schema_exists = match cat.spec.provider {
        Provider::Managed => cat
            .spec
            .registrations
            .iter()
            .any(|r| r.kind == RegistrationKind::Schema && r.name == schema),
        _ => {
            let provider = match provider_for_reads(&state.client, &state.providers, &cat).await {
                Ok(Ok((p, _))) => p,
                _ => return Err(error::CATALOG_UNREACHABLE),
            };
            let answer = provider
                .probe(&[ProbeTarget::schema(schema)])
                .await
                .map_err(|_| error::CATALOG_UNREACHABLE)?;
            matches!(answer.first(), Some(Probe::Present { .. }))
        }
    };
    if !schema_exists {
        return Err(error::NO_SUCH_SCHEMA);
    }
    let key = HomeKey {
        namespace: ns.to_string(),
        catalog: catalog_name.to_string(),
        schema: schema.to_string(),
    };
    // One model asked for: only its name's entries, not every model of the schema.
    let refs = match only {
        Some(name) => state.index.models_named(&key, name),
        None => state.index.models_in(&key),
    };
    let models: Vec<Arc<SemanticModel>> = refs
        .into_iter()
        .filter_map(|r| state.stores.models.get(&r))
        .filter(|m| is_visible(m) && m.spec.catalog == catalog_name && m.spec.schema == schema)
        // One model asked for: only it is authorized (not every model of the schema).
        .filter(|m| only.is_none_or(|n| m.model_name() == n))
        .collect();
    Ok(visible_to(state, who, ns, models).await)
}

/// The definition of a model's accepted revision: the spec when it has not moved since, else
/// the ControllerRevision that status names.
pub(super) async fn accepted_definition(
    state: &ApiState,
    m: &SemanticModel,
) -> Result<Definition, ApiError> {
    let status = m.status.as_ref().ok_or(error::INTERNAL)?;
    if m.metadata.generation.is_some() && m.metadata.generation == status.accepted_generation {
        return Ok(m.spec.definition.clone());
    }
    let uid = m.uid().unwrap_or_default();
    let revision = status.revision.unwrap_or(0);
    if let Some(def) = state.revisions.get(&uid, revision) {
        return Ok(def.as_ref().clone());
    }
    // The revision status names must be this model's (a deleted namesake's would not be).
    let Some(kept) = super::revisions::kept_revision(state, m, revision).await? else {
        tracing::warn!(revision, model = %m.name_any(), "the accepted revision is missing or not this model's");
        return Err(error::INTERNAL);
    };
    state
        .revisions
        .put(&uid, revision, Arc::new(kept.definition.clone()));
    Ok(kept.definition)
}

#[derive(Deserialize)]
pub struct Details {
    #[serde(default)]
    details: bool,
    /// With `details`: each metric's stable id too.
    #[serde(default)]
    ids: bool,
}

/// docs/design.md#metric-discovery: metrics of every visible model of a schema, from their accepted revisions.
pub async fn schema_metrics(
    State(state): State<Arc<ApiState>>,
    Path((ns, catalog_name, schema)): Path<(String, String, String)>,
    Query(q): Query<Details>,
    headers: Asker,
) -> Response {
    let run = async {
        let who = caller(&state, &headers).await?;
        let models = home_models(&state, &who, &ns, &catalog_name, &schema, None).await?;
        let mut with_defs = Vec::with_capacity(models.len());
        for m in models {
            let def = accepted_definition(&state, &m).await?;
            with_defs.push((m, def));
        }
        let borrowed: Vec<(&SemanticModel, &Definition)> =
            with_defs.iter().map(|(m, d)| (m.as_ref(), d)).collect();
        let entries = sorted_metrics(&ns, &borrowed);
        Ok::<_, ApiError>(if q.details {
            ok(MetricList {
                code: 0,
                metrics: entries
                    .into_iter()
                    .map(|(namespace, metric)| {
                        let id = q
                            .ids
                            .then(|| metric_id(&with_defs, &namespace, &metric.name));
                        MetricEntry {
                            namespace,
                            metric,
                            id: id.flatten(),
                        }
                    })
                    .collect(),
            })
        } else {
            ok(EntityList {
                code: 0,
                identifiers: entries
                    .into_iter()
                    .map(|(namespace, m)| Identifier {
                        namespace,
                        name: m.name.to_string(),
                    })
                    .collect(),
            })
        })
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

/// The id status records for metric `name` of the model that `namespace` ends with.
fn metric_id(
    models: &[(Arc<SemanticModel>, Definition)],
    namespace: &[String],
    name: &str,
) -> Option<String> {
    let model = namespace.last()?;
    let (m, _) = models.iter().find(|(m, _)| m.model_name() == model)?;
    let status = m.status.as_ref()?;
    Some(
        status
            .metrics
            .iter()
            .find(|i| i.name == name)?
            .id
            .to_string(),
    )
}

/// docs/design.md#models: model identifiers of a schema.
pub async fn list_models(
    State(state): State<Arc<ApiState>>,
    Path((ns, catalog_name, schema)): Path<(String, String, String)>,
    headers: Asker,
) -> Response {
    let run = async {
        let who = caller(&state, &headers).await?;
        let models = home_models(&state, &who, &ns, &catalog_name, &schema, None).await?;
        Ok::<_, ApiError>(model_identifiers(&ns, &models))
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

/// The models' identifiers (namespace `[ns, catalog, schema]`), sorted, as an EntityList.
fn model_identifiers(ns: &str, models: &[Arc<SemanticModel>]) -> Response {
    let mut identifiers: Vec<Identifier> = models
        .iter()
        .map(|m| Identifier {
            namespace: vec![
                ns.to_string(),
                m.spec.catalog.to_string(),
                m.spec.schema.to_string(),
            ],
            name: m.model_name().to_string(),
        })
        .collect();
    sort_identifiers(&mut identifiers);
    ok(EntityList {
        code: 0,
        identifiers,
    })
}

/// `?catalog=&schema=` of the namespace-wide model list.
#[derive(Deserialize, Default)]
pub struct ModelFilter {
    #[serde(default)]
    pub catalog: Option<String>,
    #[serde(default)]
    pub schema: Option<String>,
}

/// Every model of the namespace the caller may get (and whose catalog it may get), optionally
/// only one catalog's or one schema's; sorted like every identifier list. Unlike the per-schema
/// list, no catalog is probed: this is a listing of registrations, not of live schemas.
pub async fn list_namespace_models(
    State(state): State<Arc<ApiState>>,
    Path(ns): Path<String>,
    Query(filter): Query<ModelFilter>,
    headers: Asker,
) -> Response {
    let run = async {
        let who = caller(&state, &headers).await?;
        let wanted = |m: &SemanticModel| {
            m.namespace().as_deref() == Some(ns.as_str())
                && is_visible(m)
                && filter.catalog.as_ref().is_none_or(|c| *c == m.spec.catalog)
                && filter.schema.as_ref().is_none_or(|s| *s == m.spec.schema)
        };
        let models: Vec<Arc<SemanticModel>> = state
            .stores
            .models
            .state()
            .into_iter()
            .filter(|m| wanted(m))
            .collect();
        let mut catalogs: BTreeMap<String, bool> = BTreeMap::new();
        for m in &models {
            if !catalogs.contains_key(m.spec.catalog.as_str()) {
                let may = require(&state, &who, &ns, "catalogs", &m.spec.catalog)
                    .await
                    .is_ok();
                catalogs.insert(m.spec.catalog.to_string(), may);
            }
        }
        let models = models
            .into_iter()
            .filter(|m| catalogs.get(m.spec.catalog.as_str()) == Some(&true))
            .collect();
        let visible = visible_to(&state, &who, &ns, models).await;
        Ok::<_, ApiError>(model_identifiers(&ns, &visible))
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

#[derive(Serialize, schemars::JsonSchema)]
pub struct ModelBody {
    code: i32,
    model: ModelView,
}

#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelView {
    name: String,
    /// The SemanticModel object's metadata.name.
    object: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    comment: Option<String>,
    properties: BTreeMap<String, String>,
    revision: i64,
    definition: Definition,
    metric_ids: Vec<crate::crd::semantic_model::MetricIdentity>,
    /// The model's conditions now (Ready, Valid, SourcesResolved, SourcesCurrent); the current
    /// revision only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    conditions: Vec<crate::crd::conditions::Condition>,
    /// Sources whose live state no longer matches their binding; the current revision only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    source_drift: Vec<crate::crd::semantic_model::SourceDrift>,
    /// Each dataset's bound source with its native id; the current revision only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    source_associations: Vec<crate::crd::semantic_model::SourceAssociation>,
}

/// A model the caller may get, by its client-facing name.
pub(super) async fn visible_model(
    state: &ApiState,
    headers: &Asker,
    (ns, catalog, schema, name): (&str, &str, &str, &str),
) -> Result<Arc<SemanticModel>, ApiError> {
    let who = caller(state, headers).await?;
    home_models(state, &who, ns, catalog, schema, Some(name))
        .await?
        .into_iter()
        .find(|m| m.model_name() == name)
        .ok_or(error::NO_SUCH_MODEL)
}

/// `?revision=N` of the model path.
#[derive(Deserialize, Default)]
pub struct RevisionQuery {
    #[serde(default)]
    pub revision: Option<i64>,
}

/// docs/design.md#models: one model's accepted definition, revision and metric ids; with `?revision=N`
/// a kept earlier revision as it was accepted (docs/api.md).
pub async fn get_model(
    State(state): State<Arc<ApiState>>,
    Path((ns, catalog_name, schema, name)): Path<(String, String, String, String)>,
    Query(q): Query<RevisionQuery>,
    headers: Asker,
) -> Response {
    let run = async {
        let m = visible_model(&state, &headers, (&ns, &catalog_name, &schema, &name)).await?;
        let status = m.status.clone().unwrap_or_default();
        let current = status.revision.unwrap_or(0);
        let model = match q.revision {
            Some(r) if r != current => {
                let kept = super::revisions::kept_revision(&state, &m, r)
                    .await?
                    .ok_or(error::NO_SUCH_REVISION)?;
                ModelView {
                    object: m.name_any(),
                    name: kept.name,
                    comment: kept.comment,
                    properties: kept.properties,
                    revision: r,
                    definition: kept.definition,
                    metric_ids: kept.metrics.unwrap_or_default(),
                    conditions: vec![],
                    source_drift: vec![],
                    source_associations: vec![],
                }
            }
            _ => ModelView {
                object: m.name_any(),
                name: m.model_name().to_string(),
                comment: m.spec.comment.as_ref().map(|c| c.to_string()),
                properties: m.spec.properties.clone(),
                revision: current,
                definition: accepted_definition(&state, &m).await?,
                metric_ids: status.metrics,
                conditions: status.conditions,
                source_drift: status.source_drift,
                source_associations: status.source_associations,
            },
        };
        Ok::<_, ApiError>(ok(ModelBody { code: 0, model }))
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_sort_by_utf16_components_then_name_and_deduplicate() {
        let id = |m: &str, d: &str| Identifier {
            namespace: vec!["ns".into(), "c".into(), "s".into(), m.into()],
            name: d.into(),
        };
        let mut ids = vec![
            id("\u{E000}", "a"),
            id("\u{10000}", "b"),
            id("m", "manager"),
            id("m", "employee"),
            id("m", "employee"),
            id("M", "z"),
        ];
        sort_identifiers(&mut ids);
        let got: Vec<(String, String)> = ids
            .into_iter()
            .map(|i| (i.namespace[3].clone(), i.name))
            .collect();
        assert_eq!(
            got,
            vec![
                ("M".into(), "z".into()),
                ("m".into(), "employee".into()),
                ("m".into(), "manager".into()),
                ("\u{10000}".into(), "b".into()),
                ("\u{E000}".into(), "a".into())
            ]
        );
    }

    #[test]
    fn the_seed_employee_example_serializes_byte_for_byte() {
        let body = EntityList {
            code: 0,
            identifiers: vec![
                Identifier {
                    namespace: vec![
                        "example".into(),
                        "analytics".into(),
                        "semantic".into(),
                        "employee_analysis".into(),
                    ],
                    name: "employee".into(),
                },
                Identifier {
                    namespace: vec![
                        "example".into(),
                        "analytics".into(),
                        "semantic".into(),
                        "employee_analysis".into(),
                    ],
                    name: "manager".into(),
                },
            ],
        };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"code":0,"identifiers":[{"namespace":["example","analytics","semantic","employee_analysis"],"name":"employee"},{"namespace":["example","analytics","semantic","employee_analysis"],"name":"manager"}]}"#
        );
    }

    #[test]
    fn metrics_sort_by_model_identifier_then_utf16_metric_name() {
        let model = |name: &str, metrics: &[&str]| {
            let ms: Vec<serde_json::Value> = metrics.iter().map(|n| serde_json::json!({"name": n, "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "1"}]}})).collect();
            let spec = serde_json::from_value(serde_json::json!({"catalog": "c", "schema": "s", "name": name, "definition": {"datasets": [{"name": "d", "source": "a.b.c"}], "metrics": ms}})).unwrap();
            SemanticModel::new(name, spec)
        };
        let a = model("b_model", &["\u{E000}", "\u{10000}", "Z", "a"]);
        let b = model("a_model", &["x"]);
        let got: Vec<(String, String)> =
            sorted_metrics("ns", &[(&a, &a.spec.definition), (&b, &b.spec.definition)])
                .into_iter()
                .map(|(n, m)| (n[3].clone(), m.name.to_string()))
                .collect();
        let want = [
            ("a_model", "x"),
            ("b_model", "Z"),
            ("b_model", "a"),
            ("b_model", "\u{10000}"),
            ("b_model", "\u{E000}"),
        ];
        assert_eq!(
            got,
            want.iter()
                .map(|(m, n)| (m.to_string(), n.to_string()))
                .collect::<Vec<_>>()
        );
    }
}

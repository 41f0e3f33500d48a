//! SemanticModel reconciler: contract and model-local checks (DESIGN 3.1 levels 1-2), home and
//! catalog references, and name conflicts (3.6), summarized in `Valid` and `Ready`.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use kube::{Api, Resource};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::status::write_status_if_changed;
use super::{Context, Error};
use crate::catalog::{CatalogProvider, Probe, ProbeTarget};
use crate::crd::catalog::{Provider, RegistrationState};
use crate::crd::conditions::{self, Desired, Status};
use crate::crd::policy::RegistrationKind;
use crate::crd::{Catalog, SemanticModel, SemanticModelStatus};
use crate::model::canonical::{self, Change};
use crate::model::conflict::{Claim, conflict_winner};
use crate::model::drift;
use crate::model::identity;
use crate::model::sources::{self, SourceLookup};
use crate::model::validate::{self, CatalogLookup};
use crate::ossie::SourceRef;

pub const CONTROLLER: &str = "semanticmodel";

/// Catalogs of one namespace as the validator sees them.
pub struct NamespaceCatalogs(pub Vec<Arc<Catalog>>);

impl CatalogLookup for NamespaceCatalogs {
    fn catalog(&self, name: &str) -> Option<Option<Vec<String>>> {
        let cat = self.0.iter().find(|c| c.name_any() == name)?;
        if cat.metadata.deletion_timestamp.is_some() {
            return None; // a Catalog being deleted no longer hosts or serves anything
        }
        Some((cat.spec.provider == Provider::Managed).then(|| managed_schemas(cat)))
    }
}

/// Schemas a managed Catalog declares: its Schema registrations that were not removed.
fn managed_schemas(cat: &Catalog) -> Vec<String> {
    let removed = |name: &str| {
        cat.status.iter().flat_map(|s| &s.registrations).any(|r| {
            r.kind == RegistrationKind::Schema
                && r.name == name
                && r.state == RegistrationState::Removed
        })
    };
    cat.spec
        .registrations
        .iter()
        .filter(|r| r.kind == RegistrationKind::Schema && !removed(&r.name))
        .map(|r| r.name.clone())
        .collect()
}

fn claim(m: &SemanticModel) -> Claim<'_> {
    Claim {
        uid: m.metadata.uid.as_deref().unwrap_or_default(),
        created: m
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second()),
        object_name: m.metadata.name.as_deref().unwrap_or_default(),
        catalog: &m.spec.catalog,
        schema: &m.spec.schema,
        model_name: m.model_name(),
    }
}

/// Why a model cannot go on to acceptance: its Ready and Valid conditions.
pub struct Rejection {
    pub ready: Desired,
    pub valid: Desired,
}

/// Levels 1-2 and the name conflict: the verdict before any I/O. `None` means the model may go
/// on to acceptance.
pub fn local_verdict(
    model: &SemanticModel,
    catalogs: &dyn CatalogLookup,
    others: &[Arc<SemanticModel>],
) -> Option<Rejection> {
    if let Some(problem) = &model.decode_problem {
        let valid = Desired::new("Valid", Status::False, "SpecTooDeep", problem.clone());
        let ready = Desired::new("Ready", Status::False, "SpecTooDeep", problem.clone());
        return Some(Rejection { ready, valid });
    }
    let mut problems = validate::validate_definition(&model.spec);
    problems.extend(validate::validate_catalog_refs(&model.spec, catalogs));
    if let Some(first) = problems.first() {
        let valid = Desired::new(
            "Valid",
            Status::False,
            first.reason.as_str(),
            validate::summarize(&problems),
        );
        let ready = Desired::new(
            "Ready",
            Status::False,
            valid.reason.clone(),
            valid.message.clone(),
        );
        return Some(Rejection { ready, valid });
    }
    let valid = Desired::new(
        "Valid",
        Status::True,
        "Valid",
        "definition passed the contract and model-local checks",
    );
    if let Some(w) = conflict_winner(&claim(model), others.iter().map(|o| claim(o))) {
        let ready = Desired::new(
            "Ready",
            Status::False,
            "NameConflict",
            format!(
                "SemanticModel {:?}, created earlier, already claims the name {}.{}.{}; rename this model (spec.name) or delete one of them",
                w.object_name,
                model.spec.catalog,
                model.spec.schema,
                model.model_name()
            ),
        );
        return Some(Rejection { ready, valid });
    }
    None
}

/// The status for `model` given the accepted state in `base` and the conditions decided now.
/// Accepted fields (revision, hashes, associations, ids) come from `base` untouched.
pub fn status_with(
    model: &SemanticModel,
    base: SemanticModelStatus,
    conditions: Vec<Desired>,
    now: &Time,
) -> SemanticModelStatus {
    let previous = model.status.clone().unwrap_or_default();
    let generation = model.metadata.generation;
    SemanticModelStatus {
        observed_generation: generation,
        model_name: Some(model.model_name().to_string()),
        dataset_count: Some(model.spec.definition.datasets.len() as i64),
        metric_count: Some(model.spec.definition.metrics.as_ref().map_or(0, Vec::len) as i64),
        conditions: conditions::merge(&previous.conditions, conditions, generation, now),
        ..base
    }
}

/// Failpoints for crash drills: `SEMOPS_FAILPOINT=after-revision` exits the process between the
/// revision write and the status commit.
fn failpoint(name: &str) {
    if std::env::var("SEMOPS_FAILPOINT").is_ok_and(|v| v == name) {
        tracing::error!(failpoint = name, "failpoint hit; exiting");
        std::process::exit(86);
    }
}

pub async fn reconcile(model: Arc<SemanticModel>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.leader.is_leading() {
        return Ok(Action::await_change());
    }
    let ns = model.namespace().ok_or(Error::MissingNamespace)?;
    let catalogs = NamespaceCatalogs(ctx.stores.catalogs_in(&ns));
    let others = ctx.stores.models_in(&ns);
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let accepted = model.status.clone().unwrap_or_default();
    let valid_ok = Desired::new(
        "Valid",
        Status::True,
        "Valid",
        "definition passed the contract and model-local checks",
    );

    if let Some(Rejection { ready, valid }) = local_verdict(&model, &catalogs, &others) {
        let status = status_with(&model, accepted, vec![ready, valid], &now);
        commit(&ctx, &model, status).await?;
        return Ok(Action::await_change());
    }
    let name = model.model_name().to_string();
    let change = canonical::decide(&model.spec, &name, &accepted);
    let (next, sources_resolved) = match change {
        Change::NoOp => {
            let mut conds = accepted_conditions(&accepted, valid_ok);
            let mut next = accepted.clone();
            match drift_from_rounds(&ctx, &model, &accepted) {
                DriftCheck::NotDue => conds.extend(keep_condition(&accepted, "SourcesCurrent")),
                DriftCheck::Unknown(message) => {
                    conds.push(Desired::new(
                        "SourcesCurrent",
                        Status::Unknown,
                        "CatalogUnreachable",
                        message,
                    ));
                }
                DriftCheck::Checked(drift) => {
                    conds.push(if drift.is_empty() {
                        sources_current(accepted.source_associations.len())
                    } else {
                        Desired::new(
                            "SourcesCurrent",
                            Status::False,
                            "SourceDrift",
                            drift::summarize(&drift),
                        )
                    });
                    next.source_drift = drift;
                }
            }
            let status = status_with(&model, next, conds, &now);
            commit(&ctx, &model, status).await?;
            // Drift arrives with the check rounds of the catalogs (they requeue this model).
            return Ok(Action::await_change());
        }
        Change::Preserve => (
            SemanticModelStatus {
                snapshot_hash: Some(canonical::snapshot_hash(&model.spec, &name)),
                ..accepted.clone()
            },
            None,
        ),
        Change::Replace(_) => match resolve(&ctx, &model, &catalogs.0).await? {
            Resolved::Pending(message) => {
                let pending = Desired::new(
                    "Ready",
                    Status::False,
                    "CatalogUnreachable",
                    message.clone(),
                );
                let sources = Desired::new(
                    "SourcesResolved",
                    Status::Unknown,
                    "CatalogUnreachable",
                    message,
                );
                let status = status_with(&model, accepted, vec![pending, valid_ok, sources], &now);
                commit(&ctx, &model, status).await?;
                return Err(Error::Pending("CatalogUnreachable"));
            }
            Resolved::Lookups(lookups) => {
                let problems = sources::validate_sources(&model.spec.definition, &lookups);
                if let Some(first) = problems.first() {
                    let message = validate::summarize(&problems);
                    let ready = Desired::new(
                        "Ready",
                        Status::False,
                        first.reason.as_str(),
                        message.clone(),
                    );
                    let sources = Desired::new(
                        "SourcesResolved",
                        Status::False,
                        first.reason.as_str(),
                        message,
                    );
                    let status =
                        status_with(&model, accepted, vec![ready, valid_ok, sources], &now);
                    commit(&ctx, &model, status).await?;
                    return Ok(Action::await_change());
                }
                let revision = accepted.revision.unwrap_or(0) + 1;
                let names: Vec<&str> = model
                    .spec
                    .definition
                    .metrics
                    .iter()
                    .flatten()
                    .map(|m| m.name.as_str())
                    .collect();
                // Ids are minted here and exist only if the status write below commits them.
                let (metrics, retired) = identity::reconcile_metric_ids(
                    &accepted.metrics,
                    &accepted.retired_metrics,
                    &names,
                    revision,
                    identity::mint_metric_id,
                );
                let n = lookups.len();
                (
                    SemanticModelStatus {
                        definition_hash: Some(canonical::definition_hash(&model.spec.definition)),
                        accepted_rebind: model.spec.rebind.clone(),
                        snapshot_hash: Some(canonical::snapshot_hash(&model.spec, &name)),
                        source_associations: sources::build_associations(
                            &model.spec.definition,
                            &lookups,
                            revision,
                        ),
                        metrics,
                        retired_metrics: retired,
                        source_drift: vec![],
                        ..accepted.clone()
                    },
                    Some(Desired::new(
                        "SourcesResolved",
                        Status::True,
                        "Resolved",
                        format!("{n} distinct source(s) resolved"),
                    )),
                )
            }
        },
    };
    let revision = accepted.revision.unwrap_or(0) + 1;
    write_revision(
        &ctx,
        &model,
        revision,
        next.snapshot_hash.clone().unwrap_or_default(),
    )
    .await?;
    failpoint("after-revision");
    let next = SemanticModelStatus {
        revision: Some(revision),
        accepted_generation: model.metadata.generation,
        ..next
    };
    let mut conds = vec![
        Desired::new(
            "Ready",
            Status::True,
            "Accepted",
            format!("revision {revision} accepted"),
        ),
        valid_ok,
    ];
    let replaced = sources_resolved.is_some();
    conds.extend(sources_resolved.or_else(|| keep_condition(&accepted, "SourcesResolved")));
    if replaced {
        ctx.mark_sources_resolved(&model.uid().unwrap_or_default());
        notice_bound_catalogs(&ctx, &ns, &next.source_associations);
        conds.push(sources_current(next.source_associations.len()));
    } else {
        conds.extend(keep_condition(&accepted, "SourcesCurrent"));
    }
    let status = status_with(&model, next, conds, &now);
    commit(&ctx, &model, status).await?;
    prune_revisions(&ctx, &model, revision).await;
    let type_ = EventType::Normal;
    ctx.publish(
        model.as_ref(),
        type_,
        "Accepted",
        "Accept",
        format!("revision {revision} accepted ({change:?})"),
    )
    .await;
    Ok(Action::await_change())
}

/// A catalog learns that models bind its sources (so its source visits start) once per process.
fn notice_bound_catalogs(
    ctx: &Context,
    ns: &str,
    associations: &[crate::crd::semantic_model::SourceAssociation],
) {
    let Some(t) = &ctx.triggers else { return };
    // `note_bound` is true once per catalog, so each is requeued at most once.
    let fresh: Vec<&str> = associations
        .iter()
        .map(|a| a.source.catalog.as_str())
        .filter(|c| ctx.checks.note_bound(&format!("{ns}/{c}")))
        .collect();
    t.requeue_catalogs(
        fresh
            .into_iter()
            .map(|c| kube::runtime::reflector::ObjectRef::new(c).within(ns)),
    );
}

/// `SourcesCurrent=True`: one text whether the sources were just resolved or a round confirmed
/// them, so a round that finds nothing new writes nothing.
fn sources_current(associations: usize) -> Desired {
    Desired::new(
        "SourcesCurrent",
        Status::True,
        "Current",
        format!("all {associations} association(s) match their sources"),
    )
}

enum DriftCheck {
    /// Checked recently: keep what status says.
    NotDue,
    /// A catalog could not answer: drift is unknown (existing entries are kept).
    Unknown(String),
    Checked(Vec<crate::crd::semantic_model::SourceDrift>),
}

/// Drift of the model's bound sources, from what the latest check rounds of their catalogs saw
/// (DESIGN 5.4: rounds feed model drift). Never probes and never rebinds. A catalog without a
/// round since the sources were resolved (or since this process started) leaves status as is.
fn drift_from_rounds(
    ctx: &Context,
    model: &SemanticModel,
    accepted: &SemanticModelStatus,
) -> DriftCheck {
    if accepted.source_associations.is_empty() {
        return DriftCheck::NotDue;
    }
    let ns = model.namespace().unwrap_or_default();
    let resolved_at = ctx.sources_resolved_at(&model.uid().unwrap_or_default());
    let mut by_name = HashMap::new();
    let mut by_id = HashMap::new();
    let mut catalogs: Vec<&str> = accepted
        .source_associations
        .iter()
        .map(|a| a.source.catalog.as_str())
        .collect();
    catalogs.sort();
    catalogs.dedup();
    for catalog_name in catalogs {
        let Some(feed) = ctx.checks.feed(&format!("{ns}/{catalog_name}")) else {
            return DriftCheck::NotDue;
        };
        if resolved_at.is_some_and(|r| feed.at < r) {
            return DriftCheck::NotDue;
        }
        let seen = match feed.seen {
            Ok(seen) => seen,
            Err(why) => return DriftCheck::Unknown(format!("Catalog {catalog_name:?}: {why}")),
        };
        for a in accepted
            .source_associations
            .iter()
            .filter(|a| a.source.catalog == catalog_name)
        {
            let t = drift::target_of(a);
            let Some(answer) = seen.by_name.get(&t) else {
                return DriftCheck::NotDue; // bound after that round: wait for the next one
            };
            if let Some(found) = seen.by_id.get(&a.id) {
                by_id.insert(a.id.clone(), found.clone());
            }
            by_name.insert((catalog_name.to_string(), t), answer.clone());
        }
    }
    DriftCheck::Checked(drift::classify(
        &accepted.source_associations,
        &by_name,
        &by_id,
    ))
}

/// Conditions of an already accepted, unchanged model.
fn accepted_conditions(accepted: &SemanticModelStatus, valid: Desired) -> Vec<Desired> {
    let revision = accepted.revision.unwrap_or(0);
    let mut v = vec![
        Desired::new(
            "Ready",
            Status::True,
            "Accepted",
            format!("revision {revision} accepted"),
        ),
        valid,
    ];
    v.extend(keep_condition(accepted, "SourcesResolved"));
    v
}

/// Carries a condition forward unchanged (as a desired condition, so merge keeps its time).
fn keep_condition(status: &SemanticModelStatus, type_: &'static str) -> Option<Desired> {
    conditions::find(&status.conditions, type_).map(|c| {
        let st = match c.status.as_str() {
            "True" => Status::True,
            "False" => Status::False,
            _ => Status::Unknown,
        };
        Desired::new(type_, st, c.reason.clone(), c.message.clone())
    })
}

/// Writes status if it changed and emits an Event when Ready flips or changes reason to False.
async fn commit(
    ctx: &Context,
    model: &SemanticModel,
    status: SemanticModelStatus,
) -> Result<(), Error> {
    let before = model
        .status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, "Ready"))
        .cloned();
    let after = conditions::find(&status.conditions, "Ready").cloned();
    if write_status_if_changed(ctx, CONTROLLER, model, status).await?
        && let Some(after) = after
        && after.status != "True"
        && before
            .as_ref()
            .is_none_or(|b| b.status != after.status || b.reason != after.reason)
    {
        ctx.publish(
            model,
            EventType::Warning,
            &after.reason,
            "Validate",
            after.message.clone(),
        )
        .await;
    }
    Ok(())
}

enum Resolved {
    Lookups(HashMap<SourceRef, SourceLookup>),
    /// A catalog could not answer: acceptance waits (message names the catalog and the failure).
    Pending(String),
}

/// Resolves each distinct source once, one batched probe per catalog, then reads the columns
/// of the sources that exist.
async fn resolve(
    ctx: &Context,
    model: &SemanticModel,
    catalogs: &[Arc<Catalog>],
) -> Result<Resolved, Error> {
    let mut by_catalog: HashMap<String, Vec<SourceRef>> = HashMap::new();
    for s in sources::distinct_sources(&model.spec.definition) {
        by_catalog.entry(s.catalog.clone()).or_default().push(s);
    }
    let mut lookups = HashMap::new();
    for (catalog_name, refs) in by_catalog {
        let Some(cat) = catalogs.iter().find(|c| c.name_any() == catalog_name) else {
            // Level 2 already checked existence; a Catalog deleted meanwhile waits for the next pass.
            return Ok(Resolved::Pending(format!(
                "Catalog {catalog_name:?} is not in the cache yet"
            )));
        };
        if cat.spec.provider == Provider::Managed {
            lookups.extend(
                refs.into_iter()
                    .map(|r| (r, SourceLookup::InManagedCatalog)),
            );
            continue;
        }
        let provider = match super::catalog::provider_for(ctx, cat).await? {
            Ok((p, _)) => p,
            Err(no) => {
                return Ok(Resolved::Pending(format!(
                    "Catalog {catalog_name:?}: {}: {}",
                    no.reason, no.message
                )));
            }
        };
        let targets: Vec<ProbeTarget> = refs
            .iter()
            .map(|r| ProbeTarget::relation(&r.schema, &r.name))
            .collect();
        let answers = match provider.probe(&targets).await {
            Ok(a) => a,
            Err(e) => {
                return Ok(Resolved::Pending(format!(
                    "Catalog {catalog_name:?}: {}: {e}",
                    e.category()
                )));
            }
        };
        for (r, answer) in refs.into_iter().zip(answers) {
            let lookup = match answer {
                Probe::Absent => SourceLookup::Absent,
                Probe::Present {
                    object_type,
                    native_id,
                } => match provider.columns(&r.schema, &r.name).await {
                    Ok(Some(columns)) => SourceLookup::Present {
                        object_type,
                        native_id,
                        columns,
                    },
                    Ok(None) => SourceLookup::Absent, // dropped between the two questions
                    Err(e) => {
                        return Ok(Resolved::Pending(format!(
                            "Catalog {catalog_name:?}: {}: {e}",
                            e.category()
                        )));
                    }
                },
            };
            lookups.insert(r, lookup);
        }
    }
    Ok(Resolved::Lookups(lookups))
}

fn revision_name(model: &SemanticModel, revision: i64) -> String {
    format!("{}-r{revision}", model.name_any())
}

/// Writes revision `revision` (step a of the transaction). A revision of that name left by a
/// crash is reused when it holds the same snapshot of this model, replaced otherwise.
async fn write_revision(
    ctx: &Context,
    model: &SemanticModel,
    revision: i64,
    snapshot_hash: String,
) -> Result<(), Error> {
    if !ctx.leader.is_leading() {
        return Err(Error::NotLeader);
    }
    let ns = model.namespace().ok_or(Error::MissingNamespace)?;
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = model.uid().unwrap_or_default();
    let name = revision_name(model, revision);
    let data = serde_json::json!({
        "name": model.model_name(),
        "comment": model.spec.comment,
        "properties": model.spec.properties,
        "definition": model.spec.definition,
        "snapshotHash": snapshot_hash,
    });
    let owner = model.controller_owner_ref(&()).map(|mut o| {
        o.block_owner_deletion = None; // needs extra RBAC where owner-reference enforcement is on
        o
    });
    let rev = ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns),
            labels: Some([(MODEL_UID_LABEL.to_string(), uid.clone())].into()),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        revision: Some(revision),
        data: RawExtension(data),
    };
    match api
        .create(
            &PostParams {
                field_manager: Some("semops".into()),
                ..Default::default()
            },
            &rev,
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = api.get(&name).await?;
            let same_model = existing
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(MODEL_UID_LABEL))
                == Some(&uid);
            let same_snapshot = existing.data.0.get("snapshotHash").and_then(|h| h.as_str())
                == Some(snapshot_hash.as_str());
            if same_model && same_snapshot {
                return Ok(()); // left by an earlier attempt that did not commit: reuse it
            }
            // Never named by any committed status (or owned by a deleted namesake): replace it.
            api.delete(&name, &DeleteParams::default()).await?;
            api.create(&PostParams::default(), &rev).await?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Deletes the revision that fell out of the history window (best effort).
async fn prune_revisions(ctx: &Context, model: &SemanticModel, committed: i64) {
    let old = committed - ctx.revision_history_limit;
    if old < 1 {
        return;
    }
    let Some(ns) = model.namespace() else { return };
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    match api
        .delete(&revision_name(model, old), &DeleteParams::default())
        .await
    {
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(e) => tracing::debug!(error = %e, "could not prune an old revision"),
    }
}

/// Label carrying the owning model's uid on each ControllerRevision.
pub const MODEL_UID_LABEL: &str = "semops.io/model-uid";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::SemanticModelSpec;
    use std::collections::BTreeMap;

    fn model(uid: &str, created: i64, name: &str) -> SemanticModel {
        let spec: SemanticModelSpec = serde_json::from_value(serde_json::json!({
            "catalog": "analytics", "schema": "semantic", "name": name,
            "definition": {"datasets": [{"name": "e", "source": "hr.public.employees"}]}
        }))
        .unwrap();
        let mut m = SemanticModel::new(uid, spec);
        m.metadata.uid = Some(uid.into());
        m.metadata.namespace = Some("ns".into());
        m.metadata.generation = Some(1);
        m.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(created).unwrap(),
        ));
        m
    }

    fn catalogs() -> BTreeMap<String, Option<Vec<String>>> {
        BTreeMap::from([
            ("hr".into(), None),
            ("analytics".into(), Some(vec!["semantic".into()])),
        ])
    }

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    fn rejection(
        m: &SemanticModel,
        others: &[Arc<SemanticModel>],
        cats: &BTreeMap<String, Option<Vec<String>>>,
    ) -> Option<String> {
        local_verdict(m, cats, others).map(|r| r.ready.reason)
    }

    #[test]
    fn a_valid_model_without_rivals_passes_the_local_checks_and_status_counts_it() {
        let m = model("a", 1, "emp");
        assert_eq!(rejection(&m, &[], &catalogs()), None);
        let s = status_with(
            &m,
            SemanticModelStatus::default(),
            vec![Desired::new("Ready", Status::True, "Accepted", "")],
            &at(5),
        );
        assert_eq!(
            (
                s.model_name.as_deref(),
                s.dataset_count,
                s.metric_count,
                s.observed_generation
            ),
            (Some("emp"), Some(1), Some(0), Some(1))
        );
    }

    #[test]
    fn the_younger_of_two_models_with_one_name_gets_name_conflict() {
        let old = Arc::new(model("old", 1, "emp"));
        let young = Arc::new(model("young", 2, "emp"));
        let all = vec![old.clone(), young.clone()];
        assert_eq!(
            rejection(&young, &all, &catalogs()).as_deref(),
            Some("NameConflict")
        );
        assert_eq!(rejection(&old, &all, &catalogs()), None);
    }

    #[test]
    fn the_same_verdict_later_reproduces_the_status_exactly() {
        let mut m = model("a", 1, "emp");
        let conds = || {
            vec![Desired::new(
                "Ready",
                Status::True,
                "Accepted",
                "revision 1 accepted",
            )]
        };
        let first = status_with(&m, SemanticModelStatus::default(), conds(), &at(10));
        m.status = Some(first.clone());
        assert_eq!(
            status_with(&m, first.clone(), conds(), &at(5000)),
            first,
            "equal status means no write"
        );
    }

    #[test]
    fn a_missing_home_catalog_is_rejected_before_any_io() {
        let m = model("a", 1, "emp");
        let only_hr = BTreeMap::from([("hr".to_string(), None)]);
        assert_eq!(
            rejection(&m, &[], &only_hr).as_deref(),
            Some("CatalogNotFound")
        );
    }
}

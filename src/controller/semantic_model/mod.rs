//! SemanticModel reconciler (docs/design.md#semantic-models), a pipeline of named steps with one status build and one
//! commit:
//!
//! local verdict (levels 1-2, name conflict) → decide (replace / preserve / no-op) → resolve
//! sources (level 3, live) → accept revision (write the ControllerRevision) → one [`Outcome`] →
//! [`status_for`] (pure) → commit → after commit (prune, Accepted Event, drift bookkeeping).

mod drift;
mod resolve;
mod revision;

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::events::{Delivery, Reporter, Severity};
use super::writer::{Announce, commit};
use super::{Context, Error};
use crate::crd::catalog::{Provider, RegistrationState};
use crate::crd::conditions::{self, ConditionType, Desired, Reason, Status};
use crate::crd::policy::RegistrationKind;
use crate::crd::{Catalog, SemanticModel, SemanticModelStatus};
use crate::model::canonical::{self, Change};
use crate::model::conflict::{Claim, conflict_winner};
use crate::model::identity;
use crate::model::sources::{self, SourceLookup};
use crate::model::validate::{self, CatalogLookup};
use crate::ossie::SourceRef;
use drift::DriftCheck;
use resolve::Resolved;
pub use resolve::{SourceBatches, source_batches};

pub const CONTROLLER: &str = super::names::SEMANTIC_MODEL;

/// A Ready flip to anything but True is announced as a Warning (acceptance has its own Event).
const READY_FLIPS: Announce = Announce {
    condition: ConditionType::Ready,
    action: "Validate",
    when_true: false,
};

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

fn valid_ok() -> Desired {
    Desired::new(
        ConditionType::Valid,
        Status::True,
        Reason::VALID,
        "definition passed the contract and model-local checks",
    )
}

/// Levels 1-2 and the name conflict: the verdict before any I/O. `None` means the model may go
/// on to acceptance.
pub fn local_verdict(
    model: &SemanticModel,
    catalogs: &dyn CatalogLookup,
    others: &[Arc<SemanticModel>],
) -> Option<Rejection> {
    let refused = |reason: Reason, message: String| {
        let valid = Desired::new(ConditionType::Valid, Status::False, reason, message);
        Rejection {
            ready: valid.as_type(ConditionType::Ready),
            valid,
        }
    };
    if let Some(problem) = &model.decode_problem {
        return Some(refused(Reason::SPEC_TOO_DEEP, problem.clone()));
    }
    let mut problems = validate::validate_definition(&model.spec);
    problems.extend(validate::validate_catalog_refs(&model.spec, catalogs));
    let accepted = model.status.as_ref();
    problems.extend(validate::validate_renames(
        model.spec.definition.metrics.as_deref().unwrap_or_default(),
        accepted.map(|s| s.metrics.as_slice()).unwrap_or_default(),
        accepted.and_then(|s| s.revision),
    ));
    if let Some(first) = problems.first() {
        return Some(refused(
            first.reason.condition_reason(),
            validate::summarize(&problems),
        ));
    }
    let w = conflict_winner(&claim(model), others.iter().map(|o| claim(o)))?;
    Some(Rejection {
        ready: Desired::new(
            ConditionType::Ready,
            Status::False,
            Reason::NAME_CONFLICT,
            format!(
                "SemanticModel {:?}, created earlier, already claims the name {}.{}.{}; rename this model (spec.name) or delete one of them",
                w.object_name,
                model.spec.catalog,
                model.spec.schema,
                model.model_name()
            ),
        ),
        valid: valid_ok(),
    })
}

/// What one pass decided, before it is written.
pub enum Outcome {
    /// Levels 1-2 or a name conflict refused the definition; the accepted revision stands.
    Rejected(Rejection),
    /// Nothing to accept; drift as the catalogs' rounds report it.
    Unchanged(DriftCheck),
    /// A catalog could not answer during resolution: acceptance waits.
    Pending(String),
    /// Level 3 refused the definition.
    SourcesInvalid { reason: Reason, message: String },
    /// A new revision was written (step a); the status write commits it (step b).
    Accepted(Box<Acceptance>),
}

/// A revision ready to commit.
pub struct Acceptance {
    /// The accepted fields: revision, hashes, associations, metric ids.
    pub status: SemanticModelStatus,
    pub revision: i64,
    pub change: Change,
    /// How many distinct sources were resolved (`None` when associations were preserved).
    pub resolved: Option<usize>,
}

pub async fn reconcile(model: Arc<SemanticModel>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.leader.is_leading() {
        return Ok(Action::await_change());
    }
    let ns = model.namespace().ok_or(Error::MissingNamespace)?;
    let catalogs = NamespaceCatalogs(ctx.stores.catalogs_in(&ns));
    let accepted = model.status.clone().unwrap_or_default();
    let outcome = decide(&ctx, &model, &catalogs, &accepted).await?;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let status = status_for(&model, accepted, &outcome, &now);
    let written = commit(&ctx, CONTROLLER, model.as_ref(), status, Some(READY_FLIPS)).await?;
    if let (Some(version), Some(uid)) = (written, model.uid()) {
        ctx.own_writes.record(&uid, version);
    }
    after_commit(&ctx, &model, &outcome).await;
    match outcome {
        Outcome::Pending(_) => Err(Error::Pending(Reason::CATALOG_UNREACHABLE)),
        _ => Ok(Action::await_change()),
    }
}

/// Local verdict → decide → resolve sources → accept revision, as one outcome.
async fn decide(
    ctx: &Context,
    model: &SemanticModel,
    catalogs: &NamespaceCatalogs,
    accepted: &SemanticModelStatus,
) -> Result<Outcome, Error> {
    // Only models that claim the same name can win it (see `conflict_winner`).
    let others = ctx.stores.models_claiming(
        &model.namespace().unwrap_or_default(),
        &model.spec.catalog,
        &model.spec.schema,
        &[model.model_name()],
    );
    if let Some(rejection) = local_verdict(model, catalogs, &others) {
        return Ok(Outcome::Rejected(rejection));
    }
    let name = model.model_name();
    let change = canonical::decide(&model.spec, name, accepted);
    let (next, resolved) = match &change {
        Change::NoOp => {
            return Ok(Outcome::Unchanged(drift::from_rounds(ctx, model, accepted)));
        }
        Change::Preserve => (
            SemanticModelStatus {
                snapshot_hash: Some(canonical::snapshot_hash(&model.spec, name).into()),
                ..accepted.clone()
            },
            None,
        ),
        Change::Replace(_) => match resolve::resolve(ctx, model, &catalogs.0).await? {
            Resolved::Pending(message) => return Ok(Outcome::Pending(message)),
            Resolved::Lookups(lookups) => {
                let problems = sources::validate_sources(&model.spec.definition, &lookups);
                if let Some(first) = problems.first() {
                    return Ok(Outcome::SourcesInvalid {
                        reason: first.reason.condition_reason(),
                        message: validate::summarize(&problems),
                    });
                }
                (replaced(model, accepted, &lookups), Some(lookups.len()))
            }
        },
    };
    let revision = accepted.revision.unwrap_or(0) + 1;
    let metrics =
        revision::write(ctx, model, revision, snapshot_text(&next), &next.metrics).await?;
    crate::failpoint::crash("after-revision");
    if resolved.is_some() {
        ctx.mark_sources_resolved(&model.uid().unwrap_or_default());
    }
    Ok(acceptance(model, next, revision, metrics, change, resolved))
}

/// The snapshot hash a revision records, as text.
fn snapshot_text(status: &SemanticModelStatus) -> String {
    (status.snapshot_hash.as_ref())
        .map(ToString::to_string)
        .unwrap_or_default()
}

/// The accepted fields of `next` committed as `revision` with the ids the revision holds.
fn acceptance(
    model: &SemanticModel,
    next: SemanticModelStatus,
    revision: i64,
    metrics: Vec<crate::crd::semantic_model::MetricIdentity>,
    change: Change,
    resolved: Option<usize>,
) -> Outcome {
    Outcome::Accepted(Box::new(Acceptance {
        status: SemanticModelStatus {
            revision: Some(revision),
            accepted_generation: model.metadata.generation,
            metrics,
            ..next
        },
        revision,
        change,
        resolved,
    }))
}

/// What a new model's first acceptance writes when its sources resolved to `lookups` (pure):
/// the status and the revision `reconcile` commits, built by the same steps. The bench's bare
/// client writes these, so that "the same writes" are the same objects.
pub fn first_acceptance(
    model: &SemanticModel,
    lookups: &std::collections::HashMap<SourceRef, SourceLookup>,
    now: &Time,
) -> (
    SemanticModelStatus,
    k8s_openapi::api::apps::v1::ControllerRevision,
) {
    let none = SemanticModelStatus::default();
    let next = replaced(model, &none, lookups);
    let rev = revision::revision_object(model, 1, &snapshot_text(&next), &next.metrics);
    let metrics = next.metrics.clone();
    let change = Change::Replace(canonical::ReplaceReason::FirstAcceptance);
    let outcome = acceptance(model, next, 1, metrics, change, Some(lookups.len()));
    (status_for(model, none, &outcome, now), rev)
}

/// The accepted fields of a replace: hashes, the whole association set and reconciled metric
/// ids. Ids are minted here and exist only if the status write commits them.
fn replaced(
    model: &SemanticModel,
    accepted: &SemanticModelStatus,
    lookups: &std::collections::HashMap<SourceRef, SourceLookup>,
) -> SemanticModelStatus {
    let revision = accepted.revision.unwrap_or(0) + 1;
    let wanted = identity::Wanted::of(model.spec.definition.metrics.as_deref().unwrap_or_default());
    let (metrics, retired) = identity::reconcile_metric_ids(
        &accepted.metrics,
        &accepted.retired_metrics,
        &wanted,
        revision,
        identity::mint_metric_id,
    );
    SemanticModelStatus {
        definition_hash: Some(canonical::definition_hash(&model.spec.definition).into()),
        accepted_rebind: model.spec.rebind.clone(),
        snapshot_hash: Some(canonical::snapshot_hash(&model.spec, model.model_name()).into()),
        source_associations: sources::build_associations(&model.spec.definition, lookups, revision),
        metrics,
        retired_metrics: retired,
        source_drift: vec![],
        ..accepted.clone()
    }
}

/// The one status of this pass (pure): accepted fields from `accepted` or the new revision,
/// conditions from the outcome.
pub fn status_for(
    model: &SemanticModel,
    accepted: SemanticModelStatus,
    outcome: &Outcome,
    now: &Time,
) -> SemanticModelStatus {
    let kept = |t| Desired::kept(&accepted.conditions, t);
    let accepted_ready = |revision: i64| {
        Desired::new(
            ConditionType::Ready,
            Status::True,
            Reason::ACCEPTED,
            format!("revision {revision} accepted"),
        )
    };
    let (base, conds): (SemanticModelStatus, Vec<Desired>) = match outcome {
        Outcome::Rejected(r) => (accepted, vec![r.ready.clone(), r.valid.clone()]),
        Outcome::Unchanged(drift) => {
            let mut conds = vec![accepted_ready(accepted.revision.unwrap_or(0)), valid_ok()];
            conds.extend(kept(ConditionType::SourcesResolved));
            let mut next = accepted.clone();
            match drift {
                DriftCheck::NotDue => conds.extend(kept(ConditionType::SourcesCurrent)),
                DriftCheck::Unknown(message) => conds.push(Desired::new(
                    ConditionType::SourcesCurrent,
                    Status::Unknown,
                    Reason::CATALOG_UNREACHABLE,
                    message.clone(),
                )),
                DriftCheck::Checked(found) => {
                    conds.push(if found.is_empty() {
                        sources_current(accepted.source_associations.len())
                    } else {
                        Desired::new(
                            ConditionType::SourcesCurrent,
                            Status::False,
                            Reason::SOURCE_DRIFT,
                            crate::model::drift::summarize(found),
                        )
                    });
                    next.source_drift = found.clone();
                }
            }
            (next, conds)
        }
        Outcome::Pending(message) => {
            let pending = Desired::new(
                ConditionType::Ready,
                Status::False,
                Reason::CATALOG_UNREACHABLE,
                message.clone(),
            );
            let sources = Desired::new(
                ConditionType::SourcesResolved,
                Status::Unknown,
                Reason::CATALOG_UNREACHABLE,
                message.clone(),
            );
            (accepted, vec![pending, valid_ok(), sources])
        }
        Outcome::SourcesInvalid { reason, message } => {
            let sources = Desired::new(
                ConditionType::SourcesResolved,
                Status::False,
                reason.clone(),
                message.clone(),
            );
            (
                accepted,
                vec![sources.as_type(ConditionType::Ready), valid_ok(), sources],
            )
        }
        Outcome::Accepted(a) => {
            let mut conds = vec![accepted_ready(a.revision), valid_ok()];
            match a.resolved {
                Some(n) => conds.extend([
                    Desired::new(
                        ConditionType::SourcesResolved,
                        Status::True,
                        Reason::RESOLVED,
                        format!("{n} distinct source(s) resolved"),
                    ),
                    sources_current(a.status.source_associations.len()),
                ]),
                None => conds.extend(
                    kept(ConditionType::SourcesResolved)
                        .into_iter()
                        .chain(kept(ConditionType::SourcesCurrent)),
                ),
            }
            (a.status.clone(), conds)
        }
    };
    status_with(model, base, conds, now)
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
        model_name: Some(model.model_name().into()),
        dataset_count: Some(model.spec.definition.datasets.len() as i64),
        metric_count: Some(model.spec.definition.metrics.as_ref().map_or(0, Vec::len) as i64),
        // Absent rather than 0, so that models without deprecations see no status change.
        deprecated_metric_count: Some(
            (model.spec.definition.metrics.iter().flatten())
                .filter(|m| m.deprecated.is_some())
                .count() as i64,
        )
        .filter(|n| *n > 0),
        conditions: conditions::merge(&previous.conditions, conditions, generation, now),
        ..base
    }
}

/// `SourcesCurrent=True`: one text whether the sources were just resolved or a round confirmed
/// them, so a round that finds nothing new writes nothing.
fn sources_current(associations: usize) -> Desired {
    Desired::new(
        ConditionType::SourcesCurrent,
        Status::True,
        Reason::CURRENT,
        format!("all {associations} association(s) match their sources"),
    )
}

/// What follows a committed acceptance: the history window, catalogs learning they have bound
/// sources, and the Accepted Event.
async fn after_commit(ctx: &Context, model: &SemanticModel, outcome: &Outcome) {
    let Outcome::Accepted(a) = outcome else {
        return;
    };
    if a.resolved.is_some() {
        notice_bound_catalogs(ctx, model, &a.status.source_associations);
    }
    revision::prune(ctx, model, a.revision).await;
    // Queued: the acceptance is committed with its status write, and at bring-up one more
    // round trip per model would hold a worker that the next model could use.
    ctx.events
        .publish(
            &ctx.metrics,
            Reporter::Controller,
            model,
            Severity::Normal,
            &Reason::ACCEPTED,
            "Accept",
            format!("revision {} accepted ({:?})", a.revision, a.change),
            Delivery::Queued,
        )
        .await;
}

/// A catalog learns that models bind its sources (so its source visits start) once per process.
fn notice_bound_catalogs(
    ctx: &Context,
    model: &SemanticModel,
    associations: &[crate::crd::semantic_model::SourceAssociation],
) {
    let Some(t) = &ctx.triggers else { return };
    let ns = model.namespace().unwrap_or_default();
    // `note_bound` is true once per catalog, so each is requeued at most once.
    let fresh: Vec<&str> = associations
        .iter()
        .map(|a| a.source.catalog.as_str())
        .filter(|c| ctx.checks.note_bound(&format!("{ns}/{c}")))
        .collect();
    t.requeue_catalogs(
        fresh
            .into_iter()
            .map(|c| kube::runtime::reflector::ObjectRef::new(c).within(&ns)),
    );
}

#[cfg(test)]
mod tests;

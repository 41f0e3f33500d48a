//! SemanticModel reconciler: contract and model-local checks (DESIGN 3.1 levels 1-2), home and
//! catalog references, and name conflicts (3.6), summarized in `Valid` and `Ready`.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::status::write_status_if_changed;
use super::{Context, Error};
use crate::crd::catalog::{Provider, RegistrationState};
use crate::crd::conditions::{self, Desired, Status};
use crate::crd::policy::RegistrationKind;
use crate::crd::{Catalog, SemanticModel, SemanticModelStatus};
use crate::model::conflict::{Claim, conflict_winner};
use crate::model::validate::{self, CatalogLookup};

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

/// The whole status this controller wants, from plain inputs.
pub fn desired_status(
    model: &SemanticModel,
    catalogs: &dyn CatalogLookup,
    others: &[Arc<SemanticModel>],
    now: &Time,
) -> SemanticModelStatus {
    let previous = model.status.clone().unwrap_or_default();
    let generation = model.metadata.generation;
    let mut problems = validate::validate_definition(&model.spec);
    problems.extend(validate::validate_catalog_refs(&model.spec, catalogs));
    let winner = conflict_winner(&claim(model), others.iter().map(|o| claim(o)));

    let valid = match problems.first() {
        None => Desired::new(
            "Valid",
            Status::True,
            "Valid",
            "definition passed the contract and model-local checks",
        ),
        Some(first) => Desired::new(
            "Valid",
            Status::False,
            first.reason.as_str(),
            validate::summarize(&problems),
        ),
    };
    let ready = if let Some(w) = &winner {
        Desired::new(
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
        )
    } else if valid.status == Status::False {
        Desired::new(
            "Ready",
            Status::False,
            valid.reason.clone(),
            valid.message.clone(),
        )
    } else {
        Desired::new(
            "Ready",
            Status::True,
            "Validated",
            "definition is valid; live source resolution is not built yet",
        )
    };
    SemanticModelStatus {
        observed_generation: generation,
        model_name: Some(model.model_name().to_string()),
        dataset_count: Some(model.spec.definition.datasets.len() as i64),
        metric_count: Some(model.spec.definition.metrics.as_ref().map_or(0, Vec::len) as i64),
        conditions: conditions::merge(&previous.conditions, vec![ready, valid], generation, now),
        ..previous
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
    let desired = desired_status(&model, &catalogs, &others, &now);
    let before = model
        .status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, "Ready"))
        .cloned();
    let after = conditions::find(&desired.conditions, "Ready").cloned();
    if write_status_if_changed(&ctx, CONTROLLER, model.as_ref(), desired).await?
        && let Some(after) = after
        && before
            .as_ref()
            .is_none_or(|b| b.status != after.status || b.reason != after.reason)
    {
        let type_ = if after.status == "True" {
            EventType::Normal
        } else {
            EventType::Warning
        };
        ctx.publish(
            model.as_ref(),
            type_,
            &after.reason,
            "Validate",
            after.message.clone(),
        )
        .await;
    }
    Ok(Action::await_change())
}

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

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1000).unwrap())
    }

    fn ready(s: &SemanticModelStatus) -> (&str, &str) {
        let c = conditions::find(&s.conditions, "Ready").unwrap();
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn a_valid_model_without_rivals_is_ready() {
        let m = model("a", 1, "emp");
        let s = desired_status(&m, &catalogs(), &[], &now());
        assert_eq!(ready(&s), ("True", "Validated"));
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
            ready(&desired_status(&young, &catalogs(), &all, &now())),
            ("False", "NameConflict")
        );
        assert_eq!(
            ready(&desired_status(&old, &catalogs(), &all, &now())),
            ("True", "Validated")
        );
    }

    #[test]
    fn reconciling_an_unchanged_model_reproduces_its_status_exactly() {
        let mut m = model("a", 1, "emp");
        let first = desired_status(&m, &catalogs(), &[], &now());
        m.status = Some(first.clone());
        let later = Time(k8s_openapi::jiff::Timestamp::from_second(5000).unwrap());
        assert_eq!(
            desired_status(&m, &catalogs(), &[], &later),
            first,
            "equal status means no write"
        );
    }

    #[test]
    fn a_missing_home_catalog_makes_the_model_not_ready() {
        let m = model("a", 1, "emp");
        let only_hr = BTreeMap::from([("hr".to_string(), None)]);
        let s = desired_status(&m, &only_hr, &[], &now());
        assert_eq!(ready(&s), ("False", "CatalogNotFound"));
    }
}

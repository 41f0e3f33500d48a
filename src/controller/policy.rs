//! ReconcilePolicy reconciler: spec validity, overlap with other policies, catalogs selected.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::writer::commit;
use super::{Context, Error};
use crate::crd::catalog::PolicySource;
use crate::crd::conditions::{self, ConditionType, Desired, Reason, Status};
use crate::crd::{Catalog, ReconcilePolicy, ReconcilePolicyStatus};
use crate::policy::spec::spec_problems;
use crate::policy::views::{catalog_view, policy_views};
use crate::policy::{OperatorDefaults, effective_policy, overlaps};

pub const CONTROLLER: &str = super::names::RECONCILE_POLICY;

/// The whole status this controller wants, from plain inputs.
pub fn desired_status(
    p: &ReconcilePolicy,
    policies: &[Arc<ReconcilePolicy>],
    catalogs: &[Arc<Catalog>],
    now: &Time,
) -> ReconcilePolicyStatus {
    let previous = p.status.clone().unwrap_or_default();
    let generation = p.metadata.generation;
    let name = p.name_any();
    let views = policy_views(policies);
    let cat_views: Vec<_> = catalogs.iter().map(|c| catalog_view(c)).collect();
    let selected = cat_views
        .iter()
        .filter(|c| {
            let e = effective_policy(c, &views, &OperatorDefaults::default()).effective;
            e.source != PolicySource::OperatorDefault && e.name.as_deref() == Some(name.as_str())
        })
        .count();
    let problems = spec_problems(&p.spec);
    let overlap = overlaps(&cat_views, &views).remove(&name);
    let ready = if !problems.is_empty() {
        Desired::new(
            ConditionType::Ready,
            Status::False,
            Reason::INVALID_SPEC,
            problems.join("; "),
        )
    } else if let Some((others, why)) = overlap {
        let others: Vec<_> = others.into_iter().collect();
        Desired::new(
            ConditionType::Ready,
            Status::False,
            Reason::OVERLAP,
            format!(
                "overlaps with ReconcilePolicy {} ({why}); the alphabetically first wins; narrow the catalogSelectors or delete one",
                others.join(", ")
            ),
        )
    } else {
        Desired::new(
            ConditionType::Ready,
            Status::True,
            Reason::VALID,
            format!("selects {selected} Catalog(s)"),
        )
    };
    ReconcilePolicyStatus {
        observed_generation: generation,
        catalog_count: Some(selected as i64),
        conditions: conditions::merge(&previous.conditions, vec![ready], generation, now),
    }
}

pub async fn reconcile(p: Arc<ReconcilePolicy>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.leader.is_leading() {
        return Ok(Action::await_change());
    }
    let ns = p.namespace().ok_or(Error::MissingNamespace)?;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let desired = desired_status(
        &p,
        &ctx.stores.policies_in(&ns),
        &ctx.stores.catalogs_in(&ns),
        &now,
    );
    commit(&ctx, CONTROLLER, p.as_ref(), desired, None).await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{CatalogSpec, ReconcilePolicySpec};

    fn policy(name: &str, yaml: &str) -> Arc<ReconcilePolicy> {
        let spec: ReconcilePolicySpec = serde_saphyr::from_str(yaml).unwrap();
        let mut p = ReconcilePolicy::new(name, spec);
        p.metadata.namespace = Some("ns".into());
        Arc::new(p)
    }
    fn catalog(name: &str, tier: &str) -> Arc<Catalog> {
        let spec: CatalogSpec = serde_saphyr::from_str("provider: managed").unwrap();
        let mut c = Catalog::new(name, spec);
        c.metadata.labels = Some([("tier".to_string(), tier.to_string())].into());
        Arc::new(c)
    }
    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1).unwrap())
    }
    fn ready(s: &ReconcilePolicyStatus) -> (String, String) {
        let c = conditions::find(&s.conditions, ConditionType::Ready).unwrap();
        (c.status.to_string(), c.reason.to_string())
    }

    #[test]
    fn defaults_are_applied_and_a_lone_policy_is_ready_and_counts_its_catalogs() {
        let p = policy("strict", "catalogSelector: {matchLabels: {tier: prod}}");
        assert_eq!(
            (
                p.spec.interval.as_str(),
                p.spec.jitter,
                p.spec.probe.concurrency,
                p.spec.max_removals_per_round
            ),
            ("1h", 0.2, 4, 50)
        );
        let cats = vec![
            catalog("a", "prod"),
            catalog("b", "prod"),
            catalog("c", "dev"),
        ];
        let s = desired_status(&p, std::slice::from_ref(&p), &cats, &now());
        assert_eq!(ready(&s), ("True".into(), "Valid".into()));
        assert_eq!(s.catalog_count, Some(2));
    }

    #[test]
    fn both_overlapping_policies_report_overlap() {
        let a = policy("a", "catalogSelector: {matchLabels: {tier: prod}}");
        let b = policy(
            "b",
            "catalogSelector: {matchExpressions: [{key: tier, operator: In, values: [prod]}]}",
        );
        let all = vec![a.clone(), b.clone()];
        let cats = vec![catalog("x", "prod")];
        assert_eq!(ready(&desired_status(&a, &all, &cats, &now())).1, "Overlap");
        assert_eq!(ready(&desired_status(&b, &all, &cats, &now())).1, "Overlap");
        assert_eq!(
            desired_status(&a, &all, &cats, &now()).catalog_count,
            Some(1),
            "the alphabetically first wins"
        );
        assert_eq!(
            desired_status(&b, &all, &cats, &now()).catalog_count,
            Some(0)
        );
    }
}

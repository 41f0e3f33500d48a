//! The views policy resolution reads, built from the custom resources themselves.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::resolve::{CatalogView, PolicyView};
use crate::crd::{Catalog, ReconcilePolicy};

/// The live (not deleting) policies of a namespace as resolution sees them.
pub fn policy_views(policies: &[Arc<ReconcilePolicy>]) -> Vec<PolicyView<'_>> {
    policies
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| PolicyView {
            name: p.metadata.name.as_deref().unwrap_or_default(),
            selector: p.spec.catalog_selector.as_ref(),
            mode: p.spec.mode,
            interval: &p.spec.interval,
            enabled: p.spec.enabled,
        })
        .collect()
}

/// A Catalog as resolution sees it: name, labels and its policy reference.
pub fn catalog_view(c: &Catalog) -> CatalogView<'_> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    CatalogView {
        name: c.metadata.name.as_deref().unwrap_or_default(),
        labels: c.metadata.labels.as_ref().unwrap_or(&EMPTY),
        policy_ref: c
            .spec
            .reconcile_policy_ref
            .as_ref()
            .map(|r| r.name.as_str()),
    }
}

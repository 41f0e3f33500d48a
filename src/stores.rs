//! The three shared watch caches (one reflector store per kind), read by the controllers and
//! the read API alike, so 10,000 models are held once.

use std::sync::Arc;

use kube::runtime::reflector::Store;

use crate::crd::{Catalog, ReconcilePolicy, SemanticModel};

#[derive(Clone)]
pub struct Stores {
    pub models: Store<SemanticModel>,
    pub catalogs: Store<Catalog>,
    pub policies: Store<ReconcilePolicy>,
}

impl Stores {
    pub fn models_in(&self, ns: &str) -> Vec<Arc<SemanticModel>> {
        self.models
            .state_filter(|m| m.metadata.namespace.as_deref() == Some(ns))
    }
    /// The models of `ns` that claim one of `names` in `catalog`.`schema`, found by one pass
    /// over the cache that copies only them (every model event and reconcile asks this; copying
    /// the whole namespace each time made a cold start at 10,000 models quadratic).
    pub fn models_claiming(
        &self,
        ns: &str,
        catalog: &str,
        schema: &str,
        names: &[&str],
    ) -> Vec<Arc<SemanticModel>> {
        self.models.state_filter(|m| {
            m.spec.catalog == catalog
                && m.spec.schema == schema
                && names.contains(&m.model_name())
                && m.metadata.namespace.as_deref() == Some(ns)
        })
    }
    pub fn catalogs_in(&self, ns: &str) -> Vec<Arc<Catalog>> {
        self.catalogs
            .state_filter(|c| c.metadata.namespace.as_deref() == Some(ns))
    }
    pub fn policies_in(&self, ns: &str) -> Vec<Arc<ReconcilePolicy>> {
        self.policies
            .state_filter(|p| p.metadata.namespace.as_deref() == Some(ns))
    }
}

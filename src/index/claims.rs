//! Which models claim each model name: (namespace, catalog, schema, model name) -> model object
//! names, for every cached model, accepted or not. The name-conflict verdict and the trigger
//! that requeues rivals ask this once per model event and reconcile; a pass over the cache to
//! answer it took 222 µs (p50) at 10,000 models (`cargo bench --bench read_api`), four to five times
//! per model during a cold start, so the bring-up grew with the square of the model count.
//! Holds names only, each scope and name once; callers re-check each hit against the cached
//! object.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use kube::ResourceExt;

use super::small_set::SmallSet;
use crate::crd::SemanticModel;

/// (namespace, catalog, schema): held once however many models claim names there.
type Scope = (String, String, String);
/// Model name -> the model objects claiming it, in one scope.
type Names = HashMap<Arc<str>, SmallSet<Arc<str>>>;
/// Model object -> the (scope, model name) it claims, in one namespace.
type Held = HashMap<Arc<str>, (Arc<Scope>, Arc<str>)>;

#[derive(Default)]
pub struct Map {
    /// Scope -> its claimed names.
    claims: HashMap<Arc<Scope>, Names>,
    /// Namespace -> the claim each model object holds (the very copies `claims` holds), so an
    /// update or delete removes exactly that.
    held: HashMap<String, Held>,
}

impl Map {
    fn apply(&mut self, m: &SemanticModel) {
        let (ns, object) = (m.namespace().unwrap_or_default(), m.name_any());
        self.remove(&ns, &object);
        let scope = super::interned(
            &self.claims,
            (
                ns.clone(),
                m.spec.catalog.to_string(),
                m.spec.schema.to_string(),
            ),
        );
        let names = self.claims.entry(scope.clone()).or_default();
        let name = names
            .get_key_value(m.model_name())
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| Arc::from(m.model_name()));
        let object: Arc<str> = Arc::from(object);
        names
            .entry(name.clone())
            .or_default()
            .insert(object.clone());
        self.held
            .entry(ns)
            .or_default()
            .insert(object, (scope, name));
    }

    fn remove(&mut self, ns: &str, object: &str) {
        let Some(objects) = self.held.get_mut(ns) else {
            return;
        };
        let Some((scope, name)) = objects.remove(object) else {
            return;
        };
        if objects.is_empty() {
            self.held.remove(ns);
        }
        let Some(names) = self.claims.get_mut(&scope) else {
            return;
        };
        if let Some(set) = names.get_mut(&name) {
            set.remove(object);
            if set.is_empty() {
                names.remove(&name);
            }
        }
        if names.is_empty() {
            self.claims.remove(&scope);
        }
    }
}

/// The claims of all cached models, fed by the model watch like [`super::ModelIndex`].
#[derive(Default)]
pub struct ClaimIndex {
    maps: super::relisted::Relisted<Map>,
}

/// Feeding (`apply`, `delete`, relists) is the shared [`super::relisted::Relisted`]'s.
impl std::ops::Deref for ClaimIndex {
    type Target = super::relisted::Relisted<Map>;
    fn deref(&self) -> &Self::Target {
        &self.maps
    }
}

impl super::relisted::ModelMap for Map {
    fn record(&mut self, m: &SemanticModel) {
        self.apply(m);
    }
    fn forget(&mut self, m: &SemanticModel) {
        self.remove(&m.namespace().unwrap_or_default(), &m.name_any());
    }
}

impl ClaimIndex {
    /// Object names (sorted, each once) of the models of `ns` that claim one of `names` in
    /// `catalog`.`schema`.
    pub fn claimants(&self, ns: &str, catalog: &str, schema: &str, names: &[&str]) -> Vec<String> {
        let scope = (ns.into(), catalog.into(), schema.into());
        let map = self.maps.read();
        let Some(claimed) = map.claims.get(&scope) else {
            return vec![];
        };
        let objects: BTreeSet<&Arc<str>> = names
            .iter()
            .filter_map(|name| claimed.get(*name))
            .flatten()
            .collect();
        objects.into_iter().map(|o| o.to_string()).collect()
    }
}

#[cfg(test)]
impl ClaimIndex {
    /// Model objects and scopes held; fails if a claim is held twice over (not shared with
    /// `claims`) or an emptied entry stayed behind.
    pub fn held(&self) -> Result<(usize, usize), String> {
        let map = self.maps.read();
        let mut objects = 0;
        for (ns, held) in &map.held {
            if held.is_empty() {
                return Err(format!("namespace {ns} holds nothing but stayed"));
            }
            for (object, (scope, name)) in held {
                objects += 1;
                let (key, names) = map
                    .claims
                    .get_key_value(scope)
                    .ok_or(format!("{object}: its scope is not in the claims"))?;
                let (name_key, set) = names
                    .get_key_value(name)
                    .ok_or(format!("{object}: its name is not claimed"))?;
                let shared = Arc::ptr_eq(key, scope)
                    && Arc::ptr_eq(name_key, name)
                    && set.get(object).is_some_and(|o| Arc::ptr_eq(o, object));
                if !shared {
                    return Err(format!("{object}: a copy, not the claim's own strings"));
                }
            }
        }
        let claimed: usize = map.claims.values().flatten().map(|(_, s)| s.len()).sum();
        let empty = map
            .claims
            .values()
            .any(|n| n.is_empty() || n.values().any(|s| s.is_empty()));
        if claimed != objects || empty {
            return Err(format!(
                "{claimed} claims for {objects} held objects (empty entries: {empty})"
            ));
        }
        Ok((objects, map.claims.len()))
    }
}

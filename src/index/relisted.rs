//! A map fed by the model watch, relists included.

use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kube::runtime::watcher::Event;

use crate::crd::SemanticModel;

/// What a map keeps of each model.
pub trait ModelMap: Default {
    /// Records (or replaces) what `m` contributes.
    fn record(&mut self, m: &SemanticModel);
    /// Removes what `m` contributed.
    fn forget(&mut self, m: &SemanticModel);
}

/// A map the watch keeps current: during a relist a fresh one is built and swapped in at its
/// end, so a reader never sees a half-built map and objects deleted during a watch gap go.
#[derive(Default)]
pub struct Relisted<M> {
    live: RwLock<M>,
    rebuilding: Mutex<Option<M>>,
}

impl<M: ModelMap> Relisted<M> {
    /// A relist starts: what it lists builds a fresh map.
    pub fn begin_relist(&self) {
        *self.rebuilding.lock().expect("index poisoned") = Some(M::default());
    }

    /// A relist ends: the fresh map replaces the live one.
    pub fn end_relist(&self) {
        if let Some(fresh) = self.rebuilding.lock().expect("index poisoned").take() {
            *self.write() = fresh;
        }
    }

    /// Records an object listed during a relist (in the live map outside one).
    pub fn apply_listed(&self, m: &SemanticModel) {
        let mut rebuilding = self.rebuilding.lock().expect("index poisoned");
        match rebuilding.as_mut() {
            Some(fresh) => fresh.record(m),
            None => self.write().record(m),
        }
    }

    /// Records (or replaces) what `m` contributes.
    pub fn apply(&self, m: &SemanticModel) {
        self.write().record(m);
    }

    pub fn delete(&self, m: &SemanticModel) {
        self.write().forget(m);
    }

    /// Follows one event of the model watch.
    pub fn feed(&self, event: &Event<SemanticModel>) {
        match event {
            Event::Init => self.begin_relist(),
            Event::InitApply(m) => self.apply_listed(m),
            Event::InitDone => self.end_relist(),
            Event::Apply(m) => self.apply(m),
            Event::Delete(m) => self.delete(m),
        }
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, M> {
        self.live.read().expect("index poisoned")
    }

    fn write(&self) -> RwLockWriteGuard<'_, M> {
        self.live.write().expect("index poisoned")
    }
}

//! Cross-object triggers computed from raw watch events (deletes included), because the shared
//! reflector only forwards applies. Each mapping names exactly the objects whose status depends
//! on the changed one.

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;

use super::all_refs;
use crate::crd::{CATALOG_PROTECTION_FINALIZER, Catalog, ReconcilePolicy, SemanticModel};
use crate::ossie::SourceRef;
use crate::stores::Stores;

/// Senders into each controller's `reconcile_on` stream.
#[derive(Clone)]
pub struct Triggers {
    models: UnboundedSender<ObjectRef<SemanticModel>>,
    catalogs: UnboundedSender<ObjectRef<Catalog>>,
    policies: UnboundedSender<ObjectRef<ReconcilePolicy>>,
}

/// The receiving ends, one per controller.
pub struct TriggerReceivers {
    pub models: UnboundedReceiver<ObjectRef<SemanticModel>>,
    pub catalogs: UnboundedReceiver<ObjectRef<Catalog>>,
    pub policies: UnboundedReceiver<ObjectRef<ReconcilePolicy>>,
}

impl Triggers {
    pub fn new() -> (Self, TriggerReceivers) {
        let (m, mr) = unbounded();
        let (c, cr) = unbounded();
        let (p, pr) = unbounded();
        (
            Self {
                models: m,
                catalogs: c,
                policies: p,
            },
            TriggerReceivers {
                models: mr,
                catalogs: cr,
                policies: pr,
            },
        )
    }

    /// Requeues models from outside the watch taps (a check round fed their drift).
    pub fn requeue_models(&self, refs: impl IntoIterator<Item = ObjectRef<SemanticModel>>) {
        self.send_models(refs);
    }

    /// Requeues catalogs from outside the watch taps (a model bound sources in them).
    pub fn requeue_catalogs(&self, refs: impl IntoIterator<Item = ObjectRef<Catalog>>) {
        self.send_catalogs(refs);
    }

    fn send_models(&self, refs: impl IntoIterator<Item = ObjectRef<SemanticModel>>) {
        refs.into_iter()
            .for_each(|r| drop(self.models.unbounded_send(r)));
    }
    fn send_catalogs(&self, refs: impl IntoIterator<Item = ObjectRef<Catalog>>) {
        refs.into_iter()
            .for_each(|r| drop(self.catalogs.unbounded_send(r)));
    }
    fn send_policies(&self, refs: impl IntoIterator<Item = ObjectRef<ReconcilePolicy>>) {
        refs.into_iter()
            .for_each(|r| drop(self.policies.unbounded_send(r)));
    }

    /// A Catalog changed: the models that live in it or read from it, and every policy of its
    /// namespace (selection counts and overlaps depend on catalog labels).
    pub fn on_catalog(&self, event: &Event<Catalog>, stores: &Stores) {
        match event {
            Event::Apply(cat) | Event::Delete(cat) => {
                let ns = cat.namespace().unwrap_or_default();
                let name = cat.name_any();
                self.send_models(
                    stores
                        .models_in(&ns)
                        .iter()
                        .filter(|m| model_uses_catalog(m, &name))
                        .map(|m| ObjectRef::from_obj(m.as_ref())),
                );
                self.send_policies(
                    stores
                        .policies_in(&ns)
                        .iter()
                        .map(|p| ObjectRef::from_obj(p.as_ref())),
                );
            }
            Event::InitDone => {
                self.send_models(all_refs(&stores.models));
                self.send_policies(all_refs(&stores.policies));
            }
            Event::Init | Event::InitApply(_) => {}
        }
    }

    /// A policy changed: every Catalog and policy of its namespace may resolve differently.
    pub fn on_policy(&self, event: &Event<ReconcilePolicy>, stores: &Stores) {
        match event {
            Event::Apply(p) | Event::Delete(p) => {
                let ns = p.namespace().unwrap_or_default();
                self.send_catalogs(
                    stores
                        .catalogs_in(&ns)
                        .iter()
                        .map(|c| ObjectRef::from_obj(c.as_ref())),
                );
                self.send_policies(
                    stores
                        .policies_in(&ns)
                        .iter()
                        .map(|o| ObjectRef::from_obj(o.as_ref())),
                );
            }
            Event::InitDone => {
                self.send_catalogs(all_refs(&stores.catalogs));
                self.send_policies(all_refs(&stores.policies));
            }
            Event::Init | Event::InitApply(_) => {}
        }
    }

    /// A model changed or went away: models claiming its current or previous name may win now.
    pub fn on_model(&self, event: &Event<SemanticModel>, stores: &Stores) {
        let (Event::Apply(m) | Event::Delete(m)) = event else {
            return;
        };
        let ns = m.namespace().unwrap_or_default();
        // The home Catalog's protection finalizer can only change when a model goes away or
        // when it is missing; other model updates must not cost the Catalog a reconcile
        // (each one re-reads its Secret and checks the connection).
        let home = ObjectRef::new(&m.spec.catalog).within(&ns);
        let finalizer_missing = stores.catalogs.get(&home).is_some_and(|c| {
            !c.finalizers()
                .iter()
                .any(|f| f == CATALOG_PROTECTION_FINALIZER)
        });
        if matches!(event, Event::Delete(_)) || finalizer_missing {
            self.send_catalogs([home]);
        }
        let names: Vec<&str> = [
            Some(m.model_name()),
            m.status.as_ref().and_then(|s| s.model_name.as_deref()),
        ]
        .into_iter()
        .flatten()
        .collect();
        let uid = m.uid();
        self.send_models(
            stores
                .models_claiming(&ns, &m.spec.catalog, &m.spec.schema, &names)
                .iter()
                .filter(|o| o.uid() != uid)
                .map(|o| ObjectRef::from_obj(o.as_ref())),
        );
    }
}

/// Whether `model` lives in, or reads a source from, the Catalog named `catalog`.
pub fn model_uses_catalog(model: &SemanticModel, catalog: &str) -> bool {
    model.spec.catalog == catalog
        || model
            .spec
            .definition
            .datasets
            .iter()
            .any(|d| SourceRef::parse(&d.source).is_ok_and(|s| s.catalog == catalog))
}

#[cfg(test)]
#[path = "triggers_tests.rs"]
mod tests;

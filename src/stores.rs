//! The three shared watch caches (one reflector store per kind), read by the controllers and
//! the read API alike, so 10,000 models are held once.

use std::sync::Arc;

use kube::api::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::crd::{Catalog, ReconcilePolicy, SemanticModel};
use crate::index::claims::ClaimIndex;

/// The annotation `kubectl apply` (and Argo CD's client-side apply) writes: the whole applied
/// object again, as JSON text.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What the caches drop from each object on the way in: managedFields and the last-applied copy
/// are a large share of an applied object, nothing here reads them, and status writes (PUT to
/// the status subresource) ignore metadata, so no write can lose them.
pub fn slim_for_cache(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// Re-allocates a decoded object at its exact size. serde grows each list it decodes by
/// doubling (JSON gives no length up front), so a freshly decoded model keeps ~40% of its heap
/// as spare capacity (`cargo bench --bench memory`); a clone allocates every `Vec` and `String`
/// at its length. One clone per watch event is cheap beside the decode that preceded it.
pub fn compact<K: Clone>(object: &mut K) {
    *object = object.clone();
}

/// Whether `m` lives in `ns` and claims one of `names` in `catalog`.`schema`.
fn claims_one_of(m: &SemanticModel, ns: &str, catalog: &str, schema: &str, names: &[&str]) -> bool {
    m.spec.catalog == catalog
        && m.spec.schema == schema
        && names.contains(&m.model_name())
        && m.metadata.namespace.as_deref() == Some(ns)
}

#[derive(Clone)]
pub struct Stores {
    pub models: Store<SemanticModel>,
    pub catalogs: Store<Catalog>,
    pub policies: Store<ReconcilePolicy>,
    /// Who claims each model name, fed by the same model watch (after the store has the event).
    pub claims: Arc<ClaimIndex>,
}

impl Stores {
    pub fn models_in(&self, ns: &str) -> Vec<Arc<SemanticModel>> {
        self.models
            .state_filter(|m| m.metadata.namespace.as_deref() == Some(ns))
    }
    /// The models of `ns` that claim one of `names` in `catalog`.`schema`: looked up in the
    /// claim index, then re-checked against the cached objects (every model event and reconcile
    /// asks this; a pass over the cache each time made a cold start quadratic in the model count).
    /// The index learns of an event just after the store: a claim it has not seen yet is met by
    /// the requeue the same event's trigger sends to every claimant once it has.
    pub fn models_claiming(
        &self,
        ns: &str,
        catalog: &str,
        schema: &str,
        names: &[&str],
    ) -> Vec<Arc<SemanticModel>> {
        self.claims
            .claimants(ns, catalog, schema, names)
            .iter()
            .filter_map(|o| self.models.get(&ObjectRef::new(o).within(ns)))
            .filter(|m| claims_one_of(m, ns, catalog, schema, names))
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt;

    fn meta(annotations: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            annotations: (!annotations.is_empty()).then(|| {
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            managed_fields: Some(vec![Default::default()]),
            ..Default::default()
        }
    }

    #[derive(Clone, Debug)]
    enum Step {
        /// Object `o{0}` in namespace `ns{1}`, schema `s{2}`, named `n{3}` (or after the object).
        Apply(usize, usize, usize, Option<usize>),
        Delete(usize, usize),
        /// A watch gap: the object changed and the other deleted are seen only by the relist.
        Relist(
            Option<(usize, usize, usize, Option<usize>)>,
            Option<(usize, usize)>,
        ),
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            5 => (0..5usize, 0..2usize, 0..2usize, prop::option::of(0..3usize))
                .prop_map(|(o, ns, s, n)| Step::Apply(o, ns, s, n)),
            2 => (0..5usize, 0..2usize).prop_map(|(o, ns)| Step::Delete(o, ns)),
            1 => (
                prop::option::of((0..5usize, 0..2usize, 0..2usize, prop::option::of(0..3usize))),
                prop::option::of((0..5usize, 0..2usize)),
            )
                .prop_map(|(changed, deleted)| Step::Relist(changed, deleted)),
        ]
    }

    fn claimant(o: usize, ns: usize, schema: usize, name: Option<usize>) -> SemanticModel {
        let mut spec: crate::crd::SemanticModelSpec = serde_json::from_value(serde_json::json!({
            "catalog": "c", "schema": format!("s{schema}"),
            "definition": {"datasets": [{"name": "d", "source": "c.s.t"}]}
        }))
        .unwrap();
        spec.name = name.map(|n| format!("n{n}").into());
        let mut m = SemanticModel::new(&format!("o{o}"), spec);
        m.metadata.namespace = Some(format!("ns{ns}"));
        m
    }

    proptest::proptest! {
        /// Whatever order of applies (renames, moves between schemas), deletes and relists,
        /// the claim index answers what one pass over the cache answers.
        #[test]
        fn name_claims_from_the_index_equal_a_pass_over_the_cache(steps in proptest::collection::vec(step(), 1..40)) {
            use kube::runtime::reflector;
            use kube::runtime::watcher::Event;
            let (models, mut writer) = reflector::store::<SemanticModel>();
            let stores = Stores {
                models: models.clone(),
                catalogs: reflector::store().0,
                policies: reflector::store().0,
                claims: Default::default(),
            };
            let mut live: std::collections::BTreeMap<(usize, usize), SemanticModel> = Default::default();
            for s in &steps {
                let events = match s {
                    Step::Apply(o, ns, schema, name) => {
                        let m = claimant(*o, *ns, *schema, *name);
                        live.insert((*o, *ns), m.clone());
                        vec![Event::Apply(m)]
                    }
                    Step::Delete(o, ns) => live.remove(&(*o, *ns)).map(Event::Delete).into_iter().collect(),
                    Step::Relist(changed, deleted) => {
                        if let Some((o, ns, schema, name)) = *changed {
                            live.insert((o, ns), claimant(o, ns, schema, name));
                        }
                        if let Some(gone) = deleted {
                            live.remove(gone);
                        }
                        std::iter::once(Event::Init)
                            .chain(live.values().cloned().map(Event::InitApply))
                            .chain([Event::InitDone])
                            .collect()
                    }
                };
                for e in events {
                    writer.apply_watcher_event(&e);
                    stores.claims.feed(&e);
                }
                // Exactly the live models, each claim's strings held once, nothing emptied left.
                let scopes: std::collections::BTreeSet<(String, String)> = live
                    .values()
                    .map(|m| (m.namespace().unwrap_or_default(), m.spec.schema.to_string()))
                    .collect();
                proptest::prop_assert_eq!(stores.claims.held(), Ok((live.len(), scopes.len())));
                for ns in ["ns0", "ns1"] {
                    for schema in ["s0", "s1"] {
                        for names in [&["n0"][..], &["n1", "o2"], &["o0", "o1", "n2"], &["o3", "o4"]] {
                            let mut got: Vec<String> = stores
                                .models_claiming(ns, "c", schema, names)
                                .iter()
                                .map(|m| m.name_any())
                                .collect();
                            got.sort();
                            let mut want: Vec<String> = models
                                .state_filter(|m| claims_one_of(m, ns, "c", schema, names))
                                .iter()
                                .map(|m| m.name_any())
                                .collect();
                            want.sort();
                            proptest::prop_assert_eq!(got, want, "{} {} {:?}", ns, schema, names);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn compacting_a_decoded_model_drops_spare_capacity_and_changes_nothing_else() {
        // Lists of 1..=9 items: serde's doubling leaves spare room for most lengths.
        for n in 1..=9usize {
            let metrics: Vec<_> = (0..n)
                .map(|k| serde_json::json!({"name": format!("m{k}"), "expression": {"dialects": [{"dialect": "ANSI_SQL", "expression": "SUM(x)"}]}}))
                .collect();
            let text = serde_json::json!({
                "metadata": {"name": "orders", "namespace": "team-a"},
                "spec": {"catalog": "c", "schema": "s", "definition": {
                    "datasets": [{"name": "d", "source": "c.s.t"}], "metrics": metrics}},
                "status": {"conditions": [], "metrics": (0..n).map(|k| serde_json::json!({"name": format!("m{k}"), "id": format!("id-{k}")})).collect::<Vec<_>>()}
            })
            .to_string();
            let decoded: SemanticModel = serde_json::from_str(&text).unwrap();
            let mut compacted = decoded.clone();
            compact(&mut compacted);
            assert_eq!(compacted, decoded, "n={n}");
            let spec_metrics = compacted.spec.definition.metrics.as_ref().unwrap();
            let status_metrics = &compacted.status.as_ref().unwrap().metrics;
            assert_eq!(spec_metrics.capacity(), n, "n={n}");
            assert_eq!(status_metrics.capacity(), n, "n={n}");
        }
        // And decoding alone does leave spare room (else this test proves nothing).
        let text = r#"{"metadata":{"name":"o"},"spec":{"catalog":"c","schema":"s","definition":{"datasets":[{"name":"a","source":"c.s.a"},{"name":"b","source":"c.s.b"},{"name":"c","source":"c.s.c"},{"name":"d","source":"c.s.d"},{"name":"e","source":"c.s.e"}]}}}"#;
        let decoded: SemanticModel = serde_json::from_str(text).unwrap();
        assert!(decoded.spec.definition.datasets.capacity() > 5);
    }

    #[test]
    fn the_cache_drops_managed_fields_and_the_last_applied_copy_and_keeps_other_annotations() {
        let check = "semops.io/check-now";
        let cases = [
            (meta(&[]), meta(&[])),
            (meta(&[(LAST_APPLIED, "{\"spec\":{}}")]), meta(&[])),
            (
                meta(&[(LAST_APPLIED, "{}"), (check, "1")]),
                meta(&[(check, "1")]),
            ),
            (meta(&[(check, "1")]), meta(&[(check, "1")])),
        ];
        for (i, (mut got, mut want)) in cases.into_iter().enumerate() {
            slim_for_cache(&mut got);
            want.managed_fields = None;
            assert_eq!(got, want, "case {i}");
        }
    }
}

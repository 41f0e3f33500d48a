//! The three shared watch caches (one reflector store per kind), read by the controllers and
//! the read API alike, so 10,000 models are held once.

use std::sync::Arc;

use kube::api::ObjectMeta;
use kube::runtime::reflector::Store;

use crate::crd::{Catalog, ReconcilePolicy, SemanticModel};

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

#[cfg(test)]
mod tests {
    use super::*;

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

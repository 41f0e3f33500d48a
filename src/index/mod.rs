//! Synchronous indexes over the model cache, fed by the model watch (applies and deletes):
//! source (namespace, catalog, type, native id) -> datasets, and home (namespace, catalog,
//! schema) -> models, all and by model name. They hold keys only; the models themselves stay
//! in the reflector store, and every hit is re-checked against the cached object when read.

pub mod claims;
mod relisted;
pub mod revisions;
pub mod small_set;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use smol_str::SmolStr;

use small_set::{SmallSet, TieredSet};

use crate::crd::SemanticModel;
use crate::crd::conditions::{self, ConditionType, Reason};

/// Key of a bound source.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceKey {
    pub namespace: String,
    pub catalog: String,
    pub object_type: String,
    pub id: String,
}

/// Key of a home schema.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HomeKey {
    pub namespace: String,
    pub catalog: String,
    pub schema: String,
}

type ModelRef = ObjectRef<SemanticModel>;

/// Each distinct key and model name is allocated once and shared (`Arc`) by every entry that
/// holds it: at 10,000 models with five bindings each, copies made the index ~1.7 KiB per model
/// (`cargo bench --bench memory`).
#[derive(Default)]
pub struct Inner {
    by_source: HashMap<Arc<SourceKey>, TieredSet<(Arc<str>, SmolStr)>>, // (model object name, dataset)
    by_home: HashMap<Arc<HomeKey>, HomeModels>,
    /// What each model contributed, so an update or delete removes exactly that; by namespace,
    /// then model object name, so a namespace is held once, not once per model.
    contributed: HashMap<Arc<str>, HashMap<Arc<str>, Contribution>>,
}

/// The models of one home schema: all of them, and by model name (a single-model read must not
/// walk a schema of 10,000 models to find one).
#[derive(Default)]
struct HomeModels {
    objects: BTreeSet<Arc<str>>,                    // model object names
    by_name: HashMap<Arc<str>, SmallSet<Arc<str>>>, // model name -> object names claiming it
}

/// The source keys, and the home with the model name (the copy `by_name` holds), one model
/// added.
type Contribution = (Box<[Arc<SourceKey>]>, Option<(Arc<HomeKey>, Arc<str>)>);

/// The shared copy of `key` held by `map`, or a new one.
fn interned<K: Eq + std::hash::Hash, V>(map: &HashMap<Arc<K>, V>, key: K) -> Arc<K> {
    map.get_key_value(&key)
        .map(|(k, _)| k.clone())
        .unwrap_or_else(|| Arc::new(key))
}

/// The copy of the text `s` that `map` holds as a key, if any.
fn held_str<V>(map: &HashMap<Arc<str>, V>, s: &str) -> Option<Arc<str>> {
    map.get_key_value(s).map(|(k, _)| k.clone())
}

/// The read API's indexes.
#[derive(Default)]
pub struct ModelIndex {
    maps: relisted::Relisted<Inner>,
}

/// Whether a model is served by any API: it has an accepted revision and does not lose a name
/// conflict (docs/design.md#name-conflicts-and-home).
pub fn is_visible(m: &SemanticModel) -> bool {
    let Some(status) = &m.status else {
        return false;
    };
    status.revision.is_some()
        && conditions::find(&status.conditions, ConditionType::Ready)
            .is_none_or(|c| c.reason != Reason::NAME_CONFLICT.as_str())
}

/// Feeding (`apply`, `delete`, relists) is the shared [`relisted::Relisted`]'s.
impl std::ops::Deref for ModelIndex {
    type Target = relisted::Relisted<Inner>;
    fn deref(&self) -> &Self::Target {
        &self.maps
    }
}

impl relisted::ModelMap for Inner {
    fn record(&mut self, m: &SemanticModel) {
        self.apply(m);
    }
    fn forget(&mut self, m: &SemanticModel) {
        self.remove(&m.namespace().unwrap_or_default(), &m.name_any());
    }
}

impl Inner {
    fn apply(&mut self, m: &SemanticModel) {
        let ns = m.namespace().unwrap_or_default();
        let name: Arc<str> = Arc::from(m.name_any());
        let inner = self;
        inner.remove(&ns, &name);
        if !is_visible(m) {
            return;
        }
        let status = m.status.as_ref().expect("visible models have status");
        let mut sources = Vec::with_capacity(status.source_associations.len());
        for a in &status.source_associations {
            let key = interned(
                &inner.by_source,
                SourceKey {
                    namespace: ns.clone(),
                    catalog: a.source.catalog.to_string(),
                    object_type: a.object_type.to_string(),
                    id: a.id.clone(),
                },
            );
            inner
                .by_source
                .entry(key.clone())
                .or_default()
                .insert((name.clone(), a.dataset.clone()));
            sources.push(key);
        }
        let home = interned(
            &inner.by_home,
            HomeKey {
                namespace: ns.clone(),
                catalog: m.spec.catalog.to_string(),
                schema: m.spec.schema.to_string(),
            },
        );
        let home_models = inner.by_home.entry(home.clone()).or_default();
        home_models.objects.insert(name.clone());
        // The model name is usually the object name: then one copy serves both.
        let model_name = held_str(&home_models.by_name, m.model_name()).unwrap_or_else(|| {
            if *name == *m.model_name() {
                name.clone()
            } else {
                Arc::from(m.model_name())
            }
        });
        home_models
            .by_name
            .entry(model_name.clone())
            .or_default()
            .insert(name.clone());
        let namespace = held_str(&inner.contributed, &ns).unwrap_or_else(|| Arc::from(ns.as_str()));
        inner
            .contributed
            .entry(namespace)
            .or_default()
            .insert(name, (sources.into_boxed_slice(), Some((home, model_name))));
    }
}

impl ModelIndex {
    /// (model, dataset) pairs bound to a source.
    pub fn datasets_of(&self, key: &SourceKey) -> Vec<(ModelRef, String)> {
        let inner = self.maps.read();
        inner
            .by_source
            .get(key)
            .map(|set| {
                set.iter()
                    .map(|(m, d)| (ObjectRef::new(m).within(&key.namespace), d.to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Models whose home is the schema.
    pub fn models_in(&self, key: &HomeKey) -> Vec<ModelRef> {
        let inner = self.maps.read();
        inner
            .by_home
            .get(key)
            .map(|home| {
                home.objects
                    .iter()
                    .map(|m| ObjectRef::new(m).within(&key.namespace))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Models whose home is the schema and whose model name is `name` (more than one only
    /// while a name conflict lasts).
    pub fn models_named(&self, key: &HomeKey, name: &str) -> Vec<ModelRef> {
        let inner = self.maps.read();
        inner
            .by_home
            .get(key)
            .and_then(|home| home.by_name.get(name))
            .map(|set| {
                set.iter()
                    .map(|m| ObjectRef::new(m).within(&key.namespace))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Entries held, for the index-size metric.
    pub fn sizes(&self) -> (usize, usize) {
        let inner = self.maps.read();
        (
            inner.by_source.values().map(TieredSet::len).sum(),
            inner.by_home.values().map(|h| h.objects.len()).sum(),
        )
    }
}

impl Inner {
    fn remove(&mut self, ns: &str, name: &str) {
        let Some(models) = self.contributed.get_mut(ns) else {
            return;
        };
        let Some((sources, home)) = models.remove(name) else {
            return;
        };
        if models.is_empty() {
            self.contributed.remove(ns);
        }
        for key in sources {
            if let Some(set) = self.by_source.get_mut(&key) {
                set.retain(|(m, _)| &**m != name);
                if set.is_empty() {
                    self.by_source.remove(&*key);
                }
            }
        }
        if let Some((key, model_name)) = home
            && let Some(home_models) = self.by_home.get_mut(&key)
        {
            home_models.objects.remove(name);
            if let Some(set) = home_models.by_name.get_mut(&*model_name) {
                set.remove(name);
                if set.is_empty() {
                    home_models.by_name.remove(&*model_name);
                }
            }
            if home_models.objects.is_empty() {
                self.by_home.remove(&*key);
            }
        }
    }
}

/// Orders strings by UTF-16 code units (Java `String.compareTo`), not by bytes: a surrogate pair
/// (U+10000 and up) sorts before U+E000..U+FFFF, where UTF-8 byte order says the opposite.
pub fn cmp_utf16(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Orders by each component in turn, each by UTF-16 code units.
pub fn cmp_utf16_all(a: &[&str], b: &[&str]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = cmp_utf16(x, y);
        if o.is_ne() {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::SemanticModelStatus;
    use crate::crd::semantic_model::{SourceAssociation, SourceName};
    use std::cmp::Ordering;

    #[test]
    fn utf16_order_differs_from_byte_order_where_java_says_so() {
        let astral = "\u{10000}"; // surrogate pair D800 DC00
        let private = "\u{E000}";
        assert_eq!(astral.cmp(private), Ordering::Greater, "bytes: F0.. > EE..");
        assert_eq!(
            cmp_utf16(astral, private),
            Ordering::Less,
            "UTF-16: D800 < E000"
        );
        assert_eq!(cmp_utf16("a", "b"), Ordering::Less);
        assert_eq!(
            cmp_utf16("B", "a"),
            Ordering::Less,
            "case-sensitive, uppercase first"
        );
        assert_eq!(
            cmp_utf16_all(&["x", astral], &["x", private]),
            Ordering::Less
        );
    }

    fn model(name: &str, revision: Option<i64>, assocs: &[(&str, &str)]) -> SemanticModel {
        let spec = serde_json::from_value(serde_json::json!({"catalog": "analytics", "schema": "semantic", "definition": {"datasets": [{"name": "d", "source": "hr.public.t"}]}})).unwrap();
        let mut m = SemanticModel::new(name, spec);
        m.metadata.namespace = Some("ns".into());
        m.status = Some(SemanticModelStatus {
            revision,
            source_associations: assocs
                .iter()
                .map(|(dataset, id)| SourceAssociation {
                    dataset: (*dataset).into(),
                    source: SourceName {
                        catalog: "hr".into(),
                        schema: "public".into(),
                        name: "t".into(),
                    },
                    object_type: "TABLE".into(),
                    id: id.to_string(),
                    revision: 1,
                    columns: vec![],
                })
                .collect(),
            ..Default::default()
        });
        m
    }

    /// Served: an accepted revision, unless `Ready` says it lost a name conflict (a later
    /// failure of another kind keeps the accepted revision served).
    #[test]
    fn a_model_is_visible_with_an_accepted_revision_unless_it_lost_a_name_conflict() {
        use crate::crd::conditions::{Desired, Status, merge};
        let ready = |status, reason: Reason| {
            merge(
                &[],
                vec![Desired::new(ConditionType::Ready, status, reason, "")],
                None,
                &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
            )
        };
        let cases = [
            (None, vec![], false),
            (Some(2), vec![], true),
            (Some(2), ready(Status::True, Reason::ACCEPTED), true),
            (
                Some(2),
                ready(Status::False, Reason::SOURCE_NOT_FOUND),
                true,
            ),
            (Some(2), ready(Status::False, Reason::NAME_CONFLICT), false),
            (None, ready(Status::False, Reason::INVALID_SOURCE), false),
        ];
        for (revision, conditions, visible) in cases {
            let mut m = model("m", revision, &[]);
            m.status.as_mut().unwrap().conditions = conditions.clone();
            assert_eq!(is_visible(&m), visible, "{revision:?} {conditions:?}");
        }
        let mut no_status = model("m", Some(2), &[]);
        no_status.status = None;
        assert!(!is_visible(&no_status));
    }

    fn key(id: &str) -> SourceKey {
        SourceKey {
            namespace: "ns".into(),
            catalog: "hr".into(),
            object_type: "TABLE".into(),
            id: id.into(),
        }
    }

    #[test]
    fn apply_replace_and_delete_keep_the_index_exact() {
        let idx = ModelIndex::default();
        idx.apply(&model(
            "a",
            Some(1),
            &[("employee", "id1"), ("manager", "id1")],
        ));
        idx.apply(&model("b", Some(1), &[("x", "id2")]));
        idx.apply(&model("unaccepted", None, &[("y", "id1")]));
        let names = |k: &SourceKey| {
            idx.datasets_of(k)
                .into_iter()
                .map(|(r, d)| format!("{}/{d}", r.name))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&key("id1")), vec!["a/employee", "a/manager"]);
        // Entries: (a, employee) and (a, manager) on id1, (b, x) on id2; homes: a and b.
        assert_eq!(idx.sizes(), (3, 2));

        // A replaced association set replaces the model's entries entirely.
        idx.apply(&model("a", Some(2), &[("employee", "id3")]));
        assert_eq!(names(&key("id1")), Vec::<String>::new());
        assert_eq!(names(&key("id3")), vec!["a/employee"]);

        idx.delete(&model("a", Some(2), &[]));
        // A relist drops what was not listed again.
        idx.begin_relist();
        idx.apply_listed(&model("b", Some(1), &[("x", "id2")]));
        assert_eq!(
            names(&key("id2")),
            vec!["b/x"],
            "readers keep the old index during a relist"
        );
        idx.end_relist();
        assert_eq!(names(&key("id3")), Vec::<String>::new());
        let home = HomeKey {
            namespace: "ns".into(),
            catalog: "analytics".into(),
            schema: "semantic".into(),
        };
        assert_eq!(
            idx.models_in(&home)
                .into_iter()
                .map(|r| r.name)
                .collect::<Vec<_>>(),
            vec!["b"]
        );
        assert_eq!(idx.sizes(), (1, 1));
    }

    type Snapshot = (
        Vec<(SourceKey, Vec<(String, String)>)>,
        Vec<(HomeKey, Vec<String>, Vec<(String, Vec<String>)>)>,
        Vec<(String, String)>,
    );

    /// The index's content as plain values, sorted; checks on the way that every key a model
    /// contributed is the very copy the maps hold (interned, not duplicated).
    fn snapshot(idx: &ModelIndex) -> Snapshot {
        let inner = idx.maps.read();
        for (sources, home) in inner.contributed.values().flat_map(HashMap::values) {
            for s in sources {
                let (held, _) = inner
                    .by_source
                    .get_key_value(&**s)
                    .expect("contributed key indexed");
                assert!(Arc::ptr_eq(held, s), "a source key was copied, not shared");
            }
            if let Some((h, model_name)) = home {
                let (held, home_models) = inner.by_home.get_key_value(&**h).expect("home indexed");
                assert!(Arc::ptr_eq(held, h), "a home key was copied, not shared");
                let (held, _) = home_models
                    .by_name
                    .get_key_value(&**model_name)
                    .expect("model name indexed");
                assert!(
                    Arc::ptr_eq(held, model_name),
                    "a model name was copied, not shared"
                );
            }
        }
        let mut by_source: Vec<_> = inner
            .by_source
            .iter()
            .map(|(k, set)| {
                let entries = set
                    .iter()
                    .map(|(m, d)| (m.to_string(), d.to_string()))
                    .collect();
                ((**k).clone(), entries)
            })
            .collect();
        by_source.sort();
        let mut by_home: Vec<_> = inner
            .by_home
            .iter()
            .map(|(k, home)| {
                let mut by_name: Vec<(String, Vec<String>)> = home
                    .by_name
                    .iter()
                    .map(|(n, set)| (n.to_string(), set.iter().map(|m| m.to_string()).collect()))
                    .collect();
                by_name.sort();
                let objects = home.objects.iter().map(|m| m.to_string()).collect();
                ((**k).clone(), objects, by_name)
            })
            .collect();
        by_home.sort();
        let mut contributed: Vec<_> = inner
            .contributed
            .iter()
            .flat_map(|(ns, models)| {
                assert!(!models.is_empty(), "a namespace without models is dropped");
                models.keys().map(|m| (ns.to_string(), m.to_string()))
            })
            .collect();
        contributed.sort();
        (by_source, by_home, contributed)
    }

    #[derive(Clone, Debug)]
    enum Step {
        Apply(usize, Option<usize>, Option<i64>, Vec<(usize, usize)>),
        Delete(usize),
        /// A watch gap: this model deleted is seen only by the relist.
        Relist(Option<usize>),
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..4usize, prop::option::of(0..2usize), prop::option::of(1..3i64), prop::collection::vec((0..3usize, 0..4usize), 0..4))
                .prop_map(|(m, n, r, a)| Step::Apply(m, n, r, a)),
            2 => (0..4usize).prop_map(Step::Delete),
            1 => prop::option::of(0..4usize).prop_map(Step::Relist),
        ]
    }

    /// Model object `m{m}`, named `n{name}` in its schema (or after the object when `None`).
    fn stepped_model(
        m: usize,
        name: Option<usize>,
        revision: Option<i64>,
        assocs: &[(usize, usize)],
    ) -> SemanticModel {
        let assocs: Vec<(String, String)> = assocs
            .iter()
            .map(|(d, id)| (format!("d{d}"), format!("id{id}")))
            .collect();
        let refs: Vec<(&str, &str)> = assocs
            .iter()
            .map(|(d, i)| (d.as_str(), i.as_str()))
            .collect();
        let mut model = model(&format!("m{m}"), revision, &refs);
        model.spec.name = name.map(|n| format!("n{n}").into());
        model
    }

    proptest::proptest! {
        /// Whatever order of applies, deletes and relists, the index holds exactly what a fresh
        /// index of the surviving models holds, with every key shared.
        #[test]
        fn the_index_equals_a_fresh_one_of_the_surviving_models(steps in proptest::collection::vec(step(), 1..40)) {
            let idx = ModelIndex::default();
            let mut live: std::collections::BTreeMap<usize, SemanticModel> = Default::default();
            for s in &steps {
                match s {
                    Step::Apply(m, n, r, a) => {
                        let model = stepped_model(*m, *n, *r, a);
                        idx.apply(&model);
                        live.insert(*m, model);
                    }
                    Step::Delete(m) => {
                        if let Some(model) = live.remove(m) {
                            idx.delete(&model);
                        }
                    }
                    Step::Relist(deleted) => {
                        if let Some(gone) = deleted {
                            live.remove(gone);
                        }
                        idx.begin_relist();
                        for model in live.values() {
                            idx.apply_listed(model);
                        }
                        idx.end_relist();
                    }
                }
                let fresh = ModelIndex::default();
                for model in live.values() {
                    fresh.apply(model);
                }
                proptest::prop_assert_eq!(snapshot(&idx), snapshot(&fresh));
                let home = HomeKey {
                    namespace: "ns".into(),
                    catalog: "analytics".into(),
                    schema: "semantic".into(),
                };
                for name in ["n0", "n1", "m0", "m1", "m2", "m3"] {
                    let found: Vec<String> =
                        idx.models_named(&home, name).into_iter().map(|r| r.name).collect();
                    let want: Vec<String> = live
                        .values()
                        .filter(|m| is_visible(m) && m.model_name() == name)
                        .map(|m| m.name_any())
                        .collect();
                    proptest::prop_assert_eq!(found, want, "models named {}", name);
                }
            }
        }
    }
}

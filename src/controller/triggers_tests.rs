//! Each watch event requeues exactly the objects whose status depends on it, read from real
//! reflector stores: namespace `a` holds the catalogs `pg` (protected) and `lake` (its
//! protection finalizer not yet written), the policies `p1` and `p2`, and four models; namespace
//! `b` repeats `pg`, a model `orders` and a policy, none of which an event in `a` may reach.

use std::collections::BTreeSet;

use kube::runtime::reflector;
use kube::runtime::watcher::Event;

use super::*;
use crate::crd::{Catalog, ReconcilePolicy, SemanticModel};

fn catalog(ns: &str, name: &str, protected: bool) -> Catalog {
    let mut c = Catalog::new(
        name,
        serde_json::from_value(serde_json::json!({"provider": "managed"})).unwrap(),
    );
    c.metadata.namespace = Some(ns.into());
    c.metadata.finalizers = protected.then(|| vec![CATALOG_PROTECTION_FINALIZER.to_string()]);
    c
}

fn policy(ns: &str, name: &str) -> ReconcilePolicy {
    let mut p = ReconcilePolicy::new(name, serde_json::from_str("{}").unwrap());
    p.metadata.namespace = Some(ns.into());
    p
}

/// Object `object` in `ns`, home `home`.s, named `name` (else after the object), reading
/// `sources`.
fn model(
    ns: &str,
    object: &str,
    home: &str,
    name: Option<&str>,
    sources: &[&str],
) -> SemanticModel {
    let datasets: Vec<_> = sources
        .iter()
        .enumerate()
        .map(|(i, s)| serde_json::json!({"name": format!("d{i}"), "source": s}))
        .collect();
    let mut spec: crate::crd::SemanticModelSpec = serde_json::from_value(serde_json::json!({
        "catalog": home, "schema": "s", "definition": {"datasets": datasets}
    }))
    .unwrap();
    spec.name = name.map(Into::into);
    let mut m = SemanticModel::new(object, spec);
    m.metadata.namespace = Some(ns.into());
    m.metadata.uid = Some(format!("uid-{ns}-{object}"));
    m
}

/// `m` with `name` as the model name its status last recorded.
fn was_named(mut m: SemanticModel, name: &str) -> SemanticModel {
    m.status = Some(crate::crd::SemanticModelStatus {
        model_name: Some(name.into()),
        ..Default::default()
    });
    m
}

struct World {
    stores: Stores,
    models: Vec<SemanticModel>,
}

fn world() -> World {
    let (models_store, mut models_writer) = reflector::store::<SemanticModel>();
    let (catalogs, mut catalogs_writer) = reflector::store::<Catalog>();
    let (policies, mut policies_writer) = reflector::store::<ReconcilePolicy>();
    let stores = Stores {
        models: models_store,
        catalogs,
        policies,
        claims: Default::default(),
    };
    let models = vec![
        model("a", "orders", "pg", None, &["pg.public.orders"]),
        // Claims the name `orders` too (a name conflict with the model above).
        model(
            "a",
            "orders-v2",
            "pg",
            Some("orders"),
            &["pg.public.orders"],
        ),
        // Lives in lake, reads pg.
        model("a", "reader", "lake", None, &["lake.s.t", "pg.public.x"]),
        // Lives in lake and reads only lake (an unparsable source reads nothing).
        model("a", "other", "lake", None, &["lake.s.t", "not a source"]),
        // Its status still records its previous name, `legacy`.
        was_named(
            model("a", "renamed", "pg", Some("legacy"), &["pg.public.y"]),
            "legacy",
        ),
        model("b", "orders", "pg", None, &["pg.public.orders"]),
    ];
    for m in &models {
        models_writer.apply_watcher_event(&Event::Apply(m.clone()));
        stores.claims.feed(&Event::Apply(m.clone()));
    }
    for c in [
        catalog("a", "pg", true),
        catalog("a", "lake", false),
        catalog("b", "pg", true),
    ] {
        catalogs_writer.apply_watcher_event(&Event::Apply(c));
    }
    for p in [policy("a", "p1"), policy("a", "p2"), policy("b", "q")] {
        policies_writer.apply_watcher_event(&Event::Apply(p));
    }
    World { stores, models }
}

/// What one call sent, as `ns/name` per kind, each set sorted.
#[derive(Debug, PartialEq, Default)]
struct Sent {
    models: BTreeSet<String>,
    catalogs: BTreeSet<String>,
    policies: BTreeSet<String>,
}

fn names<K: kube::Resource>(rx: &mut UnboundedReceiver<ObjectRef<K>>) -> BTreeSet<String>
where
    K::DynamicType: Default,
{
    std::iter::from_fn(|| rx.try_recv().ok())
        .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name))
        .collect()
}

fn sent(call: impl FnOnce(&Triggers, &World)) -> Sent {
    let world = world();
    let (triggers, mut rx) = Triggers::new();
    call(&triggers, &world);
    Sent {
        models: names(&mut rx.models),
        catalogs: names(&mut rx.catalogs),
        policies: names(&mut rx.policies),
    }
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn the(world: &World, ns: &str, object: &str) -> SemanticModel {
    world
        .models
        .iter()
        .find(|m| {
            m.metadata.namespace.as_deref() == Some(ns)
                && m.metadata.name.as_deref() == Some(object)
        })
        .unwrap()
        .clone()
}

const EVERY_MODEL: [&str; 6] = [
    "a/orders",
    "a/orders-v2",
    "a/other",
    "a/reader",
    "a/renamed",
    "b/orders",
];

#[test]
fn a_catalog_event_requeues_the_models_that_use_it_and_its_namespaces_policies() {
    for event in [
        Event::Apply(catalog("a", "pg", true)),
        Event::Delete(catalog("a", "pg", true)),
    ] {
        assert_eq!(
            sent(|t, w| t.on_catalog(&event, &w.stores)),
            Sent {
                models: set(&["a/orders", "a/orders-v2", "a/reader", "a/renamed"]),
                catalogs: set(&[]),
                policies: set(&["a/p1", "a/p2"]),
            }
        );
    }
    assert_eq!(
        sent(|t, w| t.on_catalog(&Event::Apply(catalog("a", "lake", false)), &w.stores)).models,
        set(&["a/other", "a/reader"])
    );
    assert_eq!(
        sent(|t, w| t.on_catalog(&Event::InitDone, &w.stores)),
        Sent {
            models: set(&EVERY_MODEL),
            catalogs: set(&[]),
            policies: set(&["a/p1", "a/p2", "b/q"]),
        }
    );
    for event in [Event::Init, Event::InitApply(catalog("a", "pg", true))] {
        assert_eq!(
            sent(|t, w| t.on_catalog(&event, &w.stores)),
            Sent::default()
        );
    }
}

#[test]
fn a_policy_event_requeues_its_namespaces_catalogs_and_policies() {
    for event in [
        Event::Apply(policy("a", "p1")),
        Event::Delete(policy("a", "p1")),
    ] {
        assert_eq!(
            sent(|t, w| t.on_policy(&event, &w.stores)),
            Sent {
                models: set(&[]),
                catalogs: set(&["a/lake", "a/pg"]),
                policies: set(&["a/p1", "a/p2"]),
            }
        );
    }
    assert_eq!(
        sent(|t, w| t.on_policy(&Event::InitDone, &w.stores)),
        Sent {
            models: set(&[]),
            catalogs: set(&["a/lake", "a/pg", "b/pg"]),
            policies: set(&["a/p1", "a/p2", "b/q"]),
        }
    );
    for event in [Event::Init, Event::InitApply(policy("a", "p1"))] {
        assert_eq!(sent(|t, w| t.on_policy(&event, &w.stores)), Sent::default());
    }
}

/// A model event requeues the rivals for its current and previous name (never itself), and
/// its home Catalog only when it went away or the Catalog's finalizer is missing.
#[test]
fn a_model_event_requeues_its_rivals_and_its_home_only_when_the_finalizer_may_change() {
    let cases: [(&str, bool, Sent); 5] = [
        (
            "orders",
            false,
            Sent {
                models: set(&["a/orders-v2"]),
                ..Default::default()
            },
        ),
        (
            "orders",
            true,
            Sent {
                models: set(&["a/orders-v2"]),
                catalogs: set(&["a/pg"]),
                ..Default::default()
            },
        ),
        (
            "orders-v2",
            false,
            Sent {
                models: set(&["a/orders"]),
                ..Default::default()
            },
        ),
        // Home lake has no finalizer yet: an update may be the one that must add it.
        (
            "reader",
            false,
            Sent {
                catalogs: set(&["a/lake"]),
                ..Default::default()
            },
        ),
        ("renamed", false, Sent::default()),
    ];
    for (object, delete, want) in cases {
        let got = sent(|t, w| {
            let m = the(w, "a", object);
            let event = if delete {
                Event::Delete(m)
            } else {
                Event::Apply(m)
            };
            t.on_model(&event, &w.stores)
        });
        assert_eq!(got, want, "{object} deleted: {delete}");
    }
    // A model now named `orders` whose status still records `legacy` reaches both claimants
    // of `orders` and the one of `legacy`.
    let got = sent(|t, w| {
        let m = was_named(model("a", "newcomer", "pg", Some("orders"), &[]), "legacy");
        t.on_model(&Event::Apply(m), &w.stores)
    });
    assert_eq!(got.models, set(&["a/orders", "a/orders-v2", "a/renamed"]));
    for event in [Event::Init, Event::InitDone] {
        assert_eq!(sent(|t, w| t.on_model(&event, &w.stores)), Sent::default());
    }
}

#[test]
fn requeues_from_outside_the_watches_pass_through() {
    let got = sent(|t, w| {
        t.requeue_models([ObjectRef::from_obj(&the(w, "b", "orders"))]);
        t.requeue_catalogs([ObjectRef::new("lake").within("a")]);
    });
    assert_eq!(
        got,
        Sent {
            models: set(&["b/orders"]),
            catalogs: set(&["a/lake"]),
            policies: set(&[]),
        }
    );
}

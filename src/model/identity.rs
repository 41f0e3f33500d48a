//! Metric identity reconciliation (docs/design.md#metric-identities): names are compared exactly against the live
//! identities; a kept name keeps its id, a new name (or a removed name coming back) gets a fresh
//! id, a removed name's id is retired. Ids come from `mint`, called only for names that need one.

use crate::crd::packed::MetricId;
use crate::crd::semantic_model::{MetricIdentity, RetiredMetric};

/// Most retired ids kept per model; the oldest are dropped first.
pub const RETIRED_LIMIT: usize = 200;

/// The live and retired identities after a replace at `revision`.
pub fn reconcile_metric_ids<I: Into<MetricId>>(
    live: &[MetricIdentity],
    retired: &[RetiredMetric],
    names: &[&str],
    revision: i64,
    mut mint: impl FnMut() -> I,
) -> (Vec<MetricIdentity>, Vec<RetiredMetric>) {
    let next_live: Vec<MetricIdentity> = names
        .iter()
        .map(|name| match live.iter().find(|m| m.name == *name) {
            Some(kept) => kept.clone(),
            None => MetricIdentity {
                name: (*name).into(),
                id: mint().into(),
            },
        })
        .collect();
    let mut next_retired = retired.to_vec();
    next_retired.extend(
        live.iter()
            .filter(|m| !names.contains(&m.name.as_str()))
            .map(|m| RetiredMetric {
                name: m.name.clone(),
                id: m.id.clone(),
                retired_in_revision: revision,
            }),
    );
    // Bounded, newest kept: retirement order is append order.
    if next_retired.len() > RETIRED_LIMIT {
        next_retired.drain(..next_retired.len() - RETIRED_LIMIT);
    }
    (next_live, next_retired)
}

/// A fresh metric id: a UUIDv7 (time-ordered, never reused).
pub fn mint_metric_id() -> MetricId {
    MetricId::from_uuid(uuid::Uuid::now_v7())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    fn counter() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("id{n}")
        }
    }

    fn ids(live: &[MetricIdentity]) -> Vec<(String, String)> {
        live.iter()
            .map(|m| (m.name.to_string(), m.id.to_string()))
            .collect()
    }

    fn pairs(want: &[(&str, &str)]) -> Vec<(String, String)> {
        want.iter()
            .map(|(n, i)| (n.to_string(), i.to_string()))
            .collect()
    }

    #[test]
    fn the_identity_table_of_the_design_holds() {
        let mut mint = counter();
        let (live, retired) = reconcile_metric_ids(&[], &[], &["a", "b"], 1, &mut mint);
        assert_eq!(ids(&live), pairs(&[("a", "id1"), ("b", "id2")]));

        // Same names, reordered (expression or order changes do not matter): ids kept.
        let (live, retired) = reconcile_metric_ids(&live, &retired, &["b", "a"], 2, &mut mint);
        assert_eq!(ids(&live), pairs(&[("b", "id2"), ("a", "id1")]));

        // New name: new id. Removed name: retired.
        let (live, retired) = reconcile_metric_ids(&live, &retired, &["a", "c"], 3, &mut mint);
        assert_eq!(ids(&live), pairs(&[("a", "id1"), ("c", "id3")]));
        assert_eq!(
            retired,
            vec![RetiredMetric {
                name: "b".into(),
                id: "id2".into(),
                retired_in_revision: 3
            }]
        );

        // A removed name reintroduced later gets a new id, never the retired one.
        let (live, _) = reconcile_metric_ids(&live, &retired, &["a", "c", "b"], 4, &mut mint);
        assert_eq!(
            ids(&live),
            pairs(&[("a", "id1"), ("c", "id3"), ("b", "id4")])
        );
    }

    #[test]
    fn names_are_compared_exactly() {
        let mut mint = counter();
        let (live, retired) = reconcile_metric_ids(&[], &[], &["Revenue"], 1, &mut mint);
        let (live, retired) = reconcile_metric_ids(&live, &retired, &["revenue"], 2, &mut mint);
        assert_eq!(ids(&live), pairs(&[("revenue", "id2")]));
        assert_eq!(retired[0].name, "Revenue");
    }

    #[test]
    fn retired_ids_are_bounded_keeping_the_newest() {
        let mut mint = counter();
        let mut live = Vec::new();
        let mut retired = Vec::new();
        for rev in 0..(RETIRED_LIMIT as i64 + 10) {
            let name = format!("m{rev}");
            (live, retired) =
                reconcile_metric_ids(&live, &retired, &[name.as_str()], rev, &mut mint);
        }
        assert_eq!(retired.len(), RETIRED_LIMIT);
        assert_eq!(
            retired.last().unwrap().retired_in_revision,
            RETIRED_LIMIT as i64 + 9
        );
    }

    #[test]
    fn many_retired_at_once_drop_exactly_the_oldest() {
        let old: Vec<RetiredMetric> = (0..RETIRED_LIMIT)
            .map(|i| RetiredMetric {
                name: format!("old{i}").into(),
                id: format!("old-id{i}").into(),
                retired_in_revision: 1,
            })
            .collect();
        let live: Vec<MetricIdentity> = (0..5)
            .map(|i| MetricIdentity {
                name: format!("m{i}").into(),
                id: format!("id{i}").into(),
            })
            .collect();
        let (_, retired) = reconcile_metric_ids(&live, &old, &[], 2, counter());
        assert_eq!(retired.len(), RETIRED_LIMIT);
        assert_eq!(
            retired[0].name, "old5",
            "the five oldest went, no more, no fewer"
        );
        assert_eq!(retired.last().unwrap().name, "m4");
    }

    #[test]
    fn minted_ids_are_fresh_uuid_v7() {
        let (a, b) = (mint_metric_id(), mint_metric_id());
        assert_ne!(a, b);
        for id in [a, b] {
            let parsed = uuid::Uuid::parse_str(&id.to_string()).unwrap();
            assert_eq!(parsed.get_version_num(), 7, "{id}");
            assert_eq!(
                parsed.to_string(),
                id.to_string(),
                "canonical lower-case hyphenated form"
            );
        }
    }

    proptest! {
        /// Over any sequence of accepted name sets: no id is ever minted twice, a name present
        /// in consecutive revisions keeps its id, and a name absent in between gets a new id.
        #[test]
        fn ids_are_never_reused_and_stable_while_present(revisions in proptest::collection::vec(proptest::collection::btree_set("[a-e]", 0..5), 1..20)) {
            let mut mint = counter();
            let mut seen_ids = HashSet::new();
            let mut live: Vec<MetricIdentity> = Vec::new();
            let mut retired = Vec::new();
            let mut previous: HashMap<String, String> = HashMap::new();
            for (rev, names) in revisions.iter().enumerate() {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                (live, retired) = reconcile_metric_ids(&live, &retired, &names, rev as i64, &mut mint);
                let now: HashMap<String, String> = live.iter().map(|m| (m.name.to_string(), m.id.to_string())).collect();
                for (name, id) in &now {
                    match previous.get(name) {
                        Some(old) => prop_assert_eq!(old, id, "a present name kept its id"),
                        None => prop_assert!(seen_ids.insert(id.clone()), "id {} reused", id),
                    }
                }
                prop_assert_eq!(live.len(), names.len());
                previous = now;
            }
        }
    }
}

//! Metric identity reconciliation (docs/design.md#metric-identities): names are compared exactly against the live
//! identities; a kept name keeps its id, a new name (or a removed name coming back) gets a fresh
//! id, a removed name's id is retired — unless the metric that replaces it says `renamedFrom`
//! the old name, which hands the id over. Ids come from `mint`, called only for names that need one.

use crate::crd::packed::MetricId;
use crate::crd::semantic_model::{Metric, MetricIdentity, RetiredMetric};

/// Most retired ids kept per model; the oldest are dropped first.
pub const RETIRED_LIMIT: usize = 200;

/// A metric of the new definition as identity sees it: its name and the name it was renamed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wanted<'a> {
    pub name: &'a str,
    pub renamed_from: Option<&'a str>,
}

impl<'a> Wanted<'a> {
    /// A metric without a rename.
    pub fn plain(name: &'a str) -> Self {
        Self {
            name,
            renamed_from: None,
        }
    }

    /// The metrics of a definition, in order.
    pub fn of(metrics: &'a [Metric]) -> Vec<Self> {
        metrics
            .iter()
            .map(|m| Self {
                name: &m.name,
                renamed_from: m.renamed_from.as_deref(),
            })
            .collect()
    }
}

/// The live and retired identities after a replace at `revision`. A rename takes the old id
/// only when the old name is live and no longer wanted, and only once (validation refuses the
/// rest; here they simply mint).
pub fn reconcile_metric_ids<I: Into<MetricId>>(
    live: &[MetricIdentity],
    retired: &[RetiredMetric],
    wanted: &[Wanted],
    revision: i64,
    mut mint: impl FnMut() -> I,
) -> (Vec<MetricIdentity>, Vec<RetiredMetric>) {
    let wanted_name = |name: &str| wanted.iter().any(|w| w.name == name);
    let mut handed_over: Vec<&str> = Vec::new();
    let next_live: Vec<MetricIdentity> = wanted
        .iter()
        .map(|w| {
            if let Some(kept) = live.iter().find(|m| m.name == w.name) {
                return kept.clone();
            }
            let renamed = w.renamed_from.and_then(|old| {
                let from = live.iter().find(|m| m.name == old)?;
                (!wanted_name(old) && !handed_over.contains(&old)).then_some(from)
            });
            match renamed {
                Some(from) => {
                    handed_over.push(&from.name);
                    let mut former_names = from.former_names.clone();
                    former_names.push(from.name.clone());
                    MetricIdentity {
                        name: w.name.into(),
                        id: from.id.clone(),
                        former_names,
                    }
                }
                None => MetricIdentity::new(w.name, mint().into()),
            }
        })
        .collect();
    let mut next_retired = retired.to_vec();
    next_retired.extend(
        live.iter()
            .filter(|m| !wanted_name(&m.name) && !handed_over.contains(&m.name.as_str()))
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

    fn plain<'a>(names: &[&'a str]) -> Vec<Wanted<'a>> {
        names.iter().map(|n| Wanted::plain(n)).collect()
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
        let (live, retired) = reconcile_metric_ids(&[], &[], &plain(&["a", "b"]), 1, &mut mint);
        assert_eq!(ids(&live), pairs(&[("a", "id1"), ("b", "id2")]));

        // Same names, reordered (expression or order changes do not matter): ids kept.
        let (live, retired) =
            reconcile_metric_ids(&live, &retired, &plain(&["b", "a"]), 2, &mut mint);
        assert_eq!(ids(&live), pairs(&[("b", "id2"), ("a", "id1")]));

        // New name: new id. Removed name: retired.
        let (live, retired) =
            reconcile_metric_ids(&live, &retired, &plain(&["a", "c"]), 3, &mut mint);
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
        let (live, _) =
            reconcile_metric_ids(&live, &retired, &plain(&["a", "c", "b"]), 4, &mut mint);
        assert_eq!(
            ids(&live),
            pairs(&[("a", "id1"), ("c", "id3"), ("b", "id4")])
        );
    }

    /// Live: a (id1), b (id2) — or c (id1, formerly a) for the rows that start after a rename.
    #[test]
    fn renames_hand_over_an_id_only_when_the_old_name_is_live_and_gone() {
        type Row<'a> = (
            &'a str,
            Vec<Wanted<'a>>,
            Vec<(&'a str, &'a str, Vec<&'a str>)>,
            Vec<&'a str>,
        );
        let r = |name, from| Wanted {
            name,
            renamed_from: Some(from),
        };
        let p = Wanted::plain;
        let rows: Vec<Row> = vec![
            (
                "a renamed to c",
                vec![r("c", "a"), p("b")],
                vec![("c", "id1", vec!["a"]), ("b", "id2", vec![])],
                vec![],
            ),
            (
                "old name still present: c is new",
                vec![r("c", "a"), p("a"), p("b")],
                vec![
                    ("c", "id3", vec![]),
                    ("a", "id1", vec![]),
                    ("b", "id2", vec![]),
                ],
                vec![],
            ),
            (
                "two renames from a: only the first",
                vec![r("c", "a"), r("d", "a")],
                vec![("c", "id1", vec!["a"]), ("d", "id3", vec![])],
                vec!["b"],
            ),
            (
                "unknown old name mints",
                vec![r("c", "x")],
                vec![("c", "id3", vec![])],
                vec!["a", "b"],
            ),
            (
                "a retired name is not live",
                vec![r("c", "gone"), p("a"), p("b")],
                vec![
                    ("c", "id3", vec![]),
                    ("a", "id1", vec![]),
                    ("b", "id2", vec![]),
                ],
                vec![],
            ),
            (
                "swap needs no rename: names keep ids",
                vec![r("b", "a"), r("a", "b")],
                vec![("b", "id2", vec![]), ("a", "id1", vec![])],
                vec![],
            ),
        ];
        let live = vec![
            MetricIdentity::new("a", "id1"),
            MetricIdentity::new("b", "id2"),
        ];
        let retired = vec![RetiredMetric {
            name: "gone".into(),
            id: "id0".into(),
            retired_in_revision: 1,
        }];
        for (what, wanted, want_live, want_retired) in rows {
            let mut n = 2;
            let mint = || {
                n += 1;
                format!("id{n}")
            };
            let (next, next_retired) = reconcile_metric_ids(&live, &retired, &wanted, 5, mint);
            let got: Vec<(String, String, Vec<String>)> = next
                .iter()
                .map(|m| {
                    (
                        m.name.to_string(),
                        m.id.to_string(),
                        m.former_names.iter().map(|f| f.to_string()).collect(),
                    )
                })
                .collect();
            let want: Vec<(String, String, Vec<String>)> = want_live
                .iter()
                .map(|(n, i, f)| {
                    (
                        n.to_string(),
                        i.to_string(),
                        f.iter().map(|f| f.to_string()).collect(),
                    )
                })
                .collect();
            assert_eq!(got, want, "{what}");
            let newly: Vec<&str> = next_retired[1..].iter().map(|m| m.name.as_str()).collect();
            assert_eq!(newly, want_retired, "{what}: retired");
        }

        // A renamed metric renamed again carries its whole name history; a file that still says
        // renamedFrom after the rename was accepted keeps the id by name.
        let renamed = vec![MetricIdentity {
            name: "c".into(),
            id: "id1".into(),
            former_names: vec!["a".into()],
        }];
        let (next, _) =
            reconcile_metric_ids(&renamed, &[], &[r("d", "c")], 6, || "fresh".to_string());
        assert_eq!(
            (next[0].id.to_string(), next[0].former_names.clone()),
            ("id1".into(), vec!["a".into(), "c".into()])
        );
        let (next, retired) =
            reconcile_metric_ids(&renamed, &[], &[r("c", "a")], 6, || "fresh".to_string());
        assert_eq!(next, renamed);
        assert!(retired.is_empty());
    }

    #[test]
    fn names_are_compared_exactly() {
        let mut mint = counter();
        let (live, retired) = reconcile_metric_ids(&[], &[], &plain(&["Revenue"]), 1, &mut mint);
        let (live, retired) =
            reconcile_metric_ids(&live, &retired, &plain(&["revenue"]), 2, &mut mint);
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
                reconcile_metric_ids(&live, &retired, &plain(&[name.as_str()]), rev, &mut mint);
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
            .map(|i| MetricIdentity::new(format!("m{i}"), format!("id{i}")))
            .collect();
        let (_, retired) = reconcile_metric_ids(&live, &old, &plain(&[]), 2, counter());
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
        /// With renames drawn at random (valid or not): an id lives under at most one name at a
        /// time, never comes back once retired, and a metric is never both live and retired.
        #[test]
        fn renames_never_duplicate_or_revive_an_id(revisions in proptest::collection::vec(proptest::collection::vec(("[a-f]", proptest::option::of("[a-f]")), 0..5), 1..20)) {
            let mut mint = counter();
            let (mut live, mut retired): (Vec<MetricIdentity>, Vec<RetiredMetric>) = (vec![], vec![]);
            let mut ever_retired = HashSet::new();
            for (rev, metrics) in revisions.iter().enumerate() {
                let mut seen = HashSet::new();
                let wanted: Vec<Wanted> = metrics.iter()
                    .filter(|(n, _)| seen.insert(n.clone()))
                    .map(|(n, f)| Wanted { name: n, renamed_from: f.as_deref() })
                    .collect();
                (live, retired) = reconcile_metric_ids(&live, &retired, &wanted, rev as i64, &mut mint);
                let live_ids: Vec<String> = live.iter().map(|m| m.id.to_string()).collect();
                let unique: HashSet<&String> = live_ids.iter().collect();
                prop_assert_eq!(unique.len(), live_ids.len(), "an id under two names");
                for r in &retired {
                    ever_retired.insert(r.id.to_string());
                }
                for id in &live_ids {
                    prop_assert!(!ever_retired.contains(id), "retired id {} is live", id);
                }
            }
        }

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
                (live, retired) = reconcile_metric_ids(&live, &retired, &plain(&names), rev as i64, &mut mint);
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

//! Drift of a model's bound sources from what the latest check rounds of their catalogs saw
//! (docs/design.md#a-check-round: rounds feed model drift). Never probes and never rebinds.

use std::collections::HashMap;
use std::time::Instant;

use kube::ResourceExt;

use crate::controller::Context;
use crate::controller::check::SourceFeed;
use crate::crd::semantic_model::Definition;
use crate::crd::semantic_model::SourceAssociation;
use crate::crd::{SemanticModel, SemanticModelStatus};
use crate::model::drift;

/// What the rounds say about a model's sources.
pub enum DriftCheck {
    /// Checked recently: keep what status says.
    NotDue,
    /// A catalog could not answer: drift is unknown (existing entries are kept).
    Unknown(String),
    Checked(Vec<crate::crd::semantic_model::SourceDrift>),
}

/// Drift of the model's bound sources, from what the latest check rounds of their catalogs saw
/// (docs/design.md#a-check-round: rounds feed model drift). Never probes and never rebinds. A catalog without a
/// round since the sources were resolved (or since this process started) leaves status as is.
pub fn from_rounds(
    ctx: &Context,
    model: &SemanticModel,
    accepted: &SemanticModelStatus,
) -> DriftCheck {
    let ns = model.namespace().unwrap_or_default();
    // Drift is only asked of an unchanged model: its spec is the accepted definition.
    from_feeds(
        &model.spec.definition,
        &accepted.source_associations,
        ctx.sources_resolved_at(&model.uid().unwrap_or_default()),
        |catalog| ctx.checks.feed(&format!("{ns}/{catalog}")),
    )
}

/// The pure core: `feed_of(catalog)` is the latest answer of that catalog, `resolved_at` when
/// this process last resolved the model's sources. An answer older than the resolution
/// describes sources the model no longer has: it is ignored. `def` (the accepted definition)
/// names what uses a drifted column.
pub fn from_feeds(
    def: &Definition,
    associations: &[SourceAssociation],
    resolved_at: Option<Instant>,
    feed_of: impl Fn(&str) -> Option<SourceFeed>,
) -> DriftCheck {
    if associations.is_empty() {
        return DriftCheck::NotDue;
    }
    let mut by_name = HashMap::new();
    let mut by_id = HashMap::new();
    let mut columns = HashMap::new();
    let mut catalogs: Vec<&str> = associations
        .iter()
        .map(|a| a.source.catalog.as_str())
        .collect();
    catalogs.sort();
    catalogs.dedup();
    for catalog_name in catalogs {
        let Some(feed) = feed_of(catalog_name) else {
            return DriftCheck::NotDue;
        };
        if resolved_at.is_some_and(|r| feed.at < r) {
            return DriftCheck::NotDue;
        }
        let seen = match feed.seen {
            Ok(seen) => seen,
            Err(why) => return DriftCheck::Unknown(format!("Catalog {catalog_name:?}: {why}")),
        };
        for a in associations
            .iter()
            .filter(|a| a.source.catalog == catalog_name)
        {
            let t = drift::target_of(a);
            let Some(answer) = seen.by_name.get(&t) else {
                return DriftCheck::NotDue; // bound after that round: wait for the next one
            };
            if let Some(found) = seen.by_id.get(&a.id) {
                by_id.insert(a.id.clone(), found.clone());
            }
            if let Some(cols) = seen.columns.get(&t) {
                columns.insert((catalog_name.to_string(), t.clone()), cols.clone());
            }
            by_name.insert((catalog_name.to_string(), t), answer.clone());
        }
    }
    let mut found = drift::classify(associations, &by_name, &by_id);
    found.extend(drift::classify_columns(
        def,
        associations,
        &by_name,
        &columns,
    ));
    DriftCheck::Checked(found)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::catalog::observe::Observations;
    use crate::catalog::{ObjectType, Probe, ProbeTarget};

    fn association() -> SourceAssociation {
        serde_json::from_value(serde_json::json!({
            "dataset": "e", "source": {"catalog": "hr", "schema": "public", "name": "employees"},
            "type": "TABLE", "id": "pg:1:2:r3", "revision": 1
        }))
        .unwrap()
    }

    fn feed(at: Instant, answer: Probe) -> SourceFeed {
        let mut seen = Observations::default();
        seen.by_name
            .insert(ProbeTarget::relation("public", "employees"), answer);
        SourceFeed {
            at,
            seen: Ok(Arc::new(seen)),
        }
    }

    fn kinds(check: DriftCheck) -> Option<Vec<String>> {
        match check {
            DriftCheck::Checked(d) => Some(d.iter().map(|x| format!("{:?}", x.kind)).collect()),
            DriftCheck::NotDue => None,
            DriftCheck::Unknown(why) => Some(vec![format!("unknown: {why}")]),
        }
    }

    #[test]
    fn an_answer_from_before_the_last_resolution_is_ignored_and_a_newer_one_is_used() {
        let resolved = Instant::now();
        let older = resolved.checked_sub(Duration::from_secs(1)).unwrap();
        let newer = resolved + Duration::from_secs(1);
        let a = [association()];
        let gone = |at| move |_: &str| Some(feed(at, Probe::Absent));
        assert_eq!(
            kinds(from_feeds(
                &Definition::default(),
                &a,
                Some(resolved),
                gone(older)
            )),
            None
        );
        assert_eq!(
            kinds(from_feeds(
                &Definition::default(),
                &a,
                Some(resolved),
                gone(newer)
            )),
            Some(vec!["SourceMissing".into()])
        );
        // An answer of the very instant of the resolution saw the sources as resolved.
        assert_eq!(
            kinds(from_feeds(
                &Definition::default(),
                &a,
                Some(resolved),
                gone(resolved)
            )),
            Some(vec!["SourceMissing".into()])
        );
        // Resolved before this process started: any answer of this process counts.
        assert_eq!(
            kinds(from_feeds(&Definition::default(), &a, None, gone(older))),
            Some(vec!["SourceMissing".into()])
        );
    }

    #[test]
    fn no_answer_yet_or_a_source_bound_after_the_round_leaves_status_as_is() {
        let a = [association()];
        assert_eq!(
            kinds(from_feeds(&Definition::default(), &a, None, |_| None)),
            None
        );
        let other = |_: &str| {
            let mut seen = Observations::default();
            seen.by_name
                .insert(ProbeTarget::relation("public", "other"), Probe::Absent);
            Some(SourceFeed {
                at: Instant::now(),
                seen: Ok(Arc::new(seen)),
            })
        };
        assert_eq!(
            kinds(from_feeds(&Definition::default(), &a, None, other)),
            None
        );
    }

    #[test]
    fn a_failed_answer_makes_drift_unknown_and_a_matching_one_finds_none() {
        let a = [association()];
        let failed = |_: &str| {
            Some(SourceFeed {
                at: Instant::now(),
                seen: Err("Timeout: 5s".into()),
            })
        };
        assert_eq!(
            kinds(from_feeds(&Definition::default(), &a, None, failed)),
            Some(vec!["unknown: Catalog \"hr\": Timeout: 5s".into()])
        );
        let same = |_: &str| {
            Some(feed(
                Instant::now(),
                Probe::Present {
                    object_type: ObjectType::Table,
                    native_id: "pg:1:2:r3".into(),
                },
            ))
        };
        assert_eq!(
            kinds(from_feeds(&Definition::default(), &a, None, same)),
            Some(vec![])
        );
    }
}

//! Effective policy of a Catalog (docs/design.md#reconcile-policies): its reference, else the one selector policy that
//! matches, else the namespace's empty-selector policy, else the operator defaults. Two policies
//! matching at the same level: the alphabetically first wins and both report `Overlap`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::selector;
use crate::crd::catalog::{EffectivePolicy, PolicySource};
use crate::crd::policy::PolicyMode;

/// What resolution needs of a ReconcilePolicy.
#[derive(Clone, Debug)]
pub struct PolicyView<'a> {
    pub name: &'a str,
    pub selector: Option<&'a LabelSelector>,
    pub mode: PolicyMode,
    pub interval: &'a str,
    pub enabled: bool,
}

/// What resolution needs of a Catalog.
#[derive(Clone, Debug)]
pub struct CatalogView<'a> {
    pub name: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub policy_ref: Option<&'a str>,
}

/// Operator-wide defaults (flags / helm values).
#[derive(Clone, Debug, PartialEq)]
pub struct OperatorDefaults {
    pub enabled: bool,
    pub mode: PolicyMode,
    pub interval: String,
}

impl Default for OperatorDefaults {
    fn default() -> Self {
        Self {
            enabled: false,
            mode: PolicyMode::ReportOnly,
            interval: "1h".into(),
        }
    }
}

/// The effective policy of one Catalog, and what went wrong choosing it.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolution {
    pub effective: EffectivePolicy,
    /// Set when `reconcilePolicyRef` names a policy that does not exist: periodic checks stay off
    /// (never fall back to a policy the user did not pick, which might remove things).
    pub missing_reference: Option<String>,
    /// Other policies that matched at the winning level (they lost alphabetically).
    pub overlapping: Vec<String>,
}

fn from_policy(p: &PolicyView<'_>, source: PolicySource) -> EffectivePolicy {
    EffectivePolicy {
        name: Some(p.name.to_string()),
        source,
        mode: p.mode,
        interval: p.interval.to_string(),
        enabled: p.enabled,
    }
}

/// Resolves the effective policy of `catalog` among the policies of its namespace.
pub fn effective_policy(
    catalog: &CatalogView<'_>,
    policies: &[PolicyView<'_>],
    defaults: &OperatorDefaults,
) -> Resolution {
    if let Some(wanted) = catalog.policy_ref {
        return match policies.iter().find(|p| p.name == wanted) {
            Some(p) => Resolution {
                effective: from_policy(p, PolicySource::Reference),
                missing_reference: None,
                overlapping: vec![],
            },
            None => Resolution {
                effective: EffectivePolicy {
                    name: Some(wanted.to_string()),
                    source: PolicySource::Reference,
                    mode: PolicyMode::ReportOnly,
                    interval: defaults.interval.clone(),
                    enabled: false,
                },
                missing_reference: Some(wanted.to_string()),
                overlapping: vec![],
            },
        };
    }
    let mut selecting: Vec<&PolicyView<'_>> = policies
        .iter()
        .filter(|p| {
            !selector::is_empty(p.selector)
                && p.selector
                    .is_some_and(|s| selector::matches(s, catalog.labels))
        })
        .collect();
    selecting.sort_by_key(|p| p.name);
    let mut namespace_wide: Vec<&PolicyView<'_>> = policies
        .iter()
        .filter(|p| selector::is_empty(p.selector))
        .collect();
    namespace_wide.sort_by_key(|p| p.name);
    for (level, source) in [
        (selecting, PolicySource::Selector),
        (namespace_wide, PolicySource::Namespace),
    ] {
        if let Some((first, rest)) = level.split_first() {
            return Resolution {
                effective: from_policy(first, source),
                missing_reference: None,
                overlapping: rest.iter().map(|p| p.name.to_string()).collect(),
            };
        }
    }
    Resolution {
        effective: EffectivePolicy {
            name: None,
            source: PolicySource::OperatorDefault,
            mode: defaults.mode,
            interval: defaults.interval.clone(),
            enabled: defaults.enabled,
        },
        missing_reference: None,
        overlapping: vec![],
    }
}

/// For each policy in overlap, the policies it overlaps with and one example of why.
pub fn overlaps(
    catalogs: &[CatalogView<'_>],
    policies: &[PolicyView<'_>],
) -> BTreeMap<String, (BTreeSet<String>, String)> {
    let mut out: BTreeMap<String, (BTreeSet<String>, String)> = BTreeMap::new();
    let mut note = |a: &str, b: &str, why: &str| {
        let entry = out
            .entry(a.to_string())
            .or_insert_with(|| (BTreeSet::new(), why.to_string()));
        entry.0.insert(b.to_string());
    };
    // Namespace-wide policies overlap with each other whatever catalogs exist.
    let namespace_wide: Vec<_> = policies
        .iter()
        .filter(|p| selector::is_empty(p.selector))
        .collect();
    for a in &namespace_wide {
        for b in namespace_wide.iter().filter(|b| b.name != a.name) {
            note(a.name, b.name, "both have an empty catalogSelector");
        }
    }
    // Selector policies overlap where both match a catalog that has no explicit reference.
    for catalog in catalogs.iter().filter(|c| c.policy_ref.is_none()) {
        let resolution = effective_policy(catalog, policies, &OperatorDefaults::default());
        if resolution.effective.source != PolicySource::Selector
            || resolution.overlapping.is_empty()
        {
            continue;
        }
        let mut all = resolution.overlapping.clone();
        all.extend(resolution.effective.name.clone());
        for a in &all {
            for b in all.iter().filter(|b| *b != a) {
                note(a, b, &format!("both select Catalog {:?}", catalog.name));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy<'a>(name: &'a str, selector: Option<&'a LabelSelector>) -> PolicyView<'a> {
        PolicyView {
            name,
            selector,
            mode: PolicyMode::AutoRemove,
            interval: "30m",
            enabled: true,
        }
    }
    fn sel(k: &str, v: &str) -> LabelSelector {
        LabelSelector {
            match_labels: Some(BTreeMap::from([(k.to_string(), v.to_string())])),
            ..Default::default()
        }
    }

    struct Case {
        what: &'static str,
        labels: &'static [(&'static str, &'static str)],
        policy_ref: Option<&'static str>,
        want_name: Option<&'static str>,
        want_source: PolicySource,
        want_overlap: &'static [&'static str],
        want_missing: bool,
    }

    #[test]
    fn reference_beats_selector_beats_empty_selector_beats_default() {
        let prod = sel("tier", "prod");
        let prod2 = sel("tier", "prod");
        let team = sel("team", "hr");
        let empty = LabelSelector::default();
        let all = vec![
            policy("strict", Some(&prod)),
            policy("also-prod", Some(&prod2)),
            policy("hr", Some(&team)),
            policy("ns-wide", None),
            policy("ns-wide-2", Some(&empty)),
        ];
        let cases = [
            Case {
                what: "reference wins over everything",
                labels: &[("tier", "prod")],
                policy_ref: Some("hr"),
                want_name: Some("hr"),
                want_source: PolicySource::Reference,
                want_overlap: &[],
                want_missing: false,
            },
            Case {
                what: "missing reference disables checks",
                labels: &[("tier", "prod")],
                policy_ref: Some("gone"),
                want_name: Some("gone"),
                want_source: PolicySource::Reference,
                want_overlap: &[],
                want_missing: true,
            },
            Case {
                what: "two selector matches: alphabetical first, overlap",
                labels: &[("tier", "prod")],
                policy_ref: None,
                want_name: Some("also-prod"),
                want_source: PolicySource::Selector,
                want_overlap: &["strict"],
                want_missing: false,
            },
            Case {
                what: "one selector match",
                labels: &[("team", "hr")],
                policy_ref: None,
                want_name: Some("hr"),
                want_source: PolicySource::Selector,
                want_overlap: &[],
                want_missing: false,
            },
            Case {
                what: "no selector match: empty selector",
                labels: &[("tier", "dev")],
                policy_ref: None,
                want_name: Some("ns-wide"),
                want_source: PolicySource::Namespace,
                want_overlap: &["ns-wide-2"],
                want_missing: false,
            },
        ];
        for c in cases {
            let labels: BTreeMap<String, String> = c
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let cat = CatalogView {
                name: "hr",
                labels: &labels,
                policy_ref: c.policy_ref,
            };
            let r = effective_policy(&cat, &all, &OperatorDefaults::default());
            assert_eq!(r.effective.name.as_deref(), c.want_name, "{}", c.what);
            assert_eq!(r.effective.source, c.want_source, "{}", c.what);
            assert_eq!(
                r.overlapping,
                c.want_overlap
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>(),
                "{}",
                c.what
            );
            assert_eq!(r.missing_reference.is_some(), c.want_missing, "{}", c.what);
            if c.want_missing {
                assert!(!r.effective.enabled);
                assert_eq!(r.effective.mode, PolicyMode::ReportOnly);
            }
        }
    }

    #[test]
    fn no_policy_at_all_gives_the_operator_defaults() {
        let labels = BTreeMap::new();
        let cat = CatalogView {
            name: "hr",
            labels: &labels,
            policy_ref: None,
        };
        let defaults = OperatorDefaults {
            enabled: true,
            mode: PolicyMode::ReportOnly,
            interval: "2h".into(),
        };
        let r = effective_policy(&cat, &[], &defaults);
        assert_eq!(
            r.effective,
            EffectivePolicy {
                name: None,
                source: PolicySource::OperatorDefault,
                mode: PolicyMode::ReportOnly,
                interval: "2h".into(),
                enabled: true
            }
        );
    }

    #[test]
    fn overlap_marks_both_policies_and_ignores_catalogs_with_a_reference() {
        let prod = sel("tier", "prod");
        let prod2 = sel("tier", "prod");
        let policies = vec![
            policy("a", Some(&prod)),
            policy("b", Some(&prod2)),
            policy("c", None),
        ];
        let prod_labels = BTreeMap::from([("tier".to_string(), "prod".to_string())]);
        let referenced = [CatalogView {
            name: "x",
            labels: &prod_labels,
            policy_ref: Some("a"),
        }];
        assert!(
            overlaps(&referenced, &policies).is_empty(),
            "a referencing catalog resolves by reference"
        );

        let free = [CatalogView {
            name: "y",
            labels: &prod_labels,
            policy_ref: None,
        }];
        let o = overlaps(&free, &policies);
        assert_eq!(o.keys().cloned().collect::<Vec<_>>(), vec!["a", "b"]);
        assert_eq!(o["a"].0, BTreeSet::from(["b".to_string()]), "never itself");
        assert_eq!(o["b"].0, BTreeSet::from(["a".to_string()]));
        assert!(o["a"].1.contains("\"y\""));
    }

    #[test]
    fn two_empty_selector_policies_overlap_even_without_catalogs() {
        let policies = vec![policy("a", None), policy("b", None), policy("c", None)];
        let o = overlaps(&[], &policies);
        assert_eq!(o.len(), 3);
        assert_eq!(o["a"].0, BTreeSet::from(["b".to_string(), "c".to_string()]));
    }
}

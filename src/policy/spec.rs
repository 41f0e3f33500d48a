//! Checks of a ReconcilePolicy spec that the CRD schema cannot express (or that an older CRD
//! let through), each naming the field path. Shared by the controller and `semops validate`.

use super::{duration, selector};
use crate::crd::ReconcilePolicySpec;

/// Problems the CRD schema cannot catch (or that slipped past an older CRD), by field path.
pub fn spec_problems(spec: &ReconcilePolicySpec) -> Vec<String> {
    let mut out = Vec::new();
    match duration::parse(&spec.interval) {
        Ok(d) if d.as_secs() < 60 => out.push(format!(
            "spec.interval: {} is shorter than the 1m minimum",
            spec.interval
        )),
        Ok(_) => {}
        Err(e) => out.push(format!("spec.interval: {e}")),
    }
    if let Err(e) = duration::parse(&spec.probe.timeout) {
        out.push(format!("spec.probe.timeout: {e}"));
    }
    if !(0.0..1.0).contains(&spec.jitter) {
        out.push(format!("spec.jitter: {} is outside [0, 1)", spec.jitter));
    }
    if let Some(sel) = &spec.catalog_selector
        && let Err(e) = selector::check(sel)
    {
        out.push(format!("spec.catalogSelector.{e}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_specs_name_the_field() {
        let p: ReconcilePolicySpec = serde_saphyr::from_str(
            "interval: 30s\nprobe: {timeout: soon}\ncatalogSelector: {matchExpressions: [{key: a, operator: Like}]}",
        )
        .unwrap();
        let problems = spec_problems(&p);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].starts_with("spec.interval"));
        assert!(problems[1].starts_with("spec.probe.timeout"));
        assert!(problems[2].starts_with("spec.catalogSelector.matchExpressions[0]"));
    }

    #[test]
    fn the_shortest_interval_is_exactly_one_minute() {
        for (interval, ok) in [("1m", true), ("59s", false), ("60s", true)] {
            let p: ReconcilePolicySpec =
                serde_saphyr::from_str(&format!("interval: {interval}")).unwrap();
            assert_eq!(spec_problems(&p).is_empty(), ok, "{interval}");
        }
    }
}

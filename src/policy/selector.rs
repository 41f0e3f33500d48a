//! Kubernetes label selector matching (matchLabels and matchExpressions), as the API defines it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether a selector selects nothing-in-particular (and so every object).
pub fn is_empty(selector: Option<&LabelSelector>) -> bool {
    selector.is_none_or(|s| {
        s.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
            && s.match_expressions.as_ref().is_none_or(Vec::is_empty)
    })
}

/// Checks operators and value lists; returns a message naming the bad expression.
pub fn check(selector: &LabelSelector) -> Result<(), String> {
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let values = e.values.as_ref().map_or(0, Vec::len);
        match e.operator.as_str() {
            "In" | "NotIn" if values == 0 => {
                return Err(format!(
                    "matchExpressions[{i}]: operator {} needs values",
                    e.operator
                ));
            }
            "Exists" | "DoesNotExist" if values > 0 => {
                return Err(format!(
                    "matchExpressions[{i}]: operator {} takes no values",
                    e.operator
                ));
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => {
                return Err(format!(
                    "matchExpressions[{i}]: unknown operator {other:?}; use In, NotIn, Exists or DoesNotExist"
                ));
            }
        }
    }
    Ok(())
}

/// Whether `labels` satisfy the selector. An invalid selector matches nothing.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    if check(selector).is_err() {
        return false;
    }
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let expressions_ok = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => labels.get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&e.key),
            "DoesNotExist" => !labels.contains_key(&e.key),
            _ => false,
        }
    });
    labels_ok && expressions_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn exists_matches_any_value_and_takes_no_values() {
        let sel = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![expr("team", "Exists", &[])]),
        };
        assert!(matches(&sel, &labels(&[("team", "")])));
        assert!(!matches(&sel, &labels(&[("tier", "prod")])));
        for op in ["Exists", "DoesNotExist"] {
            let with_values = LabelSelector {
                match_labels: None,
                match_expressions: Some(vec![expr("team", op, &["hr"])]),
            };
            let err = check(&with_values).unwrap_err();
            assert!(err.contains("takes no values"), "{err}");
            assert!(!matches(&with_values, &labels(&[("team", "hr")])));
        }
    }

    #[test]
    fn match_labels_and_expressions_follow_the_api_semantics() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("tier", "prod")])),
            match_expressions: Some(vec![
                expr("team", "In", &["hr", "fin"]),
                expr("legacy", "DoesNotExist", &[]),
            ]),
        };
        let cases = [
            (labels(&[("tier", "prod"), ("team", "hr")]), true),
            (labels(&[("tier", "prod"), ("team", "ops")]), false),
            (labels(&[("tier", "dev"), ("team", "hr")]), false),
            (
                labels(&[("tier", "prod"), ("team", "fin"), ("legacy", "")]),
                false,
            ),
            (labels(&[]), false),
        ];
        for (l, want) in cases {
            assert_eq!(matches(&sel, &l), want, "{l:?}");
        }
        let not_in = LabelSelector {
            match_expressions: Some(vec![expr("tier", "NotIn", &["dev"])]),
            ..Default::default()
        };
        assert!(matches(&not_in, &labels(&[])));
        assert!(!matches(&not_in, &labels(&[("tier", "dev")])));
    }

    #[test]
    fn invalid_selectors_are_reported_and_match_nothing() {
        let bad = LabelSelector {
            match_expressions: Some(vec![expr("a", "Like", &["x"])]),
            ..Default::default()
        };
        assert!(check(&bad).is_err());
        assert!(!matches(&bad, &labels(&[("a", "x")])));
        let no_values = LabelSelector {
            match_expressions: Some(vec![expr("a", "In", &[])]),
            ..Default::default()
        };
        assert!(check(&no_values).is_err());
    }

    #[test]
    fn empty_selectors_are_recognized() {
        assert!(is_empty(None));
        assert!(is_empty(Some(&LabelSelector::default())));
        assert!(!is_empty(Some(&LabelSelector {
            match_labels: Some(labels(&[("a", "b")])),
            ..Default::default()
        })));
    }
}

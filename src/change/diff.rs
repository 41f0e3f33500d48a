//! The diff of one model: a base (the accepted revision, or an older file) against a new spec.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::crd::semantic_model::{
    Dataset, Definition, Deprecation, Dialect, Expression, Metric, MetricIdentity,
    SemanticModelSpec,
};
use crate::model::columns;
use crate::model::identity::{self, Wanted};
use crate::model::validate::{self, Problem};

/// How much a change can hurt the people and tools that use the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Nothing that used the model notices.
    Safe,
    /// Users may notice (a rename, a deprecation, a changed field or relationship); ids hold.
    Risky,
    /// Something that used the model stops working or silently changes meaning: a retired
    /// metric id, a changed metric expression, a removed field a metric uses, a source rebound.
    Breaking,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Safe => "safe",
            Verdict::Risky => "risky",
            Verdict::Breaking => "breaking",
        }
    }
}

/// One change with its verdict: `what` is a short kind (`metric retired`, `expression changed`),
/// `subject` the thing changed, `detail` what happened to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    pub verdict: Verdict,
    pub what: String,
    pub subject: String,
    pub detail: String,
}

/// A metric with the id it keeps (known when the base came from the cluster).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Named {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// A rename that keeps the id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Renamed {
    pub from: String,
    pub to: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// A deprecated metric of the new definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deprecated {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacement: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Deprecated by this change (not already in the base).
    pub new: bool,
}

/// What acceptance does with the metric ids.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MetricIds {
    pub kept: Vec<Named>,
    /// New ids (minted at acceptance, so not known before).
    pub minted: Vec<Named>,
    pub retired: Vec<Named>,
    pub renamed: Vec<Renamed>,
    pub deprecated: Vec<Deprecated>,
}

/// The diff of one SemanticModel object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelDiff {
    pub namespace: String,
    /// The object's metadata.name.
    pub object: String,
    /// The model name clients see.
    pub name: String,
    /// `new`, `changed`, `unchanged` or `removed`.
    pub state: &'static str,
    /// The accepted revision compared with (cluster bases only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_revision: Option<i64>,
    pub verdict: Verdict,
    pub metrics: MetricIds,
    pub changes: Vec<Change>,
}

/// What the new spec is compared with.
pub struct Base<'a> {
    pub name: &'a str,
    pub spec: &'a SemanticModelSpec,
    /// The accepted identities and revision when the base is the cluster's accepted revision;
    /// `None` for a file (ids unknown: the names stand in).
    pub accepted: Option<(&'a [MetricIdentity], i64)>,
}

/// Diffs `next` (object `object` in `namespace`, client name `name`) against `base` (`None`: a
/// new model). `Err` carries the problems acceptance would refuse the new spec for (the
/// accepted revision would keep serving, so there is nothing to predict).
pub fn diff_model(
    namespace: &str,
    object: &str,
    name: &str,
    next: &SemanticModelSpec,
    base: Option<&Base>,
) -> Result<ModelDiff, Vec<Problem>> {
    let next_metrics = next.definition.metrics.as_deref().unwrap_or_default();
    let synthesized: Vec<MetricIdentity>;
    let (live, revision) = match base {
        Some(Base {
            accepted: Some((ids, revision)),
            ..
        }) => (*ids, Some(*revision)),
        Some(b) => {
            synthesized = (b.spec.definition.metrics.iter().flatten())
                .map(|m| MetricIdentity {
                    name: m.name.clone(),
                    id: m.name.to_string().into(),
                    // What the file's own renamedFrom says was taken earlier.
                    former_names: m.renamed_from.iter().cloned().collect(),
                })
                .collect();
            (synthesized.as_slice(), Some(0))
        }
        None => (&[][..], None),
    };
    let mut problems = validate::validate_definition(next);
    problems.extend(validate::validate_renames(next_metrics, live, revision));
    if !problems.is_empty() {
        return Err(problems);
    }
    let ids_known = matches!(
        base,
        Some(Base {
            accepted: Some(_),
            ..
        })
    );
    let id_of = |m: &MetricIdentity| ids_known.then(|| m.id.to_string());
    let empty = Definition::default();
    let base_def = base.map_or(&empty, |b| &b.spec.definition);
    let base_metrics = base_def.metrics.as_deref().unwrap_or_default();

    // The controller's own rule; a minted id is marked by the placeholder it is given here.
    const MINTED: &str = "\u{0}minted";
    let (predicted, retired) = identity::reconcile_metric_ids(
        live,
        &[],
        &Wanted::of(next_metrics),
        revision.unwrap_or(0) + 1,
        || MINTED.to_string(),
    );
    let mut ids = MetricIds::default();
    let mut changes = Vec::new();
    let mut push = |verdict, what: &str, subject: String, detail: String| {
        changes.push(Change {
            verdict,
            what: what.into(),
            subject,
            detail,
        })
    };
    for (metric, identity) in next_metrics.iter().zip(&predicted) {
        if identity.id == MINTED {
            ids.minted.push(Named {
                name: metric.name.to_string(),
                id: None,
            });
            push(
                Verdict::Safe,
                "metric added",
                metric.name.to_string(),
                "a new id is minted".into(),
            );
            continue;
        }
        let before = live
            .iter()
            .find(|l| l.id == identity.id)
            .expect("a kept id was live");
        let old = base_metrics.iter().find(|m| m.name == before.name);
        if before.name == metric.name {
            ids.kept.push(Named {
                name: metric.name.to_string(),
                id: id_of(identity),
            });
        } else {
            ids.renamed.push(Renamed {
                from: before.name.to_string(),
                to: metric.name.to_string(),
                id: id_of(identity),
            });
            push(
                Verdict::Risky,
                "metric renamed",
                metric.name.to_string(),
                format!(
                    "renamed from {:?}; the id is kept, questions by name must use the new name",
                    before.name
                ),
            );
        }
        if let Some(old) = old {
            metric_changes(old, metric, &mut push);
        }
    }
    for r in &retired {
        ids.retired.push(Named {
            name: r.name.to_string(),
            id: ids_known.then(|| r.id.to_string()),
        });
        push(
            Verdict::Breaking,
            "metric retired",
            r.name.to_string(),
            "its id is retired for good; add renamedFrom to the metric that replaces it to keep the id".into(),
        );
    }
    for metric in next_metrics {
        let Some(d) = &metric.deprecated else {
            continue;
        };
        let was = base_metrics
            .iter()
            .find(|m| m.name == metric.name)
            .and_then(|m| m.deprecated.as_ref());
        ids.deprecated.push(Deprecated {
            name: metric.name.to_string(),
            replacement: d.replacement.as_ref().map(ToString::to_string),
            reason: d.reason.as_ref().map(ToString::to_string),
            new: was.is_none(),
        });
        if was != Some(d) {
            push(
                Verdict::Risky,
                "metric deprecated",
                metric.name.to_string(),
                deprecation_text(d),
            );
        }
    }
    if let Some(b) = base {
        if b.name != name {
            push(
                Verdict::Risky,
                "model renamed",
                name.to_string(),
                format!("was {:?}; ids and bindings are kept", b.name),
            );
        }
        if b.spec.comment != next.comment || b.spec.properties != next.properties {
            push(
                Verdict::Safe,
                "model described",
                name.to_string(),
                "comment or properties changed".into(),
            );
        }
        dataset_changes(base_def, &next.definition, &mut push);
        relationship_changes(base_def, &next.definition, &mut push);
    }
    let verdict = changes
        .iter()
        .map(|c| c.verdict)
        .max()
        .unwrap_or(Verdict::Safe);
    let state = match base {
        None => "new",
        Some(b) if b.name == name && b.spec == next => "unchanged",
        Some(_) => "changed",
    };
    Ok(ModelDiff {
        namespace: namespace.into(),
        object: object.into(),
        name: name.into(),
        state,
        base_revision: base.and_then(|b| b.accepted.map(|(_, r)| r)),
        verdict,
        metrics: ids,
        changes,
    })
}

/// A model in the base that the new input no longer has: deleting it retires every id.
pub fn removed_model(namespace: &str, object: &str, base: &Base) -> ModelDiff {
    let retired: Vec<Named> = match base.accepted {
        Some((ids, _)) => ids
            .iter()
            .map(|m| Named {
                name: m.name.to_string(),
                id: Some(m.id.to_string()),
            })
            .collect(),
        None => (base.spec.definition.metrics.iter().flatten())
            .map(|m| Named {
                name: m.name.to_string(),
                id: None,
            })
            .collect(),
    };
    ModelDiff {
        namespace: namespace.into(),
        object: object.into(),
        name: base.name.into(),
        state: "removed",
        base_revision: base.accepted.map(|(_, r)| r),
        verdict: Verdict::Breaking,
        changes: vec![Change {
            verdict: Verdict::Breaking,
            what: "model removed".into(),
            subject: base.name.into(),
            detail: format!("deleting it retires its {} metric id(s)", retired.len()),
        }],
        metrics: MetricIds {
            retired,
            ..Default::default()
        },
    }
}

fn deprecation_text(d: &Deprecation) -> String {
    match (&d.replacement, &d.reason) {
        (Some(r), Some(why)) => format!("use {r:?} instead: {why}"),
        (Some(r), None) => format!("use {r:?} instead"),
        (None, Some(why)) => why.to_string(),
        (None, None) => "deprecated".into(),
    }
}

type Push<'a> = dyn FnMut(Verdict, &str, String, String) + 'a;

/// Expression (per dialect), datatype, description and deprecation changes of a metric that
/// keeps its id.
fn metric_changes(old: &Metric, new: &Metric, push: &mut Push) {
    expression_changes(
        &format!("metric {}", new.name),
        &old.expression,
        &new.expression,
        Verdict::Breaking,
        push,
    );
    if old.datatype != new.datatype {
        push(
            Verdict::Risky,
            "datatype changed",
            format!("metric {}", new.name),
            format!("{:?} → {:?}", old.datatype, new.datatype),
        );
    }
    if old.description != new.description || old.ai_context != new.ai_context {
        push(
            Verdict::Safe,
            "metric described",
            format!("metric {}", new.name),
            "description or aiContext changed".into(),
        );
    }
    if old.deprecated.is_some() && new.deprecated.is_none() {
        push(
            Verdict::Safe,
            "deprecation withdrawn",
            format!("metric {}", new.name),
            "no longer deprecated".into(),
        );
    }
}

/// Per dialect: added (safe), removed or changed (`changed` verdict). Whitespace-only edits are
/// reformatting, not a change of meaning.
fn expression_changes(
    subject: &str,
    old: &Expression,
    new: &Expression,
    changed: Verdict,
    push: &mut Push,
) {
    let dialects: BTreeSet<Dialect> = old
        .dialects
        .iter()
        .chain(new.dialects.iter())
        .map(|d| d.dialect)
        .collect();
    let text = |e: &Expression, d: Dialect| {
        e.dialects
            .iter()
            .find(|x| x.dialect == d)
            .map(|x| x.expression.to_string())
    };
    for d in dialects {
        match (text(old, d), text(new, d)) {
            (None, Some(e)) => push(
                Verdict::Safe,
                "dialect added",
                subject.into(),
                format!("{d:?}: {e}"),
            ),
            (Some(e), None) => push(
                changed,
                "dialect removed",
                subject.into(),
                format!("{d:?} was: {e}"),
            ),
            (Some(a), Some(b)) if a != b => {
                if squeeze(&a) == squeeze(&b) {
                    push(
                        Verdict::Safe,
                        "expression reformatted",
                        subject.into(),
                        format!("{d:?}: whitespace only"),
                    );
                } else {
                    push(
                        changed,
                        "expression changed",
                        subject.into(),
                        format!("{d:?}: {a} → {b}"),
                    );
                }
            }
            _ => {}
        }
    }
}

/// An expression with insignificant whitespace removed: runs outside quotes become one space,
/// kept only between two word characters (`SUM( x )` is `SUM(x)`; `'a  b'` stays as written).
fn squeeze(expr: &str) -> String {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::new();
    let (mut quote, mut pending) = (None::<char>, false);
    for c in expr.chars() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c.is_whitespace() => pending = true,
            None => {
                if pending && out.chars().last().is_some_and(word) && word(c) {
                    out.push(' ');
                }
                pending = false;
                if matches!(c, '\'' | '"' | '`') {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out
}

/// Whether any metric of `defs` names field `field` of dataset `dataset` (qualified by the
/// dataset, or bare).
fn metrics_using(defs: &[&Definition], dataset: &str, field: &str) -> Vec<String> {
    let mut out = BTreeSet::new();
    let names = [field.to_string()];
    for def in defs {
        for m in def.metrics.iter().flatten() {
            let uses = m.expression.dialects.iter().any(|d| {
                columns::scan(&d.expression, d.dialect).iter().any(|i| {
                    i.column_in(&names).is_some()
                        && i.qualifier.as_deref().is_none_or(|q| q == dataset)
                })
            });
            if uses {
                out.insert(m.name.to_string());
            }
        }
    }
    out.into_iter().collect()
}

fn dataset_changes(old: &Definition, new: &Definition, push: &mut Push) {
    let find =
        |def: &'_ Definition, name: &str| def.datasets.iter().find(|d| d.name == name).cloned();
    for ds in &new.datasets {
        match find(old, &ds.name) {
            None => push(
                Verdict::Safe,
                "dataset added",
                format!("dataset {}", ds.name),
                format!("bound to {}", ds.source),
            ),
            Some(before) => one_dataset(&before, ds, old, new, push),
        }
    }
    for ds in &old.datasets {
        if find(new, &ds.name).is_none() {
            let users: Vec<String> = (ds.fields.iter().flatten())
                .flat_map(|f| metrics_using(&[old], &ds.name, &f.name))
                .chain(qualified_users(old, &ds.name))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let (verdict, detail) = if users.is_empty() {
                (Verdict::Risky, format!("was bound to {}", ds.source))
            } else {
                (
                    Verdict::Breaking,
                    format!(
                        "was bound to {}; used by metric(s) {}",
                        ds.source,
                        users.join(", ")
                    ),
                )
            };
            push(
                verdict,
                "dataset removed",
                format!("dataset {}", ds.name),
                detail,
            );
        }
    }
}

/// Metrics whose expressions qualify a name by `dataset`.
fn qualified_users(def: &Definition, dataset: &str) -> Vec<String> {
    (def.metrics.iter().flatten())
        .filter(|m| {
            m.expression.dialects.iter().any(|d| {
                columns::scan(&d.expression, d.dialect)
                    .iter()
                    .any(|i| i.qualifier.as_deref() == Some(dataset))
            })
        })
        .map(|m| m.name.to_string())
        .collect()
}

fn one_dataset(
    old: &Dataset,
    new: &Dataset,
    old_def: &Definition,
    new_def: &Definition,
    push: &mut Push,
) {
    let subject = format!("dataset {}", new.name);
    if old.source != new.source {
        push(
            Verdict::Breaking,
            "source rebound",
            subject.clone(),
            format!("{} → {}", old.source, new.source),
        );
    }
    if old.primary_key != new.primary_key || old.unique_keys != new.unique_keys {
        push(
            Verdict::Risky,
            "keys changed",
            subject.clone(),
            "primaryKey or uniqueKeys changed".into(),
        );
    }
    let fields = |d: &Dataset| d.fields.iter().flatten().cloned().collect::<Vec<_>>();
    let (before, after) = (fields(old), fields(new));
    for f in &after {
        let subject = format!("field {}.{}", new.name, f.name);
        match before.iter().find(|b| b.name == f.name) {
            None => push(Verdict::Safe, "field added", subject, String::new()),
            Some(b) => {
                expression_changes(&subject, &b.expression, &f.expression, Verdict::Risky, push);
                if b.dimension != f.dimension || b.datatype != f.datatype {
                    push(
                        Verdict::Risky,
                        "field changed",
                        subject,
                        "dimension or datatype changed".into(),
                    );
                }
            }
        }
    }
    for b in &before {
        if after.iter().any(|f| f.name == b.name) {
            continue;
        }
        let users = metrics_using(&[old_def, new_def], &new.name, &b.name);
        let subject = format!("field {}.{}", new.name, b.name);
        if users.is_empty() {
            push(
                Verdict::Risky,
                "field removed",
                subject,
                "no metric uses it".into(),
            );
        } else {
            push(
                Verdict::Breaking,
                "field removed",
                subject,
                format!("used by metric(s) {}", users.join(", ")),
            );
        }
    }
}

fn relationship_changes(old: &Definition, new: &Definition, push: &mut Push) {
    let rels = |d: &Definition| {
        d.relationships
            .iter()
            .flatten()
            .cloned()
            .collect::<Vec<_>>()
    };
    let (before, after) = (rels(old), rels(new));
    for r in &after {
        let subject = format!("relationship {}", r.name);
        match before.iter().find(|b| b.name == r.name) {
            None => push(
                Verdict::Safe,
                "relationship added",
                subject,
                format!("{} → {}", r.from, r.to),
            ),
            Some(b)
                if (&b.from, &b.to, &b.from_columns, &b.to_columns)
                    != (&r.from, &r.to, &r.from_columns, &r.to_columns) =>
            {
                push(
                    Verdict::Risky,
                    "relationship changed",
                    subject,
                    format!(
                        "{}({}) → {}({}) is now {}({}) → {}({})",
                        b.from,
                        b.from_columns.join(","),
                        b.to,
                        b.to_columns.join(","),
                        r.from,
                        r.from_columns.join(","),
                        r.to,
                        r.to_columns.join(",")
                    ),
                )
            }
            Some(_) => {}
        }
    }
    for b in &before {
        if !after.iter().any(|r| r.name == b.name) {
            push(
                Verdict::Risky,
                "relationship removed",
                format!("relationship {}", b.name),
                "questions joining along it stop compiling".into(),
            );
        }
    }
}

#[cfg(test)]
#[path = "diff_tests.rs"]
mod tests;

//! The pure edges of a round (docs/design.md#a-check-round): what to probe, how the answers line up with the
//! declared registrations, what `RegistrationsCurrent` says, and the stale report (docs/design.md#stale-reports-and-on-demand-rounds).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::round::Observation;
use crate::catalog::observe::{Observations, Target};
use crate::catalog::{Probe, ProbeTarget};
use crate::crd::catalog::{Provider, Registration, RegistrationState, RegistrationStatus};
use crate::crd::conditions::{ConditionType, Desired, Reason, Status};
use crate::crd::policy::RegistrationKind;

/// The probe target of a declared registration in a catalog of `provider`; `None` for kinds
/// that provider does not hold (topics in SQL systems, tables and views in Kafka) and for
/// managed catalogs. Kafka topics are relations of its one schema, `default`.
pub fn registration_target(provider: Provider, r: &Registration) -> Option<ProbeTarget> {
    use RegistrationKind::*;
    // Iceberg REST catalogs hold namespaces (schemas), tables and views like SQL systems.
    let sql = matches!(
        provider,
        Provider::Postgresql | Provider::Mysql | Provider::IcebergRest
    );
    let kafka = provider == Provider::Kafka;
    match (r.kind, &r.schema) {
        (Schema, _) if sql || kafka => Some(ProbeTarget::schema(&r.name)),
        (Table | View, Some(schema)) if sql => Some(ProbeTarget::relation(schema, &r.name)),
        (Topic, Some(schema)) if kafka => Some(ProbeTarget::relation(schema, &r.name)),
        _ => None,
    }
}

/// Why a catalog of `provider` cannot hold a registration of `kind`.
fn foreign_kind(provider: Provider, kind: RegistrationKind) -> String {
    match provider {
        Provider::Kafka => format!(
            "a kafka catalog holds topics (and the schema \"default\"), not a {kind:?}; register it as kind Topic, or in a postgresql or mysql catalog"
        ),
        _ => format!(
            "a {} catalog holds schemas, tables and views, not a {kind:?}; register topics in a kafka catalog",
            serde_json::to_value(provider)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ),
    }
}

type Key<'a> = (RegistrationKind, Option<&'a str>, &'a str);

fn key_of_status(s: &RegistrationStatus) -> Key<'_> {
    (s.kind, s.schema.as_deref(), s.name.as_str())
}

/// Status entries in spec order: each declared registration keeps its recorded entry; new ones
/// start `Pending`; entries no longer declared are dropped.
pub fn align(spec: &[Registration], previous: &[RegistrationStatus]) -> Vec<RegistrationStatus> {
    let recorded: HashMap<Key<'_>, &RegistrationStatus> =
        previous.iter().map(|s| (key_of_status(s), s)).collect();
    spec.iter()
        .map(
            |r| match recorded.get(&(r.kind, r.schema.as_deref(), r.name.as_str())) {
                Some(s) => (*s).clone(),
                None => RegistrationStatus {
                    kind: r.kind,
                    schema: r.schema.clone(),
                    name: r.name.clone(),
                    id: None,
                    state: RegistrationState::Pending,
                    since: None,
                    renamed_to: None,
                    removed_at: None,
                    misses: None,
                    missing_since: None,
                    message: None,
                },
            },
        )
        .collect()
}

/// What one round probes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundPlan {
    /// Indices of the declared registrations this round checks (the policy's kinds).
    pub checked: Vec<usize>,
    /// Registrations of the policy's kinds whose names this catalog cannot have: never probed
    /// (a probe could fail the whole round), each with the reason.
    pub invalid: Vec<(usize, String)>,
    /// Distinct targets, sorted: checked registrations ∪ sources bound by accepted models.
    pub targets: Vec<Target>,
}

/// Plans a round over the aligned registrations and the model-bound sources `(target, id)`;
/// `invalid_reason` is the provider's judgement of a name.
pub fn plan(
    provider: Provider,
    spec: &[Registration],
    aligned: &[RegistrationStatus],
    kinds: &[RegistrationKind],
    sources: &[(ProbeTarget, String)],
    invalid_reason: &dyn Fn(&ProbeTarget) -> Option<String>,
) -> RoundPlan {
    let mut targets: BTreeMap<ProbeTarget, Vec<String>> = BTreeMap::new();
    let mut checked = Vec::new();
    let mut invalid = Vec::new();
    for (i, r) in spec.iter().enumerate() {
        if !kinds.contains(&r.kind) {
            continue;
        }
        let Some(t) = registration_target(provider, r) else {
            invalid.push((i, foreign_kind(provider, r.kind)));
            continue;
        };
        if let Some(why) = invalid_reason(&t) {
            invalid.push((i, why));
            continue;
        }
        checked.push(i);
        let ids = targets.entry(t).or_default();
        ids.extend(aligned[i].id.iter().cloned());
    }
    for (t, id) in sources {
        targets.entry(t.clone()).or_default().push(id.clone());
    }
    RoundPlan {
        checked,
        invalid,
        targets: targets
            .into_iter()
            .map(|(target, mut ids)| {
                ids.sort();
                ids.dedup();
                Target { target, ids }
            })
            .collect(),
    }
}

/// The targets without their recorded ids: ids recorded on another server are not looked up.
pub fn without_ids(targets: &[Target]) -> Vec<Target> {
    targets
        .iter()
        .map(|t| Target {
            target: t.target.clone(),
            ids: vec![],
        })
        .collect()
}

/// The classification input of one registration from what the catalog answered; `None` when
/// its target was not probed.
pub fn observation_of(
    provider: Provider,
    seen: &Observations,
    r: &Registration,
    s: &RegistrationStatus,
) -> Option<Observation> {
    let by_name = seen
        .by_name
        .get(&registration_target(provider, r)?)?
        .clone();
    let by_id = match (&by_name, &s.id) {
        (Probe::Absent, Some(id)) => seen.by_id.get(id).cloned().flatten(),
        _ => None,
    };
    Some(Observation { by_name, by_id })
}

/// `Table public.orders` / `Schema public`: how Events and conditions name a registration.
pub fn describe(s: &RegistrationStatus) -> String {
    match &s.schema {
        Some(schema) => format!("{:?} {schema}.{}", s.kind, s.name),
        None => format!("{:?} {}", s.kind, s.name),
    }
}

fn listed(entries: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text = entries
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if entries.len() > SHOWN {
        text.push_str(&format!(" and {} more", entries.len() - SHOWN));
    }
    text
}

/// `RegistrationsCurrent` from the recorded states: the most actionable problem first.
pub fn registrations_condition(states: &[RegistrationStatus]) -> Desired {
    let with = |state: RegistrationState| -> Vec<String> {
        states
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == state)
            .map(|(i, s)| match (&s.renamed_to, state) {
                (Some(to), RegistrationState::Renamed) => {
                    format!("spec.registrations[{i}] ({}, now {to})", describe(s))
                }
                _ => format!("spec.registrations[{i}] ({})", describe(s)),
            })
            .collect()
    };
    let removed = with(RegistrationState::Removed);
    let invalid = with(RegistrationState::Invalid);
    let stale = with(RegistrationState::Stale);
    let renamed = with(RegistrationState::Renamed);
    let pending = with(RegistrationState::Pending);
    let c = |status, reason: Reason, message: String| {
        Desired::new(ConditionType::RegistrationsCurrent, status, reason, message)
    };
    if !removed.is_empty() {
        c(
            Status::False,
            Reason::REMOVED_ENTRIES_IN_SPEC,
            format!(
                "{} removed by the reconcile policy: {}; delete these entries from spec.registrations (semops never edits spec)",
                removed.len(),
                listed(&removed)
            ),
        )
    } else if !invalid.is_empty() {
        c(
            Status::False,
            Reason::INVALID_REGISTRATIONS,
            format!(
                "{} registration(s) name objects this catalog cannot have: {}; fix the names in spec.registrations (status.registrations[].message says why)",
                invalid.len(),
                listed(&invalid)
            ),
        )
    } else if !stale.is_empty() {
        c(
            Status::False,
            Reason::STALE_REGISTRATIONS,
            format!(
                "{} registration(s) name objects that no longer exist: {}; recreate the objects or delete the entries",
                stale.len(),
                listed(&stale)
            ),
        )
    } else if !renamed.is_empty() {
        c(
            Status::False,
            Reason::RENAMED,
            format!(
                "{} registered object(s) were renamed: {}; update the names in spec.registrations",
                renamed.len(),
                listed(&renamed)
            ),
        )
    } else if !pending.is_empty() {
        c(
            Status::Unknown,
            Reason::NOT_CHECKED,
            format!(
                "{} registration(s) not checked yet: {}",
                pending.len(),
                listed(&pending)
            ),
        )
    } else {
        c(
            Status::True,
            Reason::ALL_LIVE,
            format!("all {} registration(s) exist", states.len()),
        )
    }
}

/// The stale report (docs/design.md#stale-reports-and-on-demand-rounds).
#[derive(Serialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaleReport {
    pub catalog: String,
    pub catalog_unreachable: bool,
    pub stale_schemas: Vec<StaleSchema>,
    pub stale_entities: Vec<StaleEntity>,
}

#[derive(Serialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaleSchema {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detected_at: Option<String>,
    pub removed: bool,
}

#[derive(Serialize, Clone, Debug, PartialEq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaleEntity {
    pub kind: RegistrationKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    pub name: String,
    pub state: RegistrationState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renamed_to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detected_at: Option<String>,
    pub removed: bool,
}

/// The report of a round's states: every registration that is not `Live` (or `Pending`), in spec
/// order. `unreachable` reports carry no entries (nothing is known this round).
pub fn report(catalog: &str, states: &[RegistrationStatus], unreachable: bool) -> StaleReport {
    let mut out = StaleReport {
        catalog: catalog.to_string(),
        catalog_unreachable: unreachable,
        stale_schemas: vec![],
        stale_entities: vec![],
    };
    if unreachable {
        return out;
    }
    for s in states {
        let removed = s.state == RegistrationState::Removed;
        let detected_at = s.since.as_ref().map(|t| t.0.to_string());
        if !matches!(
            s.state,
            RegistrationState::Stale | RegistrationState::Renamed | RegistrationState::Removed
        ) {
            continue;
        }
        if s.kind == RegistrationKind::Schema && s.state != RegistrationState::Renamed {
            out.stale_schemas.push(StaleSchema {
                name: s.name.clone(),
                detected_at: detected_at.clone(),
                removed,
            });
        }
        out.stale_entities.push(StaleEntity {
            kind: s.kind,
            schema: s.schema.clone(),
            name: s.name.clone(),
            state: s.state,
            renamed_to: s.renamed_to.clone(),
            detected_at,
            removed,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Found, ObjectType};

    fn reg(kind: RegistrationKind, schema: Option<&str>, name: &str) -> Registration {
        Registration {
            kind,
            schema: schema.map(str::to_string),
            name: name.into(),
            owner: None,
            tags: vec![],
            properties: Default::default(),
        }
    }

    fn spec() -> Vec<Registration> {
        use RegistrationKind::*;
        vec![
            reg(Schema, None, "public"),
            reg(Table, Some("public"), "employees"),
            reg(View, Some("public"), "v"),
            reg(Topic, Some("public"), "events"),
        ]
    }

    #[test]
    fn align_keeps_recorded_entries_adds_pending_ones_and_drops_undeclared_ones() {
        let spec = spec();
        let mut employees = align(&spec[1..2], &[])[0].clone();
        employees.state = RegistrationState::Stale;
        employees.id = Some("7".into());
        let mut gone = employees.clone();
        gone.name = "gone".into();
        let aligned = align(&spec, &[gone, employees.clone()]);
        assert_eq!(aligned.len(), 4);
        assert_eq!(aligned[1], employees);
        assert!(
            aligned
                .iter()
                .enumerate()
                .all(|(i, s)| i == 1 || s.state == RegistrationState::Pending)
        );
        assert!(aligned.iter().all(|s| s.name != "gone"));
    }

    #[test]
    fn a_plan_probes_the_policy_kinds_and_model_sources_once_each() {
        let spec = spec();
        let mut aligned = align(&spec, &[]);
        aligned[1].id = Some("pg:1".into());
        let sources = vec![
            (ProbeTarget::relation("public", "employees"), "pg:1".into()),
            (ProbeTarget::relation("public", "employees"), "pg:0".into()),
            (ProbeTarget::relation("sales", "orders"), "pg:2".into()),
        ];
        let p = plan(
            Provider::Postgresql,
            &spec,
            &aligned,
            &[RegistrationKind::Table],
            &sources,
            &|_| None,
        );
        assert_eq!(p.checked, vec![1], "Schema/View/Topic not in kinds");
        assert_eq!(p.invalid, vec![]);
        assert_eq!(
            p.targets,
            vec![
                Target {
                    target: ProbeTarget::relation("public", "employees"),
                    ids: vec!["pg:0".into(), "pg:1".into()]
                },
                Target {
                    target: ProbeTarget::relation("sales", "orders"),
                    ids: vec!["pg:2".into()]
                },
            ]
        );
    }

    #[test]
    fn names_the_provider_refuses_are_set_apart_and_never_probed() {
        let spec: Vec<Registration> = (0..101)
            .map(|i| {
                let name = if i == 40 {
                    "x".repeat(70)
                } else {
                    format!("t{i}")
                };
                reg(RegistrationKind::Table, Some("public"), &name)
            })
            .collect();
        let aligned = align(&spec, &[]);
        let too_long = |t: &ProbeTarget| match t {
            ProbeTarget::Relation { name, .. } if name.len() > 63 => Some("too long".to_string()),
            _ => None,
        };
        let p = plan(
            Provider::Postgresql,
            &spec,
            &aligned,
            &[RegistrationKind::Table],
            &[],
            &too_long,
        );
        assert_eq!(p.invalid, vec![(40, "too long".to_string())]);
        assert_eq!(p.checked.len(), 100);
        assert!(!p.checked.contains(&40));
        assert_eq!(p.targets.len(), 100, "the invalid name is never probed");
    }

    #[test]
    fn observations_give_the_id_lookup_only_for_absent_names() {
        let spec = spec();
        let mut s = align(&spec, &[]);
        s[1].id = Some("old".into());
        let mut o = Observations::default();
        o.by_name
            .insert(ProbeTarget::relation("public", "employees"), Probe::Absent);
        let moved = Found {
            target: ProbeTarget::relation("public", "staff"),
            object_type: ObjectType::Table,
        };
        o.by_id.insert("old".into(), Some(moved.clone()));
        let obs = observation_of(Provider::Postgresql, &o, &spec[1], &s[1]).unwrap();
        assert_eq!(obs.by_id, Some(moved));
        assert_eq!(
            observation_of(Provider::Postgresql, &o, &spec[0], &s[0]),
            None,
            "not probed"
        );
    }

    #[test]
    fn the_condition_names_the_most_actionable_problem_and_the_entries() {
        use RegistrationState::*;
        let spec = spec();
        let with = |states: &[RegistrationState]| {
            let mut a = align(&spec, &[]);
            for (s, st) in a.iter_mut().zip(states) {
                s.state = *st;
            }
            registrations_condition(&a)
        };
        let cases = [
            (vec![Live, Live, Live, Live], Status::True, "AllLive"),
            (
                vec![Live, Pending, Live, Live],
                Status::Unknown,
                "NotChecked",
            ),
            (vec![Renamed, Live, Live, Live], Status::False, "Renamed"),
            (
                vec![Renamed, Stale, Live, Live],
                Status::False,
                "StaleRegistrations",
            ),
            (
                vec![Removed, Stale, Renamed, Live],
                Status::False,
                "RemovedEntriesInSpec",
            ),
        ];
        for (states, status, reason) in cases {
            let c = with(&states);
            assert_eq!(
                (c.status, c.reason.as_str()),
                (status, reason),
                "{states:?}"
            );
        }
        let c = with(&[Live, Removed, Live, Live]);
        assert!(
            c.message
                .contains("spec.registrations[1] (Table public.employees)"),
            "{}",
            c.message
        );
    }

    #[test]
    fn each_provider_probes_only_the_kinds_it_holds() {
        use Provider::*;
        use RegistrationKind::*;
        let schema = reg(Schema, None, "public");
        let table = reg(Table, Some("public"), "t");
        let view = reg(View, Some("public"), "v");
        let topic = reg(Topic, Some("default"), "events");
        let rel = |s: &str, n: &str| Some(ProbeTarget::relation(s, n));
        let cases = [
            (Postgresql, &schema, Some(ProbeTarget::schema("public"))),
            (Postgresql, &table, rel("public", "t")),
            (Postgresql, &view, rel("public", "v")),
            (Postgresql, &topic, None),
            (Mysql, &table, rel("public", "t")),
            (Mysql, &topic, None),
            (Kafka, &schema, Some(ProbeTarget::schema("public"))),
            (Kafka, &topic, rel("default", "events")),
            (Kafka, &table, None),
            (Kafka, &view, None),
            (Managed, &schema, None),
            (Managed, &table, None),
        ];
        for (provider, r, target) in cases {
            assert_eq!(
                registration_target(provider, r),
                target,
                "{provider:?} {r:?}"
            );
        }
        assert_eq!(
            registration_target(Postgresql, &reg(Table, None, "t")),
            None
        );
    }

    #[test]
    fn kinds_a_provider_does_not_hold_are_invalid_with_where_they_belong() {
        use RegistrationKind::*;
        let spec = spec();
        let aligned = align(&spec, &[]);
        let all = [Schema, Table, View, Topic];
        let sql = plan(Provider::Postgresql, &spec, &aligned, &all, &[], &|_| None);
        assert_eq!(sql.checked, vec![0, 1, 2]);
        assert_eq!(sql.invalid.len(), 1);
        assert_eq!(sql.invalid[0].0, 3);
        assert!(
            sql.invalid[0].1.contains("kafka catalog"),
            "{}",
            sql.invalid[0].1
        );
        let kafka = plan(Provider::Kafka, &spec, &aligned, &all, &[], &|_| None);
        assert_eq!(kafka.checked, vec![0, 3]);
        assert_eq!(
            kafka.invalid.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(
            kafka.invalid[0].1.contains("register it as kind Topic"),
            "{}",
            kafka.invalid[0].1
        );
    }

    #[test]
    fn targets_from_another_server_keep_their_names_and_lose_their_ids() {
        let targets = vec![
            Target {
                target: ProbeTarget::schema("public"),
                ids: vec!["pg:1".into()],
            },
            Target {
                target: ProbeTarget::relation("public", "t"),
                ids: vec!["pg:2".into(), "pg:3".into()],
            },
        ];
        let bare = without_ids(&targets);
        assert_eq!(
            bare.iter().map(|t| &t.target).collect::<Vec<_>>(),
            targets.iter().map(|t| &t.target).collect::<Vec<_>>()
        );
        assert!(bare.iter().all(|t| t.ids.is_empty()));
    }

    #[test]
    fn long_lists_show_five_entries_and_count_the_rest() {
        let entries = |n: usize| (0..n).map(|i| format!("e{i}")).collect::<Vec<_>>();
        let cases = [
            (0, ""),
            (5, "e0, e1, e2, e3, e4"),
            (6, "e0, e1, e2, e3, e4 and 1 more"),
            (12, "e0, e1, e2, e3, e4 and 7 more"),
        ];
        for (n, text) in cases {
            assert_eq!(listed(&entries(n)), text, "{n} entries");
        }
    }

    #[test]
    fn a_renamed_entry_names_its_new_name() {
        let spec = spec();
        let mut a = align(&spec, &[]);
        for s in a.iter_mut() {
            s.state = RegistrationState::Live;
        }
        a[1].state = RegistrationState::Renamed;
        a[1].renamed_to = Some("public.staff".into());
        let c = registrations_condition(&a);
        assert!(
            c.message
                .contains("spec.registrations[1] (Table public.employees, now public.staff)"),
            "{}",
            c.message
        );
    }

    #[test]
    fn the_report_lists_non_live_entries_and_schemas_separately() {
        use RegistrationState::*;
        let spec = spec();
        let mut a = align(&spec, &[]);
        a[0].state = Removed;
        a[1].state = Stale;
        a[2].state = Renamed;
        a[2].renamed_to = Some("public.v2".into());
        let r = report("hr", &a, false);
        assert_eq!(r.stale_schemas.len(), 1);
        assert!(r.stale_schemas[0].removed);
        let states: Vec<_> = r.stale_entities.iter().map(|e| e.state).collect();
        assert_eq!(states, vec![Removed, Stale, Renamed]);
        let down = report("hr", &a, true);
        assert!(down.catalog_unreachable && down.stale_entities.is_empty());
    }
}

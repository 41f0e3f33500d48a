//! The pure core of a check round (DESIGN 5.1, 5.4): from the recorded states and what the
//! catalog answered, the next state of every declared registration, the removals AutoRemove may
//! make (capped), and the transitions worth an Event. The caller guarantees the round saw no
//! infrastructure failure; with one, nothing here is called and nothing changes.

use crate::catalog::{Found, Probe, ProbeTarget};
use crate::crd::catalog::{RegistrationState, RegistrationStatus};
use crate::crd::policy::PolicyMode;

/// What the catalog said about one declared registration this round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// The single-object probe by exact name.
    pub by_name: Probe,
    /// For an absent name with a recorded id: where that id lives now, if anywhere.
    pub by_id: Option<Found>,
}

/// A change worth telling users about (an Event each, only on the transition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Warning `StaleRegistration`.
    BecameStale { index: usize },
    /// Normal `RegistrationRenamed`: the object lives on under `to`; owner and tags survive.
    Renamed { index: usize, to: String },
    /// Warning `RegistrationReplaced`: the name now belongs to a different object.
    Replaced { index: usize },
    /// Normal `RegistrationRemoved` (AutoRemove, through the single removal path).
    Removed { index: usize },
    /// A removed registration's object appeared again: it registers again as new.
    Reappeared { index: usize },
}

impl Transition {
    /// The position of the registration (in the round's checked list) it is about.
    pub fn index(&self) -> usize {
        match self {
            Transition::BecameStale { index }
            | Transition::Renamed { index, .. }
            | Transition::Replaced { index }
            | Transition::Removed { index }
            | Transition::Reappeared { index } => *index,
        }
    }
}

/// Outcome of classifying one round.
#[derive(Clone, Debug, PartialEq)]
pub struct RoundOutcome {
    pub states: Vec<RegistrationStatus>,
    pub transitions: Vec<Transition>,
    pub stale: usize,
    pub renamed: usize,
    pub removed: usize,
}

fn label(t: &ProbeTarget) -> String {
    match t {
        ProbeTarget::Schema { name } => name.clone(),
        ProbeTarget::Relation { schema, name } => format!("{schema}.{name}"),
    }
}

/// Next states of the declared registrations (`previous[i]` and `seen[i]` describe entry `i`).
/// `now` stamps `since` on transitions; `max_removals` caps AutoRemove in spec order.
pub fn classify(
    previous: &[RegistrationStatus],
    seen: &[Observation],
    mode: PolicyMode,
    max_removals: usize,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> RoundOutcome {
    assert_eq!(
        previous.len(),
        seen.len(),
        "one observation per registration"
    );
    let mut out = RoundOutcome {
        states: Vec::with_capacity(previous.len()),
        transitions: vec![],
        stale: 0,
        renamed: 0,
        removed: 0,
    };
    for (index, (prev, obs)) in previous.iter().zip(seen).enumerate() {
        let mut next = prev.clone();
        let moved = |next: &mut RegistrationStatus, state: RegistrationState| {
            if next.state != state {
                next.state = state;
                next.since = Some(now.clone());
            }
        };
        match (&obs.by_name, prev.state) {
            // A removed registration stays removed until its object is back; then it is new.
            (Probe::Present { native_id, .. }, RegistrationState::Removed) => {
                next.id = Some(native_id.clone());
                next.removed_at = None;
                next.renamed_to = None;
                moved(&mut next, RegistrationState::Live);
                out.transitions.push(Transition::Reappeared { index });
            }
            (Probe::Absent, RegistrationState::Removed) => {}
            (Probe::Present { native_id, .. }, _) => {
                if prev.id.as_ref().is_some_and(|old| old != native_id) {
                    out.transitions.push(Transition::Replaced { index });
                }
                next.id = Some(native_id.clone());
                next.renamed_to = None;
                moved(&mut next, RegistrationState::Live);
            }
            (Probe::Absent, _) => match &obs.by_id {
                // The recorded id lives on under another name: renamed, never stale.
                Some(found) => {
                    let to = label(&found.target);
                    if prev.state != RegistrationState::Renamed
                        || prev.renamed_to.as_deref() != Some(to.as_str())
                    {
                        out.transitions.push(Transition::Renamed {
                            index,
                            to: to.clone(),
                        });
                    }
                    next.renamed_to = Some(to);
                    moved(&mut next, RegistrationState::Renamed);
                    out.renamed += 1;
                }
                None => {
                    if prev.state != RegistrationState::Stale {
                        out.transitions.push(Transition::BecameStale { index });
                    }
                    next.renamed_to = None;
                    moved(&mut next, RegistrationState::Stale);
                    out.stale += 1;
                }
            },
        }
        out.states.push(next);
    }
    if mode == PolicyMode::AutoRemove {
        for index in (0..out.states.len())
            .filter(|&i| out.states[i].state == RegistrationState::Stale)
            .take(max_removals)
            .collect::<Vec<_>>()
        {
            let s = &mut out.states[index];
            s.state = RegistrationState::Removed;
            s.since = Some(now.clone());
            s.removed_at = Some(now.clone());
            out.transitions.push(Transition::Removed { index });
            out.removed += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ObjectType;
    use crate::crd::policy::RegistrationKind;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1000).unwrap())
    }

    fn reg(name: &str, id: Option<&str>, state: RegistrationState) -> RegistrationStatus {
        RegistrationStatus {
            kind: RegistrationKind::Table,
            schema: Some("public".into()),
            name: name.into(),
            id: id.map(str::to_string),
            state,
            since: None,
            renamed_to: None,
            removed_at: None,
        }
    }

    fn present(id: &str) -> Observation {
        Observation {
            by_name: Probe::Present {
                object_type: ObjectType::Table,
                native_id: id.into(),
            },
            by_id: None,
        }
    }

    fn absent(moved_to: Option<&str>) -> Observation {
        Observation {
            by_name: Probe::Absent,
            by_id: moved_to.map(|n| Found {
                target: ProbeTarget::relation("public", n),
                object_type: ObjectType::Table,
            }),
        }
    }

    #[test]
    fn each_answer_maps_to_its_state_and_event() {
        use RegistrationState::*;
        let previous = vec![
            reg("live", Some("1"), Live),
            reg("new", None, Live),
            reg("replaced", Some("3"), Live),
            reg("renamed", Some("4"), Live),
            reg("dropped", Some("5"), Live),
            reg("still_stale", Some("6"), Stale),
            reg("removed_back", Some("7"), Removed),
            reg("removed_gone", Some("8"), Removed),
        ];
        let seen = vec![
            present("1"),
            present("2"),
            present("9"),
            absent(Some("renamed_new")),
            absent(None),
            absent(None),
            present("10"),
            absent(None),
        ];
        let out = classify(&previous, &seen, PolicyMode::ReportOnly, 50, &now());
        let states: Vec<(RegistrationState, Option<&str>)> = out
            .states
            .iter()
            .map(|s| (s.state, s.id.as_deref()))
            .collect();
        assert_eq!(
            states,
            vec![
                (Live, Some("1")),
                (Live, Some("2")),
                (Live, Some("9")),
                (Renamed, Some("4")),
                (Stale, Some("5")),
                (Stale, Some("6")),
                (Live, Some("10")),
                (Removed, Some("8"))
            ]
        );
        assert_eq!(
            out.states[3].renamed_to.as_deref(),
            Some("public.renamed_new")
        );
        assert_eq!(
            out.transitions,
            vec![
                Transition::Replaced { index: 2 },
                Transition::Renamed {
                    index: 3,
                    to: "public.renamed_new".into()
                },
                Transition::BecameStale { index: 4 },
                Transition::Reappeared { index: 6 },
            ],
            "a registration already stale warns no more"
        );
        assert_eq!(
            (out.stale, out.renamed, out.removed),
            (2, 1, 0),
            "ReportOnly never removes"
        );
        assert_eq!(
            out.states[0].since, None,
            "an unchanged state keeps its time"
        );
    }

    #[test]
    fn auto_remove_takes_only_stale_entries_capped_in_spec_order_and_never_renamed_ones() {
        let previous: Vec<_> = (0..200)
            .map(|i| {
                reg(
                    &format!("t{i}"),
                    Some(&i.to_string()),
                    RegistrationState::Live,
                )
            })
            .collect();
        let mut seen: Vec<_> = (0..200).map(|_| absent(None)).collect();
        seen[0] = absent(Some("moved"));
        let out = classify(&previous, &seen, PolicyMode::AutoRemove, 50, &now());
        assert_eq!(out.removed, 50);
        assert_eq!(
            out.states[0].state,
            RegistrationState::Renamed,
            "renamed is never removed"
        );
        let removed: Vec<usize> = out
            .states
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == RegistrationState::Removed)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(removed, (1..=50).collect::<Vec<_>>());
        assert!(out.states[1].removed_at.is_some());
        assert_eq!(
            out.states[51].state,
            RegistrationState::Stale,
            "the rest waits for the next round"
        );
    }
}

//! The pure core of a check round (docs/design.md#what-stale-means, docs/design.md#a-check-round): from the recorded states and what the
//! catalog answered, the next state of every declared registration, the removals AutoRemove may
//! make (capped), and the transitions worth an Event. The caller guarantees the round saw no
//! infrastructure failure; with one, nothing here is called and nothing changes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::catalog::{Found, Probe, ProbeTarget};
use crate::crd::catalog::{RegistrationState, RegistrationStatus, RemovalWindow};
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

/// When AutoRemove may withdraw a missing object (the policy's `removeAfter` and cap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemovalRule {
    /// Removals left in the current window (`maxRemovalsPerRound` per interval).
    pub budget: usize,
    /// Consecutive successful rounds that must have found it missing.
    pub misses: u32,
    /// How long since the first of those rounds.
    pub grace: std::time::Duration,
}

impl RemovalRule {
    /// Removal on the first round that finds an object missing (tests, drills).
    pub fn immediate(budget: usize) -> Self {
        Self {
            budget,
            misses: 1,
            grace: std::time::Duration::ZERO,
        }
    }

    /// Whether a Stale registration has been missing long enough to be withdrawn at `now`.
    pub fn due(&self, s: &RegistrationStatus, now: &Time) -> bool {
        let misses = s.misses.unwrap_or(0).max(0) as u64;
        let since = s.missing_since.as_ref().unwrap_or(now);
        let missing_for = since.0.duration_until(now.0);
        misses >= u64::from(self.misses)
            && std::time::Duration::try_from(missing_for).unwrap_or_default() >= self.grace
    }
}

/// The removal budget left at `now`: `cap` per `interval`, counted in the persisted window (so
/// rounds requested on demand cannot multiply the cap). Returns the budget and the window to
/// record when `removed` more are withdrawn this round.
pub fn removal_budget(
    window: Option<&RemovalWindow>,
    cap: usize,
    interval: std::time::Duration,
    now: &Time,
) -> (usize, impl Fn(usize) -> Option<RemovalWindow> + use<>) {
    let current = window.filter(|w| {
        let age = w.started_at.0.duration_until(now.0);
        // A window starting in the future (clock skew, hand edits) counts as current.
        std::time::Duration::try_from(age).map_or(true, |age| age < interval)
    });
    let (started_at, used) = match current {
        Some(w) => (w.started_at.clone(), w.removed.max(0) as usize),
        None => (now.clone(), 0),
    };
    let kept = current.cloned();
    let budget = cap.saturating_sub(used);
    (budget, move |removed: usize| {
        if removed == 0 {
            kept.clone()
        } else {
            Some(RemovalWindow {
                started_at: started_at.clone(),
                removed: (used + removed) as i64,
            })
        }
    })
}

/// How a round judges what it saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    pub mode: PolicyMode,
    pub removal: RemovalRule,
    /// Whether recorded ids come from the server answering now. When not (first round with a
    /// known server, an adopted failover), a name found under another id is re-recorded
    /// quietly, not a replacement.
    pub same_server: bool,
}

/// Next states of the declared registrations (`previous[i]` and `seen[i]` describe entry `i`).
/// `now` stamps `since` on transitions; AutoRemove withdraws, in spec order and within the
/// rule's budget, only Stale entries missing for the rule's rounds and grace.
pub fn classify(
    previous: &[RegistrationStatus],
    seen: &[Observation],
    rules: &Rules,
    now: &Time,
) -> RoundOutcome {
    let (mode, rule) = (rules.mode, rules.removal);
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
        // Whatever else happens, a found object is not missing.
        let found = |next: &mut RegistrationStatus| {
            next.misses = None;
            next.missing_since = None;
            next.message = None;
        };
        match (&obs.by_name, prev.state) {
            // A removed registration stays removed until its object is back; then it is new.
            (Probe::Present { native_id, .. }, RegistrationState::Removed) => {
                next.id = Some(native_id.clone());
                next.removed_at = None;
                next.renamed_to = None;
                found(&mut next);
                moved(&mut next, RegistrationState::Live);
                out.transitions.push(Transition::Reappeared { index });
            }
            (Probe::Absent, RegistrationState::Removed) => {}
            (Probe::Present { native_id, .. }, _) => {
                if rules.same_server && prev.id.as_ref().is_some_and(|old| old != native_id) {
                    out.transitions.push(Transition::Replaced { index });
                }
                next.id = Some(native_id.clone());
                next.renamed_to = None;
                found(&mut next);
                moved(&mut next, RegistrationState::Live);
            }
            (Probe::Absent, _) => match &obs.by_id {
                // The recorded id lives on under another name: renamed, never stale.
                Some(f) => {
                    let to = label(&f.target);
                    if prev.state != RegistrationState::Renamed
                        || prev.renamed_to.as_deref() != Some(to.as_str())
                    {
                        out.transitions.push(Transition::Renamed {
                            index,
                            to: to.clone(),
                        });
                    }
                    next.renamed_to = Some(to);
                    found(&mut next);
                    moved(&mut next, RegistrationState::Renamed);
                    out.renamed += 1;
                }
                None => {
                    let was_stale = prev.state == RegistrationState::Stale;
                    if !was_stale {
                        out.transitions.push(Transition::BecameStale { index });
                    }
                    next.renamed_to = None;
                    next.message = None;
                    next.misses = Some(if was_stale {
                        prev.misses.unwrap_or(0) + 1
                    } else {
                        1
                    });
                    next.missing_since = match (was_stale, &prev.missing_since) {
                        (true, Some(t)) => Some(t.clone()),
                        _ => Some(now.clone()),
                    };
                    moved(&mut next, RegistrationState::Stale);
                    out.stale += 1;
                }
            },
        }
        out.states.push(next);
    }
    if mode == PolicyMode::AutoRemove {
        for index in (0..out.states.len())
            .filter(|&i| {
                out.states[i].state == RegistrationState::Stale && rule.due(&out.states[i], now)
            })
            .take(rule.budget)
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

    fn now() -> Time {
        at(1000)
    }

    fn at(second: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(second).unwrap())
    }

    fn rules(mode: PolicyMode, removal: RemovalRule) -> Rules {
        Rules {
            mode,
            removal,
            same_server: true,
        }
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
            misses: None,
            missing_since: None,
            message: None,
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
        let out = classify(
            &previous,
            &seen,
            &rules(PolicyMode::ReportOnly, RemovalRule::immediate(50)),
            &now(),
        );
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
    fn a_rename_is_announced_once_per_new_name() {
        use RegistrationState::*;
        let renamed_to = |to: Option<&str>| {
            let mut r = reg(
                "orders",
                Some("4"),
                if to.is_some() { Renamed } else { Live },
            );
            r.renamed_to = to.map(str::to_string);
            r
        };
        // (recorded renamed_to, where the id lives now, announced?)
        let cases = [
            (None, "orders_v2", true),
            (Some("public.orders_v2"), "orders_v2", false),
            (Some("public.orders_v2"), "orders_v3", true),
        ];
        for (before, now_at, announced) in cases {
            let out = classify(
                &[renamed_to(before)],
                &[absent(Some(now_at))],
                &rules(PolicyMode::ReportOnly, RemovalRule::immediate(1)),
                &now(),
            );
            let expected = format!("public.{now_at}");
            assert_eq!(out.states[0].renamed_to.as_deref(), Some(expected.as_str()));
            assert_eq!(
                out.transitions
                    == vec![Transition::Renamed {
                        index: 0,
                        to: expected.clone()
                    }],
                announced,
                "{before:?} -> {now_at}: {:?}",
                out.transitions
            );
        }
    }

    #[test]
    fn every_transition_names_its_registration() {
        let cases = [
            Transition::BecameStale { index: 3 },
            Transition::Renamed {
                index: 5,
                to: "x".into(),
            },
            Transition::Replaced { index: 7 },
            Transition::Removed { index: 11 },
            Transition::Reappeared { index: 13 },
        ];
        let indices: Vec<usize> = cases.iter().map(Transition::index).collect();
        assert_eq!(indices, vec![3, 5, 7, 11, 13]);
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
        let out = classify(
            &previous,
            &seen,
            &rules(PolicyMode::AutoRemove, RemovalRule::immediate(50)),
            &now(),
        );
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

    #[test]
    fn removal_waits_for_the_misses_and_the_grace_and_a_found_object_starts_over() {
        let rule = RemovalRule {
            budget: 50,
            misses: 2,
            grace: std::time::Duration::from_secs(3600),
        };
        let auto = rules(PolicyMode::AutoRemove, rule);
        let mut states = vec![reg("t", Some("1"), RegistrationState::Live)];
        // (second, present?, expected state, expected misses)
        let steps = [
            (1000, false, RegistrationState::Stale, Some(1)),
            (1600, false, RegistrationState::Stale, Some(2)), // 2 misses in 10 min: grace not over
            (2000, true, RegistrationState::Live, None),      // back: the count starts over
            (2100, false, RegistrationState::Stale, Some(1)),
            (5800, false, RegistrationState::Removed, Some(2)), // 2 misses over 3700 s
        ];
        for (i, (second, present_now, want, misses)) in steps.into_iter().enumerate() {
            let seen = if present_now {
                present("1")
            } else {
                absent(None)
            };
            let out = classify(&states, &[seen], &auto, &at(second));
            assert_eq!(
                (out.states[0].state, out.states[0].misses),
                (want, misses),
                "step {i}"
            );
            states = out.states;
        }
        // The grace alone is not enough: one miss long ago is still one miss.
        let mut once = reg("t", Some("1"), RegistrationState::Stale);
        once.misses = Some(1);
        once.missing_since = Some(at(0));
        assert!(!rule.due(&once, &at(100_000)));
        once.misses = Some(2);
        assert!(rule.due(&once, &at(100_000)));
        assert_eq!(
            states[0].missing_since,
            Some(at(2100)),
            "the grace counts from the first miss of the current run"
        );
    }

    #[test]
    fn ids_from_another_server_are_re_recorded_without_a_replacement() {
        let previous = vec![reg("t", Some("old-server:1"), RegistrationState::Live)];
        let other = Rules {
            same_server: false,
            ..rules(PolicyMode::AutoRemove, RemovalRule::immediate(50))
        };
        let out = classify(&previous, &[present("new-server:7")], &other, &now());
        assert_eq!(out.transitions, vec![]);
        assert_eq!(out.states[0].id.as_deref(), Some("new-server:7"));
    }

    #[test]
    fn the_removal_cap_counts_per_interval_not_per_round() {
        let hour = std::time::Duration::from_secs(3600);
        // (window, now, budget, window after removing 10)
        let w = |start: i64, removed: i64| RemovalWindow {
            started_at: at(start),
            removed,
        };
        let cases = [
            (None, 1000, 50, Some(w(1000, 10))),
            (Some(w(1000, 10)), 1500, 40, Some(w(1000, 20))),
            (Some(w(1000, 50)), 4599, 0, Some(w(1000, 60))),
            (Some(w(1000, 50)), 4600, 50, Some(w(4600, 10))), // a new interval
            (Some(w(9000, 50)), 4600, 0, Some(w(9000, 60))),  // a window in the future holds
            (Some(w(1000, -5)), 1500, 50, Some(w(1000, 10))), // hand-edited garbage
        ];
        for (i, (window, now_s, budget, after)) in cases.into_iter().enumerate() {
            let (got, record) = removal_budget(window.as_ref(), 50, hour, &at(now_s));
            assert_eq!(got, budget, "case {i}");
            assert_eq!(record(10), after, "case {i}");
            assert_eq!(
                record(0),
                window.clone().filter(|_| i != 3),
                "case {i}: nothing removed keeps the window"
            );
        }
    }
}

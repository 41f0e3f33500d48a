//! Jittered periods (docs/design.md#scheduling: "a random rest for each visit"): `interval * (1 ± jitter)`.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// `interval * (1 + jitter * (2u - 1))` for `u` uniform in [0, 1): uniform over
/// `[interval * (1 - jitter), interval * (1 + jitter))`.
pub fn jittered(interval: Duration, jitter: f64, u: f64) -> Duration {
    let jitter = jitter.clamp(0.0, 0.999);
    let u = u.clamp(0.0, 1.0);
    interval.mul_f64(1.0 + jitter * (2.0 * u - 1.0))
}

/// The first visit of a new schedule: a uniform random point of one interval, so catalogs
/// created (or enabled) together are not probed together.
pub fn first_visit(interval: Duration, u: f64) -> Duration {
    interval.mul_f64(u.clamp(0.0, 1.0))
}

/// How soon a round that found the catalog unreachable is retried (never later than the
/// interval).
pub const RETRY_UNREACHABLE: Duration = Duration::from_secs(60);

/// The periodic part of a Catalog's effective policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Periodic {
    pub enabled: bool,
    pub interval: Duration,
    pub jitter: f64,
}

/// What started a round; echoed in `status.lastCheck.trigger`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    Periodic,
    Annotation(String),
    Api,
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trigger::Periodic => f.write_str("periodic"),
            Trigger::Annotation(token) => write!(f, "annotation:{token}"),
            Trigger::Api => f.write_str("api"),
        }
    }
}

/// What a Catalog's schedule says now.
#[derive(Clone, Debug, PartialEq)]
pub enum Visit {
    /// Run a round now.
    Now(Trigger),
    /// Start (or restart) the schedule: persist this as `nextCheckAt`.
    Schedule(Timestamp),
    /// Wait for the persisted `nextCheckAt`.
    Wait(Timestamp),
    /// Periodic checks are off (on-demand checks still work).
    Off,
}

/// Decides the next visit from the persisted schedule. An unanswered annotation token runs at
/// once (on-demand always works); a persisted time later than one full jittered interval from now
/// means the interval was shortened, and the schedule starts over rather than waiting it out.
pub fn next_visit(
    periodic: Periodic,
    next_check_at: Option<Timestamp>,
    requested: Option<&str>,
    answered: Option<&str>,
    now: Timestamp,
    u: f64,
) -> Visit {
    if let Some(token) = requested
        && Some(token) != answered
    {
        return Visit::Now(Trigger::Annotation(token.to_string()));
    }
    if !periodic.enabled {
        return Visit::Off;
    }
    let restart = || {
        Visit::Schedule(
            now.checked_add(first_visit(periodic.interval, u))
                .unwrap_or(now),
        )
    };
    let latest = now
        .checked_add(
            periodic
                .interval
                .mul_f64(1.0 + periodic.jitter.clamp(0.0, 0.999)),
        )
        .unwrap_or(now);
    match next_check_at {
        None => restart(),
        Some(at) if at > latest => restart(),
        Some(at) if at <= now => Visit::Now(Trigger::Periodic),
        Some(at) => Visit::Wait(at),
    }
}

/// `nextCheckAt` after a round that finished at `finished`: one jittered interval later, or a
/// jittered retry when the catalog could not answer — about a minute, doubling while failures
/// repeat (`previous_retry`: the last failed round's wait), never longer than the interval, so a
/// catalog that stays broken costs one status write per interval, not one per minute. None
/// while periodic checks are off.
pub fn after_round(
    periodic: Periodic,
    finished: Timestamp,
    unreachable: bool,
    previous_retry: Option<Duration>,
    u: f64,
) -> Option<Timestamp> {
    if !periodic.enabled {
        return None;
    }
    let base = if unreachable {
        previous_retry
            .map_or(RETRY_UNREACHABLE, |d| d.saturating_mul(2))
            .max(RETRY_UNREACHABLE)
            .min(periodic.interval)
    } else {
        periodic.interval
    };
    finished
        .checked_add(jittered(base, periodic.jitter, u))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    const HOUR: Periodic = Periodic {
        enabled: true,
        interval: Duration::from_secs(3600),
        jitter: 0.2,
    };

    #[test]
    fn triggers_are_echoed_as_status_shows_them() {
        assert_eq!(Trigger::Periodic.to_string(), "periodic");
        assert_eq!(
            Trigger::Annotation("t1".into()).to_string(),
            "annotation:t1"
        );
        assert_eq!(Trigger::Api.to_string(), "api");
    }

    #[test]
    fn next_visit_table() {
        let now = at(100_000);
        let off = Periodic {
            enabled: false,
            ..HOUR
        };
        type Case<'a> = (
            &'a str,
            Periodic,
            Option<Timestamp>,
            Option<&'a str>,
            Option<&'a str>,
            Visit,
        );
        let cases: Vec<Case> = vec![
            (
                "new schedule",
                HOUR,
                None,
                None,
                None,
                Visit::Schedule(at(101_800)),
            ),
            (
                "not due",
                HOUR,
                Some(at(100_500)),
                None,
                None,
                Visit::Wait(at(100_500)),
            ),
            (
                "due",
                HOUR,
                Some(at(100_000)),
                None,
                None,
                Visit::Now(Trigger::Periodic),
            ),
            (
                "overdue after a restart",
                HOUR,
                Some(at(50)),
                None,
                None,
                Visit::Now(Trigger::Periodic),
            ),
            (
                "interval shortened",
                HOUR,
                Some(at(100_000 + 4321 + 1)),
                None,
                None,
                Visit::Schedule(at(101_800)),
            ),
            (
                "at the far edge of the jitter",
                HOUR,
                Some(at(100_000 + 4320)),
                None,
                None,
                Visit::Wait(at(104_320)),
            ),
            ("disabled", off, Some(at(50)), None, None, Visit::Off),
            (
                "a new token runs even when disabled",
                off,
                None,
                Some("t1"),
                None,
                Visit::Now(Trigger::Annotation("t1".into())),
            ),
            (
                "an answered token does not run again",
                HOUR,
                Some(at(100_500)),
                Some("t1"),
                Some("t1"),
                Visit::Wait(at(100_500)),
            ),
            (
                "a changed token runs",
                HOUR,
                Some(at(100_500)),
                Some("t2"),
                Some("t1"),
                Visit::Now(Trigger::Annotation("t2".into())),
            ),
        ];
        for (name, p, next, req, ans, want) in cases {
            assert_eq!(next_visit(p, next, req, ans, now, 0.5), want, "{name}");
        }
    }

    #[test]
    fn after_a_round_the_next_visit_is_jittered_and_unreachable_retries_sooner() {
        let t = at(0);
        assert_eq!(after_round(HOUR, t, false, None, 0.5), Some(at(3600)));
        assert_eq!(after_round(HOUR, t, true, None, 0.5), Some(at(60)));
        let off = Periodic {
            enabled: false,
            ..HOUR
        };
        assert_eq!(after_round(off, t, false, None, 0.5), None);
        // Repeated failures back off, doubling, up to the interval.
        let mut wait = None;
        let mut waits = vec![];
        for _ in 0..8 {
            let next = after_round(HOUR, t, true, wait, 0.5).unwrap();
            let d = std::time::Duration::from_secs(t.duration_until(next).as_secs() as u64);
            waits.push(d.as_secs());
            wait = Some(d);
        }
        assert_eq!(waits, vec![60, 120, 240, 480, 960, 1920, 3600, 3600]);
        // A success resets the schedule to the interval.
        assert_eq!(after_round(HOUR, t, false, wait, 0.5), Some(at(3600)));
    }

    /// Catalogs created together spread over the interval instead of moving in lockstep: with a
    /// fixed sample of 1,000 uniform draws, every tenth of the interval gets some first visits
    /// and no tenth gets more than twice its share.
    #[test]
    fn first_visits_spread_over_the_whole_interval() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut buckets = [0usize; 10];
        for _ in 0..1000 {
            let d = first_visit(HOUR.interval, rng.random());
            buckets[(d.as_secs_f64() / 360.0).min(9.0) as usize] += 1;
        }
        assert!(buckets.iter().all(|&n| n > 0 && n < 200), "{buckets:?}");
    }

    #[test]
    fn the_ends_of_the_range_are_interval_times_one_plus_or_minus_jitter() {
        let i = Duration::from_secs(100);
        assert_eq!(jittered(i, 0.2, 0.0), Duration::from_secs(80));
        assert_eq!(jittered(i, 0.2, 0.5), Duration::from_secs(100));
        assert_eq!(jittered(i, 0.0, 0.9), Duration::from_secs(100));
    }

    proptest! {
        #[test]
        fn always_within_bounds(secs in 60u64..100_000, jitter in 0.0f64..1.0, u in 0.0f64..1.0) {
            let i = Duration::from_secs(secs);
            let d = jittered(i, jitter, u);
            prop_assert!(d >= i.mul_f64(1.0 - jitter) && d <= i.mul_f64(1.0 + jitter));
        }
    }

    /// No lockstep: 100 catalogs created at the same instant, each drawing its own rests, stay
    /// spread over most of an interval round after round instead of converging.
    #[test]
    fn catalogs_created_together_never_move_in_lockstep() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let start = at(0);
        let mut next: Vec<Timestamp> = (0..100)
            .map(|_| {
                start
                    .checked_add(first_visit(HOUR.interval, rng.random()))
                    .unwrap()
            })
            .collect();
        for round in 0..24 {
            let lo = next.iter().min().unwrap();
            let hi = next.iter().max().unwrap();
            let spread = lo.duration_until(*hi).as_secs_f64();
            assert!(spread >= 0.8 * 3600.0, "round {round}: spread {spread}s");
            for t in next.iter_mut() {
                *t = after_round(HOUR, *t, false, None, rng.random()).unwrap();
            }
        }
    }
}

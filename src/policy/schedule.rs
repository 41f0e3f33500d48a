//! Jittered periods (DESIGN 5.3: "a random rest for each visit"): `interval * (1 ± jitter)`.

use std::time::Duration;

/// `interval * (1 + jitter * (2u - 1))` for `u` uniform in [0, 1): uniform over
/// `[interval * (1 - jitter), interval * (1 + jitter))`.
pub fn jittered(interval: Duration, jitter: f64, u: f64) -> Duration {
    let jitter = jitter.clamp(0.0, 0.999);
    let u = u.clamp(0.0, 1.0);
    interval.mul_f64(1.0 + jitter * (2.0 * u - 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
}

//! How long a watcher waits after a failed watch or list before trying again. kube's default
//! grows to 30 s, so after an API server restart the wait, not the relist, set the recovery time
//! (2 s to 63 s in the relist drill). Here the wait grows from 200 ms to at most 2 s — at most
//! half a request per second per watched kind while the API server is down — and each delay is
//! drawn from its upper half, so replicas do not retry in lockstep.

use std::time::Duration;

use kube::runtime::utils::Backoff;

pub const FIRST: Duration = Duration::from_millis(200);
pub const CAP: Duration = Duration::from_secs(2);

/// Capped exponential backoff with jitter; reset by the stream on any successful event.
pub struct WatchBackoff {
    attempt: u32,
    random: fn() -> f64,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            attempt: 0,
            random: rand::random,
        }
    }
}

/// The delay of retry number `attempt` (0-based) for a uniform draw `u` in [0, 1): from
/// `FIRST * 2^attempt` capped at `CAP`, the upper half of it.
pub fn delay(attempt: u32, u: f64) -> Duration {
    let full = FIRST.saturating_mul(1u32 << attempt.min(16)).min(CAP);
    full.mul_f64(0.5 + 0.5 * u.clamp(0.0, 1.0))
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let d = delay(self.attempt, (self.random)());
        self.attempt = self.attempt.saturating_add(1);
        Some(d)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_from_the_first_to_the_cap_within_their_upper_half() {
        let table: &[(u32, f64, u64)] = &[
            (0, 0.0, 100),
            (0, 1.0, 200),
            (1, 1.0, 400),
            (2, 0.0, 400),
            (3, 1.0, 1600),
            (4, 1.0, 2000),
            (4, 0.0, 1000),
            (40, 1.0, 2000),
            (u32::MAX, 0.5, 1500),
        ];
        for (attempt, u, ms) in table {
            assert_eq!(
                delay(*attempt, *u),
                Duration::from_millis(*ms),
                "{attempt} {u}"
            );
        }
    }

    #[test]
    fn a_reset_starts_over_and_the_wait_never_exceeds_the_cap() {
        let mut b = WatchBackoff {
            attempt: 0,
            random: || 1.0,
        };
        let first: Vec<u64> = b.by_ref().take(6).map(|d| d.as_millis() as u64).collect();
        assert_eq!(first, [200, 400, 800, 1600, 2000, 2000]);
        // After any successful event the next failure waits the shortest time again.
        b.reset();
        assert_eq!(b.next(), Some(FIRST));
    }
}

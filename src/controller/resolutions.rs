//! When each model's sources were last resolved by this process, keyed by the model's uid.
//! Entries of deleted models are dropped on the way: without that, the map kept one entry for
//! every model ever accepted (a leak under churn, seen in a heap profile at 10,000 models).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

/// The map stays at most about twice the number of live models.
const MIN_PRUNE_AT: usize = 1024;

#[derive(Debug)]
pub struct Resolutions {
    at: HashMap<String, Instant>,
    /// Size at which the next insert first drops the uids no longer cached.
    prune_at: usize,
}

impl Default for Resolutions {
    fn default() -> Self {
        Self {
            at: HashMap::new(),
            prune_at: MIN_PRUNE_AT,
        }
    }
}

impl Resolutions {
    /// Records that `uid`'s sources were resolved `now`. When the map has grown to twice its
    /// size after the last pruning, `live_uids` (the uids of the cached models) is asked once and
    /// everything else dropped: a deleted model can never be asked about again.
    pub fn mark(&mut self, uid: &str, now: Instant, live_uids: impl FnOnce() -> HashSet<String>) {
        self.at.insert(uid.to_string(), now);
        if self.at.len() >= self.prune_at {
            let live = live_uids();
            self.at.retain(|k, _| k == uid || live.contains(k));
            self.prune_at = (2 * self.at.len()).max(MIN_PRUNE_AT);
        }
    }

    pub fn get(&self, uid: &str) -> Option<Instant> {
        self.at.get(uid).copied()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.at.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn uid(i: usize) -> String {
        format!("uid-{i}")
    }

    /// Churn: models come and go, 20 live at any time; the map stays bounded by the live count
    /// (or the minimum), every live model keeps its latest time, and a new mark always holds.
    #[test]
    fn deleted_models_are_dropped_and_live_ones_keep_their_time() {
        let mut r = Resolutions::default();
        let t0 = Instant::now();
        let live_window = 20;
        let mut asked = 0;
        for i in 0..10 * MIN_PRUNE_AT {
            let now = t0 + Duration::from_millis(i as u64);
            let live: HashSet<String> = (i.saturating_sub(live_window - 1)..=i).map(uid).collect();
            r.mark(&uid(i), now, || {
                asked += 1;
                live.clone()
            });
            assert_eq!(r.get(&uid(i)), Some(now), "the new mark holds");
            assert!(
                r.len() <= MIN_PRUNE_AT,
                "bounded: {} entries after {i} models",
                r.len()
            );
            for j in live.iter() {
                let k: usize = j["uid-".len()..].parse().unwrap();
                assert_eq!(
                    r.get(j),
                    Some(t0 + Duration::from_millis(k as u64)),
                    "live {j} kept"
                );
            }
        }
        assert!(asked >= 9, "pruned as it grew ({asked} times)");
        assert!(
            asked <= 10,
            "the live set is asked rarely ({asked} times), not per mark"
        );
    }

    /// Without churn nothing is dropped, however many models there are, and the live set is
    /// asked only when the map doubles.
    #[test]
    fn live_models_are_never_dropped() {
        let mut r = Resolutions::default();
        let now = Instant::now();
        let n = 5 * MIN_PRUNE_AT;
        let all: HashSet<String> = (0..n).map(uid).collect();
        let mut asked = 0;
        for i in 0..n {
            r.mark(&uid(i), now, || {
                asked += 1;
                all.clone()
            });
        }
        assert_eq!(r.len(), n);
        assert!((0..n).all(|i| r.get(&uid(i)) == Some(now)));
        assert!(asked <= 3, "asked {asked} times for {n} marks");
    }

    /// The model being marked is kept even if the cache has not shown it yet.
    #[test]
    fn the_marked_model_survives_a_prune_that_does_not_list_it() {
        let mut r = Resolutions::default();
        let now = Instant::now();
        for i in 0..MIN_PRUNE_AT {
            r.mark(&uid(i), now, HashSet::new);
        }
        assert_eq!(r.len(), 1);
        assert_eq!(r.get(&uid(MIN_PRUNE_AT - 1)), Some(now));
    }
}

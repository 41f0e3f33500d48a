//! A watch can go stale without failing: after an API server restart the relist drill saw a
//! SemanticModel watch deliver nothing for about 60 s while every status write made from its
//! cache was refused as a conflict. A conflict alone is routine (the newer version is on its
//! way); the *same* cached version of an object refused again `STALE_AFTER` later means the
//! watch is not delivering. Then the kind's watch is restarted (a fresh list), at most once per
//! `COOLDOWN`, instead of retrying writes from a cache that will not move.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt, stream};
use tokio::sync::Notify;

/// How long one cached version may keep being refused before its watch counts as stale. A live
/// watch delivers the newer version in milliseconds; conflicts retry every 200 ms.
pub const STALE_AFTER: Duration = Duration::from_secs(3);
/// Least time between two restarts of one kind's watch.
pub const COOLDOWN: Duration = Duration::from_secs(30);
/// Most (object, version) pairs remembered; older evidence is dropped first.
const LIMIT: usize = 10_000;

/// Refused writes per cached (uid, resourceVersion), and the last restart (pure: time is given).
#[derive(Default, Debug)]
pub struct Evidence {
    first_refused: HashMap<(String, String), Instant>,
    last_restart: Option<Instant>,
}

impl Evidence {
    /// A write made from the cached `uid` at `resource_version` was refused as a conflict at
    /// `now`. True when the watch should restart now.
    pub fn refused(&mut self, uid: &str, resource_version: &str, now: Instant) -> bool {
        if self.first_refused.len() >= LIMIT {
            // Evidence older than STALE_AFTER twice over says nothing about the watch now.
            self.first_refused
                .retain(|_, t| now.duration_since(*t) < 2 * STALE_AFTER);
            if self.first_refused.len() >= LIMIT {
                self.first_refused.clear();
            }
        }
        let first = *self
            .first_refused
            .entry((uid.to_string(), resource_version.to_string()))
            .or_insert(now);
        let stale = now.duration_since(first) >= STALE_AFTER;
        let cooled = self
            .last_restart
            .is_none_or(|t| now.duration_since(t) >= COOLDOWN);
        if stale && cooled {
            self.last_restart = Some(now);
            // What was refused before the restart says nothing about the new watch.
            self.first_refused.clear();
            return true;
        }
        false
    }
}

/// One kind's evidence and the signal its watcher listens to.
#[derive(Default)]
pub struct StaleCache {
    evidence: Mutex<Evidence>,
    restart: Arc<Notify>,
}

impl StaleCache {
    /// Records a refused write; wakes the watcher when its cache is stale.
    pub fn refused(&self, uid: &str, resource_version: &str) {
        let restart = self
            .evidence
            .lock()
            .expect("stale-cache evidence poisoned")
            .refused(uid, resource_version, Instant::now());
        if restart {
            self.restart.notify_one();
        }
    }

    /// What the kind's watcher waits on.
    pub fn restart_signal(&self) -> Arc<Notify> {
        self.restart.clone()
    }
}

/// The caches of the three watched kinds.
#[derive(Default)]
pub struct StaleCaches {
    pub models: StaleCache,
    pub catalogs: StaleCache,
    pub policies: StaleCache,
}

impl StaleCaches {
    pub fn of_kind(&self, kind: &str) -> Option<&StaleCache> {
        match kind {
            "SemanticModel" => Some(&self.models),
            "Catalog" => Some(&self.catalogs),
            "ReconcilePolicy" => Some(&self.policies),
            _ => None,
        }
    }
}

/// The items of `make()`, started again from a fresh `make()` each time `restart` is notified
/// (a watcher's new stream lists first, so the reflector swaps in a fresh cache). `on_restart`
/// runs at each restart (logging).
pub fn restartable<S>(
    make: impl Fn() -> S + Send + 'static,
    restart: Arc<Notify>,
    on_restart: impl Fn() + Send + 'static,
) -> impl Stream<Item = S::Item> + Send
where
    S: Stream + Send + 'static,
    S::Item: Send,
{
    let current: Pin<Box<S>> = Box::pin(make());
    stream::unfold(
        (current, make, restart, on_restart),
        |(mut current, make, restart, on_restart)| async move {
            loop {
                tokio::select! {
                    item = current.next() => {
                        return item.map(|i| (i, (current, make, restart, on_restart)));
                    }
                    () = restart.notified() => {
                        on_restart();
                        current = Box::pin(make());
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_version_refused_past_the_threshold_restarts_and_then_not_again_soon() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // (uid, resourceVersion, ms since t0, restart?)
        let table: &[(&str, &str, u64, bool)] = &[
            ("a", "1", 0, false),
            ("a", "1", 200, false),
            // A newer version of the same object: the watch delivered it; a fresh clock.
            ("a", "2", 2_900, false),
            ("b", "7", 2_950, false),
            ("a", "1", 2_999, false),
            // The same cached version refused 3 s after its first refusal: stale.
            ("a", "1", 3_000, true),
            // Evidence was cleared by the restart, and the cooldown holds.
            ("b", "7", 3_100, false),
            ("b", "7", 6_200, false),
            ("b", "7", 20_000, false),
            // Past the cooldown, the same version still refused restarts again.
            ("b", "7", 33_000, true),
            ("b", "7", 36_000, false),
        ];
        let mut e = Evidence::default();
        for (i, (uid, rv, ms, want)) in table.iter().enumerate() {
            assert_eq!(
                e.refused(uid, rv, at(*ms)),
                *want,
                "row {i}: {uid}@{rv} at {ms} ms"
            );
        }
    }

    #[test]
    fn evidence_stays_bounded() {
        let t0 = Instant::now();
        let mut e = Evidence::default();
        for i in 0..(3 * LIMIT) {
            e.refused(&format!("u{i}"), "1", t0);
        }
        assert!(e.first_refused.len() <= LIMIT);
    }

    #[tokio::test]
    async fn a_restart_drops_the_current_stream_and_starts_a_fresh_one() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let made = Arc::new(AtomicUsize::new(0));
        let restarts = Arc::new(AtomicUsize::new(0));
        let notify = Arc::new(Notify::new());
        let m = made.clone();
        let r = restarts.clone();
        // Each stream yields its generation once, then stays silent (a stale watch).
        let s = restartable(
            move || {
                let n = m.fetch_add(1, Ordering::SeqCst);
                stream::once(async move { n }).chain(stream::pending())
            },
            notify.clone(),
            move || {
                r.fetch_add(1, Ordering::SeqCst);
            },
        );
        let mut s = Box::pin(s);
        assert_eq!(s.next().await, Some(0));
        let silent = tokio::time::timeout(Duration::from_millis(50), s.next()).await;
        assert!(silent.is_err(), "the first stream is silent");
        notify.notify_one();
        assert_eq!(s.next().await, Some(1));
        notify.notify_one();
        assert_eq!(s.next().await, Some(2));
        assert_eq!(made.load(Ordering::SeqCst), 3);
        assert_eq!(restarts.load(Ordering::SeqCst), 2);
    }
}

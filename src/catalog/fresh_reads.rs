//! Reads of one key shared by concurrent callers without giving any of them an older value: a
//! caller is answered only by a read that began after it asked (or, when it accepts an age, by
//! one that finished within that age). At bring-up thousands of acceptances read the same
//! Secret; each one asking for its own GET made the Secret GET a quarter of the API server's
//! work. Now one GET in flight serves everyone who asked before it began, so a rotated Secret
//! is still seen by every read that starts after the rotation.
//!
//! A fetch may also wait a short gather window before it begins: callers that ask meanwhile are
//! covered by it. Freshness is unchanged (the fetch still begins after each of them asked); only
//! the first caller's wait grows, and a burst of acceptances costs a few GETs instead of most.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct FreshReads<K, V> {
    slots: Mutex<HashMap<K, Arc<Slot<V>>>>,
    /// Keys kept; past it, slots nobody is using are dropped.
    capacity: usize,
    /// How long a fetch waits for more callers before it begins.
    gather: Duration,
}

/// One key: tickets handed to callers, the latest finished read, and the turn to start one.
struct Slot<V> {
    asked: AtomicU64,
    last: Mutex<Option<Finished<V>>>,
    turn: tokio::sync::Mutex<()>,
}

/// A finished read: it began after every ticket up to `covers` was handed out.
struct Finished<V> {
    covers: u64,
    at: Instant,
    value: V,
}

impl<V: Clone> Slot<V> {
    /// The last value, if it answers `ticket`: read after the ticket was taken, or recently
    /// enough for a caller that accepts `max_age`.
    fn answer(&self, ticket: u64, max_age: Option<Duration>) -> Option<V> {
        let last = self.last.lock().expect("fresh-reads slot poisoned");
        last.as_ref()
            .filter(|f| f.covers >= ticket || max_age.is_some_and(|age| f.at.elapsed() < age))
            .map(|f| f.value.clone())
    }
}

impl<K: Hash + Eq + Clone, V: Clone> FreshReads<K, V> {
    pub fn new(capacity: usize) -> Self {
        Self::with_gather(capacity, Duration::ZERO)
    }

    /// Like [`FreshReads::new`], each fetch for a caller that accepts no age waiting `gather`
    /// for more callers before it begins.
    pub fn with_gather(capacity: usize, gather: Duration) -> Self {
        Self {
            slots: Mutex::default(),
            capacity: capacity.max(1),
            gather,
        }
    }

    /// The value of `key` from a `fetch` that began after this call (`max_age: None`), or from
    /// one that finished within `max_age`. At most one fetch per key runs at a time; callers
    /// that asked before it began share its answer. A failed fetch answers only its caller; the
    /// others take their own turn.
    pub async fn read<E, F, Fut>(&self, key: K, max_age: Option<Duration>, fetch: F) -> Result<V, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        let slot = self.slot(key);
        let ticket = slot.asked.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(v) = slot.answer(ticket, max_age) {
            return Ok(v);
        }
        let _turn = slot.turn.lock().await;
        // The read that held the turn may have begun after this ticket.
        if let Some(v) = slot.answer(ticket, max_age) {
            return Ok(v);
        }
        // Only a caller that insists on a fresh value gathers: one that accepts an age (the
        // read API) is answering a request and waits for nothing it does not need.
        if max_age.is_none() && !self.gather.is_zero() {
            tokio::time::sleep(self.gather).await;
        }
        // Every ticket up to here was handed out before the fetch begins.
        let covers = slot.asked.load(Ordering::SeqCst);
        let value = fetch().await?;
        *slot.last.lock().expect("fresh-reads slot poisoned") = Some(Finished {
            covers,
            at: Instant::now(),
            value: value.clone(),
        });
        Ok(value)
    }

    fn slot(&self, key: K) -> Arc<Slot<V>> {
        let mut slots = self.slots.lock().expect("fresh-reads map poisoned");
        if slots.len() >= self.capacity && !slots.contains_key(&key) {
            // Slots in use stay: their callers' tickets must keep meaning the same slot.
            slots.retain(|_, s| Arc::strong_count(s) > 1);
        }
        slots
            .entry(key)
            .or_insert_with(|| {
                Arc::new(Slot {
                    asked: AtomicU64::new(0),
                    last: Mutex::new(None),
                    turn: tokio::sync::Mutex::new(()),
                })
            })
            .clone()
    }

    /// Keys kept now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.lock().expect("fresh-reads map poisoned").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A source whose value is rotated (bumped) from outside; a fetch sees the value at its
    /// start and takes a while, like a GET.
    #[derive(Default)]
    struct Source {
        version: AtomicU64,
        fetches: AtomicUsize,
    }

    impl Source {
        async fn fetch(&self) -> Result<u64, String> {
            let v = self.version.load(Ordering::SeqCst);
            self.fetches.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok(v)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn every_caller_sees_each_rotation_made_before_it_asked_and_fetches_are_shared() {
        for gather in [
            Duration::ZERO,
            Duration::from_millis(2),
            Duration::from_millis(10),
        ] {
            rotations_seen_and_fetches_shared(gather).await;
        }
    }

    async fn rotations_seen_and_fetches_shared(gather: Duration) {
        let reads = Arc::new(FreshReads::<&str, u64>::with_gather(8, gather));
        let source = Arc::new(Source::default());
        let rotator = {
            let source = source.clone();
            tokio::spawn(async move {
                for _ in 0..40 {
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    source.version.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let callers: Vec<_> = (0..400)
            .map(|i| {
                let (reads, source) = (reads.clone(), source.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_micros(300 * (i % 500))).await;
                    let before = source.version.load(Ordering::SeqCst);
                    let got = reads.read("s", None, || source.fetch()).await.unwrap();
                    (before, got)
                })
            })
            .collect();
        for c in callers {
            let (before, got) = c.await.unwrap();
            assert!(
                got >= before,
                "gather {gather:?}: asked at version {before}, answered {got}"
            );
        }
        rotator.await.unwrap();
        let fetches = source.fetches.load(Ordering::SeqCst);
        assert!(
            fetches < 200,
            "gather {gather:?}: 400 callers made {fetches} fetches"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn callers_within_the_gather_window_share_one_fetch() {
        // 20 callers over ~20 ms: without a window each fetch (5 ms) covers a few; with a
        // window far longer than the spread, the first fetch covers them all.
        let reads = Arc::new(FreshReads::<&str, u64>::with_gather(
            8,
            Duration::from_millis(300),
        ));
        let source = Arc::new(Source::default());
        let callers: Vec<_> = (0..20u64)
            .map(|i| {
                let (reads, source) = (reads.clone(), source.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(i)).await;
                    reads.read("s", None, || source.fetch()).await.unwrap()
                })
            })
            .collect();
        for c in callers {
            c.await.unwrap();
        }
        assert_eq!(source.fetches.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_accepted_age_reuses_a_recent_value_and_no_age_never_does() {
        let reads = FreshReads::<&str, u64>::new(8);
        let source = Source::default();
        assert_eq!(reads.read("s", None, || source.fetch()).await, Ok(0));
        source.version.store(1, Ordering::SeqCst);
        let hour = Some(Duration::from_secs(3600));
        assert_eq!(reads.read("s", hour, || source.fetch()).await, Ok(0));
        assert_eq!(reads.read("s", None, || source.fetch()).await, Ok(1));
        assert_eq!(
            reads
                .read("s", Some(Duration::ZERO), || source.fetch())
                .await,
            Ok(1)
        );
        assert_eq!(source.fetches.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_failed_fetch_answers_only_its_caller_and_is_not_kept() {
        let reads = FreshReads::<&str, u64>::new(8);
        let failing = reads.read("s", Some(Duration::from_secs(60)), || async {
            Err::<u64, _>("api server down")
        });
        assert_eq!(failing.await, Err("api server down"));
        let again = reads.read("s", Some(Duration::from_secs(60)), || async {
            Ok::<_, &str>(7)
        });
        assert_eq!(again.await, Ok(7));
    }

    #[tokio::test]
    async fn keys_are_separate_and_the_map_stays_bounded() {
        let reads = FreshReads::<u32, u32>::new(4);
        for k in 0..20 {
            assert_eq!(
                reads.read(k, None, || async { Ok::<_, ()>(k * 10) }).await,
                Ok(k * 10)
            );
            assert!(reads.len() <= 4, "{} keys kept", reads.len());
        }
        let hour = Some(Duration::from_secs(3600));
        assert_eq!(
            reads.read(19, hour, || async { Ok::<_, ()>(0) }).await,
            Ok(190)
        );
    }
}

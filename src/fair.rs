//! Slots shared fairly between tenants: at most `total` held at once across all keys (here,
//! namespaces), and at most `per_key` by any one key, so one namespace whose Catalogs all time
//! out holds a bounded share and never delays another's rounds or probes. A freed slot goes to
//! the waiting key that holds the fewest (oldest waiter first on a tie). No I/O.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

pub struct FairSlots {
    total: usize,
    per_key: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    in_use: usize,
    held: HashMap<String, usize>,
    /// Waiters per key, each with its arrival number.
    /// A waiter is sent `()` once its slot is counted; it then makes its own [`Permit`].
    waiting: HashMap<String, VecDeque<(u64, oneshot::Sender<()>)>>,
    arrivals: u64,
}

/// One held slot; dropping it gives the slot back.
pub struct Permit {
    slots: Arc<FairSlots>,
    key: String,
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit").field("key", &self.key).finish()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.slots.release(&self.key);
    }
}

impl FairSlots {
    /// `total` slots (at least 1), at most `per_key` (at least 1, at most `total`) per key.
    pub fn new(total: usize, per_key: usize) -> Arc<Self> {
        let total = total.max(1);
        Arc::new(Self {
            total,
            per_key: per_key.clamp(1, total),
            state: Mutex::default(),
        })
    }

    /// The share one key may hold when none is configured: half of all slots, at least one.
    pub fn default_share(total: usize) -> usize {
        total.div_ceil(2).max(1)
    }

    pub fn total(&self) -> usize {
        self.total
    }

    pub fn per_key(&self) -> usize {
        self.per_key
    }

    /// Slots held by `key` now.
    pub fn held(&self, key: &str) -> usize {
        let state = self.state.lock().expect("fair slots poisoned");
        state.held.get(key).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fair slots poisoned")
    }

    /// A slot for `key` now, or `None` when all slots or `key`'s share are taken, or other
    /// callers of `key` already wait (they come first).
    pub fn try_acquire(self: &Arc<Self>, key: &str) -> Option<Permit> {
        let mut state = self.lock();
        let queued = state.waiting.get(key).is_some_and(|q| !q.is_empty());
        let held = state.held.get(key).copied().unwrap_or(0);
        if queued || state.in_use >= self.total || held >= self.per_key {
            return None;
        }
        Some(self.grant(&mut state, key))
    }

    /// A slot for `key`, waiting for one when none is free. Cancel-safe: a slot handed to a
    /// waiter that has gone is given back.
    pub async fn acquire(self: &Arc<Self>, key: &str) -> Permit {
        if let Some(p) = self.try_acquire(key) {
            return p;
        }
        let rx = {
            let mut state = self.lock();
            let (tx, rx) = oneshot::channel();
            state.arrivals += 1;
            let n = state.arrivals;
            state
                .waiting
                .entry(key.to_string())
                .or_default()
                .push_back((n, tx));
            // A slot may have come free between the first try and the queueing.
            self.dispatch(&mut state);
            rx
        };
        let mut waiting = Waiting {
            slots: self,
            key,
            rx: Some(rx),
        };
        let rx = waiting.rx.as_mut().expect("set above");
        rx.await
            .expect("a waiter's sender is only dropped after sending");
        waiting.rx = None;
        Permit {
            slots: self.clone(),
            key: key.to_string(),
        }
    }

    fn count(state: &mut State, key: &str) {
        state.in_use += 1;
        *state.held.entry(key.to_string()).or_insert(0) += 1;
    }

    fn uncount(state: &mut State, key: &str) {
        state.in_use -= 1;
        if let Some(n) = state.held.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                state.held.remove(key);
            }
        }
    }

    fn grant(self: &Arc<Self>, state: &mut State, key: &str) -> Permit {
        Self::count(state, key);
        Permit {
            slots: self.clone(),
            key: key.to_string(),
        }
    }

    fn release(self: &Arc<Self>, key: &str) {
        let mut state = self.lock();
        Self::uncount(&mut state, key);
        self.dispatch(&mut state);
    }

    /// Hands free slots to waiters: the key holding the fewest first, then the oldest waiter.
    fn dispatch(self: &Arc<Self>, state: &mut State) {
        while state.in_use < self.total {
            let next = state
                .waiting
                .iter()
                .filter_map(|(key, queue)| {
                    let held = state.held.get(key).copied().unwrap_or(0);
                    let (arrival, _) = queue.front()?;
                    (held < self.per_key).then_some((held, *arrival, key.clone()))
                })
                .min();
            let Some((_, _, key)) = next else { return };
            let queue = state.waiting.get_mut(&key).expect("chosen from the map");
            let (_, tx) = queue.pop_front().expect("chosen for its front");
            if queue.is_empty() {
                state.waiting.remove(&key);
            }
            Self::count(state, &key);
            if tx.send(()).is_err() {
                Self::uncount(state, &key); // the waiter went away
            }
        }
    }
}

/// An `acquire` in progress: when it is dropped after its slot was counted but before it
/// made its permit, the slot is given back.
struct Waiting<'a> {
    slots: &'a Arc<FairSlots>,
    key: &'a str,
    rx: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            rx.close();
            if rx.try_recv().is_ok() {
                self.slots.release(self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn one_key_holds_at_most_its_share_and_others_still_get_slots() {
        let slots = FairSlots::new(4, 2);
        let a1 = slots.try_acquire("a").unwrap();
        let _a2 = slots.try_acquire("a").unwrap();
        assert!(slots.try_acquire("a").is_none(), "a's share is 2");
        let _b1 = slots.try_acquire("b").unwrap();
        let _b2 = slots.try_acquire("b").unwrap();
        assert!(slots.try_acquire("c").is_none(), "all 4 are taken");
        drop(a1);
        assert_eq!(slots.held("a"), 1);
        let _c = slots.try_acquire("c").unwrap();
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_waiting_key_holding_the_fewest() {
        let slots = FairSlots::new(2, 2);
        let a1 = slots.try_acquire("a").unwrap();
        let a2 = slots.try_acquire("a").unwrap();
        // a waits first, then b: b holds none, so b is served first.
        let (s1, s2) = (slots.clone(), slots.clone());
        let a3 = tokio::spawn(async move { s1.acquire("a").await });
        tokio::task::yield_now().await;
        let b = tokio::spawn(async move { s2.acquire("b").await });
        while slots
            .lock()
            .waiting
            .values()
            .map(VecDeque::len)
            .sum::<usize>()
            < 2
        {
            tokio::task::yield_now().await;
        }
        drop(a1);
        let b = b.await.unwrap();
        assert_eq!((slots.held("a"), slots.held("b")), (1, 1));
        assert!(!a3.is_finished());
        drop(a2);
        let _a3 = a3.await.unwrap();
        assert_eq!((slots.held("a"), slots.held("b")), (1, 1));
        drop(b);
    }

    #[tokio::test]
    async fn a_waiter_that_goes_away_loses_nothing() {
        let slots = FairSlots::new(1, 1);
        let held = slots.try_acquire("a").unwrap();
        let s = slots.clone();
        let gone = tokio::spawn(async move { s.acquire("b").await });
        while slots.lock().waiting.is_empty() {
            tokio::task::yield_now().await;
        }
        gone.abort();
        let _ = gone.await;
        drop(held);
        assert!(slots.try_acquire("c").is_some(), "the slot came back");
    }

    proptest! {
        /// Any sequence of takes and gives: never more than `total` held, never more than
        /// `per_key` by one key, and the counts always agree with the permits alive.
        #[test]
        fn bounds_hold_for_any_sequence(
            total in 1usize..5, share in 1usize..5,
            ops in proptest::collection::vec((0usize..3, any::<bool>()), 1..60)
        ) {
            let slots = FairSlots::new(total, share);
            let keys = ["a", "b", "c"];
            let mut alive: Vec<Permit> = vec![];
            for (k, take) in ops {
                if take {
                    if let Some(p) = slots.try_acquire(keys[k]) {
                        alive.push(p);
                    }
                } else if !alive.is_empty() {
                    alive.remove(k % alive.len());
                }
                prop_assert!(alive.len() <= slots.total());
                for key in keys {
                    let n = alive.iter().filter(|p| p.key == key).count();
                    prop_assert!(n <= slots.per_key());
                    prop_assert_eq!(n, slots.held(key));
                }
            }
        }
    }
}

//! Live questions about different sources that wait for the same catalog go out together: each
//! key (a provider) has a lane of asks waiting and at most `max_in_flight` batches running; a
//! batch takes every ask waiting when it starts (up to `max_batch`), so under load one catalog
//! query answers many asks instead of each queueing for a connection of its own. The read API's
//! lookups and the model controller's acceptances each have a coalescer. An answer always comes
//! from a batch that started after the ask was made: nothing is cached.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::oneshot;

/// Sends one batch of targets and answers each, in order.
pub type SendBatch<T, A, E> =
    Arc<dyn Fn(Vec<T>) -> BoxFuture<'static, Result<Vec<A>, E>> + Send + Sync>;

struct Lane<T, A, E> {
    waiting: Vec<(T, oneshot::Sender<Result<A, E>>)>,
    in_flight: usize,
    send: SendBatch<T, A, E>,
}

type Lanes<K, T, A, E> = Arc<Mutex<HashMap<K, Lane<T, A, E>>>>;

/// Most targets in one batch: docs/design.md#scheduling's default probe batch size.
pub const MAX_BATCH: usize = 200;

/// A coalescer with a lane per catalog provider ([`provider_lane`]): as many batches at once per
/// catalog as its pool has connections.
pub fn per_provider<T, A, E>() -> Coalescer<usize, T, A, E>
where
    T: Send + 'static,
    A: Send + 'static,
    E: Clone + Send + 'static,
{
    Coalescer::new(super::registry::MAX_CONNECTIONS, MAX_BATCH)
}

/// A provider's lane: its address. The lane's `send` holds the provider, so the address cannot
/// be reused for another provider while the lane lives.
pub fn provider_lane<P>(provider: &Arc<P>) -> usize {
    Arc::as_ptr(provider) as usize
}

pub struct Coalescer<K, T, A, E> {
    lanes: Lanes<K, T, A, E>,
    max_in_flight: usize,
    max_batch: usize,
}

impl<K, T, A, E> Coalescer<K, T, A, E>
where
    K: Hash + Eq + Clone + Send + 'static,
    T: Send + 'static,
    A: Send + 'static,
    E: Clone + Send + 'static,
{
    pub fn new(max_in_flight: usize, max_batch: usize) -> Self {
        Coalescer {
            lanes: Arc::default(),
            max_in_flight: max_in_flight.max(1),
            max_batch: max_batch.max(1),
        }
    }

    /// The answer for `target`, from a batch sent on `key`'s lane after this call began.
    /// `send` is used when the lane is new (a lane lives while it has asks waiting or batches
    /// running, so it also keeps what `send` holds alive). `lost` answers an ask whose batch
    /// returned too few answers or was dropped.
    pub async fn ask(
        &self,
        key: K,
        target: T,
        send: impl FnOnce() -> SendBatch<T, A, E>,
        lost: E,
    ) -> Result<A, E> {
        let mut answers = self.ask_many(key, vec![target], send, lost.clone()).await;
        answers.pop().unwrap_or(Err(lost))
    }

    /// Like [`Coalescer::ask`] for several targets, in order. They wait in the lane together, so
    /// an idle lane sends them in one batch (up to `max_batch`) rather than one batch each.
    pub async fn ask_many(
        &self,
        key: K,
        targets: Vec<T>,
        send: impl FnOnce() -> SendBatch<T, A, E>,
        lost: E,
    ) -> Vec<Result<A, E>> {
        let (senders, receivers): (Vec<_>, Vec<_>) =
            targets.iter().map(|_| oneshot::channel()).unzip();
        let start_driver = {
            let mut lanes = self.lanes.lock().expect("coalescer lanes poisoned");
            let lane = lanes.entry(key.clone()).or_insert_with(|| Lane {
                waiting: Vec::new(),
                in_flight: 0,
                send: send(),
            });
            lane.waiting.extend(targets.into_iter().zip(senders));
            let start = lane.in_flight < self.max_in_flight;
            if start {
                lane.in_flight += 1;
            }
            start
        };
        if start_driver {
            // A task of its own: an asker that goes away must not take the others' batch with it.
            tokio::spawn(drive(self.lanes.clone(), key, self.max_batch));
        }
        let mut answers = Vec::with_capacity(receivers.len());
        for rx in receivers {
            answers.push(rx.await.unwrap_or_else(|_| Err(lost.clone())));
        }
        answers
    }

    /// Lanes alive now (asks waiting or batches running).
    pub fn lanes(&self) -> usize {
        self.lanes.lock().expect("coalescer lanes poisoned").len()
    }
}

/// Sends batches on `key`'s lane until nothing waits, then gives its slot back (and removes the
/// lane when no other batch runs). Taking and giving back happen under the lock an ask pushes
/// under, so an ask either finds a driver that will see it or starts one.
async fn drive<K: Hash + Eq + Clone, T, A, E: Clone>(
    lanes: Lanes<K, T, A, E>,
    key: K,
    max_batch: usize,
) {
    let mut slot = Slot {
        lanes: lanes.clone(),
        key: Some(key.clone()),
    };
    loop {
        let (batch, send) = {
            let mut map = lanes.lock().expect("coalescer lanes poisoned");
            let Some(lane) = map.get_mut(&key) else {
                return;
            };
            if lane.waiting.is_empty() {
                slot.key = None; // given back here, under the lock
                lane.in_flight -= 1;
                if lane.in_flight == 0 {
                    map.remove(&key);
                }
                return;
            }
            let n = lane.waiting.len().min(max_batch);
            (
                lane.waiting.drain(..n).collect::<Vec<_>>(),
                lane.send.clone(),
            )
        };
        let (targets, askers): (Vec<T>, Vec<_>) = batch.into_iter().unzip();
        match send(targets).await {
            Ok(answers) => {
                // Too few answers leave the rest to `lost` (their senders drop).
                for (tx, answer) in askers.into_iter().zip(answers) {
                    let _ = tx.send(Ok(answer));
                }
            }
            Err(e) => {
                for tx in askers {
                    let _ = tx.send(Err(e.clone()));
                }
            }
        }
    }
}

/// A driver's batch slot. If the driver dies in a batch (a provider panicked), dropping it gives
/// the slot back, and when it was the lane's last, removes the lane: the asks still waiting are
/// answered `lost` instead of waiting for a driver that will never come.
struct Slot<K: Hash + Eq, T, A, E> {
    lanes: Lanes<K, T, A, E>,
    key: Option<K>,
}

impl<K: Hash + Eq, T, A, E> Drop for Slot<K, T, A, E> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else { return };
        let Ok(mut map) = self.lanes.lock() else {
            return;
        };
        if let Some(lane) = map.get_mut(&key) {
            lane.in_flight -= 1;
            if lane.in_flight == 0 {
                map.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::time::Duration;

    /// A fake catalog: answers each target with (target, the batch's start stamp); records how
    /// many batches ran at once and their sizes.
    #[derive(Default)]
    struct Catalog {
        clock: AtomicU64,
        running: AtomicUsize,
        most_running: AtomicUsize,
        batches: Mutex<Vec<usize>>,
        fail_batches_with: Mutex<Option<u32>>,
    }

    fn sender(cat: &Arc<Catalog>) -> SendBatch<u32, (u32, u64), &'static str> {
        let cat = cat.clone();
        Arc::new(move |targets: Vec<u32>| {
            let cat = cat.clone();
            async move {
                let started = cat.clock.fetch_add(1, Ordering::SeqCst);
                let now = cat.running.fetch_add(1, Ordering::SeqCst) + 1;
                cat.most_running.fetch_max(now, Ordering::SeqCst);
                cat.batches.lock().unwrap().push(targets.len());
                tokio::time::sleep(Duration::from_millis(20)).await;
                cat.running.fetch_sub(1, Ordering::SeqCst);
                if let Some(bad) = *cat.fail_batches_with.lock().unwrap()
                    && targets.contains(&bad)
                {
                    return Err("catalog unreachable");
                }
                Ok(targets.into_iter().map(|t| (t, started)).collect())
            }
            .boxed()
        })
    }

    #[tokio::test(start_paused = true)]
    async fn many_asks_share_few_batches_each_answered_by_a_batch_begun_after_it() {
        let cat = Arc::new(Catalog::default());
        let co = Arc::new(Coalescer::new(2, 16));
        let asks: Vec<_> = (0..200u32)
            .map(|t| {
                let (co, cat) = (co.clone(), cat.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(u64::from(t % 40))).await;
                    let asked = cat.clock.fetch_add(1, Ordering::SeqCst);
                    let answer = co.ask("pg", t, || sender(&cat), "lost").await;
                    (t, asked, answer)
                })
            })
            .collect();
        for ask in asks {
            let (t, asked, answer) = ask.await.unwrap();
            let (echoed, started) = answer.expect("answered");
            assert_eq!(echoed, t, "each ask gets its own target's answer");
            assert!(
                started > asked,
                "ask {t} at {asked} answered by a batch begun at {started}"
            );
        }
        let batches = cat.batches.lock().unwrap().clone();
        assert_eq!(batches.iter().sum::<usize>(), 200, "every target sent once");
        assert!(
            batches.iter().all(|&n| n <= 16),
            "batch bound kept: {batches:?}"
        );
        assert!(batches.len() < 100, "asks shared batches: {batches:?}");
        assert!(
            cat.most_running.load(Ordering::SeqCst) <= 2,
            "at most two batches at once"
        );
        assert_eq!(co.lanes(), 0, "an idle lane is removed");
    }

    #[tokio::test]
    async fn targets_asked_together_on_an_idle_lane_go_in_one_batch_in_order() {
        let cat = Arc::new(Catalog::default());
        let co = Coalescer::new(4, 3);
        let answers = co
            .ask_many("pg", vec![5, 6, 7, 8], || sender(&cat), "lost")
            .await;
        let echoed: Vec<u32> = answers.iter().map(|a| a.unwrap().0).collect();
        assert_eq!(echoed, [5, 6, 7, 8], "each target its own answer, in order");
        assert_eq!(
            *cat.batches.lock().unwrap(),
            [3, 1],
            "one batch, split only by the batch bound"
        );
        assert_eq!(co.lanes(), 0);
    }

    #[tokio::test]
    async fn a_failed_batch_fails_only_its_own_asks() {
        let cat = Arc::new(Catalog::default());
        *cat.fail_batches_with.lock().unwrap() = Some(7);
        let co = Coalescer::new(1, 64);
        let first = co.ask("pg", 7, || sender(&cat), "lost").await;
        assert_eq!(first, Err("catalog unreachable"));
        *cat.fail_batches_with.lock().unwrap() = None;
        let second = co.ask("pg", 7, || sender(&cat), "lost").await;
        assert!(second.is_ok(), "a failure is not kept: {second:?}");
    }

    #[tokio::test]
    async fn too_few_answers_are_lost_not_misassigned() {
        let co = Coalescer::<&str, u32, u32, &str>::new(1, 64);
        let short: SendBatch<u32, u32, &str> = Arc::new(|_targets| async { Ok(vec![]) }.boxed());
        assert_eq!(co.ask("pg", 1, || short, "lost").await, Err("lost"));
        assert_eq!(co.lanes(), 0);
    }

    #[tokio::test]
    async fn a_batch_that_panics_loses_its_asks_and_leaves_the_lane_usable() {
        let co = Coalescer::<&str, u32, u32, &str>::new(1, 64);
        let panicky: SendBatch<u32, u32, &str> = Arc::new(|targets: Vec<u32>| {
            async move {
                assert!(!targets.contains(&13), "the provider panicked");
                Ok(targets)
            }
            .boxed()
        });
        let send = || panicky.clone();
        assert_eq!(co.ask("pg", 13, send, "lost").await, Err("lost"));
        let after = tokio::time::timeout(Duration::from_secs(5), co.ask("pg", 7, send, "lost"));
        assert_eq!(
            after.await,
            Ok(Ok(7)),
            "the lane still takes asks after a panic"
        );
        assert_eq!(co.lanes(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_asker_that_goes_away_does_not_stall_the_others() {
        let cat = Arc::new(Catalog::default());
        let co = Arc::new(Coalescer::new(1, 64));
        // The first ask starts the only driver, then is dropped while its batch runs.
        let dropped = {
            let (co, cat) = (co.clone(), cat.clone());
            tokio::spawn(async move { co.ask("pg", 1, || sender(&cat), "lost").await })
        };
        tokio::time::sleep(Duration::from_millis(5)).await;
        let others: Vec<_> = (2..10u32)
            .map(|t| {
                let (co, cat) = (co.clone(), cat.clone());
                tokio::spawn(async move { co.ask("pg", t, || sender(&cat), "lost").await })
            })
            .collect();
        dropped.abort();
        for o in others {
            assert!(o.await.unwrap().is_ok());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(co.lanes(), 0);
    }
}

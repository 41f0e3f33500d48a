//! Concurrent requests for the same key share one piece of work (a live catalog probe): the
//! first starts it, the others wait for its answer, and the next request after it finished
//! starts afresh — answers are never cached, only shared while in flight.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

pub struct SingleFlight<K, V: Clone> {
    in_flight: Mutex<HashMap<K, Shared<BoxFuture<'static, V>>>>,
}

impl<K, V: Clone> Default for SingleFlight<K, V> {
    fn default() -> Self {
        SingleFlight {
            in_flight: Mutex::default(),
        }
    }
}

impl<K: Hash + Eq + Clone, V: Clone + Send + Sync + 'static> SingleFlight<K, V> {
    /// The answer of the work in flight for `key`, or of `work` started now. Work outlives a
    /// caller that goes away while another still waits for it.
    pub async fn run(&self, key: K, work: impl FnOnce() -> BoxFuture<'static, V>) -> V {
        let shared = {
            let mut map = self.in_flight.lock().expect("single-flight map poisoned");
            map.entry(key.clone())
                .or_insert_with(|| work().shared())
                .clone()
        };
        let answer = shared.clone().await;
        let mut map = self.in_flight.lock().expect("single-flight map poisoned");
        // Only this flight's entry: a newer one for the same key may have started meanwhile.
        if map.get(&key).is_some_and(|f| f.ptr_eq(&shared)) {
            map.remove(&key);
        }
        answer
    }

    /// Keys in flight now.
    pub fn len(&self) -> usize {
        self.in_flight
            .lock()
            .expect("single-flight map poisoned")
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn counted(
        runs: &Arc<AtomicUsize>,
        answer: Result<u32, &'static str>,
    ) -> impl FnOnce() -> BoxFuture<'static, Result<u32, &'static str>> {
        let runs = runs.clone();
        move || {
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                answer
            }
            .boxed()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_callers_of_one_key_share_one_run_and_other_keys_run_their_own() {
        let flights = Arc::new(SingleFlight::<&str, Result<u32, &str>>::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for i in 0..64 {
            let (f, r) = (flights.clone(), runs.clone());
            let key = if i % 2 == 0 { "a" } else { "b" };
            tasks.push(tokio::spawn(async move {
                f.run(key, counted(&r, Ok(if key == "a" { 1 } else { 2 })))
                    .await
            }));
        }
        let answers: Vec<_> = futures::future::join_all(tasks).await;
        for (i, a) in answers.into_iter().enumerate() {
            assert_eq!(a.unwrap(), Ok(if i % 2 == 0 { 1 } else { 2 }));
        }
        assert_eq!(runs.load(Ordering::SeqCst), 2, "one run per key");
        assert!(flights.is_empty(), "finished flights are forgotten");
        // Nothing is cached: the next caller runs again, errors included.
        assert_eq!(
            flights.run("a", counted(&runs, Err("down"))).await,
            Err("down")
        );
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_goes_away_does_not_strand_the_others() {
        let flights = Arc::new(SingleFlight::<&str, Result<u32, &str>>::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let first = {
            let (f, r) = (flights.clone(), runs.clone());
            tokio::spawn(async move { f.run("a", counted(&r, Ok(7))).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let second = {
            let (f, r) = (flights.clone(), runs.clone());
            tokio::spawn(async move { f.run("a", counted(&r, Ok(8))).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        first.abort();
        assert_eq!(
            second.await.unwrap(),
            Ok(7),
            "the shared run finished for the waiter"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(flights.is_empty());
    }
}

//! Lease leader election with a hard write deadline (client-go semantics, no extra crate).
//!
//! A replica is leading only while its last successful acquire/renew, measured on the monotonic
//! clock from when the request was *sent*, is younger than `renew_deadline` (< `lease_duration`).
//! Others only take over after observing an unchanged record for `lease_duration`, so a paused or
//! partitioned leader stops writing before anyone else can start.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::watch;

/// Timing of the election.
#[derive(Clone, Debug)]
pub struct LeaseTimings {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaseTimings {
    /// The timings of a lease of `seconds` (at least 3): writes stop 2/3 into the lease
    /// without a renewal, and renewals are tried every 1/7 of it (at least every 500 ms).
    pub fn for_lease(seconds: u64) -> Self {
        let lease = Duration::from_secs(seconds.max(3));
        Self {
            lease_duration: lease,
            renew_deadline: lease * 2 / 3,
            retry_period: (lease / 7).max(Duration::from_millis(500)),
        }
    }
}

/// Cheap, cloneable view of "may I write now?".
#[derive(Clone, Debug)]
pub struct LeaderHandle {
    deadline: watch::Receiver<Option<Instant>>,
}

impl LeaderHandle {
    /// A handle that always leads (single-process tools and tests without election).
    pub fn always() -> Self {
        let (tx, rx) = watch::channel(Some(
            Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600),
        ));
        // Dropping the sender freezes the value: receivers keep reading it, and never change.
        drop(tx);
        Self { deadline: rx }
    }

    /// A handle that never leads (a replica that lost, in tests).
    pub fn never() -> Self {
        let (tx, rx) = watch::channel(None);
        drop(tx);
        Self { deadline: rx }
    }

    /// True only before the current write deadline.
    pub fn is_leading(&self) -> bool {
        self.deadline.borrow().is_some_and(|d| Instant::now() < d)
    }

    /// Resolves each time this replica becomes leader (for `reconcile_all_on`).
    pub fn on_acquired(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        let rx = self.deadline.clone();
        futures::stream::unfold((rx, false), |(mut rx, mut was)| async move {
            loop {
                let now = rx.borrow_and_update().is_some();
                if now && !was {
                    return Some(((), (rx, true)));
                }
                was = now;
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        })
    }
}

/// What to do with the lease record after reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// We hold it: renew.
    Renew,
    /// Nobody holds it, or the holder let it expire: take it.
    Acquire,
    /// Someone else holds a live lease.
    Wait,
}

/// Pure decision from the record and how long it has been unchanged in our eyes.
pub fn decide(
    holder: Option<&str>,
    me: &str,
    unchanged_for: Duration,
    lease_duration: Duration,
) -> Decision {
    match holder {
        Some(h) if h == me => Decision::Renew,
        None | Some("") => Decision::Acquire,
        Some(_) if unchanged_for >= lease_duration => Decision::Acquire,
        Some(_) => Decision::Wait,
    }
}

/// Runs the election loop until `shutdown` resolves, then releases the lease if held.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timings: LeaseTimings,
    tx: watch::Sender<Option<Instant>>,
}

impl Elector {
    pub fn new(
        api: Api<Lease>,
        name: impl Into<String>,
        identity: impl Into<String>,
        timings: LeaseTimings,
    ) -> (Self, LeaderHandle) {
        let (tx, rx) = watch::channel(None);
        (
            Self {
                api,
                name: name.into(),
                identity: identity.into(),
                timings,
                tx,
            },
            LeaderHandle { deadline: rx },
        )
    }

    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        // (record fingerprint, when we first saw it) — expiry is judged on our own clock.
        let mut observed: Option<(String, Instant)> = None;
        loop {
            let attempt_started = Instant::now();
            match self.try_once(&mut observed).await {
                Ok(true) => {
                    let was_leading = self.tx.borrow().is_some();
                    self.tx
                        .send_replace(Some(attempt_started + self.timings.renew_deadline));
                    if !was_leading {
                        tracing::info!(lease = %self.name, identity = %self.identity, "became leader");
                    }
                }
                Ok(false) => self.step_down_if_expired("another replica holds the lease"),
                Err(e) => {
                    tracing::warn!(lease = %self.name, error = %e, "lease update failed");
                    self.step_down_if_expired("renewal deadline passed");
                }
            }
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tokio::time::sleep(self.timings.retry_period) => {}
            }
        }
        self.release().await;
    }

    fn step_down_if_expired(&self, why: &str) {
        let expired = self.tx.borrow().is_some_and(|d| Instant::now() >= d);
        if expired {
            tracing::warn!(lease = %self.name, reason = why, "stopped leading");
            self.tx.send_replace(None);
        }
    }

    /// One read-decide-write round; Ok(true) when we hold the lease afterwards.
    async fn try_once(
        &self,
        observed: &mut Option<(String, Instant)>,
    ) -> Result<bool, kube::Error> {
        let now_wall = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let secs = self.timings.lease_duration.as_secs() as i32;
        let Some(lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(secs),
                    acquire_time: Some(now_wall.clone()),
                    renew_time: Some(now_wall),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let fingerprint = format!("{:?}/{:?}", spec.holder_identity, spec.renew_time);
        let since = match observed {
            Some((f, at)) if *f == fingerprint => *at,
            _ => {
                *observed = Some((fingerprint, Instant::now()));
                Instant::now()
            }
        };
        let holder = spec.holder_identity.as_deref();
        let decision = decide(
            holder,
            &self.identity,
            since.elapsed(),
            self.timings.lease_duration,
        );
        if decision == Decision::Wait {
            return Ok(false);
        }
        let mut next = lease.clone();
        let s = next.spec.get_or_insert_with(Default::default);
        if decision == Decision::Acquire {
            s.acquire_time = Some(now_wall.clone());
            s.lease_transitions = Some(s.lease_transitions.unwrap_or(0) + 1);
        }
        s.holder_identity = Some(self.identity.clone());
        s.lease_duration_seconds = Some(secs);
        s.renew_time = Some(now_wall);
        // `replace` carries the resourceVersion we read: a concurrent winner makes this a 409.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up on shutdown so a standby takes over at its next retry.
    async fn release(&self) {
        if self.tx.borrow().is_none() {
            return;
        }
        self.tx.send_replace(None);
        if let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await
            && let Some(spec) = lease.spec.as_mut()
            && spec.holder_identity.as_deref() == Some(self.identity.as_str())
        {
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            match self
                .api
                .replace(&self.name, &PostParams::default(), &lease)
                .await
            {
                Ok(_) => tracing::info!(lease = %self.name, "released lease"),
                Err(e) => tracing::warn!(lease = %self.name, error = %e, "could not release lease"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    #[test]
    fn the_holder_renews_and_others_wait_until_the_record_is_stale() {
        let cases = [
            (Some("me"), Duration::ZERO, Decision::Renew),
            (Some("me"), Duration::from_secs(60), Decision::Renew),
            (None, Duration::ZERO, Decision::Acquire),
            (Some(""), Duration::ZERO, Decision::Acquire),
            (Some("other"), Duration::from_secs(14), Decision::Wait),
            (Some("other"), LEASE, Decision::Acquire),
        ];
        for (holder, unchanged, want) in cases {
            assert_eq!(
                decide(holder, "me", unchanged, LEASE),
                want,
                "{holder:?} {unchanged:?}"
            );
        }
    }

    #[test]
    fn the_write_deadline_and_a_retry_fit_inside_the_lease_for_every_duration() {
        for secs in [0, 1, 3, 4, 6, 10, 15, 30, 60, 137, 3600] {
            let t = LeaseTimings::for_lease(secs);
            assert!(t.lease_duration >= Duration::from_secs(3), "{secs}: {t:?}");
            assert!(
                t.renew_deadline + t.retry_period < t.lease_duration,
                "{secs}: a frozen leader could still write after another took over: {t:?}"
            );
        }
        assert_eq!(
            LeaseTimings::for_lease(15).renew_deadline,
            Duration::from_secs(10)
        );
    }

    #[tokio::test]
    async fn an_always_leading_handle_leads_and_signals_acquisition_once() {
        use futures::StreamExt;
        let handle = LeaderHandle::always();
        assert!(handle.is_leading());
        let signals: Vec<()> = handle.on_acquired().collect().await;
        assert_eq!(signals.len(), 1);
    }

    #[test]
    fn a_handle_past_its_deadline_does_not_lead_even_before_the_loop_notices() {
        let now = Instant::now();
        let (tx, rx) = watch::channel(Some(now + Duration::from_secs(60)));
        let handle = LeaderHandle { deadline: rx };
        assert!(handle.is_leading());
        // The loop has not cleared the deadline; it simply lies in the past now.
        let past = now.checked_sub(Duration::from_millis(1)).unwrap_or(now);
        tx.send(Some(past)).unwrap();
        assert!(!handle.is_leading());
        tx.send(None).unwrap();
        assert!(!handle.is_leading());
    }
}

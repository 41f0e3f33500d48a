//! Stale reports for the API: one live scan per catalog at a time (single flight), reused for a
//! short while, and at most a few catalogs scanned at once, one namespace at most half of them
//! (a freed scan goes to the waiting namespace scanning the fewest). A flood of `GET stale-entities`
//! therefore costs one dry-run round per catalog per [`FRESH_FOR`], never the controllers' round
//! slots; a reused report says its age (`Age` header).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::fair::FairSlots;
use crate::reconcile::plan::StaleReport;

/// How long a report is served again instead of scanning anew.
pub const FRESH_FOR: Duration = Duration::from_secs(5);
/// Catalogs scanned for the API at once.
pub const SCANS_AT_ONCE: usize = 2;
/// Catalogs remembered; the map is cleared when full (a scan is cheap to redo).
const LIMIT: usize = 10_000;

type Slot = Arc<tokio::sync::Mutex<Option<(Instant, StaleReport)>>>;

pub struct Reports {
    fresh_for: Duration,
    scans: Arc<FairSlots>,
    slots: Mutex<HashMap<String, Slot>>,
}

impl Default for Reports {
    fn default() -> Self {
        Reports::new(FRESH_FOR, SCANS_AT_ONCE)
    }
}

impl Reports {
    pub fn new(fresh_for: Duration, scans_at_once: usize) -> Self {
        Reports {
            fresh_for,
            scans: FairSlots::new(scans_at_once, FairSlots::default_share(scans_at_once)),
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn slot(&self, key: &str) -> Slot {
        let mut slots = self.slots.lock().expect("reports poisoned");
        if slots.len() >= LIMIT && !slots.contains_key(key) {
            slots.clear();
        }
        slots.entry(key.to_string()).or_default().clone()
    }

    /// The report of catalog `key` (namespace/name/uid): a fresh one if there is one, else the
    /// one `scan` produces (only one scan per key at a time; waiters get its answer). Returns
    /// the report and its age.
    pub async fn get<E, F, Fut>(&self, key: &str, scan: F) -> Result<(StaleReport, Duration), E>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<StaleReport, E>>,
    {
        let slot = self.slot(key);
        let mut held = slot.lock().await;
        if let Some((at, report)) = held.as_ref() {
            let age = at.elapsed();
            if age < self.fresh_for {
                return Ok((report.clone(), age));
            }
        }
        let namespace = key.split('/').next().unwrap_or_default();
        let _scan = self.scans.acquire(namespace).await;
        let report = scan().await?;
        *held = Some((Instant::now(), report.clone()));
        Ok((report, Duration::ZERO))
    }

    /// Drops the report of `key` (a recorded round just changed what it would say).
    pub fn forget(&self, key: &str) {
        self.slots.lock().expect("reports poisoned").remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn report(n: usize) -> StaleReport {
        StaleReport {
            catalog: format!("c{n}"),
            catalog_unreachable: false,
            stale_schemas: vec![],
            stale_entities: vec![],
        }
    }

    #[tokio::test]
    async fn concurrent_requests_share_one_scan_and_reuse_it_while_fresh() {
        let scans = Arc::new(AtomicUsize::new(0));
        let ask = |reports: Arc<Reports>, scans: Arc<AtomicUsize>| async move {
            reports
                .get::<(), _, _>("ns/hr/uid", || async {
                    let n = scans.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok(report(n))
                })
                .await
                .unwrap()
        };
        // Fresh for an hour: everything after the first scan is served from it.
        let reports = Arc::new(Reports::new(Duration::from_secs(3600), 2));
        let answers =
            futures::future::join_all((0..50).map(|_| ask(reports.clone(), scans.clone()))).await;
        assert_eq!(scans.load(Ordering::SeqCst), 1, "one scan for 50 requests");
        assert!(answers.iter().all(|(r, _)| r.catalog == "c0"));
        assert!(
            answers.iter().any(|(_, age)| *age > Duration::ZERO),
            "the waiters say its age"
        );
        reports.forget("ns/hr/uid");
        let (r, age) = ask(reports.clone(), scans.clone()).await;
        assert_eq!(
            (r.catalog.as_str(), age),
            ("c1", Duration::ZERO),
            "forgotten: scanned again"
        );
        // Never fresh: every request after a finished scan scans again (one at a time).
        let reports = Arc::new(Reports::new(Duration::ZERO, 2));
        ask(reports.clone(), scans.clone()).await;
        let (r, _) = ask(reports.clone(), scans.clone()).await;
        assert_eq!(r.catalog, "c3", "stale: scanned again");
    }

    #[tokio::test]
    async fn a_failed_scan_is_not_remembered_and_scans_are_bounded_across_catalogs() {
        let reports = Arc::new(Reports::new(Duration::from_secs(15), 2));
        let failed = reports
            .get::<&str, _, _>("k", || async { Err("unreachable") })
            .await;
        assert_eq!(failed.unwrap_err(), "unreachable");
        let (r, _) = reports
            .get::<(), _, _>("k", || async { Ok(report(7)) })
            .await
            .unwrap();
        assert_eq!(r.catalog, "c7");

        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        futures::future::join_all((0..8).map(|i| {
            let (reports, running, most) = (reports.clone(), running.clone(), most.clone());
            async move {
                reports
                    .get::<(), _, _>(&format!("cat-{i}"), || async {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        running.fetch_sub(1, Ordering::SeqCst);
                        Ok(report(i))
                    })
                    .await
                    .unwrap()
            }
        }))
        .await;
        assert_eq!(
            most.load(Ordering::SeqCst),
            2,
            "at most 2 catalogs scanned at once"
        );
    }
}

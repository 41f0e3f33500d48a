//! Prometheus metrics (controller-runtime names so existing dashboards work) and log setup.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub mod requests;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    pub controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub controller: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub controller: String,
    pub category: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CatalogLabels {
    pub namespace: String,
    pub catalog: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RoundLabels {
    pub namespace: String,
    pub catalog: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub namespace: String,
    pub catalog: String,
    pub state: String,
}

/// Metrics of the stale-registration checks (docs/design.md#operating-it).
pub struct CheckMetrics {
    /// Rounds per catalog and result (Completed, CatalogUnreachable, Skipped).
    pub rounds: Family<RoundLabels, Counter>,
    /// Declared registrations per catalog and state, as of the last recorded round.
    pub registrations: Family<StateLabels, Gauge>,
    /// Registrations removed by AutoRemove.
    pub removed: Family<CatalogLabels, Counter>,
    /// Renames detected (transitions).
    pub renamed: Family<CatalogLabels, Counter>,
    /// Latency of each probe request (a batch by name, or one lookup by id).
    pub probe_latency: Histogram,
    /// Probe requests sent (batches and id lookups).
    pub probes: Counter<u64, AtomicU64>,
    /// Rounds running now (bounded by `--max-concurrent-rounds`).
    pub rounds_in_flight: Gauge<i64, std::sync::atomic::AtomicI64>,
    /// Rounds, source visits and connection checks put off because their namespace's share
    /// of slots (or every slot) was taken.
    pub deferred: Counter<u64, AtomicU64>,
}

impl CheckMetrics {
    fn register(registry: &mut Registry) -> Self {
        let m = Self {
            rounds: Family::default(),
            registrations: Family::default(),
            removed: Family::default(),
            renamed: Family::default(),
            probe_latency: Histogram::new(exponential_buckets(0.0002, 2.0, 16)),
            probes: Counter::default(),
            rounds_in_flight: Gauge::default(),
            deferred: Counter::default(),
        };
        registry.register(
            "semops_check_rounds",
            "Stale-registration check rounds per catalog and result",
            m.rounds.clone(),
        );
        registry.register(
            "semops_registrations",
            "Declared registrations per catalog and state",
            m.registrations.clone(),
        );
        registry.register(
            "semops_registrations_removed",
            "Registrations removed by AutoRemove",
            m.removed.clone(),
        );
        registry.register(
            "semops_registrations_renamed",
            "Registered objects detected as renamed",
            m.renamed.clone(),
        );
        registry.register(
            "semops_probe_duration_seconds",
            "Latency of catalog probe requests",
            m.probe_latency.clone(),
        );
        registry.register(
            "semops_probes",
            "Catalog probe requests sent",
            m.probes.clone(),
        );
        registry.register(
            "semops_check_rounds_in_flight",
            "Check rounds running now",
            m.rounds_in_flight.clone(),
        );
        registry.register(
            "semops_checks_deferred",
            "Rounds, source visits and connection checks put off because their namespace's share of slots was taken",
            m.deferred.clone(),
        );
        m
    }
}

/// Labels of a read-API request: its route template and the status code answered.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteCodeLabels {
    pub route: String,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: String,
    pub commit: String,
    pub rustc: String,
    pub target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IndexLabels {
    pub index: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

/// The read API's metrics (docs/design.md#operating-it: requests and latency per route and code, index sizes).
pub struct ApiMetrics {
    pub requests: Family<RouteCodeLabels, Counter>,
    pub latency: Family<RouteLabels, Histogram>,
    /// Lineage projections admitted and not finished.
    pub lineage_in_flight: Gauge<i64, std::sync::atomic::AtomicI64>,
    /// Entries of the read-API indexes (`source`: bound datasets, `home`: models by schema).
    pub index_entries: Family<IndexLabels, Gauge>,
    /// Live catalog probes sent for lookups, lineage and impact (concurrent ones share one).
    pub source_probes: Counter<u64, AtomicU64>,
    /// Catalog queries those probes went out in (probes waiting for one catalog share one).
    pub source_probe_batches: Counter<u64, AtomicU64>,
}

impl ApiMetrics {
    fn register(registry: &mut Registry) -> Self {
        let m = Self {
            requests: Family::default(),
            latency: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0001, 2.0, 18))
            }),
            lineage_in_flight: Gauge::default(),
            index_entries: Family::default(),
            source_probes: Counter::default(),
            source_probe_batches: Counter::default(),
        };
        registry.register(
            "semops_api_requests",
            "Read-API requests per route and status code",
            m.requests.clone(),
        );
        registry.register(
            "semops_api_request_duration_seconds",
            "Read-API request latency per route",
            m.latency.clone(),
        );
        registry.register(
            "semops_lineage_in_flight",
            "Lineage projections admitted and not finished",
            m.lineage_in_flight.clone(),
        );
        registry.register(
            "semops_index_entries",
            "Entries of the read-API indexes",
            m.index_entries.clone(),
        );
        registry.register(
            "semops_api_source_probes",
            "Live catalog probes sent by the read API (concurrent lookups of one source share one)",
            m.source_probes.clone(),
        );
        registry.register(
            "semops_api_source_probe_batches",
            "Catalog queries the read API's live probes went out in (probes waiting for one catalog go together)",
            m.source_probe_batches.clone(),
        );
        m
    }

    /// Counts one answered request.
    pub fn observe(&self, route: &str, code: u16, elapsed: Duration) {
        self.requests
            .get_or_create(&RouteCodeLabels {
                route: route.into(),
                code: code.to_string(),
            })
            .inc();
        self.latency
            .get_or_create(&RouteLabels {
                route: route.into(),
            })
            .observe(elapsed.as_secs_f64());
    }
}

/// All metrics of one operator process.
pub struct Metrics {
    pub registry: Registry,
    pub reconcile_total: Family<ResultLabels, Counter>,
    pub reconcile_errors: Family<ControllerLabel, Counter>,
    pub reconcile_time: Family<ControllerLabel, Histogram>,
    pub status_writes: Family<ControllerLabel, Counter>,
    pub errors_by_category: Family<ErrorLabels, Counter>,
    pub is_leader: Gauge<i64, std::sync::atomic::AtomicI64>,
    pub events_published: Counter<u64, AtomicU64>,
    /// Watches restarted because writes made from their cache kept being refused as stale.
    pub watch_restarts: Family<KindLabel, Counter>,
    pub checks: CheckMetrics,
    pub api: ApiMetrics,
    /// Layered into the kube clients: every request they send, by method, resource and code.
    pub requests: requests::CountRequests,
    /// Live heap bytes and the bytes the allocator holds in RAM for them, read at each scrape
    /// when the binary installed a reader (`set_heap_reader`); RSS minus these is code and stacks.
    heap_allocated: Gauge,
    heap_resident: Gauge,
}

/// What the global allocator reports: bytes live in allocations, bytes of RAM it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapStats {
    pub allocated: u64,
    pub resident: u64,
}

static HEAP_READER: std::sync::OnceLock<fn() -> Option<HeapStats>> = std::sync::OnceLock::new();

/// Installs the reader of the global allocator's statistics (the binary owns the allocator; the
/// library does not link one). A second call is ignored.
pub fn set_heap_reader(read: fn() -> Option<HeapStats>) {
    let _ = HEAP_READER.set(read);
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let reconcile_total = Family::<ResultLabels, Counter>::default();
        let reconcile_errors = Family::<ControllerLabel, Counter>::default();
        let reconcile_time = Family::<ControllerLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        let status_writes = Family::<ControllerLabel, Counter>::default();
        let errors_by_category = Family::<ErrorLabels, Counter>::default();
        let is_leader = Gauge::default();
        let events_published = Counter::default();
        // controller-runtime's exact names: the registry adds `_total` to counters.
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            reconcile_time.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "1 while this replica leads, else 0",
            is_leader.clone(),
        );
        registry.register(
            "semops_status_writes",
            "Status writes sent to the API server per controller",
            status_writes.clone(),
        );
        registry.register(
            "semops_reconcile_errors_by_category",
            "Reconcile errors per controller and error category",
            errors_by_category.clone(),
        );
        registry.register(
            "semops_events_published",
            "Kubernetes Events published",
            events_published.clone(),
        );
        let watch_restarts = Family::<KindLabel, Counter>::default();
        registry.register(
            "semops_watch_restarts",
            "Watches restarted because writes made from their cache kept being refused as stale",
            watch_restarts.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        let b = crate::build_info::BUILD;
        build_info
            .get_or_create(&BuildLabels {
                version: b.version.into(),
                commit: b.commit.into(),
                rustc: b.rustc.into(),
                target: b.target.into(),
            })
            .set(1);
        registry.register(
            "semops_build_info",
            "Always 1; the labels say which build this is",
            build_info,
        );
        let checks = CheckMetrics::register(&mut registry);
        let api = ApiMetrics::register(&mut registry);
        let requests = requests::CountRequests::default();
        // client-go's name, so the API server dashboards people already have read it.
        registry.register(
            "rest_client_requests",
            "Requests sent to the Kubernetes API server, by method, resource and status code",
            requests.family.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Latency of requests to the Kubernetes API server until the answer's headers, by method and resource",
            requests.latency.clone(),
        );
        let heap_allocated = Gauge::default();
        let heap_resident = Gauge::default();
        if HEAP_READER.get().is_some() {
            registry.register(
                "semops_heap_allocated_bytes",
                "Bytes live in heap allocations (read from the allocator at each scrape)",
                heap_allocated.clone(),
            );
            registry.register(
                "semops_heap_resident_bytes",
                "Bytes of RAM the allocator holds: live allocations, its metadata and pages not yet returned",
                heap_resident.clone(),
            );
        }
        Self {
            heap_allocated,
            heap_resident,
            checks,
            api,
            requests,
            registry,
            reconcile_total,
            reconcile_errors,
            reconcile_time,
            status_writes,
            errors_by_category,
            is_leader,
            events_published,
            watch_restarts,
        }
    }
}

impl Metrics {
    pub fn observe_reconcile(&self, controller: &str, elapsed: Duration, result: &str) {
        self.reconcile_total
            .get_or_create(&ResultLabels {
                controller: controller.into(),
                result: result.into(),
            })
            .inc();
        self.reconcile_time
            .get_or_create(&ControllerLabel {
                controller: controller.into(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Starts a controller's error series at 0 (as controller-runtime does), and those of the
    /// categories alerts watch, so `rate()` and `increase()` see the first error too.
    pub fn declare_controller(&self, controller: &str, alerted_categories: &[&str]) {
        drop(self.reconcile_errors.get_or_create(&ControllerLabel {
            controller: controller.into(),
        }));
        for category in alerted_categories {
            drop(self.errors_by_category.get_or_create(&ErrorLabels {
                controller: controller.into(),
                category: (*category).into(),
            }));
        }
    }

    pub fn observe_error(&self, controller: &str, category: &str) {
        self.reconcile_errors
            .get_or_create(&ControllerLabel {
                controller: controller.into(),
            })
            .inc();
        self.errors_by_category
            .get_or_create(&ErrorLabels {
                controller: controller.into(),
                category: category.into(),
            })
            .inc();
    }

    pub fn observe_status_write(&self, controller: &str) {
        self.status_writes
            .get_or_create(&ControllerLabel {
                controller: controller.into(),
            })
            .inc();
    }

    pub fn encode(&self) -> String {
        if let Some(stats) = HEAP_READER.get().and_then(|read| read()) {
            self.heap_allocated
                .set(i64::try_from(stats.allocated).unwrap_or(i64::MAX));
            self.heap_resident
                .set(i64::try_from(stats.resident).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// Log format of `semops run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Installs the tracing subscriber; `RUST_LOG` overrides the default level.
pub fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,kube_runtime=warn,kube_client=warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_gauges_are_read_from_the_installed_reader_at_each_scrape() {
        use std::sync::atomic::{AtomicU64, Ordering};
        static CALLS: AtomicU64 = AtomicU64::new(0);
        set_heap_reader(|| {
            let n = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
            Some(HeapStats {
                allocated: 1000 * n,
                resident: 3000 * n,
            })
        });
        let m = Metrics::default();
        // Other tests may scrape meanwhile (the reader is process-wide): compare, don't count.
        let read = |text: &str, name: &str| -> u64 {
            let line = text
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("{name} missing: {text}"));
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        let first = m.encode();
        let second = m.encode();
        let (a1, r1) = (
            read(&first, "semops_heap_allocated_bytes "),
            read(&first, "semops_heap_resident_bytes "),
        );
        assert_eq!(r1, 3 * a1, "both gauges come from one reading: {first}");
        assert!(a1 >= 1000, "{first}");
        assert!(
            read(&second, "semops_heap_allocated_bytes ") > a1,
            "read again at each scrape: {second}"
        );
    }

    #[test]
    fn metric_names_match_controller_runtime() {
        let m = Metrics::default();
        m.observe_reconcile("semanticmodel", Duration::from_millis(3), "success");
        m.observe_error("semanticmodel", "Kube");
        m.observe_status_write("semanticmodel");
        m.declare_controller("catalog", &["NotOwned"]);
        let text = m.encode();
        for name in [
            "controller_runtime_reconcile_errors_total{controller=\"catalog\"} 0",
            "semops_reconcile_errors_by_category_total{controller=\"catalog\",category=\"NotOwned\"} 0",
            "controller_runtime_reconcile_total{controller=\"semanticmodel\",result=\"success\"} 1",
            "controller_runtime_reconcile_errors_total{controller=\"semanticmodel\"} 1",
            "controller_runtime_reconcile_time_seconds_bucket",
            "semops_status_writes_total{controller=\"semanticmodel\"} 1",
            "semops_build_info{version=\"",
        ] {
            assert!(text.contains(name), "missing {name} in\n{text}");
        }
    }
}

//! `semops run`: flags → [`RunConfig`], then the operator until SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::crd::policy::PolicyMode;
use crate::leader::LeaseTimings;
use crate::policy::OperatorDefaults;
use crate::run::{RunConfig, cancel_on_signals, run};
use crate::telemetry::{LogFormat, Metrics, init_logging};

/// How the read API authenticates and authorizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ApiAuth {
    /// Bearer tokens (TokenReview) and RBAC (SubjectAccessReview).
    Kubernetes,
    /// No checks: local use only.
    None,
}

/// Operator-wide default check mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    #[value(name = "ReportOnly")]
    ReportOnly,
    #[value(name = "AutoRemove")]
    AutoRemove,
}

impl From<Mode> for PolicyMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::ReportOnly => PolicyMode::ReportOnly,
            Mode::AutoRemove => PolicyMode::AutoRemove,
        }
    }
}

#[derive(clap::Args)]
pub struct RunArgs {
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, env = "SEMOPS_PROBE_ADDR", default_value = "0.0.0.0:8080")]
    probe_addr: SocketAddr,
    /// Elect a leader through a Lease; only the leader writes.
    #[arg(long, env = "SEMOPS_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// Namespace of the Lease (defaults to the pod's namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "semops-system")]
    lease_namespace: String,
    #[arg(long, default_value = "semops-leader")]
    lease_name: String,
    /// Identity in the Lease (defaults to the pod name, else host name and process id).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Lease duration in seconds (renew deadline is 2/3 of it).
    #[arg(long, default_value_t = 15)]
    lease_duration_seconds: u64,
    /// Operator-wide default for periodic stale-registration checks.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    default_checks_enabled: bool,
    /// Operator-wide default mode.
    #[arg(long, value_enum, default_value = "ReportOnly")]
    default_mode: Mode,
    /// Operator-wide default interval (Go duration, at least 1m).
    #[arg(long, default_value = "1h", value_parser = parse_interval)]
    default_interval: String,
    /// Reconciles in flight per controller.
    #[arg(long, default_value_t = 16)]
    concurrency: u16,
    #[arg(long, value_enum, env = "SEMOPS_LOG_FORMAT", default_value = "text")]
    log_format: LogFormat,
    /// How often a Catalog whose periodic checks are off still probes the sources its models
    /// are bound to, for drift (Go duration, jittered ±20%). With checks on, every round does.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    drift_interval: Duration,
    /// Check rounds running at once across all Catalogs.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    max_concurrent_rounds: u16,
    /// Of those, and of connection checks (twice as many), the most one namespace may hold:
    /// a namespace whose Catalogs all time out cannot delay another's. Default: half.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    max_rounds_per_namespace: Option<u16>,
    /// Address of the read API (Gravitino REST paths).
    #[arg(long, env = "SEMOPS_API_ADDR", default_value = "0.0.0.0:8090")]
    api_addr: SocketAddr,
    /// kubernetes: bearer tokens (TokenReview) and RBAC (SubjectAccessReview); none: no checks,
    /// for local use only.
    #[arg(long, value_enum, default_value = "kubernetes")]
    api_auth: ApiAuth,
    /// ControllerRevisions kept per SemanticModel.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(i64).range(1..))]
    revision_history_limit: i64,
    /// Watch only this namespace (all namespaces by default).
    #[arg(long, env = "SEMOPS_WATCH_NAMESPACE")]
    watch_namespace: Option<String>,
    /// Lineage: most nodes in one graph (413 beyond).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    lineage_max_nodes: u32,
    /// Lineage: most edges in one graph, counted before duplicates merge (413 beyond).
    #[arg(long, default_value_t = 50_000, value_parser = clap::value_parser!(u32).range(1..))]
    lineage_max_edges: u32,
    /// Lineage: most UTF-8 bytes of one label (413 beyond).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    lineage_max_label_bytes: u32,
    /// Lineage: most bytes of one response body (413 beyond).
    #[arg(long, default_value_t = 8 * 1024 * 1024, value_parser = clap::value_parser!(u32).range(1..))]
    lineage_max_response_bytes: u32,
    /// Lineage: projections at once; the next request gets 503 LINEAGE_BUSY at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    lineage_concurrency: u16,
    /// Lineage: deadline of one request (503 past it).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    lineage_deadline: Duration,
    /// Where Catalog connections may go: CIDRs, addresses, host names or `*.suffix` patterns,
    /// each optionally with `:port`, comma-separated. Empty: anywhere but loopback, link-local
    /// (cloud metadata) and kubelet ports, which only an address entry allows. A Catalog
    /// pointing elsewhere is Reachable=False HostNotAllowed and is never connected to.
    #[arg(long, env = "SEMOPS_ALLOWED_CATALOG_HOSTS", value_delimiter = ',', value_parser = parse_allowed_host)]
    allowed_catalog_hosts: Vec<String>,
    /// The read API's TLS certificate chain (PEM), re-read when it changes. With the key, the
    /// API is HTTPS and accepts the API server's front proxy (aggregated API); without, plain
    /// HTTP (local use).
    #[arg(long, env = "SEMOPS_API_TLS_CERT_FILE", requires = "api_tls_key_file")]
    api_tls_cert_file: Option<std::path::PathBuf>,
    /// The read API's TLS private key (PEM).
    #[arg(long, env = "SEMOPS_API_TLS_KEY_FILE", requires = "api_tls_cert_file")]
    api_tls_key_file: Option<std::path::PathBuf>,
    /// With TLS and `--api-auth kubernetes`: trust the API server's front proxy (the aggregated
    /// API), reading its CA and header names from kube-system/extension-apiserver-authentication;
    /// the replica is ready only once it has read them. false: no connection may name a user in
    /// headers and that ConfigMap is never read (the chart's `api.aggregated: false`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    api_front_proxy: bool,
    /// Audiences a bearer token on the direct port must be issued for (`kubectl create token
    /// NAME --audience semops`); comma-separated. Empty: the API server's own (not advised: a
    /// token sent here could be replayed against the API server).
    #[arg(long, value_delimiter = ',', default_value = "semops")]
    api_token_audiences: Vec<String>,
    /// Read API: open connections at most (more are closed at once).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    api_max_connections: u32,
    /// Read API: open connections from one address at most (more from it are closed at once);
    /// the API server's front-proxy connections do not count once their certificate verified.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..))]
    api_max_connections_per_peer: u32,
    /// Read API: a connection with no request in flight for this long is closed (HTTP/1.1
    /// keep-alive and HTTP/2 alike).
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    api_idle_timeout: Duration,
    /// Read API: requests handled at once (more get 503 OVERLOADED with Retry-After).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    api_max_in_flight: u32,
    /// Read API: longest a request may take (503 TIMED_OUT past it).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    api_request_timeout: Duration,
    /// Read API: longest a client may take for its TLS handshake, its first bytes (before the
    /// protocol is known) and its request headers.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    api_header_read_timeout: Duration,
    /// Read API: how long a stale report (`GET stale-schemas|stale-entities`) is served again
    /// before a new scan of the catalog (with its `Age`); 0s scans for every request. Concurrent
    /// requests for one catalog always share one scan.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    api_report_reuse: Duration,
    /// kubernetes: /metrics needs a token allowed `get` on the non-resource URL /metrics
    /// (TokenReview + SubjectAccessReview); none: open (local use).
    #[arg(long, value_enum, default_value = "none")]
    metrics_auth: ApiAuth,
}

fn parse_allowed_host(s: &str) -> Result<String, String> {
    crate::catalog::egress::HostAllowList::parse(&[s.to_string()])?;
    Ok(s.to_string())
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::policy::duration::parse(s).map_err(|e| e.to_string())
}

fn parse_interval(s: &str) -> Result<String, String> {
    if parse_duration(s)?.as_secs() < 60 {
        return Err("must be at least 1m".into());
    }
    Ok(s.to_string())
}

impl RunArgs {
    fn config(self, identity: String) -> RunConfig {
        RunConfig {
            probe_addr: self.probe_addr,
            leader_election: self.leader_elect,
            lease_namespace: self.lease_namespace,
            lease_name: self.lease_name,
            identity,
            lease_timings: LeaseTimings::for_lease(self.lease_duration_seconds),
            defaults: OperatorDefaults {
                enabled: self.default_checks_enabled,
                mode: self.default_mode.into(),
                interval: self.default_interval,
            },
            concurrency: self.concurrency,
            watch_namespace: self.watch_namespace,
            drift_interval: self.drift_interval,
            max_concurrent_rounds: self.max_concurrent_rounds as usize,
            max_rounds_per_namespace: self.max_rounds_per_namespace.map(usize::from),
            revision_history_limit: self.revision_history_limit,
            api_addr: self.api_addr,
            api_auth: self.api_auth == ApiAuth::Kubernetes,
            api_front_proxy: self.api_front_proxy,
            api_tls: self.api_tls_cert_file.zip(self.api_tls_key_file),
            api_token_audiences: self
                .api_token_audiences
                .into_iter()
                .filter(|a| !a.is_empty())
                .collect(),
            api_limits: crate::api::listen::Limits {
                max_connections: self.api_max_connections as usize,
                max_connections_per_peer: self.api_max_connections_per_peer as usize,
                idle_timeout: self.api_idle_timeout,
                max_in_flight: self.api_max_in_flight as usize,
                request_timeout: self.api_request_timeout,
                header_read_timeout: self.api_header_read_timeout,
            },
            metrics_auth: self.metrics_auth == ApiAuth::Kubernetes,
            api_report_reuse: self.api_report_reuse,
            lineage: crate::api::lineage::LineageSettings {
                limits: crate::lineage::Limits {
                    max_nodes: self.lineage_max_nodes as usize,
                    max_edges: self.lineage_max_edges as usize,
                    max_label_bytes: self.lineage_max_label_bytes as usize,
                    max_response_bytes: self.lineage_max_response_bytes as usize,
                },
                concurrency: self.lineage_concurrency as usize,
                deadline: self.lineage_deadline,
            },
            allowed_catalog_hosts: crate::catalog::egress::HostAllowList::parse(
                &self.allowed_catalog_hosts,
            )
            .expect("each entry was parsed by clap"),
        }
    }
}

pub fn main(args: RunArgs) -> ExitCode {
    match run_operator(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_operator(args: RunArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "semops".into());
        format!("{host}-{}", std::process::id())
    });
    let cfg = args.config(identity);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(async move {
        let config = kube::Config::infer()
            .await
            .context("connecting to Kubernetes (KUBECONFIG or in-cluster config)")?;
        let metrics = Arc::new(Metrics::default());
        let client = counted_client(config.clone(), &metrics)?;
        // Reviews for the read API and /metrics get their own connections: a flood of them
        // never queues behind (or in front of) Lease renewals.
        let review_client = counted_client(config, &metrics)?;
        let token = CancellationToken::new();
        cancel_on_signals(token.clone());
        run(client, review_client, metrics, cfg, token)
            .await
            .context("serving probes")
    });
    // Blocking tasks (a lineage projection, a DNS lookup) get a moment, never a say in exiting.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}

/// A kube client whose every request is counted in `rest_client_requests_total`.
fn counted_client(config: kube::Config, metrics: &Metrics) -> anyhow::Result<kube::Client> {
    let builder = kube::client::ClientBuilder::try_from(config).context("building the client")?;
    Ok(builder.with_layer(&metrics.requests).build())
}

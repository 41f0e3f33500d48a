//! The `semops` binary: operator, CRD generator and offline validator.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use serde::Deserialize as _;
use tokio_util::sync::CancellationToken;

use semops::crd::policy::PolicyMode;
use semops::leader::LeaseTimings;
use semops::policy::OperatorDefaults;
use semops::run::{RunConfig, cancel_on_signals, run};
use semops::telemetry::{LogFormat, init_logging};

#[derive(Parser)]
#[command(
    name = "semops",
    version,
    about = "Governs semantic-layer metadata on Kubernetes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controllers and the probe/metrics server.
    Run(RunArgs),
    /// Print the CustomResourceDefinitions (or write one file per kind with --output-dir).
    Crd {
        #[arg(long)]
        output_dir: Option<PathBuf>,
    },
    /// Which semantic-model datasets use a table or view (read API).
    Lookup {
        /// table or view.
        object_type: String,
        /// catalog.schema.name, backtick-quoted segments for dots.
        full_name: String,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Metrics of the models in a schema (read API).
    Metrics {
        catalog: String,
        schema: String,
        /// Include each metric's definition.
        #[arg(long)]
        details: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Models in a schema, or one model's accepted definition (read API).
    Models {
        catalog: String,
        schema: String,
        /// One model's name.
        name: Option<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Lineage graph of a model (`lineage model CATALOG SCHEMA NAME`) or of a table or view
    /// (`lineage table|view CATALOG.SCHEMA.NAME`); `-o dot|mermaid` draws it.
    Lineage {
        /// model, table or view.
        #[arg(value_parser = ["model", "table", "view"])]
        root: String,
        /// model: CATALOG SCHEMA NAME; table or view: CATALOG.SCHEMA.NAME.
        #[arg(required = true, num_args = 1..=3)]
        names: Vec<String>,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Stale registrations of a catalog: a live report-only scan, or with --reconcile a round
    /// now under the catalog's policy (needs create on catalogs/reconcile; --dry-run changes
    /// nothing).
    Stale {
        catalog: String,
        /// Run a recorded round now (AutoRemove policies remove).
        #[arg(long)]
        reconcile: bool,
        /// With --reconcile: report only.
        #[arg(long, requires = "reconcile")]
        dry_run: bool,
        #[command(flatten)]
        api: ApiArgs,
    },
    /// Convert between Apache Ossie YAML and SemanticModel resources.
    #[command(subcommand)]
    Ossie(OssieCommand),
    /// Print the read API's OpenAPI document.
    Openapi,
    /// Check manifests offline (contract and model-local rules); exit code 1 on any problem.
    Validate {
        /// Files or directories of YAML manifests.
        #[arg(short = 'f', long = "filename", required = true)]
        paths: Vec<PathBuf>,
    },
}

#[derive(clap::Args)]
struct ApiArgs {
    /// Namespace (the Gravitino metalake).
    #[arg(short = 'n', long, env = "SEMOPS_NAMESPACE", default_value = "default")]
    namespace: String,
    /// Base URL of the semops read API (e.g. after `kubectl port-forward svc/semops 8090`).
    #[arg(long, env = "SEMOPS_API", default_value = "http://127.0.0.1:8090")]
    server: String,
    /// Bearer token; defaults to the current kubeconfig user's token, if it has one.
    #[arg(long, env = "SEMOPS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[arg(short = 'o', long, value_enum, default_value = "table")]
    output: semops::cli::query::Output,
}

#[derive(Subcommand)]
enum OssieCommand {
    /// Ossie YAML (semantic_model[]) -> SemanticModel manifests on stdout, one per model.
    Import {
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        /// Home Catalog of the imported models.
        #[arg(long)]
        catalog: String,
        /// Home schema of the imported models.
        #[arg(long)]
        schema: String,
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// SemanticModel manifests (file or directory) -> one Ossie YAML document on stdout.
    Export {
        #[arg(short = 'f', long = "filename")]
        path: PathBuf,
    },
}

#[derive(clap::Args)]
struct RunArgs {
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
    #[arg(long, default_value = "ReportOnly", value_parser = parse_mode)]
    default_mode: PolicyMode,
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
    drift_interval: std::time::Duration,
    /// Check rounds running at once across all Catalogs.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    max_concurrent_rounds: u16,
    /// Address of the read API (Gravitino REST paths).
    #[arg(long, env = "SEMOPS_API_ADDR", default_value = "0.0.0.0:8090")]
    api_addr: SocketAddr,
    /// kubernetes: bearer tokens (TokenReview) and RBAC (SubjectAccessReview); none: no checks,
    /// for local use only.
    #[arg(long, default_value = "kubernetes", value_parser = ["kubernetes", "none"])]
    api_auth: String,
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
    lineage_deadline: std::time::Duration,
}

fn parse_mode(s: &str) -> Result<PolicyMode, String> {
    match s {
        "ReportOnly" => Ok(PolicyMode::ReportOnly),
        "AutoRemove" => Ok(PolicyMode::AutoRemove),
        _ => Err("expected ReportOnly or AutoRemove".into()),
    }
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    semops::policy::duration::parse(s).map_err(|e| e.to_string())
}

fn parse_interval(s: &str) -> Result<String, String> {
    let d = semops::policy::duration::parse(s).map_err(|e| e.to_string())?;
    if d.as_secs() < 60 {
        return Err("must be at least 1m".into());
    }
    Ok(s.to_string())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd { output_dir: None } => {
            print!("{}", semops::cli::crd::render_all());
            ExitCode::SUCCESS
        }
        Command::Crd {
            output_dir: Some(dir),
        } => match semops::cli::crd::write_dir(&dir) {
            Ok(files) => {
                files.iter().for_each(|f| eprintln!("wrote {f}"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: cannot write CRDs into {}: {e}", dir.display());
                ExitCode::from(2)
            }
        },
        Command::Validate { paths } => validate(&paths),
        Command::Openapi => {
            print!("{}", semops::api::openapi::document_text());
            ExitCode::SUCCESS
        }
        Command::Lookup {
            object_type,
            full_name,
            api,
        } => {
            let path = format!(
                "/api/metalakes/{}/objects/{}/{}/semantic-model-datasets",
                enc(&api.namespace),
                enc(&object_type),
                enc(&full_name)
            );
            query(&api, &path)
        }
        Command::Metrics {
            catalog,
            schema,
            details,
            api,
        } => {
            let path = format!(
                "/api/metalakes/{}/catalogs/{}/schemas/{}/semantic-model-metrics?details={details}",
                enc(&api.namespace),
                enc(&catalog),
                enc(&schema)
            );
            query(&api, &path)
        }
        Command::Models {
            catalog,
            schema,
            name,
            api,
        } => {
            let mut path = format!(
                "/api/metalakes/{}/catalogs/{}/schemas/{}/semantic-models",
                enc(&api.namespace),
                enc(&catalog),
                enc(&schema)
            );
            if let Some(n) = name {
                path.push_str(&format!("/{}", enc(&n)));
            }
            query(&api, &path)
        }
        Command::Lineage { root, names, api } => {
            let ns = enc(&api.namespace);
            let path = match (root.as_str(), names.as_slice()) {
                ("model", [c, s, n]) => format!(
                    "/api/metalakes/{ns}/catalogs/{}/schemas/{}/semantic-models/{}/lineage",
                    enc(c),
                    enc(s),
                    enc(n)
                ),
                ("table" | "view", [full]) => {
                    format!("/api/metalakes/{ns}/objects/{root}/{}/lineage", enc(full))
                }
                _ => {
                    eprintln!(
                        "error: use `semops lineage model CATALOG SCHEMA NAME` or `semops lineage table|view CATALOG.SCHEMA.NAME`"
                    );
                    return ExitCode::from(2);
                }
            };
            query(&api, &path)
        }
        Command::Stale {
            catalog,
            reconcile,
            dry_run,
            api,
        } => {
            let base = format!(
                "/api/metalakes/{}/catalogs/{}",
                enc(&api.namespace),
                enc(&catalog)
            );
            if reconcile {
                let body = serde_json::json!({ "dryRun": dry_run });
                send(&api, "POST", &format!("{base}/reconcile"), Some(&body))
            } else {
                query(&api, &format!("{base}/stale-entities"))
            }
        }
        Command::Ossie(cmd) => match ossie(cmd) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        },
        Command::Run(args) => match run_operator(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

fn enc(s: &str) -> String {
    semops::cli::query::encode_segment(s)
}

/// Runs one read-API query; exit code 1 when the API answers with an error.
fn query(api: &ApiArgs, path: &str) -> ExitCode {
    send(api, "GET", path, None)
}

fn send(api: &ApiArgs, method: &str, path: &str, body: Option<&serde_json::Value>) -> ExitCode {
    let token = api
        .token
        .clone()
        .or_else(semops::cli::query::kubeconfig_token);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(semops::cli::query::request(
        &api.server,
        method,
        path,
        token.as_deref(),
        body,
    )) {
        Ok((200, body)) => {
            print!("{}", semops::cli::query::render(&body, api.output));
            ExitCode::SUCCESS
        }
        Ok((status, body)) => {
            let message = body
                .get("message")
                .and_then(|m| m.as_str())
                .unwrap_or("unexpected answer");
            let type_ = body.get("type").and_then(|m| m.as_str()).unwrap_or("");
            eprintln!("error: {status} {type_}: {message}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn validate(paths: &[PathBuf]) -> ExitCode {
    use semops::cli::validate::{check, collect_files, parse_file};
    let mut findings = Vec::new();
    let mut docs = Vec::new();
    for path in paths {
        let files = match collect_files(path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("error: cannot read {}: {e}", path.display());
                return ExitCode::from(2);
            }
        };
        for file in files {
            match std::fs::read_to_string(&file) {
                Ok(text) => docs.extend(parse_file(&file, &text, &mut findings)),
                Err(e) => {
                    eprintln!("error: cannot read {}: {e}", file.display());
                    return ExitCode::from(2);
                }
            }
        }
    }
    findings.extend(check(&docs));
    for f in &findings {
        println!("{f}");
    }
    eprintln!(
        "{} semops object(s) checked, {} problem(s)",
        docs.len(),
        findings.len()
    );
    if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn ossie(cmd: OssieCommand) -> anyhow::Result<()> {
    use semops::ossie::interchange::{ImportTarget, export, import};
    match cmd {
        OssieCommand::Import {
            file,
            catalog,
            schema,
            namespace,
        } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let doc: serde_json::Value = serde_yaml::from_str(&text)
                .with_context(|| format!("{} is not YAML", file.display()))?;
            let models = import(
                &doc,
                &ImportTarget {
                    namespace,
                    catalog,
                    schema,
                },
            )
            .with_context(|| format!("importing {}", file.display()))?;
            for m in &models {
                print!("---\n{}", serde_yaml::to_string(m)?);
            }
            eprintln!("imported {} model(s) from {}", models.len(), file.display());
        }
        OssieCommand::Export { path } => {
            let mut models = Vec::new();
            for file in semops::cli::validate::collect_files(&path)? {
                let text = std::fs::read_to_string(&file)?;
                for doc in serde_yaml::Deserializer::from_str(&text) {
                    let value = serde_json::Value::deserialize(doc)?;
                    if value.get("kind").and_then(|k| k.as_str()) == Some("SemanticModel") {
                        let m: semops::crd::SemanticModel = serde_json::from_value(value)
                            .with_context(|| format!("a SemanticModel in {}", file.display()))?;
                        models.push(m);
                    }
                }
            }
            print!("{}", serde_yaml::to_string(&export(&models))?);
            eprintln!("exported {} model(s)", models.len());
        }
    }
    Ok(())
}

fn run_operator(args: RunArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "semops".into());
        format!("{host}-{}", std::process::id())
    });
    let lease = std::time::Duration::from_secs(args.lease_duration_seconds.max(3));
    let cfg = RunConfig {
        probe_addr: args.probe_addr,
        leader_election: args.leader_elect,
        lease_namespace: args.lease_namespace,
        lease_name: args.lease_name,
        identity,
        lease_timings: LeaseTimings {
            lease_duration: lease,
            renew_deadline: lease * 2 / 3,
            retry_period: (lease / 7).max(std::time::Duration::from_millis(500)),
        },
        defaults: OperatorDefaults {
            enabled: args.default_checks_enabled,
            mode: args.default_mode,
            interval: args.default_interval,
        },
        concurrency: args.concurrency,
        watch_namespace: args.watch_namespace,
        drift_interval: args.drift_interval,
        max_concurrent_rounds: args.max_concurrent_rounds as usize,
        revision_history_limit: args.revision_history_limit,
        api_addr: args.api_addr,
        api_auth: args.api_auth == "kubernetes",
        lineage: semops::api::lineage::LineageSettings {
            limits: semops::lineage::Limits {
                max_nodes: args.lineage_max_nodes as usize,
                max_edges: args.lineage_max_edges as usize,
                max_label_bytes: args.lineage_max_label_bytes as usize,
                max_response_bytes: args.lineage_max_response_bytes as usize,
            },
            concurrency: args.lineage_concurrency as usize,
            deadline: args.lineage_deadline,
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let client = kube::Client::try_default()
            .await
            .context("connecting to Kubernetes (KUBECONFIG or in-cluster config)")?;
        let token = CancellationToken::new();
        cancel_on_signals(token.clone());
        run(client, cfg, token).await.context("serving probes")
    })
}

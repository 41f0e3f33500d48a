//! The `semops` command line: the clap tree and one module per group of verbs. `main.rs` only
//! calls [`main`]. Exit codes: 0 success, 1 the answer is a failure (problems found, an API
//! error), 2 the command could not run (bad arguments, unreadable files, unreachable API).

pub mod complete;
pub mod crd;
pub mod diff;
pub mod finalizers;
pub mod healthcheck;
pub mod mcp;
pub mod ossie;
pub mod query;
pub mod reference;
pub mod run;
pub mod sql;
pub mod ui;
pub mod validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "semops",
    version,
    long_version = crate::build_info::LONG_VERSION,
    about = "Governs semantic-layer metadata on Kubernetes"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controllers, the read API and the probe/metrics server.
    Run(Box<run::RunArgs>),
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
        api: query::ApiArgs,
    },
    /// Metrics of the models in a schema (read API).
    Metrics {
        catalog: String,
        schema: String,
        /// Include each metric's definition.
        #[arg(long)]
        details: bool,
        #[command(flatten)]
        api: query::ApiArgs,
    },
    /// Models of the namespace (or of one catalog, or schema), or one model's accepted
    /// definition (read API).
    Models {
        catalog: Option<String>,
        schema: Option<String>,
        /// One model's name.
        name: Option<String>,
        #[command(flatten)]
        api: query::ApiArgs,
    },
    /// One metric by its stable id, also after a rename retired it: its model, name, state and
    /// definition in each kept revision (read API).
    Metric {
        id: String,
        #[command(flatten)]
        api: query::ApiArgs,
    },
    /// A model's kept revisions (read API `.../versions`): when each was accepted, its
    /// definition hash, and the metric ids it added (+), retired (-) and renamed (~).
    History {
        catalog: String,
        schema: String,
        name: String,
        #[command(flatten)]
        api: query::ApiArgs,
    },
    /// Lineage graph of a model (`lineage model CATALOG SCHEMA NAME`) or of a table or view
    /// (`lineage table|view CATALOG.SCHEMA.NAME`); `-o dot|mermaid` draws it.
    Lineage {
        /// model, table or view.
        #[arg(value_enum)]
        root: query::LineageRoot,
        /// model: CATALOG SCHEMA NAME; table or view: CATALOG.SCHEMA.NAME.
        #[arg(required = true, num_args = 1..=3)]
        names: Vec<String>,
        #[command(flatten)]
        api: query::ApiArgs,
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
        api: query::ApiArgs,
    },
    /// What would break if columns of a table or view (or the whole object) went away: the
    /// models, datasets, keys, relationships, fields and metrics that use them (read API). Exit
    /// code 3 when something would break: a migration's CI step can stop on it.
    Impact {
        /// table or view.
        #[arg(value_enum)]
        object_type: crate::client::SourceType,
        /// catalog.schema.name, backtick-quoted segments for dots.
        full_name: String,
        /// Comma-separated column names; without it, the whole object.
        #[arg(long, value_delimiter = ',')]
        columns: Vec<String>,
        #[command(flatten)]
        api: query::ApiArgs,
    },
    /// Compile a metric question to SQL for the model's catalog (read API): metrics, dimensions
    /// with an optional time grain, filters, order, limit. SQL on stdout (`-o json` adds its
    /// parameters, metric ids and revision); `--execute` runs it with your own connection.
    Sql(Box<sql::SqlArgs>),
    /// Serve MCP (Model Context Protocol) on stdio for AI agents: read-only tools over the read
    /// API as the kubeconfig's user (docs/mcp.md).
    Mcp {
        #[command(flatten)]
        api: query::ApiArgs,
    },
    /// A local, read-only web console: models, metric ids, history, the lineage picture, impact,
    /// stale reports and search, through the read API as the kubeconfig's user (docs/ui.md).
    Ui(Box<ui::UiArgs>),
    /// Convert between Apache Ossie YAML and SemanticModel resources.
    #[command(subcommand)]
    Ossie(ossie::OssieCommand),
    /// Print the read API's OpenAPI document.
    Openapi,
    /// Remove semops's finalizers from every Catalog (run when semops is uninstalled: with no
    /// operator, nothing else would release them).
    ReleaseFinalizers(finalizers::ReleaseArgs),
    /// Ask a probe endpoint (e.g. /readyz) until it answers 200; exit 1 when it never does.
    Healthcheck(healthcheck::HealthcheckArgs),
    /// Print the version, git commit, build date, compiler and target (`-o json` for tools).
    Version {
        #[arg(short = 'o', long, value_enum, default_value = "text")]
        output: VersionFormat,
    },
    /// Print generated reference documentation: `conditions` (docs/conditions.md) or
    /// `chart-values FILE` (the chart README from its values.yaml).
    #[command(hide = true)]
    Reference {
        #[arg(value_parser = ["conditions", "chart-values"])]
        what: String,
        /// values.yaml, for chart-values.
        file: Option<PathBuf>,
    },
    /// Print a shell completion script: `source <(semops completion bash)`; zsh and fish too.
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Completions in cobra's `__complete` protocol, for kubectl's plugin completion
    /// (`kubectl_complete-semops` runs `kubectl-semops __complete WORDS...`).
    #[command(name = "__complete", hide = true)]
    Complete {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// What applying SemanticModel files would do: metric ids kept, minted, retired, renamed and
    /// deprecated, expression, dataset, field and relationship changes, each with a verdict
    /// (safe, risky, breaking). Against the cluster's accepted revisions (read API), or
    /// `--base FILE` / `--base-ref GIT-REVISION` without a cluster. `-o markdown` for a
    /// pull-request comment. Exit 3 when something breaks, 1 on error.
    Diff(Box<diff::DiffArgs>),
    /// Check manifests offline (contract and model-local rules); exit code 1 on any problem.
    Validate {
        /// Files or directories of YAML manifests.
        #[arg(short = 'f', long = "filename", required = true)]
        paths: Vec<PathBuf>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum VersionFormat {
    Text,
    Json,
}

/// Parses the command line and runs the verb.
pub fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => run::main(*args),
        Command::Crd { output_dir: None } => {
            print!("{}", crd::render_all());
            ExitCode::SUCCESS
        }
        Command::Crd {
            output_dir: Some(dir),
        } => match crd::write_dir(&dir) {
            Ok(files) => {
                files.iter().for_each(|f| eprintln!("wrote {f}"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: cannot write CRDs into {}: {e}", dir.display());
                ExitCode::from(2)
            }
        },
        Command::Validate { paths } => validate::main(&paths),
        Command::Diff(args) => diff::main(*args),
        Command::Ui(args) => ui::main(*args),
        Command::Completion { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "semops", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Complete { words } => {
            use clap::CommandFactory;
            for line in complete::lines(&Cli::command(), &words) {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Command::Healthcheck(args) => healthcheck::main(args),
        Command::ReleaseFinalizers(args) => finalizers::main(args),
        Command::Version { output } => {
            let build = crate::build_info::BUILD;
            match output {
                VersionFormat::Text => print!("{}", build.text()),
                VersionFormat::Json => println!(
                    "{}",
                    serde_json::to_string(&build).expect("build facts serialize")
                ),
            }
            ExitCode::SUCCESS
        }
        Command::Openapi => {
            print!("{}", crate::api::openapi::document_text());
            ExitCode::SUCCESS
        }
        Command::Reference { what, file } => match (what.as_str(), file) {
            ("conditions", _) => {
                print!("{}", crate::crd::conditions::reference());
                ExitCode::SUCCESS
            }
            (_, Some(file)) => {
                let text = match std::fs::read_to_string(&file) {
                    Ok(t) => t,
                    Err(e) => {
                        eprintln!("error: cannot read {}: {e}", file.display());
                        return ExitCode::from(2);
                    }
                };
                match reference::chart_readme(&text, env!("CARGO_PKG_VERSION")) {
                    Ok(doc) => {
                        print!("{doc}");
                        ExitCode::SUCCESS
                    }
                    Err(e) => {
                        eprintln!("error: {}: {e}", file.display());
                        ExitCode::FAILURE
                    }
                }
            }
            _ => {
                eprintln!("error: chart-values needs the values.yaml file");
                ExitCode::from(2)
            }
        },
        Command::Ossie(cmd) => ossie::main(cmd),
        Command::Impact {
            object_type,
            full_name,
            columns,
            api,
        } => query::main(
            &api,
            crate::client::Query::Impact {
                object_type: object_type.as_str().into(),
                full_name,
                columns,
            },
        ),
        Command::Lookup {
            object_type,
            full_name,
            api,
        } => query::main(
            &api,
            crate::client::Query::Lookup {
                object_type,
                full_name,
            },
        ),
        Command::Metrics {
            catalog,
            schema,
            details,
            api,
        } => query::main(
            &api,
            crate::client::Query::Metrics {
                catalog,
                schema,
                details,
            },
        ),
        Command::Models {
            catalog,
            schema,
            name,
            api,
        } => query::main(
            &api,
            match (catalog, schema, name) {
                (Some(catalog), Some(schema), name) => crate::client::Query::Models {
                    catalog,
                    schema,
                    name,
                },
                (catalog, schema, _) => crate::client::Query::NamespaceModels { catalog, schema },
            },
        ),
        Command::Metric { id, api } => query::main(&api, crate::client::Query::Metric { id }),
        Command::Mcp { api } => mcp::main(&api),
        Command::Sql(args) => sql::main(*args),
        Command::History {
            catalog,
            schema,
            name,
            api,
        } => query::main(
            &api,
            crate::client::Query::History {
                catalog,
                schema,
                name,
            },
        ),
        Command::Lineage { root, names, api } => match query::lineage(root, names) {
            Ok(q) => query::main(&api, q),
            Err(usage) => {
                eprintln!("error: {usage}");
                ExitCode::from(2)
            }
        },
        Command::Stale {
            catalog,
            reconcile,
            dry_run,
            api,
        } => query::main(
            &api,
            if reconcile {
                crate::client::Query::Reconcile { catalog, dry_run }
            } else {
                crate::client::Query::Stale { catalog }
            },
        ),
    }
}

//! `semops ossie import|export`: Apache Ossie YAML <-> SemanticModel manifests, lossless.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;

use crate::ossie::interchange::{ImportTarget, export, import};

#[derive(Subcommand)]
pub enum OssieCommand {
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
        /// Catalog of dataset sources written without one (`schema.object` or `object`).
        #[arg(long)]
        source_catalog: Option<String>,
        /// Schema of dataset sources written as a bare `object`.
        #[arg(long)]
        source_schema: Option<String>,
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
    /// SemanticModel manifests (file or directory) -> one Ossie YAML document on stdout.
    Export {
        #[arg(short = 'f', long = "filename")]
        path: PathBuf,
    },
}

pub fn main(cmd: OssieCommand) -> ExitCode {
    match run(cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cmd: OssieCommand) -> anyhow::Result<()> {
    match cmd {
        OssieCommand::Import {
            file,
            catalog,
            schema,
            source_catalog,
            source_schema,
            namespace,
        } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            let doc: serde_json::Value = serde_saphyr::from_str(&text)
                .with_context(|| format!("{} is not YAML", file.display()))?;
            let models = import(
                &doc,
                &ImportTarget {
                    namespace,
                    catalog,
                    schema,
                    source_catalog,
                    source_schema,
                },
            )
            .with_context(|| format!("importing {}", file.display()))?;
            for m in &models {
                print!("---\n{}", serde_saphyr::to_string(m)?);
            }
            eprintln!("imported {} model(s) from {}", models.len(), file.display());
        }
        OssieCommand::Export { path } => {
            let mut models = Vec::new();
            for file in super::validate::collect_files(&path)? {
                let text = std::fs::read_to_string(&file)?;
                for (line, doc) in super::validate::split_documents(&text) {
                    let value: serde_json::Value = serde_saphyr::from_str(&doc)
                        .with_context(|| format!("{}:{line}: not valid YAML", file.display()))?;
                    if value.get("kind").and_then(|k| k.as_str()) == Some("SemanticModel") {
                        let m: crate::crd::SemanticModel = serde_json::from_value(value)
                            .with_context(|| format!("a SemanticModel in {}", file.display()))?;
                        models.push(m);
                    }
                }
            }
            print!("{}", serde_saphyr::to_string(&export(&models))?);
            eprintln!("exported {} model(s)", models.len());
        }
    }
    Ok(())
}
